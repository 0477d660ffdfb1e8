//! The orbit camera (drag to orbit, right/middle drag to pan, wheel to zoom; arrows and
//! +/- too) and the light.

use bevy_internal::input::mouse::{
    AccumulatedMouseMotion, AccumulatedMouseScroll, MouseScrollUnit,
};
use bevy_internal::light::{CascadeShadowConfigBuilder, DirectionalLightShadowMap};
use bevy_internal::prelude::*;
use bevy_internal::render::view::Msaa;
use std::collections::VecDeque;

use crate::Cli;
use crate::draw;
use crate::scene::{Demo, SceneSet};

pub struct CameraPlugin;

impl Plugin for CameraPlugin {
    fn build(&self, app: &mut App) {
        app.insert_resource(ClearColor(Color::srgb(0.60, 0.70, 0.80)))
            .insert_resource(GlobalAmbientLight {
                color: Color::WHITE,
                brightness: 400.0,
                ..default()
            })
            .init_resource::<Follow>()
            .add_systems(Startup, setup)
            .add_systems(Update, orbit_input.in_set(SceneSet::Input))
            .add_systems(Update, follow.in_set(SceneSet::Draw))
            .add_systems(
                Update,
                (place_camera, fit_shadows).chain().after(SceneSet::Draw),
            );
    }
}

/// Where the camera looks from: around `target`, at `distance`, `yaw` about +y from +z,
/// `pitch` above the horizon.
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub struct OrbitCamera {
    pub target: Vec3,
    pub distance: f32,
    pub yaw: f32,
    pub pitch: f32,
}

impl Default for OrbitCamera {
    fn default() -> Self {
        Self {
            target: Vec3::new(0.0, 1.0, 0.0),
            distance: 10.0,
            yaw: 0.46,
            pitch: 0.4,
        }
    }
}

/// Vertical field of view: the library renderer's (`avbd render`), so its automatic
/// framing fits here too.
const FOV_Y: f32 = 35.0 * std::f32::consts::PI / 180.0;

impl OrbitCamera {
    /// The library renderer's automatic 3/4 view of the box `bounds`, or the view that
    /// the README's picture of the scene sets (`scripts/render_readme.sh`: inside the
    /// squishy balls' box, close to the incline and to the tunnelling plate).
    pub fn framing(scene: &str, bounds: (Vec3, Vec3), aspect: f32) -> Self {
        let (eye, target) = match scene {
            "squishy_balls" => (Vec3::new(0.02, 2.2, 0.5), Vec3::new(0.0, 0.1, 0.0)),
            "soft_incline" => (Vec3::new(0.25, 0.45, 1.5), Vec3::new(-0.3, -0.1, 0.0)),
            "tunnelling" => (Vec3::new(-1.6, 1.6, 1.3), Vec3::new(0.15, 1.0, 0.0)),
            _ => {
                let cam = bevy_avbd::render::Camera::framing(bounds, aspect);
                (cam.eye, cam.target)
            }
        };
        Self::looking(eye, target)
    }

    /// From `eye` towards `target`.
    pub fn looking(eye: Vec3, target: Vec3) -> Self {
        let back = eye - target;
        let distance = back.length().max(0.01);
        let dir = back / distance;
        Self {
            target,
            distance,
            yaw: dir.x.atan2(dir.z),
            pitch: dir.y.clamp(-1.0, 1.0).asin(),
        }
    }

    fn transform(&self) -> Transform {
        let rotation = Quat::from_euler(EulerRot::YXZ, self.yaw, -self.pitch, 0.0);
        Transform::from_translation(self.target + rotation * Vec3::Z * self.distance)
            .looking_at(self.target, Vec3::Y)
    }
}

/// Scenes whose bodies travel far from where they start, out of a view framed on their
/// first frame: a pendulum swinging from horizontal, a cube in free fall (5 m in its first
/// second, 25 times its size), two balls that fly apart after a glancing hit in zero
/// gravity. The camera follows them.
pub fn follows(scene: &str) -> bool {
    matches!(
        scene,
        "pendulum" | "two_heavy_balls" | "soft_free_fall" | "soft_collision"
    )
}

/// Frames over which the followed box is the union of the bodies' boxes: a tenth of a
/// second of trail at 60 Hz, so that a fast body sinks towards the edge of the view in
/// the direction it moves instead of standing still in its middle.
const FOLLOW_FRAMES: usize = 6;

/// The camera following a scene's bodies ([`follows`]): after every step it frames the
/// bodies' boxes of the last [`FOLLOW_FRAMES`] frames, from the same direction as the
/// automatic framing, until the user orbits, pans or zooms.
#[derive(Resource, Default)]
pub struct Follow {
    pub active: bool,
    recent: VecDeque<(Vec3, Vec3)>,
}

impl Follow {
    /// A new scene: whether to follow it, and its first box.
    pub fn reset(&mut self, active: bool, first: (Vec3, Vec3)) {
        self.active = active;
        self.recent.clear();
        self.recent.push_back(first);
    }

    /// Adds this frame's box; returns the union of the last [`FOLLOW_FRAMES`].
    fn push(&mut self, b: (Vec3, Vec3)) -> (Vec3, Vec3) {
        if self.recent.len() == FOLLOW_FRAMES {
            self.recent.pop_front();
        }
        self.recent.push_back(b);
        self.recent
            .iter()
            .fold(b, |(lo, hi), &(l, h)| (lo.min(l), hi.max(h)))
    }
}

