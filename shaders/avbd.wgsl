// AVBD iterations on the GPU: the primal block solve per body of one colour (in place),
// and the dual update of contacts (joints.wgsl, appended to this module: the joints'
// rows, warm start, dual update and fracture test).
//
// Every formula mirrors the CPU backend (src/pipeline/primal.rs, dual.rs, src/contact.rs,
// src/joint.rs); the records are the same bytemuck structs (the contact records are
// written on the device by contact_warm.wgsl, the others uploaded unchanged).

// Which colour a primal dispatch solves (dynamic-offset slots written when the slot buffer
// is created: slot c < 64 is colour c, slot 64 + k the k-th body of the serial group; the
// ranges themselves come from the GPU colouring, shaders/coloring.wgsl).
// What a primal pipeline compiles in (pipeline-overridable constants): a step with no
// joints (JOINTS false) and no deformables (COUPLED false) runs a variant without their
// rows' code, which leaves its invocations fewer registers to hold, so more run at once.
// The variant is chosen by what the step holds: the skipped branches would find nothing.
override JOINTS: bool = true;
override COUPLED: bool = true;

struct ColorSlot {
    index: u32,
    pad: u32,
};

struct Joint {
    body_a: u32,
    body_b: u32,
    kind: u32,
    flags: u32,
    anchor_a: vec4<f32>,
    anchor_b: vec4<f32>,
    frame_a: vec4<f32>,
    frame_b: vec4<f32>,
    limits_motor: vec4<f32>,
    params: vec4<f32>,
};

