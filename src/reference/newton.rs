//! An f64 reference for deformable solids: Newton's method on the same mesh,
//! material and boundary conditions as the engine, for the static equilibrium or for one
//! implicit-Euler step. Used by the tests and by the scenes' `newton_*` metrics to say
//! what vertex block descent should converge to; never part of a frame.
//!
//! The energy is the engine's (Stable Neo-Hookean per tet, lumped masses `ρV/4`, gravity,
//! and for a step the inertia `1/(2h²)‖x − y‖²_M`), evaluated in f64 with the exact element
//! Hessian `V₀ Bᵀ ∂²Ψ/∂F² B`, projected to positive semi-definite per element by an
//! eigen-decomposition. Each Newton step is a sparse Cholesky solve (faer) followed by a
//! backtracking line search on the energy.

use faer::linalg::solvers::Solve;
use faer::sparse::{SparseColMat, Triplet};
use glam::{DMat3, DVec3, Vec3};
use nalgebra::SMatrix;

use crate::deformable::{SolidMaterial, TetMesh};
use crate::error::PhysicsError;

type Mat12 = SMatrix<f64, 12, 12>;
type Mat9 = SMatrix<f64, 9, 9>;

/// A solid's equilibrium problem in f64.
#[derive(Clone, Debug)]
pub struct NewtonProblem {
    pub rest: Vec<DVec3>,
    pub tets: Vec<[u32; 4]>,
    /// Shear modulus μ, Neo-Hookean λ' and α (as [`crate::deformable::material::MaterialRecord`]).
    pub mu: f64,
    pub lambda: f64,
    pub alpha: f64,
    pub masses: Vec<f64>,
    /// Vertices held at a position (Dirichlet); `None` for free ones.
    pub fixed: Vec<Option<DVec3>>,
    pub gravity: DVec3,
    /// For one implicit-Euler step: `h` and the inertial targets y.
    pub inertia: Option<(f64, Vec<DVec3>)>,
}

/// What [`NewtonProblem::solve`] found.
#[derive(Clone, Debug)]
pub struct NewtonSolution {
    pub x: Vec<DVec3>,
    pub iterations: usize,
    /// Largest free-vertex force at `x` (N).
    pub residual: f64,
    pub energy: f64,
}

fn fail(reason: impl Into<String>) -> PhysicsError {
    PhysicsError::Unsupported(format!("reference Newton solve: {}", reason.into()))
}

impl NewtonProblem {
    /// The static problem of a solid placed as in the engine (`position`, `rotation` are
    /// applied to the mesh) with `pinned` vertices held at their placed positions.
    pub fn statics(
        mesh: &TetMesh,
        material: &SolidMaterial,
        placement: (Vec3, glam::Quat),
        pinned: &[u32],
        gravity: Vec3,
    ) -> Result<Self, PhysicsError> {
        mesh.validate()?;
        material.validate()?;
        let rec = material.record();
        let rest: Vec<DVec3> = mesh
            .vertices
            .iter()
            .map(|&p| (placement.0 + placement.1 * p).as_dvec3())
            .collect();
        let mut masses = vec![0.0; rest.len()];
        for t in &mesh.tets {
            let v = volume(t.map(|i| rest[i as usize]));
            for &i in t {
                masses[i as usize] += material.density as f64 * v / 4.0;
            }
        }
        let mut fixed = vec![None; rest.len()];
        for &p in pinned {
            fixed[p as usize] = Some(rest[p as usize]);
        }
        Ok(Self {
            rest,
            tets: mesh.tets.clone(),
            mu: rec.mu as f64,
            lambda: rec.lambda as f64,
            alpha: rec.alpha as f64,
            masses,
            fixed,
            gravity: gravity.as_dvec3(),
            inertia: None,
        })
    }

    /// Total energy at `x`.
    pub fn energy(&self, x: &[DVec3]) -> f64 {
        let mut e = 0.0;
        for t in &self.tets {
            let (f, v0) = self.deformation(t, x);
            let j = f.determinant();
            let ic =
                f.x_axis.length_squared() + f.y_axis.length_squared() + f.z_axis.length_squared();
            e += v0 * (0.5 * self.mu * (ic - 3.0) + 0.5 * self.lambda * (j - self.alpha).powi(2));
        }
        for (i, xi) in x.iter().enumerate() {
            e -= self.masses[i] * self.gravity.dot(*xi);
            if let Some((h, y)) = &self.inertia {
                e += 0.5 * self.masses[i] * (*xi - y[i]).length_squared() / (h * h);
            }
        }
        e
    }

