// Penetration-free contact of deformable surfaces on the device (src/gpu/surface_contact.rs):
// the per-iteration half of src/pipeline/surface_contact — the rows' terms in the vertex
// solves and the coarse residual, their dual update, and the advance (CCD of every
// candidate pair from the certified configuration X to the iterate, each island's largest
// certified step, the element-volume floor, the active set's growth with the earliest-TOI
// filter, X moved, the rows linearised again at X). The frame's set-up (cages, candidates,
// islands, the carried rows) and its end stay on the host, as on the CPU backend; the rows'
// lists are made at the frame's start on the device (contact_lists.wgsl, appended).
// Prepended with vbd.wgsl, ccd_core.wgsl and contact_geometry.wgsl (one module). Rigid
// colliders take part through their tessellated surfaces and half-spaces; a body that moves
// has a certified pose beside X, advanced with its island, and takes the rows' terms into
// its 6×6 system (contact_bodies.wgsl, appended to this file).
//
// Determinism: a row's place in the rows array depends on the order its grow invocation ran,
// but nothing sums over that order: each point lists its rows sorted by candidate index
// (`contact_sort_slots`), and the rows read back are put in order by the host.

struct ContactParams {
    ccd: CcdParams,
    gap: f32,
    xi: f32,
    decay: f32,
    drop_below: f32,
    lambda_max: f32,
    n_candidates: u32,
    n_points: u32,
    soft_points: u32,
    n_objects: u32,
    n_soft_bodies: u32,
    n_tets: u32,
    on: u32, // 0: no contact this step (the kernels return at once)
    // Region offsets (see the buffers below).
    o_cand_row: u32,
    o_slot_items: u32,
    o_slot_count: u32,
    o_alpha: u32,
    o_earliest_t: u32,
    o_earliest_k: u32,
    o_toi: u32,
    o_certified: u32,
    o_tau: u32,
    o_beta: u32,
    o_cands: u32,
    o_rigid: u32,
    o_planes: u32,
    o_cage_abs: u32,
    o_cage_com: u32,
    o_cage_ref: u32,
    o_slot_offsets: u32,
    o_island: u32,
    o_owner: u32,
    o_point_terms: u32,
    o_rigid_body: u32,
    o_plane_body: u32,
    o_ranges: u32,
    o_body_ref: u32,
    row_capacity: u32,
    o_reach: u32,
    o_body_x: u32,
    o_body_flags: u32,
    o_bslot_offsets: u32,
    o_bslot_items: u32,
    o_bslot_count: u32,
    o_triangles: u32,
    o_edges: u32,
    n_bodies: u32,
    carried_rows: u32, // rows uploaded: the rows carried into the frame
};

// A candidate pair: its points (NONE unused), kind, primitive b (triangle, edge or plane),
// its island; a lower bound on its distance at the cages' reference R. (Its row: the
// cand_row region; the penalty and friction of a row made from it: `cand_row_terms`.)
struct Candidate {
    points: vec4<u32>,
    info: vec4<u32>, // kind, b, 0, island
    lower: f32,
};

// One contact row (pipeline::surface_contact::rows::Row).
struct Row {
    points: vec4<u32>,
    weights: vec4<f32>,
    normal: vec4<f32>,         // xyz, w: distance at X
    lagged_normal: vec4<f32>,  // xyz, w: penalty μ
    lagged_weights: vec4<f32>,
    lambda_t: vec4<f32>,       // xyz, w: λ
    info: vec4<u32>,           // kind | flags, plane (b), candidate, advance it was made in
    fr: vec4<f32>,             // γ, static and dynamic friction
};

const KIND_PT: u32 = 0u;
const KIND_EE: u32 = 1u;
const KIND_PLANE: u32 = 2u;
const ROW_ALIVE: u32 = 0x100u;
const ROW_COARSE: u32 = 0x200u;
const ROW_FRESH: u32 = 0x400u;
// status: rows, advances, cage escapes, overflow.
const ST_ROWS: u32 = 0u;
const ST_ADVANCE: u32 = 1u;
const ST_ESCAPES: u32 = 2u;
const ST_OVERFLOW: u32 = 3u;
// A candidate's row that left the set: the index is kept (with this bit), and a return of
// the pair takes the same row (it is already in its points' lists).
const DEAD: u32 = 0x80000000u;

