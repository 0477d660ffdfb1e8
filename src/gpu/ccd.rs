//! The additive CCD on the device (`shaders/ccd.wgsl`, the port of [`crate::ccd`]'s
//! point–triangle and edge–edge ACCD with a minimum separation): one invocation per
//! [`CcdQuery`] writes one [`CcdResult`], and a second kernel reduces the results to the
//! earliest time of impact of every point (`atomicMin` on the bits of non-negative floats),
//! what a growth filter over many queries needs. Standalone for now (its own device, a
//! blocking run), like [`super::narrow`]: the step does not use it yet.
//!
//! The kernel is conservative under WGSL's floating-point rules, which are weaker than the
//! IEEE arithmetic the Rust's argument assumes: `+ − ×` may round either way, `/` is 2.5 ulp,
//! `sqrt` is inherited from `1.0 / inverseSqrt(x)`, the compiler may reassociate and fuse,
//! subnormals may be flushed and NaNs may be assumed away. The shader's header says how each
//! is handled: optimisation barriers where the argument needs an order of operations, wider
//! margins ([`CcdMargins::WGSL`]), an input domain of `|x| < 2²⁴`, divisors kept normal and
//! the closest-point direction checked on its bits. A device that computes like the CPU
//! (lavapipe) returns, with any margins, the bits of the Rust CCD run with the same margins
//! ([`CcdQuery::run_cpu_with_margins`]), which checks the port; [`CcdMargins::CPU`] (the
//! Rust's own margins) are not guaranteed conservative on other devices.

use bytemuck::{Pod, Zeroable};
use glam::Vec3;

use super::GpuError;
use crate::ccd::{self, AccdParams, AccdResult, AccdStop};

/// The margins of the rounding argument (see the [module documentation](self)):
/// [`CcdMargins::WGSL`] for the device, [`CcdMargins::CPU`] to check the port bit for bit.
pub use crate::ccd::AccdMargins as CcdMargins;

/// The WGSL source of the CCD kernels (`ccd`, `earliest`).
pub const CCD_SHADER: &str = concat!(
    include_str!("../../shaders/ccd_core.wgsl"),
    include_str!("../../shaders/ccd.wgsl")
);

/// One CCD query: four points moving linearly from `start` (t = 0) to `end` (t = 1), with
/// the minimum separation ξ. Point–triangle: `[p, a, b, c]`; edge–edge:
/// `[ea0, ea1, eb0, eb1]`. 104 bytes, `Query` in ccd.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct CcdQuery {
    /// The points at t = 0.
    pub start: [[f32; 3]; 4],
    /// The points at t = 1.
    pub end: [[f32; 3]; 4],
    /// [`CcdQuery::POINT_TRIANGLE`] or [`CcdQuery::EDGE_EDGE`] (anything else: a hit at 0).
    pub kind: u32,
    /// ξ ≥ 0 (negative or NaN counts as 0, as on the CPU).
    pub min_sep: f32,
}

impl CcdQuery {
    /// `kind` of a point–triangle query.
    pub const POINT_TRIANGLE: u32 = 0;
    /// `kind` of an edge–edge query.
    pub const EDGE_EDGE: u32 = 1;

    /// The point `start[0]` against the triangle `start[1..4]`.
    pub fn point_triangle(start: &[Vec3; 4], end: &[Vec3; 4], min_sep: f32) -> Self {
        Self {
            start: start.map(|p| p.to_array()),
            end: end.map(|p| p.to_array()),
            kind: Self::POINT_TRIANGLE,
            min_sep,
        }
    }

    /// The edge `start[0..2]` against the edge `start[2..4]`.
    pub fn edge_edge(start: &[Vec3; 4], end: &[Vec3; 4], min_sep: f32) -> Self {
        Self {
            kind: Self::EDGE_EDGE,
            ..Self::point_triangle(start, end, min_sep)
        }
    }

