// The momentum projection of isolated islands on the device
// (pipeline::integration::IslandMomentum on the CPU, where its formulas are derived): an
// island of bodies that touches nothing fixed must end the step with the momentum
// P* = Σ m vᵗ + h (m g + F) and the angular momentum L* = Σ xᵗ × pᵢ* + I(qᵗ) ωᵗ + h τ it
// started with, and its velocities get the rigid correction Δv = a + b × (x − c), Δω = b
// that restores both. The islands are `islands.wgsl`'s (run after `end_bodies`).
//
// The island sums must not depend on the order the bodies add in (the same bits on every
// run) and must not cancel in f32: each island adds in 64-bit fixed point with integer
// atomics (exact, so commutative), at a scale per island and quantity that its largest
// term sets (an `atomicMax` on the bit pattern of a non-negative float, its order).
// Angular momenta are taken about the island's root body's start position, not the
// origin, so that an island far from the origin loses no digits.
// common.wgsl is prepended.
//
// Dispatch order: momentum_targets (bodies, before `end_bodies`); after the islands:
// momentum_clear, momentum_bound, momentum_add, momentum_inertia_bound,
// momentum_inertia_add, momentum_apply (bodies).

// Per solved body, from its start state: P* (xyz), I(qᵗ) ωᵗ + h τ (xyz) and xᵗ (xyz).
struct Target {
    p: vec4<f32>,
    spin: vec4<f32>,
    x: vec4<f32>,
};

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> poses: array<Pose>;
@group(0) @binding(2) var<storage, read> masses: array<Mass>;
@group(0) @binding(3) var<storage, read_write> velocities: array<Velocity>;
@group(0) @binding(4) var<storage, read> forces: array<Force>;
@group(0) @binding(5) var<storage, read> body_flags: array<u32>;
// Per body: its island's root, bit 31 if the body is anchored; NONE if not solved.
@group(0) @binding(6) var<storage, read> islands: array<u32>;
// Per body: its union–find parent; a root's has bit 31 set if its island is anchored.
@group(0) @binding(7) var<storage, read_write> parent: array<atomic<u32>>;
// What the CPU reads back (integration.wgsl `write_body_out`): the corrected velocities
// go to the velocity block, after every body's pose.
@group(0) @binding(8) var<storage, read_write> body_out: array<u32>;
@group(0) @binding(9) var<storage, read_write> targets: array<Target>;
// Per island root, SUM_WORDS words: the sums (VALUES values, each as low and high word of
// a two's-complement 64-bit integer), the largest term of each quantity, the body count.
@group(0) @binding(10) var<storage, read_write> sums: array<atomic<u32>>;

const NONE: u32 = 0xffffffffu;
const ANCHORED: u32 = 0x80000000u;
const POSE_OUT_WORDS: u32 = 7u;
const VELOCITY_OUT_WORDS: u32 = 6u;
const SOLVED: u32 = 1u;

// The quantities: mass (1 value), first moment about the reference (3), momentum error
// (3), angular momentum error about the reference (3), inertia about the centre of mass
// (6: xx, yy, zz, xy, xz, yz). Value index of each quantity's first value.
const MASS: u32 = 0u;
const MOMENT: u32 = 1u;
const P_ERROR: u32 = 4u;
const L_ERROR: u32 = 7u;
const INERTIA: u32 = 10u;
const VALUES: u32 = 16u;
const MAXIMA: u32 = 32u; // + quantity (0..5)
const COUNT: u32 = 37u;
const SUM_WORDS: u32 = 40u;

// The root of body i's island if that island is anchored nowhere, else NONE (also for an
// invocation past the last body).
fn isolated_root(i: u32) -> u32 {
    if i >= params.n_bodies {
        return NONE;
    }
    let r = islands[i];
    if r == NONE {
        return NONE;
    }
    let root = r & ~ANCHORED;
    if (atomicLoad(&parent[root]) & ANCHORED) != 0u {
        return NONE;
    }
    return root;
}