@group(2) @binding(0) var<uniform> cparams: ContactParams;
// Everything the contact stage writes, in four buffers (the deformable kernels' bindings
// are near the 32 storage buffers per stage a device may cap at), each a set of regions
// at the offsets in ContactParams:
// `ca` (atomics): the status words, per candidate its row (NONE, or DEAD | row once it
//   left the set), per soft point and per moving rigid body its rows (the list, its
//   length, and its offset: the soft points' offsets, then the bodies', then their total,
//   one prefix sum), per object its island's step (bits), per point the earliest new pair
//   (toi bits, candidate);
// `cf`: per candidate its times of impact (x: at δ, y: at ξ), per soft point X, per soft
//   body this advance's translation, per object β, per rigid body its certified pose;
// `sf` (read only): per point its terms of a row's penalty and friction (`cand_row_terms`),
//   the rigid points (local), the half-spaces (normal, point; local; w: their body's
//   friction, static then dynamic), the cages (per point lo and hi, per soft point the co-moving lo
//   and hi, per point the reference R), per soft body its reference mean;
// `su` (read only): per object its island, per soft vertex its body, per candidate its
//   pair (kind, a, b) and the bits of its lower bound, per rigid point and half-space its
//   body, per soft body its vertex range, per rigid body its flags, the surface's
//   triangles and edges (their points). (Integers never travel as float bits: a device
//   may flush the subnormal floats small integers are.)
@group(2) @binding(1) var<storage, read_write> rows: array<Row>;
@group(2) @binding(2) var<storage, read_write> ca: array<atomic<u32>>;
@group(2) @binding(3) var<storage, read_write> cf: array<vec4<f32>>;
@group(2) @binding(4) var<storage, read> sf: array<vec4<f32>>;
@group(2) @binding(5) var<storage, read> su: array<u32>;
// Per rigid body, the contact rows' terms of its 6×6 system at the iterate (BODY_TERMS
// vec4s: Hll, Hal, Haa by column, Fl, Fa), read by the rigid primal (its group 2).
@group(2) @binding(6) var<storage, read_write> body_terms: array<vec4<f32>>;

const BODY_TERMS: u32 = 12u;
const BODY_MOVES: u32 = 1u;
const BODY_COUPLED: u32 = 2u;

// Candidate k: its points from the surface's primitives (the host's `points_of`), its
// island that of the object of its first deformable point (of its first point if none).
fn cand(k: u32) -> Candidate {
    let at = cparams.o_cands + 4u * k;
    let kind = su[at];
    let a = su[at + 1u];
    let b = su[at + 2u];
    var pts = vec4<u32>(a, NONE, NONE, NONE);
    if (kind == KIND_PT) {
        let t = cparams.o_triangles + 3u * b;
        pts = vec4<u32>(a, su[t], su[t + 1u], su[t + 2u]);
    } else if (kind == KIND_EE) {
        let ea = cparams.o_edges + 2u * a;
        let eb = cparams.o_edges + 2u * b;
        pts = vec4<u32>(su[ea], su[ea + 1u], su[eb], su[eb + 1u]);
    }
    var first = pts.x;
    for (var j = 3i; j >= 0i; j--) {
        if (pts[j] != NONE && pts[j] < cparams.soft_points) {
            first = pts[j];
        }
    }
    var object: u32;
    if (first < cparams.soft_points) {
        object = su[cparams.o_owner + first];
    } else {
        object = cparams.n_soft_bodies + rigid_body(first);
    }
    return Candidate(pts, vec4<u32>(kind, b, 0u, su[cparams.o_island + object]), bitcast<f32>(su[at + 3u]));
}

// The penalty μ and the static and dynamic friction of a row made from candidate `c`: the
// largest of its points' penalty terms, and the geometric means of its two sides' friction
// (pipeline::surface_contact::frame's `row_stiffness` and `pair_friction`).
fn cand_row_terms(c: Candidate) -> vec3<f32> {
    var mu = 0.0;
    for (var j = 0u; j < 4u; j++) {
        if (c.points[j] != NONE) {
            mu = max(mu, sf[cparams.o_point_terms + c.points[j]].x);
        }
    }
    let a = sf[cparams.o_point_terms + c.points.x].yz;
    var b: vec2<f32>;
    if (c.info.x == KIND_PLANE) {
        let i = cparams.o_planes + 2u * c.info.y;
        b = vec2<f32>(sf[i].w, sf[i + 1u].w);
    } else if (c.info.x == KIND_PT) {
        b = sf[cparams.o_point_terms + c.points.y].yz;
    } else {
        b = sf[cparams.o_point_terms + c.points.z].yz;
    }
    return vec3<f32>(mu, sqrt(a * b));
}

