//! The coarse operator's assembly: `Pᵀ H P` of one body at the frame's initial guess,
//! summed over its elements in fixed chunks, its attachments and contact rows, factored.

use glam::{DMat3, DVec3, Vec3, Vec3A};
use rayon::prelude::*;
use std::ops::Range;

use super::dense::{Blocks, Dense, add_lower};
use super::pairs::{Block, add, element_pairs};
use super::space::{CoarseSpace, NONE, Restriction};
use super::stencils::{NodeStencils, Stencil};
use crate::config::SolverConfig;
use crate::deformable::AttachmentSet;
use crate::deformable::elastic::TetRecord;
use crate::deformable::set::DeformableSet;
use crate::pipeline::surface_contact::geometry::Pose;
use crate::pipeline::surface_contact::{SurfaceContact, rows};

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

/// Tet `t`'s deformation gradient at positions `x`, its cofactor `∂J/∂F`, and its rest
/// shape gradients of vertices 1–3.
#[inline]
fn tet_deformation(t: &TetRecord, x: &[Vec3A]) -> (DMat3, DMat3, [DVec3; 3]) {
    let xs = t.v.map(|v| Vec3::from(x[v as usize]).as_dvec3());
    let m = [1, 2, 3].map(|k| t.grad(k).as_dvec3());
    let f = outer(xs[1] - xs[0], m[0]) + outer(xs[2] - xs[0], m[1]) + outer(xs[3] - xs[0], m[2]);
    let cof = DMat3::from_cols(
        f.y_axis.cross(f.z_axis),
        f.z_axis.cross(f.x_axis),
        f.x_axis.cross(f.y_axis),
    );
    (f, cof, m)
}

/// A membrane's gradients at its vertices `xs` of its area ratio (`area` its rest area).
#[inline]
fn area_gradients(xs: &[DVec3; 3], area: f64) -> [DVec3; 3] {
    let nh = (xs[1] - xs[0]).cross(xs[2] - xs[0]).normalize_or_zero();
    [0, 1, 2].map(|k| nh.cross(xs[(k + 2) % 3] - xs[(k + 1) % 3]) / (2.0 * area))
}

/// A membrane's damping set-up at its vertices `xs`: the coefficient `c` (viscosity / h ×
/// rest area), its 3×2 deformation gradient F (as a 3×3 with a zero third column) and its
/// rest shape gradients m₁, m₂. Its damping block is the tets' with this F (m has no third
/// component). Without it the coarse step takes the viscous force without its stiffness and
/// a free cloth with τ = 1e-3 s diverged in a few frames.
#[inline]
fn membrane_damping(
    t: &crate::deformable::elastic::TriRecord,
    viscosity: f32,
    xs: &[DVec3; 3],
    inv_h: f64,
) -> (f64, DMat3, [DVec3; 2]) {
    let damp = viscosity as f64 * inv_h * t.area as f64;
    let (m1, m2) = (t.grad(1).as_dvec3(), t.grad(2).as_dvec3());
    let f = outer(xs[1] - xs[0], m1) + outer(xs[2] - xs[0], m2);
    (damp, f, [m1, m2])
}

/// Elements per job of the element terms through the stencils: a fixed size (not a share
/// of the threads), so the partial sums, and the bits of the operator, do not depend on
/// the thread count.
const STENCILS_CHUNK: usize = 1024;

/// Assembles body `b`'s coarse operator `Pᵀ H P` at `x` and factors it, in f64 (see
/// [`CoarseSpace::vertex_weights`]): the constant part, the attachments' penalties, and
/// per element the terms that follow the deformation, `λ' g_a g_bᵀ` (g the gradients of J)
/// and the damping and bending terms, summed at the body's vertex pairs and restricted to
/// the nodes ([`VertexPairs`](super::pairs::VertexPairs)). Without `elements`, the
/// restriction of the last assembly is taken as it is.
#[allow(clippy::too_many_arguments)]
pub(super) fn assemble(
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
    scratch: &mut Scratch,
) {
    sys.n = 3 * space.nodes;
    if elements {
        // The exact operator's element terms (with the tets' second-order term).
        element_operator(space, set, x, b, inv_h, true, scratch, &mut sys.elements);
    }
    sys.a.clear();
    sys.a.extend_from_slice(&space.constant);
    sys.elements.add_to(&mut sys.a);
    add_couplings(sys, cfg, space, set, att, contact, x, b);
    if sys.factor() {
        return;
    }
    // Deformed so far that the exact operator is indefinite: the Gauss–Newton one.
    let mut gauss_newton = Blocks::default();
    element_operator(space, set, x, b, inv_h, false, scratch, &mut gauss_newton);
    sys.a.clear();
    sys.a.extend_from_slice(&space.constant);
    gauss_newton.add_to(&mut sys.a);
    add_couplings(sys, cfg, space, set, att, contact, x, b);
    sys.factor();
}

