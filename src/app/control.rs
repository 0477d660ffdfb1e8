//! Pause and single-step, and the one timestep shared by `Time<Fixed>` and the solver.

use std::time::Duration;

use bevy_ecs::prelude::*;
use bevy_time::{Fixed, Time};

use crate::ecs::PhysicsConfig;

/// Pause and single-step the physics (the rest of the app keeps running). While paused the
/// fixed ticks still come, the bodies hold still (their `Transform`s too), and edits wait
/// for the next step.
#[derive(Resource, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhysicsControl {
    /// No steps while set, except the queued ones.
    pub paused: bool,
    /// Steps to take while paused, one per fixed tick (see [`PhysicsControl::step`]).
    pub queued_steps: u32,
    stepping: bool,
    steps: u64,
}

impl PhysicsControl {
    pub fn pause(&mut self) {
        self.paused = true;
    }

    pub fn resume(&mut self) {
        self.paused = false;
    }

    /// While paused: take `n` more steps, one per fixed tick.
    pub fn step(&mut self, n: u32) {
        self.queued_steps = self.queued_steps.saturating_add(n);
    }

    /// Whether the current (or last) fixed tick steps the physics.
    pub fn stepping(&self) -> bool {
        self.stepping
    }

    /// Fixed ticks that stepped the physics since the app started.
    pub fn steps_taken(&self) -> u64 {
        self.steps
    }
}

/// First thing in a fixed tick: does this tick step?
pub(crate) fn advance_control(mut control: ResMut<PhysicsControl>) {
    let c = &mut *control;
    c.stepping = !c.paused || c.queued_steps > 0;
    if c.paused && c.queued_steps > 0 {
        c.queued_steps -= 1;
    }
    if c.stepping {
        c.steps += 1;
    }
}

/// Run condition of the stepping sets.
pub(crate) fn physics_stepping(control: Res<PhysicsControl>) -> bool {
    control.stepping
}

/// Keeps `SolverConfig::dt` equal to `Time<Fixed>`'s timestep: the one changed since the
/// last tick wins (`Time<Fixed>` if both did). An invalid dt is left for the bevy_ecs
/// layer to report, and the timestep keeps its value.
pub(crate) fn sync_timestep(
    mut fixed: ResMut<Time<Fixed>>,
    mut config: ResMut<PhysicsConfig>,
    mut last: Local<Option<(Duration, f32)>>,
) {
    let timestep = fixed.timestep();
    let dt = config.0.dt;
    let fixed_changed = last.is_none_or(|(t, _)| t != timestep);
    let config_changed = last.is_none_or(|(_, d)| d != dt);
    let as_duration = |dt: f32| Duration::from_secs_f64(dt as f64);
    if fixed_changed {
        // Equal up to the Duration's nanoseconds: leave the config as the user wrote it.
        let secs = timestep.as_secs_f32();
        if as_duration(dt) != timestep && secs > 0.0 {
            config.0.dt = secs;
        }
    } else if config_changed && dt.is_finite() && dt > 0.0 {
        fixed.set_timestep(as_duration(dt));
    }
    *last = Some((fixed.timestep(), config.0.dt));
}
