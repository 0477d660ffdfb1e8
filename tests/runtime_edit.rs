//! Editing a world between steps: adding and removing bodies and joints keeps every
//! remaining handle valid, pointing at the same body, and simulating normally.
//!
//! Tolerances: free fall is checked against implicit Euler's exact v = −g·n·h within 1%
//! (f32 round-off only; a body still held by a removed joint or colliding with a removed
//! body would be at 0). Rest heights within 5 mm and speeds below 0.05 m/s as in
//! `tests/colliders.rs`. Joint anchor errors below 1 mm: a hard joint holding a few kg
//! has sub-millimetre error, while a joint re-pointed at the wrong body would be off by
//! the distance between bodies (≥ 0.5 m here).

use bevy_avbd::glam::{Quat, Vec3};
use bevy_avbd::{
    BodyDesc, BodyHandle, Collider, JointDesc, JointHandle, JointKind, PhysicsError, PhysicsWorld,
    SolverConfig,
};

const DT: f32 = 1.0 / 60.0;
const G: f32 = 9.81;
const HEIGHT_TOL: f32 = 5e-3;
const SPEED_TOL: f32 = 0.05;
const JOINT_TOL: f32 = 1e-3;

fn world_with_ground() -> PhysicsWorld {
    let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
    w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
        .unwrap();
    w
}

fn ball_at(w: &mut PhysicsWorld, p: Vec3, r: f32) -> BodyHandle {
    w.add_body(
        BodyDesc::dynamic()
            .at(p)
            .with_collider(Collider::ball(r).unwrap()),
    )
    .unwrap()
}

fn run(w: &mut PhysicsWorld, frames: usize) {
    for _ in 0..frames {
        let r = w.step().unwrap();
        assert!(r.frozen.is_empty() && r.broken.is_empty(), "{r:?}");
    }
}

#[track_caller]
fn assert_free_fall_velocity(w: &PhysicsWorld, h: BodyHandle, frames: usize) {
    let v = w.body(h).unwrap().linear_velocity;
    let expected = -G * frames as f32 * DT;
    assert!(
        ((v.y - expected) / expected).abs() < 0.01,
        "v = {v}, expected free fall {expected}"
    );
}

#[track_caller]
fn assert_rests_at(w: &PhysicsWorld, h: BodyHandle, y: f32) {
    let b = w.body(h).unwrap();
    assert!(
        (b.position.y - y).abs() < HEIGHT_TOL,
        "{h:?} at y = {} (expected {y})",
        b.position.y
    );
    assert!(
        b.linear_velocity.length() < SPEED_TOL,
        "{h:?} moving at {}",
        b.linear_velocity
    );
}

#[test]
fn body_added_mid_simulation_falls_and_lands() {
    let mut w = world_with_ground();
    let first = ball_at(&mut w, Vec3::new(0.0, 0.8, 0.0), 0.5);
    run(&mut w, 30);
    let late = ball_at(&mut w, Vec3::new(3.0, 3.0, 0.0), 0.25);
    // 20 frames (0.33 s, 0.55 m of fall): in free fall, not yet near the ground.
    run(&mut w, 20);
    assert_free_fall_velocity(&w, late, 20);
    run(&mut w, 100);
    assert_rests_at(&w, late, 0.25);
    assert_rests_at(&w, first, 0.5);
    // It landed where it was dropped: nothing pushed it sideways.
    let p = w.body(late).unwrap().position;
    assert!(
        (p.x - 3.0).abs() < HEIGHT_TOL && p.z.abs() < HEIGHT_TOL,
        "{p}"
    );
}

#[test]
fn joint_added_mid_fall_catches_the_body() {
    let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
    let b = w
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(0.0, 5.0, 0.0))
                .with_collider(Collider::cuboid(Vec3::new(0.1, 0.5, 0.1)).unwrap()),
        )
        .unwrap();
    run(&mut w, 30);
    assert_free_fall_velocity(&w, b, 30);
    // Pin its top end (0.5 above the centre) to the world where it is now: the downward
    // velocity lies along the rod, so the joint stops it and it hangs straight below.
    let top = w.body(b).unwrap().position + Vec3::new(0.0, 0.5, 0.0);
    let j = w
        .add_joint(JointDesc::new(JointKind::Ball, b, None).anchors(Vec3::new(0.0, 0.5, 0.0), top))
        .unwrap();
    run(&mut w, 120);
    let s = w.body(b).unwrap();
    let err = w.joint_error(j).unwrap();
    assert!(err < JOINT_TOL, "joint error {err}");
    assert!(
        (s.position - (top - Vec3::new(0.0, 0.5, 0.0))).length() < HEIGHT_TOL,
        "hangs at {}",
        s.position
    );
    assert!(
        s.linear_velocity.length() < SPEED_TOL,
        "still moving: {}",
        s.linear_velocity
    );
}

