//! The broad phase: every primitive pair that can come within ξ of each other before
//! the cages ([`super::cages`]) are left, as candidates for the CCD of every iteration.
//!
//! Each object (deformable or rigid body) has three BVHs over its primitives' absolute
//! boxes: points, triangles, edges. Objects whose boxes overlap are traversed tree against
//! tree, points against triangles and edges against edges (rigid–rigid pairs are the rigid
//! solver's). Each deformable also has the three over its comoving boxes, traversed against
//! each other for self-contact. Pairs are then filtered by the distance at
//! R less the reach of their cages, and half-spaces are tested point by point.

use glam::{Vec3, Vec3A};
use parry3d::bounding_volume::{Aabb, BoundingVolume};
use parry3d::partitioning::{Bvh, BvhBuildStrategy, BvhWorkspace};
use rayon::prelude::*;

use super::SurfaceContact;
use super::cages::Box3;
use super::geometry::{EDGES, Leaf, Owner, POINTS, TRIANGLES};
use super::rows::{NO_POINT, Pair, PairKind};
use crate::ccd::{edge_edge_distance_lower_bound, point_triangle_distance_lower_bound};
use crate::config::SolverConfig;
use crate::deformable::DeformableSet;

/// One object's primitives of one kind, their boxes and their BVH.
struct Tree<'a> {
    leaves: &'a [Leaf],
    boxes: Vec<Aabb>,
    bvh: &'a Bvh,
    root: Box3,
}

/// Frames a kept BVH is refitted before it is built again: refitting keeps its topology,
/// which fits less well as a cloth crumples.
const REBUILD_AGE: u32 = 16;

/// One kept BVH and the frames since it was built.
struct KeptBvh {
    bvh: Bvh,
    leaves: usize,
    age: u32,
}

/// BVHs kept from one broad phase to the next and refitted to the new boxes (a binned
/// build of a 2,500-vertex cloth's six trees every frame took a third of its broad phase).
/// Per object: absolute points, triangles, edges, then comoving points, triangles, edges.
/// The candidates do not depend on a tree's shape (each leaf pair is tested on its exact
/// boxes), so neither do the results.
#[derive(Default)]
pub struct TreeCache {
    trees: Vec<[Option<KeptBvh>; 6]>,
}

impl TreeCache {
    pub fn clear(&mut self) {
        self.trees.clear();
    }
}

/// An object's leaf boxes of one kind and their union.
type LeafBoxes = (Vec<Aabb>, Box3);

