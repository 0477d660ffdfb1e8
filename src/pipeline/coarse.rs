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

use glam::{DMat3, DVec3, UVec3, Vec3, Vec3A};
use rayon::prelude::*;

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
    /// Per vertex of the body (in body order): up to 8 nodes and their weights; pinned
    /// vertices have none.
    pub vertex_nodes: Vec<[u32; 8]>,
    /// In f64, so that they sum to one to f64 precision: the coarse operator's rigid
    /// translations must be exactly stiffness-free, or the rounding of a stiff body's
    /// stiffness (1e5 N/m and more) swamps the inertia (m/h², a few N/m per vertex) and
    /// the factorisation fails.
    pub vertex_weights: Vec<[f64; 8]>,
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
        if !(longest > 0.0) {
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
        })
    }
}

/// A dense symmetric positive definite system, factored in place (lower Cholesky, f64).
#[derive(Clone, Debug, Default)]
struct Dense {
    n: usize,
    /// Row-major n × n; the lower triangle holds L after [`Dense::factor`].
    a: Vec<f64>,
    ok: bool,
}

impl Dense {
    fn reset(&mut self, n: usize) {
        self.n = n;
        self.a.clear();
        self.a.resize(n * n, 0.0);
        self.ok = false;
    }

    #[inline]
    fn add_block(&mut self, i: usize, j: usize, b: &[[f64; 3]; 3]) {
        let n = self.n;
        for r in 0..3 {
            for c in 0..3 {
                self.a[(3 * i + r) * n + 3 * j + c] += b[r][c];
            }
        }
    }

    /// Cholesky factorisation; false (and unusable) if a pivot is not positive.
    fn factor(&mut self) -> bool {
        let n = self.n;
        let a = &mut self.a;
        // A tiny relative shift keeps nodes that free vertices barely touch invertible.
        let trace: f64 = (0..n).map(|i| a[i * n + i]).sum();
        let shift = 1e-12 * trace / n.max(1) as f64;
        for j in 0..n {
            let mut d = a[j * n + j] + shift;
            for k in 0..j {
                d -= a[j * n + k] * a[j * n + k];
            }
            if !(d > 0.0 && d.is_finite()) {
                self.ok = false;
                return false;
            }
            let d = d.sqrt();
            a[j * n + j] = d;
            for i in j + 1..n {
                let mut s = a[i * n + j];
                for k in 0..j {
                    s -= a[i * n + k] * a[j * n + k];
                }
                a[i * n + j] = s / d;
            }
        }
        self.ok = true;
        true
    }

    /// Solves `A x = b` in place with the factor.
    fn solve(&self, b: &mut [f64]) {
        let (n, a) = (self.n, &self.a);
        for i in 0..n {
            let mut s = b[i];
            for k in 0..i {
                s -= a[i * n + k] * b[k];
            }
            b[i] = s / a[i * n + i];
        }
        for i in (0..n).rev() {
            let mut s = b[i];
            for k in i + 1..n {
                s -= a[k * n + i] * b[k];
            }
            b[i] = s / a[i * n + i];
        }
    }
}

/// The coarse level of every deformable body: spaces (rebuilt when the set's topology or
/// the node budget changes) and this frame's factored operators.
#[derive(Default)]
pub struct CoarseLevel {
    generation: u64,
    max_nodes: usize,
    spaces: Vec<Option<CoarseSpace>>,
    systems: Vec<Dense>,
    /// Per vertex: the residual force of the last correction.
    residual: Vec<Vec3A>,
    /// Per body: the restricted residual, then the coarse displacement.
    rhs: Vec<Vec<f64>>,
}

/// An element's contribution to a node: its weighted shape gradient `u = Σ w m_a` and
/// weighted constraint gradient `G = Σ w g_a`.
#[derive(Clone, Copy)]
struct NodeTerm {
    node: u32,
    u: DVec3,
    g: DVec3,
}

/// Adds `w (m, g)` to the node's entry of `terms` (at most 32 distinct nodes per element).
#[inline]
fn accumulate(terms: &mut [NodeTerm; 32], len: &mut usize, node: u32, w: f64, m: DVec3, g: DVec3) {
    for t in terms[..*len].iter_mut() {
        if t.node == node {
            t.u += m * w;
            t.g += g * w;
            return;
        }
    }
    terms[*len] = NodeTerm {
        node,
        u: m * w,
        g: g * w,
    };
    *len += 1;
}

