//! A box against a sphere, a capsule or a half-space.

use glam::Vec3;

use super::box_box::{EDGE_MIN_SIN, EDGE_TOL};
use super::round::segment_params;
use super::{Contacts, Frame, axis, case, conj, qmul, rot, sign};

/// Below this distance (m) between a capsule's axis and a box, the closest points no longer
/// give a normal to 1e-3 rad in f32: the capsule–box pair takes separating axes instead.
const CORE_DIST: f32 = 1e-4;
/// A capsule–box normal whose other components are below this counts as the face's normal
/// (the two side-by-side points then take the face's normal, at most 7e-4 rad away): an
/// axis parallel to a face that hangs over its border has its closest point a hair into
/// the edge's region.
const FACE_SNAP: f32 = 5e-4;
/// A piece's minimum this close to its end (× the half height) is at that end: where the
/// axis crosses a face plane is the same point to both backends.
const END_SNAP: f32 = 1e-5;

/// Sphere A, box B: one point, id 0. A centre inside the box leaves by the nearest face.
pub(super) fn sphere_box(ra: f32, fa: &Frame, hb: Vec3, fb: &Frame, margin: f32) -> Contacts {
    let c = fb.to_local(fa.p);
    let mut q = c.clamp(-hb, hb);
    let dv = c - q;
    let len2 = dv.length_squared();
    let (nb, dist) = if len2 > 0.0 {
        let len = len2.sqrt();
        (dv / len, len - ra)
    } else {
        let mut k = 0;
        let mut depth = hb.x - c.x.abs();
        for j in 1..3 {
            let dj = hb[j] - c[j].abs();
            if dj < depth {
                depth = dj;
                k = j;
            }
        }
        let s = sign(c[k]);
        q[k] = s * hb[k];
        (axis(k) * s, -depth - ra)
    };
    if dist > margin {
        return Contacts::none();
    }
    // `nb` points from the box to the sphere, in the box's frame.
    let n = -rot(fb.q, nb);
    let mut out = Contacts::new(n, case::CLOSEST);
    out.push(0, fa.p + n * ra, fb.to_world(q), dist);
    out
}

/// Squared distance from a point to the box [−he, he].
fn box_dist2(p: Vec3, he: Vec3) -> f32 {
    let d = (p.abs() - he).max(Vec3::ZERO);
    d.dot(d)
}

/// Where a point of a capsule's axis lies when it is not inside the axis: [`INSIDE`], an
/// end (0 at −h, 1 at +h), or where the axis crosses the box's face plane −x_k (2 + 2k) or
/// +x_k (3 + 2k).
const INSIDE: u32 = u32::MAX;
/// Curvature (Σ u_k² over the active planes) below which a piece counts as flat: an axis
/// within 1e-5 rad of parallel, whose true minimum lies at most ~1e-10 m² lower.
const FLAT: f32 = 1e-10;

/// The parameter t ∈ [−h, h] of the point of segment `c + u t` closest to the box
/// [−he, he], its squared distance, and where it lies ([`INSIDE`] or a bound's code). The
/// squared distance is convex and quadratic between the parameters where the segment
/// crosses a face plane of the box, so each piece's minimum is exact; the first of equal
/// minima wins. A piece flatter than [`FLAT`] (an axis parallel to a face or an edge, up to
/// rounding) takes its first end and keeps it against the next pieces' equal (to 1e-6)
/// distances: rounding must not move the point from one end of a flat contact to the
/// other, nor differ between backends.
fn segment_box(c: Vec3, u: Vec3, h: f32, he: Vec3) -> (f32, f32, u32) {
    let mut ts = [0.0f32; 8];
    let mut codes = [0u32; 8];
    ts[0] = -h;
    ts[1] = h;
    codes[1] = 1;
    let mut n = 2;
    for k in 0..3 {
        if u[k] != 0.0 {
            for (s, code) in [(-1.0f32, 2 + 2 * k as u32), (1.0, 3 + 2 * k as u32)] {
                let t = (s * he[k] - c[k]) / u[k];
                if t > -h && t < h {
                    ts[n] = t;
                    codes[n] = code;
                    n += 1;
                }
            }
        }
    }
    // Insertion sort of at most 8 values.
    for i in 1..n {
        let (v, code) = (ts[i], codes[i]);
        let mut j = i;
        while j > 0 && ts[j - 1] > v {
            ts[j] = ts[j - 1];
            codes[j] = codes[j - 1];
            j -= 1;
        }
        ts[j] = v;
        codes[j] = code;
    }
    let mut best_t = -h;
    let mut best_code = 0;
    let mut best = box_dist2(c - u * h, he);
    let mut best_flat = false;
    for m in 0..n - 1 {
        let (t0, t1) = (ts[m], ts[m + 1]);
        if t1 <= t0 {
            continue;
        }
        // Which face planes the piece is outside of, from its midpoint.
        let mid = c + u * (0.5 * (t0 + t1));
        let (mut qa, mut qb) = (0.0f32, 0.0f32);
        for k in 0..3 {
            if mid[k] > he[k] {
                qa += u[k] * u[k];
                qb += u[k] * (c[k] - he[k]);
            } else if mid[k] < -he[k] {
                qa += u[k] * u[k];
                qb += u[k] * (c[k] + he[k]);
            }
        }
        let flat = qa <= FLAT;
        let mut t = if flat { t0 } else { (-qb / qa).clamp(t0, t1) };
        if t - t0 <= END_SNAP * h {
            t = t0;
        } else if t1 - t <= END_SNAP * h {
            t = t1;
        }
        let f = box_dist2(c + u * t, he);
        // After a flat piece, the next piece's start is the same distance up to rounding.
        let better = if best_flat {
            f < best - 1e-6 * best
        } else {
            f < best
        };
        if !better && flat && t == best_t {
            best_flat = true;
        }
        if better {
            best = f;
            best_t = t;
            best_flat = flat;
            best_code = if t == t0 {
                codes[m]
            } else if t == t1 {
                codes[m + 1]
            } else {
                INSIDE
            };
        }
    }
    (best_t, best, best_code)
}

