//! Additive CCD (Li et al. 2021, C-IPC) made conservative in f32, and the motion-bound
//! filter that shares its bounds. The floating-point argument is in the [module
//! documentation](super).

use glam::Vec3;

use super::distance::{edge_edge_closest, point_triangle_closest};

/// Unit roundoff of f32, `2⁻²⁴`.
const U: f32 = 1.0 / 16_777_216.0;
/// Relative shrink of certified quantities: `2⁻²⁰ = 16u`, four times the relative rounding
/// it has to absorb anywhere below.
const REL: f32 = 1.0 / 1_048_576.0;
/// Slack of the distance lower bound per unit of `R + V` (centroid-relative coordinate and
/// displacement magnitudes): `2⁻¹⁹ = 32u` against the 28u the analysis needs.
const SLACK_PER_EXTENT: f32 = 32.0 * U;
/// Slack of the rate bound per unit of `V + 2R`: `8u` against the 3.5u needed.
const RATE_SLACK_PER_EXTENT: f32 = 8.0 * U;
/// Absolute floor of the distance slack: products that underflow (or flush to zero) lose at
/// most `3·2⁻¹²⁶` per dot product, divided by a direction of length at least `MIN_DIR`.
const SLACK_FLOOR: f32 = 1e-22;
/// Absolute floor of the rate bound: squared lengths below `3·2⁻¹²⁶` may flush to zero,
/// which hides at most `2·1.9e-19` of speed.
const RATE_FLOOR: f32 = 1e-18;
/// Directions shorter than this certify nothing (distance treated as zero).
const MIN_DIR_SQ: f32 = 1e-30;

/// The margins of the rounding argument: how much every certified quantity is shrunk.
///
/// [`AccdMargins::CPU`] are the CCD's own (IEEE f32 round to nearest, operations in program
/// order; the [module documentation](super) derives them), used by every function of this
/// module except the `*_with_margins` ones. Any margins at least as large are conservative
/// on the CPU too (each only lowers a certified bound); `gpu::ccd::CcdMargins::WGSL`, the
/// wider margins of the device port, are such, and running them here gives what the port
/// computes on a device whose arithmetic is the CPU's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccdMargins {
    /// Relative shrink of every certified quantity.
    pub rel: f32,
    /// Absolute slack of a support gap and of a closing rate per unit of `R + V`.
    pub slack_per_extent: f32,
    /// Slack of the rate bound per unit of `2R + V`.
    pub rate_slack_per_extent: f32,
    /// Absolute floor of the slack (flushed subnormals).
    pub slack_floor: f32,
    /// Absolute floor of the rate bound.
    pub rate_floor: f32,
}

impl AccdMargins {
    /// The CPU's margins: a relative `2⁻²⁰` (16u), a slack of `2⁻¹⁹(R + V)`, a rate slack of
    /// `2⁻²¹(2R + V)`, floors `1e-22` and `1e-18`.
    pub const CPU: AccdMargins = AccdMargins {
        rel: REL,
        slack_per_extent: SLACK_PER_EXTENT,
        rate_slack_per_extent: RATE_SLACK_PER_EXTENT,
        slack_floor: SLACK_FLOOR,
        rate_floor: RATE_FLOOR,
    };
}

/// Default step scale η: each step covers at most 90% of the certified clearance.
pub const DEFAULT_ETA: f32 = 0.9;

/// Default iteration cap. A pair that closes in directly reaches the gap
/// `(1 − η)(d₀ − ξ)` in a few steps, and a pair sliding over a face or along an edge is
/// certified in one by the direction step; what still takes many steps is a pair that
/// turns while it passes another at a small clearance (on the sample set, the most is 472
/// steps, an edge sweeping across another 2.2e-5 apart). Beyond the cap the accumulated
/// lower bound is returned as a hit.
pub const DEFAULT_MAX_ITERS: u32 = 256;

/// Default minimum separation ξ, in the units of the positions (metres in the engine).
///
/// It must exceed the rounding of the positions to f32 (see [`min_sep_floor`]): `1e-5` is
/// at least `4·ulp(|x|)` for `|x| < 32`, about 21 ulps at the magnitudes of the sample
/// query set (`|x| ≤ 5.5`, ulp `4.8e-7`). The solver passes its own ξ (the notes suggest
/// `0.1δ = 1e-4 m` for a contact offset δ of 1 mm).
pub const DEFAULT_MIN_SEP: f32 = 1e-5;