    fn shape(&self, t: &[u32; 4]) -> ([DVec3; 4], f64) {
        let r = t.map(|i| self.rest[i as usize]);
        let dm = DMat3::from_cols(r[1] - r[0], r[2] - r[0], r[3] - r[0]);
        let b = dm.inverse().transpose();
        let m = [
            -(b.x_axis + b.y_axis + b.z_axis),
            b.x_axis,
            b.y_axis,
            b.z_axis,
        ];
        (m, dm.determinant() / 6.0)
    }

    fn deformation(&self, t: &[u32; 4], x: &[DVec3]) -> (DMat3, f64) {
        let (m, v0) = self.shape(t);
        let mut f = DMat3::ZERO;
        for a in 0..4 {
            let xa = x[t[a] as usize];
            f += DMat3::from_cols(xa * m[a].x, xa * m[a].y, xa * m[a].z);
        }
        (f, v0)
    }

    /// Energy gradient with respect to every vertex (including fixed ones).
    pub fn gradient(&self, x: &[DVec3]) -> Vec<DVec3> {
        let mut g = vec![DVec3::ZERO; x.len()];
        for t in &self.tets {
            let (m, v0) = self.shape(t);
            let (f, _) = self.deformation(t, x);
            let cof = cofactor(&f);
            let p = f * self.mu + cof * (self.lambda * (f.determinant() - self.alpha));
            for a in 0..4 {
                g[t[a] as usize] += p * m[a] * v0;
            }
        }
        for (i, gi) in g.iter_mut().enumerate() {
            *gi -= self.gravity * self.masses[i];
            if let Some((h, y)) = &self.inertia {
                *gi += (x[i] - y[i]) * (self.masses[i] / (h * h));
            }
        }
        g
    }

    /// The exact 12×12 Hessian of tet `t` at `x`, projected to positive semi-definite.
    pub fn element_hessian(&self, t: &[u32; 4], x: &[DVec3]) -> Mat12 {
        let h = self.element_hessian_exact(t, x);
        let eig = h.symmetric_eigen();
        let mut vals = eig.eigenvalues;
        for v in vals.iter_mut() {
            *v = v.max(0.0);
        }
        eig.eigenvectors * Mat12::from_diagonal(&vals) * eig.eigenvectors.transpose()
    }

    /// The exact 12×12 Hessian of tet `t` at `x` (indefinite in general).
    pub fn element_hessian_exact(&self, t: &[u32; 4], x: &[DVec3]) -> Mat12 {
        let (m, v0) = self.shape(t);
        let (f, _) = self.deformation(t, x);
        let cof = cofactor(&f);
        let j = f.determinant();
        // ∂²Ψ/∂F², F flattened column-major (index r + 3c).
        let mut d2 = Mat9::identity() * self.mu;
        let g: [f64; 9] = cof.to_cols_array();
        for a in 0..9 {
            for b in 0..9 {
                d2[(a, b)] += self.lambda * g[a] * g[b];
            }
        }
        let s = self.lambda * (j - self.alpha);
        let cols = [f.x_axis, f.y_axis, f.z_axis];
        // ∂²J/∂f_a∂f_b = ±[f_c]× for the third column c; zero on the diagonal blocks.
        for (a, b, c, sign) in [(0, 1, 2, -1.0), (0, 2, 1, 1.0), (1, 2, 0, -1.0)] {
            let k = skew(cols[c]) * sign;
            for r in 0..3 {
                for q in 0..3 {
                    d2[(3 * a + r, 3 * b + q)] += s * k.col(q)[r];
                    d2[(3 * b + q, 3 * a + r)] += s * k.col(q)[r];
                }
            }
        }
        // B = ∂vec(F)/∂x: B[(r + 3c), (3a + s)] = δ_rs m_a[c].
        let mut bm = SMatrix::<f64, 9, 12>::zeros();
        for a in 0..4 {
            for r in 0..3 {
                for c in 0..3 {
                    bm[(r + 3 * c, 3 * a + r)] = m[a][c];
                }
            }
        }
        bm.transpose() * d2 * bm * v0
    }

