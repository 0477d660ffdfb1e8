//! A case: its parameters, bevy_avbd's build, the reference value, the checks against the
//! scene's own metrics, and every run of it stepped round-robin.

use std::collections::BTreeMap;
use std::time::Instant;

use bevy_avbd::SolverConfig;
use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::scenes::Scene;

use super::run::{
    ContactResult, Reference, SoftCaseResult, SoftEngine, SoftResult, SoftRun, SoftSim, percentile,
};
use super::{STATIC_WINDOW, SoftPlan, default_threshold};
use crate::rapier_soft::{self, RapierBudget, RapierSolver, SoftMeta};

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
