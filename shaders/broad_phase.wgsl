// The broad phase on the device: a uniform grid in a hash table, filled by a counting sort,
// and the candidate pairs of every body written into its own range, sorted, so the list is
// the same on every run whatever order the atomics take. common.wgsl and narrow_phase.wgsl
// (Shape, BodyShape, the kinds) are prepended; prefix sums run in scan.wgsl.
//
// Bodies come in classes (chosen on the CPU, src/pipeline/collision/device.rs):
// * GRID: bounded colliders no larger than a cell, so each spans at most 2 × 2 × 2 cells
//   and is entered in those cells;
// * SPECIAL: half-spaces and colliders larger than a cell, listed apart (a few in a
//   scene: the ground, a floor slab, a wrecking ball) and tested against every body;
// * NONE: no collider the device handles, frozen, or no collider.
//
// A pair is written once, by its owner: of two grid bodies the lower index, found in the
// cell that holds the lowest corner of the overlap of their boxes; of a grid body and a
// special one the grid body; of two special ones the lower index. The same tests as the
// CPU's broad phase (`pipeline::collision::find_pairs`): boxes loosened by the margin
// overlap, or, against a half-space, the box's lowest corner lies within the margin; at
// least one body solved; jointed pairs left out.
//
// Dispatch order: bp_bounds, bp_count_cells (into the cleared cursors), bp_seed_scan, scan
// of the buckets, bp_seed_fill, bp_fill, bp_count_pairs, scan of the pair counts,
// bp_write_pairs.

struct BroadParams {
    n_bodies: u32,
    table_mask: u32, // buckets - 1 (a power of two)
    capacity: u32,   // pairs the output holds
    n_specials: u32,
    cell: f32,
    inv_cell: f32,
    margin: f32,
    n_excluded: u32,
    // Whether old_start and old_pairs hold the last step's list over the same bodies and
    // classes (then each pair gets its index in it).
    has_old: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
};

struct Bounds {
    lo: vec4<f32>,
    hi: vec4<f32>,
};

const CLASS_NONE: u32 = 0u;
const CLASS_GRID: u32 = 1u;
const CLASS_SPECIAL: u32 = 2u;
const NO_PAIR: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> bp: BroadParams;
@group(0) @binding(1) var<storage, read> poses: array<Pose>;
@group(0) @binding(2) var<storage, read> shapes: array<BodyShape>;
@group(0) @binding(3) var<storage, read> body_flags: array<u32>;
@group(0) @binding(4) var<storage, read> classes: array<u32>;
// Special bodies by index, ascending.
@group(0) @binding(5) var<storage, read> specials: array<u32>;
// Jointed pairs (lower index, higher index), ascending.
@group(0) @binding(6) var<storage, read> excluded: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read_write> bounds: array<Bounds>;
// Per bucket: its entry count, then (after the scan) its first entry; [buckets]: the total.
@group(0) @binding(8) var<storage, read_write> bucket_start: array<u32>;
@group(0) @binding(9) var<storage, read_write> cursor: array<atomic<u32>>;
// Grid bodies by bucket.
@group(0) @binding(10) var<storage, read_write> entries: array<u32>;
// Per body: its pair count, then (after the scan) its first pair; [n]: the total.
@group(0) @binding(11) var<storage, read_write> pair_start: array<u32>;
@group(0) @binding(12) var<storage, read_write> pairs_out: array<StepPair>;
// The last step's pair_start and pairs (read when bp.has_old is 1).
@group(0) @binding(13) var<storage, read> old_start: array<u32>;
@group(0) @binding(14) var<storage, read> old_pairs: array<StepPair>;

// The collider's box (pipeline::collision::device::broad_bounds), loosened by the margin.
fn collider_bounds(i: u32) -> Bounds {
    let pose = poses[i];
    let s = shapes[i];
    let c = pose.p.xyz + qrot(pose.q, s.offset.xyz);
    var e = vec3<f32>(0.0);
    switch s.shape.kind {
        case SPHERE: {
            e = vec3<f32>(s.shape.dims.x);
        }
        case CAPSULE: {
            e = abs(qrot(pose.q, vec3<f32>(0.0, s.shape.dims.x, 0.0))) + vec3<f32>(s.shape.dims.y);
        }
        default: {
            let h = s.shape.dims;
            e = abs(qrot(pose.q, vec3<f32>(h.x, 0.0, 0.0))) + abs(qrot(pose.q, vec3<f32>(0.0, h.y, 0.0))) + abs(qrot(pose.q, vec3<f32>(0.0, 0.0, h.z)));
        }
    }
    let m = vec3<f32>(bp.margin);
    return Bounds(vec4<f32>(c - e - m, 0.0), vec4<f32>(c + e + m, 0.0));
}

