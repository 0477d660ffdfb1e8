//! wgpu compute backend: the whole step — collision detection where the device handles
//! every collider (broad phase, narrow phase, contact persistence), inertial targets and
//! initial guess, per-step body colouring, the iteration loop (primal sweeps per colour, in
//! place, dual updates of contacts and joints), velocities and poses — recorded in one
//! command submission, on the same records the CPU backend uses (`shaders/common.wgsl`
//! prepended to `broad_phase.wgsl` with `scan.wgsl`, `integration.wgsl`,
//! `contact_warm.wgsl` with `contact_narrow.wgsl`, `adjacency.wgsl`, `coloring.wgsl`,
//! `avbd.wgsl` with `joints.wgsl`; `penalties.wgsl` in the warm start's
//! module and the solver's).
//!
//! # One step on the GPU backend
//!
//! 1. CPU. When every collider is a sphere, capsule, box or half-space (and the config
//!    keeps the primitive narrow phase), nothing per pair or contact: the device's broad
//!    phase (`broad_phase.wgsl`: a hash grid, the pairs of each body written in its own
//!    range and sorted, each with its index in the last step's list) and narrow phase
//!    (`contact_narrow.wgsl`: the port of `pipeline::collision::primitive` and its
//!    persistence) make each pair's manifold and the warm-started records of its points,
//!    four record slots per pair; the CPU only sorts the colliders into the grid's classes
//!    when they change ([`crate::pipeline::collision::grid`]). Otherwise the CPU's
//!    collision detection makes this step's contact points (64 bytes each: bodies, normal,
//!    lever arms, start errors) and each point's index in the previous step's records, and
//!    they go up. The heaviest body of each joint's island (the cap of the joints'
//!    load-aware floor, `dual::JointIslands`) is found again only when joints or bodies
//!    were added, removed, broken, frozen or thawed.
//! 2. Upload. The body state (poses, velocities, last velocities, external forces, masses,
//!    flags) is resident on the device: only the records of the bodies the CPU recorded
//!    writing go up (`BodySet::edits`; [`GpuSolver::body_upload_bytes`], zero in a step
//!    after which the CPU wrote no body), and the masses, flags, colliders and classes
//!    only when a body was added, removed, frozen or thawed (then by difference). The
//!    joint records and the jointed pairs go up, by difference, only when joints were
//!    added, removed or broken or a body was removed (`JointSet::edit_key`); each joint's
//!    heaviest island body is compared every step. The joints' row states stay on the
//!    device; the CPU's copy goes up only after joints were added or removed
//!    (`PhysicsWorld` reads the device's back first). What
//!    changes every step goes up whole: the contact points (when the CPU found them),
//!    written in parallel into a persistent mapped staging buffer (the upload
//!    belt) and copied into place at the start of the step's command buffer. Buffers grow
//!    by doubling, so a steady scene never reallocates ([`GpuSolver::reallocations`]).
//! 3. One submission: the last accepted step's joint row states copied into the carried
//!    ones (a step run again reads the same); the broad phase (device contacts only);
//!    `begin_bodies` (inertial targets and the adaptive initial guess,
//!    `integration::begin_step`); `warm_start_contacts` (`contact_warm.wgsl`, the formulas
//!    of `pipeline::warm_start`: each point becomes a 96-byte contact record carrying the
//!    λ, k, stick flag and anchors its previous record left, read by index from the
//!    resident carried state); `warm_start_joints` (`joints.wgsl`, `dual::warm_start_joints`:
//!    start errors, hinge angles, Eq. 19 from the carried row states); the body →
//!    constraint adjacency (`adjacency.wgsl`:
//!    counts, a prefix sum, an atomic fill, and a sort of each body's list into the CPU's
//!    order, so that it is the list [`crate::pipeline::coloring::build_adjacency`] builds);
//!    Jones–Plassmann–Luby colouring (`coloring.wgsl`: fixed
//!    hash priorities, seeded with the last step's colours, a palette of at most
//!    [`MAX_COLORS`] colours, up to [`JPL_ROUNDS`] rounds over a worklist of the bodies
//!    the seeds left uncoloured (as many as the last step needed, see `rounds`; a step
//!    in which no body is solved, as in a deformable scene over fixed and kinematic
//!    bodies, records neither this nor the adjacency nor the primal sweeps); a
//!    colouring from scratch, in the first step, gives the smaller index the priority
//!    over [`SCRATCH_ROUNDS`] rounds and makes the CPU's greedy colouring; after a
//!    step whose rounds coloured a body a re-greedy pass over the classes, a serial
//!    fallback group, compaction into per-colour ranges and indirect dispatch
//!    arguments); `iterations` × (primal per colour through indirect dispatches, the serial
//!    group one body per dispatch, dual of contacts, dual of joints); `end_bodies`
//!    (velocities, poses, the non-finite guard and the angular speed cap of
//!    `integration::end_step`), `fracture_joints` (`dual::fracture`, at the final poses and
//!    multipliers, where a joint is breakable) and `store_contact_warm` (what each contact carries to the
//!    next step, into the other of two alternating carried-state buffers: it never leaves
//!    the device); then a copy of the results into a staging buffer. The
//!    number of colour and serial dispatches recorded per sweep is a capacity: a step
//!    whose colouring needs more is run again from the CPU's copy of its start state (and
//!    the device's copy of the velocities, where they stay on the device) with more (the
//!    results are identical to a run with enough capacity, so determinism
//!    holds); the colours' comes down every [`COLOR_WINDOW`] steps to the most a step of
//!    the window used. Colours beyond the ones used are empty indirect dispatches.
//! 4. Readback: [`GpuSolver::submit`] requests the map of one of two `MAP_READ` staging
//!    buffers, used alternately, and returns; [`GpuSolver::finish`] waits for it and copies
//!    out the poses, the velocities (unless they stay on the device:
//!    `SolverConfig::gpu_velocity_readback` off, then read on demand), the non-finite
//!    flags, each joint's fracture flag (where a joint
//!    is breakable; the CPU marks those broken), the colouring summary and, when the
//!    device found the contacts, a status block (pairs, touching pairs, points, deepest
//!    penetration, islands anchored nowhere). Nothing per contact or pair: the records and
//!    the pair list stay on the device ([`GpuSolver::contacts`] and
//!    [`GpuSolver::pair_list`] read them on demand). When the device found the contacts,
//!    it also restored the momentum of isolated islands before the copy (`islands.wgsl`:
//!    connected components over the touching pairs and joints; `momentum.wgsl`: the
//!    islands' sums in 64-bit fixed point, the correction of their velocities); otherwise
//!    the CPU does, over a union–find of its own contacts (`integration::IslandMomentum`;
//!    the bodies it corrects go up next step).
//!
//! # Latency
//!
//! Collision detection of step t+1 needs the poses at the end of step t, and those come
//! out of the iterations of step t, so step t+1 cannot begin before step t is read back.
//! What the CPU can do while the GPU solves is the caller's own work:
//! [`crate::PhysicsWorld::begin_step`] submits and returns,
//! [`crate::PhysicsWorld::finish_step`] waits and reads back (`step` is the two in a row;
//! the ECS layer's `StepMode::Overlapped` finishes a run's step at the start of the next
//! run). The results are the same bits either way. The two staging buffers alternate so
//! that a step's copy never targets the buffer the CPU read the previous step from.
//! With the contacts found on the device, the CPU's part of a steady step is O(bodies) only
//! in copying the poses and velocities out.

