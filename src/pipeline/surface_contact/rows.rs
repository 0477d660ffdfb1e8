//! Contact rows: one per active primitive pair, an augmented-Lagrangian row on the pair's
//! distance linearised at the certified configuration X (Zheng, Luo, Li 2025, Eq. 10–14):
//!
//! ```text
//! c(x̂) = d(X) + Σ_k w_k n·(x̂_k − X_k) − δ ≥ 0
//! ```
//!
//! with n and w_k the closest-point direction and signed weights at X (`∂d/∂x_k = w_k n`),
//! so the row is signed and orientation-correct even when the iterate x̂ penetrates. In
//! AVBD units λ is a force (N) and the penalty μ a stiffness (N/m): the row's force on
//! point k is `γ max(0, λ − μc) w_k n`, its Hessian `γ μ w_k² n nᵀ` (kept while the row is
//! inactive, which is why inactive rows decay by Γ).
//!
//! Friction rows ride on each contact row as in AVBD's rigid contacts: a tangential
//! augmented-Lagrangian row on the pair's slip over the step (in the tangent plane of the
//! frame's start), whose multiplier λ_t (a force, carried from frame to frame) is clamped
//! to the cone μ_s F_n while the contact sticks and to μ_d F_n once it slides. (The paper's
//! IPC-style lagged smoothed friction makes a spring of stiffness 2μF_n/(ε_v h) between the
//! two sides, 10⁴ × m/h² at ε_v = 1e-4 m/s: Gauss–Seidel cannot move two stuck bodies
//! together in ten iterations, and a stack of two soft cubes drifted 4 cm in 1.3 s.)

use glam::{Vec3, Vec3A};

use crate::ccd::{edge_edge_closest, point_triangle_closest};

/// Unused point slot.
pub const NO_POINT: u32 = u32::MAX;

/// What a row's pair is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PairKind {
    /// A point against a triangle: `(point, triangle)`.
    PointTriangle,
    /// Two edges: `(edge, edge)`, the smaller index first.
    EdgeEdge,
    /// A point against a half-space: `(point, plane)`.
    PointPlane,
}

/// A candidate or active primitive pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pair {
    pub kind: PairKind,
    pub a: u32,
    pub b: u32,
}

/// One contact row.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub pair: Pair,
    /// The pair's points (`NO_POINT` unused), and their weights: `∂d/∂x_k = w_k n`.
    pub points: [u32; 4],
    pub weights: [f32; 4],
    /// Unit direction from the second primitive to the first, at X.
    pub normal: Vec3,
    /// Distance at X.
    pub dist: f32,
    /// Multiplier (N), decay factor, penalty (N/m).
    pub lambda: f32,
    pub gamma: f32,
    pub mu: f32,
    /// Static and dynamic friction coefficients of the pair.
    pub friction: [f32; 2],
    /// Friction's multiplier: the tangential force on the first side (N), in the tangent
    /// plane of the frame's start.
    pub lambda_t: Vec3,
    /// The normal and weights at the frame's start: the slip is measured with them.
    pub lagged_normal: Vec3,
    pub lagged_weights: [f32; 4],
    /// Whether the coarse operator of this frame holds the row's stiffness (rows made
    /// after it was assembled shorten its steps instead: `CoarseLevel::correct`).
    pub in_coarse: bool,
}

/// A row's friction at a slip: the force on the row's first side per unit weight, the
/// stiffness of the tangent plane per unit weight², and the plane's normal.
#[derive(Clone, Copy, Debug, Default)]
pub struct Friction {
    pub force: Vec3,
    pub stiffness: f32,
    pub normal: Vec3,
}

impl Row {
    pub fn new(pair: Pair, points: [u32; 4], mu: f32, friction: [f32; 2]) -> Self {
        Self {
            pair,
            points,
            weights: [0.0; 4],
            normal: Vec3::Y,
            dist: 0.0,
            lambda: 0.0,
            gamma: 1.0,
            mu,
            friction,
            lambda_t: Vec3::ZERO,
            lagged_normal: Vec3::Y,
            lagged_weights: [0.0; 4],
            in_coarse: false,
        }
    }

    /// Whether the row has friction.
    #[inline]
    pub fn has_friction(&self) -> bool {
        self.friction[0] > 0.0 || self.friction[1] > 0.0
    }

    /// The tangential force on the first side at the slip `rel = Σ w_k (x_k − xᵗ_k)`
    /// (frame-start weights) and the normal force `normal_force`: `λ_t − μ P rel` in the
    /// tangent plane P, within the cone `μ_s F_n`; outside it the contact slides and the
    /// force is `μ_d F_n` along it.
    #[inline]
    pub fn friction_force(&self, rel: Vec3, normal_force: f32) -> Vec3 {
        let n = self.lagged_normal;
        let u = rel - n * n.dot(rel);
        let f = self.lambda_t - u * self.mu;
        let [mu_s, mu_d] = self.friction;
        let len = f.length();
        if len > mu_s * normal_force {
            if len > 0.0 {
                f * (mu_d * normal_force / len)
            } else {
                Vec3::ZERO
            }
        } else {
            f
        }
    }

