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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use bevy_avbd::glam::{DVec3, Quat, Vec3};
use bevy_avbd::reference::intersect::{Soup, check_soups};
use bevy_avbd::scenes::Scene;
use bevy_avbd::{BodyHandle, PhysicsWorld, SolverConfig};

use crate::rapier_soft::{
    self, ContactMeta, RapierBudget, RapierSoftScene, RapierSolver, SoftMeta,
};

/// Frames of the static average: the last second (as the scenes' metrics).
const STATIC_WINDOW: usize = 60;

/// Distance within which the contact cases' least separation is measured (m), as the
/// contact scenes' `min_separation`.
const SEPARATION_RADIUS: f64 = 0.01;

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

/// Which engine, solver and budget a run is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SoftEngine {
    Avbd { iterations: u32 },
    Rapier(RapierBudget),
}

impl SoftEngine {
    pub fn engine(&self) -> &'static str {
        match self {
            SoftEngine::Avbd { .. } => "bevy_avbd",
            SoftEngine::Rapier(_) => "rapier3d",
        }
    }
    pub fn solver(&self) -> &'static str {
        match self {
            SoftEngine::Avbd { .. } => "vbd",
            SoftEngine::Rapier(b) => b.solver.name(),
        }
    }
    /// The engine and solver: `bevy_avbd`, `rapier3d FEM`, `rapier3d constraints`.
    pub fn family(&self) -> &'static str {
        match self {
            SoftEngine::Avbd { .. } => "bevy_avbd",
            SoftEngine::Rapier(b) => match b.solver {
                RapierSolver::Fem => "rapier3d FEM",
                RapierSolver::Constraints => "rapier3d constraints",
            },
        }
    }
    pub fn budget_label(&self) -> String {
        match self {
            SoftEngine::Avbd { iterations } => format!("{iterations} it"),
            SoftEngine::Rapier(b) => b.label(),
        }
    }
    /// Iterations (bevy_avbd) or substeps (rapier3d).
    pub fn iterations(&self) -> usize {
        match self {
            SoftEngine::Avbd { iterations } => *iterations as usize,
            SoftEngine::Rapier(b) => b.substeps,
        }
    }
    /// The FEM conjugate-gradient cap (rapier3d FEM only).
    pub fn cg_cap(&self) -> Option<usize> {
        match self {
            SoftEngine::Rapier(b) if b.solver == RapierSolver::Fem => Some(b.cg_cap),
            _ => None,
        }
    }
    /// Whether this is the engine's (and solver's) default budget.
    pub fn is_default(&self) -> bool {
        match self {
            SoftEngine::Avbd { iterations } => *iterations == SolverConfig::default().iterations,
            SoftEngine::Rapier(b) => *b == RapierBudget::default_for(b.solver),
        }
    }
}

enum SoftSim {
    /// A `bevy_avbd::scenes` scene.
    Scene(Box<Scene>),
    /// A world built here (the `cube`).
    World(Box<PhysicsWorld>),
    Rapier(Box<RapierSoftScene>),
}

/// One engine at one budget stepping one case.
struct SoftRun {
    sim: SoftSim,
    engine: SoftEngine,
    /// Probe mean along its direction, per frame (m).
    samples: Vec<f64>,
    /// Largest attachment gap of the measured attachments, per frame (m).
    gaps: Vec<f32>,
    finite: bool,
    /// ms per frame.
    times: Vec<f64>,
    /// Contact cases: what the frames' exact checks found so far.
    contact: ContactResult,
}

/// What a contact case's run found, over its frames.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ContactResult {
    /// Intersections (triangle pairs plus vertices below the ground), summed over frames.
    pub intersections: usize,
    /// Frames at whose end there was at least one.
    pub intersecting_frames: usize,
    /// The least distance between non-neighbour surfaces and from the surfaces to the
    /// ground, over the frames, within [`SEPARATION_RADIUS`] (m; 0 if they intersected).
    pub min_separation: f64,
    /// The deepest any vertex went below the ground (m; 0 if none did).
    pub max_depth: f64,
    /// The height of the lowest vertex at the last frame (m).
    pub final_lowest: f64,
    /// The top body's largest horizontal drift of its centre of mass from its start (m).
    pub top_drift: Option<f64>,
}

impl Default for ContactResult {
    fn default() -> Self {
        Self {
            intersections: 0,
            intersecting_frames: 0,
            min_separation: SEPARATION_RADIUS,
            max_depth: 0.0,
            final_lowest: f64::NAN,
            top_drift: None,
        }
    }
}

/// Mass-weighted centre of `x` (f64).
fn center(x: &[Vec3], masses: &[f32]) -> DVec3 {
    let (mut sum, mut mass) = (DVec3::ZERO, 0.0);
    for (p, &m) in x.iter().zip(masses) {
        sum += p.as_dvec3() * m as f64;
        mass += m as f64;
    }
    sum / mass
}

impl SoftRun {
    fn world(&self) -> Option<&PhysicsWorld> {
        match &self.sim {
            SoftSim::Scene(sc) => Some(&sc.world),
            SoftSim::World(w) => Some(w),
            SoftSim::Rapier(_) => None,
        }
    }

