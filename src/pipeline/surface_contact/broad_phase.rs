//! The broad phase: every primitive pair that can come within ξ of each other before
//! the cages ([`super::cages`]) are left, as candidates for the CCD of every iteration.
//!
//! Triangles and edges are placed in uniform grids over their boxes ([`super::box_grid`]),
//! and every point and edge queries them: points against triangles and edges against
//! edges, on absolute boxes between objects (rigid–rigid pairs are the rigid solver's), on
//! comoving boxes within each deformable (self-contact; each deformable is a space of its
//! own in the comoving grids). Pairs are then filtered by the distance at R less the reach
//! of their cages, and half-spaces are tested point by point. Each query's pairs come out
//! sorted and the queries run in index order, so the candidates are sorted without a sort,
//! whatever the thread count; the GPU can run the same grids.

use glam::{Vec3, Vec3A};
use rayon::prelude::*;

use super::SurfaceContact;
use super::box_grid::BoxGrid;
use super::cages::Box3;
use super::geometry::Owner;
use super::rows::{NO_POINT, Pair, PairKind};
use crate::ccd::{edge_edge_distance_lower_bound, point_triangle_distance_lower_bound};
use crate::config::SolverConfig;
use crate::deformable::DeformableSet;

/// The grids of one broad phase: triangles and edges, on absolute boxes (every object's,
/// one space) and on comoving boxes (the deformables' own, a space per deformable).
struct Grids {
    triangles: BoxGrid,
    edges: BoxGrid,
    comoving_triangles: BoxGrid,
    comoving_edges: BoxGrid,
}

impl SurfaceContact {
    /// The candidate pairs at the current cages, sorted, with a lower bound on each
    /// pair's distance at R.
    pub(crate) fn candidate_pairs(
        &self,
        cfg: &SolverConfig,
        set: &DeformableSet,
    ) -> (Vec<Pair>, Vec<f32>) {
        let g = &self.geometry;
        let grids = self.grids(cfg);
        let points: Vec<u32> = g
            .surface_points
            .iter()
            .copied()
            .chain(g.soft_points..g.point_count() as u32)
            .collect();
        let point_triangle = points.par_iter().flat_map_iter(|&p| {
            let found = self.triangles_near(cfg, set, &grids, p);
            self.kept(cfg, set, PairKind::PointTriangle, p, found)
        });
        let edge_edge = (0..g.edges.len() as u32)
            .into_par_iter()
            .flat_map_iter(|e| {
                let found = self.edges_near(cfg, &grids, e);
                self.kept(cfg, set, PairKind::EdgeEdge, e, found)
            });
        let mut pairs: Vec<(Pair, f32)> = point_triangle.collect();
        pairs.par_extend(edge_edge);
        // Deformable surface points against half-spaces.
        for &p in &g.surface_points {
            let (lo, hi) = self.cages.absolute[p as usize];
            let (c, h) = (Vec3::from((lo + hi) * 0.5), Vec3::from((hi - lo) * 0.5));
            for pi in 0..g.planes.len() as u32 {
                let (normal, at) = self.plane(pi);
                let lowest = normal.dot(c - at) - normal.abs().dot(h);
                if lowest <= cfg.contact_min_separation {
                    let pair = Pair {
                        kind: PairKind::PointPlane,
                        a: p,
                        b: pi,
                    };
                    pairs.push((pair, 0.0));
                }
            }
        }
        debug_assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
        pairs.into_iter().unzip()
    }

    /// The grids over the current cages' boxes, widened by half the minimum separation.
    fn grids(&self, cfg: &SolverConfig) -> Grids {
        let g = &self.geometry;
        let cages = &self.cages;
        let w = Vec3A::splat(0.5 * cfg.contact_min_separation);
        let widened = |(lo, hi): Box3| (lo - w, hi + w);
        let soft = |o: &Owner| matches!(o, Owner::Soft(_));
        // Deformables' primitives come first in the geometry's lists.
        let soft_triangles = g.triangles.partition_point(|(_, o)| soft(o));
        let soft_edges = g.edges.partition_point(|(_, o)| soft(o));
        let space = |o: &Owner| match o {
            Owner::Soft(b) => *b,
            Owner::Rigid(_) => u32::MAX,
        };
        let absolute = |pts: &[u32]| widened(cages.absolute_box(pts));
        let comoving = |pts: &[u32]| widened(cages.comoving_box(pts));
        let spaces = |owners: &[Owner]| owners.iter().map(space).collect();
        let tri_owners: Vec<Owner> = g.triangles[..soft_triangles].iter().map(|t| t.1).collect();
        let edge_owners: Vec<Owner> = g.edges[..soft_edges].iter().map(|e| e.1).collect();
        Grids {
            triangles: BoxGrid::build(
                g.triangles.par_iter().map(|(t, _)| absolute(t)).collect(),
                vec![0; g.triangles.len()],
            ),
            edges: BoxGrid::build(
                g.edges.par_iter().map(|(e, _)| absolute(e)).collect(),
                vec![0; g.edges.len()],
            ),
            comoving_triangles: BoxGrid::build(
                g.triangles[..soft_triangles]
                    .par_iter()
                    .map(|(t, _)| comoving(t))
                    .collect(),
                spaces(&tri_owners),
            ),
            comoving_edges: BoxGrid::build(
                g.edges[..soft_edges]
                    .par_iter()
                    .map(|(e, _)| comoving(e))
                    .collect(),
                spaces(&edge_owners),
            ),
        }
    }

