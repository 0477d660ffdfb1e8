//! `bevy_avbd::ccd`: distances, types and gradients against f64 references and finite
//! differences; the additive CCD against the exact-rational sample queries (zero false
//! negatives, false-positive rate, time per query), its minimum-separation behaviour and
//! determinism.
//!
//! Run in release mode: `cargo test --release --test ccd -- --nocapture` prints the
//! statistics.

mod ccd_data;

use std::time::Instant;

use bevy_avbd::ccd::{
    self, AccdParams, AccdStop, EdgeEdgeDistanceType as EE, PointTriangleDistanceType as PT,
};
use ccd_data::*;
use glam::{DVec3, Vec3};

fn pt_ccd(x0: &[Vec3; 4], x1: &[Vec3; 4], min_sep: f32) -> Option<f32> {
    ccd::point_triangle_ccd(
        x0[0],
        x0[1],
        x0[2],
        x0[3],
        x1[0],
        x1[1],
        x1[2],
        x1[3],
        min_sep,
        &AccdParams::default(),
    )
}

fn ee_ccd(x0: &[Vec3; 4], x1: &[Vec3; 4], min_sep: f32) -> Option<f32> {
    ccd::edge_edge_ccd(
        x0[0],
        x0[1],
        x0[2],
        x0[3],
        x1[0],
        x1[1],
        x1[2],
        x1[3],
        min_sep,
        &AccdParams::default(),
    )
}

#[test]
fn round_ratio_is_correctly_rounded() {
    // Exact in f64: compare with the division.
    let mut rng = Rng(7);
    for _ in 0..100_000 {
        let n = (rng.next_u64() >> 12) as i128 - (1 << 51);
        let d = (rng.next_u64() >> 12) as i128 + 1;
        assert_eq!(round_ratio(n, d, 53), n as f64 / d as f64, "{n}/{d}");
        // Correct f32 rounding of an exact f64 quotient is not double rounding only when
        // the quotient is exact; check f32 against a direct exact computation instead.
        let v = round_ratio(n, d, 24) as f32;
        let (lo, hi) = (v.next_down() as f64, v.next_up() as f64);
        let exact = n as f64 / d as f64; // within 2^-53 relative of n/d
        assert!(
            (exact - v as f64).abs() <= (exact - lo).abs()
                && (exact - v as f64).abs() <= (exact - hi).abs(),
            "{n}/{d}"
        );
    }
    // Ties to even and carries.
    assert_eq!(round_ratio(1, 3, 24) as f32, 1.0f32 / 3.0);
    assert_eq!(round_ratio((1 << 24) + 1, 1, 24), (1u64 << 24) as f64); // tie → even
    assert_eq!(round_ratio((1 << 24) + 3, 1, 24), ((1u64 << 24) + 4) as f64); // tie → even (up)
    assert_eq!(round_ratio((1 << 25) - 1, 1, 24), (1u64 << 25) as f64); // carry
    assert_eq!(round_ratio(-7, -2, 24), 3.5);
    assert_eq!(round_ratio(7, -2, 24), -3.5);
    // Beyond f64: (2^110 + 1)/2^110 rounds to 1, (2^110 + 2^87)/2^110 = 1 + 2^-23.
    assert_eq!(round_ratio((1 << 110) + 1, 1 << 110, 24), 1.0);
    assert_eq!(
        round_ratio((1 << 110) + (1 << 87), 1 << 110, 24),
        1.0 + 2f64.powi(-23)
    );
    // A tie just above: 1 + 2^-24 + 2^-110 rounds up.
    assert_eq!(
        round_ratio((1 << 110) + (1 << 86) + 1, 1 << 110, 24),
        1.0 + 2f64.powi(-23)
    );
}

