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

mod deformables;
mod removals;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use deformables::{
    AttachmentBroken, Deformable, DeformablePositions, InvalidAttachment, InvalidDeformable,
    PhysicsAttachmentHandle, PhysicsDeformableHandle, VertexAttachment,
};
use removals::Removed;
pub use removals::observe_removals;

use bevy_ecs::prelude::*;
use glam::{Quat, Vec3};
use thiserror::Error;

use crate::{
    BodyDesc, BodyHandle, BodyKind, BodyState, JointDesc, JointHandle, JointKind, PhysicsError,
    PhysicsWorld, SolverConfig, StepStats,
};

// ------------------------------------------------------------------------------ components

/// Marks an entity as a rigid body and says how it moves.
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[require(Position, Rotation, LinearVelocity, AngularVelocity)]
pub enum RigidBody {
    /// Moved by the solver.
    #[default]
    Dynamic,
    /// Never moves; infinite mass.
    Static,
    /// Moves with its [`LinearVelocity`]/[`AngularVelocity`]; infinite mass.
    Kinematic,
}

impl From<RigidBody> for BodyKind {
    fn from(rb: RigidBody) -> Self {
        match rb {
            RigidBody::Dynamic => BodyKind::Dynamic,
            RigidBody::Static => BodyKind::Static,
            RigidBody::Kinematic => BodyKind::Kinematic,
        }
    }
}

/// The body's collider (shape, density, friction). Without one, a dynamic body needs a
/// [`Mass`].
#[derive(Component, Clone, Debug)]
pub struct ColliderShape(pub crate::Collider);

impl ColliderShape {
    /// Whether both wrap the same shape instance with the same material.
    fn same_as(&self, other: &ColliderShape) -> bool {
        let (a, b) = (&self.0, &other.0);
        Arc::ptr_eq(&a.shape.0, &b.shape.0)
            && a.density.to_bits() == b.density.to_bits()
            && a.friction.to_bits() == b.friction.to_bits()
            && a.dynamic_friction.to_bits() == b.dynamic_friction.to_bits()
    }
}

/// Overrides the mass (kg) derived from the collider's density.
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub struct Mass(pub f32);

/// Overrides the principal moments of inertia (kg·m², body frame).
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub struct Inertia(pub Vec3);

/// World-space position of the body's centre of mass (m). Written back every frame for
/// dynamic and kinematic bodies; writing it teleports the body.
#[derive(Component, Clone, Copy, Debug, PartialEq, Default)]
pub struct Position(pub Vec3);

/// World-space orientation (unit quaternion). Written back like [`Position`].
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub struct Rotation(pub Quat);

impl Default for Rotation {
    fn default() -> Self {
        Self(Quat::IDENTITY)
    }
}

/// Linear velocity of the centre of mass (m/s). Written back every frame; writing it sets
/// the body's velocity.
#[derive(Component, Clone, Copy, Debug, PartialEq, Default)]
pub struct LinearVelocity(pub Vec3);

/// Angular velocity (rad/s, world frame). Written back like [`LinearVelocity`].
#[derive(Component, Clone, Copy, Debug, PartialEq, Default)]
pub struct AngularVelocity(pub Vec3);

/// Force (N, at the centre of mass) and torque (N·m) applied every step while present.
/// Removing the component removes the force.
#[derive(Component, Clone, Copy, Debug, PartialEq, Default)]
pub struct ExternalForce {
    pub force: Vec3,
    pub torque: Vec3,
}

/// A joint between two body entities, or between `body_a` and the world (`body_b = None`,
/// then `anchor_b` is a world-space point). Put it on its own entity (or on any entity:
/// only the `Joint` component matters). Changing it re-creates the joint at the current
/// relative pose of the bodies.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct Joint {
    pub kind: JointKind,
    pub body_a: Entity,
    pub body_b: Option<Entity>,
    /// Anchor in body A's frame (relative to its centre of mass).
    pub anchor_a: Vec3,
    /// Anchor in body B's frame, or in the world if `body_b` is `None`.
    pub anchor_b: Vec3,
    /// Finite stiffness of the positional rows (N/m); hard if `None`.
    pub stiffness: Option<f32>,
    /// The joint breaks when its positional force exceeds this (N).
    pub breaking_force: Option<f32>,
    /// The joint breaks when its angular torque exceeds this (N·m).
    pub breaking_torque: Option<f32>,
}

