//! Dual stage: multiplier and penalty updates after each primal sweep (AVBD Alg. 1
//! lines 26–35), in parallel over constraints, plus the per-step warm start (Eq. 19).

use rayon::prelude::*;

use super::manifold;
use super::primal::{row_error, row_force};
use super::{SolverData, warm_start};
use crate::config::SolverConfig;
use crate::graph::Forest;
use crate::math::Vec6;
use crate::report::StepReport;
use crate::rigid::body::PoseRecord;
use crate::rigid::contact::{ContactRecord, flags as cflags};
use crate::rigid::joint::{JointRecord, JointRowState, WORLD, flags};
use crate::rigid::{BodySet, JointSet};

const CHUNK: usize = 64;

/// Load-aware penalty floor scale of a joint row. Springs take none (a large penalty would
/// bring back the stiffness-ratio problem), nor do rows bounded on both sides (motors): a
/// penalty far above the body's inertia makes their clamped force flip between its bounds.
fn scale(cfg: &SolverConfig, row: &crate::rigid::joint::Row) -> f32 {
    if row.stiffness > 0.0 || (row.fmin.is_finite() && row.fmax.is_finite()) {
        f32::INFINITY
    } else {
        cfg.joint_error_scale
    }
}

/// The inertia that caps a joint row's load-aware floor: per joint, the mass and the largest
/// principal moment of the heaviest body of its joint island (dynamic bodies linked by
/// unbroken joints). Built again only when the joints or the bodies' layout change (the
/// GPU backend uploads `per_joint` for its warm start); the allocations are kept.
#[derive(Default)]
pub struct JointIslands {
    forest: Forest,
    /// Per island root: `[mass, largest principal moment]` of its heaviest body.
    heaviest: Vec<[f32; 2]>,
    /// Per joint: `[mass, moment]` of the heavier of its two bodies' islands.
    pub(crate) per_joint: Vec<[f32; 2]>,
    /// `(joints added or removed, fractures, bodies' layout)` of `per_joint`.
    key: Option<(u64, u64, u64)>,
}

impl JointIslands {
    /// Builds `per_joint` again if the joints or the bodies' layout (kinds, masses, frozen
    /// flags) changed since it was built.
    pub(crate) fn update(&mut self, bodies: &BodySet, joints: &JointSet) {
        let key = (joints.edits, joints.breaks, bodies.edits.layout);
        if self.key == Some(key) {
            return;
        }
        self.build(bodies, joints);
        let mut per_joint = std::mem::take(&mut self.per_joint);
        per_joint.clear();
        per_joint.extend(joints.records.iter().map(|rec| {
            let (ha, hb) = (self.of(rec.body_a), self.of(rec.body_b));
            [ha[0].max(hb[0]), ha[1].max(hb[1])]
        }));
        self.per_joint = per_joint;
        self.key = Some(key);
    }

    fn build(&mut self, bodies: &BodySet, joints: &JointSet) {
        let n = bodies.len();
        self.forest.reset(n);
        for rec in joints
            .records
            .iter()
            .filter(|r| !r.broken() && r.body_b != WORLD)
        {
            let (a, b) = (rec.body_a, rec.body_b);
            if bodies.is_solved(a as usize) && bodies.is_solved(b as usize) {
                self.forest.union(a, b);
            }
        }
        self.heaviest.clear();
        self.heaviest.resize(n, [0.0; 2]);
        for i in (0..n).filter(|&i| bodies.is_solved(i)) {
            let m = &bodies.masses[i];
            let moment = m.inertia.iter().fold(0.0f32, |a, &b| a.max(b));
            let root = self.forest.find(i as u32) as usize;
            let h = &mut self.heaviest[root];
            *h = [h[0].max(m.mass), h[1].max(moment)];
        }
    }

    /// `[mass, moment]` of the heaviest body in the island of `b` (zero for the world and
    /// for bodies that are not solved).
    fn of(&mut self, b: u32) -> [f32; 2] {
        if b == WORLD {
            return [0.0; 2];
        }
        self.heaviest[self.forest.find(b) as usize]
    }
}

