//! `PhysicsWorld`: the plain-Rust core. Owns bodies, joints and the solver state, and runs
//! the frame pipeline top to bottom in [`PhysicsWorld::step`].

use std::time::Instant;

use glam::{Quat, Vec3};

use crate::body::{BodyDesc, BodyKind, MassRecord, PoseRecord, VelocityRecord};
use crate::collider::Collider;
use crate::config::SolverConfig;
use crate::error::{BodyHandle, JointHandle, PhysicsError};
use crate::joint::{JointDesc, JointKind, JointRecord, JointRowState, WORLD, flags, kind};
use crate::pipeline::{SolverData, collision, coloring, dual, integration, warm_start};

/// Dense body storage (structure of arrays); the solver index of a body is its position here.
#[derive(Default)]
pub struct BodySet {
    pub(crate) handles: Vec<BodyHandle>,
    /// Solver index by handle id (`u32::MAX` once removed).
    pub(crate) index_of: Vec<u32>,
    pub(crate) kinds: Vec<BodyKind>,
    pub(crate) poses: Vec<PoseRecord>,
    pub(crate) velocities: Vec<VelocityRecord>,
    pub(crate) prev_velocities: Vec<VelocityRecord>,
    pub(crate) masses: Vec<MassRecord>,
    pub(crate) colliders: Vec<Option<Collider>>,
    /// Translation of the collider in the body frame (body origin = centre of mass).
    pub(crate) shape_offsets: Vec<Vec3>,
    /// External force (xyz) and torque (xyz) applied during the next steps.
    pub(crate) forces: Vec<[f32; 8]>,
    /// A body that became non-finite is restored to its last pose and frozen.
    pub(crate) frozen: Vec<bool>,
}

impl BodySet {
    pub fn len(&self) -> usize {
        self.handles.len()
    }
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }
    #[inline]
    pub(crate) fn is_solved(&self, i: usize) -> bool {
        self.masses[i].is_dynamic() && !self.frozen[i]
    }
    fn index(&self, h: BodyHandle) -> Option<usize> {
        match self.index_of.get(h.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }
}

/// Dense joint storage.
#[derive(Default)]
pub struct JointSet {
    pub(crate) handles: Vec<JointHandle>,
    pub(crate) index_of: Vec<u32>,
    pub(crate) records: Vec<JointRecord>,
    pub(crate) states: Vec<JointRowState>,
    pub(crate) bodies: Vec<(BodyHandle, Option<BodyHandle>)>,
}

impl JointSet {
    fn index(&self, h: JointHandle) -> Option<usize> {
        match self.index_of.get(h.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }
}

/// Timing and counts of the last step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepStats {
    pub collision_ms: f64,
    pub solver_ms: f64,
    pub total_ms: f64,
    pub contacts: usize,
    pub colors: usize,
    /// Deepest penetration among the contacts found this step (m).
    pub max_penetration: f32,
}

/// What happened in a step that the caller may need to act on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReport {
    /// Bodies that became non-finite this step: restored to their start pose and frozen.
    pub frozen: Vec<BodyHandle>,
    /// Joints that broke this step.
    pub broken: Vec<JointHandle>,
}

/// A physics world stepped by AVBD with a fixed iteration budget.
#[derive(Default)]
pub struct PhysicsWorld {
    pub config: SolverConfig,
    /// The GPU solver when the world runs on the GPU backend.
    pub(crate) gpu: Option<Box<crate::gpu::GpuSolver>>,
    pub(crate) bodies: BodySet,
    pub(crate) joints: JointSet,
    pub(crate) collision: collision::CollisionState,
    pub(crate) solver: SolverData,
    pub(crate) stats: StepStats,
    /// The step begun by [`Self::begin_step`] and not yet finished.
    in_flight: Option<StepInFlight>,
}

/// What [`PhysicsWorld::finish_step`] needs of the step [`PhysicsWorld::begin_step`]
/// started.
struct StepInFlight {
    /// The configuration the step began with (`config` is a public field).
    config: SolverConfig,
    report: StepReport,
    collision_ms: f64,
    /// Time spent in `begin_step`.
    host_ms: f64,
}

