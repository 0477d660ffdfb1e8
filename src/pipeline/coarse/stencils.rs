//! The other order of the element terms' restriction: each element's terms summed at the
//! nodes its vertices touch, directly. That costs the square of the nodes an element
//! touches, less than the two products over the vertex pairs (`pairs`) where elements lie
//! within a cell of the grid: a cloth's triangle touches about four nodes, a soft ball's
//! tetrahedron, spanning two cells, about twelve.

use super::space::NONE;

/// One node of an element's stencil and the weights of the element's vertices there.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Stencil {
    pub(super) node: u32,
    pub(super) w: [f64; 4],
}

/// Every element's stencil, in node order (CSR), rest-shape data.
#[derive(Clone, Debug, Default)]
pub(super) struct NodeStencils {
    stencils: Vec<Stencil>,
    offsets: Vec<u32>,
}

impl NodeStencils {
    /// The stencils of `elements` (each its body-local vertices) whose vertices carry
    /// `vertex_nodes` with `vertex_weights`.
    pub(super) fn build<'a>(
        elements: impl Iterator<Item = &'a [u32]>,
        vertex_nodes: &[[u32; 8]],
        vertex_weights: &[[f64; 8]],
    ) -> NodeStencils {
        let (mut stencils, mut offsets) = (Vec::new(), vec![0]);
        for v in elements {
            let start = stencils.len();
            for (a, &v) in v.iter().enumerate() {
                let slots = vertex_nodes[v as usize]
                    .iter()
                    .zip(&vertex_weights[v as usize]);
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
                }
            }
            // In node order, so the assembly walks the lower triangle's pairs directly.
            stencils[start..].sort_unstable_by_key(|s| s.node);
            offsets.push(stencils.len() as u32);
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
