//! The component and marker types of bodies and joints (the deformables' are in
//! `deformables`).

use std::sync::Arc;

use bevy_ecs::prelude::*;
use glam::{Quat, Vec3};

use super::EcsPhysicsError;
use crate::{BodyHandle, BodyKind, JointHandle, JointKind, PhysicsError};

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
    pub(super) fn same_as(&self, other: &ColliderShape) -> bool {
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
///
/// [`Physics::body_handle`]: super::Physics::body_handle
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
