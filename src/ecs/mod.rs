//! bevy_ecs integration: components, resources and public system sets over [`PhysicsWorld`].
//!
//! The layer is thin: each frame it mirrors the ECS into the core world, steps it once and
//! copies the solved state back.
//!
//! - **Bodies** are entities with a [`RigidBody`]. It requires [`Position`], [`Rotation`],
//!   [`LinearVelocity`] and [`AngularVelocity`] (inserted with defaults when missing).
//!   Optional: [`ColliderShape`], [`Mass`], [`Inertia`], [`ExternalForce`]. Friction and
//!   density live on the collider ([`crate::Collider::with_friction`]).
//! - **Joints** are entities with a [`Joint`] that names its bodies by [`Entity`].
//! - **Deformable bodies** are entities with a [`Deformable`]; their vertex positions are
//!   written back into [`DeformablePositions`]. A [`VertexAttachment`] entity holds one of
//!   their vertices to a body entity (see `deformables`).
//! - **Resources**: [`Physics`] owns the core world and the entity↔handle maps,
//!   [`StepMode`] says whether a run waits for its step,
//!   [`PhysicsConfig`] is the one source of truth for the solver parameters (copied into the
//!   core when it changes and is valid), [`LastStepReport`] lists what happened in the last
//!   frame (errors, broken joints, frozen bodies, timings).
//! - **System sets** [`PhysicsSet::SyncToCore`] → [`PhysicsSet::Step`] →
//!   [`PhysicsSet::Writeback`], chained by [`add_physics_systems`].
//!
//! # Pose
//!
//! The pose is two components, [`Position`] and [`Rotation`], in world space. `Position` is
//! the body's centre of mass (the core's body origin): for a collider whose centre of mass is
//! not at its own origin (an off-centre convex hull or compound) the collider is shifted so
//! that its centre of mass lies at `Position`. The writeback stores the solved pose and
//! velocities into these components for dynamic and kinematic bodies; static bodies are
//! never written.
//!
//! # User edits
//!
//! Writing [`Position`]/[`Rotation`] teleports a body (and unfreezes it), writing
//! [`LinearVelocity`]/[`AngularVelocity`] sets its velocity, [`ExternalForce`] is applied
//! every step while present. The writeback's own writes are not mistaken for edits: the
//! values it wrote last are cached and a changed component is only pushed to the core when
//! it differs from them. Changing [`RigidBody`], [`ColliderShape`], [`Mass`] or [`Inertia`]
//! of a live body rebuilds it in the core at its current pose and velocity; its joints are
//! re-created at the current relative pose (a broken joint stays broken).
//!
//! # Overlapped stepping
//!
//! With the [`StepMode`] resource at [`StepMode::Overlapped`], [`PhysicsSet::Step`] only
//! begins the core step ([`PhysicsWorld::begin_step`]: collision detection and, on the GPU
//! backend, the submission of the solve) and the next run of the schedule finishes it at
//! the start of [`PhysicsSet::SyncToCore`], writes it back, and then syncs the edits made
//! since. Everything the app runs after the physics sets overlaps the GPU's work. The
//! components then hold the state one step behind the step in flight; edits written
//! while a step is in flight are kept (not overwritten by that step's writeback) and
//! applied before the next step, so the steps and edits, and every result, are those of
//! [`StepMode::Blocking`], one run later.
//!
//! # Errors
//!
//! Bad input never panics. A body whose description the core rejects is skipped, gets an
//! [`InvalidBody`] component with the [`PhysicsError`] and is retried every frame (so fixing
//! the component makes it appear). A joint whose bodies are not simulated (missing,
//! despawned, or invalid) or whose description is rejected gets an [`InvalidJoint`] and is
//! retried every frame too. Each new error is also listed once in
//! [`LastStepReport::errors`], together with rejected edits (e.g. a NaN velocity written on
//! a live body; the core keeps its previous state) and a rejected [`PhysicsConfig`].
//!
//! Despawning a body entity (or removing its `RigidBody`) removes the body and every core
//! joint attached to it; the joint entities stay, with an [`InvalidJoint`] naming the missing
//! body. Despawning a joint entity (or removing its `Joint`) removes the joint.
//!
//! Removals are read through [`RemovedComponents`]: when using `bevy_ecs` without `bevy_app`,
//! call [`World::clear_trackers`] once after each run of the schedule (as `App::update` does),
//! never more often, or removals may be missed. After [`observe_removals`] (which the Bevy
//! plugin calls) they are logged by observers instead and none is missed, however rarely
//! the schedule runs.
//!
//! # Example
//!
//! ```
//! use bevy_avbd::ecs::{ColliderShape, Position, RigidBody, add_physics_systems, init_physics};
//! use bevy_avbd::{Collider, SolverConfig, glam::Vec3};
//! use bevy_ecs::prelude::{Schedule, World};
//!
//! let mut world = World::new();
//! init_physics(&mut world, SolverConfig::default()).unwrap();
//! let mut schedule = Schedule::default();
//! add_physics_systems(&mut schedule);
//!
//! // Static ground: the half-space y ≤ 0.
//! world.spawn((RigidBody::Static, ColliderShape(Collider::halfspace(Vec3::Y).unwrap())));
//! // A 1 m box dropped from 3 m.
//! let cube = world
//!     .spawn((
//!         RigidBody::Dynamic,
//!         Position(Vec3::new(0.0, 3.0, 0.0)),
//!         ColliderShape(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
//!     ))
//!     .id();
//!
//! for _frame in 0..60 {
//!     schedule.run(&mut world);
//!     world.clear_trackers();
//! }
//! let y = world.get::<Position>(cube).unwrap().0.y;
//! assert!(y < 2.0 && y > 0.45, "the box fell: y = {y}");
//! ```
//!
//! [`PhysicsWorld`]: crate::PhysicsWorld
//! [`PhysicsWorld::begin_step`]: crate::PhysicsWorld::begin_step
//! [`PhysicsError`]: crate::PhysicsError