/// Zero false negatives on the whole sample set at three minimum separations, the
/// false-positive rate, and the time per query.
#[test]
fn sample_queries_have_no_false_negatives() {
    let dir = data_dir();
    let set = load_full(&dir);
    let params = AccdParams::default();
    let dmin = true_min_distances(&set);
    print_negatives(&set, &dmin);
    let mut failures = Vec::new();
    for (label, sep) in seps() {
        let results: Vec<_> = set
            .queries
            .iter()
            .map(|q| run_query(q, sep(q), &params))
            .collect();
        let tallies = check_results(&set, &dmin, label, sep, &results, &mut failures);
        for ee in [false, true] {
            println!("{}", tallies[ee as usize].line(label, ee));
        }
    }

    // Time per query (default ξ): three passes, the fastest of each query.
    for ee in [false, true] {
        let qs: Vec<&Query> = set.queries.iter().filter(|q| q.ee == ee).collect();
        let mut best = vec![f64::INFINITY; qs.len()];
        for _ in 0..3 {
            for (i, q) in qs.iter().enumerate() {
                let start = Instant::now();
                let r = std::hint::black_box(run_query(
                    std::hint::black_box(q),
                    ccd::DEFAULT_MIN_SEP,
                    &params,
                ));
                let dt = start.elapsed().as_secs_f64() * 1e6;
                std::hint::black_box(r);
                best[i] = best[i].min(dt);
            }
        }
        let mut sorted = best.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "  time per {} query (ξ = 1e-5, best of 3 passes): mean {:.3} µs, median {:.3} µs, \
             p99 {:.3} µs, max {:.3} µs",
            if ee { "edge-edge" } else { "vertex-face" },
            sorted.iter().sum::<f64>() / sorted.len() as f64,
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.99),
            sorted.last().unwrap(),
        );
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The motion-bound filter never rejects a positive, and what it rejects the CCD clears.
#[test]
fn may_collide_never_rejects_a_hit() {
    let dir = data_dir();
    let set = load(&dir);
    assert!(!set.queries.is_empty());
    let xi = ccd::DEFAULT_MIN_SEP;
    let mut rejected = [0usize; 2];
    let mut count = [0usize; 2];
    for q in &set.queries {
        let may = if q.ee {
            ccd::edge_edge_may_collide(&q.x32[0], &q.x32[1], xi)
        } else {
            ccd::point_triangle_may_collide(&q.x32[0], &q.x32[1], xi)
        };
        count[q.ee as usize] += 1;
        if !may {
            rejected[q.ee as usize] += 1;
            assert!(!q.truth, "{}: a positive rejected by may_collide", q.source);
            let r = run_query(q, xi, &AccdParams::default());
            assert_eq!(
                r.toi, None,
                "{}: rejected by may_collide but the CCD hits",
                q.source
            );
        }
    }
    println!(
        "may_collide (ξ = 1e-5) rejects {} of {} vertex-face and {} of {} edge-edge queries",
        rejected[0], count[0], rejected[1], count[1]
    );
}

/// Same inputs, same bits: the whole sample set (or random queries) twice, and on two
/// threads.
#[test]
fn ccd_is_deterministic() {
    use rayon::prelude::*;
    let mut rng = Rng(11);
    let mut queries: Vec<(bool, [[Vec3; 4]; 2])> = (0..4000)
        .map(|i| {
            let x0: [Vec3; 4] = std::array::from_fn(|_| f32v(rng.vec(1.0)));
            let x1: [Vec3; 4] = std::array::from_fn(|k| x0[k] + f32v(rng.vec(0.6)));
            (i % 2 == 1, [x0, x1])
        })
        .collect();
    queries.extend(load(&data_dir()).queries.into_iter().map(|q| (q.ee, q.x32)));
    let run = |(ee, x): &(bool, [[Vec3; 4]; 2])| {
        let r = if *ee {
            ccd::edge_edge_accd(&x[0], &x[1], 1e-5, &AccdParams::default())
        } else {
            ccd::point_triangle_accd(&x[0], &x[1], 1e-5, &AccdParams::default())
        };
        let (diff, weights) = if *ee {
            let c = ccd::edge_edge_closest(x[0][0], x[0][1], x[0][2], x[0][3]);
            (c.diff, c.weights)
        } else {
            let c = ccd::point_triangle_closest(x[0][0], x[0][1], x[0][2], x[0][3]);
            (c.diff, c.weights)
        };
        let d: Vec<u32> = diff
            .to_array()
            .into_iter()
            .chain(weights)
            .map(f32::to_bits)
            .collect();
        (r.toi.map(f32::to_bits), r.iterations, d)
    };
    let a: Vec<_> = queries.iter().map(run).collect();
    let b: Vec<_> = queries.iter().map(run).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let c: Vec<_> = pool.install(|| queries.par_iter().map(run).collect());
    assert!(a == b && a == c, "CCD results differ between runs");
}

// ---------------------------------------------------------------------------------------
// Distance types, values and gradients.
// ---------------------------------------------------------------------------------------

fn v(x: f32, y: f32, z: f32) -> Vec3 {
    Vec3::new(x, y, z)
}

#[track_caller]
fn check_pt(p: Vec3, a: Vec3, b: Vec3, c: Vec3, kind: PT, d2: f32) {
    let r = ccd::point_triangle_closest(p, a, b, c);
    assert_eq!(r.kind, kind, "p = {p}");
    assert!(
        (r.dist_sq() - d2).abs() <= 1e-6 * d2.max(1.0),
        "p = {p}: d² = {} ≠ {d2}",
        r.dist_sq()
    );
    assert_eq!(ccd::point_triangle_distance_type(p, a, b, c), kind);
    assert_eq!(
        ccd::point_triangle_distance_squared(p, a, b, c),
        r.dist_sq()
    );
    let w: f32 = r.weights.iter().sum();
    assert!(w.abs() < 1e-6, "weights sum to {w}");
}

