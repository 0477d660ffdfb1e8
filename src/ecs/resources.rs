//! The layer's errors, the report of the last frame, the resources ([`Physics`] with its
//! entity ↔ handle maps, [`PhysicsConfig`], [`StepMode`]) and their initialisation.

use std::collections::{HashMap, HashSet};

use bevy_ecs::prelude::*;
use glam::{Quat, Vec3};
use thiserror::Error;

use super::{ColliderShape, Inertia, Joint, Mass, RigidBody, deformables};
// Named only by the docs' links.
#[cfg(doc)]
use super::{InvalidBody, InvalidJoint, PhysicsSet, Position};
use crate::{
    BodyHandle, BodyState, JointHandle, PhysicsError, PhysicsWorld, SolverConfig, StepStats,
};

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
pub(super) struct Written {
    pub(super) position: Vec3,
    pub(super) rotation: Quat,
    pub(super) linear: Vec3,
    pub(super) angular: Vec3,
}

pub(super) struct BodyEntry {
    pub(super) handle: BodyHandle,
    pub(super) kind: RigidBody,
    pub(super) collider: Option<ColliderShape>,
    pub(super) mass: Option<Mass>,
    pub(super) inertia: Option<Inertia>,
    /// Last values exchanged with the components (pushed or written back).
    pub(super) written: Written,
}

pub(super) struct JointEntry {
    pub(super) handle: JointHandle,
    pub(super) joint: Joint,
}

/// The core world plus the entity ↔ handle maps. Read it freely; it changes only through
/// the components and [`PhysicsConfig`].
#[derive(Resource)]
pub struct Physics {
    pub(super) world: PhysicsWorld,
    pub(super) bodies: HashMap<Entity, BodyEntry>,
    pub(super) body_entities: HashMap<BodyHandle, Entity>,
    pub(super) joints: HashMap<Entity, JointEntry>,
    pub(super) joint_entities: HashMap<JointHandle, Entity>,
    /// Body entities not (yet) in the core: rejected, retried every frame.
    pub(super) pending_bodies: HashSet<Entity>,
    /// Joint entities not (yet) in the core: retried every frame.
    pub(super) pending_joints: HashSet<Entity>,
    /// Deformables and attachments, likewise.
    pub(super) soft: deformables::DeformableMaps,
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
    pub(super) fn detach_body(&mut self, entity: Entity) -> Vec<Entity> {
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
    pub(super) fn detach_joint(&mut self, entity: Entity) -> bool {
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
