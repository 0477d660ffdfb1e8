//! Colliders: a parry3d shape plus material. Constructors validate their sizes.

use glam::{Quat, Vec3};
use parry3d::shape::{HeightFieldFlags, SharedShape, TriMeshFlags, TypedShape};

use crate::PhysicsError;

/// Shape and material of a body.
#[derive(Clone)]
pub struct Collider {
    pub shape: SharedShape,
    /// kg/m³; gives the mass of a dynamic body unless the body overrides it.
    pub density: f32,
    /// Static friction coefficient μ_s (used while a contact sticks).
    pub friction: f32,
    /// Dynamic friction coefficient μ_d (used once a contact slides).
    pub dynamic_friction: f32,
}

impl std::fmt::Debug for Collider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collider")
            .field("shape", &self.shape.shape_type())
            .field("density", &self.density)
            .field("friction", &self.friction)
            .field("dynamic_friction", &self.dynamic_friction)
            .finish()
    }
}

/// Mass properties derived from a collider, about its centre of mass.
#[derive(Clone, Copy, Debug)]
pub struct ColliderMass {
    pub mass: f32,
    pub local_com: Vec3,
    pub principal_inertia: Vec3,
    pub principal_frame: Quat,
}

fn bad(field: &'static str, reason: impl Into<String>) -> PhysicsError {
    PhysicsError::InvalidCollider {
        field,
        reason: reason.into(),
    }
}

fn positive(field: &'static str, v: f32) -> Result<f32, PhysicsError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(bad(field, format!("must be finite and > 0, got {v}")))
    }
}

impl Collider {
    /// Wraps any parry3d shape, with density 1000 kg/m³ and μ = 0.5.
    pub fn from_shape(shape: SharedShape) -> Result<Self, PhysicsError> {
        let c = Self {
            shape,
            density: 1000.0,
            friction: 0.5,
            dynamic_friction: 0.5,
        };
        c.validate()?;
        Ok(c)
    }
    pub fn ball(radius: f32) -> Result<Self, PhysicsError> {
        Self::from_shape(SharedShape::ball(positive("radius", radius)?))
    }
    /// Box with half extents.
    pub fn cuboid(half_extents: Vec3) -> Result<Self, PhysicsError> {
        let h = half_extents;
        positive("half_extents.x", h.x)?;
        positive("half_extents.y", h.y)?;
        positive("half_extents.z", h.z)?;
        Self::from_shape(SharedShape::cuboid(h.x, h.y, h.z))
    }
    /// Capsule along the local y axis.
    pub fn capsule(half_height: f32, radius: f32) -> Result<Self, PhysicsError> {
        positive("radius", radius)?;
        positive("half_height", half_height)?;
        Self::from_shape(SharedShape::capsule_y(half_height, radius))
    }
    /// Cylinder along the local y axis.
    pub fn cylinder(half_height: f32, radius: f32) -> Result<Self, PhysicsError> {
        positive("radius", radius)?;
        positive("half_height", half_height)?;
        Self::from_shape(SharedShape::cylinder(half_height, radius))
    }
    /// Cone along the local y axis (apex at +y).
    pub fn cone(half_height: f32, radius: f32) -> Result<Self, PhysicsError> {
        positive("radius", radius)?;
        positive("half_height", half_height)?;
        Self::from_shape(SharedShape::cone(half_height, radius))
    }
    pub fn convex_hull(points: &[Vec3]) -> Result<Self, PhysicsError> {
        if points.len() < 4 || points.iter().any(|p| !p.is_finite()) {
            return Err(bad("points", "need at least 4 finite points"));
        }
        let shape = SharedShape::convex_hull(points)
            .ok_or_else(|| bad("points", "degenerate (coplanar or coincident) point set"))?;
        Self::from_shape(shape)
            .map_err(|_| bad("points", "degenerate (coplanar or coincident) point set"))
    }
    /// Several shapes rigidly attached to one body, each with a local pose.
    pub fn compound(parts: Vec<(Vec3, Quat, Collider)>) -> Result<Self, PhysicsError> {
        if parts.is_empty() {
            return Err(bad("parts", "a compound needs at least one part"));
        }
        let mut shapes = Vec::with_capacity(parts.len());
        for (p, q, c) in parts {
            if !p.is_finite() || !q.is_finite() {
                return Err(bad("parts", "part pose not finite"));
            }
            if matches!(c.shape.as_typed_shape(), TypedShape::HalfSpace(_)) {
                return Err(bad("parts", "a half-space cannot be part of a compound"));
            }
            shapes.push((parry3d::math::Pose::from_parts(p, q.normalize()), c.shape));
        }
        Self::from_shape(SharedShape::compound(shapes))
    }
    /// Triangle mesh (for static bodies: it has no volume).
    pub fn trimesh(vertices: Vec<Vec3>, indices: Vec<[u32; 3]>) -> Result<Self, PhysicsError> {
        if vertices.iter().any(|v| !v.is_finite()) {
            return Err(bad("vertices", "not finite"));
        }
        if indices.is_empty() {
            return Err(bad("indices", "no triangles"));
        }
        let n = vertices.len() as u32;
        if indices.iter().flatten().any(|&i| i >= n) {
            return Err(bad("indices", "index out of range"));
        }
        // Fixed internal edges: a body sliding or landing across a shared edge of a flat
        // mesh gets the face normal, not a tilted edge normal that would roll it away.
        let shape =
            SharedShape::trimesh_with_flags(vertices, indices, TriMeshFlags::FIX_INTERNAL_EDGES)
                .map_err(|e| bad("indices", format!("{e:?}")))?;
        Self::from_shape(shape)
    }
    /// Heightfield on the x-z plane: `heights` is `rows × cols`, row-major; `scale` is the size.
    pub fn heightfield(
        heights: Vec<f32>,
        rows: usize,
        cols: usize,
        scale: Vec3,
    ) -> Result<Self, PhysicsError> {
        if rows < 2 || cols < 2 || heights.len() != rows * cols {
            return Err(bad("heights", "need rows, cols ≥ 2 and rows·cols values"));
        }
        if heights.iter().any(|h| !h.is_finite()) {
            return Err(bad("heights", "not finite"));
        }
        positive("scale.x", scale.x)?;
        positive("scale.y", scale.y)?;
        positive("scale.z", scale.z)?;
        // parry's Array2 is column-major; `heights` is row-major.
        let column_major: Vec<f32> = (0..cols)
            .flat_map(|c| (0..rows).map(move |r| (r, c)))
            .map(|(r, c)| heights[r * cols + c])
            .collect();
        let grid = parry3d::utils::Array2::new(rows, cols, column_major);
        Self::from_shape(SharedShape::heightfield_with_flags(
            grid,
            scale,
            HeightFieldFlags::FIX_INTERNAL_EDGES,
        ))
    }
    /// Infinite ground: the half-space below the plane through the body origin with this outward normal.
    pub fn halfspace(outward_normal: Vec3) -> Result<Self, PhysicsError> {
        if !outward_normal.is_finite() || outward_normal.length() < 1e-6 {
            return Err(bad("outward_normal", "must be finite and non-zero"));
        }
        Self::from_shape(SharedShape::halfspace(outward_normal.normalize()))
    }