/// Capsule A (`da`: half height, radius), box B. One point between the closest points of
/// A's axis and the box (id 0 inside the axis, else 1 + bound + 8 × face as below, face 6
/// when the normal is not a face normal), or, when the axis is within [`CORE_DIST`] of the box, from
/// separating axes (the box's faces and its edges crossed with the axis). When the normal
/// is a face normal of the box and the capsule lies along that face, two points instead:
/// the ends of the axis clipped to the face (ids 1 + bound + 8 × face, bound 0, 1 for A's
/// ends, 2 + 2j (+1) for the box's side planes −x_j (+x_j), face 2k (+1) for +x_k (−x_k)).
pub(super) fn capsule_box(da: Vec3, fa: &Frame, hb: Vec3, fb: &Frame, margin: f32) -> Contacts {
    let (ha, ra) = (da.x, da.y);
    // A's axis in B's frame.
    let c = fb.to_local(fa.p);
    let u = rot(qmul(conj(fb.q), fa.q), Vec3::Y);
    let (t, f2, t_code) = segment_box(c, u, ha, hb);
    // Face k of the normal (−1: not a face normal), its side s, the normal from the box
    // to the capsule, the points on the axis and on the box, the case.
    let mut face = -1i32;
    let mut s = 1.0f32;
    // Where the point lies on A's axis (see `segment_box`).
    let mut bound = t_code;
    let (nb, p_axis, p_box, kind);
    if f2 > CORE_DIST * CORE_DIST {
        let q = c + u * t;
        let cq = q.clamp(-hb, hb);
        let dv = q - cq;
        let len = dv.length();
        nb = dv / len;
        p_axis = q;
        p_box = cq;
        kind = case::CLOSEST;
        // Nearly a face normal (see FACE_SNAP).
        let k = if nb.x.abs() >= nb.y.abs() && nb.x.abs() >= nb.z.abs() {
            0
        } else if nb.y.abs() >= nb.z.abs() {
            1
        } else {
            2
        };
        if nb[(k + 1) % 3].abs() <= FACE_SNAP && nb[(k + 2) % 3].abs() <= FACE_SNAP {
            face = k as i32;
            s = sign(nb[k]);
        }
    } else {
        let mut best_face = f32::MIN;
        let mut fk = 0;
        for k in 0..3 {
            let sep = c[k].abs() - u[k].abs() * ha - hb[k];
            if sep > best_face {
                best_face = sep;
                fk = k;
            }
        }
        let mut best_edge = f32::MIN;
        let mut edge_axis = Vec3::ZERO;
        let mut ek = 0;
        for k in 0..3 {
            let a = axis(k).cross(u);
            let len = a.length();
            if len >= EDGE_MIN_SIN {
                let a = a / len;
                let sep = c.dot(a).abs() - hb.dot(a.abs());
                if sep > best_edge {
                    best_edge = sep;
                    edge_axis = a;
                    ek = k;
                }
            }
        }
        let scale = ha.max(ra).min(hb.max_element());
        if best_edge > best_face + EDGE_TOL * scale {
            let a = edge_axis * sign(c.dot(edge_axis));
            let mut eb = hb * Vec3::new(sign(a.x), sign(a.y), sign(a.z));
            eb[ek] = 0.0;
            let (sa, sb) = segment_params(c, u, ha, eb, axis(ek), hb[ek]);
            bound = INSIDE;
            nb = a;
            p_axis = c + u * sa;
            p_box = eb + axis(ek) * sb;
            kind = case::EDGE_EDGE;
        } else {
            face = fk as i32;
            s = sign(c[fk]);
            // The end of the axis deepest along −n.
            let end = if u[fk] * s > 0.0 { -ha } else { ha };
            bound = (end > 0.0) as u32;
            let p = c + u * end;
            let mut pb = p;
            pb[fk] = s * hb[fk];
            nb = axis(fk) * s;
            p_axis = p;
            p_box = pb;
            kind = case::FACE_B;
        }
    }
    let dist = (p_axis - p_box).dot(nb) - ra;
    if dist > margin {
        return Contacts::none();
    }
    if face >= 0 {
        let k = face as usize;
        let nf = axis(k) * s;
        // The axis clipped to the face's side planes.
        let (mut lo, mut lo_code, mut hi, mut hi_code) = (-ha, 0u32, ha, 1u32);
        for j in 0..3 {
            if j == k {
                continue;
            }
            if u[j] != 0.0 {
                let t1 = (-hb[j] - c[j]) / u[j];
                let t2 = (hb[j] - c[j]) / u[j];
                let (c1, c2) = (2 + 2 * j as u32, 3 + 2 * j as u32);
                let (enter, enter_code, exit, exit_code) = if t1 <= t2 {
                    (t1, c1, t2, c2)
                } else {
                    (t2, c2, t1, c1)
                };
                if enter > lo {
                    lo = enter;
                    lo_code = enter_code;
                }
                if exit < hi {
                    hi = exit;
                    hi_code = exit_code;
                }
            } else if c[j].abs() > hb[j] {
                hi = lo;
            }
        }
        if hi - lo > 1e-3 * ha {
            let face_id = 2 * k as u32 + (s < 0.0) as u32;
            let mut out = Contacts::new(-rot(fb.q, nf), case::SIDE_BY_SIDE);
            for (t, code) in [(lo, lo_code), (hi, hi_code)] {
                let p = c + u * t;
                let d = s * p[k] - hb[k] - ra;
                if d <= margin {
                    let mut pb = p;
                    pb[k] = s * hb[k];
                    let id = 1 + code + 8 * face_id;
                    out.push(id, fb.to_world(p - nf * ra), fb.to_world(pb), d);
                }
            }
            if out.count == 2 {
                return out;
            }
        }
    }
    // A point at a bound of the axis is named by it (and by the face, as among two points),
    // so that it does not take over another point's id when it jumps along a flat contact.
    let id = if bound == INSIDE {
        0
    } else if face >= 0 {
        1 + bound + 8 * (2 * face as u32 + (s < 0.0) as u32)
    } else {
        1 + bound + 8 * 6
    };
    let mut out = Contacts::new(-rot(fb.q, nb), kind);
    out.push(id, fb.to_world(p_axis - nb * ra), fb.to_world(p_box), dist);
    out
}

