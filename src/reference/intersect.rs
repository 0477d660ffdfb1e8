//! Exact intersection tests of surfaces, for the `intersections` metric of the contact
//! scenes and for tests: at a frame end, do any two surfaces share a point?
//!
//! Two triangles without a common vertex intersect exactly when an edge of one meets the
//! other (in 3-D, and in the coplanar case too); an edge meets a triangle when its ends
//! are not strictly on one side of the triangle's plane and the line through it passes
//! through the triangle. Each of these is a sign of an orientation determinant, evaluated
//! exactly with Shewchuk's adaptive predicates (the `robust` crate) on the f32 positions
//! widened to f64 (exactly), so the answer is exact for the positions the engine holds.
//! Touching counts as intersecting.
//!
//! The surfaces are every deformable's (tet boundaries, cloth), every rigid collider's
//! tessellation as the contact stage sees it (`surface_contact::geometry::rigid_surface`:
//! the certified surfaces; a ball's is inscribed in it, 32×16) and half-spaces. Pairs are counted when at least
//! one side is a deformable's (rigid–rigid contact is margin-based and not certified);
//! triangles of the same deformable that share a vertex are neighbours, not contacts.

use glam::{DVec3, Vec3};
use parry3d::bounding_volume::Aabb;
use parry3d::partitioning::{Bvh, BvhBuildStrategy, BvhWorkspace};

pub use crate::ccd::exact::{segment_triangle, triangles};
use crate::pipeline::surface_contact::geometry::rigid_surface;
use crate::world::PhysicsWorld;

/// Distance from `p` to triangle `abc` (f64).
pub fn point_triangle_distance(p: DVec3, a: DVec3, b: DVec3, cc: DVec3) -> f64 {
    // Ericson, Real-Time Collision Detection, 5.1.5: the closest point by Voronoi region.
    let (ab, ac, ap) = (b - a, cc - a, p - a);
    let (d1, d2) = (ab.dot(ap), ac.dot(ap));
    if d1 <= 0.0 && d2 <= 0.0 {
        return (p - a).length();
    }
    let bp = p - b;
    let (d3, d4) = (ab.dot(bp), ac.dot(bp));
    if d3 >= 0.0 && d4 <= d3 {
        return (p - b).length();
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return (p - (a + ab * (d1 / (d1 - d3)))).length();
    }
    let cp = p - cc;
    let (d5, d6) = (ab.dot(cp), ac.dot(cp));
    if d6 >= 0.0 && d5 <= d6 {
        return (p - cc).length();
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return (p - (a + ac * (d2 / (d2 - d6)))).length();
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && d4 - d3 >= 0.0 && d5 - d6 >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return (p - (b + (cc - b) * w)).length();
    }
    let denom = 1.0 / (va + vb + vc);
    let (v, w) = (vb * denom, vc * denom);
    (p - (a + ab * v + ac * w)).length()
}

/// Distance between segments `p0p1` and `q0q1` (f64).
pub fn segment_distance(p0: DVec3, p1: DVec3, q0: DVec3, q1: DVec3) -> f64 {
    // Ericson 5.1.9, with the parallel and degenerate cases.
    let (d1, d2, r) = (p1 - p0, q1 - q0, p0 - q0);
    let (a, e, f) = (d1.length_squared(), d2.length_squared(), d2.dot(r));
    let (s, t);
    if a <= 1e-300 && e <= 1e-300 {
        return (p0 - q0).length();
    }
    if a <= 1e-300 {
        s = 0.0;
        t = (f / e).clamp(0.0, 1.0);
    } else {
        let cc = d1.dot(r);
        if e <= 1e-300 {
            t = 0.0;
            s = (-cc / a).clamp(0.0, 1.0);
        } else {
            let b = d1.dot(d2);
            let denom = a * e - b * b;
            let mut s0 = if denom > 0.0 {
                ((b * f - cc * e) / denom).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let mut t0 = (b * s0 + f) / e;
            if t0 < 0.0 {
                t0 = 0.0;
                s0 = (-cc / a).clamp(0.0, 1.0);
            } else if t0 > 1.0 {
                t0 = 1.0;
                s0 = ((b - cc) / a).clamp(0.0, 1.0);
            }
            s = s0;
            t = t0;
        }
    }
    ((p0 + d1 * s) - (q0 + d2 * t)).length()
}

/// Distance between two triangles that do not intersect (f64): the least of the
/// vertex–triangle and edge–edge distances.
pub fn triangle_distance(t: [DVec3; 3], u: [DVec3; 3]) -> f64 {
    let mut d = f64::INFINITY;
    for k in 0..3 {
        d = d.min(point_triangle_distance(t[k], u[0], u[1], u[2]));
        d = d.min(point_triangle_distance(u[k], t[0], t[1], t[2]));
        for l in 0..3 {
            d = d.min(segment_distance(t[k], t[(k + 1) % 3], u[l], u[(l + 1) % 3]));
        }
    }
    d
}

/// What [`check`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntersectionReport {
    /// Pairs of surface triangles that intersect, plus deformable vertices inside a
    /// half-space.
    pub intersections: usize,
    /// The least distance between non-neighbour surfaces (at least one a deformable's)
    /// within `radius` of each other; `radius` when none is closer.
    pub min_separation: f64,
}

