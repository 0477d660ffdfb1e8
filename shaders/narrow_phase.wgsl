// Primitive narrow phase: `collide` makes the manifold of one pair of shapes. A
// line-by-line port of src/pipeline/collision/primitive/ (same function names, same
// constants, same order of operations), so both backends find the same contacts; read the
// Rust for the why of each step. common.wgsl (Pose, qmul, qconj, qrot) and shapes.wgsl
// are prepended; no bindings here: the step's kernel (contact_narrow.wgsl) and the
// standalone ones (narrow_standalone.wgsl) declare their own.

// PrimitivePair.
struct Pair {
    a: Shape,
    b: Shape,
    pose_a: Pose,
    pose_b: Pose,
};

struct ManifoldPoint {
    local_a: vec4<f32>, // w: signed distance
    local_b: vec4<f32>,
};

// The most points a manifold keeps, and the contact record slots of a pair
// (primitive::MANIFOLD_POINTS).
const MANIFOLD_POINTS: u32 = 4u;

// PrimitiveManifold (`case` is a WGSL keyword).
struct Manifold {
    count: u32,
    case_id: u32,
    reserved: vec2<u32>,
    normal: vec4<f32>,
    ids: vec4<u32>,
    points: array<ManifoldPoint, MANIFOLD_POINTS>,
};


const CASE_NONE: u32 = 0u;
const CASE_CLOSEST: u32 = 1u;
const CASE_SIDE_BY_SIDE: u32 = 2u;
const CASE_PLANE: u32 = 3u;
const CASE_FACE_A: u32 = 4u;
const CASE_FACE_B: u32 = 5u;
const CASE_EDGE_EDGE: u32 = 6u;

const F32_MIN: f32 = -3.4028235e38;
const COS_PARALLEL: f32 = 0.9238795;
const SIN_PARALLEL: f32 = 0.38268343;
const LATERAL_SHARE: f32 = 0.25;
const CORE_DIST: f32 = 1e-4;
const FACE_SNAP: f32 = 5e-4;
const END_SNAP: f32 = 1e-5;
const EDGE_MIN_SIN: f32 = 1e-3;
const FACE_TOL: f32 = 1e-4;
const EDGE_TOL: f32 = 1e-3;
const INSIDE: u32 = 0xffffffffu;
const FLAT: f32 = 1e-10;

// ------------------------------------------------------------------ shared helpers

struct Frame {
    p: vec3<f32>,
    q: vec4<f32>,
};

fn frame_of(pose: Pose) -> Frame {
    return Frame(pose.p.xyz, pose.q);
}

fn to_world(f: Frame, v: vec3<f32>) -> vec3<f32> {
    return f.p + qrot(f.q, v);
}

fn to_local(f: Frame, v: vec3<f32>) -> vec3<f32> {
    return qrot(qconj(f.q), v - f.p);
}

fn axis(k: u32) -> vec3<f32> {
    var v = vec3<f32>(0.0);
    v[k] = 1.0;
    return v;
}

fn sgn(x: f32) -> f32 {
    return select(-1.0, 1.0, x >= 0.0);
}

fn signs(v: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(sgn(v.x), sgn(v.y), sgn(v.z));
}

fn max_element(v: vec3<f32>) -> f32 {
    return max(max(v.x, v.y), v.z);
}

struct Contacts {
    n: vec3<f32>,
    count: u32,
    case_id: u32,
    ids: array<u32, 4>,
    pa: array<vec3<f32>, 4>,
    pb: array<vec3<f32>, 4>,
    dist: array<f32, 4>,
};

fn contacts_new(n: vec3<f32>, case_id: u32) -> Contacts {
    var c: Contacts;
    c.n = n;
    c.case_id = case_id;
    return c;
}

fn contacts_none() -> Contacts {
    var c: Contacts;
    return c;
}

