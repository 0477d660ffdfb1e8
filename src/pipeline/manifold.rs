//! Contact manifolds, four points at a time: the kernels of the primal and dual stages.
//!
//! The points of a manifold share their bodies and their frame `D = [t, b, n]`. Per point
//! only its errors and its forces (the clamps of [`ContactRecord::forces_at`], the same
//! bits: [`PointLanes`]) are computed, in the lanes of 4-wide SIMD vectors. The dual update
//! (`super::dual`) stores them; the primal ([`add`]) also takes each point's lever arm in
//! the contact frame, sums the gradient and the Hessian blocks there and rotates them to
//! the world once per manifold. With `r' = Dᵀ arm` and `X' = [r']×`, a point's three rows
//! add `D diag(k) Dᵀ`, `D X' diag(k) Dᵀ` and `D X' diag(k) X'ᵀ Dᵀ`: the blocks
//! `Mat6::add_contact_rows` writes per point in the world frame (the reference the tests
//! compare with).

use glam::{Mat3A, Vec3A};
use wide::f32x4;

use crate::math::{Mat6, Vec6};
use crate::rigid::contact::{ContactRecord, flags};

/// Whether two contact records belong to the same manifold: the same bodies, friction and
/// normal (the frame is a function of the normal).
#[inline(always)]
pub fn same(a: &ContactRecord, b: &ContactRecord) -> bool {
    a.body_a == b.body_a
        && a.body_b == b.body_b
        && a.mu.map(f32::to_bits) == b.mu.map(f32::to_bits)
        && (0..3).all(|i| a.normal[i].to_bits() == b.normal[i].to_bits())
}

/// Hints the CPU to load the cache line holding `v` (nothing where there is no hint).
#[inline(always)]
pub fn prefetch<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch only hints the cache:
        // it never faults and has no effect visible to the program.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((v as *const T).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

/// A body's contact terms, summed in SIMD vectors and 3×3 blocks and added to its 6×6
/// system once: the force and torque to subtract from the gradient, and the Hessian blocks
/// linear–linear, angular–linear (rows angular) and angular–angular.
pub struct ContactSums {
    force: Vec3A,
    torque: Vec3A,
    lin: Mat3A,
    ang_lin: Mat3A,
    ang: Mat3A,
}

impl Default for ContactSums {
    // Not derived: `Mat3A::default()` is the identity.
    fn default() -> Self {
        Self {
            force: Vec3A::ZERO,
            torque: Vec3A::ZERO,
            lin: Mat3A::ZERO,
            ang_lin: Mat3A::ZERO,
            ang: Mat3A::ZERO,
        }
    }
}

impl ContactSums {
    #[inline(always)]
    pub fn add_to(&self, f: &mut Vec6, hm: &mut Mat6) {
        for d in 0..3 {
            f[d] -= self.force[d];
            f[3 + d] -= self.torque[d];
        }
        hm.add_blocks(&self.lin, &self.ang_lin, &self.ang);
    }
}

/// Lane-wise 3-vectors of four points.
pub type V3 = [f32x4; 3];

#[inline(always)]
fn splat3(v: &[f32]) -> V3 {
    [f32x4::splat(v[0]), f32x4::splat(v[1]), f32x4::splat(v[2])]
}
#[inline(always)]
fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
#[inline(always)]
fn dot(a: V3, b: V3) -> f32x4 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
#[inline(always)]
fn sum(v: V3) -> Vec3A {
    Vec3A::new(v[0].reduce_add(), v[1].reduce_add(), v[2].reduce_add())
}

/// One manifold's frame `D = [t, b, n]`, its friction coefficients and its two bodies'
/// displacements, each in every lane.
pub struct Frame {
    t: Vec3A,
    b: Vec3A,
    n: Vec3A,
    dirs: [V3; 3],
    mu_s: f32,
    mu_d: f32,
    lin_a: V3,
    ang_a: V3,
    lin_b: V3,
    ang_b: V3,
}

