//! Start states must be free of intersections. Penetration-free contact certifies the
//! motion from one intersection-free configuration to the next; it cannot pull apart
//! surfaces that already cross (their pairs have no free side to be linearised towards,
//! and the CCD of a crossing pair certifies no motion at all). So a deformable, or a
//! collider added beside deformables, that crosses a surface or sits inside a solid is
//! refused when it is added, and the world is left as it was.
//!
//! The test is exact (`ccd::exact`, touching counts): the added body's surface triangles
//! against every other surface (deformables', rigid tessellations as contact sees them)
//! and against its own non-neighbour triangles, its vertices against half-spaces, and,
//! for surfaces that do not cross, one point of each side inside the other's volume (a
//! solid's tets, a collider's shape).

use glam::{DVec3, Vec3};
use parry3d::bounding_volume::Aabb;
use parry3d::partitioning::{Bvh, BvhBuildStrategy, BvhWorkspace};

use super::geometry::rigid_surface;
use crate::ccd::exact::{point_in_tet, triangles};
use crate::deformable::DeformableSet;
use crate::rigid::BodySet;

/// A body of the check: a deformable (by index in its set) or a rigid body (by solver
/// index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Deformable(usize),
    Rigid(usize),
}

/// One triangle and (deformables) its vertex indices.
struct Tri {
    x: [DVec3; 3],
    vertices: [u32; 3],
}

fn aabb(t: &Tri) -> Aabb {
    let lo = t.x[0].min(t.x[1]).min(t.x[2]).as_vec3();
    let hi = t.x[0].max(t.x[1]).max(t.x[2]).as_vec3();
    // Widened by an ulp-scale margin: the f32 box must hold the f64 triangle.
    let pad = Vec3::splat(1e-6) + (lo.abs().max(hi.abs())) * 1e-6;
    Aabb::new(lo - pad, hi + pad)
}

/// The surface triangles and half-spaces of one side.
fn surface(set: &DeformableSet, bodies: &BodySet, side: Side) -> (Vec<Tri>, Vec<(DVec3, DVec3)>) {
    match side {
        Side::Deformable(b) => {
            let body = &set.bodies[b];
            let r = body.surface_triangles.start as usize..body.surface_triangles.end as usize;
            let tris = set.surface_triangles[r]
                .iter()
                .map(|&t| Tri {
                    x: t.map(|v| Vec3::from(set.positions[v as usize]).as_dvec3()),
                    vertices: t,
                })
                .collect();
            (tris, Vec::new())
        }
        Side::Rigid(i) => {
            let Some(s) = rigid_surface(bodies, i) else {
                return (Vec::new(), Vec::new());
            };
            let pose = &bodies.poses[i];
            let at = |r: Vec3| (pose.p() + pose.q() * r).as_dvec3();
            let tris = s
                .triangles
                .iter()
                .map(|f| Tri {
                    x: f.map(|j| at(s.points[j as usize])),
                    vertices: [u32::MAX; 3],
                })
                .collect();
            let planes = s
                .planes
                .iter()
                .map(|&(n, p)| ((pose.q() * n).as_dvec3(), at(p)))
                .collect();
            (tris, planes)
        }
    }
}

/// A point of a side (a vertex of its surface), for the containment tests.
fn some_point(set: &DeformableSet, bodies: &BodySet, side: Side) -> Option<DVec3> {
    match side {
        Side::Deformable(b) => {
            let v = set.bodies[b].vertices.start as usize;
            set.positions.get(v).map(|p| Vec3::from(*p).as_dvec3())
        }
        Side::Rigid(i) => {
            let s = rigid_surface(bodies, i)?;
            let r = *s.points.first()?;
            let pose = &bodies.poses[i];
            Some((pose.p() + pose.q() * r).as_dvec3())
        }
    }
}

