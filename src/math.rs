//! Small dense linear algebra and rotation helpers used by the solver.
//!
//! The 6×6 block system of one rigid body is symmetric positive definite by
//! construction (mass matrix + kJᵀJ + diagonal geometric stiffness), so it is
//! solved with an LDLᵀ factorisation instead of an explicit inverse.

use glam::{Quat, Vec3};

/// A symmetric 6×6 matrix stored densely (row-major); only the lower triangle is read by the solve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mat6(pub [[f32; 6]; 6]);

/// A 6-vector: linear part in `[0..3]`, angular part in `[3..6]`.
pub type Vec6 = [f32; 6];

impl Mat6 {
    pub const ZERO: Mat6 = Mat6([[0.0; 6]; 6]);

    /// Block-diagonal mass matrix `diag(m·I, I_world)` scaled by `scale` (1/h² in the solver).
    pub fn mass(mass: f32, inertia_world: glam::Mat3, scale: f32) -> Mat6 {
        let mut m = Mat6::ZERO;
        for i in 0..3 {
            m.0[i][i] = mass * scale;
            for j in 0..3 {
                m.0[3 + i][3 + j] = inertia_world.col(j)[i] * scale;
            }
        }
        m
    }

    /// `self += k · j jᵀ` (rank-one update of one constraint row).
    #[inline]
    pub fn add_outer(&mut self, j: &Vec6, k: f32) {
        for r in 0..6 {
            let kr = k * j[r];
            for c in 0..=r {
                self.0[r][c] += kr * j[c];
            }
        }
    }

    /// `self += Σ_r k_r J_r J_rᵀ` for the three rows of a contact point, `J_r = ±(d_r, arm × d_r)`,
    /// in closed form: with `A = Σ k_r d_r d_rᵀ` and `X = [arm]×`, the block is
    /// `[[A, (X A)ᵀ], [X A, X A Xᵀ]]` (the sign of J cancels). 3 rank-one updates of a 6×6
    /// cost 63 multiply–adds plus the 3 cross products of the Jacobians; this costs about 50.
    #[inline]
    pub fn add_contact_rows(&mut self, dirs: &[Vec3; 3], k: &[f32; 3], arm: Vec3) {
        // A (symmetric 3×3), columns.
        let mut a = [Vec3::ZERO; 3];
        for r in 0..3 {
            let kd = dirs[r] * k[r];
            a[0] += kd * dirs[r].x;
            a[1] += kd * dirs[r].y;
            a[2] += kd * dirs[r].z;
        }
        // X A: column j is arm × A_j.
        let xa = [arm.cross(a[0]), arm.cross(a[1]), arm.cross(a[2])];
        // X A Xᵀ = X (X A)ᵀ: column j is arm × (row j of X A).
        let row = |j: usize| Vec3::new(xa[0][j], xa[1][j], xa[2][j]);
        let xax = [arm.cross(row(0)), arm.cross(row(1)), arm.cross(row(2))];
        let m = &mut self.0;
        for r in 0..3 {
            for c in 0..=r {
                m[r][c] += a[c][r];
                m[3 + r][3 + c] += xax[c][r];
            }
            for c in 0..3 {
                m[3 + r][c] += xa[c][r];
            }
        }
    }

    /// Adds the symmetric linear block `lin`, the angular–linear block `ang_lin` (rows
    /// angular, columns linear) and the symmetric angular block `ang` (lower triangles).
    #[inline]
    pub fn add_blocks(&mut self, lin: &glam::Mat3A, ang_lin: &glam::Mat3A, ang: &glam::Mat3A) {
        let m = &mut self.0;
        for c in 0..3 {
            let (l, x, a) = (lin.col(c), ang_lin.col(c), ang.col(c));
            for r in 0..3 {
                if c <= r {
                    m[r][c] += l[r];
                    m[3 + r][3 + c] += a[r];
                }
                m[3 + r][c] += x[r];
            }
        }
    }

    /// Adds `d` to the diagonal of the angular (`ang = true`) or linear block.
    #[inline]
    pub fn add_diag3(&mut self, d: Vec3, ang: bool) {
        let o = if ang { 3 } else { 0 };
        self.0[o][o] += d.x;
        self.0[o + 1][o + 1] += d.y;
        self.0[o + 2][o + 2] += d.z;
    }