#[test]
fn point_triangle_distance_types() {
    let (a, b, c) = (v(0., 0., 0.), v(1., 0., 0.), v(0., 1., 0.));
    check_pt(v(0.2, 0.2, 0.5), a, b, c, PT::PointFace, 0.25);
    check_pt(v(0.2, 0.2, -0.5), a, b, c, PT::PointFace, 0.25);
    check_pt(v(-1., -1., 0.3), a, b, c, PT::PointA, 2.09);
    check_pt(v(2., -0.5, 0.), a, b, c, PT::PointB, 1.25); // coplanar
    check_pt(v(-0.5, 2., 0.), a, b, c, PT::PointC, 1.25); // coplanar
    check_pt(v(0.5, -1., 0.2), a, b, c, PT::PointEdgeAB, 1.04);
    check_pt(v(1., 1., 0.), a, b, c, PT::PointEdgeBC, 0.5); // coplanar
    check_pt(v(-0.5, 0.5, -0.1), a, b, c, PT::PointEdgeCA, 0.26);
    // Exactly on the triangle: interior, on an edge, at a vertex.
    check_pt(v(0.25, 0.25, 0.), a, b, c, PT::PointFace, 0.0);
    assert_eq!(
        ccd::point_triangle_distance_squared(v(0.5, 0., 0.), a, b, c),
        0.0
    );
    assert_eq!(
        ccd::point_triangle_distance_squared(v(0.5, 0.5, 0.), a, b, c),
        0.0
    );
    assert_eq!(ccd::point_triangle_distance_squared(b, a, b, c), 0.0);
    assert_eq!(ccd::point_triangle_distance_squared(c, a, b, c), 0.0);
    // Gradient of d at d = 0: zeros, never NaN.
    let g = ccd::point_triangle_distance_gradient(v(0.25, 0.25, 0.), a, b, c);
    assert!(g.iter().all(|x| *x == Vec3::ZERO));
    // Degenerate triangles: collinear, and a single point.
    let (a2, b2, c2) = (v(0., 0., 0.), v(1., 0., 0.), v(2., 0., 0.));
    check_pt(v(0.5, 1., 0.), a2, b2, c2, PT::PointEdgeAB, 1.0);
    check_pt(v(1.5, 0., -1.), a2, b2, c2, PT::PointEdgeBC, 1.0);
    check_pt(v(3., 0., 1.), a2, b2, c2, PT::PointC, 2.0);
    check_pt(v(1., 2., 2.), a, a, a, PT::PointA, 9.0);
    // Zero-length edge in an otherwise fine triangle cannot exist; two coincident
    // vertices make it degenerate: falls back to the remaining edge.
    check_pt(v(0.5, 1., 0.), a, b, b, PT::PointEdgeAB, 1.0);
    // Large world offset: the distance keeps the precision of the pair's extent.
    let o = v(1000., -2000., 500.);
    let r = ccd::point_triangle_closest(v(0.25, 0.25, 0.001) + o, a + o, b + o, c + o);
    assert_eq!(r.kind, PT::PointFace);
    assert!((r.distance() - 0.001).abs() < 1e-4, "{}", r.distance()); // inputs round at ulp(2000) = 1.2e-4
}

#[track_caller]
fn check_ee(a0: Vec3, a1: Vec3, b0: Vec3, b1: Vec3, kind: Option<EE>, d2: f32) -> EE {
    let r = ccd::edge_edge_closest(a0, a1, b0, b1);
    if let Some(k) = kind {
        assert_eq!(r.kind, k, "{a0} {a1} {b0} {b1}");
    }
    assert!(
        (r.dist_sq() - d2).abs() <= 1e-6 * d2.max(1.0),
        "d² = {} ≠ {d2}",
        r.dist_sq()
    );
    assert_eq!(ccd::edge_edge_distance_type(a0, a1, b0, b1), r.kind);
    assert_eq!(ccd::edge_edge_distance_squared(a0, a1, b0, b1), r.dist_sq());
    let w: f32 = r.weights.iter().sum();
    assert!(w.abs() < 1e-6, "weights sum to {w}");
    r.kind
}

