//! `avbd bench`: frame-budget benchmark of bevy_avbd against rapier3d 0.36.
//!
//! Each case builds the same scene in both engines (checked body for body by
//! [`rapier_scenes::check_identical`]) and steps them alternately, one frame each, in this
//! process. Timings are per `step()` (bevy_avbd: `StepStats::total_ms`, measured inside the
//! step; rapier: wall time of `PhysicsPipeline::step`). Quality metrics are computed by this
//! module for both engines from their body poses, with the same code:
//!
//! - `max_drift`: largest displacement of a tracked body from its start position (pyramids,
//!   pile: every dynamic body but the projectile, until it is launched);
//! - `max_stretch_ratio`: summed anchor gaps of the pendulum chain over its rest length;
//! - `max_joint_error`: largest anchor gap of any joint;
//! - `max_penetration`: deepest point of fresh parry3d contact manifolds (zero prediction)
//!   over the pairs the engine's narrow phase holds, at the end of each frame.
//!
//! All are maxima over every frame run (settling and window).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::scenes::Scene;
use bevy_avbd::{BodyHandle, SolverConfig};
use rapier3d::parry::math::Pose;
use rapier3d::parry::query::{ContactManifold, DefaultQueryDispatcher, PersistentQueryDispatcher};

use crate::plot;
use crate::rapier_scenes::{self, Meta, RapierScene};
use crate::rapier_soft::{RapierBudget, RapierSolver, SOFT_CASES};
use crate::soft_bench::{self, RapierBudgets, SoftPlan};

/// Options of `avbd bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Small scenes and few frames (finishes in a few minutes on 2 cores).
    #[arg(long)]
    pub quick: bool,
    /// Tiny scenes and a handful of frames: a smoke test of the harness (used by the tests).
    #[arg(long, hide = true)]
    pub tiny: bool,
    /// Scene to run (repeatable): large_pyramid, many_pyramids, joint_grid, pendulum, pile,
    /// scaling (large_pyramid at several sizes), the deformable cases cantilever,
    /// hanging_bar, soft_on_chain, cube (against rapier3d's soft bodies), and the deformable
    /// contact cases soft_drop, soft_stack (against rapier3d's soft bodies, intersections
    /// counted exactly). Default: all.
    #[arg(long = "scene")]
    pub scenes: Vec<String>,
    /// Worker threads of the rayon pool both engines run in (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Directory for results.csv, sweep.csv and plot.png (default: bench, or bench/quick
    /// with --quick).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Scene parameter override, `key=value` (repeatable): applies to every selected scene
    /// that has the parameter (see `avbd list`), replacing the mode's size.
    #[arg(long = "set", value_parser = crate::parse_kv)]
    pub set: Vec<(String, f64)>,
    /// Largest iteration budget the sweep tries (default: 64, 32 with --quick).
    #[arg(long)]
    pub max_budget: Option<usize>,
    /// Equal-quality threshold override, `metric=value` (repeatable): max_drift (m, default
    /// 0.05), max_stretch_ratio (0.01), max_joint_error (m, 0.01), static_error (relative
    /// error of the deformable cases' static value: 0.01 against a Newton reference, 0.02
    /// for soft_on_chain's analytic one; the override applies to every case).
    #[arg(long = "threshold", value_parser = crate::parse_kv)]
    pub thresholds: Vec<(String, f64)>,
    /// Skip the equal-quality sweep.
    #[arg(long)]
    pub no_sweep: bool,
    /// Let rapier bodies sleep (rapier's default; off so that both engines simulate every
    /// body every frame).
    #[arg(long)]
    pub rapier_sleep: bool,
    /// `elastic_damping_ratio` of rapier's soft bodies in the deformable cases (rapier's
    /// default is 1, critical damping per cell; 0, the default here, matches bevy_avbd's
    /// undamped solids).
    #[arg(long, default_value_t = 0.0)]
    pub rapier_soft_damping: f32,
    /// Also write soft_series.csv: every deformable run's probe displacement (and
    /// attachment gap) per frame.
    #[arg(long)]
    pub soft_series: bool,
    /// Solver backend. `cpu` (default): the comparison with rapier above. `gpu` (error
    /// without an adapter) or `auto` (GPU, else CPU): the GPU scaling series instead, no
    /// rapier: `pile` (`--pile-counts`) and `large_pyramid` (`--pyramid-bases`), solver and
    /// total ms per frame, per-kernel GPU times, GPU memory, adapter; writes gpu.csv.
    #[arg(long, value_enum, default_value_t = crate::BackendArg::Cpu)]
    pub backend: crate::BackendArg,
    /// GPU series: pile sizes (`count`), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1000.0, 10000.0, 110000.0])]
    pub pile_counts: Vec<f64>,
    /// GPU series: large_pyramid bases, comma-separated (base 469 = 110,215 boxes).
    #[arg(long, value_delimiter = ',', default_values_t = [45.0, 141.0, 469.0])]
    pub pyramid_bases: Vec<f64>,
    /// GPU series: untimed frames before the timed ones.
    #[arg(long, default_value_t = 1)]
    pub gpu_settle: u32,
    /// GPU series: timed frames per size.
    #[arg(long, default_value_t = 3)]
    pub gpu_frames: u32,
    /// GPU series: iteration budget.
    #[arg(long, default_value_t = 10)]
    pub gpu_iterations: u32,
    /// GPU series: milliseconds of the caller's own work (a sleep) between `begin_step` and
    /// `finish_step` of each timed frame, overlapping the step in flight on the device.
    #[arg(long, default_value_t = 0.0)]
    pub gpu_overlap_ms: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Full,
    Quick,
    Tiny,
}

const ALL_SCENES: &[&str] = &[
    "large_pyramid",
    "many_pyramids",
    "joint_grid",
    "pendulum",
    "pile",
    "scaling",
    "cantilever",
    "hanging_bar",
    "soft_on_chain",
    "cube",
    "soft_drop",
    "soft_stack",
];

const DEFAULT_THRESHOLDS: [f32; 3] = [0.05, 0.01, 0.01];

/// Iteration budgets the sweep tries, in order, for both engines.
const BUDGETS: &[usize] = &[1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64];

struct Plan {
    /// Frames run before the timing window, and the window.
    settle: u32,
    window: u32,
    /// Frames of one sweep run ("over 10 s" at full size).
    sweep_frames: u32,
    max_budget: usize,
    /// Equal-quality thresholds: drift, stretch, joint error.
    thresholds: [f32; 3],
}

impl Plan {
    fn threshold(&self, m: Metric) -> f32 {
        self.thresholds[m as usize]
    }
}

impl Mode {
    fn plan(self) -> Plan {
        match self {
            Mode::Full => Plan {
                settle: 60,
                window: 120,
                sweep_frames: 600,
                max_budget: 64,
                thresholds: DEFAULT_THRESHOLDS,
            },
            Mode::Quick => Plan {
                settle: 60,
                window: 120,
                sweep_frames: 600,
                max_budget: 32,
                thresholds: DEFAULT_THRESHOLDS,
            },
            Mode::Tiny => Plan {
                settle: 5,
                window: 15,
                sweep_frames: 30,
                max_budget: 4,
                thresholds: DEFAULT_THRESHOLDS,
            },
        }
    }

