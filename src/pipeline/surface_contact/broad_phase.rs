//! The frame's start: geometry (rebuilt when bodies change), X = xᵗ, one motion cage per
//! point, the candidate pairs (a parry3d BVH over the primitives' cages), the islands, and
//! the active set carried from the last frame restricted to the candidates.
//!
//! A deformable point's cage is the box around its start position, its initial guess and
//! its inertial target, padded by `max(4δ, |h v|/2)`; the solver keeps the point's iterate
//! inside it, and X, a convex combination of iterates, stays inside too. A rigid point's
//! cage spans its positions at the start pose and at the body's initial guess, padded the
//! same way; if a rigid body's iterate leaves its cage the broad phase runs again. Two
//! primitives whose cages, each widened by ξ/2, do not overlap therefore never come within
//! ξ of each other in the frame: the candidates are every pair that can touch.

use glam::{Vec3, Vec3A};
use parry3d::bounding_volume::Aabb;
use parry3d::partitioning::{Bvh, BvhBuildStrategy, BvhWorkspace};

use super::geometry::{self, Geometry, Owner, Pose};
use super::rows::{NO_POINT, Pair, PairKind, Row};
use super::{SurfaceContact, object};
use crate::ccd::{edge_edge_distance_lower_bound, point_triangle_distance_lower_bound};
use crate::config::SolverConfig;
use crate::deformable::DeformableSet;
use crate::graph::Forest;
use crate::pipeline::IterateRecord;
use crate::pipeline::vbd::VertexState;
use crate::rigid::BodySet;

/// A leaf of the broad phase's BVH.
#[derive(Clone, Copy)]
enum Leaf {
    Point(u32),
    Triangle(u32),
    Edge(u32),
}

/// What the geometry is built from: the deformables' topology and the bodies.
pub(super) fn generation(set: &DeformableSet, bodies: &BodySet) -> (u64, usize, u64) {
    (set.generation, bodies.len(), signature(bodies))
}

fn signature(bodies: &BodySet) -> u64 {
    // FNV-1a over the handles in solver order: any added, removed or rebuilt body changes it.
    bodies
        .handles
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b.0 as u64).wrapping_mul(0x0100_0000_01b3)
        })
}

fn pad(cfg: &SolverConfig, motion: Vec3A) -> f32 {
    (4.0 * cfg.contact_gap).max(0.5 * motion.length())
}

impl SurfaceContact {
    /// Everything before the first iteration; clamps the vertices' initial guess into
    /// their cages.
    pub fn begin_frame(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        attachments: &crate::deformable::AttachmentSet,
        iterate: &[IterateRecord],
        vs: &mut VertexState,
    ) {
        // A deformable and a rigid body linked by an attachment do not collide with each
        // other (their surfaces touch where they are attached), as jointed bodies do not.
        self.linked.clear();
        self.linked.extend(
            attachments
                .records
                .iter()
                .filter(|r| !r.broken())
                .map(|r| (set.owner[r.vertex as usize], r.body)),
        );
        self.linked.sort_unstable();
        self.linked.dedup();
        let generation = generation(set, bodies);
        if generation != self.generation {
            self.generation = generation;
            self.geometry = Geometry::build(set, bodies);
            self.rows.clear();
            self.row_of.clear();
        }
        self.start_pose.clear();
        self.start_pose
            .extend(bodies.poses.iter().map(|p| Pose { p: p.p(), q: p.q() }));
        self.certified_pose.clone_from(&self.start_pose);
        self.certified.clone_from(&set.positions);
        self.start.clone_from(&set.positions);
        self.stats = Default::default();
        let t0 = std::time::Instant::now();
        self.build_candidates(cfg, set, bodies, iterate, vs);
        self.stats.broad_phase_ms += t0.elapsed().as_secs_f64() * 1e3;
        // Friction's tangent plane for the step: the carried rows', linearised at xᵗ.
        for r in &mut self.rows {
            r.lag();
        }
        self.iterate_poses(bodies, iterate, &mut vs.poses);
        // The vertices' initial guess inside their cages.
        for v in 0..set.vertex_count() {
            if set.is_solved(v) {
                let (lo, hi) = self.cage[v];
                let x = vs.x[v].clamp(lo, hi);
                if x != vs.x[v] {
                    vs.x[v] = x;
                    vs.d[v] = x - set.positions[v];
                }
            }
        }
    }