/// The smallest minimum separation that absorbs the rounding of positions of magnitude up
/// to `max_abs_coord` to f32: `4·ulp(max_abs_coord)`.
///
/// Rounding each coordinate to nearest moves each point by at most `(√3/2)·ulp` and the
/// whole linear trajectory by at most as much (it is a convex combination of its ends),
/// so a distance between two primitives changes by at most `√3·ulp`; twice that margin
/// is kept. A pair certified farther apart than this in f32 is therefore apart in the
/// exact (unrounded) geometry too.
pub fn min_sep_floor(max_abs_coord: f32) -> f32 {
    let x = max_abs_coord.abs().max(f32::MIN_POSITIVE);
    // ulp(x) = 2^(e − 23) for x in [2^e, 2^(e+1)): the exponent bits of x, mantissa cleared,
    // times 2^-23 (exact: a power of two).
    let pow2 = f32::from_bits(x.to_bits() & 0x7f80_0000);
    4.0 * pow2 * (1.0 / 8_388_608.0)
}

/// The separation against which a pair that starts an advance closer than ξ is certified:
/// half its start distance `d0`, so that it can separate and never touch, but never less
/// than the rounding of its coordinates to f32 ([`min_sep_floor`] of the largest
/// coordinate of `points`, the pair's positions at both ends): halved advance after
/// advance, the distance would fall below that rounding, and the positions rounded to f32
/// would cross. At the floor the pair's island holds still.
pub fn close_pair_separation<'a>(d0: f32, points: impl IntoIterator<Item = &'a Vec3>) -> f32 {
    let largest = points
        .into_iter()
        .fold(0.0f32, |m, p| m.max(p.abs().max_element()));
    (0.5 * d0).max(min_sep_floor(largest))
}

/// Parameters of the additive CCD.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccdParams {
    /// Step scale η ∈ (0, 1]: each step advances `η·(d − ξ)/L` (clearance over the bound
    /// on the rate of approach), and a query stops as a hit once the clearance falls below
    /// `(1 − η)(d₀ − ξ)`. Values outside (0, 1] are clamped into `[1e-6, 1]` (NaN counts
    /// as 1).
    pub eta: f32,
    /// At most this many steps; after the last one the accumulated (certified) `t` is
    /// returned as a hit.
    pub max_iters: u32,
}

impl Default for AccdParams {
    fn default() -> Self {
        AccdParams {
            eta: DEFAULT_ETA,
            max_iters: DEFAULT_MAX_ITERS,
        }
    }
}

/// Why an additive CCD query stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccdStop {
    /// Certified clear on the whole `[0, 1]`: no hit.
    Clear,
    /// The start is not certified farther apart than ξ (or the input is not finite):
    /// `t = 0`.
    StartInside,
    /// The certified clearance fell below the gap `(1 − η)(d₀ − ξ)`: a hit at `t`.
    Gap,
    /// The step fell below the resolution of `t`: a hit at `t`.
    Stalled,
    /// The iteration cap was reached: a hit at the accumulated `t`.
    IterationCap,
}

/// The outcome of an additive CCD query, with what the tests and statistics read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccdResult {
    /// `None`: the primitives stay farther apart than ξ on all of `[0, 1]`. `Some(t)`:
    /// they stay farther apart than ξ on `[0, t]` (certified), and may come within ξ
    /// after `t`.
    pub toi: Option<f32>,
    /// Steps taken (distance evaluations after the start).
    pub iterations: u32,
    /// Why the query stopped.
    pub stop: AccdStop,
}

/// The two primitive pairs: their closest-point direction, point pairs and rate bound.
trait Pair {
    /// Number of points of the first primitive (1 for a point, 2 for an edge).
    const FIRST: usize;
    /// The pairs `(i, j)` of a point `i` of the first primitive and a point `j` of the
    /// second: the support gap along `n` is `min n·(x_i − x_j)` over them.
    const PAIRS: &'static [(usize, usize)];
    /// Direction from the second primitive toward the first (the closest-point difference).
    fn direction(z: &[Vec3; 4]) -> Vec3;
    /// Upper bound on the rate of change of the distance for relative displacements `u`.
    fn rate(u: &[Vec3; 4]) -> f32;
}

struct PointTriangle;
struct EdgeEdge;

