//! Vertex block descent of the deformable bodies on the device (`shaders/vbd.wgsl`, the two-level
//! step in `coarse.wgsl`): the iterations of [`crate::pipeline::vbd`] on the same records.
//!
//! Uploaded by `upload.rs` (the topology when it changes, the step's state every step) and
//! recorded into the rigid step's command buffer (`record.rs`), so one submission runs
//! both halves, coupled: each iteration is the rigid bodies' primal sweep (which takes the
//! attachments' rows, reading the vertices), then this module's passes — the two-level
//! step's correction (the residual at the iterate, its restriction to each body's coarse
//! nodes, the solve with the frame's factor, the prolongation) and one dispatch per vertex
//! colour (the vertices take the attachments' rows, reading the bodies' iterates) — then
//! the rigid dual updates and the attachments'. At the end the displacements and the
//! attachments' multipliers are copied into a staging buffer. The dispatches do not depend
//! on the data: the colours are fixed by the topology, and a body whose coarse step is no
//! descent step writes a zero correction.
//!
//! On the host for now: the inertial targets and initial guess (the CPU's `vbd::begin_step`),
//! the coarse operator's assembly and f64 factorisation (once per frame, from the initial
//! guess; the factor goes up in f32), the step's end (`vbd::end_step`: velocities, the
//! non-finite guard, free bodies' momentum), the attachments' warm start and fracture, and
//! surface contact's frame set-up (its iterations run here too: `super::soft_contact`).

use bytemuck::{Pod, Zeroable};
use glam::Vec3A;

use super::GpuError;
use super::pipelines::{compute_pipeline, storage_entry, uniform_entry};
use crate::config::SolverConfig;
use crate::deformable::AttachmentSet;
use crate::deformable::attachment::AttachmentRecord;
use crate::deformable::set::DeformableSet;
use crate::pipeline::coarse::NONE;
use crate::pipeline::surface_contact::rows::Pair;
use crate::pipeline::vbd::VertexState;

mod record;
mod upload;

/// The WGSL source of the deformable kernels.
pub const VBD_SHADER: &str = concat!(
    include_str!("../../../shaders/vbd.wgsl"),
    include_str!("../../../shaders/coarse.wgsl"),
    include_str!("../../../shaders/ccd_core.wgsl"),
    include_str!("../../../shaders/contact_geometry.wgsl"),
    include_str!("../../../shaders/surface_contact.wgsl"),
    include_str!("../../../shaders/contact_advance.wgsl"),
    include_str!("../../../shaders/contact_lists.wgsl"),
    include_str!("../../../shaders/contact_bodies.wgsl")
);

/// Unknowns of one body's coarse system the device's solve holds (`rhs` in coarse.wgsl):
/// 1,024 nodes.
pub const MAX_COARSE_UNKNOWNS: usize = 3072;

