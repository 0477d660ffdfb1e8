//! Deformable bodies on the GPU backend (`gpu::soft`, `shaders/vbd.wgsl`): the physical
//! checks of `tests/deformable.rs` run on the device (the attachments to rigid bodies too,
//! coupled in the rigid step's submission), the same scenes against the CPU backend,
//! repeated runs, and the typed error for what the device does not run yet.
//! Surface contact is off in every scene here (`deformable_contact`; contact on the device
//! is `tests/gpu_surface_contact.rs`): nothing in these scenes touches, so they are the
//! same problems the CPU tests solve.
//!
//! Tolerances against the CPU: both backends run the same formulas in f32, but the device
//! restricts, solves and prolongs the coarse step in f32 where the CPU does it in f64; the
//! sweeps correct what that changes, and the results agree to about 1e-6 of the measured
//! quantity (measured below), so 1e-4 relative leaves room for another device's rounding.

mod common;

use bevy_avbd::glam::Vec3;
use bevy_avbd::scenes::Scene;
use bevy_avbd::{
    Backend, ContactModel, DeformableDesc, PhysicsError, PhysicsWorld, SolidMaterial, SolverConfig,
    TetMesh, TetPattern,
};
use common::{gpu_scene, metric, run};

fn no_contact(iterations: u32) -> SolverConfig {
    SolverConfig {
        iterations,
        deformable_contact: false,
        ..SolverConfig::default()
    }
}

/// Runs `name` on the GPU backend for `frames` (None without an adapter).
fn run_gpu(name: &str, params: &[(&str, f64)], config: SolverConfig, frames: u32) -> Option<Scene> {
    let mut s = gpu_scene(name, params, config)?;
    s.run(frames).expect("scene steps on the GPU");
    Some(s)
}

fn close(gpu: f64, cpu: f64, rel: f64) -> bool {
    (gpu - cpu).abs() <= rel * cpu.abs().max(1e-12)
}

/// The hanging bar of `tests/deformable.rs` on the device: within 1% of the f64 Newton
/// solve and 5% of ρgL²/(2E), and within 1e-4 of the CPU backend's elongation.
#[test]
fn hanging_bar_on_the_gpu_matches_newton_and_the_cpu() {
    let Some(g) = run_gpu("hanging_bar", &[], no_contact(10), 300) else {
        return;
    };
    let c = run("hanging_bar", &[], no_contact(10), 300);
    let (vbd, newton, analytic) = (
        metric(&g, "elongation"),
        metric(&g, "newton_elongation"),
        metric(&g, "analytic_elongation"),
    );
    let cpu = metric(&c, "elongation");
    println!("hanging bar: GPU {vbd:.9} m, CPU {cpu:.9} m, Newton {newton:.9} m");
    assert!(
        (vbd / newton - 1.0).abs() < 0.01,
        "{vbd} vs Newton {newton}"
    );
    assert!((vbd / analytic - 1.0).abs() < 0.05, "{vbd} vs {analytic}");
    assert!(close(vbd, cpu, 1e-4), "GPU {vbd} vs CPU {cpu}");
}

/// The stiff cantilever within 1% of the Newton solve at every budget from 1 to 20
/// iterations on the device too: the two-level step's correction runs there (restriction,
/// the solve with the frame's factor, prolongation), and without it a 1-iteration budget
/// sags by most of the beam.
#[test]
fn cantilever_on_the_gpu_matches_newton_at_every_budget() {
    for iterations in [1, 2, 5, 10, 20] {
        let Some(g) = run_gpu("cantilever", &[], no_contact(iterations), 300) else {
            return;
        };
        let c = run("cantilever", &[], no_contact(iterations), 300);
        let (vbd, newton) = (
            metric(&g, "tip_deflection"),
            metric(&g, "newton_tip_deflection"),
        );
        let cpu = metric(&c, "tip_deflection");
        println!(
            "cantilever, {iterations} it: GPU {vbd:.9} m, CPU {cpu:.9} m, Newton {newton:.9} m"
        );
        assert!(
            (vbd / newton - 1.0).abs() < 0.01,
            "{iterations} iterations: {vbd} vs {newton}"
        );
        assert!(
            close(vbd, cpu, 1e-3),
            "{iterations} it: GPU {vbd} vs CPU {cpu}"
        );
    }
}