#[test]
fn removing_a_body_removes_its_joints_and_others_keep_simulating() {
    let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
    let cube = |w: &mut PhysicsWorld, p: Vec3| {
        w.add_body(
            BodyDesc::dynamic()
                .at(p)
                .with_collider(Collider::cuboid(Vec3::splat(0.2)).unwrap()),
        )
        .unwrap()
    };
    // a hangs from the world, b hangs from a; c hangs from the world on its own.
    let a = cube(&mut w, Vec3::new(0.0, 4.0, 0.0));
    let b = cube(&mut w, Vec3::new(0.0, 3.0, 0.0));
    let c = cube(&mut w, Vec3::new(3.0, 4.0, 0.0));
    let half = Vec3::new(0.0, 0.5, 0.0);
    let ja = w
        .add_joint(JointDesc::new(JointKind::Ball, a, None).anchors(half, Vec3::new(0.0, 4.5, 0.0)))
        .unwrap();
    let jab = w
        .add_joint(JointDesc::new(JointKind::Ball, a, Some(b)).anchors(-half, half))
        .unwrap();
    let jc = w
        .add_joint(JointDesc::new(JointKind::Ball, c, None).anchors(half, Vec3::new(3.0, 4.5, 0.0)))
        .unwrap();
    run(&mut w, 30);
    let y_b = w.body(b).unwrap().position.y;
    assert!(
        (y_b - 3.0).abs() < 1e-3,
        "b held by its joints at 3.0, is at {y_b}"
    );

    let mut removed = w.remove_body(a).unwrap();
    removed.sort();
    assert_eq!(removed, vec![ja, jab]);
    assert_eq!(w.joint_handles(), &[jc]);
    assert_eq!(w.body_count(), 2);
    for j in [ja, jab] {
        assert_eq!(w.joint_error(j), Err(PhysicsError::MissingJoint(j)));
        assert_eq!(w.remove_joint(j), Err(PhysicsError::MissingJoint(j)));
    }
    // The removed body's handle is dead everywhere.
    assert!(!w.contains_body(a));
    assert_eq!(w.body(a), Err(PhysicsError::MissingBody(a)));
    assert_eq!(w.remove_body(a), Err(PhysicsError::MissingBody(a)));
    assert_eq!(
        w.set_velocity(a, Vec3::ZERO, Vec3::ZERO),
        Err(PhysicsError::MissingBody(a))
    );
    assert_eq!(
        w.set_pose(a, Vec3::ZERO, Quat::IDENTITY),
        Err(PhysicsError::MissingBody(a))
    );

    // b lost its only support and falls freely; c still hangs.
    run(&mut w, 30);
    assert_free_fall_velocity(&w, b, 30);
    assert!(w.joint_error(jc).unwrap() < JOINT_TOL);
    assert_rests_at(&w, c, 4.0);

    // Handles are never reused: a new body gets a fresh one.
    let d = cube(&mut w, Vec3::new(-3.0, 4.0, 0.0));
    assert!(d != a && d != b && d != c);
    assert!(!w.contains_body(a));
}

#[test]
fn removing_from_the_middle_keeps_other_handles_on_their_bodies() {
    // Five balls of different radii resting on the ground at different x: a swapped
    // pose, velocity or collider would show up as a wrong position or rest height.
    let mut w = world_with_ground();
    let radii = [0.1, 0.2, 0.3, 0.4, 0.5];
    let balls: Vec<BodyHandle> = radii
        .iter()
        .enumerate()
        .map(|(i, &r)| ball_at(&mut w, Vec3::new(2.0 * i as f32, r + 0.2, 0.0), r))
        .collect();
    run(&mut w, 90);
    let before: Vec<Vec3> = balls.iter().map(|&h| w.body(h).unwrap().position).collect();
    for (&h, &r) in balls.iter().zip(&radii) {
        assert_rests_at(&w, h, r);
    }

    // Remove the second ball (storage index 2 of 6): the last body moves into its slot.
    w.remove_body(balls[1]).unwrap();
    assert_eq!(w.body_count(), 5);
    for (i, &h) in balls.iter().enumerate() {
        if i == 1 {
            assert!(!w.contains_body(h));
        } else {
            assert_eq!(w.body(h).unwrap().position, before[i], "handle {h:?} moved");
        }
    }
    // Still resting at their own heights after another second, and a new ball dropped
    // where the removed one was lands on the ground (no stale contact with the removed
    // body's collider).
    let fresh = ball_at(&mut w, Vec3::new(2.0, 1.0, 0.0), 0.25);
    run(&mut w, 60);
    for (i, (&h, &r)) in balls.iter().zip(&radii).enumerate() {
        if i != 1 {
            assert_rests_at(&w, h, r);
            let p = w.body(h).unwrap().position;
            assert!(
                (p.x - before[i].x).abs() < HEIGHT_TOL,
                "{h:?} drifted to {p}"
            );
        }
    }
    assert_rests_at(&w, fresh, 0.25);
}

#[test]
fn removing_the_support_of_a_stack_lets_the_top_fall_to_the_ground() {
    let mut w = world_with_ground();
    let cube = |w: &mut PhysicsWorld, y: f32| {
        w.add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(0.0, y, 0.0))
                .with_collider(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
        )
        .unwrap()
    };
    let bottom = cube(&mut w, 0.5);
    let top = cube(&mut w, 1.5);
    run(&mut w, 60);
    assert_rests_at(&w, top, 1.5);
    w.remove_body(bottom).unwrap();
    // 1 m of fall takes 0.45 s; after 1.5 s it rests on the ground.
    run(&mut w, 90);
    assert_rests_at(&w, top, 0.5);
}