impl Joint {
    pub fn new(kind: JointKind, body_a: Entity, body_b: Option<Entity>) -> Self {
        Self {
            kind,
            body_a,
            body_b,
            anchor_a: Vec3::ZERO,
            anchor_b: Vec3::ZERO,
            stiffness: None,
            breaking_force: None,
            breaking_torque: None,
        }
    }
    pub fn anchors(mut self, anchor_a: Vec3, anchor_b: Vec3) -> Self {
        self.anchor_a = anchor_a;
        self.anchor_b = anchor_b;
        self
    }
    pub fn with_stiffness(mut self, k: f32) -> Self {
        self.stiffness = Some(k);
        self
    }
    pub fn breakable(mut self, force: f32) -> Self {
        self.breaking_force = Some(force);
        self
    }
    pub fn breakable_torque(mut self, torque: f32) -> Self {
        self.breaking_torque = Some(torque);
        self
    }
}

/// Handle of the entity's body in the core world. Inserted and removed by the sync systems
/// (a read-only mirror of [`Physics::body_handle`]; do not insert it yourself).
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysicsBodyHandle(pub BodyHandle);

/// Handle of the entity's joint in the core world, like [`PhysicsBodyHandle`].
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysicsJointHandle(pub JointHandle);

/// On a [`RigidBody`] entity the core rejected: why. The body is not simulated; it is
/// retried every frame and the component is removed once it is accepted.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct InvalidBody(pub PhysicsError);

/// On a [`Joint`] entity that is not in the core: why. Retried every frame (e.g. until its
/// bodies exist) and removed once the joint is created.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct InvalidJoint(pub EcsPhysicsError);

/// Marker on a [`Joint`] entity whose joint broke. A broken joint stays broken (even when
/// its bodies are rebuilt) until the [`Joint`] component is changed.
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct JointBroken;

// ------------------------------------------------------------------------------ errors