//! # Where each part lives
//!
//! - this module: the public types ([`Backend`], [`GpuError`], [`GpuMemory`],
//!   [`GpuTimings`], [`GpuColoring`]) and the [`GpuSolver`] that owns everything below;
//! - `device`: opening the adapter and device, the initial buffers;
//! - `pipelines`: the WGSL sources, bind group layouts, pipelines and bind groups;
//! - `buffers`: the slot of every device buffer, growth, the upload by difference and the
//!   upload belt, blocking reads;
//! - `step`: one step — sizing, upload, submission and readback;
//! - `record`: the step's passes recorded in one command buffer;
//! - `readback`: on-demand reads of what stays on the device (tests and tools);
//! - [`narrow`]: the primitive narrow phase kernels standalone (tests and tools; the step
//!   runs the same code through `contact_narrow.wgsl`);
//! - `soft`: the deformable bodies' iterations (`vbd.wgsl`: the vertex colours' block
//!   solves, the two-level step's correction and its line search, the attachments' dual
//!   update), recorded into the step's command buffer after each primal sweep and dual
//!   update of the bodies;
//! - `soft_contact`: the deformables' penetration-free contact (`surface_contact.wgsl`,
//!   `contact_bodies.wgsl`): the rows in the vertex solves and in the moving bodies' 6×6
//!   systems, their dual update, the CCD advance of the certified configuration;
//! - [`ccd`]: the additive CCD kernel and the earliest time of impact per point,
//!   standalone (the step's contact stage runs the same `ccd_core.wgsl`).
//!
//! # llvmpipe / lavapipe
//!
//! Mesa's software rasteriser caps the loop iterations of one shader invocation at 65,535
//! and silently stops the loop after that. Every kernel keeps its invocations short (one
//! body, contact or joint each; the serial group is one dispatch per body), but a single
//! body touched by many hundreds of contact points can exceed the cap there (its assembly
//! runs up to about 100 loop iterations per contact point, fewer where the driver unrolls
//! the fixed-size loops); real GPUs have no such cap.

use bytemuck::{Pod, Zeroable};

use crate::config::SolverConfig;
use crate::pipeline::collision::DevicePairs;
use crate::pipeline::{InertialRecord, IterateRecord, SolverData};
use crate::report::StepReport;
use crate::rigid::body::BodyKind;
use crate::rigid::body::{MassRecord, PoseRecord, VelocityRecord};
use crate::rigid::contact::{ContactPoint, ContactRecord, ContactWarm};
use crate::rigid::joint::{JointRecord, JointRowState};
use crate::rigid::{BodySet, JointSet};

pub mod broad;
mod buffers;
pub mod ccd;
pub mod contact_broad;
mod device;
mod finish;
mod kernel_clock;
pub mod narrow;
mod pipelines;
mod readback;
mod record;
mod recording;
mod soft;
mod soft_contact;
mod step;

pub use kernel_clock::KernelTime;
pub use soft::{DeformableStep, VBD_SHADER};

use buffers::*;
use pipelines::Pipelines;
use step::{InFlight, Timestamps};

pub use pipelines::{
    ADJACENCY_SHADER, COLORING_SHADER, CONTACT_WARM_SHADER, INTEGRATION_SHADER, SHADER,
};