/// Whether `p` is inside the volume of `side` (a solid's tets, a collider's shape; a
/// cloth has none).
fn contains(set: &DeformableSet, bodies: &BodySet, side: Side, p: DVec3) -> bool {
    match side {
        Side::Deformable(b) => {
            let r = set.bodies[b].tets.start as usize..set.bodies[b].tets.end as usize;
            set.tets[r].iter().any(|t| {
                let x =
                    t.v.map(|v| Vec3::from(set.positions[v as usize]).as_dvec3());
                point_in_tet(p, x)
            })
        }
        Side::Rigid(i) => {
            let Some(c) = bodies.colliders[i].as_ref() else {
                return false;
            };
            let pose = &bodies.poses[i];
            let iso = parry3d::math::Pose::from_parts(
                pose.p() + pose.q() * bodies.shape_offsets[i],
                pose.q(),
            );
            c.shape.contains_point(&iso, p.as_vec3())
        }
    }
}

/// The first side that `subject` intersects (itself included: a deformable whose surface
/// crosses itself), or `None`. Every deformable and every rigid body with a collider is
/// checked against it; rigid–rigid pairs are the rigid solver's (margin-based).
pub fn first_intersection(set: &DeformableSet, bodies: &BodySet, subject: Side) -> Option<Side> {
    let (mine, my_planes) = surface(set, bodies, subject);
    let mut others: Vec<Side> = (0..set.len()).map(Side::Deformable).collect();
    if let Side::Deformable(_) = subject {
        others.extend((0..bodies.len()).map(Side::Rigid));
    }
    others.retain(|&o| o != subject);
    // Its own surface first: a deformable's non-neighbour triangles must not meet.
    if let Side::Deformable(_) = subject
        && self_intersects(&mine)
    {
        return Some(subject);
    }
    let my_points: Vec<DVec3> = match subject {
        Side::Deformable(b) => set.positions
            [set.bodies[b].vertices.start as usize..set.bodies[b].vertices.end as usize]
            .iter()
            .map(|p| Vec3::from(*p).as_dvec3())
            .collect(),
        Side::Rigid(_) => Vec::new(),
    };
    let my_bvh = (!mine.is_empty()).then(|| {
        Bvh::from_leaves(
            BvhBuildStrategy::Binned,
            &mine.iter().map(aabb).collect::<Vec<_>>(),
        )
    });
    for other in others {
        let (theirs, planes) = surface(set, bodies, other);
        // Half-spaces: no vertex on or below the plane.
        let below = |points: &[DVec3], planes: &[(DVec3, DVec3)]| {
            planes
                .iter()
                .any(|&(n, at)| points.iter().any(|&x| n.dot(x - at) <= 0.0))
        };
        if below(&my_points, &planes) {
            return Some(other);
        }
        if let Side::Deformable(b) = other {
            let r = set.bodies[b].vertices.start as usize..set.bodies[b].vertices.end as usize;
            let points: Vec<DVec3> = set.positions[r]
                .iter()
                .map(|p| Vec3::from(*p).as_dvec3())
                .collect();
            if below(&points, &my_planes) {
                return Some(other);
            }
        }
        if let (Some(mb), false) = (&my_bvh, theirs.is_empty()) {
            let tb = Bvh::from_leaves(
                BvhBuildStrategy::Binned,
                &theirs.iter().map(aabb).collect::<Vec<_>>(),
            );
            let crossing = mb
                .leaf_pairs(&tb, |a, b| a.intersects(b))
                .any(|(i, j)| triangles(mine[i as usize].x, theirs[j as usize].x));
            if crossing {
                return Some(other);
            }
        }
        // The surfaces do not cross: one may still be inside the other.
        let inside = |a: Side, b: Side| {
            some_point(set, bodies, a).is_some_and(|p| contains(set, bodies, b, p))
        };
        if inside(subject, other) || inside(other, subject) {
            return Some(other);
        }
    }
    None
}

/// Whether two triangles of one deformable's surface that share no vertex meet.
fn self_intersects(tris: &[Tri]) -> bool {
    if tris.is_empty() {
        return false;
    }
    let bvh = Bvh::from_leaves(
        BvhBuildStrategy::Binned,
        &tris.iter().map(aabb).collect::<Vec<_>>(),
    );
    let mut found = false;
    let mut workspace = BvhWorkspace::default();
    bvh.traverse_bvtt_single_tree::<false>(&mut workspace, &mut |i, j| {
        let (a, b) = (&tris[i as usize], &tris[j as usize]);
        if !found && !a.vertices.iter().any(|v| b.vertices.contains(v)) {
            found = triangles(a.x, b.x);
        }
    });
    found
}
