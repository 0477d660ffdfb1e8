//! Contact constraint record: three Taylor-cached rows (tangent, bitangent, normal) per
//! contact point, as in AVBD Sec. 3.3 and Sec. 4 "Approximating Constraints".

use bytemuck::{Pod, Zeroable};
use glam::Vec3;

use crate::math::{Vec6, vec6};

/// `ContactPoint::prev` of a point that was not in the previous step's contacts.
pub const NEW_POINT: u32 = u32::MAX;

/// Flags in `ContactRecord::flags`.
pub mod flags {
    /// Static friction held at the end of the previous step (μ = μ_s, anchors kept).
    pub const STICK: u32 = 1;
    /// Friction was inside its cone at the last dual update (the contact sticks next step).
    pub const INSIDE_CONE: u32 = 2;
}

/// One contact point between body A and body B (either may be static or kinematic).
///
/// Row r ∈ {t, b, n} has error `C_r(x) ≈ c0_r + J_A,r·Δx_A + J_B,r·Δx_B` (first-order
/// Taylor model about the start of the step), with `J_A,r = −[d_r, arm_a × d_r]` and
/// `J_B,r = [d_r, arm_b × d_r]`: the rows measure `d_r · (P_B − P_A)`. The frame
/// `[t, b, n]` is a function of the normal ([`crate::math::tangent_basis`]), so only the
/// normal is stored; the start errors ride in the vectors' fourth lanes. 96 bytes, what the
/// GPU's kernels read and write per point: every word is used.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ContactRecord {
    pub body_a: u32,
    pub body_b: u32,
    /// Static (while the contact sticks) and dynamic friction, μ_s and μ_d.
    pub mu: [f32; 2],
    /// World normal from A to B (xyz); w: regularised start error of row t (Eq. 18).
    pub normal: [f32; 4],
    /// Lever arm of the contact point on A (world, from A's centre of mass); w: the start
    /// error of row b.
    pub arm_a: [f32; 4],
    /// Lever arm on B; w: the start error of row n.
    pub arm_b: [f32; 4],
    /// Penalty k for rows t, b, n; w: the share of the normal row's k that is this step's
    /// load-aware floor (not carried over to the next step).
    pub k: [f32; 4],
    /// Multiplier λ for rows t, b, n.
    pub lambda: [f32; 3],
    /// [`flags`]. Next to `k` and `lambda`, the only fields the dual update writes: it
    /// writes the record's last 32 bytes.
    pub flags: u32,
}

/// One contact point as collision detection finds it: the geometry of this step and where
/// the point was in the previous step. This is what goes up to the GPU each step (64 of
/// the record's 96 bytes); the warm start ([`crate::pipeline::warm_start`] on the CPU,
/// `shaders/contact_warm.wgsl` on the GPU) turns it into a [`ContactRecord`] with the
/// multipliers, penalties and sticking anchors the point carried from that step.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ContactPoint {
    pub body_a: u32,
    pub body_b: u32,
    /// Index of this point's record in the previous step ([`NEW_POINT`] if it is new).
    pub prev: u32,
    /// Regularised start error of the normal row (Eq. 18 applied to the signed distance).
    pub c0_n: f32,
    /// World normal from A to B (xyz); w: regularised start error of the tangent row for
    /// anchors at this step's contact points (a point that slides).
    pub normal: [f32; 4],
    /// Lever arm of the contact point on A (xyz, world, from A's centre of mass); w: the
    /// bitangent row's start error, like `normal`'s w.
    pub arm_a: [f32; 4],
    /// Lever arm on B (xyz); w unused.
    pub arm_b: [f32; 4],
}

/// What a contact point carries to the next step, by record index: the solved penalties
/// (`k[3]` is the load-aware floor share, not carried), multipliers and flags of its record,
/// and its anchors in the bodies' frames (kept while the contact sticks).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ContactWarm {
    pub k: [f32; 4],
    pub lambda: [f32; 3],
    pub flags: u32,
    pub anchor_a: [f32; 4],
    pub anchor_b: [f32; 4],
}

/// Forces of one contact after bounds, and the stiffness to use in the Hessian.
#[derive(Clone, Copy, Debug)]
pub struct ContactForce {
    pub c: [f32; 3],
    pub f: [f32; 3],
    pub k_hessian: [f32; 3],
    /// Normal force inside its bound (pressing).
    pub normal_active: bool,
    /// Friction inside its cone (sticking).
    pub inside_cone: bool,
}

