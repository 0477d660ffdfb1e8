//! Point–triangle and edge–edge squared distances in f32 with the closest feature pair and
//! the gradients with respect to the 12 coordinates of the 4 points.
//!
//! Every query returns a [`Closest`]: the closest feature pair (`kind`), the vector
//! `diff` from the closest point of the second primitive to the closest point of the
//! first, and signed weights `w_i` such that `diff = Σ_i w_i x_i` over the four points
//! (`p, a, b, c` or `ea0, ea1, eb0, eb1`): the first primitive's weights are its
//! barycentric coordinates, the second's are minus its barycentric coordinates, so they sum
//! to zero. By the envelope theorem (the distance is a minimum over the barycentric
//! coordinates, attained where the derivative along the feature vanishes),
//! `∂d²/∂x_i = 2 w_i diff` and `∂d/∂x_i = w_i diff/|diff|` for every type, which is what
//! the contact rows need: `∇_v d = w_v n` with the unit normal `n = diff/d`.
//!
//! # Robustness
//!
//! * The first operation on the inputs is always a difference of two of them, so the
//!   results do not lose precision to large world coordinates, only to the extent of the
//!   pair.
//! * Candidates are compared by value: a point–triangle query takes the face only when the
//!   projection of the point falls inside a non-degenerate triangle and otherwise the
//!   nearest of the three edges (each point–segment, which becomes point–point at a
//!   clamped end or for a zero-length edge); an edge–edge query takes the interior pair
//!   only for non-parallel edges whose line–line parameters are both inside `(0, 1)` and
//!   otherwise the nearest of the four endpoint–segment candidates. So degenerate
//!   triangles (all three edges collinear or a single point), zero-length edges and
//!   (nearly) parallel edges never divide by a vanishing quantity: they fall back to the
//!   edges' point–segment distances, which are exact for them.
//! * Barycentric and line–line parameters use triple products (`s = ((eb0−ea0)×db)·n/|n|²`
//!   with `n = da×db`), whose rounding grows like `1/sin θ` for the angle θ between the
//!   edges, not like `1/sin² θ` as the Gram-matrix (Cramer) formulas do.
//! * `diff` is re-orthogonalised against the closest feature (one Gram–Schmidt pass
//!   against an edge; against the edge, the second edge's orthogonal part, and the edge
//!   again for a face or an interior edge pair). An error `δ` in the barycentric
//!   coordinates then moves `diff` only along the feature, where the pass removes it, so
//!   the distance and the normal stay accurate to a few units of roundoff of the pair's
//!   extent even when the pair nearly touches or the edges are nearly parallel. The CCD
//!   uses `diff` as a separating direction, and this accuracy is what keeps its lower
//!   bounds tight.
//!
//! All functions are straight-line f32 code (no allocation, no recursion, no loops other
//! than over the fixed candidates, no transcendental functions; not even a square root
//! unless the unsquared distance is asked for), so they port to WGSL as they are.

use glam::Vec3;

/// A triangle whose `|ab × ac|²` is at most this times the fourth power of its longest
/// edge (all angles below about 1e-6 rad, or a single point) is treated as degenerate:
/// the distance is the nearest of its edges'. For a triangle this thin, the point–edge
/// distance differs from the point–face one by at most its width, about 1e-6 of the
/// longest edge, the order of f32's resolution.
const DEGENERATE_FACE: f32 = 1e-12;

/// Edges with `|da × db|² ≤ PARALLEL·|da|²|db|²` (angle below about 1e-6 rad) are parallel:
/// the distance is the nearest of the four endpoint–segment distances, which is exact for
/// parallel segments and off by at most `1e-6·length` within this angle.
const PARALLEL: f32 = 1e-12;

/// Which feature pair of a point and a triangle `(a, b, c)` is closest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PointTriangleDistanceType {
    /// Point–point with vertex `a`.
    PointA = 0,
    /// Point–point with vertex `b`.
    PointB = 1,
    /// Point–point with vertex `c`.
    PointC = 2,
    /// Point–edge with the edge `ab`.
    PointEdgeAB = 3,
    /// Point–edge with the edge `bc`.
    PointEdgeBC = 4,
    /// Point–edge with the edge `ca`.
    PointEdgeCA = 5,
    /// Point–face: the projection of the point is inside the triangle.
    PointFace = 6,
}

