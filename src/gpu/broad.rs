//! The broad phase on the device (`shaders/broad_phase.wgsl`, prefix sums in
//! `shaders/scan.wgsl`): a uniform grid in a hash table filled by a counting sort, and every
//! body's candidate pairs written into its own range and sorted there, so the list is the
//! same on every run. The step records these kernels first when the device finds the
//! contacts (`step.rs`); [`GpuBroadPhase`] runs them standalone (its own device, a
//! blocking run) for tests and tools. [`crate::pipeline::collision::grid`] chooses the grid
//! bodies and the cell size and holds the Rust reference of the kernel's boxes.

use bytemuck::{Pod, Zeroable};

use super::GpuError;
use super::pipelines::{compute_pipeline, storage_entry, uniform_entry};
use crate::pipeline::collision::BodyShape;
use crate::pipeline::collision::grid::GridLayout;
use crate::rigid::body::PoseRecord;

/// The WGSL source of the broad phase kernels.
pub const BROAD_PHASE_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/shapes.wgsl"),
    include_str!("../../shaders/broad_phase.wgsl")
);

/// The WGSL source of the prefix sum.
pub const SCAN_SHADER: &str = include_str!("../../shaders/scan.wgsl");

/// `BroadParams` in broad_phase.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
pub(super) struct BroadParams {
    pub(super) n_bodies: u32,
    pub(super) table_mask: u32,
    pub(super) capacity: u32,
    pub(super) n_specials: u32,
    pub(super) cell: f32,
    pub(super) inv_cell: f32,
    pub(super) margin: f32,
    pub(super) n_excluded: u32,
    pub(super) has_old: u32,
    pub(super) pad: [u32; 3],
}

/// Buckets of the hash table for `grid_bodies` bodies in the grid (at most 8 cells each).
pub(super) fn table_size(grid_bodies: u32) -> u32 {
    (4 * grid_bodies).max(1024).next_power_of_two()
}

/// The broad phase's bind group layout: the parameters, then (binding, read-only).
pub(super) const BROAD_BINDINGS: [(u32, bool); 14] = [
    (1, true),
    (2, true),
    (3, true),
    (4, true),
    (5, true),
    (6, true),
    (7, false),
    (8, false),
    (9, false),
    (10, false),
    (11, false),
    (12, false),
    (13, true),
    (14, true),
];

/// The broad phase kernels in dispatch order (see broad_phase.wgsl).
pub(super) const BROAD_KERNELS: [&str; 5] = [
    "bp_bounds",
    "bp_count_cells",
    "bp_fill",
    "bp_count_pairs",
    "bp_write_pairs",
];

/// Counts per workgroup of scan.wgsl's first and last kernels (its `SCAN_WG`).
const SCAN_BLOCK: u32 = 256;

/// A prefix sum on the device (`scan.wgsl`): its three kernels and their bind group
/// layout (parameters: length and first index; the counts; the block sums), compiled
/// once per device and shared by every prefix sum a step records.
#[derive(Clone)]
pub(super) struct PrefixSum {
    pub(super) layout: wgpu::BindGroupLayout,
    /// `scan_blocks`, `scan_top`, `scan_add`, in dispatch order.
    kernels: [wgpu::ComputePipeline; 3],
}

