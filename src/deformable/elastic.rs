//! Elastic elements of deformable bodies: their flat records (shared by the CPU and GPU
//! backends) and, for one vertex at a time, the force and 3×3 Hessian block that vertex
//! block descent assembles.
//!
//! - Tetrahedra: Stable Neo-Hookean, `Ψ = μ/2 (tr FᵀF − 3) + λ'/2 (J − α)²` per unit rest
//!   volume (λ' = λ + μ, α = 1 + μ/λ', so the rest state is stress-free and the energy
//!   linearises to Lamé's λ and μ). J is linear in each vertex, so a vertex's block
//!   `V₀ (μ|m|² I + λ' (cof F m)(cof F m)ᵀ)` is the exact Hessian block and is SPD with no
//!   eigen-projection; the energy is defined for inverted elements (J ≤ 0), which it pushes
//!   back.
//! - Triangles (membrane): the 2-D version with `J = area / rest area`; its block drops the
//!   negative part of the `(J − α) ∂²J` term (compression), which keeps it SPD.
//! - Hinges (bending): `½ D w (θ − θ₀)²` with `w = 3|e|²/(A₁+A₂)`, θ the dihedral angle;
//!   Gauss–Newton block `D w ∇θ ∇θᵀ`.
//! - Damping: a viscous stress on the rate of the Green strain, `Ė = (FᵀF − FₜᵀFₜ)/(2h)`,
//!   zero for any rigid motion of the element.

use bytemuck::{Pod, Zeroable};
use glam::{Mat3, Vec2, Vec3, Vec3A};

use super::material::MaterialRecord;

/// A tetrahedron: vertices (global indices), the gradients of the linear shape functions of
/// vertices 1–3 (rows of Dm⁻¹; vertex 0's is minus their sum), rest volume and material.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct TetRecord {
    pub v: [u32; 4],
    /// `m[3a..3a+3]` is the shape gradient of vertex a + 1 (1/m).
    pub m: [f32; 9],
    pub volume: f32,
    pub material: u32,
    pub pad: u32,
}

/// A membrane triangle: vertices, the shape gradients of vertices 1 and 2 in the rest
/// triangle's own 2-D frame, rest area and material.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct TriRecord {
    pub v: [u32; 3],
    pub material: u32,
    /// `(m[0], m[1])` for vertex 1, `(m[2], m[3])` for vertex 2.
    pub m: [f32; 4],
    pub area: f32,
    pub pad: [u32; 3],
}

/// A bending hinge: the edge `v[0]–v[1]`, the opposite vertices `v[2]` (triangle A) and
/// `v[3]` (triangle B), the rest dihedral angle and the weight `3|e|²/(A₁+A₂)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct HingeRecord {
    pub v: [u32; 4],
    pub rest_angle: f32,
    pub weight: f32,
    pub material: u32,
    pub pad: u32,
}

/// A vertex's share of an element: force (N) and Hessian block (N/m).
#[derive(Clone, Copy, Debug)]
pub struct Block {
    pub f: Vec3,
    pub h: Mat3,
}

impl Default for Block {
    // By hand: glam's `Mat3::default()` is the identity.
    fn default() -> Self {
        Self {
            f: Vec3::ZERO,
            h: Mat3::ZERO,
        }
    }
}

impl Block {
    #[inline]
    pub fn add(&mut self, o: Block) {
        self.f += o.f;
        self.h += o.h;
    }
}

#[inline]
fn outer(a: Vec3, b: Vec3) -> Mat3 {
    Mat3::from_cols(a * b.x, a * b.y, a * b.z)
}

impl TetRecord {
    /// The record of a tetrahedron with rest positions `x` (positive volume).
    pub fn new(v: [u32; 4], x: [Vec3; 4], material: u32) -> Self {
        let dm = Mat3::from_cols(x[1] - x[0], x[2] - x[0], x[3] - x[0]);
        let b = dm.inverse();
        // Row a of Dm⁻¹ is the gradient of vertex a + 1's shape function.
        let rows = b.transpose();
        let mut m = [0.0; 9];
        for a in 0..3 {
            m[3 * a..3 * a + 3].copy_from_slice(&rows.col(a).to_array());
        }
        Self {
            v,
            m,
            volume: dm.determinant() / 6.0,
            material,
            pad: 0,
        }
    }

