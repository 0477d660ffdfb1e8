//! The Bevy plugin, headless: Bevy's `MinimalPlugins` (built from the sub-crates: task
//! pools, frame count, time, schedule runner) + `TransformPlugin` + `AvbdPlugin`, with a
//! manual clock (`TimeUpdateStrategy::ManualDuration`) so every run is the same.
#![cfg(feature = "app")]

use std::time::Duration;

use bevy_app::{App, ScheduleRunnerPlugin, TaskPoolPlugin};
use bevy_avbd::app::*;
use bevy_avbd::ecs::{
    AngularVelocity, ColliderShape, Deformable, DeformablePositions, LinearVelocity, Physics,
    PhysicsConfig, Position, RigidBody, Rotation, StepMode,
};
use bevy_avbd::glam::{Quat, Vec3, Vec4};
use bevy_avbd::{Collider, DeformableDesc, SolidMaterial, SolverConfig, TetMesh, TetPattern};
use bevy_diagnostic::{DiagnosticsStore, FrameCountPlugin};
use bevy_ecs::prelude::*;
use bevy_time::{Fixed, Time, TimePlugin, TimeUpdateStrategy};
use bevy_transform::TransformPlugin;
use bevy_transform::components::{GlobalTransform, Transform};

const G: f32 = 9.81;

/// An app whose frames last `num/den` fixed timesteps (the timestep is the solver's dt,
/// 1/60 s by default).
fn app_with(plugin: AvbdPlugin, num: u32, den: u32) -> App {
    let mut app = App::new();
    app.add_plugins((
        TaskPoolPlugin::default(),
        FrameCountPlugin,
        TimePlugin,
        ScheduleRunnerPlugin::default(),
        TransformPlugin,
        plugin,
    ));
    let timestep = app.world().resource::<Time<Fixed>>().timestep();
    app.insert_resource(TimeUpdateStrategy::ManualDuration(timestep * num / den));
    app.finish();
    app.cleanup();
    app.update(); // the clock starts: no time passes in the first update
    app
}

/// One fixed step per frame.
fn app() -> App {
    app_with(AvbdPlugin::default(), 1, 1)
}

fn run(app: &mut App, frames: usize) {
    for _ in 0..frames {
        app.update();
    }
}

fn ground(app: &mut App) -> Entity {
    app.world_mut()
        .spawn((
            RigidBody::Static,
            ColliderShape(Collider::halfspace(Vec3::Y).unwrap()),
            Transform::default(),
        ))
        .id()
}

