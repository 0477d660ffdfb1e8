//! What surface contact sees of the world: points, triangles and edges of every deformable
//! surface and every rigid collider's tessellation, and half-spaces.
//!
//! Points have one index space, stable while the bodies do not change: a deformable's
//! vertex `v` is point `v`; the rigid points follow, body after body. A rigid point is a
//! fixed point of its body's frame (relative to the centre of mass), so where it is at any
//! pose is `p + R r`.

use glam::{Quat, Vec3, Vec3A};
use parry3d::shape::TypedShape;

use crate::deformable::DeformableSet;
use crate::math::Vec6;
use crate::rigid::{BodyKind, BodySet};

/// Which object a primitive belongs to: deformable body `i`, or rigid body (solver index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Soft(u32),
    Rigid(u32),
}

/// A rigid body's surface in its own frame.
#[derive(Clone, Debug, Default)]
pub struct RigidSurface {
    pub body: u32,
    /// Points relative to the centre of mass.
    pub points: Vec<Vec3>,
    pub triangles: Vec<[u32; 3]>,
    pub edges: Vec<[u32; 2]>,
    /// Half-spaces: outward normal and a point of the plane, in the body frame.
    pub planes: Vec<(Vec3, Vec3)>,
}

/// A primitive of the broad phase: a point, a triangle or an edge (indices into
/// [`Geometry`]'s lists).
#[derive(Clone, Copy, Debug)]
pub enum Leaf {
    Point(u32),
    Triangle(u32),
    Edge(u32),
}

/// Index of an object's points, triangles and edges in [`Geometry::leaves`].
pub const POINTS: usize = 0;
pub const TRIANGLES: usize = 1;
pub const EDGES: usize = 2;

/// The surfaces of one frame's bodies.
#[derive(Default)]
pub struct Geometry {
    /// The deformable vertex count (rigid points start there).
    pub soft_points: u32,
    /// Per rigid point: its body and body-frame position.
    pub rigid_points: Vec<(u32, Vec3)>,
    /// Triangles and edges as point indices, with their owner.
    pub triangles: Vec<([u32; 3], Owner)>,
    pub edges: Vec<([u32; 2], Owner)>,
    /// Surface points of deformables (those in a surface triangle), once each.
    pub surface_points: Vec<u32>,
    /// Rigid half-spaces: body, body-frame normal and point.
    pub planes: Vec<(u32, Vec3, Vec3)>,
    /// Rigid bodies that have a surface, with the range of their points.
    pub rigid_bodies: Vec<(u32, std::ops::Range<u32>)>,
    /// Per rigid body (solver index): the farthest of its surface points from its origin
    /// (m; 0 without a surface).
    pub rigid_radius: Vec<f32>,
    /// Per object (deformables, then rigid bodies by solver index): its primitives by
    /// kind ([`POINTS`], [`TRIANGLES`], [`EDGES`]).
    pub leaves: Vec<[Vec<Leaf>; 3]>,
}

/// Ball and capsule tessellation for contact: finer than the export's, so that a vertex
/// resting on a ball sits within a tenth of a millimetre of the true sphere of 10 cm.
const CURVED_SUBDIVISIONS: (u32, u32) = (32, 16);

/// The surface of body `i`'s collider in its frame, or `None` if it has none.
pub fn rigid_surface(bodies: &BodySet, i: usize) -> Option<RigidSurface> {
    let collider = bodies.colliders[i].as_ref()?;
    let offset = bodies.shape_offsets[i];
    let mut s = RigidSurface {
        body: i as u32,
        ..Default::default()
    };
    let push = |v: Vec<Vec3>, t: Vec<[u32; 3]>, s: &mut RigidSurface| {
        let base = s.points.len() as u32;
        s.points.extend(v.into_iter().map(|p| p + offset));
        let tris: Vec<[u32; 3]> = t.into_iter().map(|f| f.map(|k| k + base)).collect();
        s.edges.extend(crate::deformable::mesh::edges_of(&tris));
        s.triangles.extend(tris);
    };
    let shape = collider.shape.as_ref();
    match shape.as_typed_shape() {
        TypedShape::HalfSpace(h) => s.planes.push((h.normal, offset)),
        TypedShape::Ball(b) => {
            let (v, t) = b.to_trimesh(CURVED_SUBDIVISIONS.0, CURVED_SUBDIVISIONS.1);
            push(v, t, &mut s);
        }
        TypedShape::Capsule(c) => {
            let (v, t) = c.to_trimesh(CURVED_SUBDIVISIONS.0, CURVED_SUBDIVISIONS.1);
            push(v, t, &mut s);
        }
        _ => {
            let mut meshes = Vec::new();
            crate::export::tessellate(shape, &mut meshes, (Vec3::ZERO, Quat::IDENTITY));
            for (v, t) in meshes {
                push(v, t, &mut s);
            }
        }
    }
    (!s.points.is_empty() || !s.planes.is_empty()).then_some(s)
}

