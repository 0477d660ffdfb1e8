//! Warm start of the contacts (AVBD Eq. 19, and the sticking anchors of Sec. 3.3): each
//! contact point that collision detection found becomes a contact record that carries what
//! the same point held at the end of the previous step, found by its index there
//! ([`ContactPoint::prev`]). The GPU backend runs the same formulas on the device
//! (`shaders/contact_warm.wgsl`), where the carried state stays resident.

use glam::{Quat, Vec3};
use rayon::prelude::*;

use super::SolverData;
use crate::config::SolverConfig;
use crate::math::tangent_basis;
use crate::rigid::BodySet;
use crate::rigid::contact::{ContactPoint, ContactRecord, ContactWarm, flags};

#[inline]
fn v3(a: [f32; 4]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

/// What the points of one manifold share: their bodies' friction and larger mass, the
/// bodies' start poses and the contact frame. Computed once per manifold.
struct Manifold {
    mu_s: f32,
    mu_d: f32,
    floor_mass: f32,
    pa: Vec3,
    qa: Quat,
    pb: Vec3,
    qb: Quat,
    n: Vec3,
    t: Vec3,
    bt: Vec3,
}

impl Manifold {
    #[inline]
    fn new(bodies: &BodySet, p: &ContactPoint) -> Self {
        let (a, b) = (p.body_a as usize, p.body_b as usize);
        let (ma, mb) = (&bodies.masses[a], &bodies.masses[b]);
        let (pose_a, pose_b) = (&bodies.poses[a], &bodies.poses[b]);
        let n = v3(p.normal);
        let (t, bt) = tangent_basis(n);
        Self {
            mu_s: (ma.friction[0] * mb.friction[0]).sqrt(),
            mu_d: (ma.friction[1] * mb.friction[1]).sqrt(),
            floor_mass: ma.mass.max(mb.mass),
            pa: pose_a.p(),
            qa: pose_a.q(),
            pb: pose_b.p(),
            qb: pose_b.q(),
            n,
            t,
            bt,
        }
    }

    /// Whether point `q` belongs to the manifold whose first point is `p`: the same bodies
    /// and the same normal (collision detection writes a manifold's points in a row).
    #[inline]
    fn same(p: &ContactPoint, q: &ContactPoint) -> bool {
        p.body_a == q.body_a
            && p.body_b == q.body_b
            && (0..3).all(|i| p.normal[i].to_bits() == q.normal[i].to_bits())
    }
}

/// The record of point `p` of manifold `m` and its anchors in the bodies' frames, from
/// what its previous record carried (`carried`, `None` for a new point).
#[inline]
fn expand(
    cfg: &SolverConfig,
    m: &Manifold,
    p: &ContactPoint,
    carried: Option<&ContactWarm>,
) -> (ContactRecord, [Vec3; 2]) {
    let (pa, qa, pb, qb) = (m.pa, m.qa, m.pb, m.qb);
    let (t, bt) = (m.t, m.bt);
    let (arm_a, arm_b) = (v3(p.arm_a), v3(p.arm_b));
    let alpha = cfg.alpha;
    let mut c0 = [p.normal[3], p.arm_a[3], p.c0_n];
    // Friction inside its cone at the last dual update: the contact sticks, and keeps its
    // anchors, so the tangential rows pull back any slip.
    let stick = carried.is_some_and(|w| w.flags & flags::INSIDE_CONE != 0);
    let anchors = match carried {
        Some(w) if stick => {
            let anc_a = pa + qa * v3(w.anchor_a);
            let anc_b = pb + qb * v3(w.anchor_b);
            let gap = anc_b - anc_a;
            c0[0] = (1.0 - alpha) * t.dot(gap);
            c0[1] = (1.0 - alpha) * bt.dot(gap);
            [qa.conjugate() * (anc_a - pa), qb.conjugate() * (anc_b - pb)]
        }
        _ => [qa.conjugate() * arm_a, qb.conjugate() * arm_b],
    };
    let mut k_floor = 0.0f32;
    let (lambda, k) = match carried {
        Some(w) => {
            let lambda = w.lambda.map(|l| l * alpha * cfg.gamma);
            // The carried normal penalty without last step's floor share (see below).
            let k_prev = [w.k[0], w.k[1], w.k[2] - w.k[3]];
            let mut k = k_prev.map(|k| cfg.warm_penalty(k, 0.0));
            // Friction rows are bounded on both sides (the cone): like motors, they take no
            // load-aware floor, which would make their clamped force flip between bounds.
            // The floor is recomputed from the warm λ every step and kept in `k[3]` so it
            // is not carried into the next step's γ·k: a transient spike of λ must not
            // ratchet the penalty up for the following hundred steps.
            let floor = cfg.load_floor(lambda[2], cfg.contact_error_scale, m.floor_mass);
            k_floor = (floor - k[2]).max(0.0);
            k[2] += k_floor;
            (lambda, k)
        }
        None => ([0.0; 3], [cfg.initial_penalty(m.floor_mass); 3]),
    };
    let record = ContactRecord {
        body_a: p.body_a,
        body_b: p.body_b,
        mu: [m.mu_s, m.mu_d],
        normal: m.n.extend(c0[0]).to_array(),
        arm_a: arm_a.extend(c0[1]).to_array(),
        arm_b: arm_b.extend(c0[2]).to_array(),
        k: [k[0], k[1], k[2], k_floor],
        lambda,
        // A new point starts with static friction.
        flags: if carried.is_none() || stick {
            flags::STICK
        } else {
            0
        },
    };
    (record, anchors)
}

/// Points per parallel job of the warm start.
const POINT_CHUNK: usize = 1024;

/// This step's contact records from its points and what the previous step's records
/// carried (`s.warm`); each point's anchors go to `s.warm_next`, which the last dual
/// update completes. What a manifold's points share is computed once per manifold.
pub fn contacts(cfg: &SolverConfig, bodies: &BodySet, s: &mut SolverData) {
    let n = s.points.len();
    s.contacts.resize(n, ContactRecord::default());
    s.warm_next.resize(n, ContactWarm::default());
    let carried = &s.warm;
    s.points
        .par_chunks(POINT_CHUNK)
        .zip(s.contacts.par_chunks_mut(POINT_CHUNK))
        .zip(s.warm_next.par_chunks_mut(POINT_CHUNK))
        .for_each(|((points, recs), next)| {
            let mut m = Manifold::new(bodies, &points[0]);
            let mut first = 0;
            for (i, p) in points.iter().enumerate() {
                if !Manifold::same(&points[first], p) {
                    (m, first) = (Manifold::new(bodies, p), i);
                }
                let (r, [anchor_a, anchor_b]) = expand(cfg, &m, p, carried.get(p.prev as usize));
                recs[i] = r;
                next[i].anchor_a = anchor_a.extend(0.0).to_array();
                next[i].anchor_b = anchor_b.extend(0.0).to_array();
            }
        });
}

/// What a solved contact carries to the next step: its penalties, multipliers and flags,
/// next to the anchors [`contacts`] stored. The last dual update calls it for every
/// contact ([`super::dual::Pass::Last`]).
#[inline]
pub fn carry(c: &ContactRecord, w: &mut ContactWarm) {
    w.k = c.k;
    w.lambda = [c.lambda[0], c.lambda[1], c.lambda[2]];
    w.flags = c.flags;
}

/// After the step: what its contacts carry (complete since the last dual update) becomes
/// the state the next step's points index.
pub fn store(s: &mut SolverData) {
    std::mem::swap(&mut s.warm, &mut s.warm_next);
}
