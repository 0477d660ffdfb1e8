// Joints on the device: each joint's rows at given poses (the port of
// src/rigid/joint.rs `evaluate`), the row error and force of the primal and dual
// (primal.rs `row_error`, `row_force`), and the per-step kernels: the warm start,
// the dual update and the fracture test (dual.rs). Appended to avbd.wgsl's module: the
// records, bindings and constants are there.

// The joints' row states as the last accepted step left them (read by the warm start,
// which writes joint_states), the heaviest body of each joint's island ([mass, moment],
// dual.rs JointIslands) and the fracture test's result per joint.
@group(0) @binding(19) var<storage, read> joint_carried: array<JointState>;
@group(0) @binding(20) var<storage, read> joint_heaviest: array<vec2<f32>>;
@group(0) @binding(21) var<storage, read_write> joint_broken: array<u32>;

struct Row {
    c: f32,
    ja: array<f32, 6>,
    jb: array<f32, 6>,
    fmin: f32,
    fmax: f32,
    stiffness: f32,
    angular: bool,
    inequality: bool,
    motor: bool,
};

var<private> rows: array<Row, 8>;
var<private> n_rows: u32;
var<private> n_point: u32;
var<private> point_dirs: array<vec3<f32>, 3>;
var<private> arm_a_w: vec3<f32>;
var<private> arm_b_w: vec3<f32>;
var<private> dist_dir: vec3<f32>;
var<private> dist_len: f32;
var<private> hinge_angle: f32;

fn push_row(c: f32, ja: array<f32, 6>, jb: array<f32, 6>, fmin: f32, fmax: f32, stiffness: f32, angular: bool, inequality: bool, motor: bool) {
    rows[n_rows] = Row(c, ja, jb, fmin, fmax, stiffness, angular, inequality, motor);
    n_rows += 1u;
}

fn push_point_row(dir: vec3<f32>, d: vec3<f32>, soft: f32) {
    point_dirs[n_point] = dir;
    n_point += 1u;
    push_row(dot(dir, d), vec6(dir, cross(arm_a_w, dir)), vec6(-dir, -cross(arm_b_w, dir)), -INF, INF, soft, false, false, false);
}

fn push_angular_lock(fa: vec4<f32>, fb: vec4<f32>) {
    let err = qmul(fa, qconj(fb));
    var w = err.w;
    var v = err.xyz;
    if (err.w < 0.0) {
        w = -err.w;
        v = -err.xyz;
    }
    let c = 2.0 * v;
    for (var i = 0u; i < 3u; i++) {
        var ei = vec3<f32>(0.0);
        ei[i] = 1.0;
        let ja = ei * w + cross(ei, v) * -1.0;
        let jb = -(ei * w + cross(ei, v));
        push_row(c[i], vec6(vec3<f32>(0.0), ja), vec6(vec3<f32>(0.0), jb), -INF, INF, 0.0, true, false, false);
    }
}