/// Link i hangs with its centre at 5 − 0.25 − 0.5·i below a world pivot at y = 5.
fn link_y(i: usize) -> f32 {
    5.0 - 0.25 - 0.5 * i as f32
}

#[test]
fn joints_survive_storage_moves_of_their_bodies() {
    let mut w = world_with_ground();
    // Unrelated bodies added before the chain: removing them moves chain links in storage.
    let u1 = ball_at(&mut w, Vec3::new(4.0, 0.5, 0.0), 0.5);
    let u2 = ball_at(&mut w, Vec3::new(-4.0, 0.5, 0.0), 0.5);
    let links: Vec<BodyHandle> = (0..3)
        .map(|i| {
            w.add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(0.0, link_y(i), 0.0))
                    .with_collider(Collider::cuboid(Vec3::new(0.05, 0.25, 0.05)).unwrap()),
            )
            .unwrap()
        })
        .collect();
    let up = Vec3::new(0.0, 0.25, 0.0);
    let mut joints: Vec<JointHandle> = vec![
        w.add_joint(
            JointDesc::new(JointKind::Ball, links[0], None).anchors(up, Vec3::new(0.0, 5.0, 0.0)),
        )
        .unwrap(),
    ];
    // Upper link is body A, lower link body B: the last link is only ever body B, the
    // middle one both.
    for i in 1..3 {
        joints.push(
            w.add_joint(
                JointDesc::new(JointKind::Ball, links[i - 1], Some(links[i])).anchors(-up, up),
            )
            .unwrap(),
        );
    }
    run(&mut w, 30);

    let check = |w: &PhysicsWorld, when: &str| {
        for (k, &j) in joints.iter().enumerate() {
            let e = w.joint_error(j).unwrap();
            eprintln!("{when}: joint {k} error {e:.3e}");
            assert!(e < JOINT_TOL, "{when}: joint {k} error {e}");
        }
    };
    check(&w, "before removal");
    let before: Vec<Vec3> = links.iter().map(|&h| w.body(h).unwrap().position).collect();
    // Storage: ground 0, u1 1, u2 2, links 3, 4, 5. Removing u1 moves link 2 (a body B) into
    // slot 1; removing u2 then moves link 1 (body B of joint 1, body A of joint 2) into
    // slot 2.
    assert!(w.remove_body(u1).unwrap().is_empty());
    assert!(w.remove_body(u2).unwrap().is_empty());
    for (i, &h) in links.iter().enumerate() {
        assert_eq!(
            w.body(h).unwrap().position,
            before[i],
            "link {i} handle moved"
        );
    }
    run(&mut w, 60);
    check(&w, "hanging after removal");
    // Still hanging straight below the pivot, each link at its own height: link i hangs
    // from i + 1 joints, each off by less than JOINT_TOL.
    for (i, &h) in links.iter().enumerate() {
        let p = w.body(h).unwrap().position;
        eprintln!("link {i} at {p}");
        assert!(
            (p - Vec3::new(0.0, link_y(i), 0.0)).length() < (i + 1) as f32 * JOINT_TOL,
            "link {i} at {p}"
        );
    }
    // Under load: push the bottom link sideways and let the chain swing for 2 s.
    w.set_velocity(links[2], Vec3::new(2.0, 0.0, 0.0), Vec3::ZERO)
        .unwrap();
    let (mut max_x, mut max_err) = (0.0f32, 0.0f32);
    for _ in 0..120 {
        run(&mut w, 1);
        max_x = max_x.max(w.body(links[2]).unwrap().position.x.abs());
        for (k, &j) in joints.iter().enumerate() {
            let e = w.joint_error(j).unwrap();
            assert!(e < JOINT_TOL, "swinging: joint {k} error {e}");
            max_err = max_err.max(e);
        }
    }
    eprintln!("bottom link swung out to |x| = {max_x}, max joint error {max_err:.3e}");
    assert!(max_x > 0.1, "the chain did not swing (max |x| {max_x})");
}

#[test]
fn removing_a_joint_lets_the_body_fall() {
    let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
    let b = w
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(0.0, 5.0, 0.0))
                .with_collider(Collider::ball(0.3).unwrap()),
        )
        .unwrap();
    let j = w
        .add_joint(
            JointDesc::new(JointKind::Ball, b, None)
                .anchors(Vec3::new(0.0, 0.5, 0.0), Vec3::new(0.0, 5.5, 0.0)),
        )
        .unwrap();
    run(&mut w, 30);
    assert!(w.joint_error(j).unwrap() < JOINT_TOL);
    assert_rests_at(&w, b, 5.0);
    w.remove_joint(j).unwrap();
    assert_eq!(w.joint_count(), 0);
    assert_eq!(w.remove_joint(j), Err(PhysicsError::MissingJoint(j)));
    run(&mut w, 30);
    assert_free_fall_velocity(&w, b, 30);
}
