//! The joint half of the world's API: adding, removing and measuring joints.

use glam::{Quat, Vec3};

use super::PhysicsWorld;
use crate::error::{JointHandle, PhysicsError};
use crate::rigid::body::PoseRecord;
use crate::rigid::joint::{JointDesc, JointKind, JointRecord, JointRowState, WORLD, flags, kind};

impl PhysicsWorld {
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
                frame_a = crate::rigid::joint::frame_from_axis(unit_axis(axis)?);
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
                frame_a = crate::rigid::joint::frame_from_axis(unit_axis(axis)?);
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
        self.pull_joint_states()?;
        let j = &mut self.joints;
        let handle = JointHandle(j.index_of.len() as u32);
        j.index_of.push(j.handles.len() as u32);
        j.handles.push(handle);
        j.records.push(rec);
        j.states.push(JointRowState::default());
        j.bodies.push((desc.body_a, desc.body_b));
        j.edits += 1;
        self.collision.joints_changed();
        Ok(handle)
    }

    pub fn remove_joint(&mut self, h: JointHandle) -> Result<(), PhysicsError> {
        self.idle()?;
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        self.pull_joint_states()?;
        let j = &mut self.joints;
        let last = j.handles.len() - 1;
        j.handles.swap_remove(i);
        j.records.swap_remove(i);
        j.states.swap_remove(i);
        j.bodies.swap_remove(i);
        j.edits += 1;
        j.index_of[h.0 as usize] = u32::MAX;
        if i != last {
            let moved = j.handles[i];
            j.index_of[moved.0 as usize] = i as u32;
        }
        self.collision.joints_changed();
        Ok(())
    }

    /// Brings the CPU's copy of the joints' row states up to date where the device keeps
    /// them (before joints are added or removed).
    fn pull_joint_states(&mut self) -> Result<(), PhysicsError> {
        match self.gpu.as_mut() {
            Some(gpu) => gpu
                .pull_joint_states(&mut self.joints.states)
                .map_err(|e| PhysicsError::Gpu(e.to_string())),
            None => Ok(()),
        }
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
    /// of its linear and angular rows at the end of the last step. On the GPU backend the
    /// row states stay on the device: the first call after a step reads them all back
    /// (blocking, and waiting for a step in flight, whose forces it then gives).
    pub fn joint_force(&self, h: JointHandle) -> Result<(f32, f32), PhysicsError> {
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        let rec = &self.joints.records[i];
        // (The GPU backend keeps the row states on the device.)
        let device = match &self.gpu {
            Some(gpu) => gpu
                .joint_state(i)
                .map_err(|e| PhysicsError::Gpu(e.to_string()))?,
            None => None,
        };
        let st = device.as_ref().unwrap_or(&self.joints.states[i]);
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

    /// The joint's anchors in world space, on body A and on body B (or the world), and
    /// the two bodies' centres (`None` for the world): what a picture draws of a joint.
    pub fn joint_anchors(&self, h: JointHandle) -> Result<JointAnchors, PhysicsError> {
        let i = self.joints.index(h).ok_or(PhysicsError::MissingJoint(h))?;
        let rec = &self.joints.records[i];
        let local = |a: [f32; 4]| Vec3::new(a[0], a[1], a[2]);
        let pa = self.bodies.poses[rec.body_a as usize];
        let on_a = pa.p() + pa.q() * local(rec.anchor_a);
        let (on_b, centre_b) = if rec.body_b == WORLD {
            (local(rec.anchor_b), None)
        } else {
            let pb = self.bodies.poses[rec.body_b as usize];
            (pb.p() + pb.q() * local(rec.anchor_b), Some(pb.p()))
        };
        Ok(JointAnchors {
            centre_a: pa.p(),
            on_a,
            on_b,
            centre_b,
        })
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
}

/// A joint's anchors and bodies in world space ([`PhysicsWorld::joint_anchors`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointAnchors {
    pub centre_a: Vec3,
    pub on_a: Vec3,
    pub on_b: Vec3,
    /// `None` when body B is the world.
    pub centre_b: Option<Vec3>,
}
