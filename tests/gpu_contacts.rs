//! The GPU step finds its own contacts: when every collider is a sphere, capsule, box or
//! half-space, the CPU runs only the broad phase and the device's narrow phase
//! (`shaders/contact_narrow.wgsl`) makes, carries and warm-starts the contact records in
//! the step's submission. These tests check that nothing per contact goes up, that the
//! device's contacts are the CPU's (the same points, the same trajectories to rounding),
//! and that a scene moving between the device's narrow phase and the CPU's keeps working.
//!
//! Without an adapter they print a note and pass, except under `AVBD_REQUIRE_GPU=1`.
mod common;
use bevy_avbd::glam::Vec3;
use bevy_avbd::{BodyDesc, Collider, PhysicsWorld, SolverConfig};
use common::{gpu_scene, gpu_world};

/// Bytes of the step parameters uploaded every step: the solver's (`Params` in
/// src/gpu/mod.rs, 112), the broad phase's (`BroadParams`, 48) and the two prefix sums'
/// lengths (16 each).
const PARAMS_BYTES: u64 = 112 + 48 + 2 * 16;
/// Bytes of one contact point as the CPU uploads it (`ContactPoint`).
const POINT_BYTES: u64 = 64;

/// A 2,000-box pile at 4 iterations: when the device finds the contacts, every step
/// uploads the parameters and nothing else: no body (the device restores the momentum of
/// the boxes still falling, `momentum.wgsl`), no pair, no contact point (the colliders and
/// the grid's classes went up once). The same pile with the points found on the CPU uploads 64 bytes per point. The
/// device still finds the contacts: thousands of points, none of them in
/// `contact_points()`.
#[test]
fn gpu_pile_uploads_no_contact() {
    let config = SolverConfig {
        iterations: 4,
        ..SolverConfig::default()
    };
    let run = |on_host: bool| {
        let mut s = gpu_scene("pile", &[("count", 2000.0)], config.clone())?;
        s.world.gpu_narrow_phase_on_host_for_tests(on_host);
        let mut steps = Vec::new();
        for frame in 0..40 {
            s.step().unwrap();
            let t = s.world.gpu_traffic().unwrap();
            if !on_host && frame > 0 {
                assert_eq!(t.body_upload_bytes, 0, "frame {frame}");
            }
            if frame < 20 {
                continue; // the boxes are still falling apart from each other
            }
            steps.push((
                t.upload_bytes - t.body_upload_bytes,
                s.world.contact_count() as u64,
                s.world.candidate_pairs() as u64,
                s.world.contact_points().len(),
            ));
        }
        Some(steps)
    };
    let (Some(device), Some(host)) = (run(false), run(true)) else {
        return;
    };
    for &(up, points, pairs, listed) in &device {
        assert!(points > 2000, "the pile touches: {points} points");
        assert!(pairs * 4 >= points, "{pairs} pairs for {points} points");
        assert_eq!(listed, 0, "the points stay on the device");
        assert_eq!(up, PARAMS_BYTES, "{pairs} pairs, {points} points");
    }
    for &(up, points, _, listed) in &host {
        assert_eq!(listed as u64, points);
        assert!(up > POINT_BYTES * points, "{up} bytes, {points} points");
    }
    let mean = |v: &[(u64, u64, u64, usize)]| v.iter().map(|s| s.0).sum::<u64>() / v.len() as u64;
    eprintln!(
        "bytes up per step (bodies aside): device {}, host {}",
        mean(&device),
        mean(&host)
    );
}

