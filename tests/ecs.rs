//! The bevy_ecs layer: bodies, joints, edits, removals and errors through components.

use bevy_avbd::ecs::*;
use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::{Collider, JointKind, PhysicsError, SolverConfig};
use bevy_ecs::prelude::{Entity, Schedule, World};

const G: f32 = 9.81;
const DT: f32 = 1.0 / 60.0;

fn setup() -> (World, Schedule) {
    let mut world = World::new();
    init_physics(&mut world, SolverConfig::default()).unwrap();
    let mut schedule = Schedule::default();
    add_physics_systems(&mut schedule);
    (world, schedule)
}

fn run(world: &mut World, schedule: &mut Schedule, frames: usize) {
    for _ in 0..frames {
        schedule.run(world);
        world.clear_trackers();
    }
}

fn ground(world: &mut World) -> Entity {
    world
        .spawn((
            RigidBody::Static,
            Position(Vec3::ZERO),
            ColliderShape(Collider::halfspace(Vec3::Y).unwrap()),
        ))
        .id()
}

fn unit_box(world: &mut World, at: Vec3) -> Entity {
    world
        .spawn((
            RigidBody::Dynamic,
            Position(at),
            ColliderShape(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
        ))
        .id()
}

fn pos(world: &World, e: Entity) -> Vec3 {
    world.get::<Position>(e).unwrap().0
}

fn rot(world: &World, e: Entity) -> Quat {
    world.get::<Rotation>(e).unwrap().0
}

fn vel(world: &World, e: Entity) -> Vec3 {
    world.get::<LinearVelocity>(e).unwrap().0
}

fn physics(world: &World) -> &Physics {
    world.resource::<Physics>()
}

fn report(world: &World) -> &LastStepReport {
    world.resource::<LastStepReport>()
}

/// (1) A unit box dropped from 2 m rests on the ground at y = 0.5 (±1 cm) after 2 s.
#[test]
fn box_comes_to_rest_on_ground() {
    let (mut world, mut schedule) = setup();
    let g = ground(&mut world);
    let b = unit_box(&mut world, Vec3::new(0.0, 2.0, 0.0));
    run(&mut world, &mut schedule, 120);

    let p = pos(&world, b);
    eprintln!(
        "box rest height {} m, speed {} m/s",
        p.y,
        vel(&world, b).length()
    );
    assert!((p.y - 0.5).abs() < 0.01, "rest height {}", p.y);
    assert!(
        p.x.abs() < 0.01 && p.z.abs() < 0.01,
        "drifted sideways: {p}"
    );
    assert!(
        vel(&world, b).length() < 0.05,
        "still moving: {}",
        vel(&world, b)
    );
    assert!(
        rot(&world, b).angle_between(Quat::IDENTITY) < 0.01,
        "tipped over"
    );
    // The ECS pose is the core's, and the static ground was never moved.
    let s = physics(&world).body_state(b).unwrap();
    assert_eq!(s.position, p);
    assert_eq!(pos(&world, g), Vec3::ZERO);
    assert!(report(&world).stepped);
    assert!(
        report(&world).errors.is_empty(),
        "{:?}",
        report(&world).errors
    );
    assert!(report(&world).stats.contacts > 0);
    // Handles were mirrored into components.
    let h = world.get::<PhysicsBodyHandle>(b).unwrap().0;
    assert_eq!(physics(&world).body_handle(b), Some(h));
    assert_eq!(physics(&world).body_entity(h), Some(b));
}

/// (2) Free fall for 1 s: v = −9.81 m/s (1%), y follows implicit Euler, ECS == core.
#[test]
fn free_fall_matches_gravity_and_core() {
    let (mut world, mut schedule) = setup();
    let b = world
        .spawn((
            RigidBody::Dynamic,
            Position(Vec3::new(0.0, 10.0, 0.0)),
            Mass(2.0),
        ))
        .id();
    run(&mut world, &mut schedule, 60);

    let v = vel(&world, b);
    eprintln!("free fall: v = {v}, y = {}", pos(&world, b).y);
    assert!((v.y + G).abs() < 0.01 * G, "v = {v}");
    assert!(v.x.abs() < 1e-6 && v.z.abs() < 1e-6);
    // Implicit Euler: y_n = y_0 − g h² n(n+1)/2.
    let expected = 10.0 - G * DT * DT * (60.0 * 61.0) / 2.0;
    assert!(
        (pos(&world, b).y - expected).abs() < 1e-3,
        "y = {}",
        pos(&world, b).y
    );
    let s = physics(&world).body_state(b).unwrap();
    assert_eq!(s.linear_velocity, v);
    assert_eq!(
        world.get::<AngularVelocity>(b).unwrap().0,
        s.angular_velocity
    );
    assert_eq!(s.position, pos(&world, b));
    assert_eq!(s.mass, 2.0);
}

/// (3) Spawning at runtime works; despawning removes the body and its joint from the core.
#[test]
fn runtime_spawn_and_despawn() {
    let (mut world, mut schedule) = setup();
    ground(&mut world);
    run(&mut world, &mut schedule, 10);
    assert_eq!(physics(&world).body_count(), 1);

    let b = unit_box(&mut world, Vec3::new(0.0, 5.0, 0.0));
    run(&mut world, &mut schedule, 10);
    assert_eq!(physics(&world).body_count(), 2);
    // 10 frames of free fall.
    let expected_y = 5.0 - G * DT * DT * 55.0;
    assert!(
        (pos(&world, b).y - expected_y).abs() < 1e-3,
        "y = {}",
        pos(&world, b).y
    );
    assert!((vel(&world, b).y + G * 10.0 * DT).abs() < 1e-3);

    // Hang a second box from the first one, then despawn the first.
    let c = unit_box(&mut world, Vec3::new(0.0, 3.5, 0.0));
    let j = world
        .spawn(
            Joint::new(JointKind::Ball, c, Some(b))
                .anchors(Vec3::new(0.0, 0.75, 0.0), Vec3::new(0.0, -0.75, 0.0)),
        )
        .id();
    run(&mut world, &mut schedule, 1);
    assert_eq!(physics(&world).body_count(), 3);
    assert_eq!(physics(&world).joint_count(), 1);
    assert!(world.get::<PhysicsJointHandle>(j).is_some());
    let jh = physics(&world).joint_handle(j).unwrap();
    assert_eq!(physics(&world).joint_entity(jh), Some(j));

    let bh = physics(&world).body_handle(b).unwrap();
    world.despawn(b);
    run(&mut world, &mut schedule, 1);
    assert_eq!(physics(&world).body_count(), 2);
    assert!(!physics(&world).core().contains_body(bh));
    assert_eq!(physics(&world).joint_count(), 0);
    assert_eq!(physics(&world).joint_handle(j), None);
    assert!(world.get::<PhysicsJointHandle>(j).is_none());
    // The orphaned joint entity says why it is not simulated.
    assert_eq!(
        world.get::<InvalidJoint>(j).unwrap().0,
        EcsPhysicsError::MissingBodyEntity {
            field: "body_b",
            entity: b
        }
    );
    // The remaining box keeps falling.
    let y0 = pos(&world, c).y;
    run(&mut world, &mut schedule, 5);
    assert!(pos(&world, c).y < y0 - 0.01);

    // Despawning the joint entity itself removes a live joint.
    let d = unit_box(&mut world, Vec3::new(3.0, 5.0, 0.0));
    let j2 = world
        .spawn(Joint::new(JointKind::Ball, d, None).anchors(Vec3::ZERO, Vec3::new(3.0, 5.0, 0.0)))
        .id();
    run(&mut world, &mut schedule, 1);
    assert_eq!(physics(&world).joint_count(), 1);
    world.despawn(j2);
    run(&mut world, &mut schedule, 1);
    assert_eq!(physics(&world).joint_count(), 0);

    // Removing only RigidBody removes the body too.
    world.entity_mut(d).remove::<RigidBody>();
    run(&mut world, &mut schedule, 1);
    assert_eq!(physics(&world).body_count(), 2);
    assert!(world.get::<PhysicsBodyHandle>(d).is_none());
}

/// With `observe_removals`, a despawn is seen however many `clear_trackers` (frames) pass
/// before the physics schedule runs again (`RemovedComponents` keeps it for two), and so
/// is a removed collider (the body is rebuilt without it).
#[test]
fn observed_removals_survive_skipped_runs() {
    let (mut world, mut schedule) = setup();
    observe_removals(&mut world);
    observe_removals(&mut world); // idempotent
    ground(&mut world);
    let a = unit_box(&mut world, Vec3::new(0.0, 0.5, 0.0));
    let b = unit_box(&mut world, Vec3::new(3.0, 0.5, 0.0));
    world.entity_mut(b).insert(Mass(5.0));
    run(&mut world, &mut schedule, 2);
    let collider = |world: &World| {
        let p = physics(world);
        p.core().collider_shape(p.body_handle(b).unwrap()).is_some()
    };
    assert!(collider(&world));
    world.despawn(a);
    world.entity_mut(b).remove::<ColliderShape>();
    for _ in 0..4 {
        world.clear_trackers(); // frames in which the physics schedule does not run
    }
    run(&mut world, &mut schedule, 1);
    assert_eq!(physics(&world).body_count(), 2);
    assert_eq!(physics(&world).body_handle(a), None);
    assert!(!collider(&world), "rebuilt without its collider");
}

/// (4) A joint naming a despawned or nonexistent entity records a typed error, no panic.
#[test]
fn joint_to_missing_entity_is_an_error() {
    let (mut world, mut schedule) = setup();
    let a = world
        .spawn((
            RigidBody::Dynamic,
            Position(Vec3::new(0.0, 10.0, 0.0)),
            Mass(1.0),
        ))
        .id();
    let gone = world.spawn_empty().id();
    world.despawn(gone);
    let j1 = world.spawn(Joint::new(JointKind::Ball, a, Some(gone))).id();
    let j2 = world
        .spawn(Joint::new(JointKind::Fixed, Entity::PLACEHOLDER, None))
        .id();
    // An entity that exists but is no body.
    let not_a_body = world.spawn_empty().id();
    let j3 = world
        .spawn(Joint::new(JointKind::Ball, not_a_body, Some(a)))
        .id();
    run(&mut world, &mut schedule, 1);

    let expect = [
        (j1, "body_b", gone),
        (j2, "body_a", Entity::PLACEHOLDER),
        (j3, "body_a", not_a_body),
    ];
    for (j, field, entity) in expect {
        let err = EcsPhysicsError::MissingBodyEntity { field, entity };
        assert_eq!(world.get::<InvalidJoint>(j).unwrap().0, err);
        assert_eq!(report(&world).errors_for(j).collect::<Vec<_>>(), vec![&err]);
    }
    assert_eq!(report(&world).errors.len(), 3);
    assert_eq!(physics(&world).joint_count(), 0);

    // The world steps on; a persisting error is not reported again every frame.
    run(&mut world, &mut schedule, 59);
    assert!(report(&world).errors.is_empty());
    assert!((vel(&world, a).y + G).abs() < 0.01 * G);
    assert!(world.get::<InvalidJoint>(j1).is_some());

    // A pending joint is created once its body exists.
    let next_to_a = pos(&world, a) + Vec3::X;
    world
        .entity_mut(not_a_body)
        .insert((RigidBody::Dynamic, Position(next_to_a), Mass(1.0)));
    run(&mut world, &mut schedule, 1);
    assert!(world.get::<InvalidJoint>(j3).is_none());
    assert!(physics(&world).joint_handle(j3).is_some());
    assert_eq!(physics(&world).joint_count(), 1);

    // A joint the core rejects (non-finite anchor) is a typed core error.
    let j4 = world
        .spawn(Joint::new(JointKind::Ball, a, None).anchors(Vec3::NAN, Vec3::ZERO))
        .id();
    run(&mut world, &mut schedule, 1);
    assert!(matches!(
        world.get::<InvalidJoint>(j4).unwrap().0,
        EcsPhysicsError::Physics(PhysicsError::InvalidJoint {
            field: "anchor_a",
            ..
        })
    ));
    assert_eq!(physics(&world).joint_count(), 1);
}

/// (5) A NaN position is an `InvalidBody` error naming `position`; fixing it creates the body.
#[test]
fn nan_position_is_an_invalid_body() {
    let (mut world, mut schedule) = setup();
    let good = unit_box(&mut world, Vec3::new(5.0, 10.0, 0.0));
    let bad = unit_box(&mut world, Vec3::new(f32::NAN, 1.0, 0.0));
    run(&mut world, &mut schedule, 1);

    let err = &world.get::<InvalidBody>(bad).unwrap().0;
    assert!(
        matches!(
            err,
            PhysicsError::InvalidBody {
                field: "position",
                ..
            }
        ),
        "{err:?}"
    );
    let reported: Vec<_> = report(&world).errors_for(bad).cloned().collect();
    assert_eq!(reported, vec![EcsPhysicsError::Physics(err.clone())]);
    assert_eq!(physics(&world).body_count(), 1);
    assert_eq!(physics(&world).body_handle(bad), None);
    assert!(world.get::<PhysicsBodyHandle>(bad).is_none());

    run(&mut world, &mut schedule, 29);
    assert!(report(&world).errors.is_empty(), "reported once only");
    assert!((vel(&world, good).y + 30.0 * DT * G).abs() < 1e-3);

    // Fixing the position brings the body in.
    world.get_mut::<Position>(bad).unwrap().0 = Vec3::new(0.0, 3.0, 0.0);
    run(&mut world, &mut schedule, 1);
    assert!(world.get::<InvalidBody>(bad).is_none());
    assert_eq!(physics(&world).body_count(), 2);
    assert!(pos(&world, bad).y < 3.0);

    // Other invalid descriptions name their field too.
    let no_mass = world.spawn((RigidBody::Dynamic, Position(Vec3::Y))).id();
    let bad_quat = world
        .spawn((
            RigidBody::Dynamic,
            Mass(1.0),
            Rotation(Quat::from_xyzw(0.0, 0.0, 0.0, 2.0)),
        ))
        .id();
    let bad_mass = world.spawn((RigidBody::Dynamic, Mass(-1.0))).id();
    run(&mut world, &mut schedule, 1);
    for (e, field) in [
        (no_mass, "mass"),
        (bad_quat, "rotation"),
        (bad_mass, "mass"),
    ] {
        let err = &world.get::<InvalidBody>(e).unwrap().0;
        assert!(
            matches!(err, PhysicsError::InvalidBody { field: f, .. } if *f == field),
            "{err:?}"
        );
    }
    assert_eq!(physics(&world).body_count(), 2);

    // A NaN written on a live body is reported; the core keeps its state and the
    // writeback restores the component.
    world.get_mut::<LinearVelocity>(good).unwrap().0 = Vec3::NAN;
    run(&mut world, &mut schedule, 1);
    assert!(matches!(
        report(&world).errors_for(good).next(),
        Some(EcsPhysicsError::Physics(PhysicsError::InvalidBody {
            field: "linear_velocity",
            ..
        }))
    ));
    assert!(vel(&world, good).is_finite());
    assert!((vel(&world, good).y + 33.0 * DT * G).abs() < 1e-3);
}

/// (6) An ECS-built two-link ball-jointed pendulum keeps its anchors within 1 mm.
#[test]
fn pendulum_keeps_anchor_distance() {
    let (mut world, mut schedule) = setup();
    let pivot = Vec3::new(0.0, 5.0, 0.0);
    let ball = |world: &mut World, at: Vec3| {
        world
            .spawn((
                RigidBody::Dynamic,
                Position(at),
                ColliderShape(Collider::ball(0.1).unwrap()),
            ))
            .id()
    };
    // Released horizontal: bob1 1 m from the pivot, bob2 1 m further.
    let bob1 = ball(&mut world, pivot + Vec3::X);
    let bob2 = ball(&mut world, pivot + 2.0 * Vec3::X);
    let j1 = world
        .spawn(Joint::new(JointKind::Ball, bob1, None).anchors(-Vec3::X, pivot))
        .id();
    let j2 = world
        .spawn(Joint::new(JointKind::Ball, bob2, Some(bob1)).anchors(-0.5 * Vec3::X, 0.5 * Vec3::X))
        .id();

    let mut worst = 0.0f32;
    let mut lowest = f32::MAX;
    for _ in 0..180 {
        run(&mut world, &mut schedule, 1);
        let (p1, q1) = (pos(&world, bob1), rot(&world, bob1));
        let (p2, q2) = (pos(&world, bob2), rot(&world, bob2));
        let e1 = (p1 + q1 * -Vec3::X - pivot).length();
        let e2 = (p2 + q2 * (-0.5 * Vec3::X) - (p1 + q1 * (0.5 * Vec3::X))).length();
        worst = worst.max(e1).max(e2);
        lowest = lowest.min(p2.y);
        let core = physics(&world).core();
        for j in [j1, j2] {
            let h = physics(&world).joint_handle(j).unwrap();
            assert!(core.joint_error(h).unwrap() < 1e-3);
        }
    }
    eprintln!("pendulum: worst anchor error {worst} m, lowest bob2 y {lowest} m");
    assert!(worst < 1e-3, "anchor error {worst} m");
    // It really swung: bob2 went well below the pivot.
    assert!(lowest < pivot.y - 1.0, "lowest {lowest}");
    assert!(report(&world).errors.is_empty());
}

/// A joint overloaded past its breaking force is reported broken and marked.
#[test]
fn broken_joint_is_reported() {
    let (mut world, mut schedule) = setup();
    let bob = world
        .spawn((
            RigidBody::Dynamic,
            Position(Vec3::new(0.0, 4.0, 0.0)),
            ColliderShape(Collider::ball(0.1).unwrap()),
        ))
        .id();
    // The bob weighs ~41 N; the joint holds 1 N.
    let j = world
        .spawn(
            Joint::new(JointKind::Ball, bob, None)
                .anchors(Vec3::Y, Vec3::new(0.0, 5.0, 0.0))
                .breakable(1.0),
        )
        .id();
    let mut broke_at = None;
    for frame in 0..30 {
        run(&mut world, &mut schedule, 1);
        if report(&world).broken_joints.contains(&j) {
            broke_at = Some(frame);
            break;
        }
    }
    assert!(broke_at.is_some(), "the joint never broke");
    run(&mut world, &mut schedule, 1);
    assert!(world.get::<JointBroken>(j).is_some());
    let h = physics(&world).joint_handle(j).unwrap();
    assert!(physics(&world).core().joint_broken(h).unwrap());
    // The bob falls freely afterwards.
    let v0 = vel(&world, bob).y;
    run(&mut world, &mut schedule, 10);
    assert!((vel(&world, bob).y - (v0 - 10.0 * DT * G)).abs() < 1e-2);
    // Editing the Joint re-creates it unbroken.
    world.get_mut::<Joint>(j).unwrap().breaking_force = None;
    let anchor = pos(&world, bob) + Vec3::Y;
    world.get_mut::<Joint>(j).unwrap().anchor_b = anchor;
    run(&mut world, &mut schedule, 1);
    assert!(world.get::<JointBroken>(j).is_none());
    let h = physics(&world).joint_handle(j).unwrap();
    assert!(!physics(&world).core().joint_broken(h).unwrap());
    assert_eq!(physics(&world).joint_count(), 1);
}

/// External forces, teleports, config changes and description changes.
#[test]
fn edits_reach_the_core() {
    let (mut world, mut schedule) = setup();
    let b = world
        .spawn((
            RigidBody::Dynamic,
            Position(Vec3::new(0.0, 10.0, 0.0)),
            Mass(2.0),
            ExternalForce {
                force: Vec3::new(0.0, 2.0 * G, 0.0),
                torque: Vec3::ZERO,
            },
        ))
        .id();
    run(&mut world, &mut schedule, 30);
    // Gravity cancelled: the body hovers.
    assert!(vel(&world, b).length() < 1e-4, "{}", vel(&world, b));
    assert!((pos(&world, b).y - 10.0).abs() < 1e-4);

    // Removing the force lets it fall.
    world.entity_mut(b).remove::<ExternalForce>();
    run(&mut world, &mut schedule, 30);
    assert!((vel(&world, b).y + 30.0 * DT * G).abs() < 1e-3);

    // Teleport + velocity edit.
    world.get_mut::<Position>(b).unwrap().0 = Vec3::new(1.0, 20.0, 0.0);
    world.get_mut::<LinearVelocity>(b).unwrap().0 = Vec3::new(1.0, 0.0, 0.0);
    run(&mut world, &mut schedule, 1);
    let p = pos(&world, b);
    assert!((p.y - (20.0 - G * DT * DT)).abs() < 1e-4, "{p}");
    assert!((p.x - (1.0 + DT)).abs() < 1e-4, "{p}");

    // Changing the mass rebuilds the body, keeping its motion.
    let h0 = physics(&world).body_handle(b).unwrap();
    let v0 = vel(&world, b);
    world.get_mut::<Mass>(b).unwrap().0 = 5.0;
    run(&mut world, &mut schedule, 1);
    let h1 = physics(&world).body_handle(b).unwrap();
    assert_ne!(h0, h1);
    assert_eq!(physics(&world).body_count(), 1);
    assert_eq!(physics(&world).body_state(b).unwrap().mass, 5.0);
    assert!((vel(&world, b) - (v0 - Vec3::Y * G * DT)).length() < 1e-4);
    // Touching a component without changing it does not rebuild.
    world.get_mut::<Mass>(b).unwrap().0 = 5.0;
    run(&mut world, &mut schedule, 1);
    assert_eq!(physics(&world).body_handle(b), Some(h1));

    // Config: zero gravity stops the acceleration; an invalid config is rejected.
    let v1 = vel(&world, b);
    world.resource_mut::<PhysicsConfig>().0.gravity = Vec3::ZERO;
    run(&mut world, &mut schedule, 10);
    assert!((vel(&world, b) - v1).length() < 1e-5);
    world.resource_mut::<PhysicsConfig>().0.dt = -1.0;
    run(&mut world, &mut schedule, 1);
    assert!(matches!(
        report(&world).errors.as_slice(),
        [PhysicsErrorRecord {
            entity: None,
            error: EcsPhysicsError::Physics(PhysicsError::InvalidConfig { field: "dt", .. })
        }]
    ));
    assert!(report(&world).stepped);
    assert_eq!(physics(&world).core().config.dt, DT);
}

/// Writeback keeps the static ground untouched and a kinematic body moves at its velocity.
#[test]
fn kinematic_moves_static_stays() {
    let (mut world, mut schedule) = setup();
    let g = ground(&mut world);
    let k = world
        .spawn((
            RigidBody::Kinematic,
            Position(Vec3::new(0.0, 3.0, 0.0)),
            LinearVelocity(Vec3::new(2.0, 0.0, 0.0)),
            ColliderShape(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
        ))
        .id();
    run(&mut world, &mut schedule, 60);
    let p = pos(&world, k);
    assert!((p - Vec3::new(2.0, 3.0, 0.0)).length() < 1e-3, "{p}");
    assert_eq!(pos(&world, g), Vec3::ZERO);
    assert_eq!(physics(&world).body_state(g).unwrap().position, Vec3::ZERO);
}

/// `StepMode::Overlapped` (each run finishes the previous run's step and begins the next)
/// runs the same steps and edits as `StepMode::Blocking`: after n + 1 runs its components
/// hold, bit for bit, what the blocking world's held after n, on both backends, including
/// a velocity written by the user while a step was in flight.
#[test]
fn overlapped_mode_lags_blocking_by_one_step_exactly() {
    use bevy_avbd::Backend;
    let mut backends = vec![Backend::Cpu];
    match bevy_avbd::PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu) {
        Ok(_) => backends.push(Backend::Gpu),
        Err(e) => assert!(
            std::env::var("AVBD_REQUIRE_GPU").as_deref() != Ok("1"),
            "{e}"
        ),
    }
    for backend in backends {
        let build = |mode: StepMode| {
            let mut world = World::new();
            init_physics_on(&mut world, SolverConfig::default(), backend).unwrap();
            *world.resource_mut::<StepMode>() = mode;
            let mut schedule = Schedule::default();
            add_physics_systems(&mut schedule);
            ground(&mut world);
            let boxes: Vec<Entity> = (0..4)
                .map(|i| {
                    unit_box(
                        &mut world,
                        Vec3::new(0.3 * i as f32, 0.6 + 1.2 * i as f32, 0.0),
                    )
                })
                .collect();
            (world, schedule, boxes)
        };
        let (mut blocking, mut bs, boxes) = build(StepMode::Blocking);
        let (mut overlapped, mut os, _) = build(StepMode::Overlapped);
        let state = |w: &World| {
            boxes
                .iter()
                .map(|&e| {
                    (
                        pos(w, e),
                        rot(w, e),
                        vel(w, e),
                        w.get::<AngularVelocity>(e).unwrap().0,
                    )
                })
                .collect::<Vec<_>>()
        };
        for n in 0..60 {
            if n == 15 {
                // Written between runs; in the overlapped world a step is in flight.
                assert!(physics(&overlapped).core().step_in_flight());
                for w in [&mut blocking, &mut overlapped] {
                    w.get_mut::<LinearVelocity>(boxes[3]).unwrap().0 = Vec3::new(2.0, 5.0, 0.0);
                }
            }
            let before = state(&blocking);
            run(&mut blocking, &mut bs, 1);
            run(&mut overlapped, &mut os, 1);
            assert_eq!(state(&overlapped), before, "{backend:?}, run {}", n + 1);
            assert!(report(&overlapped).errors.is_empty(), "{backend:?}");
            assert_eq!(report(&overlapped).stepped, n > 0, "{backend:?}");
        }
        // The edit took effect: the top box was thrown up and sideways.
        assert!(pos(&blocking, boxes[3]).x > 1.5, "{backend:?}");
    }
}

/// A soft rod entity pinned at its top holds a box entity by vertex attachments: the rod's
/// positions are written back every frame, the box hangs below it; a bad mesh is an
/// `InvalidDeformable` naming the element; despawning the rod leaves the attachment
/// entities waiting with an `InvalidAttachment`, and the box falls.
#[test]
fn deformable_entities_attach_write_back_and_despawn() {
    use bevy_avbd::{DeformableDesc, SolidMaterial, TetMesh};
    let (mut world, mut schedule) = setup();
    let mesh = TetMesh::rod(1.0, 0.05, 8);
    let n = mesh.vertices.len();
    let top: Vec<u32> = (0..n as u32)
        .filter(|&v| mesh.vertices[v as usize].x > 0.499)
        .collect();
    let bottom: Vec<u32> = (0..n as u32)
        .filter(|&v| mesh.vertices[v as usize].x < -0.499)
        .collect();
    // The rod along x rotated to hang along −y from (0, 3, 0).
    let rot = Quat::from_rotation_z(std::f32::consts::FRAC_PI_2);
    let material = SolidMaterial {
        youngs: 1e7,
        ..Default::default()
    };
    let rod = world
        .spawn(Deformable(
            DeformableDesc::solid(mesh.clone(), material)
                .at(Vec3::new(0.0, 2.5, 0.0))
                .rotated(rot)
                .pinned(top),
        ))
        .id();
    let weight = world
        .spawn((
            RigidBody::Dynamic,
            Position(Vec3::new(0.0, 1.95, 0.0)),
            ColliderShape(Collider::ball(0.05).unwrap()),
        ))
        .id();
    let links: Vec<Entity> = bottom
        .iter()
        .map(|&v| {
            world
                .spawn(VertexAttachment {
                    deformable: rod,
                    vertex: v,
                    body: weight,
                    anchor: None,
                    breaking_force: None,
                })
                .id()
        })
        .collect();
    let mut bad = mesh.clone();
    bad.tets[3].swap(0, 1);
    let broken_mesh = world
        .spawn(Deformable(DeformableDesc::solid(bad, material)))
        .id();
    run(&mut world, &mut schedule, 60);
    let p = &world.get::<DeformablePositions>(rod).unwrap().0;
    assert_eq!(p.len(), n);
    let core = physics(&world)
        .core()
        .deformable(physics(&world).deformable_handle(rod).unwrap())
        .unwrap();
    for (a, b) in p.iter().zip(core.positions()) {
        assert_eq!(*a, Vec3::from(*b));
    }
    for &l in &links {
        assert!(world.get::<PhysicsAttachmentHandle>(l).is_some());
    }
    let y = pos(&world, weight).y;
    assert!(
        (1.9..2.0).contains(&y),
        "the weight hangs at the rod's end: y = {y}"
    );
    match &world.get::<InvalidDeformable>(broken_mesh).unwrap().0 {
        PhysicsError::InvalidMesh {
            element: "tet",
            index: 3,
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    world.despawn(rod);
    run(&mut world, &mut schedule, 30);
    for &l in &links {
        assert!(world.get::<InvalidAttachment>(l).is_some());
        assert!(world.get::<PhysicsAttachmentHandle>(l).is_none());
    }
    assert!(pos(&world, weight).y < 1.0, "released, the weight fell");
    assert_eq!(physics(&world).core().deformable_count(), 0);
}
