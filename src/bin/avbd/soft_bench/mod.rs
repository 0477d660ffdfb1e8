//! The deformable cases of `avbd bench`: bevy_avbd's vertex block descent side by side with
//! rapier3d 0.36's soft bodies (its FEM solver, and its default constraint solver) on the
//! same meshes, materials, masses, pins and attachments ([`rapier_soft`]), at 60 Hz.
//!
//! Every run of a case (each engine at each budget of the sweep, the default budgets among
//! them) is built first, checked vertex for vertex against the description, and then all
//! runs are stepped round-robin, one frame each, alternating the engines, for the case's
//! frames (5 s), so the load of the moment falls on all of them alike. Timings are per
//! `step()` (bevy_avbd: `StepStats::total_ms`; rapier: wall time of
//! `PhysicsPipeline::step`), median and p95 over the whole run. Quality is computed by this
//! module for both engines from their vertex positions and body poses, with the same code:
//!
//! - the static value: the mean displacement along the probe direction (down) of the
//!   probe vertices (cantilever tip face, bar, rod or cube bottom face), averaged over the
//!   last second of the run, as `bevy_avbd::scenes` measures it;
//! - its error relative to the reference: bevy_avbd's f64 Newton solution of the same
//!   mesh (`newton_*` metrics of the scene; the `cube` solves its own `NewtonProblem`), or
//!   for the rod under the box the analytic `F L/(E A) + ρ g L²/(2E)` the scene reports;
//! - the attachment gap: the largest distance between an attached vertex and its anchor
//!   on the box, over every frame (rod under the box only).
//!
//! The contact cases (`soft_drop`, `soft_stack`) have no static value: each engine runs at
//! its default budget only, both colliding with the ground (a half-space) and with each
//! other, and after every frame the same exact test counts, for both, the intersections of
//! the bodies' boundary triangles (pairs of different bodies, and non-neighbour pairs of one
//! body) plus the surface vertices strictly below the ground
//! (`bevy_avbd::reference::intersect::check_soups`, the check of the scenes'
//! `intersections` and `min_separation` metrics, on each engine's positions); with the
//! least separation within 1 cm, the deepest vertex below the ground, the lowest vertex at
//! the end and, for the stack, the top cube's largest horizontal drift of its centre of
//! mass.
//!
//! Files: `run.rs` (one engine at one budget: stepping, measuring, the results' types),
//! `case.rs` (a case's parameters, builds and reference, and every run of it), `report.rs`
//! (the Markdown sections), `csv.rs` (soft.csv, soft_series.csv).
//!
//! [`rapier_soft`]: crate::rapier_soft

mod case;
mod csv;
mod report;
mod run;

pub use case::{has_param, run_case};
pub use csv::{csv, series_csv};
pub use report::markdown;
pub use run::SoftCaseResult;

use crate::rapier_soft::RapierBudget;

/// Frames of the static average: the last second (as the scenes' metrics).
pub(super) const STATIC_WINDOW: usize = 60;

/// Distance within which the contact cases' least separation is measured (m), as the
/// contact scenes' `min_separation`.
pub(super) const SEPARATION_RADIUS: f64 = 0.01;

/// The equal-quality threshold of a case: 1% of the f64 Newton reference of the same mesh;
/// 2% for the rod under the box, whose reference is the analytic bar formula: that ignores
/// the rigid box holding the bottom face against its Poisson contraction and the
/// Neo-Hookean response at 2.5% strain, which move the mesh's own answer by several tenths
/// of a percent either way (the f64 Newton solution with the box as a load lumped on the
/// bottom vertices, free to contract, is 0.35% longer than the formula; the box-held face
/// is stiffer).
pub fn default_threshold(case: &str) -> f64 {
    match case {
        "soft_on_chain" => 0.02,
        _ => 0.01,
    }
}

/// rapier3d's budgets of the sweep of a case.
pub type RapierBudgets = fn(&str) -> Vec<RapierBudget>;

/// What the deformable part of a bench run does.
#[derive(Clone, Debug)]
pub struct SoftPlan {
    /// Frames of every run (the static value is the mean over the last second).
    pub frames: u32,
    /// bevy_avbd iteration budgets of the sweep (its default, 10, among them).
    pub avbd_budgets: Vec<u32>,
    /// rapier3d budgets of the sweep, per case (its defaults among them).
    pub rapier_budgets: RapierBudgets,
    /// Equal-quality threshold override (the largest relative error of the static value);
    /// `None`: [`default_threshold`] per case.
    pub threshold: Option<f64>,
    /// Keep every run's per-frame probe displacement and gap (`soft_series.csv`).
    pub series: bool,
    /// rapier's `elastic_damping_ratio` (0: undamped, as bevy_avbd's solids here).
    pub rapier_damping: f32,
}
