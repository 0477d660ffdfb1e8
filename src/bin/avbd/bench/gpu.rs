//! `avbd bench --backend gpu|auto`: the GPU scaling series (no rapier).

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use bevy_avbd::SolverConfig;
use bevy_avbd::scenes::Scene;

use super::BenchArgs;

/// One row of the GPU scaling series.
struct GpuRow {
    scene: &'static str,
    param: String,
    bodies: usize,
    contacts: usize,
    /// Body pairs in contact (one manifold per pair of primitive shapes).
    manifolds: usize,
    colors: usize,
    serial: usize,
    build_s: f64,
    collision_ms: f64,
    solver_ms: f64,
    total_ms: f64,
    /// Integration, contact warm start (and store), adjacency, colouring, primal, dual (ms
    /// per frame, timestamp queries), when supported.
    kernels: Option<[f64; 7]>,
    /// Whole GPU span of the step (first pass start to last pass end), when timed.
    span_ms: Option<f64>,
    /// Host side of the GPU solve: adjacency, upload encoding, wait (GPU execution and
    /// transfers), unpack (ms per frame).
    host: [f64; 4],
    memory: Option<bevy_avbd::gpu::GpuMemory>,
    /// Bytes up and down and dispatches of the last timed frame.
    traffic: bevy_avbd::gpu::GpuTraffic,
    /// Timed frames whose step ran again (more than one submission).
    runs_again: usize,
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
pub(super) fn gpu_series(args: &BenchArgs, out: &mut impl Write) -> Result<(), String> {
    let cases = cases(args)?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench/gpu"));
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let config = SolverConfig {
        iterations: args.gpu_iterations,
        gpu_velocity_readback: args.gpu_velocity_readback,
        ..SolverConfig::default()
    };
    let io = |e: std::io::Error| e.to_string();
    let (mut rows, mut failed, mut adapter) = (Vec::new(), Vec::new(), None);
    for case in cases {
        let (scene, key, value) = case;
        match measure(args, &config, case, &mut adapter) {
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
    let mut md = heading(args, &adapter);
    stage_table(&mut md, &rows);
    host_table(&mut md, &rows);
    traffic_table(&mut md, &rows, args.gpu_frames);
    for f in &failed {
        let _ = writeln!(md, "\nnot run: {f}");
    }
    write!(out, "{md}").map_err(io)?;
    let path = out_dir.join("gpu.csv");
    std::fs::write(&path, csv(&rows, &adapter, args.gpu_iterations))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    writeln!(out, "\nwrote {}", path.display()).map_err(io)?;
    Ok(())
}

/// One size of one scene: (scene, parameter, value).
type Case = (&'static str, &'static str, f64);

/// The series' cases, after checking the arguments.
fn cases(args: &BenchArgs) -> Result<Vec<Case>, String> {
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
                "the GPU series runs `pile` and `large_pyramid` (or, alone, the deformable \
                 `cantilever`, `soft_free_fall`, `cloth_hang`), not `{s}`"
            ));
        }
    }
    let mut cases = Vec::new();
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
    Ok(cases)
}

/// Per timed frame: the step's times, and the GPU's stages and host phases.
#[derive(Default)]
struct Samples {
    collision: Vec<f64>,
    solver: Vec<f64>,
    total: Vec<f64>,
    kernels: [Vec<f64>; 7],
    span: Vec<f64>,
    host: [Vec<f64>; 4],
    runs_again: usize,
}

impl Samples {
    /// Adds the frame `sc` just finished.
    fn push(&mut self, sc: &Scene) {
        self.runs_again += sc.world.gpu_traffic().is_some_and(|t| t.submissions > 1) as usize;
        let st = sc.world.stats();
        self.collision.push(st.collision_ms);
        self.solver.push(st.solver_ms);
        self.total.push(st.total_ms);
        let Some(t) = sc.world.gpu_timings() else {
            return;
        };
        let h = t.host;
        for (v, x) in self
            .host
            .iter_mut()
            .zip([h.prepare_ms, h.upload_ms, h.wait_ms, h.unpack_ms])
        {
            v.push(x);
        }
        if t.supported {
            for (v, (_, x)) in self.kernels.iter_mut().zip(t.stages()) {
                v.push(x);
            }
            self.span.push(t.span_ms);
        }
    }
}

