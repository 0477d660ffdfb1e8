//! wgpu compute backend: per-step body colouring and the whole iteration loop of a step
//! (primal sweeps per colour with their double-buffer copy-back, dual updates of contacts
//! and joints) recorded in one command submission, on the same records the CPU backend
//! uses (`shaders/coloring.wgsl`, `shaders/avbd.wgsl`).
//!
//! # One step on the GPU backend
//!
//! 1. CPU: collision detection (parry3d), inertial targets and initial guess, joint warm
//!    start (the same code as the CPU backend), and the body → constraint adjacency (CSR,
//!    [`crate::pipeline::coloring::build_adjacency`]); the CPU's greedy colouring is skipped.
//! 2. Upload: the per-step data (iterates, inertial targets, contacts, joint row states,
//!    adjacency, poses) every step; masses, joint records and the solved-body flags only
//!    when their bytes changed since the last upload ([`GpuSolver::upload_bytes`]). Buffers
//!    are resident across steps and grow by doubling, so a steady scene never reallocates
//!    ([`GpuSolver::reallocations`]). Poses go up every step because integration (velocity
//!    and pose update, `pipeline::integration`) still runs on the CPU.
//! 3. One submission: Jones–Plassmann–Luby colouring (`coloring.wgsl`: fixed hash
//!    priorities, a palette of at most [`MAX_COLORS`] colours, [`JPL_ROUNDS`] rounds, a
//!    serial fallback group, compaction into per-colour ranges and indirect dispatch
//!    arguments), then `iterations` × (primal per colour through indirect dispatches, the
//!    serial group one body per dispatch, dual of contacts, dual of joints), then a copy of
//!    the results into a staging buffer. The number of colour and serial dispatches
//!    recorded per sweep is a capacity that only grows: a step whose colouring needs more
//!    is run again from its uploaded inputs with more (the results are identical to a run
//!    with enough capacity, so determinism holds). Colours beyond the ones used are empty
//!    indirect dispatches.
//! 4. Readback: one map per step of one of two `MAP_READ` staging buffers, used
//!    alternately; iterates, contact multipliers, joint states and the colouring summary
//!    come back, and the CPU runs fracture and the velocity/pose update.
//!
//! # Latency
//!
//! Collision detection of step t+1 needs the poses at the end of step t, and those come
//! out of the iterations of step t, so a step cannot finish before its own results are
//! read back: the readback is synchronous, with zero frames of latency, and the results
//! are exactly those of the step (no stale poses). The two staging buffers alternate so
//! that a step's copy never targets the buffer the CPU read the previous step from, and
//! no unmap has to be waited for before the next step is recorded; overlapping the CPU
//! work of step t+1 with the GPU work of step t would need collision detection and
//! integration on the GPU (not done in this version).
//!
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

use crate::body::{MassRecord, PoseRecord};
use crate::config::SolverConfig;
use crate::contact::ContactRecord;
use crate::joint::{JointRecord, JointRowState};
use crate::pipeline::{InertialRecord, IterateRecord, SolverData};
use crate::world::{BodySet, JointSet};

/// The WGSL source of the solver kernels.
pub const SHADER: &str = include_str!("../shaders/avbd.wgsl");
/// The WGSL source of the colouring kernels.
pub const COLORING_SHADER: &str = include_str!("../shaders/coloring.wgsl");

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

/// GPU memory of the solver's buffers, from their sizes.
///
/// `bytes_per_*` add up the record sizes of every buffer that grows with bodies, contacts or
/// joints (device buffers, and both readback staging buffers for what is read back);
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
/// beginning and end of each compute pass (one colouring pass, then a primal pass and a
/// dual pass per iteration). `supported` is false, and the times zero, when the step was
/// not timed: the adapter lacks `Features::TIMESTAMP_QUERY`, or the step has more passes
/// than one query set holds (over 1,023 iterations).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuTimings {
    pub supported: bool,
    pub coloring_ms: f64,
    pub primal_ms: f64,
    pub dual_ms: f64,
    /// From the first pass's start to the last pass's end: the step's whole GPU time,
    /// gaps between passes included.
    pub span_ms: f64,
    /// Host side of the last step, wall clock (always measured): building the adjacency
    /// and the upload list, encoding the uploads, submitting and waiting for the mapped
    /// readback (GPU execution and both transfers), and copying the results out.
    pub host: GpuHostTimes,
}