    /// Newton's method from `x0` (fixed vertices are put at their positions first), until
    /// the largest free-vertex force is below `tol` (N) or `max_iterations`.
    pub fn solve(
        &self,
        x0: &[DVec3],
        tol: f64,
        max_iterations: usize,
    ) -> Result<NewtonSolution, PhysicsError> {
        let n = self.rest.len();
        let mut x: Vec<DVec3> = x0.to_vec();
        let mut dof = vec![usize::MAX; n];
        let mut free = 0;
        for i in 0..n {
            match self.fixed[i] {
                Some(p) => x[i] = p,
                None => {
                    dof[i] = free;
                    free += 1;
                }
            }
        }
        let residual = |g: &[DVec3]| {
            (0..n)
                .filter(|&i| dof[i] != usize::MAX)
                .map(|i| g[i].abs().max_element())
                .fold(0.0f64, f64::max)
        };
        let mut energy = self.energy(&x);
        let mut iterations = 0;
        let mut last = f64::INFINITY;
        loop {
            let g = self.gradient(&x);
            let res = residual(&g);
            // Converged, out of iterations, or at the floor of f64 rounding (the residual
            // stopped falling).
            if res <= tol || iterations >= max_iterations || (res > 0.5 * last && res < 1e3 * tol) {
                return Ok(NewtonSolution {
                    x,
                    iterations,
                    residual: res,
                    energy,
                });
            }
            iterations += 1;
            last = res;
            let mut triplets = Vec::with_capacity(self.tets.len() * 78 * 2 + 3 * free);
            for t in &self.tets {
                let he = self.element_hessian(t, &x);
                for a in 0..4 {
                    let da = dof[t[a] as usize];
                    if da == usize::MAX {
                        continue;
                    }
                    for b in 0..4 {
                        let db = dof[t[b] as usize];
                        if db == usize::MAX {
                            continue;
                        }
                        for r in 0..3 {
                            for c in 0..3 {
                                let row = 3 * da + r;
                                let col = 3 * db + c;
                                if row >= col {
                                    triplets.push(Triplet::new(
                                        row,
                                        col,
                                        he[(3 * a + r, 3 * b + c)],
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            for i in 0..n {
                if dof[i] == usize::MAX {
                    continue;
                }
                let mass = self
                    .inertia
                    .as_ref()
                    .map_or(0.0, |(h, _)| self.masses[i] / (h * h));
                // A tiny diagonal keeps a floppy start (all elements at rest) factorable.
                for r in 0..3 {
                    triplets.push(Triplet::new(
                        3 * dof[i] + r,
                        3 * dof[i] + r,
                        mass + 1e-12 * self.mu,
                    ));
                }
            }
            let k =
                SparseColMat::<usize, f64>::try_new_from_triplets(3 * free, 3 * free, &triplets)
                    .map_err(|e| fail(format!("{e:?}")))?;
            let llt = k
                .sp_cholesky(faer::Side::Lower)
                .map_err(|e| fail(format!("Cholesky: {e:?}")))?;
            let mut rhs = faer::Mat::<f64>::zeros(3 * free, 1);
            for i in 0..n {
                if dof[i] != usize::MAX {
                    for r in 0..3 {
                        rhs[(3 * dof[i] + r, 0)] = -g[i][r];
                    }
                }
            }
            llt.solve_in_place(&mut rhs);
            // Backtracking line search on the energy (Armijo).
            let slope: f64 = (0..n)
                .filter(|&i| dof[i] != usize::MAX)
                .map(|i| {
                    (0..3)
                        .map(|r| g[i][r] * rhs[(3 * dof[i] + r, 0)])
                        .sum::<f64>()
                })
                .sum();
            let mut step = 1.0;
            loop {
                let trial: Vec<DVec3> = (0..n)
                    .map(|i| {
                        if dof[i] == usize::MAX {
                            x[i]
                        } else {
                            let d = DVec3::new(
                                rhs[(3 * dof[i], 0)],
                                rhs[(3 * dof[i] + 1, 0)],
                                rhs[(3 * dof[i] + 2, 0)],
                            );
                            x[i] + d * step
                        }
                    })
                    .collect();
                let e = self.energy(&trial);
                // Below the energy's rounding the decrease cannot be seen: there the full
                // Newton step is taken (quadratic convergence region).
                let invisible = -slope <= 1e-12 * energy.abs().max(1.0);
                if invisible || e <= energy + 1e-4 * step * slope || step < 1e-8 {
                    x = trial;
                    energy = e;
                    break;
                }
                step *= 0.5;
            }
        }
    }

    /// Solves the static problem from the rest shape to a force tolerance of `1e-9` of
    /// the total weight.
    pub fn solve_static(&self) -> Result<NewtonSolution, PhysicsError> {
        let weight: f64 = self.masses.iter().sum::<f64>() * self.gravity.length().max(1e-12);
        self.solve(&self.rest.clone(), 1e-9 * weight, 200)
    }
}

fn volume(x: [DVec3; 4]) -> f64 {
    (x[1] - x[0]).dot((x[2] - x[0]).cross(x[3] - x[0])) / 6.0
}

fn cofactor(f: &DMat3) -> DMat3 {
    DMat3::from_cols(
        f.y_axis.cross(f.z_axis),
        f.z_axis.cross(f.x_axis),
        f.x_axis.cross(f.y_axis),
    )
}

/// `[v]×`: the matrix of `w ↦ v × w`.
fn skew(v: DVec3) -> DMat3 {
    DMat3::from_cols(
        DVec3::new(0.0, v.z, -v.y),
        DVec3::new(-v.z, 0.0, v.x),
        DVec3::new(v.y, -v.x, 0.0),
    )
}
