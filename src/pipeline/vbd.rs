//! Vertex block descent of the deformable bodies (Chen et al. 2024; AVBD Alg. 1 for
//! vertices): inertial targets and the adaptive initial guess before the iterations, one
//! sweep over the vertex colours per iteration (a 3×3 block solve per vertex from its
//! inertia, its elements and its attachment rows), velocities after them.
//!
//! Vertices of one colour share no element, so they are solved in parallel; their new
//! positions go to a second buffer and are copied back after the colour, so the result
//! does not depend on the order or the number of threads.

use glam::{DMat3, DVec3, Mat3, Vec3, Vec3A};
use rayon::prelude::*;

use super::IterateRecord;
use super::surface_contact::SurfaceContact;
use super::surface_contact::geometry::Pose;
use crate::config::{ContactModel, SolverConfig};
use crate::deformable::AttachmentSet;
use crate::deformable::elastic::Block;
use crate::deformable::set::{DeformableSet, PINNED, item};
use crate::report::StepReport;
use crate::rigid::BodySet;

/// Vertices per rayon task.
const CHUNK: usize = 64;

/// The deformable half of the step state.
///
/// The iterate is kept as a displacement from the start position, as for the rigid
/// bodies: the velocity `d/h` and the inertia term then keep f32 relative precision
/// wherever the body is (at 10 m from the origin an absolute position rounds by 1 µm, which
/// as a velocity error would drift a falling body by a millimetre in two seconds).
#[derive(Default)]
pub struct VertexState {
    /// Displacement d = x − xᵗ of every vertex in this step.
    pub d: Vec<Vec3A>,
    /// The iterate as an absolute position, `xᵗ + d` (what the elements read).
    pub x: Vec<Vec3A>,
    /// Inertial target as a displacement, `y − xᵗ = h vᵗ + h² g`.
    pub yd: Vec<Vec3A>,
    /// Double buffer of one colour's new positions.
    scratch: Vec<Vec3A>,
    /// The two-level step's coarse spaces and operators.
    pub coarse: super::coarse::CoarseLevel,
    /// Penetration-free contact of the deformables' surfaces.
    pub contact: SurfaceContact,
    /// Whether contact runs this frame (some deformable has a surface).
    pub contact_on: bool,
    /// Scratch: the rigid bodies' poses at the iterate.
    pub poses: Vec<Pose>,
    /// This frame's time in the vertex sweeps and in the coarse step (assembly and
    /// corrections), ms.
    pub sweep_ms: f64,
    pub coarse_ms: f64,
}

