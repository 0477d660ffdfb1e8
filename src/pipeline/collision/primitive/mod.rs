//! Primitive narrow phase: contact manifolds of sphere, capsule, box and half-space pairs,
//! written for the GPU (`shaders/narrow_phase.wgsl` is a line-by-line port): plain f32,
//! fixed-size arrays, no allocation, one manifold record per pair.
//!
//! Conventions are parry3d's `contact_manifolds`: the normal points from A to B, a point's
//! signed distance is negative when the shapes overlap and at most the margin when they are
//! apart. Every point carries a feature id that stays the same while the features it comes
//! from stay in contact, so the warm start can carry it from step to step.
//!
//! - sphere against sphere, capsule, box or half-space: one point between closest points;
//! - capsule–capsule: one point, or two at the ends of the axes' overlap where the capsules
//!   lie side by side (parry3d's 3-D capsule pair always gives one);
//! - capsule–box: one point from the closest points of the axis and the box (separating
//!   axes once the axis touches the box), or two where the capsule lies along a face;
//! - capsule–half-space: the axis's ends within the margin;
//! - box–box: separating axes (face axes favoured over nearly as good ones), the incident
//!   face clipped against the reference face, at most four points; edge–edge, one point;
//! - box–half-space: the four deepest vertices within the margin.
//!
//! `tests/narrow_phase.rs` compares every pair type with parry3d on thousands of random
//! configurations and the WGSL port with this code on the device. `super::detect` runs it
//! on every pair of these shapes (unless `SolverConfig::narrow_phase` asks for parry3d);
//! [`PrimitiveContact`] carries a pair's manifold from step to step.

use bytemuck::{Pod, Zeroable};
use glam::{Vec3, Vec4};
use parry3d::shape::{Shape, TypedShape};

use crate::rigid::body::PoseRecord;

mod box_box;
mod cuboid;
mod persistence;
mod round;

pub use persistence::{
    COHERENT_COS, COHERENT_SLIDE_SQ, CONTINUE_COS, CONTINUE_SHARE, PrimitiveContact,
};

/// [`PrimitiveShape::kind`]; pairs are solved with the lower kind as A.
pub mod kind {
    pub const SPHERE: u32 = 0;
    pub const CAPSULE: u32 = 1;
    pub const BOX: u32 = 2;
    pub const HALF_SPACE: u32 = 3;
}

/// [`PrimitiveManifold::case`]: which construction made the manifold (tests, statistics).
pub mod case {
    /// No contact within the margin.
    pub const NONE: u32 = 0;
    /// One point between closest points (spheres, capsules, sphere–box, capsule–box).
    pub const CLOSEST: u32 = 1;
    /// Two points of a capsule lying along a capsule or a box face.
    pub const SIDE_BY_SIDE: u32 = 2;
    /// Points of a shape against a half-space.
    pub const PLANE: u32 = 3;
    /// Box–box, reference face on A.
    pub const FACE_A: u32 = 4;
    /// Box–box, reference face on B; capsule–box from a face's separating axis.
    pub const FACE_B: u32 = 5;
    /// Box–box edge against edge (one point), or capsule segment against a box edge.
    pub const EDGE_EDGE: u32 = 6;
}

/// A shape in its local frame, 16 bytes (`Shape` in narrow_phase.wgsl).
/// Sphere: `dims[0]` radius. Capsule along local y: half height, radius. Box: half extents.
/// Half-space: its outward unit normal (the boundary plane passes through the origin).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PrimitiveShape {
    pub dims: [f32; 3],
    pub kind: u32,
}

impl PrimitiveShape {
    pub fn sphere(radius: f32) -> Self {
        Self {
            dims: [radius, 0.0, 0.0],
            kind: kind::SPHERE,
        }
    }
    pub fn capsule(half_height: f32, radius: f32) -> Self {
        Self {
            dims: [half_height, radius, 0.0],
            kind: kind::CAPSULE,
        }
    }
    pub fn cuboid(half_extents: Vec3) -> Self {
        Self {
            dims: half_extents.to_array(),
            kind: kind::BOX,
        }
    }
    pub fn half_space(outward_normal: Vec3) -> Self {
        Self {
            dims: outward_normal.normalize().to_array(),
            kind: kind::HALF_SPACE,
        }
    }
    /// The primitive of a parry3d shape, or `None` for the shapes this module does not
    /// handle (parry3d stays their path): balls, cuboids, capsules centred on the local y
    /// axis (what `capsule_y` makes) and half-spaces.
    pub fn from_parry(shape: &dyn Shape) -> Option<Self> {
        match shape.as_typed_shape() {
            TypedShape::Ball(b) => Some(Self::sphere(b.radius)),
            TypedShape::Cuboid(c) => Some(Self::cuboid(c.half_extents)),
            TypedShape::Capsule(c) => {
                let (a, b) = (c.segment.a, c.segment.b);
                let centred_y = a.x == 0.0 && a.z == 0.0 && b.x == 0.0 && b.z == 0.0;
                (centred_y && b.y == -a.y && b.y > 0.0).then(|| Self::capsule(b.y, c.radius))
            }
            TypedShape::HalfSpace(h) => Some(Self::half_space(h.normal)),
            _ => None,
        }
    }
    fn dims(&self) -> Vec3 {
        Vec3::from_array(self.dims)
    }
    /// A length that says how big the shape is: the radius of spheres and capsules, the
    /// smallest half extent of a box; infinite for a half-space.
    pub fn size(&self) -> f32 {
        match self.kind {
            kind::SPHERE => self.dims[0],
            kind::CAPSULE => self.dims[1],
            kind::BOX => self.dims[0].min(self.dims[1]).min(self.dims[2]),
            _ => f32::INFINITY,
        }
    }
}

