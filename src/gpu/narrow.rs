//! The primitive narrow phase on the device (`shaders/narrow_phase.wgsl`, the port of
//! [`crate::pipeline::collision::primitive`]): one invocation per pair of a buffer of
//! [`PrimitivePair`]s writes one [`PrimitiveManifold`]. Standalone for now (its own device,
//! a blocking run): the step does not use it yet.

use bytemuck::{Pod, Zeroable};

use super::GpuError;
use crate::pipeline::collision::primitive::{PrimitiveManifold, PrimitivePair};

/// The WGSL source of the narrow phase kernel (`narrow_phase`).
pub const NARROW_PHASE_SHADER: &str = concat!(
    include_str!("../../shaders/common.wgsl"),
    include_str!("../../shaders/narrow_phase.wgsl")
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

/// An open device with the narrow phase pipeline.
pub struct GpuNarrowPhase {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
    adapter: String,
}

impl GpuNarrowPhase {
    /// Opens a device the way the solver does (honouring `WGPU_BACKEND`).
    pub fn new() -> Result<Self, GpuError> {
        let (device, queue, adapter) = super::device::standalone_device("avbd narrow phase")?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("narrow_phase.wgsl"),
            source: wgpu::ShaderSource::Wgsl(NARROW_PHASE_SHADER.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd narrow phase"),
            entries: &[
                super::pipelines::uniform_entry(0, false, std::mem::size_of::<Params>() as u64),
                super::pipelines::storage_entry(1, true),
                super::pipelines::storage_entry(2, false),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd narrow phase"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("narrow_phase"),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("narrow_phase"),
            compilation_options: Default::default(),
            cache: None,
        });
        Ok(Self {
            device,
            queue,
            layout,
            pipeline,
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
            out.extend(self.run_chunk(chunk, margin)?);
        }
        Ok(out)
    }

    fn run_chunk(
        &self,
        pairs: &[PrimitivePair],
        margin: f32,
    ) -> Result<Vec<PrimitiveManifold>, GpuError> {
        use wgpu::util::DeviceExt;
        let d = &self.device;
        let params = Params {
            margin,
            count: pairs.len() as u32,
            pad: [0; 2],
        };
        let params = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("narrow params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        // Storage bindings may not be empty.
        let input: Vec<PrimitivePair> = if pairs.is_empty() {
            vec![PrimitivePair::default()]
        } else {
            pairs.to_vec()
        };
        let input = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("narrow pairs"),
            contents: bytemuck::cast_slice(&input),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let bytes = (input.size() / std::mem::size_of::<PrimitivePair>() as u64)
            * std::mem::size_of::<PrimitiveManifold>() as u64;
        let output = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("narrow manifolds"),
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
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd narrow phase"),
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: output.as_entire_binding(),
                },
            ],
        });
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("narrow phase"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("narrow phase"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups((pairs.len() as u32).div_ceil(WORKGROUP).max(1), 1, 1);
        }
        encoder.copy_buffer_to_buffer(&output, 0, &staging, 0, bytes);
        self.queue.submit([encoder.finish()]);
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        d.poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        rx.recv()
            .map_err(|e| GpuError::Readback(e.to_string()))?
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        let mut out: Vec<PrimitiveManifold> = bytemuck::pod_collect_to_vec(
            &slice
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(format!("{e:?}")))?,
        );
        staging.unmap();
        out.truncate(pairs.len());
        Ok(out)
    }
}