/// Start-of-step joint state: error C*(xᵗ) of every row, hinge angle, and the warm
/// start of Eq. 19: `k = max(γ k, k_start)` (plus the load-aware floor, capped by the
/// heaviest body of the joint's island) and `λ = α γ λ`.
/// Finite-stiffness rows are compliant augmented-Lagrangian rows (see `row_force`): their λ
/// is the spring force and decays by γ only.
pub fn warm_start_joints(
    cfg: &SolverConfig,
    bodies: &BodySet,
    joints: &mut JointSet,
    islands: &mut JointIslands,
) {
    let ident = PoseRecord::new(glam::Vec3::ZERO, glam::Quat::IDENTITY);
    islands.update(bodies, joints);
    for ((rec, st), heaviest) in joints
        .records
        .iter()
        .zip(joints.states.iter_mut())
        .zip(&islands.per_joint)
    {
        if rec.broken() {
            continue;
        }
        let pa = bodies.poses[rec.body_a as usize];
        let pb = if rec.body_b == WORLD {
            ident
        } else {
            bodies.poses[rec.body_b as usize]
        };
        let e = rec.evaluate(&pa, &pb);
        st.angle0[0] = e.angle;
        // Mass scale of a fresh hard row: the larger mass (linear rows) or principal
        // moment (angular rows) of the two bodies.
        let mass_of = |b: u32| {
            if b == WORLD {
                Default::default()
            } else {
                bodies.masses[b as usize]
            }
        };
        let (ma, mb) = (mass_of(rec.body_a), mass_of(rec.body_b));
        let lin_mass = ma.mass.max(mb.mass);
        let ang_mass = ma
            .inertia
            .iter()
            .chain(&mb.inertia)
            .fold(0.0f32, |m, &i| m.max(i));
        for r in 0..e.n {
            let row = &e.rows[r];
            st.c0[r] = row.c;
            if st.k[r] == 0.0 && row.stiffness == 0.0 {
                st.k[r] = cfg.initial_penalty(if row.angular { ang_mass } else { lin_mass });
            }
            // A spring's λ is its physical force, not error correction: no α scaling.
            let decay = if row.stiffness > 0.0 {
                cfg.gamma
            } else {
                cfg.alpha * cfg.gamma
            };
            st.lambda[r] *= decay;
            let floor = cfg.load_floor(
                st.lambda[r],
                scale(cfg, row),
                heaviest[row.angular as usize],
            );
            st.k[r] = cfg.warm_penalty(st.k[r], floor);
        }
    }
}

/// Which dual update of the step this is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pass {
    /// Another primal sweep follows.
    Inner,
    /// The step's last: each contact's penalties, multipliers and flags also go straight
    /// to what it carries to the next step (`s.warm_next`, whose anchors the warm start
    /// wrote), so the records are not read again after the iterations.
    Last,
}

/// Dual update of every contact and joint at the current iterate.
pub fn update(
    cfg: &SolverConfig,
    bodies: &BodySet,
    joints: &mut JointSet,
    s: &mut SolverData,
    pass: Pass,
) {
    let iterate = &s.iterate;
    let delta = |b: u32| {
        if b == WORLD {
            [0.0; 6]
        } else {
            iterate[b as usize].delta6()
        }
    };
    // Chunks of records, each cut into manifolds (a manifold split by a chunk boundary is
    // two runs: the same numbers).
    let update_chunk = |chunk: &mut [ContactRecord]| {
        let mut at = 0;
        while at < chunk.len() {
            let first = &chunk[at];
            let len = 1 + chunk[at + 1..]
                .iter()
                .take_while(|c| manifold::same(first, c))
                .count();
            let (dxa, dxb) = (delta(first.body_a), delta(first.body_b));
            update_manifold(cfg, &mut chunk[at..at + len], &dxa, &dxb);
            at += len;
        }
    };
    match pass {
        Pass::Inner => s
            .contacts
            .par_chunks_mut(CONTACT_CHUNK)
            .for_each(update_chunk),
        Pass::Last => s
            .contacts
            .par_chunks_mut(CONTACT_CHUNK)
            .zip(s.warm_next.par_chunks_mut(CONTACT_CHUNK))
            .for_each(|(chunk, warm)| {
                update_chunk(chunk);
                for (c, w) in chunk.iter().zip(warm) {
                    warm_start::carry(c, w);
                }
            }),
    }

    let pose = |b: u32| {
        if b == WORLD {
            PoseRecord::new(glam::Vec3::ZERO, glam::Quat::IDENTITY)
        } else {
            iterate[b as usize].pose(&bodies.poses[b as usize])
        }
    };
    joints
        .records
        .par_iter_mut()
        .zip(joints.states.par_iter_mut())
        .with_min_len(CHUNK)
        .for_each(|(rec, st)| {
            if !rec.broken() {
                update_joint(cfg, rec, st, &pose(rec.body_a), &pose(rec.body_b));
            }
        });
}

