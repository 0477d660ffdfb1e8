//! The compute pipelines: WGSL sources, the binding list of each kernel group, and the
//! bind groups that tie them to the device buffers (`build.rs` makes the groups' layouts
//! and compiles the kernels).

use std::num::NonZeroU64;

use super::buffers::*;
use super::*;

pub(super) mod build;

/// The WGSL source of the solver kernels (after the shared records and helpers).
pub const SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/penalties.wgsl"),
    include_str!("../../shaders/contact_chunks.wgsl"),
    include_str!("../../shaders/avbd.wgsl"),
    include_str!("../../shaders/joints.wgsl")
);

/// The WGSL source of the contacts' warm start and of the narrow phase in the step.
pub const CONTACT_WARM_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/shapes.wgsl"),
    include_str!("../../shaders/narrow_phase.wgsl"),
    include_str!("../../shaders/box_box.wgsl"),
    include_str!("../../shaders/contact_persistence.wgsl"),
    include_str!("../../shaders/penalties.wgsl"),
    include_str!("../../shaders/contact_chunks.wgsl"),
    include_str!("../../shaders/contact_warm.wgsl"),
    include_str!("../../shaders/contact_narrow.wgsl")
);

/// The WGSL source of the colouring kernels.
pub const COLORING_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/constraint_graph.wgsl"),
    include_str!("../../shaders/coloring.wgsl")
);

/// The WGSL source of the adjacency kernels (the colouring's bind group).
pub const ADJACENCY_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/constraint_graph.wgsl"),
    include_str!("../../shaders/adjacency.wgsl")
);

/// The WGSL source of the integration kernels (inertial targets and initial guess before
/// the iterations, velocities and poses after them).
pub const INTEGRATION_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/integration.wgsl")
);

/// Bindings 1.. of the solver's group 0 (`avbd.wgsl`): (buffer, read-only).
pub(super) const SOLVER_BINDINGS: [(usize, bool); 21] = [
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
    (RANGES, true),
    (contact_chunk(1), false),
    (contact_chunk(2), false),
    (contact_chunk(3), false),
    (contact_chunk(4), false),
    (contact_chunk(5), false),
    (contact_chunk(6), false),
    (contact_chunk(7), false),
    (JOINT_CARRIED, true),
    (JOINT_HEAVIEST, true),
    (JOINT_BROKEN, false),
];

/// Bindings 1.. of the colouring's group 0 (`coloring.wgsl`), seeding from
/// `COLOR_SEEDS[side]` and writing this step's colours to the other.
pub(super) const fn coloring_bindings(side: usize) -> [(usize, bool); 19] {
    [
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
        (COLOR_SEEDS[side], true),
        (COLOR_SEEDS[1 - side], false),
    ]
}

/// Bindings 1.. of the integration's group 0 (`integration.wgsl`).
pub(super) const INTEGRATION_BINDINGS: [(usize, bool); 10] = [
    (POSES, false),
    (MASSES, true),
    (VELOCITIES, false),
    (PREV_VELOCITIES, false),
    (FORCES, true),
    (BODY_FLAGS, true),
    (STATUS, false),
    (ITERATE, false),
    (INERTIAL, false),
    (BODY_OUT, false),
];

/// Bindings 1.. of the contacts' warm start (`contact_warm.wgsl`) and the narrow phase
/// (`contact_narrow.wgsl`), reading the carried state from `CARRIED[side]` and
/// `PAIR_STATE[side]` and writing it to the others, and this step's pairs from
/// `PAIR_LIST[1 - side]`.
pub(super) const fn warm_bindings(side: usize) -> [(usize, bool); 30] {
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
        (SHAPES, true),
        (PAIR_LIST[1 - side], true),
        (PAIR_STATE[side], true),
        (PAIR_STATE[1 - side], false),
        (PAIR_COUNTS[1 - side], false),
        (NARROW_STATUS, false),
        (PAIR_START[1 - side], true),
        (NARROW_WORK, false),
    ]
}

/// The WGSL source of the islands' connected components.
pub const ISLANDS_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/shapes.wgsl"),
    include_str!("../../shaders/islands.wgsl")
);