    /// The Rust CCD's answer to the same query ([`ccd::point_triangle_accd`] or
    /// [`ccd::edge_edge_accd`]; `None` for an unknown kind).
    pub fn run_cpu(&self, params: &AccdParams) -> Option<AccdResult> {
        self.run_cpu_with_margins(params, &CcdMargins::CPU)
    }

    /// [`run_cpu`](Self::run_cpu) with other margins
    /// ([`ccd::point_triangle_accd_with_margins`], [`ccd::edge_edge_accd_with_margins`]):
    /// with [`CcdMargins::WGSL`], what the kernel computes on a device whose arithmetic is
    /// the CPU's.
    pub fn run_cpu_with_margins(
        &self,
        params: &AccdParams,
        margins: &CcdMargins,
    ) -> Option<AccdResult> {
        let (s, e) = (self.start.map(Vec3::from), self.end.map(Vec3::from));
        let sep = self.min_sep;
        match self.kind {
            Self::POINT_TRIANGLE => Some(ccd::point_triangle_accd_with_margins(
                &s, &e, sep, params, margins,
            )),
            Self::EDGE_EDGE => Some(ccd::edge_edge_accd_with_margins(
                &s, &e, sep, params, margins,
            )),
            _ => None,
        }
    }
}

/// The device's answer to one [`CcdQuery`]: 16 bytes, `CcdOut` in ccd.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct CcdResult {
    /// The certified time of impact, `1.0` when there is no hit (a hit is always below 1).
    pub toi: f32,
    /// 1 for a hit, 0 for none.
    pub hit: u32,
    /// [`AccdStop`] as [`stop_code`] numbers it.
    pub stop: u32,
    /// Steps taken.
    pub iterations: u32,
}

impl CcdResult {
    /// `Some(toi)` for a hit.
    pub fn toi(&self) -> Option<f32> {
        (self.hit != 0).then_some(self.toi)
    }

    /// Why the query stopped.
    pub fn stop(&self) -> AccdStop {
        match self.stop {
            0 => AccdStop::Clear,
            1 => AccdStop::StartInside,
            2 => AccdStop::Gap,
            3 => AccdStop::Stalled,
            _ => AccdStop::IterationCap,
        }
    }

    /// The result as the Rust CCD reports it.
    pub fn to_accd(&self) -> AccdResult {
        AccdResult {
            toi: self.toi(),
            iterations: self.iterations,
            stop: self.stop(),
        }
    }
}

/// The number of an [`AccdStop`] in [`CcdResult::stop`].
pub fn stop_code(stop: AccdStop) -> u32 {
    match stop {
        AccdStop::Clear => 0,
        AccdStop::StartInside => 1,
        AccdStop::Gap => 2,
        AccdStop::Stalled => 3,
        AccdStop::IterationCap => 4,
    }
}

impl CcdMargins {
    /// Conservative under WGSL's rules (the shader's header derives them): a relative
    /// `2⁻¹⁸` (64u; needed 23u), a slack of `2⁻¹⁸(R + V)` (needed 41.6u(R + V)), a rate slack
    /// of `2⁻²⁰(2R + V)` (needed 6.9u(2R + V)), floors `1e-21` and `1e-18`. Each is at least
    /// the CPU's, so [`CcdQuery::run_cpu_with_margins`] with them is conservative too, and
    /// is what the kernel computes on a device whose arithmetic is the CPU's.
    pub const WGSL: CcdMargins = CcdMargins {
        rel: 1.0 / 262_144.0,
        slack_per_extent: 1.0 / 262_144.0,
        rate_slack_per_extent: 1.0 / 1_048_576.0,
        slack_floor: 1e-21,
        rate_floor: 1e-18,
    };
}

/// `CcdParams` in ccd_core.wgsl (the standalone kernels' uniform, and part of the step's
/// contact parameters, `soft_contact`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct CcdParams {
    count: u32,
    max_iters: u32,
    eta: f32,
    zero: u32,
    rel: f32,
    slack_per_extent: f32,
    rate_slack_per_extent: f32,
    slack_floor: f32,
    rate_floor: f32,
    point_count: u32,
    pad: [u32; 2],
}