    /// Shape-function gradient of local vertex `a` (0–3).
    #[inline]
    pub fn grad(&self, a: usize) -> Vec3 {
        let m = |k: usize| Vec3::new(self.m[3 * k], self.m[3 * k + 1], self.m[3 * k + 2]);
        if a == 0 {
            -(m(0) + m(1) + m(2))
        } else {
            m(a - 1)
        }
    }

    /// Deformation gradient at positions `x`.
    #[inline]
    pub fn deformation(&self, x: &[Vec3A; 4]) -> Mat3 {
        let e = [x[1] - x[0], x[2] - x[0], x[3] - x[0]].map(Vec3::from);
        let m = |k: usize| Vec3::new(self.m[3 * k], self.m[3 * k + 1], self.m[3 * k + 2]);
        // F = Σ_a e_a m_aᵀ.
        outer(e[0], m(0)) + outer(e[1], m(1)) + outer(e[2], m(2))
    }

    /// Elastic energy at positions `x` (J).
    pub fn energy(&self, mat: &MaterialRecord, x: &[Vec3A; 4]) -> f32 {
        let f = self.deformation(x);
        let ic = f.x_axis.length_squared() + f.y_axis.length_squared() + f.z_axis.length_squared();
        let j = f.determinant();
        self.volume * (0.5 * mat.mu * (ic - 3.0) + 0.5 * mat.lambda * (j - mat.alpha).powi(2))
    }

    /// Force on and Hessian block of local vertex `a` at positions `x`; `start` are the
    /// positions at the start of the step and `inv_h` = 1/h (damping only).
    #[inline]
    pub fn vertex_block(
        &self,
        mat: &MaterialRecord,
        a: usize,
        x: &[Vec3A; 4],
        start: &[Vec3A; 4],
        inv_h: f32,
    ) -> Block {
        let f = self.deformation(x);
        let (f0, f1, f2) = (f.x_axis, f.y_axis, f.z_axis);
        let cof = Mat3::from_cols(f1.cross(f2), f2.cross(f0), f0.cross(f1));
        let j = f0.dot(cof.x_axis);
        let s = mat.lambda * (j - mat.alpha);
        let m = self.grad(a);
        let g = cof * m;
        // ∂Ψ/∂x_a = V₀ P m with P = μF + λ'(J − α) cof F.
        let mut force = -self.volume * (mat.mu * (f * m) + s * g);
        let mut h = Mat3::from_diagonal(Vec3::splat(mat.mu * m.length_squared()))
            + outer(g, g * mat.lambda);
        h *= self.volume;
        if mat.viscosity > 0.0 {
            let ft = self.deformation(start);
            let (d, dh) = viscous(&f, &ft, m, self.volume * mat.viscosity, inv_h);
            force += d;
            h += dh;
        }
        Block { f: force, h }
    }
}

impl TetRecord {
    /// The element's stress times its rest volume, `V₀ (P + 2ηFĖ)`: the force on local
    /// vertex a is `−stress · m_a` (what the coarse step's residual needs, once per element
    /// instead of once per vertex).
    #[inline]
    pub fn stress(
        &self,
        mat: &MaterialRecord,
        x: &[Vec3A; 4],
        start: &[Vec3A; 4],
        inv_h: f32,
    ) -> Mat3 {
        let f = self.deformation(x);
        let (f0, f1, f2) = (f.x_axis, f.y_axis, f.z_axis);
        let cof = Mat3::from_cols(f1.cross(f2), f2.cross(f0), f0.cross(f1));
        let s = mat.lambda * (f0.dot(cof.x_axis) - mat.alpha);
        let mut p = f * mat.mu + cof * s;
        if mat.viscosity > 0.0 {
            let ft = self.deformation(start);
            let edot = (f.transpose() * f - ft.transpose() * ft) * (0.5 * inv_h);
            p += f * edot * (2.0 * mat.viscosity);
        }
        p * self.volume
    }
}