impl Pair for PointTriangle {
    const FIRST: usize = 1;
    const PAIRS: &'static [(usize, usize)] = &[(0, 1), (0, 2), (0, 3)];
    #[inline]
    fn direction(z: &[Vec3; 4]) -> Vec3 {
        point_triangle_closest(z[0], z[1], z[2], z[3]).diff
    }
    #[inline]
    fn rate(u: &[Vec3; 4]) -> f32 {
        let tri = u[1].dot(u[1]).max(u[2].dot(u[2])).max(u[3].dot(u[3]));
        u[0].dot(u[0]).sqrt() + tri.sqrt()
    }
}

impl Pair for EdgeEdge {
    const FIRST: usize = 2;
    const PAIRS: &'static [(usize, usize)] = &[(0, 2), (0, 3), (1, 2), (1, 3)];
    #[inline]
    fn direction(z: &[Vec3; 4]) -> Vec3 {
        edge_edge_closest(z[0], z[1], z[2], z[3]).diff
    }
    #[inline]
    fn rate(u: &[Vec3; 4]) -> f32 {
        let a = u[0].dot(u[0]).max(u[1].dot(u[1]));
        let b = u[2].dot(u[2]).max(u[3].dot(u[3]));
        a.sqrt() + b.sqrt()
    }
}

/// A query in centroid-relative coordinates, with its rounding bounds.
struct Frame {
    /// Start positions minus the start centroid.
    y0: [Vec3; 4],
    /// Relative displacements: (end − end centroid) − (start − start centroid).
    u: [Vec3; 4],
    /// Slack of the distance lower bound.
    slack: f32,
    /// Upper bound on the rate of change of the exact distance along the exact trajectory.
    rate: f32,
    /// Relative shrink of certified quantities ([`AccdMargins::rel`]).
    rel: f32,
}

#[inline]
fn max_abs(v: &[Vec3; 4]) -> f32 {
    let mut m = 0.0f32;
    for x in v {
        m = m.max(x.abs().max_element());
    }
    m
}

impl Frame {
    /// `None` when the input is not finite (or too large to square).
    #[inline]
    fn new<P: Pair>(x0: &[Vec3; 4], x1: &[Vec3; 4], m: &AccdMargins) -> Option<Frame> {
        let c0 = (x0[0] + x0[1] + x0[2] + x0[3]) * 0.25;
        let c1 = (x1[0] + x1[1] + x1[2] + x1[3]) * 0.25;
        // A NaN or infinite coordinate makes its centroid non-finite (min/max below would
        // skip a NaN).
        if !(c0.is_finite() && c1.is_finite()) {
            return None;
        }
        let y0 = x0.map(|x| x - c0);
        let y1 = x1.map(|x| x - c1);
        let u = [y1[0] - y0[0], y1[1] - y0[1], y1[2] - y0[2], y1[3] - y0[3]];
        let r = max_abs(&y0).max(max_abs(&y1));
        let v = max_abs(&u);
        let slack = m.slack_per_extent * (r + v) + m.slack_floor;
        let l = P::rate(&u);
        let rate = l + l * m.rel + m.rate_slack_per_extent * (v + 2.0 * r) + m.rate_floor;
        // Squares of the coordinates must not overflow (|x| < ~1e18).
        if !(rate.is_finite() && (r * r + v * v).is_finite()) {
            return None;
        }
        Some(Frame {
            y0,
            u,
            slack,
            rate,
            rel: m.rel,
        })
    }

    /// Certified lower bound on the exact distance at time `t` of the exact relative
    /// trajectory (which has the exact distance of the input trajectory), and a certified
    /// step from the separating direction: the exact distance stays above `min_sep` on
    /// `[t, t + step]` (`step ≤ 0`: none; capped at 2, which already reaches past 1).
    #[inline]
    fn certify<P: Pair>(&self, t: f32, min_sep: f32) -> (f32, f32) {
        let z = [
            self.y0[0] + self.u[0] * t,
            self.y0[1] + self.u[1] * t,
            self.y0[2] + self.u[2] * t,
            self.y0[3] + self.u[3] * t,
        ];
        let n = P::direction(&z);
        let nn = n.dot(n);
        if !(nn >= MIN_DIR_SQ) {
            return (-self.slack, 0.0);
        }
        let inv = 1.0 / nn.sqrt();
        let mut d = f32::MAX;
        let mut step = 2.0f32;
        for &(i, j) in P::PAIRS {
            // Support gap of this point pair along n̂ at t, and its exact rate of change,
            // which is constant along the linear trajectory for a fixed n̂.
            let g = n.dot(z[i] - z[j]) * inv;
            let g = g - g.abs() * self.rel - self.slack;
            let s = n.dot(self.u[i] - self.u[j]) * inv;
            let closing = -s + s.abs() * self.rel + self.slack;
            d = d.min(g);
            let room = g - min_sep;
            step = if room > 0.0 {
                if closing * step < room {
                    step
                } else {
                    step.min(room / closing)
                }
            } else {
                0.0
            };
        }
        (d, step * (1.0 - self.rel))
    }
}

