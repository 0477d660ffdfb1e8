//! The GPU backend (wgpu, shaders/avbd.wgsl): the shader validates, every scene agrees with
//! the CPU backend, and the GPU passes the same physical acceptance checks.
//!
//! Without an adapter these tests print a note and pass, except under `AVBD_REQUIRE_GPU=1`
//! (set by `.ci/run`, which installs Mesa's lavapipe), where a missing adapter fails them.
mod common;
use bevy_avbd::scenes::{DEFORMABLE_SCENES, SCENES, Scene};
use bevy_avbd::{Backend, SolverConfig};
use common::{gpu_scene, metric, require_gpu};

fn run_gpu(name: &str, params: &[(&str, f64)], config: SolverConfig, frames: u32) -> Option<Scene> {
    let mut s = gpu_scene(name, params, config)?;
    assert_eq!(s.world.backend(), "gpu");
    s.run(frames).expect("GPU step");
    Some(s)
}

/// naga (wgpu's shader compiler) parses and validates the WGSL with no adapter at all.
#[test]
fn shader_validates() {
    let shaders: [(&str, &[&str]); 6] = [
        (
            bevy_avbd::gpu::SHADER,
            &["primal", "primal_serial", "dual_contacts", "dual_joints"],
        ),
        (
            bevy_avbd::gpu::COLORING_SHADER,
            &[
                "color_init",
                "color_work_args",
                "color_round",
                "color_regreedy",
                "color_unseed_mark",
                "color_unseed",
                "color_count",
                "color_scan",
                "color_scatter",
            ],
        ),
        (
            bevy_avbd::gpu::ADJACENCY_SHADER,
            &[
                "adj_clear",
                "adj_count",
                "adj_scan_blocks",
                "adj_scan_top",
                "adj_scan_add",
                "adj_fill",
                "adj_sort",
            ],
        ),
        (
            bevy_avbd::gpu::INTEGRATION_SHADER,
            &["begin_bodies", "end_bodies"],
        ),
        (
            bevy_avbd::gpu::CONTACT_WARM_SHADER,
            &["warm_start_contacts", "store_contact_warm"],
        ),
        (
            bevy_avbd::gpu::VBD_SHADER,
            &[
                "vbd_sweep",
                "vbd_snapshot",
                "coarse_residual",
                "coarse_solve",
                "coarse_prolong",
                "coarse_residual_checked",
                "coarse_line_search",
                "coarse_prolong_checked",
                "attachment_dual",
                "contact_body_terms",
                "contact_advance",
                "contact_end_bodies",
            ],
        ),
    ];
    for (source, entries) in shaders {
        let module = naga::front::wgsl::parse_str(source).expect("WGSL parses");
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .expect("WGSL validates");
        for entry in entries {
            assert!(
                module.entry_points.iter().any(|e| e.name == *entry),
                "missing entry point {entry}"
            );
        }
    }
}

/// Scene sizes that keep a software rasteriser (lavapipe/llvmpipe) within seconds.
fn small(name: &str) -> Vec<(&'static str, f64)> {
    match name {
        "pyramid" | "large_pyramid" => vec![("base", 6.0)],
        "many_pyramids" => vec![("count", 2.0), ("base", 3.0)],
        "joint_grid" => vec![("rows", 5.0), ("cols", 5.0)],
        "pile" => vec![("count", 60.0)],
        "breakable_wall" => vec![("rows", 4.0), ("cols", 4.0)],
        "pendulum" | "two_heavy_balls" => vec![("links", 12.0)],
        "card_tower" => vec![("levels", 2.0)],
        _ => vec![],
    }
}

/// Every scene, 120 frames on both backends.
///
/// Tolerances. The kernels are the CPU's formulas in f32, but the GPU colours the bodies
/// itself (Jones–Plassmann–Luby with hashed priorities) while the CPU colours greedily in
/// index order, so in multi-body scenes the Gauss–Seidel order of the colours differs and
/// the iterates after the fixed budget of 10 iterations differ by more than rounding:
/// * residual metrics (`max_*`, `*_error`, `*_drift`: drift, penetration, stretch, joint
///   and limit errors, momentum errors) measure how far the fixed budget is from converged,
///   which depends on the sweep order: they must agree within a factor of 2 (+1e-4
///   absolute). Measured at commit 73e868d (2026-11-23): at most 1.17× (many_pyramids drift and the motor's
///   speed error, at the 0.1 mm and 1e-4 level); pendulum stretch 0.0050 vs 0.0052 (a
///   12-link chain that the CPU colours 0/1 and the GPU with 3 colours; it was 1.85× at
///   an earlier commit);
/// * outcome metrics (accelerations, stop distances, speeds) must agree within 1e-3
///   relative + 1e-4 absolute (5% for the swinging chains and the settling arch, whose
///   stick/slip transitions flip on small differences);
/// * after a projectile hits (pile, wall, card tower) the motion is chaotic, so only the
///   pre-impact `max_drift` and finiteness are compared;
/// * scenes without chaotic motion must end with every body within 1 mm of its CPU
///   position (measured: at most 0.28 mm, pyramid).
///
/// The GPU must in addition pass the CPU's physical acceptance thresholds (tests below).
#[test]
fn every_scene_matches_the_cpu() {
    let mut failures = Vec::new();
    // Deformable bodies run on the CPU backend only in this version (their GPU kernels are
    // the next step): their scenes are checked on the CPU in tests/deformable.rs.
    for spec in SCENES
        .iter()
        .filter(|s| !DEFORMABLE_SCENES.contains(&s.name))
    {
        let params = small(spec.name);
        let Some(mut gpu) = gpu_scene(spec.name, &params, SolverConfig::default()) else {
            return;
        };
        let p: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let mut cpu = Scene::build(spec.name, &p, SolverConfig::default()).unwrap();
        let frames = 120;
        cpu.run(frames).unwrap();
        gpu.run(frames).unwrap();
        let (mc, mg) = (cpu.metrics(), gpu.metrics());
        for (k, vc) in &mc {
            let vg = &mg[k];
            match (vc.as_f64(), vg.as_f64()) {
                (Some(a), Some(b)) => {
                    let impact = matches!(spec.name, "pile" | "breakable_wall" | "card_tower");
                    if impact && k != "max_drift" {
                        continue;
                    }
                    let swing = matches!(spec.name, "pendulum" | "two_heavy_balls" | "arch");
                    let residual =
                        k.starts_with("max_") || k.ends_with("_error") || k.ends_with("_drift");
                    let rel = match (residual, swing) {
                        (true, _) => 0.5,
                        (false, true) => 0.05,
                        (false, false) => 1e-3,
                    };
                    let ok = (a - b).abs() <= rel * a.abs().max(b.abs()) + 1e-4;
                    eprintln!(
                        "{:>16} {k:>24} cpu {a:<12.6e} gpu {b:<12.6e} rel {:.3e} {}",
                        spec.name,
                        (a - b).abs() / a.abs().max(b.abs()).max(1e-30),
                        if ok { "" } else { "FAIL" }
                    );
                    if !ok {
                        failures.push(format!("{}: {k} cpu {a} gpu {b}", spec.name));
                    }
                }
                _ => {
                    if vc != vg {
                        failures.push(format!("{}: {k} cpu {vc} gpu {vg}", spec.name));
                    }
                }
            }
        }
        let chaotic = matches!(
            spec.name,
            "pile"
                | "breakable_wall"
                | "card_tower"
                | "free_collision"
                | "pendulum"
                | "two_heavy_balls"
                | "arch"
        );
        let mut worst = 0.0f32;
        for &h in cpu.world.body_handles() {
            let (a, b) = (
                cpu.world.body(h).unwrap().position,
                gpu.world.body(h).unwrap().position,
            );
            worst = worst.max((a - b).length());
        }
        eprintln!("{:>16} worst position difference {worst:.3e} m", spec.name);
        if !chaotic && worst >= 1e-3 {
            failures.push(format!("{}: bodies differ by {worst} m", spec.name));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn gpu_stack_and_pyramid_stand() {
    let Some(s) = run_gpu("stack", &[("boxes", 10.0)], SolverConfig::default(), 600) else {
        return;
    };
    assert!(metric(&s, "max_drift") < 0.01);
    let Some(s) = run_gpu("pyramid", &[("base", 20.0)], SolverConfig::default(), 600) else {
        return;
    };
    assert!(metric(&s, "max_drift") < 0.02);
}

#[test]
fn gpu_friction_matches_analytic() {
    let Some(s) = run_gpu("slope", &[("mu", 0.55)], SolverConfig::default(), 120) else {
        return;
    };
    assert!(metric(&s, "slide_distance").abs() < 1e-3);
    let Some(s) = run_gpu("slope", &[("mu", 0.40)], SolverConfig::default(), 120) else {
        return;
    };
    let (a, e) = (
        metric(&s, "acceleration"),
        metric(&s, "analytic_acceleration"),
    );
    assert!((a - e).abs() / e < 0.03, "a {a} vs {e}");
    for mu in [0.2, 0.5, 0.8] {
        let frames = (10.0 / (mu * 9.81) * 60.0) as u32 + 60;
        let Some(s) = run_gpu("slide", &[("mu", mu)], SolverConfig::default(), frames) else {
            return;
        };
        let (d, e) = (
            metric(&s, "stop_distance"),
            metric(&s, "analytic_stop_distance"),
        );
        assert!((d - e).abs() / e < 0.03, "μ {mu}: {d} vs {e}");
    }
}

#[test]
fn gpu_joints_hold() {
    let cfg = SolverConfig::default();
    let Some(s) = run_gpu("pendulum", &[], cfg.clone(), 300) else {
        return;
    };
    assert!(metric(&s, "max_stretch_ratio") < 0.01);
    let five = SolverConfig {
        iterations: 5,
        ..cfg.clone()
    };
    for scene in ["springs_ratio", "spring_chain"] {
        let Some(s) = run_gpu(scene, &[], five.clone(), 600) else {
            return;
        };
        assert!(metric(&s, "extension_error") < 0.02, "{scene}");
    }
    let Some(s) = run_gpu("hinge_limit", &[], cfg.clone(), 300) else {
        return;
    };
    assert!(metric(&s, "max_limit_violation_deg") < 1.0);
    let Some(s) = run_gpu("motor", &[], cfg, 180) else {
        return;
    };
    assert!(metric(&s, "speed_error") < 1e-3);
}

/// Fracture on the GPU backend: a 10 kg mass hanging from joints rated 0.8× and 1.2× its
/// weight.
#[test]
fn gpu_breakable_joint() {
    use bevy_avbd::glam::Vec3;
    use bevy_avbd::{BodyDesc, JointDesc, JointKind, PhysicsWorld};
    for (factor, should_break) in [(0.8f32, true), (1.2, false)] {
        let mut w = match PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu) {
            Ok(w) => w,
            Err(e) => {
                assert!(!require_gpu(), "{e}");
                return;
            }
        };
        let b = w
            .add_body(
                BodyDesc::dynamic()
                    .with_mass(10.0)
                    .at(Vec3::new(0.0, 5.0, 0.0)),
            )
            .unwrap();
        let j = w
            .add_joint(
                JointDesc::new(JointKind::Ball, b, None)
                    .anchors(Vec3::new(0.0, 0.5, 0.0), Vec3::new(0.0, 5.5, 0.0))
                    .breakable(98.1 * factor),
            )
            .unwrap();
        for _ in 0..120 {
            w.step().unwrap();
        }
        assert_eq!(w.joint_broken(j).unwrap(), should_break, "{factor}×");
    }
}

/// Free flight on the GPU backend, where the device restores each isolated island's
/// momentum (`shaders/momentum.wgsl`): the bounds of tests/momentum.rs on the CPU, and a
/// spinning box's angular momentum within 1e-5 over 10 s (measured 3.2e-6; the CPU
/// 2.4e-6).
#[test]
fn gpu_momentum() {
    let Some(s) = run_gpu("spinning_box", &[], SolverConfig::default(), 600) else {
        return;
    };
    let drift = metric(&s, "angular_momentum_drift");
    assert!(drift < 1e-5, "angular momentum drift {drift}");
    let Some(s) = run_gpu("free_collision", &[], SolverConfig::default(), 120) else {
        return;
    };
    let (e, l) = (
        metric(&s, "momentum_error"),
        metric(&s, "angular_momentum_drift"),
    );
    assert!(
        e < 1e-6 && l < 1e-4,
        "momentum error {e}, angular drift {l}"
    );
}

/// Bodies and joints added and removed between GPU steps; buffers stop growing once the
/// scene is steady.
#[test]
fn gpu_runtime_edits_and_steady_buffers() {
    use bevy_avbd::glam::Vec3;
    use bevy_avbd::{BodyDesc, Collider, JointDesc, JointKind, PhysicsWorld};
    let mut w = match PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu) {
        Ok(w) => w,
        Err(e) => {
            assert!(!require_gpu(), "{e}");
            return;
        }
    };
    w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
        .unwrap();
    let a = w
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(0.0, 0.5, 0.0))
                .with_collider(Collider::cuboid(Vec3::splat(0.5)).unwrap()),
        )
        .unwrap();
    w.step().unwrap();
    let first_upload = w.gpu_upload_bytes().unwrap();
    for _ in 0..29 {
        w.step().unwrap();
    }
    // The body state is resident and nothing edited it: only per-step data (contacts,
    // adjacency, joint states, parameters) goes up. The first step uploaded the whole state
    // of both bodies: pose 32, velocity 32, last velocity 32, force 32, mass 48, flags 4.
    let steady_upload = w.gpu_upload_bytes().unwrap();
    assert_eq!(w.gpu_body_upload_bytes(), Some(0));
    assert!(
        steady_upload + 2 * 180 <= first_upload,
        "steady upload {steady_upload} vs first {first_upload}"
    );
    let steady = w.gpu_reallocations().unwrap();
    for _ in 0..30 {
        w.step().unwrap();
    }
    assert_eq!(
        w.gpu_reallocations().unwrap(),
        steady,
        "buffers reallocated in a steady scene"
    );
    let b = w
        .add_body(
            BodyDesc::dynamic()
                .with_mass(1.0)
                .at(Vec3::new(3.0, 5.0, 0.0)),
        )
        .unwrap();
    let j = w
        .add_joint(
            JointDesc::new(JointKind::Ball, b, None)
                .anchors(Vec3::new(0.0, 1.0, 0.0), Vec3::new(3.0, 6.0, 0.0)),
        )
        .unwrap();
    for _ in 0..60 {
        w.step().unwrap();
    }
    assert!(w.joint_error(j).unwrap() < 1e-3);
    w.remove_body(a).unwrap();
    w.remove_joint(j).unwrap();
    for _ in 0..30 {
        w.step().unwrap();
    }
    let vb = w.body(b).unwrap().linear_velocity.y;
    assert!(
        (vb + 9.81 * 0.5).abs() < 0.05 * 9.81 * 0.5,
        "released body falls freely: {vb}"
    );
}