impl CcdParams {
    /// The parameters of `count` queries, with `accd`'s sanitising of η on the host (the
    /// kernel reads it as it is).
    pub(super) fn new(
        count: u32,
        max_iters: u32,
        eta: f32,
        margins: &CcdMargins,
        point_count: u32,
    ) -> Self {
        let eta = if eta.is_nan() {
            1.0
        } else {
            eta.clamp(1e-6, 1.0)
        };
        Self {
            count,
            max_iters,
            eta,
            zero: 0,
            rel: margins.rel,
            slack_per_extent: margins.slack_per_extent,
            rate_slack_per_extent: margins.rate_slack_per_extent,
            slack_floor: margins.slack_floor,
            rate_floor: margins.rate_floor,
            point_count,
            pad: [0; 2],
        }
    }
}

const WORKGROUP: u32 = 64;
const QUERY_BYTES: u64 = std::mem::size_of::<CcdQuery>() as u64;
const RESULT_BYTES: u64 = std::mem::size_of::<CcdResult>() as u64;

/// An open device with the CCD pipelines.
pub struct GpuCcd {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    ccd: wgpu::ComputePipeline,
    earliest: wgpu::ComputePipeline,
    adapter: String,
    /// Queries per dispatch (the storage binding size limit).
    chunk: usize,
}

