//! Penetration-free contact of deformable surfaces on the device
//! (`shaders/surface_contact.wgsl`, `contact_advance.wgsl`): the per-iteration half of
//! [`crate::pipeline::surface_contact`] in the step's submission.
//!
//! The host sets each frame up as the CPU backend does (`SurfaceContact::begin_frame`: the
//! geometry, the cages, the candidate pairs with a lower bound on each one's distance, the
//! islands, the rows carried from the last frame) and uploads it: the candidates' pairs
//! (the device derives their points, island, penalty and friction from the surface's
//! primitives and per-point terms, which are written only when they change); the carried
//! rows' candidates and multipliers (the device makes the rows); X; the cages (of the
//! soft points and the moving bodies' points: a point of a body that does not move stays
//! where it is); the islands. Each soft point's and each moving body's row list has room for every candidate
//! it belongs to (a row's pair is always a candidate, so the lists cannot overflow): the
//! frame's first kernels count the candidates of each and sum the
//! counts into the lists' offsets (a prefix sum, `scan.wgsl`), fill the lists with the
//! carried rows and give each candidate its row (`contact_lists.wgsl`), so none of it
//! crosses the bus. Each iteration then runs on the device:
//! the rows' terms in the vertex solves and the coarse residual (`vbd.wgsl`), the rows'
//! dual update, and the advance — CCD of every candidate from X to the iterate
//! (`ccd_core.wgsl`, the standalone kernel's code), each island's certified step (an island
//! with an iterate outside its cages advances only as far as they reach: the CPU runs the
//! broad phase again there), the element-volume floor, the growth of the active set with the earliest-TOI
//! filter, X moved, every row linearised again at X. At the end the host reads back X, the
//! rows (64 B each, `RowOut`: what the candidate does not give) and the islands' lost
//! motion, and finishes the frame as the CPU does (`SurfaceContact::end_frame`).
//!
//! Rigid bodies that move (dynamic or kinematic) take part as on the CPU: each has a
//! certified pose beside X, which its island's advance moves (`contact_advance`);
//! before every rigid primal sweep, `contact_body_terms` gathers the terms its rows put on
//! its 6×6 system, which the rigid primal (`avbd.wgsl`, group 2) adds; at the frame's end,
//! `contact_end_bodies` puts each coupled body's iterate at its certified pose, before the
//! integration kernel writes velocities and poses from it.
//!
//! Rows made during a step shorten each body's coarse step by their stiffness along it, as
//! on the CPU (`CoarseLevel::correct`; coarse.wgsl `coarse_solve`). A step whose iterate left
//! its cages, or whose rows ran out of room, runs once more (`GpuSolver::finish`): with
//! the rows its first run made in the active set and the coarse operators, and with cages
//! that also hold the first run's final iterate, within twice their pad (`Cages::build`),
//! so that an impact advances all the way as on the CPU instead of stopping at the cages.
//! A run again whose iterate left its cages too runs a third time, with comoving cages
//! that also hold each point less each of the body's mean translations (its rows stopped
//! part of the body earlier than the run before, so the mean moved otherwise).
//! A run again with no iterate out of its cages starts from the same X, poses and initial
//! guess as the first run, so it keeps that run's cages, candidates and islands instead of
//! running the broad phase again (`SurfaceContact::begin_frame`), and uploads only what
//! the rows change (`upload.rs`).
//!
//! With `SolverConfig::contact_cage_rebuild` off, no step runs again: an island whose
//! iterate left its cages stops where they end (as the CPU then does too), rows past the
//! room are dropped, and the next frame has room for them. Every step is then one
//! submission of the same dispatches.
//!
//! Not on the device yet: the barrier baseline.

use bytemuck::{Pod, Zeroable};
use glam::Vec3A;

use super::GpuError;
use super::ccd::{CcdMargins, CcdParams};
use super::pipelines::{compute_pipeline, storage_entry, uniform_entry};
use super::recording::Pass;
use crate::config::SolverConfig;
use crate::deformable::set::DeformableSet;
use crate::pipeline::surface_contact::frame::{point_friction, point_stiffness};
use crate::pipeline::surface_contact::rows::{Pair, PairKind, Row};
use crate::pipeline::surface_contact::{SurfaceContact, geometry};
use crate::rigid::BodySet;