/// An error of the ECS layer: a core error, or a reference to an entity that is not a body.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum EcsPhysicsError {
    #[error(transparent)]
    Physics(#[from] PhysicsError),
    /// A joint names an entity that is not a simulated body (never had a [`RigidBody`], was
    /// despawned, or its body is invalid).
    #[error("joint field `{field}` references entity {entity}, which is not a simulated body")]
    MissingBodyEntity { field: &'static str, entity: Entity },
}

/// One error recorded in a frame.
#[derive(Clone, Debug, PartialEq)]
pub struct PhysicsErrorRecord {
    /// The body or joint entity concerned; `None` for world-level errors (config, step).
    pub entity: Option<Entity>,
    pub error: EcsPhysicsError,
}

// ------------------------------------------------------------------------------ resources

/// What happened in the last frame (cleared at the start of [`PhysicsSet::SyncToCore`]).
#[derive(Resource, Clone, Debug, Default)]
pub struct LastStepReport {
    /// New errors of this frame (an error that persists on an entity is listed once, when
    /// it first occurs; the entity's [`InvalidBody`]/[`InvalidJoint`] keeps it).
    pub errors: Vec<PhysicsErrorRecord>,
    /// Joint entities whose joint broke this step.
    pub broken_joints: Vec<Entity>,
    /// Body entities that became non-finite this step and were frozen at their start pose
    /// (writing their [`Position`] unfreezes them).
    pub frozen_bodies: Vec<Entity>,
    /// Deformable entities that became non-finite this step and were frozen.
    pub frozen_deformables: Vec<Entity>,
    /// Attachment entities whose attachment broke this step.
    pub broken_attachments: Vec<Entity>,
    /// Timings and counts of the core step.
    pub stats: StepStats,
    /// Whether the core stepped this frame.
    pub stepped: bool,
}

impl LastStepReport {
    /// Errors recorded for `entity` this frame.
    pub fn errors_for(&self, entity: Entity) -> impl Iterator<Item = &EcsPhysicsError> {
        self.errors
            .iter()
            .filter(move |r| r.entity == Some(entity))
            .map(|r| &r.error)
    }
}

/// Solver parameters: the one place to change them. Copied into the core when changed; an
/// invalid config is reported in [`LastStepReport::errors`] and the core keeps the last
/// valid one.
#[derive(Resource, Clone, Debug, Default, PartialEq)]
pub struct PhysicsConfig(pub SolverConfig);

/// How the physics systems drive the core step (see the module's "Overlapped stepping").
#[derive(Resource, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StepMode {
    /// Each run of the schedule steps and writes back: the components hold the state after
    /// this run's step.
    #[default]
    Blocking,
    /// Each run finishes the step begun by the previous run (before syncing the edits),
    /// writes it back, and begins the next one, which the GPU backend solves while the rest
    /// of the app's frame runs. The components hold the state one step behind the step in
    /// flight; the sequence of steps and edits, and so every result, is the same as in
    /// [`StepMode::Blocking`].
    Overlapped,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Written {
    position: Vec3,
    rotation: Quat,
    linear: Vec3,
    angular: Vec3,
}

struct BodyEntry {
    handle: BodyHandle,
    kind: RigidBody,
    collider: Option<ColliderShape>,
    mass: Option<Mass>,
    inertia: Option<Inertia>,
    /// Last values exchanged with the components (pushed or written back).
    written: Written,
}

struct JointEntry {
    handle: JointHandle,
    joint: Joint,
}

/// The core world plus the entity ↔ handle maps. Read it freely; it changes only through
/// the components and [`PhysicsConfig`].
#[derive(Resource)]
pub struct Physics {
    world: PhysicsWorld,
    bodies: HashMap<Entity, BodyEntry>,
    body_entities: HashMap<BodyHandle, Entity>,
    joints: HashMap<Entity, JointEntry>,
    joint_entities: HashMap<JointHandle, Entity>,
    /// Body entities not (yet) in the core: rejected, retried every frame.
    pending_bodies: HashSet<Entity>,
    /// Joint entities not (yet) in the core: retried every frame.
    pending_joints: HashSet<Entity>,
    /// Deformables and attachments, likewise.
    soft: deformables::DeformableMaps,
}

impl Physics {
    /// An empty world on the CPU backend; fails if the config is invalid.
    pub fn new(config: SolverConfig) -> Result<Self, PhysicsError> {
        Self::with_backend(config, crate::Backend::Cpu)
    }

    /// An empty world on `backend` ([`PhysicsWorld::with_backend`]).
    pub fn with_backend(
        config: SolverConfig,
        backend: crate::Backend,
    ) -> Result<Self, PhysicsError> {
        Ok(Self {
            world: PhysicsWorld::with_backend(config, backend)?,
            bodies: HashMap::new(),
            body_entities: HashMap::new(),
            joints: HashMap::new(),
            joint_entities: HashMap::new(),
            pending_bodies: HashSet::new(),
            pending_joints: HashSet::new(),
            soft: Default::default(),
        })
    }

    /// The core world (read-only: edit the components instead).
    pub fn core(&self) -> &PhysicsWorld {
        &self.world
    }

    pub fn body_handle(&self, entity: Entity) -> Option<BodyHandle> {
        self.bodies.get(&entity).map(|b| b.handle)
    }

    pub fn body_entity(&self, handle: BodyHandle) -> Option<Entity> {
        self.body_entities.get(&handle).copied()
    }

    pub fn joint_handle(&self, entity: Entity) -> Option<JointHandle> {
        self.joints.get(&entity).map(|j| j.handle)
    }

    pub fn joint_entity(&self, handle: JointHandle) -> Option<Entity> {
        self.joint_entities.get(&handle).copied()
    }

    /// The core state of an entity's body, if it is simulated.
    pub fn body_state(&self, entity: Entity) -> Option<BodyState> {
        self.world.body(self.body_handle(entity)?).ok()
    }

    /// Number of bodies in the core.
    pub fn body_count(&self) -> usize {
        self.world.body_count()
    }

    /// Number of joints in the core (broken ones included).
    pub fn joint_count(&self) -> usize {
        self.world.joint_count()
    }

    /// Removes an entity's body (if any) and its core joints; the joint entities go back to
    /// the pending set. Returns those joint entities.
    fn detach_body(&mut self, entity: Entity) -> Vec<Entity> {
        let mut detached = Vec::new();
        let Some(entry) = self.bodies.remove(&entity) else {
            return detached;
        };
        self.body_entities.remove(&entry.handle);
        if let Ok(joints) = self.world.remove_body(entry.handle) {
            for jh in joints {
                if let Some(je) = self.joint_entities.remove(&jh) {
                    self.joints.remove(&je);
                    self.pending_joints.insert(je);
                    detached.push(je);
                }
            }
        }
        detached
    }

    /// Removes an entity's joint from the core, if it has one there.
    fn detach_joint(&mut self, entity: Entity) -> bool {
        let Some(entry) = self.joints.remove(&entity) else {
            return false;
        };
        self.joint_entities.remove(&entry.handle);
        // The handle came from our map, so the joint exists.
        let _ = self.world.remove_joint(entry.handle);
        true
    }
}

/// Inserts [`Physics`], [`PhysicsConfig`], [`LastStepReport`] and [`StepMode`] (blocking).
/// Fails (inserting nothing) if the config is invalid.
pub fn init_physics(world: &mut World, config: SolverConfig) -> Result<(), PhysicsError> {
    init_physics_on(world, config, crate::Backend::Cpu)
}

/// [`init_physics`] on a chosen backend; fails (inserting nothing) if the config is invalid
/// or the backend cannot be had ([`crate::Backend::Gpu`] without an adapter).
pub fn init_physics_on(
    world: &mut World,
    config: SolverConfig,
    backend: crate::Backend,
) -> Result<(), PhysicsError> {
    let physics = Physics::with_backend(config.clone(), backend)?;
    world.insert_resource(physics);
    world.insert_resource(PhysicsConfig(config));
    world.insert_resource(LastStepReport::default());
    world.insert_resource(StepMode::default());
    Ok(())
}

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

/// Clears the report and copies a changed, valid [`PhysicsConfig`] into the core.
fn begin_frame(
    config: Res<PhysicsConfig>,
    mut physics: ResMut<Physics>,
    mut report: ResMut<LastStepReport>,
) {
    report.errors.clear();
    report.broken_joints.clear();
    report.frozen_bodies.clear();
    report.frozen_deformables.clear();
    report.broken_attachments.clear();
    report.stepped = false;
    if config.is_changed() && config.0 != physics.world.config {
        match config.0.validate() {
            Ok(()) => physics.world.config = config.0.clone(),
            Err(e) => report.errors.push(PhysicsErrorRecord {
                entity: None,
                error: e.into(),
            }),
        }
    }
}

/// Removes despawned joints and bodies, and forces whose component was removed.
#[allow(clippy::too_many_arguments)]
fn sync_removals(
    mut physics: ResMut<Physics>,
    mut commands: Commands,
    mut removed_joints: Removed<Joint>,
    mut removed_bodies: Removed<RigidBody>,
    mut removed_forces: Removed<ExternalForce>,
    has_joint: Query<(), With<Joint>>,
    has_body: Query<(), With<RigidBody>>,
    has_force: Query<(), With<ExternalForce>>,
) {
    for e in removed_joints.read() {
        if has_joint.contains(e) {
            // Removed and re-inserted: `sync_joints` sees it as changed.
            continue;
        }
        physics.pending_joints.remove(&e);
        if physics.detach_joint(e) {
            commands.entity(e).try_remove::<PhysicsJointHandle>();
        }
    }
    for e in removed_bodies.read() {
        if has_body.contains(e) {
            // Removed and re-inserted: `sync_bodies` sees it as changed.
            continue;
        }
        physics.pending_bodies.remove(&e);
        if physics.bodies.contains_key(&e) {
            for je in physics.detach_body(e) {
                commands.entity(je).try_remove::<PhysicsJointHandle>();
            }
            commands
                .entity(e)
                .try_remove::<(PhysicsBodyHandle, InvalidBody)>();
        }
    }
    for e in removed_forces.read() {
        if has_force.contains(e) {
            continue;
        }
        if let Some(h) = physics.body_handle(e) {
            let _ = physics.world.set_external_force(h, Vec3::ZERO, Vec3::ZERO);
        }
    }
}

type BodyData<'a> = (
    &'a RigidBody,
    Option<&'a Position>,
    Option<&'a Rotation>,
    Option<&'a LinearVelocity>,
    Option<&'a AngularVelocity>,
    Option<&'a ColliderShape>,
    Option<&'a Mass>,
    Option<&'a Inertia>,
    Option<&'a ExternalForce>,
    Option<&'a InvalidBody>,
);

