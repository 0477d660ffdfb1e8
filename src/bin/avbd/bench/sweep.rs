//! The equal-quality sweep: each engine's smallest budget that holds the threshold.

use std::time::Instant;

use super::plan::{BUDGETS, Plan};
use super::run::{Case, Engine, Metric, Run, Timing, build_avbd, build_pair, build_rapier};

/// One sweep attempt: an engine at a budget.
pub(super) struct Attempt {
    pub(super) budget: usize,
    pub(super) frames: u32,
    pub(super) value: f32,
    pub(super) passed: bool,
    pub(super) timing: Timing,
}

pub(super) struct Search {
    pub(super) engine: Engine,
    pub(super) budgets: Vec<usize>,
    pub(super) idx: usize,
    pub(super) run: Option<Run>,
    pub(super) attempts: Vec<Attempt>,
    pub(super) done: bool,
}

pub(super) struct SweepResult {
    pub(super) case: Case,
    pub(super) metric: Metric,
    pub(super) threshold: f32,
    pub(super) frames: u32,
    pub(super) max_budget: usize,
    pub(super) searches: Vec<Search>,
    /// Both engines at their passing budgets, timed again side by side (alternate
    /// frames, `settle + window`), so the ratio is not skewed by load that changed
    /// between the two passing runs: `[bevy_avbd, rapier3d]`.
    pub(super) side_by_side: Option<[Timing; 2]>,
}

impl Search {
    pub(super) fn passed(&self) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.passed)
    }
}

/// Equal-quality sweep of one case: for each engine, the smallest budget (scanning
/// [`BUDGETS`] upwards) at which the threshold holds for `sweep_frames`. A run stops as
/// soon as it breaks the threshold. The two engines' runs step alternately.
pub(super) fn sweep_case(
    case: &Case,
    plan: &Plan,
    rapier_sleep: bool,
) -> Result<SweepResult, String> {
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
