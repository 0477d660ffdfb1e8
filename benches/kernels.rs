//! Micro-benchmarks of the solver's hot kernels (`cargo bench --bench kernels`), so that a
//! regression shows up as a number. `cargo test` does not build or run them.
//!
//! Each stage kernel runs in isolation through `bevy_avbd::stages` (exactly the code
//! `PhysicsWorld::step` runs for that stage) on a scene settled for 30 frames and prepared
//! up to its first iteration:
//!
//! - `ldlt/solve_6x6`: `Mat6::solve_ldlt` of one body's block (box mass + 4 contact rows);
//! - `primal/one_box_sweep`, `primal/pyramid20_sweep`: one primal sweep (every dynamic
//!   body's 6×6 assembly and solve, colour by colour) of 1 box and of 210 boxes;
//! - `dual/pyramid20_update`: one dual update of the pyramid's ~2,400 contact points;
//! - `coloring/pyramid20`, `coloring/joint_grid_30x30`: adjacency (CSR) and greedy colouring;
//! - `contacts/pyramid20_collision`: broad phase, parry3d manifolds and warm-started records;
//! - `step/pyramid20`: the whole step (from `StepStats`, scene rebuilt every 300 frames);
//! - `coarse/squishy_balls8_operators`: the coarse operators of 8 soft balls (11,464 tets,
//!   64 nodes each) at a settled frame's initial guess: element assembly and Cholesky
//!   factorisation, the host's share of a deformable frame on both backends.

use std::hint::black_box;
use std::time::Duration;

use bevy_avbd::SolverConfig;
use bevy_avbd::glam::{Mat3, Vec3};
use bevy_avbd::math::{Mat6, Vec6};
use bevy_avbd::scenes::Scene;
use bevy_avbd::stages;
use criterion::{Criterion, criterion_group, criterion_main};

fn scene(name: &str, params: &[(&str, f64)], iterations: u32) -> Scene {
    let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let config = SolverConfig {
        iterations,
        ..SolverConfig::default()
    };
    Scene::build(name, &params, config).expect("benchmark scene builds")
}

/// Times `part` of `world.step()` (from `StepStats`) over `iters` steps of a scene that is
/// rebuilt every `reset` frames (outside the timing) so it stays near its start state.
fn step_part(
    build: impl Fn() -> Scene,
    warmup: u32,
    reset: u32,
    part: fn(&bevy_avbd::StepStats) -> f64,
) -> impl FnMut(u64) -> Duration {
    let fresh = move |build: &dyn Fn() -> Scene| {
        let mut s = build();
        for _ in 0..warmup {
            s.world.step().unwrap();
        }
        s
    };
    let mut sc = fresh(&build);
    move |iters| {
        let mut ms = 0.0;
        for _ in 0..iters {
            if sc.frame >= warmup + reset {
                sc = fresh(&build);
            }
            sc.world.step().unwrap();
            sc.frame += 1;
            ms += part(sc.world.stats());
        }
        Duration::from_secs_f64(ms * 1e-3)
    }
}

fn ldlt(c: &mut Criterion) {
    // A 1000 kg unit box at 60 Hz with four stiff contact normal rows under it.
    let h = 1.0 / 60.0f32;
    let inertia = Mat3::from_diagonal(Vec3::splat(1000.0 / 6.0));
    let mut a = Mat6::mass(1000.0, inertia, 1.0 / (h * h));
    for (x, z) in [(-0.5, -0.5), (0.5, -0.5), (-0.5, 0.5), (0.5, 0.5)] {
        let arm = Vec3::new(x, -0.5, z);
        let n = Vec3::Y;
        let ang = arm.cross(n);
        let j: Vec6 = [n.x, n.y, n.z, ang.x, ang.y, ang.z];
        a.add_outer(&j, 1e7);
    }
    let b: Vec6 = [0.1, -9.81, 0.2, 0.01, 0.02, -0.03];
    c.bench_function("ldlt/solve_6x6", |bench| {
        bench.iter(|| black_box(black_box(&a).solve_ldlt(black_box(&b))))
    });
}

/// A scene settled for 30 frames and prepared up to its first iteration.
fn prepared(name: &str, params: &[(&str, f64)]) -> Scene {
    let mut s = scene(name, params, 10);
    for _ in 0..30 {
        s.world.step().unwrap();
    }
    stages::prepare(&mut s.world);
    s
}

/// Times `stage` alone, repeated on the same prepared state.
fn stage(c: &mut Criterion, id: &str, mut s: Scene, stage: fn(&mut bevy_avbd::PhysicsWorld)) {
    c.bench_function(id, |bench| bench.iter(|| stage(black_box(&mut s.world))));
}

fn primal(c: &mut Criterion) {
    stage(
        c,
        "primal/one_box_sweep",
        prepared("stack", &[("boxes", 1.0)]),
        stages::primal_sweep,
    );
    stage(
        c,
        "primal/pyramid20_sweep",
        prepared("pyramid", &[("base", 20.0)]),
        stages::primal_sweep,
    );
    stage(
        c,
        "dual/pyramid20_update",
        prepared("pyramid", &[("base", 20.0)]),
        stages::dual_update,
    );
    // The benchmark scene of issue #3 (5,500 boxes, ~58,000 contact points, 7 MB of
    // records): past the L2, where the sweep stalls on the records' loads.
    stage(
        c,
        "primal/many_pyramids_sweep",
        prepared("many_pyramids", &[]),
        stages::primal_sweep,
    );
    stage(
        c,
        "dual/many_pyramids_update",
        prepared("many_pyramids", &[]),
        stages::dual_update,
    );
}

fn coloring(c: &mut Criterion) {
    stage(
        c,
        "coloring/pyramid20",
        prepared("pyramid", &[("base", 20.0)]),
        stages::coloring,
    );
    stage(
        c,
        "coloring/joint_grid_30x30",
        prepared("joint_grid", &[("rows", 30.0), ("cols", 30.0)]),
        stages::coloring,
    );
}

fn contacts(c: &mut Criterion) {
    stage(
        c,
        "contacts/pyramid20_collision",
        prepared("pyramid", &[("base", 20.0)]),
        stages::collision,
    );
    c.bench_function("step/pyramid20", |bench| {
        bench.iter_custom(step_part(
            || scene("pyramid", &[("base", 20.0)], 10),
            30,
            300,
            |s| s.total_ms,
        ))
    });
}

fn coarse(c: &mut Criterion) {
    let mut s = scene("squishy_balls", &[("count", 8.0)], 10);
    for _ in 0..30 {
        s.world.step().unwrap();
    }
    stage(
        c,
        "coarse/squishy_balls8_operators",
        s,
        stages::coarse_operators,
    );
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = kernels;
    config = config();
    targets = ldlt, primal, coloring, contacts, coarse
}
criterion_main!(kernels);
