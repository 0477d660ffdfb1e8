//! The deformable contact's broad phase on the device (`shaders/contact_broad_phase.wgsl`):
//! the candidate pairs and lower bounds of `SurfaceContact::candidate_pairs`, found in
//! uniform grids as the rigid broad phase finds body pairs ([`super::broad`]).
//!
//! The GPU backend's contact set-up calls it through
//! [`DeviceBroadPhase`] where `SolverConfig::gpu_contact_broad_phase` puts the broad phase
//! on the device (by default, unless the device is a CPU): the host uploads each point's
//! cages and reaches (`input.rs`; the topology only when it changed), the kernels make the
//! triangles' and edges' boxes from them and find the pairs, and the host reads them back
//! for the rest of the set-up (islands, carried rows), a blocking submission of its own
//! before the step's. The pairs are written as the contact stage's candidate records
//! (12 B), so the step's upload copies them on the device instead of sending them up
//! again ([`GpuContactBroadPhase::pairs_of`]). The point–half-space pairs stay the host's
//! (`SurfaceContact::plane_pairs`, a loop over points and planes). Buffers are kept from
//! run to run and grown when short; the room for pairs and grid entries is sized from the
//! last run's counts, and a run short of room runs again with enough.
//!
//! The lower bound is the CCD port's (`ccd_core.wgsl`): the step uses the margins of its
//! CCD, [`CcdMargins::WGSL`], whose bounds are never higher than the CPU's; with
//! [`CcdMargins::CPU`] a device that computes like the CPU (lavapipe) returns the CPU's
//! candidates and bounds bit for bit, which checks the port (`tests.rs`).

mod input;
#[cfg(test)]
mod tests;

pub(in crate::gpu) use input::pack_cages;
use input::{CbParams, Input};

use super::GpuError;
use super::broad::PrefixSum;
use super::ccd::{CcdMargins, CcdParams};
use super::pipelines::{compute_pipeline, storage_entry, uniform_entry};
use crate::config::SolverConfig;
use crate::pipeline::surface_contact::rows::{Pair, PairKind};
use crate::pipeline::surface_contact::{DeviceBroadPhase, SurfaceContact};

/// The WGSL source of the kernels.
pub const CONTACT_BROAD_PHASE_SHADER: &str = concat!(
    include_str!("../../../shaders/ccd_core.wgsl"),
    include_str!("../../../shaders/contact_broad_phase.wgsl")
);

const KERNELS: [&str; 5] = [
    "cb_boxes",
    "cb_count_cells",
    "cb_fill",
    "cb_count_pairs",
    "cb_write_pairs",
];
/// Storage bindings 2–19 (binding, read-only).
const BINDINGS: [(u32, bool); 18] = [
    (2, false),
    (3, true),
    (4, true),
    (5, true),
    (6, true),
    (7, true),
    (8, true),
    (9, false),
    (10, true),
    (11, false),
    (12, false),
    (13, false),
    (14, false),
    (15, false),
    (16, false),
    (17, false),
    (18, false),
    (19, true),
];
/// Pairs a query keeps from the count to the write (`FOUND_SLOTS` in the shader).
const FOUND_SLOTS: u64 = 8;
/// Where the kernels' own buffers are among the storage buffers (`BINDINGS` order).
const BUCKET_START: usize = 9;
const CURSOR: usize = 10;
const COUNTERS: usize = 13;
const PAIR_START: usize = 14;
const PAIRS: usize = 15;
const CAGES: usize = 17;
const WORKGROUP: u32 = 64;
/// A pair's record: its kind in the top two bits of its first primitive, its second, the
/// bits of its lower bound (the contact stage's candidate record).
const PAIR_BYTES: u64 = 12;
const KIND_SHIFT: u32 = 30;
/// Owner bit of a rigid body (`RIGID` in the shader).
const RIGID: u32 = 0x8000_0000;

/// An open device with the contact broad phase's pipelines.
pub struct GpuContactBroadPhase {
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::BindGroupLayout,
    pipelines: [wgpu::ComputePipeline; 5],
    scan: PrefixSum,
    /// The buffers of the last run, kept for the next (grown when short), the pair
    /// count (the next run's room is sized from it) and the run's token.
    kept: std::sync::Mutex<(Option<Kept>, u32, u64)>,
    /// Bytes written to the device and read back since [`Self::reset_traffic`].
    traffic: std::sync::Mutex<(u64, u64)>,
}

