//! Rigid bodies: the user-facing description and the flat GPU-ready records.

use bytemuck::{Pod, Zeroable};
use glam::{Mat3, Quat, Vec3};

use crate::error::{BodyHandle, PhysicsError};
use crate::rigid::collider::Collider;

/// How a body moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BodyKind {
    /// Moved by the solver.
    #[default]
    Dynamic,
    /// Never moves; infinite mass.
    Static,
    /// Moves with its prescribed velocity; infinite mass; pushes dynamic bodies.
    Kinematic,
}

/// Everything needed to create a body.
#[derive(Clone, Debug)]
pub struct BodyDesc {
    pub kind: BodyKind,
    pub position: Vec3,
    pub rotation: Quat,
    pub linear_velocity: Vec3,
    pub angular_velocity: Vec3,
    /// Optional collider (its mass properties and density give the body's mass).
    pub collider: Option<Collider>,
    /// Overrides the mass (kg) computed from the collider's density. Required for a
    /// dynamic body without collider.
    pub mass: Option<f32>,
    /// Overrides the principal moments of inertia (kg·m², in the body frame).
    pub inertia: Option<Vec3>,
}

impl BodyDesc {
    pub fn new(kind: BodyKind) -> Self {
        Self {
            kind,
            position: Vec3::ZERO,
            rotation: Quat::IDENTITY,
            linear_velocity: Vec3::ZERO,
            angular_velocity: Vec3::ZERO,
            collider: None,
            mass: None,
            inertia: None,
        }
    }
    pub fn dynamic() -> Self {
        Self::new(BodyKind::Dynamic)
    }
    pub fn fixed() -> Self {
        Self::new(BodyKind::Static)
    }
    pub fn kinematic() -> Self {
        Self::new(BodyKind::Kinematic)
    }
    pub fn at(mut self, position: Vec3) -> Self {
        self.position = position;
        self
    }
    pub fn rotated(mut self, rotation: Quat) -> Self {
        self.rotation = rotation;
        self
    }
    pub fn with_velocity(mut self, linear: Vec3, angular: Vec3) -> Self {
        self.linear_velocity = linear;
        self.angular_velocity = angular;
        self
    }
    pub fn with_collider(mut self, collider: Collider) -> Self {
        self.collider = Some(collider);
        self
    }
    pub fn with_mass(mut self, mass: f32) -> Self {
        self.mass = Some(mass);
        self
    }
    pub fn with_inertia(mut self, principal: Vec3) -> Self {
        self.inertia = Some(principal);
        self
    }

    /// Validates the description and derives the mass record.
    pub(crate) fn validate(&self) -> Result<MassRecord, PhysicsError> {
        let bad = |field, reason: &str| PhysicsError::InvalidBody {
            field,
            reason: reason.to_string(),
        };
        if !self.position.is_finite() {
            return Err(bad("position", "not finite"));
        }
        if !self.rotation.is_finite() {
            return Err(bad("rotation", "not finite"));
        }
        if (self.rotation.length() - 1.0).abs() > 1e-3 {
            return Err(bad(
                "rotation",
                &format!("not a unit quaternion (length {})", self.rotation.length()),
            ));
        }
        if !self.linear_velocity.is_finite() {
            return Err(bad("linear_velocity", "not finite"));
        }
        if !self.angular_velocity.is_finite() {
            return Err(bad("angular_velocity", "not finite"));
        }
        if let Some(c) = &self.collider {
            c.validate()?;
        }
        if self.kind != BodyKind::Dynamic {
            return Ok(MassRecord::infinite());
        }
        if let Some(c) = &self.collider
            && !c.has_volume()
            && self.inertia.is_none()
        {
            return Err(bad(
                "collider",
                "a dynamic body needs a collider with volume (trimesh, heightfield and half-space have none) or explicit mass and inertia",
            ));
        }
        let props = self.collider.as_ref().map(|c| c.mass_properties());
        let mass = match (self.mass, &props) {
            (Some(m), _) => m,
            (None, Some(p)) => p.mass,
            (None, None) => return Err(bad("mass", "a dynamic body needs a mass or a collider")),
        };
        if !(mass.is_finite() && mass > 0.0) {
            return Err(bad("mass", &format!("must be finite and > 0, got {mass}")));
        }
        let (inertia, frame) = match (self.inertia, &props) {
            (Some(i), _) => (i, Quat::IDENTITY),
            (None, Some(p)) => {
                // Scale the collider's inertia with the mass override, if any.
                let s = mass / p.mass;
                (p.principal_inertia * s, p.principal_frame)
            }
            (None, None) => {
                // Point-like body without collider: a small sphere of radius 0.1 m.
                (Vec3::splat(0.4 * mass * 0.01), Quat::IDENTITY)
            }
        };
        if !(inertia.is_finite() && inertia.min_element() > 0.0) {
            return Err(bad(
                "inertia",
                &format!("principal moments must be finite and > 0, got {inertia}"),
            ));
        }
        Ok(MassRecord {
            inv_mass: 1.0 / mass,
            mass,
            friction: [0.0; 2],
            inertia: inertia.extend(0.0).to_array(),
            inertia_frame: frame.to_array(),
        })
    }
}