    /// Positions of every vertex of deformable `k`.
    fn positions(&self, k: usize, out: &mut Vec<Vec3>) {
        out.clear();
        match (&self.sim, self.world()) {
            (SoftSim::Rapier(r), _) => r.positions(k, out),
            (_, Some(w)) => {
                let d = w
                    .deformable(w.deformable_handles()[k])
                    .expect("bench deformables are never removed");
                out.extend(d.positions().iter().map(|&x| Vec3::from(x)));
            }
            _ => unreachable!(),
        }
    }

    /// The contact measurements of a frame: the exact check of the surfaces (`surfaces[k]`:
    /// the boundary triangles of deformable `k`) and the ground, the depth below it, the
    /// top's drift.
    fn measure_contact(&mut self, meta: &SoftMeta, c: &ContactMeta, surfaces: &[Vec<[u32; 3]>]) {
        let positions: Vec<Vec<Vec3>> = (0..meta.softs.len())
            .map(|k| {
                let mut x = Vec::new();
                self.positions(k, &mut x);
                x
            })
            .collect();
        let soups: Vec<Soup> = positions
            .iter()
            .zip(surfaces)
            .map(|(x, t)| Soup {
                positions: x,
                triangles: t,
            })
            .collect();
        let planes: Vec<(DVec3, DVec3)> = c
            .planes
            .iter()
            .map(|(n, p)| (n.as_dvec3(), p.as_dvec3()))
            .collect();
        let report = check_soups(&soups, &planes, SEPARATION_RADIUS);
        let acc = &mut self.contact;
        acc.intersections += report.intersections;
        acc.intersecting_frames += (report.intersections > 0) as usize;
        acc.min_separation = acc.min_separation.min(report.min_separation);
        acc.final_lowest = f64::INFINITY;
        for x in positions.iter().flatten() {
            acc.final_lowest = acc.final_lowest.min(x.y as f64);
            for &(normal, at) in &planes {
                acc.max_depth = acc.max_depth.max(-normal.dot(x.as_dvec3() - at));
            }
        }
        if let Some(t) = c.top {
            let s = &meta.softs[t];
            let d = center(&positions[t], &s.masses) - center(&s.positions, &s.masses);
            let drift = (d.x * d.x + d.z * d.z).sqrt();
            acc.top_drift = Some(acc.top_drift.unwrap_or(0.0).max(drift));
        }
    }

    /// Positions of the vertices `vs` of deformable `k`.
    fn vertices(&self, k: usize, vs: &[u32], out: &mut Vec<Vec3>) {
        out.clear();
        match (&self.sim, self.world()) {
            (SoftSim::Rapier(r), _) => out.extend(vs.iter().map(|&v| r.vertex(k, v))),
            (_, Some(w)) => {
                let d = w
                    .deformable(w.deformable_handles()[k])
                    .expect("bench deformables are never removed");
                let x = d.positions();
                out.extend(vs.iter().map(|&v| Vec3::from(x[v as usize])));
            }
            _ => unreachable!(),
        }
    }

    fn pose(&self, i: usize) -> (Vec3, Quat) {
        match (&self.sim, self.world()) {
            (SoftSim::Rapier(r), _) => r.w.pose(i),
            (_, Some(w)) => {
                let b = w
                    .body(BodyHandle(i as u32))
                    .expect("bench bodies are never removed");
                (b.position, b.rotation)
            }
            _ => unreachable!(),
        }
    }

    fn all_finite(&self) -> bool {
        match (&self.sim, self.world()) {
            (SoftSim::Rapier(r), _) => r.finite(),
            (_, Some(w)) => {
                w.deformable_handles().iter().all(|&h| {
                    w.deformable(h)
                        .is_ok_and(|d| !d.frozen() && d.positions().iter().all(|p| p.is_finite()))
                }) && w.body_handles().iter().all(|&h| {
                    w.body(h)
                        .is_ok_and(|b| b.position.is_finite() && b.rotation.is_finite())
                })
            }
            _ => unreachable!(),
        }
    }

