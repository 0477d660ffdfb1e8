// The advance of the deformable contact step (src/gpu/soft_contact/): after each
// iteration's dual updates, the CCD of every candidate from the certified configuration X
// to the iterate, each island's largest certified step (as far as its cages reach, and no
// further than the element-volume floor), the active set's growth with the earliest-TOI
// filter, and X and the moving bodies' certified poses moved. Appended to
// surface_contact.wgsl (one module): its records, points and rows are this file's.
// Kernels that do not depend on each other share a dispatch, each over its own items in
// whole workgroups (`first_part_lanes`).

// Each soft body's translation τ = mean(x) − its reference mean (the co-moving cages).
var<workgroup> tau_part: array<vec3<f32>, 64>;
var<workgroup> tau_part_x: array<vec3<f32>, 64>;

fn body_tau(b: u32, lane: u32) {
    if (b >= cparams.n_soft_bodies) {
        return;
    }
    let first = su[cparams.o_ranges + 2u * b];
    let last = su[cparams.o_ranges + 2u * b + 1u];
    var s = vec3<f32>(0.0);
    var sx = vec3<f32>(0.0);
    for (var v = first + lane; v < last; v += 64u) {
        s += x_at(v);
        sx += cf[cparams.o_certified + v].xyz;
    }
    tau_part[lane] = s;
    tau_part_x[lane] = sx;
    workgroupBarrier();
    if (lane == 0u) {
        var total = vec3<f32>(0.0);
        var total_x = vec3<f32>(0.0);
        for (var l = 0u; l < 64u; l++) {
            total += tau_part[l];
            total_x += tau_part_x[l];
        }
        let n = f32(max(last - first, 1u));
        let r = sf[cparams.o_body_ref + b].xyz;
        cf[cparams.o_tau + b] = vec4<f32>(total / n - r, 0.0);
        cf[cparams.o_tau + cparams.n_soft_bodies + b] = vec4<f32>(total_x / n - r, 0.0);
    }
}

fn inside(lo: vec3<f32>, hi: vec3<f32>, p: vec3<f32>) -> bool {
    return all(p >= lo) && all(p <= hi);
}

// Objects: soft body b is object b, rigid body i object n_soft_bodies + i.
fn island_of_point(p: u32) -> u32 {
    if (p < cparams.soft_points) {
        return su[cparams.o_island + su[cparams.o_owner + p]];
    }
    return su[cparams.o_island + cparams.n_soft_bodies + rigid_body(p)];
}

const ONE: u32 = 0x3f800000u;

// The largest s in [0, 1] with a + s·d inside [lo, hi] on every axis, for a inside.
fn reach_in(lo: vec3<f32>, hi: vec3<f32>, a: vec3<f32>, d: vec3<f32>) -> f32 {
    var s = 1.0;
    for (var k = 0u; k < 3u; k++) {
        if (d[k] > 0.0) {
            s = min(s, (hi[k] - a[k]) / d[k]);
        } else if (d[k] < 0.0) {
            s = min(s, (lo[k] - a[k]) / d[k]);
        }
    }
    return max(s, 0.0);
}

