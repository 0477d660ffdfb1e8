//! Collision stage: parry3d broad phase (a BVH over the colliders' AABBs) and contact
//! manifolds, persistent per body pair so that λ, k, the stick flag and sticking anchors
//! carry over by feature id; then one Taylor-cached contact record per contact point.
//! Pairs of primitive shapes (spheres, capsules, boxes, half-spaces) get their manifold
//! from [`primitive`], the code the GPU narrow phase ports, unless the config asks for
//! parry3d; every other pair from parry3d's dispatcher.

use std::collections::HashSet;

use glam::Vec3;
use parry3d::bounding_volume::{Aabb, BoundingVolume};
use parry3d::math::Pose;
use parry3d::query::{
    ContactManifold, ContactManifoldsWorkspace, DefaultQueryDispatcher, PersistentQueryDispatcher,
};
use rayon::prelude::*;

use crate::config::{NarrowPhase, SolverConfig};
use crate::error::BodyHandle;
use crate::math::tangent_basis;
use crate::rigid::body::PoseRecord;
use crate::rigid::contact::{ContactPoint, NEW_POINT};
use crate::rigid::{BodySet, JointSet};
use primitive::{PrimitiveContact, PrimitiveShape};

mod broad_phase;
mod device;
pub mod grid;
pub mod primitive;
use broad_phase::BroadPhase;
pub use device::{BodyShape, DevicePairs, NOT_PRIMITIVE, StepPair, detect_pairs};

/// Where a manifold point's record was in the last step that found it: the warm start
/// ([`super::warm_start`]) reads what that record carried by this index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PointId(pub u32);

impl Default for PointId {
    fn default() -> Self {
        Self(NEW_POINT)
    }
}

type Manifold = ContactManifold<(), PointId>;

/// A contact point of the previous step, kept to carry warm starts by feature id.
#[derive(Clone, Copy)]
struct PrevPoint {
    subshapes: (u32, u32),
    fids: (
        parry3d::shape::PackedFeatureId,
        parry3d::shape::PackedFeatureId,
    ),
    data: PointId,
}

/// Persistent state of one colliding body pair.
pub struct PairState {
    /// Body handles, `a < b`.
    pub key: (BodyHandle, BodyHandle),
    a: u32,
    b: u32,
    manifolds: Vec<Manifold>,
    workspace: Option<ContactManifoldsWorkspace>,
    /// Previous step's points: a reused buffer, so no allocation per pair and frame.
    prev: Vec<PrevPoint>,
    /// The manifold of a pair of primitive shapes (then `manifolds` is empty).
    primitive: Option<PrimitiveContact>,
}

#[derive(Default)]
struct BroadPhaseScratch {
    leaves: Vec<Aabb>,
    leaf_body: Vec<u32>,
    planes: Vec<u32>,
    candidates: Vec<(BodyHandle, BodyHandle)>,
    plane_candidates: Vec<(BodyHandle, BodyHandle)>,
    merged: Vec<(BodyHandle, BodyHandle)>,
    old_pairs: Vec<PairState>,
}

#[derive(Default)]
pub struct CollisionState {
    pairs: Vec<PairState>,
    /// Points `lo..hi` of each pair this step (same order as `pairs`).
    pair_records: Vec<(u32, u32)>,
    joint_pairs: HashSet<(BodyHandle, BodyHandle)>,
    joints_dirty: bool,
    /// Broad-phase buffers reused from step to step (no per-frame allocation once warm).
    scratch: BroadPhaseScratch,
    /// The BVH and its overlapping pairs, updated incrementally.
    broad_phase: BroadPhase,
    /// Deepest penetration found in the last detection (m, ≥ 0).
    pub max_penetration: f32,
    /// Contact points found in the last detection.
    pub points: usize,
    /// The pair list of the GPU step's narrow phase, when the device finds the contacts.
    pub device: DevicePairs,
}

