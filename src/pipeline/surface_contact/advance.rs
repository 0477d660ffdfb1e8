//! The advance after each iteration: CCD of every candidate pair from X to the iterate x̂,
//! the largest certified step α of each island, the active set's growth (Alg. 3 with the
//! earliest-time-of-impact filter), X ← X + α(x̂ − X), and the rows linearised again at X.

use glam::{Vec3, Vec3A};
use rayon::prelude::*;

use super::frame::new_row;
use super::geometry::{self, Pose};
use super::rows::{NO_POINT, Pair, PairKind};
use super::{SurfaceContact, inversion, object};
use crate::ccd::{
    AccdParams, AccdStop, DEFAULT_MAX_ITERS, close_pair_separation, edge_edge_accd,
    edge_edge_distance_lower_bound, point_triangle_accd, point_triangle_distance_lower_bound,
};
use crate::config::{ContactModel, SolverConfig};
use crate::deformable::DeformableSet;
use crate::pipeline::IterateRecord;
use crate::pipeline::vbd::VertexState;
use crate::rigid::BodySet;

/// Candidate pairs per parallel CCD job.
const CHUNK: usize = 64;

impl SurfaceContact {
    /// Times of impact of `pair` on the path X → x̂ (1: clear on the whole path): at the
    /// contact gap δ (when a pair outside the active set should join it: rows are made
    /// before the path goes deeper than the gap) and at the separation it is certified
    /// against (how far X may go), with that separation: ξ, or less for a pair that starts
    /// closer.
    fn toi(
        &self,
        cfg: &SolverConfig,
        pair: &Pair,
        active: bool,
        x: &[Vec3A],
        poses: &[Pose],
    ) -> (f32, f32, f32) {
        let pts = self.points_of(pair);
        let (gap, xi) = (cfg.contact_gap, cfg.contact_min_separation);
        if pair.kind == PairKind::PointPlane {
            // The plane holds still during the step (half-spaces of static or kinematic
            // bodies; see the module docs).
            let (n, at) = self.plane(pair.b);
            let d0 = n.dot(Vec3::from(self.certified_at(pts[0])) - at);
            let d1 = n.dot(Vec3::from(self.iterate_at(pts[0], x, poses)) - at);
            let reach = |sep: f32| {
                if d1 > sep {
                    1.0
                } else {
                    // Linear in t; shrunk by a relative margin for the rounding of the quotient.
                    ((d0 - sep) / (d0 - d1) * (1.0 - 1e-5)).clamp(0.0, 1.0)
                }
            };
            let add = if active || d1 > gap {
                1.0
            } else if d0 <= gap {
                reach(0.9 * d0)
            } else {
                reach(gap)
            };
            // Closer than ξ at the start: certified against half the start distance, but
            // never against less than the rounding of the positions (see below).
            let ends = [
                Vec3::from(self.certified_at(pts[0])),
                Vec3::from(self.iterate_at(pts[0], x, poses)),
                at,
            ];
            let xi = match d0 > xi {
                true => xi,
                false => close_pair_separation(d0, &ends),
            };
            let clear_at_start = d0 > xi && xi > 0.0; // false for NaN too
            return (add, if clear_at_start { reach(xi) } else { 0.0 }, xi);
        }
        let start = pts.map(|p| Vec3::from(self.certified_at(p)));
        let end = pts.map(|p| Vec3::from(self.iterate_at(p, x, poses)));
        let params = AccdParams {
            eta: cfg.ccd_eta,
            max_iters: DEFAULT_MAX_ITERS,
        };
        let run = |sep: f32| match pair.kind {
            PairKind::PointTriangle => point_triangle_accd(&start, &end, sep, &params),
            _ => edge_edge_accd(&start, &end, sep, &params),
        };
        // A pair outside the set joins it when its path comes within δ; one already within
        // δ (a row that decayed away, or a start at the gap) when its path comes a tenth
        // closer, so that pairs resting in the gap do not churn.
        let mut add = 1.0;
        let mut inside_gap = false;
        if !active {
            let r = run(gap);
            match (r.stop, r.toi) {
                (AccdStop::StartInside, _) => inside_gap = true,
                (_, Some(t)) => add = t,
                // Never within δ of each other, so never within ξ < δ either.
                (_, None) => return (1.0, 1.0, xi),
            }
        }
        let d0 = || match pair.kind {
            PairKind::PointTriangle => {
                point_triangle_distance_lower_bound(start[0], start[1], start[2], start[3])
            }
            _ => edge_edge_distance_lower_bound(start[0], start[1], start[2], start[3]),
        };
        if inside_gap {
            let closer = 0.9 * d0();
            add = match closer > xi {
                true => run(closer).toi.unwrap_or(1.0),
                false => 0.0,
            };
        }
        let r = run(xi);
        if r.stop == AccdStop::StartInside {
            // A pair that starts closer than ξ (added close, or pressed there by a budget
            // that ran out) would hold its island still for ever: it is certified against
            // half its start distance instead, so it can separate, and never touch. Not
            // below the rounding of its coordinates to f32 (`min_sep_floor`): halved
            // advance after advance, the distance fell to nothing, and X rounded to f32
            // crossed (cloth through cloth). There the island holds still.
            let d0 = d0();
            if d0 > 0.0 {
                let sep = close_pair_separation(d0, start.iter().chain(&end));
                return (add, run(sep).toi.unwrap_or(1.0), sep);
            }
            return (add, r.toi.unwrap_or(1.0), 0.0);
        }
        (add, r.toi.unwrap_or(1.0), xi)
    }

