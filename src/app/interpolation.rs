//! Transform interpolation: the physics steps at the fixed rate, the screen refreshes at its
//! own; drawing the last step's pose makes bodies stutter (a 60 Hz step on a 144 Hz screen
//! holds a pose for 2 or 3 frames). Each body keeps its last two step poses and, every frame
//! in `PostUpdate` before transform propagation, its `Transform` is set between them by
//! `Time<Fixed>::overstep_fraction()` (position lerped, rotation slerped). What is drawn lags
//! the simulation by up to one step, in exchange for smooth motion.

use bevy_ecs::prelude::*;
use bevy_time::{Fixed, Time};
use bevy_transform::components::Transform;
use glam::{Quat, Vec3};

use super::sync::{Ancestors, InvalidTransform, TransformSync, write_pose};
use crate::ecs::{Position, RigidBody, Rotation};

/// Whether bodies' `Transform`s are interpolated between steps (default: yes). Per body,
/// [`NoInterpolation`] opts out.
#[derive(Resource, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysicsInterpolation {
    pub enabled: bool,
}

impl Default for PhysicsInterpolation {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// On a body: its `Transform` shows the last step's pose, not interpolated (e.g. a body the
/// camera is attached to in a fixed-step game loop).
#[derive(Component, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoInterpolation;

/// The centre-of-mass poses of a body after the last two steps (read-only; maintained by
/// the plugin). A teleport through `Transform` sets both to the new pose.
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub struct StepPoses {
    pub previous_position: Vec3,
    pub previous_rotation: Quat,
    pub position: Vec3,
    pub rotation: Quat,
}

impl StepPoses {
    pub(crate) fn at(p: Vec3, r: Quat) -> Self {
        Self {
            previous_position: p,
            previous_rotation: r,
            position: p,
            rotation: r,
        }
    }

    /// The pose at fraction `alpha` of the way from the previous to the last step.
    pub fn lerp(&self, alpha: f32) -> (Vec3, Quat) {
        if alpha >= 1.0 {
            return (self.position, self.rotation); // exact (slerp would renormalise)
        }
        (
            self.previous_position.lerp(self.position, alpha),
            self.previous_rotation.slerp(self.rotation, alpha),
        )
    }
}

/// After each fixed tick (stepped or not): the last pose becomes the previous one. A tick
/// that did not step (paused) leaves both equal, so nothing moves on screen.
pub(crate) fn advance_step_poses(mut bodies: Query<(&mut StepPoses, &Position, &Rotation)>) {
    for (mut s, p, r) in &mut bodies {
        s.previous_position = s.position;
        s.previous_rotation = s.rotation;
        s.position = p.0;
        s.rotation = r.0;
    }
}

type InterpolatedBodies<'w, 's> = Query<
    'w,
    's,
    (
        Entity,
        &'static RigidBody,
        &'static mut Transform,
        &'static StepPoses,
        &'static mut TransformSync,
        Has<NoInterpolation>,
    ),
    Without<InvalidTransform>,
>;

/// Every frame: `Transform` between the last two step poses.
pub(crate) fn interpolate_transforms(
    time: Res<Time<Fixed>>,
    settings: Res<PhysicsInterpolation>,
    ancestors: Ancestors,
    mut bodies: InterpolatedBodies,
) {
    let alpha = time.overstep_fraction().clamp(0.0, 1.0);
    for (e, rb, mut transform, poses, mut sync, opted_out) in &mut bodies {
        if *rb == RigidBody::Static {
            continue;
        }
        let Ok(frame) = ancestors.frame(e) else {
            continue;
        };
        let a = if settings.enabled && !opted_out {
            alpha
        } else {
            1.0
        };
        let (p, r) = poses.lerp(a);
        write_pose(&mut transform, &mut sync, frame, p, r);
    }
}
