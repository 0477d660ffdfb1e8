//! Persistent broad phase: a parry3d BVH over *enlarged* leaf AABBs, kept from step to
//! step with the set of leaf pairs whose enlarged boxes overlap.
//!
//! Each leaf stores its body's AABB grown by a skin. A step only touches the leaves whose
//! body left its stored box (a settled stack: none), re-inserts them in place and queries
//! the tree for their new overlaps, instead of rebuilding the tree and traversing it whole.
//! The candidate pairs handed to the narrow phase are the stored pairs whose *tight* boxes
//! overlap, which is exactly the set a full rebuild over the tight boxes finds: tight ⊆
//! stored for every leaf, and every pair of overlapping stored boxes is kept.

use parry3d::bounding_volume::{Aabb, BoundingVolume};
use parry3d::partitioning::{Bvh, BvhBuildStrategy, BvhWorkspace};

/// Skin of a stored box, as a share of its largest half-extent (plus this many metres).
const SKIN_RATIO: f32 = 0.1;
const SKIN_MIN: f32 = 0.01;

#[derive(Default)]
pub struct BroadPhase {
    bvh: Bvh,
    workspace: BvhWorkspace,
    /// Body index of each leaf (leaf id = position), to detect a changed leaf set.
    leaf_body: Vec<u32>,
    /// Enlarged box of each leaf, as stored in the tree.
    stored: Vec<Aabb>,
    /// Leaf pairs `(l1 < l2)` whose stored boxes overlap: sorted, no duplicates.
    pairs: Vec<(u32, u32)>,
    /// Leaves that left their stored box this step.
    moved: Vec<u32>,
    /// Leaves re-inserted since the last full build (the tree's parent boxes only grow).
    reinserted: usize,
    built: bool,
}

fn enlarge(tight: &Aabb) -> Aabb {
    let half = tight.half_extents();
    tight.loosened(SKIN_MIN + SKIN_RATIO * half.x.max(half.y).max(half.z))
}

impl BroadPhase {
    /// Forces a full rebuild at the next update (bodies were added or removed).
    pub fn invalidate(&mut self) {
        self.built = false;
    }

    /// Brings the tree and the stored pairs up to date with this step's tight boxes
    /// (`tight[l]` is the box of body `leaf_body[l]`).
    pub fn update(&mut self, leaf_body: &[u32], tight: &[Aabb]) {
        let n = tight.len();
        if !self.built || self.leaf_body != leaf_body {
            self.rebuild(leaf_body, tight);
            return;
        }
        self.moved.clear();
        for (l, t) in tight.iter().enumerate() {
            if !self.stored[l].contains(t) {
                self.moved.push(l as u32);
            }
        }
        if self.moved.is_empty() {
            return;
        }
        // Many movers: a fresh tree is as cheap as the queries, and keeps its quality.
        self.reinserted += self.moved.len();
        if self.moved.len() * 4 > n || self.reinserted > n {
            self.rebuild(leaf_body, tight);
            return;
        }
        for &l in &self.moved {
            let li = l as usize;
            self.stored[li] = enlarge(&tight[li]);
            // In place, growing the ancestors' boxes: the tree stays valid (not optimal).
            self.bvh.insert(self.stored[li], l);
        }
        let stored = &self.stored;
        self.pairs
            .retain(|&(a, b)| stored[a as usize].intersects(&stored[b as usize]));
        for &l in &self.moved {
            let bx = &stored[l as usize];
            for o in self.bvh.intersect_aabb(bx) {
                if o != l && stored[o as usize].intersects(bx) {
                    self.pairs.push((l.min(o), l.max(o)));
                }
            }
        }
        self.pairs.sort_unstable();
        self.pairs.dedup();
    }

    fn rebuild(&mut self, leaf_body: &[u32], tight: &[Aabb]) {
        self.leaf_body.clear();
        self.leaf_body.extend_from_slice(leaf_body);
        self.stored.clear();
        self.stored.extend(tight.iter().map(enlarge));
        self.pairs.clear();
        self.reinserted = 0;
        self.built = true;
        if self.stored.len() < 2 {
            self.bvh = Bvh::new();
            return;
        }
        self.bvh = Bvh::from_leaves(BvhBuildStrategy::Binned, &self.stored);
        let (stored, pairs) = (&self.stored, &mut self.pairs);
        self.bvh
            .traverse_bvtt_single_tree::<false>(&mut self.workspace, &mut |a, b| {
                if stored[a as usize].intersects(&stored[b as usize]) {
                    pairs.push((a.min(b), a.max(b)));
                }
            });
        self.pairs.sort_unstable();
        self.pairs.dedup();
    }

    /// Stored pairs whose tight boxes overlap this step, as leaf ids.
    pub fn overlaps<'a>(&'a self, tight: &'a [Aabb]) -> impl Iterator<Item = (u32, u32)> + 'a {
        self.pairs
            .iter()
            .copied()
            .filter(move |&(a, b)| tight[a as usize].intersects(&tight[b as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::Lcg;
    use glam::Vec3;

    fn brute_force(tight: &[Aabb]) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for a in 0..tight.len() {
            for b in a + 1..tight.len() {
                if tight[a].intersects(&tight[b]) {
                    v.push((a as u32, b as u32));
                }
            }
        }
        v
    }

    /// Incremental updates (few movers, many movers, teleports) always report exactly the
    /// overlapping pairs a brute-force test finds.
    #[test]
    fn incremental_pairs_match_brute_force() {
        let mut rng = Lcg(7);
        let n = 300;
        let mut centres: Vec<Vec3> = (0..n)
            .map(|_| Vec3::new(rng.next(), rng.next(), rng.next()) * 12.0)
            .collect();
        let halves: Vec<Vec3> = (0..n)
            .map(|_| Vec3::new(rng.next(), rng.next(), rng.next()) * 0.8 + Vec3::splat(0.1))
            .collect();
        let leaf_body: Vec<u32> = (0..n as u32).collect();
        let mut bp = BroadPhase::default();
        let mut incremental = 0;
        for step in 0..60 {
            // Every 10th step most bodies move; otherwise a few drift and one teleports.
            let movers = if step % 10 == 5 { n } else { 8 };
            for _ in 0..movers {
                let i = (rng.next() * n as f32) as usize % n;
                centres[i] += (Vec3::new(rng.next(), rng.next(), rng.next()) - 0.5) * 0.3;
            }
            let t = (rng.next() * n as f32) as usize % n;
            centres[t] = Vec3::new(rng.next(), rng.next(), rng.next()) * 12.0;
            let tight: Vec<Aabb> = (0..n)
                .map(|i| Aabb::new(centres[i] - halves[i], centres[i] + halves[i]))
                .collect();
            bp.update(&leaf_body, &tight);
            incremental += (bp.reinserted > 0) as usize;
            let mut got: Vec<(u32, u32)> = bp.overlaps(&tight).collect();
            got.sort_unstable();
            assert_eq!(got, brute_force(&tight), "step {step}");
        }
        assert!(
            incremental > 30,
            "the incremental path ran {incremental} times"
        );
    }
}