    /// One advance (if an iterate left its cage, the broad phase runs again first, or the
    /// advance aims only as far as the cages reach: `SolverConfig::contact_cage_rebuild`).
    pub fn advance(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        iterate: &[IterateRecord],
        vs: &mut VertexState,
        poses: &mut Vec<Pose>,
    ) {
        self.iterate_poses(bodies, iterate, poses);
        let t0 = std::time::Instant::now();
        // The volume floor first: X goes towards its targets (the iterate, less what the
        // floor holds back), which the cages and the CCD must see.
        let floor = inversion::hold(set, &self.certified, &vs.x);
        self.stats.floor_stopped += floor.stopped;
        let x: &[Vec3A] = floor.targets.as_deref().unwrap_or(&vs.x);
        self.stats.ccd_ms += t0.elapsed().as_secs_f64() * 1e3;
        let (reach, shortened) = self.keep_candidates_complete(cfg, set, bodies, x, poses, &vs.yd);
        let x = shortened.as_deref().unwrap_or(x);
        let t0 = std::time::Instant::now();
        let tois = self.candidate_tois(cfg, set, x, poses);
        let mut alpha = self.island_steps(set, &tois, &floor.steps);
        self.keep_rotations_in_band(cfg, set, bodies, poses, &tois, &mut alpha);
        let first_new = self.rows.len();
        let added = self.grow(cfg, set, bodies, &tois);
        self.move_certified(set, bodies, &alpha, x, poses);
        for (i, b) in self.beta.iter_mut().enumerate() {
            if self.island_of[i] as usize == i {
                // The share of the way to the iterate X went: α of the reach.
                let went = alpha[i] * reach[i];
                *b *= 1.0 - went;
                self.largest_cut = self.largest_cut.max(1.0 - went);
            }
        }
        self.linearise_rows();
        // New rows take the tangent plane where they were made.
        for r in &mut self.rows[first_new..] {
            r.lag();
        }
        if added {
            self.index_rows(set, bodies.len());
        }
        self.stats.rows = self.rows.len();
        self.stats.ccd_ms += t0.elapsed().as_secs_f64() * 1e3;
    }

    /// Per island, the share of the way to the iterate `x` this advance may go while the
    /// candidates stay complete: all of it (the broad phase runs again first where an
    /// iterate left its cage), or as far as the cages reach where they are kept, with the
    /// iterate `x` shortened to it (returned; `poses` shortened in place).
    fn keep_candidates_complete(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        x: &[Vec3A],
        poses: &mut [Pose],
        yd: &[Vec3A],
    ) -> (Vec<f32>, Option<Vec<Vec3A>>) {
        let reach = vec![1.0f32; self.island_of.len()];
        if !self.cages.escaped(set, bodies, &self.geometry, x, poses) {
            return (reach, None);
        }
        if cfg.contact_cage_rebuild {
            self.stats.rebuilds += 1;
            self.build_candidates(cfg, set, bodies, x, poses, yd);
            return (reach, None);
        }
        self.stats.cage_stops += 1;
        let reach = self.cages.reach_along(
            set,
            bodies,
            &self.geometry,
            &self.island_of,
            (&self.certified, &self.certified_pose),
            (x, poses),
        );
        let shortened = self.shorten(set, bodies, &reach, x, poses);
        (reach, Some(shortened))
    }