// 2^-32: scaling by a power of two is exact (a multiplication is correctly rounded, a
// division need not be).
const TWO_TO_MINUS_32: f32 = 2.3283064365386963e-10;

// The exponent k of the fixed-point scale 2^k of quantity `q` at `root`: its largest
// term times the island's body count bounds any partial sum, which the scale keeps below
// 2^61 (clamped to f32's normal range).
fn scale_of(root: u32, q: u32) -> i32 {
    let largest = bitcast<f32>(atomicLoad(&sums[root * SUM_WORDS + MAXIMA + q]));
    let bound = largest * f32(atomicLoad(&sums[root * SUM_WORDS + COUNT]));
    if !(bound > 0.0) {
        return 0;
    }
    return clamp(61 - frexp(bound).exp, -126, 126);
}

// `v × 2^k` as a two's-complement 64-bit integer (low word, high word), truncated
// towards zero. Below 2^31 through i32; above, `t` is an integer of at most 24
// significant bits, so its split at 2^32 is exact in f32.
fn to_fixed(v: f32, k: i32) -> vec2<u32> {
    let t = trunc(v * ldexp(1.0, k));
    if abs(t) < 2147483648.0 {
        let i = i32(t);
        return vec2<u32>(bitcast<u32>(i), select(0u, NONE, i < 0));
    }
    let high = floor(t * TWO_TO_MINUS_32);
    let low = t - high * 4294967296.0;
    return vec2<u32>(u32(low), bitcast<u32>(i32(high)));
}

// The 64-bit integer (low, high) as a float (its magnitude rounded once per word).
fn from_fixed(w: vec2<u32>) -> f32 {
    var low = w.x;
    var high = w.y;
    let negative = (high >> 31u) != 0u;
    if negative {
        low = ~low + 1u;
        high = ~high + select(0u, 1u, low == 0u);
    }
    let magnitude = f32(high) * 4294967296.0 + f32(low);
    return select(magnitude, -magnitude, negative);
}

fn add_value(root: u32, k: u32, v: f32, scale: i32) {
    let f = to_fixed(v, scale);
    let at = root * SUM_WORDS + 2u * k;
    let old = atomicAdd(&sums[at], f.x);
    // A wrapped low word carries one into the high word.
    atomicAdd(&sums[at + 1u], f.y + select(0u, 1u, old + f.x < old));
}

fn value(root: u32, k: u32, scale: i32) -> f32 {
    let at = root * SUM_WORDS + 2u * k;
    return from_fixed(vec2<u32>(atomicLoad(&sums[at]), atomicLoad(&sums[at + 1u]))) * ldexp(1.0, -scale);
}

fn bound_term(root: u32, q: u32, largest: f32) {
    atomicMax(&sums[root * SUM_WORDS + MAXIMA + q], bitcast<u32>(largest));
}

fn largest3(v: vec3<f32>) -> f32 {
    let a = abs(v);
    return max(a.x, max(a.y, a.z));
}

// A body's terms of the first sums: mass, m (x − o), its momentum error and its angular
// momentum error about o, the root's start position. With d = x − xᵗ, the error
// (x − o) × p + I ω − (xᵗ − o) × p* − spin* is (xᵗ − o) × (p − p*) + d × p + I ω − spin*:
// no large products cancel.
struct Terms {
    mass: f32,
    moment: vec3<f32>,
    p_error: vec3<f32>,
    l_error: vec3<f32>,
};

fn terms_of(i: u32, root: u32) -> Terms {
    let m = masses[i];
    let pose = poses[i];
    let vel = velocities[i];
    let goal = targets[i];
    let o = targets[root].x.xyz;
    let x = pose.p.xyz;
    let p = vel.v.xyz * m.mass;
    let dp = p - goal.p.xyz;
    let spin = world_inertia(m, pose.q) * vel.w.xyz;
    let l = cross(goal.x.xyz - o, dp) + cross(x - goal.x.xyz, p) + (spin - goal.spin.xyz);
    return Terms(m.mass, (x - o) * m.mass, dp, l);
}