var<private> cp: CcdParams;

// ------------------------------------------------------------------ points

// A rigid body's pose: at the step's start, at the iterate (bodies that move) and
// certified (X of the bodies: the start pose for those that do not move).
struct RigidPose {
    p: vec3<f32>,
    q: vec4<f32>,
};

fn body_moves(b: u32) -> bool {
    return (su[cparams.o_body_flags + b] & BODY_MOVES) != 0u;
}

fn pose_start(b: u32) -> RigidPose {
    return RigidPose(body_poses[b].p.xyz, body_poses[b].q);
}

fn pose_now(b: u32) -> RigidPose {
    if (!body_moves(b)) {
        return pose_start(b);
    }
    let it = body_iterate[b];
    return RigidPose(body_poses[b].p.xyz + it.dp.xyz, it.q);
}

fn pose_then(b: u32) -> RigidPose {
    return RigidPose(cf[cparams.o_body_x + 2u * b].xyz, cf[cparams.o_body_x + 2u * b + 1u]);
}

fn apply(pose: RigidPose, r: vec3<f32>) -> vec3<f32> {
    return pose.p + qrot(pose.q, r);
}

fn rigid_body(p: u32) -> u32 {
    return su[cparams.o_rigid_body + p - cparams.soft_points];
}

fn rigid_local(p: u32) -> vec3<f32> {
    return sf[cparams.o_rigid + p - cparams.soft_points].xyz;
}

// Point p at the iterate, at X and at the step's start.
fn point_now(p: u32) -> vec3<f32> {
    if (p < cparams.soft_points) {
        return x_in_sweep(p);
    }
    return apply(pose_now(rigid_body(p)), rigid_local(p));
}

fn point_then(p: u32) -> vec3<f32> {
    if (p < cparams.soft_points) {
        return cf[cparams.o_certified + p].xyz;
    }
    return apply(pose_then(rigid_body(p)), rigid_local(p));
}

fn point_start(p: u32) -> vec3<f32> {
    if (p < cparams.soft_points) {
        return verts[p].p.xyz;
    }
    return apply(pose_start(rigid_body(p)), rigid_local(p));
}

// Half-space `i` in the world at its body's certified pose: normal and point.
fn plane_n(i: u32) -> vec3<f32> {
    let b = su[cparams.o_plane_body + i];
    return qrot(pose_then(b).q, sf[cparams.o_planes + 2u * i].xyz);
}

fn plane_p(i: u32) -> vec3<f32> {
    let b = su[cparams.o_plane_body + i];
    return apply(pose_then(b), sf[cparams.o_planes + 2u * i + 1u].xyz);
}

// ------------------------------------------------------------------ rows

fn row_mu(r: Row) -> f32 {
    return r.lagged_normal.w;
}

fn has_friction(r: Row) -> bool {
    return r.fr.y > 0.0 || r.fr.z > 0.0;
}

// Row::value: d(X) − δ + Σ w_k n·(now_k − X_k).
fn row_value(r: Row) -> f32 {
    var c = r.normal.w - cparams.gap;
    for (var k = 0u; k < 4u; k++) {
        let p = r.points[k];
        if (p != NONE && r.weights[k] != 0.0) {
            c += r.weights[k] * dot(r.normal.xyz, point_now(p) - point_then(p));
        }
    }
    return c;
}

// Row::slip: Σ w'_k (now_k − start_k).
fn row_slip(r: Row) -> vec3<f32> {
    var rel = vec3<f32>(0.0);
    for (var k = 0u; k < 4u; k++) {
        let p = r.points[k];
        if (p != NONE && r.lagged_weights[k] != 0.0) {
            rel += (point_now(p) - point_start(p)) * r.lagged_weights[k];
        }
    }
    return rel;
}

fn row_force(r: Row, c: f32) -> f32 {
    return r.fr.x * max(r.lambda_t.w - row_mu(r) * c, 0.0);
}