impl TriRecord {
    /// The forces on the three vertices (N).
    #[inline]
    pub fn forces(
        &self,
        mat: &MaterialRecord,
        x: &[Vec3A; 3],
        start: &[Vec3A; 3],
        inv_h: f32,
    ) -> [Vec3; 3] {
        // The membrane's force is not of the stress form (J's gradient is per vertex):
        // each vertex's is its block's force (`vertex_block`, the same operations in the
        // same order, so the same bits), with what the three share computed once and no
        // Hessian.
        let f = self.deformation(x);
        let xv = x.map(Vec3::from);
        let n = (xv[1] - xv[0]).cross(xv[2] - xv[0]);
        let len = n.length();
        let edot = (mat.viscosity > 0.0).then(|| viscous_rate(&f, &self.deformation(start), inv_h));
        [0, 1, 2].map(|a| {
            let m = self.grad(a);
            let mut force = -(mat.mu * (f * m));
            if len > 0.0 {
                let nh = n / len;
                let j = len / (2.0 * self.area);
                let d = xv[(a + 2) % 3] - xv[(a + 1) % 3];
                let gj = nh.cross(d) / (2.0 * self.area);
                force -= mat.lambda * (j - mat.alpha) * gj;
            }
            force *= self.area;
            if let Some(edot) = edot {
                force += viscous_force(&f, &edot, m, self.area * mat.viscosity);
            }
            force
        })
    }
}

impl HingeRecord {
    /// The forces on the four vertices (N).
    #[inline]
    pub fn forces(&self, mat: &MaterialRecord, x: &[Vec3A; 4]) -> [Vec3; 4] {
        let Some((theta, grad)) = dihedral(&x.map(Vec3::from)) else {
            return [Vec3::ZERO; 4];
        };
        let k = mat.bending * self.weight * wrap(theta - self.rest_angle);
        grad.map(|g| g * -k)
    }
}

/// Viscous force and Hessian block on a vertex with shape gradient `m` of an element with
/// deformation `f` (start of step: `ft`) and `c = rest measure × viscosity`:
/// `f = −2c F Ė m`, `Ė = (FᵀF − FₜᵀFₜ)/(2h)`, block `(c/h)(|m|² F Fᵀ + (F m)(F m)ᵀ)`.
/// Generic over the 3×3 (tet) and the 3×2 (membrane, third column zero) cases.
#[inline]
fn viscous(f: &Mat3, ft: &Mat3, m: Vec3, c: f32, inv_h: f32) -> (Vec3, Mat3) {
    let edot = viscous_rate(f, ft, inv_h);
    let fm = *f * m;
    let force = viscous_force(f, &edot, m, c);
    let h = (*f * f.transpose() * m.length_squared() + outer(fm, fm)) * (c * inv_h);
    (force, h)
}

/// `Ė = (FᵀF − FₜᵀFₜ)/(2h)` of [`viscous`].
#[inline]
fn viscous_rate(f: &Mat3, ft: &Mat3, inv_h: f32) -> Mat3 {
    let ft_f = f.transpose() * *f;
    let ct = ft.transpose() * *ft;
    (ft_f - ct) * (0.5 * inv_h)
}

/// The force `−2c F Ė m` of [`viscous`].
#[inline]
fn viscous_force(f: &Mat3, edot: &Mat3, m: Vec3, c: f32) -> Vec3 {
    -2.0 * c * (*f * (*edot * m))
}

