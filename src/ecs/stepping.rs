//! The step ([`PhysicsSet::Step`](super::PhysicsSet::Step)), the finish of an overlapped
//! step, the report of a finished step and the writeback of the solved state.

use bevy_ecs::prelude::*;

use super::resources::Written;
use super::{
    AngularVelocity, AttachmentBroken, DeformablePositions, JointBroken, LastStepReport,
    LinearVelocity, Physics, PhysicsErrorRecord, Position, RigidBody, Rotation, StepMode,
    deformables,
};
use crate::PhysicsError;

/// One core step ([`StepMode::Blocking`]) or the beginning of one
/// ([`StepMode::Overlapped`]).
pub(super) fn step(
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
pub(super) fn finish_in_flight(
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
pub(super) fn writeback(
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