    /// Solves `self · x = b` with an in-place LDLᵀ factorisation of the lower triangle.
    ///
    /// f32 guard: when a penalty k is many orders of magnitude above m/h², the mass
    /// term vanishes in rounding and a pivot can cancel to ~0. Every pivot is kept at
    /// least `1e-6 · max diagonal`, which bounds the condition number the way the
    /// reference GPU ports do, instead of producing inf/NaN. Returns `None` only for
    /// a non-finite matrix.
    pub fn solve_ldlt(&self, b: &Vec6) -> Option<Vec6> {
        let a = &self.0;
        let mut max_diag = 0.0f32;
        for (i, row) in a.iter().enumerate() {
            max_diag = max_diag.max(row[i].abs());
        }
        if !max_diag.is_finite() || max_diag == 0.0 {
            return None;
        }
        let eps = 1e-6 * max_diag;
        let mut l = [[0.0f32; 6]; 6];
        let mut d = [0.0f32; 6];
        for j in 0..6 {
            let mut dj = a[j][j];
            for k in 0..j {
                dj -= l[j][k] * l[j][k] * d[k];
            }
            let dj = dj.max(eps);
            d[j] = dj;
            for i in (j + 1)..6 {
                let mut s = a[i][j];
                for k in 0..j {
                    s -= l[i][k] * l[j][k] * d[k];
                }
                l[i][j] = s / dj;
            }
        }
        // forward: L y = b
        let mut y = *b;
        for i in 0..6 {
            for k in 0..i {
                y[i] -= l[i][k] * y[k];
            }
        }
        // diagonal and backward: Lᵀ x = D⁻¹ y
        for i in 0..6 {
            y[i] /= d[i];
        }
        for i in (0..6).rev() {
            for k in (i + 1)..6 {
                y[i] -= l[k][i] * y[k];
            }
        }
        y.iter().all(|v| v.is_finite()).then_some(y)
    }
}

/// Builds a 6-vector from a linear and an angular part.
#[inline]
pub fn vec6(lin: Vec3, ang: Vec3) -> Vec6 {
    [lin.x, lin.y, lin.z, ang.x, ang.y, ang.z]
}

#[inline]
pub fn lin(v: &Vec6) -> Vec3 {
    Vec3::new(v[0], v[1], v[2])
}

#[inline]
pub fn ang(v: &Vec6) -> Vec3 {
    Vec3::new(v[3], v[4], v[5])
}

#[inline]
pub fn dot6(a: &Vec6, b: &Vec6) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]
}

/// Rotation "subtraction" of AVBD Eq. 20: `(2 · qa · qb⁻¹)_v`, on the short arc.
#[inline]
pub fn quat_sub(qa: Quat, qb: Quat) -> Vec3 {
    let d = qa * qb.conjugate();
    let v = Vec3::new(d.x, d.y, d.z) * 2.0;
    if d.w < 0.0 { -v } else { v }
}

/// Rotation "addition" of AVBD Eq. 21: `normalize(q + ½ (0, w) q)`.
#[inline]
pub fn quat_add(q: Quat, w: Vec3) -> Quat {
    let dq = Quat::from_xyzw(w.x, w.y, w.z, 0.0) * q;
    (q + dq * 0.5).normalize()
}

/// Column norms of the symmetric matrix `½(f rᵀ + r fᵀ) − (f·r) I`, the rotational
/// Hessian of `f · (R r)` (a force applied at a lever arm). Diagonal approximation of
/// the geometric stiffness term G of AVBD Sec. 3.5.
#[inline]
pub fn lever_geometric_stiffness(f: Vec3, r: Vec3) -> Vec3 {
    let fr = f.dot(r);
    let col = |i: usize| {
        let mut c = (f * r[i] + r * f[i]) * 0.5;
        c[i] -= fr;
        c.length()
    };
    Vec3::new(col(0), col(1), col(2))
}

/// `atan2(y, x)` to 5e-7 rad (3.3e-7 plus f32 rounding near ±π) without a libm call (the bending kernel evaluates one per
/// hinge and vertex, and libm's was a fifth of a cloth's frame): octant reduction to
/// `atan(t)`, `t ∈ [0, 1]`, then a degree-13 odd polynomial fitted for the least largest
/// error. Plain f32 arithmetic, so every platform gives the same bits.
#[inline]
pub fn atan2(y: f32, x: f32) -> f32 {
    use std::f32::consts::{FRAC_PI_2, PI};
    const C: [f32; 7] = [
        0.999_996_1,
        -0.333_173_7,
        0.198_078_16,
        -0.132_333_43,
        0.079_623_67,
        -0.033_604_22,
        0.006_811_792_5,
    ];
    let (ax, ay) = (x.abs(), y.abs());
    let (lo, hi) = if ax < ay { (ax, ay) } else { (ay, ax) };
    if hi == 0.0 || hi.is_nan() || lo.is_nan() {
        // atan2(±0, ±0) as libm; NaN propagates.
        return if hi.is_nan() || lo.is_nan() {
            f32::NAN
        } else if x.is_sign_negative() {
            PI.copysign(y)
        } else {
            0.0f32.copysign(y)
        };
    }
    let t = lo / hi;
    let t2 = t * t;
    let mut r = C[6];
    for &c in C[..6].iter().rev() {
        r = r * t2 + c;
    }
    let mut r = r * t;
    if ay > ax {
        r = FRAC_PI_2 - r;
    }
    if x < 0.0 {
        r = PI - r;
    }
    r.copysign(y)
}

