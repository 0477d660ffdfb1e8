//! Primal stage: one block-descent sweep over the colours (AVBD Alg. 1 lines 8–25).
//!
//! For each body of a colour (in parallel) the 6×6 system `H Δx = f` of Eq. 4–6 is
//! assembled from the inertia term and every constraint row touching the body, and solved
//! with LDLᵀ. New iterates go to a second buffer and are copied back after the colour, so
//! the result does not depend on the order or the number of threads.

use glam::Vec3;
use rayon::prelude::*;

use super::surface_contact::SurfaceContact;
use super::surface_contact::geometry::Pose;
use super::{attachments, manifold};
use crate::deformable::AttachmentSet;

use super::coloring::ITEM_JOINT;
use super::{IterateRecord, SolverData};
use crate::config::{ContactModel, SolverConfig};
use crate::math::{Mat6, Vec6, ang, lever_geometric_stiffness, lin, quat_add};
use crate::rigid::body::PoseRecord;
use crate::rigid::contact::ContactRecord;
use crate::rigid::joint::{JointRecord, JointRowState, WORLD, kind, wrap_angle};
use crate::rigid::{BodySet, JointSet};

/// Bodies per rayon task: small colours run inline, large ones are split in chunks.
const CHUNK: usize = 8;

/// Runs one primal sweep over all colours.
pub fn sweep(
    cfg: &SolverConfig,
    bodies: &BodySet,
    joints: &JointSet,
    attachments: &AttachmentSet,
    s: &mut SolverData,
) {
    let contact_on = s.vertices.contact_on;
    if contact_on {
        let v = &mut s.vertices;
        v.contact.iterate_poses(bodies, &s.iterate, &mut v.poses);
    }
    for c in 0..s.colors.count() {
        let group = s.colors.group(c);
        let mut scratch = std::mem::take(&mut s.scratch);
        scratch.clear();
        {
            let ctx = Ctx {
                cfg,
                bodies,
                joints,
                iterate: &s.iterate,
                inertial: &s.inertial,
                contacts: &s.contacts,
                adjacency: &s.adjacency,
                attachments,
                vertices: &s.vertices.x,
                contact: contact_on.then_some(&s.vertices.contact),
                poses: &s.vertices.poses,
            };
            if group.len() <= CHUNK {
                scratch.extend(group.iter().map(|&i| ctx.solve_body(i as usize)));
            } else {
                group
                    .par_iter()
                    .with_min_len(CHUNK)
                    .map(|&i| ctx.solve_body(i as usize))
                    .collect_into_vec(&mut scratch);
            }
        }
        for (k, &i) in s.colors.group(c).iter().enumerate() {
            s.iterate[i as usize] = scratch[k];
        }
        s.scratch = scratch;
    }
}

/// Read-only view of the step state used to solve one body.
pub(crate) struct Ctx<'a> {
    pub cfg: &'a SolverConfig,
    pub bodies: &'a BodySet,
    pub joints: &'a JointSet,
    pub iterate: &'a [IterateRecord],
    pub inertial: &'a [super::InertialRecord],
    pub contacts: &'a [ContactRecord],
    pub adjacency: &'a super::coloring::Adjacency,
    /// Links of this step's bodies to deformable vertices, and the vertices' iterate.
    pub attachments: &'a AttachmentSet,
    pub vertices: &'a [glam::Vec3A],
    /// Surface contact of deformables (rows on this body's surface points), and the rigid
    /// bodies' poses at the iterate.
    pub contact: Option<&'a SurfaceContact>,
    pub poses: &'a [Pose],
}