/// Checks the last step's GPU colouring of `w`: bodies sharing a constraint never share a
/// colour, every solved body is coloured (or in the serial group), and static, kinematic
/// and frozen bodies never are. Returns (colours, serial bodies).
fn check_coloring(w: &bevy_avbd::PhysicsWorld, what: &str) -> (u32, usize) {
    use bevy_avbd::BodyKind;
    use bevy_avbd::gpu::{MAX_COLORS, NOT_SOLVED, SERIAL_GROUP};
    let col = w
        .gpu_coloring()
        .expect("GPU world")
        .expect("colouring readback");
    assert_eq!(col.color_of.len(), w.body_count(), "{what}");
    assert!(
        col.palette <= MAX_COLORS && col.colors <= col.palette,
        "{what}"
    );
    for (a, b) in w.constraint_pairs() {
        if a == u32::MAX || b == u32::MAX {
            continue;
        }
        let (ca, cb) = (col.color_of[a as usize], col.color_of[b as usize]);
        if ca < MAX_COLORS && cb < MAX_COLORS {
            assert_ne!(ca, cb, "{what}: bodies {a} and {b} share colour {ca}");
        }
    }
    for (i, &c) in col.color_of.iter().enumerate() {
        let state = w.body(w.handle_of_index(i as u32).unwrap()).unwrap();
        let solved = state.kind == BodyKind::Dynamic && !state.frozen;
        if solved {
            assert!(
                c < col.colors || c == SERIAL_GROUP,
                "{what}: body {i} colour {c}"
            );
        } else {
            assert_eq!(c, NOT_SOLVED, "{what}: unsolved body {i} coloured {c}");
        }
        assert_eq!(
            c == SERIAL_GROUP,
            col.serial.contains(&(i as u32)),
            "{what}"
        );
    }
    assert!(
        col.serial.windows(2).all(|p| p[0] < p[1]),
        "{what}: serial group not sorted"
    );
    (col.colors, col.serial.len())
}

/// The GPU (Jones–Plassmann–Luby) colouring is a valid colouring on contact-, joint- and
/// mixed scenes, frame after frame, with a kinematic body in the mix.
#[test]
fn gpu_coloring_is_valid() {
    for (name, params) in [
        ("pile", vec![("count", 60.0)]),
        ("pyramid", vec![("base", 8.0)]),
        ("joint_grid", vec![("rows", 5.0), ("cols", 5.0)]),
        ("breakable_wall", vec![("rows", 4.0), ("cols", 4.0)]),
        ("card_tower", vec![("levels", 2.0)]),
        ("pendulum", vec![("links", 12.0)]),
    ] {
        let Some(mut s) = gpu_scene(name, &params, SolverConfig::default()) else {
            return;
        };
        let mut max_colors = 0;
        for frame in 0..40 {
            s.world.step().unwrap();
            if frame % 8 == 7 {
                let (colors, serial) = check_coloring(&s.world, name);
                max_colors = max_colors.max(colors);
                assert_eq!(serial, 0, "{name}: serial fallback used");
            }
        }
        eprintln!("{name}: up to {max_colors} GPU colours");
    }
}

/// A 70-body clique of distance joints needs 70 colours, more than the palette of 64 and
/// more than the JPL rounds colour: the rest goes to the serial group (solved one after
/// another), the colouring stays valid, and the motion still matches the CPU backend.
#[test]
fn gpu_coloring_falls_back_past_the_palette() {
    use bevy_avbd::glam::Vec3;
    use bevy_avbd::{BodyDesc, JointDesc, JointKind, PhysicsWorld};
    let build = |backend| {
        let mut w = PhysicsWorld::with_backend(SolverConfig::default(), backend)?;
        let n = 70;
        let pos = |i: usize| {
            let a = i as f32 * std::f32::consts::TAU / n as f32;
            Vec3::new(3.0 * a.cos(), 5.0, 3.0 * a.sin())
        };
        let bodies: Vec<_> = (0..n)
            .map(|i| {
                w.add_body(BodyDesc::dynamic().with_mass(1.0).at(pos(i)))
                    .unwrap()
            })
            .collect();
        for i in 0..n {
            for j in i + 1..n {
                let length = (pos(i) - pos(j)).length();
                w.add_joint(
                    JointDesc::new(JointKind::Distance { length }, bodies[i], Some(bodies[j]))
                        .anchors(Vec3::ZERO, Vec3::ZERO),
                )
                .unwrap();
            }
        }
        // One body hangs from the world, so the clique swings instead of falling freely.
        w.add_joint(JointDesc::new(JointKind::Ball, bodies[0], None).anchors(Vec3::ZERO, pos(0)))
            .unwrap();
        Ok::<_, bevy_avbd::PhysicsError>(w)
    };
    let mut w = match build(Backend::Gpu) {
        Ok(w) => w,
        Err(e) => {
            assert!(!require_gpu(), "{e}");
            return;
        }
    };
    let mut cpu = build(Backend::Cpu).unwrap();
    for _ in 0..30 {
        w.step().unwrap();
        cpu.step().unwrap();
    }
    let (colors, serial) = check_coloring(&w, "clique");
    // A clique colours one body per JPL round, so the rounds (not only the palette) run out.
    assert_eq!(colors as usize + serial, 70);
    assert!(serial >= 70 - 64 && colors <= 64);
    assert_eq!(w.gpu_serial_bodies(), Some(serial));
    let mut worst = 0.0f32;
    for &h in w.body_handles() {
        let (a, b) = (cpu.body(h).unwrap(), w.body(h).unwrap());
        assert!(!b.frozen && b.position.is_finite());
        worst = worst.max((a.position - b.position).length());
    }
    let max_error = |w: &PhysicsWorld| {
        w.joint_handles()
            .iter()
            .map(|&j| w.joint_error(j).unwrap())
            .fold(0.0f32, f32::max)
    };
    let (ec, eg) = (max_error(&cpu), max_error(&w));
    eprintln!("clique: worst CPU/GPU position difference {worst} m, joint error cpu {ec} gpu {eg}");
    // about 2,400 hard rows on 420 DoF: the over-determined system converges differently under a
    // different Gauss–Seidel order, so the comparison is physical: the joints hold as well
    // as on the CPU and the bodies swing the same way (within 10 cm after 0.5 s on a 3 m
    // radius).
    assert!(
        eg <= 2.0 * ec + 1e-3,
        "clique: joint error cpu {ec} gpu {eg}"
    );
    assert!(worst < 0.1, "clique: CPU and GPU differ by {worst} m");
}