/// A body's assembly buffers, kept from frame to frame (fresh ones, a few hundred
/// kilobytes to megabytes each, cost page faults and, freed across threads, TLB
/// shootdowns every frame).
#[derive(Default)]
pub(super) struct Scratch {
    /// Through the stencils: each chunk's Gauss–Newton and second-order node blocks.
    chunks: Vec<(Blocks, Blocks)>,
    /// Through the pairs: the sums at the pairs (Gauss–Newton, second-order), and `H P`.
    gn: Vec<Block>,
    second: Vec<Block>,
    product: Vec<Block>,
}

/// `v` as `len` zero blocks, its storage kept.
fn reset(v: &mut Vec<Block>, len: usize) {
    v.clear();
    v.resize(len, [0.0; 9]);
}

/// Body `b`'s element terms at `x` restricted to the nodes, into `out`; with `exact`,
/// the tets' second-order terms too. Through the vertex pairs, fixed ranges of vertices
/// sum the pairs they own in parallel, and the sum is restricted; per element stencil,
/// fixed chunks of elements are summed in parallel, then the chunks in order.
#[allow(clippy::too_many_arguments)]
pub(super) fn element_operator(
    space: &CoarseSpace,
    set: &DeformableSet,
    x: &[Vec3A],
    b: usize,
    inv_h: f64,
    exact: bool,
    scratch: &mut Scratch,
    out: &mut Blocks,
) {
    let body = &set.bodies[b];
    let count = body.tets.len() + body.tris.len() + body.hinges.len();
    // Only tets have a second-order part, and they come first.
    let has_second = |range: &Range<usize>| exact && range.start < body.tets.len();
    out.reset(space.nodes);
    match &space.restriction {
        Restriction::Pairs(pairs) => {
            // Each job adds the terms of the pairs its vertices own, into its own slots.
            let tets = exact && !body.tets.is_empty();
            let Scratch {
                gn,
                second,
                product,
                ..
            } = scratch;
            reset(gn, pairs.slots);
            reset(second, if tets { pairs.slots } else { 0 });
            let (mut gn_rest, mut second_rest) = (&mut gn[..], &mut second[..]);
            let mut work = Vec::new();
            for job in pairs.jobs() {
                let (g, tail) = std::mem::take(&mut gn_rest).split_at_mut(job.slots.len());
                gn_rest = tail;
                let len = if tets { job.slots.len() } else { 0 };
                let (s, tail) = std::mem::take(&mut second_rest).split_at_mut(len);
                second_rest = tail;
                work.push((job, g, s));
            }
            work.into_par_iter().for_each(|(job, gn, second)| {
                for &e in &job.elements {
                    let e = e as usize;
                    if let Some(form) = ElementForm::new(set, b, e, x, inv_h, exact) {
                        let slots = pairs.element_slots(e);
                        form.add_at_pairs(slots, job.slots.start, gn, second);
                    }
                }
            });
            for (g, s) in gn.iter_mut().zip(second.iter()) {
                for t in 0..9 {
                    g[t] += s[t];
                }
            }
            let (nodes, weights) = (&space.vertex_nodes, &space.vertex_weights);
            pairs.restrict(gn, nodes, weights, product, out);
        }
        Restriction::Stencils(stencils) => {
            let chunks = &mut scratch.chunks;
            chunks.resize_with(count.div_ceil(STENCILS_CHUNK), Default::default);
            chunks
                .par_iter_mut()
                .enumerate()
                .for_each(|(k, (gn, second))| {
                    let range = k * STENCILS_CHUNK..((k + 1) * STENCILS_CHUNK).min(count);
                    gn.reset(space.nodes);
                    second.reset(if has_second(&range) { space.nodes } else { 0 });
                    add_elements(gn, second, stencils, set, x, b, range, inv_h);
                });
            for part in chunks.iter().flat_map(|(gn, second)| [gn, second]) {
                out.add(part);
            }
        }
    }
}

