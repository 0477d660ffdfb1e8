//! The GPU step finds its own contacts: when every collider is a sphere, capsule, box or
//! half-space, the CPU runs only the broad phase and the device's narrow phase
//! (`shaders/contact_narrow.wgsl`) makes, carries and warm-starts the contact records in
//! the step's submission. These tests check that nothing per contact goes up, that the
//! device's contacts are the CPU's (the same points, the same trajectories to rounding),
//! and that a scene moving between the device's narrow phase and the CPU's keeps working.
//!
//! Without an adapter they print a note and pass, except under `AVBD_REQUIRE_GPU=1`.
use bevy_avbd::glam::Vec3;
use bevy_avbd::scenes::Scene;
use bevy_avbd::{Backend, BodyDesc, Collider, PhysicsWorld, SolverConfig};

fn require_gpu() -> bool {
    std::env::var("AVBD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

fn gpu_scene(name: &str, params: &[(&str, f64)], config: SolverConfig) -> Option<Scene> {
    let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    match Scene::build_on(name, &params, config, Backend::Gpu) {
        Ok(s) => Some(s),
        Err(e) => {
            assert!(!require_gpu(), "AVBD_REQUIRE_GPU=1: {e}");
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

/// Bytes of the step parameters (`Params` in src/gpu/mod.rs), uploaded every step.
const PARAMS_BYTES: u64 = 112;
/// Bytes of one pair of the device's list (`StepPair`).
const PAIR_BYTES: u64 = 16;
/// Bytes of one contact point as the CPU uploads it (`ContactPoint`).
const POINT_BYTES: u64 = 64;

/// A 2,000-box pile at 4 iterations: every step uploads the parameters, the bodies the CPU
/// changed (the momentum projection's) and at most the pair list, never a contact point;
/// the same pile with the points found on the CPU uploads 64 bytes per point. The device
/// still finds the contacts: thousands of points, none of them in `contact_points()`.
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
            if frame < 20 {
                continue; // the boxes are still falling apart from each other
            }
            let t = s.world.gpu_traffic().unwrap();
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
    let mut unchanged = 0;
    for &(up, points, pairs, listed) in &device {
        assert!(points > 2000, "the pile touches: {points} points");
        assert_eq!(listed, 0, "the points stay on the device");
        assert!(
            up <= PARAMS_BYTES + PAIR_BYTES * pairs,
            "{up} bytes up for {pairs} pairs, {points} points"
        );
        unchanged += (up == PARAMS_BYTES) as usize;
    }
    for &(up, points, _, listed) in &host {
        assert_eq!(listed as u64, points);
        assert!(
            up >= PARAMS_BYTES + POINT_BYTES * points,
            "{up} bytes, {points} points"
        );
    }
    let mean = |v: &[(u64, u64, u64, usize)]| v.iter().map(|s| s.0).sum::<u64>() / v.len() as u64;
    eprintln!(
        "bytes up per step (bodies aside): device {} (pair list unchanged in {unchanged} of {} steps), host {}",
        mean(&device),
        device.len(),
        mean(&host)
    );
}

/// The device's narrow phase against the CPU's (the same Rust code the WGSL ports), both
/// on the GPU backend, step by step. The two differ only in rounding (the device runs the
/// narrow phase in its own f32 arithmetic: normals agree to about 3e-6, see
/// tests/narrow_phase.rs):
/// * on resting aligned boxes (pyramid, stack) the same points and touching pairs in every
///   step, the deepest penetration to 1e-5 m, every pose to 1e-4 m and the normal forces
///   to 1% (lavapipe gives the same bits; the bounds leave room for a GPU whose rounding
///   differs);
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
                assert!((pd - ph).abs() < 1e-5, "{name} frame {frame}: {pd} vs {ph}");
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
        // The records the device made are the host path's, point for point.
        let (rd, rh) = (
            device.world.contacts().unwrap(),
            host.world.contacts().unwrap(),
        );
        assert_eq!(rd.len(), rh.len());
        for (a, b) in rd.iter().zip(rh.iter()) {
            assert_eq!((a.body_a, a.body_b), (b.body_a, b.body_b), "{name}");
            assert!(
                (a.lambda[2] - b.lambda[2]).abs() <= 1e-2 * b.lambda[2].abs() + 1e-3,
                "{name}: normal force {} vs {}",
                a.lambda[2],
                b.lambda[2]
            );
        }
    }
}

/// A box rests on the ground while a convex hull (which only the CPU's narrow phase
/// handles) comes and goes: the contacts move to the CPU and back to the device, each
/// switch starts the warm start afresh, and the box stays where it rests, within 1 mm.
#[test]
fn gpu_contacts_move_between_device_and_host() {
    let mut w = match PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu) {
        Ok(w) => w,
        Err(e) => {
            assert!(!require_gpu(), "{e}");
            return;
        }
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