/// The device's narrow phase against the CPU's (the same Rust code the WGSL ports), both
/// on the GPU backend, step by step. The two differ only in rounding (the device runs the
/// narrow phase in its own f32 arithmetic: normals agree to about 3e-6, see
/// tests/narrow_phase.rs):
/// * on resting aligned boxes (pyramid, stack) the same points and touching pairs in every
///   step, the deepest penetration to 1e-4 m, every pose to 1e-4 m and the ground's load
///   to 1% (the device lists its pairs in its own order, so the solver's sums round
///   differently: about 5e-5 m apart on the pyramid);
/// * on the card tower, whose leaning cards amplify a rounding difference (an ulp of a
///   normal moves a card by about a millimetre within 2 s, much as the CPU and GPU
///   backends differ on it), at most 3 points apart and poses within 1 cm over 120 steps.
#[test]
fn gpu_narrow_phase_matches_the_host_path() {
    // (scene, parameters, points apart, pose bound m, forces compared)
    type Case<'a> = (&'a str, &'a [(&'a str, f64)], usize, f32, bool);
    let cases: [Case; 3] = [
        ("pyramid", &[("base", 8.0)], 0, 1e-4, true),
        ("stack", &[], 0, 1e-4, true),
        ("card_tower", &[], 3, 1e-2, false),
    ];
    for (name, params, points_apart, pose_bound, forces) in cases {
        let (Some(mut device), Some(mut host)) = (
            gpu_scene(name, params, SolverConfig::default()),
            gpu_scene(name, params, SolverConfig::default()),
        ) else {
            return;
        };
        host.world.gpu_narrow_phase_on_host_for_tests(true);
        let (mut worst, mut mismatched) = (0.0f32, 0);
        for frame in 0..120 {
            device.step().unwrap();
            host.step().unwrap();
            let (d, h) = (&device.world, &host.world);
            assert_eq!(d.contact_points().len(), 0, "{name}");
            assert!(!h.contact_points().is_empty(), "{name}");
            let (nd, nh) = (d.contact_count(), h.contact_count());
            mismatched += (nd != nh) as usize;
            assert!(
                nd.abs_diff(nh) <= points_apart,
                "{name} frame {frame}: {nd} points against {nh}"
            );
            if points_apart == 0 {
                assert_eq!(d.stats().manifolds, h.stats().manifolds, "{name}");
                let (pd, ph) = (d.stats().max_penetration, h.stats().max_penetration);
                assert!((pd - ph).abs() < 1e-4, "{name} frame {frame}: {pd} vs {ph}");
            }
            for &b in d.body_handles() {
                let e = (d.body(b).unwrap().position - h.body(b).unwrap().position).length();
                worst = worst.max(e);
            }
        }
        eprintln!(
            "{name}: poses differ by at most {worst:.2e} m, point counts in {mismatched} steps"
        );
        assert!(
            worst < pose_bound,
            "{name}: the two paths differ by {worst} m"
        );
        if !forces {
            continue;
        }
        // What the ground carries: the weight, whichever way the two paths share it out
        // among the pairs (their orders differ, and a pyramid's forces are not determined
        // by statics alone).
        let on_ground = |w: &PhysicsWorld| {
            let fixed = |i: u32| {
                let h = w.handle_of_index(i).unwrap();
                w.body(h).unwrap().kind != bevy_avbd::BodyKind::Dynamic
            };
            w.contacts()
                .unwrap()
                .iter()
                .filter(|c| fixed(c.body_a) || fixed(c.body_b))
                .map(|c| c.lambda[2] as f64)
                .sum::<f64>()
        };
        let (gd, gh) = (on_ground(&device.world), on_ground(&host.world));
        eprintln!("{name}: the ground carries {gd:.1} N against {gh:.1} N");
        assert!((gd - gh).abs() <= 1e-2 * gh.abs(), "{name}: {gd} vs {gh}");
    }
}