/// `t + dt` rounded so that it never exceeds the exact sum (`dt ≥ 0`).
///
/// When the sum is at most `2t`, `s − t` is exact (Sterbenz), so an overshoot is detected
/// exactly and the other neighbour of the exact sum is taken. When it is larger, `dt > t`
/// and the overshoot is below `2u·dt`, which the caller's relative margin on `dt` covers.
#[inline]
fn add_down(t: f32, dt: f32) -> f32 {
    let s = t + dt;
    if s - t > dt {
        f32::from_bits(s.to_bits() - 1)
    } else {
        s
    }
}

/// The additive CCD loop shared by both primitive pairs.
#[inline]
fn accd<P: Pair>(
    x0: &[Vec3; 4],
    x1: &[Vec3; 4],
    min_sep: f32,
    params: &AccdParams,
    margins: &AccdMargins,
) -> AccdResult {
    let inside = |iterations| AccdResult {
        toi: Some(0.0),
        iterations,
        stop: AccdStop::StartInside,
    };
    let min_sep = if min_sep > 0.0 { min_sep } else { 0.0 };
    let eta = if params.eta.is_nan() {
        1.0
    } else {
        params.eta.clamp(1e-6, 1.0)
    };
    let Some(frame) = Frame::new::<P>(x0, x1, margins) else {
        return inside(0);
    };
    let (d0, mut dir_step) = frame.certify::<P>(0.0, min_sep);
    if !(d0 > min_sep) {
        return inside(0);
    }
    let stop_gap = (1.0 - eta) * (d0 - min_sep);
    let mut t = 0.0f32;
    let mut d = d0;
    for k in 0..params.max_iters {
        // Certified step: the larger of the ACCD step (the clearance cannot close faster
        // than `rate`) and the fixed-direction step.
        let room = ((d - min_sep) / frame.rate * (1.0 - frame.rel)).max(dir_step);
        if add_down(t, room) >= 1.0 {
            return AccdResult {
                toi: None,
                iterations: k,
                stop: AccdStop::Clear,
            };
        }
        let next = add_down(t, room * eta);
        if !(next > t) {
            return AccdResult {
                toi: Some(t),
                iterations: k,
                stop: AccdStop::Stalled,
            };
        }
        t = next;
        (d, dir_step) = frame.certify::<P>(t, min_sep);
        if !(d > min_sep && d - min_sep >= stop_gap) {
            return AccdResult {
                toi: Some(t),
                iterations: k + 1,
                stop: AccdStop::Gap,
            };
        }
    }
    AccdResult {
        toi: Some(t),
        iterations: params.max_iters,
        stop: AccdStop::IterationCap,
    }
}

/// Whether the motion bound alone certifies the pair apart by more than ξ on `[0, 1]`.
#[inline]
fn motion_bound_clear<P: Pair>(x0: &[Vec3; 4], x1: &[Vec3; 4], min_sep: f32) -> bool {
    let min_sep = if min_sep > 0.0 { min_sep } else { 0.0 };
    let Some(frame) = Frame::new::<P>(x0, x1, &AccdMargins::CPU) else {
        return false;
    };
    let clear = |d: f32| d > min_sep && (d - min_sep) / frame.rate * (1.0 - REL) >= 1.0;
    // Cheapest lower bound first: the gap between the start bounding boxes (exact min/max,
    // one rounding per subtraction, shrunk by REL).
    let (a, b) = x0.split_at(P::FIRST);
    let lo_a = a.iter().fold(a[0], |m, &x| m.min(x));
    let hi_a = a.iter().fold(a[0], |m, &x| m.max(x));
    let lo_b = b.iter().fold(b[0], |m, &x| m.min(x));
    let hi_b = b.iter().fold(b[0], |m, &x| m.max(x));
    let box_gap = (lo_b - hi_a).max(lo_a - hi_b).max_element() * (1.0 - REL);
    if clear(box_gap) {
        return true;
    }
    let (d0, dir_step) = frame.certify::<P>(0.0, min_sep);
    clear(d0) || (d0 > min_sep && dir_step >= 1.0)
}