fn cube(app: &mut App, at: Vec3) -> Entity {
    app.world_mut()
        .spawn((
            RigidBody::Dynamic,
            ColliderShape(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
            Transform::from_translation(at),
        ))
        .id()
}

fn transform(app: &App, e: Entity) -> Transform {
    *app.world().get::<Transform>(e).unwrap()
}

fn core_position(app: &App, e: Entity) -> Vec3 {
    app.world()
        .resource::<Physics>()
        .body_state(e)
        .unwrap()
        .position
}

fn steps(app: &App) -> u64 {
    app.world().resource::<PhysicsControl>().steps_taken()
}

/// A unit cube dropped from 2 m rests with its centre half an edge above the ground, in
/// its `Transform` and `GlobalTransform`. Tolerance 1 mm: the 1 cm collision margin is
/// only where contact rows begin; the rows then drive the gap to zero, up to the solver's
/// residual penetration (0.72 mm at most in the README's 10-box stack at the defaults).
/// A cube resting anywhere within the margin would be a failure of the contact rows.
/// Measured: 0.499985 (15 µm deep).
#[test]
fn dropped_cube_rests_at_half_extent() {
    let mut app = app();
    ground(&mut app);
    let c = cube(&mut app, Vec3::new(0.0, 2.0, 0.0));
    run(&mut app, 180);

    let t = transform(&app, c);
    let g = app.world().get::<GlobalTransform>(c).unwrap().translation();
    eprintln!(
        "rest: Transform y = {:.6}, GlobalTransform y = {:.6}, core y = {:.6}",
        t.translation.y,
        g.y,
        core_position(&app, c).y
    );
    assert!((t.translation.y - 0.5).abs() < 1e-3, "{}", t.translation);
    assert!(t.translation.x.abs() < 1e-3 && t.translation.z.abs() < 1e-3);
    assert!((g - t.translation).length() < 1e-6, "propagated {g}");
    assert!((core_position(&app, c) - t.translation).length() < 1e-4);
    assert!(t.rotation.angle_between(Quat::IDENTITY) < 1e-2);
    assert_eq!(steps(&app), 180);
    let setup = app.world().resource::<PhysicsSetup>();
    assert_eq!((setup.backend, &setup.error), ("cpu", &None));
}

/// Writing a body's `Transform` teleports it: after the next step the core body is there
/// (a kinematic body exactly; a dynamic one less one step of fall from rest, g·dt²).
#[test]
fn user_transform_teleports_the_body() {
    let mut app = app();
    ground(&mut app);
    let c = cube(&mut app, Vec3::new(0.0, 0.5, 0.0));
    let k = app
        .world_mut()
        .spawn((
            RigidBody::Kinematic,
            ColliderShape(Collider::ball(0.2).unwrap()),
            Transform::from_xyz(5.0, 3.0, 0.0),
        ))
        .id();
    run(&mut app, 60);
    assert!((core_position(&app, k) - Vec3::new(5.0, 3.0, 0.0)).length() < 1e-6);

    let target = Vec3::new(3.0, 4.0, 1.0);
    let turn = Quat::from_rotation_y(0.7);
    let kinematic_target = Vec3::new(-4.0, 2.0, 2.0);
    {
        let world = app.world_mut();
        let mut t = world.get_mut::<Transform>(c).unwrap();
        t.translation = target;
        t.rotation = turn;
        world.get_mut::<Transform>(k).unwrap().translation = kinematic_target;
    }
    let before = steps(&app);
    app.update();
    assert_eq!(steps(&app), before + 1);

    let dt = app.world().resource::<PhysicsConfig>().0.dt;
    let p = core_position(&app, c);
    let r = app
        .world()
        .resource::<Physics>()
        .body_state(c)
        .unwrap()
        .rotation;
    eprintln!(
        "teleported: core {p} (target {target}, one step of fall {:.5} m), kinematic {}",
        G * dt * dt,
        core_position(&app, k)
    );
    assert!((p.x - target.x).abs() < 1e-4 && (p.z - target.z).abs() < 1e-4);
    assert!((p.y - (target.y - G * dt * dt)).abs() < 5e-4, "y = {}", p.y);
    assert!(r.angle_between(turn) < 1e-3);
    assert!((core_position(&app, k) - kinematic_target).length() < 1e-6);
    // The teleport is not smeared: the interpolation starts at the new pose.
    let poses = *app.world().get::<StepPoses>(c).unwrap();
    assert_eq!(poses.previous_position, target);
}

/// Despawning a body removes it from the core, also when the frame rate is four times the
/// step rate (the removal is seen by the next fixed tick, frames later).
#[test]
fn despawn_removes_the_core_body() {
    let mut app = app_with(AvbdPlugin::default(), 1, 4);
    ground(&mut app);
    let a = cube(&mut app, Vec3::new(0.0, 0.5, 0.0));
    let b = cube(&mut app, Vec3::new(3.0, 0.5, 0.0));
    run(&mut app, 12);
    assert_eq!(app.world().resource::<Physics>().body_count(), 3);

    // Despawn in the frame right after a step: the next step is four frames away, longer
    // than `RemovedComponents` keeps a removal.
    let mut last = steps(&app);
    while steps(&app) == last {
        app.update();
    }
    last = steps(&app);
    app.world_mut().despawn(a);
    run(&mut app, 6);
    let physics = app.world().resource::<Physics>();
    assert!(steps(&app) > last);
    assert_eq!(physics.body_count(), 2);
    assert_eq!(physics.body_handle(a), None);
    assert!(physics.body_handle(b).is_some());
}

/// At 144 Hz over a 60 Hz step, every frame's `Transform` is the lerp (slerp) of the last
/// two step poses by `Time<Fixed>::overstep_fraction()`, strictly between them when the
/// fraction is; a `NoInterpolation` body shows the last step's pose.
#[test]
fn interpolated_transform_lies_between_step_poses() {
    let mut app = app_with(AvbdPlugin::default(), 60, 144);
    let spin = |app: &mut App, opt_out: bool| {
        let mut e = app.world_mut().spawn((
            RigidBody::Dynamic,
            ColliderShape(Collider::cuboid(Vec3::new(0.5, 0.2, 0.3)).unwrap()),
            Transform::from_xyz(0.0, 50.0, 0.0),
            LinearVelocity(Vec3::new(2.0, 0.0, 0.0)),
            AngularVelocity(Vec3::new(0.0, 3.0, 1.0)),
        ));
        if opt_out {
            e.insert(NoInterpolation);
        }
        e.id()
    };
    let c = spin(&mut app, false);
    let raw = spin(&mut app, true);

    let pose = |app: &App, e| {
        let w = app.world();
        (
            w.get::<Position>(e).unwrap().0,
            w.get::<Rotation>(e).unwrap().0,
        )
    };
    let mut last = steps(&app);
    let mut prev = pose(&app, c);
    let mut curr = prev;
    let (mut checked, mut strictly, mut worst) = (0, 0, 0.0f32);
    for _ in 0..60 {
        app.update();
        assert!(steps(&app) - last <= 1, "one step at most per 144 Hz frame");
        if steps(&app) != last {
            prev = curr;
            curr = pose(&app, c);
            last = steps(&app);
        }
        if steps(&app) < 2 {
            continue; // no two step poses yet
        }
        let alpha = app.world().resource::<Time<Fixed>>().overstep_fraction();
        let t = transform(&app, c);
        let expected = prev.0.lerp(curr.0, alpha);
        let expected_r = prev.1.slerp(curr.1, alpha);
        assert!(
            (t.translation - expected).abs().max_element() < 1e-5,
            "α = {alpha}: {} vs {expected}",
            t.translation
        );
        // Components, not `angle_between`: its f32 acos cannot resolve angles below ~5e-4.
        let dr = Vec4::from(t.rotation) - Vec4::from(expected_r);
        assert!(dr.abs().max_element() < 1e-5, "α = {alpha}: {dr}");
        worst = worst
            .max((t.translation - expected).abs().max_element())
            .max(dr.abs().max_element());
        if alpha > 0.0 && alpha < 1.0 {
            let (lo, hi) = (prev.0.y.min(curr.0.y), prev.0.y.max(curr.0.y));
            assert!(lo < t.translation.y && t.translation.y < hi, "α = {alpha}");
            let (lx, hx) = (prev.0.x, curr.0.x);
            assert!(lx < t.translation.x && t.translation.x < hx);
            strictly += 1;
        }
        checked += 1;
        assert_eq!(transform(&app, raw).translation, pose(&app, raw).0);
        assert_eq!(transform(&app, raw).rotation, pose(&app, raw).1);
    }
    eprintln!(
        "{checked} frames checked, {strictly} strictly between two step poses, largest difference {worst:e}"
    );
    assert!(strictly >= 30, "{strictly}");
}

#[derive(Resource, Default)]
struct Log {
    started: Vec<CollisionStarted>,
    ended: Vec<CollisionEnded>,
    on_entity: usize,
}

/// A box dropped on the ground and then teleported away: one `CollisionStarted`, one
/// `CollisionEnded` (the ground did not opt in), the end carrying the resting normal
/// force ≈ m g (1%; measured 9809.5 N against 9810 N).
#[test]
fn collision_events_start_and_end_once() {
    let mut app = app();
    app.init_resource::<Log>();
    app.add_observer(|e: On<CollisionStarted>, mut log: ResMut<Log>| log.started.push(*e));
    app.add_observer(|e: On<CollisionEnded>, mut log: ResMut<Log>| log.ended.push(*e));
    let g = ground(&mut app);
    let c = cube(&mut app, Vec3::new(0.0, 1.5, 0.0));
    app.world_mut()
        .entity_mut(c)
        .insert(CollisionEvents)
        .observe(|_: On<CollisionStarted>, mut log: ResMut<Log>| log.on_entity += 1);
    run(&mut app, 150);

    let weight = 1000.0 * G; // 1 m³ at 1000 kg/m³
    let resting = app.world().resource::<ContactPairs>().force(c, g).unwrap();
    {
        let log = app.world().resource::<Log>();
        eprintln!(
            "started {:?}; resting force {resting:.1} N, m g = {weight:.1} N",
            log.started
        );
        assert_eq!(log.started.len(), 1);
        assert_eq!(log.on_entity, 1);
        assert!(log.ended.is_empty());
        let s = log.started[0];
        assert_eq!((s.entity, s.other), (c, g));
        assert!(s.force >= 0.0);
    }
    assert!((resting - weight).abs() < 0.01 * weight, "{resting}");

    app.world_mut().get_mut::<Transform>(c).unwrap().translation = Vec3::new(0.0, 10.0, 0.0);
    run(&mut app, 30);
    let log = app.world().resource::<Log>();
    eprintln!("ended {:?}", log.ended);
    assert_eq!(log.started.len(), 1);
    assert_eq!(log.ended.len(), 1);
    let e = log.ended[0];
    assert_eq!((e.entity, e.other), (c, g));
    assert!(
        e.force > 0.0 && (e.force - weight).abs() < 0.01 * weight,
        "{}",
        e.force
    );
    assert!(app.world().resource::<ContactPairs>().is_empty());
}

/// Paused: fixed ticks come, nothing moves (after the first paused tick, where the drawn
/// pose catches up with the last step); `step(1)` takes exactly one step.
#[test]
fn pause_and_single_step() {
    let mut app = app();
    let c = cube(&mut app, Vec3::new(0.0, 10.0, 0.0));
    run(&mut app, 5);
    app.world_mut().resource_mut::<PhysicsControl>().pause();
    app.update();
    let (n, t) = (steps(&app), transform(&app, c));
    assert_eq!(t.translation, app.world().get::<Position>(c).unwrap().0);
    run(&mut app, 5);
    assert_eq!(steps(&app), n);
    assert_eq!(transform(&app, c), t);
    app.world_mut().resource_mut::<PhysicsControl>().step(1);
    run(&mut app, 5);
    assert_eq!(steps(&app), n + 1);
    let y = transform(&app, c).translation.y;
    assert!(y < t.translation.y, "{y}");
    app.world_mut().resource_mut::<PhysicsControl>().resume();
    run(&mut app, 2);
    assert_eq!(steps(&app), n + 3);
}

/// `Time<Fixed>`'s timestep and the solver's dt stay equal, whichever is changed.
#[test]
fn timestep_and_dt_stay_equal() {
    let mut app = app_with(
        AvbdPlugin::default().with_config(SolverConfig {
            dt: 1.0 / 120.0,
            ..Default::default()
        }),
        1,
        1,
    );
    let timestep = |app: &App| app.world().resource::<Time<Fixed>>().timestep();
    let dt = |app: &App| app.world().resource::<PhysicsConfig>().0.dt;
    assert_eq!(
        timestep(&app),
        Duration::from_secs_f64((1.0f32 / 120.0) as f64)
    );
    app.world_mut()
        .resource_mut::<Time<Fixed>>()
        .set_timestep_hz(50.0);
    run(&mut app, 3);
    assert_eq!(dt(&app), 0.02);
    app.world_mut().resource_mut::<PhysicsConfig>().0.dt = 0.04;
    run(&mut app, 3);
    assert_eq!(timestep(&app), Duration::from_secs_f64(0.04f32 as f64));
    assert_eq!(dt(&app), 0.04);
}

/// Bodies under non-body parents with uniform scale follow the parent frame both ways;
/// a non-uniform scale, a body parent or a NaN `Transform` gets an `InvalidTransform`
/// (no panic), which goes away once fixed.
#[test]
fn parents_and_bad_transforms() {
    let mut app = app();
    let frame = Transform::from_xyz(10.0, 0.0, 0.0)
        .with_rotation(Quat::from_rotation_y(std::f32::consts::FRAC_PI_2))
        .with_scale(Vec3::splat(2.0));
    let parent = app.world_mut().spawn(frame).id();
    let local = Vec3::new(1.0, 3.0, 0.0);
    let fixed = app
        .world_mut()
        .spawn((
            RigidBody::Static,
            ColliderShape(Collider::ball(0.1).unwrap()),
            Transform::from_translation(local),
            ChildOf(parent),
        ))
        .id();
    let falling = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            ColliderShape(Collider::ball(0.1).unwrap()),
            Transform::from_translation(Vec3::new(0.0, 20.0, 0.0)),
            ChildOf(parent),
        ))
        .id();
    run(&mut app, 30);
    let expected = frame.transform_point(local);
    assert!((core_position(&app, fixed) - expected).length() < 1e-5);
    let world_pose = app
        .world()
        .get::<GlobalTransform>(falling)
        .unwrap()
        .translation();
    let p = core_position(&app, falling);
    eprintln!("child body: world {world_pose} vs core {p}");
    assert!(p.y < 40.0 - 0.5, "it fell in world space: {p}");
    // The drawn pose lags by the interpolation (here: one step, the frame equals the step).
    let poses = *app.world().get::<StepPoses>(falling).unwrap();
    assert!((world_pose - poses.previous_position).length() < 1e-4);

    let stretched = app
        .world_mut()
        .spawn(Transform::from_scale(Vec3::new(1.0, 2.0, 1.0)))
        .id();
    let sheared = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            ColliderShape(Collider::ball(0.1).unwrap()),
            Transform::default(),
            ChildOf(stretched),
        ))
        .id();
    let nested = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            ColliderShape(Collider::ball(0.1).unwrap()),
            Transform::default(),
            ChildOf(falling),
        ))
        .id();
    let broken = cube(&mut app, Vec3::new(0.0, f32::NAN, 0.0));
    run(&mut app, 2);
    let error = |app: &App, e| app.world().get::<InvalidTransform>(e).map(|i| i.0.clone());
    assert!(
        matches!(error(&app, sheared), Some(TransformError::BadParentScale { ancestor, .. }) if ancestor == stretched)
    );
    assert!(
        matches!(error(&app, nested), Some(TransformError::NestedBody { ancestor }) if ancestor == falling)
    );
    assert_eq!(
        error(&app, broken),
        Some(TransformError::NotFinite { entity: broken })
    );
    eprintln!("{}", error(&app, sheared).unwrap());

    app.world_mut()
        .get_mut::<Transform>(broken)
        .unwrap()
        .translation = Vec3::new(0.0, 7.0, 0.0);
    app.world_mut()
        .get_mut::<Transform>(stretched)
        .unwrap()
        .scale = Vec3::splat(3.0);
    run(&mut app, 2);
    assert_eq!(error(&app, broken), None);
    assert_eq!(error(&app, sheared), None);
    assert!(core_position(&app, broken).y < 7.0 && core_position(&app, broken).y > 6.9);
}