/// A box rests on the ground while a convex hull (which only the CPU's narrow phase
/// handles) comes and goes: the contacts move to the CPU and back to the device, each
/// switch starts the warm start afresh, and the box stays where it rests, within 1 mm.
#[test]
fn gpu_contacts_move_between_device_and_host() {
    let Some(mut w) = gpu_world() else {
        return;
    };
    w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
        .unwrap();
    let cube = w
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(0.0, 0.5, 0.0))
                .with_collider(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
        )
        .unwrap();
    let hull = [
        Vec3::new(-0.5, -0.5, -0.5),
        Vec3::new(0.5, -0.5, -0.5),
        Vec3::new(0.0, -0.5, 0.5),
        Vec3::new(0.0, 0.5, 0.0),
    ];
    let run = |w: &mut PhysicsWorld, steps: usize| {
        for _ in 0..steps {
            w.step().unwrap();
        }
        let y = w.body(cube).unwrap().position.y;
        assert!((y - 0.5).abs() < 1e-3, "the box moved to y = {y}");
        w.contact_count()
    };
    assert_eq!(run(&mut w, 60), 4);
    assert!(w.contact_points().is_empty(), "found on the device");
    let extra = w
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(3.0, 0.5, 0.0))
                .with_collider(Collider::convex_hull(&hull).unwrap()),
        )
        .unwrap();
    let with_hull = run(&mut w, 60);
    assert!(with_hull > 4, "the hull rests too: {with_hull} points");
    assert_eq!(w.contact_points().len(), with_hull, "found on the CPU");
    w.remove_body(extra).unwrap();
    assert_eq!(run(&mut w, 60), 4);
    assert!(w.contact_points().is_empty(), "back on the device");
}

/// The islands of the momentum projection, found on the device (`shaders/islands.wgsl`),
/// against a union–find over the same step's touching pairs and joints: a stack on the
/// ground (anchored), a jointed chain falling free, two boxes meeting in mid-air and a lone
/// box (isolated). Every step: each body's root is the lowest body of its island and its
/// anchored flag is set where a constraint ties it to the ground.
#[test]
fn gpu_islands_match_a_union_find() {
    use bevy_avbd::{JointDesc, JointKind};
    let Some(mut w) = gpu_world() else {
        return;
    };
    let cube = || Collider::cuboid(Vec3::splat(0.5)).unwrap();
    let body = |w: &mut PhysicsWorld, at: Vec3, v: Vec3| {
        w.add_body(
            BodyDesc::dynamic()
                .at(at)
                .with_velocity(v, Vec3::ZERO)
                .with_collider(cube()),
        )
        .unwrap()
    };
    for k in 0..3 {
        body(&mut w, Vec3::new(0.0, 0.5 + k as f32, 0.0), Vec3::ZERO);
    }
    w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
        .unwrap();
    let chain: Vec<_> = (0..3)
        .map(|k| {
            body(
                &mut w,
                Vec3::new(10.0 + 1.5 * k as f32, 40.0, 0.0),
                Vec3::ZERO,
            )
        })
        .collect();
    for k in 0..2 {
        w.add_joint(
            JointDesc::new(JointKind::Ball, chain[k], Some(chain[k + 1]))
                .anchors(Vec3::new(0.75, 0.0, 0.0), Vec3::new(-0.75, 0.0, 0.0)),
        )
        .unwrap();
    }
    body(
        &mut w,
        Vec3::new(-10.0, 30.0, 0.0),
        Vec3::new(2.0, 0.0, 0.0),
    );
    body(
        &mut w,
        Vec3::new(-7.0, 30.0, 0.0),
        Vec3::new(-2.0, 0.0, 0.0),
    );
    body(&mut w, Vec3::new(0.0, 60.0, 10.0), Vec3::ZERO);
    let n = w.body_count();
    let index_of = |w: &PhysicsWorld, h| (0..n as u32).find(|&i| w.handle_of_index(i) == Some(h));
    let mut isolated_steps = 0;
    for step in 0..60 {
        w.step().unwrap();
        let dynamic = |i: u32| {
            let h = w.handle_of_index(i).unwrap();
            w.body(h).unwrap().kind == bevy_avbd::BodyKind::Dynamic
        };
        let mut parent: Vec<u32> = (0..n as u32).collect();
        fn find(p: &mut [u32], mut i: u32) -> u32 {
            while p[i as usize] != i {
                i = p[i as usize];
            }
            i
        }
        let mut anchored = vec![false; n];
        let mut edges: Vec<(u32, u32)> = w.touching_pairs().unwrap();
        for k in 0..2 {
            let (a, b) = (
                index_of(&w, chain[k]).unwrap(),
                index_of(&w, chain[k + 1]).unwrap(),
            );
            edges.push((a, b));
        }
        for (a, b) in edges {
            match (dynamic(a), dynamic(b)) {
                (true, true) => {
                    let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                    parent[ra.max(rb) as usize] = ra.min(rb);
                }
                (true, false) => anchored[a as usize] = true,
                (false, true) => anchored[b as usize] = true,
                _ => {}
            }
        }
        let islands = w
            .gpu_islands_for_tests()
            .expect("found on the device")
            .unwrap();
        for i in 0..n as u32 {
            let expected = match dynamic(i) {
                true => find(&mut parent, i) | (anchored[i as usize] as u32) << 31,
                false => u32::MAX,
            };
            assert_eq!(islands[i as usize], expected, "step {step}, body {i}");
        }
        let roots: std::collections::BTreeSet<u32> = islands
            .iter()
            .filter(|&&r| r != u32::MAX)
            .map(|r| r & !(1 << 31))
            .collect();
        isolated_steps += (roots.len() >= 4) as usize;
        // The islands none of whose bodies is anchored: the device's count decides whether
        // the host runs the momentum projection at all.
        let anchored_roots: std::collections::BTreeSet<u32> = islands
            .iter()
            .filter(|&&r| r != u32::MAX && r & (1 << 31) != 0)
            .map(|r| r & !(1 << 31))
            .collect();
        let free = roots.difference(&anchored_roots).count() as u32;
        assert_eq!(
            w.gpu_isolated_islands_for_tests(),
            Some(free),
            "step {step}"
        );
        assert!(free >= 3, "the chain and the lone boxes fly free: {free}");
    }
    assert!(
        isolated_steps > 10,
        "the scene had separate islands in {isolated_steps} steps"
    );
}