/// Bodies per workgroup of the adjacency's prefix sum (`adjacency.wgsl`, `SCAN_WG`).
const ADJ_SCAN_BLOCK: u32 = 256;
/// Most colours the GPU colouring uses; bodies that cannot get one go to the serial group.
pub const MAX_COLORS: u32 = 64;
/// Jones–Plassmann–Luby rounds a step may use; bodies still uncoloured after them go to the
/// serial group.
pub const JPL_ROUNDS: u32 = 48;
/// Rounds recorded at the least: a steady scene's seeded colouring needs fewer.
pub const MIN_ROUNDS: u32 = 4;
/// Rounds of a colouring from scratch (the first step, or the first after the seeds'
/// buffers grew): the most the rounds' stamps allow (`coloring.wgsl`). The smaller index
/// has the priority in all but the last [`SCRATCH_ROUNDS`] − [`SCRATCH_INDEX_ROUNDS`],
/// which finish by the hash what chains longer than that left.
pub const SCRATCH_ROUNDS: u32 = 255;
/// Of [`SCRATCH_ROUNDS`], those in which the smaller index has the priority.
pub const SCRATCH_INDEX_ROUNDS: u32 = 207;
/// Steps after which the colour dispatches recorded per sweep come down to the most a step
/// of those used.
pub const COLOR_WINDOW: u32 = 32;
/// The colour reported by [`GpuColoring::color_of`] for bodies of the serial group.
pub const SERIAL_GROUP: u32 = MAX_COLORS;
/// The colour reported by [`GpuColoring::color_of`] for bodies that are not solved.
pub const NOT_SOLVED: u32 = u32::MAX;

/// Which solver runs the iterations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// The GPU if an adapter is found, else the CPU.
    #[default]
    Auto,
    /// Always the CPU (rayon).
    Cpu,
    /// The GPU; an error if no adapter is found.
    Gpu,
}

/// Why the GPU backend could not start.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GpuError {
    #[error("no GPU adapter found (wgpu backends from WGPU_BACKEND or all)")]
    NoAdapter,
    #[error("the adapter `{adapter}` cannot run the solver: {reason}")]
    Unsupported { adapter: String, reason: String },
    #[error("GPU device request failed: {0}")]
    Device(String),
    #[error("GPU readback failed: {0}")]
    Readback(String),
    #[error("GPU error during a step: {0}")]
    Step(String),
}

/// An adjacency in CSR form: `(offsets, items)`, body i's items at
/// `items[offsets[i]..offsets[i + 1]]`.
pub type CsrLists = (Vec<u32>, Vec<u32>);

/// GPU memory of the solver's buffers, from their sizes.
///
/// `bytes_per_*` add up the record sizes of every buffer that grows with bodies, contacts or
/// joints (device buffers, the upload belt for what goes up whole every step, and both
/// readback staging buffers for what is read back);
/// `deformable_bytes` is what the deformable half has allocated (vertices, elements,
/// colouring, coarse factors, attachments, the contact stage and their staging buffer);
/// `total_bytes` is what is allocated now (capacities, including the doubling slack, the
/// fixed buffers, the staging buffers and `deformable_bytes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuMemory {
    pub bytes_per_body: u64,
    pub bytes_per_contact: u64,
    pub bytes_per_joint: u64,
    /// Per candidate pair when the device finds the contacts: the pair lists, what it
    /// carries to the next step and its point count, two buffers of each (the pair's four
    /// contact slots count as contacts).
    pub bytes_per_pair: u64,
    /// Buffers whose size does not depend on the scene (parameters, colour slots, ranges,
    /// dispatch arguments, counters, timestamp queries).
    pub fixed_bytes: u64,
    pub deformable_bytes: u64,
    pub total_bytes: u64,
}

/// GPU time of the last step per stage, from timestamp queries written at the beginning
/// and end of each compute pass (one per stage: begin, contact warm start, adjacency,
/// colouring, a primal and a dual pass per iteration, end, contact store; with
/// deformables, their passes in each iteration and at the end). `supported` is
/// false, and the times zero, when the step was not timed: the adapter lacks
/// `Features::TIMESTAMP_QUERY`, or the step has more passes than one query set holds (over
/// 1,021 iterations).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuTimings {
    pub supported: bool,
    /// The broad phase on the device (zero when the contacts come from the CPU).
    pub broad_phase_ms: f64,
    /// Inertial targets and initial guess before the iterations, velocities and poses
    /// after them.
    pub integration_ms: f64,
    /// The contact records from this step's points and the carried state (with the
    /// narrow phase, when the device finds the points: one kernel does both), and the
    /// store of what they carry to the next step.
    pub warm_start_ms: f64,
    /// The body → constraint adjacency (counts, prefix sum, fill, per-body sort).
    pub adjacency_ms: f64,
    /// The colouring: seeds, rounds, counts, ranges and dispatch arguments.
    pub coloring_ms: f64,
    pub primal_ms: f64,
    pub dual_ms: f64,
    /// The deformables' vertex sweeps (with the two-level step's correction).
    pub deformable_ms: f64,
    /// The deformables' contact: the rows' terms on the moving bodies, the dual update
    /// of contact rows and attachments with the advance of the certified configuration
    /// (CCD), and the coupled bodies' frame end.
    pub deformable_contact_ms: f64,
    /// From the first pass's start to the last pass's end: the step's whole GPU time,
    /// gaps between passes included.
    pub span_ms: f64,
    /// Host side of the last step, wall clock (always measured): preparing the step,
    /// staging and encoding the uploads, submitting and waiting for the mapped readback
    /// (GPU execution and both transfers), and copying the results out.
    pub host: GpuHostTimes,
}

