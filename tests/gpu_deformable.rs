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
    Backend, BodyDesc, Collider, ContactModel, DeformableDesc, PhysicsError, PhysicsWorld,
    SolidMaterial, SolverConfig, TetMesh, TetPattern,
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

/// Two runs of the same cloth and the same beam on the device, on the default host threads
/// and on 1, give the same bits.
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
        // The second run on one host thread: the host's share (the coarse operators'
        // assembly in fixed chunks, the upload's packing) runs on rayon.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let b = one.install(|| positions(name)).unwrap();
        assert!(!a.is_empty());
        assert_eq!(a, b, "{name}: two GPU runs differ");
    }
}

/// Several lanes per vertex in the sweeps (`gpu_vertex_lanes`): the same blocks summed in
/// another order. The cantilever at 4 lanes stays within 1% of the Newton solve and 1e-4
/// of one lane's deflection (the order changes only the rounding, as the CPU's f64 coarse
/// step does: 1e-4 is this file's tolerance against the CPU); at 64 lanes, more than any
/// vertex has elements, each lane holds at most one element and the lanes' sums are one
/// lane's sum in its order: the same bits. The cloth (triangles and hinges) at 8 lanes:
/// two runs bit-identical, within 1e-4 of its size of one lane's.
#[test]
fn vertex_lanes_on_the_gpu_sum_the_same_blocks() {
    let lanes = |n: u32| SolverConfig {
        gpu_vertex_lanes: n,
        ..no_contact(10)
    };
    let tip = |n: u32| -> Option<(f64, f64)> {
        let g = run_gpu("cantilever", &[], lanes(n), 300)?;
        Some((
            metric(&g, "tip_deflection"),
            metric(&g, "newton_tip_deflection"),
        ))
    };
    let Some((one, newton)) = tip(1) else {
        return;
    };
    let (four, _) = tip(4).unwrap();
    let (all, _) = tip(64).unwrap();
    println!(
        "cantilever tip: 1 lane {one:.9}, 4 lanes {four:.9}, 64 lanes {all:.9}, Newton {newton:.9}"
    );
    assert!(
        (four / newton - 1.0).abs() < 0.01,
        "{four} vs Newton {newton}"
    );
    assert!(close(four, one, 1e-4), "4 lanes {four} vs 1 lane {one}");
    assert_eq!(
        all.to_bits(),
        one.to_bits(),
        "64 lanes {all} vs 1 lane {one}"
    );
    let cloth = |n: u32| {
        let s = run_gpu("cloth_hang", &[], lanes(n), 40).unwrap();
        common::all_positions(&s.world)
    };
    let (a, b, one) = (cloth(8), cloth(8), cloth(1));
    assert_eq!(a, b, "two runs at 8 lanes differ");
    let span = one
        .iter()
        .flat_map(|p| p.iter())
        .fold((f32::MAX, f32::MIN), |(lo, hi), &c| (lo.min(c), hi.max(c)));
    let size = (span.1 - span.0) as f64;
    let worst = a
        .iter()
        .zip(&one)
        .map(|(p, q)| (Vec3::from(*p) - Vec3::from(*q)).length() as f64)
        .fold(0.0, f64::max);
    println!("cloth at 8 lanes: largest distance from 1 lane {worst:.3e} m, size {size:.3} m");
    assert!(worst <= 1e-4 * size, "{worst} m of {size} m");
}