// The island's mass and centre of mass relative to o, from the first sums.
fn centre_of(root: u32) -> vec4<f32> {
    let s = scale_of(root, 0u);
    let mass = value(root, MASS, s);
    let sm = scale_of(root, 1u);
    let moment = vec3<f32>(value(root, MOMENT, sm), value(root, MOMENT + 1u, sm), value(root, MOMENT + 2u, sm));
    return vec4<f32>(moment / mass, mass);
}

// A body's inertia about the island's centre of mass: I(q) + m (|r|² E − r rᵀ), as
// (xx, yy, zz) and (xy, xz, yz); the diagonal as sums of two squares, which do not
// cancel (|r|² − r_x² would, along a long chain).
fn inertia_terms(i: u32, root: u32) -> array<vec3<f32>, 2> {
    let m = masses[i];
    let pose = poses[i];
    let r = (pose.p.xyz - targets[root].x.xyz) - centre_of(root).xyz;
    let own = world_inertia(m, pose.q);
    let q = r * r;
    let diagonal = vec3<f32>(own[0].x, own[1].y, own[2].z) + m.mass * vec3<f32>(q.y + q.z, q.x + q.z, q.x + q.y);
    let off = vec3<f32>(own[1].x, own[2].x, own[2].y) - m.mass * vec3<f32>(r.x * r.y, r.x * r.z, r.y * r.z);
    return array<vec3<f32>, 2>(diagonal, off);
}

@compute @workgroup_size(64)
fn momentum_targets(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    if i >= params.n_bodies || (body_flags[i] & SOLVED) == 0u {
        return;
    }
    let m = masses[i];
    let pose = poses[i];
    let vel = velocities[i];
    let f = forces[i];
    let h = params.dt;
    let p = vel.v.xyz * m.mass + (params.gravity.xyz * m.mass + f.force.xyz) * h;
    let spin = world_inertia(m, pose.q) * vel.w.xyz + f.torque.xyz * h;
    targets[i] = Target(vec4<f32>(p, 0.0), vec4<f32>(spin, 0.0), vec4<f32>(pose.p.xyz, 0.0));
}

// Roots empty their sums. (A body this step froze, its result not finite, anchors its
// island already, `island_flatten`, as a fixed body would: the CPU's `correct` does the same.)
@compute @workgroup_size(64)
fn momentum_clear(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    if i >= params.n_bodies || islands[i] == NONE {
        return;
    }
    let root = islands[i] & ~ANCHORED;
    if root == i {
        for (var k = 0u; k < SUM_WORDS; k++) {
            atomicStore(&sums[i * SUM_WORDS + k], 0u);
        }
    }
}

@compute @workgroup_size(64)
fn momentum_bound(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    let root = isolated_root(i);
    if root == NONE {
        return;
    }
    let t = terms_of(i, root);
    bound_term(root, 0u, t.mass);
    bound_term(root, 1u, largest3(t.moment));
    bound_term(root, 2u, largest3(t.p_error));
    bound_term(root, 3u, largest3(t.l_error));
    atomicAdd(&sums[root * SUM_WORDS + COUNT], 1u);
}

@compute @workgroup_size(64)
fn momentum_add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    let root = isolated_root(i);
    if root == NONE {
        return;
    }
    let t = terms_of(i, root);
    add_value(root, MASS, t.mass, scale_of(root, 0u));
    let s = vec3<i32>(scale_of(root, 1u), scale_of(root, 2u), scale_of(root, 3u));
    for (var k = 0u; k < 3u; k++) {
        add_value(root, MOMENT + k, t.moment[k], s.x);
        add_value(root, P_ERROR + k, t.p_error[k], s.y);
        add_value(root, L_ERROR + k, t.l_error[k], s.z);
    }
}