/// The islands come back with a step only where the last one had some anchored nowhere; a
/// step that has the first such island reads them after it. Two boxes joined by a ball
/// joint rest on the ground (their island anchored: no islands come back), then are
/// launched apart, the joint catching them: in flight each step must change their linear
/// momentum by exactly `h M g`, as the momentum projection makes it (within 1e-5 of the
/// momentum, f32 rounding), from the first step with no contact; with the projection
/// off the joint's unconverged force leaves more than 1e-4, so the check sees a step the
/// projection skipped.
#[test]
fn gpu_momentum_projection_starts_with_the_first_isolated_island() {
    use bevy_avbd::{JointDesc, JointKind};
    let drift = |conserve: bool| -> Option<f32> {
        let config = SolverConfig {
            conserve_momentum: conserve,
            ..SolverConfig::default()
        };
        let (h, g) = (config.dt, config.gravity);
        let Ok(mut w) = PhysicsWorld::with_backend(config, bevy_avbd::Backend::Gpu) else {
            assert!(!common::require_gpu(), "the GPU backend failed");
            return None;
        };
        w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
            .unwrap();
        let half = Vec3::new(0.4, 0.2, 0.3);
        let boxes: Vec<_> = [-0.5f32, 0.5]
            .iter()
            .map(|&x| {
                w.add_body(
                    BodyDesc::dynamic()
                        .at(Vec3::new(x, half.y, 0.0))
                        .with_mass(1.0 + x)
                        .with_collider(Collider::cuboid(half).unwrap()),
                )
                .unwrap()
            })
            .collect();
        w.add_joint(
            JointDesc::new(JointKind::Ball, boxes[0], Some(boxes[1]))
                .anchors(Vec3::new(0.5, 0.0, 0.0), Vec3::new(-0.5, 0.0, 0.0)),
        )
        .unwrap();
        for _ in 0..30 {
            w.step().unwrap();
        }
        assert_eq!(w.gpu_isolated_islands_for_tests(), Some(0), "resting");
        w.set_velocity(
            boxes[0],
            Vec3::new(-2.0, 6.0, 1.0),
            Vec3::new(3.0, 1.0, 2.0),
        )
        .unwrap();
        w.set_velocity(
            boxes[1],
            Vec3::new(2.0, 7.0, -1.0),
            Vec3::new(-1.0, 4.0, 0.0),
        )
        .unwrap();
        let momentum = |w: &PhysicsWorld| -> (Vec3, f32) {
            let (mut p, mut m) = (Vec3::ZERO, 0.0);
            for &b in &boxes {
                let s = w.body(b).unwrap();
                p += s.mass * s.linear_velocity;
                m += s.mass;
            }
            (p, m)
        };
        let (mut last, mut was_isolated) = (momentum(&w).0, false);
        let (mut worst, mut checked, mut first_isolated) = (0.0f32, 0, false);
        for _ in 0..60 {
            w.step().unwrap();
            let (p, m) = momentum(&w);
            // A step with no contact with the ground: the island is anchored nowhere.
            let isolated = w.gpu_isolated_islands_for_tests() == Some(1);
            if isolated {
                worst = worst.max((p - last - h * m * g).length() / p.length());
                checked += 1;
                first_isolated |= !was_isolated;
            }
            (last, was_isolated) = (p, isolated);
        }
        assert!(checked > 30 && first_isolated, "{checked} steps in flight");
        Some(worst)
    };
    let (Some(projected), Some(free)) = (drift(true), drift(false)) else {
        return;
    };
    eprintln!("momentum error per step: {projected:.3e} projected, {free:.3e} not");
    assert!(projected < 1e-5, "{projected:.3e}");
    assert!(free > 1e-4, "{free:.3e}");
}