impl CollisionState {
    /// Jointed bodies do not collide with each other: the set is rebuilt at the next step.
    pub(crate) fn joints_changed(&mut self) {
        self.joints_dirty = true;
    }
    /// Drops cached pairs of a removed body.
    pub(crate) fn forget_body(&mut self, h: BodyHandle) {
        self.broad_phase.invalidate();
        self.pairs.retain(|p| p.key.0 != h && p.key.1 != h);
        self.pair_records.clear();
    }
    /// Candidate pairs of the last detection.
    pub fn pair_count(&self) -> usize {
        match self.device.active() {
            true => self.device.candidates as usize,
            false => self.pairs.len(),
        }
    }
    /// Candidate pairs with at least one contact point in the last detection.
    pub fn touching_pairs(&self) -> usize {
        match self.device.active() {
            true => self.device.touching as usize,
            false => self.touching().count(),
        }
    }
    /// The solver indices `(a, b)` of the pairs with at least one contact point in the
    /// last detection on the CPU (the device's stay on the device:
    /// `GpuSolver::pair_list`).
    pub fn touching(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.pairs
            .iter()
            .zip(&self.pair_records)
            .filter(|(_, r)| r.1 > r.0)
            .map(|(p, _)| (p.a, p.b))
    }
    /// Drops what every pair carries from step to step (its manifold and the record index
    /// of each point): when the contacts move between the CPU's narrow phase and the
    /// device's, the indices of one do not address the records of the other.
    fn forget_persistence(&mut self) {
        for p in &mut self.pairs {
            p.manifolds.clear();
            p.workspace = None;
            p.primitive = None;
        }
    }
}

/// World pose of body `i`'s collider at the start of the step.
#[inline]
fn shape_pose(bodies: &BodySet, i: usize) -> Pose {
    let p = &bodies.poses[i];
    let q = p.q();
    Pose::from_parts(p.p() + q * bodies.shape_offsets[i], q)
}

/// [`shape_pose`] as the primitive narrow phase reads it.
#[inline]
fn shape_record(bodies: &BodySet, i: usize) -> PoseRecord {
    let pose = shape_pose(bodies, i);
    PoseRecord::new(pose.translation, pose.rotation)
}

fn ordered(a: BodyHandle, b: BodyHandle) -> (BodyHandle, BodyHandle) {
    if a < b { (a, b) } else { (b, a) }
}

/// Finds this step's contact points at the start poses, each with the index it had in the
/// previous step's points (the warm start carries what that record held).
pub fn detect(
    cfg: &SolverConfig,
    bodies: &BodySet,
    joints: &JointSet,
    state: &mut CollisionState,
    out: &mut Vec<ContactPoint>,
) {
    if state.device.active {
        state.forget_persistence();
        state.device.active = false;
    }
    find_pairs(cfg, bodies, joints, state);
    narrow_phase(cfg, bodies, state, out);
}

