//! The two-level step of vertex block descent: a coarse correction per iteration.
//!
//! Block Gauss–Seidel moves one vertex at a time, so a load travels one element per sweep:
//! a stiff cantilever at 10 iterations sags and swings by most of its length instead of
//! bending by millimetres. Each deformable body therefore gets a coarse space, a regular
//! grid over its rest shape whose nodes carry trilinear shape functions (a displacement of
//! a few dozen nodes moves every vertex smoothly), and each iteration begins with the
//! body's Newton step restricted to that space (a Galerkin correction): residual forces
//! restricted to the nodes, the coarse system `Pᵀ H P δ = Pᵀ r` solved by a dense Cholesky
//! factorisation, `x += P δ`. The vertex sweep that follows smooths what the grid cannot
//! represent. This is the classic two-grid cycle with one smoothing sweep.
//!
//! `H` is the Gauss–Newton Hessian at the frame's initial guess (inertia, the elements'
//! positive parts, attachment penalties), assembled and factored once per frame; the
//! residual is exact at every iteration. Pinned vertices take no part, nodes that no free
//! vertex touches are dropped, and the space is rebuilt when the pinned set changes.

use glam::{DVec3, Mat3, Vec3, Vec3A};
use rayon::prelude::*;

mod assembly;
mod dense;
mod pairs;
mod space;
mod stencils;

use assembly::assemble;
use dense::Dense;
pub use space::{CoarseSpace, NONE};

use super::surface_contact::SurfaceContact;
use super::surface_contact::geometry::Pose;
use crate::config::SolverConfig;
use crate::deformable::AttachmentSet;
use crate::deformable::set::{DeformableSet, item};

/// The coarse level of every deformable body: spaces (rebuilt when the set's topology or
/// the node budget changes) and this frame's factored operators.
#[derive(Default)]
pub struct CoarseLevel {
    generation: u64,
    max_nodes: usize,
    dt: f32,
    spaces: Vec<Option<CoarseSpace>>,
    systems: Vec<Dense>,
    scratch: Vec<assembly::Scratch>,
    /// Per body: the restricted residual, then the coarse displacement.
    rhs: Vec<Vec<f64>>,
    /// Residual scratch: each tet's `V₀ P`, each membrane's and hinge's vertex forces,
    /// then each vertex's force.
    tet_stress: Vec<Mat3>,
    tri_forces: Vec<[Vec3; 3]>,
    hinge_forces: Vec<[Vec3; 4]>,
    residual: Vec<Vec3A>,
}

impl CoarseLevel {
    /// Body `b`'s coarse space, if it has one.
    pub fn space(&self, b: usize) -> Option<&CoarseSpace> {
        self.spaces.get(b)?.as_ref()
    }

    /// Body `b`'s factor `L` of this frame's operator (row-major `3·nodes` square, the
    /// lower triangle), if it has a space and the factorisation succeeded (what the GPU
    /// backend's correction solves with).
    pub fn factor(&self, b: usize) -> Option<&[f64]> {
        let sys = self.systems.get(b)?;
        (self.space(b).is_some() && sys.ok).then_some(&sys.a[..])
    }

    /// Rebuilds the spaces if needed, then assembles and factors each body's coarse
    /// operator at positions `x` (the frame's initial guess). With `same_elements` (the GPU
    /// backend's run again of a step, at the same `x` and set), the elements' terms are
    /// those of the last assembly and only the couplings are summed again.
    pub fn prepare(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        att: &AttachmentSet,
        contact: Option<(&SurfaceContact, &[Pose])>,
        x: &[Vec3A],
        same_elements: bool,
    ) {
        let max_nodes = cfg.coarse_nodes as usize;
        let mut same_elements = same_elements;
        if self.generation != set.generation
            || self.max_nodes != max_nodes
            || self.dt != cfg.dt
            || self.spaces.len() != set.bodies.len()
        {
            self.generation = set.generation;
            self.max_nodes = max_nodes;
            self.dt = cfg.dt;
            let inv_h = 1.0 / cfg.dt as f64;
            self.spaces = (0..set.bodies.len())
                .into_par_iter()
                .map(|b| {
                    let r = set.vertex_range(b);
                    let start = r.start;
                    let mut space =
                        CoarseSpace::build(&set.rest[r], |v| set.is_solved(start + v), max_nodes)?;
                    space.precompute(set, b, inv_h);
                    Some(space)
                })
                .collect();
            self.systems = vec![Dense::default(); set.bodies.len()];
            self.scratch = (0..set.bodies.len()).map(|_| Default::default()).collect();
            self.rhs = vec![Vec::new(); set.bodies.len()];
            same_elements = false;
        }
        let inv_h = 1.0 / cfg.dt as f64;
        self.systems
            .par_iter_mut()
            .zip(&mut self.scratch)
            .zip(&self.spaces)
            .enumerate()
            .for_each(|(b, ((sys, scratch), space))| match space {
                Some(space) => {
                    let elements = !(same_elements && sys.n == 3 * space.nodes);
                    assemble(
                        sys, cfg, space, set, att, contact, x, b, inv_h, elements, scratch,
                    )
                }
                None => sys.ok = false,
            });
    }

