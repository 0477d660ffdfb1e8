//! Penetration-free contact of deformable bodies without barriers (Zheng, Luo, Li 2025),
//! adapted to vertex block descent with a fixed iteration budget.
//!
//! Two configurations are kept: the solver's iterate x̂, free to penetrate, and a certified
//! configuration X, which starts the frame at xᵗ and is intersection-free at every moment.
//! Each iteration:
//!
//! 1. the sweeps (rigid bodies, deformable vertices) take the contact rows of the active
//!    set C as augmented-Lagrangian rows on the distances linearised at X ([`rows`]);
//! 2. the dual update moves each row's λ by the paper's slack rule, decays inactive rows
//!    and drops the faded ones;
//! 3. the advance ([`advance`]): continuous collision detection of every candidate pair
//!    from X to x̂ (additive CCD with a minimum separation, [`crate::ccd`]); each island of
//!    objects that can touch moves its X by the largest certified fraction α of the way to
//!    x̂; the pairs CCD reports, filtered to the earliest time of impact of each point,
//!    join C; every row is linearised again at the new X.
//!
//! The frame returns X, so every frame end is intersection-free whatever the budget; a
//! short budget costs motion (the lost motion β = Π(1 − α) of each island), not safety.
//! Candidates come from one broad phase per frame over per-point motion cages
//! ([`broad_phase`]): deformable iterates are kept inside their cages, so pairs outside the
//! candidate set cannot meet (an iterate that leaves one makes the broad phase run again,
//! or, with `SolverConfig::contact_cage_rebuild` off, stops its island where its cages
//! end). Rigid colliders take part through their tessellated
//! surfaces (dynamic bodies two-way, through their 6×6 blocks), half-spaces as planes.

pub mod advance;
pub mod barrier;
pub mod broad_phase;
pub mod cages;
pub mod frame;
pub mod geometry;
pub mod inversion;
pub mod islands;
pub mod rows;
pub mod start;

use std::collections::HashMap;

use glam::{Mat3, Vec3, Vec3A};

use crate::config::SolverConfig;
use crate::deformable::DeformableSet;
use crate::deformable::elastic::Block;
use crate::math::{Mat6, Vec6};
use crate::report::SurfaceContactStats;
use crate::rigid::BodySet;
use geometry::{Geometry, Owner, Pose};
use rows::{NO_POINT, Pair, Row};

use super::IterateRecord;

/// The surface-contact state: geometry, this frame's candidates, cages, islands and X,
/// and the active set, which persists from frame to frame.
#[derive(Default)]
pub struct SurfaceContact {
    /// What the geometry was built from: the deformables' topology and the bodies.
    generation: (u64, usize, u64),
    pub(crate) geometry: Geometry,
    /// Certified position X of every deformable vertex, and its position xᵗ at the
    /// frame's start.
    pub(crate) certified: Vec<Vec3A>,
    pub(crate) start: Vec<Vec3A>,
    /// Certified and start poses of every rigid body (static ones never move).
    pub(crate) certified_pose: Vec<Pose>,
    pub(crate) start_pose: Vec<Pose>,
    /// Where each point may go before the broad phase must run again.
    pub(crate) cages: cages::Cages,
    /// This frame's candidate pairs, and a lower bound on each one's distance at the
    /// cages' reference R.
    pub(crate) candidates: Vec<Pair>,
    pub(crate) candidate_lower: Vec<f32>,
    /// Counts the broad phases run: what the candidates, cages and islands of this
    /// frame were built by (the GPU backend uploads them again only when it changes).
    pub(crate) candidate_build: u64,
    /// Per object (deformables, then rigid bodies): its island; per island: its lost
    /// motion β.
    pub(crate) island_of: Vec<u32>,
    pub(crate) beta: Vec<f32>,
    /// The largest share of a move an advance cut this frame (1 − α).
    pub(crate) largest_cut: f32,
    /// Per island (its root): whether it touches a rigid body or a half-space.
    pub(crate) anchored: Vec<bool>,
    /// Rigid bodies that share a candidate pair with a deformable: their frame ends at
    /// their certified pose.
    pub(crate) coupled: Vec<bool>,
    /// The active set and its index.
    pub(crate) rows: Vec<Row>,
    pub(crate) row_of: HashMap<Pair, u32>,
    /// Rows by point and by rigid body (CSR), rebuilt when the rows change.
    pub(crate) by_point: (Vec<u32>, Vec<u32>),
    pub(crate) by_body: (Vec<u32>, Vec<u32>),
    pub(crate) stats: SurfaceContactStats,
    /// (deformable, rigid body) pairs linked by an attachment: they do not collide.
    pub(crate) linked: Vec<(u32, u32)>,
    /// The log-barrier baseline's candidates by point and body (`ContactModel::Barrier`).
    pub(crate) barrier: barrier::Barrier,
    /// The broad phase's BVHs, kept from frame to frame.
    pub(crate) tree_cache: broad_phase::TreeCache,
    /// GPU backend: whether this frame's step was run again with the rows its first run
    /// made already in the active set (`gpu::soft_contact`).
    pub(crate) seeded: bool,
    /// GPU backend: this run again is the frame's second, for a first run again that left
    /// its cages too: its comoving cages take the cross terms (`Cages::build`).
    pub(crate) cross_cages: bool,
    /// GPU backend: the deformables' final iterate of the step's first run, which the run
    /// again's cages hold too (empty otherwise).
    pub(crate) reached: Vec<Vec3A>,
    /// GPU backend: the device that runs the broad phase (`gpu::contact_broad`), or none
    /// (the CPU's BVHs).
    pub(crate) device_broad_phase: Option<std::sync::Arc<dyn DeviceBroadPhase>>,
    /// GPU backend: where the current candidates' first ones came from the device, its
    /// token for their records and how many they are (the half-space pairs follow them).
    pub(crate) device_candidates: Option<(u64, usize)>,
    /// Whether a device broad phase failed (its first error was printed).
    pub(crate) device_broad_phase_failed: bool,
}