#[test]
fn edge_edge_distance_types() {
    let (x0, x1) = (v(-1., 0., 0.), v(1., 0., 0.));
    check_ee(x0, x1, v(0., -1., 1.), v(0., 1., 1.), Some(EE::EaEb), 1.0);
    check_ee(x0, x1, v(0., -1., 0.), v(0., 1., 0.), Some(EE::EaEb), 0.0); // intersecting
    check_ee(x0, x1, v(0.5, 0., 1.), v(0.5, 0., 3.), Some(EE::EaEb0), 1.0);
    check_ee(x0, x1, v(0.5, 0., 3.), v(0.5, 0., 1.), Some(EE::EaEb1), 1.0);
    check_ee(v(0., 0., 1.), v(0., 0., 3.), x0, x1, Some(EE::Ea0Eb), 1.0);
    check_ee(v(0., 0., 3.), v(0., 0., 1.), x0, x1, Some(EE::Ea1Eb), 1.0);
    check_ee(x0, x1, v(2., 1., 0.), v(3., 1., 0.), Some(EE::Ea1Eb0), 2.0);
    check_ee(x0, x1, v(3., 1., 0.), v(2., 1., 0.), Some(EE::Ea1Eb1), 2.0);
    check_ee(
        x0,
        x1,
        v(-2., 1., 0.),
        v(-3., 1., 0.),
        Some(EE::Ea0Eb0),
        2.0,
    );
    check_ee(
        x0,
        x1,
        v(-3., 1., 0.),
        v(-2., 1., 0.),
        Some(EE::Ea0Eb1),
        2.0,
    );
    // Coplanar, not parallel, not intersecting.
    check_ee(
        v(0., 0., 0.),
        v(1., 0., 0.),
        v(2., -1., 0.),
        v(2., 1., 0.),
        Some(EE::Ea1Eb),
        1.0,
    );
    // Parallel (overlapping, anti-parallel, offset): an endpoint type, never EaEb.
    for (b0, b1) in [
        (v(0., 1., 0.), v(2., 1., 0.)),
        (v(2., 1., 0.), v(0., 1., 0.)),
        (v(-0.5, 0., 1.), v(0.5, 0., 1.)),
        (v(-3., 1., 0.), v(3., 1., 0.)),
    ] {
        let k = check_ee(x0, x1, b0, b1, None, 1.0);
        assert_ne!(k, EE::EaEb, "parallel edges classified interior–interior");
    }
    // Collinear: overlapping (0) and disjoint.
    check_ee(
        v(0., 0., 0.),
        v(2., 0., 0.),
        v(1., 0., 0.),
        v(3., 0., 0.),
        None,
        0.0,
    );
    check_ee(
        v(0., 0., 0.),
        v(1., 0., 0.),
        v(2., 0., 0.),
        v(3., 0., 0.),
        Some(EE::Ea1Eb0),
        1.0,
    );
    // Nearly parallel (angle 1e-7, below the parallel threshold, and 1e-4, above).
    for eps in [1e-7f32, 1e-4] {
        let (a0, a1, b0, b1) = (
            v(-1., 0., 0.),
            v(1., 0., 0.),
            v(-1., -eps, 0.5),
            v(1., eps, 0.5),
        );
        let d2 = ee_d2(f64v(a0), f64v(a1), f64v(b0), f64v(b1)) as f32;
        check_ee(a0, a1, b0, b1, None, d2);
    }
    // Zero-length edges: point–edge and point–point.
    check_ee(v(0., 0., 1.), v(0., 0., 1.), x0, x1, Some(EE::Ea0Eb), 1.0);
    check_ee(x0, x1, v(0.5, 2., 0.), v(0.5, 2., 0.), Some(EE::EaEb0), 4.0);
    check_ee(
        v(0., 0., 0.),
        v(0., 0., 0.),
        v(1., 1., 1.),
        v(1., 1., 1.),
        Some(EE::Ea0Eb0),
        3.0,
    );
}

/// Random configurations (well-shaped, near-degenerate triangles, nearly parallel edges,
/// large offsets): the f32 distance is within a few ulps of the pair's extent of the f64
/// reference on the same f32 inputs.
#[test]
fn distances_match_f64_reference() {
    let mut rng = Rng(3);
    let (mut worst_pt, mut worst_ee) = (0f64, 0f64);
    for i in 0..200_000 {
        let offset = if i % 4 == 3 {
            rng.vec(50.0)
        } else {
            DVec3::ZERO
        };
        let mut x: [DVec3; 4] = std::array::from_fn(|_| rng.vec(1.0));
        match i % 8 {
            // Nearly degenerate triangle / nearly parallel edges.
            1 => x[3] = x[1] + (x[2] - x[1]) * rng.range(-1.0, 2.0) + rng.vec(1e-5),
            2 => x[3] = x[2] + (x[1] - x[0]) * rng.range(0.3, 1.5) + rng.vec(1e-6),
            // Nearly touching: move the first point onto the other primitive.
            3 => {
                let (s, t) = (rng.range(0.0, 1.0), rng.range(0.0, 1.0));
                let (s, t) = if s + t > 1.0 {
                    (1.0 - s, 1.0 - t)
                } else {
                    (s, t)
                };
                x[0] = x[1] + (x[2] - x[1]) * s + (x[3] - x[1]) * t + rng.vec(1e-5);
            }
            _ => {}
        }
        let x32: [Vec3; 4] = x.map(|p| f32v(p + offset));
        let x64 = x32.map(f64v);
        let extent = x64
            .iter()
            .map(|p| (*p - x64[0]).abs().max_element())
            .fold(0.0, f64::max)
            .max(1e-30);
        let pt = ccd::point_triangle_closest(x32[0], x32[1], x32[2], x32[3]).distance() as f64;
        let pt64 = pt_d2(x64[0], x64[1], x64[2], x64[3]).sqrt();
        worst_pt = worst_pt.max((pt - pt64).abs() / extent);
        let ee = ccd::edge_edge_closest(x32[0], x32[1], x32[2], x32[3]).distance() as f64;
        let ee64 = ee_d2(x64[0], x64[1], x64[2], x64[3]).sqrt();
        worst_ee = worst_ee.max((ee - ee64).abs() / extent);
        // The certified lower bounds are lower bounds.
        let lb = ccd::point_triangle_distance_lower_bound(x32[0], x32[1], x32[2], x32[3]) as f64;
        assert!(
            lb <= pt64,
            "point–triangle lower bound {lb} > {pt64} for {x32:?}"
        );
        let lb = ccd::edge_edge_distance_lower_bound(x32[0], x32[1], x32[2], x32[3]) as f64;
        assert!(
            lb <= ee64,
            "edge–edge lower bound {lb} > {ee64} for {x32:?}"
        );
    }
    println!(
        "max |d_f32 − d_f64| / extent: point–triangle {worst_pt:.2e}, edge–edge {worst_ee:.2e} (u = 6.0e-8)"
    );
    assert!(
        worst_pt < 2e-6 && worst_ee < 2e-6,
        "{worst_pt:e} {worst_ee:e}"
    );
}

