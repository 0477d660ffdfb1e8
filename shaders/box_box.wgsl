// Box against box: the port of src/pipeline/collision/primitive/box_box.rs (separating
// axes, the incident face clipped against the reference face, edge against edge). Part of
// the narrow phase module: common.wgsl and narrow_phase.wgsl (shapes, frames, `Contacts`,
// the constants) come with it; WGSL resolves module-scope names in any order.


fn vertex_code(sg: vec3<f32>) -> u32 {
    return select(0u, 1u, sg.x < 0.0) | (select(0u, 1u, sg.y < 0.0) << 1u) | (select(0u, 1u, sg.z < 0.0) << 2u);
}

fn edge_code(k: u32, sg: vec3<f32>) -> u32 {
    return 8u + 4u * k + select(0u, 1u, sg[(k + 1u) % 3u] < 0.0) + 2u * select(0u, 1u, sg[(k + 2u) % 3u] < 0.0);
}

fn face_code(k: u32, s: f32) -> u32 {
    return 20u + 2u * k + select(0u, 1u, s < 0.0);
}

// Side plane p of reference face axis i: (axis, side as ±1).
fn side_axis(i: u32, p: u32) -> u32 {
    return select((i + 2u) % 3u, (i + 1u) % 3u, p < 2u);
}

fn side_sign(p: u32) -> f32 {
    return select(-1.0, 1.0, p % 2u == 0u);
}

fn cut_code(edge: u32, plane: u32) -> u32 {
    if edge < 4u {
        return 4u + 4u * edge + plane;
    }
    return 20u + 4u * (edge - 4u) + plane;
}

struct FacePoints {
    n: vec3<f32>,
    count: u32,
    ref_codes: array<u32, 4>,
    inc_codes: array<u32, 4>,
    on_ref: array<vec3<f32>, 4>,
    on_inc: array<vec3<f32>, 4>,
    dist: array<f32, 4>,
};

fn area(a: vec3<f32>, b: vec3<f32>, c: vec3<f32>, n: vec3<f32>) -> f32 {
    return dot(cross(b - a, c - a), n);
}

fn reduce(p: ptr<function, array<vec3<f32>, 8>>, d: ptr<function, array<f32, 8>>, n: vec3<f32>, count: u32) -> vec4<u32> {
    if count <= 4u {
        return vec4<u32>(0u, 1u, 2u, 3u);
    }
    var i0 = 0u;
    for (var k = 1u; k < count; k++) {
        if (*d)[k] < (*d)[i0] {
            i0 = k;
        }
    }
    var i1 = 0u;
    var best = -1.0;
    for (var k = 0u; k < count; k++) {
        let e = (*p)[k] - (*p)[i0];
        let l = dot(e, e);
        if l > best {
            best = l;
            i1 = k;
        }
    }
    var i2 = 0u;
    best = -1.0;
    for (var k = 0u; k < count; k++) {
        let a = abs(area((*p)[i0], (*p)[i1], (*p)[k], n));
        if a > best {
            best = a;
            i2 = k;
        }
    }
    let sg = sgn(area((*p)[i0], (*p)[i1], (*p)[i2], n));
    var i3 = 0u;
    best = F32_MIN;
    for (var k = 0u; k < count; k++) {
        if k == i0 || k == i1 || k == i2 {
            continue;
        }
        let inside = min(min(sg * area((*p)[i0], (*p)[i1], (*p)[k], n), sg * area((*p)[i1], (*p)[i2], (*p)[k], n)), sg * area((*p)[i2], (*p)[i0], (*p)[k], n));
        if -inside > best {
            best = -inside;
            i3 = k;
        }
    }
    return vec4<u32>(i0, i1, i2, i3);
}