/// A collider whose centre of mass is off its origin: the `Transform` is the collider's
/// frame, `Position` its centre of mass.
#[test]
fn transform_is_the_collider_frame() {
    let mut app = app();
    let corners: Vec<Vec3> = (0..8)
        .map(|i| Vec3::new((i & 1) as f32, ((i >> 1) & 1) as f32, ((i >> 2) & 1) as f32))
        .collect();
    let hull = app
        .world_mut()
        .spawn((
            RigidBody::Static,
            ColliderShape(Collider::convex_hull(&corners).unwrap()),
            Transform::from_xyz(0.0, 5.0, 0.0),
        ))
        .id();
    run(&mut app, 2);
    let p = core_position(&app, hull);
    assert!((p - Vec3::new(0.5, 5.5, 0.5)).length() < 1e-5, "{p}");
    assert_eq!(transform(&app, hull).translation, Vec3::new(0.0, 5.0, 0.0));
}

/// The step's timings and counts reach `DiagnosticsStore`.
#[test]
fn diagnostics_are_measured() {
    let mut app = app();
    ground(&mut app);
    cube(&mut app, Vec3::new(0.0, 0.5, 0.0));
    run(&mut app, 10);
    let store = app.world().resource::<DiagnosticsStore>();
    let value = |path| store.get(&path).and_then(|d| d.value()).unwrap();
    assert!(value(PhysicsDiagnostics::STEP_MS) > 0.0);
    assert!(value(PhysicsDiagnostics::CONTACTS) >= 4.0);
    assert!(value(PhysicsDiagnostics::COLORS) >= 1.0);
    assert_eq!(value(PhysicsDiagnostics::ITERATIONS), 10.0);
    assert_eq!(value(PhysicsDiagnostics::BODIES), 2.0);
}

