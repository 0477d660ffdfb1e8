//! Penetration-free contact of deformable surfaces on the device
//! (`shaders/surface_contact.wgsl`): the per-iteration half of
//! [`crate::pipeline::surface_contact`] in the step's submission.
//!
//! The host sets each frame up as the CPU backend does (`SurfaceContact::begin_frame`: the
//! geometry, the cages, the candidate pairs with a lower bound on each one's distance, the
//! islands, the rows carried from the last frame) and uploads it: candidates with their
//! row, island, penalty and friction; the rows; each soft point's row list, sized by the
//! candidates it belongs to (a row's pair is always a candidate, so neither the rows nor the
//! lists can overflow); X; the cages; the islands. Each iteration then runs on the device:
//! the rows' terms in the vertex solves and the coarse residual (`vbd.wgsl`), the rows'
//! dual update, and the advance — CCD of every candidate from X to the iterate
//! (`ccd_core.wgsl`, the standalone kernel's code), each island's certified step (an island
//! with an iterate outside its cages advances only as far as they reach: the CPU runs the
//! broad phase again there), the element-volume floor, the growth of the active set with the earliest-TOI
//! filter, X moved, every row linearised again at X. At the end the host reads back X, the
//! rows and the islands' lost motion, and finishes the frame as the CPU does
//! (`SurfaceContact::end_frame`).
//!
//! Rigid bodies that move (dynamic or kinematic) take part as on the CPU: each has a
//! certified pose beside X, which its island's advance moves (`contact_advance_bodies`);
//! before every rigid primal sweep, `contact_body_terms` gathers the terms its rows put on
//! its 6×6 system, which the rigid primal (`avbd.wgsl`, group 2) adds; at the frame's end,
//! `contact_end_bodies` puts each coupled body's iterate at its certified pose, before the
//! integration kernel writes velocities and poses from it.
//!
//! A step whose contact stage made rows, or whose iterate left its cages, runs once more
//! (`GpuSolver::finish`): with the rows in the active set and the coarse operators from the
//! frame's start (the CPU assembles its operators again mid-frame), and with cages that
//! also hold the first run's final iterate, within twice their pad (`Cages::build`), so that
//! an impact advances all the way as on the CPU instead of stopping at the cages.
//!
//! Not on the device yet: the barrier baseline.

use bytemuck::{Pod, Zeroable};
use glam::Vec3A;
use rayon::prelude::*;

use super::GpuError;
use super::ccd::{CcdMargins, CcdParams};
use super::pipelines::{storage_entry, uniform_entry};
use crate::config::SolverConfig;
use crate::deformable::set::DeformableSet;
use crate::pipeline::surface_contact::frame::{pair_friction, row_stiffness};
use crate::pipeline::surface_contact::rows::{NO_POINT, Pair, PairKind, Row};
use crate::pipeline::surface_contact::{SurfaceContact, geometry};
use crate::rigid::BodySet;

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
    pad: [u32; 3],
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
    cage_abs: u32,
    cage_com: u32,
    cage_ref: u32,
    slot_offsets: u32,
    island: u32,
    owner: u32,
    cand_misc: u32,
    rigid_body: u32,
    plane_body: u32,
    ranges: u32,
    body_ref: u32,
    row_capacity: u32,
    reach: u32,
    body_x: u32,
    body_flags: u32,
    bslot_offsets: u32,
    bslot_items: u32,
    bslot_count: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct DeviceCandidate {
    points: [u32; 4],
    /// kind, b, row, island
    info: [u32; 4],
    /// lower bound, μ, static and dynamic friction
    misc: [f32; 4],
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

const NONE: u32 = u32::MAX;
const ONE_BITS: u32 = 0x3f80_0000;
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
    SoftBodies,
    Points,
    Candidates,
    Tets,
    SoftPoints,
    Objects,
    Bodies,
    /// The soft points' row lists, then the rigid bodies'.
    Lists,
}