fn evaluate_joint(j: Joint, pa: Pose, pb_in: Pose) {
    n_rows = 0u;
    n_point = 0u;
    hinge_angle = 0.0;
    var pb = pb_in;
    if (j.body_b == WORLD) {
        pb = Pose(vec4<f32>(0.0), vec4<f32>(0.0, 0.0, 0.0, 1.0));
    }
    let qa = pa.q;
    let qb = pb.q;
    arm_a_w = qrot(qa, j.anchor_a.xyz);
    arm_b_w = qrot(qb, j.anchor_b.xyz);
    let d = (pa.p.xyz + arm_a_w) - (pb.p.xyz + arm_b_w);
    let soft = max(j.params.y, 0.0);
    let fa = qmul(qa, j.frame_a);
    let fb = qmul(qb, j.frame_b);
    let x = vec3<f32>(1.0, 0.0, 0.0);
    let y = vec3<f32>(0.0, 1.0, 0.0);
    let z = vec3<f32>(0.0, 0.0, 1.0);
    if (j.kind == K_BALL || j.kind == K_FIXED || j.kind == K_REVOLUTE) {
        push_point_row(x, d, soft);
        push_point_row(y, d, soft);
        push_point_row(z, d, soft);
    }
    if (j.kind == K_FIXED) {
        push_angular_lock(fa, fb);
    }
    if (j.kind == K_REVOLUTE) {
        let a = qrot(fa, x);
        let b = qrot(fb, x);
        let t1 = tangent_of(a);
        let t2 = cross(a, t1);
        let axb = cross(a, b);
        let ab = dot(a, b);
        for (var i = 0u; i < 2u; i++) {
            let t = select(t2, t1, i == 0u);
            push_row(dot(t, axb), vec6(vec3<f32>(0.0), b * dot(t, a) - t * ab), vec6(vec3<f32>(0.0), t * ab - a * dot(t, b)), -INF, INF, 0.0, true, false, false);
        }
        let ra = qrot(fa, y);
        let rb = qrot(fb, y);
        let angle = atan2(dot(a, cross(ra, rb)), dot(ra, rb));
        hinge_angle = angle;
        let lm = j.limits_motor;
        if ((j.flags & HAS_LIMIT) != 0u) {
            push_row(angle - lm.x, vec6(vec3<f32>(0.0), -a), vec6(vec3<f32>(0.0), a), -INF, 0.0, 0.0, true, true, false);
            push_row(lm.y - angle, vec6(vec3<f32>(0.0), a), vec6(vec3<f32>(0.0), -a), -INF, 0.0, 0.0, true, true, false);
        }
        if ((j.flags & HAS_MOTOR) != 0u) {
            push_row(0.0, vec6(vec3<f32>(0.0), -a), vec6(vec3<f32>(0.0), a), -lm.w, lm.w, 0.0, true, false, true);
        }
    }
    if (j.kind == K_PRISMATIC) {
        let axis = qrot(fa, x);
        let t1 = tangent_of(axis);
        let t2 = cross(axis, t1);
        push_point_row(t1, d, soft);
        push_point_row(t2, d, soft);
        push_angular_lock(fa, fb);
        if ((j.flags & HAS_LIMIT) != 0u) {
            let s = -dot(axis, d);
            let lm = j.limits_motor;
            let dir_lo = -axis;
            push_row(s - lm.x, vec6(dir_lo, cross(arm_a_w, dir_lo)), vec6(-dir_lo, -cross(arm_b_w, dir_lo)), -INF, 0.0, 0.0, false, true, false);
            let dir_hi = axis;
            push_row(lm.y - s, vec6(dir_hi, cross(arm_a_w, dir_hi)), vec6(-dir_hi, -cross(arm_b_w, dir_hi)), -INF, 0.0, 0.0, false, true, false);
        }
    }
    if (j.kind == K_DISTANCE || j.kind == K_ROPE) {
        let len = length(d);
        var n = vec3<f32>(0.0, 1.0, 0.0);
        if (len > 1e-9) {
            n = d / len;
        }
        dist_dir = n;
        dist_len = len;
        let rope = j.kind == K_ROPE;
        push_row(len - j.params.x, vec6(n, cross(arm_a_w, n)), vec6(-n, -cross(arm_b_w, n)), select(-INF, 0.0, rope), INF, soft, false, rope, false);
    }
}

fn wrap_angle(a: f32) -> f32 {
    let two_pi = 6.2831855;
    let pi = 3.1415927;
    var r = a - two_pi * trunc(a / two_pi);
    if (r > pi) {
        r -= two_pi;
    } else if (r <= -pi) {
        r += two_pi;
    }
    return r;
}

fn start_error_is_violation(row: Row, c0: f32) -> bool {
    if (row.motor) {
        return false;
    }
    if (!row.inequality) {
        return true;
    }
    if (row.fmax == 0.0) {
        return c0 < 0.0;
    }
    return c0 > 0.0;
}

fn row_error(r: u32, st: JointState, j: Joint) -> f32 {
    let row = rows[r];
    if (row.motor) {
        return wrap_angle(hinge_angle - st.angle0.x) - j.limits_motor.z * params.dt;
    }
    if (row.stiffness == 0.0 && start_error_is_violation(row, st.c0[r])) {
        return row.c - params.alpha * st.c0[r];
    }
    return row.c;
}

// (force, Hessian stiffness) of a row: see primal::row_force.
fn row_force(row: Row, c: f32, k: f32, lambda: f32) -> vec2<f32> {
    var raw = k * c + lambda;
    var kh = k;
    if (row.stiffness > 0.0) {
        let s = row.stiffness / (row.stiffness + k);
        raw = s * (lambda + k * c);
        kh = s * k;
    }
    if (raw < row.fmin) {
        if (c != 0.0) {
            kh = abs((row.fmin - lambda) / c);
        }
        return vec2<f32>(row.fmin, kh);
    }
    if (raw > row.fmax) {
        if (c != 0.0) {
            kh = abs((row.fmax - lambda) / c);
        }
        return vec2<f32>(row.fmax, kh);
    }
    return vec2<f32>(raw, kh);
}

// A body's pose at the step's start (or, after end_bodies, its end), the world's for WORLD.
fn stored_pose(b: u32) -> Pose {
    if (b == WORLD) {
        return Pose(vec4<f32>(0.0), vec4<f32>(0.0, 0.0, 0.0, 1.0));
    }
    return poses[b];
}