impl Ctx<'_> {
    /// Displacement (Δp, Δθ) of body `b` from its start pose; zero for the world.
    #[inline]
    pub fn delta(&self, b: u32) -> Vec6 {
        if b == WORLD {
            [0.0; 6]
        } else {
            self.iterate[b as usize].delta6()
        }
    }

    /// Current absolute pose of body `b`.
    #[inline]
    pub fn pose(&self, b: u32) -> PoseRecord {
        if b == WORLD {
            PoseRecord::new(Vec3::ZERO, glam::Quat::IDENTITY)
        } else {
            self.iterate[b as usize].pose(&self.bodies.poses[b as usize])
        }
    }

    /// Assembles and solves body `i`'s 6×6 system; returns its new iterate.
    pub fn solve_body(&self, i: usize) -> IterateRecord {
        let h = self.cfg.dt;
        let inv_h2 = 1.0 / (h * h);
        let it = self.iterate[i];
        let m = &self.bodies.masses[i];
        let q = it.q();
        let iw = m.world_inertia(q);
        let y = &self.inertial[i];

        // Inertia: f = −M (x − y)/h², H = M/h² (angular in momentum form, see integration).
        let f_lin = -(it.dp() - Vec3::new(y.y[0], y.y[1], y.y[2])) * (m.mass * inv_h2);
        let f_ang = -(iw * it.dtheta() - Vec3::new(y.hl[0], y.hl[1], y.hl[2])) * inv_h2;
        let mut f: Vec6 = crate::math::vec6(f_lin, f_ang);
        let mut hm = Mat6::mass(m.mass, iw, inv_h2);

        let me = i as u32;
        let items = self.adjacency.of(i);
        // The records of a body's contacts are scattered over megabytes (58,000 points on
        // `many_pyramids`): ask for all of them now, so that their cache misses overlap
        // instead of stalling the solve one manifold at a time.
        for &item in items {
            if item & ITEM_JOINT == 0 {
                let rec = &self.contacts[(item >> 1) as usize];
                manifold::prefetch(rec);
                manifold::prefetch(&rec.k);
            }
        }
        let mut sums = manifold::ContactSums::default();
        let mut j = 0;
        while j < items.len() {
            let item = items[j];
            let idx = (item >> 1) as usize;
            if item & ITEM_JOINT != 0 {
                self.add_joint(
                    me,
                    &self.joints.records[idx],
                    &self.joints.states[idx],
                    &mut f,
                    &mut hm,
                );
                j += 1;
                continue;
            }
            // The points of one manifold are consecutive records with the same bodies and
            // frame, so they are consecutive items of this body's (constraint-ordered) list.
            let first = &self.contacts[idx];
            let mut len = 1;
            while j + len < items.len()
                && items[j + len] == item + 2 * len as u32
                && manifold::same(first, &self.contacts[idx + len])
            {
                len += 1;
            }
            let run = &self.contacts[idx..idx + len];
            let (dxa, dxb) = (self.delta(first.body_a), self.delta(first.body_b));
            manifold::add(run, first.body_a == me, &dxa, &dxb, &mut sums);
            j += len;
        }
        sums.add_to(&mut f, &mut hm);
        if let Some(contact) = self.contact {
            match self.cfg.contact_model {
                ContactModel::AugmentedLagrangian => {
                    contact.add_body_terms(self.cfg, i, self.vertices, self.poses, &mut f, &mut hm)
                }
                ContactModel::Barrier => contact.add_barrier_body_terms(
                    self.cfg,
                    i,
                    self.vertices,
                    self.poses,
                    &mut f,
                    &mut hm,
                ),
            }
        }
        let attached = self.attachments.of_body(i);
        if !attached.is_empty() {
            let pose = it.pose(&self.bodies.poses[i]);
            for &a in attached {
                let x = self.vertices[self.attachments.records[a as usize].vertex as usize];
                attachments::add_body_rows(
                    self.cfg,
                    self.attachments,
                    a,
                    &pose,
                    x.into(),
                    &mut f,
                    &mut hm,
                );
            }
        }

        let Some(dx) = hm.solve_ldlt(&f) else {
            return it; // non-finite system: keep the iterate, the end-of-step guard reports it
        };
        let dp = it.dp() + lin(&dx);
        let qn = quat_add(q, ang(&dx));
        IterateRecord::new(dp, qn, self.bodies.poses[i].q())
    }

    fn add_joint(&self, me: u32, j: &JointRecord, st: &JointRowState, f: &mut Vec6, hm: &mut Mat6) {
        let pa = self.pose(j.body_a);
        let pb = self.pose(j.body_b);
        let e = j.evaluate(&pa, &pb);
        let is_a = j.body_a == me;
        let alpha = self.cfg.alpha;
        let mut forces = [0.0f32; crate::rigid::joint::MAX_JOINT_ROWS];
        for r in 0..e.n {
            let row = &e.rows[r];
            let c = row_error(row, r, &e, st, alpha, self.cfg.dt, j);
            let (force, k_h) = row_force(row, c, st.k[r], st.lambda[r]);
            forces[r] = force;
            let jr = if is_a { &row.ja } else { &row.jb };
            for d in 0..6 {
                f[d] -= force * jr[d];
            }
            hm.add_outer(jr, k_h);
        }
        // Geometric stiffness (Sec. 3.5), diagonal column-norm approximation.
        let arm = if is_a { e.arm_a } else { e.arm_b };
        if e.n_point > 0 {
            let fv: Vec3 = (0..e.n_point).map(|r| e.dirs[r] * forces[r]).sum();
            hm.add_diag3(lever_geometric_stiffness(fv, arm), true);
        }
        if j.kind == kind::DISTANCE || j.kind == kind::ROPE {
            let fn_ = forces[0];
            if e.dist_len > 1e-6 && fn_ != 0.0 {
                // ∂²|d|/∂p² = (I − n nᵀ)/|d|, column norms √(1 − n_i²)/|d|.
                let n = e.dist_dir;
                let g =
                    Vec3::new(1.0 - n.x * n.x, 1.0 - n.y * n.y, 1.0 - n.z * n.z).max(Vec3::ZERO);
                let g = Vec3::new(g.x.sqrt(), g.y.sqrt(), g.z.sqrt()) * (fn_.abs() / e.dist_len);
                hm.add_diag3(g, false);
            }
            hm.add_diag3(lever_geometric_stiffness(e.dist_dir * forces[0], arm), true);
        }
    }
}

