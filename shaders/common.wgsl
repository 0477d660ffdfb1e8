// Shared by every kernel module (src/gpu.rs prepends this file to avbd.wgsl,
// coloring.wgsl and integration.wgsl): the step parameters, the per-body records and the
// quaternion helpers. Every record is the bytemuck struct of the CPU backend, uploaded
// unchanged; every formula mirrors the CPU's (src/math.rs, src/body.rs).

struct Params {
    dt: f32,
    alpha: f32,
    beta_linear: f32,
    beta_angular: f32,
    k_max: f32,
    lambda_max: f32,
    n_contacts: u32,
    n_joints: u32,
    n_bodies: u32,
    palette: u32,
    contact_shift: u32, // contacts per chunk = 1 << contact_shift
    max_groups: u32,
    max_angular_speed: f32,
    // The contacts' warm start (SolverConfig's fields of the same names).
    gamma: f32,
    k_start: f32,
    new_row_mass_ratio: f32,
    floor_mass_ratio: f32,
    contact_error_scale: f32,
    n_prev_contacts: u32, // contacts of the previous step (the carried state's length)
    n_pairs: u32,         // candidate pairs when the device finds the contacts (else 0)
    gravity: vec4<f32>,
    margin: f32,          // collision margin (SolverConfig::collision_margin)
    color_classes: u32,   // colour classes the colouring's re-greedy pass covers
    joint_error_scale: f32, // the joints' warm start (SolverConfig::joint_error_scale)
    // log2 of the contact records per contact item of the adjacency: 2 where the device
    // finds the contacts (an item is a pair, its records its four slots), else 0.
    contact_slots_log2: u32,
};

// The invocation's index in a dispatch of 64-wide workgroups on a 2-D grid: a dispatch
// past the per-dimension workgroup limit (65,535) runs as rows of `nwg.x` workgroups.
fn grid_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 64u;
}

struct Pose {
    p: vec4<f32>,
    q: vec4<f32>, // xyzw
};

// VelocityRecord: linear (xyz) and angular (xyz) velocity.
struct Velocity {
    v: vec4<f32>,
    w: vec4<f32>,
};

// External force (xyz) and torque (xyz) of `BodySet::forces`.
struct Force {
    force: vec4<f32>,
    torque: vec4<f32>,
};

// ContactRecord (src/rigid/contact.rs): written by contact_warm.wgsl, solved by avbd.wgsl.
// The frame [t, b, n] is a function of the normal (contact_dirs); the start errors ride in
// the vectors' w.
struct Contact {
    body_a: u32,
    body_b: u32,
    mu: vec2<f32>,      // static, dynamic friction
    normal: vec4<f32>,  // xyz normal A→B, w start error of row t (Eq. 18)
    arm_a: vec4<f32>,   // w: start error of row b
    arm_b: vec4<f32>,   // w: start error of row n
    k: vec4<f32>,       // penalties of rows t, b, n; w: the normal row's floor share
    lambda: vec3<f32>,
    flags: u32,         // with k and λ: the dual update writes the record's last 32 bytes
};

// A joint record as the kernels that read only its ends and flags see it (the constraint
// graph, the islands); the rest keeps the stride of the solver's `Joint` (avbd.wgsl).
struct JointHead {
    body_a: u32,
    body_b: u32,
    kind: u32,
    flags: u32,
    rest: array<vec4<f32>, 6>,
};

struct Mass {
    mass: f32,
    inv_mass: f32,
    // Static and dynamic friction of the body's collider.
    friction: vec2<f32>,
    inertia: vec4<f32>,
    frame: vec4<f32>,
};

struct Iterate {
    dp: vec4<f32>,
    dtheta: vec4<f32>,
    q: vec4<f32>,
};

struct Inertial {
    y: vec4<f32>,
    hl: vec4<f32>,
};

const WORLD: u32 = 0xffffffffu;
// A contact point's previous record index when it has none (rigid::contact::NEW_POINT).
const NEW_POINT: u32 = 0xffffffffu;
const INF: f32 = 3.4028235e38;

// ------------------------------------------------------------------ quaternions

fn qmul(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(
        a.w * b.xyz + b.w * a.xyz + cross(a.xyz, b.xyz),
        a.w * b.w - dot(a.xyz, b.xyz),
    );
}

fn qconj(q: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(-q.xyz, q.w);
}

fn qrot(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    let t = 2.0 * cross(q.xyz, v);
    return v + q.w * t + cross(q.xyz, t);
}

// Eq. 20: (2 qa qb⁻¹)_v on the short arc.
fn quat_sub(qa: vec4<f32>, qb: vec4<f32>) -> vec3<f32> {
    let d = qmul(qa, qconj(qb));
    let v = d.xyz * 2.0;
    return select(v, -v, d.w < 0.0);
}

// Eq. 21: normalize(q + ½ (0, w) q).
fn quat_add(q: vec4<f32>, w: vec3<f32>) -> vec4<f32> {
    let dq = qmul(vec4<f32>(w, 0.0), q);
    return normalize(q + dq * 0.5);
}

fn mat3_from_quat(q: vec4<f32>) -> mat3x3<f32> {
    return mat3x3<f32>(qrot(q, vec3<f32>(1.0, 0.0, 0.0)), qrot(q, vec3<f32>(0.0, 1.0, 0.0)), qrot(q, vec3<f32>(0.0, 0.0, 1.0)));
}

fn world_inertia(m: Mass, q: vec4<f32>) -> mat3x3<f32> {
    let r = mat3_from_quat(qmul(q, m.frame));
    let d = mat3x3<f32>(vec3<f32>(m.inertia.x, 0.0, 0.0), vec3<f32>(0.0, m.inertia.y, 0.0), vec3<f32>(0.0, 0.0, m.inertia.z));
    return r * d * transpose(r);
}

// glam's any_orthonormal_vector (Pixar ONB), with copysign semantics for the sign.
fn tangent_of(n: vec3<f32>) -> vec3<f32> {
    let sign = select(1.0, -1.0, (bitcast<u32>(n.z) >> 31u) == 1u);
    let a = -1.0 / (sign + n.z);
    let b = n.x * n.y * a;
    return vec3<f32>(b, sign + n.y * n.y * a, -n.y);
}