/// Which feature pair of the edges `A = (ea0, ea1)` and `B = (eb0, eb1)` is closest.
///
/// Parallel edges have a whole segment of closest pairs; they are classified as one of
/// the endpoint types (the one found first among `ea0–B, ea1–B, eb0–A, eb1–A`), never as
/// [`EaEb`](Self::EaEb).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EdgeEdgeDistanceType {
    /// Endpoint `ea0` – endpoint `eb0`.
    Ea0Eb0 = 0,
    /// Endpoint `ea0` – endpoint `eb1`.
    Ea0Eb1 = 1,
    /// Endpoint `ea1` – endpoint `eb0`.
    Ea1Eb0 = 2,
    /// Endpoint `ea1` – endpoint `eb1`.
    Ea1Eb1 = 3,
    /// Endpoint `ea0` – interior of edge B.
    Ea0Eb = 4,
    /// Endpoint `ea1` – interior of edge B.
    Ea1Eb = 5,
    /// Interior of edge A – endpoint `eb0`.
    EaEb0 = 6,
    /// Interior of edge A – endpoint `eb1`.
    EaEb1 = 7,
    /// Interior – interior of two non-parallel edges.
    EaEb = 8,
}

/// The closest feature pair of two primitives, with what the distance and its gradients
/// are computed from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Closest<K> {
    /// The closest feature pair.
    pub kind: K,
    /// Closest point of the first primitive (the point, or edge A) minus the closest
    /// point of the second (the triangle, or edge B). Its length is the distance; when it
    /// is non-zero its direction is the contact normal pointing toward the first primitive.
    pub diff: Vec3,
    /// Signed weights of the four points: `diff = Σ w_i x_i` (up to the re-orthogonalisation
    /// of `diff`). The first primitive's barycentric coordinates, then minus the second's.
    pub weights: [f32; 4],
}

impl<K> Closest<K> {
    /// The squared distance `|diff|²`.
    #[inline]
    pub fn dist_sq(&self) -> f32 {
        self.diff.dot(self.diff)
    }

    /// The distance `|diff|` (one square root).
    #[inline]
    pub fn distance(&self) -> f32 {
        self.dist_sq().sqrt()
    }

    /// Gradient of the squared distance with respect to the four points:
    /// `∂d²/∂x_i = 2 w_i diff`. Continuous everywhere (also across type changes).
    #[inline]
    pub fn gradient_squared(&self) -> [Vec3; 4] {
        let g = self.diff * 2.0;
        self.weights.map(|w| g * w)
    }

    /// Gradient of the distance with respect to the four points: `∂d/∂x_i = w_i n` with
    /// `n = diff/|diff|`. The distance is not differentiable where it is zero; there the
    /// result is four zero vectors.
    #[inline]
    pub fn gradient(&self) -> [Vec3; 4] {
        let d2 = self.dist_sq();
        if !(d2 > 0.0) {
            return [Vec3::ZERO; 4];
        }
        let n = self.diff / d2.sqrt();
        self.weights.map(|w| n * w)
    }
}

/// Closest point–triangle features; see [`Closest`].
pub type PointTriangleClosest = Closest<PointTriangleDistanceType>;
/// Closest edge–edge features; see [`Closest`].
pub type EdgeEdgeClosest = Closest<EdgeEdgeDistanceType>;

/// `w` minus its component along `e` (`e ≠ 0`).
#[inline]
fn reject(w: Vec3, e: Vec3, ee: f32) -> Vec3 {
    w - e * (w.dot(e) / ee)
}

/// `w` minus its components in the plane spanned by `d1` and `d2` (`d1 ≠ 0`): Gram–Schmidt
/// against `d1`, then against the part of `d2` orthogonal to `d1`, then `d1` once more.
#[inline]
fn reject_plane(w: Vec3, d1: Vec3, d2: Vec3) -> Vec3 {
    let d1d1 = d1.dot(d1);
    let w = reject(w, d1, d1d1);
    let f = reject(d2, d1, d1d1);
    let ff = f.dot(f);
    let w = if ff > 0.0 { reject(w, f, ff) } else { w };
    reject(w, d1, d1d1)
}

/// Where on a segment the closest point lies.
#[derive(Clone, Copy)]
enum SegmentEnd {
    Start,
    End,
    Interior,
}