fn push(c: ptr<function, Contacts>, id: u32, pa: vec3<f32>, pb: vec3<f32>, dist: f32) {
    let k = (*c).count;
    if k < 4u {
        (*c).ids[k] = id;
        (*c).pa[k] = pa;
        (*c).pb[k] = pb;
        (*c).dist[k] = dist;
        (*c).count = k + 1u;
    }
}

// ------------------------------------------------------------------ round shapes

fn segment_params(ca: vec3<f32>, ua: vec3<f32>, ha: f32, cb: vec3<f32>, ub: vec3<f32>, hb: f32) -> vec2<f32> {
    let r = ca - cb;
    let b = dot(ua, ub);
    let c = dot(ua, r);
    let f = dot(ub, r);
    let x = cross(ua, ub);
    let denom = dot(x, x);
    var s = 0.0;
    if denom > 1e-12 {
        s = clamp((b * f - c) / denom, -ha, ha);
    }
    var t = b * s + f;
    if t < -hb {
        t = -hb;
        s = clamp(b * t - c, -ha, ha);
    } else if t > hb {
        t = hb;
        s = clamp(b * t - c, -ha, ha);
    }
    return vec2<f32>(s, t);
}

fn spheres(ca: vec3<f32>, ra: f32, cb: vec3<f32>, rb: f32, fallback: vec3<f32>, margin: f32) -> Contacts {
    let dv = cb - ca;
    let len = length(dv);
    let dist = len - ra - rb;
    if dist > margin {
        return contacts_none();
    }
    var n = fallback;
    if len > 0.0 {
        n = dv / len;
    }
    var c = contacts_new(n, CASE_CLOSEST);
    push(&c, 0u, ca + n * ra, cb - n * rb, dist);
    return c;
}

fn sphere_sphere(ra: f32, fa: Frame, rb: f32, fb: Frame, margin: f32) -> Contacts {
    return spheres(fa.p, ra, fb.p, rb, qrot(fa.q, vec3<f32>(0.0, 1.0, 0.0)), margin);
}

fn sphere_capsule(ra: f32, fa: Frame, db: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let ub = qrot(fb.q, vec3<f32>(0.0, 1.0, 0.0));
    let t = clamp(dot(fa.p - fb.p, ub), -db.x, db.x);
    return spheres(fa.p, ra, fb.p + ub * t, db.y, qrot(fa.q, vec3<f32>(0.0, 1.0, 0.0)), margin);
}