    fn step(
        &mut self,
        meta: &SoftMeta,
        surfaces: &[Vec<[u32; 3]>],
        scratch: &mut Vec<Vec3>,
    ) -> Result<(), String> {
        if !self.finite {
            return Ok(());
        }
        match &mut self.sim {
            SoftSim::Scene(sc) => {
                sc.step().map_err(|e| e.to_string())?;
                self.times.push(sc.world.stats().total_ms);
            }
            SoftSim::World(w) => {
                w.step().map_err(|e| e.to_string())?;
                self.times.push(w.stats().total_ms);
            }
            SoftSim::Rapier(r) => {
                let t0 = Instant::now();
                r.w.step();
                self.times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        // A run that left the finite numbers is stopped there (and fails).
        self.finite = self.all_finite();
        if !self.finite {
            return Ok(());
        }
        if let Some(c) = &meta.contact {
            self.measure_contact(meta, c, surfaces);
        }
        if let Some(p) = &meta.probe {
            self.vertices(p.soft, &p.vertices, scratch);
            let dir = p.dir.as_dvec3();
            let mean = scratch.iter().map(|x| x.as_dvec3()).sum::<DVec3>() / scratch.len() as f64;
            self.samples.push(mean.dot(dir));
        }
        if !meta.gap.is_empty() {
            let mut frame_gap = 0.0f32;
            for &a in &meta.gap {
                let a = meta.attachments[a];
                self.vertices(a.soft, &[a.vertex], scratch);
                let (pb, qb) = self.pose(a.body);
                frame_gap = frame_gap.max((scratch[0] - (pb + qb * a.anchor)).length());
            }
            self.gaps.push(frame_gap);
        }
        Ok(())
    }

    /// The static value: mean probe displacement over the last second (m).
    fn value(&self, meta: &SoftMeta) -> f64 {
        let tail = &self.samples[self.samples.len().saturating_sub(STATIC_WINDOW)..];
        match &meta.probe {
            Some(p) if !tail.is_empty() => tail.iter().sum::<f64>() / tail.len() as f64 - p.rest,
            _ => f64::NAN,
        }
    }
}

/// One run's result.
#[derive(Clone, Debug)]
pub struct SoftResult {
    pub engine: SoftEngine,
    pub frames: usize,
    pub median_ms: f64,
    pub p95_ms: f64,
    /// Static value (m) and its error relative to the reference.
    pub value: f64,
    pub error: f64,
    /// Attachment gap (m), for cases with measured attachments: the largest over the run,
    /// and the mean over the last second of each frame's largest.
    pub gap: Option<(f32, f64)>,
    pub finite: bool,
    /// Contact cases: the exact checks' findings.
    pub contact: Option<ContactResult>,
}

impl SoftResult {
    pub fn passes(&self, threshold: f64) -> bool {
        self.finite && self.error < threshold
    }
}

/// The reference value of a case and where it comes from.
#[derive(Clone, Debug)]
pub struct Reference {
    pub value: f64,
    pub source: String,
    /// Seconds its computation took (the Newton solve; 0 for analytic values).
    pub seconds: f64,
}

/// One case's results.
pub struct SoftCaseResult {
    pub case: String,
    pub params: String,
    pub tets: usize,
    pub vertices: usize,
    pub deformables: usize,
    pub rigid_bodies: usize,
    pub joints: usize,
    /// The static value's reference (`None`: a contact case).
    pub reference: Option<Reference>,
    pub threshold: f64,
    pub results: Vec<SoftResult>,
    /// Per run (as `results`), per frame: probe displacement and gap (m), with
    /// [`SoftPlan::series`].
    pub series: Vec<Vec<(f64, Option<f32>)>>,
}

impl SoftCaseResult {
    /// The reference of a static case.
    pub fn static_reference(&self) -> &Reference {
        self.reference
            .as_ref()
            .expect("a static case has a reference")
    }
    /// The cheapest passing run (median ms) of an engine family.
    pub fn cheapest(&self, family: &str) -> Option<&SoftResult> {
        self.results
            .iter()
            .filter(|r| r.engine.family() == family && r.passes(self.threshold))
            .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
    }
    /// The most accurate run of a family (smallest error among finite runs).
    pub fn best(&self, family: &str) -> Option<&SoftResult> {
        self.results
            .iter()
            .filter(|r| r.engine.family() == family && r.finite)
            .min_by(|a, b| a.error.total_cmp(&b.error))
    }
}

const FAMILIES: [&str; 3] = ["bevy_avbd", "rapier3d FEM", "rapier3d constraints"];

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The scene's (or the cube's) parameters: defaults with `overrides` on top.
pub fn resolve(case: &str, overrides: &[(String, f64)]) -> Result<BTreeMap<String, f64>, String> {
    let mut p: BTreeMap<String, f64> = match bevy_avbd::scenes::spec(case) {
        Some(spec) => spec
            .params
            .iter()
            .map(|p| (p.name.to_string(), p.default))
            .collect(),
        None if case == "cube" => rapier_soft::CUBE_PARAMS
            .iter()
            .map(|(k, v, _)| (k.to_string(), *v))
            .collect(),
        None => return Err(format!("`{case}` is not a deformable bench case")),
    };
    for (k, v) in overrides {
        if !p.contains_key(k) {
            return Err(format!("{case} has no parameter `{k}`"));
        }
        p.insert(k.clone(), *v);
    }
    Ok(p)
}

/// Whether case `case` has a parameter `name`.
pub fn has_param(case: &str, name: &str) -> bool {
    match bevy_avbd::scenes::spec(case) {
        Some(spec) => spec.params.iter().any(|p| p.name == name),
        None => case == "cube" && rapier_soft::CUBE_PARAMS.iter().any(|p| p.0 == name),
    }
}

fn config(iterations: u32) -> SolverConfig {
    SolverConfig {
        iterations,
        dt: 1.0 / 60.0,
        gravity: Vec3::new(0.0, -9.81, 0.0),
        ..SolverConfig::default()
    }
}

/// bevy_avbd's run of a case at `iterations`.
fn build_avbd(
    case: &str,
    overrides: &[(String, f64)],
    meta: &SoftMeta,
    iterations: u32,
) -> Result<SoftSim, String> {
    if case == "cube" {
        Ok(SoftSim::World(Box::new(rapier_soft::avbd_world(
            meta,
            config(iterations),
        )?)))
    } else {
        let sc = Scene::build(case, overrides, config(iterations)).map_err(|e| e.to_string())?;
        Ok(SoftSim::Scene(Box::new(sc)))
    }
}

/// The reference of a case: from the scene's metrics (Newton or analytic), or the cube's
/// own Newton solve.
fn reference(case: &str, sim: &SoftSim, meta: &SoftMeta) -> Result<Reference, String> {
    let t0 = Instant::now();
    let (key, source) = match case {
        "cantilever" => (
            "newton_tip_deflection",
            "f64 Newton (`newton_tip_deflection`)",
        ),
        "hanging_bar" => ("newton_elongation", "f64 Newton (`newton_elongation`)"),
        "soft_on_chain" => (
            "analytic_rod_elongation",
            "F L/(E A) + ρ g L²/(2E) (`analytic_rod_elongation`)",
        ),
        "cube" => {
            let s = &meta.softs[0];
            let problem = bevy_avbd::reference::NewtonProblem::statics(
                &s.mesh,
                &s.material,
                (s.place, Quat::IDENTITY),
                &s.pinned,
                config(1).gravity,
            )
            .map_err(|e| e.to_string())?;
            let sol = problem.solve_static().map_err(|e| e.to_string())?;
            let p = meta.probe.as_ref().ok_or("the cube has a probe")?;
            let dir = p.dir.as_dvec3();
            let moved: f64 = p
                .vertices
                .iter()
                .map(|&v| (sol.x[v as usize] - problem.rest[v as usize]).dot(dir))
                .sum();
            return Ok(Reference {
                value: moved / p.vertices.len() as f64,
                source: format!(
                    "f64 Newton of the same mesh ({} iterations, residual {:.1e} N)",
                    sol.iterations, sol.residual
                ),
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
        other => return Err(format!("`{other}` is not a deformable bench case")),
    };
    let SoftSim::Scene(sc) = sim else {
        unreachable!("scene cases run a Scene")
    };
    let value = sc
        .metrics()
        .get(key)
        .and_then(|v| v.as_f64())
        .ok_or_else(|| format!("{case}: the scene reports no {key}"))?;
    Ok(Reference {
        value,
        source: source.into(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The scene's own metric of the static value, to check the harness measures the same.
fn scene_metric(case: &str) -> Option<&'static str> {
    match case {
        "cantilever" => Some("tip_deflection"),
        "hanging_bar" => Some("elongation"),
        "soft_on_chain" => Some("rod_elongation"),
        _ => None,
    }
}

/// Checks a contact case's measurements of bevy_avbd's run against the scene's metrics:
/// the intersections (`reference::intersect::check` every frame) and the least separation
/// exactly, the deepest
/// vertex below the ground (`max_penetration`, f32) and the top's drift (`top_drift`, f32,
/// from the placement) within f32 rounding.
fn check_contact_metrics(case: &str, sc: &Scene, c: &ContactResult) -> Result<(), String> {
    let m = sc.metrics();
    let get = |k: &str| m.get(k).and_then(|v| v.as_f64());
    let mut bad = Vec::new();
    if get("intersections") != Some(c.intersections as f64) {
        bad.push(format!(
            "intersections {} vs {:?}",
            c.intersections,
            get("intersections")
        ));
    }
    if get("min_separation") != Some(c.min_separation) {
        bad.push(format!(
            "min separation {} vs {:?}",
            c.min_separation,
            get("min_separation")
        ));
    }
    if !get("max_penetration").is_some_and(|v| (v - c.max_depth).abs() <= 1e-6) {
        bad.push(format!(
            "depth {} vs max_penetration {:?}",
            c.max_depth,
            get("max_penetration")
        ));
    }
    if let Some(d) = c.top_drift
        && !get("top_drift").is_some_and(|v| (v - d).abs() <= 1e-5)
    {
        bad.push(format!("top drift {d} vs {:?}", get("top_drift")));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{case}: the harness measured bevy_avbd's run differently from the scene: {}",
            bad.join("; ")
        ))
    }
}

/// Runs one deformable case: every budget of both engines, round-robin (a contact case:
/// each engine's default budget only).
pub fn run_case(
    case: &str,
    overrides: &[(String, f64)],
    plan: &SoftPlan,
) -> Result<SoftCaseResult, String> {
    let params = resolve(case, overrides)?;
    let meta = rapier_soft::describe(case, &params)?;
    let mut engines: Vec<SoftEngine> = Vec::new();
    let (avbd, rapier): (Vec<u32>, Vec<RapierBudget>) = if meta.contact.is_some() {
        // Each engine at its defaults; and rapier's solvers again with the contact skin at
        // bevy_avbd's contact gap (1 mm), where its default skin (1 cm) keeps the surfaces
        // apart by more than these scenes press them.
        let with_gap = |solver| RapierBudget {
            skin: Some(SolverConfig::default().contact_gap),
            ..RapierBudget::default_for(solver)
        };
        (
            vec![SolverConfig::default().iterations],
            vec![
                RapierBudget::default_for(RapierSolver::Fem),
                RapierBudget::default_for(RapierSolver::Constraints),
                with_gap(RapierSolver::Fem),
                with_gap(RapierSolver::Constraints),
            ],
        )
    } else {
        (plan.avbd_budgets.clone(), (plan.rapier_budgets)(case))
    };
    // Alternate the engines in the round-robin order.
    let n = avbd.len().max(rapier.len());
    for k in 0..n {
        if let Some(&it) = avbd.get(k) {
            engines.push(SoftEngine::Avbd { iterations: it });
        }
        if let Some(&b) = rapier.get(k) {
            engines.push(SoftEngine::Rapier(b));
        }
    }
    // bevy_avbd's world at build, which every rapier build is checked against, and the
    // reference.
    let check = build_avbd(case, overrides, &meta, 1)?;
    let check_world = match &check {
        SoftSim::Scene(sc) => &sc.world,
        SoftSim::World(w) => w,
        SoftSim::Rapier(_) => unreachable!(),
    };
    let reference = match meta.probe {
        Some(_) => {
            eprint!("  {case}: reference … ");
            let r = reference(case, &check, &meta)?;
            eprintln!("{:.6e} m ({:.1} s)", r.value, r.seconds);
            Some(r)
        }
        None => None,
    };
    // The boundary triangles of each deformable (rapier's are checked to be the same).
    let surfaces: Vec<Vec<[u32; 3]>> = check_world
        .deformable_handles()
        .iter()
        .map(|&h| {
            check_world
                .deformable(h)
                .map(|d| d.surface_triangles().collect())
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let mut runs = Vec::with_capacity(engines.len());
    for &engine in &engines {
        let sim = match engine {
            SoftEngine::Avbd { iterations } => build_avbd(case, overrides, &meta, iterations)?,
            SoftEngine::Rapier(b) => {
                let r = rapier_soft::build(&meta, b, plan.rapier_damping);
                rapier_soft::check_identical(check_world, &meta, &r)
                    .map_err(|e| format!("{case}: engines differ: {e}"))?;
                SoftSim::Rapier(Box::new(r))
            }
        };
        runs.push(SoftRun {
            sim,
            engine,
            samples: Vec::new(),
            gaps: Vec::new(),
            finite: true,
            times: Vec::new(),
            contact: ContactResult::default(),
        });
    }
    drop(check);
    let t0 = Instant::now();
    let mut scratch = Vec::new();
    for f in 0..plan.frames {
        for r in runs.iter_mut() {
            r.step(&meta, &surfaces, &mut scratch)?;
        }
        if (f + 1) % 30 == 0 || f + 1 == plan.frames {
            eprint!(
                "\r  {case:<14} {} runs, frame {:>4}/{}  ({:.0} s)",
                runs.len(),
                f + 1,
                plan.frames,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!();
    let results: Vec<SoftResult> = runs
        .iter()
        .map(|r| {
            let mut t = r.times.clone();
            t.sort_by(f64::total_cmp);
            let value = r.value(&meta);
            SoftResult {
                engine: r.engine,
                frames: r.times.len(),
                median_ms: percentile(&t, 0.5),
                p95_ms: percentile(&t, 0.95),
                value,
                error: match &reference {
                    Some(re) if r.finite && !r.samples.is_empty() => {
                        ((value - re.value) / re.value).abs()
                    }
                    _ => f64::INFINITY,
                },
                gap: (!meta.gap.is_empty()).then(|| {
                    let max = r.gaps.iter().copied().fold(0.0f32, f32::max);
                    let tail = &r.gaps[r.gaps.len().saturating_sub(STATIC_WINDOW)..];
                    let settled =
                        tail.iter().map(|&g| g as f64).sum::<f64>() / tail.len().max(1) as f64;
                    (max, settled)
                }),
                finite: r.finite,
                contact: meta.contact.as_ref().map(|_| r.contact),
            }
        })
        .collect();
    // The harness's static value is the scene's own metric (same probe, same window).
    if let Some(key) = scene_metric(case) {
        for (r, res) in runs.iter().zip(&results) {
            if let SoftSim::Scene(sc) = &r.sim
                && res.finite
            {
                let m = sc.metrics().get(key).and_then(|v| v.as_f64());
                // The scene sums in f32 near y = 1–4 m (an ulp is 2–5e-7 m).
                let ok = m.is_some_and(|m| (m - res.value).abs() <= 1e-6);
                if !ok {
                    return Err(format!(
                        "{case}: the harness measured {} m where the scene's {key} is {m:?}",
                        res.value
                    ));
                }
            }
        }
    }
    // The contact measurements are the scene's own (same exact test, same depth, same drift).
    if meta.contact.is_some() {
        for (r, res) in runs.iter().zip(&results) {
            if let (SoftSim::Scene(sc), Some(c)) = (&r.sim, res.contact)
                && res.finite
            {
                check_contact_metrics(case, sc, &c)?;
            }
        }
    }
    let soft0 = &meta.softs;
    Ok(SoftCaseResult {
        case: case.to_string(),
        params: params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        tets: soft0.iter().map(|s| s.mesh.tets.len()).sum(),
        vertices: soft0.iter().map(|s| s.positions.len()).sum(),
        deformables: soft0.len(),
        rigid_bodies: meta.rigid.shapes.len(),
        joints: meta.rigid.joints.len(),
        reference,
        threshold: plan.threshold.unwrap_or_else(|| default_threshold(case)),
        results,
        series: if plan.series {
            runs.iter()
                .map(|r| {
                    r.samples
                        .iter()
                        .enumerate()
                        .map(|(f, x)| {
                            let rest = meta.probe.as_ref().map_or(0.0, |p| p.rest);
                            (x - rest, r.gaps.get(f).copied())
                        })
                        .collect()
                })
                .collect()
        } else {
            Vec::new()
        },
    })
}

fn pct(e: f64) -> String {
    if e.is_finite() {
        format!("{:.2}%", 100.0 * e)
    } else {
        "–".into()
    }
}

fn mm(v: f64) -> String {
    if v.is_finite() {
        format!("{:.4} mm", 1e3 * v)
    } else {
        "not finite".into()
    }
}

fn gap_cell(g: Option<(f32, f64)>) -> String {
    match g {
        Some((max, settled)) => format!("{} / {}", mm(max as f64), mm(settled)),
        None => "–".into(),
    }
}

fn seconds(frames: u32) -> String {
    let s = format!("{:.2}", frames as f64 / 60.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The Markdown section of the deformable cases.
pub fn markdown(
    cases: &[SoftCaseResult],
    plan: &SoftPlan,
    machine: &str,
    threads: usize,
) -> String {
    let mut s = String::new();
    if cases.is_empty() {
        return s;
    }
    let contacts: Vec<&SoftCaseResult> = cases.iter().filter(|c| c.reference.is_none()).collect();
    let cases: Vec<&SoftCaseResult> = cases.iter().filter(|c| c.reference.is_some()).collect();
    if !cases.is_empty() {
        static_markdown(&mut s, &cases, plan, machine, threads);
    }
    if !contacts.is_empty() {
        contact_markdown(&mut s, &contacts, plan, machine, threads);
    }
    s
}

/// The contact cases' section: each engine at its default budget.
fn contact_markdown(
    s: &mut String,
    cases: &[&SoftCaseResult],
    plan: &SoftPlan,
    machine: &str,
    threads: usize,
) {
    let fem = RapierBudget::default_for(RapierSolver::Fem);
    let _ = writeln!(s, "\n### Contact against rapier3d's soft bodies\n");
    let _ = writeln!(
        s,
        "Machine: {machine}; {threads} rayon threads. dt = 1/60 s, gravity (0, -9.81, 0), {} \
         frames ({} s) per run. The scenes' meshes (`TetMesh::box_grid`, six tets per cell), \
         placements, rubber (ν 0.3, ρ 1000, friction 0.5) and ground (a half-space at y = 0, \
         friction 0.5) in both engines (checked vertex for vertex, boundary triangle for \
         boundary triangle); Stable Neo-Hookean in both (rapier `elastic_damping_ratio` {}). \
         Each engine at its default budget and contact settings: bevy_avbd {} iterations, \
         penetration-free contact (gap {} m); rapier3d {} (FEM) and {} (constraints), its \
         default surface collider (contact skin = `particle_radius` 0.01 m), \
         `max_extra_substeps` {}; the rows `skin 1 mm` run rapier's two solvers again with \
         `particle_radius` at bevy_avbd's contact gap (not rapier's default). After every frame, for both engines, the same exact test \
         (`reference::intersect::check_soups`): pairs of boundary triangles of \
         different bodies or non-neighbours of one body that share a point (Shewchuk's \
         predicates on the f32 positions, touching counts), plus surface vertices strictly \
         below the ground; summed over the frames. Least separation: the closest two \
         non-neighbour surfaces, or a surface and the ground, came over the run (measured \
         within {} mm: {} mm means never closer). Deepest: the lowest any vertex went below \
         y = 0. Lowest at the end: the lowest vertex's height at the last frame. Drift: the \
         top cube's largest horizontal displacement of its centre of mass. ms/frame: median \
         and p95 of the step, all runs round-robin.\n",
        plan.frames,
        seconds(plan.frames),
        plan.rapier_damping,
        SolverConfig::default().iterations,
        SolverConfig::default().contact_gap,
        fem.label(),
        RapierBudget::default_for(RapierSolver::Constraints).label(),
        rapier3d::prelude::IntegrationParameters::default()
            .soft_bodies
            .max_extra_substeps,
        1e3 * SEPARATION_RADIUS,
        1e3 * SEPARATION_RADIUS,
    );
    let _ = writeln!(
        s,
        "| case | tets | engine | solver | budget | median ms | p95 ms | intersections (Σ frames) | frames with any | least separation | deepest below ground | lowest at the end | top drift | finite |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for c in cases {
        for r in &c.results {
            let Some(k) = r.contact else { continue };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} / {} | {} | {} | {} | {} | {} |",
                c.case,
                c.tets,
                r.engine.engine(),
                r.engine.solver(),
                r.engine.budget_label(),
                r.median_ms,
                r.p95_ms,
                k.intersections,
                k.intersecting_frames,
                r.frames,
                mm(k.min_separation),
                mm(k.max_depth),
                mm(k.final_lowest),
                k.top_drift.map(mm).unwrap_or_else(|| "–".into()),
                if r.finite {
                    "✓".to_string()
                } else {
                    format!("✗ from frame {}", r.frames)
                }
            );
        }
    }
    let _ = writeln!(s, "\nCases:\n");
    for c in cases {
        let _ = writeln!(
            s,
            "- {} ({}; {} bodies, {} vertices, {} tets)",
            c.case, c.params, c.deformables, c.vertices, c.tets
        );
    }
}

/// The static cases' section: references, default budgets, equal quality, the sweep.
fn static_markdown(
    s: &mut String,
    cases: &[&SoftCaseResult],
    plan: &SoftPlan,
    machine: &str,
    threads: usize,
) {
    let fem = RapierBudget::default_for(RapierSolver::Fem);
    let _ = writeln!(
        s,
        "\n### Deformable bodies: bevy_avbd (vertex block descent) vs rapier3d 0.36 soft bodies\n"
    );
    let _ = writeln!(
        s,
        "Machine: {machine}; {threads} rayon threads. dt = 1/60 s, gravity (0, -9.81, 0), {} \
         frames ({} s) per run. The same tet meshes (bevy_avbd's `TetMesh::box_grid`, six \
         tets per cell), lumped masses ρV/4, pinned vertices, attachments and rigid bodies in \
         both engines (checked vertex for vertex and body for body); Stable Neo-Hookean \
         without the log term in both (rapier: `SoftBodyCellModel::NeoHookean`, \
         `elastic_damping_ratio` {}); no soft contacts. bevy_avbd: `iterations` (default \
         {}). rapier3d: `SoftBodySolver::Fem` (the `fem` feature: one linearised \
         implicit-Euler solve per substep) with `num_solver_iterations` substeps and the CG \
         cap `soft_bodies.fem.max_linear_iterations` (defaults {} and {}), and its default \
         `SoftBodySolver::Constraints` with substeps; `max_extra_substeps` 0. All runs of a \
         case (every budget of both engines) step round-robin, one frame each, engines \
         alternating; ms/frame: median and p95 of the step over the whole run. Static \
         value: mean displacement (down) of the probe vertices over the last second; error: \
         relative to the reference. Attachment gap (rod under the box): largest distance \
         of an attached vertex from its anchor on the box, max over the run / mean over the \
         last second.\n",
        plan.frames,
        seconds(plan.frames),
        plan.rapier_damping,
        SolverConfig::default().iterations,
        fem.substeps,
        fem.cg_cap,
    );
    let _ = writeln!(s, "Default budgets:\n");
    let _ = writeln!(
        s,
        "| case | tets | reference | engine | solver | budget | median ms | p95 ms | static value | error | attachment gap max / settled | within threshold |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in cases {
        for r in c.results.iter().filter(|r| r.engine.is_default()) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} |",
                c.case,
                c.tets,
                mm(c.static_reference().value),
                r.engine.engine(),
                r.engine.solver(),
                r.engine.budget_label(),
                r.median_ms,
                r.p95_ms,
                mm(r.value),
                pct(r.error),
                gap_cell(r.gap),
                if !r.finite {
                    format!("✗ not finite at frame {}", r.frames)
                } else if r.passes(c.threshold) {
                    format!("✓ (< {})", pct(c.threshold))
                } else {
                    format!("✗ (≥ {})", pct(c.threshold))
                }
            );
        }
    }
    let _ = writeln!(s, "\nCases and references:\n");
    for c in cases {
        let _ = writeln!(
            s,
            "- {} ({}; {} vertices, {} tets{}): {} = {}{}",
            c.case,
            c.params,
            c.vertices,
            c.tets,
            if c.rigid_bodies > 0 {
                format!(
                    " in {} bodies, {} rigid bodies, {} joints",
                    c.deformables, c.rigid_bodies, c.joints
                )
            } else {
                String::new()
            },
            c.static_reference().source,
            mm(c.static_reference().value),
            if c.static_reference().seconds > 0.05 {
                format!(" (solved in {:.1} s)", c.static_reference().seconds)
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(
        s,
        "\n#### Equal quality\n\nThe cheapest budget (median ms/frame) of each engine and \
         solver whose static value is within the threshold of the reference; where none \
         is, its most accurate run. These are the sweep's runs, all stepped side by side, \
         so their timings compare.\n"
    );
    let _ = writeln!(
        s,
        "| case | threshold | bevy_avbd | rapier3d FEM | rapier3d constraints | ratio bevy_avbd / best rapier3d |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for c in cases {
        let cell = |fam: &str| match c.cheapest(fam) {
            Some(r) => format!(
                "{}: {:.3} ms ({})",
                r.engine.budget_label(),
                r.median_ms,
                pct(r.error)
            ),
            None => match c.best(fam) {
                Some(b) => format!(
                    "never (best {} at {}, {:.3} ms)",
                    pct(b.error),
                    b.engine.budget_label(),
                    b.median_ms
                ),
                None => "never (no finite run)".into(),
            },
        };
        let ours = c.cheapest("bevy_avbd").map(|r| r.median_ms);
        let theirs = ["rapier3d FEM", "rapier3d constraints"]
            .iter()
            .filter_map(|f| c.cheapest(f).map(|r| r.median_ms))
            .min_by(f64::total_cmp);
        let ratio = match (ours, theirs) {
            (Some(a), Some(r)) => format!("{:.2}", a / r),
            (Some(_), None) => "– (rapier3d never reaches it)".into(),
            (None, Some(_)) => "– (bevy_avbd never reaches it)".into(),
            (None, None) => "– (neither reaches it)".into(),
        };
        let _ = writeln!(
            s,
            "| {} | error < {} | {} | {} | {} | {} |",
            c.case,
            pct(c.threshold),
            cell(FAMILIES[0]),
            cell(FAMILIES[1]),
            cell(FAMILIES[2]),
            ratio
        );
    }
    let _ = writeln!(
        s,
        "\nSweep (budget: error, median ms{}; ✗: not finite from that frame on):\n",
        if cases
            .iter()
            .any(|c| c.results.iter().any(|r| r.gap.is_some()))
        {
            "; attachment gap max / settled where measured"
        } else {
            ""
        }
    );
    for c in cases {
        for fam in FAMILIES {
            let list: Vec<String> = c
                .results
                .iter()
                .filter(|r| r.engine.family() == fam)
                .map(|r| {
                    let mut t = format!(
                        "{}: {}, {:.3} ms",
                        r.engine.budget_label(),
                        if r.finite {
                            pct(r.error)
                        } else {
                            format!("✗ at frame {}", r.frames)
                        },
                        r.median_ms
                    );
                    if r.gap.is_some() {
                        let _ = write!(t, ", gap {}", gap_cell(r.gap));
                    }
                    t
                })
                .collect();
            if !list.is_empty() {
                let _ = writeln!(s, "- {} {}: {}", c.case, fam, list.join("; "));
            }
        }
    }
}

/// Every run of every case (`soft.csv`). The static cases fill the reference and error
/// columns, the contact cases the last six (intersections summed over frames, frames with
/// any, least separation within 1 cm, deepest vertex below the ground, lowest vertex at the
/// end, the top's largest horizontal drift).
pub fn csv(cases: &[SoftCaseResult], threads: usize) -> String {
    let mut s = String::from(
        "scene,params,engine,solver,iterations,cg_cap,default_budget,threads,frames,\
         median_ms,p95_ms,tets,vertices,reference_m,value_m,rel_error,threshold,passed,\
         max_attachment_gap_m,settled_attachment_gap_m,finite,intersections,\
         intersecting_frames,min_separation_m,max_depth_below_ground_m,final_lowest_m,\
         top_drift_m\n",
    );
    for c in cases {
        for r in &c.results {
            let (gmax, gset) = match r.gap {
                Some((m, st)) => (format!("{m:e}"), format!("{st:e}")),
                None => (String::new(), String::new()),
            };
            let quality = match &c.reference {
                Some(re) => format!(
                    "{:e},{:e},{:e},{},{}",
                    re.value,
                    r.value,
                    r.error,
                    c.threshold,
                    r.passes(c.threshold)
                ),
                None => ",,,,".into(),
            };
            let contact = match r.contact {
                Some(k) => format!(
                    "{},{},{:e},{:e},{:e},{}",
                    k.intersections,
                    k.intersecting_frames,
                    k.min_separation,
                    k.max_depth,
                    k.final_lowest,
                    k.top_drift.map(|d| format!("{d:e}")).unwrap_or_default()
                ),
                None => ",,,,,".into(),
            };
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{},{},{},{},{},{},{}",
                c.case,
                c.params,
                r.engine.engine(),
                r.engine.solver(),
                r.engine.iterations(),
                r.engine.cg_cap().map(|c| c.to_string()).unwrap_or_default(),
                r.engine.is_default(),
                threads,
                r.frames,
                r.median_ms,
                r.p95_ms,
                c.tets,
                c.vertices,
                quality,
                gmax,
                gset,
                r.finite,
                contact
            );
        }
    }
    s
}

/// Every run's probe displacement and gap per frame (`soft_series.csv`, `--soft-series`).
pub fn series_csv(cases: &[SoftCaseResult]) -> String {
    let mut s = String::from("scene,engine,solver,iterations,cg_cap,frame,displacement_m,gap_m\n");
    for c in cases {
        for (r, series) in c.results.iter().zip(&c.series) {
            let cg = r.engine.cg_cap().map(|c| c.to_string()).unwrap_or_default();
            for (f, (x, g)) in series.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{:e},{}",
                    c.case,
                    r.engine.engine(),
                    r.engine.solver(),
                    r.engine.iterations(),
                    cg,
                    f + 1,
                    x,
                    g.map(|g| format!("{g:e}")).unwrap_or_default()
                );
            }
        }
    }
    s
}
