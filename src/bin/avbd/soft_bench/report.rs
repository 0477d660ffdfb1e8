//! The Markdown sections of the deformable cases: the contact cases, the static cases.

use std::fmt::Write as _;

use bevy_avbd::SolverConfig;

use super::run::SoftCaseResult;
use super::{SEPARATION_RADIUS, SoftPlan};
use crate::rapier_soft::{RapierBudget, RapierSolver};

const FAMILIES: [&str; 3] = ["bevy_avbd", "rapier3d FEM", "rapier3d constraints"];

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