    /// Scene parameters of a benchmark scene at this mode's size.
    fn params(self, scene: &str) -> Vec<(String, f64)> {
        let kv = |v: &[(&str, f64)]| v.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        match (scene, self) {
            ("large_pyramid", Mode::Full) => kv(&[("base", 100.0)]),
            ("large_pyramid", Mode::Quick) => kv(&[("base", 20.0)]),
            ("large_pyramid", Mode::Tiny) => kv(&[("base", 4.0)]),
            ("many_pyramids", Mode::Full) => kv(&[("count", 10.0), ("base", 10.0)]),
            ("many_pyramids", Mode::Quick) => kv(&[("count", 4.0), ("base", 6.0)]),
            ("many_pyramids", Mode::Tiny) => kv(&[("count", 2.0), ("base", 3.0)]),
            ("joint_grid", Mode::Full) => kv(&[("rows", 100.0), ("cols", 100.0)]),
            ("joint_grid", Mode::Quick) => kv(&[("rows", 20.0), ("cols", 20.0)]),
            ("joint_grid", Mode::Tiny) => kv(&[("rows", 4.0), ("cols", 4.0)]),
            ("pendulum", Mode::Tiny) => kv(&[("links", 10.0), ("mass_ratio", 50_000.0)]),
            ("pendulum", _) => kv(&[("links", 50.0), ("mass_ratio", 50_000.0)]),
            ("pile", Mode::Full) => kv(&[("count", 500.0)]),
            ("pile", Mode::Quick) => kv(&[("count", 200.0)]),
            ("pile", Mode::Tiny) => kv(&[("count", 20.0)]),
            _ => Vec::new(),
        }
    }

    /// Parameters of a deformable case at this mode's size (the scenes' defaults otherwise).
    fn soft_params(self, case: &str) -> Vec<(String, f64)> {
        let kv = |v: &[(&str, f64)]| v.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        match (case, self) {
            ("cube", Mode::Full) => kv(&[("cells", 12.0)]),
            ("cube", Mode::Quick) => kv(&[("cells", 6.0)]),
            ("cube", Mode::Tiny) => kv(&[("cells", 2.0)]),
            ("cantilever", Mode::Tiny) => kv(&[("cells", 4.0)]),
            ("hanging_bar", Mode::Tiny) => kv(&[("cells", 4.0)]),
            // Contact within the tiny run's 20 frames.
            ("soft_drop", Mode::Tiny) => kv(&[("cells", 2.0), ("height", 0.02)]),
            ("soft_stack", Mode::Tiny) => kv(&[("cells", 2.0)]),
            _ => Vec::new(),
        }
    }

    /// The deformable cases' runs: frames, budgets, threshold.
    fn soft_plan(self) -> SoftPlan {
        let (frames, avbd_budgets, rapier_budgets): (u32, Vec<u32>, RapierBudgets) = match self {
            Mode::Full => (300, vec![1, 2, 3, 5, 10, 20], full_rapier_budgets),
            Mode::Quick => (300, vec![1, 3, 10], quick_rapier_budgets),
            Mode::Tiny => (20, vec![2, 10], tiny_rapier_budgets),
        };
        SoftPlan {
            frames,
            avbd_budgets,
            rapier_budgets,
            threshold: None,
            series: false,
            rapier_damping: 0.0,
        }
    }

    fn scaling_bases(self) -> &'static [f64] {
        match self {
            Mode::Full => &[20.0, 50.0, 100.0, 140.0],
            Mode::Quick => &[5.0, 10.0, 20.0, 30.0],
            Mode::Tiny => &[3.0, 4.0],
        }
    }
}

fn fem(substeps: usize, cg_cap: usize) -> RapierBudget {
    RapierBudget {
        solver: RapierSolver::Fem,
        substeps,
        cg_cap,
        skin: None,
    }
}

fn constraints(substeps: usize) -> RapierBudget {
    RapierBudget {
        substeps,
        ..RapierBudget::default_for(RapierSolver::Constraints)
    }
}

/// rapier3d's sweep of the full benchmark: the FEM solver at substeps 1–16 with the default
/// CG cap (20) and raised caps (the `cube`: 20 and 100 only, which keeps its sweep to about
/// two minutes here; at 100 its static value is within 0.01% at every substep count), and
/// the constraint solver at substeps 1–16. Its defaults are among them.
fn full_rapier_budgets(case: &str) -> Vec<RapierBudget> {
    let caps: &[usize] = if case == "cube" {
        &[20, 100]
    } else {
        &[20, 50, 100, 200, 500]
    };
    let mut v = Vec::new();
    for &cap in caps {
        for s in [1, 2, 4, 8, 16] {
            v.push(fem(s, cap));
        }
    }
    v.extend([1, 2, 4, 8, 16].map(constraints));
    v
}

fn quick_rapier_budgets(_case: &str) -> Vec<RapierBudget> {
    vec![fem(4, 20), fem(1, 500), constraints(4), constraints(16)]
}

fn tiny_rapier_budgets(_case: &str) -> Vec<RapierBudget> {
    vec![
        RapierBudget::default_for(RapierSolver::Fem),
        RapierBudget::default_for(RapierSolver::Constraints),
    ]
}

/// One benchmark case: a scene at a size.
#[derive(Clone, Debug)]
struct Case {
    scene: &'static str,
    params: Vec<(String, f64)>,
    /// Part of the scaling series.
    scaling: bool,
}

impl Case {
    fn label(&self) -> String {
        let p: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{} ({})", self.scene, p.join(" "))
    }
    fn param_string(&self) -> String {
        let p: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        p.join(" ")
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Engine {
    Avbd,
    Rapier,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Avbd => "bevy_avbd",
            Engine::Rapier => "rapier3d",
        }
    }
}

/// The quality metric a scene is judged by.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Metric {
    Drift,
    Stretch,
    JointError,
}

impl Metric {
    fn of(meta: &Meta) -> Metric {
        if meta.joint_error {
            Metric::JointError
        } else if !meta.chain.is_empty() {
            Metric::Stretch
        } else {
            Metric::Drift
        }
    }
    fn from_name(name: &str) -> Option<Metric> {
        [Metric::Drift, Metric::Stretch, Metric::JointError]
            .into_iter()
            .find(|m| m.name() == name)
    }
    fn name(self) -> &'static str {
        match self {
            Metric::Drift => "max_drift",
            Metric::Stretch => "max_stretch_ratio",
            Metric::JointError => "max_joint_error",
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Metric::Stretch => "",
            _ => " m",
        }
    }
    /// The equal-quality threshold of issue #3 (`--threshold` overrides it).
    fn default_threshold(self) -> f32 {
        DEFAULT_THRESHOLDS[self as usize]
    }
}

