//! Motion cages: boxes that every point's iterate must stay in for the broad phase's
//! candidates to stay complete. They are built at a reference configuration R (X when
//! built: xᵗ at the frame's start) and hold R, the current iterate and the inertial target,
//! padded. X moves along segments from R to later iterates, so as long as every iterate
//! is inside, X is too; an iterate that leaves its cage (checked before every CCD) makes
//! the broad phase run again from the current X, or, with
//! `SolverConfig::contact_cage_rebuild` off, stops its island's advance where its cages
//! end ([`Cages::reach_along`]), so that a step's work does not depend on where it goes.
//!
//! Each deformable point has two cages:
//! - an absolute one, for pairs with other objects;
//! - a comoving one, for pairs within its own body: the point's displacement from R less
//!   its body's mean displacement τ_b. The distance between two points of one body does
//!   not depend on τ_b, so a body falling or flying fast has small comoving cages and few
//!   self-contact candidates. τ_b is linear in the positions and every point of a body
//!   moves by the same α, so X stays in the comoving cages as well. Where the volume floor
//!   may hold vertices back (`inversion::may_hold`), the mean may move less than the
//!   iterate's, and a held vertex may stay at R while its body moves on: the cages of
//!   such a body allow for both.
//!
//! Rigid points have an absolute cage over their positions at the reference and current
//! poses.

use glam::{Vec3, Vec3A};

use super::geometry::{self, Geometry, Pose};
use super::inversion;
use crate::config::SolverConfig;
use crate::deformable::DeformableSet;
use crate::rigid::BodySet;

/// An axis-aligned box.
pub type Box3 = (Vec3A, Vec3A);

