//! The body half of the world's API: adding, removing, reading and editing rigid bodies.

use glam::{Quat, Vec3};

use super::{BodyState, PhysicsWorld};
use crate::error::{BodyHandle, JointHandle, PhysicsError};
use crate::rigid::body::{BodyDesc, PoseRecord, VelocityRecord};

impl PhysicsWorld {
    /// Adds a body; the description is validated first and nothing changes on error. A
    /// dynamic or kinematic half-space beside deformable bodies is refused
    /// ([`PhysicsError::Unsupported`]).
    pub fn add_body(&mut self, desc: BodyDesc) -> Result<BodyHandle, PhysicsError> {
        self.idle()?;
        let mut mass = desc.validate()?;
        if moving_halfspace(desc.kind, desc.collider.as_ref()) && !self.deformables.is_empty() {
            return Err(moving_halfspace_error());
        }
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
        b.relayout();
        // (Where the device alone holds the others' velocities, this one's goes up.)
        b.touch_velocity(b.len() - 1);
        // Beside deformables, a collider must not start inside or across their surfaces.
        if !self.deformables.is_empty() && self.bodies.colliders.last().is_some_and(|c| c.is_some())
        {
            let i = self.bodies.len() - 1;
            if let Err(e) =
                self.refuse_intersecting(crate::pipeline::surface_contact::start::Side::Rigid(i))
            {
                self.remove_body(handle).expect("just added");
                return Err(e);
            }
        }
        Ok(handle)
    }

    /// Removes a body and every joint attached to it (returned), and the attachments of
    /// deformable vertices to it.
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
        let held: Vec<_> = self
            .attachments
            .handles
            .iter()
            .zip(&self.attachments.ends)
            .filter(|(_, e)| e.2 == h)
            .map(|(a, _)| *a)
            .collect();
        for a in held {
            self.attachments.remove(a);
        }
        let last = self.bodies.handles.len() - 1;
        // The last body takes the removed one's place, on the device too where it alone
        // holds the velocities, and in the list of those the CPU wrote.
        if let Some(gpu) = self.gpu.as_mut() {
            gpu.move_velocity(last, i);
        }
        let written = &mut self.bodies.edits.velocities;
        written.retain(|&k| k as usize != i);
        for k in written.iter_mut().filter(|k| **k as usize == last) {
            *k = i as u32;
        }
        let b = &mut self.bodies;
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
        b.relayout();
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
            for rec in &mut self.attachments.records {
                if rec.body == last as u32 {
                    rec.body = i as u32;
                }
            }
        }
        self.collision.forget_body(h);
        Ok(attached)
    }

    /// A body's collider shape, if it has one.
    pub fn collider_shape(&self, h: BodyHandle) -> Option<&dyn parry3d::shape::Shape> {
        let i = self.bodies.index(h)?;
        self.bodies.colliders[i].as_ref().map(|c| c.shape.as_ref())
    }

    /// Where a body's collider sits in the body frame (the body's origin is its centre of
    /// mass).
    pub fn collider_offset(&self, h: BodyHandle) -> Option<Vec3> {
        let i = self.bodies.index(h)?;
        Some(self.bodies.shape_offsets[i])
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
        let velocity = self.velocity_of(i)?;
        Ok(BodyState {
            kind: b.kinds[i],
            position: b.poses[i].p(),
            rotation: b.poses[i].q(),
            linear_velocity: velocity.v(),
            angular_velocity: velocity.w(),
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
        if self.bodies.frozen[i] {
            self.bodies.frozen[i] = false;
            self.bodies.relayout();
        }
        self.bodies.touch(i);
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
        self.bodies.touch_velocity(i);
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
        self.bodies.touch(i);
        Ok(())
    }
}

/// Whether a body of `kind` with `collider` is a dynamic or kinematic half-space.
pub(super) fn moving_halfspace(
    kind: crate::rigid::BodyKind,
    collider: Option<&crate::rigid::collider::Collider>,
) -> bool {
    kind != crate::rigid::BodyKind::Static && collider.is_some_and(|c| c.is_unbounded())
}

/// A dynamic or kinematic half-space beside deformable bodies: their contact certifies a
/// half-space's pairs with the plane holding still, so a moving one would pass through
/// them (a kinematic floor rising at 0.5 m/s went through a soft cube in its first frame
/// of contact).
pub(super) fn moving_halfspace_error() -> PhysicsError {
    PhysicsError::Unsupported(
        "a dynamic or kinematic half-space beside deformable bodies (their contact takes \
         half-spaces to hold still): make it static, or use a large box"
            .into(),
    )
}