fn cell_of(p: vec3<f32>) -> vec3<i32> {
    return vec3<i32>(floor(p * bp.inv_cell));
}

// The cells a grid body's box spans: at most 2 per axis (the cell is at least as large as
// every grid body's box; the clamp keeps rounding from adding a third).
fn cell_range(b: Bounds) -> array<vec3<i32>, 2> {
    let lo = cell_of(b.lo.xyz);
    return array<vec3<i32>, 2>(lo, min(cell_of(b.hi.xyz), lo + vec3<i32>(1)));
}

fn bucket_of(c: vec3<i32>) -> u32 {
    let u = bitcast<vec3<u32>>(c);
    return ((u.x * 73856093u) ^ (u.y * 19349663u) ^ (u.z * 83492791u)) & bp.table_mask;
}

fn overlap(a: Bounds, b: Bounds) -> bool {
    return all(a.lo.xyz <= b.hi.xyz) && all(b.lo.xyz <= a.hi.xyz);
}

// Whether box `a` comes within the margin of half-space body `h` (its boundary through the
// collider's origin, outward normal in the body frame): the CPU's test on the box's lowest
// corner along the normal.
fn near_plane(a: Bounds, h: u32) -> bool {
    let pose = poses[h];
    let n = qrot(pose.q, shapes[h].shape.dims);
    let origin = pose.p.xyz + qrot(pose.q, shapes[h].offset.xyz);
    let centre = 0.5 * (a.lo.xyz + a.hi.xyz);
    let half = 0.5 * (a.hi.xyz - a.lo.xyz);
    return dot(n, centre - origin) - dot(half, abs(n)) < bp.margin;
}

fn is_solved(b: u32) -> bool {
    return (body_flags[b] & 1u) != 0u;
}

