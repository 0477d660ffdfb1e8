//! Pairs of round shapes (spheres, capsules) and the shapes against a half-space.

use glam::Vec3;

use super::{Contacts, Frame, case, rot};

/// Capsules (and a capsule on a box face) count as side by side within this angle (π/8,
/// parry3d's threshold for the same test in 2-D) ...
pub(super) const COS_PARALLEL: f32 = 0.923_879_5;
pub(super) const SIN_PARALLEL: f32 = 0.382_683_43;
/// ... and when both clipped points lie within this share of the smaller radius of
/// straight across from each other (else the two points would not touch B).
const LATERAL_SHARE: f32 = 0.25;

/// Parameters (s, t) of the closest points of segments `ca + ua s` (|s| ≤ ha) and
/// `cb + ub t` (|t| ≤ hb), unit directions (Ericson, Real-Time Collision Detection 5.1.9,
/// in centred form). Parallel segments take s = 0 before clamping.
pub(super) fn segment_params(
    ca: Vec3,
    ua: Vec3,
    ha: f32,
    cb: Vec3,
    ub: Vec3,
    hb: f32,
) -> (f32, f32) {
    let r = ca - cb;
    let b = ua.dot(ub);
    let c = ua.dot(r);
    let f = ub.dot(r);
    // |ua × ub|², not 1 − b², which cancels when the segments are nearly parallel.
    let denom = ua.cross(ub).length_squared();
    let mut s = if denom > 1e-12 {
        ((b * f - c) / denom).clamp(-ha, ha)
    } else {
        0.0
    };
    let mut t = b * s + f;
    if t < -hb {
        t = -hb;
        s = (b * t - c).clamp(-ha, ha);
    } else if t > hb {
        t = hb;
        s = (b * t - c).clamp(-ha, ha);
    }
    (s, t)
}

/// Two spheres (or a sphere and a capsule's closest axis point): one point, id 0. Centres
/// that coincide take `fallback` as the normal.
fn spheres(ca: Vec3, ra: f32, cb: Vec3, rb: f32, fallback: Vec3, margin: f32) -> Contacts {
    let dv = cb - ca;
    let len = dv.length();
    let dist = len - ra - rb;
    if dist > margin {
        return Contacts::none();
    }
    let n = if len > 0.0 { dv / len } else { fallback };
    let mut c = Contacts::new(n, case::CLOSEST);
    c.push(0, ca + n * ra, cb - n * rb, dist);
    c
}

pub(super) fn sphere_sphere(ra: f32, fa: &Frame, rb: f32, fb: &Frame, margin: f32) -> Contacts {
    // Coincident centres: A's local +y, as parry3d.
    spheres(fa.p, ra, fb.p, rb, rot(fa.q, Vec3::Y), margin)
}

/// Sphere A, capsule B (`db`: half height, radius).
pub(super) fn sphere_capsule(ra: f32, fa: &Frame, db: Vec3, fb: &Frame, margin: f32) -> Contacts {
    let ub = rot(fb.q, Vec3::Y);
    let t = (fa.p - fb.p).dot(ub).clamp(-db.x, db.x);
    spheres(fa.p, ra, fb.p + ub * t, db.y, rot(fa.q, Vec3::Y), margin)
}

