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

use glam::{DMat3, DVec3, Mat3, UVec3, Vec3, Vec3A};
use rayon::prelude::*;

mod dense;

use dense::{Blocks, Dense, add_lower};

use super::surface_contact::geometry::Pose;
use super::surface_contact::{SurfaceContact, rows};
use crate::config::SolverConfig;
use crate::deformable::AttachmentSet;
use crate::deformable::set::{DeformableSet, item};

/// No node (a vertex's unused slots).
pub const NONE: u32 = u32::MAX;

/// One body's coarse space.
#[derive(Clone, Debug, Default)]
pub struct CoarseSpace {
    /// Kept nodes (each carries three displacement unknowns).
    pub nodes: usize,
    /// Per element of the body, the nodes its vertices touch and what they weigh there
    /// (rest-shape data, computed once): CSR over the body's tets, then its membranes,
    /// then its hinges.
    elements: Vec<ElementTerm>,
    element_offsets: Vec<u32>,
    /// The part of the operator that does not change (inertia, the μ terms of tets and
    /// membranes), lower triangle, row-major.
    constant: Vec<f64>,
    /// Per vertex of the body (in body order): up to 8 nodes and their weights; pinned
    /// vertices have none.
    pub vertex_nodes: Vec<[u32; 8]>,
    /// In f64, so that they sum to one to f64 precision: the coarse operator's rigid
    /// translations must be exactly stiffness-free, or the rounding of a stiff body's
    /// stiffness (1e5 N/m and more) swamps the inertia (m/h², a few N/m per vertex) and
    /// the factorisation fails.
    pub vertex_weights: Vec<[f64; 8]>,
    /// The longest side of the body's rest box (m).
    pub size: f32,
}

impl CoarseSpace {
    /// The coarsest-to-finest grid over `rest` whose kept nodes stay within `max_nodes`:
    /// cubic cells, as many along the longest side as the budget allows. `None` when the
    /// budget is below 8 nodes or every vertex is pinned.
    pub fn build(
        rest: &[Vec3A],
        free: impl Fn(usize) -> bool,
        max_nodes: usize,
    ) -> Option<CoarseSpace> {
        if max_nodes < 8 || rest.is_empty() {
            return None;
        }
        let (lo, hi) = rest.iter().fold(
            (Vec3A::splat(f32::INFINITY), Vec3A::splat(f32::NEG_INFINITY)),
            |(lo, hi), p| (lo.min(*p), hi.max(*p)),
        );
        let ext = Vec3::from(hi - lo);
        let longest = ext.max_element();
        if longest.is_nan() || longest <= 0.0 {
            return None;
        }
        let mut best = None;
        for cells in 1..=64u32 {
            let space = Self::with_cells(rest, &free, Vec3::from(lo), ext, longest / cells as f32);
            match space {
                Some(s) if s.nodes <= max_nodes => best = Some(s),
                Some(_) => break,
                None => return None,
            }
        }
        best
    }

    fn with_cells(
        rest: &[Vec3A],
        free: &impl Fn(usize) -> bool,
        lo: Vec3,
        ext: Vec3,
        cell: f32,
    ) -> Option<CoarseSpace> {
        // At least one cell per axis; flat axes (a cloth) get one.
        let dims = (ext / cell - Vec3::splat(1e-4))
            .ceil()
            .max(Vec3::ONE)
            .as_uvec3();
        let nodes_per = dims + UVec3::ONE;
        let node = |c: UVec3| c.x + nodes_per.x * (c.y + nodes_per.y * c.z);
        let total = (nodes_per.x * nodes_per.y * nodes_per.z) as usize;
        let mut used = vec![false; total];
        let mut vertex_nodes = vec![[NONE; 8]; rest.len()];
        let mut vertex_weights = vec![[0.0f64; 8]; rest.len()];
        let size = Vec3::splat(cell);
        let mut any = false;
        for (v, p) in rest.iter().enumerate() {
            if !free(v) {
                continue;
            }
            any = true;
            let t = (Vec3::from(*p).as_dvec3() - lo.as_dvec3()) / size.as_dvec3();
            let c = t.floor().as_uvec3().min(dims - UVec3::ONE);
            let f = (t - c.as_dvec3()).clamp(DVec3::ZERO, DVec3::ONE);
            for k in 0..8u32 {
                let o = UVec3::new(k & 1, k >> 1 & 1, k >> 2 & 1);
                let w = [(1.0 - f.x, f.x), (1.0 - f.y, f.y), (1.0 - f.z, f.z)];
                let weight = (if o.x == 1 { w[0].1 } else { w[0].0 })
                    * (if o.y == 1 { w[1].1 } else { w[1].0 })
                    * (if o.z == 1 { w[2].1 } else { w[2].0 });
                if weight > 0.0 {
                    let n = node(c + o);
                    used[n as usize] = true;
                    vertex_nodes[v][k as usize] = n;
                    vertex_weights[v][k as usize] = weight;
                }
            }
        }
        if !any {
            return None;
        }
        // Compact the kept nodes.
        let mut compact = vec![NONE; total];
        let mut nodes = 0;
        for (n, u) in used.iter().enumerate() {
            if *u {
                compact[n] = nodes as u32;
                nodes += 1;
            }
        }
        for slots in &mut vertex_nodes {
            for n in slots.iter_mut().filter(|n| **n != NONE) {
                *n = compact[*n as usize];
            }
        }
        Some(CoarseSpace {
            nodes,
            vertex_nodes,
            vertex_weights,
            size: ext.max_element(),
            ..Default::default()
        })
    }
}