/// One candidate pair: both shapes and their world poses (the shape's frame, i.e. the body
/// pose with the collider offset applied), 96 bytes (`Pair` in narrow_phase.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PrimitivePair {
    pub a: PrimitiveShape,
    pub b: PrimitiveShape,
    pub pose_a: PoseRecord,
    pub pose_b: PoseRecord,
}

/// One manifold point: the point on A in A's frame (w: signed distance along the normal)
/// and the point on B in B's frame (w: 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ManifoldPoint {
    pub local_a: [f32; 4],
    pub local_b: [f32; 4],
}

/// The most points a manifold keeps (box–box clipping reduces to four), and so the contact
/// record slots a pair has where the device finds the contacts (`MANIFOLD_POINTS` in
/// narrow_phase.wgsl).
pub const MANIFOLD_POINTS: usize = 4;

/// One manifold per pair, 176 bytes (`Manifold` in narrow_phase.wgsl). Points
/// `count..MANIFOLD_POINTS` are zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PrimitiveManifold {
    pub count: u32,
    /// [`case`].
    pub case: u32,
    pub reserved: [u32; 2],
    /// World normal from A to B (w: 0).
    pub normal: [f32; 4],
    /// Feature id of each point (see the pair functions for their meaning).
    pub ids: [u32; MANIFOLD_POINTS],
    pub points: [ManifoldPoint; MANIFOLD_POINTS],
}

impl PrimitiveManifold {
    pub fn normal(&self) -> Vec3 {
        Vec4::from_array(self.normal).truncate()
    }
    pub fn dist(&self, i: usize) -> f32 {
        self.points[i].local_a[3]
    }
    /// World points on A and on B of point `i`.
    pub fn world_points(&self, i: usize, pose_a: &PoseRecord, pose_b: &PoseRecord) -> (Vec3, Vec3) {
        let p = &self.points[i];
        let la = Vec4::from_array(p.local_a).truncate();
        let lb = Vec4::from_array(p.local_b).truncate();
        (
            pose_a.p() + rot(quat(pose_a), la),
            pose_b.p() + rot(quat(pose_b), lb),
        )
    }
}

/// The manifold of one pair of shapes within `margin` (≥ 0): empty when they are farther
/// apart, or when the pair is not a primitive pair (two half-spaces, an unknown kind).
pub fn collide(
    a: &PrimitiveShape,
    pose_a: &PoseRecord,
    b: &PrimitiveShape,
    pose_b: &PoseRecord,
    margin: f32,
) -> PrimitiveManifold {
    // Solve with the lower kind as A, then swap back.
    let flip = a.kind > b.kind;
    let (s1, p1, s2, p2) = if flip {
        (b, pose_b, a, pose_a)
    } else {
        (a, pose_a, b, pose_b)
    };
    let f1 = Frame::of(p1);
    let f2 = Frame::of(p2);
    let (d1, d2) = (s1.dims(), s2.dims());
    let c = match (s1.kind, s2.kind) {
        (kind::SPHERE, kind::SPHERE) => round::sphere_sphere(d1.x, &f1, d2.x, &f2, margin),
        (kind::SPHERE, kind::CAPSULE) => round::sphere_capsule(d1.x, &f1, d2, &f2, margin),
        (kind::SPHERE, kind::BOX) => cuboid::sphere_box(d1.x, &f1, d2, &f2, margin),
        (kind::SPHERE, kind::HALF_SPACE) => round::sphere_plane(d1.x, &f1, d2, &f2, margin),
        (kind::CAPSULE, kind::CAPSULE) => round::capsule_capsule(d1, &f1, d2, &f2, margin),
        (kind::CAPSULE, kind::BOX) => cuboid::capsule_box(d1, &f1, d2, &f2, margin),
        (kind::CAPSULE, kind::HALF_SPACE) => round::capsule_plane(d1, &f1, d2, &f2, margin),
        (kind::BOX, kind::BOX) => box_box::box_box(d1, &f1, d2, &f2, margin),
        (kind::BOX, kind::HALF_SPACE) => cuboid::box_plane(d1, &f1, d2, &f2, margin),
        _ => Contacts::none(),
    };
    c.finish(pose_a, pose_b, flip)
}