fn capsule_capsule(da: vec3<f32>, fa: Frame, db: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let ha = da.x;
    let ra = da.y;
    let hb = db.x;
    let rb = db.y;
    let ua = qrot(fa.q, vec3<f32>(0.0, 1.0, 0.0));
    let ub = qrot(fb.q, vec3<f32>(0.0, 1.0, 0.0));
    let st = segment_params(fa.p, ua, ha, fb.p, ub, hb);
    let s = st.x;
    let t = st.y;
    let p = fa.p + ua * s;
    let q = fb.p + ub * t;
    var dv = q - p;
    let inner_a = abs(s) < ha;
    let inner_b = abs(t) < hb;
    if inner_a {
        dv -= ua * dot(dv, ua);
    }
    if inner_b {
        var e = ub;
        if inner_a {
            e = ub - ua * dot(ua, ub);
        }
        let l2 = dot(e, e);
        if l2 > 1e-12 {
            dv -= e * (dot(dv, e) / l2);
        }
    }
    let len = length(dv);
    let dist = len - ra - rb;
    if dist > margin {
        return contacts_none();
    }
    var n = qrot(fa.q, vec3<f32>(1.0, 0.0, 0.0));
    if len > 0.0 {
        n = dv / len;
    }
    if abs(dot(ua, ub)) >= COS_PARALLEL && abs(dot(ua, n)) < SIN_PARALLEL {
        let b0 = dot(fb.p - ub * hb - fa.p, ua);
        let b1 = dot(fb.p + ub * hb - fa.p, ua);
        var bl = b1;
        var bl_end = 3u;
        var bh = b0;
        var bh_end = 2u;
        if b0 <= b1 {
            bl = b0;
            bl_end = 2u;
            bh = b1;
            bh_end = 3u;
        }
        var lo = -ha;
        var lo_end = 0u;
        var hi = ha;
        var hi_end = 1u;
        if bl > lo {
            lo = bl;
            lo_end = bl_end;
        }
        if bh < hi {
            hi = bh;
            hi_end = bh_end;
        }
        if hi - lo > 1e-3 * ha {
            var c = contacts_new(n, CASE_SIDE_BY_SIDE);
            let lateral_max = LATERAL_SHARE * min(ra, rb);
            for (var k = 0u; k < 2u; k++) {
                let sa = select(hi, lo, k == 0u);
                let end = select(hi_end, lo_end, k == 0u);
                let pa = fa.p + ua * sa;
                let tb = clamp(dot(pa - fb.p, ub), -hb, hb);
                let w = fb.p + ub * tb - pa;
                let along = dot(w, n);
                let d = along - ra - rb;
                if d <= margin && length(w - n * along) <= lateral_max {
                    let on_a = pa + n * ra;
                    push(&c, 1u + end, on_a, on_a + n * d, d);
                }
            }
            if c.count == 2u {
                return c;
            }
        }
    }
    var id = 0u;
    if abs(s) == ha {
        id = 1u + select(0u, 1u, s > 0.0);
    } else if abs(t) == hb {
        id = 3u + select(0u, 1u, t > 0.0);
    }
    var c = contacts_new(n, CASE_CLOSEST);
    push(&c, id, p + n * ra, q - n * rb, dist);
    return c;
}

fn sphere_plane(ra: f32, fa: Frame, nb: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let nw = qrot(fb.q, nb);
    let s = dot(fa.p - fb.p, nw);
    let dist = s - ra;
    if dist > margin {
        return contacts_none();
    }
    var c = contacts_new(-nw, CASE_PLANE);
    push(&c, 0u, fa.p - nw * ra, fa.p - nw * s, dist);
    return c;
}

fn capsule_plane(da: vec3<f32>, fa: Frame, nb: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let ha = da.x;
    let ra = da.y;
    let nw = qrot(fb.q, nb);
    let ua = qrot(fa.q, vec3<f32>(0.0, 1.0, 0.0));
    var c = contacts_new(-nw, CASE_PLANE);
    for (var end = 0u; end < 2u; end++) {
        let p = fa.p + ua * select(ha, -ha, end == 0u);
        let s = dot(p - fb.p, nw);
        let d = s - ra;
        if d <= margin {
            push(&c, end, p - nw * ra, p - nw * s, d);
        }
    }
    if c.count == 0u {
        return contacts_none();
    }
    return c;
}

// ------------------------------------------------------------------ a box against the others

fn sphere_box(ra: f32, fa: Frame, hb: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let c = to_local(fb, fa.p);
    var q = clamp(c, -hb, hb);
    let dv = c - q;
    let len2 = dot(dv, dv);
    var nb: vec3<f32>;
    var dist: f32;
    if len2 > 0.0 {
        let len = sqrt(len2);
        nb = dv / len;
        dist = len - ra;
    } else {
        var k = 0u;
        var depth = hb.x - abs(c.x);
        for (var j = 1u; j < 3u; j++) {
            let dj = hb[j] - abs(c[j]);
            if dj < depth {
                depth = dj;
                k = j;
            }
        }
        let s = sgn(c[k]);
        q[k] = s * hb[k];
        nb = axis(k) * s;
        dist = -depth - ra;
    }
    if dist > margin {
        return contacts_none();
    }
    let n = -qrot(fb.q, nb);
    var out = contacts_new(n, CASE_CLOSEST);
    push(&out, 0u, fa.p + n * ra, to_world(fb, q), dist);
    return out;
}

