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

/// `Pᵀ H P` in two sparse products ([`pairs::VertexPairs::restrict`]) against the dense
/// product: random blocks on the vertex pairs of a beam of tets, some vertices pinned (no
/// nodes), P and H written out in full.
#[test]
fn the_restriction_is_the_dense_triple_product() {
    let mesh = crate::deformable::TetMesh::box_grid(
        Vec3::new(1.0, 0.2, 0.1),
        [10, 2, 1],
        Default::default(),
    );
    let rest: Vec<Vec3A> = mesh.vertices.iter().map(|&p| p.into()).collect();
    let space = CoarseSpace::build(&rest, |v| rest[v].x > -0.45, 40).unwrap();
    let pairs = pairs::VertexPairs::build(
        mesh.tets.iter().map(|t| &t[..]),
        &space.vertex_nodes,
        space.nodes,
    );
    let mut seed = 11u64;
    let mut rand = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let mut h: Vec<pairs::Block> = (0..pairs.slots)
        .map(|_| std::array::from_fn(|_| rand()))
        .collect();
    // A vertex's block with itself is symmetric (only its lower part is read).
    for v in 0..rest.len() {
        let s = pairs.vertex_slot(v);
        if s != NONE {
            let b = &mut h[s as usize];
            (b[3], b[6], b[7]) = (b[1], b[2], b[5]);
        }
    }
    // The dense H from the elements' pairs: each slot (a ≥ c) at (a, c), its transpose
    // at (c, a).
    let (nv, nn) = (rest.len(), space.nodes);
    let mut dense_h = vec![0.0; 9 * nv * nv];
    let mut seen = std::collections::HashSet::new();
    for (e, t) in mesh.tets.iter().enumerate() {
        for ((i, j), &s) in pairs::element_pairs(t).zip(pairs.element_slots(e)) {
            let (a, c) = (t[i] as usize, t[j] as usize);
            let free = |v: usize| space.vertex_nodes[v].iter().any(|&n| n != NONE);
            assert_eq!(s == NONE, !(free(a) && free(c)), "pair ({a}, {c})");
            if s == NONE || !seen.insert(s) {
                continue;
            }
            for r in 0..3 {
                for col in 0..3 {
                    let v = h[s as usize][3 * col + r];
                    dense_h[(3 * a + r) * 3 * nv + 3 * c + col] = v;
                    dense_h[(3 * c + col) * 3 * nv + 3 * a + r] = v;
                }
            }
        }
    }
    let mut p = vec![0.0; 3 * nv * 3 * nn];
    for v in 0..nv {
        for k in 0..8 {
            let n = space.vertex_nodes[v][k];
            if n != NONE {
                for r in 0..3 {
                    p[(3 * v + r) * 3 * nn + 3 * n as usize + r] = space.vertex_weights[v][k];
                }
            }
        }
    }
    let (rows, cols) = (3 * nv, 3 * nn);
    let mut hp = vec![0.0; rows * cols];
    for i in 0..rows {
        for k in 0..rows {
            let x = dense_h[i * rows + k];
            if x != 0.0 {
                for j in 0..cols {
                    hp[i * cols + j] += x * p[k * cols + j];
                }
            }
        }
    }
    let mut expected = vec![0.0; cols * cols];
    for i in 0..cols {
        for k in 0..rows {
            let x = p[k * cols + i];
            if x != 0.0 {
                for j in 0..cols {
                    expected[i * cols + j] += x * hp[k * cols + j];
                }
            }
        }
    }
    let mut blocks = dense::Blocks::default();
    blocks.reset(nn);
    pairs.restrict(
        &h,
        &space.vertex_nodes,
        &space.vertex_weights,
        &mut Vec::new(),
        &mut blocks,
    );
    let mut got = vec![0.0; cols * cols];
    blocks.add_to(&mut got);
    let scale = expected.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(scale > 1.0, "a nonzero product");
    let mut lower = 0;
    for i in 0..cols {
        for j in 0..=i {
            let (g, e) = (got[i * cols + j], expected[i * cols + j]);
            assert!(
                (g - e).abs() <= 1e-12 * scale,
                "entry ({i}, {j}): {g} against {e}"
            );
            lower += usize::from(e != 0.0);
        }
    }
    assert!(lower > cols, "{lower} nonzero entries below the diagonal");
}

/// The element terms restricted through the vertex pairs and through the elements'
/// stencils are one operator summed in two orders: the same blocks to rounding, for
/// deformed tets with damping and the second-order part (`squishy_balls`) and for
/// membranes and hinges (`cloth_drape`), exact and Gauss–Newton.
#[test]
fn both_restrictions_give_the_same_operator() {
    use space::{Restriction, body_elements};
    let two = [("count".to_string(), 2.0)];
    for (name, params, frames) in [("squishy_balls", &two[..], 30), ("cloth_drape", &[], 40)] {
        let mut scene = crate::scenes::Scene::build(name, params, SolverConfig::default())
            .expect("the scene builds");
        scene.run(frames).unwrap();
        let w = &scene.world;
        let (set, vs) = (&w.deformables, &w.solver.vertices);
        let inv_h = 1.0 / w.config.dt as f64;
        let mut checked = 0;
        for b in 0..set.len() {
            let Some(space) = vs.coarse.space(b) else {
                continue;
            };
            let elements = body_elements(set, b);
            let (nodes, weights) = (&space.vertex_nodes, &space.vertex_weights);
            let mut through_pairs = space.clone();
            through_pairs.restriction = Restriction::Pairs(pairs::VertexPairs::build(
                elements.iter().map(|v| &v[..]),
                nodes,
                space.nodes,
            ));
            let mut through_stencils = space.clone();
            through_stencils.restriction =
                Restriction::Stencils(stencils::NodeStencils::build(set, b, nodes, weights));
            for exact in [true, false] {
                let operator = |space: &CoarseSpace| {
                    let mut out = dense::Blocks::default();
                    assembly::element_operator(
                        space,
                        set,
                        &vs.x,
                        b,
                        inv_h,
                        exact,
                        &mut Default::default(),
                        &mut out,
                    );
                    let mut a = vec![0.0; 9 * space.nodes * space.nodes];
                    out.add_to(&mut a);
                    a
                };
                let (p, s) = (operator(&through_pairs), operator(&through_stencils));
                let scale = p.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                assert!(scale > 0.0, "{name}, body {b}: an operator");
                let n = 3 * space.nodes;
                for i in 0..n {
                    for j in 0..=i {
                        let (x, y) = (p[i * n + j], s[i * n + j]);
                        assert!(
                            (x - y).abs() <= 1e-11 * scale,
                            "{name}, body {b}, exact {exact}, entry ({i}, {j}): {x} against {y}"
                        );
                    }
                }
            }
            checked += 1;
        }
        assert!(checked >= 1, "{name}: {checked} bodies with a space");
    }
}