fn block(m: DMat3) -> [[f64; 3]; 3] {
    let c = m.to_cols_array_2d();
    // Row-major from glam's columns.
    [0, 1, 2].map(|r| [0, 1, 2].map(|k| c[k][r]))
}

#[inline]
fn outer(a: DVec3, b: DVec3) -> DMat3 {
    DMat3::from_cols(a * b.x, a * b.y, a * b.z)
}

impl CoarseLevel {
    /// Rebuilds the spaces if needed, then assembles and factors each body's coarse
    /// operator at positions `x` (the frame's initial guess).
    pub fn prepare(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        att: &AttachmentSet,
        x: &[Vec3A],
    ) {
        let max_nodes = cfg.coarse_nodes as usize;
        if self.generation != set.generation
            || self.max_nodes != max_nodes
            || self.spaces.len() != set.bodies.len()
        {
            self.generation = set.generation;
            self.max_nodes = max_nodes;
            self.spaces = (0..set.bodies.len())
                .map(|b| {
                    let r = set.vertex_range(b);
                    let start = r.start;
                    CoarseSpace::build(&set.rest[r], |v| set.is_solved(start + v), max_nodes)
                })
                .collect();
            self.systems = vec![Dense::default(); set.bodies.len()];
            self.rhs = vec![Vec::new(); set.bodies.len()];
        }
        let inv_h = 1.0 / cfg.dt;
        self.systems
            .par_iter_mut()
            .zip(&self.spaces)
            .enumerate()
            .for_each(|(b, (sys, space))| match space {
                Some(space) => assemble(sys, space, set, att, x, b, inv_h),
                None => sys.ok = false,
            });
    }

    /// One coarse correction of every body's iterate (displacements `d`, positions `x`)
    /// towards the minimum of the step's energy (inertial targets `yd`).
    #[allow(clippy::too_many_arguments)]
    pub fn correct(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        att: &AttachmentSet,
        attach_force: impl Fn(usize, Vec3) -> Vec3 + Sync,
        yd: &[Vec3A],
        d: &mut [Vec3A],
        x: &mut [Vec3A],
    ) {
        let n = set.vertex_count();
        self.residual.resize(n, Vec3A::ZERO);
        let inv_h = 1.0 / cfg.dt;
        let (xs, ds): (&[Vec3A], &[Vec3A]) = (x, d);
        self.residual
            .par_iter_mut()
            .enumerate()
            .with_min_len(256)
            .for_each(|(v, r)| {
                *r = if set.is_solved(v) {
                    Vec3A::from(vertex_force(set, att, &attach_force, xs, ds, yd, v, inv_h))
                } else {
                    Vec3A::ZERO
                };
            });
        let residual = &self.residual;
        let corrections: Vec<(usize, Vec<f64>)> = self
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
                let r = set.vertex_range(b);
                rhs.clear();
                rhs.resize(3 * space.nodes, 0.0);
                for (local, v) in r.enumerate() {
                    let f = residual[v];
                    for k in 0..8 {
                        let node = space.vertex_nodes[local][k];
                        if node == NONE {
                            continue;
                        }
                        let w = space.vertex_weights[local][k];
                        for d in 0..3 {
                            rhs[3 * node as usize + d] += w * f[d] as f64;
                        }
                    }
                }
                sys.solve(rhs);
                Some((b, std::mem::take(rhs)))
            })
            .collect();
        for (b, delta) in corrections {
            let space = self.spaces[b].as_ref().expect("solved above");
            let r = set.vertex_range(b);
            let start = r.start;
            d[r.clone()]
                .par_iter_mut()
                .zip(x[r.clone()].par_iter_mut())
                .enumerate()
                .with_min_len(256)
                .for_each(|(local, (dv, xv))| {
                    let mut d = [0.0f64; 3];
                    for k in 0..8 {
                        let node = space.vertex_nodes[local][k];
                        if node == NONE {
                            continue;
                        }
                        let w = space.vertex_weights[local][k];
                        for c in 0..3 {
                            d[c] += w * delta[3 * node as usize + c];
                        }
                    }
                    *dv += Vec3A::new(d[0] as f32, d[1] as f32, d[2] as f32);
                    *xv = set.positions[start + local] + *dv;
                });
            self.rhs[b] = delta;
        }
    }
}