impl GpuCcd {
    /// Opens a device the way the solver does (honouring `WGPU_BACKEND`).
    pub fn new() -> Result<Self, GpuError> {
        let (device, queue, adapter) = super::device::standalone_device("avbd ccd")?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("ccd.wgsl"),
            source: wgpu::ShaderSource::Wgsl(CCD_SHADER.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd ccd"),
            entries: &[
                super::pipelines::uniform_entry(0, false, std::mem::size_of::<CcdParams>() as u64),
                super::pipelines::storage_entry(1, true),
                super::pipelines::storage_entry(2, false),
                super::pipelines::storage_entry(3, true),
                super::pipelines::storage_entry(4, false),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd ccd"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = |entry: &str| {
            super::pipelines::compute_pipeline(&device, &pipeline_layout, &module, entry)
        };
        let (ccd, earliest) = (pipeline("ccd"), pipeline("earliest"));
        let binding = device.limits().max_storage_buffer_binding_size;
        let chunk = (binding / QUERY_BYTES).clamp(1, 1 << 24) as usize;
        Ok(Self {
            device,
            queue,
            layout,
            ccd,
            earliest,
            adapter,
            chunk,
        })
    }

    /// The adapter's name.
    pub fn adapter(&self) -> &str {
        &self.adapter
    }

    /// Every query's result with the margins of [`CcdMargins::WGSL`] (blocking: upload, one
    /// dispatch per chunk of the storage binding size, readback).
    pub fn run(
        &self,
        queries: &[CcdQuery],
        params: &AccdParams,
    ) -> Result<Vec<CcdResult>, GpuError> {
        self.run_with_margins(queries, params, &CcdMargins::WGSL)
    }

    /// [`run`](Self::run) with other margins ([`CcdMargins::CPU`]: the port checked bit for
    /// bit).
    pub fn run_with_margins(
        &self,
        queries: &[CcdQuery],
        params: &AccdParams,
        margins: &CcdMargins,
    ) -> Result<Vec<CcdResult>, GpuError> {
        Ok(self.execute(queries, None, params, margins)?.0)
    }

    /// Every query's result ([`CcdMargins::WGSL`]) and the earliest time of impact of each of
    /// `point_count` points: the least toi of the queries that hit and name the point among
    /// their four `point_ids` (1.0 for a point no hit names; an id of `u32::MAX` or beyond
    /// `point_count` is skipped). One submission: the reduction reads the results on the
    /// device.
    pub fn run_with_earliest(
        &self,
        queries: &[CcdQuery],
        point_ids: &[[u32; 4]],
        point_count: usize,
        params: &AccdParams,
    ) -> Result<(Vec<CcdResult>, Vec<f32>), GpuError> {
        assert_eq!(
            point_ids.len(),
            queries.len(),
            "one set of point ids per query"
        );
        let point_count = u32::try_from(point_count).expect("fewer than 2³² points");
        let (results, earliest) = self.execute(
            queries,
            Some((point_ids, point_count)),
            params,
            &CcdMargins::WGSL,
        )?;
        Ok((results, earliest.unwrap_or_default()))
    }

    fn execute(
        &self,
        queries: &[CcdQuery],
        ids: Option<(&[[u32; 4]], u32)>,
        params: &AccdParams,
        margins: &CcdMargins,
    ) -> Result<(Vec<CcdResult>, Option<Vec<f32>>), GpuError> {
        use wgpu::util::DeviceExt;
        let d = &self.device;
        let point_count = ids.map_or(0, |(_, n)| n);
        let storage = |label: &str, contents: &[u8]| {
            d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            })
        };
        // Storage bindings may not be empty.
        let earliest_init: Vec<u32> = vec![1.0f32.to_bits(); point_count.max(1) as usize];
        let earliest = storage("ccd earliest", bytemuck::cast_slice(&earliest_init));
        let no_ids = storage("ccd no ids", &[0xff; 16]);
        let result_bytes = queries.len() as u64 * RESULT_BYTES;
        let results_staging = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("ccd results readback"),
            size: result_bytes.max(RESULT_BYTES),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let earliest_staging = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("ccd earliest readback"),
            size: earliest.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder =
            d.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("ccd") });
        for (c, chunk) in queries.chunks(self.chunk).enumerate() {
            let first = c * self.chunk;
            let p = CcdParams::new(
                chunk.len() as u32,
                params.max_iters,
                params.eta,
                margins,
                point_count,
            );
            let params = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("ccd params"),
                contents: bytemuck::bytes_of(&p),
                usage: wgpu::BufferUsages::UNIFORM,
            });
            let input = storage("ccd queries", bytemuck::cast_slice(chunk));
            let output = d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("ccd results"),
                size: chunk.len() as u64 * RESULT_BYTES,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let chunk_ids = ids.map(|(ids, _)| {
                storage(
                    "ccd point ids",
                    bytemuck::cast_slice(&ids[first..first + chunk.len()]),
                )
            });
            let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("avbd ccd"),
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
                    wgpu::BindGroupEntry {
                        binding: 3,
                        resource: chunk_ids.as_ref().unwrap_or(&no_ids).as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 4,
                        resource: earliest.as_entire_binding(),
                    },
                ],
            });
            // A 2D grid: at most 65,535 workgroups along x.
            let groups = (chunk.len() as u32).div_ceil(WORKGROUP);
            let x = groups.min(u16::MAX as u32);
            let y = groups.div_ceil(x);
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("ccd"),
                    timestamp_writes: None,
                });
                pass.set_bind_group(0, &group, &[]);
                pass.set_pipeline(&self.ccd);
                pass.dispatch_workgroups(x, y, 1);
                if chunk_ids.is_some() {
                    pass.set_pipeline(&self.earliest);
                    pass.dispatch_workgroups(x, y, 1);
                }
            }
            encoder.copy_buffer_to_buffer(
                &output,
                0,
                &results_staging,
                first as u64 * RESULT_BYTES,
                chunk.len() as u64 * RESULT_BYTES,
            );
        }
        if ids.is_some() {
            encoder.copy_buffer_to_buffer(&earliest, 0, &earliest_staging, 0, earliest.size());
        }
        self.queue.submit([encoder.finish()]);
        let mut results: Vec<CcdResult> = super::device::read_staging(d, &results_staging)?;
        results.truncate(queries.len());
        let earliest = match ids {
            Some(_) => {
                let bits: Vec<u32> = super::device::read_staging(d, &earliest_staging)?;
                Some(
                    bits[..point_count as usize]
                        .iter()
                        .map(|&b| f32::from_bits(b))
                        .collect(),
                )
            }
            None => None,
        };
        Ok((results, earliest))
    }
}
