//! `bevy_avbd::ccd`: distances, types and gradients against f64 references and finite
//! differences.
//!
//! Run in release mode: `cargo test --release --test ccd -- --nocapture` prints the
//! statistics.

use bevy_avbd::ccd::{self, EdgeEdgeDistanceType as EE, PointTriangleDistanceType as PT};
use glam::{DVec3, Vec3};

// ---------------------------------------------------------------------------------------
// Helpers: a small deterministic RNG, f64 reference distances.
// ---------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
    fn vec(&mut self, r: f64) -> DVec3 {
        DVec3::new(self.range(-r, r), self.range(-r, r), self.range(-r, r))
    }
}

fn f32v(v: DVec3) -> Vec3 {
    v.as_vec3()
}
fn f64v(v: Vec3) -> DVec3 {
    v.as_dvec3()
}

fn seg_d2(p: DVec3, a: DVec3, b: DVec3) -> f64 {
    let e = b - a;
    let ee = e.dot(e);
    if ee == 0.0 {
        return (p - a).length_squared();
    }
    let s = ((p - a).dot(e) / ee).clamp(0.0, 1.0);
    (p - a - e * s).length_squared()
}

/// f64 point–triangle squared distance (projection inside → plane, else nearest edge).
fn pt_d2(p: DVec3, a: DVec3, b: DVec3, c: DVec3) -> f64 {
    let n = (b - a).cross(c - a);
    let nn = n.dot(n);
    if nn > 0.0 {
        let wa = (b - p).cross(c - p).dot(n);
        let wb = (c - p).cross(a - p).dot(n);
        let wc = (a - p).cross(b - p).dot(n);
        if wa >= 0.0 && wb >= 0.0 && wc >= 0.0 {
            let h = (p - a).dot(n);
            return h * h / nn;
        }
    }
    seg_d2(p, a, b).min(seg_d2(p, b, c)).min(seg_d2(p, c, a))
}

/// f64 edge–edge squared distance (interior line–line if inside, else nearest endpoint pair).
fn ee_d2(a0: DVec3, a1: DVec3, b0: DVec3, b1: DVec3) -> f64 {
    let da = a1 - a0;
    let db = b1 - b0;
    let n = da.cross(db);
    let nn = n.dot(n);
    if nn > 1e-24 * da.length_squared() * db.length_squared() {
        let q = b0 - a0;
        let s = q.cross(db).dot(n) / nn;
        let t = q.cross(da).dot(n) / nn;
        if s > 0.0 && s < 1.0 && t > 0.0 && t < 1.0 {
            let h = (a0 - b0).dot(n);
            return h * h / nn;
        }
    }
    seg_d2(a0, b0, b1)
        .min(seg_d2(a1, b0, b1))
        .min(seg_d2(b0, a0, a1))
        .min(seg_d2(b1, a0, a1))
}

fn d2_64(ee: bool, x: &[DVec3; 4]) -> f64 {
    if ee {
        ee_d2(x[0], x[1], x[2], x[3])
    } else {
        pt_d2(x[0], x[1], x[2], x[3])
    }
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