/// Inertial targets, the initial guess, and the targets of pinned vertices.
///
/// The guess is VBD's adaptive initialisation: `xᵗ + h v + h² g ã` with
/// `ã = clamp(a·ĝ/|g|, 0, 1)` from the last step's acceleration, so a resting vertex does
/// not start inside its support (the rigid bodies use the same rule).
pub fn begin_step(cfg: &SolverConfig, set: &DeformableSet, s: &mut VertexState) {
    let n = set.vertex_count();
    let h = cfg.dt;
    let g = Vec3A::from(cfg.gravity);
    let g2 = g.length_squared();
    s.d.resize(n, Vec3A::ZERO);
    s.x.resize(n, Vec3A::ZERO);
    s.yd.resize(n, Vec3A::ZERO);
    s.d.par_iter_mut()
        .zip(s.yd.par_iter_mut())
        .zip(s.x.par_iter_mut())
        .enumerate()
        .with_min_len(1024)
        .for_each(|(v, ((d, yd), x))| {
            let p = set.positions[v];
            if !set.is_solved(v) {
                let frozen = set.bodies[set.owner[v] as usize].frozen;
                *d = if frozen {
                    Vec3A::ZERO
                } else {
                    set.targets[v] - p
                };
                *yd = *d;
            } else {
                let vel = set.velocities[v];
                *yd = vel * h + g * (h * h);
                let accel = (vel - set.prev_velocities[v]) / h;
                let weight = if g2 > 0.0 {
                    (accel.dot(g) / g2).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                *d = vel * h + g * (weight * h * h);
            }
            *x = p + *d;
        });
}

/// The frame's contact set-up (cages, candidates, the active set at xᵗ; the initial guess
/// clamped into the cages) and the coarse operators, which take the contact rows.
pub fn begin_contact_and_coarse(
    cfg: &SolverConfig,
    set: &DeformableSet,
    att: &AttachmentSet,
    bodies: &BodySet,
    iterate: &[IterateRecord],
    s: &mut VertexState,
) {
    // The GPU backend's run again of a step (`seeded`) adds to its first run's times.
    if !s.contact.seeded {
        s.sweep_ms = 0.0;
        s.coarse_ms = 0.0;
    }
    s.contact_on = SurfaceContact::active(cfg, set);
    if s.contact_on {
        let mut contact = std::mem::take(&mut s.contact);
        contact.begin_frame(cfg, set, bodies, att, iterate, s);
        s.contact = contact;
        // The barrier's first iterate must be free of intersections too.
        certify_iterate(cfg, set, bodies, iterate, s);
    }
    if cfg.coarse_nodes > 0 {
        for r in &mut s.contact.rows {
            r.in_coarse = true;
        }
        let t0 = std::time::Instant::now();
        let contact = s.contact_on.then_some((&s.contact, &s.poses[..]));
        // A run again (`seeded`) starts from the first run's x: its elements' terms stand.
        s.coarse
            .prepare(cfg, set, att, contact, &s.x, s.contact.seeded);
        s.coarse_ms += t0.elapsed().as_secs_f64() * 1e3;
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
    let t0 = std::time::Instant::now();
    let force = |ai: usize, x: Vec3| {
        let rec = &attachments.records[ai];
        let b = rec.body as usize;
        let pose = iterate[b].pose(&bodies.poses[b]);
        -rec.force(rec.error(x, &pose), cfg.alpha)
    };
    if s.contact_on {
        s.contact.iterate_poses(bodies, iterate, &mut s.poses);
    }
    let VertexState {
        coarse,
        contact,
        contact_on,
        poses,
        yd,
        d,
        x,
        ..
    } = s;
    let on = *contact_on;
    let barrier = cfg.contact_model == ContactModel::Barrier;
    let contact_force = |v: usize, xs: &[Vec3A]| {
        if !on {
            Vec3::ZERO
        } else if barrier {
            contact.barrier_vertex_terms(cfg, v, xs, poses).f
        } else {
            contact.vertex_terms(cfg, v, xs, poses).f
        }
    };
    // The rows made since the operators' assembly: their stiffness along each step.
    let fresh = |b: usize, step: &(dyn Fn(usize) -> glam::DVec3 + Sync)| match on && !barrier {
        true => contact.fresh_stiffness(set.vertex_range(b), step),
        false => 0.0,
    };
    // The barrier's stiffness is never in the operator: its steps are always checked.
    let line_search = on && (barrier || !contact.rows.is_empty());
    coarse.correct(
        cfg,
        set,
        attachments,
        force,
        contact_force,
        fresh,
        line_search,
        yd,
        d,
        x,
    );
    s.coarse_ms += t0.elapsed().as_secs_f64() * 1e3;
}

/// After the dual updates of an iteration: the contact rows' dual update, then the advance
/// of the certified configuration and the growth of the active set (`surface_contact`).
pub fn contact_iteration(
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    iterate: &[IterateRecord],
    s: &mut VertexState,
) {
    if !s.contact_on {
        return;
    }
    if cfg.contact_model == ContactModel::Barrier {
        certify_iterate(cfg, set, bodies, iterate, s);
        return;
    }
    let mut contact = std::mem::take(&mut s.contact);
    let mut poses = std::mem::take(&mut s.poses);
    contact.iterate_poses(bodies, iterate, &mut poses);
    let t0 = std::time::Instant::now();
    contact.dual_update(cfg, set, bodies.len(), &s.x, &poses);
    contact.stats.dual_ms += t0.elapsed().as_secs_f64() * 1e3;
    contact.advance(cfg, set, bodies, iterate, s, &mut poses);
    s.contact = contact;
    s.poses = poses;
    // Rows made this iteration join the coarse level through its corrections' step
    // length (`CoarseLevel::correct`), not a new assembly.
}

/// The log-barrier baseline's guard (`ContactModel::Barrier`; after the initial guess, the
/// coarse step and every sweep): X advances towards the iterate as far as CCD certifies,
/// and the iterate of every solved vertex is put back on X, so the barrier always sees an
/// intersection-free configuration.
pub fn certify_iterate(
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    iterate: &[IterateRecord],
    s: &mut VertexState,
) {
    if !(s.contact_on && cfg.contact_model == ContactModel::Barrier) {
        return;
    }
    let mut contact = std::mem::take(&mut s.contact);
    let mut poses = std::mem::take(&mut s.poses);
    contact.iterate_poses(bodies, iterate, &mut poses);
    contact.advance(cfg, set, bodies, iterate, s, &mut poses);
    for v in 0..set.vertex_count() {
        if set.is_solved(v) {
            s.x[v] = contact.certified[v];
            s.d[v] = contact.certified[v] - set.positions[v];
        }
    }
    s.contact = contact;
    s.poses = poses;
}

/// Before the integration stages: the certified configuration becomes the step's result.
pub fn end_contact(
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    iterate: &mut [IterateRecord],
    s: &mut VertexState,
) {
    if !s.contact_on {
        return;
    }
    let mut contact = std::mem::take(&mut s.contact);
    contact.end_frame(cfg, set, bodies, iterate, s);
    s.contact = contact;
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
    let t0 = std::time::Instant::now();
    let colors = &set.colors;
    if s.contact_on {
        s.contact.iterate_poses(bodies, iterate, &mut s.poses);
    }
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
                d: &s.d,
                yd: &s.yd,
                contact: s.contact_on.then_some(&s.contact),
                poses: &s.poses,
            };
            group
                .par_iter()
                .with_min_len(CHUNK)
                .map(|&v| ctx.solve_vertex(v as usize))
                .collect_into_vec(&mut scratch);
        }
        for (k, &v) in group.iter().enumerate() {
            let v = v as usize;
            s.d[v] = scratch[k];
            s.x[v] = set.positions[v] + scratch[k];
        }
        s.scratch = scratch;
    }
    s.sweep_ms += t0.elapsed().as_secs_f64() * 1e3;
}