// Per point: how far along X → iterate it stays in its cages (absolute and co-moving; the
// co-moving offset is linear along the segment too; the points of a moving rigid body have
// an absolute cage only). Pairs that are not candidates cannot meet while every point is
// in its cages, so an island whose iterate left one advances only as far as the cages
// reach, straight towards the iterate (the CPU's `Cages::reach_along` where
// `contact_cage_rebuild` is off; on, the CPU runs the broad phase again instead and
// advances all the way, and the host runs this frame again). Also resets the point's
// growth filter.
@compute @workgroup_size(64)
fn contact_reach(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = lane_index(wid, nwg, lid);
    if (cparams.on == 0u) {
        return;
    }
    if (p == 0u) {
        // The CCD's worklist is empty, and so is its dispatch (`contact_ccd_filter`).
        atomicStore(&ca[ST_CCD_COUNT], 0u);
        atomicStore(&ccd_args[0], 0u);
        atomicStore(&ccd_args[1], 1u);
        atomicStore(&ccd_args[2], 1u);
    }
    if (p >= cparams.n_points) {
        return;
    }
    atomicStore(&ca[cparams.o_earliest_t + p], ONE);
    atomicStore(&ca[cparams.o_earliest_k + p], NONE);
    if (p >= cparams.soft_points) {
        if (!body_moves(rigid_body(p))) {
            return;
        }
        let x0 = point_then(p);
        let at = cparams.o_cage_rigid + 2u * rigid_cage_slot(p);
        let s = reach_in(sf[at].xyz, sf[at + 1u].xyz, x0, point_now(p) - x0);
        if (s < 1.0) {
            atomicMin(&ca[cparams.o_reach + island_of_point(p)], key_of(s * (1.0 - 1e-4)));
            atomicAdd(&ca[ST_ESCAPES_NOW], 1u);
        }
        return;
    }
    let b = su[cparams.o_owner + p];
    let x0 = cf[cparams.o_certified + p].xyz;
    let dx = held_point(p, hold_of(p)) - x0;
    let tau_x = cf[cparams.o_tau + b].xyz;
    let tau_0 = cf[cparams.o_tau + cparams.n_soft_bodies + b].xyz;
    let e0 = x0 - cage_reference(p) - tau_0;
    let de = dx - (tau_x - tau_0);
    let c = soft_cages(p);
    let s = min(reach_in(c.abs_lo, c.abs_hi, x0, dx), reach_in(c.com_lo, c.com_hi, e0, de));
    if (s < 1.0) {
        // Shrunk by a relative margin for the rounding of the quotients.
        atomicMin(&ca[cparams.o_reach + island_of_point(p)], key_of(s * (1.0 - 1e-4)));
        atomicAdd(&ca[ST_ESCAPES_NOW], 1u);
    }
}

// A soft point's cages (pipeline::surface_contact::cages): the absolute box of its
// positions and the comoving box of its displacements less its body's mean, packed in three
// vec4s (gpu::soft_contact::upload `pack_fixed`).
struct SoftCages {
    abs_lo: vec3<f32>,
    abs_hi: vec3<f32>,
    com_lo: vec3<f32>,
    com_hi: vec3<f32>,
};

fn soft_cages(p: u32) -> SoftCages {
    let at = cparams.o_cage_soft + 3u * p;
    let a = sf[at];
    let b = sf[at + 1u];
    let c = sf[at + 2u];
    return SoftCages(a.xyz, vec3<f32>(a.w, b.xy), vec3<f32>(b.zw, c.x), c.yzw);
}

// A soft point's share of the way to the iterate that the volume floor lets it go (1 for
// a rigid point): the lesser of the hold's two passes.
fn hold_of(p: u32) -> f32 {
    if (p >= cparams.soft_points) {
        return 1.0;
    }
    let a = atomicLoad(&ca[cparams.o_hold + p]);
    let b = atomicLoad(&ca[cparams.o_hold + cparams.soft_points + p]);
    return bitcast<f32>(min(a, b));
}

// Soft point p held back by the floor: X + h (iterate − X) (the iterate where h = 1).
fn held_point(p: u32, h: f32) -> vec3<f32> {
    let now = point_now(p);
    if (h >= 1.0) {
        return now;
    }
    let x0 = point_then(p);
    return x0 + (now - x0) * h;
}

// Point p where this advance takes it: X + s (held − X), s its island's reach and held
// the point the floor lets it go to.
fn point_target(p: u32) -> vec3<f32> {
    if (p >= cparams.soft_points && !body_moves(rigid_body(p))) {
        return point_then(p);
    }
    let s = bitcast<f32>(atomicLoad(&ca[cparams.o_reach + island_of_point(p)]));
    let now = held_point(p, hold_of(p));
    if (s >= 1.0) {
        return now;
    }
    let x0 = point_then(p);
    return x0 + (now - x0) * s;
}

fn bits3(v: vec3<f32>) -> vec3<u32> {
    return bitcast<vec3<u32>>(v);
}

// ACCD of candidate c's points from X to the iterate at separation `sep`.
fn run_ccd(kind: u32, pts: vec4<u32>, sep: f32) -> CcdOut {
    var x: array<u32, 24>;
    for (var k = 0u; k < 4u; k++) {
        let a = bits3(point_then(pts[k]));
        let b = bits3(point_target(pts[k]));
        x[3u * k] = a.x;
        x[3u * k + 1u] = a.y;
        x[3u * k + 2u] = a.z;
        x[12u + 3u * k] = b.x;
        x[13u + 3u * k] = b.y;
        x[14u + 3u * k] = b.z;
    }
    return accd_points(kind, x, bitcast<u32>(sep));
}