/// What the last step's submission moved over the bus and how many dispatches it recorded
/// (a step run again because the colouring needed more colour dispatches counts its last
/// submission).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuTraffic {
    /// Bytes written to the device: parameters, changed bodies, joints, contact points.
    pub upload_bytes: u64,
    /// Of `upload_bytes`, the per-body state (poses, velocities, forces, masses, flags):
    /// zero in a step after which the CPU changed no body.
    pub body_upload_bytes: u64,
    /// Bytes copied into the readback buffer: poses, velocities, status, joint states,
    /// colour ranges, timestamps.
    pub download_bytes: u64,
    /// Compute dispatches, indirect ones included.
    pub dispatches: u32,
    pub indirect_dispatches: u32,
    /// Submissions the step took: 1, more where it ran again (colours, rows or pairs past
    /// what was recorded, a deformable iterate out of its cages). Bytes and dispatches
    /// above are the last submission's, uploads all of them'.
    pub submissions: u32,
}

impl GpuTimings {
    /// The stages in step order, by name (the names of `avbd run --json`'s
    /// `timings_ms`).
    pub fn stages(&self) -> [(&'static str, f64); 9] {
        [
            ("broad_phase", self.broad_phase_ms),
            ("integration", self.integration_ms),
            ("warm_start", self.warm_start_ms),
            ("adjacency", self.adjacency_ms),
            ("coloring", self.coloring_ms),
            ("primal", self.primal_ms),
            ("dual", self.dual_ms),
            ("deformable", self.deformable_ms),
            ("deformable_contact", self.deformable_contact_ms),
        ]
    }
}

/// Wall-clock phases of a step on the host ([`GpuSolver::submit`], [`GpuSolver::finish`]; ms).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuHostTimes {
    /// Before the upload: the constraint ends for the momentum projection (the adjacency
    /// itself is built on the device), body flags, buffer sizes and bind groups.
    pub prepare_ms: f64,
    pub upload_ms: f64,
    pub wait_ms: f64,
    pub unpack_ms: f64,
}

/// The GPU colouring of the last step (read back on demand, for tests and tools).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuColoring {
    /// Colour of each body by solver index: `0..MAX_COLORS`, [`SERIAL_GROUP`], or
    /// [`NOT_SOLVED`] for static, kinematic and frozen bodies.
    pub color_of: Vec<u32>,
    /// Colours in use (highest colour + 1).
    pub colors: u32,
    /// Palette of the step: [`MAX_COLORS`] (a body's smallest free colour never exceeds its
    /// number of neighbours, so a smaller palette would colour the same).
    pub palette: u32,
    /// Bodies of the serial group, in solve order.
    pub serial: Vec<u32>,
    /// Bodies that were still uncoloured after the rounds ([`JPL_ROUNDS`], or
    /// [`SCRATCH_ROUNDS`] in a colouring from scratch; part of `serial`).
    pub out_of_rounds: u32,
    /// Bodies that went through the rounds: those the last step's colours did not seed.
    pub worklist: u32,
    /// Rounds recorded in the step, and the last of them in which a body took a colour.
    pub rounds: u32,
    pub rounds_used: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct Params {
    dt: f32,
    alpha: f32,
    beta_linear: f32,
    beta_angular: f32,
    k_max: f32,
    lambda_max: f32,
    n_contacts: u32,
    n_joints: u32,
    n_bodies: u32,
    palette: u32,
    contact_shift: u32,
    /// Largest workgroup count per grid dimension (the primal sweep's 2-D grid).
    max_groups: u32,
    max_angular_speed: f32,
    gamma: f32,
    k_start: f32,
    new_row_mass_ratio: f32,
    floor_mass_ratio: f32,
    contact_error_scale: f32,
    /// Contacts of the last step (the length of the carried state the warm start reads).
    n_prev_contacts: u32,
    /// Candidate pairs when the device finds the contacts (`contact_narrow.wgsl`), else 0.
    n_pairs: u32,
    gravity: [f32; 4],
    margin: f32,
    /// Colour classes the colouring's re-greedy pass covers (`color_regreedy` dispatches).
    color_classes: u32,
    /// The joints' warm start: SolverConfig::joint_error_scale.
    joint_error_scale: f32,
    /// log2 of the contact records per contact item of the adjacency: 2 where the device
    /// finds the contacts (an item is a pair and its four slots, `adjacency.wgsl`), else 0.
    contact_slots_log2: u32,
}

const WORKGROUP: u32 = 64;

/// `body_flags` bits (`integration.wgsl`, `coloring.wgsl`).
const FLAG_SOLVED: u32 = 1;
const FLAG_KINEMATIC: u32 = 2;