/// What a run leaves on the device that the step's contact stage copies.
pub(crate) struct RunRecords {
    pub(crate) pairs: wgpu::Buffer,
    pub(crate) cages: wgpu::Buffer,
}

/// Buffers kept from run to run, with the bind groups over them.
struct Kept {
    params: wgpu::Buffer,
    ccd: wgpu::Buffer,
    /// The storage buffers, in `BINDINGS` order.
    storage: Vec<wgpu::Buffer>,
    /// The prefix sums' lengths and block sums: buckets, pair counts.
    scan_params: [wgpu::Buffer; 2],
    scan_sums: [wgpu::Buffer; 2],
    staging: wgpu::Buffer,
    group: wgpu::BindGroup,
    scan_groups: [wgpu::BindGroup; 2],
    /// What the topology's buffers hold (triangles, edges, point owners, queries,
    /// attachments), which change only with the geometry: written again only when they
    /// differ.
    topology: [Vec<u8>; 5],
}

impl GpuContactBroadPhase {
    /// Opens a device the way the solver does (honouring `WGPU_BACKEND`).
    pub fn new() -> Result<Self, GpuError> {
        let (device, queue, _) = super::device::standalone_device("avbd contact broad phase")?;
        Ok(Self::on(device, queue))
    }

    /// The pipelines on an open device (the solver's).
    pub(super) fn on(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("contact_broad_phase.wgsl"),
            source: wgpu::ShaderSource::Wgsl(CONTACT_BROAD_PHASE_SHADER.into()),
        });
        let mut entries = vec![
            uniform_entry(0, false, std::mem::size_of::<CbParams>() as u64),
            uniform_entry(1, false, std::mem::size_of::<CcdParams>() as u64),
        ];
        entries.extend(BINDINGS.map(|(b, read_only)| storage_entry(b, read_only)));
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd contact broad phase"),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd contact broad phase"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipelines = KERNELS.map(|e| compute_pipeline(&device, &pipeline_layout, &module, e));
        let scan = PrefixSum::new(&device);
        Self {
            device,
            queue,
            layout,
            pipelines,
            scan,
            kept: Default::default(),
            traffic: Default::default(),
        }
    }

    /// Starts counting [`Self::traffic`] again.
    pub(crate) fn reset_traffic(&self) {
        if let Ok(mut t) = self.traffic.lock() {
            *t = (0, 0);
        }
    }

    /// Bytes the runs since [`Self::reset_traffic`] wrote to the device and read back.
    pub(crate) fn traffic(&self) -> (u64, u64) {
        self.traffic.lock().map_or((0, 0), |t| *t)
    }

    /// The point–triangle and edge–edge candidates of `contact`'s current cages, sorted,
    /// with their lower bounds (blocking; runs again with more room when the first guess
    /// of the pair count was short). `owner` is the deformables' vertex owners
    /// (`DeformableSet::owner`).
    pub(crate) fn candidates(
        &self,
        contact: &SurfaceContact,
        cfg: &SolverConfig,
        owner: &[u32],
        margins: &CcdMargins,
    ) -> Result<(Vec<Pair>, Vec<f32>, u64), GpuError> {
        let g = &contact.geometry;
        if g.point_count() as u64 >= 1 << 30 || g.edges.len() as u64 >= 1 << 30 {
            // A record holds the pair's kind in the top two bits of its first primitive.
            return Err(GpuError::Step(format!(
                "{} contact points and {} edges: the device numbers fewer than 2^30 of each",
                g.point_count(),
                g.edges.len()
            )));
        }
        self.find(Input::new(contact, cfg, owner), margins)
    }

    /// The buffers of run `token`, if no run since wrote over them: its pairs' records
    /// (`cands` records of `surface_contact.wgsl`, 12 B each, in the candidates' order)
    /// and its points' cages (48 B each, as `cage_soft` packs them).
    pub(crate) fn records_of(&self, token: u64) -> Option<RunRecords> {
        let k = self.kept.lock().ok()?;
        match (&k.0, k.2 == token) {
            (Some(kept), true) => Some(RunRecords {
                pairs: kept.storage[PAIRS].clone(),
                cages: kept.storage[CAGES].clone(),
            }),
            _ => None,
        }
    }

    /// [`Self::candidates`] of a built input.
    fn find(
        &self,
        mut input: Input,
        margins: &CcdMargins,
    ) -> Result<(Vec<Pair>, Vec<f32>, u64), GpuError> {
        // Room for the grid's entries as the host counts them (a device that rounds a
        // cell's edge otherwise may place a few more: some slack, and a run short of
        // room runs again), and for half as many pairs again as the last run found (the
        // count jumps at an impact), or four a query at first.
        let last = self.kept.lock().map_or(0, |k| k.1);
        let queries = input.query_points.len() + input.edges.len();
        input.params.capacity = match last {
            0 => 4 * queries as u32,
            n => n + n / 2,
        }
        .max(1024);
        input.params.entry_capacity = (input.placed + input.placed / 16).max(1024);
        loop {
            let (pairs, [total, placed]) = self.run(&input, margins)?;
            if placed > input.params.entry_capacity {
                // The queries read a grid with entries missing: their count means nothing.
                input.params.entry_capacity = placed;
                continue;
            }
            // Each run that writes the pairs has a token of its own.
            let token = match self.kept.lock() {
                Ok(mut k) => {
                    k.1 = total;
                    k.2 += 1;
                    k.2
                }
                Err(_) => return Err(GpuError::Readback("a poisoned lock".into())),
            };
            let capacity = input.params.capacity;
            if total <= capacity {
                let lower = pairs.iter().map(|p| f32::from_bits(p[2])).collect();
                let pairs = pairs
                    .iter()
                    .map(|p| Pair {
                        kind: match p[0] >> KIND_SHIFT {
                            0 => PairKind::PointTriangle,
                            _ => PairKind::EdgeEdge,
                        },
                        a: p[0] & ((1 << KIND_SHIFT) - 1),
                        b: p[1],
                    })
                    .collect();
                return Ok((pairs, lower, token));
            }
            input.params.capacity = total;
        }
    }
}