/// Additive CCD of the point `p` against the triangle `(a, b, c)` moving linearly from
/// `(p0, a0, b0, c0)` at `t = 0` to `(p1, a1, b1, c1)` at `t = 1`, with minimum separation
/// `min_sep` (ξ ≥ 0; negative or NaN counts as 0).
///
/// Returns `None` when the point and the triangle stay farther apart than ξ on all of
/// `[0, 1]` (certified, including f32 rounding), and otherwise `Some(t)` with the largest
/// `t` the iteration certified: they stay farther apart than ξ on `[0, t]`. A start that
/// is not certified farther apart than ξ gives `Some(0.0)`; so does a non-finite input.
#[allow(clippy::too_many_arguments)]
pub fn point_triangle_ccd(
    p0: Vec3,
    a0: Vec3,
    b0: Vec3,
    c0: Vec3,
    p1: Vec3,
    a1: Vec3,
    b1: Vec3,
    c1: Vec3,
    min_sep: f32,
    params: &AccdParams,
) -> Option<f32> {
    accd::<PointTriangle>(
        &[p0, a0, b0, c0],
        &[p1, a1, b1, c1],
        min_sep,
        params,
        &AccdMargins::CPU,
    )
    .toi
}

/// Additive CCD of the edge `(ea0, ea1)` against the edge `(eb0, eb1)`; see
/// [`point_triangle_ccd`] for the contract.
#[allow(clippy::too_many_arguments)]
pub fn edge_edge_ccd(
    ea0_t0: Vec3,
    ea1_t0: Vec3,
    eb0_t0: Vec3,
    eb1_t0: Vec3,
    ea0_t1: Vec3,
    ea1_t1: Vec3,
    eb0_t1: Vec3,
    eb1_t1: Vec3,
    min_sep: f32,
    params: &AccdParams,
) -> Option<f32> {
    accd::<EdgeEdge>(
        &[ea0_t0, ea1_t0, eb0_t0, eb1_t0],
        &[ea0_t1, ea1_t1, eb0_t1, eb1_t1],
        min_sep,
        params,
        &AccdMargins::CPU,
    )
    .toi
}

/// [`point_triangle_ccd`] with the iteration count and the reason it stopped; the points
/// are `[p, a, b, c]` at `t = 0` and at `t = 1`.
pub fn point_triangle_accd(
    start: &[Vec3; 4],
    end: &[Vec3; 4],
    min_sep: f32,
    params: &AccdParams,
) -> AccdResult {
    accd::<PointTriangle>(start, end, min_sep, params, &AccdMargins::CPU)
}

/// [`edge_edge_ccd`] with the iteration count and the reason it stopped; the points are
/// `[ea0, ea1, eb0, eb1]` at `t = 0` and at `t = 1`.
pub fn edge_edge_accd(
    start: &[Vec3; 4],
    end: &[Vec3; 4],
    min_sep: f32,
    params: &AccdParams,
) -> AccdResult {
    accd::<EdgeEdge>(start, end, min_sep, params, &AccdMargins::CPU)
}

/// [`point_triangle_accd`] with other margins of the rounding argument (see
/// [`AccdMargins`]: conservative when each is at least the CPU's).
pub fn point_triangle_accd_with_margins(
    start: &[Vec3; 4],
    end: &[Vec3; 4],
    min_sep: f32,
    params: &AccdParams,
    margins: &AccdMargins,
) -> AccdResult {
    accd::<PointTriangle>(start, end, min_sep, params, margins)
}

/// [`edge_edge_accd`] with other margins of the rounding argument (see [`AccdMargins`]).
pub fn edge_edge_accd_with_margins(
    start: &[Vec3; 4],
    end: &[Vec3; 4],
    min_sep: f32,
    params: &AccdParams,
    margins: &AccdMargins,
) -> AccdResult {
    accd::<EdgeEdge>(start, end, min_sep, params, margins)
}

/// Broad-phase filter: `false` when the pair certainly stays farther apart than ξ on
/// `[0, 1]` because the sum of the largest relative displacements of the two primitives is
/// below the start distance minus ξ; the points are `[p, a, b, c]` at `t = 0` and `t = 1`.
///
/// The start distance is bounded below first by the gap between the start bounding boxes
/// (a few comparisons) and, if that is not enough, by the certified distance bound of the
/// CCD. Same guarantee as a `None` from [`point_triangle_ccd`] (it is the CCD's first
/// test), so a `false` never hides a hit; `true` only means "run the CCD".
pub fn point_triangle_may_collide(start: &[Vec3; 4], end: &[Vec3; 4], min_sep: f32) -> bool {
    !motion_bound_clear::<PointTriangle>(start, end, min_sep)
}