impl PrefixSum {
    pub(super) fn new(device: &wgpu::Device) -> Self {
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd prefix sum"),
            entries: &[
                uniform_entry(0, false, 16),
                storage_entry(1, false),
                storage_entry(2, false),
            ],
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("scan.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SCAN_SHADER.into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd prefix sum"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let kernels = ["scan_blocks", "scan_top", "scan_add"]
            .map(|entry| compute_pipeline(device, &pipeline_layout, &module, entry));
        Self { layout, kernels }
    }

    /// The block sums' bytes a prefix sum of `len` counts needs.
    pub(super) fn sums_bytes(len: u32) -> u64 {
        4 * len.div_ceil(SCAN_BLOCK).max(1) as u64
    }

    /// The kernels of a prefix sum of `len` counts, each with its workgroup count.
    pub(super) fn steps(&self, len: u32) -> [(&wgpu::ComputePipeline, u32); 3] {
        let blocks = len.div_ceil(SCAN_BLOCK).max(1);
        let [a, b, c] = &self.kernels;
        [(a, blocks), (b, 1), (c, blocks)]
    }

    /// Records a prefix sum of `len` counts into `pass` with its `group` at index 0.
    pub(super) fn record(&self, pass: &mut wgpu::ComputePass, group: &wgpu::BindGroup, len: u32) {
        pass.set_bind_group(0, group, &[]);
        for (k, groups) in self.steps(len) {
            pass.set_pipeline(k);
            pass.dispatch_workgroups(groups, 1, 1);
        }
    }

    /// [`Self::record`] into a step's pass, each dispatch timed and counted as `kernel`.
    pub(super) fn record_into(
        &self,
        pass: &mut super::recording::Pass,
        group: &wgpu::BindGroup,
        len: u32,
        kernel: &'static str,
    ) {
        pass.set_bind_group(0, group, &[]);
        for (k, groups) in self.steps(len) {
            pass.dispatch(k, (groups, 1), kernel);
        }
    }
}

const WORKGROUP: u32 = 64;

/// What the broad phase reads of a scene.
pub struct BroadInput<'a> {
    /// Body poses (the collider's pose adds its offset).
    pub poses: &'a [PoseRecord],
    pub shapes: &'a [BodyShape],
    /// Per body, bit 0: solved (dynamic and not frozen).
    pub flags: &'a [u32],
    pub layout: &'a GridLayout,
    /// Jointed pairs `[lower, higher]`, ascending: never candidates.
    pub excluded: &'a [[u32; 2]],
    pub margin: f32,
}

/// An open device with the broad phase pipelines.
pub struct GpuBroadPhase {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    pipelines: [wgpu::ComputePipeline; 5],
    scan: PrefixSum,
}

