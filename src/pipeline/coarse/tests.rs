//! The coarse level's tests: its spaces, and the stiffness of new rows along a step.

use super::assembly::add_couplings;
use super::*;

/// The stiffness the rows made since the assembly put along a coarse step
/// (`SurfaceContact::fresh_stiffness`, which shortens the step) is `δᵀ ΔA δ` of their
/// terms as the assembly adds them to the operator (`add_couplings`): three soft cubes
/// stacked (rows between them and with the ground), random steps of every body.
#[test]
fn fresh_rows_put_their_assembled_stiffness_along_a_step() {
    let mut scene =
        crate::scenes::Scene::build("soft_stack", &[], SolverConfig::default()).unwrap();
    scene.run(40).unwrap();
    for r in &mut scene.world.solver.vertices.contact.rows {
        r.in_coarse = false;
    }
    let w = &scene.world;
    let (cfg, set) = (&w.config, &w.deformables);
    let vs = &w.solver.vertices;
    let contact = &vs.contact;
    assert!(!contact.rows.is_empty(), "the cubes touch");
    let mut seed = 5u64;
    let mut rand = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let mut touched = 0;
    for b in 0..set.len() {
        let space = vs.coarse.space(b).expect("a coarse space");
        let n = 3 * space.nodes;
        let delta: Vec<f64> = (0..n).map(|_| 1e-3 * rand()).collect();
        let range = set.vertex_range(b);
        let start = range.start;
        let fresh = contact.fresh_stiffness(range, &|v| space.prolong(&delta, v - start));
        let mut sys = Dense {
            n,
            a: vec![0.0; n * n],
            ..Default::default()
        };
        let none = AttachmentSet::default();
        add_couplings(
            &mut sys,
            cfg,
            space,
            set,
            &none,
            Some((contact, &vs.poses)),
            &vs.x,
            b,
        );
        let mut assembled = 0.0;
        for i in 0..n {
            for j in 0..=i {
                let a = sys.a[i * n + j];
                assembled += a * delta[i] * delta[j] * if i == j { 1.0 } else { 2.0 };
            }
        }
        assert!(
            (fresh - assembled).abs() <= 1e-9 * assembled.abs(),
            "body {b}: {fresh} against {assembled}"
        );
        touched += usize::from(assembled > 0.0);
    }
    assert!(touched >= 2, "{touched} bodies with rows");
}

#[test]
fn weights_are_a_partition_of_unity_and_skip_pinned_vertices() {
    let mesh = crate::deformable::TetMesh::box_grid(
        Vec3::new(1.0, 0.1, 0.1),
        [20, 2, 2],
        Default::default(),
    );
    let rest: Vec<Vec3A> = mesh.vertices.iter().map(|&p| p.into()).collect();
    let s = CoarseSpace::build(&rest, |v| rest[v].x > -0.49, 64).unwrap();
    // 10 cubic cells of 0.1 m along the beam, one across: 11 × 2 × 2 nodes.
    assert_eq!(s.nodes, 44);
    for (v, p) in rest.iter().enumerate() {
        let sum: f64 = s.vertex_weights[v].iter().sum();
        if p.x > -0.49 {
            assert!(
                (sum - 1.0).abs() < 1e-12,
                "vertex {v}: weights sum to {sum}"
            );
        } else {
            assert_eq!(sum, 0.0);
            assert!(s.vertex_nodes[v].iter().all(|&n| n == NONE));
        }
    }
}