mod readback;
mod upload;

pub(crate) use readback::DeviceRowTerms;
#[cfg(test)]
pub(in crate::gpu) use upload::candidate_record;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ContactParams {
    ccd: CcdParams,
    gap: f32,
    xi: f32,
    decay: f32,
    drop_below: f32,
    lambda_max: f32,
    n_candidates: u32,
    n_points: u32,
    soft_points: u32,
    n_objects: u32,
    n_soft_bodies: u32,
    n_tets: u32,
    on: u32,
    offsets: Offsets,
    n_bodies: u32,
    /// The rows uploaded: those carried into the frame.
    carried_rows: u32,
    /// The most workgroups of the CCD worklist's dispatch (the rest is taken by stride).
    ccd_groups: u32,
}

/// The regions of the packed buffers (`ContactParams` in surface_contact.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Default, Pod, Zeroable)]
struct Offsets {
    cand_row: u32,
    slot_items: u32,
    slot_count: u32,
    alpha: u32,
    earliest_t: u32,
    earliest_k: u32,
    toi: u32,
    certified: u32,
    tau: u32,
    beta: u32,
    cands: u32,
    rigid: u32,
    planes: u32,
    cage_soft: u32,
    cage_rigid: u32,
    cage_ref: u32,
    slot_offsets: u32,
    island: u32,
    owner: u32,
    point_terms: u32,
    rigid_body: u32,
    plane_body: u32,
    ranges: u32,
    body_ref: u32,
    row_capacity: u32,
    reach: u32,
    body_x: u32,
    body_flags: u32,
    bslot_offsets: u32,
    cage_base: u32,
    bslot_count: u32,
    triangles: u32,
    edges: u32,
    /// The carried rows' records (`carried_record`), in the f32 state.
    carried: u32,
    /// The rows as the readback takes them (`RowOut`), in the atomics.
    rows_out: u32,
    /// Per rigid body, its pairs' least certified separation (f32 bits), in the atomics.
    separation: u32,
    /// Per soft point, its share of the way the volume floor lets it go (f32 bits), one
    /// region per pass of the hold, in the atomics.
    hold: u32,
    /// The candidates the advance under way runs the CCD of, in the atomics.
    ccd_list: u32,
}

/// `Row` of surface_contact.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct DeviceRow {
    points: [u32; 4],
    weights: [f32; 4],
    normal: [f32; 4],
    lagged_normal: [f32; 4],
    lagged_weights: [f32; 4],
    lambda_t: [f32; 4],
    info: [u32; 4],
    fr: [f32; 4],
}

/// A row as the readback takes it (`contact_pack_rows`): its flags, the bits of γ, its
/// candidate and the advance it was made in (`NONE`: carried into the frame); its friction
/// force and λ; its normal and distance at X; its weights. Its points, penalty and
/// friction follow from the candidate; its tangent plane is lagged again at the next
/// frame's start.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RowOut {
    info: [u32; 4],
    lambda_t: [f32; 4],
    normal: [f32; 4],
    weights: [f32; 4],
}

const NONE: u32 = u32::MAX;
/// The status words at the start of the atomics (surface_contact.wgsl `ST_*`): rows,
/// advances, advances with a point out of its cages, overflow, tets the volume floor
/// stopped (in the frame, then in the advance under way), points out of their cages in the
/// advance under way, the candidates on the CCD's worklist.
const STATUS_WORDS: usize = 8;
const STATUS_BYTES: u64 = 4 * STATUS_WORDS as u64;
const ST_ESCAPES: usize = 2;
const ST_FLOOR: usize = 4;
const ROW_ALIVE: u32 = 0x100;
const ROW_COARSE: u32 = 0x200;
const BODY_MOVES: u32 = 1;
const BODY_COUPLED: u32 = 2;
/// vec4s of a body's record in the terms buffer (`BODY_TERMS`).
const BODY_TERMS: u64 = 12;

