//! What the primitive narrow phase is compared with: parry3d's manifolds, f64 closest
//! points of capsules, and box separations along an axis.

use bevy_avbd::glam::{DVec3, Vec3};
use bevy_avbd::parry3d::query::{
    ContactManifold, DefaultQueryDispatcher, PersistentQueryDispatcher,
};
use bevy_avbd::parry3d::shape::PackedFeatureId;
use bevy_avbd::pipeline::collision::primitive::{PrimitiveShape, kind};
use bevy_avbd::rigid::body::PoseRecord;

use super::{Config, MARGIN, parry_pose};

/// parry3d's manifold in world space: normal and points (on A, on B, distance).
pub struct Reference {
    pub n: Vec3,
    pub points: Vec<(Vec3, Vec3, f32)>,
    /// Points without feature ids (the GJK point parry3d's capsule–box manifold adds).
    pub unknown: Vec<bool>,
}

pub fn parry_manifold(c: &Config) -> Reference {
    let (pa, pb) = (parry_pose(&c.pair.pose_a), parry_pose(&c.pair.pose_b));
    let pos12 = pa.inverse() * pb;
    let mut manifolds: Vec<ContactManifold<(), ()>> = Vec::new();
    let mut workspace = None;
    DefaultQueryDispatcher
        .contact_manifolds(
            &pos12,
            c.sa.as_ref(),
            c.sb.as_ref(),
            MARGIN,
            &mut manifolds,
            &mut workspace,
        )
        .unwrap();
    let Some(m) = manifolds.first() else {
        return Reference {
            n: Vec3::ZERO,
            points: Vec::new(),
            unknown: Vec::new(),
        };
    };
    Reference {
        n: pa.rotation * m.local_n1,
        points: m
            .points
            .iter()
            .map(|p| (pa * p.local_p1, pb * p.local_p2, p.dist))
            .collect(),
        unknown: m
            .points
            .iter()
            .map(|p| p.fid1 == PackedFeatureId::UNKNOWN && p.fid2 == PackedFeatureId::UNKNOWN)
            .collect(),
    }
}

/// Angle between two unit vectors, in f64 (acos of an f32 dot cannot resolve 1e-3 rad well).
pub fn angle(a: Vec3, b: Vec3) -> f64 {
    let (a, b) = (a.as_dvec3(), b.as_dvec3());
    a.cross(b).length().atan2(a.dot(b))
}

// ------------------------------------------------------------------ f64 references

/// Argument of the minimum of a convex function on [lo, hi] (golden-section search, to
/// f64 precision; the ends are tried too).
pub fn convex_argmin(lo: f64, hi: f64, f: impl Fn(f64) -> f64) -> f64 {
    let (mut a, mut b) = (lo, hi);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..200 {
        let (x1, x2) = (b - g * (b - a), a + g * (b - a));
        if f(x1) <= f(x2) {
            b = x2;
        } else {
            a = x1;
        }
    }
    let mut best = 0.5 * (a + b);
    for x in [lo, hi] {
        if f(x) < f(best) {
            best = x;
        }
    }
    best
}

/// A capsule's axis in f64: centre, unit direction, half length.
pub fn axis_of(s: &PrimitiveShape, pose: &PoseRecord) -> (DVec3, DVec3, f64) {
    let q = pose.q().as_dquat();
    (pose.p().as_dvec3(), q * DVec3::Y, s.dims[0] as f64)
}

/// Closest point of a segment to a point, f64.
pub fn on_segment(p: DVec3, (c, u, h): (DVec3, DVec3, f64)) -> DVec3 {
    c + u * (p - c).dot(u).clamp(-h, h)
}

/// Closest point of a box to a point, f64.
pub fn on_box(p: DVec3, s: &PrimitiveShape, pose: &PoseRecord) -> DVec3 {
    let q = pose.q().as_dquat();
    let he = Vec3::from_array(s.dims).as_dvec3();
    let local = q.inverse() * (p - pose.p().as_dvec3());
    pose.p().as_dvec3() + q * local.clamp(-he, he)
}

/// f64 reference of two capsules, or of a capsule and a box whose axis stays 1e-4 m or more
/// outside the box: signed distance and unit normal from A to B (closest points of the
/// axes, or of the axis and the box, by golden-section search), `None` elsewhere.
pub fn reference(c: &Config) -> Option<(f64, DVec3)> {
    let (a, b, pa, pb) = (&c.pair.a, &c.pair.b, &c.pair.pose_a, &c.pair.pose_b);
    let (ka, kb) = (a.kind, b.kind);
    let (cap, cp, other, op, flip) = match (ka, kb) {
        (kind::CAPSULE, kind::CAPSULE | kind::BOX) => (a, pa, b, pb, false),
        (kind::BOX, kind::CAPSULE) => (b, pb, a, pa, true),
        _ => return None,
    };
    let seg = axis_of(cap, cp);
    let closest = |p: DVec3| {
        if other.kind == kind::CAPSULE {
            on_segment(p, axis_of(other, op))
        } else {
            on_box(p, other, op)
        }
    };
    let t = convex_argmin(-seg.2, seg.2, |t| {
        (seg.0 + seg.1 * t - closest(seg.0 + seg.1 * t)).length()
    });
    let p = seg.0 + seg.1 * t;
    let w = closest(p) - p;
    let radii = cap.dims[1] as f64
        + if other.kind == kind::CAPSULE {
            other.dims[1] as f64
        } else {
            0.0
        };
    if w.length() < 1e-4 {
        return None;
    }
    let n = w.normalize();
    Some((w.length() - radii, if flip { -n } else { n }))
}

/// Separation of two boxes along unit axis `n` (from A to B), f64.
pub fn box_separation(c: &Config, n: Vec3) -> f64 {
    let n = n.as_dvec3();
    let extent = |s: &PrimitiveShape, pose: &PoseRecord| {
        let q = pose.q().as_dquat();
        let he = Vec3::from_array(s.dims).as_dvec3();
        he.x * n.dot(q * DVec3::X).abs()
            + he.y * n.dot(q * DVec3::Y).abs()
            + he.z * n.dot(q * DVec3::Z).abs()
    };
    let (pa, pb) = (&c.pair.pose_a, &c.pair.pose_b);
    n.dot(pb.p().as_dvec3() - pa.p().as_dvec3()) - extent(&c.pair.a, pa) - extent(&c.pair.b, pb)
}

/// Whether `n` is (within 1e-4 rad) one of the 15 separating axis candidates of two boxes.
pub fn is_box_axis(c: &Config, n: Vec3) -> bool {
    let (qa, qb) = (c.pair.pose_a.q(), c.pair.pose_b.q());
    let axes_a = [qa * Vec3::X, qa * Vec3::Y, qa * Vec3::Z];
    let axes_b = [qb * Vec3::X, qb * Vec3::Y, qb * Vec3::Z];
    let mut candidates: Vec<Vec3> = axes_a.iter().chain(&axes_b).copied().collect();
    for a in axes_a {
        for b in axes_b {
            candidates.push(a.cross(b).normalize_or_zero());
        }
    }
    candidates
        .iter()
        .any(|&a| angle(a, n).min(angle(-a, n)) < 1e-4)
}

/// Whether `n` is (within 1e-5 rad) a face normal of a box at `pose`.
pub fn is_face_of(pose: &PoseRecord, n: Vec3) -> bool {
    let q = pose.q();
    [Vec3::X, Vec3::Y, Vec3::Z].iter().any(|&a| {
        let a = q * a;
        angle(a, n).min(angle(-a, n)) < 1e-5
    })
}