fn follow(
    demo: Res<Demo>,
    mut state: ResMut<Follow>,
    mut camera: Query<&mut OrbitCamera>,
    window: Query<&Window>,
) {
    if !state.active || !demo.stepped {
        return;
    }
    let Some(scene) = demo.scene.as_ref() else {
        return;
    };
    let snap = bevy_avbd::render::Snapshot::of_world(&scene.world);
    let bounds = state.push(draw::frame_box(&snap));
    if !(bounds.0.is_finite() && bounds.1.is_finite()) {
        return;
    }
    let aspect = window
        .iter()
        .next()
        .map_or(16.0 / 9.0, |w| w.width() / w.height().max(1.0));
    for mut cam in &mut camera {
        *cam = OrbitCamera::framing(demo.name(), bounds, aspect);
    }
}

#[derive(Component)]
struct SunLight;

fn setup(mut commands: Commands, cli: Res<Cli>) {
    let orbit = OrbitCamera::default();
    // The check mode runs on a software renderer: without MSAA and with 1024² shadow
    // maps its frames take half the time (0.6 s instead of 1.3 s for the pile, lavapipe
    // on 2 cores).
    let msaa = if cli.checking() {
        commands.insert_resource(DirectionalLightShadowMap { size: 1024 });
        Msaa::Off
    } else {
        Msaa::Sample4
    };
    commands.spawn((
        msaa,
        Camera3d::default(),
        Projection::Perspective(PerspectiveProjection {
            fov: FOV_Y,
            near: 0.01,
            ..default()
        }),
        orbit.transform(),
        orbit,
    ));
    commands.spawn((
        SunLight,
        DirectionalLight {
            illuminance: 9_000.0,
            shadow_maps_enabled: true,
            ..default()
        },
        // From above, front-left: the library renderer's light.
        Transform::default().looking_to(-Vec3::new(-0.45, 1.0, 0.5), Vec3::Y),
    ));
}

fn orbit_input(
    mut camera: Query<&mut OrbitCamera>,
    mut follow: ResMut<Follow>,
    buttons: Res<ButtonInput<MouseButton>>,
    keys: Res<ButtonInput<KeyCode>>,
    motion: Res<AccumulatedMouseMotion>,
    scroll: Res<AccumulatedMouseScroll>,
    time: Res<Time>,
) {
    let Ok(mut cam) = camera.single_mut() else {
        return;
    };
    let dt = time.delta_secs();
    let mut orbit = Vec2::ZERO;
    let mut zoom = 0.0;
    if buttons.pressed(MouseButton::Left) {
        orbit += motion.delta * 0.005;
    }
    if (buttons.pressed(MouseButton::Right) || buttons.pressed(MouseButton::Middle))
        && motion.delta != Vec2::ZERO
    {
        follow.active = false;
        // Pan in the view plane, by a distance proportional to the orbit radius.
        let rotation = Quat::from_euler(EulerRot::YXZ, cam.yaw, -cam.pitch, 0.0);
        let pan = (rotation * Vec3::X * -motion.delta.x + rotation * Vec3::Y * motion.delta.y)
            * cam.distance
            * 0.0015;
        cam.target += pan;
    }
    zoom -= match scroll.unit {
        MouseScrollUnit::Line => scroll.delta.y * 0.1,
        MouseScrollUnit::Pixel => scroll.delta.y * 0.002,
    };
    let key = |k: KeyCode| if keys.pressed(k) { 1.0 } else { 0.0 };
    orbit.x += (key(KeyCode::ArrowRight) - key(KeyCode::ArrowLeft)) * 1.5 * dt;
    orbit.y += (key(KeyCode::ArrowDown) - key(KeyCode::ArrowUp)) * 1.0 * dt;
    zoom += (key(KeyCode::Minus) - key(KeyCode::Equal) - key(KeyCode::NumpadAdd)
        + key(KeyCode::NumpadSubtract))
        * 1.5
        * dt;
    if orbit == Vec2::ZERO && zoom == 0.0 {
        return;
    }
    follow.active = false;
    cam.yaw -= orbit.x;
    cam.pitch = (cam.pitch + orbit.y).clamp(-1.5, 1.5);
    cam.distance = (cam.distance * zoom.exp()).clamp(0.05, 2_000.0);
}

fn place_camera(mut camera: Query<(&OrbitCamera, &mut Transform), Changed<OrbitCamera>>) {
    for (orbit, mut t) in &mut camera {
        *t = orbit.transform();
    }
}

/// Shadow cascades sized to the view, so that a 10 cm beam and a 30 m pile both get
/// sharp shadows.
fn fit_shadows(
    camera: Query<&OrbitCamera, Changed<OrbitCamera>>,
    mut light: Query<&mut bevy_internal::light::CascadeShadowConfig, With<SunLight>>,
) {
    let Ok(cam) = camera.single() else {
        return;
    };
    for mut config in &mut light {
        *config = CascadeShadowConfigBuilder {
            num_cascades: 3,
            minimum_distance: (cam.distance * 0.01).max(0.01),
            first_cascade_far_bound: cam.distance * 1.2,
            maximum_distance: cam.distance * 4.0,
            ..default()
        }
        .build();
    }
}