/// A body the step freezes (its result not finite) anchors its island, as a fixed body
/// would (the CPU's projection does the same): in zero gravity, two touching balls and a
/// lone one are two islands anchored nowhere; when one of the touching pair overflows in
/// that step, the device counts only the lone ball's island as anchored nowhere, and the
/// lone ball keeps its velocity. (The count was taken before the frozen body anchored its
/// island until 2026-11-29.)
#[test]
fn a_body_frozen_in_the_step_anchors_its_island_on_the_device() {
    let isolated = |overflow: bool| -> Option<(u32, Vec3)> {
        let config = SolverConfig {
            gravity: Vec3::ZERO,
            ..SolverConfig::default()
        };
        let Ok(mut w) = PhysicsWorld::with_backend(config, bevy_avbd::Backend::Gpu) else {
            assert!(!common::require_gpu(), "the GPU backend failed");
            return None;
        };
        let mut ball = |at: Vec3, v: Vec3, mass: f32| {
            w.add_body(
                BodyDesc::dynamic()
                    .at(at)
                    .with_velocity(v, Vec3::ZERO)
                    .with_collider(Collider::ball(0.2).unwrap())
                    .with_mass(mass),
            )
            .unwrap()
        };
        // (Light, so that 1e38 N overflows: 1e41 m/s² × h².)
        let a = ball(Vec3::ZERO, Vec3::ZERO, 1e-3);
        ball(Vec3::new(0.39, 0.0, 0.0), Vec3::ZERO, 1.0);
        let lone = ball(Vec3::new(5.0, 0.0, 0.0), Vec3::Y, 1.0);
        if overflow {
            w.set_external_force(a, Vec3::new(0.0, 1e38, 0.0), Vec3::ZERO)
                .unwrap();
        }
        let report = w.step().unwrap();
        assert_eq!(report.frozen, if overflow { vec![a] } else { vec![] });
        let count = w
            .gpu_isolated_islands_for_tests()
            .expect("the device's contacts");
        Some((count, w.body(lone).unwrap().linear_velocity))
    };
    let (Some(free), Some(frozen)) = (isolated(false), isolated(true)) else {
        return;
    };
    assert_eq!(free.0, 2);
    assert_eq!(frozen.0, 1);
    for (_, v) in [free, frozen] {
        assert!((v - Vec3::Y).length() < 1e-6, "{v}");
    }
}