/// The widened leaf boxes of `boxes` and their union.
fn leaf_boxes(boxes: impl Iterator<Item = Box3>, widen: f32) -> LeafBoxes {
    let w = Vec3A::splat(widen);
    let boxes: Vec<Aabb> = boxes
        .map(|(lo, hi)| Aabb::new(Vec3::from(lo - w), Vec3::from(hi + w)))
        .collect();
    let root = boxes.iter().fold(
        (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
        |(lo, hi), b| (lo.min(b.mins.into()), hi.max(b.maxs.into())),
    );
    (boxes, root)
}

/// `slot`'s BVH refitted to `boxes`, or built again (new leaves, or old).
fn refresh(slot: &mut Option<KeptBvh>, boxes: &[Aabb]) {
    match slot {
        Some(kept) if kept.leaves == boxes.len() && kept.age < REBUILD_AGE => {
            for (i, b) in boxes.iter().enumerate() {
                kept.bvh.insert_or_update_partially(*b, i as u32, 0.0);
            }
            kept.bvh.refit_without_opt();
            kept.age += 1;
        }
        _ => {
            *slot = Some(KeptBvh {
                bvh: Bvh::from_leaves(BvhBuildStrategy::Binned, boxes),
                leaves: boxes.len(),
                age: 0,
            });
        }
    }
}

#[inline]
fn overlap((lo, hi): Box3, (l, h): Box3) -> bool {
    lo.cmple(h).all() && l.cmple(hi).all()
}

impl SurfaceContact {
    /// The candidate pairs at the current cages, sorted, with a lower bound on each
    /// pair's distance at R.
    pub(crate) fn candidate_pairs(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
    ) -> (Vec<Pair>, Vec<f32>) {
        self.device_candidates = None;
        if let Some(device) = self.device_broad_phase.clone() {
            // A device that fails leaves the candidates to the BVHs below, which find the
            // same pairs (their bounds at most as low): the step stays correct.
            match device.candidates(self, cfg, &set.owner) {
                Ok((mut pairs, mut lower, token)) => {
                    self.device_candidates = Some((token, pairs.len()));
                    self.stats.device_broad_phases += 1;
                    self.stats.device_candidates += pairs.len();
                    let planes = self.plane_pairs(cfg);
                    lower.resize(pairs.len() + planes.len(), 0.0);
                    pairs.extend(planes);
                    return (pairs, lower);
                }
                Err(e) => {
                    self.stats.device_broad_phase_failures += 1;
                    if !self.device_broad_phase_failed {
                        self.device_broad_phase_failed = true;
                        eprintln!(
                            "bevy_avbd: the device's contact broad phase failed ({e}); \
                             the host's BVHs find the candidates"
                        );
                    }
                }
            }
        }
        let mut cache = std::mem::take(&mut self.tree_cache);
        let out = self.candidate_pairs_with(cfg, set, &mut cache);
        self.tree_cache = cache;
        out
    }

    fn candidate_pairs_with(
        &self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        cache: &mut TreeCache,
    ) -> (Vec<Pair>, Vec<f32>) {
        let g = &self.geometry;
        let cages = &self.cages;
        let widen = 0.5 * cfg.contact_min_separation;
        let box_of = |leaf: Leaf, comoving: bool| {
            let (pts, n) = g.leaf_points(leaf);
            if comoving {
                cages.comoving_box(&pts[..n])
            } else {
                cages.absolute_box(&pts[..n])
            }
        };
        let objects = g.leaves.len();
        cache.trees.resize_with(objects, Default::default);
        // Per object and slot: the leaf boxes and their union (comoving slots of
        // deformables only), the kept BVHs refitted or built.
        let boxes: Vec<[Option<LeafBoxes>; 6]> = cache
            .trees
            .par_iter_mut()
            .enumerate()
            .map(|(o, slots)| {
                std::array::from_fn(|k| {
                    let (kind, comoving) = (k % 3, k >= 3);
                    let leaves = &g.leaves[o][kind];
                    if leaves.is_empty() || (comoving && o >= set.len()) {
                        slots[k] = None;
                        return None;
                    }
                    let (b, root) = leaf_boxes(leaves.iter().map(|&l| box_of(l, comoving)), widen);
                    refresh(&mut slots[k], &b);
                    Some((b, root))
                })
            })
            .collect();
        let trees: Vec<[Option<Tree>; 6]> = boxes
            .into_iter()
            .zip(&cache.trees)
            .enumerate()
            .map(|(o, (mut b, slots))| {
                std::array::from_fn(|k| {
                    let (boxes, root) = b[k].take()?;
                    Some(Tree {
                        leaves: &g.leaves[o][k % 3],
                        boxes,
                        bvh: &slots[k].as_ref()?.bvh,
                        root,
                    })
                })
            })
            .collect();
        let root = |t: &[Option<Tree>; 6]| {
            t[..3].iter().flatten().fold(
                (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
                |(lo, hi), t| (lo.min(t.root.0), hi.max(t.root.1)),
            )
        };
        let roots: Vec<Box3> = trees.iter().map(root).collect();
        // The tree pairs to traverse: points against triangles both ways and edges against
        // edges, for a deformable and every later object whose box overlaps it (and is not
        // attached to it), and within each deformable on its comoving boxes.
        let mut jobs: Vec<(usize, usize)> = Vec::new();
        for a in 0..set.len() {
            for b in a + 1..objects {
                let linked = b >= set.len()
                    && self
                        .linked
                        .binary_search(&(a as u32, (b - set.len()) as u32))
                        .is_ok();
                if !linked && overlap(roots[a], roots[b]) {
                    jobs.push((a, b));
                }
            }
        }
        let kinds = [(POINTS, TRIANGLES), (TRIANGLES, POINTS), (EDGES, EDGES)];
        let cross = |ta: &Tree, tb: &Tree| -> Vec<Pair> {
            ta.bvh
                .leaf_pairs(tb.bvh, |n1, n2| n1.intersects(n2))
                .filter(|&(i, j)| ta.boxes[i as usize].intersects(&tb.boxes[j as usize]))
                .filter_map(|(i, j)| {
                    self.pair_of(set, ta.leaves[i as usize], tb.leaves[j as usize])
                })
                .collect()
        };
        let trees = &trees;
        let mut pairs: Vec<Pair> = jobs
            .par_iter()
            .flat_map_iter(|&(a, b)| {
                kinds
                    .iter()
                    .flat_map(move |&(ka, kb)| match (&trees[a][ka], &trees[b][kb]) {
                        (Some(ta), Some(tb)) => cross(ta, tb),
                        _ => Vec::new(),
                    })
            })
            .collect();
        let own: Vec<Pair> = (0..set.len())
            .into_par_iter()
            .flat_map_iter(|b| {
                let [_, _, _, points, triangles, edges] = &trees[b];
                let mut out = match (points, triangles) {
                    (Some(p), Some(t)) => cross(p, t),
                    _ => Vec::new(),
                };
                if let Some(e) = edges {
                    let mut workspace = BvhWorkspace::default();
                    e.bvh
                        .traverse_bvtt_single_tree::<false>(&mut workspace, &mut |i, j| {
                            if let Some(p) =
                                self.pair_of(set, e.leaves[i as usize], e.leaves[j as usize])
                            {
                                out.push(p);
                            }
                        });
                }
                out
            })
            .collect();
        pairs.extend(own);
        pairs.extend(self.plane_pairs(cfg));
        pairs.par_sort_unstable();
        pairs.dedup();
        // Boxes are loose around slanted primitives (a triangle's box covers its whole
        // quad): keep the pairs whose distance at R, less the farthest their points can
        // go, is within ξ.
        let lower: Vec<Option<f32>> = pairs
            .par_iter()
            .map(|pair| self.may_meet(cfg, set, pair))
            .collect();
        pairs
            .into_iter()
            .zip(lower)
            .filter_map(|(pair, d)| Some((pair, d?)))
            .unzip()
    }

    /// The deformable surface points that may reach a half-space before they leave their
    /// cages, as pairs sorted by point (lower bound 0).
    pub(crate) fn plane_pairs(&self, cfg: &SolverConfig) -> Vec<Pair> {
        let g = &self.geometry;
        let planes: Vec<(Vec3, Vec3)> = (0..g.planes.len() as u32)
            .map(|pi| self.plane(pi))
            .collect();
        let mut pairs = Vec::new();
        for &p in &g.surface_points {
            let (lo, hi) = self.cages.absolute[p as usize];
            let (c, h) = (Vec3::from((lo + hi) * 0.5), Vec3::from((hi - lo) * 0.5));
            for (pi, &(normal, at)) in planes.iter().enumerate() {
                let lowest = normal.dot(c - at) - normal.abs().dot(h);
                if lowest <= cfg.contact_min_separation {
                    pairs.push(Pair {
                        kind: PairKind::PointPlane,
                        a: p,
                        b: pi as u32,
                    });
                }
            }
        }
        pairs
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
}