fn mass_of(b: u32) -> Mass {
    if (b == WORLD) {
        return Mass(0.0, 0.0, vec2<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    }
    return masses[b];
}

// The joint's warm start (dual.rs warm_start_joints) from what it carried out of the last
// step: the start error C*(xᵗ) of every row and the hinge angle; a fresh hard row's
// penalty from the larger mass or principal moment of its two bodies; λ = α γ λ (γ λ for
// a spring, whose λ is its force); k = max(γ k, k_start, load-aware floor capped by the
// heaviest body of the joint's island).
@compute @workgroup_size(64)
fn warm_start_joints(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let ji = grid_index(gid, nwg);
    if (ji >= params.n_joints) {
        return;
    }
    let j = joints[ji];
    var st = joint_carried[ji];
    if ((j.flags & BROKEN) != 0u) {
        joint_states[ji] = st;
        return;
    }
    evaluate_joint(j, stored_pose(j.body_a), stored_pose(j.body_b));
    st.angle0.x = hinge_angle;
    let ma = mass_of(j.body_a);
    let mb = mass_of(j.body_b);
    let lin_mass = max(ma.mass, mb.mass);
    let ang_mass = max(max(max(max(max(max(max(max(0.0, ma.inertia.x), ma.inertia.y), ma.inertia.z), ma.inertia.w), mb.inertia.x), mb.inertia.y), mb.inertia.z), mb.inertia.w);
    let heaviest = joint_heaviest[ji];
    for (var r = 0u; r < n_rows; r++) {
        let row = rows[r];
        st.c0[r] = row.c;
        if (st.k[r] == 0.0 && row.stiffness == 0.0) {
            st.k[r] = initial_penalty(select(lin_mass, ang_mass, row.angular));
        }
        var decay = params.alpha * params.gamma;
        if (row.stiffness > 0.0) {
            decay = params.gamma;
        }
        st.lambda[r] *= decay;
        // Springs and rows bounded on both sides (motors) take no floor (dual.rs scale).
        var floor = 0.0;
        if (row.stiffness <= 0.0 && !(row.fmin > -INF && row.fmax < INF)) {
            floor = load_floor(st.lambda[r], params.joint_error_scale, select(heaviest.x, heaviest.y, row.angular));
        }
        st.k[r] = warm_penalty(st.k[r], floor);
    }
    joint_states[ji] = st;
}

// Fracture (dual.rs fracture), after end_bodies: a breakable joint whose positional force
// (or torque), the norm of its rows' final multipliers, exceeds its threshold breaks. The
// CPU marks the joints flagged here when it reads them back.
@compute @workgroup_size(64)
fn fracture_joints(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let ji = grid_index(gid, nwg);
    if (ji >= params.n_joints) {
        return;
    }
    let j = joints[ji];
    var broken = 0u;
    if ((j.flags & BROKEN) == 0u && (j.flags & (BREAKABLE_FORCE | BREAKABLE_TORQUE)) != 0u) {
        evaluate_joint(j, stored_pose(j.body_a), stored_pose(j.body_b));
        let st = joint_states[ji];
        var force2 = 0.0;
        var torque2 = 0.0;
        for (var r = 0u; r < n_rows; r++) {
            let l2 = st.lambda[r] * st.lambda[r];
            if (rows[r].angular) {
                torque2 += l2;
            } else {
                force2 += l2;
            }
        }
        let by_force = (j.flags & BREAKABLE_FORCE) != 0u && sqrt(force2) > j.params.z;
        let by_torque = (j.flags & BREAKABLE_TORQUE) != 0u && sqrt(torque2) > j.params.w;
        broken = select(0u, 1u, by_force || by_torque);
    }
    joint_broken[ji] = broken;
}

// Dual update of one joint's rows.
@compute @workgroup_size(64)
fn dual_joints(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let ji = grid_index(gid, nwg);
    if (ji >= params.n_joints) {
        return;
    }
    let j = joints[ji];
    if ((j.flags & BROKEN) != 0u) {
        return;
    }
    var st = joint_states[ji];
    evaluate_joint(j, body_pose(j.body_a), body_pose(j.body_b));
    for (var r = 0u; r < n_rows; r++) {
        let c = row_error(r, st, j);
        let beta = select(params.beta_linear, params.beta_angular, rows[r].angular);
        let fk = row_force(rows[r], c, st.k[r], st.lambda[r]);
        let inside = fk.x > rows[r].fmin && fk.x < rows[r].fmax;
        st.lambda[r] = clamp(fk.x, -params.lambda_max, params.lambda_max);
        if (inside) {
            st.k[r] = min(st.k[r] + beta * abs(c), params.k_max);
        }
    }
    joint_states[ji] = st;
}
