// Integration on the GPU, before and after the iterations (AVBD Alg. 1 lines 3–4 and 37),
// one invocation per body: `begin_bodies` writes the inertial targets and the adaptive
// initial guess, `end_bodies` the velocities and poses. Poses, velocities and the last
// step's velocities stay resident on the device between steps; the CPU reads back once
// per step the poses packed in `body_out` (28 bytes a body, not 32), the velocities
// after them unless they stay on the device (24 bytes, not 32), and the bodies listed in
// `status`, and uploads only the bodies it changed.
//
// The formulas are those of src/pipeline/integration.rs, `begin_step` and the velocity
// update of `end_step`, on the same records.

// `body_flags`: bit 0 solved (dynamic, not frozen), bit 1 kinematic and not frozen.
const SOLVED: u32 = 1u;
const KINEMATIC: u32 = 2u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> poses: array<Pose>;
@group(0) @binding(2) var<storage, read> masses: array<Mass>;
@group(0) @binding(3) var<storage, read_write> velocities: array<Velocity>;
@group(0) @binding(4) var<storage, read_write> prev_velocities: array<Velocity>;
@group(0) @binding(5) var<storage, read> forces: array<Force>;
@group(0) @binding(6) var<storage, read> body_flags: array<u32>;
// The bodies whose result this step was not finite (the CPU freezes them): their count,
// the first FROZEN_ROOM of them (in no fixed order: the CPU sorts them), then per body 1
// if it is one of them (read back only when the count exceeds the room).
@group(0) @binding(7) var<storage, read_write> status: array<atomic<u32>>;
@group(0) @binding(8) var<storage, read_write> iterate: array<Iterate>;
@group(0) @binding(9) var<storage, read_write> inertial: array<Inertial>;
// What the CPU reads back, as `end_bodies` leaves it (every body, solved or not): per
// body its position (3 words) and rotation (4), then, after every body's pose, per body
// its linear and angular velocity (3 words each), which the CPU reads only when they do
// not stay on the device (`SolverConfig::gpu_velocity_readback`).
@group(0) @binding(10) var<storage, read_write> body_out: array<u32>;

const FROZEN_ROOM: u32 = 63u;
const POSE_OUT_WORDS: u32 = 7u;
const VELOCITY_OUT_WORDS: u32 = 6u;

fn write_body_out(i: u32) {
    // Moved as bits: no float operation between the records and the copy.
    let p = bitcast<vec4<u32>>(poses[i].p);
    let q = bitcast<vec4<u32>>(poses[i].q);
    let v = bitcast<vec4<u32>>(velocities[i].v);
    let w = bitcast<vec4<u32>>(velocities[i].w);
    let pose = array<u32, POSE_OUT_WORDS>(p.x, p.y, p.z, q.x, q.y, q.z, q.w);
    for (var k = 0u; k < POSE_OUT_WORDS; k++) {
        body_out[i * POSE_OUT_WORDS + k] = pose[k];
    }
    let vel = array<u32, VELOCITY_OUT_WORDS>(v.x, v.y, v.z, w.x, w.y, w.z);
    let at = params.n_bodies * POSE_OUT_WORDS + i * VELOCITY_OUT_WORDS;
    for (var k = 0u; k < VELOCITY_OUT_WORDS; k++) {
        body_out[at + k] = vel[k];
    }
}

// Exponent bits all set: infinite or NaN (WGSL lets compilers assume neither exists, so
// the test is on the bits, not on comparisons).
fn finite(v: vec4<f32>) -> bool {
    let e = bitcast<vec4<u32>>(v) & vec4<u32>(0x7f800000u);
    return all(e != vec4<u32>(0x7f800000u));
}

fn iterate_of(dp: vec3<f32>, q: vec4<f32>, q0: vec4<f32>) -> Iterate {
    return Iterate(vec4<f32>(dp, 0.0), vec4<f32>(quat_sub(q, q0), 0.0), q);
}