    pub fn with_density(mut self, density: f32) -> Self {
        self.density = density;
        self
    }
    /// Sets both static and dynamic friction.
    pub fn with_friction(mut self, mu: f32) -> Self {
        self.friction = mu;
        self.dynamic_friction = mu;
        self
    }
    pub fn with_friction_pair(mut self, static_mu: f32, dynamic_mu: f32) -> Self {
        self.friction = static_mu;
        self.dynamic_friction = dynamic_mu;
        self
    }

    /// Whether the shape has infinite extent (half-space).
    pub fn is_unbounded(&self) -> bool {
        matches!(self.shape.as_typed_shape(), TypedShape::HalfSpace(_))
    }

    /// Whether the shape encloses a volume (so it can be the collider of a dynamic body).
    pub fn has_volume(&self) -> bool {
        !matches!(
            self.shape.as_typed_shape(),
            TypedShape::TriMesh(_)
                | TypedShape::HeightField(_)
                | TypedShape::HalfSpace(_)
                | TypedShape::Polyline(_)
                | TypedShape::Segment(_)
                | TypedShape::Triangle(_)
        )
    }

    pub(crate) fn validate(&self) -> Result<(), PhysicsError> {
        if !(self.density.is_finite() && self.density > 0.0) {
            return Err(bad(
                "density",
                format!("must be finite and > 0, got {}", self.density),
            ));
        }
        for (field, mu) in [
            ("friction", self.friction),
            ("dynamic_friction", self.dynamic_friction),
        ] {
            if !(mu.is_finite() && mu >= 0.0) {
                return Err(bad(field, format!("must be finite and ≥ 0, got {mu}")));
            }
        }
        if self.is_unbounded() {
            return Ok(());
        }
        let aabb = self.shape.compute_local_aabb();
        let ext = aabb.maxs - aabb.mins;
        if !ext.is_finite() || ext.max_element() <= 0.0 {
            return Err(bad("shape", "degenerate: zero size or not finite"));
        }
        if self.has_volume() && ext.min_element() <= 0.0 {
            return Err(bad("shape", "degenerate: zero thickness along an axis"));
        }
        Ok(())
    }

    /// Mass properties at this collider's density.
    pub fn mass_properties(&self) -> ColliderMass {
        let mp = self.shape.mass_properties(self.density);
        let mass = if mp.inv_mass > 0.0 {
            1.0 / mp.inv_mass
        } else {
            0.0
        };
        let ii = mp.inv_principal_inertia;
        let inv = |v: f32| if v > 0.0 { 1.0 / v } else { 0.0 };
        ColliderMass {
            mass,
            local_com: mp.local_com,
            principal_inertia: Vec3::new(inv(ii.x), inv(ii.y), inv(ii.z)),
            principal_frame: mp.principal_inertia_local_frame,
        }
    }
}
