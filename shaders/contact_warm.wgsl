// The contacts' warm start on the device (src/pipeline/warm_start.rs is the CPU's, with
// the same formulas): `warm_start_contacts` turns this step's contact points (uploaded by
// collision detection, with each point's index in the previous step) into contact records
// that carry what the previous record held (Eq. 19: λ ← αγλ, k ← max(γk, k_start) plus
// the load-aware floor; sticking contacts keep their anchors); `store_contact_warm`, after
// the iterations, writes what each record carries to the next step. The carried state
// never leaves the device: two buffers alternate, the previous step's read and this
// step's written.

struct ContactPoint {
    body_a: u32,
    body_b: u32,
    prev: u32,
    c0_n: f32,
    normal: vec4<f32>, // xyz normal A→B, w tangent row's start error (fresh anchors)
    arm_a: vec4<f32>,  // w bitangent row's start error (fresh anchors)
    arm_b: vec4<f32>,
};

// What a record carries to the next step: k (w: the floor share, not carried), λ and the
// flags, the anchors in the bodies' frames.
struct ContactWarm {
    k: vec4<f32>,
    lambda_flags: vec4<u32>,
    anchor_a: vec4<f32>,
    anchor_b: vec4<f32>,
};

const STICK: u32 = 1u;
const INSIDE_CONE: u32 = 2u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> poses: array<Pose>;
@group(0) @binding(2) var<storage, read> masses: array<Mass>;
// Points, previous and current carried state: 64-byte records, 2 << contact_shift per
// binding; records: 96 bytes, 1 << contact_shift per binding (contact_chunks.wgsl).
@group(0) @binding(3) var<storage, read> points0: array<ContactPoint>;
@group(0) @binding(4) var<storage, read> points1: array<ContactPoint>;
@group(0) @binding(5) var<storage, read> points2: array<ContactPoint>;
@group(0) @binding(6) var<storage, read> points3: array<ContactPoint>;
@group(0) @binding(7) var<storage, read_write> contacts0: array<Contact>;
@group(0) @binding(8) var<storage, read_write> contacts1: array<Contact>;
@group(0) @binding(9) var<storage, read_write> contacts2: array<Contact>;
@group(0) @binding(10) var<storage, read_write> contacts3: array<Contact>;
@group(0) @binding(11) var<storage, read_write> contacts4: array<Contact>;
@group(0) @binding(12) var<storage, read_write> contacts5: array<Contact>;
@group(0) @binding(13) var<storage, read_write> contacts6: array<Contact>;
@group(0) @binding(14) var<storage, read_write> contacts7: array<Contact>;
@group(0) @binding(15) var<storage, read> carried0: array<ContactWarm>;
@group(0) @binding(16) var<storage, read> carried1: array<ContactWarm>;
@group(0) @binding(17) var<storage, read> carried2: array<ContactWarm>;
@group(0) @binding(18) var<storage, read> carried3: array<ContactWarm>;
@group(0) @binding(19) var<storage, read_write> next0: array<ContactWarm>;
@group(0) @binding(20) var<storage, read_write> next1: array<ContactWarm>;
@group(0) @binding(21) var<storage, read_write> next2: array<ContactWarm>;
@group(0) @binding(22) var<storage, read_write> next3: array<ContactWarm>;

fn half_shift() -> u32 {
    return min(params.contact_shift + 1u, 31u);
}

fn load_point(i: u32) -> ContactPoint {
    let j = i & ((1u << half_shift()) - 1u);
    switch (i >> half_shift()) {
        case 0u: { return points0[j]; }
        case 1u: { return points1[j]; }
        case 2u: { return points2[j]; }
        default: { return points3[j]; }
    }
}

fn load_carried(i: u32) -> ContactWarm {
    let j = i & ((1u << half_shift()) - 1u);
    switch (i >> half_shift()) {
        case 0u: { return carried0[j]; }
        case 1u: { return carried1[j]; }
        case 2u: { return carried2[j]; }
        default: { return carried3[j]; }
    }
}

fn store_anchors(i: u32, a: vec4<f32>, b: vec4<f32>) {
    let j = i & ((1u << half_shift()) - 1u);
    switch (i >> half_shift()) {
        case 0u: { next0[j].anchor_a = a; next0[j].anchor_b = b; }
        case 1u: { next1[j].anchor_a = a; next1[j].anchor_b = b; }
        case 2u: { next2[j].anchor_a = a; next2[j].anchor_b = b; }
        default: { next3[j].anchor_a = a; next3[j].anchor_b = b; }
    }
}

fn store_duals(i: u32, k: vec4<f32>, lambda_flags: vec4<u32>) {
    let j = i & ((1u << half_shift()) - 1u);
    switch (i >> half_shift()) {
        case 0u: { next0[j].k = k; next0[j].lambda_flags = lambda_flags; }
        case 1u: { next1[j].k = k; next1[j].lambda_flags = lambda_flags; }
        case 2u: { next2[j].k = k; next2[j].lambda_flags = lambda_flags; }
        default: { next3[j].k = k; next3[j].lambda_flags = lambda_flags; }
    }
}