impl GpuBroadPhase {
    /// Opens a device the way the solver does (honouring `WGPU_BACKEND`).
    pub fn new() -> Result<Self, GpuError> {
        let (device, queue, _) = super::device::standalone_device("avbd broad phase")?;
        let make = |label: &str, source: &str, entries: &[wgpu::BindGroupLayoutEntry]| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries,
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            (module, layout, pipeline_layout)
        };
        let mut entries = vec![uniform_entry(
            0,
            false,
            std::mem::size_of::<BroadParams>() as u64,
        )];
        entries.extend(BROAD_BINDINGS.map(|(b, read_only)| storage_entry(b, read_only)));
        let (module, layout, pipeline_layout) =
            make("broad_phase.wgsl", BROAD_PHASE_SHADER, &entries);
        let pipelines =
            BROAD_KERNELS.map(|e| compute_pipeline(&device, &pipeline_layout, &module, e));
        let scan = PrefixSum::new(&device);
        Ok(Self {
            device,
            queue,
            layout,
            pipelines,
            scan,
        })
    }

    fn buffer(&self, label: &str, bytes: u64, init: Option<&[u8]>) -> wgpu::Buffer {
        use wgpu::util::DeviceExt;
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        match init {
            Some(data) if !data.is_empty() => {
                self.device
                    .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some(label),
                        contents: data,
                        usage,
                    })
            }
            _ => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes.max(16).next_multiple_of(4),
                usage,
                mapped_at_creation: false,
            }),
        }
    }

    /// The candidate pairs `[lower, higher]` of a scene, ordered by owner (see
    /// broad_phase.wgsl) and then by the other body, and their total (more than `capacity`
    /// pairs: only the first `capacity` are written; blocking).
    pub fn run(&self, input: &BroadInput, capacity: u32) -> Result<(Vec<[u32; 2]>, u32), GpuError> {
        use wgpu::util::DeviceExt;
        let n = input.poses.len() as u32;
        let layout = input.layout;
        let grid_bodies = layout.classes.iter().filter(|&&c| c == 1).count() as u32;
        let table = table_size(grid_bodies);
        let params = BroadParams {
            n_bodies: n,
            table_mask: table - 1,
            capacity,
            n_specials: layout.specials.len() as u32,
            cell: layout.cell,
            inv_cell: 1.0 / layout.cell,
            margin: input.margin,
            n_excluded: input.excluded.len() as u32,
            ..Default::default()
        };
        let d = &self.device;
        let uniform = |bytes: &[u8]| {
            d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("broad params"),
                contents: bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            })
        };
        let params_buf = uniform(bytemuck::bytes_of(&params));
        let bytes = |v: &[u8]| Some(v.to_vec());
        let inputs = [
            bytes(bytemuck::cast_slice(input.poses)),
            bytes(bytemuck::cast_slice(input.shapes)),
            bytes(bytemuck::cast_slice(input.flags)),
            bytes(bytemuck::cast_slice(&layout.classes)),
            bytes(bytemuck::cast_slice(&layout.specials)),
            bytes(bytemuck::cast_slice(input.excluded)),
        ]
        .map(|b| {
            let b = b.unwrap_or_default();
            self.buffer("broad input", 16, Some(&b))
        });
        let bounds = self.buffer("bounds", n as u64 * 32, None);
        let bucket_start = self.buffer("bucket start", (table as u64 + 1) * 4, None);
        let cursor = self.buffer("cursor", table as u64 * 4, None);
        let entries = self.buffer("entries", 8 * grid_bodies as u64 * 4, None);
        let pair_start = self.buffer("pair start", (n as u64 + 1) * 4, None);
        let pairs = self.buffer("pairs", capacity.max(1) as u64 * 16, None);
        let no_old = self.buffer("no old list", 16, None);
        let mut group_entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: params_buf.as_entire_binding(),
        }];
        for (i, b) in inputs
            .iter()
            .chain([
                &bounds,
                &bucket_start,
                &cursor,
                &entries,
                &pair_start,
                &pairs,
                &no_old,
                &no_old,
            ])
            .enumerate()
        {
            group_entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.as_entire_binding(),
            });
        }
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("broad phase"),
            layout: &self.layout,
            entries: &group_entries,
        });
        // A prefix sum over `len` counts of `data`.
        let scan_group = |data: &wgpu::Buffer, len: u32| {
            let sp = uniform(bytemuck::cast_slice(&[len, 0, 0, 0]));
            let sums = self.buffer("block sums", PrefixSum::sums_bytes(len), None);
            let g = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("scan"),
                layout: &self.scan.layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: sp.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: data.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: sums.as_entire_binding(),
                    },
                ],
            });
            (g, len)
        };
        let bucket_scan = scan_group(&bucket_start, table);
        let pair_scan = scan_group(&pair_start, n);
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("broad phase"),
        });
        let bodies = n.div_ceil(WORKGROUP).max(1);
        let [bounds_k, count_cells, fill, count_pairs, write_pairs] = &self.pipelines;
        let dispatch = |encoder: &mut wgpu::CommandEncoder, k: &wgpu::ComputePipeline| {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(k);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(bodies, 1, 1);
        };
        let scan = |encoder: &mut wgpu::CommandEncoder, (g, len): &(wgpu::BindGroup, u32)| {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            self.scan.record(&mut pass, g, *len);
        };
        dispatch(&mut encoder, bounds_k);
        encoder.clear_buffer(&cursor, 0, None);
        dispatch(&mut encoder, count_cells);
        encoder.copy_buffer_to_buffer(&cursor, 0, &bucket_start, 0, table as u64 * 4);
        scan(&mut encoder, &bucket_scan);
        encoder.copy_buffer_to_buffer(&bucket_start, 0, &cursor, 0, table as u64 * 4);
        dispatch(&mut encoder, fill);
        dispatch(&mut encoder, count_pairs);
        scan(&mut encoder, &pair_scan);
        dispatch(&mut encoder, write_pairs);
        let out_bytes = 4 + capacity as u64 * 16;
        let staging = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("broad readback"),
            size: out_bytes.next_multiple_of(4).max(16),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(&pair_start, n as u64 * 4, &staging, 0, 4);
        if capacity > 0 {
            encoder.copy_buffer_to_buffer(&pairs, 0, &staging, 4, capacity as u64 * 16);
        }
        self.queue.submit([encoder.finish()]);
        let data: Vec<u32> = super::device::read_staging(d, &staging)?;
        let total = data[0];
        let written = total.min(capacity) as usize;
        let pairs = data[1..1 + 4 * written]
            .chunks_exact(4)
            .map(|p| [p[0], p[1]])
            .collect();
        Ok((pairs, total))
    }
}