/// Read-only view of one body's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BodyState {
    pub kind: BodyKind,
    pub position: Vec3,
    pub rotation: Quat,
    pub linear_velocity: Vec3,
    pub angular_velocity: Vec3,
    pub mass: f32,
    pub frozen: bool,
}

impl PhysicsWorld {
    /// A world on the CPU backend.
    pub fn new(config: SolverConfig) -> Result<Self, PhysicsError> {
        config.validate()?;
        Ok(Self {
            config,
            ..Default::default()
        })
    }

    /// A world on the chosen backend. `Backend::Auto` takes the GPU when an adapter is
    /// found and falls back to the CPU otherwise (logged to stderr); `Backend::Gpu` fails
    /// with [`PhysicsError::Gpu`] when no usable adapter is found.
    pub fn with_backend(
        config: SolverConfig,
        backend: crate::gpu::Backend,
    ) -> Result<Self, PhysicsError> {
        use crate::gpu::{Backend, GpuSolver};
        let mut world = Self::new(config)?;
        world.gpu = match backend {
            Backend::Cpu => None,
            Backend::Gpu => Some(Box::new(
                GpuSolver::new().map_err(|e| PhysicsError::Gpu(e.to_string()))?,
            )),
            Backend::Auto => match GpuSolver::new() {
                Ok(gpu) => {
                    eprintln!("bevy_avbd: GPU backend on {}", gpu.adapter_name());
                    Some(Box::new(gpu))
                }
                Err(e) => {
                    eprintln!("bevy_avbd: CPU backend ({e})");
                    None
                }
            },
        };
        Ok(world)
    }

