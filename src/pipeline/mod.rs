//! The stages of one frame, in the order [`crate::PhysicsWorld::step`] runs them
//! ([`crate::PhysicsWorld::begin_step`] runs 1–3, [`crate::PhysicsWorld::finish_step`]
//! 4–5). Rigid bodies and deformable vertices share the step, the iteration budget and
//! the attachments between them:
//!
//! 1. [`collision::detect`]: broad phase, manifolds (the primitive narrow phase for
//!    spheres, capsules, boxes and half-spaces, parry3d for the other shapes), contact
//!    points, each with its index in the previous step (rigid bodies);
//! 2. [`dual::warm_start_joints`]: joint rows' start error, k and λ decay (Eq. 19);
//!    [`attachments::warm_start`]: the same for the vertex–body attachments;
//! 3. on the CPU backend (the GPU backend submits 3a–3d of the rigid bodies as one command
//!    buffer, `crate::gpu`, with the vertices' iterations in it, `gpu::soft`, after the
//!    host's 3a for them; `finish_step` waits for the readback and runs the vertices' 3d
//!    on the host):
//!    a. [`warm_start::contacts`]: contact records carrying the previous step's λ, k and
//!    sticking anchors (Eq. 19); [`integration::begin_step`]: the bodies' inertial targets
//!    and adaptive initial guess; [`vbd::begin_step`]: the vertices' (pinned vertices at
//!    their targets) and each deformable's coarse operator ([`coarse`]);
//!    b. [`coloring::build`]: body→constraint adjacency (CSR) and greedy body colouring (the
//!    vertices' colouring is static: computed when a deformable is added);
//!    c. [`iterate`]: `iterations` × ([`primal::sweep`] over the body colours, then
//!    [`vbd::coarse_correction`] and [`vbd::sweep`] over the vertex colours, then
//!    [`dual::update`] and [`attachments::update`]; the last dual update also writes what
//!    each contact carries to the next step);
//!    d. [`integration::end_step`]: velocities, poses, frozen non-finite bodies;
//!    [`vbd::end_step`]: the vertices' velocities and positions, frozen non-finite
//!    deformables, the momentum of isolated deformables;
//! 4. [`integration::IslandMomentum`]: momentum of isolated rigid islands (both backends);
//! 5. [`dual::fracture`] of overloaded joints and [`attachments::fracture`] of overloaded
//!    attachments at the final state, and (CPU backend) [`warm_start::store`]: what the
//!    contacts carry becomes the state the next step's points index (the GPU backend keeps
//!    it on the device).

pub mod attachments;
pub mod coarse;
pub mod collision;
pub mod coloring;
pub mod dual;
pub mod integration;
pub mod manifold;
pub mod primal;
pub mod surface_contact;
pub mod vbd;
pub mod warm_start;

use bytemuck::{Pod, Zeroable};
use glam::{Quat, Vec3};

use crate::math::{Vec6, vec6};
use crate::rigid::body::PoseRecord;

/// The fixed iteration budget on the CPU: `iterations` × (primal sweep over the colours,
/// dual update). The loop runs inside one rayon worker (`rayon::scope`), so its 2–3
/// parallel loops per iteration are forked from inside the pool instead of each being
/// injected into it from the caller's thread and waited for (~10 µs apiece).
pub fn iterate(
    cfg: &crate::config::SolverConfig,
    bodies: &crate::rigid::BodySet,
    joints: &mut crate::rigid::JointSet,
    deformables: &crate::deformable::DeformableSet,
    attachments: &mut crate::deformable::AttachmentSet,
    s: &mut SolverData,
) {
    rayon::scope(|_| {
        for i in 0..cfg.iterations {
            primal::sweep(cfg, bodies, joints, attachments, s);
            if !deformables.is_empty() {
                vbd::coarse_correction(
                    cfg,
                    deformables,
                    attachments,
                    bodies,
                    &s.iterate,
                    &mut s.vertices,
                );
                vbd::certify_iterate(cfg, deformables, bodies, &s.iterate, &mut s.vertices);
                vbd::sweep(
                    cfg,
                    deformables,
                    attachments,
                    bodies,
                    &s.iterate,
                    &mut s.vertices,
                );
            }
            let pass = if i + 1 == cfg.iterations {
                dual::Pass::Last
            } else {
                dual::Pass::Inner
            };
            dual::update(cfg, bodies, joints, s, pass);
            if !attachments.is_empty() {
                attachments::update(cfg, bodies, &s.vertices.x, &s.iterate, attachments);
            }
            if !deformables.is_empty() {
                vbd::contact_iteration(cfg, deformables, bodies, &s.iterate, &mut s.vertices);
            }
        }
    });
}

