//! A primitive pair's manifold from step to step: computed again, or carried over while
//! the pair barely moved, and each point tied to the point of the last step it continues
//! (whose record the warm start reads). `shaders/contact_persistence.wgsl` is the port.

use bytemuck::{Pod, Zeroable};
use glam::Vec4;

use super::{PrimitiveManifold, PrimitiveShape, collide, conj, rot};
use crate::rigid::body::PoseRecord;
use crate::rigid::contact::NEW_POINT;

/// Coherence thresholds of a carried manifold (parry3d's `try_update_contacts`, so both
/// narrow phases keep resting contacts alike): the normal turned less than 1°, and no point
/// slid more than 1 mm along the surfaces.
pub const COHERENT_COS: f32 = 0.999_847_7;
pub const COHERENT_SLIDE_SQ: f32 = 1e-6;
/// A point found again continues the nearest old point within this share of the smaller
/// shape's [`PrimitiveShape::size`], while the normal turned less than `acos` of
/// [`CONTINUE_COS`] (about 18°).
pub const CONTINUE_SHARE: f32 = 0.1;
pub const CONTINUE_COS: f32 = 0.95;

/// The manifold of one pair of primitive shapes and what it continues, 224 bytes
/// (`PairContact` in contact_persistence.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PrimitiveContact {
    pub manifold: PrimitiveManifold,
    /// Per point, where its record was in the last step ([`NEW_POINT`]: nowhere); the
    /// collision stage overwrites it with this step's index once the records are written.
    pub prev: [u32; 4],
    /// The normal in A's frame and in B's (from A to B, and from B to A) when the points
    /// were found (w: 0).
    pub normal_a: [f32; 4],
    pub normal_b: [f32; 4],
}

impl PrimitiveContact {
    /// This step's manifold of shapes `a`, `b` at `poses`, given the pair's last one.
    ///
    /// While the pair moved coherently since its points were found (see the thresholds)
    /// the points stay, anchored on both shapes, and only their distances and the normal
    /// follow the poses: resting contacts keep their anchors, and a stack costs a few
    /// dot products per point instead of a separating-axis test. Otherwise the points are
    /// found again and each continues the old point with its feature id, else the nearest
    /// unclaimed one on A (see [`CONTINUE_SHARE`]): where two faces are nearly equally good
    /// reference faces (boxes side by side, a box flat on another) the choice, and with it
    /// every id, may flip from step to step, and the warm start must not be lost to it.
    pub fn update(
        shapes: (&PrimitiveShape, &PrimitiveShape),
        poses: (&PoseRecord, &PoseRecord),
        margin: f32,
        old: Option<&Self>,
    ) -> Self {
        let qa = Vec4::from_array(poses.0.rotation);
        let qb = Vec4::from_array(poses.1.rotation);
        if let Some(old) = old
            && let Some(carried) = old.carried(poses, qa, qb)
        {
            return carried;
        }
        let m = collide(shapes.0, poses.0, shapes.1, poses.1, margin);
        let n = m.normal();
        let mut next = Self {
            manifold: m,
            prev: [NEW_POINT; 4],
            normal_a: rot(conj(qa), n).extend(0.0).to_array(),
            normal_b: rot(conj(qb), -n).extend(0.0).to_array(),
        };
        if let Some(old) = old {
            next.continue_points(old, CONTINUE_SHARE * shapes.0.size().min(shapes.1.size()));
        }
        next
    }

    /// The old manifold with its distances and normal at the new poses, when it is still
    /// coherent.
    fn carried(&self, poses: (&PoseRecord, &PoseRecord), qa: Vec4, qb: Vec4) -> Option<Self> {
        let m = &self.manifold;
        if m.count == 0 {
            return None;
        }
        let n = rot(qa, Vec4::from_array(self.normal_a).truncate());
        let nb = rot(qb, Vec4::from_array(self.normal_b).truncate());
        if -n.dot(nb) < COHERENT_COS {
            return None;
        }
        let mut next = *self;
        for i in 0..m.count as usize {
            let (wa, wb) = m.world_points(i, poses.0, poses.1);
            let dist = (wb - wa).dot(n);
            // Switching between touching and apart may make other points appear.
            if dist * m.dist(i) < 0.0 {
                return None;
            }
            let slide = wb - n * dist - wa;
            if slide.dot(slide) > COHERENT_SLIDE_SQ {
                return None;
            }
            next.manifold.points[i].local_a[3] = dist;
        }
        next.manifold.normal = n.extend(0.0).to_array();
        Some(next)
    }

    /// Ties each point to the old point it continues: same feature id, else the nearest
    /// unclaimed one on A within `tol` while the normal stayed within [`CONTINUE_COS`].
    fn continue_points(&mut self, old: &Self, tol: f32) {
        let (m, om) = (&self.manifold, &old.manifold);
        let (n, on) = (m.count as usize, om.count as usize);
        let mut claimed = [false; 4];
        let mut matched = [false; 4];
        for i in 0..n {
            if let Some(j) = (0..on).find(|&j| !claimed[j] && om.ids[j] == m.ids[i]) {
                (self.prev[i], claimed[j], matched[i]) = (old.prev[j], true, true);
            }
        }
        if on == 0 || m.normal().dot(om.normal()) < CONTINUE_COS {
            return;
        }
        let local =
            |mf: &PrimitiveManifold, i: usize| Vec4::from_array(mf.points[i].local_a).truncate();
        for i in (0..n).filter(|&i| !matched[i]) {
            let p = local(m, i);
            // The first nearest on ties, as the shader's strict comparison.
            let mut best = (usize::MAX, tol * tol);
            for j in (0..on).filter(|&j| !claimed[j]) {
                let d = local(om, j) - p;
                let d2 = d.dot(d);
                if d2 <= best.1 && (best.0 == usize::MAX || d2 < best.1) {
                    best = (j, d2);
                }
            }
            if best.0 != usize::MAX {
                (self.prev[i], claimed[best.0]) = (old.prev[best.0], true);
            }
        }
    }

    /// Number of points.
    pub fn count(&self) -> usize {
        self.manifold.count as usize
    }
}
