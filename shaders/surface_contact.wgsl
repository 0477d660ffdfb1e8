// Penetration-free contact of deformable surfaces on the device (src/gpu/soft_contact/):
// the per-iteration half of src/pipeline/surface_contact — the rows' terms in the vertex
// solves and the coarse residual, their dual update, and the advance (CCD of every
// candidate pair from the certified configuration X to the iterate, each island's largest
// certified step, the element-volume floor, the active set's growth with the earliest-TOI
// filter, X moved: contact_advance.wgsl, appended), then the rows linearised again at X.
// The frame's set-up (cages, candidates, islands, the carried rows) and its end stay on the
// host, as on the CPU backend; the rows' lists are made at the frame's start on the device
// (contact_lists.wgsl, appended).
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
    o_cage_soft: u32,  // a soft point's absolute and comoving cages (3 vec4s, `soft_cages`)
    o_cage_rigid: u32, // a moving rigid point's absolute cage (2 vec4s, `rigid_cage_slot`)
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
    o_cage_base: u32, // per rigid body: its points' first cage slot less its first point
    o_bslot_count: u32,
    o_triangles: u32,
    o_edges: u32,
    o_carried: u32, // the carried rows' records (in cf)
    o_rows_out: u32, // the rows as the readback takes them (in ca)
    o_separation: u32, // per rigid body: the least separation its pairs are certified against (in ca)
    o_hold: u32, // per soft point, its share of the way the volume floor lets it go: two passes (in ca)
    o_ccd_list: u32, // the candidates this advance runs the CCD of, in no set order (in ca)
    n_bodies: u32,
    carried_rows: u32, // rows uploaded: the rows carried into the frame
    ccd_groups: u32, // the most workgroups of the CCD worklist's dispatch (the rest by stride)
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
// status: rows, advances, advances with a point out of its cages, overflow, tets the volume
// floor stopped (in the frame, then in this advance), points out of their cages in this
// advance, the candidates this advance runs the CCD of (`contact_ccd_filter`).
const ST_ROWS: u32 = 0u;
const ST_ADVANCE: u32 = 1u;
const ST_ESCAPES: u32 = 2u;
const ST_OVERFLOW: u32 = 3u;
const ST_FLOOR: u32 = 4u;
const ST_FLOOR_NOW: u32 = 5u;
const ST_ESCAPES_NOW: u32 = 6u;
const ST_CCD_COUNT: u32 = 7u;
const STATUS_WORDS: u32 = 8u;
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
//   friction, static then dynamic), the cages (per soft point its absolute and co-moving lo
//   and hi; per point of a moving body its lo and hi, then its reference R), per soft body
//   its reference mean;
// `su` (read only): per object its island, per soft vertex its body, per candidate its
//   pair (kind, a, b) and the bits of its lower bound, per rigid point and half-space its
//   body, per soft body its vertex range, per rigid body its flags and its points' first
//   cage slot (`rigid_cage_slot`), the surface's
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
    // (kind in the top two bits of a, b, the lower bound's bits: gpu::soft_contact::upload)
    let at = cparams.o_cands + 3u * k;
    let kind = su[at] >> 30u;
    let a = su[at] & 0x3fffffffu;
    let b = su[at + 1u];
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
    return Candidate(pts, vec4<u32>(kind, b, 0u, su[cparams.o_island + object]), bitcast<f32>(su[at + 2u]));
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

// ------------------------------------------------------------------ linearisation

// Every live row linearised again at X (Row::linearise); rows made in this advance take
// their tangent plane here (Row::lag).
@compute @workgroup_size(64)
fn contact_linearise(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || i >= min(atomicLoad(&ca[ST_ROWS]), cparams.row_capacity)) {
        return;
    }
    var r = rows[i];
    if ((r.info.x & ROW_ALIVE) == 0u) {
        return;
    }
    linearise(&r);
    rows[i] = r;
}