    /// Whether primitives of owners `a` and `b` may make a pair across objects: not two
    /// rigid bodies (the rigid solver's), nor a deformable and a body it is attached to.
    fn may_pair(&self, a: Owner, b: Owner) -> bool {
        match (a, b) {
            _ if a == b => false,
            (Owner::Rigid(_), Owner::Rigid(_)) => false,
            (Owner::Soft(s), Owner::Rigid(r)) | (Owner::Rigid(r), Owner::Soft(s)) => {
                self.linked.binary_search(&(s, r)).is_err()
            }
            _ => true,
        }
    }

    /// The triangles whose boxes overlap point `p`'s, sorted: of other objects on absolute
    /// boxes, of its own deformable (not its own triangles) on comoving ones.
    fn triangles_near(
        &self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        grids: &Grids,
        p: u32,
    ) -> Vec<u32> {
        let g = &self.geometry;
        let w = Vec3A::splat(0.5 * cfg.contact_min_separation);
        let owner = g.owner_of(set, p);
        let mut found = Vec::new();
        let (lo, hi) = self.cages.absolute[p as usize];
        grids.triangles.overlaps((lo - w, hi + w), 0, |t| {
            if self.may_pair(owner, g.triangles[t as usize].1) {
                found.push(t);
            }
        });
        if let Owner::Soft(b) = owner {
            let (lo, hi) = self.cages.comoving_box(&[p]);
            grids.comoving_triangles.overlaps((lo - w, hi + w), b, |t| {
                if !g.triangles[t as usize].0.contains(&p) {
                    found.push(t);
                }
            });
        }
        found.sort_unstable();
        found
    }

    /// The edges after `e` whose boxes overlap its own, sorted: of other objects on
    /// absolute boxes, of its own deformable (sharing no point) on comoving ones.
    fn edges_near(&self, cfg: &SolverConfig, grids: &Grids, e: u32) -> Vec<u32> {
        let g = &self.geometry;
        let w = Vec3A::splat(0.5 * cfg.contact_min_separation);
        let (ends, owner) = g.edges[e as usize];
        let mut found = Vec::new();
        let (lo, hi) = self.cages.absolute_box(&ends);
        grids.edges.overlaps((lo - w, hi + w), 0, |f| {
            if f > e && self.may_pair(owner, g.edges[f as usize].1) {
                found.push(f);
            }
        });
        if let Owner::Soft(b) = owner {
            let (lo, hi) = self.cages.comoving_box(&ends);
            grids.comoving_edges.overlaps((lo - w, hi + w), b, |f| {
                let other = g.edges[f as usize].0;
                if f > e && !ends.contains(&other[0]) && !ends.contains(&other[1]) {
                    found.push(f);
                }
            });
        }
        found.sort_unstable();
        found
    }

    /// The pairs of `a` with each of `found` that may meet, with their lower bounds.
    fn kept<'a>(
        &'a self,
        cfg: &'a SolverConfig,
        set: &'a DeformableSet,
        kind: PairKind,
        a: u32,
        found: Vec<u32>,
    ) -> impl Iterator<Item = (Pair, f32)> + 'a {
        found.into_iter().filter_map(move |b| {
            let pair = Pair { kind, a, b };
            Some((pair, self.may_meet(cfg, set, &pair)?))
        })
    }

    /// Whether the two points' primitives of `pair` lie in one deformable (self-contact).
    pub(crate) fn same_body(&self, set: &DeformableSet, pts: &[u32; 4]) -> bool {
        let g = &self.geometry;
        pts[0] < g.soft_points
            && pts[3] < g.soft_points
            && set.owner[pts[0] as usize] == set.owner[pts[3] as usize]
    }

    /// If `pair` can come within ξ while its points stay in their cages, a lower bound on
    /// its distance at R: each point of a primitive is a convex combination of its
    /// vertices, so the distance falls by at most the two primitives' largest reach (from R
    /// to a cage's farthest corner; within one deformable, relative to the body's mean
    /// motion). Half-space pairs: 0.
    fn may_meet(&self, cfg: &SolverConfig, set: &DeformableSet, pair: &Pair) -> Option<f32> {
        if pair.kind == PairKind::PointPlane {
            return Some(0.0);
        }
        let pts = self.points_of(pair);
        let same_body = self.same_body(set, &pts);
        let x = pts.map(|p| self.cages.at(p));
        let reach = |k: usize| self.cages.reach(pts[k], same_body);
        let (first, second) = match pair.kind {
            PairKind::PointTriangle => (reach(0), reach(1).max(reach(2)).max(reach(3))),
            _ => (reach(0).max(reach(1)), reach(2).max(reach(3))),
        };
        let lower = match pair.kind {
            PairKind::PointTriangle => point_triangle_distance_lower_bound(x[0], x[1], x[2], x[3]),
            _ => edge_edge_distance_lower_bound(x[0], x[1], x[2], x[3]),
        };
        // A relative margin for the rounding of the reaches and their sum.
        (lower - (first + second) * (1.0 + 1e-5) <= cfg.contact_min_separation).then_some(lower)
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
}