/// The broad phase: this step's candidate pairs in `state.pairs`, sorted by body handles,
/// each keeping what it carries from the last step.
fn find_pairs(cfg: &SolverConfig, bodies: &BodySet, joints: &JointSet, state: &mut CollisionState) {
    if state.joints_dirty {
        // Broken joints no longer keep their bodies from colliding.
        state.joint_pairs = joints
            .bodies
            .iter()
            .zip(&joints.records)
            .filter(|(_, rec)| !rec.broken())
            .filter_map(|(&(a, b), _)| b.map(|b| ordered(a, b)))
            .collect();
        state.joints_dirty = false;
    }
    let margin = cfg.collision_margin;

    // Broad phase: BVH over bounded colliders; half-spaces are tested against every leaf.
    let mut scratch = std::mem::take(&mut state.scratch);
    let BroadPhaseScratch {
        leaves,
        leaf_body,
        planes,
        candidates,
        plane_candidates,
        merged,
        old_pairs,
    } = &mut scratch;
    leaves.clear();
    leaf_body.clear();
    planes.clear();
    candidates.clear();
    plane_candidates.clear();
    for i in 0..bodies.len() {
        let Some(c) = &bodies.colliders[i] else {
            continue;
        };
        if bodies.frozen[i] {
            continue;
        }
        if c.is_unbounded() {
            planes.push(i as u32);
        } else {
            leaves.push(
                c.shape
                    .compute_aabb(&shape_pose(bodies, i))
                    .loosened(margin),
            );
            leaf_body.push(i as u32);
        }
    }
    // Candidate pairs as sorted body-handle keys. The BVH's pairs come sorted by leaf,
    // and leaves follow body order, so their keys are sorted already while body order is
    // handle order (a removal moves the last body into the freed slot and breaks that);
    // the half-space pairs are a second sorted run.
    let joint_pairs = &state.joint_pairs;
    let consider = |a: u32, b: u32, out: &mut Vec<(BodyHandle, BodyHandle)>| {
        let (a, b) = (a as usize, b as usize);
        if !(bodies.is_solved(a) || bodies.is_solved(b)) {
            return;
        }
        let key = ordered(bodies.handles[a], bodies.handles[b]);
        if !joint_pairs.contains(&key) {
            out.push(key);
        }
    };
    state.broad_phase.update(leaf_body, leaves);
    for (l1, l2) in state.broad_phase.overlaps(leaves) {
        consider(leaf_body[l1 as usize], leaf_body[l2 as usize], candidates);
    }
    for &p in planes.iter() {
        let pose = shape_pose(bodies, p as usize);
        let shape = &bodies.colliders[p as usize].as_ref().unwrap().shape;
        let normal = pose.rotation * shape.as_halfspace().map(|h| h.normal).unwrap_or(Vec3::Y);
        for (l, aabb) in leaves.iter().enumerate() {
            // Signed distance of the AABB's lowest corner along the plane normal.
            let half = aabb.half_extents();
            let lowest = normal.dot(aabb.center() - pose.translation) - half.dot(normal.abs());
            if lowest < margin {
                consider(p, leaf_body[l], plane_candidates);
            }
        }
    }
    sort_keys(candidates);
    sort_keys(plane_candidates);
    merge_sorted(candidates, plane_candidates, merged);
    std::mem::swap(candidates, merged);

    let index_of = |h: BodyHandle| bodies.index_of[h.0 as usize];
    let unchanged = state.pairs.len() == candidates.len()
        && state
            .pairs
            .iter()
            .zip(candidates.iter())
            .all(|(p, &k)| p.key == k);
    if unchanged {
        // A settled scene: the same pairs as last step, kept in place.
        for p in &mut state.pairs {
            (p.a, p.b) = (index_of(p.key.0), index_of(p.key.1));
        }
    } else {
        keep_pairs(&mut state.pairs, candidates, old_pairs, index_of);
    }
    state.scratch = scratch;
}