// A certified lower bound on a pair's distance at X.
fn lower_bound_at_x(kind: u32, pts: vec4<u32>) -> f32 {
    var x0: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        x0[k] = point_then(pts[k]);
    }
    let f = frame_new(kind, x0, x0);
    return certify(f, kind, 0.0, 0.0).d;
}

fn toi_of(ccd: CcdOut) -> f32 {
    return select(1.0, ccd.toi, ccd.hit != 0u);
}

// Where point p was when its cages were built (R): a soft point at the frame's start
// (the device builds no cage mid-frame), a moving body's point at its body's certified
// pose then (uploaded; a point of a body that does not move has none: its callers skip it).
fn cage_reference(p: u32) -> vec3<f32> {
    if (p < cparams.soft_points) {
        return verts[p].p.xyz;
    }
    return sf[cparams.o_cage_ref + rigid_cage_slot(p)].xyz;
}

// The slot of a moving body's point p in the rigid points' cages and references (only
// the moving bodies' points have one: the others stay at their reference).
fn rigid_cage_slot(p: u32) -> u32 {
    return su[cparams.o_cage_base + rigid_body(p)] + p;
}

// How far a point is from its cage reference at either end of X → iterate (a point of a
// body that does not move stays at it).
fn moved(p: u32) -> f32 {
    if (p >= cparams.soft_points && !body_moves(rigid_body(p))) {
        return 0.0;
    }
    let r = cage_reference(p);
    return max(length(point_then(p) - r), length(point_target(p) - r));
}

// ccd::min_sep_floor: 4 ulps of the largest coordinate `m`, the least separation that
// survives the rounding of the positions to f32.
fn min_sep_floor(m: f32) -> f32 {
    let x = max(abs(m), 1.17549435e-38);
    return 4.0 * bitcast<f32>(bitcast<u32>(x) & 0x7f800000u) * (1.0 / 8388608.0);
}

fn largest_coord(v: vec3<f32>) -> f32 {
    let a = abs(v);
    return max(a.x, max(a.y, a.z));
}

// The largest coordinate of a pair's points at X and at their target.
fn pair_largest_coord(pts: vec4<u32>) -> f32 {
    var m = 0.0;
    for (var j = 0u; j < 4u; j++) {
        m = max(m, max(largest_coord(point_then(pts[j])), largest_coord(point_target(pts[j]))));
    }
    return m;
}

// SurfaceContact::toi of a point–half-space pair: the times of impact at the gap δ (when
// a pair outside the set joins it) and at the separation the pair is certified against (how
// far X may go), and that separation: ξ, or less for a pair that starts closer.
fn plane_toi(c: Candidate, is_row: bool) -> vec3<f32> {
    let pts = c.points;
    let gap = cparams.gap;
    let xi = cparams.xi;
    let n = plane_n(c.info.y);
    let at = plane_p(c.info.y);
    let d0 = dot(n, point_then(pts.x) - at);
    let d1 = dot(n, point_target(pts.x) - at);
    var add = 1.0;
    if (!(is_row || d1 > gap)) {
        if (d0 <= gap) {
            add = plane_reach(d0, d1, 0.9 * d0);
        } else {
            add = plane_reach(d0, d1, gap);
        }
    }
    // Closer than ξ: half the start distance, not below the rounding
    // (ccd::close_pair_separation).
    let floor = min_sep_floor(max(largest_coord(point_then(pts.x)),
        max(largest_coord(point_target(pts.x)), largest_coord(at))));
    let xi_here = select(max(0.5 * d0, floor), xi, d0 > xi);
    let clear_at_start = d0 > xi_here && xi_here > 0.0;
    return vec3<f32>(add, select(0.0, plane_reach(d0, d1, xi_here), clear_at_start), xi_here);
}