/// Bindings 1.. of the islands (`islands.wgsl`) over this step's pair list
/// (`PAIR_LIST[1 - side]`).
pub(super) const fn island_bindings(side: usize) -> [(usize, bool); 10] {
    [
        (BODY_FLAGS, true),
        (PAIR_LIST[1 - side], true),
        (PAIR_START[1 - side], true),
        (PAIR_COUNTS[1 - side], true),
        (JOINTS, true),
        (ISLAND_PARENT, false),
        (ISLAND_ANCHORED, false),
        (ISLANDS, false),
        (NARROW_STATUS, false),
        (STATUS, true),
    ]
}

/// The WGSL source of the momentum projection of isolated islands.
pub const MOMENTUM_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/momentum.wgsl")
);

/// Bindings 1.. of the momentum projection (`momentum.wgsl`).
pub(super) const MOMENTUM_BINDINGS: [(usize, bool); 10] = [
    (POSES, true),
    (MASSES, true),
    (VELOCITIES, false),
    (FORCES, true),
    (BODY_FLAGS, true),
    (ISLANDS, true),
    (ISLAND_PARENT, false),
    (BODY_OUT, false),
    (MOMENTUM_TARGETS, false),
    (MOMENTUM_SUMS, false),
];

/// Bindings 1..=14 of the broad phase (`broad_phase.wgsl`, see `broad::BROAD_BINDINGS`),
/// writing this step's pair list into `PAIR_START` and `PAIR_LIST[1 - side]` and reading
/// the last step's from `[side]`.
pub(super) const fn broad_bindings(side: usize) -> [(usize, bool); 14] {
    [
        (POSES, true),
        (SHAPES, true),
        (BODY_FLAGS, true),
        (CLASSES, true),
        (SPECIALS, true),
        (EXCLUDED, true),
        (BOUNDS, false),
        (BUCKET_START, false),
        (CURSOR, false),
        (ENTRIES, false),
        (PAIR_START[1 - side], false),
        (PAIR_LIST[1 - side], false),
        (PAIR_START[side], true),
        (PAIR_LIST[side], true),
    ]
}

/// The islands' kernels, in dispatch order (`islands.wgsl`).
pub(super) const ISLAND_KERNELS: [&str; 5] = [
    "island_init",
    "island_link",
    "island_flatten",
    "island_mark",
    "island_count",
];

/// The momentum projection's kernels, in dispatch order (`momentum.wgsl`).
pub(super) const MOMENTUM_KERNELS: [&str; 7] = [
    "momentum_targets",
    "momentum_clear",
    "momentum_bound",
    "momentum_add",
    "momentum_inertia_bound",
    "momentum_inertia_add",
    "momentum_apply",
];

pub(super) struct Pipelines {
    pub(super) primal: wgpu::ComputePipeline,
    /// The primal sweep of a step with contacts only (no joints, no deformables).
    pub(super) primal_contacts: wgpu::ComputePipeline,
    pub(super) primal_serial: wgpu::ComputePipeline,
    pub(super) dual_contacts: wgpu::ComputePipeline,
    pub(super) dual_joints: wgpu::ComputePipeline,
    /// The joints' warm start at the step's start and their fracture test at its end.
    pub(super) warm_start_joints: wgpu::ComputePipeline,
    pub(super) fracture_joints: wgpu::ComputePipeline,
    pub(super) warm_start_contacts: wgpu::ComputePipeline,
    pub(super) store_contact_warm: wgpu::ComputePipeline,
    /// The device narrow phase: the carried manifolds and the worklist of the other pairs,
    /// its dispatch arguments, the worklist's manifolds found again.
    pub(super) narrow_carry: wgpu::ComputePipeline,
    pub(super) narrow_work_args: wgpu::ComputePipeline,
    pub(super) narrow_collide: wgpu::ComputePipeline,
    /// The broad phase kernels (`broad::BROAD_KERNELS`, then `bp_seed_scan`,
    /// `bp_seed_fill`).
    pub(super) broad: [wgpu::ComputePipeline; 7],
    /// The prefix sum: the broad phase's two and the deformable contact lists' one.
    pub(super) scan: super::broad::PrefixSum,
    /// `island_init`, `island_link`, `island_flatten`, `island_mark`, `island_count`.
    pub(super) islands: [wgpu::ComputePipeline; 5],
    /// `momentum_targets` (before `end_bodies`), then `MOMENTUM_KERNELS[1..]` (after the
    /// islands).
    pub(super) momentum: [wgpu::ComputePipeline; 7],
    pub(super) adj_clear: wgpu::ComputePipeline,
    pub(super) adj_count: wgpu::ComputePipeline,
    pub(super) adj_scan_blocks: wgpu::ComputePipeline,
    pub(super) adj_scan_top: wgpu::ComputePipeline,
    pub(super) adj_scan_add: wgpu::ComputePipeline,
    pub(super) adj_fill: wgpu::ComputePipeline,
    pub(super) adj_sort: wgpu::ComputePipeline,
    pub(super) color_init: wgpu::ComputePipeline,
    pub(super) color_work_args: wgpu::ComputePipeline,
    pub(super) color_round: wgpu::ComputePipeline,
    pub(super) color_regreedy: wgpu::ComputePipeline,
    pub(super) color_unseed_mark: wgpu::ComputePipeline,
    pub(super) color_unseed: wgpu::ComputePipeline,
    pub(super) color_count: wgpu::ComputePipeline,
    pub(super) color_scan: wgpu::ComputePipeline,
    pub(super) color_serial_rank: wgpu::ComputePipeline,
    pub(super) color_scatter: wgpu::ComputePipeline,
    pub(super) begin_bodies: wgpu::ComputePipeline,
    pub(super) end_bodies: wgpu::ComputePipeline,
}

