//! bevy_avbd in a bevy_ecs game loop: bodies and joints are components, a game system
//! drops a new crate every half second, another reads the physics report, and the physics
//! system sets run between them.
//!
//! ```sh
//! cargo run --release --example ecs_game_loop
//! ```

use bevy_avbd::ecs::{
    ColliderShape, Joint, LastStepReport, LinearVelocity, PhysicsSet, Position, RigidBody,
    add_physics_systems, init_physics,
};
use bevy_avbd::glam::Vec3;
use bevy_avbd::{Collider, JointKind, SolverConfig};
use bevy_ecs::prelude::*;

/// A crate dropped by the game.
#[derive(Component)]
struct Crate;

#[derive(Resource, Default)]
struct Frame(u32);

/// Game logic before physics: every 30 frames a crate falls onto the pile.
fn drop_crates(mut commands: Commands, mut frame: ResMut<Frame>) {
    frame.0 += 1;
    if frame.0 % 30 == 1 {
        let x = ((frame.0 / 30) % 3) as f32 * 0.3 - 0.3;
        commands.spawn((
            Crate,
            RigidBody::Dynamic,
            Position(Vec3::new(x, 6.0, 0.0)),
            ColliderShape(Collider::cuboid(Vec3::splat(0.4)).unwrap()),
        ));
    }
}

/// Game logic after physics: report errors and summarise the pile once a second.
fn report(
    frame: Res<Frame>,
    last: Res<LastStepReport>,
    crates: Query<(&Position, &LinearVelocity), With<Crate>>,
) {
    for e in &last.errors {
        println!("physics error: {e:?}");
    }
    if frame.0.is_multiple_of(60) {
        // The pile: crates that have come to rest.
        let resting: Vec<f32> = crates
            .iter()
            .filter(|(_, v)| v.0.length() < 0.05)
            .map(|(p, _)| p.0.y)
            .collect();
        let top = resting.iter().copied().fold(0.0f32, f32::max);
        println!(
            "t = {:.0} s: {} crates, {} at rest, pile top at y = {:.2} m, {} contacts, step {:.2} ms",
            frame.0 as f32 / 60.0,
            crates.iter().count(),
            resting.len(),
            top,
            last.stats.contacts,
            last.stats.total_ms
        );
    }
}

fn main() {
    let mut world = World::new();
    init_physics(&mut world, SolverConfig::default()).expect("valid config");
    world.init_resource::<Frame>();

    // Static ground and a lamp hanging from the world on a ball joint.
    world.spawn((
        RigidBody::Static,
        ColliderShape(Collider::halfspace(Vec3::Y).unwrap()),
    ));
    let lamp = world
        .spawn((
            RigidBody::Dynamic,
            Position(Vec3::new(3.0, 4.0, 0.0)),
            ColliderShape(Collider::ball(0.2).unwrap()),
        ))
        .id();
    world.spawn(
        Joint::new(JointKind::Ball, lamp, None)
            .anchors(Vec3::new(0.0, 0.2, 0.0), Vec3::new(2.0, 5.0, 0.0)),
    );

    let mut schedule = Schedule::default();
    add_physics_systems(&mut schedule);
    schedule.add_systems((
        drop_crates.before(PhysicsSet::SyncToCore),
        report.after(PhysicsSet::Writeback),
    ));

    for _ in 0..300 {
        schedule.run(&mut world);
        world.clear_trackers();
    }
}