// The motion filter of a point–triangle or edge–edge pair: far enough apart at R, less the
// points' motion, it needs no CCD (its times are 1 and its separation ξ).
fn motion_clear(c: Candidate, is_row: bool) -> bool {
    let kind = c.info.x;
    let pts = c.points;
    var a: f32;
    var b: f32;
    if (kind == KIND_PT) {
        a = moved(pts.x);
        b = max(moved(pts.y), max(moved(pts.z), moved(pts.w)));
    } else {
        a = max(moved(pts.x), moved(pts.y));
        b = max(moved(pts.z), moved(pts.w));
    }
    let clear = c.lower - (a + b) * (1.0 + 1e-5);
    return clear > select(cparams.gap, cparams.xi, is_row);
}

// SurfaceContact::toi of a point–triangle or edge–edge pair the motion filter let through,
// as `plane_toi`, by CCD.
fn pair_ccd(c: Candidate, is_row: bool) -> vec3<f32> {
    let kind = c.info.x;
    let pts = c.points;
    let gap = cparams.gap;
    let xi = cparams.xi;
    var add = 1.0;
    var inside_gap = false;
    if (!is_row) {
        let r = run_ccd(kind, pts, gap);
        if (r.stop == STOP_START_INSIDE) {
            inside_gap = true;
        } else if (r.hit != 0u) {
            add = r.toi;
        } else {
            return vec3<f32>(1.0, 1.0, xi);
        }
    }
    if (inside_gap) {
        let closer = 0.9 * lower_bound_at_x(kind, pts);
        add = select(0.0, toi_of(run_ccd(kind, pts, closer)), closer > xi);
    }
    let r = run_ccd(kind, pts, xi);
    if (r.stop == STOP_START_INSIDE) {
        let d0 = lower_bound_at_x(kind, pts);
        if (d0 > 0.0) {
            // ccd::close_pair_separation.
            let sep = max(0.5 * d0, min_sep_floor(pair_largest_coord(pts)));
            return vec3<f32>(add, toi_of(run_ccd(kind, pts, sep)), sep);
        }
        return vec3<f32>(add, toi_of(r), 0.0);
    }
    return vec3<f32>(add, toi_of(r), xi);
}

fn plane_reach(d0: f32, d1: f32, sep: f32) -> f32 {
    if (d1 > sep) {
        return 1.0;
    }
    return clamp((d0 - sep) / (d0 - d1) * (1.0 - 1e-5), 0.0, 1.0);
}

fn key_of(t: f32) -> u32 {
    return min(bitcast<u32>(t) & 0x7fffffffu, ONE);
}

// Lanes of the first part of a dispatch shared by two independent kernels over `n` items:
// whole workgroups, so that no workgroup runs both.
fn first_part_lanes(n: u32) -> u32 {
    return (n + 63u) / 64u * 64u;
}

// Whether candidate k's pair is a live row of the set.
fn candidate_is_row(k: u32) -> bool {
    let row = atomicLoad(&ca[cparams.o_cand_row + k]);
    return row != NONE && (row & DEAD) == 0u;
}

// The CCD's worklist and its dispatch (x, y, z workgroups): `contact_reach` empties them,
// `contact_ccd_filter` fills them, `contact_ccd` runs over them (its dispatch reads this
// buffer, so none of its bindings may hold it: group 3 is only in the other two's layout).
@group(3) @binding(0) var<storage, read_write> ccd_args: array<atomic<u32>, 4>;

// Per candidate: the times of a half-space pair and of a pair the motion filter clears
// (`store_toi`); every other pair goes on the CCD's worklist instead, so that the lanes of
// `contact_ccd` all run a CCD (most pairs need none, and a lane that did would hold up its
// neighbours, which return at once, for the whole of its loop). One workgroup of the
// indirect dispatch per 64 entries, up to `ccd_groups` (the rest are taken by stride).
@compute @workgroup_size(64)
fn contact_ccd_filter(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let k = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || k >= cparams.n_candidates) {
        return;
    }
    let c = cand(k);
    let is_row = candidate_is_row(k);
    if (c.info.x == KIND_PLANE) {
        store_toi(k, c, plane_toi(c, is_row));
    } else if (motion_clear(c, is_row)) {
        store_toi(k, c, vec3<f32>(1.0, 1.0, cparams.xi));
    } else {
        let i = atomicAdd(&ca[ST_CCD_COUNT], 1u);
        atomicStore(&ca[cparams.o_ccd_list + i], k);
        if (i % 64u == 0u && i / 64u < cparams.ccd_groups) {
            atomicAdd(&ccd_args[0], 1u);
        }
    }
}