/// One node of an element's stencil: the weights of the element's vertices at the node
/// and the weighted shape gradient `u = Σ_a w_a m_a`.
#[derive(Clone, Copy, Debug, Default)]
struct ElementTerm {
    node: u32,
    w: [f64; 4],
    u: DVec3,
}

impl CoarseSpace {
    /// The element stencils and the constant part of the operator, for body `b` of `set`.
    fn precompute(&mut self, set: &DeformableSet, b: usize, inv_h: f64) {
        let body = &set.bodies[b];
        let v0 = body.vertices.start as usize;
        let n = 3 * self.nodes;
        self.elements.clear();
        self.element_offsets.clear();
        self.element_offsets.push(0);
        let mut constant = vec![0.0; n * n];
        let mut add =
            |i: u32, j: u32, m: DMat3| add_lower(&mut constant, n, i as usize, j as usize, &m);
        // Inertia: m/h² Σ w_i w_j I.
        for v in set.vertex_range(b) {
            let (nodes, weights) = (self.vertex_nodes[v - v0], self.vertex_weights[v - v0]);
            let m = set.masses[v] as f64 * inv_h * inv_h;
            for i in 0..8 {
                for j in 0..8 {
                    if nodes[i] != NONE && nodes[j] != NONE && nodes[i] >= nodes[j] {
                        add(
                            nodes[i],
                            nodes[j],
                            DMat3::from_diagonal(DVec3::splat(m * weights[i] * weights[j])),
                        );
                    }
                }
            }
        }
        let mut stencil = |verts: &[u32],
                           grads: &[DVec3],
                           mu_measure: f64,
                           add: &mut dyn FnMut(u32, u32, DMat3)| {
            let start = self.elements.len();
            for (a, &v) in verts.iter().enumerate() {
                let local = v as usize - v0;
                for k in 0..8 {
                    let node = self.vertex_nodes[local][k];
                    if node == NONE {
                        continue;
                    }
                    let w = self.vertex_weights[local][k];
                    let at = match self.elements[start..].iter().position(|t| t.node == node) {
                        Some(p) => start + p,
                        None => {
                            self.elements.push(ElementTerm {
                                node,
                                ..Default::default()
                            });
                            self.elements.len() - 1
                        }
                    };
                    let t = &mut self.elements[at];
                    t.w[a] += w;
                    t.u += grads.get(a).copied().unwrap_or(DVec3::ZERO) * w;
                }
            }
            // μ (u_p·u_q) I times the rest measure: constant.
            if mu_measure > 0.0 {
                let terms = &self.elements[start..];
                for p in terms {
                    for q in terms {
                        if p.node >= q.node {
                            add(
                                p.node,
                                q.node,
                                DMat3::from_diagonal(DVec3::splat(mu_measure * p.u.dot(q.u))),
                            );
                        }
                    }
                }
            }
            self.element_offsets.push(self.elements.len() as u32);
        };
        for t in &set.tets[body.tets.start as usize..body.tets.end as usize] {
            let grads = [0, 1, 2, 3].map(|a| t.grad(a).as_dvec3());
            let grads = [
                -(grads[1] + grads[2] + grads[3]),
                grads[1],
                grads[2],
                grads[3],
            ];
            let mu = set.materials[t.material as usize].mu as f64;
            stencil(&t.v, &grads, mu * t.volume as f64, &mut add);
        }
        for t in &set.tris[body.tris.start as usize..body.tris.end as usize] {
            let (m1, m2) = (t.grad(1).as_dvec3(), t.grad(2).as_dvec3());
            let mu = set.materials[t.material as usize].mu as f64;
            stencil(&t.v, &[-(m1 + m2), m1, m2], mu * t.area as f64, &mut add);
        }
        for t in &set.hinges[body.hinges.start as usize..body.hinges.end as usize] {
            stencil(&t.v, &[], 0.0, &mut add);
        }
        self.constant = constant;
    }

