//! One case in both engines: building the same scene in each, stepping it, its per-frame
//! timings and quality metrics, and the default-budget run of a case.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::scenes::Scene;
use bevy_avbd::{BodyHandle, SolverConfig};
use rapier3d::parry::math::Pose;
use rapier3d::parry::query::{ContactManifold, DefaultQueryDispatcher, PersistentQueryDispatcher};

use super::plan::{DEFAULT_THRESHOLDS, Plan};
use crate::rapier_scenes::{self, Meta, RapierScene};

/// One benchmark case: a scene at a size.
#[derive(Clone, Debug)]
pub(super) struct Case {
    pub(super) scene: &'static str,
    pub(super) params: Vec<(String, f64)>,
    /// Part of the scaling series.
    pub(super) scaling: bool,
}

impl Case {
    pub(super) fn label(&self) -> String {
        let p: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{} ({})", self.scene, p.join(" "))
    }
    pub(super) fn param_string(&self) -> String {
        let p: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        p.join(" ")
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Engine {
    Avbd,
    Rapier,
}

impl Engine {
    pub(super) fn name(self) -> &'static str {
        match self {
            Engine::Avbd => "bevy_avbd",
            Engine::Rapier => "rapier3d",
        }
    }
}

/// The quality metric a scene is judged by.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Metric {
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
    pub(super) fn from_name(name: &str) -> Option<Metric> {
        [Metric::Drift, Metric::Stretch, Metric::JointError]
            .into_iter()
            .find(|m| m.name() == name)
    }
    pub(super) fn name(self) -> &'static str {
        match self {
            Metric::Drift => "max_drift",
            Metric::Stretch => "max_stretch_ratio",
            Metric::JointError => "max_joint_error",
        }
    }
    pub(super) fn unit(self) -> &'static str {
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
pub(super) struct Quality {
    pub(super) max_drift: f32,
    pub(super) max_stretch: f32,
    pub(super) max_joint_error: f32,
    pub(super) max_penetration: f32,
    pub(super) finite: bool,
}

impl Quality {
    pub(super) fn value(&self, m: Metric) -> f32 {
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
pub(super) struct Run {
    sim: Sim,
    meta: Rc<Meta>,
    start: Vec<Vec3>,
    pub(super) metric: Metric,
    pub(super) quality: Quality,
    pub(super) frame: u32,
    /// Per frame: total, collision, solver (ms).
    times: Vec<[f64; 3]>,
    pairs: Vec<(usize, usize)>,
    iterations: usize,
    pub(super) threshold: f32,
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

    pub(super) fn engine(&self) -> Engine {
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

    pub(super) fn step(&mut self) -> Result<(), String> {
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
                for (a, b) in w.touching_pairs().unwrap_or_default() {
                    if let (Some(a), Some(b)) = (w.handle_of_index(a), w.handle_of_index(b)) {
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
    pub(super) fn failed(&self) -> bool {
        !self.quality.finite || self.quality.value(self.metric) >= self.threshold
    }

    /// Median, p95 of the total, and medians of collision and solver time, over frames
    /// `from..`.
    pub(super) fn timing(&self, from: usize) -> Timing {
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
pub(super) struct Timing {
    pub(super) median: f64,
    pub(super) p95: f64,
    pub(super) collision: f64,
    pub(super) solver: f64,
    pub(super) frames: usize,
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
pub(super) fn build_pair(
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
pub(super) fn build_avbd(case: &Case, iterations: usize) -> Result<Run, String> {
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

pub(super) fn build_rapier(
    case: &Case,
    iterations: usize,
    rapier_sleep: bool,
) -> Result<Run, String> {
    let (w, meta) = rapier_scenes::build(case.scene, &resolved(case)?, iterations, rapier_sleep)?;
    Ok(Run::new(
        Sim::Rapier(Box::new(w)),
        Rc::new(meta),
        iterations,
    ))
}

/// Result of one engine on one case at default budgets.
pub(super) struct Row {
    pub(super) case: Case,
    pub(super) engine: Engine,
    pub(super) iterations: usize,
    pub(super) bodies: usize,
    pub(super) joints: usize,
    pub(super) metric: Metric,
    pub(super) timing: Timing,
    pub(super) quality: Quality,
    pub(super) threshold: f32,
}

impl Row {
    /// Whether the run stayed within the equal-quality threshold.
    pub(super) fn passes(&self) -> bool {
        self.quality.finite && self.quality.value(self.metric) < self.threshold
    }
}

/// Steps both engines alternately for `settle + window` frames.
pub(super) fn run_case(case: &Case, plan: &Plan, rapier_sleep: bool) -> Result<[Row; 2], String> {
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
