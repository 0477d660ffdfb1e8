// The narrow phase inside the step, for scenes whose colliders are all primitives, over
// the candidate pairs the broad phase found earlier in the same submission
// (broad_phase.wgsl), in two passes: `narrow_carry` (one invocation per pair) carries each
// coherent manifold (contact_persistence.wgsl) and appends the other pairs to a worklist;
// `narrow_collide` finds those pairs' points again, over the worklist only (an indirect
// dispatch sized by `narrow_work_args`). A settled scene carries most pairs, and the
// separating-axis and clipping code, with the registers it holds, runs on the few that
// need it, side by side. Then each manifold's points become warm-started contact records
// (`warm_record`, contact_warm.wgsl) the way pipeline::collision::write_pair_points and
// pipeline::warm_start do on the CPU. Nothing per contact crosses the bus, and a pair's
// result does not depend on where the worklist put it.
//
// Pair i owns records 4i..4i + 4; the slots past its point count, and every slot of the
// pairs past the broad phase's total (params.n_pairs is the list's capacity), are empty
// (both bodies WORLD), so the adjacency, the dual update and the store skip them. A point continued
// from the last step reads what the record it continues carried (`prev`), and the pair's
// state remembers this step's record of each point for the next step.

@group(0) @binding(23) var<storage, read> shapes: array<BodyShape>;
@group(0) @binding(24) var<storage, read> step_pairs: array<StepPair>;
@group(0) @binding(25) var<storage, read> old_pairs: array<PairContact>;
@group(0) @binding(26) var<storage, read_write> new_pairs: array<PairContact>;
// Each pair's point count, one byte per pair (read back: which pairs touch).
@group(0) @binding(27) var<storage, read_write> pair_counts: array<atomic<u32>>;
// [0]: the deepest penetration (bits of a float ≥ 0, which order as the floats do);
// [1]: the points found; [2]: the pairs with points. Cleared before the step.
@group(0) @binding(28) var<storage, read_write> narrow_status: array<atomic<u32>>;
// The broad phase's first pair of each body; [n_bodies]: the pairs it found.
@group(0) @binding(29) var<storage, read> pair_start: array<u32>;

// [0]: the pairs in the worklist (cleared before the step); [4 + w]: its w-th pair.
@group(0) @binding(30) var<storage, read_write> narrow_work: array<atomic<u32>>;
// The worklist's dispatch arguments, written by `narrow_work_args`: a buffer of its own,
// since a dispatch may not read its arguments from a buffer its bind groups can write.
@group(1) @binding(1) var<storage, read_write> narrow_args: array<u32>;

const WORK_AT: u32 = 4u;

// The pose of body `i`'s collider (pipeline::collision::shape_pose).
fn collider_pose(i: u32) -> Pose {
    let pose = poses[i];
    return Pose(vec4<f32>(pose.p.xyz + qrot(pose.q, shapes[i].offset.xyz), 0.0), pose.q);
}

fn empty_records(i: u32) {
    for (var k = 0u; k < MANIFOLD_POINTS; k++) {
        store_empty(MANIFOLD_POINTS * i + k);
    }
}

// The status of a workgroup's pairs, summed in workgroup memory and added to
// `narrow_status` once per workgroup (`flush_status`): a global atomic per pair, on three
// words that every pair of the step hits, would serialise. Max and sums of integers, so the
// total does not depend on the order.
var<workgroup> group_status: array<atomic<u32>, 3>;

fn clear_status(lid: u32) {
    if (lid < 3u) {
        atomicStore(&group_status[lid], 0u);
    }
}

// After a barrier: the workgroup's status into the step's.
fn flush_status(lid: u32) {
    if (lid == 0u) {
        let deepest = atomicLoad(&group_status[0]);
        let points = atomicLoad(&group_status[1]);
        if (points > 0u) {
            atomicMax(&narrow_status[0], deepest);
            atomicAdd(&narrow_status[1], points);
            atomicAdd(&narrow_status[2], atomicLoad(&group_status[2]));
        }
    }
}

