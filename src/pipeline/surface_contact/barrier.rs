//! The log-barrier baseline (`ContactModel::Barrier`): incremental potential contact (Li et
//! al. 2020) in the same vertex block descent, so the barrier-free method can be compared
//! with it on the same scenes, meshes and budget.
//!
//! Every candidate pair closer than δ at the iterate adds `b(d) = −κ (d − δ)² ln(d/δ)`,
//! evaluated at the current positions (no linearisation, no multiplier): its gradient
//! `b'(d) ∇d` and its Gauss–Newton block `b''(d) ∇d ∇dᵀ` (b'' > 0 below δ) go into the
//! vertex and body blocks. The iterate must stay free of intersections for the barrier to
//! mean anything, so each vertex's step is cut by CCD against its candidate pairs (the
//! other points held still: the per-vertex filtered step of VBD's IPC variant), and the
//! initial guess, the coarse step and every sweep end with the certified advance of
//! [`super::advance`] (which also guards the rigid bodies and the vertices of one colour
//! that move together) with the iterate snapped to it. κ is the augmented-Lagrangian
//! rows' penalty, `κ_c m/h²`. Friction is IPC's lagged smoothed friction: the normal force
//! and tangent plane of each pair at the frame's start, `f₁(|u|/(ε_v h))`.

use glam::{Mat3, Vec3, Vec3A};

use super::frame::{pair_friction, row_stiffness};
use super::geometry::{Owner, Pose};
use super::rows::{NO_POINT, Pair, PairKind, closest};
use super::{CoarseTerm, SurfaceContact, outer};
use crate::ccd::{
    AccdParams, DEFAULT_MAX_ITERS, close_pair_separation, edge_edge_ccd, point_triangle_ccd,
};
use crate::config::SolverConfig;
use crate::deformable::DeformableSet;
use crate::deformable::elastic::Block;
use crate::math::{Mat6, Vec6};
use crate::rigid::BodySet;

/// The barrier's per-frame data: candidates by point and by rigid body, and per candidate
/// its stiffness and lagged friction.
#[derive(Default)]
pub struct Barrier {
    by_point: (Vec<u32>, Vec<u32>),
    by_body: (Vec<u32>, Vec<u32>),
    pairs: Vec<PairData>,
}

/// One candidate's barrier stiffness κ (N/m), friction coefficient, and friction lagged at
/// the frame's start: normal force (N), normal and weights.
#[derive(Clone, Copy, Debug, Default)]
struct PairData {
    kappa: f32,
    mu: f32,
    force: f32,
    normal: Vec3,
    weights: [f32; 4],
}

/// `b'(d)` and `b''(d)` of `b(d) = −κ (d − δ)² ln(d/δ)` (zero from δ on).
#[inline]
pub fn barrier_derivatives(kappa: f32, d: f32, gap: f32) -> (f32, f32) {
    if d.is_nan() || d >= gap {
        return (0.0, 0.0);
    }
    // Below a thousandth of δ the filtered steps never go; the floor keeps b' finite.
    let d = d.max(1e-3 * gap);
    let (e, l) = (d - gap, (d / gap).ln());
    (
        -kappa * (2.0 * e * l + e * e / d),
        -kappa * (2.0 * l + 4.0 * e / d - e * e / (d * d)),
    )
}

/// `f₁(y)/y` of IPC's smoothed friction (`f₁(y) = 2y/ε − y²/ε²` below ε, 1 above).
#[inline]
fn f1_over_y(y: f32, eps: f32) -> f32 {
    if y < eps {
        2.0 / eps - y / (eps * eps)
    } else {
        1.0 / y
    }
}

