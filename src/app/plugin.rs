//! [`AvbdPlugin`]: one `add_plugins` call sets up the world, the schedules and the sync.

use std::time::Duration;

use bevy_app::{App, FixedPostUpdate, Plugin, PostUpdate};
use bevy_ecs::intern::Interned;
use bevy_ecs::prelude::*;
use bevy_ecs::schedule::ScheduleLabel;
use bevy_time::{Fixed, Time};
use bevy_transform::TransformSystems;

use super::control::{self, PhysicsControl};
use super::events::{self, ContactPairs};
use super::interpolation::{self, PhysicsInterpolation};
use super::{diagnostics, sync};
use crate::ecs::{self, PhysicsConfig, PhysicsSet, StepMode};
use crate::{Backend, PhysicsError, SolverConfig};

/// The physics as a Bevy plugin. `AvbdPlugin::default()` steps a CPU world at 60 Hz in
/// `FixedPostUpdate` with interpolated `Transform`s; the fields (or the `with_*` builders)
/// change that.
///
/// Needs `TimePlugin` and `TransformPlugin` (both in `DefaultPlugins` and `MinimalPlugins`
/// + `TransformPlugin`).
#[derive(Clone, Debug)]
pub struct AvbdPlugin {
    /// Solver parameters. `dt` is also the fixed timestep: the plugin sets `Time<Fixed>`
    /// to it, and afterwards a change of either is copied into the other.
    pub config: SolverConfig,
    /// CPU, GPU, or GPU when available. A backend that cannot start falls back to the CPU;
    /// [`PhysicsSetup`] says which one runs and why.
    pub backend: Backend,
    /// The schedule the step runs in: one of the fixed-timestep schedules run by
    /// `FixedMain` (default `FixedPostUpdate`, after the game's `FixedUpdate`).
    pub schedule: Interned<dyn ScheduleLabel>,
    /// Interpolate `Transform`s between steps (the [`PhysicsInterpolation`] resource).
    pub interpolation: bool,
    /// Blocking (default) or overlapped stepping (the [`StepMode`] resource).
    pub step_mode: StepMode,
}

impl Default for AvbdPlugin {
    fn default() -> Self {
        Self {
            config: SolverConfig::default(),
            backend: Backend::Cpu,
            schedule: FixedPostUpdate.intern(),
            interpolation: true,
            step_mode: StepMode::Blocking,
        }
    }
}

impl AvbdPlugin {
    /// The default plugin stepping in `schedule` (e.g. `FixedUpdate`).
    pub fn new(schedule: impl ScheduleLabel) -> Self {
        Self {
            schedule: schedule.intern(),
            ..Default::default()
        }
    }

    pub fn with_config(mut self, config: SolverConfig) -> Self {
        self.config = config;
        self
    }

    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    pub fn without_interpolation(mut self) -> Self {
        self.interpolation = false;
        self
    }

    pub fn with_step_mode(mut self, step_mode: StepMode) -> Self {
        self.step_mode = step_mode;
        self
    }
}

/// What the plugin started with: the backend that runs ("cpu" or "gpu") and, if the chosen
/// one or the config was refused, why (the world then runs on the CPU; an invalid config
/// runs the defaults and is reported in `LastStepReport::errors` until fixed).
#[derive(Resource, Clone, Debug, PartialEq)]
pub struct PhysicsSetup {
    pub backend: &'static str,
    pub error: Option<PhysicsError>,
}

impl Plugin for AvbdPlugin {
    fn build(&self, app: &mut App) {
        let world = app.world_mut();
        let mut error = None;
        let mut start = |config: SolverConfig, backend| {
            ecs::init_physics_on(world, config, backend).map_err(|e| error.get_or_insert(e).clone())
        };
        let _ = start(self.config.clone(), self.backend)
            .or_else(|_| start(self.config.clone(), Backend::Cpu))
            .or_else(|_| start(SolverConfig::default(), Backend::Cpu));
        let backend = world.resource::<ecs::Physics>().core().backend();
        // The user's config even if invalid: the bevy_ecs layer reports it.
        world.insert_resource(PhysicsConfig(self.config.clone()));
        world.insert_resource(self.step_mode);
        world.insert_resource(PhysicsSetup { backend, error });
        ecs::observe_removals(world);

        let dt = self.config.dt;
        if dt.is_finite() && dt > 0.0 {
            let timestep = Duration::from_secs_f64(dt as f64);
            match world.get_resource_mut::<Time<Fixed>>() {
                Some(mut fixed) => fixed.set_timestep(timestep),
                // Before TimePlugin: its `init_resource` keeps this one.
                None => world.insert_resource(Time::<Fixed>::from_duration(timestep)),
            }
        }

        app.init_resource::<PhysicsControl>()
            .init_resource::<ContactPairs>()
            .insert_resource(PhysicsInterpolation {
                enabled: self.interpolation,
            });
        diagnostics::register(app);

        app.edit_schedule(self.schedule, |schedule| {
            ecs::add_physics_systems(schedule);
            schedule.configure_sets((
                PhysicsSet::Prepare.before(PhysicsSet::SyncToCore),
                PhysicsSet::Finalize.after(PhysicsSet::Writeback),
                (
                    PhysicsSet::SyncToCore,
                    PhysicsSet::Step,
                    PhysicsSet::Writeback,
                )
                    .distributive_run_if(control::physics_stepping),
            ));
            schedule.add_systems(
                (
                    control::sync_timestep,
                    control::advance_control,
                    sync::insert_missing_transforms,
                    sync::transform_to_pose,
                )
                    .chain()
                    .in_set(PhysicsSet::Prepare),
            );
            schedule.add_systems(
                (
                    interpolation::advance_step_poses,
                    sync::pose_to_transform,
                    events::collision_events,
                    diagnostics::measure,
                )
                    .chain()
                    .in_set(PhysicsSet::Finalize),
            );
        });
        app.configure_sets(
            PostUpdate,
            PhysicsSet::Interpolate.before(TransformSystems::Propagate),
        )
        .add_systems(
            PostUpdate,
            (
                sync::insert_missing_transforms,
                sync::transform_to_pose,
                interpolation::interpolate_transforms,
            )
                .chain()
                .in_set(PhysicsSet::Interpolate),
        );
        #[cfg(feature = "render-mesh")]
        super::render_mesh::register(app);
    }
}
