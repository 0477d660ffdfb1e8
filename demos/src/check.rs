//! The check mode (`--frames N --screenshot out.png --exit`) and the judging of its
//! screenshots (`--image-stats`).
//!
//! One run takes, through Bevy's screenshot API:
//! 1. `<stem>_bg.png`: after a warm-up (shaders compiled), the scene's bodies and joint
//!    lines hidden: the view without them;
//! 2. `<stem>_early.png`: the bodies shown, frame 0;
//! 3. `out.png`: after N physics frames (one per rendered frame);
//! 4. `<stem>_hud.png`: the same with the text overlay, for people.
//!
//! The overlay is hidden in the first three, so that comparing them compares the scene.
//! `--image-stats out.png --background <stem>_bg.png --early <stem>_early.png` then fails
//! on a blank picture, on bodies that do not show, or on a scene that did not move.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bevy_internal::prelude::*;
use bevy_internal::render::view::screenshot::{Screenshot, ScreenshotCaptured, save_to_disk};
use bevy_internal::ui::Node;

use crate::Cli;
use crate::draw::{Body, DrawOptions};
use crate::scene::{Demo, SceneSet};

pub struct CheckPlugin;

impl Plugin for CheckPlugin {
    fn build(&self, app: &mut App) {
        let cli = app.world().resource::<Cli>().clone();
        app.insert_resource(CheckRun {
            phase: Phase::Warmup,
            frames: cli.frames.unwrap_or(60),
            screenshot: cli.screenshot.clone(),
            exit: cli.exit,
            started: Instant::now(),
            phase_frames: 0,
            phase_started: Instant::now(),
            requested: false,
            captured: 0,
        })
        .add_systems(Update, advance.after(SceneSet::Step));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Bodies shown while the renderer compiles its pipelines.
    Warmup,
    Background,
    Reveal,
    Early,
    Run,
    Final,
    FinalHud,
    Done,
}

/// The check run's state.
#[derive(Resource)]
pub struct CheckRun {
    phase: Phase,
    frames: u32,
    screenshot: Option<PathBuf>,
    exit: bool,
    started: Instant,
    phase_frames: u32,
    phase_started: Instant,
    /// Whether this phase's screenshot was asked for, and how many have been saved.
    requested: bool,
    captured: u32,
}

impl CheckRun {
    /// Whether the physics steps this frame (scene frame `frame`).
    pub fn wants_step(&self, frame: u32) -> bool {
        self.phase == Phase::Run && frame < self.frames
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.phase_frames = 0;
        self.phase_started = Instant::now();
        self.requested = false;
    }
}

/// `out.png` → `out_<suffix>.png`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("shot");
    path.with_file_name(format!("{stem}_{suffix}.png"))
}

#[allow(clippy::too_many_arguments)]
fn advance(
    mut commands: Commands,
    mut run: ResMut<CheckRun>,
    demo: Res<Demo>,
    mut bodies: Query<&mut Visibility, (With<Body>, Without<Node>)>,
    mut hud: Query<&mut Visibility, (With<Node>, Without<Body>)>,
    mut options: ResMut<DrawOptions>,
    mut exit: MessageWriter<AppExit>,
) {
    let run = &mut *run;
    run.phase_frames += 1;
    if run.started.elapsed() > Duration::from_secs(600) {
        error!("check: no result after 600 s (phase {:?})", run.phase);
        exit.write(AppExit::error());
        return;
    }
    if demo.error.is_some() {
        exit.write(AppExit::error());
        return;
    }
    let Some(scene) = demo.scene.as_ref() else {
        return;
    };
    // One screenshot per phase; `captured` counts the saved ones.
    let mut shoot = |run: &mut CheckRun, path: PathBuf| {
        if !run.requested {
            run.requested = true;
            info!("check: saving {}", path.display());
            commands
                .spawn(Screenshot::primary_window())
                .observe(save_to_disk(path))
                .observe(|_: On<ScreenshotCaptured>, mut run: ResMut<CheckRun>| {
                    run.captured += 1;
                });
        }
    };
    let Some(out) = run.screenshot.clone() else {
        // No screenshot: run the frames, then exit if asked.
        if run.phase == Phase::Warmup {
            run.enter(Phase::Run);
        }
        if run.phase == Phase::Run && scene.frame >= run.frames {
            run.enter(Phase::Done);
            if run.exit {
                exit.write(AppExit::Success);
            }
        }
        return;
    };
    match run.phase {
        Phase::Warmup => {
            set(&mut hud, Visibility::Hidden);
            if run.phase_frames >= 10 && run.phase_started.elapsed() > Duration::from_secs(3) {
                set(&mut bodies, Visibility::Hidden);
                // The joint lines are part of the bodies (a pendulum's chain).
                options.joints = false;
                run.enter(Phase::Background);
            }
        }
        Phase::Background => {
            if run.phase_frames >= 3 {
                shoot(run, sibling(&out, "bg"));
            }
            if run.captured == 1 {
                set(&mut bodies, Visibility::Inherited);
                options.joints = true;
                run.enter(Phase::Reveal);
            }
        }
        Phase::Reveal => {
            if run.phase_frames >= 3 {
                run.enter(Phase::Early);
            }
        }
        Phase::Early => {
            shoot(run, sibling(&out, "early"));
            if run.captured == 2 {
                run.enter(Phase::Run);
            }
        }
        Phase::Run => {
            if scene.frame >= run.frames {
                run.enter(Phase::Final);
            }
        }
        Phase::Final => {
            if run.phase_frames >= 2 {
                shoot(run, out.clone());
            }
            if run.captured == 3 {
                set(&mut hud, Visibility::Inherited);
                run.enter(Phase::FinalHud);
            }
        }
        Phase::FinalHud => {
            if run.phase_frames >= 3 {
                shoot(run, sibling(&out, "hud"));
            }
            if run.captured == 4 {
                info!(
                    "check: `{}` done: {} frames, {:.1} s",
                    scene.name,
                    scene.frame,
                    run.started.elapsed().as_secs_f64()
                );
                run.enter(Phase::Done);
                if run.exit {
                    exit.write(AppExit::Success);
                }
            }
        }
        Phase::Done => {}
    }
}