/// `StepMode::Overlapped` through the plugin: the same rest, one step later.
#[test]
fn overlapped_step_mode_rests_too() {
    let mut app = app_with(
        AvbdPlugin::default().with_step_mode(StepMode::Overlapped),
        1,
        1,
    );
    ground(&mut app);
    let c = cube(&mut app, Vec3::new(0.0, 2.0, 0.0));
    run(&mut app, 180);
    let y = transform(&app, c).translation.y;
    assert!((y - 0.5).abs() < 1e-3, "{y}");
}

/// A deformable entity under the plugin: its vertex positions follow the solve (a soft
/// cube dropped on the ground rests with its lowest vertices at the contact gap δ = 1 mm;
/// measured 0.99998 mm).
#[test]
fn deformable_positions_follow() {
    let mut app = app();
    ground(&mut app);
    let mesh = TetMesh::box_grid(Vec3::splat(0.2), [2, 2, 2], TetPattern::Six);
    let soft = app
        .world_mut()
        .spawn(Deformable(
            DeformableDesc::solid(mesh, SolidMaterial::default()).at(Vec3::new(0.0, 0.5, 0.0)),
        ))
        .id();
    run(&mut app, 90);
    let p = &app.world().get::<DeformablePositions>(soft).unwrap().0;
    let min_y = p.iter().map(|v| v.y).fold(f32::INFINITY, f32::min);
    eprintln!("soft cube: {} vertices, lowest y = {min_y}", p.len());
    assert_eq!(p.len(), 27);
    assert!((min_y - 1e-3).abs() < 1e-4, "{min_y}");
}