fn fd_gradient(ee: bool, x: &[DVec3; 4], sqrt: bool) -> [DVec3; 4] {
    let h = 1e-6;
    let f = |y: &[DVec3; 4]| {
        let d2 = d2_64(ee, y);
        if sqrt { d2.sqrt() } else { d2 }
    };
    std::array::from_fn(|i| {
        let mut g = DVec3::ZERO;
        for k in 0..3 {
            let (mut xp, mut xm) = (*x, *x);
            xp[i][k] += h;
            xm[i][k] -= h;
            g[k] = (f(&xp) - f(&xm)) / (2.0 * h);
        }
        g
    })
}

/// The gradients of d² and d of every type against central differences of the f64
/// reference distances.
#[test]
fn gradients_match_finite_differences() {
    let mut rng = Rng(5);
    let mut seen_pt = std::collections::BTreeSet::new();
    let mut seen_ee = std::collections::BTreeSet::new();
    let (mut worst_sq, mut worst_d) = (0f64, 0f64);
    for i in 0..40_000 {
        let x32: [Vec3; 4] = std::array::from_fn(|_| f32v(rng.vec(1.0)));
        let x = x32.map(f64v);
        let ee = i % 2 == 1;
        let (kind, gsq, gd) = if ee {
            let da = x[1] - x[0];
            let db = x[3] - x[2];
            if da.cross(db).length_squared() < 1e-3 * da.length_squared() * db.length_squared() {
                continue; // d² is not smooth for parallel edges
            }
            let c = ccd::edge_edge_closest(x32[0], x32[1], x32[2], x32[3]);
            seen_ee.insert(c.kind as u8);
            (c.kind as u8, c.gradient_squared(), c.gradient())
        } else {
            let c = ccd::point_triangle_closest(x32[0], x32[1], x32[2], x32[3]);
            seen_pt.insert(c.kind as u8);
            (c.kind as u8, c.gradient_squared(), c.gradient())
        };
        if d2_64(ee, &x).sqrt() < 1e-2 {
            continue;
        }
        for (sqrt, g) in [(false, gsq), (true, gd)] {
            let fd = fd_gradient(ee, &x, sqrt);
            let norm = fd.iter().map(|g| g.length_squared()).sum::<f64>().sqrt();
            let err = (0..4)
                .map(|k| (f64v(g[k]) - fd[k]).length_squared())
                .sum::<f64>()
                .sqrt();
            let rel = err / norm.max(1e-3);
            assert!(
                rel < 1e-3,
                "{} kind {kind}: gradient error {rel:e} at {x32:?}",
                if ee { "EE" } else { "PT" }
            );
            if sqrt {
                worst_d = worst_d.max(rel);
            } else {
                worst_sq = worst_sq.max(rel);
            }
        }
    }
    println!(
        "gradient vs f64 finite differences: max relative error d² {worst_sq:.2e}, d {worst_d:.2e}"
    );
    assert_eq!(seen_pt.len(), 7, "point–triangle types seen: {seen_pt:?}");
    assert_eq!(seen_ee.len(), 9, "edge–edge types seen: {seen_ee:?}");
}

// ---------------------------------------------------------------------------------------
// Minimum separation, hits, clears.
// ---------------------------------------------------------------------------------------

/// The earliest TOI over the 6 vertex–face and 9 edge–edge pairs of two triangles.
fn triangles_toi(s: &[[Vec3; 3]; 2], e: &[[Vec3; 3]; 2], xi: f32) -> Option<f32> {
    let mut toi: Option<f32> = None;
    let mut take = |t: Option<f32>| {
        if let Some(t) = t {
            toi = Some(toi.map_or(t, |x: f32| x.min(t)));
        }
    };
    for (m, o) in [(0, 1), (1, 0)] {
        for i in 0..3 {
            take(pt_ccd(
                &[s[m][i], s[o][0], s[o][1], s[o][2]],
                &[e[m][i], e[o][0], e[o][1], e[o][2]],
                xi,
            ));
        }
    }
    for i in 0..3 {
        for j in 0..3 {
            let (i1, j1) = ((i + 1) % 3, (j + 1) % 3);
            take(ee_ccd(
                &[s[0][i], s[0][i1], s[1][j], s[1][j1]],
                &[e[0][i], e[0][i1], e[1][j], e[1][j1]],
                xi,
            ));
        }
    }
    toi
}

