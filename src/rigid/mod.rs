//! Rigid bodies and what links them: the storage the frame's stages read and write.
//!
//! - [`body`]: [`BodyDesc`] and the flat records of one body (pose, velocity, mass), held
//!   structure-of-arrays in [`BodySet`];
//! - [`collider`]: [`Collider`], a parry3d shape with density and friction;
//! - [`joint`]: [`JointDesc`], the flat joint record and its row evaluation, held in
//!   [`JointSet`];
//! - [`contact`]: the contact point and record layouts shared by the CPU and GPU backends.
//!
//! Nothing here imports the pipeline: the stages in [`crate::pipeline`] take these sets
//! as arguments.

pub mod body;
pub mod collider;
pub mod contact;
pub mod joint;

pub use body::{BodyDesc, BodyKind, BodySet};
pub use collider::Collider;
pub use joint::{JointDesc, JointKind, JointSet, Motor};
