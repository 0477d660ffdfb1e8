//! Vertex block descent of the deformable bodies (Chen et al. 2024; AVBD Alg. 1 for
//! vertices): inertial targets and the adaptive initial guess before the iterations, one
//! sweep over the vertex colours per iteration (a 3×3 block solve per vertex from its
//! inertia, its elements and its attachment rows), velocities after them.
//!
//! Vertices of one colour share no element, so they are solved in parallel; their new
//! positions go to a second buffer and are copied back after the colour, so the result
//! does not depend on the order or the number of threads.

use glam::{Mat3, Vec3, Vec3A};
use rayon::prelude::*;

use super::IterateRecord;
use crate::config::SolverConfig;
use crate::deformable::AttachmentSet;
use crate::deformable::elastic::Block;
use crate::deformable::set::{DeformableSet, item};
use crate::report::StepReport;
use crate::rigid::BodySet;

/// Vertices per rayon task.
const CHUNK: usize = 64;

/// The deformable half of the step state.
#[derive(Default)]
pub struct VertexState {
    /// The current iterate x of every vertex (absolute position).
    pub x: Vec<Vec3A>,
    /// Inertial target y = xᵗ + h vᵗ + h² g.
    pub y: Vec<Vec3A>,
    /// Double buffer of one colour's new positions.
    scratch: Vec<Vec3A>,
    /// The two-level step's coarse spaces and operators.
    pub coarse: super::coarse::CoarseLevel,
}

/// Inertial targets, the initial guess, and the targets of pinned vertices.
///
/// The guess is VBD's adaptive initialisation: `xᵗ + h v + h² g ã` with
/// `ã = clamp(a·ĝ/|g|, 0, 1)` from the last step's acceleration, so a resting vertex does
/// not start inside its support (the rigid bodies use the same rule).
pub fn begin_step(
    cfg: &SolverConfig,
    set: &DeformableSet,
    att: &AttachmentSet,
    s: &mut VertexState,
) {
    let n = set.vertex_count();
    let h = cfg.dt;
    let g = Vec3A::from(cfg.gravity);
    let g2 = g.length_squared();
    s.x.resize(n, Vec3A::ZERO);
    s.y.resize(n, Vec3A::ZERO);
    s.x.par_iter_mut()
        .zip(s.y.par_iter_mut())
        .enumerate()
        .with_min_len(1024)
        .for_each(|(v, (x, y))| {
            let p = set.positions[v];
            if !set.is_solved(v) {
                let frozen = set.bodies[set.owner[v] as usize].frozen;
                *x = if frozen { p } else { set.targets[v] };
                *y = *x;
                return;
            }
            let vel = set.velocities[v];
            *y = p + vel * h + g * (h * h);
            let accel = (vel - set.prev_velocities[v]) / h;
            let weight = if g2 > 0.0 {
                (accel.dot(g) / g2).clamp(0.0, 1.0)
            } else {
                0.0
            };
            *x = p + vel * h + g * (weight * h * h);
        });
    if cfg.coarse_nodes > 0 {
        s.coarse.prepare(cfg, set, att, &s.x);
    }
}

/// The coarse correction of every body (`pipeline::coarse`), before a sweep.
pub fn coarse_correction(
    cfg: &SolverConfig,
    set: &DeformableSet,
    attachments: &AttachmentSet,
    bodies: &BodySet,
    iterate: &[IterateRecord],
    s: &mut VertexState,
) {
    if cfg.coarse_nodes == 0 {
        return;
    }
    let force = |ai: usize, x: Vec3| {
        let rec = &attachments.records[ai];
        let b = rec.body as usize;
        let pose = iterate[b].pose(&bodies.poses[b]);
        -rec.force(rec.error(x, &pose), cfg.alpha)
    };
    s.coarse
        .correct(cfg, set, attachments, force, &s.y, &mut s.x);
}