/// A triangle of the check: positions and who owns it.
#[derive(Clone, Copy)]
struct Tri {
    x: [DVec3; 3],
    /// `Some((body, vertices))` for a deformable's triangle (its vertex indices, to skip
    /// neighbours), `None` for a rigid collider's.
    soft: Option<(usize, [u32; 3])>,
    rigid: Option<usize>,
}

/// Checks every pair of surfaces of `world` with at least one deformable side, exactly,
/// and measures their least separation within `radius` (m).
pub fn check(world: &PhysicsWorld, radius: f64) -> IntersectionReport {
    let mut tris: Vec<Tri> = Vec::new();
    let mut soft_points: Vec<DVec3> = Vec::new();
    for (k, &h) in world.deformable_handles().iter().enumerate() {
        let Ok(d) = world.deformable(h) else { continue };
        let x = d.positions();
        for t in d.surface_triangles() {
            tris.push(Tri {
                x: t.map(|v| Vec3::from(x[v as usize]).as_dvec3()),
                soft: Some((k, t)),
                rigid: None,
            });
            for v in t {
                soft_points.push(Vec3::from(x[v as usize]).as_dvec3());
            }
        }
    }
    let mut report = IntersectionReport {
        intersections: 0,
        min_separation: radius,
    };
    if tris.is_empty() {
        return report;
    }
    soft_points.sort_by(|a, b| {
        a.to_array()
            .partial_cmp(&b.to_array())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    soft_points.dedup();
    let mut planes = Vec::new();
    let bodies = &world.bodies;
    for i in 0..bodies.len() {
        let Some(surface) = rigid_surface(bodies, i) else {
            continue;
        };
        let pose = &bodies.poses[i];
        let at = |r: Vec3| (pose.p() + pose.q() * r).as_dvec3();
        for &(n, p) in &surface.planes {
            planes.push(((pose.q() * n).as_dvec3(), at(p)));
        }
        for f in &surface.triangles {
            tris.push(Tri {
                x: f.map(|j| at(surface.points[j as usize])),
                soft: None,
                rigid: Some(i),
            });
        }
    }
    // Deformable vertices against half-spaces: inside (strictly) is an intersection.
    for &(n, p) in &planes {
        for &x in &soft_points {
            let s = n.dot(x - p);
            if s < 0.0 {
                report.intersections += 1;
            }
            report.min_separation = report.min_separation.min(s.max(0.0));
        }
    }
    let pad = radius as f32 * 0.5;
    let aabbs: Vec<Aabb> = tris
        .iter()
        .map(|t| {
            let lo = t.x[0].min(t.x[1]).min(t.x[2]).as_vec3() - Vec3::splat(pad + 1e-6);
            let hi = t.x[0].max(t.x[1]).max(t.x[2]).as_vec3() + Vec3::splat(pad + 1e-6);
            Aabb::new(lo, hi)
        })
        .collect();
    let bvh = Bvh::from_leaves(BvhBuildStrategy::Binned, &aabbs);
    let mut workspace = BvhWorkspace::default();
    bvh.traverse_bvtt_single_tree::<false>(&mut workspace, &mut |i, j| {
        let (a, b) = (&tris[i as usize], &tris[j as usize]);
        if a.soft.is_none() && b.soft.is_none() {
            return; // rigid–rigid
        }
        if a.rigid.is_some() && a.rigid == b.rigid {
            return;
        }
        if let (Some((ba, va)), Some((bb, vb))) = (a.soft, b.soft)
            && ba == bb
            && va.iter().any(|v| vb.contains(v))
        {
            return; // neighbours in one mesh
        }
        if triangles(a.x, b.x) {
            report.intersections += 1;
            report.min_separation = 0.0;
        } else {
            report.min_separation = report.min_separation.min(triangle_distance(a.x, b.x));
        }
    });
    report
}

/// One surface of [`check_soups`]: a body's vertex positions and its triangles (indices
/// into them).
#[derive(Clone, Copy, Debug)]
pub struct Soup<'a> {
    pub positions: &'a [Vec3],
    pub triangles: &'a [[u32; 3]],
}

/// [`check`] on raw triangle soups (another engine's surfaces, say), with the same exact
/// tests: its `intersections` are the pairs of triangles of different soups, or of one soup
/// without a common vertex, that share a point (`triangles`, touching counts), plus the
/// distinct triangle vertices (by position, as `check` has them) strictly inside a
/// half-space (`(outward normal, point)`); its `min_separation` the least distance between
/// such pairs, and of those vertices to the half-spaces, within `radius`. On a world's
/// deformable surfaces and half-spaces alone (no other rigid collider) it is `check`'s
/// report.
pub fn check_soups(soups: &[Soup], planes: &[(DVec3, DVec3)], radius: f64) -> IntersectionReport {
    let mut tris: Vec<([DVec3; 3], usize, [u32; 3])> = Vec::new();
    let mut points: Vec<DVec3> = Vec::new();
    for (k, s) in soups.iter().enumerate() {
        for &t in s.triangles {
            let x = t.map(|v| s.positions[v as usize].as_dvec3());
            tris.push((x, k, t));
            points.extend(x);
        }
    }
    let mut report = IntersectionReport {
        intersections: 0,
        min_separation: radius,
    };
    if tris.is_empty() {
        return report;
    }
    points.sort_by(|a, b| {
        a.to_array()
            .partial_cmp(&b.to_array())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    points.dedup();
    for &(n, p) in planes {
        for &x in &points {
            let s = n.dot(x - p);
            if s < 0.0 {
                report.intersections += 1;
            }
            report.min_separation = report.min_separation.min(s.max(0.0));
        }
    }
    let pad = radius as f32 * 0.5;
    let aabbs: Vec<Aabb> = tris
        .iter()
        .map(|(x, _, _)| {
            let lo = x[0].min(x[1]).min(x[2]).as_vec3() - Vec3::splat(pad + 1e-6);
            let hi = x[0].max(x[1]).max(x[2]).as_vec3() + Vec3::splat(pad + 1e-6);
            Aabb::new(lo, hi)
        })
        .collect();
    let bvh = Bvh::from_leaves(BvhBuildStrategy::Binned, &aabbs);
    let mut workspace = BvhWorkspace::default();
    bvh.traverse_bvtt_single_tree::<false>(&mut workspace, &mut |i, j| {
        let ((xa, ka, va), (xb, kb, vb)) = (&tris[i as usize], &tris[j as usize]);
        if ka == kb && va.iter().any(|v| vb.contains(v)) {
            return; // neighbours in one mesh
        }
        if triangles(*xa, *xb) {
            report.intersections += 1;
            report.min_separation = 0.0;
        } else {
            report.min_separation = report.min_separation.min(triangle_distance(*xa, *xb));
        }
    });
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tri(a: [f64; 3], b: [f64; 3], cc: [f64; 3]) -> [DVec3; 3] {
        [DVec3::from(a), DVec3::from(b), DVec3::from(cc)]
    }

    #[test]
    fn triangle_pairs_in_every_configuration() {
        let t = tri([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]);
        // Piercing.
        assert!(triangles(
            t,
            tri([0.2, 0.2, -1.0], [0.2, 0.2, 1.0], [0.3, 0.3, 1.0])
        ));
        // Above, parallel: no.
        assert!(!triangles(
            t,
            tri([0.0, 0.0, 1e-9], [1.0, 0.0, 1e-9], [0.0, 1.0, 1e-9])
        ));
        // Touching at a point on the edge: yes (closed sets).
        assert!(triangles(
            t,
            tri([0.5, 0.0, 0.0], [0.5, -1.0, 1.0], [0.5, -1.0, -1.0])
        ));
        // Coplanar overlapping, coplanar disjoint, coplanar one inside the other.
        assert!(triangles(
            t,
            tri([0.5, 0.5, 0.0], [2.0, 0.5, 0.0], [0.5, 2.0, 0.0])
        ));
        assert!(!triangles(
            t,
            tri([2.0, 2.0, 0.0], [3.0, 2.0, 0.0], [2.0, 3.0, 0.0])
        ));
        assert!(triangles(
            t,
            tri([0.1, 0.1, 0.0], [0.2, 0.1, 0.0], [0.1, 0.2, 0.0])
        ));
        // Crossing the plane outside the triangle: no.
        assert!(!triangles(
            t,
            tri([2.0, 2.0, -1.0], [2.0, 2.0, 1.0], [3.0, 2.0, 1.0])
        ));
        // One ulp below the plane and piercing by a hair: exact.
        let e = f64::EPSILON;
        assert!(triangles(
            t,
            tri([0.2, 0.2, -e], [0.2, 0.2, 1.0], [0.3, 0.3, 1.0])
        ));
        assert!(!triangles(
            t,
            tri([0.2, 0.2, e], [0.2, 0.2, 1.0], [0.3, 0.3, 1.0])
        ));
    }

    const R: f64 = 0.01;

    fn check_soups_n(soups: &[Soup], planes: &[(DVec3, DVec3)]) -> usize {
        check_soups(soups, planes, R).intersections
    }

    #[test]
    fn soups_count_pairs_neighbours_and_half_spaces() {
        // Tet boundaries: base on y = o.y, apex above it.
        let tet = |o: Vec3| {
            vec![
                o,
                o + Vec3::new(1.0, 0.0, 0.0),
                o + Vec3::new(0.0, 0.0, 1.0),
                o + Vec3::new(0.25, 1.0, 0.25),
            ]
        };
        fn soup<'a>(positions: &'a [Vec3]) -> Soup<'a> {
            const FACES: [[u32; 3]; 4] = [[0, 2, 1], [0, 1, 3], [1, 2, 3], [2, 0, 3]];
            Soup {
                positions,
                triangles: &FACES,
            }
        }
        let a = tet(Vec3::ZERO);
        // Its apex region overlapped by a second tet; one far away; one on a corner of `a`.
        let (b, c, d) = (
            tet(Vec3::new(0.1, 0.5, 0.1)),
            tet(Vec3::new(5.0, 0.0, 0.0)),
            tet(Vec3::new(1.0, 0.0, 0.0)),
        );
        // One tet alone: every pair of its faces shares a vertex.
        assert_eq!(check_soups(&[soup(&a)], &[], R).intersections, 0);
        assert!(check_soups_n(&[soup(&a), soup(&b)], &[]) > 0);
        assert_eq!(check_soups_n(&[soup(&a), soup(&c)], &[]), 0);
        // Touching counts.
        assert!(check_soups_n(&[soup(&a), soup(&d)], &[]) > 0);
        // A half-space: the base vertices strictly below y = 0.05; none below y = 0.
        let ground = |y: f64| (DVec3::Y, DVec3::new(0.0, y, 0.0));
        assert_eq!(check_soups_n(&[soup(&a)], &[ground(0.05)]), 3);
        assert_eq!(check_soups_n(&[soup(&a)], &[ground(0.0)]), 0);
        // Separations within the radius: the ground 4 mm under `a`, `c` 5 mm beside `d`.
        let r = check_soups(&[soup(&a)], &[ground(-0.004)], R);
        assert_eq!(r.intersections, 0);
        assert!((r.min_separation - 0.004).abs() < 1e-9, "{r:?}");
        let e = tet(Vec3::new(2.005, 0.0, 0.0));
        let r = check_soups(&[soup(&d), soup(&e)], &[], R);
        assert_eq!(r.intersections, 0);
        assert!((r.min_separation - 0.005).abs() < 1e-6, "{r:?}");
        assert_eq!(check_soups(&[soup(&a), soup(&c)], &[], R).min_separation, R);
    }

    #[test]
    fn distances() {
        let t = tri([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]);
        assert!(
            (point_triangle_distance(DVec3::new(0.2, 0.2, 0.5), t[0], t[1], t[2]) - 0.5).abs()
                < 1e-15
        );
        assert!(
            (point_triangle_distance(DVec3::new(-1.0, 0.0, 0.0), t[0], t[1], t[2]) - 1.0).abs()
                < 1e-15
        );
        let d = segment_distance(
            DVec3::new(0.0, 0.0, 1.0),
            DVec3::new(1.0, 0.0, 1.0),
            DVec3::new(0.5, -1.0, 0.0),
            DVec3::new(0.5, 1.0, 0.0),
        );
        assert!((d - 1.0).abs() < 1e-15);
        // Parallel segments.
        let d = segment_distance(
            DVec3::ZERO,
            DVec3::X,
            DVec3::new(0.5, 0.3, 0.0),
            DVec3::new(1.5, 0.3, 0.0),
        );
        assert!((d - 0.3).abs() < 1e-15);
        let u = tri([0.2, 0.2, 0.25], [0.4, 0.2, 0.25], [0.2, 0.4, 0.3]);
        assert!((triangle_distance(t, u) - 0.25).abs() < 1e-12);
    }
}
