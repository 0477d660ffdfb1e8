//! `avbd`: the scene runner. `avbd list` prints the scenes; `avbd run <scene>` runs one
//! headless and prints a table, or one JSON object with `--json`; `avbd render <scene>`
//! runs one and writes a PNG of its last frame or a GIF of the run; `avbd bench` (feature
//! `bench`, on by default) compares frame cost and quality with rapier3d.

#[cfg(feature = "bench")]
mod bench;
#[cfg(feature = "bench")]
mod plot;
#[cfg(feature = "bench")]
mod rapier_scenes;
#[cfg(feature = "bench")]
mod rapier_soft;
#[cfg(feature = "bench")]
mod soft_bench;

use std::io::Write;
use std::process::ExitCode;

use bevy_avbd::scenes::{SCENES, Scene};
use bevy_avbd::{Backend, SolverConfig};
use clap::{Parser, Subcommand};
use serde_json::json;

#[derive(Parser)]
#[command(name = "avbd", version, about = "AVBD physics scene runner")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lists the scenes, their parameters and defaults.
    List,
    /// Runs a scene headless and reports timing and metrics.
    Run {
        /// Scene name (see `avbd list`).
        scene: String,
        /// Scene parameter, `key=value` (repeatable).
        #[arg(long = "set", value_parser = parse_kv)]
        set: Vec<(String, f64)>,
        /// Frames to run (default: the scene's own).
        #[arg(long)]
        frames: Option<u32>,
        /// Iteration budget per frame.
        #[arg(long)]
        iterations: Option<u32>,
        /// Time step (s).
        #[arg(long)]
        dt: Option<f32>,
        /// Solver config override, `field=value` (repeatable; see README for the fields).
        #[arg(long = "config", value_parser = parse_kv)]
        config: Vec<(String, f64)>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Solver backend: cpu, gpu (error without an adapter) or auto.
        #[arg(long, value_enum, default_value_t = BackendArg::Cpu)]
        backend: BackendArg,
        /// Write every frame's surfaces as Wavefront OBJ files into this directory:
        /// `frame_00000.obj` (the start) to `frame_N.obj` (after frame N).
        #[arg(long, value_name = "DIR")]
        export: Option<std::path::PathBuf>,
    },
    /// Runs a scene headless and writes a picture: a PNG of the last frame, or an
    /// animated GIF of the run (wgpu, offscreen; needs a GPU adapter, lavapipe will do).
    Render {
        /// Scene name (see `avbd list`).
        scene: String,
        /// Scene parameter, `key=value` (repeatable).
        #[arg(long = "set", value_parser = parse_kv)]
        set: Vec<(String, f64)>,
        /// Frames to run (default: the scene's own).
        #[arg(long)]
        frames: Option<u32>,
        /// Solver config override, `field=value` (repeatable).
        #[arg(long = "config", value_parser = parse_kv)]
        config: Vec<(String, f64)>,
        /// Output file: `.png` (the last frame) or `.gif` (the run).
        #[arg(long, value_name = "FILE", default_value = "render.png")]
        out: std::path::PathBuf,
        /// Picture size, `WxH`.
        #[arg(long, default_value = "480x300")]
        size: String,
        /// Camera `eye_x,eye_y,eye_z,target_x,target_y,target_z` (default: the bodies'
        /// bounding box framed from a fixed 3/4 view).
        #[arg(long, allow_hyphen_values = true)]
        camera: Option<String>,
        /// GIF: keep every K-th frame (default: at most about 50 pictures).
        #[arg(long, value_name = "K")]
        every: Option<u32>,
        /// Solver backend of the run pictured: cpu, gpu (error without an adapter) or auto.
        #[arg(long, value_enum, default_value_t = BackendArg::Cpu)]
        backend: BackendArg,
    },
    /// Frame-budget benchmark against rapier3d: Markdown table on stdout, CSV and PNG files.
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BackendArg {
    Cpu,
    Gpu,
    Auto,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Cpu => Backend::Cpu,
            BackendArg::Gpu => Backend::Gpu,
            BackendArg::Auto => Backend::Auto,
        }
    }
}