// Pair i's manifold `next` (carried or found) into its record slots and its state.
fn write_pair(i: u32, sp: StepPair, ra: Pose, rb: Pose, manifold: PairContact) {
    var next = manifold;
    let m = next.manifold;
    let n = m.normal.xyz;
    let t = tangent_of(n);
    let bt = cross(n, t);
    let alpha = params.alpha;
    let pa = poses[sp.a].p.xyz;
    let pb = poses[sp.b].p.xyz;
    var deepest = 0.0;
    for (var k = 0u; k < MANIFOLD_POINTS; k++) {
        let ci = MANIFOLD_POINTS * i + k;
        if (k >= m.count) {
            store_empty(ci);
            continue;
        }
        let wa = ra.p.xyz + qrot(ra.q, m.points[k].local_a.xyz);
        let wb = rb.p.xyz + qrot(rb.q, m.points[k].local_b.xyz);
        let dist = m.points[k].local_a.w;
        deepest = max(deepest, -dist);
        let gap = wb - wa;
        var p: ContactPoint;
        p.body_a = sp.a;
        p.body_b = sp.b;
        p.prev = next.prev[k];
        p.c0_n = select(dist, (1.0 - alpha) * dist, dist < 0.0);
        p.normal = vec4<f32>(n, (1.0 - alpha) * dot(t, gap));
        p.arm_a = vec4<f32>(wa - pa, (1.0 - alpha) * dot(bt, gap));
        p.arm_b = vec4<f32>(wb - pb, 0.0);
        warm_record(ci, p);
        next.prev[k] = ci;
    }
    new_pairs[i] = next;
    atomicOr(&pair_counts[i / 4u], m.count << (8u * (i % 4u)));
    // Without the sign bit: max(0, 0 - 0) may be -0, whose bits exceed every float's.
    if (m.count > 0u) {
        atomicMax(&group_status[0], bitcast<u32>(deepest) & 0x7fffffffu);
        atomicAdd(&group_status[1], m.count);
        atomicAdd(&group_status[2], 1u);
    }
}

// The workgroup's share of the worklist: its pairs' slots within it, then where it starts.
var<workgroup> group_work: atomic<u32>;
var<workgroup> group_work_at: u32;

// Pass 1, one invocation per pair of the list: the empty slots, the carried manifolds,
// and the worklist of the rest. (No early return: the workgroup meets at barriers.)
@compute @workgroup_size(64)
fn narrow_carry(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    clear_status(lid);
    if (lid == 0u) {
        atomicStore(&group_work, 0u);
    }
    workgroupBarrier();
    let i = grid_index(gid, nwg);
    var to_collide = false;
    if (i < params.n_pairs && i >= pair_start[params.n_bodies]) {
        empty_records(i);
    } else if (i < params.n_pairs) {
        let sp = step_pairs[i];
        to_collide = true;
        if (sp.old != NO_OLD) {
            let ra = collider_pose(sp.a);
            let rb = collider_pose(sp.b);
            let c = carried(old_pairs[sp.old], ra, rb);
            if (c.ok) {
                write_pair(i, sp, ra, rb, c.state);
                to_collide = false;
            }
        }
    }
    var slot = 0u;
    if (to_collide) {
        slot = atomicAdd(&group_work, 1u);
    }
    workgroupBarrier();
    flush_status(lid);
    if (lid == 0u) {
        let n = atomicLoad(&group_work);
        if (n > 0u) {
            group_work_at = atomicAdd(&narrow_work[0], n);
        }
    }
    workgroupBarrier();
    if (to_collide) {
        atomicStore(&narrow_work[WORK_AT + group_work_at + slot], i);
    }
}

// One invocation: `narrow_collide`'s dispatch arguments, 64 worklist pairs per workgroup,
// on a 2-D grid past `max_groups` workgroups.
@compute @workgroup_size(1)
fn narrow_work_args() {
    let g = (atomicLoad(&narrow_work[0]) + 63u) / 64u;
    narrow_args[0] = min(g, params.max_groups);
    narrow_args[1] = (g + params.max_groups - 1u) / params.max_groups;
    narrow_args[2] = 1u;
}

// Pass 2, one invocation per worklist pair: its points found again.
@compute @workgroup_size(64)
fn narrow_collide(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    clear_status(lid);
    workgroupBarrier();
    let w = grid_index(gid, nwg);
    if (w < atomicLoad(&narrow_work[0])) {
        let i = atomicLoad(&narrow_work[WORK_AT + w]);
        let sp = step_pairs[i];
        let ra = collider_pose(sp.a);
        let rb = collider_pose(sp.b);
        let pair = Pair(shapes[sp.a].shape, shapes[sp.b].shape, ra, rb);
        let has_old = sp.old != NO_OLD;
        var old = PairContact();
        if (has_old) {
            old = old_pairs[sp.old];
        }
        write_pair(i, sp, ra, rb, found_contact(pair, params.margin, has_old, old));
    }
    workgroupBarrier();
    flush_status(lid);
}