/// Rotation about a random axis and a translation, applied in f64 then rounded.
fn placement(rng: &mut Rng, offset: f64) -> impl Fn(DVec3) -> Vec3 + use<> {
    let axis = rng.vec(1.0).normalize();
    let q = glam::DQuat::from_axis_angle(axis, rng.range(0.0, std::f64::consts::TAU));
    let o = rng.vec(offset);
    move |p: DVec3| f32v(q * p + o)
}

#[test]
fn parallel_triangles_approaching_hit_before_min_sep() {
    let mut rng = Rng(9);
    for xi in [1e-5f32, 1e-4, 1e-3] {
        for trial in 0..20 {
            let h0 = 0.05;
            let lower = [
                DVec3::new(0., 0., 0.),
                DVec3::new(1., 0., 0.),
                DVec3::new(0., 1., 0.),
            ];
            let shift = DVec3::new(0.2, 0.1, 0.0);
            let upper = lower.map(|p| p + shift);
            let z = |h: f64| DVec3::new(0., 0., h);
            let start = [lower, upper.map(|p| p + z(h0))];
            let end = [lower, upper.map(|p| p + z(0.5 * xi as f64))];
            let offset = if trial == 0 { 0.0 } else { 3.0 };
            let f = placement(&mut rng, offset);
            let s = start.map(|t| t.map(&f));
            let e = end.map(|t| t.map(&f));
            let toi = triangles_toi(&s, &e, xi);
            // Exact time at which the planes are ξ apart.
            let t_reach = (h0 - xi as f64) / (h0 - 0.5 * xi as f64);
            let t =
                toi.unwrap_or_else(|| panic!("ξ = {xi}, trial {trial}: no hit reported")) as f64;
            assert!(
                t < t_reach + 1e-4,
                "ξ = {xi}: toi {t} after the ξ crossing {t_reach}"
            );
            assert!(
                t > 0.8 * t_reach,
                "ξ = {xi}: toi {t} far before the ξ crossing {t_reach}"
            );
            // At the reported time the f32 geometry is still more than ξ apart (vertex–face).
            for i in 0..3 {
                let p = f64v(s[1][i]) + (f64v(e[1][i]) - f64v(s[1][i])) * t;
                let tri = s[0].map(f64v);
                let d = pt_d2(p, tri[0], tri[1], tri[2]).sqrt();
                assert!(d > xi as f64, "ξ = {xi}: distance {d} at the toi");
            }
        }
    }
}

#[test]
fn moving_apart_never_hits() {
    let mut rng = Rng(13);
    for xi in [1e-5f32, 1e-4, 1e-3] {
        for trial in 0..20 {
            // Parallel triangles 10ξ apart (outside ξ plus the slack) separating along the
            // normal: every vertex–face and edge–edge distance grows.
            let lower = [
                DVec3::new(0., 0., 0.),
                DVec3::new(1., 0., 0.),
                DVec3::new(0., 1., 0.),
            ];
            let upper = lower.map(|p| p + DVec3::new(0.2, 0.1, 0.0));
            let h0 = 10.0 * xi as f64;
            let h1 = h0 + rng.range(1e-6, 0.5);
            let start = [lower, upper.map(|p| p + DVec3::new(0., 0., h0))];
            let end = [lower, upper.map(|p| p + DVec3::new(0., 0., h1))];
            let offset = if trial == 0 { 0.0 } else { 3.0 };
            let f = placement(&mut rng, offset);
            let s = start.map(|t| t.map(&f));
            let e = end.map(|t| t.map(&f));
            assert_eq!(triangles_toi(&s, &e, xi), None, "ξ = {xi}, trial {trial}");
            // Sliding sideways at the constant height 10ξ: clear too (the separating
            // direction's step certifies the whole motion at once).
            let lateral = DVec3::new(rng.range(-0.5, 0.5), rng.range(-0.5, 0.5), 0.0);
            let end = [lower, upper.map(|p| p + DVec3::new(0., 0., h0) + lateral)];
            let e = end.map(|t| t.map(&f));
            for i in 0..3 {
                let r = pt_ccd(
                    &[s[1][i], s[0][0], s[0][1], s[0][2]],
                    &[e[1][i], e[0][0], e[0][1], e[0][2]],
                    xi,
                );
                let inside = |p: DVec3| p.x > 0.0 && p.y > 0.0 && p.x + p.y < 1.0;
                let (p0, p1) = (upper[i], upper[i] + lateral);
                if inside(p0) && inside(p1) {
                    assert_eq!(r, None, "ξ = {xi}, trial {trial}: sliding vertex {i}");
                }
            }
        }
    }
}

