// Deformable contact with rigid bodies that move (src/gpu/soft_contact/): the bodies'
// half of surface_contact.wgsl, appended to it (one module). Each moving body has a
// certified pose beside X; its island's advance moves it (`advance_body`, in
// `contact_advance`'s dispatch), its rows' terms enter its 6×6 system in the rigid primal
// (`contact_body_terms`, read by avbd.wgsl), and the frame ends at it (`contact_end_bodies`).

// The certified pose of each moving rigid body goes α of the way to where the advance took
// it (the iterate, or as far as its island's cages reach), as the CPU's
// `certified_pose.lerp`: the position linearly, the rotation by slerp.
fn advance_body(b: u32) {
    if (b >= cparams.n_bodies || !body_moves(b)) {
        return;
    }
    let island = su[cparams.o_island + cparams.n_soft_bodies + b];
    let a = bitcast<f32>(atomicLoad(&ca[cparams.o_alpha + island]));
    if (a <= 0.0) {
        return;
    }
    let s = bitcast<f32>(atomicLoad(&ca[cparams.o_reach + island]));
    let was = pose_then(b);
    var to = pose_now(b);
    if (s < 1.0) {
        to = pose_lerp(was, to, s);
    }
    if (a < 1.0) {
        to = pose_lerp(was, to, a);
    }
    cf[cparams.o_body_x + 2u * b] = vec4<f32>(to.p, 0.0);
    cf[cparams.o_body_x + 2u * b + 1u] = to.q;
}

// Pose::lerp: the position linearly, the rotation by glam's `Quat::slerp`, normalised.
fn pose_lerp(a: RigidPose, b: RigidPose, t: f32) -> RigidPose {
    var end = b.q;
    var d = dot(a.q, end);
    if (d < 0.0) {
        end = -end;
        d = -d;
    }
    var q: vec4<f32>;
    if (d > 1.0 - 1.1920929e-7) {
        q = normalize(a.q * (1.0 - t) + end * t);
    } else {
        let theta = acos(d);
        q = (a.q * sin(theta * (1.0 - t)) + end * sin(theta * t)) * (1.0 / sin(theta));
    }
    return RigidPose(a.p + (b.p - a.p) * t, normalize(q));
}

var<private> t_ll: mat3x3<f32>;
var<private> t_al: mat3x3<f32>;
var<private> t_aa: mat3x3<f32>;
var<private> t_fl: vec3<f32>;
var<private> t_fa: vec3<f32>;

// k J Jᵀ of a 6-vector J = (l, a), into the body's blocks (avbd.wgsl's add_outer).
fn terms_outer(l: vec3<f32>, a: vec3<f32>, k: f32) {
    t_ll += outer(k * l, l);
    t_al += outer(k * a, l);
    t_aa += outer(k * a, a);
}

// Geometry::body_jacobian: the 6-vector of direction d at the row's points of body b
// (weights w), the body at rotation q.
struct Jacobian {
    l: vec3<f32>,
    a: vec3<f32>,
};

fn body_jacobian(b: u32, q: vec4<f32>, pts: vec4<u32>, w: vec4<f32>, d: vec3<f32>) -> Jacobian {
    var j = Jacobian(vec3<f32>(0.0), vec3<f32>(0.0));
    for (var k = 0u; k < 4u; k++) {
        let p = pts[k];
        if (p == NONE || p < cparams.soft_points || rigid_body(p) != b) {
            continue;
        }
        let lin = d * w[k];
        j.l += lin;
        j.a += cross(qrot(q, rigid_local(p)), lin);
    }
    return j;
}

// glam's Vec3::any_orthonormal_pair (Frisvad, as revised by Pixar).
fn orthonormal_pair(n: vec3<f32>) -> array<vec3<f32>, 2> {
    let sign = select(-1.0, 1.0, n.z >= 0.0);
    let a = -1.0 / (sign + n.z);
    let b = n.x * n.y * a;
    return array<vec3<f32>, 2>(
        vec3<f32>(1.0 + sign * n.x * n.x * a, sign * b, -sign * n.x),
        vec3<f32>(b, sign + n.y * n.y * a, -n.y),
    );
}