/// An element's terms that follow the deformation, at its `k` vertices: per pair of
/// vertices `(i, j)`, the Gauss–Newton block `s g_i g_jᵀ` (g the gradients of J, of the
/// membrane's area, of the hinge's angle) and the damping block `(F Fᵀ m_i·m_j + F m_i (F
/// m_j)ᵀ) c` (m the rest shape gradients), and a tet's second-order block `−s' [F (m_i ×
/// m_j)]×`. Each is bilinear in per-vertex vectors, so a node pair's block is the same
/// formula of the vectors summed with the vertices' weights at the nodes.
struct ElementForm {
    k: usize,
    v: [u32; 4],
    /// Per vertex: g, m, F m.
    at: [Vectors; 4],
    scale: f64,
    /// F Fᵀ and c.
    damping: Option<(DMat3, f64)>,
    /// F and s' = λ'(J − α) V₀.
    second: Option<(DMat3, f64)>,
}

/// g, m and F m of a vertex, or their weighted sums at a node.
type Vectors = [DVec3; 3];

impl ElementForm {
    /// Element `e` of body `b` at `x` (the body's tets, then membranes, then hinges);
    /// `None` for a hinge whose angle has no gradient (a folded-flat pair).
    fn new(
        set: &DeformableSet,
        b: usize,
        e: usize,
        x: &[Vec3A],
        inv_h: f64,
        exact: bool,
    ) -> Option<ElementForm> {
        let body = &set.bodies[b];
        let pos = |v: u32| Vec3::from(x[v as usize]).as_dvec3();
        let (n_tets, n_tris) = (body.tets.len(), body.tris.len());
        if e < n_tets {
            let t = &set.tets[body.tets.start as usize + e];
            let mat = &set.materials[t.material as usize];
            let (f, cof, m) = tet_deformation(t, x);
            let m = [-(m[0] + m[1] + m[2]), m[0], m[1], m[2]];
            let damp = mat.viscosity as f64 * inv_h * t.volume as f64;
            // λ'(J − α) ∂²J: J is trilinear in the vertices, ∂²J/∂x_i∂x_j = −[F (m_i ×
            // m_j)]×. With it the operator at rest is exactly linear elasticity; without it
            // (Gauss–Newton) pure shear is half as stiff and a coarse step overshoots.
            let s = mat.lambda as f64 * (f.determinant() - mat.alpha as f64) * t.volume as f64;
            Some(ElementForm {
                k: 4,
                v: t.v,
                at: m.map(|m| [cof * m, m, f * m]),
                scale: mat.lambda as f64 * t.volume as f64,
                damping: (damp > 0.0).then_some((f * f.transpose(), damp)),
                second: exact.then_some((f, s)),
            })
        } else if e < n_tets + n_tris {
            let t = &set.tris[body.tris.start as usize + e - n_tets];
            let mat = &set.materials[t.material as usize];
            let xs = t.v.map(pos);
            let area = t.area as f64;
            let g = area_gradients(&xs, area);
            let (damp, f, [m1, m2]) = membrane_damping(t, mat.viscosity, &xs, inv_h);
            let m = [-(m1 + m2), m1, m2];
            let at = [0, 1, 2].map(|i| [g[i], m[i], f * m[i]]);
            Some(ElementForm {
                k: 3,
                v: [t.v[0], t.v[1], t.v[2], 0],
                at: [at[0], at[1], at[2], [DVec3::ZERO; 3]],
                scale: mat.lambda as f64 * area,
                damping: (damp > 0.0).then_some((f * f.transpose(), damp)),
                second: None,
            })
        } else {
            let t = &set.hinges[body.hinges.start as usize + e - n_tets - n_tris];
            let mat = &set.materials[t.material as usize];
            let xs = t.v.map(|i| Vec3::from(x[i as usize]));
            let (_, grad) = crate::deformable::elastic::dihedral(&xs)?;
            Some(ElementForm {
                k: 4,
                v: t.v,
                at: grad.map(|g| [g.as_dvec3(), DVec3::ZERO, DVec3::ZERO]),
                scale: mat.bending as f64 * t.weight as f64,
                damping: None,
                second: None,
            })
        }
    }