fn is_excluded(a: u32, b: u32) -> bool {
    var lo = 0u;
    var hi = bp.n_excluded;
    let key = vec2<u32>(min(a, b), max(a, b));
    while lo < hi {
        let mid = (lo + hi) / 2u;
        let e = excluded[mid];
        if e.x < key.x || (e.x == key.x && e.y < key.y) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return lo < bp.n_excluded && all(excluded[lo] == key);
}

// Whether two special bodies (or a special and a grid body) are candidates.
fn special_pair(a: u32, ba: Bounds, b: u32) -> bool {
    let ha = shapes[a].shape.kind == HALF_SPACE;
    let hb = shapes[b].shape.kind == HALF_SPACE;
    if ha && hb {
        return false;
    }
    if hb {
        return near_plane(ba, b);
    }
    if ha {
        return near_plane(bounds[b], a);
    }
    return overlap(ba, bounds[b]);
}

fn keep(a: u32, b: u32) -> bool {
    return (is_solved(a) || is_solved(b)) && !is_excluded(a, b);
}

@compute @workgroup_size(64)
fn bp_bounds(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= bp.n_bodies {
        return;
    }
    if classes[i] != CLASS_NONE && shapes[i].shape.kind != HALF_SPACE {
        bounds[i] = collider_bounds(i);
    }
}

@compute @workgroup_size(64)
fn bp_count_cells(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= bp.n_bodies || classes[i] != CLASS_GRID {
        return;
    }
    let r = cell_range(bounds[i]);
    for (var x = r[0].x; x <= r[1].x; x++) {
        for (var y = r[0].y; y <= r[1].y; y++) {
            for (var z = r[0].z; z <= r[1].z; z++) {
                atomicAdd(&cursor[bucket_of(vec3<i32>(x, y, z))], 1u);
            }
        }
    }
}

// The bucket counts into bucket_start for the scan.
@compute @workgroup_size(64)
fn bp_seed_scan(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x <= bp.table_mask {
        bucket_start[gid.x] = atomicLoad(&cursor[gid.x]);
    }
}

// Each bucket's fill cursor at its first entry.
@compute @workgroup_size(64)
fn bp_seed_fill(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x <= bp.table_mask {
        atomicStore(&cursor[gid.x], bucket_start[gid.x]);
    }
}

@compute @workgroup_size(64)
fn bp_fill(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= bp.n_bodies || classes[i] != CLASS_GRID {
        return;
    }
    let r = cell_range(bounds[i]);
    for (var x = r[0].x; x <= r[1].x; x++) {
        for (var y = r[0].y; y <= r[1].y; y++) {
            for (var z = r[0].z; z <= r[1].z; z++) {
                entries[atomicAdd(&cursor[bucket_of(vec3<i32>(x, y, z))], 1u)] = i;
            }
        }
    }
}

// Visits every pair body `a` owns: `write` false counts them into pair_start[a], true
// writes them from pair_start[a] on (in visiting order; bp_write_pairs sorts them).
fn visit_pairs(a: u32, write: bool) -> u32 {
    var count = 0u;
    var at = 0u;
    if write {
        at = pair_start[a];
    }
    let kind_a = classes[a];
    if kind_a == CLASS_NONE {
        return 0u;
    }
    var ba = Bounds(vec4<f32>(0.0), vec4<f32>(0.0));
    if shapes[a].shape.kind != HALF_SPACE {
        ba = bounds[a];
    }
    if kind_a == CLASS_GRID {
        let r = cell_range(ba);
        for (var x = r[0].x; x <= r[1].x; x++) {
            for (var y = r[0].y; y <= r[1].y; y++) {
                for (var z = r[0].z; z <= r[1].z; z++) {
                    let c = vec3<i32>(x, y, z);
                    let h = bucket_of(c);
                    for (var k = bucket_start[h]; k < bucket_start[h + 1u]; k++) {
                        let b = entries[k];
                        if b <= a {
                            continue;
                        }
                        let bb = bounds[b];
                        // The cell of the overlap's lowest corner finds the pair once.
                        if !overlap(ba, bb) || any(cell_of(max(ba.lo.xyz, bb.lo.xyz)) != c) || !keep(a, b) {
                            continue;
                        }
                        if write && at + count < bp.capacity {
                            pairs_out[at + count] = StepPair(a, b, NO_PAIR, 0u);
                        }
                        count += 1u;
                    }
                }
            }
        }
    }
    for (var s = 0u; s < bp.n_specials; s++) {
        let b = specials[s];
        // A special body's pairs with another special body are the lower index's.
        if b == a || (kind_a == CLASS_SPECIAL && b < a) {
            continue;
        }
        if !special_pair(a, ba, b) || !keep(a, b) {
            continue;
        }
        if write && at + count < bp.capacity {
            pairs_out[at + count] = StepPair(min(a, b), max(a, b), NO_PAIR, 0u);
        }
        count += 1u;
    }
    return count;
}

@compute @workgroup_size(64)
fn bp_count_pairs(@builtin(global_invocation_id) gid: vec3<u32>) {
    let a = gid.x;
    if a >= bp.n_bodies {
        return;
    }
    pair_start[a] = visit_pairs(a, false);
}

@compute @workgroup_size(64)
fn bp_write_pairs(@builtin(global_invocation_id) gid: vec3<u32>) {
    let a = gid.x;
    if a >= bp.n_bodies {
        return;
    }
    let count = visit_pairs(a, true);
    // Sorted by the other body (a handful of pairs per body).
    let lo = pair_start[a];
    let hi = min(lo + count, bp.capacity);
    for (var i = lo + 1u; i < hi; i++) {
        let p = pairs_out[i];
        let key = p.a + p.b - a;
        var j = i;
        while j > lo && (pairs_out[j - 1u].a + pairs_out[j - 1u].b - a) > key {
            pairs_out[j] = pairs_out[j - 1u];
            j -= 1u;
        }
        pairs_out[j] = p;
    }
    if bp.has_old == 0u {
        return;
    }
    // Each pair's index in the last step's list: the same owner's range, sorted alike.
    let old_hi = old_start[a + 1u];
    var k = old_start[a];
    for (var i = lo; i < hi; i++) {
        let other = pairs_out[i].a + pairs_out[i].b - a;
        while k < old_hi && old_pairs[k].a + old_pairs[k].b - a < other {
            k += 1u;
        }
        if k < old_hi && old_pairs[k].a + old_pairs[k].b - a == other {
            pairs_out[i].old = k;
        }
    }
}