    /// Cages, candidates, islands and the active set at X (used again when a rigid body
    /// leaves its cage; then X is the certified configuration, not xᵗ).
    pub(crate) fn build_candidates(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        iterate: &[IterateRecord],
        vs: &VertexState,
    ) {
        let g = &self.geometry;
        let n = g.point_count();
        self.cage.clear();
        self.cage.resize(n, (Vec3A::ZERO, Vec3A::ZERO));
        for v in 0..g.soft_points as usize {
            let x0 = self.certified[v];
            let (guess, target) = (set.positions[v] + vs.d[v], set.positions[v] + vs.yd[v]);
            let p = pad(cfg, vs.yd[v]);
            self.cage[v] = (
                x0.min(guess).min(target) - Vec3A::splat(p),
                x0.max(guess).max(target) + Vec3A::splat(p),
            );
        }
        let mut guess_pose = Vec::with_capacity(bodies.len());
        self.iterate_poses(bodies, iterate, &mut guess_pose);
        for (k, &(b, r)) in g.rigid_points.iter().enumerate() {
            let (a, e) = (
                self.certified_pose[b as usize].apply(r),
                guess_pose[b as usize].apply(r),
            );
            let p = if geometry::moves(bodies, b as usize) {
                pad(cfg, e - a)
            } else {
                0.0
            };
            self.cage[g.soft_points as usize + k] =
                (a.min(e) - Vec3A::splat(p), a.max(e) + Vec3A::splat(p));
        }
        // Rigid bodies near a deformable take part.
        let soft_boxes: Vec<(Vec3A, Vec3A)> = (0..set.len())
            .map(|b| {
                set.vertex_range(b).fold(
                    (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
                    |(lo, hi), v| (lo.min(self.cage[v].0), hi.max(self.cage[v].1)),
                )
            })
            .collect();
        let overlaps = |(lo, hi): (Vec3A, Vec3A)| {
            soft_boxes
                .iter()
                .any(|&(l, h)| lo.cmple(h).all() && l.cmple(hi).all())
        };
        let mut near = vec![false; bodies.len()];
        for (b, range) in &g.rigid_bodies {
            let bx = range.clone().fold(
                (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
                |(lo, hi), p| {
                    (
                        lo.min(self.cage[p as usize].0),
                        hi.max(self.cage[p as usize].1),
                    )
                },
            );
            near[*b as usize] = overlaps(bx);
        }
        let takes_part = |o: Owner| match o {
            Owner::Soft(_) => true,
            Owner::Rigid(i) => near[i as usize],
        };
        // The BVH over points, triangles and edges, each box widened by ξ/2.
        let widen = Vec3A::splat(0.5 * cfg.contact_min_separation);
        let mut leaves = Vec::new();
        let mut boxes = Vec::new();
        let union = |pts: &[u32]| {
            pts.iter().fold(
                (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
                |(lo, hi), &p| {
                    (
                        lo.min(self.cage[p as usize].0),
                        hi.max(self.cage[p as usize].1),
                    )
                },
            )
        };
        let mut push = |leaf: Leaf, (lo, hi): (Vec3A, Vec3A)| {
            leaves.push(leaf);
            boxes.push(Aabb::new(Vec3::from(lo - widen), Vec3::from(hi + widen)));
        };
        for &p in &g.surface_points {
            push(Leaf::Point(p), self.cage[p as usize]);
        }
        for (b, range) in &g.rigid_bodies {
            if near[*b as usize] {
                for p in range.clone() {
                    push(Leaf::Point(p), self.cage[p as usize]);
                }
            }
        }
        for (i, (t, o)) in g.triangles.iter().enumerate() {
            if takes_part(*o) {
                push(Leaf::Triangle(i as u32), union(t));
            }
        }
        for (i, (e, o)) in g.edges.iter().enumerate() {
            if takes_part(*o) {
                push(Leaf::Edge(i as u32), union(e));
            }
        }
        let mut candidates = Vec::new();
        if !boxes.is_empty() {
            let bvh = Bvh::from_leaves(BvhBuildStrategy::Binned, &boxes);
            let mut workspace = BvhWorkspace::default();
            bvh.traverse_bvtt_single_tree::<false>(&mut workspace, &mut |i, j| {
                if let Some(pair) = self.pair_of(set, leaves[i as usize], leaves[j as usize]) {
                    candidates.push(pair);
                }
            });
        }
        // Deformable surface points against half-spaces.
        for (pi, &(b, _, _)) in g.planes.iter().enumerate() {
            let (normal, at) = self.plane(pi as u32);
            let _ = b;
            for &p in &g.surface_points {
                let (lo, hi) = self.cage[p as usize];
                let (c, h) = (Vec3::from((lo + hi) * 0.5), Vec3::from((hi - lo) * 0.5));
                let lowest = normal.dot(c - at) - normal.abs().dot(h);
                if lowest <= cfg.contact_min_separation {
                    candidates.push(Pair {
                        kind: PairKind::PointPlane,
                        a: p,
                        b: pi as u32,
                    });
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        // Boxes are loose around slanted primitives (a triangle's box covers its whole
        // quad): keep only the pairs whose distance at X, less the farthest any of their
        // points can go in its cage, is within ξ.
        candidates.retain(|pair| self.may_meet(cfg, pair));
        self.candidates = candidates;
        self.stats.candidates = self.candidates.len();
        self.build_islands(set, bodies);
        // The active set carried over: the rows whose pair is still a candidate.
        let h2 = cfg.dt * cfg.dt;
        let mut rows = std::mem::take(&mut self.rows);
        rows.retain(|r| self.candidates.binary_search(&r.pair).is_ok());
        for r in &mut rows {
            r.mu = row_stiffness(cfg, set, &self.geometry, &r.points, h2);
        }
        self.rows = rows;
        self.row_of = self
            .rows
            .iter()
            .enumerate()
            .map(|(i, r)| (r.pair, i as u32))
            .collect();
        self.linearise_rows();
        self.index_rows(set, bodies.len());
    }

    /// Whether `pair` can come within ξ during the frame, its points staying in their
    /// cages: each point of a primitive is a convex combination of its vertices, so the
    /// distance falls by at most the two primitives' largest reach (distance from X to the
    /// farthest corner of a cage).
    fn may_meet(&self, cfg: &SolverConfig, pair: &Pair) -> bool {
        if pair.kind == PairKind::PointPlane {
            return true;
        }
        let pts = self.points_of(pair);
        let x = pts.map(|p| Vec3::from(self.certified_at(p)));
        let reach = |k: usize| {
            let (lo, hi) = self.cage[pts[k] as usize];
            let at = Vec3A::from(x[k]);
            (hi - at).max(at - lo).length()
        };
        let (first, second) = match pair.kind {
            PairKind::PointTriangle => (reach(0), reach(1).max(reach(2)).max(reach(3))),
            _ => (reach(0).max(reach(1)), reach(2).max(reach(3))),
        };
        let lower = match pair.kind {
            PairKind::PointTriangle => point_triangle_distance_lower_bound(x[0], x[1], x[2], x[3]),
            _ => edge_edge_distance_lower_bound(x[0], x[1], x[2], x[3]),
        };
        // A relative margin for the rounding of the reaches and their sum.
        lower - (first + second) * (1.0 + 1e-5) <= cfg.contact_min_separation
    }

    /// The candidate pair of two broad-phase leaves, if they make one.
    fn pair_of(&self, set: &DeformableSet, a: Leaf, b: Leaf) -> Option<Pair> {
        let g = &self.geometry;
        let (pair, oa, ob) = match (a, b) {
            (Leaf::Point(p), Leaf::Triangle(t)) | (Leaf::Triangle(t), Leaf::Point(p)) => {
                let (tri, ot) = g.triangles[t as usize];
                let op = g.owner_of(set, p);
                if op == ot && tri.contains(&p) {
                    return None;
                }
                (
                    Pair {
                        kind: PairKind::PointTriangle,
                        a: p,
                        b: t,
                    },
                    op,
                    ot,
                )
            }
            (Leaf::Edge(e), Leaf::Edge(f)) => {
                let ((ea, oa), (eb, ob)) = (g.edges[e as usize], g.edges[f as usize]);
                if oa == ob && (ea.contains(&eb[0]) || ea.contains(&eb[1])) {
                    return None;
                }
                (
                    Pair {
                        kind: PairKind::EdgeEdge,
                        a: e.min(f),
                        b: e.max(f),
                    },
                    oa,
                    ob,
                )
            }
            _ => return None,
        };
        match (oa, ob) {
            // Rigid–rigid contact is the rigid solver's.
            (Owner::Rigid(_), Owner::Rigid(_)) => None,
            (Owner::Soft(s), Owner::Rigid(r)) | (Owner::Rigid(r), Owner::Soft(s))
                if self.linked.binary_search(&(s, r)).is_ok() =>
            {
                None
            }
            _ => Some(pair),
        }
    }

    /// The points of a pair.
    pub(crate) fn points_of(&self, pair: &Pair) -> [u32; 4] {
        let g = &self.geometry;
        match pair.kind {
            PairKind::PointTriangle => {
                let t = g.triangles[pair.b as usize].0;
                [pair.a, t[0], t[1], t[2]]
            }
            PairKind::EdgeEdge => {
                let (ea, eb) = (g.edges[pair.a as usize].0, g.edges[pair.b as usize].0);
                [ea[0], ea[1], eb[0], eb[1]]
            }
            PairKind::PointPlane => [pair.a, NO_POINT, NO_POINT, NO_POINT],
        }
    }

    /// Islands: objects linked by a candidate pair (static rigid bodies link nothing); an
    /// island with a rigid body, or a pair with a static body or a half-space, is anchored.
    fn build_islands(&mut self, set: &DeformableSet, bodies: &BodySet) {
        let objects = set.len() + bodies.len();
        let mut forest = Forest::default();
        forest.reset(objects);
        self.coupled.clear();
        self.coupled.resize(bodies.len(), false);
        let g = &self.geometry;
        for pair in &self.candidates {
            let pts = self.points_of(pair);
            let mut first: Option<usize> = None;
            let mut soft = false;
            for &p in pts.iter().filter(|&&p| p != NO_POINT) {
                let o = g.owner_of(set, p);
                match o {
                    Owner::Soft(_) => soft = true,
                    Owner::Rigid(i) if !geometry::moves(bodies, i as usize) => continue,
                    Owner::Rigid(_) => {}
                }
                let id = object(set, o);
                match first {
                    None => first = Some(id),
                    Some(f) => forest.union(f as u32, id as u32),
                }
            }
            if soft {
                for &p in pts.iter().filter(|&&p| p != NO_POINT) {
                    if let Owner::Rigid(i) = g.owner_of(set, p)
                        && geometry::moves(bodies, i as usize)
                    {
                        self.coupled[i as usize] = true;
                    }
                }
            }
        }
        self.island_of.clear();
        self.island_of
            .extend((0..objects as u32).map(|o| forest.find(o)));
        self.beta.clear();
        self.beta.resize(objects, 1.0);
        // Anchored islands: a rigid point or a half-space in a pair anchors the island of
        // the pair's deformable side.
        self.anchored.clear();
        self.anchored.resize(objects, false);
        let g = &self.geometry;
        for pair in &self.candidates {
            let pts = self.points_of(pair);
            let rigid = pair.kind == PairKind::PointPlane
                || pts.iter().any(|&p| p != NO_POINT && p >= g.soft_points);
            if let Some(&p) = pts.iter().find(|&&p| p != NO_POINT && p < g.soft_points)
                && rigid
            {
                let island = self.island_of[object(set, g.owner_of(set, p))];
                self.anchored[island as usize] = true;
            }
        }
    }
}

/// A row's penalty: `κ` times the largest `m/h²` of its deformable points (the inertia the
/// row has to stop in one step), as the paper's and libuipc's mass-scaled stiffness.
pub(crate) fn row_stiffness(
    cfg: &SolverConfig,
    set: &DeformableSet,
    g: &Geometry,
    points: &[u32; 4],
    h2: f32,
) -> f32 {
    let m = points
        .iter()
        .filter(|&&p| p != NO_POINT && p < g.soft_points)
        .map(|&p| set.masses[p as usize])
        .fold(0.0f32, f32::max);
    (cfg.contact_stiffness * m / h2).max(cfg.k_start)
}

/// A new row of `pair` (λ = 0, γ = 1).
pub(crate) fn new_row(
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    sc: &SurfaceContact,
    pair: Pair,
) -> Row {
    let points = sc.points_of(&pair);
    let h2 = cfg.dt * cfg.dt;
    let g = &sc.geometry;
    // The pair's friction: the geometric mean of its two sides' coefficients.
    let side = |p: u32| match g.owner_of(set, p) {
        Owner::Soft(b) => set.materials[b as usize].friction,
        Owner::Rigid(i) => bodies.masses[i as usize].friction,
    };
    let (a, b) = match pair.kind {
        PairKind::PointPlane => (
            side(points[0]),
            bodies.masses[g.planes[pair.b as usize].0 as usize].friction,
        ),
        PairKind::PointTriangle => (side(points[0]), side(points[1])),
        PairKind::EdgeEdge => (side(points[0]), side(points[2])),
    };
    let friction = [(a[0] * b[0]).sqrt(), (a[1] * b[1]).sqrt()];
    Row::new(
        pair,
        points,
        row_stiffness(cfg, set, g, &points, h2),
        friction,
    )
}