    /// The Gauss–Newton and damping block between two vertices (or nodes).
    #[inline(always)]
    fn block(&self, [gi, mi, fmi]: &Vectors, [gj, mj, fmj]: &Vectors) -> DMat3 {
        let mut block = outer(*gi, *gj * self.scale);
        if let Some((ff, c)) = self.damping {
            block += (ff * mi.dot(*mj) + outer(*fmi, *fmj)) * c;
        }
        block
    }

    /// The second-order block between two vertices (or nodes), if the element has one.
    #[inline(always)]
    fn second_block(&self, mi: DVec3, mj: DVec3) -> Option<DMat3> {
        let (f, s) = self.second?;
        Some(skew(f * mi.cross(mj) * -s))
    }

    /// Adds the blocks at the element's vertex pairs (`slots`, in the order of
    /// [`element_pairs`]) that fall in `gn`, which holds the slots from `first` on: into
    /// `gn`, and into `second` unless it is empty.
    fn add_at_pairs(&self, slots: &[u32], first: usize, gn: &mut [Block], second: &mut [Block]) {
        for ((i, j), &s) in element_pairs(&self.v[..self.k]).zip(slots) {
            // (A pinned pair's NONE falls outside too.)
            let s = (s as usize).wrapping_sub(first);
            if s >= gn.len() {
                continue;
            }
            let s = s as u32;
            add(gn, s, &self.block(&self.at[i], &self.at[j]));
            if i != j
                && !second.is_empty()
                && let Some(block) = self.second_block(self.at[i][1], self.at[j][1])
            {
                add(second, s, &block);
            }
        }
    }
}

/// The attachments' penalties and the contact terms of body `b`, added to its operator.
#[allow(clippy::too_many_arguments)]
pub(super) fn add_couplings(
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
        // Contact terms, the other side held still: over the term's points k, l in this
        // body, Σ w_k w_l k_n n nᵀ plus friction Σ w̃_k w̃_l k_t (I − t tᵀ) over the
        // frame-start tangent plane (w̃ its weights). Between nodes i and j that is
        // k_n n nᵀ U_i U_j + k_t (I − t tᵀ) Ũ_i Ũ_j, U = Σ_k w_k P_k the weights restricted
        // to the nodes: one outer product over the term's few nodes, each term once (at
        // its first point in the body), instead of 8 × 8 node pairs per pair of points.
        let body_range = set.vertex_range(b);
        let inside = |p: u32| p != rows::NO_POINT && body_range.contains(&(p as usize));
        // The term's nodes: (node, U, Ũ).
        let mut nodes: Vec<(u32, f64, f64)> = Vec::with_capacity(32);
        for v in body_range.clone() {
            contact.for_each_coarse_term(cfg, v, x, poses, |term| {
                if term.points.iter().copied().find(|&p| inside(p)) != Some(v as u32) {
                    return;
                }
                nodes.clear();
                for (l, &p) in term.points.iter().enumerate() {
                    if !inside(p) {
                        continue;
                    }
                    let local = p as usize - v0;
                    let (w, wt) = (term.weights[l] as f64, term.lagged_weights[l] as f64);
                    let (np, wp) = (space.vertex_nodes[local], space.vertex_weights[local]);
                    for (&node, &weight) in np.iter().zip(&wp).filter(|(n, _)| **n != NONE) {
                        match nodes.iter_mut().find(|e| e.0 == node) {
                            Some(e) => {
                                e.1 += w * weight;
                                e.2 += wt * weight;
                            }
                            None => nodes.push((node, w * weight, wt * weight)),
                        }
                    }
                }
                nodes.sort_unstable_by_key(|e| e.0);
                let normal = term.normal.as_dvec3();
                let nn = outer(normal, normal) * term.k_n as f64;
                let t = term.tangent_normal.as_dvec3();
                let tangent = (DMat3::IDENTITY - outer(t, t)) * term.k_t as f64;
                for (i, &(ni, ui, uti)) in nodes.iter().enumerate() {
                    for &(nj, uj, utj) in &nodes[..=i] {
                        let block = nn * (ui * uj) + tangent * (uti * utj);
                        add_lower(&mut sys.a, n, ni as usize, nj as usize, &block);
                    }
                }
            });
        }
    }
}

