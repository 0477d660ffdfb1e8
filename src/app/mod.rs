//! The Bevy plugin: `app.add_plugins(AvbdPlugin::default())` (feature `app`, on by default).
//!
//! [`AvbdPlugin`] builds on the bevy_ecs layer ([`crate::ecs`]: the same components,
//! resources and [`PhysicsSet`]s) and adds what a Bevy game expects:
//!
//! - **A fixed-step schedule**: the step runs in `FixedPostUpdate` (configurable) once per
//!   fixed tick; `SolverConfig::dt` and `Time<Fixed>`'s timestep are kept equal.
//! - **`Transform` sync**: a body spawned with a `Transform` starts
//!   there, the solved pose is written back into it, and writing it teleports the body.
//!   Bodies may sit under non-body parents with uniform scales; anything else gets an
//!   [`InvalidTransform`].
//! - **Interpolation** ([`PhysicsInterpolation`], on by default; [`NoInterpolation`] per
//!   body): `Transform`s move smoothly between steps at any frame rate.
//! - **Pause and single-step** ([`PhysicsControl`]).
//! - **Collision events** ([`CollisionStarted`], [`CollisionEnded`] on entities with
//!   [`CollisionEvents`]; [`ContactPairs`]).
//! - **Diagnostics** ([`PhysicsDiagnostics`]: step ms, contacts, colours, iterations).
//! - **Debug drawing** (feature `debug-draw`: `AvbdDebugDrawPlugin`).
//! - **Render meshes of deformables** (feature `render-mesh`: `DeformableRenderMesh`).
//!
//! The fixed schedule runs, in order: [`PhysicsSet::Prepare`] (control, timestep,
//! `Transform` edits) → `SyncToCore` → `Step` → `Writeback` (these three skipped while
//! paused) → [`PhysicsSet::Finalize`] (step poses, `Transform`s, events, diagnostics).
//! `PostUpdate` runs [`PhysicsSet::Interpolate`] before transform propagation.
//!
//! Deformable bodies are entities with a [`crate::ecs::Deformable`]; their world-space
//! vertex positions are in [`crate::ecs::DeformablePositions`] after `Finalize`. With the
//! feature `render-mesh`, a `DeformableRenderMesh` on the entity gives it a `Mesh3d` whose
//! mesh (the body's surface, world-space positions, smooth normals) is rewritten in place
//! after every step, in `PostUpdate`'s [`PhysicsSet::Interpolate`]; keep the entity at the
//! identity transform.
//!
//! ```
//! use bevy_app::{App, TaskPoolPlugin};
//! use bevy_avbd::app::AvbdPlugin;
//! use bevy_avbd::ecs::{ColliderShape, RigidBody};
//! use bevy_avbd::{Collider, glam::Vec3};
//! use bevy_time::{TimePlugin, TimeUpdateStrategy};
//! use bevy_transform::{TransformPlugin, components::Transform};
//!
//! let mut app = App::new();
//! app.add_plugins((TaskPoolPlugin::default(), TimePlugin, TransformPlugin, AvbdPlugin::default()));
//! app.insert_resource(TimeUpdateStrategy::ManualDuration(std::time::Duration::from_secs_f64(1.0 / 60.0)));
//! app.world_mut().spawn((RigidBody::Static, ColliderShape(Collider::halfspace(Vec3::Y).unwrap())));
//! let cube = app
//!     .world_mut()
//!     .spawn((
//!         RigidBody::Dynamic,
//!         ColliderShape(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
//!         Transform::from_xyz(0.0, 3.0, 0.0),
//!     ))
//!     .id();
//! for _ in 0..60 {
//!     app.update();
//! }
//! let y = app.world().get::<Transform>(cube).unwrap().translation.y;
//! assert!(y < 2.9, "the cube fell: y = {y}");
//! ```

mod control;
#[cfg(feature = "debug-draw")]
mod debug_draw;
mod diagnostics;
mod events;
mod interpolation;
mod plugin;
#[cfg(feature = "render-mesh")]
mod render_mesh;
mod sync;

pub use control::PhysicsControl;
#[cfg(feature = "debug-draw")]
pub use debug_draw::{AvbdDebugDrawPlugin, DebugDraw};
pub use diagnostics::PhysicsDiagnostics;
pub use events::{CollisionEnded, CollisionEvents, CollisionStarted, ContactPairs};
pub use interpolation::{NoInterpolation, PhysicsInterpolation, StepPoses};
pub use plugin::{AvbdPlugin, PhysicsSetup};
#[cfg(feature = "render-mesh")]
pub use render_mesh::DeformableRenderMesh;
pub use sync::{InvalidTransform, TransformError};

pub use crate::ecs::PhysicsSet;