/// Fracture (Fig. 13), once per step after the velocity and pose update (rows evaluated at
/// the step's final poses, which the GPU backend reads back): a breakable joint whose
/// positional force (or torque) exceeds its threshold breaks. Testing the final multipliers
/// rather than every iterate keeps transient overshoot inside a step from breaking a joint
/// whose sustained load is below its threshold.
pub fn fracture(bodies: &BodySet, joints: &mut JointSet, report: &mut StepReport) {
    let (records, states, handles) = (&mut joints.records, &joints.states, &joints.handles);
    for (i, (rec, st)) in records.iter_mut().zip(states).enumerate() {
        if rec.broken() || rec.flags & (flags::BREAKABLE_FORCE | flags::BREAKABLE_TORQUE) == 0 {
            continue;
        }
        let pose = |b: u32| {
            if b == WORLD {
                PoseRecord::new(glam::Vec3::ZERO, glam::Quat::IDENTITY)
            } else {
                bodies.poses[b as usize]
            }
        };
        let e = rec.evaluate(&pose(rec.body_a), &pose(rec.body_b));
        let (mut force2, mut torque2) = (0.0f32, 0.0f32);
        for r in 0..e.n {
            let l2 = st.lambda[r] * st.lambda[r];
            if e.rows[r].angular {
                torque2 += l2
            } else {
                force2 += l2
            }
        }
        let broken = (rec.flags & flags::BREAKABLE_FORCE != 0 && force2.sqrt() > rec.params[2])
            || (rec.flags & flags::BREAKABLE_TORQUE != 0 && torque2.sqrt() > rec.params[3]);
        if broken {
            rec.flags |= flags::BROKEN;
            report.broken.push(handles[i]);
            joints.breaks += 1;
        }
    }
}

/// Contact records per parallel job of the dual update.
const CONTACT_CHUNK: usize = 256;

/// Dual update of one manifold's records (a run for which [`manifold::same`] holds), four
/// points at a time in SIMD lanes: the same bits as [`update_contact`] per point.
fn update_manifold(cfg: &SolverConfig, run: &mut [ContactRecord], dxa: &Vec6, dxb: &Vec6) {
    let frame = manifold::Frame::new(&run[0], dxa, dxb);
    for group in run.chunks_mut(4) {
        let lanes = manifold::PointLanes::new(&frame, group);
        let [c, f] = [lanes.err, lanes.f].map(|v| v.map(|x| x.to_array()));
        let (pressing, inside) = (lanes.pressing.to_bitmask(), lanes.inside.to_bitmask());
        for (l, rec) in group.iter_mut().enumerate() {
            apply(
                cfg,
                rec,
                [c[0][l], c[1][l], c[2][l]],
                [f[0][l], f[1][l], f[2][l]],
                pressing & (1 << l) != 0,
                inside & (1 << l) != 0,
            );
        }
    }
}

