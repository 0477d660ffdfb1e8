//! `Transform` ↔ pose: a body's `Transform` is its collider's frame (the entity's origin),
//! [`Position`]/[`Rotation`] are its centre of mass in world space.
//!
//! - A body spawned with a `Transform` starts there; one spawned without gets a `Transform`
//!   made from its `Position`/`Rotation` (the bevy_ecs layer's way).
//! - After each step the solved pose is written into `Transform` (translation and rotation;
//!   the scale is the user's and does not scale the collider).
//! - A `Transform` that differs from the last one written here is a user edit: it teleports
//!   the body (velocity kept) and restarts its interpolation there.
//! - A body under a parent: the parent chain (non-body entities with uniform scales) maps
//!   its local `Transform` to the world. The physics owns the world pose: moving the parent
//!   does not drag a dynamic body, its local `Transform` is rewritten instead.
//!   A parent chain the pose cannot go through gets an [`InvalidTransform`].

use bevy_ecs::prelude::*;
use bevy_ecs::system::SystemParam;
use bevy_transform::components::Transform;
use glam::{Quat, Vec3};
use thiserror::Error;

use super::interpolation::StepPoses;
use crate::ecs::{ColliderShape, Position, RigidBody, Rotation};

/// Why a body's `Transform` is not synced with its pose.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum TransformError {
    /// A `Transform` on the body or an ancestor holds NaN or infinity, or a rotation that is
    /// not a unit quaternion after normalising.
    #[error("the Transform of entity {entity} is not finite (or its rotation is zero)")]
    NotFinite { entity: Entity },
    /// A non-uniform, zero or negative scale on an ancestor: a rigid pose under it would be
    /// sheared or mirrored.
    #[error(
        "ancestor {ancestor} has scale {scale}: a rigid body's parents need uniform positive scales"
    )]
    BadParentScale { ancestor: Entity, scale: Vec3 },
    /// The body sits under another rigid body; connect them with a `Joint` instead.
    #[error("ancestor {ancestor} is a rigid body: bodies cannot be nested (use a Joint)")]
    NestedBody { ancestor: Entity },
    /// An ancestor without a `Transform`: the body's world pose is undefined.
    #[error("ancestor {ancestor} has no Transform")]
    MissingParentTransform { ancestor: Entity },
}

/// On a body whose `Transform` cannot be synced: why. While it is present the body is
/// simulated from its [`Position`]/[`Rotation`] and its `Transform` is neither read nor
/// written; it is checked again every step and removed once the cause is gone.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct InvalidTransform(pub TransformError);

/// What the sync last wrote into (or took from) the body's `Transform`, and where the
/// entity's origin sits relative to the centre of mass.
#[derive(Component, Clone, Copy, Debug)]
pub(crate) struct TransformSync {
    written: (Vec3, Quat),
    /// Entity origin in the body frame (the core's collider offset, −local centre of mass).
    offset: Vec3,
}

/// The world frame of a body's parent: a similarity (uniform scale).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    translation: Vec3,
    rotation: Quat,
    scale: f32,
}

impl Frame {
    const IDENTITY: Frame = Frame {
        translation: Vec3::ZERO,
        rotation: Quat::IDENTITY,
        scale: 1.0,
    };

    /// `parent ∘ self`.
    fn under(self, parent: &Transform, scale: f32) -> Frame {
        Frame {
            translation: parent.translation + parent.rotation * (scale * self.translation),
            rotation: parent.rotation * self.rotation,
            scale: scale * self.scale,
        }
    }

    pub(crate) fn to_world(self, t: Vec3, r: Quat) -> (Vec3, Quat) {
        (
            self.translation + self.rotation * (self.scale * t),
            self.rotation * r,
        )
    }

    pub(crate) fn to_local(self, t: Vec3, r: Quat) -> (Vec3, Quat) {
        let inv = self.rotation.inverse();
        (inv * (t - self.translation) / self.scale, inv * r)
    }
}

/// Reads a body's parent chain.
#[derive(SystemParam)]
pub(crate) struct Ancestors<'w, 's> {
    parents: Query<'w, 's, &'static ChildOf>,
    transforms: Query<'w, 's, &'static Transform, Without<RigidBody>>,
    bodies: Query<'w, 's, (), With<RigidBody>>,
}

impl Ancestors<'_, '_> {
    /// The world frame of `entity`'s parent (identity for a root entity).
    pub(crate) fn frame(&self, entity: Entity) -> Result<Frame, TransformError> {
        let mut frame = Frame::IDENTITY;
        for ancestor in self.parents.iter_ancestors(entity) {
            if self.bodies.contains(ancestor) {
                return Err(TransformError::NestedBody { ancestor });
            }
            let t = self
                .transforms
                .get(ancestor)
                .map_err(|_| TransformError::MissingParentTransform { ancestor })?;
            if !(t.translation.is_finite() && t.rotation.is_finite() && t.scale.is_finite()) {
                return Err(TransformError::NotFinite { entity: ancestor });
            }
            let s = t.scale.x;
            let uniform = (t.scale - Vec3::splat(s)).abs().max_element() <= 1e-5 * s.abs();
            if !(uniform && s > 0.0) {
                return Err(TransformError::BadParentScale {
                    ancestor,
                    scale: t.scale,
                });
            }
            let rotation = t.rotation.normalize();
            frame = frame.under(&Transform { rotation, ..*t }, s);
        }
        Ok(frame)
    }
}