/// Quality metrics of one run, maxima over its frames.
#[derive(Clone, Copy, Debug, Default)]
struct Quality {
    max_drift: f32,
    max_stretch: f32,
    max_joint_error: f32,
    max_penetration: f32,
    finite: bool,
}

impl Quality {
    fn value(&self, m: Metric) -> f32 {
        match m {
            Metric::Drift => self.max_drift,
            Metric::Stretch => self.max_stretch,
            Metric::JointError => self.max_joint_error,
        }
    }
}

enum Sim {
    Avbd(Box<Scene>),
    Rapier(Box<RapierScene>),
}

/// One engine stepping one scene, with its per-frame timings and quality tracking.
struct Run {
    sim: Sim,
    meta: Rc<Meta>,
    start: Vec<Vec3>,
    metric: Metric,
    quality: Quality,
    frame: u32,
    /// Per frame: total, collision, solver (ms).
    times: Vec<[f64; 3]>,
    pairs: Vec<(usize, usize)>,
    iterations: usize,
    threshold: f32,
}

impl Run {
    fn new(sim: Sim, meta: Rc<Meta>, iterations: usize) -> Run {
        let mut run = Run {
            sim,
            start: Vec::new(),
            metric: Metric::of(&meta),
            meta,
            quality: Quality {
                finite: true,
                ..Default::default()
            },
            frame: 0,
            times: Vec::new(),
            pairs: Vec::new(),
            iterations,
            threshold: 0.0,
        };
        run.threshold = run.metric.default_threshold();
        run.start = (0..run.meta.shapes.len()).map(|i| run.pose(i).0).collect();
        run
    }

    fn engine(&self) -> Engine {
        match self.sim {
            Sim::Avbd(_) => Engine::Avbd,
            Sim::Rapier(_) => Engine::Rapier,
        }
    }

    fn pose(&self, i: usize) -> (Vec3, Quat) {
        match &self.sim {
            Sim::Avbd(sc) => {
                let b = sc
                    .world
                    .body(BodyHandle(i as u32))
                    .expect("bench bodies are never removed");
                (b.position, b.rotation)
            }
            Sim::Rapier(w) => w.pose(i),
        }
    }

    fn step(&mut self) -> Result<(), String> {
        match &mut self.sim {
            Sim::Avbd(sc) => {
                // Scene::step launches the scene's projectiles itself.
                sc.step().map_err(|e| e.to_string())?;
                let s = sc.world.stats();
                self.times.push([s.total_ms, s.collision_ms, s.solver_ms]);
            }
            Sim::Rapier(w) => {
                for &(f, body, v) in &self.meta.projectiles {
                    if f == self.frame {
                        w.launch(body, v);
                    }
                }
                let t0 = Instant::now();
                w.step();
                let total = t0.elapsed().as_secs_f64() * 1e3;
                let c = &w.pipeline.counters;
                self.times
                    .push([total, c.collision_detection_time_ms(), c.solver_time_ms()]);
            }
        }
        self.frame += 1;
        self.track();
        Ok(())
    }

    fn anchor_gap(&self, j: usize) -> f32 {
        let jm = self.meta.joints[j];
        let (pa, qa) = self.pose(jm.a);
        let wa = pa + qa * jm.anchor_a;
        let wb = match jm.b {
            Some(b) => {
                let (pb, qb) = self.pose(b);
                pb + qb * jm.anchor_b
            }
            None => jm.anchor_b,
        };
        (wa - wb).length()
    }

    fn track(&mut self) {
        let meta = Rc::clone(&self.meta);
        let mut q = self.quality;
        if meta.drift_until.is_none_or(|f| self.frame <= f) {
            for &i in &meta.drift {
                q.max_drift = q.max_drift.max((self.pose(i).0 - self.start[i]).length());
            }
        }
        if !meta.chain.is_empty() {
            let gaps: f32 = meta.chain.iter().map(|&j| self.anchor_gap(j)).sum();
            q.max_stretch = q.max_stretch.max(gaps / meta.chain_rest);
            q.finite &= gaps.is_finite();
        }
        if meta.joint_error {
            for j in 0..meta.joints.len() {
                let e = self.anchor_gap(j);
                q.max_joint_error = q.max_joint_error.max(e);
                q.finite &= e.is_finite();
            }
        }
        // Penetration over the pairs the engine's narrow phase holds.
        let mut pairs = std::mem::take(&mut self.pairs);
        match &self.sim {
            Sim::Avbd(sc) => {
                pairs.clear();
                let w = &sc.world;
                for c in w.contact_points() {
                    if let (Some(a), Some(b)) =
                        (w.handle_of_index(c.body_a), w.handle_of_index(c.body_b))
                    {
                        let (a, b) = (a.0 as usize, b.0 as usize);
                        pairs.push((a.min(b), a.max(b)));
                    }
                }
                pairs.sort_unstable();
                pairs.dedup();
            }
            Sim::Rapier(w) => w.contact_pairs(&mut pairs),
        }
        // Fresh parry3d contact manifolds at zero prediction, the deepest point of each pair
        // (what both engines' narrow phases compute; `query::contact`'s cuboid–cuboid SAT
        // reports a spurious 0.5 m for nearly aligned boxes away from the origin).
        let mut manifolds: Vec<ContactManifold<(), ()>> = Vec::new();
        for &(a, b) in &pairs {
            let (Some(sa), Some(sb)) = (&meta.shapes[a], &meta.shapes[b]) else {
                continue;
            };
            let (pa, qa) = self.pose(a);
            let (pb, qb) = self.pose(b);
            let pos12 = Pose::from_parts(pa, qa).inv_mul(&Pose::from_parts(pb, qb));
            manifolds.clear();
            let mut workspace = None;
            if DefaultQueryDispatcher
                .contact_manifolds(
                    &pos12,
                    sa.as_ref(),
                    sb.as_ref(),
                    0.0,
                    &mut manifolds,
                    &mut workspace,
                )
                .is_ok()
            {
                for pt in manifolds.iter().flat_map(|m| &m.points) {
                    q.max_penetration = q.max_penetration.max(-pt.dist);
                }
            }
        }
        self.pairs = pairs;
        for i in 0..meta.shapes.len() {
            let (p, r) = self.pose(i);
            q.finite &= p.is_finite() && r.is_finite();
        }
        self.quality = q;
    }

    /// The run has left the quality threshold (or is no longer finite).
    fn failed(&self) -> bool {
        !self.quality.finite || self.quality.value(self.metric) >= self.threshold
    }