/// The bits of every body's position and rotation.
fn pose_bits(w: &bevy_avbd::PhysicsWorld) -> Vec<u32> {
    w.body_handles()
        .iter()
        .flat_map(|&h| {
            let b = w.body(h).unwrap();
            b.position
                .to_array()
                .into_iter()
                .chain(b.rotation.to_array())
        })
        .map(f32::to_bits)
        .collect()
}

/// Contacts split over several storage bindings (as on lavapipe past 1,048,576 contacts),
/// dual updates on 2-D dispatch grids (past 65,535 × 64 contacts) and primal sweeps on 2-D
/// grids (past 65,535 × 4 bodies of one colour) give the same bits as one binding and 1-D
/// grids, and the packed multipliers read back from both of their bindings are the same.
/// One workgroup per grid row forces every multi-group dispatch onto a 2-D grid.
#[test]
fn gpu_contact_chunks_give_the_same_bits() {
    let run = |shift: Option<u32>| {
        let mut s = gpu_scene("pile", &[("count", 30.0)], SolverConfig::default())?;
        if let Some(shift) = shift {
            s.world.gpu_limit_for_tests(shift, 1);
        }
        s.run(20).unwrap();
        let contacts = s.world.contact_count();
        let bits: Vec<u32> = pose_bits(&s.world)
            .into_iter()
            .chain(
                s.world
                    .contacts()
                    .unwrap()
                    .iter()
                    .flat_map(|c| c.lambda.into_iter().chain(c.k).map(f32::to_bits)),
            )
            .collect();
        Some((contacts, bits))
    };
    let (Some((n, a)), Some((_, b))) = (run(None), run(Some(7))) else {
        return;
    };
    // Past 4 chunks of 128 records the contact points (256 per binding) and the state the
    // contacts carry between steps spill into their third binding.
    assert!(
        n > 4 * 128,
        "the pile must span several chunks: {n} contacts"
    );
    assert_eq!(a, b);
}

/// Same input, same bits: a pile run twice on the GPU backend, on the default host threads
/// and on 1.
#[test]
fn gpu_is_deterministic() {
    let run = || {
        let s = run_gpu("pile", &[("count", 60.0)], SolverConfig::default(), 90)?;
        Some(
            s.world
                .body_handles()
                .iter()
                .map(|&h| {
                    let b = s.world.body(h).unwrap();
                    (b.position.to_array(), b.rotation.to_array())
                })
                .collect::<Vec<_>>(),
        )
    };
    // The second run on one host thread: the host's share (collision set-up, packing the
    // upload, unpacking the readback) runs on rayon.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let (Some(a), Some(b)) = (run(), one.install(run)) else {
        return;
    };
    let bits = |v: &Vec<([f32; 3], [f32; 4])>| {
        v.iter()
            .flat_map(|(p, q)| p.iter().chain(q).map(|x| x.to_bits()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&a), bits(&b));
}

/// Bodies and joints added and removed at run time give the same motion on the GPU and the
/// CPU backend (within the non-chaotic parity tolerance of 1 mm), and the colouring stays
/// valid after every edit.
#[test]
fn gpu_runtime_edits_match_the_cpu() {
    use bevy_avbd::glam::Vec3;
    use bevy_avbd::{BodyDesc, Collider, JointDesc, JointKind, PhysicsWorld};
    let Ok(mut gpu) = PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu)
        .map_err(|e| assert!(!require_gpu(), "{e}"))
    else {
        return;
    };
    let mut cpu = PhysicsWorld::new(SolverConfig::default()).unwrap();
    let compare = |cpu: &PhysicsWorld, gpu: &PhysicsWorld, what: &str| {
        assert_eq!(cpu.body_handles(), gpu.body_handles(), "{what}");
        for &h in cpu.body_handles() {
            let (a, b) = (cpu.body(h).unwrap(), gpu.body(h).unwrap());
            assert!(
                (a.position - b.position).length() < 1e-3,
                "{what}: {h:?} cpu {} gpu {}",
                a.position,
                b.position
            );
        }
        check_coloring(gpu, what);
    };
    let boxed = |p: Vec3| {
        BodyDesc::dynamic()
            .at(p)
            .with_collider(Collider::cuboid(Vec3::splat(0.5)).unwrap())
    };
    let mut handles = Vec::new();
    for w in [&mut cpu, &mut gpu] {
        w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
            .unwrap();
        let a = w.add_body(boxed(Vec3::new(0.0, 0.5, 0.0))).unwrap();
        let b = w.add_body(boxed(Vec3::new(0.0, 1.5, 0.0))).unwrap();
        handles.push((a, b));
    }
    let step = |cpu: &mut PhysicsWorld, gpu: &mut PhysicsWorld, n: usize| {
        for _ in 0..n {
            cpu.step().unwrap();
            gpu.step().unwrap();
        }
    };
    step(&mut cpu, &mut gpu, 30);
    compare(&cpu, &gpu, "two boxes");
    let mut joints = Vec::new();
    let mut bobs = Vec::new();
    for w in [&mut cpu, &mut gpu] {
        let bob = w
            .add_body(
                BodyDesc::dynamic()
                    .with_mass(1.0)
                    .at(Vec3::new(3.0, 5.0, 0.0)),
            )
            .unwrap();
        let j = w
            .add_joint(
                JointDesc::new(JointKind::Ball, bob, None)
                    .anchors(Vec3::new(0.0, 1.0, 0.0), Vec3::new(3.0, 6.0, 0.0)),
            )
            .unwrap();
        let c = w.add_body(boxed(Vec3::new(-3.0, 0.5, 0.0))).unwrap();
        let k = w
            .add_joint(
                JointDesc::new(JointKind::Fixed, c, Some(handles[0].0))
                    .anchors(Vec3::new(1.5, 0.0, 0.0), Vec3::new(-1.5, 0.0, 0.0)),
            )
            .unwrap();
        joints.push((j, k));
        bobs.push(bob);
    }
    step(&mut cpu, &mut gpu, 40);
    compare(&cpu, &gpu, "pendulum and welded box added");
    // Remove the lower box (its weld goes with it) and the pendulum's joint.
    for (i, w) in [&mut cpu, &mut gpu].into_iter().enumerate() {
        w.remove_body(handles[i].0).unwrap();
        w.remove_joint(joints[i].0).unwrap();
    }
    step(&mut cpu, &mut gpu, 40);
    compare(&cpu, &gpu, "box and joint removed");
    for (i, w) in [&cpu, &gpu].into_iter().enumerate() {
        assert!(
            w.body(bobs[i]).unwrap().linear_velocity.y < -5.0,
            "bob falls"
        );
        assert!(
            w.body(handles[i].1).unwrap().position.y < 0.6,
            "upper box fell"
        );
    }
}