fn box_dist2(p: vec3<f32>, he: vec3<f32>) -> f32 {
    let d = max(abs(p) - he, vec3<f32>(0.0));
    return dot(d, d);
}

struct SegmentBox {
    t: f32,
    f2: f32,
    code: u32,
};

fn segment_box(c: vec3<f32>, u: vec3<f32>, h: f32, he: vec3<f32>) -> SegmentBox {
    var ts: array<f32, 8>;
    var codes: array<u32, 8>;
    ts[0] = -h;
    ts[1] = h;
    codes[1] = 1u;
    var n = 2u;
    for (var k = 0u; k < 3u; k++) {
        if u[k] != 0.0 {
            for (var side = 0u; side < 2u; side++) {
                let s = select(1.0, -1.0, side == 0u);
                let t = (s * he[k] - c[k]) / u[k];
                if t > -h && t < h {
                    ts[n] = t;
                    codes[n] = 2u + 2u * k + side;
                    n += 1u;
                }
            }
        }
    }
    for (var i = 1u; i < n; i++) {
        let v = ts[i];
        let code = codes[i];
        var j = i;
        while j > 0u && ts[j - 1u] > v {
            ts[j] = ts[j - 1u];
            codes[j] = codes[j - 1u];
            j -= 1u;
        }
        ts[j] = v;
        codes[j] = code;
    }
    var best_t = -h;
    var best_code = 0u;
    var best = box_dist2(c - u * h, he);
    var best_flat = false;
    for (var m = 0u; m + 1u < n; m++) {
        let t0 = ts[m];
        let t1 = ts[m + 1u];
        if t1 <= t0 {
            continue;
        }
        let mid = c + u * (0.5 * (t0 + t1));
        var qa = 0.0;
        var qb = 0.0;
        for (var k = 0u; k < 3u; k++) {
            if mid[k] > he[k] {
                qa += u[k] * u[k];
                qb += u[k] * (c[k] - he[k]);
            } else if mid[k] < -he[k] {
                qa += u[k] * u[k];
                qb += u[k] * (c[k] + he[k]);
            }
        }
        let flat = qa <= FLAT;
        var t = t0;
        if !flat {
            t = clamp(-qb / qa, t0, t1);
        }
        if t - t0 <= END_SNAP * h {
            t = t0;
        } else if t1 - t <= END_SNAP * h {
            t = t1;
        }
        let f = box_dist2(c + u * t, he);
        var better = f < best;
        if best_flat {
            better = f < best - 1e-6 * best;
        }
        if !better && flat && t == best_t {
            best_flat = true;
        }
        if better {
            best = f;
            best_t = t;
            best_flat = flat;
            if t == t0 {
                best_code = codes[m];
            } else if t == t1 {
                best_code = codes[m + 1u];
            } else {
                best_code = INSIDE;
            }
        }
    }
    return SegmentBox(best_t, best, best_code);
}