// The CCD of each pair on the worklist, and its times stored as for the others. Each
// candidate's result depends on it alone, so the list's order (atomics) changes no bit.
@compute @workgroup_size(64)
fn contact_ccd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    cp = cparams.ccd;
    if (cparams.on == 0u) {
        return;
    }
    let n = atomicLoad(&ca[ST_CCD_COUNT]);
    let stride = nwg.x * nwg.y * 64u;
    for (var i = lane_index(wid, nwg, lid); i < n; i += stride) {
        let k = atomicLoad(&ca[cparams.o_ccd_list + i]);
        let c = cand(k);
        store_toi(k, c, pair_ccd(c, candidate_is_row(k)));
    }
}

// Candidate k's times of impact `t` (`SurfaceContact::toi`); the island's step; each
// point's earliest new pair; each moving body's least certified separation.
fn store_toi(k: u32, c: Candidate, t: vec3<f32>) {
    cf[cparams.o_toi + k] = vec4<f32>(t.xy, 0.0, 0.0);
    // The least separation of each moving body's pairs (`rotation_cut`).
    if (t.z < cparams.xi) {
        for (var j = 0u; j < 4u; j++) {
            let p = c.points[j];
            if (p != NONE && p >= cparams.soft_points && body_moves(rigid_body(p))) {
                atomicMin(&ca[cparams.o_separation + rigid_body(p)], bitcast<u32>(t.z));
            }
        }
    }
    if (t.y < 1.0) {
        atomicMin(&ca[cparams.o_alpha + c.info.w], key_of(t.y));
    }
    if (t.x < 1.0) {
        for (var j = 0u; j < 4u; j++) {
            if (c.points[j] != NONE) {
                atomicMin(&ca[cparams.o_earliest_t + c.points[j]], key_of(t.x));
            }
        }
    }
}

// The earliest pair of each point, then the tets' volume floor, in one dispatch: the
// floor lowers the islands' steps, which the earliest pairs do not read.
@compute @workgroup_size(64)
fn contact_earliest(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (cparams.on == 0u) {
        return;
    }
    let k = lane_index(wid, nwg, lid);
    let split = first_part_lanes(cparams.n_candidates);
    if (k < split) {
        earliest_pair(k);
    } else {
        tet_volume_floor(k - split);
    }
}

// Per candidate that reaches δ first at one of its points: the lowest such candidate
// index per point (ties go to the first candidate, as on the CPU).
fn earliest_pair(k: u32) {
    if (k >= cparams.n_candidates) {
        return;
    }
    let t = cf[cparams.o_toi + k].x;
    if (!(t < 1.0)) {
        return;
    }
    let c = cand(k);
    for (var j = 0u; j < 4u; j++) {
        let p = c.points[j];
        if (p != NONE && atomicLoad(&ca[cparams.o_earliest_t + p]) == key_of(t)) {
            atomicMin(&ca[cparams.o_earliest_k + p], k);
        }
    }
}

// The active set's growth: a candidate that is the earliest of one of its points becomes a
// row (λ = 0, γ = 1; linearised and lagged by contact_linearise) and joins its soft points'
// lists. Each row's pair is a candidate, so the rows never outnumber the candidates.
// Then, in the same dispatch, the moving bodies' cut of their islands' steps
// (`rotation_cut`): the growth does not read the steps.
@compute @workgroup_size(64)
fn contact_grow(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let k = lane_index(wid, nwg, lid);
    if (cparams.on == 0u) {
        return;
    }
    let split = first_part_lanes(cparams.n_candidates);
    if (k < split) {
        grow_pair(k);
    } else {
        rotation_cut(cparams.soft_points + k - split);
    }
}