/// Pose of one body: position and unit quaternion, 16-byte aligned fields (GPU std430 friendly).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct PoseRecord {
    pub position: [f32; 4],
    pub rotation: [f32; 4],
}

impl PoseRecord {
    pub fn new(p: Vec3, q: Quat) -> Self {
        Self {
            position: p.extend(0.0).to_array(),
            rotation: q.to_array(),
        }
    }
    #[inline]
    pub fn p(&self) -> Vec3 {
        Vec3::new(self.position[0], self.position[1], self.position[2])
    }
    #[inline]
    pub fn q(&self) -> Quat {
        Quat::from_array(self.rotation)
    }
}

/// Linear and angular velocity of one body.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct VelocityRecord {
    pub linear: [f32; 4],
    pub angular: [f32; 4],
}

impl VelocityRecord {
    pub fn new(v: Vec3, w: Vec3) -> Self {
        Self {
            linear: v.extend(0.0).to_array(),
            angular: w.extend(0.0).to_array(),
        }
    }
    #[inline]
    pub fn v(&self) -> Vec3 {
        Vec3::new(self.linear[0], self.linear[1], self.linear[2])
    }
    #[inline]
    pub fn w(&self) -> Vec3 {
        Vec3::new(self.angular[0], self.angular[1], self.angular[2])
    }
}

/// Mass properties: the principal moments in the body's principal frame.
/// Static and kinematic bodies have `inv_mass = 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct MassRecord {
    pub mass: f32,
    pub inv_mass: f32,
    /// Static and dynamic friction coefficients of the body's collider (0 without one):
    /// a contact uses the geometric means of its two bodies'.
    pub friction: [f32; 2],
    /// Principal moments of inertia (xyz), kg·m².
    pub inertia: [f32; 4],
    /// Rotation from the principal frame to the body frame.
    pub inertia_frame: [f32; 4],
}

impl MassRecord {
    pub fn infinite() -> Self {
        Self {
            mass: 0.0,
            inv_mass: 0.0,
            friction: [0.0; 2],
            inertia: [0.0; 4],
            inertia_frame: Quat::IDENTITY.to_array(),
        }
    }
    #[inline]
    pub fn is_dynamic(&self) -> bool {
        self.inv_mass > 0.0
    }
    /// World-space inertia tensor `R I Rᵀ` for a body with rotation `q`.
    #[inline]
    pub fn world_inertia(&self, q: Quat) -> Mat3 {
        let r = Mat3::from_quat(q * Quat::from_array(self.inertia_frame));
        let d = Mat3::from_diagonal(Vec3::new(self.inertia[0], self.inertia[1], self.inertia[2]));
        r * d * r.transpose()
    }
}

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
    /// What the CPU wrote since the GPU backend last uploaded the bodies.
    pub(crate) edits: BodyEdits,
}

/// What the CPU wrote into a [`BodySet`] since the GPU backend last uploaded it. The device
/// keeps the body state from step to step, so a step after which the CPU wrote nothing
/// uploads nothing and compares nothing: its host work does not grow with the bodies.
#[derive(Default)]
pub(crate) struct BodyEdits {
    /// Bodies whose pose, velocity or force the CPU wrote (any order, repeats allowed).
    pub(crate) touched: Vec<u32>,
    /// Of those, the bodies whose velocity the CPU wrote. Where the device alone holds the
    /// velocities (`SolverConfig::gpu_velocity_readback` off), only these bodies' go up:
    /// the CPU's copy of the others is stale.
    pub(crate) velocities: Vec<u32>,
    /// Every body's state goes up (bodies added or removed, the CPU integrated them, or
    /// more were touched than a list is worth).
    pub(crate) all: bool,
    /// Counts the changes to what is not state: bodies added or removed, a body frozen or
    /// thawed (kinds, masses, colliders, the solver's flags and the broad phase's layout
    /// follow from these).
    pub(crate) layout: u64,
}

impl BodyEdits {
    /// The state is uploaded and nothing is pending.
    pub(crate) fn clear_state(&mut self) {
        self.touched.clear();
        self.velocities.clear();
        self.all = false;
    }
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
    pub(crate) fn index(&self, h: BodyHandle) -> Option<usize> {
        match self.index_of.get(h.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }
    /// Records that the CPU wrote body `i`'s pose, velocity or force.
    pub(crate) fn touch(&mut self, i: usize) {
        let e = &mut self.edits;
        if e.all {
            return;
        }
        // Past a quarter of the bodies, a whole upload costs less than the list.
        if 4 * e.touched.len() >= self.handles.len() {
            self.touch_all();
        } else {
            e.touched.push(i as u32);
        }
    }
    /// Records that the CPU wrote body `i`'s velocity (and its previous velocity).
    pub(crate) fn touch_velocity(&mut self, i: usize) {
        self.edits.velocities.push(i as u32);
        self.touch(i);
    }
    /// Records that the CPU wrote every body's state.
    pub(crate) fn touch_all(&mut self) {
        self.edits.all = true;
        self.edits.touched.clear();
    }
    /// Records a change of what is not state (and of the state: indices may have moved).
    pub(crate) fn relayout(&mut self) {
        self.edits.layout += 1;
        self.touch_all();
    }
}
