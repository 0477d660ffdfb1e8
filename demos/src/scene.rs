//! The scene being shown: building it with the library's scene builders, switching scenes
//! by key, and stepping it.

use std::time::Instant;

use bevy_avbd::SolverConfig;
use bevy_avbd::scenes::{DEFORMABLE_SCENES, Scene};
use bevy_internal::prelude::*;

use crate::Cli;
use crate::camera::{self, Follow, OrbitCamera};
use crate::check::CheckRun;
use crate::draw;

/// The demo's scenes in key order (1–9 pick the first nine, N/P walk the list): the
/// paper's rigid-body showcases, then every deformable scene.
pub const DEMO_SCENES: &[&str] = &[
    "pile",
    "pendulum",
    "breakable_wall",
    "card_tower",
    "joint_grid",
    "cantilever",
    "hanging_bar",
    "soft_free_fall",
    "twisting_beam",
    "cloth_hang",
    "soft_on_chain",
    "soft_drop",
    "soft_stack",
    "squishy_balls",
    "cloth_drape",
    "cloth_pile",
    "soft_incline",
    "compress",
    "tunnelling",
    "mattress",
    "soft_collision",
];

// Every deformable scene of the catalogue is in the list.
const _: () = {
    let mut i = 0;
    while i < DEFORMABLE_SCENES.len() {
        let mut found = false;
        let mut j = 0;
        while j < DEMO_SCENES.len() {
            if str_eq(DEFORMABLE_SCENES[i], DEMO_SCENES[j]) {
                found = true;
            }
            j += 1;
        }
        assert!(found, "a deformable scene is missing from DEMO_SCENES");
        i += 1;
    }
};

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The demo's parameters of a scene opened by key: the catalogue's defaults, but a
/// 40×40 joint grid (the README's picture; the 100×100 benchmark steps at about 65 ms on
/// 2 cores: `--scene joint_grid --param rows=100 --param cols=100`).
pub fn demo_params(name: &str) -> Vec<(String, f64)> {
    match name {
        "joint_grid" => vec![("rows".into(), 40.0), ("cols".into(), 40.0)],
        _ => Vec::new(),
    }
}

/// Order of the per-frame systems.
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SceneSet {
    /// Keys, scene (re)loading.
    Input,
    /// The physics step.
    Step,
    /// Meshes and gizmos from the world's state.
    Draw,
}

/// Marks every entity of the current scene (despawned on a switch).
#[derive(Component)]
pub struct SceneEntity;

/// The scene shown and its run state.
#[derive(Resource)]
pub struct Demo {
    pub list: Vec<&'static str>,
    pub index: usize,
    pub scene: Option<Scene>,
    /// Why the scene could not be built or stepped.
    pub error: Option<String>,
    pub paused: bool,
    /// Steps to take while paused (key S).
    pub single_steps: u32,
    /// Simulated time not yet stepped (s), at most one step.
    accumulator: f32,
    /// Wall-clock milliseconds of the last step, and a smoothed mean.
    pub last_step_ms: f64,
    pub mean_step_ms: f64,
    /// Whether the world was stepped this frame (the meshes are then rewritten).
    pub stepped: bool,
    /// The scene to load at the start of the next frame.
    pending: Option<usize>,
    /// Parameter overrides of the command line's scene.
    cli_scene: String,
    cli_params: Vec<(String, f64)>,
}

impl Demo {
    pub fn name(&self) -> &'static str {
        self.list[self.index]
    }

    pub fn request(&mut self, index: usize) {
        self.pending = Some(index % self.list.len());
    }
}

pub struct ScenePlugin;

impl Plugin for ScenePlugin {
    fn build(&self, app: &mut App) {
        let cli = app.world().resource::<Cli>().clone();
        let mut list = DEMO_SCENES.to_vec();
        // A catalogue scene outside the demo's list (`--scene stack`) is added at its end.
        let index = match list.iter().position(|&n| n == cli.scene) {
            Some(i) => i,
            None => {
                let spec = bevy_avbd::scenes::spec(&cli.scene).expect("checked in main");
                list.push(spec.name);
                list.len() - 1
            }
        };
        app.insert_resource(Demo {
            list,
            index,
            scene: None,
            error: None,
            paused: false,
            single_steps: 0,
            accumulator: 0.0,
            last_step_ms: 0.0,
            mean_step_ms: 0.0,
            stepped: false,
            pending: Some(index),
            cli_scene: cli.scene.clone(),
            cli_params: cli.params.clone(),
        })
        .configure_sets(
            Update,
            (SceneSet::Input, SceneSet::Step, SceneSet::Draw).chain(),
        )
        .add_systems(
            Update,
            (scene_keys, load_scene).chain().in_set(SceneSet::Input),
        )
        .add_systems(Update, step_physics.in_set(SceneSet::Step));
    }
}

