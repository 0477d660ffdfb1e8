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
//! candidate set cannot meet. Rigid colliders take part through their tessellated
//! surfaces (dynamic bodies two-way, through their 6×6 blocks), half-spaces as planes.

pub mod advance;
pub mod broad_phase;
pub mod geometry;
pub mod rows;

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
    /// Certified position X of every deformable vertex.
    pub(crate) certified: Vec<Vec3A>,
    /// Certified and start poses of every rigid body (static ones never move).
    pub(crate) certified_pose: Vec<Pose>,
    pub(crate) start_pose: Vec<Pose>,
    /// Per point: its motion cage (deformable iterates are clamped into it).
    pub(crate) cage: Vec<(Vec3A, Vec3A)>,
    /// This frame's candidate pairs.
    pub(crate) candidates: Vec<Pair>,
    /// Per object (deformables, then rigid bodies): its island; per island: its lost
    /// motion β.
    pub(crate) island_of: Vec<u32>,
    pub(crate) beta: Vec<f32>,
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
    /// Whether there is anything to do: deformables with a surface.
    pub fn active(set: &DeformableSet) -> bool {
        !set.surface_triangles.is_empty()
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
    /// rigid bodies): force and 3×3 block.
    #[inline]
    pub(crate) fn vertex_terms(
        &self,
        cfg: &SolverConfig,
        v: usize,
        x: &[Vec3A],
        poses: &[Pose],
    ) -> Block {
        let mut out = Block::default();
        for &ri in self.rows_of_point(v) {
            let r = &self.rows[ri as usize];
            let c = r.value(
                |p| self.iterate_at(p, x, poses),
                |p| self.certified_at(p),
                cfg.contact_gap,
            );
            let f = r.force(c);
            let k = r
                .points
                .iter()
                .position(|&p| p == v as u32)
                .expect("row lists its points");
            let w = r.weights[k];
            out.f += r.normal * (f * w);
            let n = r.normal;
            out.h += Mat3::from_cols(n * n.x, n * n.y, n * n.z) * (r.gamma * r.mu * w * w);
        }
        out
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
        for &ri in self.rows_of_body(i) {
            let r = &self.rows[ri as usize];
            let c = r.value(
                |p| self.iterate_at(p, x, poses),
                |p| self.certified_at(p),
                cfg.contact_gap,
            );
            // The row's Jacobian with respect to the body: Σ over its points w_k (n, (R r_k) × n).
            let mut j: Vec6 = [0.0; 6];
            for k in 0..4 {
                let p = r.points[k];
                if p == NO_POINT || p < g.soft_points {
                    continue;
                }
                let (b, local) = g.rigid_points[(p - g.soft_points) as usize];
                if b as usize != i {
                    continue;
                }
                let arm = pose.q * local;
                let lin = r.normal * r.weights[k];
                let ang = arm.cross(lin);
                for d in 0..3 {
                    j[d] += lin[d];
                    j[3 + d] += ang[d];
                }
            }
            let force = r.force(c);
            for d in 0..6 {
                f[d] += force * j[d];
            }
            hm.add_outer(&j, r.gamma * r.mu);
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
        for (r, c) in self.rows.iter_mut().zip(values) {
            r.update(c, cfg.contact_decay, cfg.lambda_max);
        }
        let before = self.rows.len();
        self.rows.retain(|r| r.gamma >= cfg.contact_drop);
        if self.rows.len() != before {
            self.row_of = self
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.pair, i as u32))
                .collect();
            self.index_rows(set, bodies);
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

    /// The frame's contact statistics.
    pub fn stats(&self) -> SurfaceContactStats {
        self.stats
    }

    /// Sums `f` over the rows' objects: what a row does to the island structure.
    pub(crate) fn object_of_point(&self, set: &DeformableSet, p: u32) -> usize {
        object(set, self.geometry.owner_of(set, p))
    }
}
