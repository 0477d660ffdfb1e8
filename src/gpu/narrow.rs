//! The primitive narrow phase on the device (`shaders/narrow_phase.wgsl` and `box_box.wgsl`, the port of
//! [`crate::pipeline::collision::primitive`], and `shaders/contact_persistence.wgsl`, the
//! port of [`PrimitiveContact::update`]): one invocation per pair of a buffer of
//! [`PrimitivePair`]s writes one [`PrimitiveManifold`] (`narrow_phase`), or one
//! [`PrimitiveContact`] from the pair's last one (`narrow_persistent`). Standalone (its
//! own device, a blocking run), for tests and tools: the step runs the same functions in
//! `shaders/contact_narrow.wgsl`.

use bytemuck::{Pod, Zeroable};

use super::GpuError;
use crate::pipeline::collision::primitive::{PrimitiveContact, PrimitiveManifold, PrimitivePair};

/// The WGSL source of the narrow phase kernels (`narrow_phase`, `narrow_persistent`).
pub const NARROW_PHASE_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/shapes.wgsl"),
    include_str!("../../shaders/narrow_phase.wgsl"),
    include_str!("../../shaders/box_box.wgsl"),
    include_str!("../../shaders/contact_persistence.wgsl"),
    include_str!("../../shaders/narrow_standalone.wgsl")
);

/// `NarrowParams` in narrow_phase.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    margin: f32,
    count: u32,
    pad: [u32; 2],
}

const WORKGROUP: u32 = 64;

/// The index a pair without a last state passes to [`GpuNarrowPhase::run_persistent`].
pub const NO_OLD: u32 = u32::MAX;

/// An open device with the narrow phase pipelines.
pub struct GpuNarrowPhase {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// Layout and pipeline of `narrow_phase` (bindings 0–2) and of `narrow_persistent`
    /// (0, 1, 3–5).
    plain: (wgpu::BindGroupLayout, wgpu::ComputePipeline),
    persistent: (wgpu::BindGroupLayout, wgpu::ComputePipeline),
    adapter: String,
}

impl GpuNarrowPhase {
    /// Opens a device the way the solver does (honouring `WGPU_BACKEND`).
    pub fn new() -> Result<Self, GpuError> {
        use super::pipelines::{storage_entry, uniform_entry};
        let (device, queue, adapter) = super::device::standalone_device("avbd narrow phase")?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("narrow_phase.wgsl"),
            source: wgpu::ShaderSource::Wgsl(NARROW_PHASE_SHADER.into()),
        });
        let params = uniform_entry(0, false, std::mem::size_of::<Params>() as u64);
        let pipeline = |entry: &str, entries: &[wgpu::BindGroupLayoutEntry]| {
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(entry),
                entries,
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(entry),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let pipeline =
                super::pipelines::compute_pipeline(&device, &pipeline_layout, &module, entry);
            (layout, pipeline)
        };
        let plain = pipeline(
            "narrow_phase",
            &[params, storage_entry(1, true), storage_entry(2, false)],
        );
        let persistent = pipeline(
            "narrow_persistent",
            &[
                params,
                storage_entry(1, true),
                storage_entry(3, true),
                storage_entry(4, true),
                storage_entry(5, false),
            ],
        );
        Ok(Self {
            device,
            queue,
            plain,
            persistent,
            adapter,
        })
    }

    /// The adapter's name.
    pub fn adapter(&self) -> &str {
        &self.adapter
    }

    /// The manifold of every pair within `margin` (blocking: upload, one dispatch per
    /// 65,535 workgroups, readback).
    pub fn run(
        &self,
        pairs: &[PrimitivePair],
        margin: f32,
    ) -> Result<Vec<PrimitiveManifold>, GpuError> {
        let per_dispatch = (u16::MAX as usize) * WORKGROUP as usize;
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(per_dispatch) {
            let pairs = self.storage(chunk);
            out.extend(self.dispatch::<PrimitiveManifold>(
                &self.plain,
                chunk.len(),
                margin,
                &[(1, &pairs)],
                2,
            )?);
        }
        Ok(out)
    }

    /// Every pair's [`PrimitiveContact`] from its last one, `old[old_index[i]]` for pair
    /// `i` ([`NO_OLD`]: none), as [`PrimitiveContact::update`] makes it (blocking; at most
    /// 65,535 × 64 pairs).
    pub fn run_persistent(
        &self,
        pairs: &[PrimitivePair],
        old_index: &[u32],
        old: &[PrimitiveContact],
        margin: f32,
    ) -> Result<Vec<PrimitiveContact>, GpuError> {
        assert_eq!(pairs.len(), old_index.len(), "one old index per pair");
        if pairs.len() > (u16::MAX as usize) * WORKGROUP as usize {
            return Err(GpuError::Device(format!(
                "{} pairs in one persistent narrow phase run",
                pairs.len()
            )));
        }
        let (p, i, o) = (
            self.storage(pairs),
            self.storage(old_index),
            self.storage(old),
        );
        self.dispatch(
            &self.persistent,
            pairs.len(),
            margin,
            &[(1, &p), (3, &i), (4, &o)],
            5,
        )
    }

    /// A storage buffer holding `data` (one zeroed element when empty: storage bindings
    /// may not be empty).
    fn storage<T: Pod>(&self, data: &[T]) -> wgpu::Buffer {
        use wgpu::util::DeviceExt;
        let zero = [T::zeroed()];
        let contents = if data.is_empty() { &zero[..] } else { data };
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("narrow input"),
                contents: bytemuck::cast_slice(contents),
                usage: wgpu::BufferUsages::STORAGE,
            })
    }

    /// One dispatch of `count` invocations over the `inputs`, returning the `count`
    /// records `T` the kernel writes to binding `output`.
    fn dispatch<T: Pod>(
        &self,
        (layout, pipeline): &(wgpu::BindGroupLayout, wgpu::ComputePipeline),
        count: usize,
        margin: f32,
        inputs: &[(u32, &wgpu::Buffer)],
        output: u32,
    ) -> Result<Vec<T>, GpuError> {
        use wgpu::util::DeviceExt;
        let d = &self.device;
        let params = Params {
            margin,
            count: count as u32,
            pad: [0; 2],
        };
        let params = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("narrow params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bytes = (count.max(1) * std::mem::size_of::<T>()) as u64;
        let out = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("narrow output"),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("narrow readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: params.as_entire_binding(),
        }];
        entries.extend(inputs.iter().map(|&(binding, b)| wgpu::BindGroupEntry {
            binding,
            resource: b.as_entire_binding(),
        }));
        entries.push(wgpu::BindGroupEntry {
            binding: output,
            resource: out.as_entire_binding(),
        });
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd narrow phase"),
            layout,
            entries: &entries,
        });
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("narrow phase"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("narrow phase"),
                timestamp_writes: None,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups((count as u32).div_ceil(WORKGROUP).max(1), 1, 1);
        }
        encoder.copy_buffer_to_buffer(&out, 0, &staging, 0, bytes);
        self.queue.submit([encoder.finish()]);
        let mut records: Vec<T> = super::device::read_staging(d, &staging)?;
        records.truncate(count);
        Ok(records)
    }
}