/// Debug drawing runs headless (not in CI's default features): colliders, contacts and a
/// joint are drawn without panicking, and shapes that leave the world leave the cache.
#[cfg(feature = "debug-draw")]
#[test]
fn debug_draw_runs() {
    use bevy_avbd::JointKind;
    use bevy_avbd::ecs::Joint;
    let mut app = App::new();
    app.add_plugins((
        TaskPoolPlugin::default(),
        TimePlugin,
        TransformPlugin,
        bevy_asset::AssetPlugin::default(),
        bevy_gizmos::GizmoPlugin,
        AvbdPlugin::default(),
        AvbdDebugDrawPlugin,
    ));
    let timestep = app.world().resource::<Time<Fixed>>().timestep();
    app.insert_resource(TimeUpdateStrategy::ManualDuration(timestep));
    app.finish();
    app.cleanup();
    ground(&mut app);
    let c = cube(&mut app, Vec3::new(0.0, 0.6, 0.0));
    let corners: Vec<Vec3> = (0..8)
        .map(|i| Vec3::new((i & 1) as f32, ((i >> 1) & 1) as f32, ((i >> 2) & 1) as f32))
        .collect();
    let hull = app
        .world_mut()
        .spawn((
            RigidBody::Dynamic,
            ColliderShape(Collider::convex_hull(&corners).unwrap()),
            Transform::from_xyz(3.0, 2.0, 0.0),
        ))
        .id();
    app.world_mut().spawn(
        Joint::new(JointKind::Ball, hull, None).anchors(Vec3::ZERO, Vec3::new(3.0, 3.0, 0.0)),
    );
    run(&mut app, 30);
    app.world_mut().despawn(c);
    run(&mut app, 5);
    assert!(app.world().resource::<ContactPairs>().is_empty());
}

