//! Micro-benchmarks of the solver's hot kernels (`cargo bench --bench kernels`), so that a
//! regression shows up as a number. `cargo test` does not build or run them.
//!
//! Only the 6×6 LDLᵀ is public as a function; the other kernels run inside
//! `PhysicsWorld::step`, so they are timed through small scenes and the step's own
//! `StepStats` split (collision vs solver):
//!
//! - `ldlt/solve_6x6`: `Mat6::solve_ldlt` of one body's block (box mass + 4 contact rows);
//! - `primal/one_box_step`: a whole step of one box resting on the ground (one body's primal
//!   update × `iterations`, plus a one-pair collision pass);
//! - `primal/stack10_solver`: the solver part of a step of a 10-box stack;
//! - `coloring/joint_grid_30x30_solver_1it`: the solver part of a 1-iteration step of a 30×30
//!   joint grid (adjacency + colouring of 1,770 joints + one sweep): the nearest public proxy
//!   for colouring;
//! - `contacts/pyramid20_collision`: the collision part of a step of the base-20 pyramid
//!   (broad phase, 2,000+ parry3d manifolds, warm start);
//! - `step/pyramid20`: the whole step of the base-20 pyramid.

use std::hint::black_box;
use std::time::Duration;

use bevy_avbd::SolverConfig;
use bevy_avbd::glam::{Mat3, Vec3};
use bevy_avbd::math::{Mat6, Vec6};
use bevy_avbd::scenes::Scene;
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

fn primal(c: &mut Criterion) {
    c.bench_function("primal/one_box_step", |bench| {
        bench.iter_custom(step_part(
            || scene("stack", &[("boxes", 1.0)], 10),
            30,
            600,
            |s| s.total_ms,
        ))
    });
    c.bench_function("primal/stack10_solver", |bench| {
        bench.iter_custom(step_part(
            || scene("stack", &[("boxes", 10.0)], 10),
            30,
            600,
            |s| s.solver_ms,
        ))
    });
}

fn coloring(c: &mut Criterion) {
    c.bench_function("coloring/joint_grid_30x30_solver_1it", |bench| {
        bench.iter_custom(step_part(
            || scene("joint_grid", &[("rows", 30.0), ("cols", 30.0)], 1),
            10,
            300,
            |s| s.solver_ms,
        ))
    });
}

fn contacts(c: &mut Criterion) {
    c.bench_function("contacts/pyramid20_collision", |bench| {
        bench.iter_custom(step_part(
            || scene("pyramid", &[("base", 20.0)], 10),
            30,
            300,
            |s| s.collision_ms,
        ))
    });
    c.bench_function("step/pyramid20", |bench| {
        bench.iter_custom(step_part(
            || scene("pyramid", &[("base", 20.0)], 10),
            30,
            300,
            |s| s.total_ms,
        ))
    });
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
    targets = ldlt, primal, coloring, contacts
}
criterion_main!(kernels);