/// One sweep over the vertex colours.
pub fn sweep(
    cfg: &SolverConfig,
    set: &DeformableSet,
    attachments: &AttachmentSet,
    bodies: &BodySet,
    iterate: &[IterateRecord],
    s: &mut VertexState,
) {
    let colors = &set.colors;
    for c in 0..colors.count() {
        let group = colors.group(c);
        let mut scratch = std::mem::take(&mut s.scratch);
        {
            let ctx = Ctx {
                cfg,
                set,
                attachments,
                bodies,
                iterate,
                x: &s.x,
                y: &s.y,
            };
            group
                .par_iter()
                .with_min_len(CHUNK)
                .map(|&v| ctx.solve_vertex(v as usize))
                .collect_into_vec(&mut scratch);
        }
        for (k, &v) in group.iter().enumerate() {
            s.x[v as usize] = scratch[k];
        }
        s.scratch = scratch;
    }
}

/// Velocities `v = (x − xᵗ)/h` and the new positions; a body with a non-finite vertex keeps
/// its start state, loses its velocity and is frozen (reported).
pub fn end_step(
    cfg: &SolverConfig,
    set: &mut DeformableSet,
    s: &VertexState,
    report: &mut StepReport,
) {
    let inv_h = 1.0 / cfg.dt;
    let mut refreeze = false;
    for b in 0..set.bodies.len() {
        if set.bodies[b].frozen {
            continue;
        }
        let r = set.vertex_range(b);
        if !s.x[r.clone()].iter().all(|x| x.is_finite()) {
            set.bodies[b].frozen = true;
            for v in r {
                set.velocities[v] = Vec3A::ZERO;
                set.prev_velocities[v] = Vec3A::ZERO;
            }
            report.frozen_deformables.push(set.handles[b]);
            refreeze = true;
            continue;
        }
        for v in r {
            let vel = (s.x[v] - set.positions[v]) * inv_h;
            set.prev_velocities[v] = set.velocities[v];
            set.velocities[v] = vel;
            set.positions[v] = s.x[v];
        }
    }
    if refreeze {
        // Frozen vertices leave the colouring.
        set.rebuild();
    }
}

/// Read-only view of the step state used to solve one vertex.
struct Ctx<'a> {
    cfg: &'a SolverConfig,
    set: &'a DeformableSet,
    attachments: &'a AttachmentSet,
    bodies: &'a BodySet,
    iterate: &'a [IterateRecord],
    x: &'a [Vec3A],
    y: &'a [Vec3A],
}

impl Ctx<'_> {
    /// Assembles vertex `v`'s force and 3×3 block and returns its new position.
    fn solve_vertex(&self, v: usize) -> Vec3A {
        let set = self.set;
        let h = self.cfg.dt;
        let inv_h = 1.0 / h;
        let m_h2 = set.masses[v] * inv_h * inv_h;
        let x = self.x[v];
        let mut acc = Block {
            f: Vec3::from(self.y[v] - x) * m_h2,
            h: Mat3::from_diagonal(Vec3::splat(m_h2)),
        };
        for &it in set.incident(v) {
            let (kind, e, a) = item::unpack(it);
            let block = match kind {
                item::TET => {
                    let t = &set.tets[e];
                    let mat = &set.materials[t.material as usize];
                    let xs = t.v.map(|i| self.x[i as usize]);
                    let starts = t.v.map(|i| set.positions[i as usize]);
                    t.vertex_block(mat, a, &xs, &starts, inv_h)
                }
                item::TRI => {
                    let t = &set.tris[e];
                    let mat = &set.materials[t.material as usize];
                    let xs = t.v.map(|i| self.x[i as usize]);
                    let starts = t.v.map(|i| set.positions[i as usize]);
                    t.vertex_block(mat, a, &xs, &starts, inv_h)
                }
                _ => {
                    let t = &set.hinges[e];
                    let mat = &set.materials[t.material as usize];
                    let xs = t.v.map(|i| self.x[i as usize]);
                    t.vertex_block(mat, a, &xs)
                }
            };
            acc.add(block);
        }
        for &ai in self.attachments.of_vertex(v) {
            let rec = &self.attachments.records[ai as usize];
            let b = rec.body as usize;
            let pose = self.iterate[b].pose(&self.bodies.poses[b]);
            let c = rec.error(Vec3::from(x), &pose);
            acc.f -= rec.force(c, self.cfg.alpha);
            acc.h += Mat3::from_diagonal(rec.k());
        }
        let det = acc.h.determinant();
        if !(det.is_finite() && det > 0.0) {
            return x; // not SPD or not finite: keep the iterate; the end-of-step guard reports it
        }
        x + Vec3A::from(acc.h.inverse() * acc.f)
    }
}