// Per rigid body, before each rigid primal sweep: its rows' terms at the iterate
// (SurfaceContact::add_body_terms), normal and friction. Each row joins deformable points
// (which the rigid sweep does not move) and points of this one body (solved once per
// sweep), so the terms are those the body's own solve would gather.
@compute @workgroup_size(64)
fn contact_body_terms(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x;
    if (cparams.on == 0u || b >= cparams.n_bodies) {
        return;
    }
    let z = mat3x3<f32>();
    t_ll = z;
    t_al = z;
    t_aa = z;
    t_fl = vec3<f32>(0.0);
    t_fa = vec3<f32>(0.0);
    let first = body_slot_offset(b);
    let count = atomicLoad(&ca[cparams.o_bslot_count + b]);
    let q = pose_now(b).q;
    for (var s = 0u; s < count; s++) {
        let r = rows[atomicLoad(&ca[cparams.o_slot_items + first + s])];
        if ((r.info.x & ROW_ALIVE) == 0u) {
            continue;
        }
        let force = row_force(r, row_value(r));
        let j = body_jacobian(b, q, r.points, r.weights, r.normal.xyz);
        t_fl += force * j.l;
        t_fa += force * j.a;
        let k = r.fr.x * row_mu(r);
        terms_outer(j.l, j.a, k);
        if (force > 0.0 && has_friction(r)) {
            // Force along the slip, stiffness over the tangent plane (two directions).
            let jf = body_jacobian(b, q, r.points, r.lagged_weights, friction_force(r, row_slip(r), force));
            t_fl += jf.l;
            t_fa += jf.a;
            let t = orthonormal_pair(r.lagged_normal.xyz);
            for (var d = 0u; d < 2u; d++) {
                let jt = body_jacobian(b, q, r.points, r.lagged_weights, t[d]);
                terms_outer(jt.l, jt.a, k);
            }
        }
    }
    let o = BODY_TERMS * b;
    body_terms[o] = vec4<f32>(t_ll[0], 0.0);
    body_terms[o + 1u] = vec4<f32>(t_ll[1], 0.0);
    body_terms[o + 2u] = vec4<f32>(t_ll[2], 0.0);
    body_terms[o + 3u] = vec4<f32>(t_al[0], 0.0);
    body_terms[o + 4u] = vec4<f32>(t_al[1], 0.0);
    body_terms[o + 5u] = vec4<f32>(t_al[2], 0.0);
    body_terms[o + 6u] = vec4<f32>(t_aa[0], 0.0);
    body_terms[o + 7u] = vec4<f32>(t_aa[1], 0.0);
    body_terms[o + 8u] = vec4<f32>(t_aa[2], 0.0);
    body_terms[o + 9u] = vec4<f32>(t_fl, 0.0);
    body_terms[o + 10u] = vec4<f32>(t_fa, 0.0);
}

// Hamilton product a b.
fn qmul(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(
        a.w * b.xyz + b.w * a.xyz + cross(a.xyz, b.xyz),
        a.w * b.w - dot(a.xyz, b.xyz),
    );
}

// The end of the frame for the rigid bodies (SurfaceContact::end_frame): each moving body
// that shares a candidate with a deformable ends at its certified pose, so the velocities
// and poses the integration writes are the certified ones. The iterate's rotation
// difference as IterateRecord::new (math::quat_sub).
@compute @workgroup_size(64)
fn contact_end_bodies(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x;
    if (cparams.on == 0u || b >= cparams.n_bodies) {
        return;
    }
    let flags = su[cparams.o_body_flags + b];
    if ((flags & (BODY_MOVES | BODY_COUPLED)) != (BODY_MOVES | BODY_COUPLED)) {
        return;
    }
    let c = pose_then(b);
    let q0 = body_poses[b].q;
    let d = qmul(c.q, vec4<f32>(-q0.xyz, q0.w));
    let dtheta = select(2.0 * d.xyz, -2.0 * d.xyz, d.w < 0.0);
    body_iterate[b] = BodyIterate(vec4<f32>(c.p - body_poses[b].p.xyz, 0.0), vec4<f32>(dtheta, 0.0), c.q);
}
