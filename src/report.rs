//! What a step returns: its timings and counts, and the events the caller may act on.

use crate::error::{AttachmentHandle, BodyHandle, DeformableHandle, JointHandle};

/// Timing and counts of the last step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepStats {
    pub collision_ms: f64,
    pub solver_ms: f64,
    pub total_ms: f64,
    pub contacts: usize,
    /// Rigid body pairs with at least one contact point this step: the manifolds, one per
    /// pair of primitive shapes (a compound or mesh pair may hold several).
    pub manifolds: usize,
    pub colors: usize,
    /// Deepest penetration among the contacts found this step (m).
    pub max_penetration: f32,
    /// Colours of the deformable vertices (static: computed at load).
    pub vertex_colors: usize,
    /// Time in the deformables' vertex sweeps and in their coarse step (ms).
    pub vertex_sweep_ms: f64,
    pub coarse_ms: f64,
    /// The deformables' surface contact.
    pub surface_contact: SurfaceContactStats,
}

/// What the deformables' penetration-free contact did in the last step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SurfaceContactStats {
    /// Candidate primitive pairs of the broad phase.
    pub candidates: usize,
    /// Rows of the active set at the end of the step.
    pub rows: usize,
    /// The largest lost motion β over the islands in contact: the share of the step's
    /// motion the budget could not certify (0: nothing lost).
    pub lost_motion: f32,
    /// Times an iterate left its motion cage and the broad phase ran again.
    pub rebuilds: usize,
    /// Advances whose islands stopped where their cages end, an iterate having left them,
    /// instead of running the broad phase again (`SolverConfig::contact_cage_rebuild`
    /// off). GPU backend: those of the run the step kept (a frame's first run stops so too,
    /// and runs again where the cages are rebuilt).
    pub cage_stops: usize,
    /// Tetrahedra the element-volume floor stopped on the way from X to the iterate,
    /// summed over the step's advances: their vertices were held back (0: none).
    pub floor_stopped: usize,
    /// GPU backend: 1 when the step ran a second time, because an iterate of its first run
    /// left its cages or its rows ran out of room; 0 otherwise.
    pub runs_again: usize,
    /// GPU backend: broad phases whose candidates the device found (the others ran on the
    /// host's BVHs).
    pub device_broad_phases: usize,
    /// GPU backend: the candidates those broad phases found (half-space pairs aside),
    /// which the step copies on the device instead of uploading them.
    pub device_candidates: usize,
    /// GPU backend: broad phases the device was asked for and failed (a device error, or
    /// more primitives than its records number), whose candidates the host's BVHs found
    /// instead. The first failure's error is printed to stderr.
    pub device_broad_phase_failures: usize,
    /// Time in the broad phase (cages, BVH, islands), in CCD and the advance, and in the
    /// rows' dual update (ms).
    pub broad_phase_ms: f64,
    pub ccd_ms: f64,
    pub dual_ms: f64,
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