/// A broad phase that runs elsewhere (the GPU backend's device): the point–triangle and
/// edge–edge candidates of the contact state's current cages, sorted, each with a lower
/// bound on its distance at R no higher than the CPU's, and a token naming the device's
/// copy of their records (which the step's upload takes instead of the host's), or an
/// error (the CPU's BVHs then find the same candidates). Half-space pairs stay the host's.
pub trait DeviceBroadPhase: Send + Sync {
    fn candidates(
        &self,
        contact: &SurfaceContact,
        cfg: &SolverConfig,
        owner: &[u32],
    ) -> Result<(Vec<Pair>, Vec<f32>, u64), String>;
}

/// A contact term of the coarse operator: `k_n w_k w_l n nᵀ` between the pair's points k
/// and l, and `k_t w'_k w'_l (I − t tᵀ)` over the frame-start tangent plane (normal `t`,
/// weights `w'`).
pub(crate) struct CoarseTerm {
    pub points: [u32; 4],
    pub weights: [f32; 4],
    pub normal: Vec3,
    pub k_n: f32,
    pub lagged_weights: [f32; 4],
    pub tangent_normal: Vec3,
    pub k_t: f32,
}

#[inline]
fn outer(a: Vec3, b: Vec3) -> Mat3 {
    Mat3::from_cols(a * b.x, a * b.y, a * b.z)
}

/// Objects: deformable `b` is object `b`, rigid body `i` object `deformables + i`.
#[inline]
fn object(set: &DeformableSet, o: Owner) -> usize {
    match o {
        Owner::Soft(b) => b as usize,
        Owner::Rigid(i) => set.len() + i as usize,
    }
}

impl SurfaceContact {
    /// Whether there is anything to do: deformables with a surface, and contact on
    /// ([`crate::SolverConfig::deformable_contact`]).
    pub fn active(cfg: &crate::config::SolverConfig, set: &DeformableSet) -> bool {
        cfg.deformable_contact && !set.surface_triangles.is_empty()
    }

    /// Rigid body `i`'s pose at the current iterate.
    #[inline]
    fn iterate_pose(bodies: &BodySet, iterate: &[IterateRecord], i: usize) -> Pose {
        let p = iterate[i].pose(&bodies.poses[i]);
        Pose { p: p.p(), q: p.q() }
    }

    /// Point `p`'s certified position.
    #[inline]
    pub(crate) fn certified_at(&self, p: u32) -> Vec3A {
        let g = &self.geometry;
        if p < g.soft_points {
            self.certified[p as usize]
        } else {
            let (b, r) = g.rigid_points[(p - g.soft_points) as usize];
            self.certified_pose[b as usize].apply(r)
        }
    }

    /// Point `p`'s position at the frame's start.
    #[inline]
    pub(crate) fn start_at(&self, p: u32) -> Vec3A {
        let g = &self.geometry;
        if p < g.soft_points {
            self.start[p as usize]
        } else {
            let (b, r) = g.rigid_points[(p - g.soft_points) as usize];
            self.start_pose[b as usize].apply(r)
        }
    }