#[inline]
fn v3(a: [f32; 4]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

impl ContactRecord {
    /// The contact frame `[t, b, n]`.
    #[inline]
    pub fn dirs(&self) -> [Vec3; 3] {
        let n = v3(self.normal);
        let (t, b) = crate::math::tangent_basis(n);
        [t, b, n]
    }
    /// Regularised start errors of rows t, b, n.
    #[inline(always)]
    pub fn c0(&self) -> [f32; 3] {
        [self.normal[3], self.arm_a[3], self.arm_b[3]]
    }
    /// Sets the start errors of rows t, b, n.
    #[inline]
    pub fn set_c0(&mut self, c0: [f32; 3]) {
        [self.normal[3], self.arm_a[3], self.arm_b[3]] = c0;
    }
    #[inline]
    pub fn mu(&self) -> f32 {
        if self.flags & flags::STICK != 0 {
            self.mu[0]
        } else {
            self.mu[1]
        }
    }
    /// Row Jacobians (t, b, n) of body A (`side_a`) or body B: the Taylor model's
    /// derivatives, fixed for the whole step (Sec. 4).
    #[inline]
    pub fn jacobians(&self, side_a: bool) -> [Vec6; 3] {
        let dirs = self.dirs();
        if side_a {
            let aa = v3(self.arm_a);
            dirs.map(|d| vec6(-d, -aa.cross(d)))
        } else {
            let ab = v3(self.arm_b);
            dirs.map(|d| vec6(d, ab.cross(d)))
        }
    }

    /// Errors `C_r` of rows t, b, n at displacements `dxa`, `dxb` (the Taylor model).
    #[inline(always)]
    pub fn errors(&self, dxa: &Vec6, dxb: &Vec6) -> [f32; 3] {
        // J_A·Δx_A + J_B·Δx_B = d · (relative displacement of the two contact points), so
        // the three rows share one displacement instead of two 6-vector dots each.
        let (aa, ab) = (v3(self.arm_a), v3(self.arm_b));
        let point_a = crate::math::lin(dxa) + crate::math::ang(dxa).cross(aa);
        let point_b = crate::math::lin(dxb) + crate::math::ang(dxb).cross(ab);
        let delta = point_b - point_a;
        let [t, b, n] = self.dirs();
        let c0 = self.c0();
        // Written out: `[0, 1, 2].map(..)` compiled to an out-of-line call per contact.
        [
            c0[0] + t.dot(delta),
            c0[1] + b.dot(delta),
            c0[2] + n.dot(delta),
        ]
    }

    /// Whether a contact with errors `c` exerts exactly no force and adds exactly nothing
    /// to a body's Hessian, so the primal can skip it: no multiplier yet, separated
    /// (`k C_n > 0` clamps the normal force to 0, rescaled stiffness |0/C_n| = 0), and both
    /// friction errors non-zero (the zero cone then clamps both rows, each rescaled to
    /// |0/C_r| = 0; a row with C_r = 0 would keep its k in the Hessian). On `many_pyramids`
    /// about one contact point in six (the unloaded side contacts) is such.
    #[inline(always)]
    pub fn exerts_nothing(&self, c: &[f32; 3]) -> bool {
        // The friction forces as `forces_at` computes them with λ = 0: their squared norm
        // must be positive in f32 for the cone to clamp them.
        let (ft, fb) = (self.k[0] * c[0], self.k[1] * c[1]);
        // Element by element: a slice comparison compiled to an out-of-line loop.
        (self.lambda[0] == 0.0 && self.lambda[1] == 0.0 && self.lambda[2] == 0.0)
            && c[2] > 0.0
            && c[0] != 0.0
            && c[1] != 0.0
            && ft * ft + fb * fb > 0.0
    }

    /// Errors at displacements `dxa`, `dxb`, then forces clamped to the normal bound and
    /// the friction cone, with the rescaled Hessian stiffness of Eq. 14.
    #[inline(always)]
    pub fn forces(&self, dxa: &Vec6, dxb: &Vec6) -> ContactForce {
        self.forces_at(self.errors(dxa, dxb))
    }

    /// [`Self::forces`] for errors `c` already computed.
    #[inline(always)]
    pub fn forces_at(&self, c: [f32; 3]) -> ContactForce {
        let mut f = [0.0f32; 3];
        for r in 0..3 {
            f[r] = self.k[r] * c[r] + self.lambda[r];
        }
        let mut k_h = [self.k[0], self.k[1], self.k[2]];
        let rescale = |bound: f32, r: usize, k_h: &mut [f32; 3]| {
            if c[r] != 0.0 {
                k_h[r] = ((bound - self.lambda[r]) / c[r]).abs();
            }
        };
        // Normal: force ≤ 0 pushes apart; a positive force would pull, clamp to 0.
        let normal_active = f[2] < 0.0;
        if !normal_active {
            f[2] = 0.0;
            rescale(0.0, 2, &mut k_h);
        }
        // Friction cone ‖f_tb‖ ≤ μ |f_n|.
        let limit = self.mu() * -f[2];
        let ft2 = f[0] * f[0] + f[1] * f[1];
        let inside_cone = ft2 <= limit * limit;
        if !inside_cone {
            let ft = ft2.sqrt();
            let s = if ft > 0.0 { limit / ft } else { 0.0 };
            for r in 0..2 {
                f[r] *= s;
                rescale(f[r], r, &mut k_h);
            }
        }
        ContactForce {
            c,
            f,
            k_hessian: k_h,
            normal_active,
            inside_cone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every contact the primal skips really has zero force and zero Hessian stiffness in
    /// `forces_at`, including tiny, huge and sign-flipped errors and both friction modes.
    #[test]
    fn skipped_contacts_exert_exactly_nothing() {
        let n = Vec3::new(0.2, 0.95, -0.1).normalize();
        let mut skipped = 0;
        let values = [-1e-3, -1e-30, 0.0, 1e-30, 1e-12, 2e-3, 0.4];
        for k in [1e3f32, 3.6e6, 1e10] {
            for stick in [0, flags::STICK] {
                for &ct in &values {
                    for &cb in &values {
                        for &cn in &values {
                            let rec = ContactRecord {
                                flags: stick,
                                mu: [0.5, 0.4],
                                normal: n.extend(0.0).to_array(),
                                k: [k, k, k, 0.0],
                                ..Default::default()
                            };
                            let c = [ct, cb, cn];
                            let cf = rec.forces_at(c);
                            let nothing = cf.f.iter().all(|&f| f == 0.0)
                                && cf.k_hessian.iter().all(|&k| k == 0.0);
                            if rec.exerts_nothing(&c) {
                                skipped += 1;
                                assert!(nothing, "c {c:?}, k {k}: {cf:?}");
                            }
                        }
                    }
                }
            }
        }
        assert!(skipped > 20, "{skipped}");
    }
}
