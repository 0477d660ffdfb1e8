//! Integration: inertial targets and initial guess before the iterations, velocities and
//! poses after them (AVBD Alg. 1 lines 3–4 and 37).

use glam::Vec3;

use super::{InertialRecord, IterateRecord, SolverData};
use crate::body::{BodyKind, PoseRecord, VelocityRecord};
use crate::config::SolverConfig;
use crate::math::quat_add;
use crate::world::{BodySet, StepReport};

/// Computes the inertial targets and the adaptive initial guess of every body.
///
/// Linear: `y = xᵗ + h v + h² (g + F/m)`; the guess follows VBD's adaptive
/// initialisation, `xᵗ + h v + h² g·ã` with `ã = clamp(a·ĝ/|g|, 0, 1)` from the last
/// step's acceleration, so a resting body does not start inside its support.
///
/// Rotational: the target is the angular momentum `h Lᵗ + h² τ` with `Lᵗ = R I Rᵀ ω`,
/// so that the primal step enforces `I_world(q) Δθ/h = Lᵗ + h τ` (implicit Euler on
/// angular momentum, world-space inertia at the current iterate): free anisotropic
/// bodies conserve L instead of ω.
pub fn begin_step(cfg: &SolverConfig, bodies: &BodySet, s: &mut SolverData) {
    let n = bodies.len();
    let h = cfg.dt;
    let g = cfg.gravity;
    let g2 = g.length_squared();
    s.iterate.resize(n, IterateRecord::default());
    s.inertial.resize(n, InertialRecord::default());
    for i in 0..n {
        let pose = &bodies.poses[i];
        let q0 = pose.q();
        let vel = &bodies.velocities[i];
        let (v, w) = (vel.v(), vel.w());
        if !bodies.is_solved(i) {
            // Kinematic bodies follow their velocity; static and frozen ones stay.
            let moving = bodies.kinds[i] == BodyKind::Kinematic && !bodies.frozen[i];
            s.iterate[i] = if moving {
                IterateRecord::new(v * h, quat_add(q0, w * h), q0)
            } else {
                IterateRecord::new(Vec3::ZERO, q0, q0)
            };
            s.inertial[i] = InertialRecord::default();
            continue;
        }
        let m = &bodies.masses[i];
        let f = &bodies.forces[i];
        let force = Vec3::new(f[0], f[1], f[2]);
        let torque = Vec3::new(f[4], f[5], f[6]);
        let y = v * h + (g + force * m.inv_mass) * (h * h);
        let l = m.world_inertia(q0) * w;
        let hl = l * h + torque * (h * h);
        let accel = (v - bodies.prev_velocities[i].v()) / h;
        let weight = if g2 > 0.0 {
            (accel.dot(g) / g2).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let guess = v * h + (g * weight + force * m.inv_mass) * (h * h);
        s.inertial[i] = InertialRecord {
            y: y.extend(0.0).to_array(),
            hl: hl.extend(0.0).to_array(),
        };
        s.iterate[i] = IterateRecord::new(guess, quat_add(q0, w * h), q0);
    }
}

/// Velocities `v = (x − xᵗ)/h` (Eq. 20 for rotation), new poses, and the non-finite guard:
/// a body whose result is not finite keeps its start pose, loses its velocity and is frozen.
pub fn end_step(cfg: &SolverConfig, bodies: &mut BodySet, s: &SolverData, report: &mut StepReport) {
    let h = cfg.dt;
    for i in 0..bodies.len() {
        let it = &s.iterate[i];
        let moving =
            bodies.is_solved(i) || (bodies.kinds[i] == BodyKind::Kinematic && !bodies.frozen[i]);
        if !moving {
            continue;
        }
        let v = it.dp() / h;
        let mut w = it.dtheta() / h;
        let pose = it.pose(&bodies.poses[i]);
        let finite = v.is_finite() && w.is_finite() && pose.p().is_finite() && pose.q().is_finite();
        if !finite {
            // Dynamic and kinematic alike: keep the start pose, drop the velocity, report.
            bodies.frozen[i] = true;
            bodies.velocities[i] = VelocityRecord::default();
            bodies.prev_velocities[i] = VelocityRecord::default();
            report.frozen.push(bodies.handles[i]);
            continue;
        }
        if bodies.kinds[i] == BodyKind::Kinematic {
            // Kinematic velocity is prescribed; only the pose advances.
            bodies.poses[i] = pose;
            continue;
        }
        let ws = w.length();
        if ws > cfg.max_angular_speed {
            w *= cfg.max_angular_speed / ws;
        }
        bodies.prev_velocities[i] = bodies.velocities[i];
        bodies.velocities[i] = VelocityRecord::new(v, w);
        bodies.poses[i] = PoseRecord::new(pose.p(), pose.q().normalize());
    }
}