fn hull(points: &[Vec3A], pad: f32) -> Box3 {
    let (lo, hi) = points.iter().fold(
        (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
        |(lo, hi), &p| (lo.min(p), hi.max(p)),
    );
    (lo - Vec3A::splat(pad), hi + Vec3A::splat(pad))
}

#[inline]
fn inside((lo, hi): Box3, p: Vec3A) -> bool {
    p.cmpge(lo).all() && p.cmple(hi).all()
}

/// The largest s in [0, 1] with `a + s d` inside `(lo, hi)` on every axis, for `a` inside
/// (the device's `reach_in`).
fn reach_in((lo, hi): Box3, a: Vec3A, d: Vec3A) -> f32 {
    let mut s = 1.0f32;
    for k in 0..3 {
        if d[k] > 0.0 {
            s = s.min((hi[k] - a[k]) / d[k]);
        } else if d[k] < 0.0 {
            s = s.min((lo[k] - a[k]) / d[k]);
        }
    }
    s.max(0.0)
}

/// Distance from `at` to the farthest corner of `b`.
#[inline]
fn reach((lo, hi): Box3, at: Vec3A) -> f32 {
    (hi - at).max(at - lo).length()
}

/// The padding of a cage: room for the solver to stray from the straight motion (a
/// bounce, a bulge) before the broad phase has to run again: a quarter of the motion, but
/// no more than half the body's size (`size`), which is as far as a bulge goes. Padded by
/// the motion alone, a ball thrown at 1,000 m/s (16.7 m a frame) had cages 4 m wide in
/// every direction and 3.3 million candidate pairs with a 0.6 m board.
fn pad(cfg: &SolverConfig, motion: f32, size: f32) -> f32 {
    (4.0 * cfg.contact_gap).max((0.25 * motion).min(0.5 * size))
}

/// The largest side of the box around `points`.
fn size(points: impl Iterator<Item = Vec3A>) -> f32 {
    let (lo, hi) = points.fold(
        (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
        |(lo, hi), p| (lo.min(p), hi.max(p)),
    );
    (hi - lo).max_element().max(0.0)
}

/// The cages of one frame (or of the rest of it, after a rebuild).
#[derive(Default)]
pub struct Cages {
    /// Per point: where it was when the cages were built (R).
    pub reference: Vec<Vec3A>,
    /// Per point: its absolute cage.
    pub absolute: Vec<Box3>,
    /// Per deformable vertex: its comoving cage (a box of displacements).
    pub comoving: Vec<Box3>,
    /// Per deformable: the reference its mean displacement is taken from.
    pub(crate) body_reference: Vec<Vec3A>,
}

impl Cages {
    /// The mean displacement of every deformable's vertices at `x` from R.
    fn translations(&self, set: &DeformableSet, x: &[Vec3A]) -> Vec<Vec3A> {
        (0..set.len())
            .map(|b| {
                let r = set.vertex_range(b);
                let n = r.len().max(1) as f32;
                let sum: Vec3A = r.map(|v| x[v]).sum();
                sum / n - self.body_reference[b]
            })
            .collect()
    }

    /// Per deformable with vertices the volume floor may hold (`held`): its mean
    /// displacement from R at each of `ends` (guess, target, reached) with those vertices
    /// staying at R instead, the other end of the range its mean may take this frame.
    fn held_translations(
        &self,
        set: &DeformableSet,
        held: &[bool],
        ends: [&[Vec3A]; 3],
    ) -> Vec<Option<[Vec3A; 3]>> {
        (0..set.len())
            .map(|b| {
                let r = set.vertex_range(b);
                if !r.clone().any(|v| held[v]) {
                    return None;
                }
                let n = r.len().max(1) as f32;
                Some(ends.map(|x| {
                    let sum: Vec3A = r
                        .clone()
                        .map(|v| if held[v] { self.reference[v] } else { x[v] })
                        .sum();
                    sum / n - self.body_reference[b]
                }))
            })
            .collect()
    }

    /// Builds the cages at R = the certified configuration (`certified`, `certified_pose`),
    /// around the iterate (`x`, `poses`) and the inertial targets `target`, and around
    /// `reached` too where it is given (the deformables' final iterate of a first run of
    /// the frame, on the GPU backend: its run again must not leave the cages where the
    /// first did). `cross` widens the comoving cages for a second run again, whose first
    /// left them: its rows stopped part of a body earlier than the run before, so the
    /// body's mean moved otherwise; each absolute point less each mean translation (guess,
    /// target, reached) allows for the mean ending near any of them (a heuristic: a third
    /// run that still leaves its cages advances only as far as they reach).
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        g: &Geometry,
        certified: &[Vec3A],
        certified_pose: &[Pose],
        x: &[Vec3A],
        poses: &[Pose],
        target: impl Fn(usize) -> Vec3A,
        reached: &[Vec3A],
        cross: bool,
    ) {
        let n = g.point_count();
        let soft = g.soft_points as usize;
        self.reference.clear();
        self.reference.extend_from_slice(&certified[..soft]);
        self.reference.extend(
            g.rigid_points
                .iter()
                .map(|&(b, r)| certified_pose[b as usize].apply(r)),
        );
        self.body_reference = (0..set.len())
            .map(|b| {
                let r = set.vertex_range(b);
                let n = r.len().max(1) as f32;
                r.map(|v| certified[v]).sum::<Vec3A>() / n
            })
            .collect();
        let soft_size: Vec<f32> = (0..set.len())
            .map(|b| size(set.vertex_range(b).map(|v| certified[v])))
            .collect();
        let mut rigid_size = vec![0.0f32; bodies.len()];
        for (b, range) in &g.rigid_bodies {
            rigid_size[*b as usize] = size(range.clone().map(|p| self.reference[p as usize]));
        }
        let targets: Vec<Vec3A> = (0..soft).map(&target).collect();
        let tau_x = self.translations(set, x);
        let tau_y = self.translations(set, &targets);
        // Without a reached configuration, the guess stands in for it (the same hulls).
        let (reached, tau_r) = match reached.len() == soft {
            true => (reached, self.translations(set, reached)),
            false => (x, tau_x.clone()),
        };
        self.absolute.clear();
        self.absolute.reserve(n);
        self.comoving.clear();
        self.comoving.reserve(soft);
        // A reached point is held within twice the pad of the box the cage would have had:
        // the run again may go a little farther where the first went, but an iterate thrown
        // far by a bad step (a ball crushed at 100 m/s) must not blow the cages up.
        let near = |z: Vec3A, (lo, hi): Box3, pad: f32| {
            z.clamp(lo - Vec3A::splat(2.0 * pad), hi + Vec3A::splat(2.0 * pad))
        };
        let ends: &[&[Vec3A]] = match std::ptr::eq(reached, x) {
            true => &[x, &targets],
            false => &[x, &targets, reached],
        };
        let held = inversion::may_hold(set, certified, ends);
        let holds = self.held_translations(set, &held, [x, &targets, reached]);
        for v in 0..soft {
            let (r, guess, y) = (certified[v], x[v], targets[v]);
            let b = set.owner[v] as usize;
            let p = pad(cfg, (y - r).length(), soft_size[b]);
            let z = near(reached[v], hull(&[r, guess, y], 0.0), p);
            self.absolute.push(hull(&[r, guess, y, z], p));
            let (eg, ey) = (guess - r - tau_x[b], y - r - tau_y[b]);
            let p = pad(cfg, eg.length().max(ey.length()), soft_size[b]);
            let box0 = hull(&[Vec3A::ZERO, eg, ey], 0.0);
            let ez = near(reached[v] - r - tau_r[b], box0, p);
            let mut cage = hull(&[Vec3A::ZERO, eg, ey, ez], p);
            if let Some(held_tau) = holds[b] {
                // The body's mean may move less (its held vertices stay), and a held
                // vertex may stay at R (e = −τ): within 4 pads, as the cross terms below.
                let moved = [guess, y, reached[v]];
                let mut allow = |e: Vec3A| {
                    let e = near(e, box0, 4.0 * p);
                    cage.0 = cage.0.min(e - Vec3A::splat(p));
                    cage.1 = cage.1.max(e + Vec3A::splat(p));
                };
                for (k, tau) in [tau_x[b], tau_y[b], tau_r[b]].into_iter().enumerate() {
                    allow(moved[k] - r - held_tau[k]);
                    if held[v] {
                        allow(-tau);
                        allow(-held_tau[k]);
                    }
                }
            }
            if cross {
                // Within 8 pads: four times the reach allowed a reached point.
                for a in [guess, y, reached[v]] {
                    for tau in [tau_x[b], tau_y[b], tau_r[b]] {
                        let e = near(a - r - tau, box0, 4.0 * p);
                        cage.0 = cage.0.min(e - Vec3A::splat(p));
                        cage.1 = cage.1.max(e + Vec3A::splat(p));
                    }
                }
            }
            self.comoving.push(cage);
        }
        for (k, &(b, r)) in g.rigid_points.iter().enumerate() {
            let (a, e) = (self.reference[soft + k], poses[b as usize].apply(r));
            let p = if geometry::moves(bodies, b as usize) {
                pad(cfg, (e - a).length(), rigid_size[b as usize])
            } else {
                0.0
            };
            self.absolute.push(hull(&[a, e], p));
        }
    }

    /// Whether any deformable vertex's iterate left one of its cages, or any moving rigid
    /// body's points left theirs.
    pub fn escaped(
        &self,
        set: &DeformableSet,
        bodies: &BodySet,
        g: &Geometry,
        x: &[Vec3A],
        poses: &[Pose],
    ) -> bool {
        let tau = self.translations(set, x);
        // Pinned vertices too: they hold still, but their comoving displacement moves
        // with their body's mean.
        let soft = (0..g.soft_points as usize).any(|v| {
            let e = x[v] - self.reference[v] - tau[set.owner[v] as usize];
            !(inside(self.absolute[v], x[v]) && inside(self.comoving[v], e))
        });
        soft || g.rigid_bodies.iter().any(|(b, range)| {
            geometry::moves(bodies, *b as usize)
                && range.clone().any(|p| {
                    let (_, r) = g.rigid_points[(p - g.soft_points) as usize];
                    !inside(self.absolute[p as usize], poses[*b as usize].apply(r))
                })
        })
    }

    /// Per island (`island_of`, by object: deformables, then rigid bodies), the share of
    /// the way from `certified` to the iterate its points go before the first leaves a
    /// cage (1 where none does), shrunk by a relative 1e-4 for the rounding of the
    /// quotients: as far as the candidates stay complete. How far an island goes when
    /// the broad phase does not run again (`SolverConfig::contact_cage_rebuild` off; the
    /// device's `contact_reach`, which its frame's first run uses either way).
    pub fn reach_along(
        &self,
        set: &DeformableSet,
        bodies: &BodySet,
        g: &Geometry,
        island_of: &[u32],
        certified: (&[Vec3A], &[Pose]),
        iterate: (&[Vec3A], &[Pose]),
    ) -> Vec<f32> {
        let mut share = vec![1.0f32; island_of.len()];
        let mut stop = |object: usize, s: f32| {
            if s < 1.0 {
                let i = island_of[object] as usize;
                share[i] = share[i].min(s * (1.0 - 1e-4));
            }
        };
        let (tau_c, tau_x) = (
            self.translations(set, certified.0),
            self.translations(set, iterate.0),
        );
        for v in 0..g.soft_points as usize {
            let (r, b) = (self.reference[v], set.owner[v] as usize);
            let (c, d) = (certified.0[v], iterate.0[v] - certified.0[v]);
            let e0 = c - r - tau_c[b];
            let de = d - (tau_x[b] - tau_c[b]);
            stop(
                b,
                reach_in(self.absolute[v], c, d).min(reach_in(self.comoving[v], e0, de)),
            );
        }
        for (b, range) in &g.rigid_bodies {
            let b = *b as usize;
            if !geometry::moves(bodies, b) {
                continue;
            }
            for p in range.clone() {
                let (_, local) = g.rigid_points[(p - g.soft_points) as usize];
                let c = certified.1[b].apply(local);
                let s = reach_in(self.absolute[p as usize], c, iterate.1[b].apply(local) - c);
                stop(set.len() + b, s);
            }
        }
        share
    }

    /// Per point, the farthest it is from R at `certified` and at the iterate (the ends
    /// of this advance's segment; |y − R| is convex along it): absolute, and for
    /// deformable vertices relative to their body's mean displacement.
    pub fn motion(
        &self,
        set: &DeformableSet,
        g: &Geometry,
        certified: (&[Vec3A], &[Pose]),
        iterate: (&[Vec3A], &[Pose]),
    ) -> (Vec<f32>, Vec<f32>) {
        let soft = g.soft_points as usize;
        let (tau_c, tau_x) = (
            self.translations(set, certified.0),
            self.translations(set, iterate.0),
        );
        let mut absolute = Vec::with_capacity(g.point_count());
        let mut comoving = Vec::with_capacity(soft);
        for v in 0..soft {
            let (r, b) = (self.reference[v], set.owner[v] as usize);
            let (c, x) = (certified.0[v], iterate.0[v]);
            absolute.push((c - r).length().max((x - r).length()));
            comoving.push((c - r - tau_c[b]).length().max((x - r - tau_x[b]).length()));
        }
        for (k, &(b, local)) in g.rigid_points.iter().enumerate() {
            let r = self.reference[soft + k];
            let (c, x) = (
                certified.1[b as usize].apply(local),
                iterate.1[b as usize].apply(local),
            );
            absolute.push((c - r).length().max((x - r).length()));
        }
        (absolute, comoving)
    }

    /// The absolute box of points `pts`.
    pub fn absolute_box(&self, pts: &[u32]) -> Box3 {
        union(pts.iter().map(|&p| self.absolute[p as usize]))
    }

    /// The comoving box of deformable vertices `pts`, placed at R: where the primitive may
    /// be relative to its body's mean motion.
    pub fn comoving_box(&self, pts: &[u32]) -> Box3 {
        union(pts.iter().map(|&p| {
            let (lo, hi) = self.comoving[p as usize];
            let r = self.reference[p as usize];
            (r + lo, r + hi)
        }))
    }

    /// How far point `p` may move from R: absolute, or relative to its body (comoving).
    pub fn reach(&self, p: u32, comoving: bool) -> f32 {
        if comoving {
            reach(self.comoving[p as usize], Vec3A::ZERO)
        } else {
            reach(self.absolute[p as usize], self.reference[p as usize])
        }
    }

    /// Point `p`'s position at R.
    pub fn at(&self, p: u32) -> Vec3 {
        Vec3::from(self.reference[p as usize])
    }
}

fn union(boxes: impl Iterator<Item = Box3>) -> Box3 {
    boxes.fold(
        (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
        |(lo, hi), (l, h)| (lo.min(l), hi.max(h)),
    )
}