/// Filter: a component that defines the core body (not its state) changed.
type DescriptionChanged = Or<(
    Changed<RigidBody>,
    Changed<ColliderShape>,
    Changed<Mass>,
    Changed<Inertia>,
)>;

fn missing(field: &'static str, component: &str) -> PhysicsError {
    PhysicsError::InvalidBody {
        field,
        reason: format!("the entity has no {component} component"),
    }
}

/// Creates new bodies, retries rejected ones, rebuilds bodies whose description changed.
#[allow(clippy::too_many_arguments)]
fn sync_bodies(
    mut physics: ResMut<Physics>,
    mut report: ResMut<LastStepReport>,
    mut commands: Commands,
    added: Query<Entity, Added<RigidBody>>,
    redescribed: Query<Entity, (With<RigidBody>, DescriptionChanged)>,
    mut removed_colliders: Removed<ColliderShape>,
    mut removed_masses: Removed<Mass>,
    mut removed_inertias: Removed<Inertia>,
    data: Query<BodyData>,
) {
    let physics = &mut *physics;
    let mut candidates: Vec<Entity> = physics.pending_bodies.drain().collect();
    candidates.extend(added.iter());

    // Live bodies whose description changed are rebuilt.
    let mut rebuild: Vec<Entity> = redescribed
        .iter()
        .chain(removed_colliders.read())
        .chain(removed_masses.read())
        .chain(removed_inertias.read())
        .filter(|e| physics.bodies.contains_key(e))
        .collect();
    rebuild.sort_unstable();
    rebuild.dedup();
    for e in rebuild {
        let Ok((rb, .., collider, mass, inertia, _, _)) = data.get(e) else {
            continue;
        };
        let entry = &physics.bodies[&e];
        let same_collider = match (&entry.collider, collider) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same_as(b),
            _ => false,
        };
        if entry.kind == *rb
            && same_collider
            && entry.mass.as_ref() == mass
            && entry.inertia.as_ref() == inertia
        {
            continue; // touched, not changed
        }
        for je in physics.detach_body(e) {
            commands.entity(je).try_remove::<PhysicsJointHandle>();
        }
        commands.entity(e).try_remove::<PhysicsBodyHandle>();
        candidates.push(e);
    }

    candidates.sort_unstable();
    candidates.dedup();
    for e in candidates {
        if physics.bodies.contains_key(&e) {
            continue;
        }
        let Ok((rb, pos, rot, lin, ang, collider, mass, inertia, force, invalid)) = data.get(e)
        else {
            continue; // despawned, or no longer a body
        };
        let result = (|| {
            let position = pos.ok_or_else(|| missing("position", "Position"))?.0;
            let rotation = rot.ok_or_else(|| missing("rotation", "Rotation"))?.0;
            let linear = lin
                .ok_or_else(|| missing("linear_velocity", "LinearVelocity"))?
                .0;
            let angular = ang
                .ok_or_else(|| missing("angular_velocity", "AngularVelocity"))?
                .0;
            let desc = BodyDesc {
                kind: (*rb).into(),
                position,
                rotation,
                linear_velocity: linear,
                angular_velocity: angular,
                collider: collider.map(|c| c.0.clone()),
                mass: mass.map(|m| m.0),
                inertia: inertia.map(|i| i.0),
            };
            let handle = physics.world.add_body(desc)?;
            if let Some(f) = force
                && let Err(err) = physics.world.set_external_force(handle, f.force, f.torque)
            {
                let _ = physics.world.remove_body(handle);
                return Err(err);
            }
            Ok((
                handle,
                Written {
                    position,
                    rotation,
                    linear,
                    angular,
                },
            ))
        })();
        match result {
            Ok((handle, written)) => {
                physics.bodies.insert(
                    e,
                    BodyEntry {
                        handle,
                        kind: *rb,
                        collider: collider.cloned(),
                        mass: mass.copied(),
                        inertia: inertia.copied(),
                        written,
                    },
                );
                physics.body_entities.insert(handle, e);
                let mut ec = commands.entity(e);
                ec.try_insert(PhysicsBodyHandle(handle));
                if invalid.is_some() {
                    ec.try_remove::<InvalidBody>();
                }
            }
            Err(err) => {
                physics.pending_bodies.insert(e);
                if invalid.map(|i| &i.0) != Some(&err) {
                    report.errors.push(PhysicsErrorRecord {
                        entity: Some(e),
                        error: err.clone().into(),
                    });
                    commands.entity(e).try_insert(InvalidBody(err));
                }
            }
        }
    }
}