/// [`collide`] on a pair record.
pub fn collide_pair(pair: &PrimitivePair, margin: f32) -> PrimitiveManifold {
    collide(&pair.a, &pair.pose_a, &pair.b, &pair.pose_b, margin)
}

// ---------------------------------------------------------------- shared helpers

/// A pose as position and quaternion (xyzw), the way the shader reads it.
#[derive(Clone, Copy)]
struct Frame {
    p: Vec3,
    q: Vec4,
}

impl Frame {
    fn of(pose: &PoseRecord) -> Self {
        Self {
            p: pose.p(),
            q: quat(pose),
        }
    }
    fn to_world(self, v: Vec3) -> Vec3 {
        self.p + rot(self.q, v)
    }
    fn to_local(self, v: Vec3) -> Vec3 {
        rot(conj(self.q), v - self.p)
    }
}

fn quat(pose: &PoseRecord) -> Vec4 {
    Vec4::from_array(pose.rotation)
}

/// `qrot` of common.wgsl (not glam's formula, so that both backends round alike).
pub(crate) fn rot(q: Vec4, v: Vec3) -> Vec3 {
    let u = q.truncate();
    let t = 2.0 * u.cross(v);
    v + q.w * t + u.cross(t)
}

pub(crate) fn conj(q: Vec4) -> Vec4 {
    Vec4::new(-q.x, -q.y, -q.z, q.w)
}

fn qmul(a: Vec4, b: Vec4) -> Vec4 {
    let (av, bv) = (a.truncate(), b.truncate());
    (a.w * bv + b.w * av + av.cross(bv)).extend(a.w * b.w - av.dot(bv))
}

/// Unit vector along axis `k`.
fn axis(k: usize) -> Vec3 {
    let mut v = Vec3::ZERO;
    v[k] = 1.0;
    v
}

/// +1 for x ≥ 0, −1 otherwise (the shader's `select(-1.0, 1.0, x >= 0.0)`).
fn sign(x: f32) -> f32 {
    if x >= 0.0 { 1.0 } else { -1.0 }
}

/// A manifold under construction: world normal and world points.
#[derive(Clone, Copy)]
struct Contacts {
    n: Vec3,
    count: usize,
    case: u32,
    ids: [u32; 4],
    pa: [Vec3; 4],
    pb: [Vec3; 4],
    dist: [f32; 4],
}

impl Contacts {
    fn none() -> Self {
        Self {
            n: Vec3::ZERO,
            count: 0,
            case: case::NONE,
            ids: [0; 4],
            pa: [Vec3::ZERO; 4],
            pb: [Vec3::ZERO; 4],
            dist: [0.0; 4],
        }
    }
    fn new(n: Vec3, case: u32) -> Self {
        Self {
            n,
            case,
            ..Self::none()
        }
    }
    fn push(&mut self, id: u32, pa: Vec3, pb: Vec3, dist: f32) {
        if self.count < 4 {
            self.ids[self.count] = id;
            self.pa[self.count] = pa;
            self.pb[self.count] = pb;
            self.dist[self.count] = dist;
            self.count += 1;
        }
    }
    /// The record, with A and B swapped back when the pair was solved the other way round.
    fn finish(&self, pose_a: &PoseRecord, pose_b: &PoseRecord, flip: bool) -> PrimitiveManifold {
        let mut m = PrimitiveManifold::default();
        if self.count == 0 {
            return m;
        }
        let (fa, fb) = (Frame::of(pose_a), Frame::of(pose_b));
        let n = if flip { -self.n } else { self.n };
        m.count = self.count as u32;
        m.case = self.case;
        m.normal = n.extend(0.0).to_array();
        for i in 0..self.count {
            let (pa, pb) = if flip {
                (self.pb[i], self.pa[i])
            } else {
                (self.pa[i], self.pb[i])
            };
            m.ids[i] = self.ids[i];
            m.points[i] = ManifoldPoint {
                local_a: fa.to_local(pa).extend(self.dist[i]).to_array(),
                local_b: fb.to_local(pb).extend(0.0).to_array(),
            };
        }
        m
    }
}
