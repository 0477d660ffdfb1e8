//! `avbd bench --backend gpu --scene cantilever|soft_free_fall|cloth_hang`: the deformable
//! bodies on both backends in one run (surface contact off: these scenes have nothing to
//! touch, and the series measures the elastic solve), ms per frame side by side and the
//! scene's check on each.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use bevy_avbd::scenes::Scene;
use bevy_avbd::{Backend, SolverConfig};

use super::BenchArgs;

/// The deformable scenes of the GPU series, the size parameter and the metric compared.
pub(super) const SOFT_SCENES: [(&str, &str, &str); 3] = [
    ("cantilever", "cells", "tip_deflection"),
    ("soft_free_fall", "cells", "com_error"),
    ("cloth_hang", "resolution", "max_strain"),
];

/// The sizes each scene runs at.
fn sizes(scene: &str) -> &'static [f64] {
    match scene {
        "cantilever" => &[20.0, 80.0],
        "soft_free_fall" => &[12.0, 24.0],
        _ => &[49.0, 99.0],
    }
}

struct Run {
    vertices: usize,
    elements: usize,
    total_ms: f64,
    /// The host's part of the coarse step (assembly and factorisation), ms per frame.
    coarse_ms: f64,
    metric: f64,
    up_kib: f64,
    down_kib: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn run_on(
    backend: Backend,
    scene: &str,
    param: (&str, f64),
    metric: &str,
    args: &BenchArgs,
) -> Result<(Run, Option<String>), String> {
    let config = SolverConfig {
        iterations: args.gpu_iterations,
        deformable_contact: false,
        ..SolverConfig::default()
    };
    let mut sc = Scene::build_on(scene, &[(param.0.to_string(), param.1)], config, backend)
        .map_err(|e| e.to_string())?;
    for _ in 0..args.gpu_settle {
        sc.step().map_err(|e| e.to_string())?;
    }
    let (mut total, mut coarse) = (Vec::new(), Vec::new());
    for _ in 0..args.gpu_frames {
        sc.step().map_err(|e| e.to_string())?;
        let st = sc.world.stats();
        total.push(st.total_ms);
        coarse.push(st.coarse_ms);
    }
    let m = sc.metrics();
    let num = |k: &str| m.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    let (up, down) = sc.world.gpu_deformable_traffic().unwrap_or((0, 0));
    Ok((
        Run {
            vertices: num("vertices") as usize,
            elements: (num("tets") + num("triangles")) as usize,
            total_ms: median(total),
            coarse_ms: median(coarse),
            metric: num(metric),
            up_kib: up as f64 / 1024.0,
            down_kib: down as f64 / 1024.0,
        },
        sc.world.adapter(),
    ))
}

/// Runs the deformable GPU series and writes `gpu_soft.csv`.
pub(super) fn gpu_soft_series(args: &BenchArgs, out: &mut impl Write) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench/gpu"));
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let mut adapter = String::from("none");
    let mut md = String::new();
    let mut csv = String::from(
        "scene,param,adapter,iterations,vertices,elements,cpu_ms,gpu_ms,gpu_host_coarse_ms,metric,cpu_value,gpu_value,gpu_up_kib,gpu_down_kib\n",
    );
    let mut rows = Vec::new();
    for (scene, key, metric) in SOFT_SCENES {
        if !args.scenes.iter().any(|s| s == scene) {
            continue;
        }
        for &size in sizes(scene) {
            let (cpu, _) = run_on(Backend::Cpu, scene, (key, size), metric, args)?;
            let (gpu, name) = run_on(Backend::Gpu, scene, (key, size), metric, args)?;
            if let Some(n) = name {
                adapter = n;
            }
            writeln!(
                out,
                "{scene} {key}={size}: CPU {:.2} ms, GPU {:.2} ms",
                cpu.total_ms, gpu.total_ms
            )
            .map_err(io)?;
            rows.push((scene, key, size, metric, cpu, gpu));
        }
    }
    let _ = writeln!(
        md,
        "\nDeformable bodies (surface contact off) on the CPU and on {adapter}, {} iterations, median of {} frames after {} untimed\n",
        args.gpu_iterations, args.gpu_frames, args.gpu_settle
    );
    let _ = writeln!(
        md,
        "| scene | size | vertices | elements | CPU ms | GPU ms | of which host coarse ms | metric | CPU | GPU | up / down KiB |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for (scene, key, size, metric, cpu, gpu) in &rows {
        let _ = writeln!(
            md,
            "| {scene} | {key}={size} | {} | {} | {:.2} | {:.2} | {:.2} | {metric} | {:.6e} | {:.6e} | {:.0} / {:.0} |",
            cpu.vertices,
            cpu.elements,
            cpu.total_ms,
            gpu.total_ms,
            gpu.coarse_ms,
            cpu.metric,
            gpu.metric,
            gpu.up_kib,
            gpu.down_kib,
        );
        let _ = writeln!(
            csv,
            "{scene},{key}={size},\"{adapter}\",{},{},{},{:.3},{:.3},{:.3},{metric},{},{},{:.1},{:.1}",
            args.gpu_iterations,
            cpu.vertices,
            cpu.elements,
            cpu.total_ms,
            gpu.total_ms,
            gpu.coarse_ms,
            cpu.metric,
            gpu.metric,
            gpu.up_kib,
            gpu.down_kib,
        );
    }
    write!(out, "{md}").map_err(io)?;
    let path = out_dir.join("gpu_soft.csv");
    std::fs::write(&path, csv).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    writeln!(out, "\nwrote {}", path.display()).map_err(io)?;
    Ok(())
}