// Row::friction_force: λ_t − μ P rel within the cone μ_s F_n, else μ_d F_n along it.
fn friction_force(r: Row, rel: vec3<f32>, normal_force: f32) -> vec3<f32> {
    let n = r.lagged_normal.xyz;
    let u = rel - n * dot(n, rel);
    let f = r.lambda_t.xyz - u * row_mu(r);
    let len = length(f);
    if (len > r.fr.y * normal_force) {
        if (len > 0.0) {
            return f * (r.fr.z * normal_force / len);
        }
        return vec3<f32>(0.0);
    }
    return f;
}

// The contact terms of vertex v at the iterate (SurfaceContact::vertex_terms_of): its rows
// (those the coarse operator holds, with `coarse_only`), normal and friction.
// Soft point v's row list: its length, and its s-th row.
fn point_row_count(v: u32) -> u32 {
    return atomicLoad(&ca[cparams.o_slot_count + v]);
}

fn point_row(v: u32, s: u32) -> Row {
    return rows[atomicLoad(&ca[cparams.o_slot_items + slot_offset(v) + s])];
}

fn contact_block(v: u32) -> Block {
    var acc = Block(vec3<f32>(0.0), mat3x3<f32>());
    if (cparams.on == 0u || v >= cparams.soft_points) {
        return acc;
    }
    let count = point_row_count(v);
    for (var s = 0u; s < count; s++) {
        let r = point_row(v, s);
        let flags = r.info.x;
        if ((flags & ROW_ALIVE) == 0u) {
            continue;
        }
        let f = row_force(r, row_value(r));
        var k = 0u;
        for (var j = 0u; j < 4u; j++) {
            if (r.points[j] == v) {
                k = j;
                break;
            }
        }
        let w = r.weights[k];
        let n = r.normal.xyz;
        acc.f += n * (f * w);
        acc.h += outer(n, n) * (r.fr.x * row_mu(r) * w * w);
        let wt = r.lagged_weights[k];
        if (f > 0.0 && wt != 0.0 && has_friction(r)) {
            let t = r.lagged_normal.xyz;
            acc.f += friction_force(r, row_slip(r), f) * wt;
            acc.h += (diag(1.0) - outer(t, t)) * (r.fr.x * row_mu(r) * wt * wt);
        }
    }
    return acc;
}

// The advance's first dispatch: the rows' dual update (the first workgroups, a lane per
// row of the capacity), then each soft body's translation τ (a workgroup per body).
// Neither reads what the other writes.
@compute @workgroup_size(64)
fn contact_dual(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    if (cparams.on == 0u) {
        return;
    }
    let w = wid.y * nwg.x + wid.x;
    let row_groups = (cparams.row_capacity + 63u) / 64u;
    if (w < row_groups) {
        row_dual(w * 64u + lane);
    } else {
        body_tau(w - row_groups, lane);
    }
}

// The rows' dual update at the iterate (Row::update, update_friction); rows whose weight
// decayed below the threshold leave the set.
fn row_dual(i: u32) {
    if (i >= min(atomicLoad(&ca[ST_ROWS]), cparams.row_capacity)) {
        return;
    }
    var r = rows[i];
    if ((r.info.x & ROW_ALIVE) == 0u) {
        return;
    }
    let c = row_value(r);
    let slip = row_slip(r);
    let mu = row_mu(r);
    if (c - r.lambda_t.w / mu <= 0.0) {
        r.lambda_t.w = min(r.lambda_t.w - mu * c, cparams.lambda_max);
        r.fr.x = 1.0;
    } else {
        r.lambda_t.w = 0.0;
        r.fr.x *= cparams.decay;
    }
    if (has_friction(r)) {
        r.lambda_t = vec4<f32>(friction_force(r, slip, r.fr.x * r.lambda_t.w), r.lambda_t.w);
    }
    if (r.fr.x < cparams.drop_below) {
        r.info.x &= ~ROW_ALIVE;
        atomicStore(&ca[cparams.o_cand_row + r.info.z], i | DEAD);
    }
    rows[i] = r;
}

