// Geometry of the contact stage (surface_contact.wgsl, in the same module): the element
// volume's floor along a step (surface_contact::inversion, in f32) and the closest points
// of a pair with their weights (ccd::point_triangle_closest, edge_edge_closest, line by
// line; `reject` and `reject_plane` come from ccd_core.wgsl).

fn det3(a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> f32 {
    return dot(a, cross(b, c));
}

fn cubic(c0: f32, c1: f32, c2: f32, c3: f32, t: f32) -> f32 {
    return c0 + t * (c1 + t * (c2 + t * c3));
}

// inversion::tet_step: the first t in [0, 1] where 6·volume(x + t d) reaches the floor
// (aimed 1% above it), or its volume at x where that is smaller.
fn tet_step(x: array<vec3<f32>, 4>, d: array<vec3<f32>, 4>, floor_volume: f32) -> f32 {
    let e0 = x[1] - x[0];
    let e1 = x[2] - x[0];
    let e2 = x[3] - x[0];
    let f0 = d[1] - d[0];
    let f1 = d[2] - d[0];
    let f2 = d[3] - d[0];
    let c0 = det3(e0, e1, e2);
    let c1 = det3(f0, e1, e2) + det3(e0, f1, e2) + det3(e0, e1, f2);
    let c2 = det3(e0, f1, f2) + det3(f0, e1, f2) + det3(f0, f1, e2);
    let c3 = det3(f0, f1, f2);
    if (!(c0 > 0.0)) {
        return 1.0;
    }
    // Held still: the test below would stop an element at its own volume.
    if (all(d[0] == vec3<f32>(0.0)) && all(d[1] == vec3<f32>(0.0)) && all(d[2] == vec3<f32>(0.0)) && all(d[3] == vec3<f32>(0.0))) {
        return 1.0;
    }
    let fl = min(6.0 * 1.01 * floor_volume, c0);
    var stops = array<f32, 3>(2.0, 2.0, 1.0);
    let qa = 3.0 * c3;
    let qb = 2.0 * c2;
    let qc = c1;
    if (abs(qa) > 1e-30) {
        let disc = qb * qb - 4.0 * qa * qc;
        if (disc >= 0.0) {
            let sq = sqrt(disc);
            let r0 = (-qb - sq) / (2.0 * qa);
            let r1 = (-qb + sq) / (2.0 * qa);
            stops[0] = min(r0, r1);
            stops[1] = max(r0, r1);
        }
    } else if (abs(qb) > 1e-30) {
        stops[0] = -qc / qb;
    }
    var lo = 0.0;
    for (var s = 0u; s < 3u; s++) {
        let hi = stops[s];
        if (!(hi > lo && hi <= 1.0)) {
            continue;
        }
        if (cubic(c0, c1, c2, c3, hi) <= fl) {
            var l = lo;
            var h = hi;
            for (var it = 0u; it < 40u; it++) {
                let m = 0.5 * (l + h);
                if (cubic(c0, c1, c2, c3, m) > fl) {
                    l = m;
                } else {
                    h = m;
                }
            }
            return l;
        }
        lo = hi;
    }
    return 1.0;
}

struct Closest {
    diff: vec3<f32>,
    weights: vec4<f32>,
};

struct Seg {
    end: u32, // 0 start, 1 end, 2 interior
    s: f32,
    diff: vec3<f32>,
};

fn seg_closest(p: vec3<f32>, a: vec3<f32>, b: vec3<f32>) -> Seg {
    let e = b - a;
    let ap = p - a;
    let ee = dot(e, e);
    if (!(ee > 0.0)) {
        return Seg(0u, 0.0, ap);
    }
    let s = dot(ap, e) / ee;
    if (!(s > 0.0)) {
        return Seg(0u, 0.0, ap);
    } else if (s >= 1.0) {
        return Seg(1u, 1.0, p - b);
    }
    return Seg(2u, s, reject(ap - e * s, e, ee));
}

// ccd::point_triangle_closest.
fn pt_closest(p: vec3<f32>, a: vec3<f32>, b: vec3<f32>, c: vec3<f32>) -> Closest {
    let ab = b - a;
    let ac = c - a;
    let bc = c - b;
    let n = cross(ab, ac);
    let nn = dot(n, n);
    let l2 = max(dot(ab, ab), max(dot(ac, ac), dot(bc, bc)));
    if (nn > DEGENERATE_FACE * l2 * l2) {
        let pa = a - p;
        let pb = b - p;
        let pc = c - p;
        let wa = dot(cross(pb, pc), n);
        let wb = dot(cross(pc, pa), n);
        let wc = dot(cross(pa, pb), n);
        if (wa >= 0.0 && wb >= 0.0 && wc >= 0.0) {
            let be = wb / nn;
            let ga = wc / nn;
            let al = 1.0 - be - ga;
            let diff = reject_plane(-pa - ab * be - ac * ga, ab, ac);
            return Closest(diff, vec4<f32>(1.0, -al, -be, -ga));
        }
    }
    let e0 = seg_closest(p, a, b);
    let e1 = seg_closest(p, b, c);
    let e2 = seg_closest(p, c, a);
    var best = e0;
    var which = 0u;
    if (dot(e1.diff, e1.diff) < dot(best.diff, best.diff)) {
        best = e1;
        which = 1u;
    }
    if (dot(e2.diff, e2.diff) < dot(best.diff, best.diff)) {
        best = e2;
        which = 2u;
    }
    let s = best.s;
    var w: vec4<f32>;
    if ((which == 0u && best.end == 0u) || (which == 2u && best.end == 1u)) {
        w = vec4<f32>(1.0, -1.0, 0.0, 0.0);
    } else if ((which == 0u && best.end == 1u) || (which == 1u && best.end == 0u)) {
        w = vec4<f32>(1.0, 0.0, -1.0, 0.0);
    } else if ((which == 1u && best.end == 1u) || (which == 2u && best.end == 0u)) {
        w = vec4<f32>(1.0, 0.0, 0.0, -1.0);
    } else if (which == 0u) {
        w = vec4<f32>(1.0, s - 1.0, -s, 0.0);
    } else if (which == 1u) {
        w = vec4<f32>(1.0, 0.0, s - 1.0, -s);
    } else {
        w = vec4<f32>(1.0, -s, 0.0, s - 1.0);
    }
    return Closest(best.diff, w);
}

// ccd::edge_edge_closest.
fn ee_closest(ea0: vec3<f32>, ea1: vec3<f32>, eb0: vec3<f32>, eb1: vec3<f32>) -> Closest {
    let da = ea1 - ea0;
    let db = eb1 - eb0;
    let n = cross(da, db);
    let nn = dot(n, n);
    if (nn > PARALLEL * dot(da, da) * dot(db, db)) {
        let q = eb0 - ea0;
        let s = dot(cross(q, db), n) / nn;
        let t = dot(cross(q, da), n) / nn;
        if (s > 0.0 && s < 1.0 && t > 0.0 && t < 1.0) {
            let diff = reject_plane(da * s - db * t - q, da, db);
            return Closest(diff, vec4<f32>(1.0 - s, s, t - 1.0, -t));
        }
    }
    var cands = array<Seg, 4>(
        seg_closest(ea0, eb0, eb1),
        seg_closest(ea1, eb0, eb1),
        seg_closest(eb0, ea0, ea1),
        seg_closest(eb1, ea0, ea1),
    );
    var best = 0u;
    var best_d2 = dot(cands[0].diff, cands[0].diff);
    for (var k = 1u; k < 4u; k++) {
        let d2 = dot(cands[k].diff, cands[k].diff);
        if (d2 < best_d2) {
            best = k;
            best_d2 = d2;
        }
    }
    let c = cands[best];
    let diff = select(-c.diff, c.diff, best < 2u);
    let s = c.s;
    var w: vec4<f32>;
    if ((best == 0u && c.end == 0u) || (best == 2u && c.end == 0u)) {
        w = vec4<f32>(1.0, 0.0, -1.0, 0.0);
    } else if ((best == 0u && c.end == 1u) || (best == 3u && c.end == 0u)) {
        w = vec4<f32>(1.0, 0.0, 0.0, -1.0);
    } else if ((best == 1u && c.end == 0u) || (best == 2u && c.end == 1u)) {
        w = vec4<f32>(0.0, 1.0, -1.0, 0.0);
    } else if ((best == 1u && c.end == 1u) || (best == 3u && c.end == 1u)) {
        w = vec4<f32>(0.0, 1.0, 0.0, -1.0);
    } else if (best == 0u) {
        w = vec4<f32>(1.0, 0.0, s - 1.0, -s);
    } else if (best == 1u) {
        w = vec4<f32>(0.0, 1.0, s - 1.0, -s);
    } else if (best == 2u) {
        w = vec4<f32>(1.0 - s, s, -1.0, 0.0);
    } else {
        w = vec4<f32>(1.0 - s, s, 0.0, -1.0);
    }
    return Closest(diff, w);
}

