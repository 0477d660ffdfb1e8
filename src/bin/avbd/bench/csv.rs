//! results.csv (every default-budget row, rigid and deformable) and sweep.csv.

use std::fmt::Write as _;
use std::path::Path;

use super::plan::Plan;
use super::run::Row;
use super::sweep::SweepResult;
use crate::soft_bench;

/// The main table's rows (default budgets), rigid and deformable. The last columns are the
/// deformable cases' (empty for rigid rows): solver, CG cap (rapier FEM), tets, reference
/// and static value (m), largest attachment gap (m); their `metric` is `static_error`, the
/// relative error of the static value, and the rigid-only columns are empty.
pub(super) fn write_results_csv(
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

pub(super) fn write_sweep_csv(path: &Path, sweeps: &[SweepResult]) -> Result<(), String> {
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