/// The force on vertex `v` at positions `x` (displacements `d`): inertia towards the
/// target `yd`, its elements, and its attachments (`attach_force(attachment, x_v)`, the
/// rows' force on the vertex).
#[allow(clippy::too_many_arguments)]
fn vertex_force(
    set: &DeformableSet,
    att: &AttachmentSet,
    attach_force: &impl Fn(usize, Vec3) -> Vec3,
    x: &[Vec3A],
    d: &[Vec3A],
    yd: &[Vec3A],
    v: usize,
    inv_h: f32,
) -> Vec3 {
    let m_h2 = set.masses[v] * inv_h * inv_h;
    let mut f = Vec3::from(yd[v] - d[v]) * m_h2;
    for &it in set.incident(v) {
        let (kind, e, a) = item::unpack(it);
        f += match kind {
            item::TET => {
                let t = &set.tets[e];
                let xs = t.v.map(|i| x[i as usize]);
                let starts = t.v.map(|i| set.positions[i as usize]);
                t.vertex_block(&set.materials[t.material as usize], a, &xs, &starts, inv_h)
                    .f
            }
            item::TRI => {
                let t = &set.tris[e];
                let xs = t.v.map(|i| x[i as usize]);
                let starts = t.v.map(|i| set.positions[i as usize]);
                t.vertex_block(&set.materials[t.material as usize], a, &xs, &starts, inv_h)
                    .f
            }
            _ => {
                let t = &set.hinges[e];
                let xs = t.v.map(|i| x[i as usize]);
                t.vertex_block(&set.materials[t.material as usize], a, &xs)
                    .f
            }
        };
    }
    for &ai in att.of_vertex(v) {
        f += attach_force(ai as usize, Vec3::from(x[v]));
    }
    f
}

