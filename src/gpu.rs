//! wgpu compute backend: the whole step after collision detection — inertial targets and
//! initial guess, per-step body colouring, the iteration loop (primal sweeps per colour
//! with their double-buffer copy-back, dual updates of contacts and joints), velocities and
//! poses — recorded in one command submission, on the same records the CPU backend uses
//! (`shaders/common.wgsl` prepended to `integration.wgsl`, `contact_warm.wgsl`,
//! `adjacency.wgsl`, `coloring.wgsl`, `avbd.wgsl`).
//!
//! # One step on the GPU backend
//!
//! 1. CPU: collision detection (parry3d): this step's contact points (64 bytes each:
//!    bodies, normal, lever arms, start errors) and each point's index in the previous
//!    step's records; joint warm start (the same code as the CPU backend).
//! 2. Upload. The body state (poses, velocities, last velocities, external forces, masses,
//!    flags) is resident on the device: it goes up by difference, only the 1 KiB chunks
//!    whose bytes differ from what the device holds ([`GpuSolver::body_upload_bytes`];
//!    zero in a step after which the CPU changed no body). What changes every step goes up
//!    whole: the contact points and the joint row states, written in parallel into a persistent mapped staging buffer (the upload
//!    belt) and copied into place at the start of the step's command buffer. Buffers grow
//!    by doubling, so a steady scene never reallocates ([`GpuSolver::reallocations`]).
//! 3. One submission: `begin_bodies` (inertial targets and the adaptive initial guess,
//!    `integration::begin_step`); `warm_start_contacts` (`contact_warm.wgsl`, the formulas
//!    of `pipeline::warm_start`: each point becomes a 128-byte contact record carrying the
//!    λ, k, stick flag and anchors its previous record left, read by index from the
//!    resident carried state); the body → constraint adjacency (`adjacency.wgsl`:
//!    counts, a prefix sum, an atomic fill, and a sort of each body's list into the CPU's
//!    order, so that it is the list [`crate::pipeline::coloring::build_adjacency`] builds);
//!    Jones–Plassmann–Luby colouring (`coloring.wgsl`: fixed
//!    hash priorities, a palette of at most [`MAX_COLORS`] colours, [`JPL_ROUNDS`] rounds,
//!    a serial fallback group, compaction into per-colour ranges and indirect dispatch
//!    arguments); `iterations` × (primal per colour through indirect dispatches, the serial
//!    group one body per dispatch, dual of contacts, dual of joints); `end_bodies`
//!    (velocities, poses, the non-finite guard and the angular speed cap of
//!    `integration::end_step`) and `store_contact_warm` (what each contact carries to the
//!    next step, into the other of two alternating carried-state buffers: it never leaves
//!    the device); then a copy of the results into a staging buffer. The
//!    number of colour and serial dispatches recorded per sweep is a capacity that only
//!    grows: a step whose colouring needs more is run again from the CPU's copy of its
//!    start state with more (the results are identical to a run with enough capacity, so
//!    determinism holds). Colours beyond the ones used are empty indirect dispatches.
//! 4. Readback: [`GpuSolver::submit`] requests the map of one of two `MAP_READ` staging
//!    buffers, used alternately, and returns; [`GpuSolver::finish`] waits for it and copies
//!    out the poses, velocities, non-finite flags, joint states and the colouring summary
//!    (nothing per contact: the records stay on the device, [`GpuSolver::contacts`] reads
//!    them on demand). The CPU then restores the momentum of isolated islands (a
//!    union–find, `integration::IslandMomentum`; the bodies it corrects go up by
//!    difference next step) and runs fracture.
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
//! Overlapping collision detection of step t+1 with the solve of step t would need
//! collision detection on the GPU (not done in this version).

//! # llvmpipe / lavapipe
//!
//! Mesa's software rasteriser caps the loop iterations of one shader invocation at 65,535
//! and silently stops the loop after that. Every kernel keeps its invocations short (one
//! body, contact or joint each; the serial group is one dispatch per body), but a single
//! body touched by many hundreds of contact points can exceed the cap there (its assembly
//! runs up to about 100 loop iterations per contact point, fewer where the driver unrolls
//! the fixed-size loops); real GPUs have no such cap.

use std::num::NonZeroU64;

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use crate::body::BodyKind;
use crate::body::{MassRecord, PoseRecord, VelocityRecord};
use crate::config::SolverConfig;
use crate::contact::{ContactPoint, ContactRecord, ContactWarm};
use crate::joint::{JointRecord, JointRowState};
use crate::pipeline::{InertialRecord, IterateRecord, SolverData};
use crate::world::{BodySet, JointSet, StepReport};

/// The WGSL source of the solver kernels (after the shared records and helpers).
pub const SHADER: &str = concat!(
    include_str!("../shaders/common.wgsl"),
    include_str!("../shaders/avbd.wgsl")
);
/// The WGSL source of the contacts' warm start.
pub const CONTACT_WARM_SHADER: &str = concat!(
    include_str!("../shaders/common.wgsl"),
    include_str!("../shaders/contact_warm.wgsl")
);
/// The WGSL source of the colouring kernels.
pub const COLORING_SHADER: &str = concat!(
    include_str!("../shaders/common.wgsl"),
    include_str!("../shaders/constraint_graph.wgsl"),
    include_str!("../shaders/coloring.wgsl")
);
/// The WGSL source of the adjacency kernels (the colouring's bind group).
pub const ADJACENCY_SHADER: &str = concat!(
    include_str!("../shaders/common.wgsl"),
    include_str!("../shaders/constraint_graph.wgsl"),
    include_str!("../shaders/adjacency.wgsl")
);
/// The WGSL source of the integration kernels (inertial targets and initial guess before
/// the iterations, velocities and poses after them).
pub const INTEGRATION_SHADER: &str = concat!(
    include_str!("../shaders/common.wgsl"),
    include_str!("../shaders/integration.wgsl")
);

/// Bodies per workgroup of the adjacency's prefix sum (`adjacency.wgsl`, `SCAN_WG`).
const ADJ_SCAN_BLOCK: u32 = 256;
/// Most colours the GPU colouring uses; bodies that cannot get one go to the serial group.
pub const MAX_COLORS: u32 = 64;
/// Jones–Plassmann–Luby rounds per step; bodies still uncoloured after them go to the
/// serial group.
pub const JPL_ROUNDS: u32 = 48;
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
/// `total_bytes` is what is allocated now (capacities, including the doubling slack, the
/// fixed buffers and the staging buffers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuMemory {
    pub bytes_per_body: u64,
    pub bytes_per_contact: u64,
    pub bytes_per_joint: u64,
    /// Buffers whose size does not depend on the scene (parameters, colour slots, ranges,
    /// dispatch arguments, counters, timestamp queries).
    pub fixed_bytes: u64,
    pub total_bytes: u64,
}

/// GPU time of the last step per kernel group, from timestamp queries written at the
/// beginning and end of each compute pass (the begin pass, the colouring pass, a primal
/// pass and a dual pass per iteration, the end pass). `supported` is false, and the times zero, when the step was
/// not timed: the adapter lacks `Features::TIMESTAMP_QUERY`, or the step has more passes
/// than one query set holds (over 1,022 iterations).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuTimings {
    pub supported: bool,
    /// Inertial targets and initial guess before the iterations, velocities and poses
    /// after them.
    pub integration_ms: f64,
    pub coloring_ms: f64,
    pub primal_ms: f64,
    pub dual_ms: f64,
    /// From the first pass's start to the last pass's end: the step's whole GPU time,
    /// gaps between passes included.
    pub span_ms: f64,
    /// Host side of the last step, wall clock (always measured): preparing the step,
    /// staging and encoding the uploads, submitting and waiting for the mapped readback
    /// (GPU execution and both transfers), and copying the results out.
    pub host: GpuHostTimes,
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
    /// Bodies that were still uncoloured after [`JPL_ROUNDS`] rounds (part of `serial`).
    pub out_of_rounds: u32,
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
    pad: u32,
    gravity: [f32; 4],
}