    /// Every candidate's times of impact and separation ([`Self::toi`]) on the path X → x̂,
    /// skipping the CCD of pairs whose distance at R, less how far their points are from R
    /// at either end of the segment, stays beyond δ (beyond ξ for a row).
    fn candidate_tois(
        &self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        x: &[Vec3A],
        poses: &[Pose],
    ) -> Vec<(f32, f32, f32)> {
        let (moved, moved_in_body) = self.cages.motion(
            set,
            &self.geometry,
            (&self.certified, &self.certified_pose),
            (x, poses),
        );
        // Which candidates are rows (the candidates are sorted): a lookup per row instead
        // of a hash per candidate.
        let mut is_row = vec![false; self.candidates.len()];
        for r in &self.rows {
            if let Ok(k) = self.candidates.binary_search(&r.pair) {
                is_row[k] = true;
            }
        }
        self.candidates
            .par_iter()
            .zip(&self.candidate_lower)
            .zip(&is_row)
            .with_min_len(CHUNK)
            .map(|((pair, &lower), &active)| {
                if pair.kind != PairKind::PointPlane {
                    let pts = self.points_of(pair);
                    let m: &[f32] = match self.same_body(set, &pts) {
                        true => &moved_in_body,
                        false => &moved,
                    };
                    let (a, b) = match pair.kind {
                        PairKind::PointTriangle => (
                            m[pts[0] as usize],
                            m[pts[1] as usize]
                                .max(m[pts[2] as usize])
                                .max(m[pts[3] as usize]),
                        ),
                        _ => (
                            m[pts[0] as usize].max(m[pts[1] as usize]),
                            m[pts[2] as usize].max(m[pts[3] as usize]),
                        ),
                    };
                    let clear = lower - (a + b) * (1.0 + 1e-5);
                    let needed = if active {
                        cfg.contact_min_separation
                    } else {
                        cfg.contact_gap
                    };
                    if clear > needed {
                        return (1.0, 1.0, cfg.contact_min_separation);
                    }
                }
                self.toi(cfg, pair, active, x, poses)
            })
            .collect()
    }

    /// The step α of each island: the earliest certified impact of its pairs, and no
    /// element of X below its volume floor (`floor_steps`, per deformable).
    fn island_steps(
        &self,
        set: &DeformableSet,
        tois: &[(f32, f32, f32)],
        floor_steps: &[f32],
    ) -> Vec<f32> {
        let mut alpha = vec![1.0f32; self.island_of.len()];
        let g = &self.geometry;
        for (pair, &(_, t, _)) in self.candidates.iter().zip(tois) {
            if t < 1.0 {
                let pts = self.points_of(pair);
                let soft = pts.iter().find(|&&p| p != NO_POINT && p < g.soft_points);
                let p = *soft.unwrap_or(&pts[0]);
                let i = self.island_of[self.object_of_point(set, p)] as usize;
                alpha[i] = alpha[i].min(t);
            }
        }
        for (b, &t) in floor_steps.iter().enumerate() {
            let i = self.island_of[b] as usize;
            alpha[i] = alpha[i].min(t);
        }
        alpha
    }

    /// A moving body's pose goes part of the way by slerp, off the straight segments CCD
    /// certified: it stops where its points stay within half the least separation its
    /// pairs were certified against (`Pose::rotation_band`), so that they keep at least
    /// the other half. Its island's step leaves the band it falls in.
    fn keep_rotations_in_band(
        &self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        poses: &[Pose],
        tois: &[(f32, f32, f32)],
        alpha: &mut [f32],
    ) {
        let g = &self.geometry;
        let mut separation = vec![cfg.contact_min_separation; bodies.len()];
        let moving = |b: u32| geometry::moves(bodies, b as usize);
        if g.rigid_bodies.iter().any(|&(b, _)| moving(b)) {
            for (pair, &(_, _, sep)) in self.candidates.iter().zip(tois) {
                for &p in self.points_of(pair).iter() {
                    if p != NO_POINT && p >= g.soft_points {
                        let b = g.rigid_points[(p - g.soft_points) as usize].0 as usize;
                        separation[b] = separation[b].min(sep);
                    }
                }
            }
        }
        let mut band = vec![0.5f32; alpha.len()];
        for (b, _) in &g.rigid_bodies {
            let b = *b as usize;
            if geometry::moves(bodies, b) {
                let i = self.island_of[object(set, geometry::Owner::Rigid(b as u32))] as usize;
                let (from, radius) = (&self.certified_pose[b], g.rigid_radius[b]);
                let edge = from.rotation_band(&poses[b], radius, 0.5 * separation[b]);
                band[i] = band[i].min(edge);
            }
        }
        for (a, b) in alpha.iter_mut().zip(&band) {
            if *a > *b && *a < 1.0 - *b {
                *a = *b;
            }
        }
    }