    /// The coarse step `delta` at the body's vertex `local` (`P δ` there).
    pub fn prolong(&self, delta: &[f64], local: usize) -> DVec3 {
        let mut step = DVec3::ZERO;
        for k in 0..8 {
            let node = self.vertex_nodes[local][k];
            if node != NONE {
                let n = 3 * node as usize;
                step += self.vertex_weights[local][k]
                    * DVec3::new(delta[n], delta[n + 1], delta[n + 2]);
            }
        }
        step
    }

    fn terms(&self, element: usize) -> &[ElementTerm] {
        &self.elements
            [self.element_offsets[element] as usize..self.element_offsets[element + 1] as usize]
    }
}

/// The coarse level of every deformable body: spaces (rebuilt when the set's topology or
/// the node budget changes) and this frame's factored operators.
#[derive(Default)]
pub struct CoarseLevel {
    generation: u64,
    max_nodes: usize,
    dt: f32,
    spaces: Vec<Option<CoarseSpace>>,
    systems: Vec<Dense>,
    /// Per body: the restricted residual, then the coarse displacement.
    rhs: Vec<Vec<f64>>,
    /// Residual scratch: each tet's `V₀ P`, each membrane's and hinge's vertex forces,
    /// then each vertex's force.
    tet_stress: Vec<Mat3>,
    tri_forces: Vec<[Vec3; 3]>,
    hinge_forces: Vec<[Vec3; 4]>,
    residual: Vec<Vec3A>,
}

/// `[w]×`, the matrix of `v ↦ w × v`.
#[inline]
fn skew(w: DVec3) -> DMat3 {
    DMat3::from_cols(
        DVec3::new(0.0, w.z, -w.y),
        DVec3::new(-w.z, 0.0, w.x),
        DVec3::new(w.y, -w.x, 0.0),
    )
}