fn set<F: bevy_internal::ecs::query::QueryFilter>(
    q: &mut Query<&mut Visibility, F>,
    v: Visibility,
) {
    for mut vis in q.iter_mut() {
        *vis = v;
    }
}

/// An RGB picture.
struct Picture {
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
}

fn load(path: &Path) -> Result<Picture, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let channels = match (info.color_type, info.bit_depth) {
        (png::ColorType::Rgb, png::BitDepth::Eight) => 3,
        (png::ColorType::Rgba, png::BitDepth::Eight) => 4,
        other => {
            return Err(format!(
                "{}: unexpected PNG format {other:?}",
                path.display()
            ));
        }
    };
    let rgb = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    Ok(Picture {
        width: info.width,
        height: info.height,
        rgb,
    })
}

/// Share of pixels that differ by more than 16 levels in some channel.
fn differing(a: &Picture, b: &Picture) -> Result<f64, String> {
    if (a.width, a.height) != (b.width, b.height) {
        return Err(format!(
            "sizes differ: {}x{} and {}x{}",
            a.width, a.height, b.width, b.height
        ));
    }
    let n = a
        .rgb
        .iter()
        .zip(&b.rgb)
        .filter(|(p, q)| (0..3).any(|c| p[c].abs_diff(q[c]) > 16))
        .count();
    Ok(n as f64 / a.rgb.len().max(1) as f64)
}

/// Least number of distinct colours of a picture that is not blank.
const MIN_COLOURS: usize = 64;
/// Largest share of the picture one colour may cover.
const MAX_DOMINANT: f64 = 0.95;
/// Least share of pixels that the bodies must change against the background, and that
/// the simulation must change against frame 0.
const MIN_BODIES: f64 = 0.005;
const MIN_MOTION: f64 = 0.001;

/// `--image-stats`: prints `PATH: WxH, C colours, dominant D%[, bodies B%][, moved M%]`
/// and exits 1 if the picture fails a check.
pub fn image_stats(path: &Path, background: Option<&Path>, early: Option<&Path>) -> AppExit {
    match judge(path, background, early) {
        Ok((line, failures)) => {
            if failures.is_empty() {
                println!("{line}  ok");
                AppExit::Success
            } else {
                println!("{line}  FAIL: {}", failures.join("; "));
                AppExit::error()
            }
        }
        Err(e) => {
            println!("{}: FAIL: {e}", path.display());
            AppExit::error()
        }
    }
}

fn judge(
    path: &Path,
    background: Option<&Path>,
    early: Option<&Path>,
) -> Result<(String, Vec<String>), String> {
    let pic = load(path)?;
    let mut counts: HashMap<[u8; 3], usize> = HashMap::new();
    for p in &pic.rgb {
        *counts.entry(*p).or_default() += 1;
    }
    let colours = counts.len();
    let dominant = counts.values().copied().max().unwrap_or(0) as f64 / pic.rgb.len().max(1) as f64;
    let mut line = format!(
        "{}: {}x{}, {} colours, dominant {:.1}%",
        path.display(),
        pic.width,
        pic.height,
        colours,
        dominant * 100.0
    );
    let mut failures = Vec::new();
    if colours < MIN_COLOURS || dominant > MAX_DOMINANT {
        failures.push(format!(
            "blank (fewer than {MIN_COLOURS} colours or one over {:.0}%)",
            MAX_DOMINANT * 100.0
        ));
    }
    if let Some(bg) = background {
        let d = differing(&pic, &load(bg)?)?;
        line += &format!(", bodies {:.2}%", d * 100.0);
        if d < MIN_BODIES {
            failures.push(format!(
                "the bodies change under {:.1}% of the background",
                MIN_BODIES * 100.0
            ));
        }
    }
    if let Some(early) = early {
        let d = differing(&pic, &load(early)?)?;
        line += &format!(", moved {:.2}%", d * 100.0);
        if d < MIN_MOTION {
            failures.push(format!(
                "unchanged since frame 0 (under {:.1}% of pixels)",
                MIN_MOTION * 100.0
            ));
        }
    }
    Ok((line, failures))
}
