//! # bevy_avbd
//!
//! Real-time physics solved with **Augmented Vertex Block Descent** (Giles, Diaz, Yuksel
//! 2025): one implicit-Euler step per frame with a fixed iteration budget. Rigid bodies
//! take per-body 6×6 block solves in graph-coloured parallel sweeps, with hard constraints
//! through an augmented Lagrangian (frictional contacts, joints with limits, motors and
//! fracture); deformable bodies (Stable Neo-Hookean tet solids, cloth) take per-vertex
//! 3×3 block solves in the same iterations, with a coarse correction per iteration that
//! carries loads across a body at once, and hard attachments to rigid bodies.
//!
//! # Layout
//!
//! From the bottom up; each layer imports only the ones above it in this list.
//!
//! - [`math`], [`graph`], [`config`], [`error`], [`report`]: small shared types and
//!   algorithms ([`SolverConfig`], [`PhysicsError`], [`StepReport`], the greedy colouring);
//! - [`ccd`]: point–triangle and edge–edge distances with their gradients, and the
//!   conservative f32 additive CCD with a minimum separation (the certified step of
//!   penetration-free deformable contact);
//! - [`rigid`]: the storage of rigid bodies, colliders, joints and contact records;
//! - [`deformable`]: the storage of deformable bodies (meshes, materials, the flat vertex
//!   and element arrays, attachments) and their element energies;
//! - [`pipeline`]: the stages of a frame, one module each, with the list of stages (rigid
//!   and deformable) in the order a step runs them;
//! - [`gpu`]: the wgpu backend, which runs the rigid stages on the device on the same
//!   records;
//! - [`world`]: [`PhysicsWorld`], the plain-Rust API, and the frame top to bottom in
//!   [`PhysicsWorld::begin_step`] / [`PhysicsWorld::finish_step`];
//! - [`reference`](mod@reference): an f64 Newton solve of a solid's equilibrium or implicit-Euler step (tests
//!   and metrics, never in the frame); [`export`]: OBJ files of a frame's surfaces;
//! - [`ecs`]: bevy_ecs components, a config resource and public system sets;
//! - `app` (feature `app`, default): the Bevy plugin `AvbdPlugin` on top of [`ecs`]
//!   (fixed-step schedule, `Transform` sync and interpolation, collision events,
//!   diagnostics; debug drawing with the feature `debug-draw`);
//! - [`scenes`]: the paper's experiments and the deformable scenes, shared by the CLI, the
//!   tests and the benchmarks;
//! - [`render`](mod@render): headless pictures of a world or a scene (wgpu, offscreen): PNG
//!   and GIF, `avbd render`.

// Numerical kernels index several fixed-size arrays in lockstep; index loops read clearer.
#![allow(clippy::needless_range_loop)]

#[cfg(feature = "app")]
pub mod app;
pub mod ccd;
pub mod config;
pub mod deformable;
pub mod ecs;
pub mod error;
pub mod export;
pub mod gpu;
pub mod graph;
pub mod math;
pub mod pipeline;
pub mod reference;
pub mod render;
pub mod report;
pub mod rigid;
pub mod scenes;
#[doc(hidden)]
pub mod stages;
pub mod world;

pub use config::{ContactBroadPhase, ContactModel, NarrowPhase, SolverConfig};
pub use deformable::{
    AttachmentDesc, ClothMaterial, DeformableDesc, SolidMaterial, TetMesh, TetPattern, TriMesh,
};
pub use error::{
    AttachmentHandle, BodyHandle, BodyRef, DeformableHandle, JointHandle, PhysicsError,
};
pub use gpu::Backend;
pub use report::{StepReport, StepStats, SurfaceContactStats};
pub use rigid::{BodyDesc, BodyKind, Collider, JointDesc, JointKind, Motor};
pub use world::{BodyState, DeformableView, PhysicsWorld};

pub use glam;
pub use parry3d;

/// The README's code examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