fn capsule_box(da: vec3<f32>, fa: Frame, hb: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let ha = da.x;
    let ra = da.y;
    let c = to_local(fb, fa.p);
    let u = qrot(qmul(qconj(fb.q), fa.q), vec3<f32>(0.0, 1.0, 0.0));
    let sb = segment_box(c, u, ha, hb);
    let t = sb.t;
    var face = -1;
    var s = 1.0;
    var bound = sb.code;
    var nb: vec3<f32>;
    var p_axis: vec3<f32>;
    var p_box: vec3<f32>;
    var kind: u32;
    if sb.f2 > CORE_DIST * CORE_DIST {
        let q = c + u * t;
        let cq = clamp(q, -hb, hb);
        let dv = q - cq;
        let len = length(dv);
        nb = dv / len;
        p_axis = q;
        p_box = cq;
        kind = CASE_CLOSEST;
        var k = 2u;
        if abs(nb.x) >= abs(nb.y) && abs(nb.x) >= abs(nb.z) {
            k = 0u;
        } else if abs(nb.y) >= abs(nb.z) {
            k = 1u;
        }
        if abs(nb[(k + 1u) % 3u]) <= FACE_SNAP && abs(nb[(k + 2u) % 3u]) <= FACE_SNAP {
            face = i32(k);
            s = sgn(nb[k]);
        }
    } else {
        var best_face = F32_MIN;
        var fk = 0u;
        for (var k = 0u; k < 3u; k++) {
            let sep = abs(c[k]) - abs(u[k]) * ha - hb[k];
            if sep > best_face {
                best_face = sep;
                fk = k;
            }
        }
        var best_edge = F32_MIN;
        var edge_axis = vec3<f32>(0.0);
        var ek = 0u;
        for (var k = 0u; k < 3u; k++) {
            let a0 = cross(axis(k), u);
            let len = length(a0);
            if len >= EDGE_MIN_SIN {
                let a = a0 / len;
                let sep = abs(dot(c, a)) - dot(hb, abs(a));
                if sep > best_edge {
                    best_edge = sep;
                    edge_axis = a;
                    ek = k;
                }
            }
        }
        let scale = min(max(ha, ra), max_element(hb));
        if best_edge > best_face + EDGE_TOL * scale {
            let a = edge_axis * sgn(dot(c, edge_axis));
            var eb = hb * signs(a);
            eb[ek] = 0.0;
            let st = segment_params(c, u, ha, eb, axis(ek), hb[ek]);
            bound = INSIDE;
            nb = a;
            p_axis = c + u * st.x;
            p_box = eb + axis(ek) * st.y;
            kind = CASE_EDGE_EDGE;
        } else {
            face = i32(fk);
            s = sgn(c[fk]);
            let end = select(ha, -ha, u[fk] * s > 0.0);
            bound = select(0u, 1u, end > 0.0);
            let p = c + u * end;
            var pb = p;
            pb[fk] = s * hb[fk];
            nb = axis(fk) * s;
            p_axis = p;
            p_box = pb;
            kind = CASE_FACE_B;
        }
    }
    let dist = dot(p_axis - p_box, nb) - ra;
    if dist > margin {
        return contacts_none();
    }
    if face >= 0 {
        let k = u32(face);
        let nf = axis(k) * s;
        var lo = -ha;
        var lo_code = 0u;
        var hi = ha;
        var hi_code = 1u;
        for (var j = 0u; j < 3u; j++) {
            if j == k {
                continue;
            }
            if u[j] != 0.0 {
                let t1 = (-hb[j] - c[j]) / u[j];
                let t2 = (hb[j] - c[j]) / u[j];
                let c1 = 2u + 2u * j;
                let c2 = 3u + 2u * j;
                var enter = t2;
                var enter_code = c2;
                var exit = t1;
                var exit_code = c1;
                if t1 <= t2 {
                    enter = t1;
                    enter_code = c1;
                    exit = t2;
                    exit_code = c2;
                }
                if enter > lo {
                    lo = enter;
                    lo_code = enter_code;
                }
                if exit < hi {
                    hi = exit;
                    hi_code = exit_code;
                }
            } else if abs(c[j]) > hb[j] {
                hi = lo;
            }
        }
        if hi - lo > 1e-3 * ha {
            let face_id = 2u * k + select(0u, 1u, s < 0.0);
            var out = contacts_new(-qrot(fb.q, nf), CASE_SIDE_BY_SIDE);
            for (var e = 0u; e < 2u; e++) {
                let te = select(hi, lo, e == 0u);
                let code = select(hi_code, lo_code, e == 0u);
                let p = c + u * te;
                let d = s * p[k] - hb[k] - ra;
                if d <= margin {
                    var pb = p;
                    pb[k] = s * hb[k];
                    let id = 1u + code + 8u * face_id;
                    push(&out, id, to_world(fb, p - nf * ra), to_world(fb, pb), d);
                }
            }
            if out.count == 2u {
                return out;
            }
        }
    }
    var id = 0u;
    if bound != INSIDE {
        if face >= 0 {
            id = 1u + bound + 8u * (2u * u32(face) + select(0u, 1u, s < 0.0));
        } else {
            id = 1u + bound + 8u * 6u;
        }
    }
    var out = contacts_new(-qrot(fb.q, nb), kind);
    push(&out, id, to_world(fb, p_axis - nb * ra), to_world(fb, p_box), dist);
    return out;
}