/// Pushes user edits of pose, velocity and external force of live bodies to the core.
#[allow(clippy::type_complexity)]
fn sync_edits(
    mut physics: ResMut<Physics>,
    mut report: ResMut<LastStepReport>,
    poses: Query<
        (Entity, &Position, &Rotation),
        (With<RigidBody>, Or<(Changed<Position>, Changed<Rotation>)>),
    >,
    velocities: Query<
        (Entity, &LinearVelocity, &AngularVelocity),
        (
            With<RigidBody>,
            Or<(Changed<LinearVelocity>, Changed<AngularVelocity>)>,
        ),
    >,
    forces: Query<(Entity, &ExternalForce), (With<RigidBody>, Changed<ExternalForce>)>,
) {
    let Physics { world, bodies, .. } = &mut *physics;
    let mut record = |e: Entity, err: PhysicsError| {
        report.errors.push(PhysicsErrorRecord {
            entity: Some(e),
            error: err.into(),
        })
    };
    for (e, p, r) in &poses {
        let Some(entry) = bodies.get_mut(&e) else {
            continue;
        };
        let w = &mut entry.written;
        if w.position == p.0 && w.rotation == r.0 {
            continue; // the writeback's own change
        }
        match world.set_pose(entry.handle, p.0, r.0) {
            Ok(()) => {
                w.position = p.0;
                w.rotation = r.0;
            }
            Err(err) => record(e, err),
        }
    }
    for (e, v, w_) in &velocities {
        let Some(entry) = bodies.get_mut(&e) else {
            continue;
        };
        let w = &mut entry.written;
        if w.linear == v.0 && w.angular == w_.0 {
            continue;
        }
        match world.set_velocity(entry.handle, v.0, w_.0) {
            Ok(()) => {
                w.linear = v.0;
                w.angular = w_.0;
            }
            Err(err) => record(e, err),
        }
    }
    for (e, f) in &forces {
        let Some(entry) = bodies.get(&e) else {
            continue;
        };
        if let Err(err) = world.set_external_force(entry.handle, f.force, f.torque) {
            record(e, err);
        }
    }
}