/// Broad-phase filter for the edges `[ea0, ea1]` and `[eb0, eb1]`; see
/// [`point_triangle_may_collide`].
pub fn edge_edge_may_collide(start: &[Vec3; 4], end: &[Vec3; 4], min_sep: f32) -> bool {
    !motion_bound_clear::<EdgeEdge>(start, end, min_sep)
}

/// Certified lower bound on the distance between the point `p` and the triangle
/// `(a, b, c)` (exact distance of the f32 inputs ≥ the result). Up to `32u·(R + V)` below
/// the true distance, `R` the largest centroid-relative coordinate.
pub fn point_triangle_distance_lower_bound(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> f32 {
    let x = [p, a, b, c];
    match Frame::new::<PointTriangle>(&x, &x, &AccdMargins::CPU) {
        Some(f) => f.certify::<PointTriangle>(0.0, 0.0).0,
        None => 0.0,
    }
}

/// Certified lower bound on the distance between the edges `(ea0, ea1)` and `(eb0, eb1)`;
/// see [`point_triangle_distance_lower_bound`].
pub fn edge_edge_distance_lower_bound(ea0: Vec3, ea1: Vec3, eb0: Vec3, eb1: Vec3) -> f32 {
    let x = [ea0, ea1, eb0, eb1];
    match Frame::new::<EdgeEdge>(&x, &x, &AccdMargins::CPU) {
        Some(f) => f.certify::<EdgeEdge>(0.0, 0.0).0,
        None => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `add_down` never exceeds the exact sum and loses at most one ulp.
    #[test]
    fn add_down_never_overshoots() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..1_000_000 {
            let t = (next() >> 40) as f32 / (1u64 << 24) as f32;
            // dt from far below ulp(t) to above t.
            let dt = f32::from_bits((next() as u32 % 0x3f80_0000).max(1));
            let s = add_down(t, dt);
            let exact = t as f64 + dt as f64;
            assert!(s as f64 <= exact, "{t} + {dt} = {s} > {exact}");
            let nearest = t + dt;
            assert!(s == nearest || s == nearest.next_down(), "{t} + {dt} = {s}");
            assert!(s >= t);
        }
        assert_eq!(add_down(0.5, 0.25), 0.75);
        assert_eq!(add_down(0.0, 1e-30), 1e-30);
        // Half an ulp of 1 − 2⁻²⁴... rounds to 1 (ties to even), then back down.
        let t = 1.0 - f32::EPSILON / 2.0;
        assert_eq!(add_down(t, f32::EPSILON / 4.0), t);
    }

    /// Half the start distance while that is above the rounding of the coordinates, the
    /// rounding's floor below it (a distance that is no longer a number included), at the
    /// largest coordinate of either end.
    #[test]
    fn close_pair_separation_halves_down_to_the_rounding() {
        let near = [Vec3::new(0.5, 1.0, -0.25), Vec3::new(0.5, 1.0, -0.2)];
        let floor = 4.0 * (1.0f32.next_up() - 1.0);
        assert_eq!(close_pair_separation(1e-3, &near), 5e-4);
        assert_eq!(close_pair_separation(1e-9, &near), floor);
        assert_eq!(close_pair_separation(0.0, &near), floor);
        assert_eq!(close_pair_separation(f32::NAN, &near), floor);
        // The far end decides: a point that went to x = −1000.
        let far = [near[0], Vec3::new(-1000.0, 0.0, 0.0)];
        let floor = 4.0 * (1000.0f32.next_up() - 1000.0);
        assert_eq!(close_pair_separation(1e-4, &far), floor);
        assert!(floor > 5e-5 && floor < 1e-3);
    }

    #[test]
    fn min_sep_floor_matches_ulp() {
        for x in [1e-3f32, 0.7, 1.0, 3.0, 5.5, 1000.0] {
            let ulp = x.next_up() - x;
            assert_eq!(min_sep_floor(x), 4.0 * ulp, "{x}");
            assert_eq!(min_sep_floor(-x), 4.0 * ulp, "{x}");
        }
    }
}
