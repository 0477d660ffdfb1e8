//! A box tower next to a 20-link chain holding a 1,000:1 weight, on the plain-Rust API:
//! build a `PhysicsWorld`, step it at 60 Hz with the fixed budget, read the state back.
//!
//! ```sh
//! cargo run --release --example tower_and_chain            # CPU backend
//! cargo run --release --example tower_and_chain -- gpu     # wgpu backend (error if no adapter)
//! ```

use bevy_avbd::glam::Vec3;
use bevy_avbd::{
    Backend, BodyDesc, Collider, JointDesc, JointKind, PhysicsError, PhysicsWorld, SolverConfig,
};

fn main() -> Result<(), PhysicsError> {
    let backend = match std::env::args().nth(1).as_deref() {
        Some("gpu") => Backend::Gpu,
        Some("auto") => Backend::Auto,
        _ => Backend::Cpu,
    };
    let mut world = PhysicsWorld::with_backend(SolverConfig::default(), backend)?;
    println!("backend: {:?}", world.backend());

    // Ground and a tower of 8 unit boxes (1,000 kg each: density 1,000 kg/m³).
    world.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y)?))?;
    let tower: Vec<_> = (0..8)
        .map(|i| {
            world.add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(0.0, 0.5 + i as f32, 0.0))
                    .with_collider(Collider::cuboid(Vec3::splat(0.5))?),
            )
        })
        .collect::<Result<_, _>>()?;

    // A chain of 20 light links (1 kg) from a world anchor, ending in a 1,000 kg weight,
    // released horizontally so it swings.
    let (links, link_len, top) = (20, 0.25f32, Vec3::new(4.0, 8.0, 0.0));
    let mut prev = None;
    let mut joints = Vec::new();
    let mut ends = Vec::new();
    for i in 0..=links {
        let heavy = i == links;
        let at = top + Vec3::X * link_len * (i as f32 + 1.0);
        let body = world.add_body(
            BodyDesc::dynamic()
                .at(at)
                .with_mass(if heavy { 1000.0 } else { 1.0 })
                .with_inertia(Vec3::splat(if heavy { 40.0 } else { 0.01 })),
        )?;
        let half = Vec3::X * link_len * 0.5;
        let joint = match prev {
            None => JointDesc::new(JointKind::Ball, body, None).anchors(-half * 2.0, top),
            Some(p) => JointDesc::new(JointKind::Ball, body, Some(p)).anchors(-half, half),
        };
        joints.push(world.add_joint(joint)?);
        ends.push(body);
        prev = Some(body);
    }

    let tower_start = world.body(*tower.last().unwrap())?.position;
    let mut worst_gap = 0.0f32;
    for frame in 1..=180 {
        let report = world.step()?;
        if !report.frozen.is_empty() {
            println!(
                "frame {frame}: frozen non-finite bodies {:?}",
                report.frozen
            );
        }
        for j in &joints {
            worst_gap = worst_gap.max(world.joint_error(*j)?);
        }
        if frame % 60 == 0 {
            let top_box = world.body(*tower.last().unwrap())?;
            let weight = world.body(*ends.last().unwrap())?;
            println!(
                "t = {:.1} s: tower top moved {:.4} m, weight at {:.2?}, worst joint gap so far {:.2} mm, step {:.2} ms",
                frame as f32 / 60.0,
                (top_box.position - tower_start).length(),
                weight.position,
                worst_gap * 1e3,
                world.stats().total_ms
            );
        }
    }
    Ok(())
}