/// Creates new and pending joints, re-creates changed ones.
fn sync_joints(
    mut physics: ResMut<Physics>,
    mut report: ResMut<LastStepReport>,
    mut commands: Commands,
    changed: Query<Entity, Changed<Joint>>,
    joints: Query<(&Joint, Option<&InvalidJoint>, Has<JointBroken>)>,
) {
    let physics = &mut *physics;
    let mut candidates: Vec<(Entity, bool)> =
        physics.pending_joints.drain().map(|e| (e, false)).collect();
    for e in &changed {
        let Ok((joint, ..)) = joints.get(e) else {
            continue;
        };
        if let Some(entry) = physics.joints.get(&e) {
            if entry.joint == *joint {
                continue; // touched, not changed
            }
            physics.detach_joint(e);
        }
        candidates.push((e, true));
    }
    // An edited joint sorts after the same entity from the pending set and wins the dedup.
    candidates.sort_unstable_by_key(|&(e, edited)| (e, std::cmp::Reverse(edited)));
    candidates.dedup_by_key(|(e, _)| *e);

    for (e, edited) in candidates {
        if physics.joints.contains_key(&e) {
            continue;
        }
        let Ok((joint, invalid, broken)) = joints.get(e) else {
            continue; // despawned or no longer a joint
        };
        if broken && !edited {
            continue; // stays broken until the Joint is changed
        }
        let resolve = |field, entity: Entity| {
            physics
                .bodies
                .get(&entity)
                .map(|b| b.handle)
                .ok_or(EcsPhysicsError::MissingBodyEntity { field, entity })
        };
        let result = (|| {
            let body_a = resolve("body_a", joint.body_a)?;
            let body_b = joint.body_b.map(|b| resolve("body_b", b)).transpose()?;
            let desc = JointDesc {
                body_a,
                body_b,
                anchor_a: joint.anchor_a,
                anchor_b: joint.anchor_b,
                kind: joint.kind,
                stiffness: joint.stiffness,
                breaking_force: joint.breaking_force,
                breaking_torque: joint.breaking_torque,
            };
            Ok::<_, EcsPhysicsError>(physics.world.add_joint(desc)?)
        })();
        match result {
            Ok(handle) => {
                physics.joints.insert(
                    e,
                    JointEntry {
                        handle,
                        joint: joint.clone(),
                    },
                );
                physics.joint_entities.insert(handle, e);
                let mut ec = commands.entity(e);
                ec.try_insert(PhysicsJointHandle(handle));
                if invalid.is_some() {
                    ec.try_remove::<InvalidJoint>();
                }
                if broken {
                    ec.try_remove::<JointBroken>();
                }
            }
            Err(err) => {
                physics.pending_joints.insert(e);
                if invalid.map(|i| &i.0) != Some(&err) {
                    report.errors.push(PhysicsErrorRecord {
                        entity: Some(e),
                        error: err.clone(),
                    });
                    commands.entity(e).try_insert(InvalidJoint(err));
                }
            }
        }
    }
}