/// Vertices (and coarse bodies' lanes) per workgroup.
const WG: u32 = 64;
/// Bytes between two colours' dynamic-offset slots.
const SLOT: u64 = 256;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SoftParams {
    n_vertices: u32,
    n_bodies: u32,
    inv_h: f32,
    n_attachments: u32,
    alpha: f32,
    lambda_max: f32,
    beta_linear: f32,
    k_max: f32,
    line_search: u32,
    search_at: u32,
    /// Where the vertices' colours start in the colour list (after the members).
    color_of: u32,
    /// Elements by kind, for `coarse_element_forces`.
    n_tets: u32,
    n_tris: u32,
    n_hinges: u32,
    pad: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SoftVertex {
    p: [f32; 4],
    yd: [f32; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CoarseVertex {
    nodes: [u32; 8],
    weights: [f32; 8],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CoarseBody {
    node_start: u32,
    unknowns: u32,
    factor_start: u32,
    ok: u32,
    body: u32,
    size: f32,
    vertex_start: u32,
    vertex_end: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct NodeItem {
    vertex: u32,
    weight: f32,
}

/// The storage buffers, in binding order (binding = index + 1).
const VERTS: usize = 0;
const DISP: usize = 1;
const INCIDENT_OFFSETS: usize = 2;
const INCIDENT: usize = 3;
const TETS: usize = 4;
const TRIS: usize = 5;
const HINGES: usize = 6;
const MATERIALS: usize = 7;
const COLOR_LIST: usize = 8;
const COARSE_VERTICES: usize = 9;
const COARSE_BODIES: usize = 10;
const FACTOR: usize = 11;
const NODE_OFFSETS: usize = 12;
const NODE_ITEMS: usize = 13;
const RESIDUAL: usize = 14;
const DELTA: usize = 15;
const ATTACHMENTS: usize = 16;
const ATT_VERTEX_OFFSETS: usize = 17;
const ATT_VERTEX_ITEMS: usize = 18;
/// Bound by the deformable kernels (bindings 1–19; 20 and 21 are the rigid bodies' poses
/// and iterates).
const GROUP_BUFFERS: usize = 19;
/// The attachments by body: bound by the rigid primal (`avbd.wgsl`, group 2) only.
const ATT_BODY_OFFSETS: usize = 19;
const ATT_BODY_ITEMS: usize = 20;
/// Each element's force on each of its vertices at the iterate (`coarse_element_forces`,
/// which the residual gathers): binding 22, after the rigid bodies' two.
const ELEMENT_FORCES: usize = 21;
const BUFFERS: usize = 22;
/// Written by the kernels.
const WRITTEN: [usize; 4] = [DISP, RESIDUAL, DELTA, ATTACHMENTS];

/// The bindings of the rigid primal's group 2 (`avbd.wgsl`): attachments, the attachments
/// by body (offsets, items), the vertices and their displacements; then (binding 5) the
/// contact rows' terms of each body's system (`soft_contact`).
const COUPLING: [usize; 5] = [ATTACHMENTS, ATT_BODY_OFFSETS, ATT_BODY_ITEMS, VERTS, DISP];

/// The layout of the rigid primal's group 2.
pub(super) fn coupling_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    let entries: Vec<_> = (0..=COUPLING.len() as u32)
        .map(|b| storage_entry(b, true))
        .collect();
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("avbd coupling"),
        entries: &entries,
    })
}

/// Group 2 of a world with no deformable body: empty lists.
pub(super) fn empty_coupling(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
) -> wgpu::BindGroup {
    let buffer = storage_buffer(device, "no attachments", 256, wgpu::BufferUsages::STORAGE);
    let entries: Vec<_> = (0..=COUPLING.len() as u32)
        .map(|b| wgpu::BindGroupEntry {
            binding: b,
            resource: buffer.as_entire_binding(),
        })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("avbd no coupling"),
        layout,
        entries: &entries,
    })
}

/// What the step needs of the deformable half: the bodies and the attachments (their warm
/// start done); the vertices' state (and the frame's contact set-up) is
/// `SolverData::vertices`.
#[derive(Clone, Copy)]
pub struct DeformableStep<'a> {
    pub set: &'a DeformableSet,
    pub attachments: &'a AttachmentSet,
}

/// What a step's contact stage asks of a run again (`SoftStep::contact_outcome`).
#[derive(Default)]
pub(super) struct ContactOutcome {
    /// The pairs of the rows the step made, when it runs again (empty otherwise).
    pub(super) made: Vec<Pair>,
    /// The rows ran out of room.
    pub(super) overflow: bool,
    /// An iterate left its cages (its island advanced only as far as they reach).
    pub(super) escaped: bool,
    /// The vertices' displacements at the step's final iterate.
    pub(super) reached: Vec<Vec3A>,
}

/// A readback requested and not yet done.
struct Pending {
    bytes: u64,
    attachment_bytes: u64,
    mapped: std::sync::Arc<std::sync::OnceLock<Result<(), wgpu::BufferAsyncError>>>,
}