const ADVANCE: [(&str, Over); 13] = [
    ("contact_dual", Over::Rows),
    ("contact_body_tau", Over::SoftBodies),
    ("contact_reach", Over::Points),
    ("contact_ccd", Over::Candidates),
    ("contact_inversion", Over::Tets),
    ("contact_earliest", Over::Candidates),
    ("contact_grow", Over::Candidates),
    ("contact_advance_x", Over::SoftPoints),
    ("contact_advance_bodies", Over::Bodies),
    ("contact_islands", Over::Objects),
    ("contact_reset_alpha", Over::Objects),
    ("contact_linearise", Over::Rows),
    ("contact_sort_slots", Over::Lists),
];

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
    points: u32,
    soft_points: u32,
    objects: u32,
    soft_bodies: u32,
    tets: u32,
    bodies: u32,
}

/// The device's contact stage: buffers, pipelines, this frame's sizes.
pub(super) struct ContactStep {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    params: wgpu::Buffer,
    buffers: Vec<wgpu::Buffer>,
    group: wgpu::BindGroup,
    pipelines: Vec<(wgpu::ComputePipeline, Over)>,
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
    device_name: String,
    /// The candidates' pairs, for the rows read back.
    pairs: Vec<Pair>,
    /// Bytes uploaded by the last frame.
    pub(super) upload_bytes: u64,
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
        pipeline_layout: &wgpu::PipelineLayout,
        layout: wgpu::BindGroupLayout,
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
        let pipeline = |entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(pipeline_layout),
                module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let pipelines = ADVANCE
            .iter()
            .map(|&(entry, over)| (pipeline(entry), over))
            .collect();
        Self {
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
            pipelines,
            sizes: Sizes::default(),
            offsets: Offsets::default(),
            on: false,
            row_room: 4096,
            device_name: String::new(),
            pairs: Vec::new(),
            upload_bytes: 0,
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

    pub(super) fn group(&self) -> &wgpu::BindGroup {
        &self.group
    }

    /// Whether this frame runs contact.
    pub(super) fn on(&self) -> bool {
        self.on
    }

    fn put(&mut self, i: usize, bytes: &[u8]) -> bool {
        let need = (bytes.len() as u64).max(16).next_multiple_of(4);
        let grown = need > self.buffers[i].size();
        if grown {
            self.buffers[i] = resident(&self.device, need.next_power_of_two().max(256));
        }
        if !bytes.is_empty() {
            self.queue.write_buffer(&self.buffers[i], 0, bytes);
            self.upload_bytes += bytes.len() as u64;
        }
        grown
    }

    /// Turns contact off for this frame (the kernels return at once).
    pub(super) fn off(&mut self) {
        self.on = false;
        self.moving = false;
        self.queue.write_buffer(
            &self.params,
            0,
            bytemuck::bytes_of(&ContactParams::zeroed()),
        );
    }

    /// Uploads the frame's contact set-up (after `SurfaceContact::begin_frame` and the
    /// coarse operators' assembly, which marks the carried rows as held by them).
    pub(super) fn upload(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        contact: &SurfaceContact,
        device_name: &str,
    ) -> Result<(), GpuError> {
        self.upload_bytes = 0;
        self.device_name = device_name.to_string();
        let g = &contact.geometry;
        let soft_points = g.soft_points as usize;
        let n_points = g.point_count();
        let h2 = cfg.dt * cfg.dt;
        // Rows carried into the frame, by candidate.
        let mut cand_row = vec![NONE; contact.candidates.len()];
        let mut row_cand = vec![NONE; contact.rows.len()];
        for (i, r) in contact.rows.iter().enumerate() {
            if let Ok(k) = contact.candidates.binary_search(&r.pair) {
                cand_row[k] = i as u32;
                row_cand[i] = k as u32;
            }
        }
        // Candidate by candidate, in parallel (a pile of soft bodies makes hundreds of
        // thousands); the order is kept.
        let candidates: Vec<DeviceCandidate> = contact
            .candidates
            .par_iter()
            .enumerate()
            .with_min_len(1024)
            .map(|(k, pair)| {
                let pts = contact.points_of(pair);
                let soft = pts.iter().find(|&&p| p != NO_POINT && p < g.soft_points);
                let island =
                    contact.island_of[contact.object_of_point(set, *soft.unwrap_or(&pts[0]))];
                let friction = pair_friction(set, bodies, contact, pair, &pts);
                DeviceCandidate {
                    points: pts,
                    info: [kind_code(pair.kind), pair.b, cand_row[k], island],
                    misc: [
                        contact.candidate_lower[k],
                        row_stiffness(cfg, set, g, &pts, h2),
                        friction[0],
                        friction[1],
                    ],
                }
            })
            .collect();
        let rows: Vec<DeviceRow> = contact
            .rows
            .iter()
            .zip(&row_cand)
            .map(|(r, &k)| device_row(r, k))
            .collect();
        // Each soft point's list: room for every candidate it belongs to; the carried rows
        // first, in candidate order.
        let mut offsets = vec![0u32; soft_points + 1];
        for c in &candidates {
            for &p in c.points.iter().filter(|&&p| (p as usize) < soft_points) {
                offsets[p as usize + 1] += 1;
            }
        }
        for p in 0..soft_points {
            offsets[p + 1] += offsets[p];
        }
        let mut items = vec![0u32; offsets[soft_points] as usize];
        let mut count = vec![0u32; soft_points];
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| row_cand[i]);
        for &i in &order {
            for &p in rows[i]
                .points
                .iter()
                .filter(|&&p| (p as usize) < soft_points)
            {
                items[(offsets[p as usize] + count[p as usize]) as usize] = i as u32;
                count[p as usize] += 1;
            }
        }
        // Each moving rigid body's list the same way: room for every candidate with a point
        // of it, the carried rows first.
        let n_bodies = bodies.len();
        let flags: Vec<u32> = (0..n_bodies)
            .map(|i| {
                let moves = geometry::moves(bodies, i);
                let coupled = contact.coupled.get(i).copied().unwrap_or(false);
                (moves as u32 * BODY_MOVES) | (coupled as u32 * BODY_COUPLED)
            })
            .collect();
        let bodies_of = |pts: &[u32; 4]| {
            let mut out = [NONE; 4];
            for (k, &p) in pts.iter().enumerate() {
                if p == NO_POINT || p < g.soft_points {
                    continue;
                }
                let b = g.rigid_points[(p - g.soft_points) as usize].0;
                if flags[b as usize] & BODY_MOVES != 0 && !out.contains(&b) {
                    out[k] = b;
                }
            }
            out
        };
        let mut body_offsets = vec![0u32; n_bodies + 1];
        for c in &candidates {
            for b in bodies_of(&c.points).into_iter().filter(|&b| b != NONE) {
                body_offsets[b as usize + 1] += 1;
            }
        }
        for b in 0..n_bodies {
            body_offsets[b + 1] += body_offsets[b];
        }
        let mut body_items = vec![0u32; body_offsets[n_bodies] as usize];
        let mut body_count = vec![0u32; n_bodies];
        for &i in &order {
            for b in bodies_of(&rows[i].points)
                .into_iter()
                .filter(|&b| b != NONE)
            {
                let b = b as usize;
                body_items[(body_offsets[b] + body_count[b]) as usize] = i as u32;
                body_count[b] += 1;
            }
        }
        let moving = g
            .rigid_bodies
            .iter()
            .any(|&(b, _)| flags[b as usize] & BODY_MOVES != 0);
        let v4 = |v: Vec3A, w: f32| [v.x, v.y, v.z, w];
        let certified: Vec<[f32; 4]> = contact.certified.iter().map(|&x| v4(x, 0.0)).collect();
        let rigid_points: Vec<[f32; 4]> = g
            .rigid_points
            .iter()
            .map(|&(_, r)| [r.x, r.y, r.z, 0.0])
            .collect();
        let planes: Vec<[f32; 4]> = g
            .planes
            .iter()
            .flat_map(|&(_, n, p)| [[n.x, n.y, n.z, 0.0], [p.x, p.y, p.z, 0.0]])
            .collect();
        let cages = &contact.cages;
        let boxes = |b: &[(Vec3A, Vec3A)]| -> Vec<[f32; 4]> {
            b.iter()
                .flat_map(|&(lo, hi)| [v4(lo, 0.0), v4(hi, 0.0)])
                .collect()
        };
        let reference: Vec<[f32; 4]> = cages.reference.iter().map(|&r| v4(r, 0.0)).collect();
        let n_soft = set.len();
        let body_ref: Vec<[f32; 4]> = cages.body_reference.iter().map(|&r| v4(r, 0.0)).collect();
        let ranges: Vec<u32> = (0..n_soft)
            .flat_map(|b| {
                let r = set.vertex_range(b);
                [r.start as u32, r.end as u32]
            })
            .collect();
        let objects = contact.island_of.len();
        // Room for the rows: what the last frames needed, never more than the candidates
        // (every row's pair is one); a step that needs more is run again with more.
        let capacity = (self.row_room as usize)
            .max(2 * rows.len())
            .min(candidates.len())
            .max(rows.len())
            .max(1);
        let n_cand = candidates.len();
        // Atomics: status, candidate rows, the lists and their lengths, island steps, the
        // growth filter.
        let mut atomics: Vec<u32> = vec![rows.len() as u32, 0, 0, 0];
        let mut o = Offsets {
            cand_row: region(&mut atomics, cand_row.iter().copied()),
            ..Default::default()
        };
        o.slot_items = region(&mut atomics, items.iter().copied());
        o.slot_count = region(&mut atomics, count.iter().copied());
        o.bslot_items = region(&mut atomics, body_items.iter().copied());
        o.bslot_count = region(&mut atomics, body_count.iter().copied());
        o.alpha = region(&mut atomics, std::iter::repeat_n(ONE_BITS, objects));
        o.reach = region(&mut atomics, std::iter::repeat_n(ONE_BITS, objects));
        o.earliest_t = region(&mut atomics, std::iter::repeat_n(ONE_BITS, n_points));
        o.earliest_k = region(&mut atomics, std::iter::repeat_n(NONE, n_points));
        let mut state: Vec<[f32; 4]> = Vec::new();
        o.toi = region(&mut state, std::iter::repeat_n([0.0; 4], n_cand));
        o.certified = region(&mut state, certified.iter().copied());
        o.tau = region(&mut state, std::iter::repeat_n([0.0; 4], 2 * n_soft));
        o.beta = region(&mut state, contact.beta.iter().map(|&b| [b, 0.0, 0.0, 0.0]));
        o.body_x = region(
            &mut state,
            contact
                .certified_pose
                .iter()
                .flat_map(|pose| [[pose.p.x, pose.p.y, pose.p.z, 0.0], pose.q.to_array()]),
        );
        let mut fixed: Vec<[f32; 4]> = Vec::new();
        o.cand_misc = region(&mut fixed, candidates.iter().map(|c| c.misc));
        o.rigid = region(&mut fixed, rigid_points.iter().copied());
        o.planes = region(&mut fixed, planes.iter().copied());
        o.cage_abs = region(&mut fixed, boxes(&cages.absolute));
        o.cage_com = region(&mut fixed, boxes(&cages.comoving));
        o.cage_ref = region(&mut fixed, reference.iter().copied());
        o.body_ref = region(&mut fixed, body_ref.iter().copied());
        let mut fixed_u: Vec<u32> = Vec::new();
        o.slot_offsets = region(&mut fixed_u, offsets.iter().copied());
        o.island = region(&mut fixed_u, contact.island_of.iter().copied());
        o.owner = region(&mut fixed_u, set.owner.iter().copied());
        o.cands = region(
            &mut fixed_u,
            candidates
                .iter()
                .flat_map(|c| c.points.into_iter().chain(c.info)),
        );
        o.rigid_body = region(&mut fixed_u, g.rigid_points.iter().map(|&(b, _)| b));
        o.plane_body = region(&mut fixed_u, g.planes.iter().map(|&(b, _, _)| b));
        o.ranges = region(&mut fixed_u, ranges.iter().copied());
        o.body_flags = region(&mut fixed_u, flags.iter().copied());
        o.bslot_offsets = region(&mut fixed_u, body_offsets.iter().copied());
        let mut all_rows = rows.clone();
        all_rows.resize(capacity, DeviceRow::zeroed());
        let limit = self.device.limits().max_storage_buffer_binding_size as usize;
        let largest = [
            std::mem::size_of_val(all_rows.as_slice()),
            4 * atomics.len(),
            16 * state.len(),
            16 * fixed.len(),
            4 * fixed_u.len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        if largest > limit {
            return Err(GpuError::Unsupported {
                adapter: self.device_name.clone(),
                reason: format!(
                    "{} contact candidates take a {largest}-byte buffer; the adapter binds at most {limit}",
                    candidates.len()
                ),
            });
        }
        let mut grown = false;
        grown |= self.put(ROWS, bytemuck::cast_slice(&all_rows));
        grown |= self.put(ATOMICS, bytemuck::cast_slice(&atomics));
        grown |= self.put(STATE, bytemuck::cast_slice(&state));
        grown |= self.put(STATIC_F, bytemuck::cast_slice(&fixed));
        grown |= self.put(STATIC_U, bytemuck::cast_slice(&fixed_u));
        // Written by the device before every read.
        let terms = 16 * BODY_TERMS * n_bodies as u64;
        if terms > self.buffers[BODY_TERMS_BUFFER].size() {
            self.buffers[BODY_TERMS_BUFFER] = resident(&self.device, terms.next_power_of_two());
            grown = true;
        }
        if grown {
            self.group = Self::make_group(&self.device, &self.layout, &self.params, &self.buffers);
        }
        o.row_capacity = capacity as u32;
        self.offsets = o;
        let params = ContactParams {
            ccd: CcdParams::new(
                0,
                crate::ccd::DEFAULT_MAX_ITERS,
                cfg.ccd_eta,
                &CcdMargins::WGSL,
                0,
            ),
            gap: cfg.contact_gap,
            xi: cfg.contact_min_separation,
            decay: cfg.contact_decay,
            drop_below: cfg.contact_drop,
            lambda_max: cfg.lambda_max,
            n_candidates: candidates.len() as u32,
            n_points: n_points as u32,
            soft_points: soft_points as u32,
            n_objects: objects as u32,
            n_soft_bodies: n_soft as u32,
            n_tets: set.tets.len() as u32,
            on: 1,
            offsets: o,
            n_bodies: n_bodies as u32,
            pad: [0; 3],
        };
        self.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
        self.sizes = Sizes {
            candidates: candidates.len() as u32,
            row_capacity: capacity as u32,
            points: n_points as u32,
            soft_points: soft_points as u32,
            objects: objects as u32,
            soft_bodies: n_soft as u32,
            tets: set.tets.len() as u32,
            bodies: n_bodies as u32,
        };
        self.pairs.clone_from(&contact.candidates);
        self.on = true;
        self.moving = moving;
        Ok(())
    }

    /// One advance (after the dual updates of an iteration), into `pass` with groups 0 and
    /// 1 set. Returns the dispatches.
    pub(super) fn record_advance(&self, pass: &mut wgpu::ComputePass, max_groups: u32) -> u32 {
        if !self.on {
            return 0;
        }
        pass.set_bind_group(2, &self.group, &[]);
        let s = self.sizes;
        let mut dispatches = 0;
        for (p, over) in &self.pipelines {
            let n = match over {
                Over::Rows => s.row_capacity,
                Over::SoftBodies => s.soft_bodies * 64,
                Over::Points => s.points,
                Over::Candidates => s.candidates,
                Over::Tets => s.tets,
                Over::SoftPoints => s.soft_points,
                Over::Objects => s.objects,
                Over::Bodies => s.bodies,
                Over::Lists => s.soft_points + s.bodies,
            };
            let groups = n.div_ceil(64).max(1);
            let (x, y) = if groups > max_groups {
                (max_groups, groups.div_ceil(max_groups))
            } else {
                (groups, 1)
            };
            pass.set_pipeline(p);
            pass.dispatch_workgroups(x, y, 1);
            dispatches += 1;
        }
        dispatches
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
    /// `pass` with groups 0 and 1 set). Returns the dispatches.
    pub(super) fn record_body_terms(&self, pass: &mut wgpu::ComputePass) -> u32 {
        self.record_over_bodies(pass, &self.body_terms)
    }

    /// Before the integration: each coupled moving body's iterate at its certified pose.
    pub(super) fn record_end(&self, pass: &mut wgpu::ComputePass) -> u32 {
        self.record_over_bodies(pass, &self.end_bodies)
    }

    fn record_over_bodies(&self, pass: &mut wgpu::ComputePass, p: &wgpu::ComputePipeline) -> u32 {
        if !(self.on && self.moving) {
            return 0;
        }
        pass.set_bind_group(2, &self.group, &[]);
        pass.set_pipeline(p);
        pass.dispatch_workgroups(self.sizes.bodies.div_ceil(64).max(1), 1, 1);
        1
    }

    /// Whether the rigid bodies' passes run this frame.
    pub(super) fn moving(&self) -> bool {
        self.on && self.moving
    }

    /// Bytes the readback takes: X, the rows (the whole capacity), the status, β.
    pub(super) fn readback_bytes(&self) -> u64 {
        if !self.on {
            return 0;
        }
        let s = self.sizes;
        16 * s.soft_points as u64
            + std::mem::size_of::<DeviceRow>() as u64 * s.row_capacity as u64
            + 16
            + 16 * s.objects as u64
    }

    /// The pairs of the rows the step made (in candidate order), from this stage's
    /// readback `data`: what a run again starts with in the active set.
    pub(super) fn new_pairs(&self, data: &[u8]) -> Vec<Pair> {
        let s = self.sizes;
        let rows_at = 16 * s.soft_points as usize;
        let row_bytes = std::mem::size_of::<DeviceRow>() * s.row_capacity as usize;
        let rows: &[DeviceRow] = bytemuck::cast_slice(&data[rows_at..rows_at + row_bytes]);
        let status: [u32; 4] =
            bytemuck::pod_read_unaligned(&data[rows_at + row_bytes..rows_at + row_bytes + 16]);
        let count = (status[0] as usize).min(rows.len());
        let mut pairs: Vec<(u32, Pair)> = rows[..count]
            .iter()
            .filter(|r| r.info[3] != NONE)
            .filter_map(|r| Some((r.info[2], *self.pairs.get(r.info[2] as usize)?)))
            .collect();
        pairs.sort_by_key(|p| p.0);
        pairs.into_iter().map(|p| p.1).collect()
    }

    /// Where the status words are in this stage's readback.
    pub(super) fn status_offset(&self) -> u64 {
        let s = self.sizes;
        16 * s.soft_points as u64 + std::mem::size_of::<DeviceRow>() as u64 * s.row_capacity as u64
    }

    /// Copies X, the rows, the status and β into `staging` at `offset`.
    pub(super) fn record_readback(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        staging: &wgpu::Buffer,
        offset: u64,
    ) {
        if !self.on {
            return;
        }
        let (s, o) = (self.sizes, self.offsets);
        let mut at = offset;
        for (i, from, len) in [
            (STATE, 16 * o.certified as u64, 16 * s.soft_points as u64),
            (
                ROWS,
                0,
                std::mem::size_of::<DeviceRow>() as u64 * s.row_capacity as u64,
            ),
            (ATOMICS, 0, 16),
            (STATE, 16 * o.beta as u64, 16 * s.objects as u64),
        ] {
            if len > 0 {
                encoder.copy_buffer_to_buffer(&self.buffers[i], from, staging, at, len);
            }
            at += len;
        }
    }

    /// Reads the frame's contact state back into `contact`: X, the rows (the live ones:
    /// those carried in first, in their order, then the new ones by advance and candidate),
    /// β, and the statistics.
    pub(super) fn finish(
        &self,
        data: &[u8],
        set: &DeformableSet,
        contact: &mut SurfaceContact,
    ) -> Result<(), GpuError> {
        let s = self.sizes;
        let (x, rest) = data.split_at(16 * s.soft_points as usize);
        let row_bytes = std::mem::size_of::<DeviceRow>() * s.row_capacity as usize;
        let (rows, rest) = rest.split_at(row_bytes);
        let (status, rest) = rest.split_at(16);
        let beta: &[[f32; 4]] = bytemuck::cast_slice(&rest[..16 * s.objects as usize]);
        let x: &[[f32; 4]] = bytemuck::cast_slice(x);
        for (c, v) in contact.certified.iter_mut().zip(x) {
            *c = Vec3A::new(v[0], v[1], v[2]);
        }
        let status: [u32; 4] = bytemuck::pod_read_unaligned(status);
        let count = (status[0] as usize).min(s.row_capacity as usize);
        let rows: &[DeviceRow] = bytemuck::cast_slice(rows);
        let mut live: Vec<(u32, u32, usize)> = rows[..count]
            .iter()
            .enumerate()
            .filter(|(_, r)| r.info[0] & ROW_ALIVE != 0)
            .map(|(i, r)| {
                (
                    r.info[3],
                    if r.info[3] == NONE {
                        i as u32
                    } else {
                        r.info[2]
                    },
                    i,
                )
            })
            .collect();
        // Carried rows (advance NONE) sort last by the key: put them first.
        live.sort_by_key(|&(advance, key, _)| (advance != NONE, advance, key));
        let mut out = Vec::with_capacity(live.len());
        for (_, _, i) in live {
            let r = &rows[i];
            let k = r.info[2] as usize;
            let pair = *self
                .pairs
                .get(k)
                .ok_or_else(|| GpuError::Readback(format!("a contact row names candidate {k}")))?;
            out.push(cpu_row(r, pair));
        }
        contact.rows = out;
        // The host's index of them (the forces on bodies read it).
        contact.reindex_rows(set, self.sizes.bodies as usize);
        for (b, v) in contact.beta.iter_mut().zip(beta) {
            *b = v[0];
        }
        contact.stats.rebuilds += status[2] as usize;
        Ok(())
    }
}

fn device_row(r: &Row, candidate: u32) -> DeviceRow {
    let v4 = |v: glam::Vec3, w: f32| [v.x, v.y, v.z, w];
    let flags = kind_code(r.pair.kind) | ROW_ALIVE | if r.in_coarse { ROW_COARSE } else { 0 };
    DeviceRow {
        points: r.points,
        weights: r.weights,
        normal: v4(r.normal, r.dist),
        lagged_normal: v4(r.lagged_normal, r.mu),
        lagged_weights: r.lagged_weights,
        lambda_t: v4(r.lambda_t, r.lambda),
        info: [flags, r.pair.b, candidate, NONE],
        fr: [r.gamma, r.friction[0], r.friction[1], 0.0],
    }
}

fn cpu_row(r: &DeviceRow, pair: Pair) -> Row {
    let v3 = |a: [f32; 4]| glam::Vec3::new(a[0], a[1], a[2]);
    Row {
        pair,
        points: r.points,
        weights: r.weights,
        normal: v3(r.normal),
        dist: r.normal[3],
        lambda: r.lambda_t[3],
        gamma: r.fr[0],
        mu: r.lagged_normal[3],
        friction: [r.fr[1], r.fr[2]],
        lambda_t: v3(r.lambda_t),
        lagged_normal: v3(r.lagged_normal),
        lagged_weights: r.lagged_weights,
        in_coarse: r.info[0] & ROW_COARSE != 0,
    }
}