@compute @workgroup_size(64)
fn momentum_inertia_bound(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    let root = isolated_root(i);
    if root == NONE {
        return;
    }
    let t = inertia_terms(i, root);
    bound_term(root, 4u, max(largest3(t[0]), largest3(t[1])));
}

@compute @workgroup_size(64)
fn momentum_inertia_add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    let root = isolated_root(i);
    if root == NONE {
        return;
    }
    let t = inertia_terms(i, root);
    let s = scale_of(root, 4u);
    for (var k = 0u; k < 3u; k++) {
        add_value(root, INERTIA + k, t[0][k], s);
        add_value(root, INERTIA + 3u + k, t[1][k], s);
    }
}

// Each body of an isolated island reads its island's sums (the same bits for all of them)
// and takes the correction: a = −ΔP/M, b = I_c⁻¹(−ΔL_c) with ΔL_c = ΔL_o − (c − o) × ΔP
// the angular error about the centre of mass. The inverse is of I_c over its trace, so
// that a heavy, wide island's determinant stays in range; a singular I_c gets no
// rotation, as on the CPU.
@compute @workgroup_size(64)
fn momentum_apply(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    let root = isolated_root(i);
    if root == NONE {
        return;
    }
    let centre = centre_of(root);
    let c = centre.xyz;
    let sp = scale_of(root, 2u);
    let sl = scale_of(root, 3u);
    let si = scale_of(root, 4u);
    let dp = vec3<f32>(value(root, P_ERROR, sp), value(root, P_ERROR + 1u, sp), value(root, P_ERROR + 2u, sp));
    let dl = vec3<f32>(value(root, L_ERROR, sl), value(root, L_ERROR + 1u, sl), value(root, L_ERROR + 2u, sl)) - cross(c, dp);
    var e: array<f32, 6>;
    for (var k = 0u; k < 6u; k++) {
        e[k] = value(root, INERTIA + k, si);
    }
    let trace = e[0] + e[1] + e[2];
    let a = -dp / centre.w;
    var b = vec3<f32>(0.0);
    if trace > 0.0 {
        let inertia = mat3x3<f32>(
            vec3<f32>(e[0], e[3], e[4]),
            vec3<f32>(e[3], e[1], e[5]),
            vec3<f32>(e[4], e[5], e[2]),
        ) * (1.0 / trace);
        let det = determinant(inertia);
        // Finite and positive (the test on the bits: compilers may assume no infinity).
        if det > 0.0 && (bitcast<u32>(det) & 0x7f800000u) != 0x7f800000u {
            let rhs = -dl / trace;
            // Cramer's rule: the columns' cross products are the inverse's rows times det.
            let c0 = inertia[0];
            let c1 = inertia[1];
            let c2 = inertia[2];
            b = vec3<f32>(dot(cross(c1, c2), rhs), dot(cross(c2, c0), rhs), dot(cross(c0, c1), rhs)) / det;
        }
    }
    let r = (poses[i].p.xyz - targets[root].x.xyz) - c;
    let vel = velocities[i];
    let v = vel.v.xyz + a + cross(b, r);
    var w = vel.w.xyz + b;
    // `end_bodies`' speed cap holds after the projection too.
    let ws = length(w);
    if ws > params.max_angular_speed {
        w *= params.max_angular_speed / ws;
    }
    velocities[i] = Velocity(vec4<f32>(v, 0.0), vec4<f32>(w, 0.0));
    let words = array<u32, VELOCITY_OUT_WORDS>(
        bitcast<u32>(v.x), bitcast<u32>(v.y), bitcast<u32>(v.z),
        bitcast<u32>(w.x), bitcast<u32>(w.y), bitcast<u32>(w.z),
    );
    let at = params.n_bodies * POSE_OUT_WORDS + i * VELOCITY_OUT_WORDS;
    for (var k = 0u; k < VELOCITY_OUT_WORDS; k++) {
        body_out[at + k] = words[k];
    }
}