/// Two unit vectors orthogonal to `n` and to each other (a right-handed tangent basis).
#[inline]
pub fn tangent_basis(n: Vec3) -> (Vec3, Vec3) {
    let t = n.any_orthonormal_vector();
    (t, n.cross(t))
}

/// A small deterministic generator for tests (no test dependency for random numbers).
#[cfg(test)]
pub(crate) struct Lcg(pub u64);

#[cfg(test)]
impl Lcg {
    /// Uniform in [0, 1).
    pub fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in [−1, 1).
    pub fn signed(&mut self) -> f32 {
        2.0 * self.next() - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atan2_is_within_6e_7_of_libm_in_every_octant() {
        let mut worst = 0.0f64;
        for i in 0..20_000 {
            let a = (i as f64 / 20_000.0 - 0.5) * 2.0 * std::f64::consts::PI * 1.01;
            for r in [1e-3, 1.0, 7.5e3] {
                let (y, x) = ((a.sin() * r) as f32, (a.cos() * r) as f32);
                let exact = (y as f64).atan2(x as f64);
                worst = worst.max((atan2(y, x) as f64 - exact).abs());
            }
        }
        assert!(worst < 6e-7, "{worst}");
        assert_eq!(atan2(0.0, -1.0), std::f32::consts::PI);
        assert_eq!(atan2(0.0, 0.0), 0.0);
        assert!(atan2(f32::NAN, 1.0).is_nan());
    }

    #[test]
    fn contact_rows_match_three_rank_one_updates() {
        let n = Vec3::new(0.3, 0.9, -0.2).normalize();
        let (t, b) = tangent_basis(n);
        let dirs = [t, b, n];
        let k = [1.5e6, 2.5e6, 7.0e7];
        let arm = Vec3::new(0.4, -0.5, 0.3);
        for sign in [1.0f32, -1.0] {
            let mut slow = Mat6::mass(10.0, glam::Mat3::IDENTITY, 3600.0);
            let mut fast = slow;
            for r in 0..3 {
                slow.add_outer(&vec6(dirs[r] * sign, arm.cross(dirs[r]) * sign), k[r]);
            }
            fast.add_contact_rows(&dirs, &k, arm);
            for i in 0..6 {
                for j in 0..=i {
                    let (x, y) = (slow.0[i][j], fast.0[i][j]);
                    assert!(
                        (x - y).abs() <= 1e-5 * x.abs().max(1.0),
                        "[{i}][{j}] {x} vs {y}"
                    );
                }
            }
        }
    }

    #[test]
    fn ldlt_solves_spd_system() {
        // A = Bᵀ B + I for a fixed B is SPD.
        let mut a = Mat6::ZERO;
        for r in 0..6 {
            let row: Vec6 = std::array::from_fn(|c| ((r * 7 + c * 3) % 5) as f32 - 2.0);
            a.add_outer(&row, 1.0);
        }
        for i in 0..6 {
            a.0[i][i] += 1.0;
        }
        let x_true: Vec6 = [1.0, -2.0, 0.5, 3.0, -1.0, 0.25];
        let mut b = [0.0; 6];
        for i in 0..6 {
            for j in 0..6 {
                let aij = if j <= i { a.0[i][j] } else { a.0[j][i] };
                b[i] += aij * x_true[j];
            }
        }
        let x = a.solve_ldlt(&b).unwrap();
        for i in 0..6 {
            assert!((x[i] - x_true[i]).abs() < 1e-4, "{x:?}");
        }
    }

    #[test]
    fn ldlt_guards_cancellation() {
        // m/h² = 3600 next to k = 1e12 along one direction: f32 loses the mass term,
        // the guard keeps the result finite and the stiff direction exact.
        let mut a = Mat6::mass(1.0, glam::Mat3::IDENTITY, 3600.0);
        a.add_outer(&[1.0, 1.0, 0.0, 0.0, 0.0, 0.0], 1e12);
        let x = a.solve_ldlt(&[1e12, 1e12, 0.0, 0.0, 0.0, 0.0]).unwrap();
        assert!((x[0] + x[1] - 1.0).abs() < 1e-3, "{x:?}");
    }

    #[test]
    fn quaternion_sub_add_roundtrip() {
        let q0 = Quat::from_rotation_y(0.3);
        let w = Vec3::new(0.01, -0.02, 0.015);
        let q1 = quat_add(q0, w);
        let back = quat_sub(q1, q0);
        assert!((back - w).length() < 1e-5, "{back:?}");
    }
}
