//! The coarse operator's assembly: `Pᵀ H P` of one body at the frame's initial guess,
//! summed over its elements in fixed chunks, its attachments and contact rows, factored.

use glam::{DMat3, DVec3, Vec3, Vec3A};
use rayon::prelude::*;

use super::dense::{Blocks, Dense, add_lower};
use super::space::{CoarseSpace, ElementTerm, NONE};
use crate::config::SolverConfig;
use crate::deformable::AttachmentSet;
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
    let mut fu = [DVec3::ZERO; 32];
    // The terms are in node order (`CoarseSpace::precompute`): pairs q ≤ p are the lower
    // triangle's blocks, each met once per element. Per pair, the term `s g_p g_qᵀ`, then,
    // with `damping = (F Fᵀ, F u, c)`, the damping block `(F Fᵀ u_p·u_q + F u_p (F u_q)ᵀ) c`.
    let add_pairs = |a: &mut Blocks,
                     terms: &[ElementTerm],
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
            let nh = (xs[1] - xs[0]).cross(xs[2] - xs[0]).normalize_or_zero();
            let area = t.area as f64;
            let gj = [0, 1, 2].map(|k| nh.cross(xs[(k + 2) % 3] - xs[(k + 1) % 3]) / (2.0 * area));
            for (p, term) in terms.iter().enumerate() {
                g[p] = gj[0] * term.w[0] + gj[1] * term.w[1] + gj[2] * term.w[2];
            }
            // The membrane's damping block, as the tets' (F is 3×2: u has no third
            // component). Without it the coarse step takes the viscous force without its
            // stiffness and a free cloth with τ = 1e-3 s diverged in a few frames.
            let damp = mat.viscosity as f64 * inv_h * area;
            let (m1, m2) = (t.grad(1).as_dvec3(), t.grad(2).as_dvec3());
            let f = outer(xs[1] - xs[0], m1) + outer(xs[2] - xs[0], m2);
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