fn kind_code(k: PairKind) -> u32 {
    match k {
        PairKind::PointTriangle => 0,
        PairKind::EdgeEdge => 1,
        PairKind::PointPlane => 2,
    }
}

// The storage buffers of group 2, in binding order (binding = index + 1): the rows, then
// four buffers of regions (see surface_contact.wgsl): atomics, f32 state, read-only vec4
// data, read-only u32 data. Packed because the deformable kernels' groups together must
// stay within 32 storage buffers per stage (lavapipe's limit).
const ROWS: usize = 0;
const ATOMICS: usize = 1;
const STATE: usize = 2;
const STATIC_F: usize = 3;
const STATIC_U: usize = 4;
/// The rows' terms of each rigid body's system (also the rigid primal's group 2).
const BODY_TERMS_BUFFER: usize = 5;
const BUFFERS: usize = 6;
const READ_ONLY: [usize; 2] = [STATIC_F, STATIC_U];

/// Appends `items` to `out` and returns where they start (in items of `out`).
fn region<T: Copy>(out: &mut Vec<T>, items: impl IntoIterator<Item = T>) -> u32 {
    let at = out.len() as u32;
    out.extend(items);
    at
}

/// The kernels of one advance, in order, and what each runs over.
#[derive(Clone, Copy)]
enum Over {
    Rows,
    /// The rows' capacity in whole workgroups, then a workgroup per soft body.
    RowsThenSoftBodies,
    Points,
    /// The CCD's worklist: as many workgroups as `contact_ccd_filter` wrote into the
    /// indirect arguments.
    Worklist,
    Candidates,
    Tets,
    /// The candidates in whole workgroups, then the tets (or the rigid bodies' points).
    CandidatesThenTets,
    CandidatesThenRigidPoints,
    /// The soft points in whole workgroups, then the rigid bodies.
    SoftPointsThenBodies,
    /// The objects in whole workgroups, then the lists.
    ObjectsThenLists,
    /// The soft points' row lists, then the rigid bodies'.
    Lists,
    /// Whichever is most of the candidates, the lists and the objects.
    Start,
    CarriedRows,
}

/// The kernels of the frame's start, before the first iteration, in order: the atomics'
/// state and the lists' room (`COUNT`), then, after the prefix sum of the room into the
/// lists' offsets, the carried rows in their candidates and their points' lists (`LISTS`).
const COUNT: [(&str, Over); 2] = [
    ("contact_start", Over::Start),
    ("contact_count_slots", Over::Candidates),
];
const LISTS: [(&str, Over); 2] = [
    ("contact_list_rows", Over::CarriedRows),
    ("contact_sort_slots", Over::Lists),
];
/// The kernels of the frame's end, before the coupled bodies': the rows for the readback.
const END: [(&str, Over); 1] = [("contact_pack_rows", Over::Rows)];

/// The kernels of one advance. Kernels that do not depend on each other share a dispatch,
/// each over its own items in whole workgroups (the rows' dual update and the bodies'
/// translations; the earliest pairs and the volume floor; the growth and the spinning
/// bodies' cut of the steps; X's advance and the bodies'; the islands' β and the lists'
/// order): each dispatch ends with a barrier, which on a GPU
/// costs more than these kernels' work on a cloth. The CCD shares none: with the volume
/// floor in its kernel, the floor's lanes seemed to take the CCD's cost (lavapipe,
/// `mattress`, two alternated runs: the contact passes 20–21 → 33 ms a frame); for the
/// same reason the pairs that need a CCD are gathered into a worklist first, and the CCD
/// runs over it by an indirect dispatch (`ccd_args`). The
/// floor's hold comes first, in two passes (the second reads the first), so that the
/// cages' reach and the CCD see the points where the floor lets them go.
const ADVANCE: [(&str, Over); 11] = [
    ("contact_dual", Over::RowsThenSoftBodies),
    ("contact_hold_first", Over::Tets),
    ("contact_hold_second", Over::Tets),
    ("contact_reach", Over::Points),
    ("contact_ccd_filter", Over::Candidates),
    ("contact_ccd", Over::Worklist),
    ("contact_earliest", Over::CandidatesThenTets),
    ("contact_grow", Over::CandidatesThenRigidPoints),
    ("contact_advance", Over::SoftPointsThenBodies),
    ("contact_islands", Over::ObjectsThenLists),
    ("contact_linearise", Over::Rows),
];