/// Box A, half-space B: the (at most four) deepest vertices within the margin, in vertex
/// order; a vertex's id is its index, bit k set for the −x_k side (parry3d's numbering).
pub(super) fn box_plane(ha: Vec3, fa: &Frame, nb: Vec3, fb: &Frame, margin: f32) -> Contacts {
    let nw = rot(fb.q, nb);
    let mut s = [0.0f32; 8];
    let mut v = [Vec3::ZERO; 8];
    for i in 0..8 {
        let corner = ha * Vec3::new(corner_sign(i, 0), corner_sign(i, 1), corner_sign(i, 2));
        v[i] = fa.to_world(corner);
        s[i] = (v[i] - fb.p).dot(nw);
    }
    let mut out = Contacts::new(-nw, case::PLANE);
    for i in 0..8 {
        if s[i] > margin {
            continue;
        }
        // Vertices within the margin that are deeper (ties: lower index first).
        let mut rank = 0;
        for j in 0..8 {
            if s[j] <= margin && (s[j] < s[i] || (s[j] == s[i] && j < i)) {
                rank += 1;
            }
        }
        if rank < 4 {
            out.push(i as u32, v[i], v[i] - nw * s[i], s[i]);
        }
    }
    if out.count == 0 {
        return Contacts::none();
    }
    out
}

/// −1 when bit k of vertex index i is set, else +1.
pub(super) fn corner_sign(i: usize, k: usize) -> f32 {
    if (i >> k) & 1 == 1 { -1.0 } else { 1.0 }
}