/// `avbd run --backend gpu --json` names the adapter and reports GPU memory and per-kernel
/// times; `avbd bench --backend gpu` runs the two series (tiny sizes here) into gpu.csv.
#[test]
fn gpu_cli_reports_memory_timings_and_bench() {
    use std::process::Command;
    if gpu_scene("stack", &[], SolverConfig::default()).is_none() {
        return;
    }
    let exe = env!("CARGO_BIN_EXE_avbd");
    let o = Command::new(exe)
        .args([
            "run",
            "stack",
            "--frames",
            "5",
            "--backend",
            "gpu",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["backend"], "gpu");
    assert!(v["adapter"].is_string());
    let gpu = &v["gpu"];
    assert_eq!(gpu["adapter"], v["adapter"]);
    assert!(gpu["memory"]["bytes_per_body"].as_u64().unwrap() > 0);
    assert!(gpu["memory"]["bytes_per_contact"].as_u64().unwrap() > 0);
    assert!(gpu["memory"]["total_bytes"].as_u64().unwrap() > 0);
    let t = &gpu["timings_ms"];
    assert!(
        t == "unsupported" || t["primal"].as_f64().unwrap() > 0.0,
        "{t}"
    );
    if t != "unsupported" {
        // One pass per stage: the stages are disjoint parts of the step's span.
        let stages = bevy_avbd::gpu::GpuTimings::default()
            .stages()
            .map(|(k, _)| k);
        let sum: f64 = stages.iter().map(|k| t[*k].as_f64().unwrap()).sum();
        assert!(stages.iter().all(|k| t[*k].as_f64().unwrap() >= 0.0), "{t}");
        assert!(
            sum <= t["span"].as_f64().unwrap() * (1.0 + 1e-6) + 1e-6,
            "{t}"
        );
        // No deformables, no deformable passes.
        assert_eq!(t["deformable"].as_f64(), Some(0.0), "{t}");
    }
    assert_eq!(gpu["serial_bodies"], 0);

    let out = std::env::temp_dir().join(format!("avbd-gpu-bench-{}", std::process::id()));
    let o = Command::new(exe)
        .args([
            "bench",
            "--backend",
            "gpu",
            "--pile-counts",
            "20",
            "--pyramid-bases",
            "4",
            "--gpu-settle",
            "0",
            "--gpu-frames",
            "1",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("GPU series on "), "{table}");
    let csv = std::fs::read_to_string(out.join("gpu.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert!(rows[1].starts_with("pile,count=20,") && rows[2].starts_with("large_pyramid,base=4,"));
    let _ = std::fs::remove_dir_all(&out);
}

/// Two worlds with the same bodies, one on each backend (`None` without an adapter).
fn twin_worlds() -> Option<(bevy_avbd::PhysicsWorld, bevy_avbd::PhysicsWorld)> {
    use bevy_avbd::PhysicsWorld;
    let gpu = match PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu) {
        Ok(w) => w,
        Err(e) => {
            assert!(!require_gpu(), "{e}");
            return None;
        }
    };
    Some((PhysicsWorld::new(SolverConfig::default()).unwrap(), gpu))
}

/// The device lists the bodies whose result was not finite (63 at most, in no fixed
/// order; the per-body flags are read where more froze): 10 and 100 of 250 balls
/// overflow in the first step, interleaved with balls that do not, and both backends
/// report the same bodies in index order, frozen at their start poses, the others not.
#[test]
fn gpu_freezes_the_bodies_whose_result_overflows_as_the_cpu_does() {
    use bevy_avbd::glam::Vec3;
    use bevy_avbd::{BodyDesc, Collider};
    for overflowing in [10, 100] {
        let Some((mut cpu, mut gpu)) = twin_worlds() else {
            return;
        };
        for w in [&mut cpu, &mut gpu] {
            w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
                .unwrap();
            let mut expected = Vec::new();
            for i in 0..250 {
                let at = Vec3::new((i % 25) as f32, 1.0 + (i / 25) as f32, 0.0);
                let b = w
                    .add_body(
                        BodyDesc::dynamic()
                            .at(at)
                            .with_collider(Collider::ball(0.2).unwrap())
                            .with_mass(1e-3),
                    )
                    .unwrap();
                // Every other ball from the 7th overflows, until there are enough.
                if i >= 7 && i % 2 == 1 && expected.len() < overflowing {
                    w.set_external_force(b, Vec3::new(0.0, 1e38, 0.0), Vec3::ZERO)
                        .unwrap();
                    expected.push((b, at));
                }
            }
            assert_eq!(expected.len(), overflowing);
            let report = w.step().unwrap();
            let handles: Vec<_> = expected.iter().map(|&(b, _)| b).collect();
            assert_eq!(report.frozen, handles, "{}, {overflowing}", w.backend());
            for &(b, at) in &expected {
                let state = w.body(b).unwrap();
                assert!(
                    state.frozen && state.position == at && state.linear_velocity == Vec3::ZERO
                );
            }
            let handles = w.body_handles().to_vec();
            let frozen = handles
                .iter()
                .filter(|&&b| w.body(b).unwrap().frozen)
                .count();
            assert_eq!(frozen, overflowing, "{}", w.backend());
            let report = w.step().unwrap();
            assert!(report.frozen.is_empty(), "{}: {report:?}", w.backend());
        }
    }
}

/// The integration kernels (inertial targets and initial guess before the iterations,
/// velocities and poses after them) against the CPU's `begin_step` / `end_step`:
/// * a free box spinning about a non-principal axis (world inertia, angular momentum
///   target, quaternion update): one body, so no colouring order differs, and the two
///   backends differ by f32 rounding only: after 2 s, within 1e-5 m, 1e-4 rad/s and
///   1e-4 rad (rotations compared in f64: `Quat::angle_between` reads quaternions one ulp
///   apart as 6.9e-4 rad, which failed this test on an H100, whose rounding differs from
///   the CPU's where lavapipe's does not);
/// * a kinematic platform carrying a box by friction: the platform follows its velocity
///   as on the CPU (1e-6 m, 1e-5 rad), the box within the 1 mm parity tolerance;
/// * a body spun past `max_angular_speed` (100 rad/s) leaves the step at that speed (to
///   f32 rounding);
/// * a body whose result overflows is frozen in the first step, reported once, and keeps
///   its start pose exactly, as on the CPU;
/// * the previous velocities, which the CPU's copy derives rather than reads back, are the
///   device's bit for bit after every step (solved, kinematic, static and frozen bodies).
#[test]
fn gpu_integration_matches_the_cpu() {
    use bevy_avbd::glam::{Quat, Vec3};
    use bevy_avbd::{BodyDesc, Collider};
    let Some((mut cpu, mut gpu)) = twin_worlds() else {
        return;
    };
    let mut handles = Vec::new();
    for w in [&mut cpu, &mut gpu] {
        w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
            .unwrap();
        let spinner = w
            .add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(0.0, 50.0, 0.0))
                    .with_collider(Collider::cuboid(Vec3::new(0.1, 0.4, 0.8)).unwrap()),
            )
            .unwrap();
        w.set_velocity(spinner, Vec3::new(1.0, 2.0, 0.0), Vec3::new(3.0, 1.0, 2.0))
            .unwrap();
        let platform = w
            .add_body(
                BodyDesc::kinematic()
                    .at(Vec3::new(10.0, 0.1, 0.0))
                    .with_velocity(Vec3::new(1.0, 0.0, 0.0), Vec3::new(0.0, 0.3, 0.0))
                    .with_collider(Collider::cuboid(Vec3::new(3.0, 0.1, 3.0)).unwrap()),
            )
            .unwrap();
        let rider = w
            .add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(10.0, 0.45, 0.0))
                    .with_collider(Collider::cuboid(Vec3::splat(0.25)).unwrap()),
            )
            .unwrap();
        let fast = w
            .add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(-10.0, 0.5, 0.0))
                    .with_collider(Collider::ball(0.5).unwrap()),
            )
            .unwrap();
        // Resting on the ground, spinning about the vertical through its contact point
        // (no friction torque); on the ground, so the momentum projection of isolated
        // islands (which would restore a free body's angular momentum) leaves it alone.
        w.set_velocity(fast, Vec3::ZERO, Vec3::new(0.0, 400.0, 0.0))
            .unwrap();
        let light = w
            .add_body(
                BodyDesc::dynamic()
                    .at(Vec3::new(-20.0, 5.0, 0.0))
                    // Moving: freezing must zero its previous velocity too.
                    .with_velocity(Vec3::new(1.0, 0.0, 0.0), Vec3::ZERO)
                    .with_collider(Collider::ball(0.1).unwrap())
                    .with_mass(1e-3),
            )
            .unwrap();
        w.set_external_force(light, Vec3::new(0.0, 1e38, 0.0), Vec3::ZERO)
            .unwrap();
        handles.push((spinner, platform, rider, fast, light));
    }
    for (w, &(_, _, _, fast, light)) in [&mut cpu, &mut gpu].into_iter().zip(&handles) {
        let report = w.step().unwrap();
        assert_eq!(report.frozen, vec![light], "{}", w.backend());
        let l = w.body(light).unwrap();
        assert!(l.frozen && l.linear_velocity == Vec3::ZERO);
        assert_eq!(
            (l.position, l.rotation),
            (Vec3::new(-20.0, 5.0, 0.0), Quat::IDENTITY)
        );
        let speed = w.body(fast).unwrap().angular_velocity.length();
        assert!(
            (speed - 100.0).abs() < 1e-3,
            "{}: {speed} rad/s",
            w.backend()
        );
    }
    let same_previous_velocities = |w: &bevy_avbd::PhysicsWorld, step: u32| {
        let [device, host] = w.gpu_previous_velocities_for_tests().unwrap().unwrap();
        let bits =
            |v: &Vec<[f32; 8]>| -> Vec<u32> { v.iter().flatten().map(|x| x.to_bits()).collect() };
        assert_eq!(
            bits(&device),
            bits(&host),
            "step {step}: device {device:?}, CPU {host:?}"
        );
    };
    same_previous_velocities(&gpu, 0);
    for step in 1..120 {
        for w in [&mut cpu, &mut gpu] {
            let report = w.step().unwrap();
            assert!(report.frozen.is_empty(), "{}: {report:?}", w.backend());
        }
        same_previous_velocities(&gpu, step);
    }
    let (c, g) = (handles[0], handles[1]);
    let (sc, sg) = (cpu.body(c.0).unwrap(), gpu.body(g.0).unwrap());
    eprintln!(
        "spinner: position {:.3e} m, ω {:.3e} rad/s, rotation {:.3e} rad apart; platform {:.3e} rad",
        (sc.position - sg.position).length(),
        (sc.angular_velocity - sg.angular_velocity).length(),
        common::rotation_gap(sc.rotation, sg.rotation),
        common::rotation_gap(
            cpu.body(c.1).unwrap().rotation,
            gpu.body(g.1).unwrap().rotation
        )
    );
    // The spin really is off its principal axes: ω precesses about the fixed angular
    // momentum, so the world inertia and the momentum target were exercised.
    let turned = sc.angular_velocity.angle_between(Vec3::new(3.0, 1.0, 2.0));
    assert!(turned > 0.1, "ω turned by {turned} rad only");
    assert!((sc.position - sg.position).length() < 1e-5);
    assert!((sc.angular_velocity - sg.angular_velocity).length() < 1e-4);
    assert!(common::rotation_gap(sc.rotation, sg.rotation) < 1e-4);
    let (pc, pg) = (cpu.body(c.1).unwrap(), gpu.body(g.1).unwrap());
    assert!((pc.position - pg.position).length() < 1e-6, "platform");
    // 120 quaternion updates, each normalised with WGSL's division and inverse square
    // root (up to 2.5 ulp, ~3e-7 rad per step where the CPU rounds exactly).
    let platform_gap = common::rotation_gap(pc.rotation, pg.rotation);
    assert!(platform_gap < 1e-5, "platform {platform_gap:.3e} rad");
    let (rc, rg) = (cpu.body(c.2).unwrap(), gpu.body(g.2).unwrap());
    assert!(
        (rc.position - rg.position).length() < 1e-3,
        "rider: cpu {} gpu {}",
        rc.position,
        rg.position
    );
    // The rider was carried: 2 s on a platform moving at 1 m/s.
    assert!(rg.position.x > 11.0, "rider at {}", rg.position);
}