/// Velocities `v = (x − xᵗ)/h` and the new positions; a body with a non-finite vertex keeps
/// its start state, loses its velocity and is frozen (reported). Then the momentum of every
/// free group of bodies is restored (`project_momentum`).
pub fn end_step(
    cfg: &SolverConfig,
    set: &mut DeformableSet,
    att: &AttachmentSet,
    s: &VertexState,
    report: &mut StepReport,
) {
    let inv_h = 1.0 / cfg.dt;
    let mut refreeze = false;
    // Free groups: bodies that only touch each other (contact islands with no rigid body,
    // half-space, pin or attachment), or a lone body when contact is off.
    let groups: Vec<Vec<u32>> = if !cfg.conserve_momentum {
        Vec::new()
    } else if s.contact_on {
        s.contact.free_groups(set)
    } else {
        (0..set.len() as u32).map(|b| vec![b]).collect()
    };
    let free = |b: usize| {
        set.vertex_range(b)
            .all(|v| set.flags[v] & PINNED == 0 && att.of_vertex(v).is_empty())
    };
    let groups: Vec<Vec<u32>> = groups
        .into_iter()
        .filter(|g| {
            g.iter()
                .all(|&b| !set.bodies[b as usize].frozen && free(b as usize))
        })
        .collect();
    let targets: Vec<[DVec3; 2]> = groups
        .iter()
        .map(|g| momentum_target(cfg, set, s, g))
        .collect();
    for b in 0..set.bodies.len() {
        if set.bodies[b].frozen {
            continue;
        }
        let r = set.vertex_range(b);
        if !s.d[r.clone()].iter().all(|d| d.is_finite()) {
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
            set.prev_velocities[v] = set.velocities[v];
            set.velocities[v] = s.d[v] * inv_h;
            set.positions[v] += s.d[v];
        }
    }
    for (g, target) in groups.iter().zip(targets) {
        if g.iter().all(|&b| !set.bodies[b as usize].frozen) {
            project_momentum(set, g, target);
        }
    }
    if refreeze {
        // Frozen vertices leave the colouring.
        set.rebuild();
    }
}