/// The kernels that write the CCD worklist's indirect arguments, bound as group 3 (their
/// pipeline layout has it; that of `contact_ccd`, whose dispatch reads them, must not).
const WRITE_CCD_ARGS: [&str; 2] = ["contact_reach", "contact_ccd_filter"];

/// The layout of group 3 of [`WRITE_CCD_ARGS`]: the CCD worklist's indirect arguments.
pub(super) fn ccd_args_layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("avbd surface contact CCD arguments"),
        entries: &[storage_entry(0, false)],
    })
}

/// The layout of the deformable kernels' group 2.
pub(super) fn layout(device: &wgpu::Device) -> wgpu::BindGroupLayout {
    let mut entries = vec![uniform_entry(
        0,
        false,
        std::mem::size_of::<ContactParams>() as u64,
    )];
    entries.extend((0..BUFFERS).map(|i| storage_entry(i as u32 + 1, READ_ONLY.contains(&i))));
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("avbd surface contact"),
        entries: &entries,
    })
}

/// The sizes of this frame's contact stage.
#[derive(Clone, Copy, Default)]
struct Sizes {
    candidates: u32,
    row_capacity: u32,
    /// The rows the readback copies (the carried rows and room for the new ones the last
    /// frames made); rows past them are read after, only when the step made more.
    read_rows: u32,
    points: u32,
    soft_points: u32,
    objects: u32,
    soft_bodies: u32,
    tets: u32,
    bodies: u32,
    carried_rows: u32,
}

