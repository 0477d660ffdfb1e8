//! Step diagnostics through `bevy_diagnostic` (shown by `LogDiagnosticsPlugin` or any
//! diagnostics UI): one measurement per step.

use bevy_app::App;
use bevy_diagnostic::{Diagnostic, DiagnosticPath, Diagnostics, RegisterDiagnostic};
use bevy_ecs::prelude::*;

use super::control::PhysicsControl;
use crate::ecs::{LastStepReport, Physics};

/// The paths of the physics diagnostics.
pub struct PhysicsDiagnostics;

impl PhysicsDiagnostics {
    /// Whole step: collision and solve (ms).
    pub const STEP_MS: DiagnosticPath = DiagnosticPath::const_new("avbd/step_ms");
    /// Collision detection (ms).
    pub const COLLISION_MS: DiagnosticPath = DiagnosticPath::const_new("avbd/collision_ms");
    /// The solve: the iterations, velocities, momentum projection (ms).
    pub const SOLVER_MS: DiagnosticPath = DiagnosticPath::const_new("avbd/solver_ms");
    /// Contact points.
    pub const CONTACTS: DiagnosticPath = DiagnosticPath::const_new("avbd/contacts");
    /// Colours of the rigid bodies' graph (parallel sweeps per iteration).
    pub const COLORS: DiagnosticPath = DiagnosticPath::const_new("avbd/colors");
    /// The fixed iteration budget of the step.
    pub const ITERATIONS: DiagnosticPath = DiagnosticPath::const_new("avbd/iterations");
    /// Rigid bodies in the core.
    pub const BODIES: DiagnosticPath = DiagnosticPath::const_new("avbd/bodies");

    pub const ALL: [DiagnosticPath; 7] = [
        Self::STEP_MS,
        Self::COLLISION_MS,
        Self::SOLVER_MS,
        Self::CONTACTS,
        Self::COLORS,
        Self::ITERATIONS,
        Self::BODIES,
    ];
}

pub(crate) fn register(app: &mut App) {
    for path in PhysicsDiagnostics::ALL {
        let ms = path.as_str().ends_with("_ms");
        app.register_diagnostic(Diagnostic::new(path).with_suffix(if ms { " ms" } else { "" }));
    }
}

/// After a step that finished: its timings and counts.
pub(crate) fn measure(
    physics: Res<Physics>,
    report: Res<LastStepReport>,
    control: Res<PhysicsControl>,
    mut diagnostics: Diagnostics,
) {
    if !(control.stepping() && report.stepped) {
        return;
    }
    let s = &report.stats;
    let core = physics.core();
    diagnostics.add_measurement(&PhysicsDiagnostics::STEP_MS, || s.total_ms);
    diagnostics.add_measurement(&PhysicsDiagnostics::COLLISION_MS, || s.collision_ms);
    diagnostics.add_measurement(&PhysicsDiagnostics::SOLVER_MS, || s.solver_ms);
    diagnostics.add_measurement(&PhysicsDiagnostics::CONTACTS, || s.contacts as f64);
    diagnostics.add_measurement(&PhysicsDiagnostics::COLORS, || s.colors as f64);
    diagnostics.add_measurement(&PhysicsDiagnostics::ITERATIONS, || {
        core.config.iterations as f64
    });
    diagnostics.add_measurement(&PhysicsDiagnostics::BODIES, || core.body_count() as f64);
}
