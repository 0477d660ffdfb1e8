// The narrow phase inside the step, for scenes whose colliders are all primitives: one
// invocation per candidate pair (found by the broad phase, broad_phase.wgsl, earlier in
// the same submission) carries or finds the pair's manifold
// (contact_persistence.wgsl), then turns each of its points into a warm-started contact
// record (`warm_record`, contact_warm.wgsl) the way pipeline::collision::write_pair_points
// and pipeline::warm_start do on the CPU. Nothing per contact crosses the bus.
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

// The pose of body `i`'s collider (pipeline::collision::shape_pose).
fn collider_pose(i: u32) -> Pose {
    let pose = poses[i];
    return Pose(vec4<f32>(pose.p.xyz + qrot(pose.q, shapes[i].offset.xyz), 0.0), pose.q);
}

@compute @workgroup_size(64)
fn narrow_contacts(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    if (i >= params.n_pairs) {
        return;
    }
    if (i >= pair_start[params.n_bodies]) {
        var empty: Contact;
        empty.body_a = WORLD;
        empty.body_b = WORLD;
        for (var k = 0u; k < 4u; k++) {
            store_record(4u * i + k, empty);
        }
        return;
    }
    let sp = step_pairs[i];
    let ra = collider_pose(sp.a);
    let rb = collider_pose(sp.b);
    let pair = Pair(shapes[sp.a].shape, shapes[sp.b].shape, ra, rb);
    let has_old = sp.old != NO_OLD;
    var old = PairContact();
    if (has_old) {
        old = old_pairs[sp.old];
    }
    var next = update_contact(pair, params.margin, has_old, old);
    let m = next.manifold;
    let n = m.normal.xyz;
    let t = tangent_of(n);
    let bt = cross(n, t);
    let alpha = params.alpha;
    let pa = poses[sp.a].p.xyz;
    let pb = poses[sp.b].p.xyz;
    var deepest = 0.0;
    for (var k = 0u; k < 4u; k++) {
        let ci = 4u * i + k;
        if (k >= m.count) {
            var empty: Contact;
            empty.body_a = WORLD;
            empty.body_b = WORLD;
            store_record(ci, empty);
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
    atomicMax(&narrow_status[0], bitcast<u32>(deepest) & 0x7fffffffu);
    atomicAdd(&narrow_status[1], m.count);
    atomicAdd(&narrow_status[2], u32(m.count > 0u));
}
