//! The primitive narrow phase inside the step (`SolverConfig::narrow_phase`): pairs of
//! spheres, capsules, boxes and half-spaces get their contacts from
//! `pipeline::collision::primitive`, the code the GPU's narrow phase ports, and their warm
//! starts carry over from step to step; parry3d stays the path of every other pair and the
//! reference a config can switch back to.
mod common;

use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::rigid::contact::NEW_POINT;
use bevy_avbd::{BodyDesc, Collider, NarrowPhase, PhysicsWorld, SolverConfig};
use common::*;

fn config(narrow_phase: NarrowPhase) -> SolverConfig {
    SolverConfig {
        narrow_phase,
        ..SolverConfig::default()
    }
}

/// Two capsules lying one on the other, axes parallel: the primitive
/// narrow phase gives the two points at the ends of the axes' overlap (the pair rests on a
/// line), parry3d's capsule pair one. The point count tells which one the step ran, and
/// the upper capsule must rest on the lower at twice the radius either way.
#[test]
fn capsule_pairs_take_the_primitive_path() {
    let lying = Quat::from_rotation_z(std::f32::consts::FRAC_PI_2);
    let (half, r) = (0.5, 0.2);
    let count_and_height = |np: NarrowPhase| {
        let mut w = PhysicsWorld::new(config(np)).unwrap();
        w.add_body(
            BodyDesc::fixed()
                .rotated(lying)
                .with_collider(Collider::capsule(half, r).unwrap()),
        )
        .unwrap();
        let top = w
            .add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(0.0, 2.0 * r + 0.005, 0.0))
                    .rotated(lying)
                    .with_collider(Collider::capsule(half, r).unwrap()),
            )
            .unwrap();
        w.step().unwrap();
        let count = w.contact_count();
        for _ in 0..59 {
            w.step().unwrap();
        }
        (count, w.body(top).unwrap().position.y)
    };
    let (ours, y_ours) = count_and_height(NarrowPhase::Primitive);
    let (parry, y_parry) = count_and_height(NarrowPhase::Parry);
    assert_eq!((ours, parry), (2, 1), "points per step");
    // Resting on a line of two points the capsule stays level and at 2r (within the 1 mm
    // the contact regularisation leaves after a second); on parry3d's single point it
    // balances only by symmetry.
    assert!((y_ours - 2.0 * r).abs() < 1e-3, "rests at {y_ours}");
    assert!(y_parry.is_finite());
}

/// A resting pyramid keeps every contact's warm start: after it settles no step finds a
/// point it cannot continue from the step before (the manifold carried while the pair
/// barely moves, else matched by feature id or by place where the reference face of two
/// equally good ones flips). Measured over frames 60–180 of the base-10 pyramid: 0 new
/// points of 69,600; parry3d's manifolds, 128 of 70,475 (0.18%).
#[test]
fn resting_pyramid_keeps_its_warm_starts() {
    let new_points = |np: NarrowPhase| {
        let mut s = run("pyramid", &[("base", 10.0)], config(np), 60);
        let (mut points, mut new) = (0usize, 0usize);
        for _ in 0..120 {
            s.step().unwrap();
            let p = s.world.contact_points();
            points += p.len();
            new += p.iter().filter(|c| c.prev == NEW_POINT).count();
        }
        (new, points)
    };
    let (new, points) = new_points(NarrowPhase::Primitive);
    let (parry_new, parry_points) = new_points(NarrowPhase::Parry);
    eprintln!("new points: primitive {new} of {points}, parry3d {parry_new} of {parry_points}");
    assert!(points > 120 * 200, "{points} points in 120 steps");
    assert!(
        new * 10_000 <= points,
        "{new} of {points} points had no warm start"
    );
}

/// Both narrow phases hold the stacking scenes to the acceptance bounds of
/// `tests/stacking.rs` (the primitive one is the default every other test runs).
#[test]
fn parry_reference_path_still_stacks() {
    let s = run(
        "pyramid",
        &[("base", 20.0)],
        config(NarrowPhase::Parry),
        600,
    );
    assert!(metric(&s, "max_drift") < 0.02);
    let s = run("stack", &[("boxes", 10.0)], config(NarrowPhase::Parry), 600);
    assert!(metric(&s, "max_drift") < 0.01);
}

/// The config field is settable by name and checked.
#[test]
fn narrow_phase_is_a_config_field() {
    let mut c = SolverConfig::default();
    assert_eq!(c.narrow_phase, NarrowPhase::Primitive);
    c.set("narrow_phase", 1.0).unwrap();
    assert_eq!(c.narrow_phase, NarrowPhase::Parry);
    assert!(c.set("narrow_phase", 2.0).is_err());
    assert_eq!(c.narrow_phase, NarrowPhase::Parry, "unchanged on error");
}
