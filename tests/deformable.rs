//! Deformable bodies against analytic solutions and the f64 Newton reference of the same
//! mesh (release mode, 60 Hz, the default budget of 10 iterations unless stated).

mod common;

use bevy_avbd::deformable::elastic::TetRecord;
use bevy_avbd::glam::{DVec3, Quat, Vec3, Vec3A};
use bevy_avbd::reference::NewtonProblem;
use bevy_avbd::{PhysicsWorld, SolidMaterial, SolverConfig, TetMesh, TetPattern};
use common::{metric, run, with_iterations};

/// A small deterministic generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
    fn vec(&mut self) -> DVec3 {
        DVec3::new(self.next(), self.next(), self.next())
    }
}

/// The engine's per-vertex force and 3×3 block of a Stable Neo-Hookean tet (f32) against
/// central differences of the f64 reference energy (force) and of its f64 analytic
/// gradient (block; the gradient itself is checked against differences of the energy
/// first), on random rest shapes and random deformations of which a third are inverted.
/// Tolerance 1e-4 relative: the kernel rounds in f32 (about 1e-6 relative here), the f64
/// differences with steps of 1e-6 of the element size are accurate to about 1e-8.
#[test]
fn snh_vertex_force_and_block_match_finite_differences() {
    let mut rng = Rng(42);
    let mut inverted = 0;
    let mut cases = 0;
    for poisson in [0.3f32, 0.45] {
        let material = SolidMaterial {
            youngs: 1e6,
            poisson,
            ..Default::default()
        };
        let rec = material.record();
        for case in 0..150 {
            // A rest tet that is not a sliver.
            let rest = loop {
                let r = [0, 1, 2, 3].map(|_| rng.vec());
                let v = (r[1] - r[0]).dot((r[2] - r[0]).cross(r[3] - r[0])) / 6.0;
                if v > 0.02 {
                    break r;
                }
            };
            // A random deformation: a random linear map (a third of them mirrored, so the
            // tet is inverted) plus noise per vertex.
            let a = bevy_avbd::glam::DMat3::from_cols(rng.vec(), rng.vec(), rng.vec()) * 0.6
                + bevy_avbd::glam::DMat3::IDENTITY;
            let mirror = if case % 3 == 0 { -1.0 } else { 1.0 };
            let a = bevy_avbd::glam::DMat3::from_diagonal(DVec3::new(mirror, 1.0, 1.0)) * a;
            let x64: Vec<DVec3> = rest.iter().map(|&p| a * p + rng.vec() * 0.1).collect();
            // Round to f32 first: both sides see the same positions.
            let x32: [Vec3A; 4] = [0, 1, 2, 3].map(|i| Vec3A::from(x64[i].as_vec3()));
            let x: Vec<DVec3> = x32.iter().map(|p| Vec3::from(*p).as_dvec3()).collect();
            let tet = TetRecord::new([0, 1, 2, 3], rest.map(|p| p.as_vec3()), 0);
            let problem = NewtonProblem {
                rest: rest.to_vec(),
                tets: vec![[0, 1, 2, 3]],
                mu: rec.mu as f64,
                lambda: rec.lambda as f64,
                alpha: rec.alpha as f64,
                masses: vec![0.0; 4],
                fixed: vec![None; 4],
                gravity: DVec3::ZERO,
                inertia: None,
            };
            let j = {
                let e = [x[1] - x[0], x[2] - x[0], x[3] - x[0]];
                e[0].dot(e[1].cross(e[2]))
            };
            inverted += (j < 0.0) as usize;
            cases += 1;
            let scale = (rest[1] - rest[0]).length();
            let eps = 1e-6 * scale;
            let grad = problem.gradient(&x);
            for v in 0..4 {
                let block = tet.vertex_block(&rec, v, &x32, &x32, 60.0);
                let mut fd_force = DVec3::ZERO;
                let mut fd_block = [DVec3::ZERO; 3];
                for k in 0..3 {
                    let mut xp = x.clone();
                    let mut xm = x.clone();
                    xp[v][k] += eps;
                    xm[v][k] -= eps;
                    fd_force[k] = -(problem.energy(&xp) - problem.energy(&xm)) / (2.0 * eps);
                    let (gp, gm) = (problem.gradient(&xp), problem.gradient(&xm));
                    fd_block[k] = (gp[v] - gm[v]) / (2.0 * eps);
                }
                // The reference's own gradient against differences of its energy.
                assert!(
                    (-grad[v] - fd_force).length() <= 1e-6 * fd_force.length().max(1e-3),
                    "reference gradient, case {case} vertex {v}"
                );
                let f = block.f.as_dvec3();
                assert!(
                    (f - fd_force).length() <= 1e-4 * fd_force.length(),
                    "ν {poisson} case {case} vertex {v} (J {j:.3}): force {f:?} vs {fd_force:?}"
                );
                let mut diff2 = 0.0;
                let mut norm2 = 0.0;
                for (k, fd) in fd_block.iter().enumerate() {
                    diff2 += (block.h.col(k).as_dvec3() - *fd).length_squared();
                    norm2 += fd.length_squared();
                }
                assert!(
                    diff2.sqrt() <= 1e-4 * norm2.sqrt(),
                    "ν {poisson} case {case} vertex {v} (J {j:.3}): block off by {:.2e} of its norm",
                    diff2.sqrt() / norm2.sqrt()
                );
            }
        }
    }
    assert!(
        inverted >= cases / 4,
        "{inverted} of {cases} cases inverted"
    );
}