impl Frame {
    /// The frame of the manifold whose first record is `first`, at displacements `dxa`,
    /// `dxb` of its bodies.
    #[inline(always)]
    pub fn new(first: &ContactRecord, dxa: &[f32; 6], dxb: &[f32; 6]) -> Self {
        let [t, b, n] = first.dirs().map(Vec3A::from);
        Self {
            t,
            b,
            n,
            dirs: [t, b, n].map(|d| splat3(&d.to_array())),
            mu_s: first.mu[0],
            mu_d: first.mu[1],
            lin_a: splat3(&dxa[..3]),
            ang_a: splat3(&dxa[3..]),
            lin_b: splat3(&dxb[..3]),
            ang_b: splat3(&dxb[3..]),
        }
    }
}

/// Up to four points of one manifold, one per lane: their errors and their forces after
/// the normal bound and the friction cone, with the same operations in the same order as
/// [`ContactRecord::forces`] per point (the same bits). Lanes past the last point read a
/// zero record (k = λ = 0: every force 0).
pub struct PointLanes {
    pub err: V3,
    pub f: V3,
    pub k: V3,
    pub lambda: V3,
    /// Normal force inside its bound (pressing), as a lane mask.
    pub pressing: f32x4,
    /// Friction inside its cone (sticking), as a lane mask.
    pub inside: f32x4,
    pub arm_a: V3,
    pub arm_b: V3,
}

impl PointLanes {
    #[inline(always)]
    pub fn new(frame: &Frame, group: &[ContactRecord]) -> Self {
        let pad = ContactRecord::default();
        let rec = |l: usize| group.get(l).unwrap_or(&pad);
        // Field xyz of the four records, x, y and z each in one vector.
        let lanes = |field: fn(&ContactRecord) -> [f32; 4]| {
            let v = f32x4::transpose([0, 1, 2, 3].map(|l| f32x4::from(field(rec(l)))));
            [v[0], v[1], v[2]]
        };
        let (arm_a, arm_b) = (lanes(|r| r.arm_a), lanes(|r| r.arm_b));
        let (c0, k, lambda) = (
            lanes(|r| [r.normal[3], r.arm_a[3], r.arm_b[3], 0.0]),
            lanes(|r| r.k),
            lanes(|r| [r.lambda[0], r.lambda[1], r.lambda[2], 0.0]),
        );
        let mu = f32x4::from([0, 1, 2, 3].map(|l| {
            if rec(l).flags & flags::STICK != 0 {
                frame.mu_s
            } else {
                frame.mu_d
            }
        }));
        // Errors Dᵀ δ + c0, δ the relative displacement of the two contact points.
        let pa = cross(frame.ang_a, arm_a);
        let pb = cross(frame.ang_b, arm_b);
        let delta: V3 = [0, 1, 2].map(|i| (frame.lin_b[i] + pb[i]) - (frame.lin_a[i] + pa[i]));
        let [tv, bv, nv] = frame.dirs;
        let err = [
            c0[0] + dot(tv, delta),
            c0[1] + dot(bv, delta),
            c0[2] + dot(nv, delta),
        ];
        let zero = f32x4::ZERO;
        let mut f = [0, 1, 2].map(|r| k[r] * err[r] + lambda[r]);
        let pressing = f[2].simd_lt(zero);
        f[2] = pressing.select(f[2], zero);
        let limit = mu * -f[2];
        let ft2 = f[0] * f[0] + f[1] * f[1];
        let inside = ft2.simd_le(limit * limit);
        let ft = ft2.sqrt();
        let scale = ft.simd_gt(zero).select(limit / ft, zero);
        for r in 0..2 {
            f[r] = inside.select(f[r], f[r] * scale);
        }
        Self {
            err,
            f,
            k,
            lambda,
            pressing,
            inside,
            arm_a,
            arm_b,
        }
    }
}

