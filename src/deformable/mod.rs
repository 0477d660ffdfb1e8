//! Deformable bodies: tetrahedral solids and cloths, solved by vertex block descent in the
//! same step and iteration budget as the rigid bodies. This module is their storage and
//! their physics per element; the stages that move them are in [`crate::pipeline`]
//! (`vbd` for the vertex sweep, `attachments` for the links to rigid bodies).
//!
//! - [`mesh`]: [`TetMesh`], [`TriMesh`], generators, Gmsh/OBJ import, surface extraction;
//! - [`material`]: [`SolidMaterial`], [`ClothMaterial`] (SI units) and their record;
//! - [`elastic`]: the element records and the per-vertex force and Hessian block of each
//!   energy (Stable Neo-Hookean tets, membrane, bending, damping);
//! - [`set`]: [`DeformableSet`], the flat arrays of every body's vertices and elements;
//! - [`attachment`]: hard links of vertices to rigid bodies.

pub mod attachment;
pub mod elastic;
pub mod material;
pub mod mesh;
pub mod set;

use glam::{Quat, Vec3};

pub use attachment::{AttachmentDesc, AttachmentSet};
pub use material::{ClothMaterial, SolidMaterial};
pub use mesh::{Surface, TetMesh, TetPattern, TriMesh};
pub use set::{DeformableKind, DeformableSet};

use crate::error::PhysicsError;

/// The mesh and material of a deformable body.
#[derive(Clone, Debug)]
pub enum DeformableShape {
    Solid {
        mesh: TetMesh,
        material: SolidMaterial,
    },
    Cloth {
        mesh: TriMesh,
        material: ClothMaterial,
    },
}

/// Everything needed to create a deformable body. The mesh is given in its own frame and
/// placed by `position` and `rotation`; its vertices are the body's rest shape.
#[derive(Clone, Debug)]
pub struct DeformableDesc {
    pub shape: DeformableShape,
    pub position: Vec3,
    pub rotation: Quat,
    /// Initial velocity of every vertex (m/s).
    pub linear_velocity: Vec3,
    /// Mesh vertices held in place (Dirichlet boundary): they keep their placed position
    /// until driven with [`crate::PhysicsWorld::drive_vertices`].
    pub pinned: Vec<u32>,
}

impl DeformableDesc {
    /// A tetrahedral solid.
    pub fn solid(mesh: TetMesh, material: SolidMaterial) -> Self {
        Self::new(DeformableShape::Solid { mesh, material })
    }

    /// A cloth.
    pub fn cloth(mesh: TriMesh, material: ClothMaterial) -> Self {
        Self::new(DeformableShape::Cloth { mesh, material })
    }

    fn new(shape: DeformableShape) -> Self {
        Self {
            shape,
            position: Vec3::ZERO,
            rotation: Quat::IDENTITY,
            linear_velocity: Vec3::ZERO,
            pinned: Vec::new(),
        }
    }

    pub fn at(mut self, position: Vec3) -> Self {
        self.position = position;
        self
    }

    pub fn rotated(mut self, rotation: Quat) -> Self {
        self.rotation = rotation;
        self
    }

    pub fn with_velocity(mut self, v: Vec3) -> Self {
        self.linear_velocity = v;
        self
    }

    pub fn pinned(mut self, vertices: impl IntoIterator<Item = u32>) -> Self {
        self.pinned = vertices.into_iter().collect();
        self
    }

    /// Number of mesh vertices.
    pub fn vertex_count(&self) -> usize {
        match &self.shape {
            DeformableShape::Solid { mesh, .. } => mesh.vertices.len(),
            DeformableShape::Cloth { mesh, .. } => mesh.vertices.len(),
        }
    }

    /// Checks the mesh, the material, the placement and the pinned vertices; the error
    /// names the first bad element or field.
    pub fn validate(&self) -> Result<(), PhysicsError> {
        match &self.shape {
            DeformableShape::Solid { mesh, material } => {
                material.validate()?;
                mesh.validate()?;
            }
            DeformableShape::Cloth { mesh, material } => {
                material.validate()?;
                mesh.validate()?;
            }
        }
        let bad = |field, reason: String| PhysicsError::InvalidDeformable { field, reason };
        if !self.position.is_finite() {
            return Err(bad("position", "not finite".into()));
        }
        if !self.rotation.is_finite() || (self.rotation.length() - 1.0).abs() > 1e-3 {
            return Err(bad("rotation", "not a finite unit quaternion".into()));
        }
        if !self.linear_velocity.is_finite() {
            return Err(bad("linear_velocity", "not finite".into()));
        }
        let n = self.vertex_count();
        if let Some(&p) = self.pinned.iter().find(|&&p| p as usize >= n) {
            return Err(bad(
                "pinned",
                format!("vertex {p} is out of range (the mesh has {n} vertices)"),
            ));
        }
        Ok(())
    }
}
