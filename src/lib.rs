//! # bevy_avbd
//!
//! Real-time rigid-body physics solved with **Augmented Vertex Block Descent** (Giles,
//! Diaz, Yuksel 2025): one implicit-Euler step per frame with a fixed iteration budget,
//! per-body 6×6 block solves in graph-coloured parallel sweeps, hard constraints through an
//! augmented Lagrangian, frictional contacts and joints with limits, motors and fracture.
//!
//! Layers:
//! - [`PhysicsWorld`]: the plain-Rust core (bodies, colliders, joints, `step()`);
//! - [`ecs`]: bevy_ecs components, a config resource and public system sets;
//! - [`scenes`]: the paper's experiments, shared by the CLI, the tests and the benchmarks.
//!
//! The frame pipeline lives in [`pipeline`], one module per stage.

// Numerical kernels index several fixed-size arrays in lockstep; index loops read clearer.
#![allow(clippy::needless_range_loop)]

pub mod body;
pub mod collider;
pub mod config;
pub mod contact;
pub mod ecs;
pub mod error;
pub mod gpu;
pub mod joint;
pub mod math;
pub mod pipeline;
pub mod world;

pub use body::{BodyDesc, BodyKind};
pub use collider::Collider;
pub use config::SolverConfig;
pub use error::{BodyHandle, JointHandle, PhysicsError};
pub use gpu::Backend;
pub use joint::{JointDesc, JointKind, Motor};
pub mod scenes;
#[doc(hidden)]
pub mod stages;
pub use world::{BodyState, PhysicsWorld, StepReport, StepStats};

pub use glam;
pub use parry3d;

/// The README's code examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