    /// Growth: new rows for the pairs that come within δ, the earliest of one of their
    /// points. Ties (pairs that reach δ at the same time, e.g. every pair of a point
    /// already at the gap: t = 0) go to the first candidate, so each point brings at most
    /// one new row per advance: a point driven hard into a surface fans out over its
    /// neighbours one row at a time instead of taking every pair of its cage at once. The
    /// barrier baseline has no rows (its pairs act through the barrier). Returns whether
    /// a row was made.
    fn grow(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        tois: &[(f32, f32, f32)],
    ) -> bool {
        if cfg.contact_model != ContactModel::AugmentedLagrangian {
            return false;
        }
        let mut earliest = vec![(1.0f32, u32::MAX); self.geometry.point_count()];
        for (k, (pair, &(t, _, _))) in self.candidates.iter().zip(tois).enumerate() {
            if t < 1.0 {
                for &p in self.points_of(pair).iter().filter(|&&p| p != NO_POINT) {
                    let e = &mut earliest[p as usize];
                    if t < e.0 {
                        *e = (t, k as u32);
                    }
                }
            }
        }
        let mut added = false;
        for k in 0..self.candidates.len() {
            let (pair, t) = (self.candidates[k], tois[k].0);
            if t < 1.0
                && self
                    .points_of(&pair)
                    .iter()
                    .any(|&p| p != NO_POINT && earliest[p as usize] == (t, k as u32))
            {
                let row = new_row(cfg, set, bodies, self, pair);
                self.row_of.insert(pair, self.rows.len() as u32);
                self.rows.push(row);
                added = true;
            }
        }
        added
    }

    /// X moves α of the way to x̂, island by island, and each moving body's certified pose
    /// with it.
    fn move_certified(
        &mut self,
        set: &DeformableSet,
        bodies: &BodySet,
        alpha: &[f32],
        x: &[Vec3A],
        poses: &[Pose],
    ) {
        for b in 0..set.len() {
            let a = alpha[self.island_of[b] as usize];
            if a <= 0.0 {
                continue;
            }
            for v in set.vertex_range(b) {
                let to = x[v];
                let from = self.certified[v];
                self.certified[v] = if a >= 1.0 { to } else { from + (to - from) * a };
            }
        }
        for i in 0..bodies.len() {
            if !geometry::moves(bodies, i) {
                continue;
            }
            let a = alpha[self.island_of[object(set, geometry::Owner::Rigid(i as u32))] as usize];
            self.certified_pose[i] = if a >= 1.0 {
                poses[i]
            } else {
                self.certified_pose[i].lerp(&poses[i], a)
            };
        }
    }

    /// The iterate moved back towards X to the share `reach` of its island (the moving
    /// bodies' poses by `Pose::lerp`, as the advance moves them): where this advance
    /// aims when its cages are not built again.
    fn shorten(
        &self,
        set: &DeformableSet,
        bodies: &BodySet,
        reach: &[f32],
        x: &[Vec3A],
        poses: &mut [Pose],
    ) -> Vec<Vec3A> {
        let mut to = x.to_vec();
        for b in 0..set.len() {
            let s = reach[self.island_of[b] as usize];
            if s < 1.0 {
                for v in set.vertex_range(b) {
                    let from = self.certified[v];
                    to[v] = from + (x[v] - from) * s;
                }
            }
        }
        for (i, pose) in poses.iter_mut().enumerate() {
            let s = reach[self.island_of[object(set, geometry::Owner::Rigid(i as u32))] as usize];
            if s < 1.0 && geometry::moves(bodies, i) {
                *pose = self.certified_pose[i].lerp(pose, s);
            }
        }
        to
    }

    /// The end of the frame: the deformables' iterate becomes X, and the coupled rigid
    /// bodies' iterate their certified pose, so that the integration stages write the
    /// certified state. Also the frame's lost motion.
    pub fn end_frame(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        iterate: &mut [IterateRecord],
        vs: &mut VertexState,
    ) {
        for v in 0..set.vertex_count() {
            vs.x[v] = self.certified[v];
            vs.d[v] = self.certified[v] - set.positions[v];
        }
        for i in 0..bodies.len() {
            if self.coupled[i] && geometry::moves(bodies, i) {
                let start = bodies.poses[i];
                let c = self.certified_pose[i];
                iterate[i] = IterateRecord::new(c.p - start.p(), c.q, start.q());
            }
        }
        // β of each island (its root holds it): the share of the frame's motion it lost.
        // The barrier baseline puts its iterate back on X after every advance, so β means
        // nothing there: its lost motion is the largest share of a move the guard cut.
        self.stats.lost_motion = match cfg.contact_model {
            ContactModel::AugmentedLagrangian => (0..self.beta.len())
                .filter(|&i| self.island_of[i] as usize == i)
                .map(|i| self.beta[i])
                .fold(0.0f32, f32::max),
            ContactModel::Barrier => self.largest_cut,
        };
        self.stats.rows = self.rows.len();
    }
}
