//! The Markdown report of the rigid cases (default budgets, ratios, the sweep) and the
//! plot's points.

use std::fmt::Write as _;

use bevy_avbd::SolverConfig;

use super::BenchArgs;
use super::plan::{BUDGETS, Mode, Plan};
use super::run::{Engine, Metric, Row};
use super::sweep::{Search, SweepResult};
use crate::plot;

pub(super) fn machine() -> String {
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

pub(super) fn plot_points(rows: &[Row]) -> plot::Series {
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

pub(super) fn markdown(
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