    /// Point `p`'s position at the iterate.
    #[inline]
    pub(crate) fn iterate_at(&self, p: u32, x: &[Vec3A], poses: &[Pose]) -> Vec3A {
        let g = &self.geometry;
        if p < g.soft_points {
            x[p as usize]
        } else {
            let (b, r) = g.rigid_points[(p - g.soft_points) as usize];
            poses[b as usize].apply(r)
        }
    }

    /// The rows of point `p`.
    #[inline]
    pub(crate) fn rows_of_point(&self, p: usize) -> &[u32] {
        let (o, items) = &self.by_point;
        if o.len() <= p + 1 {
            return &[];
        }
        &items[o[p] as usize..o[p + 1] as usize]
    }

    /// The rows of rigid body `i`.
    #[inline]
    pub(crate) fn rows_of_body(&self, i: usize) -> &[u32] {
        let (o, items) = &self.by_body;
        if o.len() <= i + 1 {
            return &[];
        }
        &items[o[i] as usize..o[i + 1] as usize]
    }

    /// Rebuilds the pair → row map and the per-point and per-body row lists.
    pub(crate) fn reindex_rows(&mut self, set: &DeformableSet, bodies: usize) {
        self.row_of = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| (r.pair, i as u32))
            .collect();
        self.index_rows(set, bodies);
    }

    /// Rebuilds the per-point and per-body row lists.
    pub(crate) fn index_rows(&mut self, set: &DeformableSet, bodies: usize) {
        let n = self.geometry.point_count();
        let g = &self.geometry;
        let (offsets, items) = &mut self.by_point;
        offsets.clear();
        offsets.resize(n + 1, 0);
        for r in &self.rows {
            for &p in r.points.iter().filter(|&&p| p != NO_POINT) {
                offsets[p as usize + 1] += 1;
            }
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        items.clear();
        items.resize(offsets[n] as usize, 0);
        let mut cursor: Vec<u32> = offsets[..n].to_vec();
        for (ri, r) in self.rows.iter().enumerate() {
            for &p in r.points.iter().filter(|&&p| p != NO_POINT) {
                items[cursor[p as usize] as usize] = ri as u32;
                cursor[p as usize] += 1;
            }
        }
        // By rigid body: each row once per body it touches.
        let (offsets, items) = &mut self.by_body;
        offsets.clear();
        offsets.resize(bodies + 1, 0);
        let body_of = |p: u32| match g.owner_of(set, p) {
            Owner::Rigid(i) => Some(i),
            Owner::Soft(_) => None,
        };
        let mut touched: Vec<(u32, u32)> = Vec::new();
        for (ri, r) in self.rows.iter().enumerate() {
            let mut seen: [u32; 4] = [u32::MAX; 4];
            for (k, &p) in r.points.iter().enumerate() {
                if p == NO_POINT {
                    continue;
                }
                if let Some(b) = body_of(p)
                    && !seen.contains(&b)
                {
                    seen[k] = b;
                    touched.push((b, ri as u32));
                }
            }
        }
        for &(b, _) in &touched {
            offsets[b as usize + 1] += 1;
        }
        for i in 0..bodies {
            offsets[i + 1] += offsets[i];
        }
        items.clear();
        items.resize(offsets[bodies] as usize, 0);
        let mut cursor: Vec<u32> = offsets[..bodies].to_vec();
        for (b, ri) in touched {
            items[cursor[b as usize] as usize] = ri;
            cursor[b as usize] += 1;
        }
    }

    /// The world normal and point of half-space `plane` at the certified pose.
    #[inline]
    pub(crate) fn plane(&self, plane: u32) -> (Vec3, Vec3) {
        let (b, n, p) = self.geometry.planes[plane as usize];
        let pose = &self.certified_pose[b as usize];
        (pose.q * n, Vec3::from(pose.apply(p)))
    }

    /// Linearises every row at X.
    pub(crate) fn linearise_rows(&mut self) {
        let mut rows = std::mem::take(&mut self.rows);
        for r in &mut rows {
            let plane = (r.pair.kind == rows::PairKind::PointPlane).then(|| self.plane(r.pair.b));
            r.linearise(|p| Vec3::from(self.certified_at(p)), plane);
        }
        self.rows = rows;
    }

    /// The contact terms of deformable vertex `v` at the iterate (`x`: vertices, `poses`:
    /// rigid bodies): force and 3×3 block, normal rows and their friction.
    #[inline]
    pub(crate) fn vertex_terms(
        &self,
        cfg: &SolverConfig,
        v: usize,
        x: &[Vec3A],
        poses: &[Pose],
    ) -> Block {
        let mut out = Block::default();
        let now = |p| self.iterate_at(p, x, poses);
        for &ri in self.rows_of_point(v) {
            let r = &self.rows[ri as usize];
            let c = r.value(now, |p| self.certified_at(p), cfg.contact_gap);
            let f = r.force(c);
            let k = r
                .points
                .iter()
                .position(|&p| p == v as u32)
                .expect("row lists its points");
            let w = r.weights[k];
            let n = r.normal;
            out.f += n * (f * w);
            out.h += outer(n, n) * (r.gamma * r.mu * w * w);
            let wt = r.lagged_weights[k];
            if f > 0.0 && wt != 0.0 && r.has_friction() {
                let fr = r.friction(r.slip(now, |p| self.start_at(p)), f);
                let t = fr.normal;
                out.f += fr.force * wt;
                out.h += (Mat3::IDENTITY - outer(t, t)) * (fr.stiffness * wt * wt);
            }
        }
        out
    }

    /// Calls `f` with each contact term of deformable vertex `v` for the coarse operator
    /// (at the iterate `x`, `poses`): the rows the operator takes (augmented Lagrangian:
    /// `γμ`, friction's penalty), or the candidate pairs within δ (barrier: `b''(d)`,
    /// friction's smoothed stiffness).
    pub(crate) fn for_each_coarse_term(
        &self,
        cfg: &SolverConfig,
        v: usize,
        x: &[Vec3A],
        poses: &[Pose],
        f: impl FnMut(&CoarseTerm),
    ) {
        match cfg.contact_model {
            crate::config::ContactModel::Barrier => self.barrier_coarse_terms(cfg, v, x, poses, f),
            crate::config::ContactModel::AugmentedLagrangian => {
                let mut f = f;
                for &ri in self.rows_of_point(v) {
                    let r = &self.rows[ri as usize];
                    let k = r.gamma * r.mu;
                    f(&CoarseTerm {
                        points: r.points,
                        weights: r.weights,
                        normal: r.normal,
                        k_n: k,
                        lagged_weights: r.lagged_weights,
                        tangent_normal: r.lagged_normal,
                        k_t: if r.has_friction() { k } else { 0.0 },
                    });
                }
            }
        }
    }

    /// `δᵀ ΔA δ` of the rows the coarse operators do not hold yet (made since they were
    /// assembled) with a point among the deformable vertices `body`: their terms of the
    /// operator (as `for_each_coarse_term` gives them to its assembly) along the coarse
    /// step `step(v)` of those vertices, the other side held still.
    pub(crate) fn fresh_stiffness(
        &self,
        body: std::ops::Range<usize>,
        step: &(dyn Fn(usize) -> glam::DVec3 + Sync),
    ) -> f64 {
        let inside = |p: u32| p != NO_POINT && body.contains(&(p as usize));
        let mut sum = 0.0;
        for v in body.clone() {
            for &ri in self.rows_of_point(v) {
                let r = &self.rows[ri as usize];
                // Each row once: at its first point in the body.
                if r.in_coarse || r.points.iter().find(|&&p| inside(p)) != Some(&(v as u32)) {
                    continue;
                }
                let (mut u, mut ut) = (glam::DVec3::ZERO, glam::DVec3::ZERO);
                for (k, &p) in r.points.iter().enumerate() {
                    if inside(p) {
                        let s = step(p as usize);
                        u += s * r.weights[k] as f64;
                        ut += s * r.lagged_weights[k] as f64;
                    }
                }
                let k = (r.gamma * r.mu) as f64;
                sum += k * r.normal.as_dvec3().dot(u).powi(2);
                if r.has_friction() {
                    let t = r.lagged_normal.as_dvec3();
                    sum += k * (ut.length_squared() - t.dot(ut).powi(2));
                }
            }
        }
        sum
    }

    /// Adds the contact rows of rigid body `i` to its 6×6 system at the iterate (`poses[i]`
    /// is the body's own iterate: each body is solved once per sweep, after the refresh).
    pub(crate) fn add_body_terms(
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
        let jacobian = |r: &Row, weights: &[f32; 4], d: Vec3| -> Vec6 {
            g.body_jacobian(i, pose.q, &r.points, weights, d)
        };
        for &ri in self.rows_of_body(i) {
            let r = &self.rows[ri as usize];
            let c = r.value(now, |p| self.certified_at(p), cfg.contact_gap);
            let j = jacobian(r, &r.weights, r.normal);
            let force = r.force(c);
            for d in 0..6 {
                f[d] += force * j[d];
            }
            hm.add_outer(&j, r.gamma * r.mu);
            if force > 0.0 && r.has_friction() {
                let fr = r.friction(r.slip(now, |p| self.start_at(p)), force);
                {
                    // Force along the slip, stiffness over the tangent plane (two directions).
                    let jf = jacobian(r, &r.lagged_weights, fr.force);
                    for d in 0..6 {
                        f[d] += jf[d];
                    }
                    let (t1, t2) = fr.normal.any_orthonormal_pair();
                    hm.add_outer(&jacobian(r, &r.lagged_weights, t1), fr.stiffness);
                    hm.add_outer(&jacobian(r, &r.lagged_weights, t2), fr.stiffness);
                }
            }
        }
    }

    /// Dual update of every row at the iterate; drops the rows whose decay fell below the
    /// threshold.
    pub(crate) fn dual_update(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: usize,
        x: &[Vec3A],
        poses: &[Pose],
    ) {
        let values: Vec<f32> = self
            .rows
            .iter()
            .map(|r| {
                r.value(
                    |p| self.iterate_at(p, x, poses),
                    |p| self.certified_at(p),
                    cfg.contact_gap,
                )
            })
            .collect();
        let slips: Vec<Vec3> = self
            .rows
            .iter()
            .map(|r| r.slip(|p| self.iterate_at(p, x, poses), |p| self.start_at(p)))
            .collect();
        for ((r, c), slip) in self.rows.iter_mut().zip(values).zip(slips) {
            r.update(c, cfg.contact_decay, cfg.lambda_max);
            r.update_friction(slip);
        }
        let before = self.rows.len();
        self.rows.retain(|r| r.gamma >= cfg.contact_drop);
        if self.rows.len() != before {
            self.reindex_rows(set, bodies);
        }
    }

    /// The rigid bodies' iterate poses (moving bodies) or their start poses.
    pub(crate) fn iterate_poses(
        &self,
        bodies: &BodySet,
        iterate: &[IterateRecord],
        out: &mut Vec<Pose>,
    ) {
        out.clear();
        out.extend((0..bodies.len()).map(|i| {
            if geometry::moves(bodies, i) {
                Self::iterate_pose(bodies, iterate, i)
            } else {
                self.start_pose[i]
            }
        }));
    }

    /// The force the deformables' contact rows put on rigid body `i` at the end of the
    /// last step (N): the normal and friction multipliers.
    /// Zero if the bodies changed since (the rows refer to the step's bodies).
    pub fn force_on_body(
        &self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        i: usize,
    ) -> Vec3 {
        if self.generation != frame::generation(set, bodies) {
            return Vec3::ZERO;
        }
        if cfg.contact_model == crate::config::ContactModel::Barrier {
            return self.barrier_force_on_body(cfg, i);
        }
        let g = &self.geometry;
        let on_body = |p: u32| {
            p != NO_POINT
                && p >= g.soft_points
                && g.rigid_points[(p - g.soft_points) as usize].0 as usize == i
        };
        let mut total = Vec3::ZERO;
        for &ri in self.rows_of_body(i) {
            let r = &self.rows[ri as usize];
            let (mut w, mut wt) = (0.0, 0.0);
            for k in 0..4 {
                if on_body(r.points[k]) {
                    w += r.weights[k];
                    wt += r.lagged_weights[k];
                }
            }
            total += r.normal * (r.gamma * r.lambda * w) + r.lambda_t * wt;
        }
        if g.planes.iter().any(|pl| pl.0 as usize == i) {
            for r in self.rows.iter().filter(|r| {
                r.pair.kind == rows::PairKind::PointPlane
                    && g.planes[r.pair.b as usize].0 as usize == i
            }) {
                // The half-space is the row's second side: weight −1.
                total -= r.normal * (r.gamma * r.lambda) + r.lambda_t;
            }
        }
        total
    }

    /// The frame's contact statistics.
    pub fn stats(&self) -> SurfaceContactStats {
        self.stats
    }

    /// Sums `f` over the rows' objects: what a row does to the island structure.
    pub(crate) fn object_of_point(&self, set: &DeformableSet, p: u32) -> usize {
        object(set, self.geometry.owner_of(set, p))
    }
}