    /// Median, p95 of the total, and medians of collision and solver time, over frames
    /// `from..`.
    fn timing(&self, from: usize) -> Timing {
        let w = &self.times[from.min(self.times.len())..];
        let col = |k: usize| {
            let mut v: Vec<f64> = w.iter().map(|t| t[k]).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (total, coll, solver) = (col(0), col(1), col(2));
        Timing {
            median: percentile(&total, 0.5),
            p95: percentile(&total, 0.95),
            collision: percentile(&coll, 0.5),
            solver: percentile(&solver, 0.5),
            frames: w.len(),
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[derive(Clone, Copy, Debug)]
struct Timing {
    median: f64,
    p95: f64,
    collision: f64,
    solver: f64,
    frames: usize,
}

/// The case's parameters with the scene's defaults filled in.
fn resolved(case: &Case) -> Result<BTreeMap<String, f64>, String> {
    let spec = bevy_avbd::scenes::spec(case.scene)
        .ok_or_else(|| format!("scene `{}` is not in the catalogue", case.scene))?;
    let mut p: BTreeMap<String, f64> = spec
        .params
        .iter()
        .map(|p| (p.name.to_string(), p.default))
        .collect();
    p.extend(case.params.iter().cloned());
    Ok(p)
}

/// Builds both engines for a case; checks that they hold the same bodies.
fn build_pair(
    case: &Case,
    avbd_iterations: usize,
    rapier_iterations: usize,
    rapier_sleep: bool,
) -> Result<(Run, Run), String> {
    let avbd = build_avbd(case, avbd_iterations)?;
    let rapier = build_rapier(case, rapier_iterations, rapier_sleep)?;
    let (Sim::Avbd(sc), Sim::Rapier(w)) = (&avbd.sim, &rapier.sim) else {
        unreachable!()
    };
    rapier_scenes::check_identical(&sc.world, w)
        .map_err(|e| format!("{}: engines differ: {e}", case.label()))?;
    Ok((avbd, rapier))
}

/// bevy_avbd's run of the catalogue scene. Its Meta (shapes, tracked bodies and joints) is
/// engine-neutral and comes from the rapier mirror built with the same parameters.
fn build_avbd(case: &Case, iterations: usize) -> Result<Run, String> {
    let config = SolverConfig {
        iterations: iterations as u32,
        dt: 1.0 / 60.0,
        gravity: Vec3::new(0.0, -9.81, 0.0),
        ..SolverConfig::default()
    };
    let sc = Scene::build(case.scene, &case.params, config).map_err(|e| e.to_string())?;
    let (_, meta) = rapier_scenes::build(case.scene, &sc.params, 1, false)?;
    Ok(Run::new(Sim::Avbd(Box::new(sc)), Rc::new(meta), iterations))
}

fn build_rapier(case: &Case, iterations: usize, rapier_sleep: bool) -> Result<Run, String> {
    let (w, meta) = rapier_scenes::build(case.scene, &resolved(case)?, iterations, rapier_sleep)?;
    Ok(Run::new(
        Sim::Rapier(Box::new(w)),
        Rc::new(meta),
        iterations,
    ))
}

/// Result of one engine on one case at default budgets.
struct Row {
    case: Case,
    engine: Engine,
    iterations: usize,
    bodies: usize,
    joints: usize,
    metric: Metric,
    timing: Timing,
    quality: Quality,
    threshold: f32,
}

impl Row {
    /// Whether the run stayed within the equal-quality threshold.
    fn passes(&self) -> bool {
        self.quality.finite && self.quality.value(self.metric) < self.threshold
    }
}

/// Steps both engines alternately for `settle + window` frames.
fn run_case(case: &Case, plan: &Plan, rapier_sleep: bool) -> Result<[Row; 2], String> {
    let avbd_it = SolverConfig::default().iterations as usize;
    let rapier_it = rapier3d::prelude::IntegrationParameters::default().num_solver_iterations;
    let (mut a, mut r) = build_pair(case, avbd_it, rapier_it, rapier_sleep)?;
    let frames = plan.settle + plan.window;
    let t0 = Instant::now();
    for f in 0..frames {
        a.step()?;
        r.step()?;
        if (f + 1) % 30 == 0 || f + 1 == frames {
            eprint!(
                "\r  {:<40} frame {:>4}/{frames}  ({:.0} s)",
                case.label(),
                f + 1,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!();
    let row = |run: &Run| Row {
        case: case.clone(),
        engine: run.engine(),
        iterations: run.iterations,
        bodies: run.meta.shapes.len(),
        joints: run.meta.joints.len(),
        metric: run.metric,
        timing: run.timing(plan.settle as usize),
        quality: run.quality,
        threshold: plan.threshold(run.metric),
    };
    Ok([row(&a), row(&r)])
}

/// One sweep attempt: an engine at a budget.
struct Attempt {
    budget: usize,
    frames: u32,
    value: f32,
    passed: bool,
    timing: Timing,
}

struct Search {
    engine: Engine,
    budgets: Vec<usize>,
    idx: usize,
    run: Option<Run>,
    attempts: Vec<Attempt>,
    done: bool,
}

struct SweepResult {
    case: Case,
    metric: Metric,
    threshold: f32,
    frames: u32,
    max_budget: usize,
    searches: Vec<Search>,
    /// Both engines at their passing budgets, timed again side by side (alternate
    /// frames, `settle + window`), so the ratio is not skewed by load that changed
    /// between the two passing runs: `[bevy_avbd, rapier3d]`.
    side_by_side: Option<[Timing; 2]>,
}

impl Search {
    fn passed(&self) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.passed)
    }
}

/// Equal-quality sweep of one case: for each engine, the smallest budget (scanning
/// [`BUDGETS`] upwards) at which the threshold holds for `sweep_frames`. A run stops as
/// soon as it breaks the threshold. The two engines' runs step alternately.
fn sweep_case(case: &Case, plan: &Plan, rapier_sleep: bool) -> Result<SweepResult, String> {
    let budgets: Vec<usize> = BUDGETS
        .iter()
        .copied()
        .filter(|&b| b <= plan.max_budget)
        .collect();
    let mut searches: Vec<Search> = [Engine::Avbd, Engine::Rapier]
        .into_iter()
        .map(|engine| Search {
            engine,
            budgets: budgets.clone(),
            idx: 0,
            run: None,
            attempts: Vec::new(),
            done: false,
        })
        .collect();
    // Verify the two builds once.
    build_pair(case, 1, 1, rapier_sleep)?;
    let mut metric = Metric::Drift;
    let t0 = Instant::now();
    while searches.iter().any(|s| !s.done) {
        for s in searches.iter_mut().filter(|s| !s.done) {
            if s.run.is_none() {
                let b = s.budgets[s.idx];
                let run = match s.engine {
                    Engine::Avbd => build_avbd(case, b)?,
                    Engine::Rapier => build_rapier(case, b, rapier_sleep)?,
                };
                metric = run.metric;
                let mut run = run;
                run.threshold = plan.threshold(metric);
                s.run = Some(run);
            }
            let run = s.run.as_mut().unwrap();
            run.step()?;
            let failed = run.failed();
            if failed || run.frame >= plan.sweep_frames {
                let run = s.run.take().unwrap();
                eprint!(
                    "\r  sweep {:<34} {:<9} budget {:>2}: {} after {:>3} frames ({:.0} s)\n",
                    case.label(),
                    s.engine.name(),
                    s.budgets[s.idx],
                    if failed { "fails" } else { "holds" },
                    run.frame,
                    t0.elapsed().as_secs_f64()
                );
                s.attempts.push(Attempt {
                    budget: s.budgets[s.idx],
                    frames: run.frame,
                    value: run.quality.value(run.metric),
                    passed: !failed,
                    timing: run.timing(plan.settle as usize),
                });
                s.idx += 1;
                if !failed || s.idx == s.budgets.len() {
                    s.done = true;
                }
            }
        }
    }
    let side_by_side = match (searches[0].passed(), searches[1].passed()) {
        (Some(a), Some(r)) => {
            let (mut a, mut r) = build_pair(case, a.budget, r.budget, rapier_sleep)?;
            for _ in 0..plan.settle + plan.window {
                a.step()?;
                r.step()?;
            }
            eprintln!(
                "  sweep {:<34} both at their passing budgets, side by side ({:.0} s)",
                case.label(),
                t0.elapsed().as_secs_f64()
            );
            Some([
                a.timing(plan.settle as usize),
                r.timing(plan.settle as usize),
            ])
        }
        _ => None,
    };
    Ok(SweepResult {
        case: case.clone(),
        metric,
        threshold: plan.threshold(metric),
        frames: plan.sweep_frames,
        max_budget: *budgets.last().unwrap(),
        searches,
        side_by_side,
    })
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    format!("{cores} cores, {cpu}")
}

fn fmt_metric(m: Metric, v: f32) -> String {
    format!("{} {:.4}{}", m.name(), v, m.unit())
}

/// Runs the benchmark; the report goes to `out`, progress to stderr.
pub fn bench(args: BenchArgs, out: &mut impl Write) -> Result<(), String> {
    if args.backend != crate::BackendArg::Cpu {
        return gpu_series(&args, out);
    }
    let mode = if args.tiny {
        Mode::Tiny
    } else if args.quick {
        Mode::Quick
    } else {
        Mode::Full
    };
    let mut plan = mode.plan();
    if let Some(b) = args.max_budget {
        if b == 0 {
            return Err("--max-budget must be at least 1".into());
        }
        plan.max_budget = b;
    }
    let mut soft_plan = mode.soft_plan();
    if !(args.rapier_soft_damping.is_finite() && args.rapier_soft_damping >= 0.0) {
        return Err("--rapier-soft-damping must be a finite number ≥ 0".into());
    }
    soft_plan.rapier_damping = args.rapier_soft_damping;
    soft_plan.series = args.soft_series;
    for (name, v) in &args.thresholds {
        if !(v.is_finite() && *v > 0.0) {
            return Err(format!("threshold {name} = {v} must be > 0"));
        }
        if name == "static_error" {
            soft_plan.threshold = Some(*v);
            continue;
        }
        let m = Metric::from_name(name).ok_or_else(|| {
            format!(
                "unknown metric `{name}` (max_drift, max_stretch_ratio, max_joint_error, \
                 static_error)"
            )
        })?;
        plan.thresholds[m as usize] = *v as f32;
    }
    let scenes: Vec<&'static str> = if args.scenes.is_empty() {
        ALL_SCENES.to_vec()
    } else {
        let mut v = Vec::new();
        for s in &args.scenes {
            let known = ALL_SCENES
                .iter()
                .find(|k| **k == s.as_str())
                .ok_or_else(|| format!("unknown bench scene `{s}` (one of {ALL_SCENES:?})"))?;
            v.push(*known);
        }
        v
    };
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    // Both engines run their parallel parts in the global rayon pool.
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
    {
        return Err(format!("cannot set up the thread pool: {e}"));
    }
    let out_dir = args.out.clone().unwrap_or_else(|| match mode {
        Mode::Full => PathBuf::from("bench"),
        _ => PathBuf::from("bench/quick"),
    });
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;

    // Cases: the scenes at their benchmark size, then the scaling series (its point at the
    // large_pyramid size is shared with the large_pyramid row).
    let mut cases: Vec<Case> = Vec::new();
    let with_overrides = |scene: &str, mut params: Vec<(String, f64)>| {
        let spec = bevy_avbd::scenes::spec(scene).expect("bench scenes are in the catalogue");
        for (k, v) in &args.set {
            if spec.params.iter().any(|p| p.name == k) {
                params.retain(|(pk, _)| pk != k);
                params.push((k.clone(), *v));
            }
        }
        params
    };
    for (k, _) in &args.set {
        let known = scenes.iter().any(|s| {
            let name = if *s == "scaling" { "large_pyramid" } else { s };
            soft_bench::has_param(name, k)
        });
        if !known {
            return Err(format!("no selected scene has a parameter `{k}`"));
        }
    }
    let soft_cases: Vec<(&'static str, Vec<(String, f64)>)> = scenes
        .iter()
        .filter(|s| SOFT_CASES.contains(s))
        .map(|&s| {
            let mut params = mode.soft_params(s);
            for (k, v) in &args.set {
                if soft_bench::has_param(s, k) {
                    params.retain(|(pk, _)| pk != k);
                    params.push((k.clone(), *v));
                }
            }
            (s, params)
        })
        .collect();
    for &s in scenes
        .iter()
        .filter(|s| **s != "scaling" && !SOFT_CASES.contains(s))
    {
        cases.push(Case {
            scene: s,
            params: with_overrides(s, mode.params(s)),
            scaling: false,
        });
    }
    if scenes.contains(&"scaling") {
        for &base in mode.scaling_bases() {
            let params = vec![("base".to_string(), base)];
            if let Some(c) = cases
                .iter_mut()
                .find(|c| c.scene == "large_pyramid" && c.params == params)
            {
                c.scaling = true;
            } else {
                cases.push(Case {
                    scene: "large_pyramid",
                    params,
                    scaling: true,
                });
            }
        }
    }

    let started = Instant::now();
    eprintln!(
        "avbd bench ({mode:?}): {} cases, {threads} threads, {} + {} frames per case; {} \
         deformable cases, {} frames per run",
        cases.len(),
        plan.settle,
        plan.window,
        soft_cases.len(),
        soft_plan.frames
    );
    let mut rows: Vec<Row> = Vec::new();
    for case in &cases {
        rows.extend(run_case(case, &plan, args.rapier_sleep)?);
    }
    let mut sweeps = Vec::new();
    if !args.no_sweep {
        for case in cases.iter().filter(|c| {
            matches!(
                c.scene,
                "large_pyramid" | "many_pyramids" | "joint_grid" | "pendulum"
            ) && !(c.scaling && c.params != with_overrides(c.scene, mode.params(c.scene)))
        }) {
            sweeps.push(sweep_case(case, &plan, args.rapier_sleep)?);
        }
    }
    let mut soft = Vec::new();
    for (case, params) in &soft_cases {
        soft.push(soft_bench::run_case(case, params, &soft_plan)?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!("done in {elapsed:.0} s");

    let mut report = String::new();
    if !rows.is_empty() {
        report = markdown(&rows, &sweeps, &plan, threads, mode, &args);
    } else {
        let _ = writeln!(report, "## avbd bench ({mode:?})");
    }
    report.push_str(&soft_bench::markdown(
        &soft,
        &soft_plan,
        &machine(),
        threads,
    ));
    out.write_all(report.as_bytes())
        .map_err(|e| format!("stdout: {e}"))?;
    let mut written = vec![out_dir.join("results.csv"), out_dir.join("sweep.csv")];
    write_results_csv(&written[0], &rows, &soft, threads, &plan)?;
    write_sweep_csv(&written[1], &sweeps)?;
    if !soft.is_empty() {
        let path = out_dir.join("soft.csv");
        std::fs::write(&path, soft_bench::csv(&soft, threads))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
    }
    if soft_plan.series && !soft.is_empty() {
        let path = out_dir.join("soft_series.csv");
        std::fs::write(&path, soft_bench::series_csv(&soft))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
    }
    if !rows.is_empty() {
        let png = out_dir.join("plot.png");
        plot::plot(&png, &plot_points(&rows), &machine(), threads)?;
        written.push(png);
    }
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    writeln!(out, "\nWrote {}.", names.join(", ")).map_err(|e| format!("stdout: {e}"))?;
    Ok(())
}

fn plot_points(rows: &[Row]) -> plot::Series {
    let mut s = plot::Series::default();
    for r in rows {
        let target = match (r.case.scaling, r.engine) {
            (true, Engine::Avbd) => &mut s.avbd_scaling,
            (true, Engine::Rapier) => &mut s.rapier_scaling,
            (false, Engine::Avbd) => &mut s.avbd_other,
            (false, Engine::Rapier) => &mut s.rapier_other,
        };
        target.push(plot::Point {
            bodies: r.bodies as f64,
            ms: r.timing.median,
            scene: r.case.scene.to_string(),
            ok: r.passes(),
        });
    }
    s
}

fn markdown(
    rows: &[Row],
    sweeps: &[SweepResult],
    plan: &Plan,
    threads: usize,
    mode: Mode,
    args: &BenchArgs,
) -> String {
    let mut s = String::new();
    let rapier_defaults = rapier3d::prelude::IntegrationParameters::default();
    let _ = writeln!(s, "## avbd bench ({mode:?})\n");
    let _ = writeln!(
        s,
        "Machine: {}; {threads} rayon threads shared by both engines (rapier3d 0.36 with its \
         `parallel` feature). dt = 1/60 s, gravity (0, -9.81, 0). bevy_avbd: {} iterations; \
         rapier3d: {} solver iterations (`num_solver_iterations`, its default), sleeping {}. \
         Timing: median and p95 of the step over frames {}..{} (after {} settling frames); \
         quality metrics: maxima over all {} frames.\n",
        machine(),
        SolverConfig::default().iterations,
        rapier_defaults.num_solver_iterations,
        if args.rapier_sleep {
            "allowed (rapier's default)"
        } else {
            "disabled"
        },
        plan.settle,
        plan.settle + plan.window,
        plan.settle,
        plan.settle + plan.window,
    );
    let _ = writeln!(
        s,
        "| scene | bodies | joints | engine | iterations | median ms | p95 ms | collision / solver ms | quality | max_penetration m |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let q = format!(
            "{}{}",
            fmt_metric(r.metric, r.quality.value(r.metric)),
            if !r.quality.finite {
                " ✗ not finite"
            } else if r.passes() {
                " ✓"
            } else {
                " ✗"
            }
        );
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} / {:.3} | {} | {:.4} |",
            r.case.label(),
            r.bodies,
            r.joints,
            r.engine.name(),
            r.iterations,
            r.timing.median,
            r.timing.p95,
            r.timing.collision,
            r.timing.solver,
            q,
            r.quality.max_penetration,
        );
    }
    let _ = writeln!(
        s,
        "\n✓/✗: the quality metric is within / beyond the equal-quality threshold \
         (max_drift < {} m, max_stretch_ratio < {}, max_joint_error < {} m). A scene \
         that collapses or explodes often steps faster afterwards (bodies fly apart): its \
         time is not comparable.\n",
        plan.thresholds[0], plan.thresholds[1], plan.thresholds[2]
    );
    let _ = writeln!(
        s,
        "Ratio bevy_avbd / rapier3d (median ms/frame, default budgets):\n"
    );
    let _ = writeln!(
        s,
        "| scene | bodies | bevy_avbd ms | rapier3d ms | ratio | quality bevy_avbd / rapier3d |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    let mark = |r: &Row| if r.passes() { "✓" } else { "✗" };
    for pair in rows.chunks(2) {
        if let [a, r] = pair {
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {:.3} | {:.2} | {} / {} |",
                a.case.label(),
                a.bodies,
                a.timing.median,
                r.timing.median,
                a.timing.median / r.timing.median,
                mark(a),
                mark(r)
            );
        }
    }
    if !sweeps.is_empty() {
        let _ = writeln!(
            s,
            "\n### Equal-quality sweep\n\nSmallest budget (of {:?}, up to {}) at which the \
             threshold holds for {} frames ({:.0} s), scanning upwards; a run stops at the \
             first frame that breaks it. ms/frame: median (p95) after {} settling frames of \
             both engines run again at their passing budgets, side by side (alternate frames, \
             as in the table above), so the ratio compares the same load.\n",
            BUDGETS
                .iter()
                .filter(|&&b| b <= plan.max_budget)
                .collect::<Vec<_>>(),
            plan.max_budget,
            plan.sweep_frames,
            plan.sweep_frames as f64 / 60.0,
            plan.settle
        );
        let _ = writeln!(
            s,
            "| scene | threshold | bevy_avbd budget | bevy_avbd ms | rapier3d budget | rapier3d ms | ratio |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for sw in sweeps {
            let cell = |k: usize, se: &Search| match se.passed() {
                Some(a) => {
                    let t = sw.side_by_side.map(|t| t[k]).unwrap_or(a.timing);
                    (
                        format!("{} ({} {:.4})", a.budget, sw.metric.name(), a.value),
                        format!("{:.3} ({:.3})", t.median, t.p95),
                        Some(t.median),
                    )
                }
                None => {
                    let last = se.attempts.last().map(|a| a.frames).unwrap_or(0);
                    (
                        format!(
                            "does not reach the threshold up to budget {} (at {} it breaks it at frame {})",
                            sw.max_budget, sw.max_budget, last
                        ),
                        "–".into(),
                        None,
                    )
                }
            };
            let (ab, ams, at) = cell(0, &sw.searches[0]);
            let (rb, rms, rt) = cell(1, &sw.searches[1]);
            let ratio = match (at, rt) {
                (Some(a), Some(r)) => format!("{:.2}", a / r),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} < {}{} | {} | {} | {} | {} | {} |",
                sw.case.label(),
                sw.metric.name(),
                sw.threshold,
                sw.metric.unit(),
                ab,
                ams,
                rb,
                rms,
                ratio
            );
        }
        let _ = writeln!(
            s,
            "\nAttempts (budget: metric, ✓ held for N frames / ✗ broken at frame N):\n"
        );
        for sw in sweeps {
            for se in &sw.searches {
                let list: Vec<String> = se
                    .attempts
                    .iter()
                    .map(|a| {
                        format!(
                            "{}: {:.4}{}",
                            a.budget,
                            a.value,
                            if a.passed {
                                format!(" ✓ {}", a.frames)
                            } else {
                                format!(" ✗ @{}", a.frames)
                            }
                        )
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "- {} {}: {}",
                    sw.case.label(),
                    se.engine.name(),
                    list.join(", ")
                );
            }
        }
        let _ = sw_frames_note(&mut s, sweeps);
    }
    s
}

fn sw_frames_note(s: &mut String, sweeps: &[SweepResult]) -> std::fmt::Result {
    if let Some(sw) = sweeps.first()
        && sw.frames < 600
    {
        writeln!(
            s,
            "\n(Sweep runs are {} frames here, not the 600 frames (10 s) of the full benchmark.)",
            sw.frames
        )?;
    }
    Ok(())
}

/// The main table's rows (default budgets), rigid and deformable. The last columns are the
/// deformable cases' (empty for rigid rows): solver, CG cap (rapier FEM), tets, reference
/// and static value (m), largest attachment gap (m); their `metric` is `static_error`, the
/// relative error of the static value, and the rigid-only columns are empty.
fn write_results_csv(
    path: &Path,
    rows: &[Row],
    soft: &[soft_bench::SoftCaseResult],
    threads: usize,
    plan: &Plan,
) -> Result<(), String> {
    let mut s = String::from(
        "scene,params,scaling,engine,bodies,joints,iterations,threads,settle_frames,window_frames,\
         median_ms,p95_ms,collision_ms,solver_ms,metric,metric_value,max_drift_m,\
         max_stretch_ratio,max_joint_error_m,max_penetration_m,finite,solver,cg_cap,tets,\
         reference_m,value_m,max_attachment_gap_m\n",
    );
    for r in rows {
        let q = &r.quality;
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{},{},{},{},{},{},{},,,,,,",
            r.case.scene,
            r.case.param_string(),
            r.case.scaling,
            r.engine.name(),
            r.bodies,
            r.joints,
            r.iterations,
            threads,
            plan.settle,
            r.timing.frames,
            r.timing.median,
            r.timing.p95,
            r.timing.collision,
            r.timing.solver,
            r.metric.name(),
            q.value(r.metric),
            q.max_drift,
            q.max_stretch,
            q.max_joint_error,
            q.max_penetration,
            q.finite
        );
    }
    for c in soft {
        for r in c.results.iter().filter(|r| r.engine.is_default()) {
            // Static cases: the static value's relative error; contact cases: the exact
            // check's intersections (summed over frames), the deepest vertex below the ground
            // as max_penetration_m.
            let (metric, penetration, reference, value) = match (&c.reference, r.contact) {
                (Some(re), _) => (
                    format!("static_error,{:e}", r.error),
                    String::new(),
                    format!("{:e}", re.value),
                    format!("{:e}", r.value),
                ),
                (None, Some(k)) => (
                    format!("intersections,{}", k.intersections),
                    format!("{:e}", k.max_depth),
                    String::new(),
                    String::new(),
                ),
                (None, None) => unreachable!("a case is static or a contact case"),
            };
            let _ = writeln!(
                s,
                "{},{},false,{},{},{},{},{},0,{},{:.6},{:.6},,,{},,,,{},{},{},{},{},{},{},{}",
                c.case,
                c.params,
                r.engine.engine(),
                c.rigid_bodies + c.deformables,
                c.joints,
                r.engine.iterations(),
                threads,
                r.frames,
                r.median_ms,
                r.p95_ms,
                metric,
                penetration,
                r.finite,
                r.engine.solver(),
                r.engine.cg_cap().map(|c| c.to_string()).unwrap_or_default(),
                c.tets,
                reference,
                value,
                r.gap.map(|g| format!("{:e}", g.0)).unwrap_or_default(),
            );
        }
    }
    std::fs::write(path, s).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn write_sweep_csv(path: &Path, sweeps: &[SweepResult]) -> Result<(), String> {
    let mut s = String::from(
        "scene,params,engine,metric,threshold,budget,frames,metric_value,passed,median_ms,p95_ms,\
         side_by_side_median_ms,side_by_side_p95_ms\n",
    );
    for sw in sweeps {
        for (k, se) in sw.searches.iter().enumerate() {
            for a in &se.attempts {
                // The passing attempt also gets its side-by-side timing.
                let sbs = match sw.side_by_side {
                    Some(t) if a.passed => format!("{:.6},{:.6}", t[k].median, t[k].p95),
                    _ => ",".into(),
                };
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{}",
                    sw.case.scene,
                    sw.case.param_string(),
                    se.engine.name(),
                    sw.metric.name(),
                    sw.threshold,
                    a.budget,
                    a.frames,
                    a.value,
                    a.passed,
                    a.timing.median,
                    a.timing.p95,
                    sbs
                );
            }
        }
    }
    std::fs::write(path, s).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// One row of the GPU scaling series.
struct GpuRow {
    scene: &'static str,
    param: String,
    bodies: usize,
    contacts: usize,
    colors: usize,
    serial: usize,
    build_s: f64,
    collision_ms: f64,
    solver_ms: f64,
    total_ms: f64,
    /// Integration, colouring, primal, dual (ms per frame, timestamp queries), when
    /// supported.
    kernels: Option<[f64; 4]>,
    /// Whole GPU span of the step (first pass start to last pass end), when timed.
    span_ms: Option<f64>,
    /// Host side of the GPU solve: adjacency, upload encoding, wait (GPU execution and
    /// transfers), unpack (ms per frame).
    host: [f64; 4],
    memory: Option<bevy_avbd::gpu::GpuMemory>,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `avbd bench --backend gpu|auto`: the pile and large_pyramid scaling series on the GPU
/// backend (medians over `--gpu-frames` frames after `--gpu-settle` untimed frames).
fn gpu_series(args: &BenchArgs, out: &mut impl Write) -> Result<(), String> {
    let backend: bevy_avbd::Backend = args.backend.into();
    if args.gpu_frames == 0 || args.gpu_iterations == 0 {
        return Err("--gpu-frames and --gpu-iterations must be at least 1".into());
    }
    if !(args.gpu_overlap_ms.is_finite() && args.gpu_overlap_ms >= 0.0) {
        return Err("--gpu-overlap-ms must be a finite number ≥ 0".into());
    }
    let wanted = |s: &str| args.scenes.is_empty() || args.scenes.iter().any(|x| x == s);
    for s in &args.scenes {
        if s != "pile" && s != "large_pyramid" {
            return Err(format!(
                "the GPU series runs `pile` and `large_pyramid`, not `{s}`"
            ));
        }
    }
    let mut cases: Vec<(&'static str, &'static str, f64)> = Vec::new();
    if wanted("pile") {
        cases.extend(args.pile_counts.iter().map(|&c| ("pile", "count", c)));
    }
    if wanted("large_pyramid") {
        cases.extend(
            args.pyramid_bases
                .iter()
                .map(|&b| ("large_pyramid", "base", b)),
        );
    }
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench/gpu"));
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let config = SolverConfig {
        iterations: args.gpu_iterations,
        ..SolverConfig::default()
    };
    let mut rows = Vec::new();
    let mut adapter = None;
    let io = |e: std::io::Error| e.to_string();
    let mut failed = Vec::new();
    for (scene, key, value) in cases {
        let run = |adapter: &mut Option<String>| -> Result<GpuRow, String> {
            let t0 = Instant::now();
            let mut sc =
                Scene::build_on(scene, &[(key.to_string(), value)], config.clone(), backend)
                    .map_err(|e| e.to_string())?;
            let build_s = t0.elapsed().as_secs_f64();
            if adapter.is_none() {
                *adapter = sc.world.adapter();
            }
            for _ in 0..args.gpu_settle {
                sc.step().map_err(|e| e.to_string())?;
            }
            let (mut col, mut sol, mut tot) = (Vec::new(), Vec::new(), Vec::new());
            let mut kern: [Vec<f64>; 4] = Default::default();
            let mut span = Vec::new();
            let mut host: [Vec<f64>; 4] = Default::default();
            for _ in 0..args.gpu_frames {
                sc.begin_frame().map_err(|e| e.to_string())?;
                if args.gpu_overlap_ms > 0.0 {
                    std::thread::sleep(std::time::Duration::from_secs_f64(
                        args.gpu_overlap_ms * 1e-3,
                    ));
                }
                sc.finish_frame().map_err(|e| e.to_string())?;
                let st = sc.world.stats();
                col.push(st.collision_ms);
                sol.push(st.solver_ms);
                tot.push(st.total_ms);
                if let Some(t) = sc.world.gpu_timings() {
                    let h = t.host;
                    for (v, x) in
                        host.iter_mut()
                            .zip([h.prepare_ms, h.upload_ms, h.wait_ms, h.unpack_ms])
                    {
                        v.push(x);
                    }
                    if t.supported {
                        kern[0].push(t.integration_ms);
                        kern[1].push(t.coloring_ms);
                        kern[2].push(t.primal_ms);
                        kern[3].push(t.dual_ms);
                        span.push(t.span_ms);
                    }
                }
            }
            let w = &sc.world;
            let kernels = (!kern[0].is_empty()).then(|| kern.map(median));
            let span_ms = (!span.is_empty()).then(|| median(span));
            Ok(GpuRow {
                scene,
                param: format!("{key}={value}"),
                bodies: w.body_count(),
                contacts: w.contact_count(),
                colors: w.stats().colors,
                serial: w.gpu_serial_bodies().unwrap_or(0),
                build_s,
                collision_ms: median(col),
                solver_ms: median(sol),
                total_ms: median(tot),
                kernels,
                span_ms,
                host: host.map(median),
                memory: w.gpu_memory(),
            })
        };
        match run(&mut adapter) {
            Ok(row) => {
                writeln!(
                    out,
                    "{scene} {key}={value}: {} bodies, {} contacts, solver {:.1} ms, total {:.1} ms",
                    row.bodies, row.contacts, row.solver_ms, row.total_ms
                )
                .map_err(io)?;
                rows.push(row);
            }
            // A size that does not fit the adapter is reported, and the series goes on.
            Err(e) => {
                writeln!(out, "{scene} {key}={value}: error: {e}").map_err(io)?;
                failed.push(format!("{scene} {key}={value}: {e}"));
            }
        }
    }
    let adapter = adapter.unwrap_or_else(|| "none (CPU backend)".into());
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\nGPU series on {adapter}, {} iterations, median of {} frames after {} untimed{}\n",
        args.gpu_iterations,
        args.gpu_frames,
        args.gpu_settle,
        if args.gpu_overlap_ms > 0.0 {
            format!(
                "; {} ms of caller work between begin_step and finish_step (not in the times)",
                args.gpu_overlap_ms
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        md,
        "| scene | size | bodies | contacts | colours | collision ms | solver ms | total ms | GPU integration / colouring / primal / dual ms | B/body | B/contact | GPU MiB |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut csv = String::from(
        "scene,param,adapter,iterations,bodies,contacts,colors,serial,build_s,collision_ms,solver_ms,total_ms,gpu_integration_ms,gpu_coloring_ms,gpu_primal_ms,gpu_dual_ms,bytes_per_body,bytes_per_contact,bytes_per_joint,gpu_total_bytes,gpu_span_ms,host_prepare_ms,host_upload_ms,host_wait_ms,host_unpack_ms\n",
    );
    for r in &rows {
        let k = r
            .kernels
            .map(|k| format!("{:.1} / {:.1} / {:.1} / {:.1}", k[0], k[1], k[2], k[3]))
            .unwrap_or_else(|| "unsupported".into());
        let m = r.memory.unwrap_or_default();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {}{} | {:.1} | {:.1} | {:.1} | {k} | {} | {} | {:.1} |",
            r.scene,
            r.param,
            r.bodies,
            r.contacts,
            r.colors,
            if r.serial > 0 {
                format!(" (+{} serial)", r.serial)
            } else {
                String::new()
            },
            r.collision_ms,
            r.solver_ms,
            r.total_ms,
            m.bytes_per_body,
            m.bytes_per_contact,
            m.total_bytes as f64 / (1024.0 * 1024.0)
        );
        let kc = r
            .kernels
            .map(|k| format!("{},{},{},{}", k[0], k[1], k[2], k[3]))
            .unwrap_or_else(|| ",,,".into());
        let _ = writeln!(
            csv,
            "{},{},\"{}\",{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{kc},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3}",
            r.scene,
            r.param,
            adapter,
            args.gpu_iterations,
            r.bodies,
            r.contacts,
            r.colors,
            r.serial,
            r.build_s,
            r.collision_ms,
            r.solver_ms,
            r.total_ms,
            m.bytes_per_body,
            m.bytes_per_contact,
            m.bytes_per_joint,
            m.total_bytes,
            r.span_ms.map(|x| format!("{x:.3}")).unwrap_or_default(),
            r.host[0],
            r.host[1],
            r.host[2],
            r.host[3],
        );
    }
    // Where the solver's time goes: the GPU solve's host phases, the rest of the step on
    // the CPU (inertial targets, joint warm start, fracture, end of step, contact warm
    // start) and the GPU's own span.
    let _ = writeln!(
        md,
        "\n| scene | size | prepare ms | upload ms | wait (GPU + transfers) ms | unpack ms | other CPU ms | GPU span ms |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let gpu_solve: f64 = r.host.iter().sum();
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            r.scene,
            r.param,
            r.host[0],
            r.host[1],
            r.host[2],
            r.host[3],
            (r.solver_ms - gpu_solve).max(0.0),
            r.span_ms
                .map(|x| format!("{x:.1}"))
                .unwrap_or_else(|| "unsupported".into()),
        );
    }
    for f in &failed {
        let _ = writeln!(md, "\nnot run: {f}");
    }
    write!(out, "{md}").map_err(io)?;
    let path = out_dir.join("gpu.csv");
    std::fs::write(&path, csv).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    writeln!(out, "\nwrote {}", path.display()).map_err(io)?;
    Ok(())
}