impl TriRecord {
    /// The record of a triangle with rest positions `x` (non-zero area).
    pub fn new(v: [u32; 3], x: [Vec3; 3], material: u32) -> Self {
        let e1 = x[1] - x[0];
        let e2 = x[2] - x[0];
        let u = e1.normalize();
        let n = e1.cross(e2);
        let w = n.cross(u).normalize();
        // Rest edges in the triangle's frame (u, w): Dm = [[|e1|, e2·u], [0, e2·w]].
        let dm =
            glam::Mat2::from_cols(Vec2::new(e1.length(), 0.0), Vec2::new(e2.dot(u), e2.dot(w)));
        let rows = dm.inverse().transpose();
        Self {
            v,
            material,
            m: [rows.x_axis.x, rows.x_axis.y, rows.y_axis.x, rows.y_axis.y],
            area: 0.5 * n.length(),
            pad: [0; 3],
        }
    }

    /// Shape gradient of local vertex `a` (0–2), as a 3-vector with a zero third component
    /// (so that the 3×2 deformation gradient is a 3×3 with a zero third column).
    #[inline]
    pub fn grad(&self, a: usize) -> Vec3 {
        let m1 = Vec3::new(self.m[0], self.m[1], 0.0);
        let m2 = Vec3::new(self.m[2], self.m[3], 0.0);
        match a {
            0 => -(m1 + m2),
            1 => m1,
            _ => m2,
        }
    }

    /// The 3×2 deformation gradient (as a 3×3 with a zero third column).
    #[inline]
    pub fn deformation(&self, x: &[Vec3A; 3]) -> Mat3 {
        let (e1, e2) = (Vec3::from(x[1] - x[0]), Vec3::from(x[2] - x[0]));
        outer(e1, self.grad(1)) + outer(e2, self.grad(2))
    }

    pub fn energy(&self, mat: &MaterialRecord, x: &[Vec3A; 3]) -> f32 {
        let f = self.deformation(x);
        let ic = f.x_axis.length_squared() + f.y_axis.length_squared();
        let j = Vec3::from(x[1] - x[0])
            .cross(Vec3::from(x[2] - x[0]))
            .length()
            / (2.0 * self.area);
        self.area * (0.5 * mat.mu * (ic - 2.0) + 0.5 * mat.lambda * (j - mat.alpha).powi(2))
    }

    #[inline]
    pub fn vertex_block(
        &self,
        mat: &MaterialRecord,
        a: usize,
        x: &[Vec3A; 3],
        start: &[Vec3A; 3],
        inv_h: f32,
    ) -> Block {
        let f = self.deformation(x);
        let m = self.grad(a);
        let x = x.map(Vec3::from);
        let n = (x[1] - x[0]).cross(x[2] - x[0]);
        let len = n.length();
        let mut force = -(mat.mu * (f * m));
        let mut h = Mat3::from_diagonal(Vec3::splat(mat.mu * m.length_squared()));
        if len > 0.0 {
            let nh = n / len;
            let j = len / (2.0 * self.area);
            // The edge opposite the vertex, in the triangle's order.
            let d = x[(a + 2) % 3] - x[(a + 1) % 3];
            let gj = nh.cross(d) / (2.0 * self.area);
            let s = mat.lambda * (j - mat.alpha);
            force -= s * gj;
            h += outer(gj, gj * mat.lambda);
            if s > 0.0 {
                // ∂²J/∂x² = |d|² n̂n̂ᵀ / (2 A₀ |n|), PSD; kept only under tension.
                h += outer(nh, nh) * (s * d.length_squared() / (2.0 * self.area * len));
            }
        }
        force *= self.area;
        h *= self.area;
        if mat.viscosity > 0.0 {
            let ft = self.deformation(start);
            let (d, dh) = viscous(&f, &ft, m, self.area * mat.viscosity, inv_h);
            force += d;
            h += dh;
        }
        Block { f: force, h }
    }
}

/// Signed dihedral angle of a hinge and its gradient with respect to its four vertices
/// (edge x₀x₁, x₂ in triangle A, x₃ in triangle B); zero when flat. `None` when a triangle
/// is degenerate.
#[inline]
pub fn dihedral(x: &[Vec3; 4]) -> Option<(f32, [Vec3; 4])> {
    let h = Hinge::new(x)?;
    let (g2, g3) = (h.opposite_a(), h.opposite_b());
    let (sa, sb) = h.projections(x);
    let g0 = g2 * (sa - 1.0) + g3 * (sb - 1.0);
    let g1 = g2 * (-sa) + g3 * (-sb);
    Some((h.theta, [g0, g1, g2, g3]))
}