/// The entity origin in the body frame: where the core puts the collider (its centre of
/// mass is the body origin).
fn origin_offset(collider: Option<&ColliderShape>) -> Vec3 {
    collider
        .map(|c| &c.0)
        .filter(|c| c.has_volume())
        .map(|c| -c.mass_properties().local_com)
        .unwrap_or(Vec3::ZERO)
}

/// Writes the world pose (centre of mass `p`, rotation `r`) into `transform` under `frame`,
/// marking it changed only if it moved, and records what it wrote.
pub(crate) fn write_pose(
    transform: &mut Mut<Transform>,
    sync: &mut TransformSync,
    frame: Frame,
    p: Vec3,
    r: Quat,
) {
    let (t, q) = frame.to_local(p + r * sync.offset, r);
    if transform.translation != t || transform.rotation != q {
        transform.translation = t;
        transform.rotation = q;
    }
    sync.written = (t, q);
}

type UntransformedBodies<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        &'static Position,
        &'static Rotation,
        Option<&'static ColliderShape>,
    ),
    (With<RigidBody>, Without<Transform>),
>;

/// Gives bodies spawned without a `Transform` one at their `Position`/`Rotation`.
pub(crate) fn insert_missing_transforms(
    mut commands: Commands,
    ancestors: Ancestors,
    bodies: UntransformedBodies,
) {
    for (e, p, r, collider) in &bodies {
        let Ok(frame) = ancestors.frame(e) else {
            // Placed at the world pose; the edit pass reports the parent chain.
            let origin = p.0 + r.0 * origin_offset(collider);
            commands
                .entity(e)
                .try_insert(Transform::from_translation(origin).with_rotation(r.0));
            continue;
        };
        let (t, q) = frame.to_local(p.0 + r.0 * origin_offset(collider), r.0);
        commands
            .entity(e)
            .try_insert(Transform::from_translation(t).with_rotation(q));
    }
}

type EditedBodies<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        Ref<'static, Transform>,
        &'static mut Position,
        &'static mut Rotation,
        Option<Ref<'static, ColliderShape>>,
        Option<&'static mut TransformSync>,
        Option<&'static mut StepPoses>,
        Option<&'static InvalidTransform>,
    ),
    (
        With<RigidBody>,
        Or<(
            Changed<Transform>,
            Without<TransformSync>,
            With<InvalidTransform>,
            Changed<ColliderShape>,
        )>,
    ),
>;

/// Takes new bodies' `Transform`s as their initial pose and user-edited `Transform`s as
/// teleports (into `Position`/`Rotation`, which the bevy_ecs layer pushes to the core).
pub(crate) fn transform_to_pose(
    mut commands: Commands,
    ancestors: Ancestors,
    mut bodies: EditedBodies,
) {
    for (e, transform, mut pos, mut rot, collider, sync, poses, invalid) in &mut bodies {
        let result = ancestors.frame(e).and_then(|frame| {
            let (t, r) = (transform.translation, transform.rotation);
            let r_len = r.length();
            if !(t.is_finite() && r.is_finite() && r_len > 1e-3) {
                return Err(TransformError::NotFinite { entity: e });
            }
            Ok((frame, t, r))
        });
        let (frame, t, r) = match result {
            Ok(v) => v,
            Err(err) => {
                if invalid.map(|i| &i.0) != Some(&err) {
                    commands.entity(e).try_insert(InvalidTransform(err));
                }
                continue;
            }
        };
        if invalid.is_some() {
            commands.entity(e).try_remove::<InvalidTransform>();
        }
        let collider_changed = collider.as_ref().is_some_and(|c| c.is_changed());
        let offset = match &sync {
            Some(s) if !collider_changed => s.offset,
            _ => origin_offset(collider.as_deref()),
        };
        if let Some(s) = &sync
            && s.written == (t, r)
            && s.offset == offset
        {
            continue; // our own write, or an untouched Transform
        }
        let (world_t, world_r) = frame.to_world(t, r.normalize());
        let world_r = world_r.normalize();
        let p = world_t - world_r * offset;
        pos.set_if_neq(Position(p));
        rot.set_if_neq(Rotation(world_r));
        let new_sync = TransformSync {
            written: (t, r),
            offset,
        };
        let new_poses = StepPoses::at(p, world_r);
        match (sync, poses) {
            (Some(mut s), Some(mut sp)) => {
                *s = new_sync;
                *sp = new_poses;
            }
            _ => {
                commands.entity(e).try_insert((new_sync, new_poses));
            }
        }
    }
}

type SolvedBodies<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        &'static RigidBody,
        &'static mut Transform,
        &'static Position,
        &'static Rotation,
        &'static mut TransformSync,
    ),
    Without<InvalidTransform>,
>;

/// After a step: the solved poses of dynamic and kinematic bodies into their `Transform`s.
pub(crate) fn pose_to_transform(ancestors: Ancestors, mut bodies: SolvedBodies) {
    for (e, rb, mut transform, p, r, mut sync) in &mut bodies {
        if *rb == RigidBody::Static {
            continue; // the user's Transform is its pose
        }
        if let Ok(frame) = ancestors.frame(e) {
            write_pose(&mut transform, &mut sync, frame, p.0, r.0);
        }
    }
}