// r: the incident box's axes in the reference frame (columns of the relative rotation).
fn face_contact(href: vec3<f32>, hinc: vec3<f32>, t: vec3<f32>, r: mat3x3<f32>, i: u32, margin: f32) -> FacePoints {
    let s = sgn(t[i]);
    let n = axis(i) * s;
    var j = 0u;
    var best = -1.0;
    for (var k = 0u; k < 3u; k++) {
        let d = abs(r[k][i]);
        if d > best {
            best = d;
            j = k;
        }
    }
    let sj = -sgn(r[j][i] * s);
    let u = (j + 1u) % 3u;
    let v = (j + 2u) % 3u;
    let fc = t + r[j] * (sj * hinc[j]);
    let du = r[u] * hinc[u];
    let dv = r[v] * hinc[v];
    var poly: array<vec3<f32>, 8>;
    var vid: array<u32, 8>;
    var eid: array<u32, 8>;
    poly[0] = fc + du + dv;
    poly[1] = fc - du + dv;
    poly[2] = fc - du - dv;
    poly[3] = fc + du - dv;
    for (var k = 0u; k < 4u; k++) {
        vid[k] = k;
        eid[k] = k;
    }
    var count = 4u;
    let a1 = (i + 1u) % 3u;
    let a2 = (i + 2u) % 3u;
    for (var p = 0u; p < 4u; p++) {
        let k = select(a2, a1, p < 2u);
        let sp = side_sign(p);
        var out: array<vec3<f32>, 8>;
        var ovid: array<u32, 8>;
        var oeid: array<u32, 8>;
        var m = 0u;
        for (var c = 0u; c < count; c++) {
            let prev = select(c - 1u, count - 1u, c == 0u);
            let dp = sp * poly[prev][k] - href[k];
            let dc = sp * poly[c][k] - href[k];
            if (dc <= 0.0) != (dp <= 0.0) && m < 8u {
                out[m] = poly[prev] + (poly[c] - poly[prev]) * (dp / (dp - dc));
                ovid[m] = cut_code(eid[prev], p);
                oeid[m] = select(4u + p, eid[prev], dc <= 0.0);
                m += 1u;
            }
            if dc <= 0.0 && m < 8u {
                out[m] = poly[c];
                ovid[m] = vid[c];
                oeid[m] = eid[c];
                m += 1u;
            }
        }
        poly = out;
        vid = ovid;
        eid = oeid;
        count = m;
    }
    var pts: array<vec3<f32>, 8>;
    var dist: array<f32, 8>;
    var ids: array<u32, 8>;
    var kept = 0u;
    for (var c = 0u; c < count; c++) {
        let d = s * poly[c][i] - href[i];
        if d <= margin {
            pts[kept] = poly[c];
            dist[kept] = d;
            ids[kept] = vid[c];
            kept += 1u;
        }
    }
    let pick = reduce(&pts, &dist, n, kept);
    var f: FacePoints;
    f.n = n;
    f.count = min(kept, 4u);
    var su = array<f32, 4>(1.0, -1.0, -1.0, 1.0);
    var sv = array<f32, 4>(1.0, 1.0, -1.0, -1.0);
    for (var k = 0u; k < f.count; k++) {
        let c = pick[k];
        let code = ids[c];
        var ref_s = vec3<f32>(0.0);
        var inc_s = vec3<f32>(0.0);
        ref_s[i] = s;
        inc_s[j] = sj;
        if code < 4u {
            inc_s[u] = su[code];
            inc_s[v] = sv[code];
            f.ref_codes[k] = face_code(i, s);
            f.inc_codes[k] = vertex_code(inc_s);
        } else if code < 20u {
            let e = (code - 4u) / 4u;
            let p = (code - 4u) % 4u;
            let pk = side_axis(i, p);
            ref_s[pk] = side_sign(p);
            var along = v;
            if e % 2u == 0u {
                inc_s[v] = sv[e];
                along = u;
            } else {
                inc_s[u] = su[e];
            }
            f.ref_codes[k] = edge_code(3u - i - pk, ref_s);
            f.inc_codes[k] = edge_code(along, inc_s);
        } else {
            let q = (code - 20u) / 4u;
            let p = (code - 20u) % 4u;
            ref_s[side_axis(i, q)] = side_sign(q);
            ref_s[side_axis(i, p)] = side_sign(p);
            f.ref_codes[k] = vertex_code(ref_s);
            f.inc_codes[k] = face_code(j, sj);
        }
        f.on_inc[k] = pts[c];
        f.on_ref[k] = pts[c] - n * dist[c];
        f.dist[k] = dist[c];
    }
    return f;
}