/// Closest point of the segment `[a, b]` to `p`: `(where, s, p − (a + s(b − a)))`.
/// A zero-length segment is its start point.
#[inline]
fn point_segment(p: Vec3, a: Vec3, b: Vec3) -> (SegmentEnd, f32, Vec3) {
    let e = b - a;
    let ap = p - a;
    let ee = e.dot(e);
    if !(ee > 0.0) {
        return (SegmentEnd::Start, 0.0, ap);
    }
    let s = ap.dot(e) / ee;
    if !(s > 0.0) {
        (SegmentEnd::Start, 0.0, ap)
    } else if s >= 1.0 {
        (SegmentEnd::End, 1.0, p - b)
    } else {
        (SegmentEnd::Interior, s, reject(ap - e * s, e, ee))
    }
}

/// Closest features of the point `p` and the triangle `(a, b, c)`; weights
/// `[1, −α, −β, −γ]` with the barycentric coordinates `(α, β, γ)` of the closest point.
pub fn point_triangle_closest(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> PointTriangleClosest {
    use PointTriangleDistanceType as T;
    let ab = b - a;
    let ac = c - a;
    let bc = c - b;
    let n = ab.cross(ac);
    let nn = n.dot(n);
    let l2 = ab.dot(ab).max(ac.dot(ac)).max(bc.dot(bc));
    if nn > DEGENERATE_FACE * l2 * l2 {
        let pa = a - p;
        let pb = b - p;
        let pc = c - p;
        // Twice the signed areas of the sub-triangles opposite each vertex, times |n|.
        let wa = pb.cross(pc).dot(n);
        let wb = pc.cross(pa).dot(n);
        let wc = pa.cross(pb).dot(n);
        if wa >= 0.0 && wb >= 0.0 && wc >= 0.0 {
            let beta = wb / nn;
            let gamma = wc / nn;
            let alpha = 1.0 - beta - gamma;
            let diff = reject_plane(-pa - ab * beta - ac * gamma, ab, ac);
            return Closest {
                kind: T::PointFace,
                diff,
                weights: [1.0, -alpha, -beta, -gamma],
            };
        }
    }
    // The boundary: the nearest of the three edges (first one on ties).
    let edges = [
        point_segment(p, a, b),
        point_segment(p, b, c),
        point_segment(p, c, a),
    ];
    let mut best = 0;
    let mut best_d2 = edges[0].2.dot(edges[0].2);
    for k in 1..3 {
        let d2 = edges[k].2.dot(edges[k].2);
        if d2 < best_d2 {
            best = k;
            best_d2 = d2;
        }
    }
    let (end, s, diff) = edges[best];
    let (kind, weights) = match (best, end) {
        (0, SegmentEnd::Start) | (2, SegmentEnd::End) => (T::PointA, [1.0, -1.0, 0.0, 0.0]),
        (0, SegmentEnd::End) | (1, SegmentEnd::Start) => (T::PointB, [1.0, 0.0, -1.0, 0.0]),
        (1, SegmentEnd::End) | (2, SegmentEnd::Start) => (T::PointC, [1.0, 0.0, 0.0, -1.0]),
        (0, _) => (T::PointEdgeAB, [1.0, s - 1.0, -s, 0.0]),
        (1, _) => (T::PointEdgeBC, [1.0, 0.0, s - 1.0, -s]),
        _ => (T::PointEdgeCA, [1.0, -s, 0.0, s - 1.0]),
    };
    Closest {
        kind,
        diff,
        weights,
    }
}

/// Closest features of the edges `(ea0, ea1)` and `(eb0, eb1)`; weights
/// `[1 − s, s, −(1 − t), −t]` with the parameters `s` on A and `t` on B of the closest points.
pub fn edge_edge_closest(ea0: Vec3, ea1: Vec3, eb0: Vec3, eb1: Vec3) -> EdgeEdgeClosest {
    use EdgeEdgeDistanceType as T;
    let da = ea1 - ea0;
    let db = eb1 - eb0;
    let n = da.cross(db);
    let nn = n.dot(n);
    if nn > PARALLEL * da.dot(da) * db.dot(db) {
        let q = eb0 - ea0;
        let s = q.cross(db).dot(n) / nn;
        let t = q.cross(da).dot(n) / nn;
        if s > 0.0 && s < 1.0 && t > 0.0 && t < 1.0 {
            // The unconstrained minimum is inside: it is the global one.
            let diff = reject_plane(da * s - db * t - q, da, db);
            return Closest {
                kind: T::EaEb,
                diff,
                weights: [1.0 - s, s, t - 1.0, -t],
            };
        }
    }
    // The boundary of the parameter square: the nearest endpoint–segment pair.
    let cands = [
        point_segment(ea0, eb0, eb1),
        point_segment(ea1, eb0, eb1),
        point_segment(eb0, ea0, ea1),
        point_segment(eb1, ea0, ea1),
    ];
    let mut best = 0;
    let mut best_d2 = cands[0].2.dot(cands[0].2);
    for k in 1..4 {
        let d2 = cands[k].2.dot(cands[k].2);
        if d2 < best_d2 {
            best = k;
            best_d2 = d2;
        }
    }
    let (end, s, w) = cands[best];
    use SegmentEnd::{End, Interior, Start};
    // Candidates 2 and 3 measure from B to A: flip the difference.
    let diff = if best < 2 { w } else { -w };
    let (kind, weights) = match (best, end) {
        (0, Start) | (2, Start) => (T::Ea0Eb0, [1.0, 0.0, -1.0, 0.0]),
        (0, End) | (3, Start) => (T::Ea0Eb1, [1.0, 0.0, 0.0, -1.0]),
        (1, Start) | (2, End) => (T::Ea1Eb0, [0.0, 1.0, -1.0, 0.0]),
        (1, End) | (3, End) => (T::Ea1Eb1, [0.0, 1.0, 0.0, -1.0]),
        (0, Interior) => (T::Ea0Eb, [1.0, 0.0, s - 1.0, -s]),
        (1, Interior) => (T::Ea1Eb, [0.0, 1.0, s - 1.0, -s]),
        (2, Interior) => (T::EaEb0, [1.0 - s, s, -1.0, 0.0]),
        _ => (T::EaEb1, [1.0 - s, s, 0.0, -1.0]),
    };
    Closest {
        kind,
        diff,
        weights,
    }
}

/// Which feature pair of the point `p` and the triangle `(a, b, c)` is closest.
pub fn point_triangle_distance_type(
    p: Vec3,
    a: Vec3,
    b: Vec3,
    c: Vec3,
) -> PointTriangleDistanceType {
    point_triangle_closest(p, a, b, c).kind
}

/// Squared distance between the point `p` and the triangle `(a, b, c)`.
pub fn point_triangle_distance_squared(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> f32 {
    point_triangle_closest(p, a, b, c).dist_sq()
}

/// Gradient of the squared point–triangle distance with respect to `[p, a, b, c]`.
pub fn point_triangle_distance_squared_gradient(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> [Vec3; 4] {
    point_triangle_closest(p, a, b, c).gradient_squared()
}

/// Gradient of the point–triangle distance with respect to `[p, a, b, c]` (zeros where the
/// distance is zero).
pub fn point_triangle_distance_gradient(p: Vec3, a: Vec3, b: Vec3, c: Vec3) -> [Vec3; 4] {
    point_triangle_closest(p, a, b, c).gradient()
}

/// Which feature pair of the edges `(ea0, ea1)` and `(eb0, eb1)` is closest.
pub fn edge_edge_distance_type(ea0: Vec3, ea1: Vec3, eb0: Vec3, eb1: Vec3) -> EdgeEdgeDistanceType {
    edge_edge_closest(ea0, ea1, eb0, eb1).kind
}

/// Squared distance between the edges `(ea0, ea1)` and `(eb0, eb1)`.
pub fn edge_edge_distance_squared(ea0: Vec3, ea1: Vec3, eb0: Vec3, eb1: Vec3) -> f32 {
    edge_edge_closest(ea0, ea1, eb0, eb1).dist_sq()
}

/// Gradient of the squared edge–edge distance with respect to `[ea0, ea1, eb0, eb1]`.
pub fn edge_edge_distance_squared_gradient(
    ea0: Vec3,
    ea1: Vec3,
    eb0: Vec3,
    eb1: Vec3,
) -> [Vec3; 4] {
    edge_edge_closest(ea0, ea1, eb0, eb1).gradient_squared()
}

/// Gradient of the edge–edge distance with respect to `[ea0, ea1, eb0, eb1]` (zeros where
/// the distance is zero).
pub fn edge_edge_distance_gradient(ea0: Vec3, ea1: Vec3, eb0: Vec3, eb1: Vec3) -> [Vec3; 4] {
    edge_edge_closest(ea0, ea1, eb0, eb1).gradient()
}