/// Stride of the per-colour uniform slots (dynamic offsets must be 256-byte aligned).
const COLOR_SLOT: u64 = 256;
const WORKGROUP: u32 = 64;
/// Colour slots: the palette, then the serial group.
const SLOTS: u64 = MAX_COLORS as u64 + 1;
/// Entry of the serial group in `ranges` and `indirect`.
const SERIAL_SLOT: u64 = MAX_COLORS as u64;
/// `ranges`: 64 colours, the serial group, then (colours used, bodies out of rounds).
const RANGES_BYTES: u64 = (SLOTS + 1) * 8;
/// Dispatch arguments: one slot per colour and the serial group (64 bodies per workgroup:
/// copy-back), then the primal sweep's per colour (`LANE_ARGS_AT`, 4 bodies per workgroup).
const INDIRECT_BYTES: u64 = 2 * SLOTS * 12;
const LANE_ARGS_AT: u64 = SLOTS * 12;
const COUNTERS: u64 = 131;

// Device buffers.
const POSES: usize = 0;
const MASSES: usize = 1;
const ITERATE: usize = 2;
const INERTIAL: usize = 3;
const CONTACTS: usize = 4;
const JOINTS: usize = 5;
const JOINT_STATES: usize = 6;
const ADJ_OFFSETS: usize = 7;
const ADJ_ITEMS: usize = 8;
const COLOR_BODIES: usize = 9;
const SCRATCH: usize = 10;
const RANGES: usize = 11;
const BODY_FLAGS: usize = 12;
const COLOR_OF: usize = 13;
const INDIRECT: usize = 14;
const COUNTER: usize = 15;
/// Contacts are split in up to this many bindings (chunk 0 is `CONTACTS`, chunk j > 0 is
/// buffer 15 + j) of `1 << contact_shift` records, so that no binding exceeds the adapter's
/// storage binding size (128 MiB on lavapipe: 1,048,576 contacts per chunk).
const CONTACT_CHUNKS: usize = 8;
const fn contact_chunk(j: usize) -> usize {
    if j == 0 { CONTACTS } else { COUNTER + j }
}
const VELOCITIES: usize = 23;
const PREV_VELOCITIES: usize = 24;
const FORCES: usize = 25;
const STATUS: usize = 26;
/// 64-byte per-contact buffers are split in up to this many bindings of `2 << contact_shift`
/// records: the contact points (uploaded every step), and the two buffers of what the
/// contacts carry from step to step (one read, one written, alternating).
const HALF_CHUNKS: usize = 4;
const POINTS: usize = 27;
const CARRIED: [usize; 2] = [POINTS + HALF_CHUNKS, POINTS + 2 * HALF_CHUNKS];
const NAMES: [&str; 39] = [
    "poses",
    "masses",
    "iterate",
    "inertial",
    "contacts",
    "joints",
    "joint_states",
    "adj_offsets",
    "adj_items",
    "color_bodies",
    "scratch",
    "ranges",
    "body_flags",
    "color_of",
    "indirect",
    "counters",
    "contacts1",
    "contacts2",
    "contacts3",
    "contacts4",
    "contacts5",
    "contacts6",
    "contacts7",
    "velocities",
    "prev_velocities",
    "forces",
    "status",
    "points0",
    "points1",
    "points2",
    "points3",
    "carried_a0",
    "carried_a1",
    "carried_a2",
    "carried_a3",
    "carried_b0",
    "carried_b1",
    "carried_b2",
    "carried_b3",
];
/// Bindings 1.. of the solver's group 0 (`avbd.wgsl`): (buffer, read-only).
const SOLVER_BINDINGS: [(usize, bool); 19] = [
    (POSES, true),
    (MASSES, true),
    (ITERATE, false),
    (INERTIAL, true),
    (CONTACTS, false),
    (JOINTS, true),
    (JOINT_STATES, false),
    (ADJ_OFFSETS, true),
    (ADJ_ITEMS, true),
    (COLOR_BODIES, true),
    (SCRATCH, false),
    (RANGES, true),
    (contact_chunk(1), false),
    (contact_chunk(2), false),
    (contact_chunk(3), false),
    (contact_chunk(4), false),
    (contact_chunk(5), false),
    (contact_chunk(6), false),
    (contact_chunk(7), false),
];
/// Bindings 1.. of the colouring's group 0 (`coloring.wgsl`).
const COLORING_BINDINGS: [(usize, bool); 17] = [
    (CONTACTS, true),
    (JOINTS, true),
    (ADJ_OFFSETS, false),
    (ADJ_ITEMS, false),
    (BODY_FLAGS, true),
    (COLOR_OF, false),
    (COLOR_BODIES, false),
    (RANGES, false),
    (INDIRECT, false),
    (COUNTER, false),
    (contact_chunk(1), true),
    (contact_chunk(2), true),
    (contact_chunk(3), true),
    (contact_chunk(4), true),
    (contact_chunk(5), true),
    (contact_chunk(6), true),
    (contact_chunk(7), true),
];
/// Bindings 1.. of the integration's group 0 (`integration.wgsl`).
const INTEGRATION_BINDINGS: [(usize, bool); 9] = [
    (POSES, false),
    (MASSES, true),
    (VELOCITIES, false),
    (PREV_VELOCITIES, false),
    (FORCES, true),
    (BODY_FLAGS, true),
    (STATUS, false),
    (ITERATE, false),
    (INERTIAL, false),
];
/// Bindings 1.. of the contacts' warm start (`contact_warm.wgsl`) reading the carried
/// state from `CARRIED[side]` and writing it to the other.
const fn warm_bindings(side: usize) -> [(usize, bool); 22] {
    let (prev, next) = (CARRIED[side], CARRIED[1 - side]);
    [
        (POSES, true),
        (MASSES, true),
        (POINTS, true),
        (POINTS + 1, true),
        (POINTS + 2, true),
        (POINTS + 3, true),
        (contact_chunk(0), false),
        (contact_chunk(1), false),
        (contact_chunk(2), false),
        (contact_chunk(3), false),
        (contact_chunk(4), false),
        (contact_chunk(5), false),
        (contact_chunk(6), false),
        (contact_chunk(7), false),
        (prev, true),
        (prev + 1, true),
        (prev + 2, true),
        (prev + 3, true),
        (next, false),
        (next + 1, false),
        (next + 2, false),
        (next + 3, false),
    ]
}
/// Buffers uploaded by difference: only the chunks whose bytes differ from what the device
/// holds go up (the CPU's copy of what the device holds is `GpuSolver::shadow`).
const TRACKED: [usize; 7] = [
    MASSES,
    JOINTS,
    BODY_FLAGS,
    POSES,
    VELOCITIES,
    PREV_VELOCITIES,
    FORCES,
];
/// The per-body state (resident, uploaded by difference).
const BODY_STATE: [usize; 6] = [
    POSES,
    VELOCITIES,
    PREV_VELOCITIES,
    FORCES,
    MASSES,
    BODY_FLAGS,
];
/// Tracked buffers the device writes (the end-of-step kernel); their shadows are the bytes
/// read back.
const DEVICE_WRITTEN: [usize; 3] = [POSES, VELOCITIES, PREV_VELOCITIES];
/// Granularity of the upload by difference (bytes; a multiple of every record size's
/// 4-byte alignment that wgpu requires of buffer writes).
const DIFF_CHUNK: usize = 1024;
/// `body_flags` bits (`integration.wgsl`, `coloring.wgsl`).
const FLAG_SOLVED: u32 = 1;
const FLAG_KINEMATIC: u32 = 2;

/// A growable device buffer (reallocated only when a step needs more room).
struct DeviceBuffer {
    buffer: wgpu::Buffer,
    capacity: u64,
}

/// Persistent `MAP_WRITE` staging for what goes up whole every step (contacts and joint
/// row states): filled in parallel while mapped, copied into the device buffers at
/// the start of the step's command buffer, mapped again before the next fill (the map
/// completes once the GPU has read it). `Queue::write_buffer` would allocate fresh staging
/// memory and fill it on one thread: at 110,000 bodies that is ~450 MB per step.
#[derive(Default)]
struct UploadBelt {
    buffer: Option<wgpu::Buffer>,
    capacity: u64,
    mapped: bool,
    /// This step's copies: (slot, offset in the belt, bytes).
    copies: Vec<(usize, u64, u64)>,
}