/// The momentum projection runs on the device (`shaders/momentum.wgsl`) when the device
/// finds the contacts: balls colliding off-centre with friction and a spinning chain of
/// balls on ball joints, in zero gravity, every island anchored nowhere. Every step must
/// keep the total momentum and the angular momentum about the origin (f64 sums of the
/// states read back, a ball's spin 2/5 m r² ω; each change over the sum of its terms'
/// sizes). Without the projection the step's fixed budget leaves more than 1e-4. At the
/// origin the device's projection leaves less than 1e-6 (measured 1.9e-8 and 6.1e-8; the
/// CPU's f64 projection on the same scene 1.3e-8 and 3.7e-8): its sums are exact 64-bit
/// fixed point, so the f32 velocities' rounding is what is left. 200 m away the
/// positions' own f32 spacing (1.5e-5 m, times each ball's momentum, over terms of a few
/// metres times it) floors the angular measure at a few 1e-6 on both backends (measured
/// 2.6e-6 device, 1.5e-6 CPU): bound 2e-5. No body goes up after the first step: the host
/// no longer touches the velocities. A repeated run gives the same bits.
#[test]
fn gpu_momentum_projection_runs_on_the_device() {
    use bevy_avbd::glam::DVec3;
    use bevy_avbd::{JointDesc, JointKind};
    #[derive(Clone, Copy, PartialEq)]
    enum Projection {
        Device,
        Host,
        Off,
    }
    let run = |projection: Projection, origin: Vec3| -> Option<(f64, f64, u64, Vec<u32>)> {
        let config = SolverConfig {
            gravity: Vec3::ZERO,
            conserve_momentum: projection != Projection::Off,
            ..SolverConfig::default()
        };
        let mut w = match PhysicsWorld::with_backend(config, bevy_avbd::Backend::Gpu) {
            Ok(w) => w,
            Err(e) => {
                assert!(!common::require_gpu(), "{e}");
                return None;
            }
        };
        w.gpu_narrow_phase_on_host_for_tests(projection == Projection::Host);
        let mut balls = Vec::new();
        let mut ball = |w: &mut PhysicsWorld, r: f32, at: Vec3, v: Vec3, spin: Vec3| {
            let collider = Collider::ball(r).unwrap().with_friction(0.6);
            let h = w
                .add_body(
                    BodyDesc::dynamic()
                        .at(origin + at)
                        .with_velocity(v, spin)
                        .with_collider(collider),
                )
                .unwrap();
            balls.push((h, r));
            h
        };
        let x = Vec3::X;
        ball(&mut w, 0.5, -2.0 * x, 3.0 * x, Vec3::new(0.0, 5.0, 0.0));
        ball(
            &mut w,
            0.4,
            Vec3::new(0.0, 0.3, 0.0),
            Vec3::new(-1.0, 0.0, 0.5),
            2.0 * x,
        );
        ball(
            &mut w,
            0.3,
            Vec3::new(0.0, 0.0, 4.0),
            Vec3::new(0.0, 0.0, -3.0),
            Vec3::ZERO,
        );
        ball(
            &mut w,
            0.6,
            Vec3::new(0.0, 0.2, 2.0),
            Vec3::ZERO,
            Vec3::new(0.0, 0.0, 3.0),
        );
        let chain: Vec<_> = (0..3)
            .map(|k| {
                let k = k as f32;
                let at = Vec3::new(5.0 + 0.8 * k, 0.0, 0.0);
                ball(
                    &mut w,
                    0.3,
                    at,
                    Vec3::new(0.0, 2.0 * k, -k),
                    Vec3::new(1.0, 0.0, 2.0),
                )
            })
            .collect();
        for k in 0..2 {
            w.add_joint(
                JointDesc::new(JointKind::Ball, chain[k], Some(chain[k + 1]))
                    .anchors(Vec3::new(0.4, 0.0, 0.0), Vec3::new(-0.4, 0.0, 0.0)),
            )
            .unwrap();
        }
        // Total momentum and angular momentum about the origin, and the sums of their
        // terms' sizes (the scale a change is measured against).
        let totals = |w: &PhysicsWorld| {
            let (mut p, mut l, mut p_size, mut l_size) = (DVec3::ZERO, DVec3::ZERO, 0.0, 0.0);
            for &(h, r) in &balls {
                let s = w.body(h).unwrap();
                let m = s.mass as f64;
                let pi = s.linear_velocity.as_dvec3() * m;
                let spin = s.angular_velocity.as_dvec3() * (0.4 * m * (r * r) as f64);
                let li = s.position.as_dvec3().cross(pi) + spin;
                p += pi;
                l += li;
                p_size += pi.length();
                l_size += (s.position - origin).as_dvec3().cross(pi).length() + spin.length();
            }
            (p, l, p_size, l_size)
        };
        let (mut last_p, mut last_l, p_size, l_size) = totals(&w);
        let (mut worst_p, mut worst_l, mut body_bytes) = (0.0f64, 0.0f64, 0);
        for step in 0..60 {
            w.step().unwrap();
            if step > 0 {
                body_bytes += w.gpu_body_upload_bytes().unwrap();
            }
            let (p, l, _, _) = totals(&w);
            worst_p = worst_p.max((p - last_p).length() / p_size);
            worst_l = worst_l.max((l - last_l).length() / l_size);
            (last_p, last_l) = (p, l);
        }
        if projection != Projection::Host {
            assert!(w.gpu_isolated_islands_for_tests().unwrap() >= 3);
        }
        let bits = balls
            .iter()
            .flat_map(|&(h, _)| {
                let s = w.body(h).unwrap();
                [s.linear_velocity, s.angular_velocity, s.position]
            })
            .flat_map(|v| v.to_array().map(f32::to_bits))
            .collect();
        Some((worst_p, worst_l, body_bytes, bits))
    };
    let far = Vec3::new(200.0, -30.0, 150.0);
    let Some(device) = run(Projection::Device, Vec3::ZERO) else {
        return;
    };
    let host = run(Projection::Host, Vec3::ZERO).unwrap();
    let off = run(Projection::Off, Vec3::ZERO).unwrap();
    let (device_far, host_far) = (
        run(Projection::Device, far).unwrap(),
        run(Projection::Host, far).unwrap(),
    );
    eprintln!("worst change per step (momentum, angular momentum, body bytes up):");
    let first3 = |r: &(f64, f64, u64, Vec<u32>)| (r.0, r.1, r.2);
    eprintln!(
        "device {:?}, host {:?}, none {:?}",
        first3(&device),
        first3(&host),
        first3(&off)
    );
    eprintln!(
        "200 m away: device {:?}, host {:?}",
        first3(&device_far),
        first3(&host_far)
    );
    assert!(
        off.0.max(off.1) > 1e-4,
        "the budget's residual: {:?}",
        first3(&off)
    );
    for (name, &(p, l, _, _), bound) in [
        ("device", &device, 1e-6),
        ("host", &host, 1e-6),
        ("device, 200 m away", &device_far, 2e-5),
        ("host, 200 m away", &host_far, 2e-5),
    ] {
        assert!(
            p < bound && l < bound,
            "{name}: momentum {p:.3e}, angular {l:.3e}"
        );
    }
    assert_eq!(
        device.2 + device_far.2,
        0,
        "the device's projection uploads no body"
    );
    // The island sums are integers: the same bits on every run.
    let again = run(Projection::Device, far).unwrap();
    assert!(again.3 == device_far.3, "a repeated run differs");
}