/// One core step ([`StepMode::Blocking`]) or the beginning of one
/// ([`StepMode::Overlapped`]).
fn step(
    mut physics: ResMut<Physics>,
    mode: Res<StepMode>,
    mut report: ResMut<LastStepReport>,
    mut commands: Commands,
) {
    match *mode {
        StepMode::Blocking => {
            let result = physics.world.step();
            record_step(&physics, &mut report, &mut commands, result);
        }
        StepMode::Overlapped => {
            if let Err(err) = physics.world.begin_step() {
                report.errors.push(PhysicsErrorRecord {
                    entity: None,
                    error: err.into(),
                });
            }
        }
    }
}

/// Finishes the step the previous run began ([`StepMode::Overlapped`]) and writes it back,
/// before this run syncs the edits made since.
fn finish_in_flight(
    mut physics: ResMut<Physics>,
    mut report: ResMut<LastStepReport>,
    mut commands: Commands,
    mut bodies: Query<BodyStateComponents>,
    mut soft: Query<&mut DeformablePositions>,
) {
    if !physics.world.step_in_flight() {
        return;
    }
    let result = physics.world.finish_step();
    record_step(&physics, &mut report, &mut commands, result);
    write_solved(&mut physics, &mut bodies, true);
    deformables::write_deformables(&physics, &mut soft);
}