fn store_record(i: u32, c: Contact) {
    let j = i & ((1u << params.contact_shift) - 1u);
    switch (i >> params.contact_shift) {
        case 0u: { contacts0[j] = c; }
        case 1u: { contacts1[j] = c; }
        case 2u: { contacts2[j] = c; }
        case 3u: { contacts3[j] = c; }
        case 4u: { contacts4[j] = c; }
        case 5u: { contacts5[j] = c; }
        case 6u: { contacts6[j] = c; }
        default: { contacts7[j] = c; }
    }
}

// An empty slot (contact_narrow.wgsl): only its bodies are written, since every reader
// of a record looks at them first (`record_body_a`) and reads no further.
fn store_empty(i: u32) {
    let j = i & ((1u << params.contact_shift) - 1u);
    switch (i >> params.contact_shift) {
        case 0u: { contacts0[j].body_a = WORLD; contacts0[j].body_b = WORLD; }
        case 1u: { contacts1[j].body_a = WORLD; contacts1[j].body_b = WORLD; }
        case 2u: { contacts2[j].body_a = WORLD; contacts2[j].body_b = WORLD; }
        case 3u: { contacts3[j].body_a = WORLD; contacts3[j].body_b = WORLD; }
        case 4u: { contacts4[j].body_a = WORLD; contacts4[j].body_b = WORLD; }
        case 5u: { contacts5[j].body_a = WORLD; contacts5[j].body_b = WORLD; }
        case 6u: { contacts6[j].body_a = WORLD; contacts6[j].body_b = WORLD; }
        default: { contacts7[j].body_a = WORLD; contacts7[j].body_b = WORLD; }
    }
}

@compute @workgroup_size(64)
fn warm_start_contacts(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    if (i >= params.n_contacts) {
        return;
    }
    warm_record(i, load_point(i));
}

// Record i from point p and what p's previous record carried (the formulas of
// pipeline::warm_start::contacts).
fn warm_record(i: u32, p: ContactPoint) {
    let ma = masses[p.body_a];
    let mb = masses[p.body_b];
    let mu_s = sqrt(ma.friction.x * mb.friction.x);
    let mu_d = sqrt(ma.friction.y * mb.friction.y);
    let floor_mass = max(ma.mass, mb.mass);
    let pose_a = poses[p.body_a];
    let pose_b = poses[p.body_b];
    let n = p.normal.xyz;
    // The CPU's `math::tangent_basis`.
    let t = tangent_of(n);
    let bt = cross(n, t);
    let alpha = params.alpha;
    var c0 = vec3<f32>(p.normal.w, p.arm_a.w, p.c0_n);
    let carried = p.prev != NEW_POINT && p.prev < params.n_prev_contacts;
    var w = ContactWarm();
    if (carried) {
        w = load_carried(p.prev);
    }
    let stick = carried && (w.lambda_flags.w & INSIDE_CONE) != 0u;
    var anchor_a = qrot(qconj(pose_a.q), p.arm_a.xyz);
    var anchor_b = qrot(qconj(pose_b.q), p.arm_b.xyz);
    if (stick) {
        let anc_a = pose_a.p.xyz + qrot(pose_a.q, w.anchor_a.xyz);
        let anc_b = pose_b.p.xyz + qrot(pose_b.q, w.anchor_b.xyz);
        let gap = anc_b - anc_a;
        c0.x = (1.0 - alpha) * dot(t, gap);
        c0.y = (1.0 - alpha) * dot(bt, gap);
        anchor_a = qrot(qconj(pose_a.q), anc_a - pose_a.p.xyz);
        anchor_b = qrot(qconj(pose_b.q), anc_b - pose_b.p.xyz);
    }
    var lambda = vec3<f32>(0.0);
    var k = vec4<f32>(vec3<f32>(initial_penalty(floor_mass)), 0.0);
    if (carried) {
        lambda = bitcast<vec3<f32>>(w.lambda_flags.xyz) * alpha * params.gamma;
        k = vec4<f32>(warm_penalty(w.k.x, 0.0), warm_penalty(w.k.y, 0.0), warm_penalty(w.k.z - w.k.w, 0.0), 0.0);
        // Friction rows take no load-aware floor (they are bounded on both sides); the
        // normal row's floor is kept apart in k.w so it is not carried (see the CPU's).
        let k_floor = max(load_floor(lambda.z, params.contact_error_scale, floor_mass) - k.z, 0.0);
        k.z += k_floor;
        k.w = k_floor;
    }
    var c: Contact;
    c.body_a = p.body_a;
    c.body_b = p.body_b;
    c.flags = select(0u, STICK, !carried || stick);
    c.mu = vec2<f32>(mu_s, mu_d);
    c.normal = vec4<f32>(n, c0.x);
    c.arm_a = vec4<f32>(p.arm_a.xyz, c0.y);
    c.arm_b = vec4<f32>(p.arm_b.xyz, c0.z);
    c.k = k;
    c.lambda = lambda;
    store_record(i, c);
    store_anchors(i, vec4<f32>(anchor_a, 0.0), vec4<f32>(anchor_b, 0.0));
}

@compute @workgroup_size(64)
fn store_contact_warm(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    if (i >= params.n_contacts) {
        return;
    }
    if (record_body_a(i) == WORLD) {
        return; // an empty slot of a pair (contact_narrow.wgsl): nothing to carry
    }
    let c = load_record(i);
    store_duals(i, c.k, vec4<u32>(bitcast<vec3<u32>>(c.lambda), c.flags));
}