/// Frame by frame: the cantilever released straight follows the f64 Newton solve of the
/// same implicit-Euler steps within 1% of its static deflection at every frame, on the
/// device, at 3 and 10 iterations (as `tests/deformable.rs` asks of the CPU).
#[test]
fn cantilever_trajectory_on_the_gpu_follows_newton() {
    let reference = common::cantilever_trajectory(90);
    for iterations in [3, 10] {
        let Ok(mut w) = PhysicsWorld::with_backend(no_contact(iterations), Backend::Gpu) else {
            assert!(!common::require_gpu(), "no GPU adapter");
            return;
        };
        let worst = reference.largest_deviation(&mut w);
        println!(
            "GPU cantilever trajectory, {iterations} iterations: largest deviation {:.4}% of the static deflection",
            100.0 * worst
        );
        assert!(worst < 0.01, "{iterations} iterations: {worst}");
    }
}

/// Free fall (implicit Euler to 1e-5 m, volume within 1%), the twisted beam (no inverted
/// tet, the same smallest volume ratio as the CPU within 1e-4) and the hanging cloth (the
/// same largest strain within 1e-3 relative) on the device.
#[test]
fn free_fall_twist_and_cloth_on_the_gpu_match_the_cpu() {
    let Some(g) = run_gpu("soft_free_fall", &[], no_contact(10), 120) else {
        return;
    };
    let (com, volume) = (metric(&g, "com_error"), metric(&g, "volume_ratio"));
    println!("GPU free fall: com_error {com:e} m, volume ratio {volume}");
    assert!(com < 1e-5, "com_error {com}");
    assert!((0.99..=1.01).contains(&volume), "volume ratio {volume}");

    let twist = [("turns", 2.0)];
    let g = run_gpu("twisting_beam", &twist, no_contact(10), 300).unwrap();
    let c = run("twisting_beam", &twist, no_contact(10), 300);
    let (inverted, min_j) = (
        metric(&g, "inverted_elements"),
        metric(&g, "min_volume_ratio"),
    );
    let cpu_j = metric(&c, "min_volume_ratio");
    println!("GPU twisting beam: inverted {inverted}, min J {min_j} (CPU {cpu_j})");
    assert_eq!(inverted, 0.0);
    assert!(
        close(min_j, cpu_j, 1e-4),
        "min J: GPU {min_j} vs CPU {cpu_j}"
    );

    let g = run_gpu("cloth_hang", &[], no_contact(10), 120).unwrap();
    let c = run("cloth_hang", &[], no_contact(10), 120);
    let (strain, cpu_strain) = (metric(&g, "max_strain"), metric(&c, "max_strain"));
    println!("GPU cloth: max strain {strain} (CPU {cpu_strain})");
    assert!(
        close(strain, cpu_strain, 1e-3),
        "GPU {strain} vs CPU {cpu_strain}"
    );
}

/// Two runs of the same cloth and the same beam on the device give the same bits.
#[test]
fn gpu_deformables_are_deterministic() {
    let positions = |name: &str| -> Option<Vec<[f32; 3]>> {
        let s = run_gpu(name, &[], no_contact(10), 40)?;
        Some(common::all_positions(&s.world))
    };
    for name in ["cloth_hang", "cantilever"] {
        let Some(a) = positions(name) else {
            return;
        };
        let b = positions(name).unwrap();
        assert!(!a.is_empty());
        assert_eq!(a, b, "{name}: two GPU runs differ");
    }
}