/// The device's contact stage: buffers, pipelines, this frame's sizes.
pub(super) struct ContactStep {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    params: wgpu::Buffer,
    buffers: Vec<wgpu::Buffer>,
    group: wgpu::BindGroup,
    /// The CCD worklist's indirect dispatch (x, y, z workgroups; group 3 of the kernels
    /// that write it, `WRITE_CCD_ARGS`).
    ccd_args: wgpu::Buffer,
    ccd_args_group: wgpu::BindGroup,
    pipelines: Vec<(wgpu::ComputePipeline, Over, &'static str)>,
    count: Vec<(wgpu::ComputePipeline, Over, &'static str)>,
    lists: Vec<(wgpu::ComputePipeline, Over, &'static str)>,
    end: Vec<(wgpu::ComputePipeline, Over, &'static str)>,
    /// The prefix sum of the lists' room (scan.wgsl over a region of the atomics): the
    /// solver's kernels, and this stage's parameters (length, first), block sums and group.
    scan: super::broad::PrefixSum,
    scan_params: wgpu::Buffer,
    scan_sums: wgpu::Buffer,
    scan_group: wgpu::BindGroup,
    body_terms: wgpu::ComputePipeline,
    end_bodies: wgpu::ComputePipeline,
    /// Bound as the rigid primal's terms when no contact row can touch a moving body.
    no_terms: wgpu::Buffer,
    /// Whether a rigid body with a surface moves this frame (the terms and the frame's end
    /// run).
    moving: bool,
    sizes: Sizes,
    offsets: Offsets,
    on: bool,
    /// The rows' room for the next frame: grows when a step runs out of it.
    pub(super) row_room: u32,
    /// A cap on the rows' room for the next upload only (a test hook).
    pub(super) row_cap_once: Option<u32>,
    /// The most workgroups per dimension of a dispatch (`SoftStep::limit_dispatch`).
    pub(super) max_groups: u32,
    /// The most rows a frame made lately (decaying): sizes the rows' readback.
    made_peak: u32,
    /// Copy no more rows than the carried ones in the readback (a test hook: every row
    /// made goes through the read after it).
    pub(super) read_carried_only: bool,
    device_name: String,
    /// The candidates' pairs, for the rows read back.
    pairs: Vec<Pair>,
    /// Bytes uploaded by the last frame.
    pub(super) upload_bytes: u64,
    packing: upload::Packing,
    /// The broad phase (`SurfaceContact::candidate_build`) whose candidates, cages and
    /// islands the read-only buffers hold.
    uploaded_build: Option<u64>,
}

fn resident(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("surface contact"),
        size,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

impl ContactStep {
    pub(super) fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        module: &wgpu::ShaderModule,
        (pipeline_layout, with_ccd_args): (&wgpu::PipelineLayout, &wgpu::PipelineLayout),
        (layout, ccd_args_layout): (wgpu::BindGroupLayout, &wgpu::BindGroupLayout),
        scan: &super::broad::PrefixSum,
    ) -> Self {
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("surface contact params"),
            size: std::mem::size_of::<ContactParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&params, 0, bytemuck::bytes_of(&ContactParams::zeroed()));
        let buffers: Vec<wgpu::Buffer> = (0..BUFFERS).map(|_| resident(device, 256)).collect();
        let group = Self::make_group(device, &layout, &params, &buffers);
        let ccd_args = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("surface contact CCD arguments"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::INDIRECT,
            mapped_at_creation: false,
        });
        let ccd_args_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("surface contact CCD arguments"),
            layout: ccd_args_layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: ccd_args.as_entire_binding(),
            }],
        });
        let pipeline = |entry: &str| {
            let layout = match WRITE_CCD_ARGS.contains(&entry) {
                true => with_ccd_args,
                false => pipeline_layout,
            };
            compute_pipeline(device, layout, module, entry)
        };
        let kernels = |list: &[(&'static str, Over)]| {
            list.iter()
                .map(|&(entry, over)| (pipeline(entry), over, entry))
                .collect::<Vec<_>>()
        };
        let (pipelines, count, lists, end) = (
            kernels(&ADVANCE),
            kernels(&COUNT),
            kernels(&LISTS),
            kernels(&END),
        );
        let scan_params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("surface contact scan params"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let scan_sums = resident(device, 256);
        let scan_group = Self::make_scan_group(
            device,
            &scan.layout,
            &scan_params,
            &buffers[ATOMICS],
            &scan_sums,
        );
        Self {
            count,
            lists,
            end,
            scan: scan.clone(),
            scan_params,
            scan_sums,
            scan_group,
            body_terms: pipeline("contact_body_terms"),
            end_bodies: pipeline("contact_end_bodies"),
            no_terms: resident(device, 256),
            moving: false,
            device: device.clone(),
            queue: queue.clone(),
            layout,
            params,
            buffers,
            group,
            ccd_args,
            ccd_args_group,
            pipelines,
            sizes: Sizes::default(),
            offsets: Offsets::default(),
            on: false,
            row_room: 4096,
            row_cap_once: None,
            max_groups: device.limits().max_compute_workgroups_per_dimension,
            made_peak: 0,
            read_carried_only: false,
            device_name: String::new(),
            pairs: Vec::new(),
            upload_bytes: 0,
            packing: Default::default(),
            uploaded_build: None,
        }
    }

    fn make_group(
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        params: &wgpu::Buffer,
        buffers: &[wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: params.as_entire_binding(),
        }];
        entries.extend(
            buffers
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32 + 1,
                    resource: b.as_entire_binding(),
                }),
        );
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd surface contact"),
            layout,
            entries: &entries,
        })
    }

    fn make_scan_group(
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        params: &wgpu::Buffer,
        data: &wgpu::Buffer,
        sums: &wgpu::Buffer,
    ) -> wgpu::BindGroup {
        let entries = [params, data, sums].map(|b| b.as_entire_binding());
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("surface contact list offsets"),
            layout,
            entries: &[0, 1, 2].map(|i| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: entries[i].clone(),
            }),
        })
    }

    pub(super) fn group(&self) -> &wgpu::BindGroup {
        &self.group
    }

    /// Whether this frame runs contact.
    pub(super) fn on(&self) -> bool {
        self.on
    }

    fn put(&mut self, i: usize, bytes: &[u8]) -> bool {
        self.put_at(i, bytes.len() as u64, 0, bytes)
    }

    /// Writes `bytes` at byte `at` of buffer `i`, which is made to hold at least `size`
    /// (a grown buffer's other contents are lost). Returns whether it grew.
    fn put_at(&mut self, i: usize, size: u64, at: u64, bytes: &[u8]) -> bool {
        let need = size
            .max(at + bytes.len() as u64)
            .max(16)
            .next_multiple_of(4);
        let grown = need > self.buffers[i].size();
        if grown {
            self.buffers[i] = resident(&self.device, need.next_power_of_two().max(256));
        }
        if !bytes.is_empty() {
            self.queue.write_buffer(&self.buffers[i], at, bytes);
            self.upload_bytes += bytes.len() as u64;
        }
        grown
    }

    /// [`Self::put_after_head`], less the bytes in `skipped` (after the head), which the
    /// caller writes on the device.
    fn put_around(
        &mut self,
        i: usize,
        bytes: &[u8],
        head: usize,
        head_written: bool,
        skipped: std::ops::Range<usize>,
    ) -> bool {
        if skipped.is_empty() {
            return self.put_after_head(i, bytes, head, head_written);
        }
        let fits = bytes.len() as u64 <= self.buffers[i].size();
        let from = match head_written && fits {
            true => head,
            false => 0,
        };
        let size = bytes.len() as u64;
        let grown = self.put_at(i, size, from as u64, &bytes[from..skipped.start]);
        self.put_at(i, size, skipped.end as u64, &bytes[skipped.end..]);
        grown
    }

    /// Writes `bytes` into buffer `i` (made to hold them), all but their first
    /// `head` bytes when those are on the device already (`head_written`, and the buffer
    /// was not made again). Returns whether it grew.
    fn put_after_head(&mut self, i: usize, bytes: &[u8], head: usize, head_written: bool) -> bool {
        let fits = bytes.len() as u64 <= self.buffers[i].size();
        match head_written && fits {
            true => self.put_at(i, bytes.len() as u64, head as u64, &bytes[head..]),
            false => self.put(i, bytes),
        }
    }

    /// Turns contact off for this frame (the kernels return at once).
    pub(super) fn off(&mut self) {
        self.on = false;
        self.uploaded_build = None;
        self.moving = false;
        self.queue.write_buffer(
            &self.params,
            0,
            bytemuck::bytes_of(&ContactParams::zeroed()),
        );
    }

    /// The frame's start (before the first iteration), into `pass` with groups 0 and 1
    /// set: the atomics' state and the lists' room. [`Self::record_list_offsets`] and
    /// [`Self::record_lists`] follow.
    pub(super) fn record_start(&self, pass: &mut Pass, max_groups: u32) {
        self.record_kernels(pass, &self.count, max_groups);
    }

    /// The lists' offsets: a prefix sum of their room. Sets group 0 to its own: the caller
    /// sets the deformable kernels' groups again after it.
    pub(super) fn record_list_offsets(&self, pass: &mut Pass) {
        if self.on {
            let (s, kernel) = (self.sizes, "contact_list_offsets");
            let len = s.soft_points + s.bodies;
            self.scan.record_into(pass, &self.scan_group, len, kernel);
        }
    }

    /// The carried rows in their candidates and their points' lists, into `pass` with
    /// groups 0 and 1 set.
    pub(super) fn record_lists(&self, pass: &mut Pass, max_groups: u32) {
        self.record_kernels(pass, &self.lists, max_groups);
    }

    /// One advance (after the dual updates of an iteration), into `pass` with groups 0 and
    /// 1 set.
    pub(super) fn record_advance(&self, pass: &mut Pass, max_groups: u32) {
        if self.on {
            pass.set_bind_group(3, &self.ccd_args_group, &[]);
        }
        self.record_kernels(pass, &self.pipelines, max_groups);
    }

    fn record_kernels(
        &self,
        pass: &mut Pass,
        kernels: &[(wgpu::ComputePipeline, Over, &'static str)],
        max_groups: u32,
    ) {
        if !self.on {
            return;
        }
        pass.set_bind_group(2, &self.group, &[]);
        let s = self.sizes;
        for (p, over, kernel) in kernels {
            if matches!(over, Over::Tets) && s.tets == 0 {
                // The volume floor's hold has nothing to hold in a set without tets (cloth
                // only): a dispatch of lanes that would all return, not recorded. The
                // topology decides it, not the frame's data.
                continue;
            }
            if matches!(over, Over::Worklist) {
                pass.dispatch_indirect(p, &self.ccd_args, 0, kernel);
                continue;
            }
            let n = match over {
                Over::Worklist => unreachable!("dispatched indirectly above"),
                Over::Rows => s.row_capacity,
                Over::RowsThenSoftBodies => {
                    s.row_capacity.next_multiple_of(64) + s.soft_bodies * 64
                }
                Over::Points => s.points,
                Over::Candidates => s.candidates,
                Over::Tets => s.tets,
                Over::CandidatesThenTets => s.candidates.next_multiple_of(64) + s.tets,
                Over::CandidatesThenRigidPoints => {
                    s.candidates.next_multiple_of(64) + (s.points - s.soft_points)
                }
                Over::SoftPointsThenBodies => s.soft_points.next_multiple_of(64) + s.bodies,
                Over::ObjectsThenLists => s.objects.next_multiple_of(64) + s.soft_points + s.bodies,
                Over::Lists => s.soft_points + s.bodies,
                // (The lists' room: soft points, bodies and their total.)
                Over::Start => s
                    .candidates
                    .max(s.soft_points + s.bodies + 1)
                    .max(s.objects),
                Over::CarriedRows => s.carried_rows,
            };
            let grid = crate::gpu::grid(n.div_ceil(64).max(1), max_groups);
            pass.dispatch(p, grid, kernel);
        }
    }

    /// Bytes allocated for this stage on the device: its parameters, resident buffers and
    /// prefix-sum scratch.
    pub(super) fn memory_bytes(&self) -> u64 {
        let fixed = [
            &self.params,
            &self.scan_params,
            &self.scan_sums,
            &self.no_terms,
        ];
        fixed.iter().map(|b| b.size()).sum::<u64>()
            + self.buffers.iter().map(|b| b.size()).sum::<u64>()
    }

    /// The terms of the rows on each rigid body's system, for the rigid primal's group 2:
    /// zeros when no rigid body with a surface moves this frame.
    pub(super) fn terms(&self) -> &wgpu::Buffer {
        match self.on && self.moving {
            true => &self.buffers[BODY_TERMS_BUFFER],
            false => &self.no_terms,
        }
    }

    /// Before a rigid primal sweep: the rows' terms of every rigid body's system (into
    /// `pass` with groups 0 and 1 set).
    pub(super) fn record_body_terms(&self, pass: &mut Pass) {
        self.record_over_bodies(pass, &self.body_terms, "contact_body_terms");
    }

    /// The frame's end, before the integration (into `pass` with groups 0 and 1 set): the
    /// rows as the readback takes them, and each coupled moving body's iterate at its
    /// certified pose.
    pub(super) fn record_end(&self, pass: &mut Pass, max_groups: u32) {
        self.record_kernels(pass, &self.end, max_groups);
        self.record_over_bodies(pass, &self.end_bodies, "contact_end_bodies");
    }

    /// `kernel` over the rigid bodies, where a moving one has a surface.
    fn record_over_bodies(&self, pass: &mut Pass, p: &wgpu::ComputePipeline, kernel: &'static str) {
        if self.on && self.moving {
            pass.set_bind_group(2, &self.group, &[]);
            // One row of workgroups: the rigid step refuses more bodies than one covers.
            pass.dispatch(p, (self.sizes.bodies.div_ceil(64).max(1), 1), kernel);
        }
    }

    /// Whether the rigid bodies' passes run this frame.
    pub(super) fn moving(&self) -> bool {
        self.on && self.moving
    }
}
