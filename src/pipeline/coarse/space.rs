//! A body's coarse space: a regular grid over its rest shape whose nodes carry trilinear
//! shape functions, and the per-element stencils and constant operator part it needs.

use glam::{DMat3, DVec3, UVec3, Vec3, Vec3A};

use super::dense::Blocks;
use super::pairs::{VertexPairs, add, element_pairs};
use super::stencils::NodeStencils;
use crate::deformable::set::DeformableSet;

/// No node (a vertex's unused slots).
pub const NONE: u32 = u32::MAX;

/// One body's coarse space.
#[derive(Clone, Debug, Default)]
pub struct CoarseSpace {
    /// Kept nodes (each carries three displacement unknowns).
    pub nodes: usize,
    /// How the elements' terms reach the nodes (rest-shape data, computed once).
    pub(super) restriction: Restriction,
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

/// The most vertex pairs a body's element terms go through (the pairs' sums, 72 bytes a
/// pair, and `H P` then stay within the caches): a soft ball has 2,472. Beyond, the
/// stencils' node blocks (9 KB a node row at 64 nodes) are faster whatever the count of
/// blocks: a 15,625-vertex cube (125,000 pairs, half the blocks of its stencils) took 94
/// ms a frame of coarse time through the pairs against 45 through the stencils.
const PAIRS_MAX_SLOTS: usize = 8192;

/// How a body's element terms reach the nodes: through its vertex pairs (`Pᵀ (H P)`) or
/// each element's stencil directly, whichever computes fewer blocks for the body's mesh
/// and grid, where the pairs fit in the caches ([`PAIRS_MAX_SLOTS`]; counted when the
/// space is built: the mesh decides, not the thread count).
#[derive(Clone, Debug)]
pub(super) enum Restriction {
    Pairs(VertexPairs),
    Stencils(NodeStencils),
}

impl Default for Restriction {
    fn default() -> Self {
        Restriction::Stencils(NodeStencils::default())
    }
}

/// Body `b`'s elements, each its body-local vertices: its tets, then membranes, then
/// hinges.
pub(super) fn body_elements(set: &DeformableSet, b: usize) -> Vec<Vec<u32>> {
    let body = &set.bodies[b];
    let local = |v: &[u32]| {
        v.iter()
            .map(|&i| i - body.vertices.start)
            .collect::<Vec<_>>()
    };
    let tets = &set.tets[body.tets.start as usize..body.tets.end as usize];
    let tris = &set.tris[body.tris.start as usize..body.tris.end as usize];
    let hinges = &set.hinges[body.hinges.start as usize..body.hinges.end as usize];
    (tets.iter().map(|t| local(&t.v)))
        .chain(tris.iter().map(|t| local(&t.v)))
        .chain(hinges.iter().map(|t| local(&t.v)))
        .collect()
}

impl CoarseSpace {
    /// The element terms' restriction of body `b` of `set` and the constant part of the
    /// operator (through the vertex pairs).
    pub(super) fn precompute(&mut self, set: &DeformableSet, b: usize, inv_h: f64) {
        let body = &set.bodies[b];
        let v0 = body.vertices.start;
        let tets = &set.tets[body.tets.start as usize..body.tets.end as usize];
        let tris = &set.tris[body.tris.start as usize..body.tris.end as usize];
        let elements = body_elements(set, b);
        let pairs = VertexPairs::build(
            elements.iter().map(|v| &v[..]),
            &self.vertex_nodes,
            self.nodes,
        );
        // At the vertices: inertia m/h² I, and the tets' and membranes' μ (m_i·m_j) I times
        // their rest measure (m the shape gradients).
        let mut h = vec![[0.0; 9]; pairs.slots];
        for v in set.vertex_range(b) {
            let s = pairs.vertex_slot(v - v0 as usize);
            let m = set.masses[v] as f64 * inv_h * inv_h;
            add(&mut h, s, &DMat3::from_diagonal(DVec3::splat(m)));
        }
        let mut add_mu = |e: usize, v: &[u32], m: &[DVec3], measure: f64| {
            let slots = pairs.element_slots(e);
            for ((i, j), &s) in element_pairs(v).zip(slots) {
                add(
                    &mut h,
                    s,
                    &DMat3::from_diagonal(DVec3::splat(measure * m[i].dot(m[j]))),
                );
            }
        };
        for (e, t) in tets.iter().enumerate() {
            let m = [1, 2, 3].map(|a| t.grad(a).as_dvec3());
            let m = [-(m[0] + m[1] + m[2]), m[0], m[1], m[2]];
            let mu = set.materials[t.material as usize].mu as f64;
            add_mu(e, &t.v, &m, mu * t.volume as f64);
        }
        for (e, t) in tris.iter().enumerate() {
            let (m1, m2) = (t.grad(1).as_dvec3(), t.grad(2).as_dvec3());
            let mu = set.materials[t.material as usize].mu as f64;
            add_mu(
                tets.len() + e,
                &t.v,
                &[-(m1 + m2), m1, m2],
                mu * t.area as f64,
            );
        }
        let mut constant = Blocks::default();
        constant.reset(self.nodes);
        let (nodes, weights) = (&self.vertex_nodes, &self.vertex_weights);
        pairs.restrict(&h, nodes, weights, &mut Vec::new(), &mut constant);
        self.constant = vec![0.0; 9 * self.nodes * self.nodes];
        constant.add_to(&mut self.constant);
        let stencils = NodeStencils::build(set, b, nodes, weights);
        let fits = pairs.slots <= PAIRS_MAX_SLOTS;
        self.restriction = match fits && pairs.cost(tets.len()) < stencils.cost(tets.len()) {
            true => Restriction::Pairs(pairs),
            false => Restriction::Stencils(stencils),
        };
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
}