/// The GPU timings split out the deformables' passes: the vertex sweeps take time, and
/// every stage, theirs included, is a disjoint part of the step's span.
#[test]
fn gpu_timings_split_out_the_deformable_passes() {
    let Some(s) = run_gpu("cloth_hang", &[], no_contact(10), 3) else {
        return;
    };
    let t = s.world.gpu_timings().expect("on the GPU backend");
    if !t.supported {
        return; // the adapter has no timestamp queries
    }
    assert!(t.deformable_ms > 0.0, "{t:?}");
    let stages = t.stages();
    assert!(stages.iter().all(|&(_, ms)| ms >= 0.0), "{t:?}");
    let sum: f64 = stages.iter().map(|&(_, ms)| ms).sum();
    assert!(sum <= t.span_ms * (1.0 + 1e-6) + 1e-6, "{t:?}");
}

/// The rigid and deformable halves coupled in one submission: a 100 kg box hanging from a
/// 1 kg soft rod by hard attachments (the box's rows read the vertices, the vertices' rows
/// the box, both dual updates on the device). The checks of `tests/deformable.rs` (gap
/// under 1 mm, elongation within 5% of F L/(E A) + ρgL²/2E, reaction within 2%), and the
/// CPU backend's elongation within 1e-3.
#[test]
fn heavy_box_hangs_from_a_soft_rod_on_the_gpu() {
    let params = [("mass_ratio", 100.0)];
    let Some(g) = run_gpu("soft_on_chain", &params, no_contact(10), 300) else {
        return;
    };
    let c = run("soft_on_chain", &params, no_contact(10), 300);
    let gap = metric(&g, "max_attachment_error");
    let (rod, analytic) = (
        metric(&g, "rod_elongation"),
        metric(&g, "analytic_rod_elongation"),
    );
    let reaction = metric(&g, "box_reaction_ratio");
    let cpu = metric(&c, "rod_elongation");
    println!(
        "GPU box on rod: gap {gap:e} m, rod {rod:.7} m (CPU {cpu:.7}) vs {analytic:.7} m, reaction {reaction}"
    );
    assert!(gap < 1e-3, "gap {gap}");
    assert!((rod / analytic - 1.0).abs() < 0.05, "{rod} vs {analytic}");
    assert!((reaction - 1.0).abs() < 0.02, "reaction {reaction}");
    assert!(close(rod, cpu, 1e-3), "GPU {rod} vs CPU {cpu}");
}

/// What the device does not run yet (the log-barrier baseline) is a typed error, and
/// nothing is lost: refused when a deformable is added, and at the step when the model is
/// switched after adding one (the world unchanged). Contact next to a dynamic collider runs.
#[test]
fn gpu_refuses_the_barrier_baseline_with_a_typed_error() {
    let Ok(mut w) = PhysicsWorld::with_backend(SolverConfig::default(), Backend::Gpu) else {
        assert!(!common::require_gpu(), "no GPU adapter");
        return;
    };
    w.add_body(
        bevy_avbd::BodyDesc::dynamic()
            .with_collider(bevy_avbd::Collider::ball(0.1).unwrap())
            .at(Vec3::new(3.0, 0.0, 0.0)),
    )
    .unwrap();
    let mesh = TetMesh::box_grid(Vec3::splat(0.2), [2, 2, 2], TetPattern::Six);
    let desc = DeformableDesc::solid(mesh, SolidMaterial::default()).at(Vec3::new(0.0, 1.0, 0.0));
    w.config.contact_model = ContactModel::Barrier;
    assert!(matches!(
        w.add_deformable(desc.clone()),
        Err(PhysicsError::Unsupported(_))
    ));
    assert!(w.deformable_handles().is_empty());
    w.config.contact_model = ContactModel::AugmentedLagrangian;
    let h = w.add_deformable(desc).unwrap();
    w.step().unwrap();
    let before: Vec<_> = w.deformable(h).unwrap().positions().to_vec();
    w.config.contact_model = ContactModel::Barrier;
    assert!(matches!(w.step(), Err(PhysicsError::Unsupported(_))));
    assert_eq!(w.deformable(h).unwrap().positions(), &before[..]);
    w.config.contact_model = ContactModel::AugmentedLagrangian;
    w.step().unwrap();
    assert_ne!(w.deformable(h).unwrap().positions(), &before[..]);
}