/// Bytes per parallel copy job of the upload belt.
const BELT_PIECE: usize = 1 << 20;

struct Pipelines {
    primal: wgpu::ComputePipeline,
    primal_serial: wgpu::ComputePipeline,
    copy_back: wgpu::ComputePipeline,
    dual_contacts: wgpu::ComputePipeline,
    dual_joints: wgpu::ComputePipeline,
    warm_start_contacts: wgpu::ComputePipeline,
    store_contact_warm: wgpu::ComputePipeline,
    adj_clear: wgpu::ComputePipeline,
    adj_count: wgpu::ComputePipeline,
    adj_scan_blocks: wgpu::ComputePipeline,
    adj_scan_top: wgpu::ComputePipeline,
    adj_scan_add: wgpu::ComputePipeline,
    adj_fill: wgpu::ComputePipeline,
    adj_sort: wgpu::ComputePipeline,
    color_init: wgpu::ComputePipeline,
    color_select: wgpu::ComputePipeline,
    color_assign: wgpu::ComputePipeline,
    color_count: wgpu::ComputePipeline,
    color_scan: wgpu::ComputePipeline,
    color_serial_rank: wgpu::ComputePipeline,
    color_scatter: wgpu::ComputePipeline,
    begin_bodies: wgpu::ComputePipeline,
    end_bodies: wgpu::ComputePipeline,
}

/// What one step records: sizes and options.
#[derive(Clone, Copy)]
struct StepShape {
    iterations: u32,
    palette: u32,
    /// Write timestamp queries.
    timed: bool,
    n: usize,
    n_contacts: usize,
    n_joints: usize,
    /// Bytes of the poses, velocities (and previous velocities), status and joint states
    /// read back.
    lens: [usize; 4],
}

/// A step submitted and not yet read back.
struct InFlight {
    shape: StepShape,
    /// The readback staging buffer it copies into, and the bytes it copies.
    staging: usize,
    read_bytes: u64,
    ts_bytes: u64,
    /// Set when the staging buffer is mapped (the step and its copies are done).
    mapped: std::sync::Arc<std::sync::OnceLock<Result<(), wgpu::BufferAsyncError>>>,
    host: GpuHostTimes,
}

fn elapsed_ms(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Timestamp queries: one pair per compute pass.
struct Timestamps {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    count: u32,
    period_ns: f32,
}

/// The GPU solver: device, pipelines and the resident buffers.
pub struct GpuSolver {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    pipelines: Pipelines,
    solver_layout: wgpu::BindGroupLayout,
    coloring_layout: wgpu::BindGroupLayout,
    integration_layout: wgpu::BindGroupLayout,
    warm_layout: wgpu::BindGroupLayout,
    params: wgpu::Buffer,
    /// Dynamic-offset slots: colour c < 64, then serial-group position k at 64 + k.
    slots: wgpu::Buffer,
    slot_layout: wgpu::BindGroupLayout,
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
    coloring_group: Option<wgpu::BindGroup>,
    integration_group: Option<wgpu::BindGroup>,
    /// The warm start's group reading `CARRIED[side]`, for each side.
    warm_groups: Option<[wgpu::BindGroup; 2]>,
    /// Which of `CARRIED` holds what the last step's contacts carry.
    carried_side: usize,
    slot_group: wgpu::BindGroup,
    flags: Vec<u32>,
    last_colors: u32,
    last_palette: u32,
    last_serial: u32,
    last_timings: GpuTimings,
    last_upload_bytes: u64,
    /// Of `last_upload_bytes`, those of the per-body state ([`BODY_STATE`]).
    last_body_upload_bytes: u64,
    counts: (usize, usize, usize),
    /// Colour dispatches recorded per sweep: grows to the colours a step used (the step is
    /// then run again), never shrinks.
    color_capacity: u32,
    /// Serial-group dispatches recorded per sweep (grows like `color_capacity`).
    serial_capacity: u32,
    /// Contacts per contact chunk: `1 << contact_shift`.
    contact_shift: u32,
    /// Largest storage binding and buffer the device allows (bytes).
    max_binding: u64,
    /// Workgroups per dispatch dimension.
    max_groups: u32,
    /// Buffer reallocations so far (steady scenes stop reallocating).
    pub reallocations: u64,
}

fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn uniform_entry(binding: u32, dynamic: bool, size: u64) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: dynamic,
            min_binding_size: NonZeroU64::new(size),
        },
        count: None,
    }
}

fn usage_of(slot: usize) -> wgpu::BufferUsages {
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    if slot == INDIRECT {
        usage | wgpu::BufferUsages::INDIRECT
    } else {
        usage
    }
}

/// A 2-D grid of `groups` workgroups with at most `max` per dimension (kernels that take
/// it compute their index as `x + y · width`).
fn grid(groups: u32, max: u32) -> (u32, u32) {
    let x = groups.clamp(1, max.max(1));
    (x, groups.div_ceil(x))
}

fn params_size() -> u64 {
    std::mem::size_of::<Params>() as u64
}