/// The deformation-dependent terms of body `b`'s elements in `range` (the body's tets,
/// then membranes, then hinges), summed at the nodes of each element's stencil, added to
/// `a` (the tets' second-order terms to `second` unless it is empty): the same terms as
/// [`ElementForm`]'s, per node pair, with the weighted vectors formed directly (`g_p = cof
/// u_p`), which costs less than forming them from the vertices' at this size.
#[allow(clippy::too_many_arguments)]
fn add_elements(
    a: &mut Blocks,
    second: &mut Blocks,
    stencils: &NodeStencils,
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
    let mut fu = [DVec3::ZERO; 32];
    // The terms are in node order (`CoarseSpace::precompute`): pairs q ≤ p are the lower
    // triangle's blocks, each met once per element. Per pair, the term `s g_p g_qᵀ`, then,
    // with `damping = (F Fᵀ, F u, c)`, the damping block `(F Fᵀ u_p·u_q + F u_p (F u_q)ᵀ) c`.
    let add_pairs = |a: &mut Blocks,
                     terms: &[Stencil],
                     g: &[DVec3],
                     scale: f64,
                     damping: Option<(&DMat3, &[DVec3], f64)>| {
        for (p, tp) in terms.iter().enumerate() {
            for (q, tq) in terms[..=p].iter().enumerate() {
                a.add_lower(tp.node, tq.node, &outer(g[p], g[q] * scale));
                if let Some((ff, fu, c)) = damping {
                    let h = (*ff * tp.u.dot(tq.u) + outer(fu[p], fu[q])) * c;
                    a.add_lower(tp.node, tq.node, &h);
                }
            }
        }
    };
    for e in range {
        let terms = stencils.of(e);
        if e < n_tets {
            let t = &set.tets[body.tets.start as usize + e];
            let mat = &set.materials[t.material as usize];
            let (f, cof, _) = tet_deformation(t, x);
            for (p, term) in terms.iter().enumerate() {
                g[p] = cof * term.u;
                fu[p] = f * term.u;
            }
            let damp = mat.viscosity as f64 * inv_h * t.volume as f64;
            let ff = f * f.transpose();
            let damping = (damp > 0.0).then_some((&ff, &fu[..], damp));
            add_pairs(a, terms, &g, mat.lambda as f64 * t.volume as f64, damping);
            // λ'(J − α) ∂²J, into `second`: J is trilinear in the vertices, ∂²J/∂x_a∂x_b =
            // −[F (m_a × m_b)]×, so the coarse block is −s V₀ [F (u_p × u_q)]× (zero on the
            // diagonal). With it the operator at rest is exactly linear elasticity; without
            // it (Gauss–Newton) pure shear is half as stiff and a coarse step overshoots.
            if second.is_empty() {
                continue;
            }
            let s = mat.lambda as f64 * (f.determinant() - mat.alpha as f64) * t.volume as f64;
            for (p, tp) in terms.iter().enumerate() {
                for tq in &terms[..p] {
                    let w = f * tp.u.cross(tq.u) * -s;
                    second.add_lower(tp.node, tq.node, &skew(w));
                }
            }
        } else if e < n_tets + n_tris {
            let t = &set.tris[body.tris.start as usize + e - n_tets];
            let mat = &set.materials[t.material as usize];
            let xs = t.v.map(pos);
            let area = t.area as f64;
            let gj = area_gradients(&xs, area);
            for (p, term) in terms.iter().enumerate() {
                g[p] = gj[0] * term.w[0] + gj[1] * term.w[1] + gj[2] * term.w[2];
            }
            let (damp, f, _) = membrane_damping(t, mat.viscosity, &xs, inv_h);
            let ff = f * f.transpose();
            for (p, term) in terms.iter().enumerate() {
                fu[p] = f * term.u;
            }
            let damping = (damp > 0.0).then_some((&ff, &fu[..], damp));
            add_pairs(a, terms, &g, mat.lambda as f64 * area, damping);
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
            add_pairs(a, terms, &g, mat.bending as f64 * t.weight as f64, None);
        }
    }
}