/// The narrow phase on the CPU and the contact points of every candidate pair.
fn narrow_phase(
    cfg: &SolverConfig,
    bodies: &BodySet,
    state: &mut CollisionState,
    out: &mut Vec<ContactPoint>,
) {
    let margin = cfg.collision_margin;
    // In parallel over pairs (each pair owns its manifolds), and each pair's number of
    // contact points this step while its manifolds are in cache.
    let dispatcher = DefaultQueryDispatcher;
    let CollisionState {
        pairs,
        pair_records,
        ..
    } = state;
    pair_records.resize(pairs.len(), (0, 0));
    pairs
        .par_iter_mut()
        .zip(pair_records.par_iter_mut())
        .with_min_len(32)
        .for_each(|(pair, count)| {
            count.1 = 0;
            let (a, b) = (pair.a as usize, pair.b as usize);
            let (Some(ca), Some(cb)) = (&bodies.colliders[a], &bodies.colliders[b]) else {
                pair.manifolds.clear();
                pair.primitive = None;
                return;
            };
            if cfg.narrow_phase == NarrowPhase::Primitive
                && let (Some(sa), Some(sb)) = (
                    PrimitiveShape::from_parry(ca.shape.as_ref()),
                    PrimitiveShape::from_parry(cb.shape.as_ref()),
                )
            {
                pair.manifolds.clear();
                pair.workspace = None;
                let poses = (&shape_record(bodies, a), &shape_record(bodies, b));
                let next =
                    PrimitiveContact::update((&sa, &sb), poses, margin, pair.primitive.as_ref());
                count.1 = next.manifold.count;
                pair.primitive = Some(next);
                return;
            }
            pair.primitive = None;
            let pa = shape_pose(bodies, a);
            let pb = shape_pose(bodies, b);
            let pos12 = pa.inverse() * pb;
            pair.prev.clear();
            for m in &pair.manifolds {
                for pt in &m.points {
                    pair.prev.push(PrevPoint {
                        subshapes: (m.subshape1, m.subshape2),
                        fids: (pt.fid1, pt.fid2),
                        data: pt.data,
                    });
                }
            }
            let ok = dispatcher.contact_manifolds(
                &pos12,
                ca.shape.as_ref(),
                cb.shape.as_ref(),
                margin,
                &mut pair.manifolds,
                &mut pair.workspace,
            );
            if ok.is_err() {
                pair.manifolds.clear();
                return;
            }
            // Carry the previous index by feature id wherever the dispatcher did not.
            for m in &mut pair.manifolds {
                for pt in &mut m.points {
                    if pt.data.0 == NEW_POINT
                        && let Some(op) = pair.prev.iter().find(|op| {
                            op.subshapes == (m.subshape1, m.subshape2)
                                && op.fids == (pt.fid1, pt.fid2)
                        })
                    {
                        pt.data = op.data;
                    }
                }
            }
            count.1 = pair_record_count(bodies, pair) as u32;
        });

    // Contact points, in pair order: a prefix sum of the counts, then blocks of pairs
    // fill their ranges in parallel. A point depends on its pair only, so the order and
    // the bits are those of a serial loop. The buffer keeps last step's length, so
    // resizing it only initialises the growth.
    let mut total = 0u32;
    for range in pair_records.iter_mut() {
        *range = (total, total + range.1);
        total = range.1;
    }
    out.resize(total as usize, ContactPoint::default());
    state.points = total as usize;
    let mut blocks = Vec::with_capacity(pairs.len().div_ceil(RECORD_BLOCK));
    let mut out_rest = &mut out[..];
    for (block, ranges) in pairs
        .chunks_mut(RECORD_BLOCK)
        .zip(pair_records.chunks(RECORD_BLOCK))
    {
        let len = (ranges[ranges.len() - 1].1 - ranges[0].0) as usize;
        let (o, o_rest) = std::mem::take(&mut out_rest).split_at_mut(len);
        out_rest = o_rest;
        blocks.push((block, ranges, o));
    }
    state.max_penetration = blocks
        .into_par_iter()
        .map(|(block, ranges, out)| {
            let base = ranges[0].0;
            let mut max_pen = 0.0f32;
            for (pair, &(lo, hi)) in block.iter_mut().zip(ranges) {
                let r = (lo - base) as usize..(hi - base) as usize;
                max_pen = max_pen.max(write_pair_points(cfg, bodies, pair, lo, &mut out[r]));
            }
            max_pen
        })
        .reduce(|| 0.0, f32::max);
}

/// Sorts candidate keys unless they already are. In parallel: at 110,000 boxes the serial
/// sort took 26–45 ms on 16 cores. The sorted list is the same whatever the algorithm.
fn sort_keys(keys: &mut [(BodyHandle, BodyHandle)]) {
    if !keys.is_sorted() {
        keys.par_sort_unstable();
    }
}

/// Merges two sorted runs of keys into `out`, without duplicates.
fn merge_sorted(
    a: &[(BodyHandle, BodyHandle)],
    b: &[(BodyHandle, BodyHandle)],
    out: &mut Vec<(BodyHandle, BodyHandle)>,
) {
    out.clear();
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] <= b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out.dedup();
}