/// The step's broad phase on the solver's device, with the margins of the step's CCD
/// ([`CcdMargins::WGSL`]: bounds no higher than the CPU's), or the CPU's in tests.
pub(crate) struct StepBroadPhase {
    pub(crate) finder: std::sync::Arc<GpuContactBroadPhase>,
    pub(crate) margins: CcdMargins,
    /// Test hook: fail instead of running.
    pub(crate) fails: bool,
}

impl DeviceBroadPhase for StepBroadPhase {
    fn candidates(
        &self,
        contact: &SurfaceContact,
        cfg: &SolverConfig,
        owner: &[u32],
    ) -> Result<(Vec<Pair>, Vec<f32>, u64), String> {
        if self.fails {
            return Err("failed for a test".into());
        }
        self.finder
            .candidates(contact, cfg, owner, &self.margins)
            .map_err(|e| e.to_string())
    }
}

impl GpuContactBroadPhase {
    /// Sizes in bytes of the storage buffers (in `BINDINGS` order) a run of `input` needs.
    fn sizes(input: &Input) -> [u64; 18] {
        let p = &input.params;
        let bytes = |n: usize, each: usize| (n * each) as u64;
        let table = p.table_mask as u64 + 1;
        let queries = (p.n_point_queries + p.n_edges) as u64;
        [
            bytes(input.items.len(), 32),
            bytes(input.tris.len(), 16),
            bytes(input.edges.len(), 16),
            bytes(input.points.len(), 16),
            bytes(input.comoving_reach.len(), 4),
            bytes(input.point_owner.len(), 4),
            bytes(input.query_points.len(), 4),
            bytes(2 * input.query_points.len(), 32),
            bytes(input.linked.len(), 8),
            (table + 1) * 4,
            table * 4,
            p.entry_capacity as u64 * 16,
            p.n_items as u64 * 4,
            16,
            (queries + 1) * 4,
            p.capacity as u64 * PAIR_BYTES,
            queries * FOUND_SLOTS * 8,
            bytes(input.cages.len(), 16),
        ]
        .map(|b| b.max(16).next_multiple_of(16))
    }