/// The `gpu` object of `avbd run --json` (null on the CPU backend): adapter, memory per
/// body/contact/joint, per-kernel times of the last frame from timestamp queries (or
/// `"unsupported"`), serial-fallback bodies, bytes uploaded and read back and dispatches
/// in the last frame.
pub(crate) fn gpu_report(w: &bevy_avbd::PhysicsWorld) -> serde_json::Value {
    let (Some(m), Some(t)) = (w.gpu_memory(), w.gpu_timings()) else {
        return serde_json::Value::Null;
    };
    json!({
        "adapter": w.adapter(),
        "memory": {
            "bytes_per_body": m.bytes_per_body,
            "bytes_per_contact": m.bytes_per_contact,
            "bytes_per_joint": m.bytes_per_joint,
            "fixed_bytes": m.fixed_bytes,
            "deformable_bytes": m.deformable_bytes,
            "total_bytes": m.total_bytes,
        },
        "timings_ms": if t.supported {
            let mut stages: serde_json::Map<String, serde_json::Value> =
                t.stages().iter().map(|&(k, v)| (k.to_string(), json!(v))).collect();
            stages.insert("span".into(), json!(t.span_ms));
            serde_json::Value::Object(stages)
        } else {
            json!("unsupported")
        },
        "host_ms": {
            "prepare": t.host.prepare_ms,
            "upload": t.host.upload_ms,
            "wait": t.host.wait_ms,
            "unpack": t.host.unpack_ms,
        },
        "serial_bodies": w.gpu_serial_bodies(),
        "upload_bytes": w.gpu_upload_bytes(),
        "body_upload_bytes": w.gpu_body_upload_bytes(),
        "download_bytes": w.gpu_traffic().map(|t| t.download_bytes),
        "dispatches": w.gpu_traffic().map(|t| t.dispatches),
        "deformable_upload_bytes": w.gpu_deformable_traffic().map(|t| t.0),
        "deformable_download_bytes": w.gpu_deformable_traffic().map(|t| t.1),
        "contact_broad_upload_bytes": w.gpu_contact_broad_phase_traffic().map(|t| t.0),
        "contact_broad_download_bytes": w.gpu_contact_broad_phase_traffic().map(|t| t.1),
        "reallocations": w.gpu_reallocations(),
    })
}

pub(crate) fn parse_kv(s: &str) -> Result<(String, f64), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected key=value, got `{s}`"))?;
    // The contact model, the narrow phase and the GPU's contact broad phase by name (or by
    // their numbers).
    let v: f64 = match (k.trim(), v.trim()) {
        ("contact_model", "al") => 0.0,
        ("contact_model", "barrier") => 1.0,
        ("narrow_phase", "primitive") => 0.0,
        ("narrow_phase", "parry") => 1.0,
        ("gpu_contact_broad_phase", "auto") => 0.0,
        ("gpu_contact_broad_phase", "device") => 1.0,
        ("gpu_contact_broad_phase", "host") => 2.0,
        (_, v) => v
            .parse()
            .map_err(|e| format!("`{v}` is not a number: {e}"))?,
    };
    Ok((k.trim().to_string(), v))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

/// [`Scene::run`], writing the OBJ of the start and of every frame into `dir`.
fn run_exporting(sc: &mut Scene, frames: u32, dir: &std::path::Path) -> Result<Vec<f64>, String> {
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(io)?;
    bevy_avbd::export::write_frame(&sc.world, dir, 0).map_err(io)?;
    let mut times = Vec::with_capacity(frames as usize);
    for f in 1..=frames {
        sc.step().map_err(|e| e.to_string())?;
        times.push(sc.world.stats().total_ms);
        bevy_avbd::export::write_frame(&sc.world, dir, f).map_err(io)?;
    }
    Ok(times)
}