/// Assembles body `b`'s coarse operator `Pᵀ H P` at `x` and factors it, in f64 (see
/// [`CoarseSpace::vertex_weights`]): the shape gradients, deformation gradients and
/// weights are widened before they are combined.
fn assemble(
    sys: &mut Dense,
    space: &CoarseSpace,
    set: &DeformableSet,
    att: &AttachmentSet,
    x: &[Vec3A],
    b: usize,
    inv_h: f32,
) {
    sys.reset(3 * space.nodes);
    let body = &set.bodies[b];
    let v0 = body.vertices.start as usize;
    let slots = |v: usize| {
        let local = v - v0;
        (space.vertex_nodes[local], space.vertex_weights[local])
    };
    let inv_h = inv_h as f64;
    let pos = |v: u32| Vec3::from(x[v as usize]).as_dvec3();
    // Inertia and attachment penalties: diagonal per vertex.
    for v in set.vertex_range(b) {
        let (nodes, weights) = slots(v);
        let mut k = DVec3::splat(set.masses[v] as f64 * inv_h * inv_h);
        for &ai in att.of_vertex(v) {
            k += att.records[ai as usize].k().as_dvec3();
        }
        for i in 0..8 {
            if nodes[i] == NONE {
                continue;
            }
            for j in 0..8 {
                if nodes[j] == NONE {
                    continue;
                }
                let w = weights[i] * weights[j];
                sys.add_block(
                    nodes[i] as usize,
                    nodes[j] as usize,
                    &block(DMat3::from_diagonal(k * w)),
                );
            }
        }
    }
    let zero = NodeTerm {
        node: 0,
        u: DVec3::ZERO,
        g: DVec3::ZERO,
    };
    let mut terms = [zero; 32];
    // Tets: V₀ (μ (u_p·u_q) I + λ' G_p G_qᵀ) + damping V₀η/h ((u_p·u_q) FFᵀ + (F u_q)(F u_p)ᵀ).
    for t in &set.tets[body.tets.start as usize..body.tets.end as usize] {
        let mat = &set.materials[t.material as usize];
        let m: [DVec3; 3] = [1, 2, 3].map(|a| t.grad(a).as_dvec3());
        let grads = [-(m[0] + m[1] + m[2]), m[0], m[1], m[2]];
        let xs = t.v.map(pos);
        let e = [xs[1] - xs[0], xs[2] - xs[0], xs[3] - xs[0]];
        let f = outer(e[0], m[0]) + outer(e[1], m[1]) + outer(e[2], m[2]);
        let cof = DMat3::from_cols(
            f.y_axis.cross(f.z_axis),
            f.z_axis.cross(f.x_axis),
            f.x_axis.cross(f.y_axis),
        );
        let mut len = 0;
        for a in 0..4 {
            let (nodes, weights) = slots(t.v[a] as usize);
            let g = cof * grads[a];
            for k in 0..8 {
                if nodes[k] != NONE {
                    accumulate(&mut terms, &mut len, nodes[k], weights[k], grads[a], g);
                }
            }
        }
        let (mu, lambda, volume) = (mat.mu as f64, mat.lambda as f64, t.volume as f64);
        let damp = mat.viscosity as f64 * inv_h;
        let ff = f * f.transpose();
        for p in 0..len {
            for q in 0..len {
                let (tp, tq) = (terms[p], terms[q]);
                let uu = tp.u.dot(tq.u);
                let mut h =
                    DMat3::from_diagonal(DVec3::splat(mu * uu)) + outer(tp.g, tq.g * lambda);
                if damp > 0.0 {
                    h += (ff * uu + outer(f * tp.u, f * tq.u)) * damp;
                }
                sys.add_block(tp.node as usize, tq.node as usize, &block(h * volume));
            }
        }
    }
    // Membranes: the same with the area gradient of J.
    for t in &set.tris[body.tris.start as usize..body.tris.end as usize] {
        let mat = &set.materials[t.material as usize];
        let xs = t.v.map(pos);
        let n = (xs[1] - xs[0]).cross(xs[2] - xs[0]);
        let nh = n.normalize_or_zero();
        let area = t.area as f64;
        let m1 = t.grad(1).as_dvec3();
        let m2 = t.grad(2).as_dvec3();
        let grads = [-(m1 + m2), m1, m2];
        let mut len = 0;
        for a in 0..3 {
            let (nodes, weights) = slots(t.v[a] as usize);
            let g = nh.cross(xs[(a + 2) % 3] - xs[(a + 1) % 3]) / (2.0 * area);
            for k in 0..8 {
                if nodes[k] != NONE {
                    accumulate(&mut terms, &mut len, nodes[k], weights[k], grads[a], g);
                }
            }
        }
        let (mu, lambda) = (mat.mu as f64, mat.lambda as f64);
        for p in 0..len {
            for q in 0..len {
                let (tp, tq) = (terms[p], terms[q]);
                let h = DMat3::from_diagonal(DVec3::splat(mu * tp.u.dot(tq.u)))
                    + outer(tp.g, tq.g * lambda);
                sys.add_block(tp.node as usize, tq.node as usize, &block(h * area));
            }
        }
    }
    // Hinges: D w G_p G_qᵀ with G the weighted angle gradients.
    for t in &set.hinges[body.hinges.start as usize..body.hinges.end as usize] {
        let mat = &set.materials[t.material as usize];
        let xs = t.v.map(|i| Vec3::from(x[i as usize]));
        let Some((_, grad)) = crate::deformable::elastic::dihedral(&xs) else {
            continue;
        };
        let mut len = 0;
        for a in 0..4 {
            let (nodes, weights) = slots(t.v[a] as usize);
            for k in 0..8 {
                if nodes[k] != NONE {
                    accumulate(
                        &mut terms,
                        &mut len,
                        nodes[k],
                        weights[k],
                        DVec3::ZERO,
                        grad[a].as_dvec3(),
                    );
                }
            }
        }
        let k = mat.bending as f64 * t.weight as f64;
        for p in 0..len {
            for q in 0..len {
                sys.add_block(
                    terms[p].node as usize,
                    terms[q].node as usize,
                    &block(outer(terms[p].g, terms[q].g * k)),
                );
            }
        }
    }
    sys.factor();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_a_partition_of_unity_and_skip_pinned_vertices() {
        let mesh = crate::deformable::TetMesh::box_grid(
            Vec3::new(1.0, 0.1, 0.1),
            [20, 2, 2],
            Default::default(),
        );
        let rest: Vec<Vec3A> = mesh.vertices.iter().map(|&p| p.into()).collect();
        let s = CoarseSpace::build(&rest, |v| rest[v].x > -0.49, 64).unwrap();
        // 10 cubic cells of 0.1 m along the beam, one across: 11 × 2 × 2 nodes.
        assert_eq!(s.nodes, 44);
        for (v, p) in rest.iter().enumerate() {
            let sum: f64 = s.vertex_weights[v].iter().sum();
            if p.x > -0.49 {
                assert!(
                    (sum - 1.0).abs() < 1e-12,
                    "vertex {v}: weights sum to {sum}"
                );
            } else {
                assert_eq!(sum, 0.0);
                assert!(s.vertex_nodes[v].iter().all(|&n| n == NONE));
            }
        }
    }
}