fn elapsed_ms(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The GPU solver: device, pipelines and the resident buffers.
pub struct GpuSolver {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    pipelines: Pipelines,
    layouts: pipelines::build::Layouts,
    params: wgpu::Buffer,
    /// Dynamic-offset slots: colour c < 64, then serial-group position k at 64 + k.
    slots: wgpu::Buffer,
    slot_count: u64,
    buffers: Vec<DeviceBuffer>,
    /// Bytes last uploaded to each tracked buffer.
    shadow: Vec<Vec<u8>>,
    staging: [DeviceBuffer; 2],
    belt: UploadBelt,
    pending: Option<InFlight>,
    frame: u64,
    timestamps: Option<Timestamps>,
    solver_group: Option<wgpu::BindGroup>,
    /// The colouring's group seeding from `COLOR_SEEDS[side]`, for each side (the side is
    /// `carried_side`: both flip when a step is accepted).
    coloring_groups: Option<[wgpu::BindGroup; 2]>,
    integration_group: Option<wgpu::BindGroup>,
    /// The warm start's group reading `CARRIED[side]`, for each side.
    warm_groups: Option<[wgpu::BindGroup; 2]>,
    /// Which of `CARRIED` holds what the last step's contacts carry.
    carried_side: usize,
    /// `JointSet::edits` of the row states in `JOINT_CARRIED` when the CPU's copy went up
    /// (`None`: never).
    joints_uploaded: Option<u64>,
    /// A step was accepted since: its row states (`JOINT_STATES`) are what the next step
    /// warm-starts from, and go to `JOINT_CARRIED` when it begins.
    joint_carry: bool,
    /// The device's row states are newer than the CPU's copy (`JointSet::states`), which
    /// is brought up to date only before joints are added or removed.
    joint_states_newer: bool,
    /// The device's row states, read back whole at the first [`Self::joint_state`] after a
    /// submission (`frame`), so that asking for many joints' forces reads once.
    joint_cache: std::sync::Mutex<(u64, Vec<JointRowState>)>,
    /// The step in flight keeps the bodies' velocities on the device (the readback holds
    /// the poses only; [`Self::keeps_velocities`]).
    velocities_stay: bool,
    /// The device's velocities and previous velocities are newer than the CPU's copy,
    /// except for the bodies the CPU wrote since (`BodyEdits::velocities`); brought up to
    /// date by [`Self::pull_velocities`].
    velocities_newer: bool,
    /// A step run again where the velocities stay: it starts from their copy in
    /// `VELOCITY_START` (the first run overwrote them).
    restore_velocities: bool,
    /// Test hook: the next step runs again once ([`Self::run_again_once`]).
    run_again_once: bool,
    /// The device's velocities, read back whole at the first [`Self::velocity`] after a
    /// submission (`frame`).
    velocity_cache: std::sync::Mutex<(u64, Vec<VelocityRecord>)>,
    /// The deformable contact's broad phase on this device, built at its first use.
    contact_broad: Option<std::sync::Arc<contact_broad::GpuContactBroadPhase>>,
    /// The margins of its lower bounds (`CcdMargins::WGSL` but in tests).
    contact_broad_margins: ccd::CcdMargins,
    /// Test hook: the contact broad phase fails ([`Self::contact_broad_phase_fails`]).
    contact_broad_fails: bool,
    /// The broad phase's parameters (`BroadParams`) and its group for each side.
    broad_params: wgpu::Buffer,
    broad_groups: Option<[wgpu::BindGroup; 2]>,
    /// The prefix sums' lengths (buckets, pairs) and groups: the buckets', then the pairs'
    /// for each side.
    scan_params: [wgpu::Buffer; 2],
    scan_groups: Option<[wgpu::BindGroup; 3]>,
    /// The islands' group for each side.
    island_groups: Option<[wgpu::BindGroup; 2]>,
    /// The momentum projection's group (`momentum.wgsl`).
    momentum_group: Option<wgpu::BindGroup>,
    /// Pairs the device's broad phase found in the last step (0 when the CPU found the
    /// contacts).
    last_pairs: u32,
    /// Pairs the device's pair list holds: grows (the step is then run again) when the
    /// broad phase finds more, never shrinks.
    pair_capacity: u32,
    slot_group: wgpu::BindGroup,
    /// The buffer behind `scratch_slot_group` (written once, at creation).
    _scratch_slots: wgpu::Buffer,
    /// The rounds' slots of a colouring from scratch: round j, by index below
    /// [`SCRATCH_INDEX_ROUNDS`].
    scratch_slot_group: wgpu::BindGroup,
    /// The colour seeds hold no colouring yet (made, or grown, since the last accepted
    /// step): the step colours from scratch, in the CPU's order.
    seeds_fresh: bool,
    /// Whether the step in flight colours from scratch.
    scratch_step: bool,
    /// Off: the seeds are never written as uncoloured ([`Self::colour_from_scratch`]).
    scratch_coloring: bool,
    /// The deformable bodies' half of the step (made with the first deformable step), and
    /// whether the step in flight runs it.
    soft: Option<soft::SoftStep>,
    soft_active: bool,
    /// The primal's group 2 (`soft`: attachments) of a world without them.
    no_coupling: wgpu::BindGroup,
    /// The colouring rounds' dispatch arguments (`color_work_args` writes them through
    /// `round_args_group`).
    round_args: wgpu::Buffer,
    round_args_group: wgpu::BindGroup,
    /// The narrow phase worklist's dispatch arguments (`narrow_work_args` writes them
    /// through `narrow_args_group`).
    narrow_args: wgpu::Buffer,
    narrow_args_group: wgpu::BindGroup,
    /// Per body: solved, kinematic (`FLAG_*`), for the layout generation
    /// `BodyEdits::layout` in `flags_layout`.
    flags: Vec<u32>,
    flags_layout: Option<u64>,
    /// Whether any body is solved (a `FLAG_SOLVED` in `flags`): a step with none records
    /// no adjacency, colouring or primal sweep (a deformable scene over fixed and
    /// kinematic bodies).
    solves_bodies: bool,
    /// Whether the device's body state may differ from the CPU's beyond the bodies the
    /// CPU touched since (a new or grown buffer, a step run again): it all goes up.
    state_stale: bool,
    /// Per buffer: the key (`upload_keyed`) whose data it holds.
    uploaded_key: Vec<Option<UploadKey>>,
    /// Scratch of `upload_body_state`: the touched bodies, sorted, and their runs.
    touched: Vec<u32>,
    touched_runs: Vec<(usize, usize)>,
    last_colors: u32,
    last_palette: u32,
    last_serial: u32,
    last_timings: GpuTimings,
    /// Per-kernel timestamps inside the deformables' passes, where the device can write
    /// them; used while `kernel_timing` (`SolverConfig::gpu_kernel_timings`) is set.
    kernel_clock: Option<kernel_clock::KernelClock>,
    kernel_timing: bool,
    last_kernel_timings: Vec<KernelTime>,
    last_traffic: GpuTraffic,
    counts: (usize, usize, usize),
    /// Colour dispatches recorded per sweep: grows to the colours a step used (the step is
    /// then run again); every [`COLOR_WINDOW`] steps it shrinks to the most colours a step
    /// of the window used (the re-greedy pass lowers the count after a rise).
    color_capacity: u32,
    /// The most colours a step used since the window began, and the steps in it.
    color_peak: u32,
    color_window: u32,
    /// Serial-group dispatches recorded per sweep: grows to the serial bodies a step had
    /// (the step is then run again), never shrinks.
    serial_capacity: u32,
    /// Re-greedy dispatches recorded per step: grows to the colours the rounds left (the
    /// step is then run again), never shrinks.
    class_capacity: u32,
    /// Whether the step records the re-greedy pass: after a step whose rounds coloured a
    /// body (and in the first), unless it colours from scratch ([`Self::regreedy_recorded`]).
    regreedy: bool,
    /// Colouring rounds recorded per step: twice the rounds the last step used, at least
    /// [`MIN_ROUNDS`], at most [`JPL_ROUNDS`] (a step left with uncoloured bodies by fewer
    /// is run again with all of them).
    rounds: u32,
    /// The rounds the last finished step recorded.
    last_rounds: u32,
    /// Rounds pinned by a test ([`Self::pin_rounds`]).
    pinned_rounds: Option<u32>,
    /// Contacts per contact chunk: `1 << contact_shift`.
    contact_shift: u32,
    /// Largest storage binding and buffer the device allows (bytes).
    max_binding: u64,
    /// Workgroups per dispatch dimension.
    max_groups: u32,
    /// Buffer reallocations so far (steady scenes stop reallocating).
    pub reallocations: u64,
}

/// A 2-D grid of `groups` workgroups with at most `max` per dimension (kernels that take
/// it compute their index as `x + y · width`).
pub(super) fn grid(groups: u32, max: u32) -> (u32, u32) {
    let x = groups.clamp(1, max.max(1));
    (x, groups.div_ceil(x))
}

fn params_size() -> u64 {
    std::mem::size_of::<Params>() as u64
}

impl GpuSolver {
    /// The deformable contact's broad phase on this device (`contact_broad`), for the
    /// contact set-up on the host to call, where `cfg` puts it on the device.
    pub(crate) fn contact_broad_phase(
        &mut self,
        cfg: &SolverConfig,
    ) -> Option<std::sync::Arc<dyn crate::pipeline::surface_contact::DeviceBroadPhase>> {
        use crate::config::ContactBroadPhase;
        let on_device = match cfg.gpu_contact_broad_phase {
            ContactBroadPhase::Auto => self.info.device_type != wgpu::DeviceType::Cpu,
            ContactBroadPhase::Device => true,
            ContactBroadPhase::Host => false,
        };
        if let Some(finder) = &self.contact_broad {
            // A frame's traffic starts here (its runs again add to it).
            finder.reset_traffic();
        }
        if !on_device {
            return None;
        }
        let (device, queue) = (&self.device, &self.queue);
        let margins = self.contact_broad_margins;
        let finder = self.contact_broad.get_or_insert_with(|| {
            std::sync::Arc::new(contact_broad::GpuContactBroadPhase::on(
                device.clone(),
                queue.clone(),
            ))
        });
        Some(std::sync::Arc::new(contact_broad::StepBroadPhase {
            finder: finder.clone(),
            margins,
            fails: self.contact_broad_fails,
        }))
    }

    /// Test hook: every contact broad phase on the device fails, as a device error would
    /// make it (the host's BVHs then find the candidates).
    pub(crate) fn contact_broad_phase_fails(&mut self, on: bool) {
        self.contact_broad_fails = on;
    }

    /// Test hook: the device's contact broad phase bounds distances with the CPU's margins
    /// (on a device that computes like the CPU, it then finds the host's candidates bit for
    /// bit), or with its own (`CcdMargins::WGSL`, the default).
    pub(crate) fn contact_broad_phase_with_cpu_margins(&mut self, on: bool) {
        self.contact_broad_margins = match on {
            true => ccd::CcdMargins::CPU,
            false => ccd::CcdMargins::WGSL,
        };
    }

    /// Bytes the last deformable step's contact broad phases on the device (its first run's
    /// and any run again's) wrote to the device and read back.
    pub fn contact_broad_phase_traffic(&self) -> (u64, u64) {
        self.contact_broad.as_ref().map_or((0, 0), |f| f.traffic())
    }

    /// Bytes the last deformable step uploaded and read back, over every run of it (a step
    /// whose iterate left its contact cages, or whose rows ran out of room, runs twice).
    pub fn deformable_traffic(&self) -> (u64, u64) {
        self.soft
            .as_ref()
            .map_or((0, 0), |s| (s.upload_bytes, s.download_bytes))
    }

    /// Adapter name and backend, e.g. `llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)`.
    pub fn adapter_name(&self) -> String {
        format!("{} ({:?})", self.info.name, self.info.backend)
    }

    /// Splits contacts in chunks of `1 << shift` records (at most the adapter's binding
    /// size allows); for testing the chunked contact bindings on small scenes.
    #[doc(hidden)]
    pub fn limit_contact_chunk(&mut self, shift: u32) {
        self.contact_shift = self.contact_shift.min(shift);
    }

    /// Caps the workgroups per dimension of the contact and joint dual dispatches (2-D
    /// grids past the cap); for testing the 2-D grids on small scenes.
    #[doc(hidden)]
    pub fn limit_dispatch(&mut self, max_groups: u32) {
        self.max_groups = self.max_groups.min(max_groups.max(1));
    }

    /// Pins the colouring rounds recorded per step to `rounds` (`None`: as many as the
    /// last step needed); a step they leave with uncoloured bodies still runs again with
    /// [`JPL_ROUNDS`]. For testing that the run again gives the bits of enough rounds.
    #[doc(hidden)]
    pub fn pin_rounds(&mut self, rounds: Option<u32>) {
        self.pinned_rounds = rounds.map(|r| r.clamp(1, JPL_ROUNDS));
        self.rounds = self.pinned_rounds.unwrap_or(JPL_ROUNDS);
    }

    /// Whether a step whose seeds hold no colouring colours from scratch in the CPU's order
    /// (the default) or, with `false`, seeds every body with colour 0 as a buffer just
    /// made reads. For testing the rounds of a seeded colouring from its first step.
    #[doc(hidden)]
    pub fn colour_from_scratch(&mut self, on: bool) {
        self.scratch_coloring = on;
    }

    /// Whether the step records the re-greedy pass: not in a colouring from scratch, whose
    /// rounds make the CPU's colouring already (the pass would number its classes back
    /// to front).
    fn regreedy_recorded(&self) -> bool {
        self.regreedy && !self.scratch_step
    }

    /// The colouring rounds the step records: [`SCRATCH_ROUNDS`] from scratch, else
    /// `rounds`.
    fn rounds_recorded(&self) -> u32 {
        match self.scratch_step {
            true => SCRATCH_ROUNDS,
            false => self.rounds,
        }
    }

    /// Test hook: the next step runs again once, as one whose colours outgrew what was
    /// recorded does, for testing that a run again starts from the step's start state.
    #[doc(hidden)]
    pub fn run_again_once(&mut self) {
        self.run_again_once = true;
    }

    /// Test hook: room for at most `room` deformable contact rows (or the rows carried
    /// into the frame, if more) in the next step's first run, so that a step making rows
    /// runs out of it and runs again with more.
    #[doc(hidden)]
    pub fn cap_contact_rows_once(&mut self, room: u32) {
        self.soft_step().cap_rows_once(room);
    }

    /// Test hook: the readback copies only the carried deformable contact rows, so that
    /// every row a step makes is read after it (`soft_contact::ContactStep::rows`).
    #[doc(hidden)]
    pub fn read_carried_rows_only(&mut self, on: bool) {
        self.soft_step().read_carried_rows_only(on);
    }

    /// Caps the deformable half's dispatches over vertices, attachments, coarse bodies,
    /// candidates and rows at `max_groups` workgroups per dimension (2-D grids past the
    /// cap); for testing the grids on small scenes. (The row lists' prefix sum and the
    /// passes over rigid bodies stay 1-D: the rigid step refuses more bodies than one row
    /// of workgroups covers.)
    #[doc(hidden)]
    pub fn limit_deformable_dispatch(&mut self, max_groups: u32) {
        self.soft_step().limit_dispatch(max_groups);
    }

    /// The deformable half, made before its first step if need be.
    fn soft_step(&mut self) -> &mut soft::SoftStep {
        self.soft.get_or_insert_with(|| {
            soft::SoftStep::new(
                &self.device,
                &self.queue,
                &self.info.name,
                &self.pipelines.scan,
            )
        })
    }

    /// Colours used by the last step's GPU colouring.
    pub fn colors_used(&self) -> usize {
        self.last_colors as usize
    }

    /// Bodies solved in the serial fallback group in the last step.
    pub fn serial_bodies(&self) -> usize {
        self.last_serial as usize
    }

    /// Bytes uploaded to the device in the last step.
    pub fn upload_bytes(&self) -> u64 {
        self.last_traffic.upload_bytes
    }

    /// Of [`Self::upload_bytes`], the per-body state (poses, velocities, forces, masses,
    /// flags): zero in a step after which the CPU changed no body.
    pub fn body_upload_bytes(&self) -> u64 {
        self.last_traffic.body_upload_bytes
    }

    /// Bytes moved and dispatches recorded by the last step's submission.
    pub fn traffic(&self) -> GpuTraffic {
        self.last_traffic
    }

    /// Per-pass GPU times of the last step (zero and `supported: false` without
    /// `Features::TIMESTAMP_QUERY`).
    pub fn timings(&self) -> GpuTimings {
        self.last_timings
    }

    /// Per-kernel GPU times of the last step, summed per kernel, in the order first
    /// recorded; empty unless `SolverConfig::gpu_kernel_timings` is set and the device
    /// writes timestamps inside passes.
    pub fn kernel_timings(&self) -> &[KernelTime] {
        &self.last_kernel_timings
    }

    /// Whether the adapter supports timestamp queries.
    pub fn timestamps_supported(&self) -> bool {
        self.timestamps.is_some()
    }

    /// GPU memory per body, contact and joint, and in total.
    pub fn memory(&self) -> GpuMemory {
        let sz = |n: usize| n as u64;
        let iterate = sz(std::mem::size_of::<IterateRecord>());
        let contact = sz(std::mem::size_of::<ContactRecord>());
        let state = sz(std::mem::size_of::<JointRowState>());
        let pose = sz(std::mem::size_of::<PoseRecord>());
        let velocity = sz(std::mem::size_of::<VelocityRecord>());
        let bytes_per_body = pose
            + 2 * velocity // velocity, last velocity
            + 32 // external force and torque
            + sz(std::mem::size_of::<MassRecord>())
            + iterate // iterate
            + sz(std::mem::size_of::<InertialRecord>())
            + 4 // adjacency offset
            + 8 // colour lists (grouped + serial scratch)
            + 4 // body flags
            + 4 // colour of body
            + 8 // colour seeds, last step's and this one's
            + sz(std::mem::size_of::<crate::pipeline::collision::BodyShape>()) // collider
            // broad phase: class, box, up to 8 grid entries, about 4 buckets (start and
            // cursor) and the first pair in two lists
            + 4 + 32 + 8 * 4 + 4 * 8 + 2 * 4
            + 3 * 4 // islands: parent, anchored, root
            // the momentum projection's start momenta and island sums (device contacts)
            + (MOMENTUM_TARGET_BYTES + MOMENTUM_SUM_BYTES) as u64
            + 4 // frozen flag
            + 4 * (POSE_OUT_WORDS + VELOCITY_OUT_WORDS) as u64 // packed for the readback
            + 2 * 4 * (POSE_OUT_WORDS + VELOCITY_OUT_WORDS) as u64 // two staging buffers
            + self.velocities_stay as u64 * 2 * velocity; // their start copy, if they stay
        // The record (written on the device), the point (on the device and in the upload
        // belt), two adjacency items (a pair's, where the device finds the contacts) and
        // the two buffers of carried state.
        let point = sz(std::mem::size_of::<ContactPoint>());
        let carried = sz(std::mem::size_of::<ContactWarm>());
        let device_pairs = self.pair_capacity > 0;
        let adjacency = 2 * 4;
        let bytes_per_contact =
            contact + 2 * point + (!device_pairs as u64) * adjacency + 2 * carried;
        // The record, the step's row states and the carried ones, the island's heaviest
        // body, the fracture flag (on the device and in both staging buffers) and two
        // adjacency items.
        let bytes_per_joint =
            sz(std::mem::size_of::<JointRecord>()) + 2 * state + 8 + 3 * 4 + 2 * 4;
        // Two pair lists (this step's and the last), what the pair carries and its point
        // count (two buffers each), its adjacency items.
        let step_pair = sz(std::mem::size_of::<crate::pipeline::collision::StepPair>());
        let bytes_per_pair = 2 * step_pair
            + 2 * sz(std::mem::size_of::<
                crate::pipeline::collision::primitive::PrimitiveContact,
            >())
            + 2
            + device_pairs as u64 * adjacency;
        let mut fixed_bytes = params_size()
            + self.slots.size()
            + self.broad_params.size()
            + self.scan_params.iter().map(|b| b.size()).sum::<u64>();
        let mut total_bytes = fixed_bytes;
        for (slot, b) in self.buffers.iter().enumerate() {
            if matches!(slot, RANGES | INDIRECT | COUNTER | NARROW_STATUS) {
                // (NARROW_STATUS: 16 bytes; the broad phase's parameters are below.)
                fixed_bytes += b.capacity;
            }
            total_bytes += b.capacity;
        }
        for b in &self.staging {
            total_bytes += b.capacity;
        }
        total_bytes += self.belt.capacity;
        if let Some(t) = &self.timestamps {
            fixed_bytes += t.resolve.size() + 8 * t.count as u64;
            total_bytes += t.resolve.size() + 8 * t.count as u64;
        }
        let deformable_bytes = self.soft.as_ref().map_or(0, |s| s.memory_bytes());
        total_bytes += deformable_bytes;
        GpuMemory {
            bytes_per_body,
            bytes_per_contact,
            bytes_per_joint,
            bytes_per_pair,
            fixed_bytes,
            deformable_bytes,
            total_bytes,
        }
    }
}