fn edge_contact(ha: vec3<f32>, fa: Frame, hb: vec3<f32>, t: vec3<f32>, r: mat3x3<f32>, i: u32, j: u32, a0: vec3<f32>, margin: f32) -> Contacts {
    let a = a0 * sgn(dot(t, a0));
    var ca = ha * signs(a);
    ca[i] = 0.0;
    let ab = vec3<f32>(dot(a, r[0]), dot(a, r[1]), dot(a, r[2]));
    var cb = t;
    for (var k = 0u; k < 3u; k++) {
        if k != j {
            cb -= r[k] * (sgn(ab[k]) * hb[k]);
        }
    }
    let st = segment_params(ca, axis(i), ha[i], cb, r[j], hb[j]);
    let pa = ca + axis(i) * st.x;
    let pb = cb + r[j] * st.y;
    let dist = dot(pb - pa, a);
    if dist > margin {
        return contacts_none();
    }
    let edge_a = edge_code(i, a);
    let edge_b = edge_code(j, -signs(ab));
    var out = contacts_new(qrot(fa.q, a), CASE_EDGE_EDGE);
    push(&out, edge_a | (edge_b << 5u), to_world(fa, pa), to_world(fa, pb), dist);
    return out;
}

fn box_box(ha: vec3<f32>, fa: Frame, hb: vec3<f32>, fb: Frame, margin: f32) -> Contacts {
    let t = to_local(fa, fb.p);
    let rel = qmul(qconj(fa.q), fb.q);
    let r = mat3x3<f32>(qrot(rel, vec3<f32>(1.0, 0.0, 0.0)), qrot(rel, vec3<f32>(0.0, 1.0, 0.0)), qrot(rel, vec3<f32>(0.0, 0.0, 1.0)));

    var sep_a = F32_MIN;
    var ia = 0u;
    for (var i = 0u; i < 3u; i++) {
        let rb = hb.x * abs(r[0][i]) + hb.y * abs(r[1][i]) + hb.z * abs(r[2][i]);
        let sep = abs(t[i]) - ha[i] - rb;
        if sep > sep_a {
            sep_a = sep;
            ia = i;
        }
    }
    var sep_b = F32_MIN;
    var jb = 0u;
    for (var j = 0u; j < 3u; j++) {
        let sep = abs(dot(t, r[j])) - hb[j] - dot(ha, abs(r[j]));
        if sep > sep_b {
            sep_b = sep;
            jb = j;
        }
    }
    var sep_e = F32_MIN;
    var ei = 0u;
    var ej = 0u;
    var e_axis = vec3<f32>(0.0);
    for (var i = 0u; i < 3u; i++) {
        for (var j = 0u; j < 3u; j++) {
            let a0 = cross(axis(i), r[j]);
            let len = length(a0);
            if len < EDGE_MIN_SIN {
                continue;
            }
            let a = a0 / len;
            let rb = hb.x * abs(dot(a, r[0])) + hb.y * abs(dot(a, r[1])) + hb.z * abs(dot(a, r[2]));
            let sep = abs(dot(t, a)) - dot(ha, abs(a)) - rb;
            if sep > sep_e {
                sep_e = sep;
                ei = i;
                ej = j;
                e_axis = a;
            }
        }
    }
    if sep_a > margin || sep_b > margin || sep_e > margin {
        return contacts_none();
    }
    let scale = min(max_element(ha), max_element(hb));
    let face_b = sep_b > sep_a + FACE_TOL * scale;
    let best_face = select(sep_a, sep_b, face_b);
    if sep_e > best_face + EDGE_TOL * scale {
        return edge_contact(ha, fa, hb, t, r, ei, ej, e_axis, margin);
    }
    if !face_b {
        let f = face_contact(ha, hb, t, r, ia, margin);
        var out = contacts_new(qrot(fa.q, f.n), CASE_FACE_A);
        for (var k = 0u; k < f.count; k++) {
            let id = f.ref_codes[k] | (f.inc_codes[k] << 5u);
            push(&out, id, to_world(fa, f.on_ref[k]), to_world(fa, f.on_inc[k]), f.dist[k]);
        }
        return out;
    }
    let tb = to_local(fb, fa.p);
    let f = face_contact(hb, ha, tb, transpose(r), jb, margin);
    var out = contacts_new(-qrot(fb.q, f.n), CASE_FACE_B);
    for (var k = 0u; k < f.count; k++) {
        let id = f.inc_codes[k] | (f.ref_codes[k] << 5u);
        push(&out, id, to_world(fb, f.on_inc[k]), to_world(fb, f.on_ref[k]), f.dist[k]);
    }
    return out;
}