/// Regularised error of joint row `r` (Eq. 18; motor rows measure the angle advanced
/// this step against the target).
#[inline]
pub(crate) fn row_error(
    row: &crate::rigid::joint::Row,
    r: usize,
    e: &crate::rigid::joint::JointEval,
    st: &JointRowState,
    alpha: f32,
    h: f32,
    j: &JointRecord,
) -> f32 {
    if row.motor {
        return wrap_angle(e.angle - st.angle0[0]) - j.limits_motor[2] * h;
    }
    if row.stiffness == 0.0 && row.start_error_is_violation(st.c0[r]) {
        row.c - alpha * st.c0[r]
    } else {
        row.c
    }
}

/// Force of a row and the stiffness to use in its Hessian.
///
/// Hard rows clamp `kC + λ` to their bounds, with the rescaled stiffness of Eq. 14 when
/// clamped. Finite-stiffness rows (springs, soft joints of stiffness k*) use the compliant
/// augmented Lagrangian `F = s (λ + k C)`, `s = k*/(k* + k)`, Hessian `s k`: at a fixed point
/// of the dual update `λ ← F` the force is exactly `k* C`, while λ carries the force across
/// iterations and frames so a stiff spring does not have to be stiff in the primal (the
/// stiffness-ratio problem AVBD's Eq. 16 ramp addresses, without leaving the spring soft).
#[inline]
pub(crate) fn row_force(row: &crate::rigid::joint::Row, c: f32, k: f32, lambda: f32) -> (f32, f32) {
    let (raw, k_h) = if row.stiffness > 0.0 {
        let s = row.stiffness / (row.stiffness + k);
        (s * (lambda + k * c), s * k)
    } else {
        (k * c + lambda, k)
    };
    if raw < row.fmin {
        let kh = if c != 0.0 {
            ((row.fmin - lambda) / c).abs()
        } else {
            k_h
        };
        (row.fmin, kh)
    } else if raw > row.fmax {
        let kh = if c != 0.0 {
            ((row.fmax - lambda) / c).abs()
        } else {
            k_h
        };
        (row.fmax, kh)
    } else {
        (raw, k_h)
    }
}