    /// The kept buffers, grown where `input` needs more room (then its groups are made
    /// again).
    fn buffers(&self, kept: &mut Option<Kept>, input: &Input) {
        let d = &self.device;
        let sizes = Self::sizes(input);
        let table = input.params.table_mask + 1;
        let queries = input.params.n_point_queries + input.params.n_edges;
        let sums = [PrefixSum::sums_bytes(table), PrefixSum::sums_bytes(queries)];
        let staging_bytes = 16 + sizes[15];
        let fits = kept.as_ref().is_some_and(|k| {
            k.storage.iter().zip(&sizes).all(|(b, &n)| b.size() >= n)
                && k.scan_sums.iter().zip(&sums).all(|(b, &n)| b.size() >= n)
                && k.staging.size() >= staging_bytes
        });
        if fits {
            return;
        }
        // A quarter more than this run needs, so that a growing scene grows them seldom.
        let room = |n: u64| (n + n / 4).next_multiple_of(16);
        let storage_usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        let buffer = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            d.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let uniform = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
        let storage: Vec<wgpu::Buffer> = sizes
            .iter()
            .map(|&n| buffer("contact broad phase", room(n), storage_usage))
            .collect();
        let scan_params = [0, 1].map(|_| buffer("contact broad scan params", 16, uniform));
        let scan_sums = sums.map(|n| buffer("contact broad block sums", room(n), storage_usage));
        let params = buffer(
            "contact broad params",
            std::mem::size_of::<CbParams>() as u64,
            uniform,
        );
        let ccd = buffer(
            "contact broad ccd params",
            std::mem::size_of::<CcdParams>() as u64,
            uniform,
        );
        let staging = buffer(
            "contact broad readback",
            room(staging_bytes),
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: 0,
                resource: params.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: ccd.as_entire_binding(),
            },
        ];
        for (b, buffer) in BINDINGS.iter().zip(&storage) {
            entries.push(wgpu::BindGroupEntry {
                binding: b.0,
                resource: buffer.as_entire_binding(),
            });
        }
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("contact broad phase"),
            layout: &self.layout,
            entries: &entries,
        });
        // The prefix sums run over the bucket starts and the pair starts.
        let scan_group = |k: usize, data: &wgpu::Buffer| {
            d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("contact broad scan"),
                layout: &self.scan.layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: scan_params[k].as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: data.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: scan_sums[k].as_entire_binding(),
                    },
                ],
            })
        };
        let scan_groups = [
            scan_group(0, &storage[BUCKET_START]),
            scan_group(1, &storage[PAIR_START]),
        ];
        *kept = Some(Kept {
            params,
            ccd,
            storage,
            scan_params,
            scan_sums,
            staging,
            group,
            scan_groups,
            topology: Default::default(),
        });
    }

    /// One run: the inputs written into the kept buffers, the kernels, the pair count, the
    /// grid entries' count and the first `capacity` pairs read back (blocking).
    fn run(
        &self,
        input: &Input,
        margins: &CcdMargins,
    ) -> Result<(Vec<[u32; 3]>, [u32; 2]), GpuError> {
        let mut guard = self
            .kept
            .lock()
            .map_err(|_| GpuError::Readback("contact broad phase: a poisoned lock".into()))?;
        self.buffers(&mut guard.0, input);
        let k = guard.0.as_mut().expect("made above");
        let (d, q) = (&self.device, &self.queue);
        let p = &input.params;
        q.write_buffer(&k.params, 0, bytemuck::bytes_of(p));
        let ccd = CcdParams::new(0, 0, 1.0, margins, 0);
        q.write_buffer(&k.ccd, 0, bytemuck::bytes_of(&ccd));
        // The items' and queries' boxes are made on the device from the points' cages
        // (`cb_boxes`); the topology goes up when it changed.
        let mut up = (std::mem::size_of_val(p) + std::mem::size_of_val(&ccd) + 32) as u64;
        let topology: [(usize, &[u8]); 5] = [
            (1, bytemuck::cast_slice(&input.tris)),
            (2, bytemuck::cast_slice(&input.edges)),
            (5, bytemuck::cast_slice(&input.point_owner)),
            (6, bytemuck::cast_slice(&input.query_points)),
            (8, bytemuck::cast_slice(&input.linked)),
        ];
        for ((slot, data), held) in topology.into_iter().zip(&mut k.topology) {
            if !data.is_empty() && held.as_slice() != data {
                q.write_buffer(&k.storage[slot], 0, data);
                up += data.len() as u64;
                held.clear();
                held.extend_from_slice(data);
            }
        }
        let state: [(usize, &[u8]); 3] = [
            (3, bytemuck::cast_slice(&input.points)),
            (4, bytemuck::cast_slice(&input.comoving_reach)),
            (CAGES, bytemuck::cast_slice(&input.cages)),
        ];
        for (slot, data) in state {
            if !data.is_empty() {
                q.write_buffer(&k.storage[slot], 0, data);
                up += data.len() as u64;
            }
        }
        let k = &*k;
        let table = p.table_mask + 1;
        let queries = p.n_point_queries + p.n_edges;
        q.write_buffer(
            &k.scan_params[0],
            0,
            bytemuck::cast_slice(&[table, 0, 0, 0]),
        );
        q.write_buffer(
            &k.scan_params[1],
            0,
            bytemuck::cast_slice(&[queries, 0, 0, 0]),
        );
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("contact broad phase"),
        });
        let dispatch =
            |encoder: &mut wgpu::CommandEncoder, kernel: &wgpu::ComputePipeline, n: u32| {
                let groups = n.div_ceil(WORKGROUP).max(1);
                let x = groups.min(u16::MAX as u32);
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(kernel);
                pass.set_bind_group(0, &k.group, &[]);
                pass.dispatch_workgroups(x, groups.div_ceil(x), 1);
            };
        let scan = |encoder: &mut wgpu::CommandEncoder, group: &wgpu::BindGroup, len: u32| {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            self.scan.record(&mut pass, group, len);
        };
        let [boxes, count_cells, fill, count_pairs, write_pairs] = &self.pipelines;
        let (bucket_start, cursor) = (&k.storage[BUCKET_START], &k.storage[CURSOR]);
        let table_bytes = table as u64 * 4;
        encoder.clear_buffer(cursor, 0, Some(table_bytes));
        encoder.clear_buffer(&k.storage[COUNTERS], 0, None);
        dispatch(&mut encoder, boxes, p.n_items + p.n_point_queries);
        dispatch(&mut encoder, count_cells, p.n_items);
        encoder.copy_buffer_to_buffer(cursor, 0, bucket_start, 0, table_bytes);
        scan(&mut encoder, &k.scan_groups[0], table);
        encoder.copy_buffer_to_buffer(bucket_start, 0, cursor, 0, table_bytes);
        dispatch(&mut encoder, fill, p.n_items);
        dispatch(&mut encoder, count_pairs, queries);
        scan(&mut encoder, &k.scan_groups[1], queries);
        dispatch(&mut encoder, write_pairs, queries);
        let pair_bytes = p.capacity as u64 * PAIR_BYTES;
        encoder.copy_buffer_to_buffer(&k.storage[PAIR_START], queries as u64 * 4, &k.staging, 0, 4);
        encoder.copy_buffer_to_buffer(bucket_start, table_bytes, &k.staging, 4, 4);
        if pair_bytes > 0 {
            encoder.copy_buffer_to_buffer(&k.storage[PAIRS], 0, &k.staging, 16, pair_bytes);
        }
        q.submit([encoder.finish()]);
        let data: Vec<u32> = super::device::read_staging_range(d, &k.staging, 16 + pair_bytes)?;
        if let Ok(mut t) = self.traffic.lock() {
            t.0 += up;
            t.1 += 16 + pair_bytes;
        }
        let (total, placed) = (data[0], data[1]);
        let written = total.min(p.capacity) as usize;
        let pairs = data[4..4 + 3 * written]
            .chunks_exact(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
        Ok((pairs, [total, placed]))
    }
}