// Pose::rotation_band and the cut of SurfaceContact::advance_with, per point of a moving
// body (the band of a body is its farthest point's, and the bands are nested, so the
// points' cuts in any order leave the island's step where the body's would): a moving
// body's certified pose goes the fraction t = α·s of the way to the iterate by slerp, off
// the straight segments CCD certified by up to t(1 − t)θ²ρ/2 at distance ρ from the axis;
// a step whose t falls where that exceeds half the least separation the body's pairs are
// certified against is cut to the band's lower edge.
fn rotation_cut(p: u32) {
    if (p >= cparams.n_points) {
        return;
    }
    let b = rigid_body(p);
    if (!body_moves(b)) {
        return;
    }
    let island = island_of_point(p);
    let a = bitcast<f32>(atomicLoad(&ca[cparams.o_alpha + island]));
    let s = bitcast<f32>(atomicLoad(&ca[cparams.o_reach + island]));
    let t = a * s;
    if (!(t > 0.0 && t < 1.0)) {
        return;
    }
    let d = min(abs(dot(pose_then(b).q, pose_now(b).q)), 1.0);
    let theta = 2.0 * acos(d);
    let arc = theta * theta * length(rigid_local(p));
    let tol = 0.5 * bitcast<f32>(atomicLoad(&ca[cparams.o_separation + b]));
    let c = 2.0 * tol / arc * (1.0 - 1e-3);
    if (!(c < 0.25)) {
        return;
    }
    let lo = 0.5 * (1.0 - sqrt(1.0 - 4.0 * c));
    if (t > lo && t < 1.0 - lo) {
        atomicMin(&ca[cparams.o_alpha + island], key_of(lo / s));
    }
}

fn grow_pair(k: u32) {
    if (k >= cparams.n_candidates) {
        return;
    }
    let t = cf[cparams.o_toi + k].x;
    if (!(t < 1.0)) {
        return;
    }
    let c = cand(k);
    var first = false;
    for (var j = 0u; j < 4u; j++) {
        let p = c.points[j];
        if (p != NONE && atomicLoad(&ca[cparams.o_earliest_t + p]) == key_of(t) && atomicLoad(&ca[cparams.o_earliest_k + p]) == k) {
            first = true;
        }
    }
    let old = atomicLoad(&ca[cparams.o_cand_row + k]);
    if (!first || (old != NONE && (old & DEAD) == 0u)) {
        return;
    }
    var i = old & ~DEAD;
    if (old == NONE) {
        i = atomicAdd(&ca[ST_ROWS], 1u);
        if (i >= cparams.row_capacity) {
            // The host runs the step again with more room.
            atomicOr(&ca[ST_OVERFLOW], 1u);
            return;
        }
    }
    atomicStore(&ca[cparams.o_cand_row + k], i);
    rows[i] = fresh_row(c, k, vec4<f32>(0.0), 1.0, 0u, atomicLoad(&ca[ST_ADVANCE]));
    if (old == NONE) {
        join_lists(i, c.points);
    }
}

// The advance: X, then the moving bodies' certified poses, in one dispatch (each item
// writes only its own).
@compute @workgroup_size(64)
fn contact_advance(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let k = lane_index(wid, nwg, lid);
    let split = first_part_lanes(cparams.soft_points);
    if (cparams.on == 0u) {
        return;
    }
    if (k < split) {
        advance_point(k);
    } else {
        advance_body(k - split);
    }
}

// X moves α of the way to the target, island by island; the hold is reset for the next
// advance.
fn advance_point(v: u32) {
    if (v >= cparams.soft_points) {
        return;
    }
    let a = bitcast<f32>(atomicLoad(&ca[cparams.o_alpha + island_of_point(v)]));
    let target_x = point_target(v);
    atomicStore(&ca[cparams.o_hold + v], ONE);
    atomicStore(&ca[cparams.o_hold + cparams.soft_points + v], ONE);
    if (a <= 0.0) {
        return;
    }
    let start_x = cf[cparams.o_certified + v].xyz;
    cf[cparams.o_certified + v] = vec4<f32>(select(start_x + (target_x - start_x) * a, target_x, a >= 1.0), 0.0);
}

// The volume floor's hold (surface_contact::inversion::hold), the first of its two passes,
// before the cages' reach: each tet's largest step from X towards the iterate; where the
// floor stops it, each of its vertices goes at most that share of its way.
@compute @workgroup_size(64)
fn contact_hold_first(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let e = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || e >= cparams.n_tets) {
        return;
    }
    let s = tet_step_to(e, TO_ITERATE);
    if (s < 1.0) {
        atomicAdd(&ca[ST_FLOOR_NOW], 1u);
        let t = tets[e];
        for (var k = 0u; k < 4u; k++) {
            atomicMin(&ca[cparams.o_hold + t.v[k]], key_of(s));
        }
    }
}