/// An invalid lane count is a typed error that leaves the config as it was.
#[test]
fn vertex_lanes_must_be_a_power_of_two_up_to_64() {
    let mut c = SolverConfig::default();
    for bad in [0.0, 3.0, 128.0, 2.5] {
        let e = c.set("gpu_vertex_lanes", bad).unwrap_err();
        assert!(
            matches!(
                e,
                PhysicsError::InvalidConfig {
                    field: "gpu_vertex_lanes",
                    ..
                }
            ),
            "{bad}: {e:?}"
        );
        assert_eq!(c.gpu_vertex_lanes, 1);
    }
    c.set("gpu_vertex_lanes", 16.0).unwrap();
    assert_eq!(c.gpu_vertex_lanes, 16);
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

/// Kernel timings (`gpu_kernel_timings`, a timestamp after each dispatch) name every
/// kernel of the vertex sweeps and of the contact passes a frame with contact runs, each
/// with a time of its own, time every dispatch of the step once, and change nothing in the
/// results: `soft_drop` for 20
/// frames, landing included, ends with the same bits either way.
#[test]
fn kernel_timings_name_each_deformable_kernel_and_keep_the_bits() {
    let timed = SolverConfig {
        gpu_kernel_timings: true,
        ..SolverConfig::default()
    };
    let Some(a) = run_gpu("soft_drop", &[], timed, 20) else {
        return;
    };
    let b = run_gpu("soft_drop", &[], SolverConfig::default(), 20).expect("the same adapter");
    assert_eq!(
        common::all_positions(&a.world),
        common::all_positions(&b.world)
    );
    assert!(b.kernel_profile().is_empty());
    let kernels = a.world.gpu_kernel_timings().expect("on the GPU backend");
    if kernels.is_empty() {
        // The adapter cannot write timestamps inside passes; wgpu's Vulkan backend (CI's
        // lavapipe) can wherever it has timestamps at all.
        let timestamps = a.world.gpu_timings().is_some_and(|t| t.supported);
        assert!(!(timestamps && common::require_gpu()), "no kernel timings");
        return;
    }
    let names: Vec<&str> = kernels.iter().map(|k| k.kernel).collect();
    for kernel in [
        "coarse_residual",
        "coarse_solve",
        "coarse_prolong",
        "vbd_sweep",
        "contact_start",
        "contact_list_offsets",
        "contact_dual",
        "contact_hold_first",
        "contact_ccd",
        "contact_advance",
        "contact_linearise",
        "contact_pack_rows",
    ] {
        assert!(names.contains(&kernel), "{kernel} not in {names:?}");
    }
    // Every dispatch of the last step's submission is timed once, the rigid stages' too.
    let timed_dispatches: u32 = kernels.iter().map(|k| k.dispatches).sum();
    let dispatches = a.world.gpu_traffic().unwrap().dispatches;
    assert_eq!(timed_dispatches, dispatches, "{kernels:?}");
    assert!(kernels.iter().all(|k| k.ms.is_finite() && k.ms >= 0.0));
    assert!(kernels.iter().any(|k| k.ms > 0.0), "{kernels:?}");
    let profile = a.kernel_profile();
    // (Over the frames: a kernel some steps skip, like the colouring's re-greedy pass,
    // is in the profile too.)
    assert!(
        names.iter().all(|k| profile.contains_key(*k)),
        "{profile:?}"
    );
}

/// A deformable scene over a fixed ground only (`soft_drop`, surface contact off as in
/// this file: its cube falls through the ground here) solves no body, so its steps
/// record no adjacency, colouring or primal sweep (they would colour and sweep nothing):
/// none of their kernels is in the last step's timings. A dynamic box added then brings
/// them back, and the box, far from the rest, falls as implicit Euler makes it: after n
/// steps of h from rest, v = n h g (the block solve of a lone body is exact; 1e-5
/// relative is f32 rounding over n steps).
#[test]
fn a_step_that_solves_no_body_records_no_rigid_sweep() {
    let timed = SolverConfig {
        gpu_kernel_timings: true,
        ..no_contact(10)
    };
    let Some(mut s) = run_gpu("soft_drop", &[], timed, 5) else {
        return;
    };
    let rigid_sweep =
        |k: &str| k.starts_with("adj_") || k.starts_with("color_") || k.starts_with("primal");
    let kernels = s.world.gpu_kernel_timings().expect("on the GPU backend");
    if kernels.is_empty() {
        return; // no timestamps inside passes (see the test above)
    }
    let names: Vec<&str> = kernels.iter().map(|k| k.kernel).collect();
    assert!(names.contains(&"vbd_sweep"), "{names:?}");
    assert!(!names.iter().any(|k| rigid_sweep(k)), "{names:?}");
    let collider = Collider::cuboid(Vec3::splat(0.1)).expect("a valid box");
    let start = Vec3::new(20.0, 20.0, 0.0);
    let box_handle = s
        .world
        .add_body(BodyDesc::dynamic().at(start).with_collider(collider))
        .expect("a valid body");
    let steps = 12;
    s.run(steps).expect("scene steps on the GPU");
    let kernels = s.world.gpu_kernel_timings().expect("on the GPU backend");
    let names: Vec<&str> = kernels.iter().map(|k| k.kernel).collect();
    for kernel in ["adj_count", "color_init", "primal"] {
        assert!(names.contains(&kernel), "{kernel} not in {names:?}");
    }
    let config = &s.world.config;
    let expected = config.gravity.y * config.dt * steps as f32;
    let v = s.world.body(box_handle).expect("the box").linear_velocity;
    assert!(
        (v.y - expected).abs() <= 1e-5 * expected.abs() && v.x == 0.0 && v.z == 0.0,
        "{v:?} against {expected}"
    );
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

/// `gpu_memory` counts the deformable half's buffers: none before a deformable step, then
/// at least what its per-vertex buffers take (the vertex records, 32 B, and three 16 B
/// arrays: displacements, the residual, the readback's copy) and the tets (16 B each), in
/// `deformable_bytes` and in `total_bytes`; a body 8 times as large allocates more.
#[test]
fn gpu_memory_counts_the_deformable_buffers() {
    let Some(mut w) = common::gpu_world() else {
        return;
    };
    w.add_body(
        bevy_avbd::BodyDesc::dynamic()
            .with_collider(bevy_avbd::Collider::ball(0.1).unwrap())
            .at(Vec3::new(3.0, 0.0, 0.0)),
    )
    .unwrap();
    w.step().unwrap();
    let rigid = w.gpu_memory().expect("a GPU world");
    assert_eq!(rigid.deformable_bytes, 0);
    let mut last = 0;
    for n in [4, 8] {
        let mesh = TetMesh::box_grid(Vec3::splat(0.2), [n, n, n], TetPattern::Six);
        let tets = mesh.tets.len() as u64;
        let desc = DeformableDesc::solid(mesh, SolidMaterial::default()).at(Vec3::new(
            0.0,
            1.0 + n as f32,
            0.0,
        ));
        let h = w.add_deformable(desc).unwrap();
        w.step().unwrap();
        let vertices = w.deformable(h).unwrap().vertex_count() as u64;
        let m = w.gpu_memory().unwrap();
        println!("{n}³ cells: {vertices} vertices, {tets} tets: {m:?}");
        assert!(m.deformable_bytes >= vertices * (32 + 3 * 16) + tets * 16);
        assert!(m.deformable_bytes > last);
        assert!(m.total_bytes >= m.deformable_bytes + rigid.total_bytes - rigid.deformable_bytes);
        last = m.deformable_bytes;
    }
}

/// The attachments' lists go up only when they change (`SoftStep::put_if_changed`):
/// removing attachments must reach the device. The heavy box hangs from the soft rod for
/// 60 frames, then its attachments are removed and it falls freely for 30: on each
/// backend its height follows implicit Euler's free fall from its state at the removal,
/// `y₀ + n h v₀ − g h² n(n+1)/2`, within 1e-4 m (what f32 positions near 3 m accumulate
/// over 30 steps, and the rod's last pull through the warm-started multipliers); the
/// block's attachments to the chain, renumbered by the removal, still hold within 1 mm.
/// With the lists left as they were, the box stays on the rod.
#[test]
fn removed_attachments_let_go_on_the_gpu() {
    let params = [("mass_ratio", 100.0)];
    let Some(mut g) = run_gpu("soft_on_chain", &params, no_contact(10), 60) else {
        return;
    };
    let mut c = run("soft_on_chain", &params, no_contact(10), 60);
    for (name, s) in [("GPU", &mut g), ("CPU", &mut c)] {
        let w = &mut s.world;
        let handles = w.attachment_handles().to_vec();
        let bodies: Vec<_> = handles
            .iter()
            .map(|&h| w.attachment_body(h).unwrap())
            .collect();
        // The box is the body of the last attachment (the rod's bottom, added last).
        let bx = *bodies.last().unwrap();
        let (kept, removed): (Vec<_>, Vec<_>) =
            handles.iter().zip(&bodies).partition(|(_, b)| **b != bx);
        assert!(!kept.is_empty() && !removed.is_empty());
        for &(&h, _) in &removed {
            w.remove_attachment(h).unwrap();
        }
        let start = w.body(bx).unwrap();
        let (h, gy) = (w.config.dt as f64, w.config.gravity.y as f64);
        let frames = 30;
        for _ in 0..frames {
            w.step().unwrap();
        }
        let n = frames as f64;
        let expected = start.position.y as f64
            + n * h * start.linear_velocity.y as f64
            + gy * h * h * n * (n + 1.0) / 2.0;
        let y = w.body(bx).unwrap().position.y as f64;
        let gap = kept
            .iter()
            .map(|&(&h, _)| w.attachment_error(h).unwrap())
            .fold(0.0f32, f32::max);
        println!("{name}: box at {y:.6} m, free fall {expected:.6} m; block's gap {gap:e} m");
        assert!((y - expected).abs() < 1e-4, "{name}: {y} vs {expected}");
        assert!(gap < 1e-3, "{name}: gap {gap}");
    }
}