// ------------------------------------------------------------------ the advance

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
// reach, straight towards the iterate (the CPU runs the broad phase again instead and
// advances all the way). Also resets the point's growth filter.
@compute @workgroup_size(64)
fn contact_reach(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = gid.x;
    if (cparams.on == 0u || p >= cparams.n_points) {
        return;
    }
    atomicStore(&ca[cparams.o_earliest_t + p], ONE);
    atomicStore(&ca[cparams.o_earliest_k + p], NONE);
    if (p >= cparams.soft_points) {
        if (!body_moves(rigid_body(p))) {
            return;
        }
        let x0 = point_then(p);
        let s = reach_in(sf[cparams.o_cage_abs + 2u * p].xyz, sf[cparams.o_cage_abs + 2u * p + 1u].xyz, x0, point_now(p) - x0);
        if (s < 1.0) {
            atomicMin(&ca[cparams.o_reach + island_of_point(p)], key_of(s * (1.0 - 1e-4)));
            atomicAdd(&ca[ST_ESCAPES], 1u);
        }
        return;
    }
    let b = su[cparams.o_owner + p];
    let x0 = cf[cparams.o_certified + p].xyz;
    let dx = x_at(p) - x0;
    let tau_x = cf[cparams.o_tau + b].xyz;
    let tau_0 = cf[cparams.o_tau + cparams.n_soft_bodies + b].xyz;
    let e0 = x0 - cage_reference(p) - tau_0;
    let de = dx - (tau_x - tau_0);
    let s = min(
        reach_in(sf[cparams.o_cage_abs + 2u * p].xyz, sf[cparams.o_cage_abs + 2u * p + 1u].xyz, x0, dx),
        reach_in(sf[cparams.o_cage_com + 2u * p].xyz, sf[cparams.o_cage_com + 2u * p + 1u].xyz, e0, de),
    );
    if (s < 1.0) {
        // Shrunk by a relative margin for the rounding of the quotients.
        atomicMin(&ca[cparams.o_reach + island_of_point(p)], key_of(s * (1.0 - 1e-4)));
        atomicAdd(&ca[ST_ESCAPES], 1u);
    }
}