#[test]
fn start_inside_min_sep_is_t_zero() {
    let (a, b, c) = (v(0., 0., 0.), v(1., 0., 0.), v(0., 1., 0.));
    let xi = 1e-3;
    for h in [0.0, 0.25 * xi, 0.5 * xi, 0.99 * xi] {
        // Moving away, still Some(0): the start is inside ξ.
        let p0 = v(0.2, 0.2, h);
        let p1 = v(0.2, 0.2, 1.0);
        assert_eq!(
            pt_ccd(&[p0, a, b, c], &[p1, a, b, c], xi),
            Some(0.0),
            "h = {h}"
        );
        let r =
            ccd::point_triangle_accd(&[p0, a, b, c], &[p1, a, b, c], xi, &AccdParams::default());
        assert_eq!(r.stop, AccdStop::StartInside);
        let e = [v(-1., 0.5, h), v(1., 0.5, h)];
        let e1 = [v(-1., 0.5, 1.), v(1., 0.5, 1.)];
        let f = [v(0.5, -1., 0.), v(0.5, 1., 0.)];
        assert_eq!(
            ee_ccd(&[e[0], e[1], f[0], f[1]], &[e1[0], e1[1], f[0], f[1]], xi),
            Some(0.0)
        );
    }
    // Touching at the start with ξ = 0.
    let p = v(0.2, 0.2, 0.0);
    assert_eq!(
        pt_ccd(&[p, a, b, c], &[p + Vec3::Z, a, b, c], 0.0),
        Some(0.0)
    );
    // Non-finite input: Some(0), never None.
    let nan = v(f32::NAN, 0., 0.);
    assert_eq!(pt_ccd(&[nan, a, b, c], &[p, a, b, c], xi), Some(0.0));
    assert_eq!(
        pt_ccd(&[v(f32::INFINITY, 0., 0.), a, b, c], &[p, a, b, c], xi),
        Some(0.0)
    );
}

#[test]
fn touching_at_the_end_is_a_hit_even_with_zero_min_sep() {
    let (a, b, c) = (v(0., 0., 0.), v(1., 0., 0.), v(0., 1., 0.));
    for xi in [0.0, 1e-6, 1e-5] {
        let r = pt_ccd(
            &[v(0.2, 0.2, 1.0), a, b, c],
            &[v(0.2, 0.2, 0.0), a, b, c],
            xi,
        );
        assert!(matches!(r, Some(t) if t < 1.0), "ξ = {xi}: {r:?}");
        // Passing through the face between the samples of any fixed grid.
        let r = pt_ccd(
            &[v(0.2, 0.2, 1.0), a, b, c],
            &[v(0.2, 0.2, -1.0), a, b, c],
            xi,
        );
        assert!(matches!(r, Some(t) if t <= 0.5), "ξ = {xi}: {r:?}");
        let (e0, e1) = (
            [v(-1., 0., 1.), v(1., 0., 1.)],
            [v(-1., 0., 0.), v(1., 0., 0.)],
        );
        let f = [v(0., -1., 0.), v(0., 1., 0.)];
        let r = ee_ccd(&[e0[0], e0[1], f[0], f[1]], &[e1[0], e1[1], f[0], f[1]], xi);
        assert!(matches!(r, Some(t) if t < 1.0), "ξ = {xi}: {r:?}");
    }
}