/// Rebuilds the pair list from the sorted candidate keys, keeping the persistent state of
/// the pairs that are still candidates (`old` is a reused buffer).
fn keep_pairs(
    pairs: &mut Vec<PairState>,
    candidates: &[(BodyHandle, BodyHandle)],
    old: &mut Vec<PairState>,
    index_of: impl Fn(BodyHandle) -> u32,
) {
    std::mem::swap(pairs, old);
    pairs.clear();
    let mut old_iter = old.drain(..).peekable();
    for &key in candidates {
        while old_iter.peek().is_some_and(|p| p.key < key) {
            old_iter.next();
        }
        let (a, b) = (index_of(key.0), index_of(key.1));
        match old_iter.peek() {
            Some(p) if p.key == key => {
                let mut p = old_iter.next().unwrap();
                p.a = a;
                p.b = b;
                pairs.push(p);
            }
            _ => pairs.push(PairState {
                key,
                a,
                b,
                manifolds: Vec::new(),
                workspace: None,
                prev: Vec::new(),
                primitive: None,
            }),
        }
    }
}

/// Pairs per parallel job of the record stage.
const RECORD_BLOCK: usize = 64;

/// World pose of manifold `m`'s first sub-shape and its world normal, or `None` for a
/// degenerate normal (the manifold then makes no records).
#[inline]
fn manifold_frame(sa: &Pose, m: &Manifold) -> Option<(Pose, Vec3)> {
    let sub_a = m.subshape_pos1().map(|p| *sa * *p).unwrap_or(*sa);
    let n = (sub_a.rotation * m.local_n1).normalize();
    n.is_finite().then_some((sub_a, n))
}

/// Number of contact records of a parry3d pair this step.
fn pair_record_count(bodies: &BodySet, pair: &PairState) -> usize {
    let sa = shape_pose(bodies, pair.a as usize);
    pair.manifolds
        .iter()
        .filter(|m| manifold_frame(&sa, m).is_some())
        .map(|m| m.points.len())
        .sum()
}

/// Writes a pair's contact points into a slice of exactly [`pair_record_count`] entries,
/// the first of which is point `first` of the step, and tags each manifold point with its
/// index for the next step; returns the pair's deepest penetration.
fn write_pair_points(
    cfg: &SolverConfig,
    bodies: &BodySet,
    pair: &mut PairState,
    first: u32,
    out: &mut [ContactPoint],
) -> f32 {
    let mut max_pen = 0.0f32;
    let mut slot = 0usize;
    let (a, b) = (pair.a as usize, pair.b as usize);
    let (pa, pb) = (bodies.poses[a].p(), bodies.poses[b].p());
    let sa = shape_pose(bodies, a);
    let sb = shape_pose(bodies, b);
    let alpha = cfg.alpha;
    // Start errors for anchors at this step's points (Eq. 18 regularisation); the warm
    // start replaces the tangential ones of a point that sticks.
    let mut write = |n: Vec3, wa: Vec3, wb: Vec3, dist: f32, prev: PointId| -> PointId {
        let (t, bt) = tangent_basis(n);
        max_pen = max_pen.max(-dist);
        let gap = wb - wa;
        let c0_n = if dist < 0.0 {
            (1.0 - alpha) * dist
        } else {
            dist
        };
        out[slot] = ContactPoint {
            body_a: a as u32,
            body_b: b as u32,
            prev: prev.0,
            c0_n,
            normal: n.extend((1.0 - alpha) * t.dot(gap)).to_array(),
            arm_a: (wa - pa).extend((1.0 - alpha) * bt.dot(gap)).to_array(),
            arm_b: (wb - pb).extend(0.0).to_array(),
        };
        slot += 1;
        PointId(first + slot as u32 - 1)
    };
    if let Some(PrimitiveContact {
        manifold: m, prev, ..
    }) = &mut pair.primitive
    {
        let (ra, rb) = (shape_record(bodies, a), shape_record(bodies, b));
        let n = m.normal();
        for (i, d) in prev.iter_mut().enumerate().take(m.count as usize) {
            let (wa, wb) = m.world_points(i, &ra, &rb);
            *d = write(n, wa, wb, m.dist(i), PointId(*d)).0;
        }
        return max_pen;
    }
    for m in pair.manifolds.iter_mut() {
        let Some((sub_a, n)) = manifold_frame(&sa, m) else {
            // No records: the next step finds these points new.
            for pt in &mut m.points {
                pt.data = PointId::default();
            }
            continue;
        };
        let sub_b = m.subshape_pos2().map(|p| sb * *p).unwrap_or(sb);
        for pt in &mut m.points {
            pt.data = write(
                n,
                sub_a * pt.local_p1,
                sub_b * pt.local_p2,
                pt.dist,
                pt.data,
            );
        }
    }
    max_pen
}