/// The body state stays on the device: after a step in which the CPU changed no body,
/// no body bytes go up; edits upload only the 1 KiB chunks that hold the edited bodies,
/// and the GPU then moves exactly like the CPU given the same edits (1 mm parity).
#[test]
fn gpu_uploads_only_edited_bodies() {
    use bevy_avbd::glam::{Quat, Vec3};
    use bevy_avbd::{BodyDesc, Collider};
    let Some((mut cpu, mut gpu)) = twin_worlds() else {
        return;
    };
    let rows = 100;
    let mut boxes = Vec::new();
    for w in [&mut cpu, &mut gpu] {
        w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
            .unwrap();
        let b: Vec<_> = (0..rows)
            .map(|i| {
                w.add_body(
                    BodyDesc::dynamic()
                        .at(Vec3::new(2.0 * i as f32, 0.25, 0.0))
                        .with_collider(Collider::cuboid(Vec3::splat(0.25)).unwrap()),
                )
                .unwrap()
            })
            .collect();
        boxes.push(b);
    }
    for _ in 0..30 {
        cpu.step().unwrap();
        gpu.step().unwrap();
    }
    // 101 bodies: 3,232 bytes of poses, the same of velocities, of last velocities and
    // of forces; none of it changed.
    assert_eq!(gpu.gpu_body_upload_bytes(), Some(0));
    // The contacts' multipliers, penalties and flags come back packed (32 of the 96 bytes
    // of a record): each box rests alone on the ground, so no colour order differs and the
    // two backends agree to f32 rounding; the normal forces carry the boxes' weight.
    let (cc, gc) = (cpu.contacts().unwrap(), gpu.contacts().unwrap());
    assert_eq!(cc.len(), gc.len());
    let mut normal = 0.0f64;
    for (a, b) in cc.iter().zip(gc.iter()) {
        assert_eq!((a.body_a, a.body_b, a.flags), (b.body_a, b.body_b, b.flags));
        for r in 0..3 {
            assert!(
                (a.lambda[r] - b.lambda[r]).abs() <= 1e-3 * a.lambda[r].abs() + 1e-4,
                "λ {:?} vs {:?}",
                a.lambda,
                b.lambda
            );
            assert!(
                (a.k[r] - b.k[r]).abs() <= 1e-3 * a.k[r].abs(),
                "k {:?} vs {:?}",
                a.k,
                b.k
            );
        }
        normal += b.lambda[2] as f64;
    }
    let weight: f64 = boxes[1]
        .iter()
        .map(|&h| gpu.body(h).unwrap().mass as f64 * 9.81)
        .sum();
    eprintln!("Σ normal λ {normal:.3} N, weight {weight:.3} N");
    assert!((normal.abs() - weight).abs() < 0.01 * weight);
    for (w, b) in [&mut cpu, &mut gpu].into_iter().zip(&boxes) {
        w.set_velocity(b[10], Vec3::new(0.0, 4.0, 0.0), Vec3::new(0.0, 5.0, 0.0))
            .unwrap();
        w.set_pose(
            b[90],
            Vec3::new(180.0, 3.0, 0.0),
            Quat::from_rotation_z(0.5),
        )
        .unwrap();
    }
    cpu.step().unwrap();
    gpu.step().unwrap();
    // set_velocity wrote the velocity and the last velocity of body 11, set_pose the pose
    // of body 91: the two bodies' state goes up (pose, velocity, last velocity and force,
    // 32 bytes each), none of the other 99's, and nothing is compared.
    let edited = gpu.gpu_body_upload_bytes().unwrap();
    assert_eq!(edited, 2 * 4 * 32);
    for _ in 0..60 {
        cpu.step().unwrap();
        gpu.step().unwrap();
    }
    let mut worst = 0.0f32;
    for (&hc, &hg) in boxes[0].iter().zip(&boxes[1]) {
        let (a, b) = (cpu.body(hc).unwrap(), gpu.body(hg).unwrap());
        worst = worst.max((a.position - b.position).length());
    }
    eprintln!("worst position difference after the edits: {worst:.3e} m");
    assert!(worst < 1e-3, "{worst}");
    // The edits took effect: the launched box rose and came back, the teleported one fell
    // from 3 m and lies at rest again.
    let (l, t) = (
        gpu.body(boxes[1][10]).unwrap(),
        gpu.body(boxes[1][90]).unwrap(),
    );
    assert!(
        (l.position.y - 0.25).abs() < 0.01 && t.position.y < 0.3,
        "{l:?} {t:?}"
    );
    assert!((t.position.x - 180.0).abs() < 0.5, "{t:?}");
}

/// Velocities that stay on the device (`gpu_velocity_readback` off: only the poses come
/// back) give the same bits as velocities read back every step: a pile of 60 boxes run
/// twice, with edits of a pose, a velocity and a force on frames of their own, bodies
/// added (the velocity buffers grow) and removed (an edited one; one whose place a body
/// added since takes), ten frames reading the velocities back in between, and steps run
/// again (from the velocities' copy on the device) after the velocities stayed. Every
/// frame the poses, the velocities as `body` gives them (after the step, and while it is
/// in flight), the momentum, the colouring and the rounds are the same; 24 bytes a body
/// fewer come back; an edit of a pose or a force uploads that field and the force (32 + 32
/// bytes), not the velocities.
#[test]
fn gpu_velocities_that_stay_on_the_device_give_the_same_bits() {
    use bevy_avbd::glam::{Quat, Vec3};
    use bevy_avbd::{BodyDesc, Collider};
    let state_of = |w: &bevy_avbd::PhysicsWorld| -> Vec<u32> {
        w.body_handles()
            .iter()
            .flat_map(|&h| {
                let b = w.body(h).unwrap();
                let p = b.position.to_array().into_iter();
                p.chain(b.rotation.to_array())
                    .chain(b.linear_velocity.to_array())
                    .chain(b.angular_velocity.to_array())
            })
            .chain(w.linear_momentum().unwrap().to_array())
            .chain(w.angular_momentum().unwrap().to_array())
            .map(f32::to_bits)
            .collect()
    };
    let run = |readback: bool| {
        let cfg = SolverConfig {
            gpu_velocity_readback: readback,
            ..Default::default()
        };
        let mut s = gpu_scene("pile", &[("count", 60.0)], cfg)?;
        let handles = s.world.body_handles().to_vec();
        let mut frames = Vec::new();
        for f in 0..90 {
            let w = &mut s.world;
            match f {
                30 => w
                    .set_pose(
                        handles[7],
                        Vec3::new(0.3, 4.0, 0.2),
                        Quat::from_rotation_x(0.4),
                    )
                    .unwrap(),
                31 => w
                    .set_velocity(
                        handles[5],
                        Vec3::new(1.0, 3.0, 0.0),
                        Vec3::new(0.0, 0.0, 4.0),
                    )
                    .unwrap(),
                32 => w
                    .set_external_force(handles[9], Vec3::new(0.0, 30.0, 0.0), Vec3::ZERO)
                    .unwrap(),
                45 => {
                    w.add_body(
                        BodyDesc::dynamic()
                            .at(Vec3::new(0.0, 6.0, 0.0))
                            .with_velocity(Vec3::new(0.0, -2.0, 0.0), Vec3::X)
                            .with_collider(Collider::cuboid(Vec3::splat(0.2)).unwrap()),
                    )
                    .unwrap();
                }
                // 80 bodies at once: the velocity buffers grow (the device's move along).
                50 => {
                    for k in 0..80 {
                        let at = Vec3::new((k % 10) as f32 - 4.5, 8.0 + (k / 10) as f32, 3.0);
                        w.add_body(
                            BodyDesc::dynamic()
                                .at(at)
                                .with_collider(Collider::ball(0.2).unwrap()),
                        )
                        .unwrap();
                    }
                }
                // A body whose velocity was written is removed, and one added since takes
                // the place of another removed (the last body moves on the device, or in
                // the list of written velocities).
                55 => {
                    w.set_velocity(handles[20], Vec3::X, Vec3::ZERO).unwrap();
                    w.remove_body(handles[20]).unwrap();
                    w.add_body(
                        BodyDesc::dynamic()
                            .at(Vec3::new(2.0, 7.0, -2.0))
                            .with_velocity(Vec3::Z, Vec3::Y)
                            .with_collider(Collider::cuboid(Vec3::splat(0.1)).unwrap()),
                    )
                    .unwrap();
                    w.remove_body(handles[30]).unwrap();
                }
                60 => {
                    w.remove_body(handles[3]).unwrap();
                }
                // A velocity written, then a step that reads the velocities back: the CPU's
                // copy is brought up to date first, keeping what it wrote.
                65 => {
                    w.set_velocity(handles[11], Vec3::new(0.0, 2.0, 1.0), Vec3::Y)
                        .unwrap();
                    w.config.gpu_velocity_readback = true;
                }
                75 => w.config.gpu_velocity_readback = readback,
                _ => {}
            }
            if f % 7 == 3 {
                w.gpu_run_again_once_for_tests();
            }
            // Read while the step is in flight too (the world reads as before it: the
            // velocities it started from, which the device copied).
            s.begin_frame().unwrap();
            let during = state_of(&s.world);
            s.finish_frame().unwrap();
            let w = &s.world;
            let state = [state_of(w), during].concat();
            let col = w.gpu_coloring().unwrap().unwrap();
            frames.push((state, col, w.gpu_traffic().unwrap(), w.body_count()));
        }
        Some(frames)
    };
    let (Some(read), Some(stay)) = (run(true), run(false)) else {
        return;
    };
    let mut reran = 0;
    for (f, (a, b)) in read.iter().zip(&stay).enumerate() {
        let first = a.0.iter().zip(&b.0).position(|(x, y)| x != y);
        assert!(
            a.0 == b.0,
            "frame {f}: poses, velocities or momentum differ, first at word {first:?}"
        );
        assert_eq!(a.1.color_of, b.1.color_of, "frame {f}");
        assert_eq!(a.1.rounds, b.1.rounds, "frame {f}");
        assert_eq!(a.2.submissions, b.2.submissions, "frame {f}");
        if f > 0 && b.2.submissions > 1 {
            reran += 1;
        }
        let n = a.3 as u64;
        let saved = match f {
            65..75 => 0,
            _ => 24 * n,
        };
        assert_eq!(
            a.2.download_bytes - b.2.download_bytes,
            saved,
            "frame {f}: the velocities came back, or not"
        );
        let (up_read, up_stay) = (a.2.body_upload_bytes, b.2.body_upload_bytes);
        match f {
            _ if b.2.submissions > 1 => {}
            // A pose or a force: pose and force (32 bytes each) instead of the whole state.
            30 | 32 => assert_eq!((up_read, up_stay), (128, 64), "frame {f}"),
            // A velocity: the whole state of that body.
            31 => assert_eq!((up_read, up_stay), (128, 128), "frame {f}"),
            _ => {}
        }
    }
    eprintln!("{reran} of 90 frames ran again after the velocities stayed on the device");
    assert!(reran >= 12, "{reran}");
}