/// The momentum a free group of bodies must end the step with, `[P*, L*]`: a converged
/// implicit-Euler step changes it only by gravity, `m v = m(vᵗ + h g) + h f(x)`, and its
/// internal and contact forces sum to zero in force and in torque about the origin at the
/// new positions x. Computed before the velocities are overwritten.
fn momentum_target(
    cfg: &SolverConfig,
    set: &DeformableSet,
    s: &VertexState,
    group: &[u32],
) -> [DVec3; 2] {
    let hg = (cfg.gravity * cfg.dt).as_dvec3();
    let mut p = DVec3::ZERO;
    let mut l = DVec3::ZERO;
    for v in group.iter().flat_map(|&b| set.vertex_range(b as usize)) {
        let m = set.masses[v] as f64;
        let mv = (Vec3::from(set.velocities[v]).as_dvec3() + hg) * m;
        p += mv;
        l += Vec3::from(s.x[v]).as_dvec3().cross(mv);
    }
    [p, l]
}

/// Momentum projection of a free group of deformable bodies, as for isolated rigid islands
/// (`integration::IslandMomentum`): a fixed Gauss–Seidel budget stops before the internal
/// and contact forces are equal and opposite, and the certified configuration stops short
/// of the iterate by the lost motion, so the group's momentum drifts a little every step;
/// the smallest rigid velocity correction `Δv = a + b × (x − c)` (kinetic-energy norm)
/// restores `[P*, L*]`. Positions are not touched.
fn project_momentum(set: &mut DeformableSet, group: &[u32], [p_target, l_target]: [DVec3; 2]) {
    let vertices = || group.iter().flat_map(|&b| set.vertex_range(b as usize));
    let (mut mass, mut com) = (0.0f64, DVec3::ZERO);
    let (mut p, mut l) = (DVec3::ZERO, DVec3::ZERO);
    for v in vertices() {
        let m = set.masses[v] as f64;
        let x = Vec3::from(set.positions[v]).as_dvec3();
        let mv = Vec3::from(set.velocities[v]).as_dvec3() * m;
        mass += m;
        com += x * m;
        p += mv;
        l += x.cross(mv);
    }
    com /= mass;
    let mut inertia = DMat3::ZERO;
    for v in vertices() {
        let m = set.masses[v] as f64;
        let q = Vec3::from(set.positions[v]).as_dvec3() - com;
        inertia += (DMat3::from_diagonal(DVec3::splat(q.length_squared()))
            - DMat3::from_cols(q * q.x, q * q.y, q * q.z))
            * m;
    }
    let a = (p_target - p) / mass;
    let det = inertia.determinant();
    let b = if det.is_finite() && det > 0.0 {
        inertia.inverse() * (l_target - l - com.cross(a) * mass)
    } else {
        DVec3::ZERO
    };
    let dvs: Vec<(usize, Vec3A)> = vertices()
        .map(|v| {
            let q = Vec3::from(set.positions[v]).as_dvec3() - com;
            (v, Vec3A::from((a + b.cross(q)).as_vec3()))
        })
        .collect();
    for (v, dv) in dvs {
        set.velocities[v] += dv;
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
    d: &'a [Vec3A],
    yd: &'a [Vec3A],
    contact: Option<&'a SurfaceContact>,
    poses: &'a [Pose],
}

impl Ctx<'_> {
    /// Assembles vertex `v`'s force and 3×3 block and returns its new displacement.
    fn solve_vertex(&self, v: usize) -> Vec3A {
        let set = self.set;
        let h = self.cfg.dt;
        let inv_h = 1.0 / h;
        let m_h2 = set.masses[v] * inv_h * inv_h;
        let x = self.x[v];
        let d = self.d[v];
        let mut acc = Block {
            f: Vec3::from(self.yd[v] - d) * m_h2,
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
        let barrier = self.cfg.contact_model == ContactModel::Barrier;
        if let Some(contact) = self.contact {
            acc.add(match barrier {
                false => contact.vertex_terms(self.cfg, v, self.x, self.poses),
                true => contact.barrier_vertex_terms(self.cfg, v, self.x, self.poses),
            });
        }
        let det = acc.h.determinant();
        if !(det.is_finite() && det > 0.0) {
            return d; // not SPD or not finite: keep the iterate; the end-of-step guard reports it
        }
        let step = Vec3A::from(acc.h.inverse() * acc.f);
        match self.contact {
            // The barrier baseline keeps the iterate free of intersections: the step is cut
            // where CCD meets a candidate pair.
            Some(contact) if barrier => {
                let t = contact.barrier_step(self.cfg, v, x + step, self.x, self.poses);
                d + step * t
            }
            _ => d + step,
        }
    }
}