    /// One coarse correction of every body's iterate (displacements `d`, positions `x`)
    /// from the exact residual at the iterate (attachment and contact forces from
    /// `attach_force` and `contact_force`).
    ///
    /// Contact rows made since the operators were assembled are not in them: each body's
    /// step `δ = A⁻¹ r` is then shortened to the minimum along it of the quadratic model
    /// with their stiffness, `α = rᵀδ / (rᵀδ + δᵀ ΔA δ)`, where `fresh_stiffness(b, step)`
    /// is `δᵀ ΔA δ` for the prolonged step (`step(v)`, `P δ` at vertex `v`). This is one
    /// step of conjugate gradients on the operator with those rows, preconditioned by the
    /// factor without them, and needs no new factorisation. An impact's new rows are a
    /// change of low rank and far stiffer than the rest, which is what that step resolves
    /// first.
    ///
    /// With `line_search` (set while contact terms are in the operators), a body's step
    /// that moves a node by more than 1% of the body's size is checked against the
    /// residual at its end: where the energy rises again along the step (the slope `r·Pδ`
    /// has turned), it is cut back to the secant estimate of the minimum along it. The
    /// operator is a linear model assembled once a frame, and an impact changes the
    /// problem under it (rows switch on and off, elements crush): a ball thrown at
    /// 1,000 m/s took coarse steps of 15 m, then 10⁴ m, then NaN. Smaller steps are
    /// taken as they are: the sweeps correct a small overshoot, and the check costs a
    /// second residual.
    #[allow(clippy::too_many_arguments)]
    pub fn correct(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        att: &AttachmentSet,
        attach_force: impl Fn(usize, Vec3) -> Vec3 + Sync,
        contact_force: impl Fn(usize, &[Vec3A]) -> Vec3 + Sync,
        fresh_stiffness: impl Fn(usize, &(dyn Fn(usize) -> DVec3 + Sync)) -> f64 + Sync,
        line_search: bool,
        yd: &[Vec3A],
        d: &mut [Vec3A],
        x: &mut [Vec3A],
    ) {
        self.residual(cfg, set, att, &attach_force, &contact_force, yd, d, x);
        let residual = &self.residual;
        let corrections: Vec<(usize, Vec<f64>, Option<f64>)> = self
            .systems
            .par_iter()
            .zip(&self.spaces)
            .zip(self.rhs.par_iter_mut())
            .enumerate()
            .filter_map(|(b, ((sys, space), rhs))| {
                let space = space.as_ref()?;
                if !sys.ok {
                    return None;
                }
                restrict(space, &residual[set.vertex_range(b)], rhs);
                // The slope at the start, r·Pδ = (Pᵀr)·δ, before the solve overwrites it.
                let restricted = rhs.clone();
                sys.solve(rhs);
                let slope = dot(&restricted, rhs);
                let start = set.vertex_range(b).start;
                let fresh = fresh_stiffness(b, &|v| space.prolong(rhs, v - start));
                if fresh > 0.0 && slope > 0.0 {
                    let alpha = slope / (slope + fresh);
                    rhs.iter_mut().for_each(|v| *v *= alpha);
                }
                let slope = match line_search {
                    true => dot(&restricted, rhs),
                    false => 0.0,
                };
                if !(slope >= 0.0 && rhs.iter().all(|v| v.is_finite())) {
                    return None; // not a descent step: the model is no good here
                }
                // |Pδ| at a vertex is at most the largest node step (the weights are a
                // partition of unity).
                let largest = rhs
                    .chunks_exact(3)
                    .map(|n| (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt())
                    .fold(0.0f64, f64::max);
                let check = line_search && largest > 0.01 * space.size as f64;
                Some((b, std::mem::take(rhs), check.then_some(slope)))
            })
            .collect();
        for (b, delta, _) in &corrections {
            self.step_body(set, *b, delta, 1.0, d, x);
        }
        if corrections.iter().any(|c| c.2.is_some()) {
            self.residual(cfg, set, att, &attach_force, &contact_force, yd, d, x);
            let mut end = Vec::new();
            for (b, delta, start) in &corrections {
                let Some(start) = start else { continue };
                let space = self.spaces[*b].as_ref().expect("solved above");
                restrict(space, &self.residual[set.vertex_range(*b)], &mut end);
                let end = dot(&end, delta);
                if end < 0.0 {
                    let alpha = start / (start - end);
                    self.step_body(set, *b, delta, alpha - 1.0, d, x);
                }
            }
        }
        for (b, delta, _) in corrections {
            self.rhs[b] = delta;
        }
    }

    /// `x += s P δ` over body `b` (`d` with it).
    fn step_body(
        &self,
        set: &DeformableSet,
        b: usize,
        delta: &[f64],
        s: f64,
        d: &mut [Vec3A],
        x: &mut [Vec3A],
    ) {
        let space = self.spaces[b]
            .as_ref()
            .expect("a body with a step has a space");
        let r = set.vertex_range(b);
        let start = r.start;
        d[r.clone()]
            .par_iter_mut()
            .zip(x[r.clone()].par_iter_mut())
            .enumerate()
            .with_min_len(256)
            .for_each(|(local, (dv, xv))| {
                let mut step = [0.0f64; 3];
                for k in 0..8 {
                    let node = space.vertex_nodes[local][k];
                    if node == NONE {
                        continue;
                    }
                    let w = space.vertex_weights[local][k];
                    for c in 0..3 {
                        step[c] += w * delta[3 * node as usize + c];
                    }
                }
                let v = start + local;
                *dv += Vec3A::new(
                    (s * step[0]) as f32,
                    (s * step[1]) as f32,
                    (s * step[2]) as f32,
                );
                *xv = set.positions[v] + *dv;
            });
    }

    /// Every free vertex's force at the iterate: inertia towards `yd`, its elements (each
    /// element evaluated once, then gathered per vertex), and its attachments
    /// (`attach_force(attachment, x_v)`, the rows' force on the vertex).
    #[allow(clippy::too_many_arguments)]
    fn residual(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        att: &AttachmentSet,
        attach_force: impl Fn(usize, Vec3) -> Vec3 + Sync,
        contact_force: impl Fn(usize, &[Vec3A]) -> Vec3 + Sync,
        yd: &[Vec3A],
        d: &[Vec3A],
        x: &[Vec3A],
    ) {
        let inv_h = 1.0 / cfg.dt;
        let at = |v: [u32; 4]| v.map(|i| x[i as usize]);
        let start = |v: [u32; 4]| v.map(|i| set.positions[i as usize]);
        set.tets
            .par_iter()
            .map(|t| {
                t.stress(
                    &set.materials[t.material as usize],
                    &at(t.v),
                    &start(t.v),
                    inv_h,
                )
            })
            .collect_into_vec(&mut self.tet_stress);
        set.tris
            .par_iter()
            .map(|t| {
                let xs = t.v.map(|i| x[i as usize]);
                let s = t.v.map(|i| set.positions[i as usize]);
                t.forces(&set.materials[t.material as usize], &xs, &s, inv_h)
            })
            .collect_into_vec(&mut self.tri_forces);
        set.hinges
            .par_iter()
            .map(|t| t.forces(&set.materials[t.material as usize], &at(t.v)))
            .collect_into_vec(&mut self.hinge_forces);
        let (stress, tri, hinge) = (&self.tet_stress, &self.tri_forces, &self.hinge_forces);
        self.residual.resize(set.vertex_count(), Vec3A::ZERO);
        self.residual
            .par_iter_mut()
            .enumerate()
            .with_min_len(256)
            .for_each(|(v, r)| {
                if !set.is_solved(v) {
                    *r = Vec3A::ZERO;
                    return;
                }
                let m_h2 = set.masses[v] * inv_h * inv_h;
                let mut f = Vec3::from(yd[v] - d[v]) * m_h2;
                for &it in set.incident(v) {
                    let (kind, e, a) = item::unpack(it);
                    f += match kind {
                        item::TET => -(stress[e] * set.tets[e].grad(a)),
                        item::TRI => tri[e][a],
                        _ => hinge[e][a],
                    };
                }
                for &ai in att.of_vertex(v) {
                    f += attach_force(ai as usize, Vec3::from(x[v]));
                }
                f += contact_force(v, x);
                *r = f.into();
            });
    }
}

/// `Pᵀ r` of one body's vertex forces `r` into `out` (three entries per node).
fn restrict(space: &CoarseSpace, r: &[Vec3A], out: &mut Vec<f64>) {
    out.clear();
    out.resize(3 * space.nodes, 0.0);
    for (local, f) in r.iter().enumerate() {
        for k in 0..8 {
            let node = space.vertex_nodes[local][k];
            if node == NONE {
                continue;
            }
            let w = space.vertex_weights[local][k];
            for c in 0..3 {
                out[3 * node as usize + c] += w * f[c] as f64;
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests;