/// [`dihedral`]'s angle and the gradient at vertex `a` (0–3) alone (the same bits; a
/// vertex solve needs one of the four).
#[inline]
pub(crate) fn dihedral_at(x: &[Vec3; 4], a: usize) -> Option<(f32, Vec3)> {
    let h = Hinge::new(x)?;
    let g = match a {
        2 => h.opposite_a(),
        3 => h.opposite_b(),
        0 | 1 => {
            let (g2, g3) = (h.opposite_a(), h.opposite_b());
            let (sa, sb) = h.projections(x);
            match a {
                0 => g2 * (sa - 1.0) + g3 * (sb - 1.0),
                _ => g2 * (-sa) + g3 * (-sb),
            }
        }
        _ => unreachable!("a hinge has four vertices"),
    };
    Some((h.theta, g))
}

/// What [`dihedral`] and [`dihedral_at`] share: the edge, the two triangles' normals (not
/// unit) and the angle.
struct Hinge {
    e: Vec3,
    na: Vec3,
    nb: Vec3,
    la2: f32,
    lb2: f32,
    le2: f32,
    le: f32,
    theta: f32,
}

impl Hinge {
    #[inline]
    fn new(x: &[Vec3; 4]) -> Option<Hinge> {
        let e = x[1] - x[0];
        let na = e.cross(x[2] - x[0]);
        let nb = (x[3] - x[0]).cross(e);
        let (la2, lb2, le2) = (na.length_squared(), nb.length_squared(), e.length_squared());
        if la2 <= 0.0 || lb2 <= 0.0 || le2 <= 0.0 {
            return None;
        }
        let le = le2.sqrt();
        let theta = crate::math::atan2(na.cross(nb).dot(e) / le, na.dot(nb));
        Some(Hinge {
            e,
            na,
            nb,
            la2,
            lb2,
            le2,
            le,
            theta,
        })
    }

    /// The opposite vertices move θ along their triangle's normal over their height.
    #[inline]
    fn opposite_a(&self) -> Vec3 {
        self.na * (-self.le / self.la2)
    }

    #[inline]
    fn opposite_b(&self) -> Vec3 {
        self.nb * (-self.le / self.lb2)
    }

    /// Edge vertices: by translation and rotation invariance, from where the opposite
    /// vertices project onto the edge (s = 0 at x₀, 1 at x₁).
    #[inline]
    fn projections(&self, x: &[Vec3; 4]) -> (f32, f32) {
        (
            (x[2] - x[0]).dot(self.e) / self.le2,
            (x[3] - x[0]).dot(self.e) / self.le2,
        )
    }
}

impl HingeRecord {
    /// The record of a hinge with rest positions `x` (`v[0]–v[1]` the edge).
    pub fn new(v: [u32; 4], x: [Vec3; 4], material: u32) -> Self {
        let e = x[1] - x[0];
        let area_a = 0.5 * e.cross(x[2] - x[0]).length();
        let area_b = 0.5 * e.cross(x[3] - x[0]).length();
        Self {
            v,
            rest_angle: dihedral(&x).map(|d| d.0).unwrap_or(0.0),
            weight: 3.0 * e.length_squared() / (area_a + area_b),
            material,
            pad: 0,
        }
    }

    pub fn energy(&self, mat: &MaterialRecord, x: &[Vec3A; 4]) -> f32 {
        match dihedral(&x.map(Vec3::from)) {
            Some((theta, _)) => {
                0.5 * mat.bending * self.weight * wrap(theta - self.rest_angle).powi(2)
            }
            None => 0.0,
        }
    }

