//! The attachments' share of each stage: warm start before the iterations, the rows a
//! rigid body's 6×6 block takes from them (the vertex side is in `vbd`), the dual update
//! after each sweep, and fracture after the step. They are hard AVBD rows like the
//! joints', with the same warm start (Eq. 19), regularisation (Eq. 18), penalty ramp
//! (Eq. 12) and load-aware penalty floor.

use glam::Vec3;
use rayon::prelude::*;

use super::IterateRecord;
use crate::config::SolverConfig;
use crate::deformable::attachment::flags;
use crate::deformable::{AttachmentSet, DeformableSet};
use crate::math::{Mat6, Vec6, lever_geometric_stiffness};
use crate::report::StepReport;
use crate::rigid::BodySet;
use crate::rigid::body::PoseRecord;

/// Start-of-step state of every attachment: its error at xᵗ, and the warm start
/// `k = max(γ k, k_start, floor)`, `λ = α γ λ`, where the floor is the joints' load-aware
/// floor capped by the lighter of the vertex and the body. Also rebuilds the per-vertex and
/// per-body lists the sweeps read.
pub fn warm_start(
    cfg: &SolverConfig,
    bodies: &BodySet,
    set: &DeformableSet,
    att: &mut AttachmentSet,
) {
    att.build_lists(set.vertex_count(), bodies.len());
    for rec in att.records.iter_mut().filter(|r| !r.broken()) {
        let b = rec.body as usize;
        let c = rec.error(
            Vec3::from(set.positions[rec.vertex as usize]),
            &bodies.poses[b],
        );
        rec.c0 = c.extend(0.0).to_array();
        // The lighter side's inertia sets the penalty: a vertex weighs grams, and a
        // penalty far above what it brings turns the multiplier update into an amplifier
        // of what one sweep leaves unresolved (a 100 kg box on a 1 kg soft rod, capped by
        // the box's mass as joints are by their heaviest body, swung with a growing
        // amplitude at 2 iterations; capped by the vertex's, it settles within a second).
        // λ carries the load either way.
        let mass = set.masses[rec.vertex as usize].min(bodies.masses[b].mass);
        for r in 0..3 {
            if rec.k[r] == 0.0 {
                rec.k[r] = cfg.initial_penalty(mass);
            }
            rec.lambda[r] *= cfg.alpha * cfg.gamma;
            let floor = cfg.load_floor(rec.lambda[r], cfg.joint_error_scale, mass);
            rec.k[r] = cfg.warm_penalty(rec.k[r], floor);
        }
    }
}

/// Adds the rows of attachment `ai` to the 6×6 system of its body at pose `pose`, with the
/// vertex at `x`: force `f += [F; a × F]` with `F = k C̃ + λ`, Hessian `Σ k JᵀJ` plus the
/// lever's geometric stiffness (diagonal column-norm approximation, as for joints).
#[inline]
pub(crate) fn add_body_rows(
    cfg: &SolverConfig,
    att: &AttachmentSet,
    ai: u32,
    pose: &PoseRecord,
    x: Vec3,
    f: &mut Vec6,
    hm: &mut Mat6,
) {
    let rec = &att.records[ai as usize];
    let (arm, at) = rec.arm(pose);
    let force = rec.force(x - at, cfg.alpha);
    let torque = arm.cross(force);
    for d in 0..3 {
        f[d] += force[d];
        f[3 + d] += torque[d];
    }
    for r in 0..3 {
        let mut e = Vec3::ZERO;
        e[r] = 1.0;
        let ang = e.cross(arm);
        let j: Vec6 = [-e.x, -e.y, -e.z, ang.x, ang.y, ang.z];
        hm.add_outer(&j, rec.k[r]);
    }
    hm.add_diag3(lever_geometric_stiffness(force, arm), true);
}

/// Dual update of every attachment at the current iterate: `λ ← k C̃ + λ` (equality rows:
/// never clamped, so the penalty always ramps, Eq. 12).
pub fn update(
    cfg: &SolverConfig,
    bodies: &BodySet,
    x: &[glam::Vec3A],
    iterate: &[IterateRecord],
    att: &mut AttachmentSet,
) {
    att.records
        .par_iter_mut()
        .with_min_len(256)
        .filter(|r| !r.broken())
        .for_each(|rec| {
            let b = rec.body as usize;
            let pose = iterate[b].pose(&bodies.poses[b]);
            let c = rec.error(Vec3::from(x[rec.vertex as usize]), &pose);
            let force = rec.force(c, cfg.alpha);
            for r in 0..3 {
                rec.lambda[r] = force[r].clamp(-cfg.lambda_max, cfg.lambda_max);
                rec.k[r] = cfg.ramp_penalty(rec.k[r], cfg.beta_linear, c[r]);
            }
        });
}

/// Fracture after the step: a breakable attachment whose force exceeds its threshold
/// breaks (tested on the step's final multipliers, as for joints).
pub fn fracture(att: &mut AttachmentSet, report: &mut StepReport) {
    for i in 0..att.records.len() {
        let rec = &mut att.records[i];
        if rec.broken() || rec.flags & flags::BREAKABLE == 0 {
            continue;
        }
        if rec.lambda().length() > rec.breaking_force {
            rec.flags |= flags::BROKEN;
            report.broken_attachments.push(att.handles[i]);
        }
    }
}
