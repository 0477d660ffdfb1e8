//! Continuous collision detection for the penetration-free contact of deformable bodies
//! (Zheng, Luo, Li 2025, "Robust and Efficient Penetration-Free Elastodynamics without
//! Barriers"): after each outer iteration the certified configuration `X` moves toward
//! the solver iterate `x̂` by the largest step α that CCD certifies, and the pairs that CCD
//! reports become contact rows, linearised at `X` with the distances and gradients of this
//! module.
//!
//! * [`distance`](mod@distance): point–triangle and edge–edge squared distances with the
//!   closest feature pair ([`PointTriangleDistanceType`], [`EdgeEdgeDistanceType`]) and
//!   the gradients of `d²` and `d` with respect to the 12 coordinates ([`Closest`]).
//! * Additive CCD (ACCD; Li, Kaufman, Jiang 2021, C-IPC) with a minimum separation ξ,
//!   a step scale η and an iteration cap: [`point_triangle_ccd`], [`edge_edge_ccd`]
//!   (and [`point_triangle_accd`], [`edge_edge_accd`] with the iteration count).
//! * A motion-bound broad-phase filter: [`point_triangle_may_collide`],
//!   [`edge_edge_may_collide`].
//! * [`exact`]: exact segment–triangle, triangle–triangle and point-in-tetrahedron
//!   predicates (start states and the `intersections` metric).
//!
//! ```
//! use bevy_avbd::ccd::{self, AccdParams};
//! use bevy_avbd::glam::Vec3;
//!
//! let (a, b, c) = (Vec3::ZERO, Vec3::X, Vec3::Y);
//! // A point falling through a triangle: a certified time before it comes within ξ.
//! let toi = ccd::point_triangle_ccd(
//!     Vec3::new(0.2, 0.2, 1.0), a, b, c,
//!     Vec3::new(0.2, 0.2, -1.0), a, b, c,
//!     1e-4, &AccdParams::default(),
//! );
//! assert!(matches!(toi, Some(t) if t < 0.5));
//! // A contact row at a certified configuration: d, the normal and ∇d.
//! let closest = ccd::point_triangle_closest(Vec3::new(0.2, 0.2, 0.01), a, b, c);
//! assert_eq!(closest.kind, ccd::PointTriangleDistanceType::PointFace);
//! let d = closest.distance(); // 0.01
//! let grad = closest.gradient(); // [∂d/∂p, ∂d/∂a, ∂d/∂b, ∂d/∂c]
//! assert!((d - 0.01).abs() < 1e-6 && (grad[0] - Vec3::Z).length() < 1e-6);
//! ```
//!
//! Everything is plain f32 arithmetic (`+ − × ÷`, `sqrt`, `min`/`max`, one bit
//! decrement), with no allocation, no recursion and loops bounded by the iteration cap,
//! so the same code ports to WGSL.
//!
//! # The additive CCD
//!
//! The pair moves linearly, `x_i(t) = x_i⁰ + t(x_i¹ − x_i⁰)`. Subtracting the start
//! centroid from the start positions and the end centroid from the end positions (both
//! translations are common to the four points, so the distance is unchanged) leaves
//! centroid-relative positions `y_i` and relative displacements `u_i` with zero mean: a
//! pair that translates together has `u = 0`, and no coordinate is larger than the pair's
//! extent, which keeps the rounding relative to the pair, not to the world. Then, with
//! `d(t)` the distance and `L = |u_p| + max_j |u_j|` (point–triangle) or
//! `max_A |u| + max_B |u|` (edge–edge) the largest rate at which it can shrink:
//!
//! ```text
//! d₀ = lower bound of d(0);  d₀ ≤ ξ → Some(0)
//! t = 0, d = d₀
//! repeat at most max_iters times:
//!     room = max((d − ξ)/L, direction step)   (certified: d stays > ξ on [t, t + room])
//!     t + room ≥ 1  → None                     (clear on [0, 1])
//!     t += η·room;  d = lower bound of d(t)
//!     d − ξ < (1 − η)(d₀ − ξ)  → Some(t)       (the gap: close to contact)
//! Some(t)                                       (the iteration cap: the accumulated lower bound)
//! ```
//!
//! `Some(t)` is always certified (`d > ξ` on `[0, t]`); `None` only when `[0, 1]` is.
//!
//! **The direction step** is the one addition to C-IPC's ACCD. The lower bound of `d(t)`
//! is a support gap along the closest-point direction `n` (below); for a *fixed* `n`,
//! each term `n·(x_i(τ) − x_j(τ))` is linear in τ along the linear trajectory, so the
//! first τ at which the smallest of them can reach ξ is a certified step too. It is exact
//! for the motions that make plain ACCD crawl, a point or an edge sliding over a face or
//! along an edge at a small clearance (ACCD needs about `L/(η(d − ξ))` steps there, the
//! direction step one), and costs three or four dot products per step. On the sample
//! query set it cuts the largest step count of a vertex–face query from 10,782 to 133.
//!
//! # Why it is conservative in f32
//!
//! The exact real trajectory of the f32 inputs is certified, not the computed one; four
//! rounding effects are bounded, with `u = 2⁻²⁴`, `R` the largest centroid-relative
//! coordinate (start or end) and `V` the largest relative displacement coordinate:
//!
//! 1. **Positions.** The computed point `fl(y + t·u)` differs from the exact relative
//!    trajectory by at most `√3·u(4R + 2V)(1 + 3u)` per point (the subtractions of the
//!    centroids, the displacement and the interpolation each round once), so the distance
//!    of the computed configuration differs from the exact one by at most twice that,
//!    `u(14R + 7V)`.
//! 2. **Distance.** The distance is bounded below by a *separating direction*, not taken
//!    from a formula: for any `n ≠ 0`, `d ≥ min_{i∈A, j∈B} n·(x_i − x_j)/|n|` (the
//!    support gap of the two convex hulls along `n`). `n` is the closest-point
//!    difference of [`distance`](mod@distance), so the bound equals the distance when `n`
//!    is exact and is still a valid bound when `n` is poor (a degenerate triangle, nearly
//!    parallel edges, a misclassified region): a poor direction costs tightness, never
//!    safety. The dot products round by at most `4.01u·|n|·|x_i − x_j| ≤ 13.9u|n|(R + V)`
//!    and the normalisation (`× 1/sqrt(n·n)`) by a relative `5u`. Together with (1), the
//!    bound used is `g − 2⁻²⁰|g| − 2⁻¹⁹(R + V) − 10⁻²²` for the computed support gap `g`
//!    (and per point pair, for the direction step): a relative margin of `16u` against
//!    `5u` plus rounding, an absolute slack of `32u(R + V)` against the `28u(R + V)`
//!    needed, and a floor for underflow.
//! 3. **Rate.** The exact displacements differ from the computed ones by at most
//!    `√3·u(V + 2R)(1 + 2u)` per point, so the rate bound used is
//!    `L(1 + 2⁻²⁰) + 8u(V + 2R) + 10⁻¹⁸`. For the direction step, the rate of each point
//!    pair along `n̂`, `n̂·(u_i − u_j)`, is off by at most `u(17.4V + 7R)` (displacements
//!    and dot product) plus a relative `5u`; the closing rate used is
//!    `−s + 2⁻²⁰|s| + 2⁻¹⁹(R + V) + 10⁻²²` for the computed rate `s`, and the step is the
//!    smallest `(g_lower − ξ)/closing` over the pairs, capped at 2.
//! 4. **Steps.** A step is computed as `(d − ξ)/L·(1 − 2⁻²⁰)`: three roundings (`3u`) are
//!    absorbed by the relative margin (`16u`), which also makes the certified inequality
//!    strict. Adding it to `t` could round up past the certified end; when `t + Δ ≤ 2t`
//!    the difference `fl(t + Δ) − t` is exact (Sterbenz), so an overshoot is detected and
//!    the next float down is taken; when `Δ > t` the overshoot is below `2u·Δ` and the
//!    margin absorbs it.
//!
//! Every comparison that ends a query as `None` is a certified inequality; every failed or
//! NaN comparison ends it as a hit (`Some`). The argument holds whether or not a backend
//! fuses multiply–adds (a fused operation rounds once instead of twice, inside the same
//! bounds) and with denormals flushed to zero (the absolute floors). It needs
//! `|x| < 1e18` (squares must not overflow; larger inputs return `Some(0)`).
//!
//! # Why the minimum separation must exceed a few ulps of the coordinates
//!
//! The certificate is about the f32 positions. Positions that are themselves rounded (a
//! data set's exact rationals, the solver's `X += α(x̂ − X)` update, a rigid vertex
//! transformed to world space) differ from the geometry they stand for by up to half an
//! ulp per coordinate, so a distance by up to `√3·ulp(|x|)`: a certified `d > ξ` means
//! the intended geometry is apart only if `ξ ≥ √3·ulp(|x|)`. [`min_sep_floor`] gives
//! `4·ulp(|x|)`. The internal slack of (2) is separate and comes on top: the
//! effective separation of a query is `ξ + 32u(R + V)`, so a start closer than that is
//! reported as `Some(0)`.
//!
//! # Defaults
//!
//! [`DEFAULT_ETA`] = 0.9 (each step covers at most 90% of the certified clearance, and a
//! query stops once the clearance falls below 10% of the starting one; as in C-IPC and
//! ipc-toolkit), [`DEFAULT_MAX_ITERS`] = 256, [`DEFAULT_MIN_SEP`] = 1e-5.
//!
//! The gap rule makes ACCD report a pair that closes in to a tenth of its start clearance
//! as a hit even when it then moves apart: on the sample set, most false positives that
//! stay farther than ξ are such near misses (a pair starting 0.29 apart that passes 1e-3
//! apart). For the solver this is the intended behaviour: the pair joins the contact set
//! and α stops short of it.
//!
//! References read, not copied: ipc-toolkit `src/ipc/ccd/additive_ccd.cpp` (f64, not
//! conservative under rounding by its own note) and ppf-contact-solver
//! `src/cpp/contact/accd.hpp` (f32 on the GPU; its `centerize` computes the mean
//! displacement but does not subtract it).

// `!(x > y)` is deliberate throughout: a NaN must fail every test that certifies something.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

mod accd;
pub mod distance;
pub mod exact;

pub use accd::{
    AccdMargins, AccdParams, AccdResult, AccdStop, DEFAULT_ETA, DEFAULT_MAX_ITERS, DEFAULT_MIN_SEP,
    close_pair_separation, edge_edge_accd, edge_edge_accd_with_margins, edge_edge_ccd,
    edge_edge_distance_lower_bound, edge_edge_may_collide, min_sep_floor, point_triangle_accd,
    point_triangle_accd_with_margins, point_triangle_ccd, point_triangle_distance_lower_bound,
    point_triangle_may_collide,
};
pub use distance::{
    Closest, EdgeEdgeClosest, EdgeEdgeDistanceType, PointTriangleClosest,
    PointTriangleDistanceType, edge_edge_closest, edge_edge_distance_gradient,
    edge_edge_distance_squared, edge_edge_distance_squared_gradient, edge_edge_distance_type,
    point_triangle_closest, point_triangle_distance_gradient, point_triangle_distance_squared,
    point_triangle_distance_squared_gradient, point_triangle_distance_type,
};