/// Wall-clock phases of [`GpuSolver::iterate`] on the host (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuHostTimes {
    pub adjacency_ms: f64,
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
    /// Palette of the step: at most `min(MAX_COLORS, max adjacency degree + 1)`.
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
const NAMES: [&str; 23] = [
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
    (ADJ_OFFSETS, true),
    (ADJ_ITEMS, true),
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
/// Buffers whose uploads are skipped when their bytes did not change.
const TRACKED: [usize; 3] = [MASSES, JOINTS, BODY_FLAGS];

/// A growable device buffer (reallocated only when a step needs more room).
struct DeviceBuffer {
    buffer: wgpu::Buffer,
    capacity: u64,
}

struct Pipelines {
    primal: wgpu::ComputePipeline,
    primal_serial: wgpu::ComputePipeline,
    copy_back: wgpu::ComputePipeline,
    dual_contacts: wgpu::ComputePipeline,
    dual_joints: wgpu::ComputePipeline,
    color_init: wgpu::ComputePipeline,
    color_select: wgpu::ComputePipeline,
    color_assign: wgpu::ComputePipeline,
    color_count: wgpu::ComputePipeline,
    color_scan: wgpu::ComputePipeline,
    color_serial_rank: wgpu::ComputePipeline,
    color_scatter: wgpu::ComputePipeline,
}

/// What one step records: sizes and options.
struct StepShape {
    iterations: u32,
    palette: u32,
    /// Write timestamp queries.
    timed: bool,
    n: usize,
    n_contacts: usize,
    n_joints: usize,
    /// Bytes of the iterates, contacts and joint states read back.
    lens: [usize; 3],
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
    params: wgpu::Buffer,
    /// Dynamic-offset slots: colour c < 64, then serial-group position k at 64 + k.
    slots: wgpu::Buffer,
    slot_layout: wgpu::BindGroupLayout,
    slot_count: u64,
    buffers: Vec<DeviceBuffer>,
    /// Bytes last uploaded to each tracked buffer.
    shadow: Vec<Vec<u8>>,
    staging: [DeviceBuffer; 2],
    frame: u64,
    timestamps: Option<Timestamps>,
    solver_group: Option<wgpu::BindGroup>,
    coloring_group: Option<wgpu::BindGroup>,
    slot_group: wgpu::BindGroup,
    flags: Vec<u32>,
    last_colors: u32,
    last_palette: u32,
    last_serial: u32,
    last_timings: GpuTimings,
    last_upload_bytes: u64,
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
        let need = SOLVER_BINDINGS.len().max(COLORING_BINDINGS.len());
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
        let pipelines = Pipelines {
            primal: solve("primal"),
            primal_serial: solve("primal_serial"),
            copy_back: solve("copy_back"),
            dual_contacts: solve("dual_contacts"),
            dual_joints: solve("dual_joints"),
            color_init: color("color_init"),
            color_select: color("color_select"),
            color_assign: color("color_assign"),
            color_count: color("color_count"),
            color_scan: color("color_scan"),
            color_serial_rank: color("color_serial_rank"),
            color_scatter: color("color_scatter"),
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
            params,
            slots,
            slot_layout,
            slot_count: SLOTS,
            buffers,
            shadow: vec![Vec::new(); NAMES.len()],
            staging,
            frame: 0,
            timestamps,
            solver_group: None,
            coloring_group: None,
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
        let bytes_per_body = sz(std::mem::size_of::<PoseRecord>())
            + sz(std::mem::size_of::<MassRecord>())
            + iterate // iterate
            + sz(std::mem::size_of::<InertialRecord>())
            + 4 // adjacency offset
            + 8 // colour lists (grouped + serial scratch)
            + iterate // scratch (double buffer)
            + 4 // body flags
            + 4 // colour of body
            + 2 * iterate; // two staging buffers
        let bytes_per_contact = contact + 2 * 4 + 2 * contact;
        let bytes_per_joint = sz(std::mem::size_of::<JointRecord>()) + state + 2 * 4 + 2 * state;
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
    }

    /// Writes `data` into buffer `slot`; tracked buffers are skipped when unchanged.
    fn upload(&mut self, slot: usize, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if TRACKED.contains(&slot) {
            if self.shadow[slot] == data {
                return;
            }
            self.shadow[slot].clear();
            self.shadow[slot].extend_from_slice(data);
        }
        self.queue.write_buffer(&self.buffers[slot].buffer, 0, data);
        self.last_upload_bytes += data.len() as u64;
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

    /// Runs one step's colouring and `cfg.iterations` AVBD iterations on the GPU (one
    /// submission) and reads the iterates, contact multipliers and joint states back into
    /// `s` and `joints`. Builds the step's adjacency into `s.adjacency` first.
    pub fn iterate(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &mut JointSet,
        s: &mut SolverData,
    ) -> Result<(), GpuError> {
        let n = bodies.len();
        let t_start = std::time::Instant::now();
        let mut host = GpuHostTimes::default();
        let mut cursor = std::mem::take(&mut self.flags);
        crate::pipeline::coloring::build_adjacency(
            n,
            &s.contacts,
            joints,
            &mut s.adjacency,
            &mut cursor,
        );
        // Palette: greedy colouring needs at most (distinct neighbours + 1) colours, and a
        // body has no more neighbours than adjacency items.
        let mut flags = cursor;
        flags.clear();
        let mut max_degree = 0u32;
        for i in 0..n {
            let solved = bodies.is_solved(i);
            flags.push(solved as u32);
            if solved {
                max_degree = max_degree.max(s.adjacency.offsets[i + 1] - s.adjacency.offsets[i]);
            }
        }
        let palette = (max_degree + 1).min(MAX_COLORS);
        self.last_upload_bytes = 0;

        let iterations = cfg.iterations;
        let (it_len, ct_len, js_len) = (
            n * std::mem::size_of::<IterateRecord>(),
            std::mem::size_of_val(s.contacts.as_slice()),
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
            (ADJ_ITEMS, s.adjacency.items.len() * 4),
            (COLOR_BODIES, 2 * n * 4),
            (SCRATCH, it_len),
            (BODY_FLAGS, n * 4),
            (COLOR_OF, n * 4),
        ];
        for j in 0..CONTACT_CHUNKS {
            let bytes = ct_len.saturating_sub(j * chunk_bytes).min(chunk_bytes);
            sizes.push((contact_chunk(j), bytes));
        }
        self.check_limits(&sizes, n, s.contacts.len())?;
        // wgpu reports validation and out-of-memory errors to these scopes (instead of the
        // default handler, which panics); they come back as typed errors.
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        for &(slot, bytes) in &sizes {
            grown |= self.ensure(slot, bytes as u64);
        }
        if grown {
            self.rebuild_bind_groups();
        }
        // Readback layout: iterates | contacts | joint states | ranges | timestamps.
        let timed = self.ensure_timestamps(2 * (1 + 2 * iterations));
        self.flags = flags;
        // A step whose colouring needs more colour or serial dispatches than were recorded
        // is run again with more (rare: the capacities only grow); its results are only
        // copied out once every coloured body was solved.
        let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
        host.adjacency_ms = ms(t_start);
        loop {
            let t_upload = std::time::Instant::now();
            self.upload_step(cfg, bodies, joints, s, palette);
            let (k, read_bytes, ts_bytes) = self.record_and_submit(&StepShape {
                iterations,
                palette,
                timed,
                n,
                n_contacts: s.contacts.len(),
                n_joints: joints.records.len(),
                lens: [it_len, ct_len, js_len],
            });
            host.upload_ms += ms(t_upload);
            let t_wait = std::time::Instant::now();
            let staging = self.staging[k].buffer.clone();
            let slice = staging.slice(0..read_bytes);
            let (tx, rx) = std::sync::mpsc::channel();
            slice.map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            rx.recv()
                .map_err(|e| GpuError::Readback(e.to_string()))?
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            host.wait_ms += ms(t_wait);
            let t_unpack = std::time::Instant::now();
            let rerun = {
                let data = slice
                    .get_mapped_range()
                    .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
                let (a, rest) = data.split_at(it_len);
                let (b, rest) = rest.split_at(ct_len);
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
                    s.iterate[..n].copy_from_slice(bytemuck::cast_slice(a));
                    s.contacts.copy_from_slice(bytemuck::cast_slice(b));
                    joints.states.copy_from_slice(bytemuck::cast_slice(c));
                    self.last_serial = serial;
                    self.last_colors = colors;
                    self.last_palette = palette;
                    self.last_timings = match (&self.timestamps, timed) {
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
            host.unpack_ms += ms(t_unpack);
            if !rerun {
                break;
            }
            if self.slot_count < SLOTS + self.serial_capacity as u64 {
                let count = SLOTS + self.serial_capacity as u64;
                (self.slots, self.slot_group) =
                    Self::make_slots(&self.device, &self.queue, &self.slot_layout, count);
                self.slot_count = count;
                self.reallocations += 1;
            }
        }
        for scope in [validation, oom] {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(GpuError::Step(e.to_string()));
            }
        }
        self.counts = (n, s.contacts.len(), joints.records.len());
        self.last_timings.host = host;
        Ok(())
    }

    fn timings_from(bytes: &[u8], period_ns: f32, iterations: u32) -> GpuTimings {
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(bytes);
        let ms = |pass: usize| {
            ticks[2 * pass + 1].saturating_sub(ticks[2 * pass]) as f64 * period_ns as f64 * 1e-6
        };
        let mut timings = GpuTimings {
            supported: true,
            coloring_ms: ms(0),
            span_ms: ticks[ticks.len() - 1].saturating_sub(ticks[0]) as f64
                * period_ns as f64
                * 1e-6,
            ..Default::default()
        };
        for i in 0..iterations as usize {
            timings.primal_ms += ms(1 + 2 * i);
            timings.dual_ms += ms(2 + 2 * i);
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
    ) {
        let n = bodies.len();
        self.upload(POSES, bytemuck::cast_slice(&bodies.poses));
        self.upload(MASSES, bytemuck::cast_slice(&bodies.masses));
        self.upload(ITERATE, bytemuck::cast_slice(&s.iterate[..n]));
        self.upload(INERTIAL, bytemuck::cast_slice(&s.inertial[..n]));
        let per_chunk = 1usize << self.contact_shift;
        for (j, chunk) in s.contacts.chunks(per_chunk).enumerate() {
            self.upload(contact_chunk(j), bytemuck::cast_slice(chunk));
        }
        self.upload(JOINTS, bytemuck::cast_slice(&joints.records));
        self.upload(JOINT_STATES, bytemuck::cast_slice(&joints.states));
        self.upload(ADJ_OFFSETS, bytemuck::cast_slice(&s.adjacency.offsets));
        self.upload(ADJ_ITEMS, bytemuck::cast_slice(&s.adjacency.items));
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
            n_contacts: s.contacts.len() as u32,
            n_joints: joints.records.len() as u32,
            n_bodies: n as u32,
            palette,
            contact_shift: self.contact_shift,
            max_groups: self.max_groups,
        };
        self.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
        self.last_upload_bytes += params_size();
    }

    /// Records the colouring and the iterations in one command buffer and submits it.
    /// Returns the staging buffer used, the bytes to read back and the timestamp bytes.
    fn record_and_submit(&mut self, shape: &StepShape) -> (usize, u64, u64) {
        let &StepShape {
            iterations,
            palette,
            timed,
            n,
            n_contacts,
            n_joints,
            lens: [it_len, ct_len, js_len],
        } = shape;
        let passes = 1 + 2 * iterations;
        let ts_bytes = if timed { 2 * passes as u64 * 8 } else { 0 };
        let ranges_at = (it_len + ct_len + js_len) as u64;
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
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd colouring"),
                timestamp_writes: writes(),
            });
            pass.set_bind_group(0, self.coloring_group.as_ref(), &[]);
            let all = groups(n).max(1);
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
        let staging = &self.staging[k].buffer;
        let chunk_bytes = (std::mem::size_of::<ContactRecord>() as u64) << self.contact_shift;
        let mut copies = vec![(ITERATE, it_len as u64)];
        for j in 0..CONTACT_CHUNKS as u64 {
            let len = (ct_len as u64)
                .saturating_sub(j * chunk_bytes)
                .min(chunk_bytes);
            copies.push((contact_chunk(j as usize), len));
        }
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
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        rx.recv()
            .map_err(|e| GpuError::Readback(e.to_string()))?
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        let out = slice
            .get_mapped_range()
            .map_err(|e| GpuError::Readback(format!("{e:?}")))?
            .to_vec();
        tmp.buffer.unmap();
        Ok(out)
    }
}