/// A soft cube falling freely for 2 s: its centre of mass follows the implicit-Euler law
/// `x_n = x₀ − g h² n(n+1)/2` to 1e-5 m (f32 rounding of 20 m of fall is about 2e-6 m per
/// step), and its volume stays within 1%.
#[test]
fn soft_free_fall_follows_implicit_euler_and_keeps_its_volume() {
    let s = run("soft_free_fall", &[], SolverConfig::default(), 120);
    let com = metric(&s, "com_error");
    let volume = metric(&s, "volume_ratio");
    println!("free fall: com_error {com:e} m, volume ratio {volume}");
    assert!(com < 1e-5, "com_error {com}");
    assert!((0.99..=1.01).contains(&volume), "volume ratio {volume}");
}

/// A 1 m bar (E = 1 MPa, ρ = 1000) hanging from its top face: its elongation is within 5%
/// of ρgL²/(2E) (the clamped top face cannot contract sideways, which the 1-D formula
/// ignores), and within 1% of the f64 Newton solve of the same mesh.
#[test]
fn hanging_bar_matches_the_analytic_and_newton_elongation() {
    let s = run("hanging_bar", &[], SolverConfig::default(), 300);
    let (vbd, analytic, newton) = (
        metric(&s, "elongation"),
        metric(&s, "analytic_elongation"),
        metric(&s, "newton_elongation"),
    );
    println!("hanging bar: VBD {vbd:.6} m, Newton {newton:.6} m, ρgL²/2E {analytic:.6} m");
    assert!(
        (vbd / analytic - 1.0).abs() < 0.05,
        "{vbd} vs analytic {analytic}"
    );
    assert!(
        (vbd / newton - 1.0).abs() < 0.01,
        "{vbd} vs Newton {newton}"
    );
}