/// CSR of `items` (pairs `(key, value)`) over `n` keys.
fn csr(n: usize, items: impl Iterator<Item = (u32, u32)> + Clone) -> (Vec<u32>, Vec<u32>) {
    let mut offsets = vec![0u32; n + 1];
    for (k, _) in items.clone() {
        offsets[k as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut values = vec![0u32; offsets[n] as usize];
    let mut cursor = offsets[..n].to_vec();
    for (k, v) in items {
        values[cursor[k as usize] as usize] = v;
        cursor[k as usize] += 1;
    }
    (offsets, values)
}

fn slice(csr: &(Vec<u32>, Vec<u32>), k: usize) -> &[u32] {
    let (o, items) = csr;
    if o.len() <= k + 1 {
        return &[];
    }
    &items[o[k] as usize..o[k + 1] as usize]
}

impl SurfaceContact {
    /// Indexes this frame's candidates for the barrier and lags their friction at the
    /// frame's start (after every broad phase).
    pub(crate) fn index_barrier(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
    ) {
        let g = &self.geometry;
        let h2 = cfg.dt * cfg.dt;
        let by_point = csr(
            g.point_count(),
            self.candidates.iter().enumerate().flat_map(|(c, pair)| {
                self.points_of(pair)
                    .into_iter()
                    .filter(|&p| p != NO_POINT)
                    .map(move |p| (p, c as u32))
            }),
        );
        let mut touched: Vec<(u32, u32)> = Vec::new();
        for (c, pair) in self.candidates.iter().enumerate() {
            let mut seen = [u32::MAX; 4];
            for (k, p) in self.points_of(pair).into_iter().enumerate() {
                if p == NO_POINT {
                    continue;
                }
                if let Owner::Rigid(b) = g.owner_of(set, p)
                    && !seen.contains(&b)
                {
                    seen[k] = b;
                    touched.push((b, c as u32));
                }
            }
        }
        let by_body = csr(bodies.len(), touched.iter().copied());
        let pairs = self
            .candidates
            .iter()
            .map(|pair| {
                let points = self.points_of(pair);
                let kappa = row_stiffness(cfg, set, bodies, g, &points, h2);
                let mu = pair_friction(set, bodies, self, pair, &points)[1];
                let mut data = PairData {
                    kappa,
                    mu,
                    ..Default::default()
                };
                if let Some((d, n, w)) = self.closest_at(pair, |p| self.start_at(p)) {
                    data.force = -barrier_derivatives(kappa, d, cfg.contact_gap).0;
                    data.normal = n;
                    data.weights = w;
                }
                data
            })
            .collect();
        self.barrier = Barrier {
            by_point,
            by_body,
            pairs,
        };
    }

    /// The distance, normal and weights of `pair` with its points at `at(p)`.
    #[inline]
    fn closest_at(&self, pair: &Pair, at: impl Fn(u32) -> Vec3A) -> Option<(f32, Vec3, [f32; 4])> {
        let pts = self.points_of(pair);
        let x = pts.map(|p| {
            if p == NO_POINT {
                Vec3::ZERO
            } else {
                Vec3::from(at(p))
            }
        });
        let plane = (pair.kind == PairKind::PointPlane).then(|| self.plane(pair.b));
        let (d, n, w) = closest(pair.kind, x, plane);
        n.map(|n| (d, n, w))
    }

    /// The barrier and friction terms of deformable vertex `v` at the iterate.
    pub(crate) fn barrier_vertex_terms(
        &self,
        cfg: &SolverConfig,
        v: usize,
        x: &[Vec3A],
        poses: &[Pose],
    ) -> Block {
        let mut out = Block::default();
        let now = |p| self.iterate_at(p, x, poses);
        let eps = cfg.barrier_friction_velocity * cfg.dt;
        for &c in slice(&self.barrier.by_point, v) {
            let pair = &self.candidates[c as usize];
            let data = &self.barrier.pairs[c as usize];
            let pts = self.points_of(pair);
            let k = pts
                .iter()
                .position(|&p| p == v as u32)
                .expect("pair lists its points");
            if let Some((d, n, w)) = self.closest_at(pair, now) {
                let (b1, b2) = barrier_derivatives(data.kappa, d, cfg.contact_gap);
                out.f -= n * (b1 * w[k]);
                out.h += outer(n, n) * (b2 * w[k] * w[k]);
            }
            let wt = data.weights[k];
            if data.force > 0.0 && data.mu > 0.0 && wt != 0.0 {
                let (force, stiffness) = self.lagged_friction(data, &pts, now, eps);
                let t = data.normal;
                out.f += force * wt;
                out.h += (Mat3::IDENTITY - outer(t, t)) * (stiffness * wt * wt);
            }
        }
        out
    }

    /// The lagged friction of a pair at the iterate: the force on its first side and the
    /// stiffness over the tangent plane (per unit weight²).
    fn lagged_friction(
        &self,
        data: &PairData,
        pts: &[u32; 4],
        now: impl Fn(u32) -> Vec3A,
        eps: f32,
    ) -> (Vec3, f32) {
        let mut u = Vec3::ZERO;
        for k in 0..4 {
            if pts[k] != NO_POINT && data.weights[k] != 0.0 {
                u += Vec3::from(now(pts[k]) - self.start_at(pts[k])) * data.weights[k];
            }
        }
        let n = data.normal;
        let ut = u - n * n.dot(u);
        let s = data.mu * data.force * f1_over_y(ut.length(), eps);
        (-ut * s, s)
    }

    /// Adds the barrier and friction terms of rigid body `i` to its 6×6 system.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_barrier_body_terms(
        &self,
        cfg: &SolverConfig,
        i: usize,
        x: &[Vec3A],
        poses: &[Pose],
        f: &mut Vec6,
        hm: &mut Mat6,
    ) {
        let g = &self.geometry;
        let pose = &poses[i];
        let now = |p| self.iterate_at(p, x, poses);
        let eps = cfg.barrier_friction_velocity * cfg.dt;
        let jacobian = |pts: &[u32; 4], weights: &[f32; 4], d: Vec3| -> Vec6 {
            g.body_jacobian(i, pose.q, pts, weights, d)
        };
        for &c in slice(&self.barrier.by_body, i) {
            let pair = &self.candidates[c as usize];
            let data = &self.barrier.pairs[c as usize];
            let pts = self.points_of(pair);
            if let Some((d, n, w)) = self.closest_at(pair, now) {
                let (b1, b2) = barrier_derivatives(data.kappa, d, cfg.contact_gap);
                if b2 > 0.0 {
                    let j = jacobian(&pts, &w, n);
                    for k in 0..6 {
                        f[k] -= b1 * j[k];
                    }
                    hm.add_outer(&j, b2);
                }
            }
            if data.force > 0.0 && data.mu > 0.0 {
                let (force, stiffness) = self.lagged_friction(data, &pts, now, eps);
                let jf = jacobian(&pts, &data.weights, force);
                for k in 0..6 {
                    f[k] += jf[k];
                }
                let (t1, t2) = data.normal.any_orthonormal_pair();
                hm.add_outer(&jacobian(&pts, &data.weights, t1), stiffness);
                hm.add_outer(&jacobian(&pts, &data.weights, t2), stiffness);
            }
        }
    }

    /// The largest fraction of vertex `v`'s step `from → to` that CCD certifies against
    /// its candidate pairs, the other points held at the iterate.
    pub(crate) fn barrier_step(
        &self,
        cfg: &SolverConfig,
        v: usize,
        to: Vec3A,
        x: &[Vec3A],
        poses: &[Pose],
    ) -> f32 {
        let xi = cfg.contact_min_separation;
        let params = AccdParams {
            eta: cfg.ccd_eta,
            max_iters: DEFAULT_MAX_ITERS,
        };
        let mut t = 1.0f32;
        for &c in slice(&self.barrier.by_point, v) {
            let pair = &self.candidates[c as usize];
            let pts = self.points_of(pair);
            let start = pts.map(|p| {
                if p == NO_POINT {
                    Vec3::ZERO
                } else {
                    Vec3::from(self.iterate_at(p, x, poses))
                }
            });
            let mut end = start;
            for k in 0..4 {
                if pts[k] == v as u32 {
                    end[k] = Vec3::from(to);
                }
            }
            // Closer than ξ: half the start distance, never below the rounding of the
            // coordinates (as `SurfaceContact::toi`).
            let close = |d0: f32, more: &[Vec3]| {
                close_pair_separation(d0, start.iter().chain(&end).chain(more))
            };
            let reach = match pair.kind {
                PairKind::PointPlane => {
                    let (n, at) = self.plane(pair.b);
                    let (d0, d1) = (n.dot(start[0] - at), n.dot(end[0] - at));
                    let sep = if d0 > xi { xi } else { close(d0, &[at]) };
                    if d1 > sep || d1 >= d0 {
                        1.0
                    } else if d0 <= sep {
                        0.0
                    } else {
                        ((d0 - sep) / (d0 - d1) * (1.0 - 1e-5)).clamp(0.0, 1.0)
                    }
                }
                kind => {
                    let run = |sep: f32| match kind {
                        PairKind::PointTriangle => point_triangle_ccd(
                            start[0], start[1], start[2], start[3], end[0], end[1], end[2], end[3],
                            sep, &params,
                        ),
                        _ => edge_edge_ccd(
                            start[0], start[1], start[2], start[3], end[0], end[1], end[2], end[3],
                            sep, &params,
                        ),
                    };
                    match run(xi) {
                        // Closer than ξ already: certified against half the start distance.
                        Some(0.0) => match closest(kind, start, None).0 {
                            d0 if d0 > 0.0 => run(close(d0, &[])).unwrap_or(1.0),
                            _ => 0.0,
                        },
                        r => r.unwrap_or(1.0),
                    }
                }
            };
            t = t.min(reach);
            if t <= 0.0 {
                break;
            }
        }
        t
    }

    /// The force the barrier and its friction put on rigid body `i` at the step's end
    /// (X), as [`SurfaceContact::force_on_body`] reports the rows' force.
    pub(crate) fn barrier_force_on_body(&self, cfg: &SolverConfig, i: usize) -> Vec3 {
        let g = &self.geometry;
        let at = |p| self.certified_at(p);
        let eps = cfg.barrier_friction_velocity * cfg.dt;
        let on_body = |p: u32| {
            p != NO_POINT
                && p >= g.soft_points
                && g.rigid_points[(p - g.soft_points) as usize].0 as usize == i
        };
        let mut total = Vec3::ZERO;
        for (c, pair) in self.candidates.iter().enumerate() {
            let pts = self.points_of(pair);
            let data = &self.barrier.pairs[c];
            // The body's share of the pair's weights (a half-space is the second side).
            let share = |w: &[f32; 4]| -> f32 {
                if pair.kind == PairKind::PointPlane {
                    if g.planes[pair.b as usize].0 as usize == i {
                        -1.0
                    } else {
                        0.0
                    }
                } else {
                    (0..4).filter(|&k| on_body(pts[k])).map(|k| w[k]).sum()
                }
            };
            if let Some((d, n, w)) = self.closest_at(pair, at) {
                let s = share(&w);
                if s != 0.0 {
                    total -= n * (barrier_derivatives(data.kappa, d, cfg.contact_gap).0 * s);
                }
            }
            let s = share(&data.weights);
            if s != 0.0 && data.force > 0.0 && data.mu > 0.0 {
                total += self.lagged_friction(data, &pts, at, eps).0 * s;
            }
        }
        total
    }

    /// The barrier's coarse terms of vertex `v` at the iterate.
    pub(crate) fn barrier_coarse_terms(
        &self,
        cfg: &SolverConfig,
        v: usize,
        x: &[Vec3A],
        poses: &[Pose],
        mut f: impl FnMut(&CoarseTerm),
    ) {
        let now = |p| self.iterate_at(p, x, poses);
        let eps = cfg.barrier_friction_velocity * cfg.dt;
        for &c in slice(&self.barrier.by_point, v) {
            let pair = &self.candidates[c as usize];
            let data = &self.barrier.pairs[c as usize];
            let pts = self.points_of(pair);
            let Some((d, n, w)) = self.closest_at(pair, now) else {
                continue;
            };
            let k_n = barrier_derivatives(data.kappa, d, cfg.contact_gap).1;
            let k_t = if data.force > 0.0 && data.mu > 0.0 {
                self.lagged_friction(data, &pts, now, eps).1
            } else {
                0.0
            };
            if k_n > 0.0 || k_t > 0.0 {
                f(&CoarseTerm {
                    points: pts,
                    weights: w,
                    normal: n,
                    k_n,
                    lagged_weights: data.weights,
                    tangent_normal: data.normal,
                    k_t,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// b' and b'' against central differences of b(d) = −κ (d − δ)² ln(d/δ) in f64, over
    /// the barrier's range; zero from δ on; b'' > 0 (the block stays SPD).
    #[test]
    fn derivatives_match_finite_differences() {
        let (kappa, gap) = (2.0e4f64, 1e-3f64);
        let b = |d: f64| -kappa * (d - gap).powi(2) * (d / gap).ln();
        let db = |d: f64| -kappa * (2.0 * (d - gap) * (d / gap).ln() + (d - gap).powi(2) / d);
        for i in 1..100 {
            let d = gap * (0.01 + 0.98 * i as f64 / 100.0);
            let e = 1e-9;
            let fd1 = (b(d + e) - b(d - e)) / (2.0 * e);
            let fd2 = (db(d + e) - db(d - e)) / (2.0 * e);
            let (d1, d2) = barrier_derivatives(kappa as f32, d as f32, gap as f32);
            assert!(
                ((d1 as f64 - fd1) / fd1).abs() < 1e-3,
                "b'({d}): {d1} vs {fd1}"
            );
            assert!(
                ((d2 as f64 - fd2) / fd2).abs() < 1e-3,
                "b''({d}): {d2} vs {fd2}"
            );
            assert!(d1 < 0.0 && d2 > 0.0);
        }
        assert_eq!(barrier_derivatives(1.0, 1e-3, 1e-3), (0.0, 0.0));
        assert_eq!(barrier_derivatives(1.0, 2e-3, 1e-3), (0.0, 0.0));
        assert_eq!(barrier_derivatives(1.0, f32::NAN, 1e-3), (0.0, 0.0));
    }
}
