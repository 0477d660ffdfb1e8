//! Typed errors: every rejected input names what is wrong.

use thiserror::Error;

/// Handle of a body in a [`crate::PhysicsWorld`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyHandle(pub u32);

/// Handle of a joint in a [`crate::PhysicsWorld`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JointHandle(pub u32);

/// Handle of a deformable body (a tet solid or a cloth) in a [`crate::PhysicsWorld`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeformableHandle(pub u32);

/// Handle of an attachment of a deformable's vertex to a rigid body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttachmentHandle(pub u32);

/// A rigid or deformable body, for errors that name two bodies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyRef {
    Rigid(BodyHandle),
    Deformable(DeformableHandle),
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum PhysicsError {
    #[error("invalid body field `{field}`: {reason}")]
    InvalidBody { field: &'static str, reason: String },
    #[error("invalid collider field `{field}`: {reason}")]
    InvalidCollider { field: &'static str, reason: String },
    #[error("invalid joint field `{field}`: {reason}")]
    InvalidJoint { field: &'static str, reason: String },
    #[error("joint references body {0:?}, which does not exist")]
    MissingBody(BodyHandle),
    #[error("joint {0:?} does not exist")]
    MissingJoint(JointHandle),
    #[error("invalid mesh: {element} {index} {reason}")]
    InvalidMesh {
        /// `"vertex"`, `"tet"` or `"triangle"`.
        element: &'static str,
        index: usize,
        reason: String,
    },
    #[error("cannot read the {format} mesh: {reason}")]
    MeshImport {
        format: &'static str,
        reason: String,
    },
    #[error("invalid material field `{field}`: {reason}")]
    InvalidMaterial { field: &'static str, reason: String },
    #[error("invalid deformable field `{field}`: {reason}")]
    InvalidDeformable { field: &'static str, reason: String },
    #[error("invalid attachment field `{field}`: {reason}")]
    InvalidAttachment { field: &'static str, reason: String },
    #[error("deformable {0:?} does not exist")]
    MissingDeformable(DeformableHandle),
    #[error("attachment {0:?} does not exist")]
    MissingAttachment(AttachmentHandle),
    /// The body would start intersecting `other` (or itself, when `other == added`):
    /// penetration-free contact needs an intersection-free start. Nothing was added.
    #[error(
        "{added:?} would start intersecting {other:?}: surfaces that cross, touch or contain one another cannot be separated by penetration-free contact; nothing was added"
    )]
    IntersectingStart { added: BodyRef, other: BodyRef },
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("GPU backend: {0}")]
    Gpu(String),
    #[error(
        "a step is in flight: call finish_step before editing the world or beginning another step"
    )]
    StepInFlight,
    #[error("no step is in flight: call begin_step first")]
    NoStepInFlight,
    #[error("unknown solver config field `{0}`")]
    UnknownConfigField(String),
    #[error("invalid solver config field `{field}` = {value}")]
    InvalidConfig { field: &'static str, value: f32 },
}