// Linear: y = xᵗ + h v + h² (g + F/m), the guess xᵗ + h v + h² (g ã + F/m) with
// ã = clamp(a·ĝ/|g|, 0, 1) from the last step's acceleration. Rotational: h Lᵗ + h² τ,
// guess q ⊕ h ω.
@compute @workgroup_size(64)
fn begin_bodies(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    if (i >= params.n_bodies) {
        return;
    }
    let h = params.dt;
    let q0 = poses[i].q;
    let v = velocities[i].v.xyz;
    let w = velocities[i].w.xyz;
    let flags = body_flags[i];
    if ((flags & SOLVED) == 0u) {
        // Kinematic bodies follow their velocity; static and frozen ones stay.
        if ((flags & KINEMATIC) != 0u) {
            iterate[i] = iterate_of(v * h, quat_add(q0, w * h), q0);
        } else {
            iterate[i] = iterate_of(vec3<f32>(0.0), q0, q0);
        }
        inertial[i] = Inertial(vec4<f32>(0.0), vec4<f32>(0.0));
        return;
    }
    let m = masses[i];
    let g = params.gravity.xyz;
    let f = forces[i];
    let y = v * h + (g + f.force.xyz * m.inv_mass) * (h * h);
    let l = world_inertia(m, q0) * w;
    let hl = l * h + f.torque.xyz * (h * h);
    let accel = (v - prev_velocities[i].v.xyz) / h;
    let g2 = dot(g, g);
    var weight = 0.0;
    if (g2 > 0.0) {
        weight = clamp(dot(accel, g) / g2, 0.0, 1.0);
    }
    let guess = v * h + (g * weight + f.force.xyz * m.inv_mass) * (h * h);
    inertial[i] = Inertial(vec4<f32>(y, 0.0), vec4<f32>(hl, 0.0));
    iterate[i] = iterate_of(guess, quat_add(q0, w * h), q0);
}

// v = (x − xᵗ)/h, ω = (q ⊖ qᵗ)/h (Eq. 20), clamped to `max_angular_speed`; a body whose
// result is not finite keeps its start pose, loses its velocity and is reported in
// `status`. Kinematic bodies only advance their pose. Every body's result goes to
// `body_out`.
@compute @workgroup_size(64)
fn end_bodies(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = grid_index(gid, nwg);
    if (i >= params.n_bodies) {
        return;
    }
    end_body(i);
    write_body_out(i);
}

fn end_body(i: u32) {
    let flags = body_flags[i];
    atomicStore(&status[1u + FROZEN_ROOM + i], 0u);
    if ((flags & (SOLVED | KINEMATIC)) == 0u) {
        return;
    }
    let h = params.dt;
    let it = iterate[i];
    let v = it.dp.xyz / h;
    var w = it.dtheta.xyz / h;
    let p = poses[i].p.xyz + it.dp.xyz;
    let ok = finite(vec4<f32>(v, 0.0)) && finite(vec4<f32>(w, 0.0)) && finite(vec4<f32>(p, 0.0)) && finite(it.q);
    if (!ok) {
        atomicStore(&status[1u + FROZEN_ROOM + i], 1u);
        let k = atomicAdd(&status[0], 1u);
        if (k < FROZEN_ROOM) {
            atomicStore(&status[1u + k], i);
        }
        velocities[i] = Velocity(vec4<f32>(0.0), vec4<f32>(0.0));
        prev_velocities[i] = Velocity(vec4<f32>(0.0), vec4<f32>(0.0));
        return;
    }
    if ((flags & SOLVED) == 0u) {
        // Kinematic velocity is prescribed; only the pose advances.
        poses[i] = Pose(vec4<f32>(p, 0.0), it.q);
        return;
    }
    let ws = length(w);
    if (ws > params.max_angular_speed) {
        w *= params.max_angular_speed / ws;
    }
    prev_velocities[i] = velocities[i];
    velocities[i] = Velocity(vec4<f32>(v, 0.0), vec4<f32>(w, 0.0));
    poses[i] = Pose(vec4<f32>(p, 0.0), normalize(it.q));
}