// The schedule is here; the types and systems it runs are in:
mod components; // bodies' and joints' components and markers
mod deformables; // soft bodies and attachments: components and systems
mod removals; // removals logged by observers
mod resources; // errors, LastStepReport, Physics and the other resources, init
mod stepping; // step, finish of an overlapped step, writeback
mod sync; // SyncToCore: config, removals, bodies, edits, joints

pub use components::{
    AngularVelocity, ColliderShape, ExternalForce, Inertia, InvalidBody, InvalidJoint, Joint,
    JointBroken, LinearVelocity, Mass, PhysicsBodyHandle, PhysicsJointHandle, Position, RigidBody,
    Rotation,
};
pub use deformables::{
    AttachmentBroken, Deformable, DeformablePositions, InvalidAttachment, InvalidDeformable,
    PhysicsAttachmentHandle, PhysicsDeformableHandle, VertexAttachment,
};
use removals::Removed;
pub use removals::observe_removals;
pub use resources::{
    EcsPhysicsError, LastStepReport, Physics, PhysicsConfig, PhysicsErrorRecord, StepMode,
    init_physics, init_physics_on,
};

use bevy_ecs::prelude::*;
use stepping::{finish_in_flight, step, writeback};
use sync::{begin_frame, sync_bodies, sync_edits, sync_joints, sync_removals};

// ------------------------------------------------------------------------------ systems

/// The stages of a physics frame. [`add_physics_systems`] chains `SyncToCore` → `Step` →
/// `Writeback`; the Bevy plugin (`bevy_avbd::app`) runs `Prepare` before them and
/// `Finalize` after them in its fixed-step schedule, and `Interpolate` in `PostUpdate`.
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PhysicsSet {
    /// (Bevy plugin) Pause and single-step control, the timestep, `Transform` edits into
    /// [`Position`]/[`Rotation`]. Runs even while paused.
    Prepare,
    /// Config, removals, new/rebuilt bodies, user edits, joints.
    SyncToCore,
    /// One core step.
    Step,
    /// Solved poses and velocities back into the components.
    Writeback,
    /// (Bevy plugin) Step poses, `Transform`s, collision events, diagnostics. Runs even
    /// while paused.
    Finalize,
    /// (Bevy plugin, in `PostUpdate` before transform propagation) `Transform` edits made
    /// since the last step, then the interpolated `Transform`s.
    Interpolate,
}

/// Adds the physics systems to `schedule` in the chained [`PhysicsSet`]s. Run the schedule
/// once per frame (each run advances the world by `PhysicsConfig.0.dt`).
///
/// Call [`init_physics`] on the world first: the systems read its resources, and bevy's
/// default error handler panics on a missing resource.
pub fn add_physics_systems(schedule: &mut Schedule) {
    schedule.configure_sets(
        (
            PhysicsSet::SyncToCore,
            PhysicsSet::Step,
            PhysicsSet::Writeback,
        )
            .chain(),
    );
    schedule.add_systems(
        (
            begin_frame,
            finish_in_flight,
            sync_removals,
            deformables::sync_deformable_removals,
            sync_bodies,
            sync_edits,
            sync_joints,
            deformables::sync_deformables,
            deformables::sync_attachments,
        )
            .chain()
            .in_set(PhysicsSet::SyncToCore),
    );
    schedule.add_systems(step.in_set(PhysicsSet::Step));
    schedule.add_systems(writeback.in_set(PhysicsSet::Writeback));
}