impl Geometry {
    /// Builds the surfaces of every deformable and every rigid collider.
    pub fn build(set: &DeformableSet, bodies: &BodySet) -> Self {
        let mut g = Geometry {
            soft_points: set.vertex_count() as u32,
            ..Default::default()
        };
        for (b, body) in set.bodies.iter().enumerate() {
            let owner = Owner::Soft(b as u32);
            let tr = body.surface_triangles.start as usize..body.surface_triangles.end as usize;
            g.triangles
                .extend(set.surface_triangles[tr].iter().map(|&t| (t, owner)));
            let er = body.surface_edges.start as usize..body.surface_edges.end as usize;
            g.edges
                .extend(set.surface_edges[er].iter().map(|&e| (e, owner)));
        }
        let mut used = vec![false; set.vertex_count()];
        for (t, _) in &g.triangles {
            for &v in t {
                used[v as usize] = true;
            }
        }
        g.surface_points = (0..set.vertex_count() as u32)
            .filter(|&v| used[v as usize])
            .collect();
        g.rigid_radius = vec![0.0; bodies.len()];
        for i in 0..bodies.len() {
            let Some(s) = rigid_surface(bodies, i) else {
                continue;
            };
            g.rigid_radius[i] = s.points.iter().map(|p| p.length()).fold(0.0, f32::max);
            let base = g.soft_points + g.rigid_points.len() as u32;
            let owner = Owner::Rigid(i as u32);
            g.rigid_points
                .extend(s.points.iter().map(|&p| (i as u32, p)));
            g.triangles
                .extend(s.triangles.iter().map(|t| (t.map(|k| k + base), owner)));
            g.edges
                .extend(s.edges.iter().map(|e| (e.map(|k| k + base), owner)));
            g.planes
                .extend(s.planes.iter().map(|&(n, p)| (i as u32, n, p)));
            g.rigid_bodies
                .push((i as u32, base..base + s.points.len() as u32));
        }
        // Each object's primitives: its surface points, triangles and edges.
        let objects = set.len() + bodies.len();
        let object = |o: Owner| match o {
            Owner::Soft(b) => b as usize,
            Owner::Rigid(i) => set.len() + i as usize,
        };
        g.leaves = vec![Default::default(); objects];
        for &p in &g.surface_points {
            g.leaves[set.owner[p as usize] as usize][POINTS].push(Leaf::Point(p));
        }
        for (b, range) in &g.rigid_bodies {
            g.leaves[set.len() + *b as usize][POINTS].extend(range.clone().map(Leaf::Point));
        }
        for (i, (_, o)) in g.triangles.iter().enumerate() {
            g.leaves[object(*o)][TRIANGLES].push(Leaf::Triangle(i as u32));
        }
        for (i, (_, o)) in g.edges.iter().enumerate() {
            g.leaves[object(*o)][EDGES].push(Leaf::Edge(i as u32));
        }
        g
    }

    /// The points of a primitive (the first `n` of the array).
    pub fn leaf_points(&self, leaf: Leaf) -> ([u32; 3], usize) {
        match leaf {
            Leaf::Point(p) => ([p, p, p], 1),
            Leaf::Triangle(t) => (self.triangles[t as usize].0, 3),
            Leaf::Edge(e) => {
                let [a, b] = self.edges[e as usize].0;
                ([a, b, b], 2)
            }
        }
    }

    pub fn point_count(&self) -> usize {
        self.soft_points as usize + self.rigid_points.len()
    }

    /// The Jacobian row `Σ_k w_k (d, (R r_k) × d)` of rigid body `body` (orientation `q`)
    /// over those of a row's `points` that are its own: deformable points, other bodies'
    /// points and absent ones (past the point range) add nothing.
    #[inline]
    pub fn body_jacobian(
        &self,
        body: usize,
        q: Quat,
        points: &[u32; 4],
        weights: &[f32; 4],
        d: Vec3,
    ) -> Vec6 {
        let mut j: Vec6 = [0.0; 6];
        for k in 0..4 {
            let p = points[k];
            if p < self.soft_points {
                continue;
            }
            let Some(&(b, local)) = self.rigid_points.get((p - self.soft_points) as usize) else {
                continue;
            };
            if b as usize != body {
                continue;
            }
            let lin = d * weights[k];
            let ang = (q * local).cross(lin);
            for a in 0..3 {
                j[a] += lin[a];
                j[3 + a] += ang[a];
            }
        }
        j
    }

    /// Owner of point `p`.
    #[inline]
    pub fn owner_of(&self, set: &DeformableSet, p: u32) -> Owner {
        if p < self.soft_points {
            Owner::Soft(set.owner[p as usize])
        } else {
            Owner::Rigid(self.rigid_points[(p - self.soft_points) as usize].0)
        }
    }
}