/// The device's half of the deformable step: pipelines, resident records, readback.
pub(super) struct SoftStep {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    range_layout: wgpu::BindGroupLayout,
    sweep: wgpu::ComputePipeline,
    /// `vbd_sweep_lanes` for `SolverConfig::gpu_vertex_lanes` > 1, made when first asked
    /// for (each lane count compiles the module again).
    lanes_sweep: Option<(u32, wgpu::ComputePipeline)>,
    vertex_lanes: u32,
    module: wgpu::ShaderModule,
    pipeline_layout: wgpu::PipelineLayout,
    /// The displacements before an iteration's colours, for the contact rows' reads
    /// (`vbd_snapshot`).
    snapshot: wgpu::ComputePipeline,
    /// Each element's forces once, before the residual gathers them.
    element_forces: wgpu::ComputePipeline,
    residual: wgpu::ComputePipeline,
    solve: wgpu::ComputePipeline,
    prolong: wgpu::ComputePipeline,
    attachment_dual: wgpu::ComputePipeline,
    /// The contact stage (`soft_contact`; group 2 of every deformable kernel).
    contact: super::soft_contact::ContactStep,
    /// Workgroups per dimension of the deformable dispatches (2-D grids past it): the
    /// device's limit, or less for testing the grids on small scenes.
    dispatch_groups: u32,
    adapter: String,
    params: wgpu::Buffer,
    ranges: wgpu::Buffer,
    range_group: wgpu::BindGroup,
    buffers: Vec<wgpu::Buffer>,
    /// The deformable kernels' group and the rigid primal's group 2 (built by
    /// [`Self::bind`] each step: they name the rigid step's buffers too).
    group: Option<wgpu::BindGroup>,
    coupling: Option<wgpu::BindGroup>,
    staging: wgpu::Buffer,
    /// What the resident topology was uploaded for: the set's generation, the node budget
    /// and the time step (what the coarse spaces are built from).
    key: Option<(u64, u32, u32)>,
    /// Each colour's range of the colour list.
    colors: Vec<(u32, u32)>,
    /// Where the vertices' colours start in the colour list.
    color_of: u32,
    /// Bodies with a coarse space (one workgroup each).
    coarse_bodies: u32,
    /// This step's sizes: vertices, attachments, iterations, whether the coarse step runs.
    n_vertices: u32,
    /// Tetrahedra, membranes, hinges.
    n_elements: [u32; 3],
    n_attachments: u32,
    iterations: u32,
    coarse_on: bool,
    /// Whether the coarse steps are checked by the line search, and where its slots start
    /// in the node steps' buffer.
    line_search: bool,
    search_at: u32,
    /// The line search's kernels: the residual again, the secant cut, the prolongation.
    checked_residual: wgpu::ComputePipeline,
    line_search_cut: wgpu::ComputePipeline,
    checked_prolong: wgpu::ComputePipeline,
    pending: Option<Pending>,
    /// What was last written to each buffer uploaded only when it changes (the attachments'
    /// lists: `SoftStep::put_if_changed`).
    written: Vec<Vec<u8>>,
    /// Bytes uploaded and read back by the last step, every run of it.
    pub(super) upload_bytes: u64,
    pub(super) download_bytes: u64,
}

