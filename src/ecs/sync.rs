//! The systems of [`PhysicsSet::SyncToCore`](super::PhysicsSet::SyncToCore) that mirror
//! the ECS into the core: config, removals, bodies, user edits, joints.

use bevy_ecs::prelude::*;
use glam::Vec3;

use super::removals::Removed;
use super::resources::{BodyEntry, JointEntry, Written};
use super::{
    AngularVelocity, ColliderShape, EcsPhysicsError, ExternalForce, Inertia, InvalidBody,
    InvalidJoint, Joint, JointBroken, LastStepReport, LinearVelocity, Mass, Physics,
    PhysicsBodyHandle, PhysicsConfig, PhysicsErrorRecord, PhysicsJointHandle, Position, RigidBody,
    Rotation,
};
use crate::{BodyDesc, JointDesc, PhysicsError};

/// Clears the report and copies a changed, valid [`PhysicsConfig`] into the core.
pub(super) fn begin_frame(
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
pub(super) fn sync_removals(
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
pub(super) fn sync_bodies(
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
pub(super) fn sync_edits(
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
pub(super) fn sync_joints(
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