fn corner_sign(i: u32, k: u32) -> f32 {
    return select(1.0, -1.0, ((i >> k) & 1u) == 1u);
}

fn box_plane(ha: vec3<f32>, fa: Frame, nb: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let nw = qrot(fb.q, nb);
    var s: array<f32, 8>;
    var v: array<vec3<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        let corner = ha * vec3<f32>(corner_sign(i, 0u), corner_sign(i, 1u), corner_sign(i, 2u));
        v[i] = to_world(fa, corner);
        s[i] = dot(v[i] - fb.p, nw);
    }
    var out = contacts_new(-nw, CASE_PLANE);
    for (var i = 0u; i < 8u; i++) {
        if s[i] > margin {
            continue;
        }
        var rank = 0u;
        for (var j = 0u; j < 8u; j++) {
            if s[j] <= margin && (s[j] < s[i] || (s[j] == s[i] && j < i)) {
                rank += 1u;
            }
        }
        if rank < 4u {
            push(&out, i, v[i], v[i] - nw * s[i], s[i]);
        }
    }
    if out.count == 0u {
        return contacts_none();
    }
    return out;
}

// ------------------------------------------------------------------ the kernel

fn collide(a: Shape, pose_a: Pose, b: Shape, pose_b: Pose, margin: f32) -> Manifold {
    let flip = a.kind > b.kind;
    var s1 = a;
    var s2 = b;
    var p1 = pose_a;
    var p2 = pose_b;
    if flip {
        s1 = b;
        s2 = a;
        p1 = pose_b;
        p2 = pose_a;
    }
    let f1 = frame_of(p1);
    let f2 = frame_of(p2);
    let d1 = s1.dims;
    let d2 = s2.dims;
    var c = contacts_none();
    let k = s1.kind * 4u + s2.kind;
    switch k {
        case 0u: { c = sphere_sphere(d1.x, f1, d2.x, f2, margin); }
        case 1u: { c = sphere_capsule(d1.x, f1, d2, f2, margin); }
        case 2u: { c = sphere_box(d1.x, f1, d2, f2, margin); }
        case 3u: { c = sphere_plane(d1.x, f1, d2, f2, margin); }
        case 5u: { c = capsule_capsule(d1, f1, d2, f2, margin); }
        case 6u: { c = capsule_box(d1, f1, d2, f2, margin); }
        case 7u: { c = capsule_plane(d1, f1, d2, f2, margin); }
        case 10u: { c = box_box(d1, f1, d2, f2, margin); }
        case 11u: { c = box_plane(d1, f1, d2, f2, margin); }
        default: {}
    }
    // Contacts::finish: local points, A and B swapped back.
    var m: Manifold;
    if c.count == 0u {
        return m;
    }
    let fa = frame_of(pose_a);
    let fb = frame_of(pose_b);
    let n = select(c.n, -c.n, flip);
    m.count = c.count;
    m.case_id = c.case_id;
    m.normal = vec4<f32>(n, 0.0);
    for (var i = 0u; i < c.count; i++) {
        var pa = c.pa[i];
        var pb = c.pb[i];
        if flip {
            pa = c.pb[i];
            pb = c.pa[i];
        }
        m.ids[i] = c.ids[i];
        m.points[i].local_a = vec4<f32>(to_local(fa, pa), c.dist[i]);
        m.points[i].local_b = vec4<f32>(to_local(fb, pb), 0.0);
    }
    return m;
}