    /// `"cpu"` or `"gpu"`.
    pub fn backend(&self) -> &'static str {
        if self.gpu.is_some() { "gpu" } else { "cpu" }
    }

    /// The GPU adapter's name and API, when on the GPU backend.
    pub fn adapter(&self) -> Option<String> {
        self.gpu.as_ref().map(|g| g.adapter_name())
    }

    /// GPU buffer reallocations so far (zero growth once a scene is steady).
    pub fn gpu_reallocations(&self) -> Option<u64> {
        self.gpu.as_ref().map(|g| g.reallocations)
    }

    /// GPU memory per body, contact and joint and in total, when on the GPU backend.
    pub fn gpu_memory(&self) -> Option<crate::gpu::GpuMemory> {
        self.gpu.as_ref().map(|g| g.memory())
    }

    /// Per-kernel GPU times of the last step (timestamp queries), when on the GPU backend.
    pub fn gpu_timings(&self) -> Option<crate::gpu::GpuTimings> {
        self.gpu.as_ref().map(|g| g.timings())
    }

    /// Bytes uploaded to the GPU in the last step, when on the GPU backend.
    pub fn gpu_upload_bytes(&self) -> Option<u64> {
        self.gpu.as_ref().map(|g| g.upload_bytes())
    }

    /// Of [`Self::gpu_upload_bytes`], the per-body state (the GPU backend keeps poses and
    /// velocities on the device and uploads only the bodies the CPU changed).
    pub fn gpu_body_upload_bytes(&self) -> Option<u64> {
        self.gpu.as_ref().map(|g| g.body_upload_bytes())
    }

    /// Bodies solved in the serial fallback group of the GPU colouring in the last step.
    pub fn gpu_serial_bodies(&self) -> Option<usize> {
        self.gpu.as_ref().map(|g| g.serial_bodies())
    }

    /// Test hook: split GPU contacts in chunks of `1 << shift` records and cap dual
    /// dispatches at `max_groups` workgroups per dimension (as if the scene were huge).
    #[doc(hidden)]
    pub fn gpu_limit_for_tests(&mut self, shift: u32, max_groups: u32) {
        if let Some(g) = self.gpu.as_mut() {
            g.limit_contact_chunk(shift);
            g.limit_dispatch(max_groups);
        }
    }

    /// The last step's GPU colouring (a blocking readback), when on the GPU backend.
    pub fn gpu_coloring(&self) -> Option<Result<crate::gpu::GpuColoring, PhysicsError>> {
        self.gpu
            .as_ref()
            .map(|g| g.coloring().map_err(|e| PhysicsError::Gpu(e.to_string())))
    }

    /// The body → constraint adjacency (CSR `offsets`, `items`) the GPU built in the last
    /// step; `None` on the CPU backend.
    pub fn gpu_adjacency(&self) -> Option<Result<crate::gpu::CsrLists, PhysicsError>> {
        self.gpu
            .as_ref()
            .map(|g| g.adjacency().map_err(|e| PhysicsError::Gpu(e.to_string())))
    }

    /// The adjacency the CPU backend builds (`(offsets, items)`, every body) from the last
    /// step's contacts and the joints unbroken now, e.g. to check the GPU's.
    pub fn cpu_adjacency(&self) -> crate::gpu::CsrLists {
        let mut adj = crate::pipeline::coloring::Adjacency::default();
        crate::pipeline::coloring::build_adjacency(
            self.bodies.len(),
            &self.solver.points,
            &self.joints,
            &mut adj,
            &mut Vec::new(),
        );
        (adj.offsets, adj.items)
    }

    /// Solver indices of the two bodies of every contact of the last step and every
    /// unbroken joint (`u32::MAX` for the world), e.g. to check a colouring.
    pub fn constraint_pairs(&self) -> Vec<(u32, u32)> {
        let contacts = self.solver.points.iter().map(|c| (c.body_a, c.body_b));
        let joints = self
            .joints
            .records
            .iter()
            .filter(|j| !j.broken())
            .map(|j| (j.body_a, j.body_b));
        contacts.chain(joints).collect()
    }

    // ---------------------------------------------------------------- bodies

    /// Adds a body; the description is validated first and nothing changes on error.
    pub fn add_body(&mut self, desc: BodyDesc) -> Result<BodyHandle, PhysicsError> {
        self.idle()?;
        let mut mass = desc.validate()?;
        if let Some(c) = &desc.collider {
            mass.friction = [c.friction, c.dynamic_friction];
        }
        let b = &mut self.bodies;
        let handle = BodyHandle(b.index_of.len() as u32);
        b.index_of.push(b.handles.len() as u32);
        b.handles.push(handle);
        b.kinds.push(desc.kind);
        let offset = desc
            .collider
            .as_ref()
            .filter(|c| c.has_volume())
            .map(|c| -c.mass_properties().local_com)
            .unwrap_or(Vec3::ZERO);
        b.poses
            .push(PoseRecord::new(desc.position, desc.rotation.normalize()));
        let vel = VelocityRecord::new(desc.linear_velocity, desc.angular_velocity);
        b.velocities.push(vel);
        b.prev_velocities.push(vel);
        b.masses.push(mass);
        b.colliders.push(desc.collider);
        b.shape_offsets.push(offset);
        b.forces.push([0.0; 8]);
        b.frozen.push(false);
        Ok(handle)
    }

    /// Removes a body and every joint attached to it (returned).
    pub fn remove_body(&mut self, h: BodyHandle) -> Result<Vec<JointHandle>, PhysicsError> {
        self.idle()?;
        let i = self.bodies.index(h).ok_or(PhysicsError::MissingBody(h))?;
        let attached: Vec<JointHandle> = self
            .joints
            .handles
            .iter()
            .zip(&self.joints.bodies)
            .filter(|(_, (a, b))| *a == h || *b == Some(h))
            .map(|(jh, _)| *jh)
            .collect();
        for jh in &attached {
            self.remove_joint(*jh)?;
        }
        let b = &mut self.bodies;
        let last = b.handles.len() - 1;
        b.handles.swap_remove(i);
        b.kinds.swap_remove(i);
        b.poses.swap_remove(i);
        b.velocities.swap_remove(i);
        b.prev_velocities.swap_remove(i);
        b.masses.swap_remove(i);
        b.colliders.swap_remove(i);
        b.shape_offsets.swap_remove(i);
        b.forces.swap_remove(i);
        b.frozen.swap_remove(i);
        b.index_of[h.0 as usize] = u32::MAX;
        if i != last {
            let moved = b.handles[i];
            b.index_of[moved.0 as usize] = i as u32;
            // Joint records refer to solver indices: re-point the moved body.
            for rec in &mut self.joints.records {
                if rec.body_a == last as u32 {
                    rec.body_a = i as u32;
                }
                if rec.body_b == last as u32 {
                    rec.body_b = i as u32;
                }
            }
        }
        self.collision.forget_body(h);
        Ok(attached)
    }

    pub fn contains_body(&self, h: BodyHandle) -> bool {
        self.bodies.index(h).is_some()
    }

    pub fn body_count(&self) -> usize {
        self.bodies.len()
    }

    /// Handles of all bodies, in solver order.
    pub fn body_handles(&self) -> &[BodyHandle] {
        &self.bodies.handles
    }

    pub fn body(&self, h: BodyHandle) -> Result<BodyState, PhysicsError> {
        let i = self.bodies.index(h).ok_or(PhysicsError::MissingBody(h))?;
        let b = &self.bodies;
        Ok(BodyState {
            kind: b.kinds[i],
            position: b.poses[i].p(),
            rotation: b.poses[i].q(),
            linear_velocity: b.velocities[i].v(),
            angular_velocity: b.velocities[i].w(),
            mass: b.masses[i].mass,
            frozen: b.frozen[i],
        })
    }

    /// World-space inertia tensor of a body (`R I Rᵀ`).
    pub fn world_inertia(&self, h: BodyHandle) -> Result<glam::Mat3, PhysicsError> {
        let i = self.bodies.index(h).ok_or(PhysicsError::MissingBody(h))?;
        Ok(self.bodies.masses[i].world_inertia(self.bodies.poses[i].q()))
    }

    /// Teleports a body (and unfreezes it).
    pub fn set_pose(
        &mut self,
        h: BodyHandle,
        position: Vec3,
        rotation: Quat,
    ) -> Result<(), PhysicsError> {
        self.idle()?;
        let i = self.bodies.index(h).ok_or(PhysicsError::MissingBody(h))?;
        if !position.is_finite() {
            return Err(PhysicsError::InvalidBody {
                field: "position",
                reason: "not finite".into(),
            });
        }
        if !rotation.is_finite() || (rotation.length() - 1.0).abs() > 1e-3 {
            return Err(PhysicsError::InvalidBody {
                field: "rotation",
                reason: "not a finite unit quaternion".into(),
            });
        }
        self.bodies.poses[i] = PoseRecord::new(position, rotation.normalize());
        self.bodies.frozen[i] = false;
        Ok(())
    }

    pub fn set_velocity(
        &mut self,
        h: BodyHandle,
        linear: Vec3,
        angular: Vec3,
    ) -> Result<(), PhysicsError> {
        self.idle()?;
        let i = self.bodies.index(h).ok_or(PhysicsError::MissingBody(h))?;
        if !linear.is_finite() {
            return Err(PhysicsError::InvalidBody {
                field: "linear_velocity",
                reason: "not finite".into(),
            });
        }
        if !angular.is_finite() {
            return Err(PhysicsError::InvalidBody {
                field: "angular_velocity",
                reason: "not finite".into(),
            });
        }
        let v = VelocityRecord::new(linear, angular);
        self.bodies.velocities[i] = v;
        self.bodies.prev_velocities[i] = v;
        Ok(())
    }

    /// Sets the external force (N, at the centre of mass) and torque (N·m) applied every step until changed.
    pub fn set_external_force(
        &mut self,
        h: BodyHandle,
        force: Vec3,
        torque: Vec3,
    ) -> Result<(), PhysicsError> {
        self.idle()?;
        let i = self.bodies.index(h).ok_or(PhysicsError::MissingBody(h))?;
        if !force.is_finite() {
            return Err(PhysicsError::InvalidBody {
                field: "external_force",
                reason: "not finite".into(),
            });
        }
        if !torque.is_finite() {
            return Err(PhysicsError::InvalidBody {
                field: "external_torque",
                reason: "not finite".into(),
            });
        }
        self.bodies.forces[i] = [
            force.x, force.y, force.z, 0.0, torque.x, torque.y, torque.z, 0.0,
        ];
        Ok(())
    }

    // ---------------------------------------------------------------- joints

    /// Adds a joint; both bodies must exist. Anchors, axes and limits are validated.
    pub fn add_joint(&mut self, desc: JointDesc) -> Result<JointHandle, PhysicsError> {
        self.idle()?;
        let bad = |field, reason: &str| PhysicsError::InvalidJoint {
            field,
            reason: reason.to_string(),
        };
        let ia = self
            .bodies
            .index(desc.body_a)
            .ok_or(PhysicsError::MissingBody(desc.body_a))?;
        let ib = match desc.body_b {
            Some(hb) => {
                let ib = self.bodies.index(hb).ok_or(PhysicsError::MissingBody(hb))?;
                if ib == ia {
                    return Err(bad("body_b", "a joint needs two different bodies"));
                }
                Some(ib)
            }
            None => None,
        };
        if !desc.anchor_a.is_finite() {
            return Err(bad("anchor_a", "not finite"));
        }
        if !desc.anchor_b.is_finite() {
            return Err(bad("anchor_b", "not finite"));
        }
        let opt_pos = |field, v: Option<f32>| match v {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                Err(bad(field, &format!("must be finite and > 0, got {x}")))
            }
            _ => Ok(()),
        };
        opt_pos("stiffness", desc.stiffness)?;
        opt_pos("breaking_force", desc.breaking_force)?;
        opt_pos("breaking_torque", desc.breaking_torque)?;

        let pa = self.bodies.poses[ia];
        let (pb_q, _pb_p) = match ib {
            Some(ib) => (self.bodies.poses[ib].q(), self.bodies.poses[ib].p()),
            None => (Quat::IDENTITY, Vec3::ZERO),
        };
        let mut rec = JointRecord {
            body_a: ia as u32,
            body_b: ib.map(|i| i as u32).unwrap_or(WORLD),
            anchor_a: desc.anchor_a.extend(0.0).to_array(),
            anchor_b: desc.anchor_b.extend(0.0).to_array(),
            ..Default::default()
        };
        let mut frame_a = Quat::IDENTITY;
        let mut stiffness = desc.stiffness.unwrap_or(0.0);
        let limits = |lim: Option<(f32, f32)>, rec: &mut JointRecord| -> Result<(), PhysicsError> {
            if let Some((lo, hi)) = lim {
                if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                    return Err(bad(
                        "limits",
                        &format!("need finite lo ≤ hi, got ({lo}, {hi})"),
                    ));
                }
                rec.flags |= flags::HAS_LIMIT;
                rec.limits_motor[0] = lo;
                rec.limits_motor[1] = hi;
            }
            Ok(())
        };
        let unit_axis = |axis: Vec3| -> Result<Vec3, PhysicsError> {
            if !axis.is_finite() || axis.length() < 1e-6 {
                return Err(bad("axis", "must be finite and non-zero"));
            }
            Ok(axis.normalize())
        };
        rec.kind = match desc.kind {
            JointKind::Ball => kind::BALL,
            JointKind::Fixed => kind::FIXED,
            JointKind::Revolute {
                axis,
                limits: lim,
                motor,
            } => {
                frame_a = crate::joint::frame_from_axis(unit_axis(axis)?);
                if let Some((lo, hi)) = lim
                    && (lo < -std::f32::consts::PI || hi > std::f32::consts::PI)
                {
                    return Err(bad("limits", "revolute limits must lie in [−π, π]"));
                }
                limits(lim, &mut rec)?;
                if let Some(m) = motor {
                    if !m.target_velocity.is_finite() {
                        return Err(bad("motor.target_velocity", "not finite"));
                    }
                    if !(m.max_torque.is_finite() && m.max_torque > 0.0) {
                        return Err(bad("motor.max_torque", "must be finite and > 0"));
                    }
                    rec.flags |= flags::HAS_MOTOR;
                    rec.limits_motor[2] = m.target_velocity;
                    rec.limits_motor[3] = m.max_torque;
                }
                kind::REVOLUTE
            }
            JointKind::Prismatic { axis, limits: lim } => {
                frame_a = crate::joint::frame_from_axis(unit_axis(axis)?);
                limits(lim, &mut rec)?;
                kind::PRISMATIC
            }
            JointKind::Distance { length } => {
                if !(length.is_finite() && length >= 0.0) {
                    return Err(bad("length", "must be finite and ≥ 0"));
                }
                rec.params[0] = length;
                kind::DISTANCE
            }
            JointKind::Rope { max_length } => {
                if !(max_length.is_finite() && max_length >= 0.0) {
                    return Err(bad("max_length", "must be finite and ≥ 0"));
                }
                rec.params[0] = max_length;
                kind::ROPE
            }
            JointKind::Spring {
                rest_length,
                stiffness: k,
            } => {
                if !(rest_length.is_finite() && rest_length >= 0.0) {
                    return Err(bad("rest_length", "must be finite and ≥ 0"));
                }
                if !(k.is_finite() && k > 0.0) {
                    return Err(bad("stiffness", "must be finite and > 0"));
                }
                rec.params[0] = rest_length;
                stiffness = k;
                kind::DISTANCE
            }
        };
        // Frames coincide in the world at creation: q_A f_A = q_B f_B.
        rec.frame_a = frame_a.to_array();
        rec.frame_b = (pb_q.conjugate() * pa.q() * frame_a).normalize().to_array();
        rec.params[1] = stiffness;
        if let Some(f) = desc.breaking_force {
            rec.flags |= flags::BREAKABLE_FORCE;
            rec.params[2] = f;
        }
        if let Some(t) = desc.breaking_torque {
            rec.flags |= flags::BREAKABLE_TORQUE;
            rec.params[3] = t;
        }
        let j = &mut self.joints;
        let handle = JointHandle(j.index_of.len() as u32);
        j.index_of.push(j.handles.len() as u32);
        j.handles.push(handle);
        j.records.push(rec);
        j.states.push(JointRowState::default());
        j.bodies.push((desc.body_a, desc.body_b));
        self.collision.joints_changed();
        Ok(handle)
    }

    pub fn remove_joint(&mut self, h: JointHandle) -> Result<(), PhysicsError> {
        self.idle()?;
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        let j = &mut self.joints;
        let last = j.handles.len() - 1;
        j.handles.swap_remove(i);
        j.records.swap_remove(i);
        j.states.swap_remove(i);
        j.bodies.swap_remove(i);
        j.index_of[h.0 as usize] = u32::MAX;
        if i != last {
            let moved = j.handles[i];
            j.index_of[moved.0 as usize] = i as u32;
        }
        self.collision.joints_changed();
        Ok(())
    }

    pub fn joint_count(&self) -> usize {
        self.joints.handles.len()
    }

    pub fn joint_handles(&self) -> &[JointHandle] {
        &self.joints.handles
    }

    /// Whether the joint has broken (a broken joint stays in the world, inactive).
    pub fn joint_broken(&self, h: JointHandle) -> Result<bool, PhysicsError> {
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        Ok(self.joints.records[i].broken())
    }

    /// Current constraint error of a joint's positional rows (m): the anchor distance for
    /// ball/fixed/revolute, the excess over the length for distance/rope.
    pub fn joint_error(&self, h: JointHandle) -> Result<f32, PhysicsError> {
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        let rec = &self.joints.records[i];
        let pa = self.bodies.poses[rec.body_a as usize];
        let pb = if rec.body_b == WORLD {
            PoseRecord::new(Vec3::ZERO, Quat::IDENTITY)
        } else {
            self.bodies.poses[rec.body_b as usize]
        };
        let e = rec.evaluate(&pa, &pb);
        if e.n_point > 0 {
            Ok((0..e.n_point)
                .map(|r| e.rows[r].c * e.rows[r].c)
                .sum::<f32>()
                .sqrt())
        } else {
            Ok(e.rows[0].c)
        }
    }

    /// Magnitudes of a joint's last positional force (N) and torque (N·m): the multipliers
    /// of its linear and angular rows at the end of the last step.
    pub fn joint_force(&self, h: JointHandle) -> Result<(f32, f32), PhysicsError> {
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        let rec = &self.joints.records[i];
        let st = &self.joints.states[i];
        let pa = self.bodies.poses[rec.body_a as usize];
        let pb = if rec.body_b == WORLD {
            PoseRecord::new(Vec3::ZERO, Quat::IDENTITY)
        } else {
            self.bodies.poses[rec.body_b as usize]
        };
        let e = rec.evaluate(&pa, &pb);
        let (mut f2, mut t2) = (0.0f32, 0.0f32);
        for r in 0..e.n {
            let l2 = st.lambda[r] * st.lambda[r];
            if e.rows[r].angular {
                t2 += l2
            } else {
                f2 += l2
            }
        }
        Ok((f2.sqrt(), t2.sqrt()))
    }

    /// Current hinge angle of a revolute joint (rad), relative to its creation pose.
    pub fn joint_angle(&self, h: JointHandle) -> Result<f32, PhysicsError> {
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        let rec = &self.joints.records[i];
        let pa = self.bodies.poses[rec.body_a as usize];
        let pb = if rec.body_b == WORLD {
            PoseRecord::new(Vec3::ZERO, Quat::IDENTITY)
        } else {
            self.bodies.poses[rec.body_b as usize]
        };
        Ok(rec.evaluate(&pa, &pb).angle)
    }

    // ---------------------------------------------------------------- stepping

    /// Statistics of the last step.
    pub fn stats(&self) -> &StepStats {
        &self.stats
    }

    /// The contact records of the last step as the solver left them (solver indices of the
    /// bodies, world-space basis and lever arms, λ and k of the tangent, bitangent and
    /// normal rows; λ is the force of each row). On the GPU backend they live on the
    /// device and this reads them back (blocking; not part of the per-step path).
    pub fn contacts(
        &self,
    ) -> Result<std::borrow::Cow<'_, [crate::contact::ContactRecord]>, PhysicsError> {
        match &self.gpu {
            Some(gpu) => gpu
                .contacts()
                .map(std::borrow::Cow::Owned)
                .map_err(|e| PhysicsError::Gpu(e.to_string())),
            None => Ok(std::borrow::Cow::Borrowed(&self.solver.contacts)),
        }
    }

    /// The contact points collision detection found in the last step (both backends):
    /// bodies, normal, lever arms and the point's index in the step before.
    pub fn contact_points(&self) -> &[crate::contact::ContactPoint] {
        &self.solver.points
    }

    /// Handle of the body with solver index `i` (as stored in contact and joint records).
    pub fn handle_of_index(&self, i: u32) -> Option<BodyHandle> {
        self.bodies.handles.get(i as usize).copied()
    }

    /// Number of contact points in the last step.
    pub fn contact_count(&self) -> usize {
        self.solver.points.len()
    }

    /// Advances the world by one implicit-Euler step of `config.dt`, spending exactly
    /// `config.iterations` AVBD iterations: [`Self::begin_step`] then
    /// [`Self::finish_step`].
    pub fn step(&mut self) -> Result<StepReport, PhysicsError> {
        self.begin_step()?;
        self.finish_step()
    }

    /// Starts a step: collision detection, the joints' warm start, and the solve on the
    /// chosen backend. On the GPU backend the solve is submitted to the device and this
    /// returns without waiting for it, so the caller's own work (game logic, rendering)
    /// overlaps the GPU's, and the world reads as it was before the step until
    /// [`Self::finish_step`]; on the CPU backend the solve runs here and its poses are
    /// already in place (the momentum projection and fracture wait for `finish_step`).
    /// Either way, edits and another step are refused until then
    /// ([`PhysicsError::StepInFlight`]).
    pub fn begin_step(&mut self) -> Result<(), PhysicsError> {
        self.idle()?;
        self.config.validate()?;
        let cfg = &self.config;
        let t0 = Instant::now();

        // 1. collision detection at xᵗ: contact points, each with its index in the last step
        collision::detect(
            cfg,
            &self.bodies,
            &self.joints,
            &mut self.collision,
            &mut self.solver.points,
        );
        let collision_ms = t0.elapsed().as_secs_f64() * 1e3;

        // 2. joints: start error C*(xᵗ), warm start of k and λ
        dual::warm_start_joints(
            cfg,
            &self.bodies,
            &mut self.joints,
            &mut self.solver.joint_islands,
        );

        // 3. the step on the chosen backend: contacts warm-started from the last step,
        //    inertial targets and initial guess, body→constraint adjacency and colouring,
        //    the fixed iteration budget, velocities and poses (bodies that became
        //    non-finite are frozen)
        let mut report = StepReport::default();
        let s = &mut self.solver;
        if cfg.conserve_momentum {
            // From the start state, before the backend overwrites it.
            s.islands.record_targets(cfg, &self.bodies);
        }
        if let Some(gpu) = self.gpu.as_mut() {
            // On the device, in one submission; read back by `finish_step`.
            gpu.submit(cfg, &self.bodies, &self.joints, s)
                .map_err(|e| PhysicsError::Gpu(e.to_string()))?;
        } else {
            warm_start::contacts(cfg, &self.bodies, s);
            integration::begin_step(cfg, &self.bodies, s);
            coloring::build(&self.bodies, &self.joints, s);
            crate::pipeline::iterate(cfg, &self.bodies, &mut self.joints, s);
            integration::end_step(cfg, &mut self.bodies, s, &mut report);
        }
        self.in_flight = Some(StepInFlight {
            config: cfg.clone(),
            report,
            collision_ms,
            host_ms: t0.elapsed().as_secs_f64() * 1e3,
        });
        Ok(())
    }

    /// Finishes the step started by [`Self::begin_step`]: waits for the GPU's results (if
    /// on the GPU backend), then restores the momentum of isolated islands, breaks
    /// overloaded joints and keeps what the contacts carry to the next step.
    pub fn finish_step(&mut self) -> Result<StepReport, PhysicsError> {
        let Some(flight) = self.in_flight.take() else {
            return Err(PhysicsError::NoStepInFlight);
        };
        let StepInFlight {
            config: cfg,
            mut report,
            collision_ms,
            host_ms,
        } = flight;
        let t0 = Instant::now();
        let s = &mut self.solver;
        if let Some(gpu) = self.gpu.as_mut() {
            gpu.finish(&cfg, &mut self.bodies, &mut self.joints, s, &mut report)
                .map_err(|e| PhysicsError::Gpu(e.to_string()))?;
        }
        // 4. momentum of isolated islands, on the CPU for both backends (its islands are a
        //    union–find)
        if cfg.conserve_momentum {
            s.islands
                .project(&mut self.bodies, &s.adjacency, cfg.max_angular_speed);
        }

        // 5. fracture of overloaded joints; what the contacts carry to the next step (the
        //    GPU backend keeps it on the device)
        dual::fracture(&self.bodies, &mut self.joints, &mut report);
        if self.gpu.is_none() {
            warm_start::store(&mut self.solver);
        }

        // Time spent in `begin_step` and here, not the caller's work in between.
        let total_ms = host_ms + t0.elapsed().as_secs_f64() * 1e3;
        self.stats = StepStats {
            collision_ms,
            solver_ms: total_ms - collision_ms,
            total_ms,
            contacts: self.solver.points.len(),
            colors: match &self.gpu {
                Some(gpu) => gpu.colors_used(),
                None => self.solver.colors.count(),
            },
            max_penetration: self.collision.max_penetration,
        };
        if !report.broken.is_empty() {
            self.collision.joints_changed();
        }
        report.broken = report
            .broken
            .iter()
            .map(|j| self.joints.handles[j.0 as usize])
            .collect();
        Ok(report)
    }

    /// Whether a step was begun and not yet finished.
    pub fn step_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Edits are refused while a step is in flight: its results would overwrite them.
    fn idle(&self) -> Result<(), PhysicsError> {
        match self.in_flight {
            Some(_) => Err(PhysicsError::StepInFlight),
            None => Ok(()),
        }
    }

    /// Total linear momentum of the dynamic bodies (kg·m/s).
    pub fn linear_momentum(&self) -> Vec3 {
        let b = &self.bodies;
        (0..b.len())
            .filter(|&i| b.is_solved(i))
            .map(|i| b.velocities[i].v() * b.masses[i].mass)
            .sum()
    }

    /// Total angular momentum of the dynamic bodies about the origin (kg·m²/s).
    pub fn angular_momentum(&self) -> Vec3 {
        let b = &self.bodies;
        (0..b.len())
            .filter(|&i| b.is_solved(i))
            .map(|i| {
                let m = &b.masses[i];
                let q = b.poses[i].q();
                m.world_inertia(q) * b.velocities[i].w()
                    + b.poses[i].p().cross(b.velocities[i].v() * m.mass)
            })
            .sum()
    }
}
