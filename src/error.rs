//! Typed errors: every rejected input names what is wrong.

use thiserror::Error;

/// Handle of a body in a [`crate::PhysicsWorld`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyHandle(pub u32);

/// Handle of a joint in a [`crate::PhysicsWorld`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JointHandle(pub u32);

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
