//! One engine at one budget stepping one case, what it measures (static value, attachment
//! gap, the contact cases' exact checks), and the results' types.

use std::time::Instant;

use bevy_avbd::glam::{DVec3, Quat, Vec3};
use bevy_avbd::reference::intersect::{Soup, check_soups};
use bevy_avbd::scenes::Scene;
use bevy_avbd::{BodyHandle, PhysicsWorld, SolverConfig};

// Named only by a doc link.
#[cfg(doc)]
use super::SoftPlan;
use super::{SEPARATION_RADIUS, STATIC_WINDOW};
use crate::rapier_soft::{ContactMeta, RapierBudget, RapierSoftScene, RapierSolver, SoftMeta};

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

pub(super) enum SoftSim {
    /// A `bevy_avbd::scenes` scene.
    Scene(Box<Scene>),
    /// A world built here (the `cube`).
    World(Box<PhysicsWorld>),
    Rapier(Box<RapierSoftScene>),
}

/// One engine at one budget stepping one case.
pub(super) struct SoftRun {
    pub(super) sim: SoftSim,
    pub(super) engine: SoftEngine,
    /// Probe mean along its direction, per frame (m).
    pub(super) samples: Vec<f64>,
    /// Largest attachment gap of the measured attachments, per frame (m).
    pub(super) gaps: Vec<f32>,
    pub(super) finite: bool,
    /// ms per frame.
    pub(super) times: Vec<f64>,
    /// Contact cases: what the frames' exact checks found so far.
    pub(super) contact: ContactResult,
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

    pub(super) fn step(
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
    pub(super) fn value(&self, meta: &SoftMeta) -> f64 {
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

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