/// Adds the rows of manifold `run` (consecutive records for which [`same`] holds) to the
/// terms of body A (`side_a`) or body B, at displacements `dxa`, `dxb` of the two bodies.
#[inline(always)]
pub fn add(run: &[ContactRecord], side_a: bool, dxa: &Vec6, dxb: &Vec6, sums: &mut ContactSums) {
    let frame = Frame::new(&run[0], dxa, dxb);
    let (t, b, n) = (frame.t, frame.b, frame.n);
    let [tv, bv, nv] = frame.dirs;
    let zero = f32x4::ZERO;
    let (mut force, mut torque, mut ksum) = ([zero; 3], [zero; 3], [zero; 3]);
    // Entries of Σ X' diag(k): (0,1) (0,2) (1,0) (1,2) (2,0) (2,1) (its diagonal is zero);
    // of Σ X' diag(k) X'ᵀ (symmetric): (0,0) (1,1) (2,2) (0,1) (0,2) (1,2).
    let (mut xk, mut xkx) = ([zero; 6], [zero; 6]);
    for group in run.chunks(4) {
        let PointLanes {
            err,
            f,
            k,
            lambda,
            pressing,
            inside,
            arm_a,
            arm_b,
        } = PointLanes::new(&frame, group);
        // Hessian stiffness: the Eq. 14 rescaling of clamped rows, as
        // `ContactRecord::forces_at` per point.
        let keep_n = pressing | err[2].simd_eq(zero);
        let mut kh = [
            k[0],
            k[1],
            keep_n.select(k[2], ((zero - lambda[2]) / err[2]).abs()),
        ];
        for r in 0..2 {
            let keep = inside | err[r].simd_eq(zero);
            kh[r] = keep.select(k[r], ((f[r] - lambda[r]) / err[r]).abs());
        }
        // This body's lever arm in the contact frame, and its terms there.
        let arm = if side_a { arm_a } else { arm_b };
        let (x, y, z) = (dot(tv, arm), dot(bv, arm), dot(nv, arm));
        for r in 0..3 {
            force[r] += f[r];
            ksum[r] += kh[r];
        }
        torque[0] += y * f[2] - z * f[1];
        torque[1] += z * f[0] - x * f[2];
        torque[2] += x * f[1] - y * f[0];
        // Column j of X' diag(k) is k_j (r' × e_j).
        xk[0] -= kh[1] * z;
        xk[1] += kh[2] * y;
        xk[2] += kh[0] * z;
        xk[3] -= kh[2] * x;
        xk[4] -= kh[0] * y;
        xk[5] += kh[1] * x;
        xkx[0] += kh[1] * z * z + kh[2] * y * y;
        xkx[1] += kh[0] * z * z + kh[2] * x * x;
        xkx[2] += kh[0] * y * y + kh[1] * x * x;
        xkx[3] -= kh[2] * x * y;
        xkx[4] -= kh[1] * x * z;
        xkx[5] -= kh[0] * y * z;
    }
    let (force, torque, ksum) = (sum(force), sum(torque), sum(ksum));
    let [a01, a02, a10, a12, a20, a21] = xk.map(f32x4::reduce_add);
    let [s00, s11, s22, s01, s02, s12] = xkx.map(f32x4::reduce_add);
    let d = Mat3A::from_cols(t, b, n);
    let dt = d.transpose();
    // J_r = ±(d_r, arm × d_r) (− for body A): the force term is ±(F, arm × F), F = Σ f_r d_r.
    let sign = if side_a { -1.0 } else { 1.0 };
    sums.force += d * force * sign;
    sums.torque += d * torque * sign;
    sums.lin += Mat3A::from_cols(t * ksum.x, b * ksum.y, n * ksum.z) * dt;
    let xk = Mat3A::from_cols(
        Vec3A::new(0.0, a10, a20),
        Vec3A::new(a01, 0.0, a21),
        Vec3A::new(a02, a12, 0.0),
    );
    let xkx = Mat3A::from_cols(
        Vec3A::new(s00, s01, s02),
        Vec3A::new(s01, s11, s12),
        Vec3A::new(s02, s12, s22),
    );
    sums.ang_lin += d * xk * dt;
    sums.ang += d * xkx * dt;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::math::Lcg;
    use glam::Vec3;

    impl Lcg {
        fn vec(&mut self, s: f32) -> Vec3 {
            Vec3::new(self.signed(), self.signed(), self.signed()) * s
        }
    }

    /// A random manifold of `len` points (pressing or not, sticking or sliding, fresh or
    /// warm-started) and random displacements of its two bodies.
    pub(crate) fn random_manifold(rng: &mut Lcg, len: usize) -> (Vec<ContactRecord>, Vec6, Vec6) {
        let n = rng.vec(1.0).normalize();
        let run = (0..len)
            .map(|_| {
                let k = 1e3 + 1e6 * rng.signed().abs();
                let fresh = rng.signed() > 0.5;
                let l = |rng: &mut Lcg, s: f32| if fresh { 0.0 } else { rng.signed() * s };
                let flags = if rng.signed() > 0.0 { flags::STICK } else { 0 };
                let (arm_a, arm_b, c0) = (rng.vec(0.5), rng.vec(0.5), rng.vec(0.01));
                ContactRecord {
                    body_a: 3,
                    body_b: 5,
                    flags,
                    mu: [0.6, 0.4],
                    normal: n.extend(c0.x).to_array(),
                    arm_a: arm_a.extend(c0.y).to_array(),
                    arm_b: arm_b.extend(c0.z).to_array(),
                    k: [k, k * 0.5, k * 2.0, 0.0],
                    lambda: [l(rng, 50.0), l(rng, 50.0), -l(rng, 100.0).abs()],
                }
            })
            .collect();
        let dxa: Vec6 = [0; 6].map(|_| rng.signed() * 0.01);
        let dxb: Vec6 = [0; 6].map(|_| rng.signed() * 0.01);
        (run, dxa, dxb)
    }

    /// The kernel gives the gradient and Hessian of the per-point world-frame reference
    /// (`forces` and `Mat6::add_contact_rows` per point), for manifolds of 1 to 9 points
    /// in every state: pressing, separated, sticking, sliding, fresh (λ = 0), both sides.
    #[test]
    fn manifold_kernel_matches_the_per_point_reference() {
        let mut rng = Lcg(7);
        // Points seen pressing and sticking, pressing and sliding, and separated.
        let mut states = [0usize; 3];
        for case in 0..400 {
            let (run, dxa, dxb) = random_manifold(&mut rng, 1 + case % 9);
            for side_a in [true, false] {
                let mut sums = ContactSums::default();
                add(&run, side_a, &dxa, &dxb, &mut sums);
                let (mut f, mut hm) = ([0.0f32; 6], Mat6::ZERO);
                sums.add_to(&mut f, &mut hm);

                let (mut f_ref, mut hm_ref) = ([0.0f32; 6], Mat6::ZERO);
                for c in &run {
                    let cf = c.forces(&dxa, &dxb);
                    states[if !cf.normal_active {
                        2
                    } else {
                        (!cf.inside_cone) as usize
                    }] += 1;
                    let dirs = c.dirs();
                    let (arm, sign) = if side_a {
                        (Vec3::from_slice(&c.arm_a[..3]), -1.0)
                    } else {
                        (Vec3::from_slice(&c.arm_b[..3]), 1.0)
                    };
                    let force = (dirs[0] * cf.f[0] + dirs[1] * cf.f[1] + dirs[2] * cf.f[2]) * sign;
                    let torque = arm.cross(force);
                    for d in 0..3 {
                        f_ref[d] -= force[d];
                        f_ref[3 + d] -= torque[d];
                    }
                    hm_ref.add_contact_rows(&dirs, &cf.k_hessian, arm);
                }
                // f32 sums of terms up to ~1e6 in a different order: relative 1e-4 of
                // the largest entry.
                let scale_f = f_ref.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
                for d in 0..6 {
                    assert!(
                        (f[d] - f_ref[d]).abs() <= 1e-4 * scale_f,
                        "case {case} side_a {side_a}: f {f:?} vs {f_ref:?}"
                    );
                }
                let scale_h = hm_ref
                    .0
                    .iter()
                    .flatten()
                    .fold(1e-3f32, |m, v| m.max(v.abs()));
                for r in 0..6 {
                    for c in 0..=r {
                        let (a, e) = (hm.0[r][c], hm_ref.0[r][c]);
                        assert!(
                            (a - e).abs() <= 1e-4 * scale_h,
                            "case {case} side_a {side_a} H[{r}][{c}]: {a} vs {e}"
                        );
                    }
                }
            }
        }
        assert!(
            states.iter().all(|&n| n >= 100),
            "states covered: {states:?}"
        );
    }
}