// The frame's end: each row as the readback takes it (gpu::soft_contact `RowOut`, 64 B of
// its 128), as words in the atomics buffer: flags, γ, candidate, the advance it was made
// in; the friction force and λ; the normal and distance at X; the weights. The host
// derives its points, penalty and friction from the candidate, as the device did.
@compute @workgroup_size(64)
fn contact_pack_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = lane_index(wid, nwg, lid);
    if (cparams.on == 0u || i >= min(atomicLoad(&ca[ST_ROWS]), cparams.row_capacity)) {
        return;
    }
    let r = rows[i];
    let at = cparams.o_rows_out + 16u * i;
    store_words(at, vec4<u32>(r.info.x, bitcast<u32>(r.fr.x), r.info.z, r.info.w));
    store_words(at + 4u, bitcast<vec4<u32>>(r.lambda_t));
    store_words(at + 8u, bitcast<vec4<u32>>(r.normal));
    store_words(at + 12u, bitcast<vec4<u32>>(r.weights));
}

fn store_words(at: u32, v: vec4<u32>) {
    for (var j = 0u; j < 4u; j++) {
        atomicStore(&ca[at + j], v[j]);
    }
}

// Row `r` linearised at X: its normal, distance and weights (at distance 0 the normal of its
// last linearisation stays); a fresh row also takes its tangent plane there, and turns its
// friction force into that plane.
fn linearise(r: ptr<function, Row>) {
    let kind = (*r).info.x & 0xffu;
    var x: array<vec3<f32>, 4>;
    for (var k = 0u; k < 4u; k++) {
        x[k] = select(vec3<f32>(0.0), point_then((*r).points[k]), (*r).points[k] != NONE);
    }
    if (kind == KIND_PLANE) {
        let n = plane_n((*r).info.y);
        (*r).normal = vec4<f32>(n, dot(n, x[0] - plane_p((*r).info.y)));
        (*r).weights = vec4<f32>(1.0, 0.0, 0.0, 0.0);
    } else {
        var c: Closest;
        if (kind == KIND_PT) {
            c = pt_closest(x[0], x[1], x[2], x[3]);
        } else {
            c = ee_closest(x[0], x[1], x[2], x[3]);
        }
        let d = length(c.diff);
        var n = (*r).normal.xyz;
        if (d > 0.0 && d <= F32_MAX) {
            n = c.diff / d;
        }
        (*r).normal = vec4<f32>(n, d);
        (*r).weights = c.weights;
    }
    if (((*r).info.x & ROW_FRESH) != 0u) {
        (*r).lagged_normal = vec4<f32>((*r).normal.xyz, (*r).lagged_normal.w);
        (*r).lagged_weights = (*r).weights;
        let n = (*r).normal.xyz;
        (*r).lambda_t = vec4<f32>((*r).lambda_t.xyz - n * dot(n, (*r).lambda_t.xyz), (*r).lambda_t.w);
        (*r).info.x &= ~ROW_FRESH;
    }
}

// A fresh row of candidate k (`c`), to be linearised and lagged: multiplier λ (`lambda_t.w`)
// and friction force `lambda_t.xyz`, decay factor γ, `flags` (ROW_COARSE or 0), made in
// advance `made_in` (NONE: carried into the frame). Its penalty and friction follow from
// its points (`cand_row_terms`); its normal until it is linearised apart is +y.
fn fresh_row(c: Candidate, k: u32, lambda_t: vec4<f32>, gamma: f32, flags: u32, made_in: u32) -> Row {
    let terms = cand_row_terms(c);
    var r: Row;
    r.points = c.points;
    r.weights = vec4<f32>(0.0);
    r.normal = vec4<f32>(0.0, 1.0, 0.0, 0.0);
    r.lagged_normal = vec4<f32>(0.0, 1.0, 0.0, terms.x);
    r.lagged_weights = vec4<f32>(0.0);
    r.lambda_t = lambda_t;
    r.info = vec4<u32>(c.info.x | ROW_ALIVE | ROW_FRESH | flags, c.info.y, k, made_in);
    r.fr = vec4<f32>(gamma, terms.y, terms.z, 0.0);
    return r;
}