impl GpuSolver {
    /// Finds an adapter (honouring `WGPU_BACKEND`), opens a device and builds the pipelines.
    pub fn new() -> Result<Self, GpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|_| GpuError::NoAdapter)?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let need = SOLVER_BINDINGS
            .len()
            .max(COLORING_BINDINGS.len())
            .max(warm_bindings(0).len());
        if (limits.max_storage_buffers_per_shader_stage as usize) < need {
            return Err(GpuError::Unsupported {
                adapter: info.name.clone(),
                reason: format!(
                    "{} storage buffers per stage, the solver binds {need}",
                    limits.max_storage_buffers_per_shader_stage,
                ),
            });
        }
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let contact_shift = (max_binding / std::mem::size_of::<ContactRecord>() as u64)
            .max(1)
            .ilog2()
            .min(31);
        let timestamp = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let required_features = if timestamp {
            wgpu::Features::TIMESTAMP_QUERY
        } else {
            wgpu::Features::empty()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("avbd"),
            required_limits: limits.clone(),
            required_features,
            ..Default::default()
        }))
        .map_err(|e| GpuError::Device(e.to_string()))?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("avbd.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let coloring_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("coloring.wgsl"),
            source: wgpu::ShaderSource::Wgsl(COLORING_SHADER.into()),
        });
        let integration_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("integration.wgsl"),
            source: wgpu::ShaderSource::Wgsl(INTEGRATION_SHADER.into()),
        });
        let adjacency_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("adjacency.wgsl"),
            source: wgpu::ShaderSource::Wgsl(ADJACENCY_SHADER.into()),
        });
        let warm_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("contact_warm.wgsl"),
            source: wgpu::ShaderSource::Wgsl(CONTACT_WARM_SHADER.into()),
        });
        let layout_of = |label: &str, bindings: &[(usize, bool)]| {
            let mut entries = vec![uniform_entry(0, false, params_size())];
            for (i, (_, read_only)) in bindings.iter().enumerate() {
                entries.push(storage_entry(i as u32 + 1, *read_only));
            }
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries: &entries,
            })
        };
        let solver_layout = layout_of("avbd solver", &SOLVER_BINDINGS);
        let coloring_layout = layout_of("avbd colouring", &COLORING_BINDINGS);
        let integration_layout = layout_of("avbd integration", &INTEGRATION_BINDINGS);
        let warm_layout = layout_of("avbd contact warm start", &warm_bindings(0));
        let slot_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd colour slot"),
            entries: &[uniform_entry(0, true, 8)],
        });
        let solver_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd solver"),
                bind_group_layouts: &[Some(&solver_layout), Some(&slot_layout)],
                immediate_size: 0,
            });
        let coloring_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd colouring"),
                bind_group_layouts: &[Some(&coloring_layout)],
                immediate_size: 0,
            });
        let integration_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd integration"),
                bind_group_layouts: &[Some(&integration_layout)],
                immediate_size: 0,
            });
        let warm_pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd contact warm start"),
            bind_group_layouts: &[Some(&warm_layout)],
            immediate_size: 0,
        });
        let pipeline = |layout: &wgpu::PipelineLayout, module: &wgpu::ShaderModule, entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(layout),
                module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let solve = |entry| pipeline(&solver_pipeline_layout, &module, entry);
        let color = |entry| pipeline(&coloring_pipeline_layout, &coloring_module, entry);
        let adjacency = |entry| pipeline(&coloring_pipeline_layout, &adjacency_module, entry);
        let integrate = |entry| pipeline(&integration_pipeline_layout, &integration_module, entry);
        let warm = |entry| pipeline(&warm_pipeline_layout, &warm_module, entry);
        let pipelines = Pipelines {
            primal: solve("primal"),
            primal_serial: solve("primal_serial"),
            copy_back: solve("copy_back"),
            dual_contacts: solve("dual_contacts"),
            dual_joints: solve("dual_joints"),
            warm_start_contacts: warm("warm_start_contacts"),
            store_contact_warm: warm("store_contact_warm"),
            adj_clear: adjacency("adj_clear"),
            adj_count: adjacency("adj_count"),
            adj_scan_blocks: adjacency("adj_scan_blocks"),
            adj_scan_top: adjacency("adj_scan_top"),
            adj_scan_add: adjacency("adj_scan_add"),
            adj_fill: adjacency("adj_fill"),
            adj_sort: adjacency("adj_sort"),
            color_init: color("color_init"),
            color_select: color("color_select"),
            color_assign: color("color_assign"),
            color_count: color("color_count"),
            color_scan: color("color_scan"),
            color_serial_rank: color("color_serial_rank"),
            color_scatter: color("color_scatter"),
            begin_bodies: integrate("begin_bodies"),
            end_bodies: integrate("end_bodies"),
        };
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: params_size(),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let (slots, slot_group) = Self::make_slots(&device, &queue, &slot_layout, SLOTS);
        let buffers = (0..NAMES.len())
            .map(|slot| {
                let size = match slot {
                    RANGES => RANGES_BYTES,
                    INDIRECT => INDIRECT_BYTES,
                    COUNTER => COUNTERS * 4,
                    _ => 256,
                };
                Self::make_buffer(
                    &device,
                    NAMES[slot],
                    size.next_multiple_of(256),
                    usage_of(slot),
                )
            })
            .collect();
        let staging = [0, 1].map(|_| {
            Self::make_buffer(
                &device,
                "readback",
                256,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )
        });
        let timestamps = timestamp.then(|| Timestamps {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("avbd passes"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: Self::make_buffer(
                &device,
                "timestamps",
                256,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            )
            .buffer,
            count: 2,
            period_ns: queue.get_timestamp_period(),
        });
        let mut solver = Self {
            device,
            queue,
            info,
            pipelines,
            solver_layout,
            coloring_layout,
            integration_layout,
            warm_layout,
            params,
            slots,
            slot_layout,
            slot_count: SLOTS,
            buffers,
            shadow: vec![Vec::new(); NAMES.len()],
            staging,
            belt: UploadBelt::default(),
            pending: None,
            frame: 0,
            timestamps,
            solver_group: None,
            coloring_group: None,
            integration_group: None,
            warm_groups: None,
            carried_side: 0,
            slot_group,
            flags: Vec::new(),
            last_colors: 0,
            last_palette: 0,
            last_serial: 0,
            last_timings: GpuTimings {
                supported: timestamp,
                ..Default::default()
            },
            last_upload_bytes: 0,
            last_body_upload_bytes: 0,
            counts: (0, 0, 0),
            color_capacity: 1,
            serial_capacity: 0,
            contact_shift,
            max_binding,
            max_groups: limits.max_compute_workgroups_per_dimension,
            reallocations: 0,
        };
        solver.rebuild_bind_groups();
        Ok(solver)
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
        self.last_upload_bytes
    }

    /// Of [`Self::upload_bytes`], the per-body state (poses, velocities, forces, masses,
    /// flags): zero in a step after which the CPU changed no body.
    pub fn body_upload_bytes(&self) -> u64 {
        self.last_body_upload_bytes
    }

    /// Per-pass GPU times of the last step (zero and `supported: false` without
    /// `Features::TIMESTAMP_QUERY`).
    pub fn timings(&self) -> GpuTimings {
        self.last_timings
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
            + iterate // scratch (double buffer)
            + 4 // body flags
            + 4 // non-finite status
            + 4 // colour of body
            + 2 * (pose + 2 * velocity + 4); // two readback staging buffers
        // The record (written on the device), the point (on the device and in the upload
        // belt), two adjacency items and the two buffers of carried state.
        let point = sz(std::mem::size_of::<ContactPoint>());
        let carried = sz(std::mem::size_of::<ContactWarm>());
        let bytes_per_contact = contact + 2 * point + 2 * 4 + 2 * carried;
        let bytes_per_joint =
            sz(std::mem::size_of::<JointRecord>()) + 2 * state + 2 * 4 + 2 * state;
        let mut fixed_bytes = params_size() + self.slots.size();
        let mut total_bytes = fixed_bytes;
        for (slot, b) in self.buffers.iter().enumerate() {
            if matches!(slot, RANGES | INDIRECT | COUNTER) {
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
        GpuMemory {
            bytes_per_body,
            bytes_per_contact,
            bytes_per_joint,
            fixed_bytes,
            total_bytes,
        }
    }

    /// The slot uniform: `count` 256-byte slots, slot j holding index j.
    fn make_slots(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layout: &wgpu::BindGroupLayout,
        count: u64,
    ) -> (wgpu::Buffer, wgpu::BindGroup) {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("colour slots"),
            size: count * COLOR_SLOT,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut bytes = vec![0u8; (count * COLOR_SLOT) as usize];
        for j in 0..count as usize {
            let at = j * COLOR_SLOT as usize;
            bytes[at..at + 4].copy_from_slice(&(j as u32).to_le_bytes());
        }
        queue.write_buffer(&buffer, 0, &bytes);
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd colour slot"),
            layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &buffer,
                    offset: 0,
                    size: NonZeroU64::new(8),
                }),
            }],
        });
        (buffer, group)
    }

    fn make_buffer(
        device: &wgpu::Device,
        label: &str,
        size: u64,
        usage: wgpu::BufferUsages,
    ) -> DeviceBuffer {
        DeviceBuffer {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            }),
            capacity: size,
        }
    }

    /// Makes sure buffer `slot` holds `bytes`; grows it (doubling) if needed.
    fn ensure(&mut self, slot: usize, bytes: u64) -> bool {
        let need = bytes.max(256).next_multiple_of(256);
        let buf = &self.buffers[slot];
        if buf.capacity >= need {
            return false;
        }
        let size = need.max(buf.capacity * 2).min(self.max_binding.max(need));
        self.buffers[slot] = Self::make_buffer(&self.device, NAMES[slot], size, usage_of(slot));
        self.shadow[slot].clear();
        self.reallocations += 1;
        true
    }

    fn rebuild_bind_groups(&mut self) {
        let group = |layout: &wgpu::BindGroupLayout, bindings: &[(usize, bool)], label: &str| {
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: self.params.as_entire_binding(),
            }];
            for (i, (slot, _)) in bindings.iter().enumerate() {
                entries.push(wgpu::BindGroupEntry {
                    binding: i as u32 + 1,
                    resource: self.buffers[*slot].buffer.as_entire_binding(),
                });
            }
            self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(label),
                layout,
                entries: &entries,
            })
        };
        self.solver_group = Some(group(&self.solver_layout, &SOLVER_BINDINGS, "avbd solver"));
        self.coloring_group = Some(group(
            &self.coloring_layout,
            &COLORING_BINDINGS,
            "avbd colouring",
        ));
        self.integration_group = Some(group(
            &self.integration_layout,
            &INTEGRATION_BINDINGS,
            "avbd integration",
        ));
        self.warm_groups = Some([0, 1].map(|side| {
            group(
                &self.warm_layout,
                &warm_bindings(side),
                "avbd contact warm start",
            )
        }));
    }

    /// Writes `data` into buffer `slot`. Tracked buffers get only the runs of
    /// [`DIFF_CHUNK`]-byte chunks that differ from their shadow (all of it after the buffer
    /// was reallocated, when the shadow is empty).
    fn upload(&mut self, slot: usize, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if !TRACKED.contains(&slot) {
            self.queue.write_buffer(&self.buffers[slot].buffer, 0, data);
            self.last_upload_bytes += data.len() as u64;
            return;
        }
        let shadow = &mut self.shadow[slot];
        // Bytes past `valid` are not on the device (yet): never clean.
        let valid = shadow.len().min(data.len());
        shadow.resize(data.len(), 0);
        let clean =
            |at: usize, end: usize, shadow: &[u8]| end <= valid && shadow[at..end] == data[at..end];
        let mut at = 0;
        while at < data.len() {
            let end = (at + DIFF_CHUNK).min(data.len());
            if clean(at, end, shadow) {
                at = end;
                continue;
            }
            let start = at;
            at = end;
            while at < data.len() {
                let end = (at + DIFF_CHUNK).min(data.len());
                if clean(at, end, shadow) {
                    break;
                }
                at = end;
            }
            shadow[start..at].copy_from_slice(&data[start..at]);
            self.queue
                .write_buffer(&self.buffers[slot].buffer, start as u64, &data[start..at]);
            self.last_upload_bytes += (at - start) as u64;
            if BODY_STATE.contains(&slot) {
                self.last_body_upload_bytes += (at - start) as u64;
            }
        }
    }

    /// A typed error (instead of a wgpu validation panic) when the step does not fit the
    /// device: a buffer larger than the adapter binds, or more workgroups than one dispatch
    /// dimension allows.
    fn check_limits(
        &self,
        sizes: &[(usize, usize)],
        n: usize,
        contacts: usize,
    ) -> Result<(), GpuError> {
        let limits = self.device.limits();
        let max_bytes = self.max_binding;
        let unsupported = |reason: String| GpuError::Unsupported {
            adapter: self.info.name.clone(),
            reason,
        };
        for &(slot, bytes) in sizes {
            // Growth doubles, so the next size must fit as well.
            let need = (bytes as u64).max(256).next_multiple_of(256);
            if need > max_bytes {
                return Err(unsupported(format!(
                    "the {} buffer needs {need} bytes, the adapter binds at most {max_bytes}",
                    NAMES[slot]
                )));
            }
        }
        let max_contacts = (CONTACT_CHUNKS as u64) << self.contact_shift;
        if contacts as u64 > max_contacts {
            return Err(unsupported(format!(
                "{contacts} contacts, at most {max_contacts} fit in {CONTACT_CHUNKS} bindings"
            )));
        }
        let max_items = limits.max_compute_workgroups_per_dimension as u64 * WORKGROUP as u64;
        // Contacts and joints run on 2-D grids; bodies (colouring, per-colour indirect
        // dispatches) on 1-D ones.
        if n as u64 > max_items {
            return Err(unsupported(format!(
                "{n} bodies, one dispatch covers at most {max_items}"
            )));
        }
        Ok(())
    }

    /// Query set with room for `count` timestamps (grown when the iteration count grows);
    /// false when `count` exceeds what one query set holds (the step is then not timed).
    fn ensure_timestamps(&mut self, count: u32) -> bool {
        let Some(t) = &mut self.timestamps else {
            return false;
        };
        if count > wgpu::QUERY_SET_MAX_QUERIES {
            return false;
        }
        if t.count >= count {
            return true;
        }
        t.set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("avbd passes"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        t.resolve = Self::make_buffer(
            &self.device,
            "timestamps",
            (count as u64 * 8).next_multiple_of(256),
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        )
        .buffer;
        t.count = count;
        self.reallocations += 1;
        true
    }

    /// Starts one step on the GPU, in one submission: inertial targets and initial guess,
    /// colouring, `cfg.iterations` AVBD iterations, velocities and poses, and the copy of
    /// the results into a staging buffer whose map is requested. Returns without waiting
    /// for the device; [`Self::finish`] reads the results back. Builds the step's adjacency
    /// into `s.adjacency` first.
    pub fn submit(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &mut SolverData,
    ) -> Result<(), GpuError> {
        if self.pending.is_some() {
            return Err(GpuError::Step("a step is already in flight".into()));
        }
        let n = bodies.len();
        let t_start = std::time::Instant::now();
        let mut host = GpuHostTimes::default();
        // The adjacency is built on the device (`adjacency.wgsl`); the CPU only gathers the
        // constraint ends, for the momentum projection's islands.
        crate::pipeline::coloring::gather_ends(&s.points, joints, &mut s.adjacency);
        let mut flags = std::mem::take(&mut self.flags);
        flags.clear();
        flags.extend((0..n).map(|i| {
            let solved = bodies.is_solved(i);
            let kinematic = bodies.kinds[i] == BodyKind::Kinematic && !bodies.frozen[i];
            (solved as u32 * FLAG_SOLVED) | (kinematic as u32 * FLAG_KINEMATIC)
        }));
        // A body's smallest free colour never exceeds its number of neighbours, so the
        // full palette colours exactly as one of (largest degree + 1) would.
        let palette = MAX_COLORS;
        self.last_upload_bytes = 0;
        self.last_body_upload_bytes = 0;

        let iterations = cfg.iterations;
        let it_len = n * std::mem::size_of::<IterateRecord>();
        let n_contacts = s.points.len();
        let (pose_len, vel_len, status_len, js_len) = (
            std::mem::size_of_val(bodies.poses.as_slice()),
            std::mem::size_of_val(bodies.velocities.as_slice()),
            n * 4,
            std::mem::size_of_val(joints.states.as_slice()),
        );
        let mut grown = false;
        let chunk_bytes = std::mem::size_of::<ContactRecord>() << self.contact_shift;
        let mut sizes = vec![
            (POSES, n * std::mem::size_of::<PoseRecord>()),
            (MASSES, n * std::mem::size_of::<MassRecord>()),
            (ITERATE, it_len),
            (INERTIAL, n * std::mem::size_of::<InertialRecord>()),
            (JOINTS, std::mem::size_of_val(joints.records.as_slice())),
            (JOINT_STATES, js_len),
            (ADJ_OFFSETS, (n + 1) * 4),
            // At most two items per constraint (a list for each solved body).
            (ADJ_ITEMS, 2 * (n_contacts + joints.records.len()) * 4),
            (COLOR_BODIES, 2 * n * 4),
            (SCRATCH, it_len),
            (BODY_FLAGS, n * 4),
            (COLOR_OF, n * 4),
            (VELOCITIES, vel_len),
            (PREV_VELOCITIES, vel_len),
            (FORCES, std::mem::size_of_val(bodies.forces.as_slice())),
            (STATUS, status_len),
        ];
        let records_len = n_contacts * std::mem::size_of::<ContactRecord>();
        for j in 0..CONTACT_CHUNKS {
            let bytes = records_len.saturating_sub(j * chunk_bytes).min(chunk_bytes);
            sizes.push((contact_chunk(j), bytes));
        }
        // 64-byte records: twice as many per binding (2 << contact_shift), so a binding
        // holds the bytes of one record chunk. The carried state the last step wrote is
        // read by this one and keeps its buffers; the other side is written.
        let half_len = n_contacts * std::mem::size_of::<ContactPoint>();
        let next = CARRIED[1 - self.carried_side];
        for j in 0..HALF_CHUNKS {
            let bytes = half_len.saturating_sub(j * chunk_bytes).min(chunk_bytes);
            sizes.push((POINTS + j, bytes));
            sizes.push((next + j, bytes));
        }
        self.check_limits(&sizes, n, n_contacts)?;
        let scopes = self.push_error_scopes();
        for &(slot, bytes) in &sizes {
            grown |= self.ensure(slot, bytes as u64);
        }
        if grown {
            self.rebuild_bind_groups();
        }
        self.pop_error_scopes(scopes)?;
        // Readback layout: poses | velocities | previous velocities | status | contacts |
        // joint states | ranges | timestamps.
        let timed = self.ensure_timestamps(2 * (3 + 2 * iterations));
        self.flags = flags;
        host.prepare_ms = elapsed_ms(t_start);
        let shape = StepShape {
            iterations,
            palette,
            timed,
            n,
            n_contacts,
            n_joints: joints.records.len(),
            lens: [pose_len, vel_len, status_len, js_len],
        };
        self.launch(cfg, bodies, joints, s, shape, host)
    }

    /// Uploads the step's data, records and submits it, and requests the readback map.
    fn launch(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &SolverData,
        shape: StepShape,
        mut host: GpuHostTimes,
    ) -> Result<(), GpuError> {
        let t_upload = std::time::Instant::now();
        let scopes = self.push_error_scopes();
        let launched = self
            .upload_step(cfg, bodies, joints, s, shape.palette)
            .map(|()| self.record_and_submit(&shape));
        self.pop_error_scopes(scopes)?;
        let (k, read_bytes, ts_bytes) = launched?;
        let mapped = std::sync::Arc::new(std::sync::OnceLock::new());
        let done = mapped.clone();
        self.staging[k]
            .buffer
            .slice(0..read_bytes)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = done.set(r);
            });
        host.upload_ms += elapsed_ms(t_upload);
        self.pending = Some(InFlight {
            shape,
            staging: k,
            read_bytes,
            ts_bytes,
            mapped,
            host,
        });
        Ok(())
    }

    /// Whether a step was submitted and not yet finished.
    pub fn in_flight(&self) -> bool {
        self.pending.is_some()
    }

    /// Waits for the step begun by [`Self::submit`] and reads the poses, velocities,
    /// contact multipliers and joint states back into `bodies`, `s` and `joints`; bodies
    /// whose result was not finite are frozen and listed in `report`. `cfg`, `bodies`,
    /// `joints` and `s` must be those the step was submitted with: a step whose colouring
    /// needs more dispatches than were recorded is submitted again from them.
    pub fn finish(
        &mut self,
        cfg: &SolverConfig,
        bodies: &mut BodySet,
        joints: &mut JointSet,
        s: &mut SolverData,
        report: &mut StepReport,
    ) -> Result<(), GpuError> {
        loop {
            let Some(flight) = self.pending.take() else {
                return Err(GpuError::Step("no step in flight".into()));
            };
            let InFlight {
                shape,
                staging: k,
                read_bytes,
                ts_bytes,
                mapped,
                mut host,
            } = flight;
            let [pose_len, vel_len, status_len, js_len] = shape.lens;
            let iterations = shape.iterations;
            let t_wait = std::time::Instant::now();
            let staging = self.staging[k].buffer.clone();
            let slice = staging.slice(0..read_bytes);
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            // The wait runs the map callback.
            mapped
                .get()
                .ok_or_else(|| GpuError::Readback("the readback map did not complete".into()))?
                .clone()
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            host.wait_ms += elapsed_ms(t_wait);
            let t_unpack = std::time::Instant::now();
            let rerun = {
                let data = slice
                    .get_mapped_range()
                    .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
                let (poses, rest) = data.split_at(pose_len);
                let (velocities, rest) = rest.split_at(vel_len);
                let (prev, rest) = rest.split_at(vel_len);
                let (status, rest) = rest.split_at(status_len);
                let (c, rest) = rest.split_at(js_len);
                let (r, rest) = rest.split_at(RANGES_BYTES as usize);
                let r: Vec<u32> = bytemuck::pod_collect_to_vec(r);
                let colors = r[2 * SLOTS as usize];
                let serial = r[2 * SERIAL_SLOT as usize + 1];
                if colors > self.color_capacity || serial > self.serial_capacity {
                    self.color_capacity = self.color_capacity.max(colors);
                    self.serial_capacity = self.serial_capacity.max(serial.next_power_of_two());
                    true
                } else {
                    for (slot, bytes, mirror) in [
                        (POSES, poses, bytemuck::cast_slice_mut(&mut bodies.poses)),
                        (
                            VELOCITIES,
                            velocities,
                            bytemuck::cast_slice_mut(&mut bodies.velocities),
                        ),
                        (
                            PREV_VELOCITIES,
                            prev,
                            bytemuck::cast_slice_mut(&mut bodies.prev_velocities),
                        ),
                    ] {
                        mirror.copy_from_slice(bytes);
                        self.shadow[slot].clear();
                        self.shadow[slot].extend_from_slice(bytes);
                    }
                    let status: &[u32] = bytemuck::cast_slice(status);
                    for (i, _) in status.iter().enumerate().filter(|(_, s)| **s != 0) {
                        bodies.frozen[i] = true;
                        report.frozen.push(bodies.handles[i]);
                    }
                    joints.states.copy_from_slice(bytemuck::cast_slice(c));
                    self.last_serial = serial;
                    self.last_colors = colors;
                    self.last_palette = shape.palette;
                    self.last_timings = match (&self.timestamps, shape.timed) {
                        (Some(t), true) => {
                            Self::timings_from(&rest[..ts_bytes as usize], t.period_ns, iterations)
                        }
                        // Not timed: no adapter support, or more passes than one query set.
                        _ => GpuTimings::default(),
                    };
                    false
                }
            };
            staging.unmap();
            host.unpack_ms += elapsed_ms(t_unpack);
            if !rerun {
                self.counts = (shape.n, shape.n_contacts, shape.n_joints);
                // What this step's contacts carry is now the state the next step reads.
                self.carried_side = 1 - self.carried_side;
                self.last_timings.host = host;
                return Ok(());
            }
            // The end-of-step kernel overwrote the start state: upload it again.
            for slot in DEVICE_WRITTEN {
                self.shadow[slot].clear();
            }
            if self.slot_count < SLOTS + self.serial_capacity as u64 {
                let count = SLOTS + self.serial_capacity as u64;
                (self.slots, self.slot_group) =
                    Self::make_slots(&self.device, &self.queue, &self.slot_layout, count);
                self.slot_count = count;
                self.reallocations += 1;
            }
            self.launch(cfg, bodies, joints, s, shape, host)?;
        }
    }

    /// wgpu reports validation and out-of-memory errors to these scopes (instead of the
    /// default handler, which panics); [`Self::pop_error_scopes`] turns them into typed
    /// errors. The guards are not `Send`: pushed and popped within one call.
    fn push_error_scopes(&self) -> [wgpu::ErrorScopeGuard; 2] {
        [
            self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory),
            self.device.push_error_scope(wgpu::ErrorFilter::Validation),
        ]
    }

    fn pop_error_scopes(
        &self,
        [oom, validation]: [wgpu::ErrorScopeGuard; 2],
    ) -> Result<(), GpuError> {
        for scope in [validation, oom] {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(GpuError::Step(e.to_string()));
            }
        }
        Ok(())
    }

    fn timings_from(bytes: &[u8], period_ns: f32, iterations: u32) -> GpuTimings {
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(bytes);
        let ms = |pass: usize| {
            ticks[2 * pass + 1].saturating_sub(ticks[2 * pass]) as f64 * period_ns as f64 * 1e-6
        };
        let mut timings = GpuTimings {
            supported: true,
            integration_ms: ms(0) + ms(2 + 2 * iterations as usize),
            coloring_ms: ms(1),
            span_ms: ticks[ticks.len() - 1].saturating_sub(ticks[0]) as f64
                * period_ns as f64
                * 1e-6,
            ..Default::default()
        };
        for i in 0..iterations as usize {
            timings.primal_ms += ms(2 + 2 * i);
            timings.dual_ms += ms(3 + 2 * i);
        }
        timings
    }

    /// Uploads the step's data (tracked buffers only when changed) and the parameters.
    fn upload_step(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &SolverData,
        palette: u32,
    ) -> Result<(), GpuError> {
        let n = bodies.len();
        // The body state is resident: only what the CPU changed since the last readback
        // (user edits, the momentum projection, added or removed bodies) goes up.
        self.upload(POSES, bytemuck::cast_slice(&bodies.poses));
        self.upload(VELOCITIES, bytemuck::cast_slice(&bodies.velocities));
        self.upload(
            PREV_VELOCITIES,
            bytemuck::cast_slice(&bodies.prev_velocities),
        );
        self.upload(FORCES, bytemuck::cast_slice(&bodies.forces));
        self.upload(MASSES, bytemuck::cast_slice(&bodies.masses));
        self.upload(JOINTS, bytemuck::cast_slice(&joints.records));
        // The contact points go up whole (the device warm-starts them into records).
        let per_chunk = 2usize << self.contact_shift;
        let mut whole: Vec<(usize, &[u8])> = s
            .points
            .chunks(per_chunk)
            .enumerate()
            .map(|(j, chunk)| (POINTS + j, bytemuck::cast_slice(chunk)))
            .collect();
        whole.push((JOINT_STATES, bytemuck::cast_slice(&joints.states)));
        self.upload_whole(&whole)?;
        let flags = std::mem::take(&mut self.flags);
        self.upload(BODY_FLAGS, bytemuck::cast_slice(&flags));
        self.flags = flags;
        let params = Params {
            dt: cfg.dt,
            alpha: cfg.alpha,
            beta_linear: cfg.beta_linear,
            beta_angular: cfg.beta_angular,
            k_max: cfg.k_max,
            lambda_max: cfg.lambda_max,
            n_contacts: s.points.len() as u32,
            n_joints: joints.records.len() as u32,
            n_bodies: n as u32,
            palette,
            contact_shift: self.contact_shift,
            max_groups: self.max_groups,
            max_angular_speed: cfg.max_angular_speed,
            gamma: cfg.gamma,
            k_start: cfg.k_start,
            new_row_mass_ratio: cfg.new_row_mass_ratio,
            floor_mass_ratio: cfg.floor_mass_ratio,
            contact_error_scale: cfg.contact_error_scale,
            n_prev_contacts: self.counts.1 as u32,
            pad: 0,
            gravity: cfg.gravity.extend(0.0).to_array(),
        };
        self.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
        self.last_upload_bytes += params_size();
        Ok(())
    }

    /// Stages buffers that go up whole every step in the upload belt (copied into place
    /// by the step's command buffer), or through `Queue::write_buffer` when they exceed
    /// the largest buffer the device allows.
    fn upload_whole(&mut self, parts: &[(usize, &[u8])]) -> Result<(), GpuError> {
        self.belt.copies.clear();
        // Parts start on 256-byte boundaries (mapped ranges start on multiples of 8).
        let mut total = 0u64;
        for &(slot, data) in parts {
            self.belt.copies.push((slot, total, data.len() as u64));
            total = (total + data.len() as u64).next_multiple_of(256);
        }
        let max = self.device.limits().max_buffer_size;
        if total == 0 || total > max {
            self.belt.copies.clear();
            for &(slot, data) in parts {
                self.upload(slot, data);
            }
            return Ok(());
        }
        if self.belt.capacity < total {
            let size = total.max(self.belt.capacity * 2).min(max);
            self.belt.buffer = Some(self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("upload belt"),
                size,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            }));
            self.belt.capacity = size;
            self.belt.mapped = true;
            self.reallocations += 1;
        }
        let belt = self.belt.buffer.clone().expect("sized above");
        if !self.belt.mapped {
            // The last step's submission has finished (its results were read back), so
            // the map completes at once.
            self.map_blocking(belt.slice(..), wgpu::MapMode::Write)
                .map_err(GpuError::Step)?;
        }
        parts
            .par_iter()
            .zip(self.belt.copies.par_iter())
            .flat_map_iter(|(&(_, data), &(_, offset, _))| {
                data.chunks(BELT_PIECE)
                    .enumerate()
                    .map(move |(i, src)| (offset + (i * BELT_PIECE) as u64, src))
            })
            .try_for_each(|(offset, src)| {
                let mut view = belt
                    .get_mapped_range_mut(offset..offset + src.len() as u64)
                    .map_err(|e| GpuError::Step(format!("{e:?}")))?;
                view.slice(..).copy_from_slice(src);
                Ok::<(), GpuError>(())
            })?;
        belt.unmap();
        self.belt.mapped = false;
        self.last_upload_bytes += parts.iter().map(|(_, d)| d.len() as u64).sum::<u64>();
        Ok(())
    }

    /// Records the whole step in one command buffer and submits it: the inertial targets,
    /// the colouring, the iterations, the velocities and poses, and the copies into a
    /// staging buffer. Returns the staging buffer used, the bytes to read back and the
    /// timestamp bytes.
    fn record_and_submit(&mut self, shape: &StepShape) -> (usize, u64, u64) {
        let &StepShape {
            iterations,
            palette,
            timed,
            n,
            n_contacts,
            n_joints,
            lens: [pose_len, vel_len, status_len, js_len],
        } = shape;
        let passes = 3 + 2 * iterations;
        let ts_bytes = if timed { 2 * passes as u64 * 8 } else { 0 };
        let ranges_at = (pose_len + 2 * vel_len + status_len + js_len) as u64;
        let read_bytes = ranges_at + RANGES_BYTES + ts_bytes;
        let k = (self.frame % 2) as usize;
        self.frame += 1;
        if self.staging[k].capacity < read_bytes {
            self.staging[k] = Self::make_buffer(
                &self.device,
                "readback",
                read_bytes
                    .next_multiple_of(256)
                    .max(self.staging[k].capacity * 2),
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            );
            self.reallocations += 1;
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("avbd step"),
            });
        if let Some(belt) = &self.belt.buffer {
            for &(slot, offset, bytes) in self.belt.copies.iter().filter(|c| c.2 > 0) {
                encoder.copy_buffer_to_buffer(belt, offset, &self.buffers[slot].buffer, 0, bytes);
            }
        }
        let groups = |n: usize| (n as u32).div_ceil(WORKGROUP);
        let mut pass_index = 0u32;
        let ts = self.timestamps.as_ref().filter(|_| timed);
        let mut writes = || {
            let w = ts.map(|t| wgpu::ComputePassTimestampWrites {
                query_set: &t.set,
                beginning_of_pass_write_index: Some(2 * pass_index),
                end_of_pass_write_index: Some(2 * pass_index + 1),
            });
            pass_index += 1;
            w
        };
        let p = &self.pipelines;
        let all = groups(n).max(1);
        let warm_group =
            &self.warm_groups.as_ref().expect("built with the buffers")[self.carried_side];
        let (cx, cy) = grid(groups(n_contacts).max(1), self.max_groups);
        let (bx, by) = grid(all, self.max_groups);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd begin"),
                timestamp_writes: writes(),
            });
            pass.set_bind_group(0, self.integration_group.as_ref(), &[]);
            pass.set_pipeline(&p.begin_bodies);
            pass.dispatch_workgroups(bx, by, 1);
            if n_contacts > 0 {
                // This step's contact records from its points and the carried state.
                pass.set_bind_group(0, warm_group, &[]);
                pass.set_pipeline(&p.warm_start_contacts);
                pass.dispatch_workgroups(cx, cy, 1);
            }
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd colouring"),
                timestamp_writes: writes(),
            });
            pass.set_bind_group(0, self.coloring_group.as_ref(), &[]);
            // The adjacency of this step's contacts and joints, then the colouring over it.
            let (ex, ey) = grid(groups(n_contacts + n_joints).max(1), self.max_groups);
            let blocks = (n as u32).div_ceil(ADJ_SCAN_BLOCK).max(1);
            for (pipeline, (x, y)) in [
                (&p.adj_clear, (all, 1)),
                (&p.adj_count, (ex, ey)),
                (&p.adj_scan_blocks, (blocks, 1)),
                (&p.adj_scan_top, (1, 1)),
                (&p.adj_scan_add, (blocks, 1)),
                (&p.adj_fill, (ex, ey)),
                (&p.adj_sort, (all, 1)),
            ] {
                pass.set_pipeline(pipeline);
                pass.dispatch_workgroups(x, y, 1);
            }
            pass.set_pipeline(&p.color_init);
            pass.dispatch_workgroups(all.max(groups(COUNTERS as usize)), 1, 1);
            for _ in 0..JPL_ROUNDS {
                pass.set_pipeline(&p.color_select);
                pass.dispatch_workgroups(all, 1, 1);
                pass.set_pipeline(&p.color_assign);
                pass.dispatch_workgroups(all, 1, 1);
            }
            pass.set_pipeline(&p.color_count);
            pass.dispatch_workgroups(all, 1, 1);
            pass.set_pipeline(&p.color_scan);
            pass.dispatch_workgroups(1, 1, 1);
            pass.set_pipeline(&p.color_serial_rank);
            pass.dispatch_workgroups(all, 1, 1);
            pass.set_pipeline(&p.color_scatter);
            pass.dispatch_workgroups(all, 1, 1);
        }
        let indirect = &self.buffers[INDIRECT].buffer;
        let colors = self.color_capacity.min(palette) as u64;
        for _ in 0..iterations {
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("avbd primal"),
                    timestamp_writes: writes(),
                });
                pass.set_bind_group(0, self.solver_group.as_ref(), &[]);
                for c in 0..colors {
                    pass.set_bind_group(1, &self.slot_group, &[(c * COLOR_SLOT) as u32]);
                    pass.set_pipeline(&p.primal);
                    pass.dispatch_workgroups_indirect(indirect, LANE_ARGS_AT + c * 12);
                    pass.set_pipeline(&p.copy_back);
                    pass.dispatch_workgroups_indirect(indirect, c * 12);
                }
                pass.set_pipeline(&p.primal_serial);
                for j in 0..self.serial_capacity as u64 {
                    let slot = SERIAL_SLOT + j;
                    pass.set_bind_group(1, &self.slot_group, &[(slot * COLOR_SLOT) as u32]);
                    pass.dispatch_workgroups_indirect(indirect, SERIAL_SLOT * 12);
                }
            }
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd dual"),
                timestamp_writes: writes(),
            });
            pass.set_bind_group(0, self.solver_group.as_ref(), &[]);
            pass.set_bind_group(1, &self.slot_group, &[0]);
            if n_contacts > 0 {
                pass.set_pipeline(&p.dual_contacts);
                let (x, y) = grid(groups(n_contacts), self.max_groups);
                pass.dispatch_workgroups(x, y, 1);
            }
            if n_joints > 0 {
                pass.set_pipeline(&p.dual_joints);
                let (x, y) = grid(groups(n_joints), self.max_groups);
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd end"),
                timestamp_writes: writes(),
            });
            pass.set_bind_group(0, self.integration_group.as_ref(), &[]);
            pass.set_pipeline(&p.end_bodies);
            pass.dispatch_workgroups(bx, by, 1);
            if n_contacts > 0 {
                // What the contacts carry to the next step stays on the device.
                pass.set_bind_group(0, warm_group, &[]);
                pass.set_pipeline(&p.store_contact_warm);
                pass.dispatch_workgroups(cx, cy, 1);
            }
        }
        let staging = &self.staging[k].buffer;
        let mut copies = vec![
            (POSES, pose_len as u64),
            (VELOCITIES, vel_len as u64),
            (PREV_VELOCITIES, vel_len as u64),
            (STATUS, status_len as u64),
        ];
        copies.push((JOINT_STATES, js_len as u64));
        let mut offset = 0u64;
        for (slot, len) in copies {
            if len > 0 {
                encoder.copy_buffer_to_buffer(&self.buffers[slot].buffer, 0, staging, offset, len);
            }
            offset += len;
        }
        encoder.copy_buffer_to_buffer(
            &self.buffers[RANGES].buffer,
            0,
            staging,
            ranges_at,
            RANGES_BYTES,
        );
        if let Some(t) = ts {
            encoder.resolve_query_set(&t.set, 0..2 * passes, &t.resolve, 0);
            encoder.copy_buffer_to_buffer(
                &t.resolve,
                0,
                staging,
                ranges_at + RANGES_BYTES,
                ts_bytes,
            );
        }
        self.queue.submit([encoder.finish()]);
        (k, read_bytes, ts_bytes)
    }

    /// Reads the last step's colouring back (blocking; for tests and tools).
    pub fn coloring(&self) -> Result<GpuColoring, GpuError> {
        let n = self.counts.0;
        let raw = self.read(COLOR_OF, 0, n as u64 * 4)?;
        let ranges = self.read(RANGES, 0, RANGES_BYTES)?;
        let r: Vec<u32> = bytemuck::pod_collect_to_vec(&ranges);
        let (start, count) = (r[2 * MAX_COLORS as usize], r[2 * MAX_COLORS as usize + 1]);
        let serial_raw = self.read(COLOR_BODIES, start as u64 * 4, count as u64 * 4)?;
        let color_of = bytemuck::pod_collect_to_vec::<u8, u32>(&raw)
            .into_iter()
            .map(|c| match c {
                c if c < MAX_COLORS => c,
                u32::MAX => NOT_SOLVED,
                _ => SERIAL_GROUP,
            })
            .collect();
        Ok(GpuColoring {
            color_of,
            colors: r[2 * SLOTS as usize],
            palette: self.last_palette,
            serial: bytemuck::pod_collect_to_vec(&serial_raw),
            out_of_rounds: r[2 * SLOTS as usize + 1],
        })
    }

    /// The contact records as the last step left them (read back on demand: they stay on
    /// the device from step to step).
    pub fn contacts(&self) -> Result<Vec<ContactRecord>, GpuError> {
        let n = self.counts.1;
        let per_chunk = 1usize << self.contact_shift;
        let mut out = Vec::with_capacity(n);
        for j in 0..CONTACT_CHUNKS {
            let len = n.saturating_sub(j * per_chunk).min(per_chunk);
            if len == 0 {
                break;
            }
            let bytes = self.read(
                contact_chunk(j),
                0,
                (len * std::mem::size_of::<ContactRecord>()) as u64,
            )?;
            out.extend(bytemuck::pod_collect_to_vec::<u8, ContactRecord>(&bytes));
        }
        Ok(out)
    }

    /// The body → constraint adjacency the last step built on the device: `(offsets,
    /// items)`, with lists for solved bodies only (read back on demand, for tests).
    pub fn adjacency(&self) -> Result<CsrLists, GpuError> {
        let n = self.counts.0;
        let offsets: Vec<u32> =
            bytemuck::pod_collect_to_vec(&self.read(ADJ_OFFSETS, 0, (n as u64 + 1) * 4)?);
        let items = self.read(ADJ_ITEMS, 0, offsets[n] as u64 * 4)?;
        Ok((offsets, bytemuck::pod_collect_to_vec(&items)))
    }

    /// Maps `slice` and waits until the map completes (after the GPU work that uses it).
    fn map_blocking(&self, slice: wgpu::BufferSlice, mode: wgpu::MapMode) -> Result<(), String> {
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(mode, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| e.to_string())?;
        rx.recv()
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }

    /// Blocking copy of `len` bytes of buffer `slot` from `offset` (a temporary staging
    /// buffer; not part of the per-step path).
    fn read(&self, slot: usize, offset: u64, len: u64) -> Result<Vec<u8>, GpuError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let tmp = Self::make_buffer(
            &self.device,
            "debug readback",
            len.next_multiple_of(4),
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("read"),
            });
        encoder.copy_buffer_to_buffer(&self.buffers[slot].buffer, offset, &tmp.buffer, 0, len);
        self.queue.submit([encoder.finish()]);
        let slice = tmp.buffer.slice(..);
        self.map_blocking(slice, wgpu::MapMode::Read)
            .map_err(GpuError::Readback)?;
        let out = slice
            .get_mapped_range()
            .map_err(|e| GpuError::Readback(format!("{e:?}")))?
            .to_vec();
        tmp.buffer.unmap();
        Ok(out)
    }
}