impl SoftStep {
    /// `scan`: the solver's prefix sum, which the contact stage's lists use too.
    pub(super) fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        adapter: &str,
        scan: &super::broad::PrefixSum,
    ) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("vbd.wgsl"),
            source: wgpu::ShaderSource::Wgsl(VBD_SHADER.into()),
        });
        let mut entries = vec![uniform_entry(
            0,
            false,
            std::mem::size_of::<SoftParams>() as u64,
        )];
        entries
            .extend((0..GROUP_BUFFERS).map(|i| storage_entry(i as u32 + 1, !WRITTEN.contains(&i))));
        // The bodies' iterates are written by the contact stage's frame end.
        entries.extend([
            storage_entry(GROUP_BUFFERS as u32 + 1, true),
            storage_entry(GROUP_BUFFERS as u32 + 2, false),
            storage_entry(GROUP_BUFFERS as u32 + 3, false),
        ]);
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd vbd"),
            entries: &entries,
        });
        let range_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd vbd colour"),
            entries: &[uniform_entry(0, true, 16)],
        });
        let contact_layout = super::soft_contact::layout(device);
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd vbd"),
            bind_group_layouts: &[Some(&layout), Some(&range_layout), Some(&contact_layout)],
            immediate_size: 0,
        });
        let ccd_args_layout = super::soft_contact::ccd_args_layout(device);
        let with_ccd_args = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd vbd, CCD arguments"),
            bind_group_layouts: &[
                Some(&layout),
                Some(&range_layout),
                Some(&contact_layout),
                Some(&ccd_args_layout),
            ],
            immediate_size: 0,
        });
        let pipeline = |entry: &str| compute_pipeline(device, &pipeline_layout, &module, entry);
        let params = storage_buffer(
            device,
            "vbd params",
            256,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        );
        let ranges = storage_buffer(
            device,
            "vbd colour ranges",
            SLOT,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        );
        let range_group = range_group(device, &range_layout, &ranges);
        let buffers: Vec<wgpu::Buffer> = (0..BUFFERS).map(|_| resident(device, 256)).collect();
        let contact = super::soft_contact::ContactStep::new(
            device,
            queue,
            &module,
            (&pipeline_layout, &with_ccd_args),
            (contact_layout, &ccd_args_layout),
            scan,
        );
        Self {
            contact,
            dispatch_groups: device.limits().max_compute_workgroups_per_dimension,
            adapter: adapter.to_string(),
            sweep: pipeline("vbd_sweep"),
            lanes_sweep: None,
            vertex_lanes: 1,
            module: module.clone(),
            pipeline_layout: pipeline_layout.clone(),
            snapshot: pipeline("vbd_snapshot"),
            element_forces: pipeline("coarse_element_forces"),
            residual: pipeline("coarse_residual"),
            solve: pipeline("coarse_solve"),
            prolong: pipeline("coarse_prolong"),
            attachment_dual: pipeline("attachment_dual"),
            device: device.clone(),
            queue: queue.clone(),
            layout,
            range_layout,
            params,
            ranges,
            range_group,
            buffers,
            group: None,
            coupling: None,
            staging: readback_buffer(device, 256),
            key: None,
            colors: Vec::new(),
            color_of: 0,
            coarse_bodies: 0,
            n_vertices: 0,
            n_elements: [0; 3],
            n_attachments: 0,
            iterations: 0,
            coarse_on: false,
            line_search: false,
            search_at: 0,
            checked_residual: pipeline("coarse_residual_checked"),
            line_search_cut: pipeline("coarse_line_search"),
            checked_prolong: pipeline("coarse_prolong_checked"),
            pending: None,
            written: vec![Vec::new(); BUFFERS],
            upload_bytes: 0,
            download_bytes: 0,
        }
    }

    /// Bytes allocated for the deformable half on the device: parameters, colour ranges,
    /// resident buffers, the readback staging buffer and the contact stage's.
    pub(super) fn memory_bytes(&self) -> u64 {
        [&self.params, &self.ranges, &self.staging]
            .iter()
            .map(|b| b.size())
            .sum::<u64>()
            + self.buffers.iter().map(|b| b.size()).sum::<u64>()
            + self.contact.memory_bytes()
    }

    /// Displacements, then attachments, then the contact stage's state.
    fn readback_bytes(&self) -> u64 {
        (self.contact_offset() + self.contact.readback_bytes()).max(16)
    }

    fn contact_offset(&self) -> u64 {
        let att = self.n_attachments as u64 * std::mem::size_of::<AttachmentRecord>() as u64;
        16 * self.n_vertices as u64 + att
    }

    /// Builds this step's bind groups: the deformable kernels' (with the rigid bodies'
    /// poses and iterates) and the rigid primal's group 2.
    pub(super) fn bind(
        &mut self,
        poses: &wgpu::Buffer,
        iterate: &wgpu::Buffer,
        coupling_layout: &wgpu::BindGroupLayout,
    ) {
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: self.params.as_entire_binding(),
        }];
        entries.extend(
            self.buffers[..GROUP_BUFFERS]
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32 + 1,
                    resource: b.as_entire_binding(),
                }),
        );
        let forces = &self.buffers[ELEMENT_FORCES];
        for (k, b) in [poses, iterate, forces].into_iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: (GROUP_BUFFERS + 1 + k) as u32,
                resource: b.as_entire_binding(),
            });
        }
        self.group = Some(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd vbd"),
            layout: &self.layout,
            entries: &entries,
        }));
        let mut entries: Vec<_> = COUPLING
            .iter()
            .enumerate()
            .map(|(b, &i)| wgpu::BindGroupEntry {
                binding: b as u32,
                resource: self.buffers[i].as_entire_binding(),
            })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: COUPLING.len() as u32,
            resource: self.contact.terms().as_entire_binding(),
        });
        self.coupling = Some(self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd coupling"),
            layout: coupling_layout,
            entries: &entries,
        }));
    }

    /// The rigid primal's group 2 for this step.
    pub(super) fn coupling(&self) -> Option<&wgpu::BindGroup> {
        self.coupling.as_ref()
    }

    /// Sweeps with `lanes` lanes per vertex from the next recording on.
    fn use_vertex_lanes(&mut self, lanes: u32) {
        self.vertex_lanes = lanes;
        if lanes == 1 || self.lanes_sweep.as_ref().is_some_and(|(l, _)| *l == lanes) {
            return;
        }
        let constants = [("VERTEX_LANES", lanes as f64)];
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("vbd_sweep_lanes"),
                layout: Some(&self.pipeline_layout),
                module: &self.module,
                entry_point: Some("vbd_sweep_lanes"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    ..Default::default()
                },
                cache: None,
            });
        self.lanes_sweep = Some((lanes, pipeline));
    }

    /// Requests the map of the staging buffer (after the submission).
    pub(super) fn request_map(&mut self) {
        let bytes = self.readback_bytes();
        self.download_bytes += bytes;
        let mapped = std::sync::Arc::new(std::sync::OnceLock::new());
        let done = mapped.clone();
        self.staging
            .slice(0..bytes)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = done.set(r);
            });
        self.pending = Some(Pending {
            bytes,
            attachment_bytes: self.n_attachments as u64
                * std::mem::size_of::<AttachmentRecord>() as u64,
            mapped,
        });
    }

    /// Caps the deformable dispatches at `max_groups` workgroups per dimension (a test
    /// hook: the kernels then run in 2-D grids on small scenes).
    pub(super) fn limit_dispatch(&mut self, max_groups: u32) {
        self.dispatch_groups = self.dispatch_groups.min(max_groups.max(1));
        self.contact.max_groups = self.dispatch_groups;
    }

    /// The live contact rows as the device holds them (a test hook: `ContactStep`).
    pub(super) fn contact_rows_for_tests(
        &self,
    ) -> Result<Vec<crate::gpu::soft_contact::DeviceRowTerms>, GpuError> {
        self.contact.rows_for_tests()
    }

    /// The contact row lists' offsets, device and host (a test hook: `ContactStep`).
    pub(super) fn list_offsets_for_tests(
        &self,
        contact: &crate::pipeline::surface_contact::SurfaceContact,
    ) -> Result<[Vec<u32>; 2], GpuError> {
        self.contact.list_offsets_for_tests(contact)
    }

    /// What the contact stage of the step just read asks of a run again (the staging
    /// buffer is mapped: the caller waited for the device): the pairs of the rows it made,
    /// and whether the rows ran out of room. Only the flags where no step runs again for
    /// them (`rebuild` false: `SolverConfig::contact_cage_rebuild`).
    pub(super) fn contact_outcome(&mut self, rebuild: bool) -> Result<ContactOutcome, GpuError> {
        if self.pending.is_none() || !self.contact.on() {
            return Ok(ContactOutcome::default());
        }
        let at = self.contact_offset();
        let bytes = self.contact.readback_bytes();
        let slice = self.staging.slice(at..at + bytes);
        let data = slice
            .get_mapped_range()
            .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
        let status_at = self.contact.status_offset() as usize;
        let status: [u32; 4] = bytemuck::pod_read_unaligned(&data[status_at..status_at + 16]);
        self.contact.note_rows(status[0]);
        let escaped = status[2] != 0;
        let overflow = status[3] != 0;
        if !rebuild {
            return Ok(ContactOutcome {
                overflow,
                escaped,
                ..Default::default()
            });
        }
        let reached = match escaped {
            true => {
                let disp = self.staging.slice(0..16 * self.n_vertices as u64);
                let disp = disp
                    .get_mapped_range()
                    .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
                bytemuck::cast_slice::<u8, [f32; 4]>(&disp)
                    .iter()
                    .map(|d| Vec3A::new(d[0], d[1], d[2]))
                    .collect()
            }
            false => Vec::new(),
        };
        // The rows made seed a run again only.
        let made = match escaped || overflow {
            true => {
                let (made, extra) = self.contact.new_pairs(&data)?;
                self.download_bytes += extra;
                made
            }
            false => Vec::new(),
        };
        Ok(ContactOutcome {
            made,
            overflow,
            escaped,
            reached,
        })
    }

    /// Starts counting a step's traffic (all its runs).
    pub(super) fn begin_step(&mut self) {
        self.upload_bytes = 0;
        self.download_bytes = 0;
    }

    /// More room for the rows of the next run.
    pub(super) fn grow_rows(&mut self) {
        self.contact.row_room = self.contact.row_room.saturating_mul(4);
    }

    /// Room for at most `room` rows (or the rows carried) in the next upload.
    pub(super) fn cap_rows_once(&mut self, room: u32) {
        self.contact.row_cap_once = Some(room);
    }

    /// The readback copies only the carried contact rows (a test hook).
    pub(super) fn read_carried_rows_only(&mut self, on: bool) {
        self.contact.read_carried_only = on;
    }

    /// Drops a readback whose step is run again (the device has finished it: the caller
    /// waited).
    pub(super) fn discard(&mut self) {
        if let Some(p) = self.pending.take()
            && p.mapped.get().is_some_and(|r| r.is_ok())
        {
            self.staging.unmap();
        }
    }
}