/// `begin_step` / `finish_step` (the GPU's step in flight while the caller works) give the
/// same bits as `step`, on both backends: two copies of a breakable wall hit by balls (so
/// joints break and their reports pass through the split) advance side by side, one with
/// `step`, the other split, and every body's pose and velocity must match exactly every
/// frame. While the step is in flight the world reads as before it and refuses edits and
/// a second step with a typed error that changes nothing.
#[test]
fn split_step_gives_the_same_bits_as_step() {
    use bevy_avbd::PhysicsError;
    use bevy_avbd::glam::Vec3;
    let mut backends = vec![Backend::Cpu];
    match bevy_avbd::PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu) {
        Ok(_) => backends.push(Backend::Gpu),
        Err(e) => assert!(!require_gpu(), "{e}"),
    }
    let params = [];
    for backend in backends {
        let build = || Scene::build_on("breakable_wall", &params, SolverConfig::default(), backend);
        let (mut whole, mut split) = (build().unwrap(), build().unwrap());
        assert_eq!(
            split.world.finish_step(),
            Err(PhysicsError::NoStepInFlight),
            "{backend:?}"
        );
        let handles = split.world.body_handles().to_vec();
        let probe = *handles.last().unwrap();
        let mut broken = 0;
        for frame in 0..100 {
            // The scene launches its balls by setting velocities: the same on both.
            let (a, b) = (whole.step().unwrap(), {
                split.begin_frame().unwrap();
                assert!(split.world.step_in_flight());
                let before = split.world.body(probe).unwrap();
                assert_eq!(
                    split.world.set_velocity(probe, Vec3::X, Vec3::ZERO),
                    Err(PhysicsError::StepInFlight)
                );
                assert_eq!(split.world.begin_step(), Err(PhysicsError::StepInFlight));
                assert_eq!(split.world.body(probe).unwrap(), before);
                split.finish_frame().unwrap()
            });
            assert!(!split.world.step_in_flight());
            assert_eq!(a, b, "{backend:?} frame {frame}: reports differ");
            broken += a.broken.len();
            for &h in &handles {
                assert_eq!(
                    whole.world.body(h).unwrap(),
                    split.world.body(h).unwrap(),
                    "{backend:?} frame {frame}, body {h:?}"
                );
            }
        }
        assert!(
            broken > 0,
            "{backend:?}: no joint broke, the test proves less"
        );
    }
}

/// The adjacency built on the device is, for every solved body, exactly the list the CPU
/// builds (contacts by index, then joints by index): the atomic fill is sorted back into
/// that order, which is what makes the GPU's sums, and its results, repeat bit for bit.
/// Checked on contact, joint and mixed scenes (a wall whose joints break, a card tower, a
/// grid of ball joints) and with the contacts spread over several bindings.
#[test]
fn gpu_adjacency_is_the_cpu_adjacency() {
    let cases: [(&str, &[(&str, f64)]); 4] = [
        ("pile", &[("count", 300.0)]),
        ("breakable_wall", &[]),
        ("card_tower", &[]),
        ("joint_grid", &[("rows", 12.0), ("cols", 12.0)]),
    ];
    for (name, params) in cases {
        let Some(mut scene) = gpu_scene(name, params, SolverConfig::default()) else {
            return;
        };
        if name == "pile" {
            // 2,048 contacts per binding: the ~10,000 contacts span five of them.
            scene.world.gpu_limit_for_tests(11, 65_535);
        }
        let mut checked = 0;
        for frame in 0..100 {
            let report = scene.step().unwrap();
            if frame % 10 != 9 || !report.broken.is_empty() {
                continue; // a joint broken this step was still in the step's lists
            }
            let (gpu_offsets, gpu_items) = scene.world.gpu_adjacency().unwrap().unwrap();
            let (cpu_offsets, cpu_items) = scene.world.cpu_adjacency();
            assert_eq!(gpu_offsets.len(), cpu_offsets.len(), "{name}");
            for i in 0..gpu_offsets.len() - 1 {
                let gpu = &gpu_items[gpu_offsets[i] as usize..gpu_offsets[i + 1] as usize];
                let cpu = &cpu_items[cpu_offsets[i] as usize..cpu_offsets[i + 1] as usize];
                let h = scene.world.handle_of_index(i as u32).unwrap();
                let state = scene.world.body(h).unwrap();
                if state.kind == bevy_avbd::BodyKind::Dynamic && !state.frozen {
                    assert_eq!(gpu, cpu, "{name} frame {frame}: body {i}");
                    checked += cpu.len();
                } else {
                    assert!(gpu.is_empty(), "{name}: unsolved body {i} has a list");
                }
            }
        }
        assert!(checked > 100, "{name}: only {checked} items checked");
    }
}

/// The traffic the GPU step reports: what it reads back (poses and velocities packed in 52
/// bytes a body, the list of bodies frozen, colour ranges, timestamps; the previous
/// velocities and, with no island anchored nowhere, the islands stay on the device), and a
/// dispatch
/// count fixed by the budget, not by the data: the same in every step of a settled scene,
/// with one primal dispatch per colour slot and iteration recorded indirectly (in place:
/// no copy-back).
#[test]
fn gpu_reports_bytes_and_dispatches() {
    let iterations = 10;
    let Some(mut s) = gpu_scene(
        "pyramid",
        &[("base", 8.0)],
        SolverConfig {
            iterations,
            ..SolverConfig::default()
        },
    ) else {
        return;
    };
    s.run(30).unwrap();
    let t0 = s.world.gpu_traffic().unwrap();
    s.step().unwrap();
    let t1 = s.world.gpu_traffic().unwrap();
    let bodies = s.world.body_count() as u64;
    // 52 bytes a body, then what does not grow with the scene: the frozen list (256 B),
    // the colour ranges (544 B), the pair total and the narrow phase's status (20 B) and,
    // where the adapter has them, the timestamps (16 B a pass). No islands: the pyramid
    // stands on the ground.
    let rest = t1.download_bytes - 52 * bodies - (256 + 544 + 20);
    assert!(rest.is_multiple_of(16) && rest <= 16 * 64, "{t1:?}");
    assert_eq!(t1.body_upload_bytes, 0, "a settled scene uploads no body");
    assert!(t1.upload_bytes > 0 && t1.upload_bytes >= t1.body_upload_bytes);
    assert_eq!(
        (t0.dispatches, t0.indirect_dispatches),
        (t1.dispatches, t1.indirect_dispatches)
    );
    let colors = s.world.stats().colors as u32;
    assert!(colors >= 2);
    assert!(t1.indirect_dispatches >= iterations * colors, "{t1:?}");
    assert!(t1.dispatches > t1.indirect_dispatches);
}

/// The colouring is seeded with the last step's colours. Two boxes apart both take colour
/// 0; brought side by side their seeds conflict and one gives its colour up; moved apart
/// again, each keeps the colour it had, where a colouring from scratch would give both
/// colour 0 again.
#[test]
fn gpu_coloring_is_seeded_by_the_last_step() {
    use bevy_avbd::glam::{Quat, Vec3};
    use bevy_avbd::{BodyDesc, Collider};
    let Some((_, mut w)) = twin_worlds() else {
        return;
    };
    w.add_body(BodyDesc::fixed().with_collider(Collider::halfspace(Vec3::Y).unwrap()))
        .unwrap();
    let cube = || Collider::cuboid(Vec3::splat(0.5)).unwrap();
    w.add_body(
        BodyDesc::dynamic()
            .at(Vec3::new(0.0, 0.5, 0.0))
            .with_collider(cube()),
    )
    .unwrap();
    let b = w
        .add_body(
            BodyDesc::dynamic()
                .at(Vec3::new(5.0, 0.5, 0.0))
                .with_collider(cube()),
        )
        .unwrap();
    let colours = |w: &bevy_avbd::PhysicsWorld| {
        let c = w.gpu_coloring().unwrap().unwrap();
        (c.color_of[1], c.color_of[2], c.colors)
    };
    let mut place = |x: f32, steps: usize| {
        w.set_pose(b, Vec3::new(x, 0.5, 0.0), Quat::IDENTITY)
            .unwrap();
        for _ in 0..steps {
            w.step().unwrap();
        }
        check_coloring(&w, "seeded boxes");
        colours(&w)
    };
    assert_eq!(place(5.0, 3), (0, 0, 1), "apart: one colour");
    let (x, y, n) = place(1.004, 3);
    assert!(
        x != y && n == 2,
        "side by side: the shared seed is given up ({x}, {y}, {n})"
    );
    assert_eq!(place(5.0, 1), (x, y, 2), "apart again: each keeps its seed");
}