#[inline]
fn outer(a: DVec3, b: DVec3) -> DMat3 {
    DMat3::from_cols(a * b.x, a * b.y, a * b.z)
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
            self.rhs = vec![Vec::new(); set.bodies.len()];
            same_elements = false;
        }
        let inv_h = 1.0 / cfg.dt as f64;
        self.systems
            .par_iter_mut()
            .zip(&self.spaces)
            .enumerate()
            .for_each(|(b, (sys, space))| match space {
                Some(space) => {
                    let elements = !(same_elements && sys.n == 3 * space.nodes);
                    assemble(sys, cfg, space, set, att, contact, x, b, inv_h, elements)
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

/// Elements per job of the assembly: a fixed size (not a share of the threads), so the
/// partial sums, and the bits of the operator, do not depend on the thread count.
const ASSEMBLY_CHUNK: usize = 1024;

/// Assembles body `b`'s coarse operator `Pᵀ H P` at `x` and factors it, in f64 (see
/// [`CoarseSpace::vertex_weights`]): the constant part, the attachments' penalties, and
/// per element the terms that follow the deformation, `λ' G_p G_qᵀ` (G the weighted
/// gradients of J) and the damping and bending terms. Elements are summed in fixed chunks
/// in parallel, then the chunks in order; without `elements`, the chunks' sums of the last
/// assembly are taken as they are.
#[allow(clippy::too_many_arguments)]
fn assemble(
    sys: &mut Dense,
    cfg: &SolverConfig,
    space: &CoarseSpace,
    set: &DeformableSet,
    att: &AttachmentSet,
    contact: Option<(&SurfaceContact, &[Pose])>,
    x: &[Vec3A],
    b: usize,
    inv_h: f64,
    elements: bool,
) {
    let n = 3 * space.nodes;
    if elements {
        let body = &set.bodies[b];
        let count = body.tets.len() + body.tris.len() + body.hinges.len();
        sys.partial
            .resize_with(count.div_ceil(ASSEMBLY_CHUNK), Default::default);
        sys.partial
            .par_iter_mut()
            .enumerate()
            .for_each(|(k, (gn, second))| {
                gn.reset(space.nodes);
                second.reset(space.nodes);
                let range = k * ASSEMBLY_CHUNK..((k + 1) * ASSEMBLY_CHUNK).min(count);
                add_elements(gn, second, space, set, x, b, range, inv_h);
            });
    }
    sys.n = n;
    sys.a.clear();
    sys.a.extend_from_slice(&space.constant);
    for (gn, _) in &sys.partial {
        gn.add_to(&mut sys.a);
    }
    add_couplings(sys, cfg, space, set, att, contact, x, b);
    // The exact operator first (with the tets' second-order term); where the body is
    // deformed so far that it is indefinite, the Gauss–Newton one. Both come from one
    // pass over the elements.
    sys.gauss_newton.clone_from(&sys.a);
    for (_, second) in &sys.partial {
        second.add_to(&mut sys.a);
    }
    if !sys.factor() {
        std::mem::swap(&mut sys.a, &mut sys.gauss_newton);
        sys.factor();
    }
}

/// The attachments' penalties and the contact terms of body `b`, added to its operator.
#[allow(clippy::too_many_arguments)]
fn add_couplings(
    sys: &mut Dense,
    cfg: &SolverConfig,
    space: &CoarseSpace,
    set: &DeformableSet,
    att: &AttachmentSet,
    contact: Option<(&SurfaceContact, &[Pose])>,
    x: &[Vec3A],
    b: usize,
) {
    let n = sys.n;
    let body = &set.bodies[b];
    let v0 = body.vertices.start as usize;
    for v in set.vertex_range(b) {
        let ks = att.of_vertex(v);
        if ks.is_empty() {
            continue;
        }
        let k: DVec3 = ks
            .iter()
            .map(|&ai| att.records[ai as usize].k().as_dvec3())
            .sum();
        let (nodes, weights) = (space.vertex_nodes[v - v0], space.vertex_weights[v - v0]);
        for i in 0..8 {
            for j in 0..8 {
                if nodes[i] != NONE && nodes[j] != NONE && nodes[i] >= nodes[j] {
                    add_lower(
                        &mut sys.a,
                        n,
                        nodes[i] as usize,
                        nodes[j] as usize,
                        &DMat3::from_diagonal(k * (weights[i] * weights[j])),
                    );
                }
            }
        }
    }
    if let Some((contact, poses)) = contact {
        // Contact terms: k_n w_k w_l n nᵀ between the pair's points of this body (the
        // other side held still), every ordered pair once, lower triangle only; friction
        // k_t over the frame-start tangent plane with its weights.
        let body_range = set.vertex_range(b);
        for v in body_range.clone() {
            let (nv, wv) = (space.vertex_nodes[v - v0], space.vertex_weights[v - v0]);
            contact.for_each_coarse_term(cfg, v, x, poses, |term| {
                let k = term
                    .points
                    .iter()
                    .position(|&p| p == v as u32)
                    .expect("a term lists its points");
                let normal = term.normal.as_dvec3();
                let nn = outer(normal, normal) * (term.k_n as f64 * term.weights[k] as f64);
                let t = term.tangent_normal.as_dvec3();
                let tangent = (DMat3::IDENTITY - outer(t, t))
                    * (term.k_t as f64 * term.lagged_weights[k] as f64);
                for (l, &p) in term.points.iter().enumerate() {
                    let p = p as usize;
                    if p == rows::NO_POINT as usize || !body_range.contains(&p) {
                        continue;
                    }
                    let (np, wp) = (space.vertex_nodes[p - v0], space.vertex_weights[p - v0]);
                    let (scale, scale_t) = (term.weights[l] as f64, term.lagged_weights[l] as f64);
                    let block = nn * scale + tangent * scale_t;
                    for i in 0..8 {
                        for j in 0..8 {
                            if nv[i] != NONE && np[j] != NONE && nv[i] >= np[j] {
                                add_lower(
                                    &mut sys.a,
                                    n,
                                    nv[i] as usize,
                                    np[j] as usize,
                                    &(block * (wv[i] * wp[j])),
                                );
                            }
                        }
                    }
                }
            });
        }
    }
}

/// The deformation-dependent terms of body `b`'s elements in `range` (the body's tets,
/// then membranes, then hinges), added to `a` (the tets' second-order terms to `second`).
#[allow(clippy::too_many_arguments)]
fn add_elements(
    a: &mut Blocks,
    second: &mut Blocks,
    space: &CoarseSpace,
    set: &DeformableSet,
    x: &[Vec3A],
    b: usize,
    range: std::ops::Range<usize>,
    inv_h: f64,
) {
    let body = &set.bodies[b];
    let pos = |v: u32| Vec3::from(x[v as usize]).as_dvec3();
    let (n_tets, n_tris) = (body.tets.len(), body.tris.len());
    let mut g = [DVec3::ZERO; 32];
    let add_pairs = |a: &mut Blocks, terms: &[ElementTerm], g: &[DVec3], scale: f64| {
        for (p, tp) in terms.iter().enumerate() {
            for (q, tq) in terms.iter().enumerate() {
                if tp.node >= tq.node {
                    a.add(
                        tp.node as usize,
                        tq.node as usize,
                        &outer(g[p], g[q] * scale),
                    );
                }
            }
        }
    };
    for e in range {
        let terms = space.terms(e);
        if e < n_tets {
            let t = &set.tets[body.tets.start as usize + e];
            let mat = &set.materials[t.material as usize];
            let xs = t.v.map(pos);
            let m = [1, 2, 3].map(|k| t.grad(k).as_dvec3());
            let f = outer(xs[1] - xs[0], m[0])
                + outer(xs[2] - xs[0], m[1])
                + outer(xs[3] - xs[0], m[2]);
            let cof = DMat3::from_cols(
                f.y_axis.cross(f.z_axis),
                f.z_axis.cross(f.x_axis),
                f.x_axis.cross(f.y_axis),
            );
            for (p, term) in terms.iter().enumerate() {
                g[p] = cof * term.u;
            }
            add_pairs(a, terms, &g, mat.lambda as f64 * t.volume as f64);
            // λ'(J − α) ∂²J, into `second`: J is trilinear in the vertices, ∂²J/∂x_a∂x_b =
            // −[F (m_a × m_b)]×, so the coarse block is −s V₀ [F (u_p × u_q)]× (zero on the
            // diagonal). With it the operator at rest is exactly linear elasticity; without
            // it (Gauss–Newton) pure shear is half as stiff and a coarse step overshoots.
            let s = mat.lambda as f64 * (f.determinant() - mat.alpha as f64) * t.volume as f64;
            for tp in terms {
                for tq in terms {
                    if tp.node > tq.node {
                        let w = f * tp.u.cross(tq.u) * -s;
                        second.add(tp.node as usize, tq.node as usize, &skew(w));
                    }
                }
            }
            let damp = mat.viscosity as f64 * inv_h * t.volume as f64;
            if damp > 0.0 {
                let ff = f * f.transpose();
                for tp in terms {
                    for tq in terms {
                        if tp.node >= tq.node {
                            let h = (ff * tp.u.dot(tq.u) + outer(f * tp.u, f * tq.u)) * damp;
                            a.add(tp.node as usize, tq.node as usize, &h);
                        }
                    }
                }
            }
        } else if e < n_tets + n_tris {
            let t = &set.tris[body.tris.start as usize + e - n_tets];
            let mat = &set.materials[t.material as usize];
            let xs = t.v.map(pos);
            let nh = (xs[1] - xs[0]).cross(xs[2] - xs[0]).normalize_or_zero();
            let area = t.area as f64;
            let gj = [0, 1, 2].map(|k| nh.cross(xs[(k + 2) % 3] - xs[(k + 1) % 3]) / (2.0 * area));
            for (p, term) in terms.iter().enumerate() {
                g[p] = gj[0] * term.w[0] + gj[1] * term.w[1] + gj[2] * term.w[2];
            }
            add_pairs(a, terms, &g, mat.lambda as f64 * area);
            // The membrane's damping block, as the tets' (F is 3×2: u has no third
            // component). Without it the coarse step takes the viscous force without its
            // stiffness and a free cloth with τ = 1e-3 s diverged in a few frames.
            let damp = mat.viscosity as f64 * inv_h * area;
            if damp > 0.0 {
                let (m1, m2) = (t.grad(1).as_dvec3(), t.grad(2).as_dvec3());
                let f = outer(xs[1] - xs[0], m1) + outer(xs[2] - xs[0], m2);
                let ff = f * f.transpose();
                for tp in terms {
                    for tq in terms {
                        if tp.node >= tq.node {
                            let h = (ff * tp.u.dot(tq.u) + outer(f * tp.u, f * tq.u)) * damp;
                            a.add(tp.node as usize, tq.node as usize, &h);
                        }
                    }
                }
            }
        } else {
            let t = &set.hinges[body.hinges.start as usize + e - n_tets - n_tris];
            let mat = &set.materials[t.material as usize];
            let xs = t.v.map(|i| Vec3::from(x[i as usize]));
            let Some((_, grad)) = crate::deformable::elastic::dihedral(&xs) else {
                continue;
            };
            let grad = grad.map(|v| v.as_dvec3());
            for (p, term) in terms.iter().enumerate() {
                g[p] = (0..4).map(|k| grad[k] * term.w[k]).sum();
            }
            add_pairs(a, terms, &g, mat.bending as f64 * t.weight as f64);
        }
    }
}

#[cfg(test)]
mod tests;