// The second pass, along the first's targets: a vertex of a tet it stops goes at most
// that share of its first share. Where the first stopped none, nothing is held.
@compute @workgroup_size(64)
fn contact_hold_second(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let e = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || e >= cparams.n_tets || atomicLoad(&ca[ST_FLOOR_NOW]) == 0u) {
        return;
    }
    let s = tet_step_to(e, TO_HELD);
    if (s < 1.0) {
        let t = tets[e];
        for (var k = 0u; k < 4u; k++) {
            let h = bitcast<f32>(atomicLoad(&ca[cparams.o_hold + t.v[k]]));
            atomicMin(&ca[cparams.o_hold + cparams.soft_points + t.v[k]], key_of(h * s));
        }
    }
}

// Where a tet's path from X goes: the iterate (the hold's first pass), where the first
// pass holds the vertices (its second), or where the advance takes them.
const TO_ITERATE: u32 = 0u;
const TO_HELD: u32 = 1u;
const TO_TARGET: u32 = 2u;

// Tet e's largest step from X along its path `to` before its volume falls to the floor.
fn tet_step_to(e: u32, to: u32) -> f32 {
    let t = tets[e];
    var x: array<vec3<f32>, 4>;
    var d: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        let v = t.v[k];
        x[k] = cf[cparams.o_certified + v].xyz;
        var end = point_now(v);
        if (to == TO_HELD) {
            end = held_point(v, bitcast<f32>(atomicLoad(&ca[cparams.o_hold + v])));
        } else if (to == TO_TARGET) {
            end = point_target(v);
        }
        d[k] = end - x[k];
    }
    return tet_step(x, d, 0.01 * t.volume);
}

// The advance's end: each object's island (then each row list sorted, `sort_list`: the
// lists are not what the islands touch).
@compute @workgroup_size(64)
fn contact_islands(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (cparams.on == 0u) {
        return;
    }
    let k = lane_index(wid, nwg, lid);
    let split = first_part_lanes(cparams.n_objects);
    if (k < split) {
        island_end(k);
    } else {
        sort_list(k - split);
    }
}

// Per object: β of each island root, and the steps reset for the next advance (an island's
// step is read only by its root's lane, here).
fn island_end(i: u32) {
    if (i >= cparams.n_objects) {
        return;
    }
    if (su[cparams.o_island + i] == i) {
        // The share of the way to the iterate X went: α of the reach.
        let a = bitcast<f32>(atomicLoad(&ca[cparams.o_alpha + i]));
        let reach = bitcast<f32>(atomicLoad(&ca[cparams.o_reach + i]));
        cf[cparams.o_beta + i].x *= 1.0 - a * reach;
    }
    if (i == 0u) {
        atomicAdd(&ca[ST_ADVANCE], 1u);
        atomicAdd(&ca[ST_FLOOR], atomicExchange(&ca[ST_FLOOR_NOW], 0u));
        atomicAdd(&ca[ST_ESCAPES], min(atomicExchange(&ca[ST_ESCAPES_NOW], 0u), 1u));
    }
    atomicStore(&ca[cparams.o_alpha + i], ONE);
    atomicStore(&ca[cparams.o_reach + i], ONE);
    if (i >= cparams.n_soft_bodies) {
        atomicStore(&ca[cparams.o_separation + i - cparams.n_soft_bodies], bitcast<u32>(cparams.xi));
    }
}

// The volume floor of X (surface_contact::inversion, in f32): the largest step along X →
// iterate before a tet's volume falls to 1% of its rest volume; the island's step is cut
// there.
fn tet_volume_floor(e: u32) {
    // Where the hold's first pass stopped no tet, every tet's path to the iterate is above
    // the floor, and so is its part up to the reach.
    if (e >= cparams.n_tets || atomicLoad(&ca[ST_FLOOR_NOW]) == 0u) {
        return;
    }
    let s = tet_step_to(e, TO_TARGET);
    if (s < 1.0) {
        atomicMin(&ca[cparams.o_alpha + island_of_point(tets[e].v.x)], key_of(s));
    }
}