#[test]
fn iteration_cap_and_eta_return_certified_times() {
    // An edge sweeping across another at a clearance of 2.2e-5 while turning (sample query
    // erleben-spike-wedge/edge-edge/data_0_0.csv#85): neither the rate bound nor a fixed
    // separating direction certifies much per step, so it takes 472 steps at ξ = 1e-5.
    let s = [
        v(0.17815417, 0.2667762, 0.1661303),
        v(0.0065332064, 1.263173, 0.3338131),
        v(0.16666667, 0.33333334, -0.16666667),
        v(0.16666667, 0.33333334, 0.5),
    ];
    let e = [
        v(0.17945391, 0.2613519, 0.1664453),
        v(0.0025020964, 1.2586427, 0.33369115),
        v(0.16666667, 0.33333334, -0.16666667),
        v(0.16666667, 0.33333334, 0.5),
    ];
    let xi = 1e-5;
    let full = ccd::edge_edge_accd(
        &s,
        &e,
        xi,
        &AccdParams {
            eta: 0.9,
            max_iters: 100_000,
        },
    );
    assert_eq!(full.toi, None, "{full:?}");
    assert!(full.iterations > ccd::DEFAULT_MAX_ITERS, "{full:?}");
    let (s64, e64) = (s.map(f64v), e.map(f64v));
    for max_iters in [0, 1, 3, 10, ccd::DEFAULT_MAX_ITERS] {
        let r = ccd::edge_edge_accd(
            &s,
            &e,
            xi,
            &AccdParams {
                eta: 0.9,
                max_iters,
            },
        );
        assert_eq!(r.stop, AccdStop::IterationCap, "{r:?}");
        assert_eq!(r.iterations, max_iters);
        let t = r.toi.unwrap();
        assert!(
            (0.0..1.0).contains(&t) && (max_iters == 0) == (t == 0.0),
            "{r:?}"
        );
        for k in 0..=100 {
            let tk = t as f64 * k as f64 / 100.0;
            assert!(d2_64(true, &lerp4(&s64, &e64, tk)).sqrt() > xi as f64);
        }
    }
    // η: any value in (0, 1] (others clamped) clears a slide over the face (the gap rule
    // stops a pass-by that closes in to 10% of its start clearance) and hits a
    // pass-through before it.
    let (a, b, c) = (v(0., 0., 0.), v(1., 0., 0.), v(0., 1., 0.));
    for eta in [1.0, 0.5, 0.1, f32::NAN, 2.0, -1.0] {
        let params = AccdParams {
            eta,
            max_iters: 10_000,
        };
        let r = ccd::point_triangle_accd(
            &[v(0.1, 0.1, 1e-3), a, b, c],
            &[v(0.4, 0.35, 2e-3), a, b, c],
            5e-4,
            &params,
        );
        assert_eq!(r.toi, None, "η = {eta}: {r:?}");
        let r = ccd::point_triangle_accd(
            &[v(0.2, 0.2, 1.0), a, b, c],
            &[v(0.2, 0.2, -1.0), a, b, c],
            xi,
            &params,
        );
        let t = r.toi.unwrap_or_else(|| panic!("η = {eta}: {r:?}"));
        assert!(t < 0.5 && t > 0.0, "η = {eta}: {r:?}");
    }
}

/// Random queries through a cloud of near misses: whenever a sample of the f32 inputs'
/// trajectory comes within ξ, the CCD reports a hit, and it certifies what it returns.
#[test]
fn random_queries_are_conservative() {
    let mut rng = Rng(17);
    let xi = 1e-4f32;
    let (mut hits, mut samples_within) = (0, 0);
    for i in 0..6000 {
        let ee = i % 2 == 1;
        let mut x0: [DVec3; 4] = std::array::from_fn(|_| rng.vec(1.0));
        let mut x1: [DVec3; 4] = std::array::from_fn(|k| x0[k] + rng.vec(0.3));
        if i % 3 == 2 {
            // Half-integer grid points: exact coincidences, parallel and coplanar
            // primitives, zero-length edges, touching exactly at vertices.
            let mut g = || rng.vec(2.0).round() * 0.5;
            x0 = std::array::from_fn(|_| g());
            x1 = std::array::from_fn(|_| g());
        } else {
            // Aim the first point (or edge) at the other primitive, to a random clearance.
            let target = x1[2] * 0.4 + x1[3] * 0.3 + x1[1] * 0.3 - x1[0];
            let miss = rng.vec(1.0).normalize() * rng.range(0.0, 3e-4);
            let shift = target + miss;
            x1[0] += shift;
            if ee {
                x1[1] += shift;
            }
        }
        let (s, e) = (x0.map(f32v), x1.map(f32v));
        let toi = if ee {
            ee_ccd(&s, &e, xi)
        } else {
            pt_ccd(&s, &e, xi)
        };
        hits += toi.is_some() as usize;
        let (s64, e64) = (s.map(f64v), e.map(f64v));
        let t_end = toi.unwrap_or(1.0) as f64;
        let mut within = false;
        for k in 0..=400 {
            let t = k as f64 / 400.0;
            let d = d2_64(ee, &lerp4(&s64, &e64, t)).sqrt();
            if d <= xi as f64 - 1e-12 {
                within = true;
                assert!(
                    t > t_end || toi == Some(0.0),
                    "query {i}: d({t}) = {d:e} ≤ ξ inside the certified [0, {t_end}]"
                );
            }
        }
        samples_within += within as usize;
        assert!(
            !within || toi.is_some(),
            "query {i} (ee {ee}): missed a hit"
        );
    }
    println!(
        "random near-miss and grid queries: 6000, {hits} hits, {samples_within} with a sample within ξ"
    );
    assert!(samples_within > 500);
}

#[test]
fn min_sep_floor_is_four_ulps() {
    assert_eq!(ccd::min_sep_floor(1.0), 4.0 * f32::EPSILON);
    assert_eq!(ccd::min_sep_floor(1.5), 4.0 * f32::EPSILON);
    assert_eq!(ccd::min_sep_floor(-5.5), 16.0 * f32::EPSILON);
    assert_eq!(
        ccd::min_sep_floor(0.0),
        4.0 * f32::MIN_POSITIVE * f32::EPSILON
    );
    assert!(ccd::DEFAULT_MIN_SEP >= ccd::min_sep_floor(31.0));
}