/// The cantilever (L/h = 10, E = 1e8): VBD's static deflection within 1% of the Newton
/// solve of the same mesh at every budget from 1 to 20 iterations (the two-level step
/// carries the load across the beam in each iteration), and the Newton solve of an
/// 80×8×8-cell mesh (30,720 tets) within 10% of Euler–Bernoulli (linear tets are stiffer
/// in bending: the default 20×2×2 mesh sags about half as much).
#[test]
fn cantilever_matches_newton_at_every_budget_and_euler_bernoulli_when_fine() {
    for iterations in [1, 2, 5, 10, 20] {
        let s = run("cantilever", &[], with_iterations(iterations), 300);
        let (vbd, newton) = (
            metric(&s, "tip_deflection"),
            metric(&s, "newton_tip_deflection"),
        );
        println!("cantilever, {iterations} iterations: VBD {vbd:.6} m, Newton {newton:.6} m");
        assert!(
            (vbd / newton - 1.0).abs() < 0.01,
            "{iterations} iterations: {vbd} vs {newton}"
        );
    }
    let mesh = TetMesh::box_grid(Vec3::new(1.0, 0.1, 0.1), [80, 8, 8], TetPattern::Six);
    let pinned: Vec<u32> = (0..mesh.vertices.len() as u32)
        .filter(|&i| mesh.vertices[i as usize].x < -0.4999)
        .collect();
    let tip: Vec<usize> = (0..mesh.vertices.len())
        .filter(|&i| mesh.vertices[i].x > 0.4999)
        .collect();
    let material = SolidMaterial {
        youngs: 1e8,
        ..Default::default()
    };
    let g = Vec3::new(0.0, -9.81, 0.0);
    let p =
        NewtonProblem::statics(&mesh, &material, (Vec3::ZERO, Quat::IDENTITY), &pinned, g).unwrap();
    let sol = p.solve_static().unwrap();
    let sag = -tip.iter().map(|&i| sol.x[i].y - p.rest[i].y).sum::<f64>() / tip.len() as f64;
    // ρ g A L⁴/(8 E I) = 3 ρ g L⁴/(2 E h²).
    let eb = 3.0 * 1000.0 * 9.81f32 as f64 / (2.0 * 1e8 * 0.01);
    println!("Newton, 80×8×8 cells: {sag:.6} m; Euler–Bernoulli {eb:.6} m");
    assert!((sag / eb - 1.0).abs() < 0.10, "{sag} vs {eb}");
}

/// Frame by frame, not only at rest: the cantilever released straight swings and settles;
/// every frame's tip deflection is compared with the f64 Newton solve of the same
/// implicit-Euler step sequence. At the default budget they agree within 1% of the static
/// deflection at every frame (0.02% measured), and from 3 iterations per frame up.
#[test]
fn cantilever_trajectory_follows_the_newton_implicit_euler_steps() {
    let reference = common::cantilever_trajectory(90);
    for (iterations, bound) in [(3, 0.01), (10, 0.01)] {
        let mut w = PhysicsWorld::new(with_iterations(iterations)).unwrap();
        let worst = reference.largest_deviation(&mut w);
        println!(
            "cantilever trajectory, {iterations} iterations: largest deviation {:.3}% of the static deflection",
            100.0 * worst
        );
        assert!(worst < bound, "{iterations} iterations: {worst}");
    }
}

/// Both ends of a beam driven 2 turns apart: finite, and no tet inverted at any frame end.
#[test]
fn twisting_beam_two_turns_inverts_no_element() {
    let s = run(
        "twisting_beam",
        &[("turns", 2.0)],
        SolverConfig::default(),
        300,
    );
    let inverted = metric(&s, "inverted_elements");
    let min_j = metric(&s, "min_volume_ratio");
    println!("twisting beam: inverted {inverted}, min J {min_j}");
    assert_eq!(inverted, 0.0);
    assert!(min_j > 0.0);
}

/// A 100 kg box hanging from a 1 kg soft rod by hard attachments (two-way): the gap stays
/// under 1 mm, the rod stretches within 5% of F L/(E A) (plus its own weight's ρgL²/2E),
/// and the attachments carry the box's weight within 2%.
#[test]
fn heavy_box_hangs_from_a_light_soft_rod() {
    let s = run(
        "soft_on_chain",
        &[("mass_ratio", 100.0)],
        SolverConfig::default(),
        300,
    );
    let gap = metric(&s, "max_attachment_error");
    let (rod, analytic) = (
        metric(&s, "rod_elongation"),
        metric(&s, "analytic_rod_elongation"),
    );
    let reaction = metric(&s, "box_reaction_ratio");
    println!("box on rod: gap {gap:e} m, rod {rod:.6} m vs {analytic:.6} m, reaction {reaction}");
    assert!(gap < 1e-3, "gap {gap}");
    assert!((rod / analytic - 1.0).abs() < 0.05, "{rod} vs {analytic}");
    assert!((reaction - 1.0).abs() < 0.02, "reaction {reaction}");
}