/// The current iterate of one body during a step, relative to its start pose xᵗ:
/// linear displacement `dp`, rotation `q` and its Eq. 20 difference `dtheta = q ⊖ qᵗ`.
///
/// Keeping the displacement rather than the absolute position keeps the velocity
/// `dp/h` exact to f32 relative precision, whatever the distance from the origin.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct IterateRecord {
    pub dp: [f32; 4],
    pub dtheta: [f32; 4],
    pub q: [f32; 4],
}

impl IterateRecord {
    #[inline]
    pub fn dp(&self) -> Vec3 {
        Vec3::new(self.dp[0], self.dp[1], self.dp[2])
    }
    #[inline]
    pub fn dtheta(&self) -> Vec3 {
        Vec3::new(self.dtheta[0], self.dtheta[1], self.dtheta[2])
    }
    #[inline]
    pub fn q(&self) -> Quat {
        Quat::from_array(self.q)
    }
    #[inline]
    pub fn delta6(&self) -> Vec6 {
        vec6(self.dp(), self.dtheta())
    }
    pub fn new(dp: Vec3, q: Quat, q_start: Quat) -> Self {
        Self {
            dp: dp.extend(0.0).to_array(),
            dtheta: crate::math::quat_sub(q, q_start).extend(0.0).to_array(),
            q: q.to_array(),
        }
    }
    /// Current absolute pose.
    #[inline]
    pub fn pose(&self, start: &PoseRecord) -> PoseRecord {
        PoseRecord::new(start.p() + self.dp(), self.q())
    }
}

/// Inertial target of one body: linear displacement target `y − xᵗ = h v + h² a`, and
/// `h·Lᵗ + h²·τ` (angular momentum form of the rotational inertia term).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct InertialRecord {
    pub y: [f32; 4],
    pub hl: [f32; 4],
}

/// Everything the solver stages share for one step; kept between steps so the per-frame
/// path reuses its allocations.
#[derive(Default)]
pub struct SolverData {
    pub iterate: Vec<IterateRecord>,
    pub inertial: Vec<InertialRecord>,
    /// This step's contact points (collision detection's output; what the GPU receives).
    pub points: Vec<crate::rigid::contact::ContactPoint>,
    /// This step's contact records (the CPU backend's; the GPU's stay on the device).
    pub contacts: Vec<crate::rigid::contact::ContactRecord>,
    /// What the last step's records carry, by record index (CPU backend).
    pub warm: Vec<crate::rigid::contact::ContactWarm>,
    /// The same for this step, filled by the warm start and the end of the step.
    pub warm_next: Vec<crate::rigid::contact::ContactWarm>,
    pub adjacency: coloring::Adjacency,
    /// Scratch of the adjacency's fill.
    pub adjacency_cursor: Vec<u32>,
    pub colors: coloring::Colors,
    /// Double buffer of one colour's new iterates.
    pub scratch: Vec<IterateRecord>,
    /// Scratch of the joints' penalty cap.
    pub joint_islands: dual::JointIslands,
    /// Scratch of the end-of-step momentum projection.
    pub islands: integration::IslandMomentum,
    /// The deformable vertices' iterate and inertial targets.
    pub vertices: vbd::VertexState,
}