fn scene_keys(
    keys: Res<ButtonInput<KeyCode>>,
    mut demo: ResMut<Demo>,
    mut options: ResMut<draw::DrawOptions>,
    check: Option<Res<CheckRun>>,
) {
    if check.is_some() {
        return;
    }
    const DIGITS: [KeyCode; 9] = [
        KeyCode::Digit1,
        KeyCode::Digit2,
        KeyCode::Digit3,
        KeyCode::Digit4,
        KeyCode::Digit5,
        KeyCode::Digit6,
        KeyCode::Digit7,
        KeyCode::Digit8,
        KeyCode::Digit9,
    ];
    for (i, k) in DIGITS.iter().enumerate() {
        if keys.just_pressed(*k) && i < demo.list.len() {
            demo.request(i);
        }
    }
    let n = demo.list.len();
    if keys.just_pressed(KeyCode::KeyN) || keys.just_pressed(KeyCode::PageDown) {
        let i = demo.index + 1;
        demo.request(i);
    }
    if keys.just_pressed(KeyCode::KeyP) || keys.just_pressed(KeyCode::PageUp) {
        let i = demo.index + n - 1;
        demo.request(i);
    }
    if keys.just_pressed(KeyCode::KeyR) {
        let i = demo.index;
        demo.request(i);
    }
    if keys.just_pressed(KeyCode::Space) {
        demo.paused = !demo.paused;
    }
    if keys.just_pressed(KeyCode::KeyS) {
        demo.paused = true;
        demo.single_steps += 1;
    }
    if keys.just_pressed(KeyCode::KeyJ) {
        options.joints = !options.joints;
    }
}

#[allow(clippy::too_many_arguments)]
fn load_scene(
    mut commands: Commands,
    mut demo: ResMut<Demo>,
    old: Query<Entity, With<SceneEntity>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut camera: Query<&mut OrbitCamera>,
    mut follow: ResMut<Follow>,
    window: Query<&Window>,
) {
    let Some(index) = demo.pending.take() else {
        return;
    };
    for e in &old {
        commands.entity(e).despawn();
    }
    demo.index = index;
    demo.scene = None;
    demo.error = None;
    demo.accumulator = 0.0;
    demo.single_steps = 0;
    demo.last_step_ms = 0.0;
    demo.mean_step_ms = 0.0;
    let name = demo.name();
    let mut params = demo_params(name);
    if name == demo.cli_scene {
        params.retain(|(k, _)| !demo.cli_params.iter().any(|(c, _)| c == k));
        params.extend(demo.cli_params.iter().cloned());
    }
    let t0 = Instant::now();
    match Scene::build(name, &params, SolverConfig::default()) {
        Ok(scene) => {
            let bounds =
                draw::spawn_world(&mut commands, &mut meshes, &mut materials, &scene.world);
            follow.reset(camera::follows(name), bounds);
            let aspect = window
                .iter()
                .next()
                .map_or(16.0 / 9.0, |w| w.width() / w.height().max(1.0));
            for mut cam in &mut camera {
                *cam = OrbitCamera::framing(name, bounds, aspect);
            }
            info!(
                "scene `{name}`: {} bodies, {} joints, {} deformables, built in {:.0} ms",
                scene.world.body_count(),
                scene.world.joint_count(),
                scene.world.deformable_count(),
                t0.elapsed().as_secs_f64() * 1e3
            );
            demo.scene = Some(scene);
        }
        Err(e) => {
            error!("scene `{name}`: {e}");
            demo.error = Some(e.to_string());
        }
    }
}

/// Steps the scene at its `dt` (60 Hz), at most once per rendered frame: a scene whose
/// step takes longer than a frame runs in slow motion rather than piling up steps. The
/// check mode steps exactly when [`CheckRun`] says so.
fn step_physics(mut demo: ResMut<Demo>, time: Res<Time>, check: Option<Res<CheckRun>>) {
    let demo = &mut *demo;
    demo.stepped = false;
    let Some(scene) = demo.scene.as_mut() else {
        return;
    };
    let step = match &check {
        Some(check) => check.wants_step(scene.frame),
        None if demo.paused => {
            let s = demo.single_steps > 0;
            demo.single_steps = demo.single_steps.saturating_sub(1);
            s
        }
        None => {
            let dt = scene.world.config.dt;
            demo.accumulator += time.delta_secs();
            if demo.accumulator >= dt {
                demo.accumulator = (demo.accumulator - dt).min(dt);
                true
            } else {
                false
            }
        }
    };
    if !step {
        return;
    }
    let t0 = Instant::now();
    match scene.step() {
        Ok(_) => {
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            demo.last_step_ms = ms;
            demo.mean_step_ms = if demo.mean_step_ms == 0.0 {
                ms
            } else {
                0.9 * demo.mean_step_ms + 0.1 * ms
            };
            demo.stepped = true;
        }
        Err(e) => {
            error!("scene `{}` frame {}: {e}", scene.name, scene.frame);
            demo.error = Some(e.to_string());
            demo.paused = true;
        }
    }
}