struct JointState {
    k: array<f32, 8>,
    lambda: array<f32, 8>,
    c0: array<f32, 8>,
    angle0: vec4<f32>,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> poses: array<Pose>;
@group(0) @binding(2) var<storage, read> masses: array<Mass>;
@group(0) @binding(3) var<storage, read_write> iterate: array<Iterate>;
@group(0) @binding(4) var<storage, read> inertial: array<Inertial>;
// The contact records' first chunk (the others at bindings 12.., contact_chunks.wgsl).
@group(0) @binding(5) var<storage, read_write> contacts0: array<Contact>;
@group(0) @binding(6) var<storage, read> joints: array<Joint>;
@group(0) @binding(7) var<storage, read_write> joint_states: array<JointState>;
@group(0) @binding(8) var<storage, read> adj_offsets: array<u32>;
@group(0) @binding(9) var<storage, read> adj_items: array<u32>;
@group(0) @binding(10) var<storage, read> color_bodies: array<u32>;
// (start, count) in color_bodies per colour; entry 64 is the serial fallback group.
@group(0) @binding(11) var<storage, read> ranges: array<vec2<u32>>;
@group(0) @binding(12) var<storage, read_write> contacts1: array<Contact>;
@group(0) @binding(13) var<storage, read_write> contacts2: array<Contact>;
@group(0) @binding(14) var<storage, read_write> contacts3: array<Contact>;
@group(0) @binding(15) var<storage, read_write> contacts4: array<Contact>;
@group(0) @binding(16) var<storage, read_write> contacts5: array<Contact>;
@group(0) @binding(17) var<storage, read_write> contacts6: array<Contact>;
@group(0) @binding(18) var<storage, read_write> contacts7: array<Contact>;
@group(1) @binding(0) var<uniform> color: ColorSlot;

// Deformable vertices attached to bodies (src/deformable/attachment.rs, the vertices of
// vbd.wgsl): the body side of each attachment's three rows. Empty buffers when the world
// has no attachment.
struct Attachment {
    vertex: u32,
    body: u32,
    flags: u32,
    breaking_force: f32,
    anchor: vec4<f32>,
    k: vec4<f32>,
    lambda: vec4<f32>,
    c0: vec4<f32>,
};

struct SoftVertex {
    p: vec4<f32>,  // start position, mass
    yd: vec4<f32>,
};

@group(2) @binding(0) var<storage, read> att_records: array<Attachment>;
@group(2) @binding(1) var<storage, read> att_body_offsets: array<u32>;
@group(2) @binding(2) var<storage, read> att_body_items: array<u32>;
@group(2) @binding(3) var<storage, read> soft_verts: array<SoftVertex>;
@group(2) @binding(4) var<storage, read> soft_disp: array<vec4<f32>>;
// The deformables' contact rows' terms of each body's system (`contact_body_terms` of
// surface_contact.wgsl, 12 vec4s a body: Hll, Hal, Haa by column, Fl, Fa); zeros, or
// shorter than the bodies, when no contact row touches a moving body.
@group(2) @binding(5) var<storage, read> soft_contact_terms: array<vec4<f32>>;

// The fields a dual update changes (penalties, multipliers, flags): writing them alone
// writes a third of the 96-byte record.
fn store_contact_dual(i: u32, v: Contact) {
    let j = i & ((1u << params.contact_shift) - 1u);
    switch (i >> params.contact_shift) {
        case 0u: { contacts0[j].flags = v.flags; contacts0[j].k = v.k; contacts0[j].lambda = v.lambda; }
        case 1u: { contacts1[j].flags = v.flags; contacts1[j].k = v.k; contacts1[j].lambda = v.lambda; }
        case 2u: { contacts2[j].flags = v.flags; contacts2[j].k = v.k; contacts2[j].lambda = v.lambda; }
        case 3u: { contacts3[j].flags = v.flags; contacts3[j].k = v.k; contacts3[j].lambda = v.lambda; }
        case 4u: { contacts4[j].flags = v.flags; contacts4[j].k = v.k; contacts4[j].lambda = v.lambda; }
        case 5u: { contacts5[j].flags = v.flags; contacts5[j].k = v.k; contacts5[j].lambda = v.lambda; }
        case 6u: { contacts6[j].flags = v.flags; contacts6[j].k = v.k; contacts6[j].lambda = v.lambda; }
        default: { contacts7[j].flags = v.flags; contacts7[j].k = v.k; contacts7[j].lambda = v.lambda; }
    }
}

const STICK: u32 = 1u;
const INSIDE_CONE: u32 = 2u;
const HAS_LIMIT: u32 = 2u;
const HAS_MOTOR: u32 = 4u;
const BROKEN: u32 = 1u;
const BREAKABLE_FORCE: u32 = 8u;
const BREAKABLE_TORQUE: u32 = 16u;
const K_BALL: u32 = 0u;
const K_FIXED: u32 = 1u;
const K_REVOLUTE: u32 = 2u;
const K_PRISMATIC: u32 = 3u;
const K_DISTANCE: u32 = 4u;
const K_ROPE: u32 = 5u;

// ------------------------------------------------------------------ 6×6 system

// The body's system H Δx = F is accumulated in 3×3 blocks and 3-vectors, never in arrays:
// every access has a constant index, so the accumulators stay in registers (a private
// array indexed in a loop lives in local memory, and the per-row updates then dominate
// the primal kernel). Hll: linear rows × linear columns, Hal: angular rows × linear
// columns, Haa: angular × angular. Element (row r, column c) of a block is `B[c][r]`.
var<private> Hll: mat3x3<f32>;
var<private> Hal: mat3x3<f32>;
var<private> Haa: mat3x3<f32>;
var<private> Fl: vec3<f32>;
var<private> Fa: vec3<f32>;

// u vᵀ: element (r, c) = u[r] v[c].
fn outer(u: vec3<f32>, v: vec3<f32>) -> mat3x3<f32> {
    return mat3x3<f32>(u * v.x, u * v.y, u * v.z);
}

// H += k j jᵀ for one row with Jacobian j = (jl, ja).
fn add_outer(j: array<f32, 6>, k: f32) {
    let jl = vec3<f32>(j[0], j[1], j[2]);
    let ja = vec3<f32>(j[3], j[4], j[5]);
    let kl = k * jl;
    let ka = k * ja;
    Hll += outer(kl, jl);
    Hal += outer(ka, jl);
    Haa += outer(ka, ja);
}

fn add_force(j: array<f32, 6>, f: f32) {
    Fl -= f * vec3<f32>(j[0], j[1], j[2]);
    Fa -= f * vec3<f32>(j[3], j[4], j[5]);
}

fn add_diag3(v: vec3<f32>, ang: bool) {
    let d = mat3x3<f32>(vec3<f32>(v.x, 0.0, 0.0), vec3<f32>(0.0, v.y, 0.0), vec3<f32>(0.0, 0.0, v.z));
    if (ang) {
        Haa += d;
    } else {
        Hll += d;
    }
}

// The three rows of a contact point at once, as the CPU's Mat6::add_contact_rows: with
// A = Σ k_r d_r d_rᵀ and X = [arm]×, the block is [[A, (X A)ᵀ], [X A, X A Xᵀ]] (the sign of
// the Jacobian cancels).
fn add_contact_rows(dirs: mat3x3<f32>, k: vec3<f32>, arm: vec3<f32>) {
    let a = outer(dirs[0] * k.x, dirs[0]) + outer(dirs[1] * k.y, dirs[1]) + outer(dirs[2] * k.z, dirs[2]);
    let xa = mat3x3<f32>(cross(arm, a[0]), cross(arm, a[1]), cross(arm, a[2]));
    let t = transpose(xa);
    let xax = mat3x3<f32>(cross(arm, t[0]), cross(arm, t[1]), cross(arm, t[2]));
    Hll += a;
    Hal += xa;
    Haa += xax;
}

// Solution of the last solve_ldlt.
var<private> F: array<f32, 6>;

// LDLᵀ of the lower triangle with the 1e-6·max-diagonal pivot guard; solves H x = F in F.
fn solve_ldlt() -> bool {
    // The lower triangle of the blocks, copied once per body for the factorisation.
    var H: array<f32, 36>;
    for (var r = 0u; r < 3u; r++) {
        for (var c = 0u; c < 3u; c++) {
            H[r * 6u + c] = Hll[c][r];
            H[(3u + r) * 6u + c] = Hal[c][r];
            H[(3u + r) * 6u + 3u + c] = Haa[c][r];
        }
    }
    F = array<f32, 6>(Fl.x, Fl.y, Fl.z, Fa.x, Fa.y, Fa.z);
    var max_diag = 0.0;
    for (var i = 0u; i < 6u; i++) {
        max_diag = max(max_diag, abs(H[i * 7u]));
    }
    if (!(max_diag > 0.0) || max_diag > INF) {
        return false;
    }
    let eps = 1e-6 * max_diag;
    var l: array<f32, 36>;
    var d: array<f32, 6>;
    for (var j = 0u; j < 6u; j++) {
        var dj = H[j * 7u];
        for (var k = 0u; k < j; k++) {
            dj -= l[j * 6u + k] * l[j * 6u + k] * d[k];
        }
        dj = max(dj, eps);
        d[j] = dj;
        for (var i = j + 1u; i < 6u; i++) {
            var s = H[i * 6u + j];
            for (var k = 0u; k < j; k++) {
                s -= l[i * 6u + k] * l[j * 6u + k] * d[k];
            }
            l[i * 6u + j] = s / dj;
        }
    }
    for (var i = 0u; i < 6u; i++) {
        for (var k = 0u; k < i; k++) {
            F[i] -= l[i * 6u + k] * F[k];
        }
    }
    for (var i = 0u; i < 6u; i++) {
        F[i] /= d[i];
    }
    for (var ii = 0u; ii < 6u; ii++) {
        let i = 5u - ii;
        for (var k = i + 1u; k < 6u; k++) {
            F[i] -= l[k * 6u + i] * F[k];
        }
    }
    for (var i = 0u; i < 6u; i++) {
        if (!(abs(F[i]) <= INF)) {
            return false;
        }
    }
    return true;
}

fn vec6(a: vec3<f32>, b: vec3<f32>) -> array<f32, 6> {
    return array<f32, 6>(a.x, a.y, a.z, b.x, b.y, b.z);
}

// ------------------------------------------------------------------ body state

fn body_delta_p(b: u32) -> vec3<f32> {
    if (b == WORLD) {
        return vec3<f32>(0.0);
    }
    return iterate[b].dp.xyz;
}

fn body_delta_theta(b: u32) -> vec3<f32> {
    if (b == WORLD) {
        return vec3<f32>(0.0);
    }
    return iterate[b].dtheta.xyz;
}

fn body_pose(b: u32) -> Pose {
    if (b == WORLD) {
        return Pose(vec4<f32>(0.0), vec4<f32>(0.0, 0.0, 0.0, 1.0));
    }
    let it = iterate[b];
    return Pose(vec4<f32>(poses[b].p.xyz + it.dp.xyz, 0.0), it.q);
}

// ------------------------------------------------------------------ contacts

struct ContactForce {
    c: vec3<f32>,
    f: vec3<f32>,
    kh: vec3<f32>,
    normal_active: bool,
    inside_cone: bool,
};

fn contact_dirs(c: Contact) -> mat3x3<f32> {
    let n = c.normal.xyz;
    let t = tangent_of(n);
    return mat3x3<f32>(t, cross(n, t), n);
}

fn contact_c0(c: Contact) -> vec3<f32> {
    return vec3<f32>(c.normal.w, c.arm_a.w, c.arm_b.w);
}

fn contact_forces(c: Contact) -> ContactForce {
    let point_a = body_delta_p(c.body_a) + cross(body_delta_theta(c.body_a), c.arm_a.xyz);
    let point_b = body_delta_p(c.body_b) + cross(body_delta_theta(c.body_b), c.arm_b.xyz);
    let delta = point_b - point_a;
    let dirs = contact_dirs(c);
    var out: ContactForce;
    // Rows written out (no loop index into the vectors: keeps them in registers).
    let cc = contact_c0(c) + vec3<f32>(dot(dirs[0], delta), dot(dirs[1], delta), dot(dirs[2], delta));
    var f = c.k.xyz * cc + c.lambda.xyz;
    var kh = c.k.xyz;
    out.normal_active = f.z < 0.0;
    if (!out.normal_active) {
        f.z = 0.0;
        if (cc.z != 0.0) {
            kh.z = abs((0.0 - c.lambda.z) / cc.z);
        }
    }
    let mu = select(c.mu.y, c.mu.x, (c.flags & STICK) != 0u);
    let limit = mu * -f.z;
    let ft2 = f.x * f.x + f.y * f.y;
    out.inside_cone = ft2 <= limit * limit;
    if (!out.inside_cone) {
        let ft = sqrt(ft2);
        let s = select(0.0, limit / ft, ft > 0.0);
        f.x *= s;
        f.y *= s;
        if (cc.x != 0.0) {
            kh.x = abs((f.x - c.lambda.x) / cc.x);
        }
        if (cc.y != 0.0) {
            kh.y = abs((f.y - c.lambda.y) / cc.y);
        }
    }
    out.c = cc;
    out.f = f;
    out.kh = kh;
    return out;
}

fn add_contact(me: u32, c: Contact) {
    let cf = contact_forces(c);
    let dirs = contact_dirs(c);
    // J_r = ±(d_r, arm × d_r): the force term is ±(F, arm × F) with F = Σ f_r d_r.
    let side_a = c.body_a == me;
    let arm = select(c.arm_b.xyz, c.arm_a.xyz, side_a);
    let force = (dirs[0] * cf.f[0] + dirs[1] * cf.f[1] + dirs[2] * cf.f[2]) * select(1.0, -1.0, side_a);
    Fl -= force;
    Fa -= cross(arm, force);
    add_contact_rows(dirs, cf.kh, arm);
}

// ------------------------------------------------------------------ joints

// (Their rows, per-step kernels and dual update: joints.wgsl.)

// Column norms of ½(f rᵀ + r fᵀ) − (f·r) I (math::lever_geometric_stiffness).
fn lever_gs(f: vec3<f32>, r: vec3<f32>) -> vec3<f32> {
    let fr = dot(f, r);
    var out = vec3<f32>(0.0);
    for (var i = 0u; i < 3u; i++) {
        var c = (f * r[i] + r * f[i]) * 0.5;
        c[i] -= fr;
        out[i] = length(c);
    }
    return out;
}

fn add_joint(me: u32, ji: u32) {
    let j = joints[ji];
    let st = joint_states[ji];
    evaluate_joint(j, body_pose(j.body_a), body_pose(j.body_b));
    let is_a = j.body_a == me;
    var forces: array<f32, 8>;
    for (var r = 0u; r < n_rows; r++) {
        let c = row_error(r, st, j);
        let fk = row_force(rows[r], c, st.k[r], st.lambda[r]);
        forces[r] = fk.x;
        var jr = rows[r].jb;
        if (is_a) {
            jr = rows[r].ja;
        }
        add_force(jr, fk.x);
        add_outer(jr, fk.y);
    }
    let arm = select(arm_b_w, arm_a_w, is_a);
    if (n_point > 0u) {
        var fv = vec3<f32>(0.0);
        for (var r = 0u; r < n_point; r++) {
            fv += point_dirs[r] * forces[r];
        }
        add_diag3(lever_gs(fv, arm), true);
    }
    if (j.kind == K_DISTANCE || j.kind == K_ROPE) {
        let fn_ = forces[0];
        if (dist_len > 1e-6 && fn_ != 0.0) {
            let n = dist_dir;
            let g = max(vec3<f32>(1.0) - n * n, vec3<f32>(0.0));
            add_diag3(sqrt(g) * (abs(fn_) / dist_len), false);
        }
        add_diag3(lever_gs(dist_dir * forces[0], arm), true);
    }
}

// ------------------------------------------------------------------ entry points

// The system of body i is H Δx = f (Eq. 4–6) at the current iterates: the inertial part
// (begin_body), the sum over the body's constraint rows (add_items, split between lanes in
// the primal sweep) and the 6×6 solve (finish_body).

fn clear_system() {
    let z = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    Hll = z;
    Hal = z;
    Haa = z;
    Fl = vec3<f32>(0.0);
    Fa = vec3<f32>(0.0);
}

// Mass blocks m/h², R I Rᵀ/h² and the inertial force toward y.
fn begin_body(i: u32) {
    let inv_h2 = 1.0 / (params.dt * params.dt);
    let it = iterate[i];
    let m = masses[i];
    let iw = world_inertia(m, it.q);
    let y = inertial[i];
    let mh = m.mass * inv_h2;
    Hll = mat3x3<f32>(vec3<f32>(mh, 0.0, 0.0), vec3<f32>(0.0, mh, 0.0), vec3<f32>(0.0, 0.0, mh));
    Hal = mat3x3<f32>(vec3<f32>(0.0), vec3<f32>(0.0), vec3<f32>(0.0));
    Haa = iw * inv_h2;
    Fl = -(it.dp.xyz - y.y.xyz) * mh;
    Fa = -(iw * it.dtheta.xyz - y.hl.xyz) * inv_h2;
}

// Adds the constraints first, first + stride, … of body i, counted in record slots: its
// contact items (each 1 << contact_slots_log2 slots: a pair's four where the device finds
// the contacts), then its joints. So the lanes share a body's points as they would share
// a list of records; a pair's empty slots are skipped.
fn add_items(i: u32, first: u32, stride: u32) {
    let lo = adj_offsets[i];
    let len = adj_offsets[i + 1u] - lo;
    // The contact items come first (`adj_sort`): their count, by bisection where the list
    // holds both kinds.
    var contacts = len;
    if (JOINTS && len > 0u && (adj_items[lo + len - 1u] & 1u) != 0u) {
        var a = 0u;
        contacts = len - 1u;
        while (a < contacts) {
            let mid = (a + contacts) / 2u;
            if ((adj_items[lo + mid] & 1u) == 0u) {
                a = mid + 1u;
            } else {
                contacts = mid;
            }
        }
    }
    let shift = params.contact_slots_log2;
    let contact_slots = contacts << shift;
    let slots = contact_slots + len - contacts;
    for (var v = first; v < slots; v += stride) {
        if (v < contact_slots) {
            let r = ((adj_items[lo + (v >> shift)] >> 1u) << shift) + (v & ((1u << shift) - 1u));
            let c = load_record(r);
            if (c.body_a != WORLD) {
                add_contact(i, c);
            }
        } else if (JOINTS) {
            add_joint(i, adj_items[lo + contacts + v - contact_slots] >> 1u);
        }
    }
}

// Solves the assembled system; the new iterate (the old one when the solve fails).
fn finish_body(i: u32) -> Iterate {
    let it = iterate[i];
    if (!solve_ldlt()) {
        return it;
    }
    let dp = it.dp.xyz + vec3<f32>(F[0], F[1], F[2]);
    let qn = quat_add(it.q, vec3<f32>(F[3], F[4], F[5]));
    let q0 = poses[i].q;
    return Iterate(vec4<f32>(dp, 0.0), vec4<f32>(quat_sub(qn, q0), 0.0), qn);
}

// The rows of the attachments of body i, with their vertices at the iterate
// (pipeline::attachments::add_body_rows): force F = k (C − α C₀) + λ and its torque, the
// rows' Jacobians with their penalties, the lever's geometric stiffness.
fn add_attachments(i: u32) {
    if (i + 1u >= arrayLength(&att_body_offsets)) {
        return;
    }
    let pose = body_pose(i);
    for (var k = att_body_offsets[i]; k < att_body_offsets[i + 1u]; k++) {
        let a = att_records[att_body_items[k]];
        let x = soft_verts[a.vertex].p.xyz + soft_disp[a.vertex].xyz;
        let arm = qrot(pose.q, a.anchor.xyz);
        let c = x - (pose.p.xyz + arm);
        let force = a.k.xyz * (c - params.alpha * a.c0.xyz) + a.lambda.xyz;
        Fl += force;
        Fa += cross(arm, force);
        for (var r = 0u; r < 3u; r++) {
            var e = vec3<f32>(0.0);
            e[r] = 1.0;
            add_outer(vec6(-e, cross(e, arm)), a.k[r]);
        }
        add_diag3(lever_gs(force, arm), true);
    }
}

// The terms the deformables' contact rows put on body i (gathered before the sweep).
fn add_soft_contact(i: u32) {
    let o = 12u * i;
    if (o + 11u > arrayLength(&soft_contact_terms)) {
        return;
    }
    Hll += mat3x3<f32>(soft_contact_terms[o].xyz, soft_contact_terms[o + 1u].xyz, soft_contact_terms[o + 2u].xyz);
    Hal += mat3x3<f32>(soft_contact_terms[o + 3u].xyz, soft_contact_terms[o + 4u].xyz, soft_contact_terms[o + 5u].xyz);
    Haa += mat3x3<f32>(soft_contact_terms[o + 6u].xyz, soft_contact_terms[o + 7u].xyz, soft_contact_terms[o + 8u].xyz);
    Fl += soft_contact_terms[o + 9u].xyz;
    Fa += soft_contact_terms[o + 10u].xyz;
}

fn solve_body(i: u32) -> Iterate {
    begin_body(i);
    add_items(i, 0u, 1u);
    add_soft_contact(i);
    add_attachments(i);
    return finish_body(i);
}

// Lanes per body in the primal sweep: a body's constraint rows are split between LANES
// invocations (item a goes to lane a mod LANES), their partial systems are summed in
// workgroup memory in a fixed order (deterministic), and one lane solves. One invocation
// per body would leave each invocation a serial loop over all of its rows (~50 in a
// pile) with a few thousand bodies per colour: too little parallelism to hide latency.
// 8 lanes measured fastest on an H100 (the 110,000-box pile's primal at 4 iterations:
// 4.6–4.8 ms with 8, 5.3–5.8 with 16, 7.6 with 32; BENCHMARKS.md).
const PRIMAL_WG: u32 = 64u;
const LANES: u32 = 8u;
const BODIES_PER_GROUP: u32 = 8u; // PRIMAL_WG / LANES; coloring.wgsl sizes the dispatch with it
const PARTS: u32 = 33u;           // Hll, Hal, Haa (9 each), Fl, Fa (3 each)
var<workgroup> partial: array<array<f32, PARTS>, PRIMAL_WG>;
var<workgroup> total: array<array<f32, PARTS>, BODIES_PER_GROUP>;

// Writes this invocation's partial system to workgroup memory. Every index into the
// private blocks is a constant: a loop over them would push the blocks into local memory
// for the whole kernel.
fn put3(li: u32, o: u32, v: vec3<f32>) {
    partial[li][o] = v.x;
    partial[li][o + 1u] = v.y;
    partial[li][o + 2u] = v.z;
}

fn store_partial(li: u32) {
    put3(li, 0u, Hll[0]);
    put3(li, 3u, Hll[1]);
    put3(li, 6u, Hll[2]);
    put3(li, 9u, Hal[0]);
    put3(li, 12u, Hal[1]);
    put3(li, 15u, Hal[2]);
    put3(li, 18u, Haa[0]);
    put3(li, 21u, Haa[1]);
    put3(li, 24u, Haa[2]);
    put3(li, 27u, Fl);
    put3(li, 30u, Fa);
}

// The bodies of the current colour, BODIES_PER_GROUP per workgroup, solved in place: no
// two bodies of a colour share a constraint, so none reads an iterate this dispatch writes.
@compute @workgroup_size(PRIMAL_WG)
fn primal(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let range = ranges[color.index];
    let local_body = li / LANES;
    let lane = li % LANES;
    let k = (wid.y * nwg.x + wid.x) * BODIES_PER_GROUP + local_body;
    let live = k < range.y;
    var i = 0u;
    clear_system();
    if (live) {
        i = color_bodies[range.x + k];
        add_items(i, lane, LANES);
    }
    store_partial(li);
    workgroupBarrier();
    for (var p = lane; p < PARTS; p += LANES) {
        var sum = 0.0;
        for (var l = 0u; l < LANES; l++) {
            sum += partial[local_body * LANES + l][p];
        }
        total[local_body][p] = sum;
    }
    workgroupBarrier();
    if (live && lane == 0u) {
        begin_body(i);
        let t = total[local_body];
        Hll += mat3x3<f32>(vec3<f32>(t[0], t[1], t[2]), vec3<f32>(t[3], t[4], t[5]), vec3<f32>(t[6], t[7], t[8]));
        Hal += mat3x3<f32>(vec3<f32>(t[9], t[10], t[11]), vec3<f32>(t[12], t[13], t[14]), vec3<f32>(t[15], t[16], t[17]));
        Haa += mat3x3<f32>(vec3<f32>(t[18], t[19], t[20]), vec3<f32>(t[21], t[22], t[23]), vec3<f32>(t[24], t[25], t[26]));
        Fl += vec3<f32>(t[27], t[28], t[29]);
        Fa += vec3<f32>(t[30], t[31], t[32]);
        if (COUPLED) {
            add_soft_contact(i);
            add_attachments(i);
        }
        iterate[i] = finish_body(i);
    }
}

// One body of the serial fallback group of the colouring: slot 64 + k solves its k-th
// member in place (one dispatch per member, in body-index order: Gauss–Seidel). One body per
// invocation keeps every invocation short (llvmpipe caps loop iterations per invocation).
@compute @workgroup_size(1)
fn primal_serial() {
    let range = ranges[64];
    let k = color.index - 64u;
    if (k >= range.y) {
        return;
    }
    let i = color_bodies[range.x + k];
    iterate[i] = solve_body(i);
}

// Dual update of one contact (λ = clamped force; k ramps while inside the bounds).
@compute @workgroup_size(64)
fn dual_contacts(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // 2-D grid: one dispatch dimension holds at most 65,535 workgroups.
    let ci = grid_index(gid, nwg);
    if (ci >= params.n_contacts) {
        return;
    }
    if (record_body_a(ci) == WORLD) {
        return; // an empty slot of a pair (contact_narrow.wgsl)
    }
    var c = load_record(ci);
    let cf = contact_forces(c);
    c.lambda = clamp(cf.f, vec3<f32>(-params.lambda_max), vec3<f32>(params.lambda_max));
    let beta = params.beta_linear;
    if (cf.normal_active) {
        c.k.z = min(c.k.z + beta * abs(cf.c.z), params.k_max);
    }
    if (cf.inside_cone) {
        c.flags |= INSIDE_CONE;
        c.k.x = min(c.k.x + beta * abs(cf.c.x), params.k_max);
        c.k.y = min(c.k.y + beta * abs(cf.c.y), params.k_max);
    } else {
        c.flags &= ~(STICK | INSIDE_CONE);
    }
    store_contact_dual(ci, c);
}