// Point p where this advance takes it: X + s (iterate − X), s its island's reach.
fn point_target(p: u32) -> vec3<f32> {
    if (p >= cparams.soft_points && !body_moves(rigid_body(p))) {
        return point_then(p);
    }
    let s = bitcast<f32>(atomicLoad(&ca[cparams.o_reach + island_of_point(p)]));
    let now = point_now(p);
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
// (the device builds no cage mid-frame), a rigid point at its body's certified pose then
// (uploaded).
fn cage_reference(p: u32) -> vec3<f32> {
    if (p < cparams.soft_points) {
        return verts[p].p.xyz;
    }
    return sf[cparams.o_cage_ref + p - cparams.soft_points].xyz;
}

// How far a point is from its cage reference at either end of X → iterate.
fn moved(p: u32) -> f32 {
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

// SurfaceContact::toi: the times of impact at the gap δ (when a pair outside the set joins
// it) and at the minimum separation ξ (how far X may go).
fn pair_toi(c: Candidate, is_row: bool) -> vec2<f32> {
    let kind = c.info.x;
    let pts = c.points;
    let gap = cparams.gap;
    let xi = cparams.xi;
    if (kind == KIND_PLANE) {
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
        return vec2<f32>(add, select(0.0, plane_reach(d0, d1, xi_here), clear_at_start));
    }
    // The motion filter: far enough apart at R, less the points' motion, needs no CCD.
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
    if (clear > select(gap, xi, is_row)) {
        return vec2<f32>(1.0, 1.0);
    }
    var add = 1.0;
    var inside_gap = false;
    if (!is_row) {
        let r = run_ccd(kind, pts, gap);
        if (r.stop == STOP_START_INSIDE) {
            inside_gap = true;
        } else if (r.hit != 0u) {
            add = r.toi;
        } else {
            return vec2<f32>(1.0, 1.0);
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
            return vec2<f32>(add, toi_of(run_ccd(kind, pts, sep)));
        }
    }
    return vec2<f32>(add, toi_of(r));
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

// Per candidate: its times of impact; the island's step; each point's earliest new pair.
@compute @workgroup_size(64)
fn contact_ccd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    cp = cparams.ccd;
    let k = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || k >= cparams.n_candidates) {
        return;
    }
    let c = cand(k);
    let row = atomicLoad(&ca[cparams.o_cand_row + k]);
    let t = pair_toi(c, row != NONE && (row & DEAD) == 0u);
    cf[cparams.o_toi + k] = vec4<f32>(t, 0.0, 0.0);
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
@compute @workgroup_size(64)
fn contact_grow(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let k = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || k >= cparams.n_candidates) {
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
    let terms = cand_row_terms(c);
    var r: Row;
    r.points = c.points;
    r.weights = vec4<f32>(0.0);
    r.normal = vec4<f32>(0.0, 1.0, 0.0, 0.0);
    r.lagged_normal = vec4<f32>(0.0, 1.0, 0.0, terms.x);
    r.lagged_weights = vec4<f32>(0.0);
    r.lambda_t = vec4<f32>(0.0);
    r.info = vec4<u32>(c.info.x | ROW_ALIVE | ROW_FRESH, c.info.y, k, atomicLoad(&ca[ST_ADVANCE]));
    r.fr = vec4<f32>(1.0, terms.y, terms.z, 0.0);
    rows[i] = r;
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

// X moves α of the way to the iterate, island by island.
fn advance_point(v: u32) {
    if (v >= cparams.soft_points) {
        return;
    }
    let a = bitcast<f32>(atomicLoad(&ca[cparams.o_alpha + island_of_point(v)]));
    if (a <= 0.0) {
        return;
    }
    let target_x = point_target(v);
    let start_x = cf[cparams.o_certified + v].xyz;
    cf[cparams.o_certified + v] = vec4<f32>(select(start_x + (target_x - start_x) * a, target_x, a >= 1.0), 0.0);
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
    }
    atomicStore(&ca[cparams.o_alpha + i], ONE);
    atomicStore(&ca[cparams.o_reach + i], ONE);
}

// The volume floor of X (surface_contact::inversion, in f32): the largest step along X →
// iterate before a tet's volume falls to 1% of its rest volume; the island's step is cut
// there.
fn tet_volume_floor(e: u32) {
    if (e >= cparams.n_tets) {
        return;
    }
    let t = tets[e];
    var x: array<vec3<f32>, 4>;
    var d: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        let v = t.v[k];
        x[k] = cf[cparams.o_certified + v].xyz;
        d[k] = point_target(v) - x[k];
    }
    let s = tet_step(x, d, 0.01 * t.volume);
    if (s < 1.0) {
        atomicMin(&ca[cparams.o_alpha + island_of_point(t.v.x)], key_of(s));
    }
}

// ------------------------------------------------------------------ linearisation

// Every live row linearised again at X (Row::linearise); rows made in this advance take
// their tangent plane here (Row::lag).
@compute @workgroup_size(64)
fn contact_linearise(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (cparams.on == 0u || i >= min(atomicLoad(&ca[ST_ROWS]), cparams.row_capacity)) {
        return;
    }
    var r = rows[i];
    if ((r.info.x & ROW_ALIVE) == 0u) {
        return;
    }
    let kind = r.info.x & 0xffu;
    var x: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        x[k] = select(vec3<f32>(0.0), point_then(r.points[k]), r.points[k] != NONE);
    }
    if (kind == KIND_PLANE) {
        let n = plane_n(r.info.y);
        r.normal = vec4<f32>(n, dot(n, x[0] - plane_p(r.info.y)));
        r.weights = vec4<f32>(1.0, 0.0, 0.0, 0.0);
    } else {
        var c: Closest;
        if (kind == KIND_PT) {
            c = pt_closest(x[0], x[1], x[2], x[3]);
        } else {
            c = ee_closest(x[0], x[1], x[2], x[3]);
        }
        let d = length(c.diff);
        var n = r.normal.xyz;
        if (d > 0.0 && d <= F32_MAX) {
            n = c.diff / d;
        }
        r.normal = vec4<f32>(n, d);
        r.weights = c.weights;
    }
    if ((r.info.x & ROW_FRESH) != 0u) {
        r.lagged_normal = vec4<f32>(r.normal.xyz, r.lagged_normal.w);
        r.lagged_weights = r.weights;
        let n = r.normal.xyz;
        r.lambda_t = vec4<f32>(r.lambda_t.xyz - n * dot(n, r.lambda_t.xyz), r.lambda_t.w);
        r.info.x &= ~ROW_FRESH;
    }
    rows[i] = r;
}
