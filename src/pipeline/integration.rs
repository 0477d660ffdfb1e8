//! Integration: inertial targets and initial guess before the iterations, velocities and
//! poses after them (AVBD Alg. 1 lines 3–4 and 37).

use glam::{DMat3, DVec3, Vec3};

use super::coloring::Adjacency;
use super::{InertialRecord, IterateRecord, SolverData};
use crate::config::SolverConfig;
use crate::deformable::AttachmentSet;
use crate::graph::Forest;
use crate::math::quat_add;
use crate::report::StepReport;
use crate::rigid::BodySet;
use crate::rigid::body::{BodyKind, PoseRecord, VelocityRecord};
use crate::rigid::joint::WORLD;

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
/// (The momentum of isolated islands is restored after this, on either backend, by
/// [`IslandMomentum`], called from [`crate::PhysicsWorld::step`].)
pub fn end_step(
    cfg: &SolverConfig,
    bodies: &mut BodySet,
    s: &mut SolverData,
    report: &mut StepReport,
) {
    let h = cfg.dt;
    // The CPU writes every body's state (the GPU backend's device keeps its own).
    bodies.touch_all();
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
            bodies.relayout();
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

/// Momentum projection of isolated islands.
///
/// A converged implicit-Euler step conserves momentum: every contact and joint force acts
/// equally and oppositely on its two bodies. A fixed Gauss–Seidel budget stops before
/// that: each body is balanced against the force its constraints had when *it* was solved,
/// so two colliding bodies leave the step with a relative momentum error of about 1e-3 at
/// 10 iterations. For an island (bodies connected by contacts and joints) that touches no
/// static or kinematic body and no world joint, the momentum the step must end with is
/// known exactly: `P* = Σ m vᵗ + h (m g + F)` and `L* = Σ xᵗ × (m vᵗ + h(m g + F)) +
/// I(qᵗ) ωᵗ + h τ` about the origin (implicit Euler with `xᵗ⁺¹ = xᵗ + h vᵗ⁺¹`). The
/// island's velocities get the rigid correction `Δv = a + b × (x − c)`, `Δω = b` that
/// removes both errors and is the smallest in the kinetic-energy norm (`a = −ΔP/M`, `b = I_c⁻¹(−ΔL − M c × a)`
/// with `c` and `I_c` the island's centre of mass and inertia). Positions are not touched,
/// so the solver's constraint satisfaction is unchanged; islands resting on anything fixed
/// are left alone, since the fixed body legitimately takes momentum.
#[derive(Default)]
pub struct IslandMomentum {
    /// Per body: `[P*, L*]` (f64 so that island sums do not cancel).
    target: Vec<[DVec3; 2]>,
    forest: Forest,
    /// Per body: touches a static or kinematic body or the world through a constraint.
    anchored: Vec<bool>,
    /// Per body: island index into `sums` (`u32::MAX` for bodies that are not solved).
    island: Vec<u32>,
    sums: Vec<IslandSums>,
    /// Per body: its island's root, [`ANCHORED`] if anchored (`u32::MAX`: not solved).
    roots: Vec<u32>,
}

/// Bit of a body's island root that marks it anchored (as `shaders/islands.wgsl` marks it).
pub(crate) const ANCHORED: u32 = 1 << 31;

#[derive(Clone, Copy)]
struct IslandSums {
    mass: f64,
    /// Σ m x, then the centre of mass.
    com: DVec3,
    p_error: DVec3,
    l_error: DVec3,
    /// Inertia about the centre of mass.
    inertia: DMat3,
    anchored: bool,
    /// The correction: linear `a`, angular `b`.
    a: DVec3,
    b: DVec3,
}

impl Default for IslandSums {
    // By hand: glam's `DMat3::default()` is the identity, not zero.
    fn default() -> Self {
        Self {
            mass: 0.0,
            com: DVec3::ZERO,
            p_error: DVec3::ZERO,
            l_error: DVec3::ZERO,
            inertia: DMat3::ZERO,
            anchored: false,
            a: DVec3::ZERO,
            b: DVec3::ZERO,
        }
    }
}

impl IslandMomentum {
    /// Records `[P*, L*]` of every solved body from its start state (before `end_step`
    /// overwrites it).
    pub(crate) fn record_targets(&mut self, cfg: &SolverConfig, bodies: &BodySet) {
        use rayon::prelude::*;
        let h = cfg.dt as f64;
        // Body by body, in parallel: each target is its own body's.
        (0..bodies.len())
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                if !bodies.is_solved(i) {
                    return [DVec3::ZERO; 2];
                }
                let m = &bodies.masses[i];
                let pose = &bodies.poses[i];
                let vel = &bodies.velocities[i];
                let f = &bodies.forces[i];
                let force = Vec3::new(f[0], f[1], f[2]).as_dvec3();
                let torque = Vec3::new(f[4], f[5], f[6]).as_dvec3();
                let mass = m.mass as f64;
                let p = vel.v().as_dvec3() * mass + (cfg.gravity.as_dvec3() * mass + force) * h;
                let spin = (m.world_inertia(pose.q()) * vel.w()).as_dvec3();
                [p, pose.p().as_dvec3().cross(p) + spin + torque * h]
            })
            .collect_into_vec(&mut self.target);
    }

    /// Joins the islands of `a` and `b`, or anchors the solved one if the other is fixed.
    fn link(&mut self, bodies: &BodySet, a: u32, b: u32) {
        let solved = |x: u32| x != WORLD && bodies.is_solved(x as usize);
        match (solved(a), solved(b)) {
            (true, true) => self.forest.union(a, b),
            (true, false) => self.anchored[a as usize] = true,
            (false, true) => self.anchored[b as usize] = true,
            (false, false) => {}
        }
    }

    /// Applies the correction to every isolated island (after the velocities are written).
    ///
    /// The islands come from this step's constraint ends: every contact and every joint
    /// that was unbroken when the step began (a joint broken by this step's fracture still
    /// acted during it), read from a compact array rather than the constraint records.
    pub(crate) fn project(
        &mut self,
        bodies: &mut BodySet,
        adjacency: &Adjacency,
        attachments: &AttachmentSet,
        soft_contact: &[bool],
        max_angular_speed: f32,
    ) {
        let n = bodies.len();
        self.forest.reset(n);
        self.anchored.clear();
        self.anchored.resize(n, false);
        // A body held by deformable vertices or in contact with a deformable's surface
        // (`soft_contact`, by body) exchanges momentum with them: not isolated.
        for b in 0..n {
            if !attachments.of_body(b).is_empty() || soft_contact.get(b).copied().unwrap_or(false) {
                self.anchored[b] = true;
            }
        }
        let mut last = None;
        for &(a, b, _) in adjacency.ends() {
            // A pair's contact points are listed together (about four per manifold):
            // link it once.
            if last == Some((a, b)) {
                continue;
            }
            last = Some((a, b));
            self.link(bodies, a, b);
        }
        let mut roots = std::mem::take(&mut self.roots);
        roots.clear();
        for i in 0..n {
            roots.push(match bodies.is_solved(i) {
                true => self.forest.find(i as u32) | (self.anchored[i] as u32 * ANCHORED),
                false => u32::MAX,
            });
        }
        self.correct(bodies, &roots, max_angular_speed);
        self.roots = roots;
    }

    /// The correction of every isolated island, islands given by `roots`.
    fn correct(&mut self, bodies: &mut BodySet, roots: &[u32], max_angular_speed: f32) {
        let n = bodies.len();
        self.sums.clear();
        self.island.clear();
        self.island.resize(n, u32::MAX);
        // A body frozen by this step (non-finite) is no longer solved: it is left out and
        // holds its island like a fixed body would (the union–find linked it before it
        // froze; `momentum.wgsl`'s `momentum_clear` does the same on the device).
        self.anchored.clear();
        self.anchored.resize(n, false);
        for (i, &r) in roots.iter().enumerate().take(n) {
            if r != u32::MAX && !bodies.is_solved(i) {
                self.anchored[(r & !ANCHORED) as usize] = true;
            }
        }
        for (i, &r) in roots.iter().enumerate().take(n) {
            if r == u32::MAX || !bodies.is_solved(i) {
                continue;
            }
            let root = (r & !ANCHORED) as usize;
            if self.island[root] == u32::MAX {
                self.island[root] = self.sums.len() as u32;
                self.sums.push(IslandSums::default());
            }
            let k = self.island[root];
            self.island[i] = k;
            self.sums[k as usize].anchored |= r & ANCHORED != 0 || self.anchored[root];
        }
        if self.sums.iter().all(|s| s.anchored) {
            // Every island rests on something fixed (a settled pile on its ground): nothing
            // to correct, so no pass over the bodies' momenta.
            return;
        }
        // Only isolated islands are corrected: anchored ones (most bodies of a pile or a
        // stack) need no sums.
        for i in 0..n {
            let k = self.island[i];
            if k == u32::MAX || self.sums[k as usize].anchored {
                continue;
            }
            let (m, pose, vel) = (&bodies.masses[i], &bodies.poses[i], &bodies.velocities[i]);
            let mass = m.mass as f64;
            let x = pose.p().as_dvec3();
            let p = vel.v().as_dvec3() * mass;
            let l = x.cross(p) + (m.world_inertia(pose.q()) * vel.w()).as_dvec3();
            let [p_target, l_target] = self.target[i];
            let s = &mut self.sums[k as usize];
            s.mass += mass;
            s.com += x * mass;
            s.p_error += p - p_target;
            s.l_error += l - l_target;
        }
        for s in self.sums.iter_mut().filter(|s| !s.anchored) {
            s.com /= s.mass;
        }
        for i in 0..n {
            let k = self.island[i];
            if k == u32::MAX || self.sums[k as usize].anchored {
                continue;
            }
            let (m, pose) = (&bodies.masses[i], &bodies.poses[i]);
            let s = &mut self.sums[k as usize];
            let r = pose.p().as_dvec3() - s.com;
            let mass = m.mass as f64;
            s.inertia += m.world_inertia(pose.q()).as_dmat3()
                + (DMat3::from_diagonal(DVec3::splat(r.length_squared())) - outer(r, r)) * mass;
        }
        for s in &mut self.sums {
            if s.anchored {
                continue;
            }
            s.a = -s.p_error / s.mass;
            let det = s.inertia.determinant();
            if det.is_finite() && det > 0.0 {
                s.b = s.inertia.inverse() * (-s.l_error - s.com.cross(s.a) * s.mass);
            }
        }
        for i in 0..n {
            let k = self.island[i];
            if k == u32::MAX || self.sums[k as usize].anchored {
                continue;
            }
            let s = &self.sums[k as usize];
            let r = bodies.poses[i].p().as_dvec3() - s.com;
            let vel = &bodies.velocities[i];
            let v = vel.v().as_dvec3() + s.a + s.b.cross(r);
            let mut w = (vel.w().as_dvec3() + s.b).as_vec3();
            // The speed cap of `end_step` holds after the projection too: the targets come
            // from the start state, which may spin faster than the cap.
            let ws = w.length();
            if ws > max_angular_speed {
                w *= max_angular_speed / ws;
            }
            bodies.velocities[i] = VelocityRecord::new(v.as_vec3(), w);
            bodies.touch_velocity(i);
        }
    }
}

fn outer(a: DVec3, b: DVec3) -> DMat3 {
    DMat3::from_cols(a * b.x, a * b.y, a * b.z)
}