/// A rigid body pose as the contact stage uses it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    pub p: Vec3,
    pub q: Quat,
}

impl Pose {
    #[inline]
    pub fn apply(&self, r: Vec3) -> Vec3A {
        (self.p + self.q * r).into()
    }

    /// The pose a fraction `t` of the way to `to` (position linearly, rotation by slerp).
    pub fn lerp(&self, to: &Pose, t: f32) -> Pose {
        Pose {
            p: self.p + (to.p - self.p) * t,
            q: self.q.slerp(to.q, t).normalize(),
        }
    }

    /// Where [`Self::lerp`] towards `to` may stop: every fraction outside (`b`, 1 − `b`),
    /// the value returned (½: anywhere). CCD certifies each point's straight segment from
    /// here to its place at `to`, but the pose a fraction `t` of the way puts a point at
    /// distance ρ from the rotation's axis off that segment by up to `t(1 − t) θ² ρ / 2`
    /// (θ the rotation's angle: the interpolation error of an arc whose second derivative
    /// is θ²ρ), which stays within `tol` for every point within `radius` of the origin
    /// outside the band. A box spinning at 40 rad/s into a soft slab, stopped 87% of the
    /// way by its island's step, ended 5.9 mm off its segments and through the slab.
    pub fn rotation_band(&self, to: &Pose, radius: f32, tol: f32) -> f32 {
        let d = (self.q.dot(to.q).abs() as f64).min(1.0);
        let theta = 2.0 * d.acos();
        let arc = theta * theta * radius as f64;
        // t(1 − t) ≤ c, with a relative margin for the rounding of the poses.
        let c = 2.0 * tol as f64 / arc * (1.0 - 1e-3);
        // (θ = 0: no band, whatever the tolerance.)
        if c.is_nan() || c >= 0.25 {
            return 0.5;
        }
        (0.5 * (1.0 - (1.0 - 4.0 * c).sqrt())) as f32
    }
}

/// Whether rigid body `i` moves during the step (dynamic or kinematic, not frozen).
#[inline]
pub fn moves(bodies: &BodySet, i: usize) -> bool {
    !bodies.frozen[i] && (bodies.is_solved(i) || bodies.kinds[i] == BodyKind::Kinematic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::Lcg;

    /// `Pose::rotation_band` against the poses themselves: outside the band every point
    /// within the radius is within `tol` (plus f32 rounding) of its straight segment, and
    /// the band is not much wider than it needs to be (a point at the full radius, square
    /// to the axis, strays by more than `tol` halfway).
    #[test]
    fn the_rotation_band_bounds_a_pose_off_its_points_segments() {
        let mut r = Lcg(11);
        let (radius, tol) = (0.2f32, 5e-5f32);
        let mut banded = 0;
        for _ in 0..200 {
            let axis = Vec3::new(r.signed(), r.signed(), r.signed()).normalize();
            let angle = 1.2 * r.signed().abs();
            let from = Pose {
                p: Vec3::new(r.signed(), r.signed(), r.signed()),
                q: Quat::from_rotation_y(3.0 * r.signed()) * Quat::from_rotation_x(r.signed()),
            };
            let to = Pose {
                p: from.p + Vec3::new(r.signed(), r.signed(), r.signed()) * 0.1,
                q: Quat::from_axis_angle(axis, angle) * from.q,
            };
            let band = from.rotation_band(&to, radius, tol);
            assert!((0.0..=0.5).contains(&band));
            for k in 0..=40 {
                let t = k as f32 / 40.0;
                if t > band && t < 1.0 - band {
                    continue;
                }
                let mid = from.lerp(&to, t);
                for _ in 0..8 {
                    let p = Vec3::new(r.signed(), r.signed(), r.signed()).clamp_length_max(1.0)
                        * radius;
                    let chord = from.apply(p) + (to.apply(p) - from.apply(p)) * t;
                    let off = (mid.apply(p) - chord).length();
                    assert!(off <= tol + 1e-6, "t {t}, band {band}: {off}");
                }
            }
            // (Clear of the bound's slack: halfway, the arc strays θ²ρ/8 (1 − θ²/48 …).)
            if band < 0.4 {
                banded += 1;
                // In the world frame the axis is `axis`: a point square to it at the radius.
                let side = axis.any_orthonormal_vector() * radius;
                let local = from.q.inverse() * side;
                let mid = from.lerp(&to, 0.5);
                let chord = (from.apply(local) + to.apply(local)) * 0.5;
                assert!((mid.apply(local) - chord).length() > tol, "band {band}");
            }
        }
        assert!(banded > 100, "{banded} of 200 rotations made a clear band");
    }
}
