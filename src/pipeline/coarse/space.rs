//! A body's coarse space: a regular grid over its rest shape whose nodes carry trilinear
//! shape functions, and the per-element stencils and constant operator part it needs.

use glam::{DMat3, DVec3, UVec3, Vec3, Vec3A};

use super::dense::add_lower;
use crate::deformable::set::DeformableSet;

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
    pub(super) constant: Vec<f64>,
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
pub(super) struct ElementTerm {
    pub(super) node: u32,
    pub(super) w: [f64; 4],
    pub(super) u: DVec3,
}

impl CoarseSpace {
    /// The element stencils and the constant part of the operator, for body `b` of `set`.
    pub(super) fn precompute(&mut self, set: &DeformableSet, b: usize, inv_h: f64) {
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
            // In node order, so the assembly walks the lower triangle's pairs directly
            // (q ≤ p). Each block gets one term per element, so the order leaves the sums'
            // bits as they are.
            self.elements[start..].sort_unstable_by_key(|t| t.node);
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

    pub(super) fn terms(&self, element: usize) -> &[ElementTerm] {
        &self.elements
            [self.element_offsets[element] as usize..self.element_offsets[element + 1] as usize]
    }
}
