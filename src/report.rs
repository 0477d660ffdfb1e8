//! What a step returns: its timings and counts, and the events the caller may act on.

use crate::error::{AttachmentHandle, BodyHandle, DeformableHandle, JointHandle};

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
    /// Colours of the deformable vertices (static: computed at load).
    pub vertex_colors: usize,
}

/// What happened in a step that the caller may need to act on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReport {
    /// Bodies that became non-finite this step: restored to their start pose and frozen.
    pub frozen: Vec<BodyHandle>,
    /// Joints that broke this step.
    pub broken: Vec<JointHandle>,
    /// Deformable bodies that became non-finite this step: restored to their start state
    /// and frozen.
    pub frozen_deformables: Vec<DeformableHandle>,
    /// Attachments that broke this step.
    pub broken_attachments: Vec<AttachmentHandle>,
}