    /// The row's friction at a slip for the primal: the force, and the row's penalty over
    /// the tangent plane (the sliding force's Hessian is smaller; the penalty keeps the
    /// block SPD and the step short).
    #[inline]
    pub fn friction(&self, rel: Vec3, normal_force: f32) -> Friction {
        if !self.has_friction() || normal_force <= 0.0 {
            return Friction::default();
        }
        Friction {
            force: self.friction_force(rel, normal_force),
            stiffness: self.gamma * self.mu,
            normal: self.lagged_normal,
        }
    }

    /// The friction dual update at the slip `rel`: `λ_t ← clamp(λ_t − μ P rel)` with the
    /// row's new normal force.
    #[inline]
    pub fn update_friction(&mut self, rel: Vec3) {
        if self.has_friction() {
            self.lambda_t = self.friction_force(rel, self.gamma * self.lambda);
        }
    }

    /// Freezes the step's tangent plane and weights (the normal and weights at the frame's
    /// start) and turns the carried friction force into the new plane.
    pub fn lag(&mut self) {
        self.lagged_normal = self.normal;
        self.lagged_weights = self.weights;
        let n = self.normal;
        self.lambda_t -= n * n.dot(self.lambda_t);
    }

    /// The slip of the pair since the frame's start: `Σ w_k (now_k − start_k)`.
    #[inline]
    pub fn slip(&self, now: impl Fn(u32) -> Vec3A, start: impl Fn(u32) -> Vec3A) -> Vec3 {
        let mut rel = Vec3::ZERO;
        for k in 0..4 {
            let p = self.points[k];
            if p != NO_POINT && self.lagged_weights[k] != 0.0 {
                rel += Vec3::from(now(p) - start(p)) * self.lagged_weights[k];
            }
        }
        rel
    }

    /// Linearises the row at X (`at(k)`: point k's certified position; `plane`: the
    /// world normal and point of a half-space row).
    #[inline]
    pub fn linearise(&mut self, at: impl Fn(u32) -> Vec3, plane: Option<(Vec3, Vec3)>) {
        let x = self
            .points
            .map(|p| if p == NO_POINT { Vec3::ZERO } else { at(p) });
        let (d, normal, weights) = closest(self.pair.kind, x, plane);
        // At d = 0 the normal of the last linearisation is kept (a pair that touches was
        // linearised apart before: X is certified farther than ξ).
        if let Some(n) = normal {
            self.normal = n;
        }
        self.dist = d;
        self.weights = weights;
    }

    /// The row's value at the iterate (`now(k)`) relative to X (`then(k)`), minus the gap δ.
    #[inline]
    pub fn value(&self, now: impl Fn(u32) -> Vec3A, then: impl Fn(u32) -> Vec3A, gap: f32) -> f32 {
        let mut c = self.dist - gap;
        for k in 0..4 {
            let p = self.points[k];
            if p != NO_POINT && self.weights[k] != 0.0 {
                c += self.weights[k] * self.normal.dot(Vec3::from(now(p) - then(p)));
            }
        }
        c
    }

    /// The row's force magnitude at value `c`: `γ max(0, λ − μc)`.
    #[inline]
    pub fn force(&self, c: f32) -> f32 {
        self.gamma * (self.lambda - self.mu * c).max(0.0)
    }

    /// Dual update at value `c` (Alg. 2 lines 20–29 with the decay on the inactive
    /// branch, as the paper's text, appendix and official code have it): an active row
    /// (`c ≤ λ/μ`) takes `λ ← λ − μc`, `γ = 1`; an inactive one `λ = 0`, `γ ← Γγ`.
    #[inline]
    pub fn update(&mut self, c: f32, decay: f32, lambda_max: f32) {
        if c - self.lambda / self.mu <= 0.0 {
            self.lambda = (self.lambda - self.mu * c).min(lambda_max);
            self.gamma = 1.0;
        } else {
            self.lambda = 0.0;
            self.gamma *= decay;
        }
    }
}

/// The distance of a pair with points `x` (a half-space pair: its `plane`, normal and
/// point; the distance is then signed), the unit normal from the second primitive to the
/// first (`None` where they touch), and the weights: `∂d/∂x_k = w_k n`.
#[inline]
pub fn closest(
    kind: PairKind,
    x: [Vec3; 4],
    plane: Option<(Vec3, Vec3)>,
) -> (f32, Option<Vec3>, [f32; 4]) {
    let (diff, weights) = match kind {
        PairKind::PointTriangle => {
            let c = point_triangle_closest(x[0], x[1], x[2], x[3]);
            (c.diff, c.weights)
        }
        PairKind::EdgeEdge => {
            let c = edge_edge_closest(x[0], x[1], x[2], x[3]);
            (c.diff, c.weights)
        }
        PairKind::PointPlane => {
            let (n, p) = plane.expect("a half-space pair has a plane");
            return (n.dot(x[0] - p), Some(n), [1.0, 0.0, 0.0, 0.0]);
        }
    };
    let d = diff.length();
    let normal = (d > 0.0 && d.is_finite()).then(|| diff / d);
    (d, normal, weights)
}
