//! `demos`: bevy_avbd's scene catalogue in a window.
//!
//! Each scene is built by the library's own builders (`bevy_avbd::scenes::Scene::build`),
//! stepped by a system at 60 Hz (at most one step per rendered frame: a scene slower than
//! real time runs in slow motion instead of falling behind), and drawn with Bevy meshes:
//! rigid colliders at their body's pose, deformable surfaces rewritten from the world's
//! vertex positions every step, joints as gizmo lines.
//!
//! `--scene NAME --frames N --screenshot out.png --exit` is the check mode that
//! `demos/check.sh` runs under Xvfb; `--image-stats` judges its screenshots.

mod camera;
mod check;
mod draw;
mod hud;
mod scene;

use std::path::PathBuf;

use bevy_internal::prelude::*;
use bevy_internal::window::{PresentMode, WindowResolution};
use clap::Parser;

/// Command line.
#[derive(Parser, Resource, Clone, Debug)]
#[command(about = "bevy_avbd's scenes in a window (keys: H for help)")]
pub struct Cli {
    /// Scene to open (any name of `avbd list`; `--list` shows the demo's order).
    #[arg(long, default_value = "pile")]
    pub scene: String,
    /// Scene parameter override, `name=value` (repeatable), as `avbd run --set`.
    #[arg(long = "param", value_parser = parse_param)]
    pub params: Vec<(String, f64)>,
    /// Check mode: physics frames to step (one per rendered frame) before the screenshot.
    #[arg(long)]
    pub frames: Option<u32>,
    /// Check mode: save the window to this PNG after `--frames` frames; the same run also
    /// saves `<stem>_bg.png` (the scene's bodies hidden) and `<stem>_early.png` (frame 0).
    #[arg(long)]
    pub screenshot: Option<PathBuf>,
    /// Check mode: exit once the screenshots are saved (or after `--frames` frames).
    #[arg(long)]
    pub exit: bool,
    /// Print the demo's scene list and exit.
    #[arg(long)]
    pub list: bool,
    /// Judge a screenshot instead of opening a window: print its size and number of
    /// colours, fail (exit 1) if it is blank, or hardly differs from `--background` or
    /// `--early`.
    #[arg(long, value_name = "PNG")]
    pub image_stats: Option<PathBuf>,
    /// With `--image-stats`: the same view without the scene's bodies.
    #[arg(long, value_name = "PNG")]
    pub background: Option<PathBuf>,
    /// With `--image-stats`: the same view at frame 0.
    #[arg(long, value_name = "PNG")]
    pub early: Option<PathBuf>,
}

impl Cli {
    /// The check mode: a run of `--frames` frames that saves `--screenshot`.
    pub fn checking(&self) -> bool {
        self.frames.is_some() || self.screenshot.is_some()
    }
}

fn parse_param(s: &str) -> Result<(String, f64), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected name=value"))?;
    let v: f64 = v.parse().map_err(|e| format!("`{s}`: {e}"))?;
    Ok((k.to_string(), v))
}

fn main() -> AppExit {
    let cli = Cli::parse();
    if cli.list {
        for (i, name) in scene::DEMO_SCENES.iter().enumerate() {
            let desc = bevy_avbd::scenes::spec(name).map_or("", |s| s.description);
            println!("{:>2}  {name:<16} {desc}", i + 1);
        }
        return AppExit::Success;
    }
    if let Some(path) = &cli.image_stats {
        return check::image_stats(path, cli.background.as_deref(), cli.early.as_deref());
    }
    if bevy_avbd::scenes::spec(&cli.scene).is_none() {
        eprintln!("unknown scene `{}` (see --list or `avbd list`)", cli.scene);
        return AppExit::error();
    }

    let checking = cli.checking();
    let window = Window {
        title: "bevy_avbd demos".into(),
        resolution: WindowResolution::new(1280, 720),
        // The check mode renders as fast as the (software) renderer allows.
        present_mode: if checking {
            PresentMode::AutoNoVsync
        } else {
            PresentMode::AutoVsync
        },
        ..default()
    };
    let mut app = App::new();
    app.add_plugins(DefaultPlugins.set(WindowPlugin {
        primary_window: Some(window),
        ..default()
    }))
    .insert_resource(cli.clone())
    .add_plugins((
        camera::CameraPlugin,
        scene::ScenePlugin,
        draw::DrawPlugin,
        hud::HudPlugin,
    ));
    if checking {
        app.add_plugins(check::CheckPlugin);
    }
    app.run()
}