/// Dual update of one contact (the per-point reference of [`update_manifold`]).
#[cfg(test)]
fn update_contact(cfg: &SolverConfig, c: &mut ContactRecord, dxa: &Vec6, dxb: &Vec6) {
    let cf = c.forces(dxa, dxb);
    apply(cfg, c, cf.c, cf.f, cf.normal_active, cf.inside_cone);
}

/// A contact's new multipliers (its forces `f` at errors `c`), penalties and flags.
#[inline(always)]
fn apply(
    cfg: &SolverConfig,
    rec: &mut ContactRecord,
    c: [f32; 3],
    f: [f32; 3],
    normal_active: bool,
    inside_cone: bool,
) {
    for r in 0..3 {
        rec.lambda[r] = f[r].clamp(-cfg.lambda_max, cfg.lambda_max);
    }
    // Stiffness grows only while the force is inside its bounds (Sec. 3.2).
    let beta = cfg.beta_linear;
    if normal_active {
        rec.k[2] = cfg.ramp_penalty(rec.k[2], beta, c[2]);
    }
    if inside_cone {
        rec.flags |= cflags::INSIDE_CONE;
        for r in 0..2 {
            rec.k[r] = cfg.ramp_penalty(rec.k[r], beta, c[r]);
        }
    } else {
        // Clamped by the cone: static friction is lost, slide with μ_d (Sec. 3.3).
        rec.flags &= !(cflags::STICK | cflags::INSIDE_CONE);
    }
}

fn update_joint(
    cfg: &SolverConfig,
    rec: &JointRecord,
    st: &mut JointRowState,
    pa: &PoseRecord,
    pb: &PoseRecord,
) {
    let e = rec.evaluate(pa, pb);
    for r in 0..e.n {
        let row = &e.rows[r];
        let c = row_error(row, r, &e, st, cfg.alpha, cfg.dt, rec);
        let beta = if row.angular {
            cfg.beta_angular
        } else {
            cfg.beta_linear
        };
        let (force, _) = row_force(row, c, st.k[r], st.lambda[r]);
        let inside = force > row.fmin && force < row.fmax;
        st.lambda[r] = force.clamp(-cfg.lambda_max, cfg.lambda_max);
        if inside {
            st.k[r] = cfg.ramp_penalty(st.k[r], beta, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::Lcg;
    use crate::pipeline::manifold::tests::random_manifold;

    /// The per-manifold dual update stores exactly the bits of the per-point one (λ, k and
    /// flags of every record), for manifolds of 1 to 9 points in every state.
    #[test]
    fn manifold_update_matches_the_per_point_update_bit_for_bit() {
        let cfg = SolverConfig::default();
        let mut rng = Lcg(11);
        // Points seen pressing and sticking, pressing and sliding, and separated.
        let mut states = [0usize; 3];
        // Records the update changed (a test of a no-op would pass too).
        let mut changed = 0;
        for case in 0..400 {
            let (run, dxa, dxb) = random_manifold(&mut rng, 1 + case % 9);
            let mut per_point = run.clone();
            for c in per_point.iter_mut() {
                let cf = c.forces(&dxa, &dxb);
                states[if !cf.normal_active {
                    2
                } else {
                    (!cf.inside_cone) as usize
                }] += 1;
                update_contact(&cfg, c, &dxa, &dxb);
            }
            let mut per_manifold = run.clone();
            update_manifold(&cfg, &mut per_manifold, &dxa, &dxb);
            let bits = |r: &[ContactRecord]| bytemuck::cast_slice::<_, u32>(r).to_vec();
            changed += per_point
                .iter()
                .zip(&run)
                .filter(|(a, b)| bits(&[**a]) != bits(&[**b]))
                .count();
            assert_eq!(
                bytemuck::cast_slice::<_, u32>(&per_manifold),
                bytemuck::cast_slice::<_, u32>(&per_point),
                "case {case}"
            );
        }
        assert!(states.iter().all(|&n| n >= 100), "{states:?}");
        assert!(changed > 1500, "{changed} of 2000 records changed");
    }
}