/// Builds one case, runs its untimed and timed frames and takes the medians; the first
/// case to build names the adapter.
fn measure(
    args: &BenchArgs,
    config: &SolverConfig,
    (scene, key, value): Case,
    adapter: &mut Option<String>,
) -> Result<GpuRow, String> {
    let t0 = Instant::now();
    let mut sc = Scene::build_on(
        scene,
        &[(key.to_string(), value)],
        config.clone(),
        args.backend.into(),
    )
    .map_err(|e| e.to_string())?;
    let build_s = t0.elapsed().as_secs_f64();
    if adapter.is_none() {
        *adapter = sc.world.adapter();
    }
    for _ in 0..args.gpu_settle {
        sc.step().map_err(|e| e.to_string())?;
    }
    let mut samples = Samples::default();
    for _ in 0..args.gpu_frames {
        sc.begin_frame().map_err(|e| e.to_string())?;
        if args.gpu_overlap_ms > 0.0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(
                args.gpu_overlap_ms * 1e-3,
            ));
        }
        sc.finish_frame().map_err(|e| e.to_string())?;
        samples.push(&sc);
    }
    let w = &sc.world;
    let Samples {
        collision,
        solver,
        total,
        kernels,
        span,
        host,
        runs_again,
    } = samples;
    Ok(GpuRow {
        scene,
        param: format!("{key}={value}"),
        bodies: w.body_count(),
        contacts: w.contact_count(),
        manifolds: w.stats().manifolds,
        colors: w.stats().colors,
        serial: w.gpu_serial_bodies().unwrap_or(0),
        build_s,
        collision_ms: median(collision),
        solver_ms: median(solver),
        total_ms: median(total),
        kernels: (!kernels[0].is_empty()).then(|| kernels.map(median)),
        span_ms: (!span.is_empty()).then(|| median(span)),
        host: host.map(median),
        memory: w.gpu_memory(),
        traffic: w.gpu_traffic().unwrap_or_default(),
        runs_again,
    })
}

/// The series' heading: the adapter and how it was run.
fn heading(args: &BenchArgs, adapter: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\nGPU series on {adapter}, {} iterations, median of {} frames after {} untimed, {}{}\n",
        args.gpu_iterations,
        args.gpu_frames,
        args.gpu_settle,
        match args.gpu_velocity_readback {
            true => "poses and velocities read back",
            false => "poses read back (velocities stay on the device)",
        },
        if args.gpu_overlap_ms > 0.0 {
            format!(
                "; {} ms of caller work between begin_step and finish_step (not in the times)",
                args.gpu_overlap_ms
            )
        } else {
            String::new()
        }
    );
    md
}

/// The step's times, the GPU's stages and its memory, per case.
fn stage_table(md: &mut String, rows: &[GpuRow]) {
    let _ = writeln!(
        md,
        "| scene | size | bodies | contacts | colours | collision ms | solver ms | total ms | GPU broad phase / integration / warm start / adjacency / colouring / primal / dual ms | B/body | B/contact | GPU MiB |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let k = r
            .kernels
            .map(|k| k.map(|x| format!("{x:.1}")).join(" / "))
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
    }
}

/// Where the solver's time goes: the GPU solve's host phases, the rest of the step on
/// the CPU (the joint islands, the momentum projection, the step's bookkeeping) and the
/// GPU's own span.
fn host_table(md: &mut String, rows: &[GpuRow]) {
    let _ = writeln!(
        md,
        "\n| scene | size | prepare ms | upload ms | wait (GPU + transfers) ms | unpack ms | other CPU ms | GPU span ms |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for r in rows {
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
}

/// What crosses the bus and how many dispatches a step records (the last timed frame),
/// and the contact structure the solver sees per body.
fn traffic_table(md: &mut String, rows: &[GpuRow], frames: u32) {
    let _ = writeln!(
        md,
        "\n| scene | size | up KiB/step | of which bodies KiB | down KiB/step | dispatches (indirect) | manifolds/body | points/body | colours | frames run again |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let t = r.traffic;
        let per_body = |x: usize| x as f64 / r.bodies.max(1) as f64;
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {} ({}) | {:.2} | {:.2} | {} | {} of {} |",
            r.scene,
            r.param,
            t.upload_bytes as f64 / 1024.0,
            t.body_upload_bytes as f64 / 1024.0,
            t.download_bytes as f64 / 1024.0,
            t.dispatches,
            t.indirect_dispatches,
            per_body(r.manifolds),
            per_body(r.contacts),
            r.colors,
            r.runs_again,
            frames,
        );
    }
}

/// The series as CSV (`gpu.csv`), a row per case.
fn csv(rows: &[GpuRow], adapter: &str, iterations: u32) -> String {
    let mut csv = String::from(
        "scene,param,adapter,iterations,bodies,contacts,colors,serial,build_s,collision_ms,solver_ms,total_ms,gpu_broad_phase_ms,gpu_integration_ms,gpu_warm_start_ms,gpu_adjacency_ms,gpu_coloring_ms,gpu_primal_ms,gpu_dual_ms,bytes_per_body,bytes_per_contact,bytes_per_joint,gpu_total_bytes,gpu_span_ms,host_prepare_ms,host_upload_ms,host_wait_ms,host_unpack_ms,manifolds,upload_bytes,body_upload_bytes,download_bytes,dispatches,indirect_dispatches,frames_run_again\n",
    );
    for r in rows {
        let m = r.memory.unwrap_or_default();
        let kc = r
            .kernels
            .map(|k| k.map(|x| x.to_string()).join(","))
            .unwrap_or_else(|| ",,,,,,".into());
        let _ = writeln!(
            csv,
            "{},{},\"{}\",{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{kc},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{},{}",
            r.scene,
            r.param,
            adapter,
            iterations,
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
            r.manifolds,
            r.traffic.upload_bytes,
            r.traffic.body_upload_bytes,
            r.traffic.download_bytes,
            r.traffic.dispatches,
            r.traffic.indirect_dispatches,
            r.runs_again,
        );
    }
    csv
}