impl SoftStep {
    /// Reads the step back (the caller waited for the device): the displacements and
    /// iterate positions into `vs`, the attachments' multipliers and penalties into
    /// `attachments`.
    pub(super) fn finish(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &crate::rigid::BodySet,
        vs: &mut VertexState,
        attachments: &mut AttachmentSet,
    ) -> Result<(), GpuError> {
        let Pending {
            bytes,
            attachment_bytes,
            mapped,
        } = self
            .pending
            .take()
            .ok_or_else(|| GpuError::Step("no deformable step in flight".into()))?;
        mapped
            .get()
            .ok_or_else(|| GpuError::Readback("the readback map did not complete".into()))?
            .clone()
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        {
            let slice = self.staging.slice(0..bytes);
            let data = slice
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
            let n = set.vertex_count();
            let (disp, rest) = data.split_at(16 * n);
            let disp: &[[f32; 4]] = bytemuck::cast_slice(disp);
            for v in 0..n {
                let [x, y, z, _] = disp[v];
                vs.d[v] = Vec3A::new(x, y, z);
                vs.x[v] = set.positions[v] + vs.d[v];
            }
            let (att, rest) = rest.split_at(attachment_bytes as usize);
            if attachment_bytes > 0 {
                attachments
                    .records
                    .copy_from_slice(bytemuck::cast_slice(att));
            }
            if self.contact.on() {
                self.download_bytes +=
                    self.contact
                        .finish(rest, cfg, set, bodies, &mut vs.contact)?;
            }
        }
        self.staging.unmap();
        Ok(())
    }
}

fn storage_buffer(
    device: &wgpu::Device,
    label: &str,
    size: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage,
        mapped_at_creation: false,
    })
}

fn readback_buffer(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    storage_buffer(
        device,
        "vbd readback",
        size,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    )
}

/// A resident storage buffer (written by uploads, read back by copies).
fn resident(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    storage_buffer(
        device,
        "vbd",
        size,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
    )
}

fn range_group(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    ranges: &wgpu::Buffer,
) -> wgpu::BindGroup {
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("avbd vbd colour"),
        layout,
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: ranges,
                offset: 0,
                size: std::num::NonZeroU64::new(16),
            }),
        }],
    })
}
