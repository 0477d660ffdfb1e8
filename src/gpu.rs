//! wgpu compute backend: the iteration loop of a step (primal sweeps per colour with their
//! double-buffer copy-back, dual updates of contacts and joints) recorded in one command
//! submission, on the same records the CPU backend uses (`shaders/avbd.wgsl`).
//!
//! Collision detection, colouring, warm start and the velocity update stay on the CPU in
//! this version; the step's records are uploaded once, the whole iteration budget runs
//! without any CPU sync, and the iterates and multipliers are read back once.

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
}

/// Stride of the per-colour uniform slots (dynamic offsets must be 256-byte aligned).
const COLOR_SLOT: u64 = 256;
const WORKGROUP: u32 = 64;
/// Storage buffers of group 0, in binding order.
const STORAGE: [(&str, bool); 11] = [
    ("poses", true),
    ("masses", true),
    ("iterate", false),
    ("inertial", true),
    ("contacts", false),
    ("joints", true),
    ("joint_states", false),
    ("adj_offsets", true),
    ("adj_items", true),
    ("color_bodies", true),
    ("scratch", false),
];

/// A growable device buffer (reallocated only when a step needs more room).
struct DeviceBuffer {
    buffer: wgpu::Buffer,
    capacity: u64,
}

/// The GPU solver: device, pipelines and the step's resident buffers.
pub struct GpuSolver {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    primal: wgpu::ComputePipeline,
    copy_back: wgpu::ComputePipeline,
    dual_contacts: wgpu::ComputePipeline,
    dual_joints: wgpu::ComputePipeline,
    layout0: wgpu::BindGroupLayout,
    layout1: wgpu::BindGroupLayout,
    params: wgpu::Buffer,
    colors: DeviceBuffer,
    storage: Vec<DeviceBuffer>,
    readback: DeviceBuffer,
    bind0: Option<wgpu::BindGroup>,
    bind1: Option<wgpu::BindGroup>,
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
        if (limits.max_storage_buffers_per_shader_stage as usize) < STORAGE.len() {
            return Err(GpuError::Unsupported {
                adapter: info.name.clone(),
                reason: format!(
                    "{} storage buffers per stage, the solver binds {}",
                    limits.max_storage_buffers_per_shader_stage,
                    STORAGE.len()
                ),
            });
        }
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("avbd"),
            required_limits: limits,
            ..Default::default()
        }))
        .map_err(|e| GpuError::Device(e.to_string()))?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("avbd.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let mut entries0 = vec![uniform_entry(
            0,
            false,
            std::mem::size_of::<Params>() as u64,
        )];
        for (i, (_, read_only)) in STORAGE.iter().enumerate() {
            entries0.push(storage_entry(i as u32 + 1, *read_only));
        }
        let layout0 = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd step"),
            entries: &entries0,
        });
        let layout1 = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd colour"),
            entries: &[uniform_entry(0, true, 8)],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd"),
            bind_group_layouts: &[Some(&layout0), Some(&layout1)],
            immediate_size: 0,
        });
        let pipeline = |entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let (primal, copy_back) = (pipeline("primal"), pipeline("copy_back"));
        let (dual_contacts, dual_joints) = (pipeline("dual_contacts"), pipeline("dual_joints"));
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: std::mem::size_of::<Params>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut solver = Self {
            colors: Self::make_buffer(&device, "colors", COLOR_SLOT, wgpu::BufferUsages::UNIFORM),
            storage: STORAGE
                .iter()
                .map(|(name, _)| {
                    Self::make_buffer(
                        &device,
                        name,
                        256,
                        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                    )
                })
                .collect(),
            readback: Self::make_buffer(&device, "readback", 256, wgpu::BufferUsages::MAP_READ),
            device,
            queue,
            info,
            primal,
            copy_back,
            dual_contacts,
            dual_joints,
            layout0,
            layout1,
            params,
            bind0: None,
            bind1: None,
            reallocations: 0,
        };
        solver.rebuild_bind_groups();
        Ok(solver)
    }

    /// Adapter name and backend, e.g. `llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)`.
    pub fn adapter_name(&self) -> String {
        format!("{} ({:?})", self.info.name, self.info.backend)
    }

    fn make_buffer(
        device: &wgpu::Device,
        label: &str,
        size: u64,
        usage: wgpu::BufferUsages,
    ) -> DeviceBuffer {
        let usage = usage | wgpu::BufferUsages::COPY_DST;
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
        let buf = &self.storage[slot];
        if buf.capacity >= need {
            return false;
        }
        let size = need.max(buf.capacity * 2);
        self.storage[slot] = Self::make_buffer(
            &self.device,
            STORAGE[slot].0,
            size,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        );
        self.reallocations += 1;
        true
    }

    fn rebuild_bind_groups(&mut self) {
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: self.params.as_entire_binding(),
        }];
        for (i, b) in self.storage.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.buffer.as_entire_binding(),
            });
        }
        self.bind0 = Some(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd step"),
            layout: &self.layout0,
            entries: &entries,
        }));
        self.bind1 = Some(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd colour"),
            layout: &self.layout1,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.colors.buffer,
                    offset: 0,
                    size: NonZeroU64::new(8),
                }),
            }],
        }));
    }

    /// Runs `cfg.iterations` AVBD iterations of the prepared step on the GPU and reads the
    /// iterates, contact multipliers and joint states back into `s` and `joints`.
    pub fn iterate(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &mut JointSet,
        s: &mut SolverData,
    ) -> Result<(), GpuError> {
        let n_colors = s.colors.count();
        let slices: [&[u8]; 11] = [
            bytemuck::cast_slice::<PoseRecord, u8>(&bodies.poses),
            bytemuck::cast_slice::<MassRecord, u8>(&bodies.masses),
            bytemuck::cast_slice::<IterateRecord, u8>(&s.iterate),
            bytemuck::cast_slice::<InertialRecord, u8>(&s.inertial),
            bytemuck::cast_slice::<ContactRecord, u8>(&s.contacts),
            bytemuck::cast_slice::<JointRecord, u8>(&joints.records),
            bytemuck::cast_slice::<JointRowState, u8>(&joints.states),
            bytemuck::cast_slice::<u32, u8>(&s.adjacency.offsets),
            bytemuck::cast_slice::<u32, u8>(&s.adjacency.items),
            bytemuck::cast_slice::<u32, u8>(&s.colors.bodies),
            &[],
        ];
        let scratch_bytes = (s.colors.bodies.len() * std::mem::size_of::<IterateRecord>()) as u64;
        let mut grown = false;
        for (slot, data) in slices.iter().enumerate() {
            grown |= self.ensure(slot, data.len() as u64);
        }
        grown |= self.ensure(10, scratch_bytes);
        let colors_bytes = (n_colors.max(1) as u64) * COLOR_SLOT;
        if self.colors.capacity < colors_bytes {
            self.colors = Self::make_buffer(
                &self.device,
                "colors",
                colors_bytes.max(self.colors.capacity * 2),
                wgpu::BufferUsages::UNIFORM,
            );
            self.reallocations += 1;
            grown = true;
        }
        let (it_len, ct_len, js_len) = (slices[2].len(), slices[4].len(), slices[6].len());
        let read_bytes = (it_len + ct_len + js_len) as u64;
        if self.readback.capacity < read_bytes {
            self.readback = Self::make_buffer(
                &self.device,
                "readback",
                read_bytes
                    .next_multiple_of(256)
                    .max(self.readback.capacity * 2),
                wgpu::BufferUsages::MAP_READ,
            );
            self.reallocations += 1;
        }
        if grown {
            self.rebuild_bind_groups();
        }
        for (slot, data) in slices.iter().enumerate() {
            if !data.is_empty() {
                self.queue.write_buffer(&self.storage[slot].buffer, 0, data);
            }
        }
        let params = Params {
            dt: cfg.dt,
            alpha: cfg.alpha,
            beta_linear: cfg.beta_linear,
            beta_angular: cfg.beta_angular,
            k_max: cfg.k_max,
            lambda_max: cfg.lambda_max,
            n_contacts: s.contacts.len() as u32,
            n_joints: joints.records.len() as u32,
        };
        self.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
        let mut slots = vec![0u8; (n_colors as u64 * COLOR_SLOT) as usize];
        for c in 0..n_colors {
            let range = [
                s.colors.offsets[c],
                s.colors.offsets[c + 1] - s.colors.offsets[c],
            ];
            let at = c * COLOR_SLOT as usize;
            slots[at..at + 8].copy_from_slice(bytemuck::cast_slice(&range));
        }
        if !slots.is_empty() {
            self.queue.write_buffer(&self.colors.buffer, 0, &slots);
        }

        // The whole iteration budget in one submission.
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("avbd step"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd iterations"),
                timestamp_writes: None,
            });
            let groups = |n: usize| (n as u32).div_ceil(WORKGROUP);
            pass.set_bind_group(0, self.bind0.as_ref(), &[]);
            for _ in 0..cfg.iterations {
                for c in 0..n_colors {
                    let count = (s.colors.offsets[c + 1] - s.colors.offsets[c]) as usize;
                    pass.set_bind_group(1, self.bind1.as_ref(), &[(c as u64 * COLOR_SLOT) as u32]);
                    pass.set_pipeline(&self.primal);
                    pass.dispatch_workgroups(groups(count), 1, 1);
                    pass.set_pipeline(&self.copy_back);
                    pass.dispatch_workgroups(groups(count), 1, 1);
                }
                pass.set_bind_group(1, self.bind1.as_ref(), &[0]);
                if !s.contacts.is_empty() {
                    pass.set_pipeline(&self.dual_contacts);
                    pass.dispatch_workgroups(groups(s.contacts.len()), 1, 1);
                }
                if !joints.records.is_empty() {
                    pass.set_pipeline(&self.dual_joints);
                    pass.dispatch_workgroups(groups(joints.records.len()), 1, 1);
                }
            }
        }
        let mut offset = 0u64;
        for (slot, len) in [(2usize, it_len), (4, ct_len), (6, js_len)] {
            if len > 0 {
                encoder.copy_buffer_to_buffer(
                    &self.storage[slot].buffer,
                    0,
                    &self.readback.buffer,
                    offset,
                    len as u64,
                );
            }
            offset += len as u64;
        }
        self.queue.submit([encoder.finish()]);

        // One readback per step.
        if read_bytes == 0 {
            return Ok(());
        }
        let slice = self.readback.buffer.slice(0..read_bytes);
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
        {
            let data = slice
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
            let (a, rest) = data.split_at(it_len);
            let (b, c) = rest.split_at(ct_len);
            s.iterate.copy_from_slice(bytemuck::cast_slice(a));
            s.contacts.copy_from_slice(bytemuck::cast_slice(b));
            joints
                .states
                .copy_from_slice(bytemuck::cast_slice(&c[..js_len]));
        }
        self.readback.buffer.unmap();
        Ok(())
    }
}