    #[inline]
    pub fn vertex_block(&self, mat: &MaterialRecord, a: usize, x: &[Vec3A; 4]) -> Block {
        let Some((theta, g)) = dihedral_at(&x.map(Vec3::from), a) else {
            return Block::default();
        };
        let k = mat.bending * self.weight;
        Block {
            f: g * (-k * wrap(theta - self.rest_angle)),
            h: outer(g, g * k),
        }
    }
}

/// An angle difference in (−π, π].
#[inline]
fn wrap(a: f32) -> f32 {
    use std::f32::consts::PI;
    if a > PI {
        a - 2.0 * PI
    } else if a <= -PI {
        a + 2.0 * PI
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::Lcg;

    fn rnd(r: &mut Lcg) -> Vec3 {
        Vec3::new(r.signed(), r.signed(), r.signed())
    }

    /// The dihedral angle and gradient as computed before `Hinge` was shared by
    /// `dihedral` and `dihedral_at` (a frozen copy: the reference of the test below).
    fn dihedral_reference(x: &[Vec3; 4]) -> Option<(f32, [Vec3; 4])> {
        let e = x[1] - x[0];
        let na = e.cross(x[2] - x[0]);
        let nb = (x[3] - x[0]).cross(e);
        let (la2, lb2, le2) = (na.length_squared(), nb.length_squared(), e.length_squared());
        if la2 <= 0.0 || lb2 <= 0.0 || le2 <= 0.0 {
            return None;
        }
        let le = le2.sqrt();
        let theta = crate::math::atan2(na.cross(nb).dot(e) / le, na.dot(nb));
        let g2 = na * (-le / la2);
        let g3 = nb * (-le / lb2);
        let sa = (x[2] - x[0]).dot(e) / le2;
        let sb = (x[3] - x[0]).dot(e) / le2;
        let g0 = g2 * (sa - 1.0) + g3 * (sb - 1.0);
        let g1 = g2 * (-sa) + g3 * (-sb);
        Some((theta, [g0, g1, g2, g3]))
    }

    /// The viscous force as computed before it was split into `viscous_rate` and
    /// `viscous_force` (a frozen copy).
    fn viscous_force_reference(f: &Mat3, ft: &Mat3, m: Vec3, c: f32, inv_h: f32) -> Vec3 {
        let ft_f = f.transpose() * *f;
        let ct = ft.transpose() * *ft;
        let edot = (ft_f - ct) * (0.5 * inv_h);
        -2.0 * c * (*f * (edot * m))
    }

    fn bits(v: Vec3) -> [u32; 3] {
        v.to_array().map(f32::to_bits)
    }

    /// The shortcuts give the bits of the computations they replace: one vertex's hinge
    /// gradient (`dihedral_at`) and `dihedral` against a frozen copy of the earlier
    /// `dihedral`, and the membrane's three forces at once (`TriRecord::forces`) against its
    /// vertex blocks' forces, with the viscous part from a frozen copy of the earlier
    /// `viscous`; random elements.
    #[test]
    fn shortcuts_match_the_full_computations_bit_for_bit() {
        let mut r = Lcg(11);
        for _ in 0..2000 {
            let x = [rnd(&mut r), rnd(&mut r), rnd(&mut r), rnd(&mut r)];
            let reference = dihedral_reference(&x);
            let full = dihedral(&x);
            assert_eq!(
                full.map(|(t, g)| (t.to_bits(), g.map(bits))),
                reference.map(|(t, g)| (t.to_bits(), g.map(bits)))
            );
            for a in 0..4 {
                let one = dihedral_at(&x, a).map(|(t, g)| (t.to_bits(), bits(g)));
                assert_eq!(one, reference.map(|(t, g)| (t.to_bits(), bits(g[a]))));
            }
            let rest = [rnd(&mut r), rnd(&mut r), rnd(&mut r)];
            let tri = TriRecord::new([0, 1, 2], rest, 0);
            let at = [x[0], x[1], x[2]].map(Vec3A::from);
            let start = [x[1], x[2], x[3]].map(Vec3A::from);
            for viscosity in [0.0, 0.3] {
                let mat = MaterialRecord {
                    mu: 2.0,
                    lambda: 5.0,
                    alpha: 1.2,
                    viscosity,
                    ..Default::default()
                };
                let forces = tri.forces(&mat, &at, &start, 60.0);
                let elastic = MaterialRecord {
                    viscosity: 0.0,
                    ..mat
                };
                for a in 0..3 {
                    let mut f = tri.vertex_block(&elastic, a, &at, &start, 60.0).f;
                    if viscosity > 0.0 {
                        let (fx, ft) = (tri.deformation(&at), tri.deformation(&start));
                        let c = tri.area * mat.viscosity;
                        f += viscous_force_reference(&fx, &ft, tri.grad(a), c, 60.0);
                    }
                    assert_eq!(bits(forces[a]), bits(f));
                    let block = tri.vertex_block(&mat, a, &at, &start, 60.0);
                    assert_eq!(bits(forces[a]), bits(block.f));
                }
            }
        }
    }

    /// The membrane and hinge blocks against central differences of their energies, in
    /// f32 with steps sized for it (the tet block is checked in f64 against the Newton
    /// reference's energy in `tests/deformable_energy.rs`).
    #[test]
    fn membrane_and_bending_forces_are_minus_the_energy_gradient() {
        let mut r = Lcg(7);
        let mat = crate::deformable::ClothMaterial::default().record();
        for _ in 0..50 {
            let rest = [Vec3::ZERO, Vec3::X, Vec3::new(0.3, 0.0, 0.9)];
            let rec = TriRecord::new([0, 1, 2], rest, 0);
            // Stretched (the block is exact there: no clamped term).
            let x: [Vec3A; 3] = rest.map(|p| Vec3A::from(p * 1.3 + rnd(&mut r) * 0.05));
            for a in 0..3 {
                let b = rec.vertex_block(&mat, a, &x, &x, 60.0);
                let eps = 1e-3;
                let mut fd = Vec3::ZERO;
                for k in 0..3 {
                    let mut xp = x;
                    let mut xm = x;
                    xp[a][k] += eps;
                    xm[a][k] -= eps;
                    fd[k] = -(rec.energy(&mat, &xp) - rec.energy(&mat, &xm)) / (2.0 * eps);
                }
                assert!(
                    (b.f - fd).length() <= 2e-3 * b.f.length().max(1.0),
                    "{:?} vs {fd:?}",
                    b.f
                );
            }
        }
        let bend = crate::deformable::material::MaterialRecord {
            bending: 1.0,
            ..Default::default()
        };
        for _ in 0..50 {
            let x3 = [
                Vec3::ZERO,
                Vec3::X,
                Vec3::new(0.4, 1.0, 0.0) + rnd(&mut r) * 0.3,
                Vec3::new(0.6, -1.0, 0.0) + rnd(&mut r) * 0.3,
            ];
            let rec = HingeRecord::new(
                [0, 1, 2, 3],
                [
                    Vec3::ZERO,
                    Vec3::X,
                    Vec3::new(0.5, 1.0, 0.0),
                    Vec3::new(0.5, -1.0, 0.0),
                ],
                0,
            );
            assert!(
                rec.rest_angle.abs() < 1e-6,
                "flat rest angle {}",
                rec.rest_angle
            );
            let x: [Vec3A; 4] = x3.map(Vec3A::from);
            for a in 0..4 {
                let b = rec.vertex_block(&bend, a, &x);
                let eps = 1e-3;
                let mut fd = Vec3::ZERO;
                for k in 0..3 {
                    let mut xp = x;
                    let mut xm = x;
                    xp[a][k] += eps;
                    xm[a][k] -= eps;
                    fd[k] = -(rec.energy(&bend, &xp) - rec.energy(&bend, &xm)) / (2.0 * eps);
                }
                assert!(
                    (b.f - fd).length() <= 2e-3 * b.f.length().max(1e-2),
                    "vertex {a}: {:?} vs {fd:?}",
                    b.f
                );
            }
        }
    }
}
