//! A primitive pair's manifold from step to step: computed again, or carried over while
//! the pair barely moved, and each point tied to the point of the last step it continues
//! (whose record the warm start reads).

use glam::{Vec3, Vec4};

use super::PointId;
use super::primitive::{self, PrimitiveManifold, PrimitiveShape, conj, rot};
use crate::rigid::body::PoseRecord;

/// Coherence thresholds of a carried manifold (parry3d's `try_update_contacts`, so both
/// narrow phases keep resting contacts alike): the normal turned less than 1°, and no point
/// slid more than 1 mm along the surfaces.
const COHERENT_COS: f32 = 0.999_847_7;
const COHERENT_SLIDE_SQ: f32 = 1e-6;

/// The manifold of one pair of primitive shapes and what it continues.
#[derive(Clone, Copy)]
pub(super) struct PrimitiveContact {
    pub manifold: PrimitiveManifold,
    /// Where each point's record was in the last step (the warm start's `prev`).
    pub prev: [PointId; 4],
    /// The normal in A's and in B's frame when the points were found (from A to B, and
    /// from B to A).
    normal_a: Vec3,
    normal_b: Vec3,
}

impl PrimitiveContact {
    /// This step's manifold of shapes `a`, `b` at `poses`, given the pair's last one.
    ///
    /// While the pair moved coherently since its points were found (see the thresholds)
    /// the points stay, anchored on both shapes, and only their distances and the normal
    /// follow the poses: resting contacts keep their anchors, and a stack costs a few
    /// dot products per point instead of a separating-axis test. Otherwise the points are
    /// found again and each continues the old point with its feature id, else the nearest
    /// unclaimed one on A within a tenth of the smaller shape's size while the normal turned
    /// less than about 18°: where two faces are nearly equally good reference faces (boxes
    /// side by side, a box flat on another) the choice, and with it every id, may flip from
    /// step to step, and the warm start must not be lost to it.
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
        let m = primitive::collide(shapes.0, poses.0, shapes.1, poses.1, margin);
        let n = m.normal();
        let mut next = Self {
            manifold: m,
            prev: [PointId::default(); 4],
            normal_a: rot(conj(qa), n),
            normal_b: rot(conj(qb), -n),
        };
        if let Some(old) = old {
            next.continue_points(old, 0.1 * shapes.0.size().min(shapes.1.size()));
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
        let n = rot(qa, self.normal_a);
        if -n.dot(rot(qb, self.normal_b)) < COHERENT_COS {
            return None;
        }
        let mut next = *self;
        for i in 0..m.count as usize {
            let (wa, wb) = m.world_points(i, poses.0, poses.1);
            let dist = (wb - wa).dot(n);
            let old_dist = m.dist(i);
            // Switching between touching and apart may make other points appear.
            if dist * old_dist < 0.0 {
                return None;
            }
            if (wb - n * dist - wa).length_squared() > COHERENT_SLIDE_SQ {
                return None;
            }
            next.manifold.points[i].local_a[3] = dist;
        }
        next.manifold.normal = n.extend(0.0).to_array();
        Some(next)
    }

    /// Ties each point to the old point it continues: same feature id, else the nearest
    /// one on A within `tol` while the normal stayed within about 18°.
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
        if on == 0 || m.normal().dot(om.normal()) < 0.95 {
            return;
        }
        let local =
            |mf: &PrimitiveManifold, i: usize| Vec4::from_array(mf.points[i].local_a).truncate();
        for i in (0..n).filter(|&i| !matched[i]) {
            let p = local(m, i);
            let nearest = (0..on)
                .filter(|&j| !claimed[j])
                .map(|j| (j, local(om, j).distance_squared(p)))
                .filter(|&(_, d2)| d2 <= tol * tol)
                .min_by(|x, y| x.1.total_cmp(&y.1));
            if let Some((j, _)) = nearest {
                (self.prev[i], claimed[j]) = (old.prev[j], true);
            }
        }
    }
}