#[cfg(test)]
mod tests {
    use glam::Vec3;
    use parry3d::bounding_volume::BoundingVolume;

    use super::{ordered, shape_pose};
    use crate::{BodyDesc, BodyHandle, Collider, PhysicsWorld, SolverConfig};

    /// The pairs a brute-force test over every two bodies finds: both have a collider,
    /// at least one is solved, and their boxes grown by the margin overlap.
    fn brute_force(w: &PhysicsWorld) -> Vec<(BodyHandle, BodyHandle)> {
        let b = &w.bodies;
        let margin = w.config.collision_margin;
        let aabb = |i: usize| {
            let c = b.colliders[i].as_ref().unwrap();
            c.shape.compute_aabb(&shape_pose(b, i)).loosened(margin)
        };
        let mut keys = Vec::new();
        for i in 0..b.len() {
            for j in i + 1..b.len() {
                if (b.is_solved(i) || b.is_solved(j)) && aabb(i).intersects(&aabb(j)) {
                    keys.push(ordered(b.handles[i], b.handles[j]));
                }
            }
        }
        keys.sort_unstable();
        keys
    }

    /// The persistent pairs are exactly the brute-force pairs, in key order and with the
    /// bodies' current indices: while boxes fall and land (pairs come and go), while they
    /// rest (the same pairs kept in place), and after removals from the middle of the
    /// body list have reordered the bodies so that the candidate keys come unsorted.
    #[test]
    fn pairs_match_brute_force_through_landing_and_removals() {
        let mut w = PhysicsWorld::new(SolverConfig::default()).unwrap();
        // The ground is a box, not a half-space, so every pair goes through the BVH.
        w.add_body(
            BodyDesc::fixed()
                .at(Vec3::new(0.0, -0.5, 0.0))
                .with_collider(Collider::cuboid(Vec3::new(20.0, 0.5, 20.0)).unwrap()),
        )
        .unwrap();
        let mut boxes = Vec::new();
        for x in 0..6 {
            for z in 0..6 {
                for y in 0..3 {
                    let p = Vec3::new(x as f32 * 0.9, 0.3 + y as f32 * 0.65, z as f32 * 0.9);
                    let desc = BodyDesc::dynamic()
                        .at(p)
                        .with_collider(Collider::cuboid(Vec3::splat(0.3)).unwrap());
                    boxes.push(w.add_body(desc).unwrap());
                }
            }
        }
        let mut same_as_last = 0;
        let mut last = Vec::new();
        for frame in 0..90 {
            if frame == 45 {
                // Every fifth box, from the middle of the list: the last bodies move into
                // the freed slots, so body order no longer follows handle order.
                for &h in boxes.iter().skip(3).step_by(5) {
                    w.remove_body(h).unwrap();
                }
                assert!(!w.bodies.handles.is_sorted());
            }
            let expected = brute_force(&w);
            w.step().unwrap();
            let pairs = &w.collision.pairs;
            let keys: Vec<_> = pairs.iter().map(|p| p.key).collect();
            assert_eq!(keys, expected, "frame {frame}");
            for p in pairs {
                let index = |h: BodyHandle| w.bodies.index_of[h.0 as usize];
                assert_eq!(
                    (p.a, p.b),
                    (index(p.key.0), index(p.key.1)),
                    "frame {frame}"
                );
            }
            same_as_last += (keys == last) as usize;
            last = keys;
        }
        // Both ways of keeping the pairs ran: unchanged lists and changed ones (the first
        // step, landings, the removals and the boxes they let fall).
        assert!(
            (10..=87).contains(&same_as_last),
            "{same_as_last} unchanged steps of 90"
        );
    }
}