/// Capsules A and B. One point between the closest points of the axes (id 0, or that of
/// the axis end it is at, as below), or, when
/// the capsules lie side by side, two points at the ends of the axes' overlap (ids 1 + the
/// end that bounds it: 0, 1 for A's −y and +y ends, 2, 3 for B's), each on A's surface and
/// straight across along the normal.
pub(super) fn capsule_capsule(da: Vec3, fa: &Frame, db: Vec3, fb: &Frame, margin: f32) -> Contacts {
    let (ha, ra, hb, rb) = (da.x, da.y, db.x, db.y);
    let ua = rot(fa.q, Vec3::Y);
    let ub = rot(fb.q, Vec3::Y);
    let (s, t) = segment_params(fa.p, ua, ha, fb.p, ub, hb);
    let p = fa.p + ua * s;
    let q = fb.p + ub * t;
    // Nearly parallel axes make s and t ill-conditioned (errors up to ~1e-7 / sin² of their
    // angle), but an error in s (t) only moves `dv` along A's (B's) axis: keep the part
    // perpendicular to the axes whose closest point is interior, which it leaves alone.
    let mut dv = q - p;
    let (inner_a, inner_b) = (s.abs() < ha, t.abs() < hb);
    if inner_a {
        dv -= ua * dv.dot(ua);
    }
    if inner_b {
        // B's axis without its component along A's when both are interior.
        let e = if inner_a { ub - ua * ua.dot(ub) } else { ub };
        let l2 = e.length_squared();
        if l2 > 1e-12 {
            dv -= e * (dv.dot(e) / l2);
        }
    }
    let len = dv.length();
    let dist = len - ra - rb;
    if dist > margin {
        return Contacts::none();
    }
    // Crossing axes: A's local x, perpendicular to A's axis.
    let n = if len > 0.0 {
        dv / len
    } else {
        rot(fa.q, Vec3::X)
    };
    if ua.dot(ub).abs() >= COS_PARALLEL && ua.dot(n).abs() < SIN_PARALLEL {
        // The overlap of B's axis projected on A's, as parameters along A's.
        let b0 = (fb.p - ub * hb - fa.p).dot(ua);
        let b1 = (fb.p + ub * hb - fa.p).dot(ua);
        let (bl, bl_end, bh, bh_end) = if b0 <= b1 {
            (b0, 2u32, b1, 3u32)
        } else {
            (b1, 3u32, b0, 2u32)
        };
        let (mut lo, mut lo_end, mut hi, mut hi_end) = (-ha, 0u32, ha, 1u32);
        if bl > lo {
            lo = bl;
            lo_end = bl_end;
        }
        if bh < hi {
            hi = bh;
            hi_end = bh_end;
        }
        if hi - lo > 1e-3 * ha {
            let mut c = Contacts::new(n, case::SIDE_BY_SIDE);
            let lateral_max = LATERAL_SHARE * ra.min(rb);
            for (sa, end) in [(lo, lo_end), (hi, hi_end)] {
                let pa = fa.p + ua * sa;
                let tb = (pa - fb.p).dot(ub).clamp(-hb, hb);
                let w = fb.p + ub * tb - pa;
                let along = w.dot(n);
                let d = along - ra - rb;
                if d <= margin && (w - n * along).length() <= lateral_max {
                    let on_a = pa + n * ra;
                    c.push(1 + end, on_a, on_a + n * d, d);
                }
            }
            if c.count == 2 {
                return c;
            }
        }
    }
    // At an axis end, the id that end has among two points.
    let id = if s.abs() == ha {
        1 + (s > 0.0) as u32
    } else if t.abs() == hb {
        3 + (t > 0.0) as u32
    } else {
        0
    };
    let mut c = Contacts::new(n, case::CLOSEST);
    c.push(id, p + n * ra, q - n * rb, dist);
    c
}

/// Sphere A, half-space B (`nb`: its local outward normal): one point, id 0.
pub(super) fn sphere_plane(ra: f32, fa: &Frame, nb: Vec3, fb: &Frame, margin: f32) -> Contacts {
    let nw = rot(fb.q, nb);
    let s = (fa.p - fb.p).dot(nw);
    let dist = s - ra;
    if dist > margin {
        return Contacts::none();
    }
    let mut c = Contacts::new(-nw, case::PLANE);
    c.push(0, fa.p - nw * ra, fa.p - nw * s, dist);
    c
}

/// Capsule A, half-space B: the ends of A's axis within the margin (ids 0 for −y, 1 for +y).
pub(super) fn capsule_plane(da: Vec3, fa: &Frame, nb: Vec3, fb: &Frame, margin: f32) -> Contacts {
    let (ha, ra) = (da.x, da.y);
    let nw = rot(fb.q, nb);
    let ua = rot(fa.q, Vec3::Y);
    let mut c = Contacts::new(-nw, case::PLANE);
    for end in 0..2u32 {
        let p = fa.p + ua * (if end == 0 { -ha } else { ha });
        let s = (p - fb.p).dot(nw);
        let d = s - ra;
        if d <= margin {
            c.push(end, p - nw * ra, p - nw * s, d);
        }
    }
    if c.count == 0 {
        return Contacts::none();
    }
    c
}
