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
//!
//! Files: `plan.rs` (modes, sizes, thresholds, budgets), `run.rs` (a case in both engines:
//! stepping, timing, quality), `sweep.rs` (the equal-quality sweep), `report.rs` (Markdown
//! and plot), `csv.rs` (results.csv, sweep.csv), `gpu.rs` (the GPU scaling series); the
//! deformable cases are in `soft_bench`.
//!
//! [`rapier_scenes::check_identical`]: crate::rapier_scenes::check_identical

mod csv;
mod gpu;
mod gpu_soft;
mod plan;
mod report;
mod run;
mod sweep;

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use crate::plot;
use crate::rapier_soft::SOFT_CASES;
use crate::soft_bench;

use csv::{write_results_csv, write_sweep_csv};
use gpu::gpu_series;
use gpu_soft::{SOFT_SCENES, gpu_soft_series};
use plan::{ALL_SCENES, Mode};
use report::{machine, markdown, plot_points};
use run::{Case, Metric, Row, run_case};
use sweep::sweep_case;

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
    /// total ms per frame, per-kernel GPU times, GPU memory, adapter; writes gpu.csv. With
    /// only `cantilever`, `soft_free_fall` or `cloth_hang` as `--scene`: the deformable
    /// series, each at two sizes on the CPU and the GPU backend (surface contact off);
    /// writes gpu_soft.csv.
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
    /// GPU series: read every body's velocity back with its pose each step (as the Bevy
    /// plugin does, `SolverConfig::gpu_velocity_readback`). Without it only the poses come
    /// back and the velocities stay on the device.
    #[arg(long)]
    pub gpu_velocity_readback: bool,
}

/// Runs the benchmark; the report goes to `out`, progress to stderr.
pub fn bench(args: BenchArgs, out: &mut impl Write) -> Result<(), String> {
    if args.backend != crate::BackendArg::Cpu {
        let soft = |s: &String| SOFT_SCENES.iter().any(|c| c.0 == s);
        if !args.scenes.is_empty() && args.scenes.iter().all(soft) {
            return gpu_soft_series(&args, out);
        }
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