/// `avbd render`: checks the arguments, then opens the device (so a missing adapter
/// fails before the physics runs), runs the scene and writes the picture.
#[allow(clippy::too_many_arguments)]
fn render(
    scene: &str,
    set: &[(String, f64)],
    frames: Option<u32>,
    overrides: &[(String, f64)],
    path: &std::path::Path,
    size: &str,
    camera: Option<String>,
    every: Option<u32>,
    backend: BackendArg,
) -> Result<String, String> {
    use bevy_avbd::render::{self, RenderOptions, Renderer};
    let s = |e: render::RenderError| e.to_string();
    render::Format::of_path(path).map_err(s)?;
    let (width, height) = render::parse_size(size).map_err(s)?;
    let camera = camera
        .map(|c| render::parse_camera(&c))
        .transpose()
        .map_err(s)?;
    let mut config = SolverConfig::default();
    for (k, v) in overrides {
        config.set(k, *v).map_err(|e| e.to_string())?;
    }
    let mut sc = Scene::build_on(scene, set, config, backend.into()).map_err(|e| e.to_string())?;
    let frames = frames.unwrap_or_else(|| bevy_avbd::scenes::spec(scene).unwrap().default_frames);
    let every = every.unwrap_or(frames.div_ceil(50).max(1));
    let renderer = Renderer::new().map_err(s)?;
    let options = RenderOptions {
        width,
        height,
        camera,
    };
    let r = render::render_scene(&renderer, &mut sc, frames, every, &options, path).map_err(s)?;
    Ok(format!(
        "wrote {} ({width}x{height}, {} picture{}, {} frames, {} bytes; {})",
        path.display(),
        r.images,
        if r.images == 1 { "" } else { "s" },
        frames,
        r.bytes,
        renderer.adapter()
    ))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Output goes through `writeln!`: a closed pipe (`avbd list | head`) ends the program
    // quietly instead of panicking like `println!`.
    let mut out = std::io::stdout().lock();
    match run(cli, &mut out) {
        Ok(code) => code,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, out: &mut impl Write) -> std::io::Result<ExitCode> {
    match cli.command {
        #[cfg(feature = "bench")]
        Command::Bench(args) => match bench::bench(args, out) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(e) if e.contains("Broken pipe") => Ok(ExitCode::SUCCESS),
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::FAILURE)
            }
        },
        Command::Render {
            scene,
            set,
            frames,
            config,
            out: path,
            size,
            camera,
            every,
            backend,
        } => match render(
            &scene, &set, frames, &config, &path, &size, camera, every, backend,
        ) {
            Ok(line) => {
                writeln!(out, "{line}")?;
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("error: {e}");
                Ok(ExitCode::from(2))
            }
        },
        Command::List => {
            for s in SCENES {
                writeln!(
                    out,
                    "{:<16} {} ({} frames)",
                    s.name, s.description, s.default_frames
                )?;
                for p in s.params {
                    writeln!(out, "    {:<12} = {:<10} {}", p.name, p.default, p.help)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            scene,
            set,
            frames,
            iterations,
            dt,
            config: overrides,
            json,
            backend,
            export,
        } => {
            let mut config = SolverConfig::default();
            for (k, v) in &overrides {
                if let Err(e) = config.set(k, *v) {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(2));
                }
            }
            if let Some(k) = iterations {
                config.iterations = k;
            }
            if let Some(h) = dt {
                config.dt = h;
            }
            let mut sc = match Scene::build_on(&scene, &set, config, backend.into()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let frames =
                frames.unwrap_or_else(|| bevy_avbd::scenes::spec(&scene).unwrap().default_frames);
            let ran = match &export {
                None => sc.run(frames).map_err(|e| e.to_string()),
                Some(dir) => run_exporting(&mut sc, frames, dir),
            };
            let mut times = match ran {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            times.sort_by(f64::total_cmp);
            let (median, p95, max) = (
                percentile(&times, 0.5),
                percentile(&times, 0.95),
                times.last().copied().unwrap_or(0.0),
            );
            let w = &sc.world;
            let metrics = sc.metrics();
            if json {
                let report = json!({
                    "scene": sc.name,
                    "params": sc.params,
                    "backend": w.backend(),
                    "adapter": w.adapter(),
                    "bodies": w.body_count(),
                    "constraints": w.joint_count() + w.contact_count(),
                    "colors": w.stats().colors,
                    "iterations": w.config.iterations,
                    "dt": w.config.dt,
                    "frames": frames,
                    "timing_ms": {"median": median, "p95": p95, "max": max},
                    "metrics": metrics,
                    "profile_ms": sc.profile(),
                    "kernel_ms": sc.kernel_profile(),
                    "kernel_dispatches": sc.kernel_dispatches(),
                    "gpu": gpu_report(w),
                });
                writeln!(out, "{report}")?;
            } else {
                writeln!(out, "scene        {}", sc.name)?;
                for (k, v) in &sc.params {
                    writeln!(out, "  {k:<12} {v}")?;
                }
                match w.adapter() {
                    Some(adapter) => writeln!(out, "backend      gpu ({adapter})")?,
                    None => writeln!(
                        out,
                        "backend      cpu (rayon, {} threads)",
                        rayon::current_num_threads()
                    )?,
                }
                writeln!(out, "bodies       {}", w.body_count())?;
                writeln!(
                    out,
                    "constraints  {} joints + {} contacts",
                    w.joint_count(),
                    w.contact_count()
                )?;
                writeln!(out, "colors       {}", w.stats().colors)?;
                writeln!(
                    out,
                    "iterations   {}   dt {:.5} s   frames {}",
                    w.config.iterations, w.config.dt, frames
                )?;
                writeln!(
                    out,
                    "ms/frame     median {median:.3}   p95 {p95:.3}   max {max:.3}"
                )?;
                if let (Some(m), Some(t)) = (w.gpu_memory(), w.gpu_timings()) {
                    writeln!(
                        out,
                        "gpu memory   {} B/body, {} B/contact, {} B/joint, {:.2} MiB allocated \
                         ({:.2} MiB deformable)",
                        m.bytes_per_body,
                        m.bytes_per_contact,
                        m.bytes_per_joint,
                        m.total_bytes as f64 / (1024.0 * 1024.0),
                        m.deformable_bytes as f64 / (1024.0 * 1024.0)
                    )?;
                    writeln!(
                        out,
                        "gpu host ms  prepare {:.3}   upload {:.3}   wait {:.3}   unpack {:.3} (last frame)",
                        t.host.prepare_ms, t.host.upload_ms, t.host.wait_ms, t.host.unpack_ms
                    )?;
                    if t.supported {
                        let stages: Vec<String> = t
                            .stages()
                            .iter()
                            .map(|(k, v)| format!("{k} {v:.3}"))
                            .collect();
                        writeln!(
                            out,
                            "gpu ms       {}   span {:.3} (last frame, timestamps)",
                            stages.join("   "),
                            t.span_ms
                        )?;
                    } else {
                        writeln!(
                            out,
                            "gpu ms       unsupported (no TIMESTAMP_QUERY on this adapter)"
                        )?;
                    }
                }
                let profile: Vec<String> = sc
                    .profile()
                    .iter()
                    .filter(|(k, _)| *k != "total")
                    .map(|(k, v)| format!("{k} {v:.3}"))
                    .collect();
                writeln!(out, "mean ms      {}", profile.join("   "))?;
                writeln!(out, "metrics:")?;
                for (k, v) in &metrics {
                    writeln!(out, "  {k:<24} {v}")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