/// Reports a finished step; maps broken joints and frozen bodies to entities.
fn record_step(
    physics: &Physics,
    report: &mut LastStepReport,
    commands: &mut Commands,
    result: Result<crate::StepReport, PhysicsError>,
) {
    match result {
        Ok(r) => {
            report.stepped = true;
            report.stats = physics.world.stats().clone();
            for h in r.broken {
                if let Some(e) = physics.joint_entity(h) {
                    report.broken_joints.push(e);
                    commands.entity(e).try_insert(JointBroken);
                }
            }
            for h in r.frozen_deformables {
                if let Some(&e) = physics.soft.deformable_entities.get(&h) {
                    report.frozen_deformables.push(e);
                }
            }
            for h in r.broken_attachments {
                if let Some(&e) = physics.soft.attachment_entities.get(&h) {
                    report.broken_attachments.push(e);
                    commands.entity(e).try_insert(AttachmentBroken);
                }
            }
            for h in r.frozen {
                if let Some(e) = physics.body_entity(h) {
                    report.frozen_bodies.push(e);
                }
            }
        }
        Err(err) => report.errors.push(PhysicsErrorRecord {
            entity: None,
            error: err.into(),
        }),
    }
}

type BodyStateComponents = (
    &'static mut Position,
    &'static mut Rotation,
    &'static mut LinearVelocity,
    &'static mut AngularVelocity,
);

/// Copies the solved pose and velocities of dynamic and kinematic bodies into their
/// components (only the components whose value changed are marked changed); nothing while
/// a step is in flight.
fn writeback(
    mut physics: ResMut<Physics>,
    mut bodies: Query<BodyStateComponents>,
    mut soft: Query<&mut DeformablePositions>,
) {
    if !physics.world.step_in_flight() {
        write_solved(&mut physics, &mut bodies, false);
        deformables::write_deformables(&physics, &mut soft);
    }
}

fn write_solved(physics: &mut Physics, bodies: &mut Query<BodyStateComponents>, keep_edits: bool) {
    let Physics {
        world,
        bodies: entries,
        ..
    } = physics;
    for (&e, entry) in entries.iter_mut() {
        if entry.kind == RigidBody::Static {
            continue;
        }
        let (Ok(s), Ok((mut p, mut r, mut v, mut w))) =
            (world.body(entry.handle), bodies.get_mut(e))
        else {
            continue;
        };
        // Finishing an overlapped step: a component written since this system's last run,
        // to a value other than the last one exchanged, holds a user edit made while the
        // step was in flight. It is kept, and
        // `sync_edits` pushes it, since it differs from the solved values recorded below
        // (with the solved values of the components not edited).
        let old = entry.written;
        if !(keep_edits && p.is_changed() && p.0 != old.position) {
            p.set_if_neq(Position(s.position));
        }
        if !(keep_edits && r.is_changed() && r.0 != old.rotation) {
            r.set_if_neq(Rotation(s.rotation));
        }
        if !(keep_edits && v.is_changed() && v.0 != old.linear) {
            v.set_if_neq(LinearVelocity(s.linear_velocity));
        }
        if !(keep_edits && w.is_changed() && w.0 != old.angular) {
            w.set_if_neq(AngularVelocity(s.angular_velocity));
        }
        entry.written = Written {
            position: s.position,
            rotation: s.rotation,
            linear: s.linear_velocity,
            angular: s.angular_velocity,
        };
    }
}