/// The colouring records as many rounds as the last step needed (at least four), not 48:
/// a step those leave with uncoloured bodies runs again with 48, so the bits are those of
/// 48 rounds every step. The first step is seeded too (every body with colour 0, not a
/// colouring from scratch), so that its rounds are those of a seeded colouring. Three
/// worlds run the pile as the sphere smashes it: rounds as the
/// last step needed, one round (every step that needs more runs again), always 48. The
/// colour dispatches recorded per sweep come down once the pile needs fewer colours.
#[test]
fn gpu_coloring_rounds_follow_the_last_step() {
    let run = |rounds: Option<u32>| {
        let mut s = gpu_scene("pile", &[("count", 60.0)], SolverConfig::default())?;
        s.world.gpu_colour_from_scratch_for_tests(false);
        s.world.gpu_rounds_for_tests(rounds);
        let mut frames = Vec::new();
        for _ in 0..130 {
            s.step().unwrap();
            let col = s.world.gpu_coloring().unwrap().unwrap();
            let traffic = s.world.gpu_traffic().unwrap();
            let positions: Vec<_> = s
                .world
                .body_handles()
                .iter()
                .map(|&h| s.world.body(h).unwrap().position)
                .collect();
            frames.push((positions, col, traffic));
        }
        Some(frames)
    };
    let (Some(adaptive), Some(one), Some(all)) = (run(None), run(Some(1)), run(Some(48))) else {
        return;
    };
    let mut reran = 0;
    for (f, ((a, b), c)) in adaptive.iter().zip(&one).zip(&all).enumerate() {
        assert_eq!(a.0, c.0, "frame {f}: adaptive rounds changed the bits");
        assert_eq!(
            b.0, c.0,
            "frame {f}: one round (run again) changed the bits"
        );
        assert_eq!(a.1.color_of, c.1.color_of, "frame {f}");
        assert_eq!(c.1.rounds, 48);
        assert!(a.1.rounds_used <= a.1.rounds && c.1.rounds_used <= 48);
        // Rounds recorded: 48 first, then twice what the step before used, at least 4.
        let expected = match f {
            0 => 48,
            _ => (2 * adaptive[f - 1].1.rounds_used).clamp(4, 48),
        };
        assert!(
            a.1.rounds == expected || (a.1.rounds == 48 && a.1.rounds_used > expected),
            "frame {f}: {} rounds recorded, {} used, expected {expected}",
            a.1.rounds,
            a.1.rounds_used
        );
        // One round recorded: a step that needed more ran again with 48.
        if b.1.rounds_used > 1 {
            assert_eq!(b.1.rounds, 48, "frame {f}");
            reran += 1;
        }
        assert_eq!(
            c.2.indirect_dispatches - a.2.indirect_dispatches,
            48 - a.1.rounds,
            "frame {f}: one dispatch per round"
        );
    }
    let first = &adaptive[0].1;
    eprintln!(
        "rounds: first step {} used for {} bodies; {reran} one-round steps ran again",
        first.rounds_used, first.worklist
    );
    assert!(first.worklist > 0 && first.rounds_used > 1, "{first:?}");
    assert!(reran >= 1);
    let (_, steady, traffic) = adaptive.last().unwrap();
    assert_eq!(steady.rounds, 4, "a settled pile records the fewest rounds");
    // The colour dispatches recorded per sweep: the most colours of the steps since the
    // last window of 32 began (it closed after step 128, and a step needing more since
    // would have raised them), fewer than the most of the whole run.
    let colors = |from: usize| adaptive[from..].iter().map(|f| f.1.colors).max().unwrap();
    let iterations = SolverConfig::default().iterations;
    eprintln!(
        "colours: {} at most in the run, {} since step 97, {} now",
        colors(0),
        colors(96),
        steady.colors
    );
    assert!(colors(96) < colors(0));
    // The 4 rounds, the narrow phase's worklist, a primal dispatch per colour per sweep.
    assert_eq!(
        traffic.indirect_dispatches,
        4 + 1 + iterations * colors(96),
        "{traffic:?}"
    );
}

/// The colour count stays near what the graph needs: on a settled pile of 1,000 boxes, at
/// most that of a sequential greedy colouring of the same constraint graph (computed here,
/// bodies in index order; 9). The first step's colouring from scratch is that greedy
/// colouring, later steps recolour only what their seeds lost, and the re-greedy pass
/// takes classes off: 8 here, where Jones–Plassmann–Luby with the hash alone left 11–12
/// and, before the colouring from scratch (1a1c0c5), the re-greedy pass 10.
#[test]
fn gpu_coloring_is_near_a_sequential_greedy_one() {
    let Some(mut s) = gpu_scene("pile", &[("count", 1000.0)], SolverConfig::default()) else {
        return;
    };
    s.run(30).unwrap();
    let (colors, serial) = check_coloring(&s.world, "pile 1000");
    assert_eq!(serial, 0);
    let colour = sequential_greedy(&s.world);
    let sequential = colour.iter().filter(|&&c| c != usize::MAX).max().unwrap() + 1;
    eprintln!("pile 1000: {colors} GPU colours, sequential greedy {sequential}");
    assert!(
        colors as usize <= sequential,
        "{colors} GPU colours against a sequential greedy {sequential}"
    );
}

/// The sequential greedy colouring of `w`'s last constraint graph, bodies in index order
/// (what the CPU backend's colouring does): each solved body's colour, `usize::MAX` for
/// the others.
fn sequential_greedy(w: &bevy_avbd::PhysicsWorld) -> Vec<usize> {
    use bevy_avbd::BodyKind;
    let n = w.body_count();
    let solved: Vec<bool> = (0..n)
        .map(|i| {
            let b = w.body(w.handle_of_index(i as u32).unwrap()).unwrap();
            b.kind == BodyKind::Dynamic && !b.frozen
        })
        .collect();
    let mut neighbours = vec![Vec::new(); n];
    for (a, b) in w.constraint_pairs() {
        let (a, b) = (a as usize, b as usize);
        if a < n && b < n && a != b && solved[a] && solved[b] {
            neighbours[a].push(b);
            neighbours[b].push(a);
        }
    }
    let mut colour = vec![usize::MAX; n];
    for i in (0..n).filter(|&i| solved[i]) {
        let taken: Vec<usize> = neighbours[i].iter().map(|&o| colour[o]).collect();
        colour[i] = (0..).find(|c| !taken.contains(c)).unwrap();
    }
    colour
}

/// A colouring from scratch (the first step) gives the smaller index the priority, so its
/// rounds make exactly the sequential greedy colouring in index order, body for body: 4
/// colours on a pyramid where a hash priority leaves 6. Only a step whose seeds hold no
/// colouring does this: its rounds are as many as the graph's longest chain of rising
/// indices, recorded once.
#[test]
fn gpu_coloring_from_scratch_is_the_sequential_greedy_one() {
    use bevy_avbd::gpu::{NOT_SOLVED, SCRATCH_ROUNDS};
    for (name, params, colours) in [
        ("pyramid", vec![], 4),
        ("card_tower", vec![], 4),
        ("joint_grid", vec![("rows", 6.0), ("cols", 6.0)], 2),
        ("pile", vec![("count", 1000.0)], 0),
    ] {
        let Some(mut s) = gpu_scene(name, &params, SolverConfig::default()) else {
            return;
        };
        s.step().unwrap();
        let (colors, serial) = check_coloring(&s.world, name);
        assert_eq!(serial, 0, "{name}");
        let col = s.world.gpu_coloring().unwrap().unwrap();
        assert_eq!(col.rounds, SCRATCH_ROUNDS, "{name}");
        let greedy = sequential_greedy(&s.world);
        for (i, (&c, &g)) in col.color_of.iter().zip(&greedy).enumerate() {
            match g {
                usize::MAX => assert_eq!(c, NOT_SOLVED, "{name}: body {i}"),
                g => assert_eq!(c as usize, g, "{name}: body {i}"),
            }
        }
        eprintln!("{name}: {colors} colours in {} rounds", col.rounds_used);
        if colours > 0 {
            assert_eq!(colors, colours, "{name}");
        }
        // The next step seeds from these colours and records the usual rounds.
        s.step().unwrap();
        let col = s.world.gpu_coloring().unwrap().unwrap();
        assert!(
            col.rounds <= bevy_avbd::gpu::JPL_ROUNDS,
            "{name}: {}",
            col.rounds
        );
    }
}

/// The colouring's rounds on a 2-D grid of workgroups (as past 65,535 × 64 uncoloured
/// bodies) give the bits of a 1-D grid: 80 boxes, all uncoloured in the first step, span
/// two workgroups, and one workgroup per grid row puts them on two rows.
#[test]
fn gpu_coloring_rounds_on_a_2d_grid_give_the_same_bits() {
    let run = |limit: bool| {
        let mut s = gpu_scene("pile", &[("count", 80.0)], SolverConfig::default())?;
        if limit {
            s.world.gpu_limit_for_tests(u32::MAX, 1);
        }
        s.step().unwrap();
        let worklist = s.world.gpu_coloring().unwrap().unwrap().worklist;
        s.run(9).unwrap();
        let bits = pose_bits(&s.world);
        Some((
            worklist,
            bits,
            s.world.gpu_coloring().unwrap().unwrap().color_of,
        ))
    };
    let (Some((w, a, ca)), Some((_, b, cb))) = (run(false), run(true)) else {
        return;
    };
    assert!(w > 64, "the first worklist must span two workgroups: {w}");
    assert_eq!(ca, cb);
    assert_eq!(a, b);
}