/// The compute pipeline of `entry` in `module` over `layout` (default compilation options).
pub(super) fn compute_pipeline(
    device: &wgpu::Device,
    layout: &wgpu::PipelineLayout,
    module: &wgpu::ShaderModule,
    entry: &str,
) -> wgpu::ComputePipeline {
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(entry),
        layout: Some(layout),
        module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    })
}

pub(super) fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
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

pub(super) fn uniform_entry(binding: u32, dynamic: bool, size: u64) -> wgpu::BindGroupLayoutEntry {
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

impl GpuSolver {
    pub(super) fn rebuild_bind_groups(&mut self) {
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
        self.solver_group = Some(group(&self.layouts.solver, &SOLVER_BINDINGS, "avbd solver"));
        self.coloring_groups = Some([0, 1].map(|side| {
            group(
                &self.layouts.coloring,
                &coloring_bindings(side),
                "avbd colouring",
            )
        }));
        self.integration_group = Some(group(
            &self.layouts.integration,
            &INTEGRATION_BINDINGS,
            "avbd integration",
        ));
        self.warm_groups = Some([0, 1].map(|side| {
            group(
                &self.layouts.warm,
                &warm_bindings(side),
                "avbd contact warm start",
            )
        }));
        self.island_groups = Some([0, 1].map(|side| {
            group(
                &self.layouts.islands,
                &island_bindings(side),
                "avbd islands",
            )
        }));
        self.momentum_group = Some(group(
            &self.layouts.momentum,
            &MOMENTUM_BINDINGS,
            "avbd momentum projection",
        ));
        fn entry(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
            wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            }
        }
        self.broad_groups = Some([0, 1].map(|side| {
            let mut entries = vec![entry(0, &self.broad_params)];
            for (i, (slot, _)) in broad_bindings(side).iter().enumerate() {
                entries.push(entry(i as u32 + 1, &self.buffers[*slot].buffer));
            }
            self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("avbd broad phase"),
                layout: &self.layouts.broad,
                entries: &entries,
            })
        }));
        let scan = |params: &wgpu::Buffer, data: usize, sums: usize| {
            self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("avbd prefix sum"),
                layout: &self.pipelines.scan.layout,
                entries: &[
                    entry(0, params),
                    entry(1, &self.buffers[data].buffer),
                    entry(2, &self.buffers[sums].buffer),
                ],
            })
        };
        self.scan_groups = Some([
            scan(&self.scan_params[0], BUCKET_START, SCAN_SUMS[0]),
            scan(&self.scan_params[1], PAIR_START[1], SCAN_SUMS[1]),
            scan(&self.scan_params[1], PAIR_START[0], SCAN_SUMS[1]),
        ]);
    }
}
