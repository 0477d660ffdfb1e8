//! The other order of the element terms' restriction: each element's terms summed at the
//! nodes its vertices touch, directly. That costs the square of the nodes an element
//! touches, less than the two products over the vertex pairs (`pairs`) where elements lie
//! within a cell of the grid: a cloth's triangle touches about four nodes, a soft ball's
//! tetrahedron, spanning two cells, about twelve.

use glam::DVec3;

use super::space::NONE;
use crate::deformable::set::DeformableSet;

/// One node of an element's stencil: the weights of the element's vertices there and the
/// weighted rest shape gradient `u = Σ_a w_a m_a` (zero for a hinge).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Stencil {
    pub(super) node: u32,
    pub(super) w: [f64; 4],
    pub(super) u: DVec3,
}

/// Every element's stencil, in node order (CSR), rest-shape data.
#[derive(Clone, Debug, Default)]
pub(super) struct NodeStencils {
    stencils: Vec<Stencil>,
    offsets: Vec<u32>,
}

impl NodeStencils {
    /// The stencils of body `b`'s elements (its tets, then membranes, then hinges), whose
    /// vertices carry `vertex_nodes` with `vertex_weights` (body-local).
    pub(super) fn build(
        set: &DeformableSet,
        b: usize,
        vertex_nodes: &[[u32; 8]],
        vertex_weights: &[[f64; 8]],
    ) -> NodeStencils {
        let body = &set.bodies[b];
        let v0 = body.vertices.start as usize;
        let (mut stencils, mut offsets) = (Vec::new(), vec![0]);
        let mut add = |verts: &[u32], grads: &[DVec3]| {
            let start = stencils.len();
            for (a, &v) in verts.iter().enumerate() {
                let local = v as usize - v0;
                let slots = vertex_nodes[local].iter().zip(&vertex_weights[local]);
                for (&node, &w) in slots.filter(|(n, _)| **n != NONE) {
                    let at = match stencils[start..]
                        .iter()
                        .position(|s: &Stencil| s.node == node)
                    {
                        Some(p) => start + p,
                        None => {
                            stencils.push(Stencil {
                                node,
                                ..Default::default()
                            });
                            stencils.len() - 1
                        }
                    };
                    stencils[at].w[a] += w;
                    stencils[at].u += grads.get(a).copied().unwrap_or(DVec3::ZERO) * w;
                }
            }
            // In node order, so the assembly walks the lower triangle's pairs directly.
            stencils[start..].sort_unstable_by_key(|s| s.node);
            offsets.push(stencils.len() as u32);
        };
        for t in &set.tets[body.tets.start as usize..body.tets.end as usize] {
            let m = [1, 2, 3].map(|a| t.grad(a).as_dvec3());
            add(&t.v, &[-(m[0] + m[1] + m[2]), m[0], m[1], m[2]]);
        }
        for t in &set.tris[body.tris.start as usize..body.tris.end as usize] {
            let (m1, m2) = (t.grad(1).as_dvec3(), t.grad(2).as_dvec3());
            add(&t.v, &[-(m1 + m2), m1, m2]);
        }
        for t in &set.hinges[body.hinges.start as usize..body.hinges.end as usize] {
            add(&t.v, &[]);
        }
        NodeStencils { stencils, offsets }
    }

    /// Element `e`'s stencil.
    pub(super) fn of(&self, e: usize) -> &[Stencil] {
        &self.stencils[self.offsets[e] as usize..self.offsets[e + 1] as usize]
    }

    /// Blocks an assembly computes: each element's node pairs, the tets' (the first
    /// `tets` elements) twice (their second-order part).
    pub(super) fn cost(&self, tets: usize) -> usize {
        (0..self.offsets.len() - 1)
            .map(|e| {
                let t = self.of(e).len();
                t * (t + 1) / 2 + if e < tets { t * (t - 1) / 2 } else { 0 }
            })
            .sum()
    }
}