/// A chain of 8 equal boxes hanging by ball joints from the world (as in
/// `tests/joints.rs`): `n` bodies, the joints' handles, the bodies.
fn hanging_chain(
    backend: Backend,
    breakable: bool,
    joined: bool,
) -> Option<(
    bevy_avbd::PhysicsWorld,
    Vec<bevy_avbd::JointHandle>,
    Vec<bevy_avbd::BodyHandle>,
)> {
    use bevy_avbd::glam::Vec3;
    use bevy_avbd::{BodyDesc, Collider, JointDesc, JointKind, PhysicsWorld};
    let mut w = match PhysicsWorld::with_backend(SolverConfig::default(), backend) {
        Ok(w) => w,
        Err(e) => {
            assert!(!require_gpu(), "{e}");
            return None;
        }
    };
    let (n, step_y) = (8, 0.25f32);
    let top = n as f32 * step_y;
    let half = Vec3::new(0.25, 0.125, 0.125);
    let links: Vec<_> = (0..n)
        .map(|i| {
            let at = Vec3::new(0.0, top - step_y * (i as f32 + 0.5), 0.0);
            let desc = BodyDesc::dynamic().at(at);
            w.add_body(desc.with_collider(Collider::cuboid(half).unwrap()))
                .unwrap()
        })
        .collect();
    if !joined {
        return Some((w, Vec::new(), links));
    }
    let up = Vec3::Y * step_y / 2.0;
    let rated = |d: JointDesc| if breakable { d.breakable(1e9) } else { d };
    let mut joints = vec![
        w.add_joint(rated(
            JointDesc::new(JointKind::Ball, links[0], None).anchors(up, Vec3::Y * top),
        ))
        .unwrap(),
    ];
    for pair in links.windows(2) {
        let d = JointDesc::new(JointKind::Ball, pair[0], Some(pair[1])).anchors(-up, up);
        joints.push(w.add_joint(rated(d)).unwrap());
    }
    Some((w, joints, links))
}

/// The joints' warm start and fracture test run on the device, from row states that stay
/// there: a hanging chain's joints carry the weight below them on the GPU as on the CPU,
/// and a steady step moves no byte per joint across the bus (the same traffic as the same
/// bodies with no joints; 4 bytes per joint down where joints are breakable).
#[test]
fn gpu_joint_rows_stay_on_the_device() {
    let Some((mut gpu, joints, links)) = hanging_chain(Backend::Gpu, false, true) else {
        return;
    };
    let (mut cpu, cpu_joints, _) = hanging_chain(Backend::Cpu, false, true).unwrap();
    let mass = gpu.body(links[0]).unwrap().mass;
    let mut peak = 0.0f32;
    for _ in 0..300 {
        gpu.step().unwrap();
        cpu.step().unwrap();
        peak = peak.max(gpu.joint_force(joints[0]).unwrap().0);
    }
    let n = links.len();
    assert!(peak < 2.0 * n as f32 * mass * 9.81, "peak {peak} N");
    for (k, (&j, &c)) in joints.iter().zip(&cpu_joints).enumerate() {
        // Joint k holds the n − k links below it.
        let weight = (n - k) as f32 * mass * 9.81;
        let (on_gpu, on_cpu) = (gpu.joint_force(j).unwrap().0, cpu.joint_force(c).unwrap().0);
        assert!(
            (on_gpu - weight).abs() < 0.03 * weight,
            "joint {k}: {on_gpu} N vs {weight} N"
        );
        // (The backends' colourings differ: a few newtons apart at the bottom joint.)
        let total = n as f32 * mass * 9.81;
        assert!(
            (on_gpu - on_cpu).abs() < 0.005 * total,
            "joint {k}: {on_gpu} N on the GPU, {on_cpu} N on the CPU"
        );
    }
    // Traffic of a steady step against the same bodies, free, with no joints (falling
    // freely, each is an island anchored nowhere, whose momentum the device restores: no
    // body goes up for it, no island comes back).
    let traffic = |w: &mut bevy_avbd::PhysicsWorld| {
        w.step().unwrap();
        let t = w.gpu_traffic().unwrap();
        (t.upload_bytes, t.download_bytes, t)
    };
    let (mut free, _, _) = hanging_chain(Backend::Gpu, false, false).unwrap();
    free.step().unwrap();
    let (t, t_free) = (traffic(&mut gpu), traffic(&mut free));
    assert_eq!(
        t.2.body_upload_bytes + t_free.2.body_upload_bytes,
        0,
        "{t:?} vs {t_free:?}"
    );
    assert_eq!(t.0, t_free.0, "{t:?} vs {t_free:?}");
    assert_eq!(t.1, t_free.1, "{t:?} vs {t_free:?}");
    let (mut breakable, rated, _) = hanging_chain(Backend::Gpu, true, true).unwrap();
    breakable.step().unwrap();
    let t = traffic(&mut breakable);
    let per_joint = 4 * rated.len() as u64;
    assert_eq!(t.0, t_free.0, "{t:?} vs {t_free:?}");
    assert_eq!(t.1, t_free.1 + per_joint, "{t:?} vs {t_free:?}");
    // A joint added (and one removed) brings the CPU's copy of the row states up to date
    // before it goes up again: the chain's joints keep their loads through the edit.
    let extra = |w: &mut bevy_avbd::PhysicsWorld| {
        use bevy_avbd::{BodyDesc, JointDesc, JointKind, glam::Vec3};
        let b = w
            .add_body(
                BodyDesc::dynamic()
                    .with_mass(1.0)
                    .at(Vec3::new(5.0, 1.0, 0.0)),
            )
            .unwrap();
        let d =
            JointDesc::new(JointKind::Ball, b, None).anchors(Vec3::ZERO, Vec3::new(5.0, 1.0, 0.0));
        w.add_joint(d).unwrap()
    };
    cpu.step().unwrap(); // (the GPU world stepped once more for its traffic)
    let (ja, jb) = (extra(&mut gpu), extra(&mut cpu));
    gpu.step().unwrap();
    cpu.step().unwrap();
    gpu.remove_joint(ja).unwrap();
    cpu.remove_joint(jb).unwrap();
    gpu.step().unwrap();
    cpu.step().unwrap();
    for (k, (&j, &c)) in joints.iter().zip(&cpu_joints).enumerate() {
        let (on_gpu, on_cpu) = (gpu.joint_force(j).unwrap().0, cpu.joint_force(c).unwrap().0);
        let total = n as f32 * mass * 9.81;
        assert!(
            (on_gpu - on_cpu).abs() < 0.005 * total,
            "after the edits, joint {k}: {on_gpu} N on the GPU, {on_cpu} N on the CPU"
        );
    }
}

/// A joint that breaks is reported by its handle on both backends, also after another
/// joint's removal moved it to another index in the joint storage.
#[test]
fn broken_joints_are_reported_by_handle() {
    use bevy_avbd::glam::Vec3;
    use bevy_avbd::{BodyDesc, JointDesc, JointKind, PhysicsWorld};
    for backend in [Backend::Cpu, Backend::Gpu] {
        let mut w = match PhysicsWorld::with_backend(SolverConfig::default(), backend) {
            Ok(w) => w,
            Err(e) => {
                assert!(!require_gpu(), "{e}");
                return;
            }
        };
        let hang = |w: &mut PhysicsWorld, x: f32, rating: Option<f32>| {
            let b = w
                .add_body(
                    BodyDesc::dynamic()
                        .with_mass(10.0)
                        .at(Vec3::new(x, 5.0, 0.0)),
                )
                .unwrap();
            let d = JointDesc::new(JointKind::Ball, b, None)
                .anchors(Vec3::new(0.0, 0.5, 0.0), Vec3::new(x, 5.5, 0.0));
            w.add_joint(match rating {
                Some(f) => d.breakable(f),
                None => d,
            })
            .unwrap()
        };
        let first = hang(&mut w, 0.0, None);
        let strong = hang(&mut w, 3.0, Some(1.2 * 98.1));
        // Rated at 0.8 of the weight it holds; the last joint, so the removal of the
        // first moves it to index 0.
        let weak = hang(&mut w, 6.0, Some(0.8 * 98.1));
        w.remove_joint(first).unwrap();
        let mut broken = Vec::new();
        for _ in 0..120 {
            broken.extend(w.step().unwrap().broken);
        }
        assert_eq!(broken, vec![weak], "{backend:?}");
        assert!(w.joint_broken(weak).unwrap() && !w.joint_broken(strong).unwrap());
    }
}

/// Kernel timings (`gpu_kernel_timings`) time every dispatch of a rigid step exactly once
/// (their counts sum to the step's dispatches), name the kernels of each stage, and leave
/// the results' bits as they are: a wall of boxes held by breakable joints, on the ground
/// (the device's broad and narrow phases, joints, fracture test, islands).
#[test]
fn kernel_timings_time_every_dispatch_of_a_rigid_step() {
    let run = |timed: bool| {
        let config = SolverConfig {
            gpu_kernel_timings: timed,
            ..SolverConfig::default()
        };
        let mut s = gpu_scene("breakable_wall", &[], config)?;
        let mut steps = Vec::new();
        for _ in 0..30 {
            s.step().unwrap();
            let kernels = s.world.gpu_kernel_timings().expect("on the GPU backend");
            let dispatches = s.world.gpu_traffic().unwrap().dispatches;
            steps.push((kernels, dispatches));
        }
        Some((pose_bits(&s.world), steps))
    };
    let (Some((timed, steps)), Some((untimed, plain))) = (run(true), run(false)) else {
        return;
    };
    assert_eq!(timed, untimed, "the timings changed the results");
    assert!(plain.iter().all(|(k, _)| k.is_empty()));
    if steps.iter().all(|(k, _)| k.is_empty()) {
        // The adapter cannot write timestamps inside passes (lavapipe can).
        assert!(!require_gpu(), "no kernel timings");
        return;
    }
    for (frame, (kernels, dispatches)) in steps.iter().enumerate() {
        let timed: u32 = kernels.iter().map(|k| k.dispatches).sum();
        assert_eq!(timed, *dispatches, "frame {frame}: {kernels:?}");
        assert!(kernels.iter().all(|k| k.ms.is_finite() && k.ms >= 0.0));
        let names: Vec<&str> = kernels.iter().map(|k| k.kernel).collect();
        for kernel in [
            "bp_write_pairs",
            "begin_bodies",
            "narrow_carry",
            "narrow_collide",
            "warm_start_joints",
            "adj_sort",
            "color_scatter",
            "primal",
            "dual_contacts",
            "dual_joints",
            "end_bodies",
            "fracture_joints",
            "store_contact_warm",
            "island_link",
        ] {
            assert!(
                names.contains(&kernel),
                "frame {frame}: {kernel} not in {names:?}"
            );
        }
    }
}