/// The plugin on the GPU backend, blocking and overlapped: the cube rests, and the
/// collision events come once each (forces read back when blocking; NaN for the step in
/// flight when overlapped). Without an adapter: a note and a pass, except under
/// `AVBD_REQUIRE_GPU=1` (CI), where the CPU fallback fails it.
#[test]
fn gpu_backend_rests_and_reports_collisions() {
    for mode in [StepMode::Blocking, StepMode::Overlapped] {
        let plugin = AvbdPlugin::default()
            .with_backend(bevy_avbd::Backend::Gpu)
            .with_step_mode(mode);
        let mut app = app_with(plugin, 1, 1);
        let setup = app.world().resource::<PhysicsSetup>().clone();
        if setup.backend != "gpu" {
            assert!(
                std::env::var("AVBD_REQUIRE_GPU").map_or(true, |v| v != "1"),
                "AVBD_REQUIRE_GPU=1 but the plugin fell back to the CPU: {:?}",
                setup.error
            );
            eprintln!("skipping the GPU plugin test: {:?}", setup.error);
            return;
        }
        app.init_resource::<Log>();
        app.add_observer(|e: On<CollisionStarted>, mut log: ResMut<Log>| log.started.push(*e));
        app.add_observer(|e: On<CollisionEnded>, mut log: ResMut<Log>| log.ended.push(*e));
        let g = ground(&mut app);
        let c = cube(&mut app, Vec3::new(0.0, 1.5, 0.0));
        app.world_mut().entity_mut(c).insert(CollisionEvents);
        run(&mut app, 150);
        let y = transform(&app, c).translation.y;
        let resting = app.world().resource::<ContactPairs>().force(c, g).unwrap();
        eprintln!("GPU {mode:?}: rest y = {y:.6}, resting force {resting} N");
        assert!((y - 0.5).abs() < 1e-3, "{y}");
        app.world_mut().get_mut::<Transform>(c).unwrap().translation = Vec3::new(0.0, 10.0, 0.0);
        run(&mut app, 30);
        let log = app.world().resource::<Log>();
        assert_eq!((log.started.len(), log.ended.len()), (1, 1), "{mode:?}");
        let weight = 1000.0 * G;
        match mode {
            StepMode::Blocking => {
                assert!((resting - weight).abs() < 0.01 * weight, "{resting}");
                assert!((log.ended[0].force - weight).abs() < 0.01 * weight);
            }
            StepMode::Overlapped => assert!(resting.is_nan()),
        }
    }
}
