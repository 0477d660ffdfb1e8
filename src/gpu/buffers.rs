//! Device buffers: the slot of each buffer, growth by doubling, the upload of the body
//! state the CPU wrote and by difference of what follows from the layout, the upload belt for what goes up whole every step, and blocking
//! reads for tools and tests.

use std::num::NonZeroU64;

use rayon::prelude::*;

use super::*;

/// What a buffer uploaded by [`GpuSolver::upload_keyed`] holds the data of: edit counters
/// (and the like) that the data follows from.
pub(super) type UploadKey = [u64; 3];

/// Stride of the per-colour uniform slots (dynamic offsets must be 256-byte aligned).
pub(super) const COLOR_SLOT: u64 = 256;

/// Colour slots: the palette, then the serial group.
pub(super) const SLOTS: u64 = MAX_COLORS as u64 + 1;

/// Entry of the serial group in `ranges` and `indirect`.
pub(super) const SERIAL_SLOT: u64 = MAX_COLORS as u64;

/// `ranges`: 64 colours, the serial group, then (colours used, bodies out of rounds),
/// (the last round in which a body took a colour, worklist size) and (colours before the
/// re-greedy pass, 0).
pub(super) const RANGES_BYTES: u64 = (SLOTS + 3) * 8;

/// Dispatch arguments: one slot per colour and the serial group (only the serial group's
/// is written: one body per dispatch), then the primal sweep's per colour (`LANE_ARGS_AT`, 8 bodies per workgroup).
pub(super) const INDIRECT_BYTES: u64 = 2 * SLOTS * 12;

pub(super) const LANE_ARGS_AT: u64 = SLOTS * 12;

pub(super) const COUNTERS: u64 = 135;

// Device buffers.
pub(super) const POSES: usize = 0;
pub(super) const MASSES: usize = 1;
pub(super) const ITERATE: usize = 2;
pub(super) const INERTIAL: usize = 3;
pub(super) const CONTACTS: usize = 4;
pub(super) const JOINTS: usize = 5;
pub(super) const JOINT_STATES: usize = 6;
pub(super) const ADJ_OFFSETS: usize = 7;
pub(super) const ADJ_ITEMS: usize = 8;
pub(super) const COLOR_BODIES: usize = 9;
pub(super) const RANGES: usize = 10;
pub(super) const BODY_FLAGS: usize = 11;
pub(super) const COLOR_OF: usize = 12;
pub(super) const INDIRECT: usize = 13;
pub(super) const COUNTER: usize = 14;
/// Contacts are split in up to this many bindings (chunk 0 is `CONTACTS`, chunk j > 0 is
/// buffer 14 + j) of `1 << contact_shift` records, so that no binding exceeds the adapter's
/// storage binding size (128 MiB on lavapipe: 1,048,576 contacts per chunk).
pub(super) const CONTACT_CHUNKS: usize = 8;
pub(super) const fn contact_chunk(j: usize) -> usize {
    if j == 0 { CONTACTS } else { COUNTER + j }
}
pub(super) const VELOCITIES: usize = 22;
pub(super) const PREV_VELOCITIES: usize = 23;
pub(super) const FORCES: usize = 24;
pub(super) const STATUS: usize = 25;
/// 64-byte per-contact buffers are split in up to this many bindings of `2 << contact_shift`
/// records: the contact points (uploaded every step), and the two buffers of what the
/// contacts carry from step to step (one read, one written, alternating).
pub(super) const HALF_CHUNKS: usize = 4;
pub(super) const POINTS: usize = 26;
pub(super) const CARRIED: [usize; 2] = [POINTS + HALF_CHUNKS, POINTS + 2 * HALF_CHUNKS];
/// The colour of each body in the last accepted step (the seeds of the next colouring)
/// and in this one, alternating like `CARRIED`.
pub(super) const COLOR_SEEDS: [usize; 2] = [POINTS + 3 * HALF_CHUNKS, POINTS + 3 * HALF_CHUNKS + 1];
/// The device narrow phase (`contact_narrow.wgsl`): each body's collider as a primitive,
/// what each pair carries to the next step (two buffers alternating like `CARRIED`), each
/// pair's point count (a byte per pair; alternating too, so the last step's stays
/// readable while the next one runs) and the narrow phase's status (deepest penetration,
/// points, touching pairs, and the islands anchored nowhere, from `islands.wgsl`; read
/// back).
pub(super) const SHAPES: usize = COLOR_SEEDS[1] + 1;
pub(super) const PAIR_STATE: [usize; 2] = [SHAPES + 1, SHAPES + 2];
pub(super) const PAIR_COUNTS: [usize; 2] = [SHAPES + 3, SHAPES + 21];
pub(super) const NARROW_STATUS: usize = SHAPES + 4;
/// Bytes of `NARROW_STATUS`.
pub(super) const NARROW_STATUS_BYTES: u64 = 16;
/// The device broad phase (`broad_phase.wgsl`): each body's class, the special bodies and
/// the jointed pairs (uploaded by difference), each body's box, the hash table's bucket
/// starts and fill cursors, its entries, and each body's first pair and the pair list
/// (both alternating like `CARRIED`: the last step's list gives each pair its old index),
/// and the block sums of the two prefix sums (buckets, pairs).
pub(super) const CLASSES: usize = SHAPES + 5;
pub(super) const SPECIALS: usize = SHAPES + 6;
pub(super) const EXCLUDED: usize = SHAPES + 7;
pub(super) const BOUNDS: usize = SHAPES + 8;
pub(super) const BUCKET_START: usize = SHAPES + 9;
pub(super) const CURSOR: usize = SHAPES + 10;
pub(super) const ENTRIES: usize = SHAPES + 11;
pub(super) const PAIR_START: [usize; 2] = [SHAPES + 12, SHAPES + 13];
pub(super) const PAIR_LIST: [usize; 2] = [SHAPES + 14, SHAPES + 15];
pub(super) const SCAN_SUMS: [usize; 2] = [SHAPES + 16, SHAPES + 17];
/// The islands of the momentum projection (`islands.wgsl`): each body's union–find parent
/// and anchored flag, and its island's root (read back).
pub(super) const ISLAND_PARENT: usize = SHAPES + 18;
pub(super) const ISLAND_ANCHORED: usize = SHAPES + 19;
pub(super) const ISLANDS: usize = SHAPES + 20;
/// The device narrow phase's worklist: the pairs whose manifold was not carried.
pub(super) const NARROW_WORK: usize = SHAPES + 22;
/// The joints' row states stay on the device: `JOINT_STATES` is the step's, warm-started
/// (`joints.wgsl` `warm_start_joints`) from what the last accepted step left, copied into
/// `JOINT_CARRIED` when the next step begins (a step run again reads the same), or the
/// CPU's copy after joints were added or removed. Per joint also the heaviest body of
/// its island (`[mass, moment]`, from the CPU, by difference) and whether the step's
/// fracture test broke it (`fracture_joints`; read back where a joint is breakable).
pub(super) const JOINT_CARRIED: usize = SHAPES + 23;
pub(super) const JOINT_HEAVIEST: usize = SHAPES + 24;
pub(super) const JOINT_BROKEN: usize = SHAPES + 25;
/// What the CPU reads back of each body every step, written by `end_bodies`
/// (`integration.wgsl`), the records' padding left out: every body's position and
/// rotation ([`POSE_OUT_WORDS`] words), then every body's linear and angular velocity
/// ([`VELOCITY_OUT_WORDS`]), read only where they do not stay on the device.
pub(super) const BODY_OUT: usize = SHAPES + 26;
/// Words per body of `BODY_OUT`'s poses and velocities.
pub(super) const POSE_OUT_WORDS: usize = 7;
pub(super) const VELOCITY_OUT_WORDS: usize = 6;
/// `STATUS` lists at most this many bodies whose result was not finite, after their
/// count (`integration.wgsl`'s `FROZEN_ROOM`); beyond it the CPU reads the per-body flags
/// that follow.
pub(super) const FROZEN_ROOM: usize = 63;
/// The momentum projection on the device (`momentum.wgsl`): each solved body's start
/// momenta and position, and each island root's fixed-point sums.
pub(super) const MOMENTUM_TARGETS: usize = SHAPES + 27;
pub(super) const MOMENTUM_SUMS: usize = SHAPES + 28;
/// Where the velocities stay on the device, `VELOCITIES` and `PREV_VELOCITIES` as a step
/// began (copied there first), so that a step run again starts from them: the CPU's copy
/// is stale.
pub(super) const VELOCITY_START: usize = SHAPES + 29;
/// Bytes per body of `MOMENTUM_TARGETS` and `MOMENTUM_SUMS` (`Target` and `SUM_WORDS`
/// in momentum.wgsl).
pub(super) const MOMENTUM_TARGET_BYTES: usize = 48;
pub(super) const MOMENTUM_SUM_BYTES: usize = 160;
/// Bytes of `STATUS` read back every step: the count and the list.
pub(super) const FROZEN_LIST_BYTES: usize = 4 * (1 + FROZEN_ROOM);
pub(super) const NAMES: [&str; 70] = [
    "poses",
    "masses",
    "iterate",
    "inertial",
    "contacts",
    "joints",
    "joint_states",
    "adj_offsets",
    "adj_items",
    "color_bodies",
    "ranges",
    "body_flags",
    "color_of",
    "indirect",
    "counters",
    "contacts1",
    "contacts2",
    "contacts3",
    "contacts4",
    "contacts5",
    "contacts6",
    "contacts7",
    "velocities",
    "prev_velocities",
    "forces",
    "status",
    "points0",
    "points1",
    "points2",
    "points3",
    "carried_a0",
    "carried_a1",
    "carried_a2",
    "carried_a3",
    "carried_b0",
    "carried_b1",
    "carried_b2",
    "carried_b3",
    "color_seeds_a",
    "color_seeds_b",
    "shapes",
    "pair_state_a",
    "pair_state_b",
    "pair_counts_a",
    "narrow_status",
    "classes",
    "specials",
    "excluded",
    "bounds",
    "bucket_start",
    "cursor",
    "entries",
    "pair_start_a",
    "pair_start_b",
    "pair_list_a",
    "pair_list_b",
    "bucket_scan_sums",
    "pair_scan_sums",
    "island_parent",
    "island_anchored",
    "islands",
    "pair_counts_b",
    "narrow_work",
    "joint_carried",
    "joint_heaviest",
    "joint_broken",
    "body_out",
    "momentum_targets",
    "momentum_sums",
    "velocity_start",
];

/// Buffers uploaded by difference: only the chunks whose bytes differ from what the device
/// holds go up (the CPU's copy of what the device holds is `GpuSolver::shadow`).
pub(super) const TRACKED: [usize; 8] = [
    SHAPES,
    CLASSES,
    SPECIALS,
    EXCLUDED,
    MASSES,
    JOINTS,
    BODY_FLAGS,
    JOINT_HEAVIEST,
];

/// The per-body records (resident; counted in `GpuTraffic::body_upload_bytes`).
pub(super) const BODY_STATE: [usize; 6] = [
    POSES,
    VELOCITIES,
    PREV_VELOCITIES,
    FORCES,
    MASSES,
    BODY_FLAGS,
];

/// The body state the CPU writes and the device keeps from step to step: what goes up is
/// what the CPU recorded in `BodySet::edits` (`GpuSolver::upload_body_state`), with no
/// copy of the device's bytes to compare with.
pub(super) const RESIDENT_STATE: [usize; 4] = [POSES, VELOCITIES, PREV_VELOCITIES, FORCES];

/// Granularity of the upload by difference (bytes; a multiple of every record size's
/// 4-byte alignment that wgpu requires of buffer writes).
pub(super) const DIFF_CHUNK: usize = 1024;

/// Chunks of [`DIFF_CHUNK`] bytes a thread takes at least when comparing or copying in
/// parallel: below 64 KiB the threads cost more than they save.
const PAR_CHUNKS: usize = 64;

/// A growable device buffer (reallocated only when a step needs more room).
pub(super) struct DeviceBuffer {
    pub(super) buffer: wgpu::Buffer,
    pub(super) capacity: u64,
}

/// Persistent `MAP_WRITE` staging for what goes up whole every step (contacts and joint
/// row states): filled in parallel while mapped, copied into the device buffers at
/// the start of the step's command buffer, mapped again before the next fill (the map
/// completes once the GPU has read it). `Queue::write_buffer` would allocate fresh staging
/// memory and fill it on one thread: at 110,000 bodies that is ~450 MB per step.
#[derive(Default)]
pub(super) struct UploadBelt {
    pub(super) buffer: Option<wgpu::Buffer>,
    pub(super) capacity: u64,
    pub(super) mapped: bool,
    /// This step's copies: (slot, offset in the belt, bytes).
    pub(super) copies: Vec<(usize, u64, u64)>,
}

/// Bytes per parallel copy job of the upload belt.
pub(super) const BELT_PIECE: usize = 1 << 20;

pub(super) fn usage_of(slot: usize) -> wgpu::BufferUsages {
    let usage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    if slot == INDIRECT {
        usage | wgpu::BufferUsages::INDIRECT
    } else {
        usage
    }
}

impl GpuSolver {
    /// The slot uniform: `count` 256-byte slots, slot j holding index j, and a second
    /// word of 1 for the first `by_index` (the rounds of a colouring from scratch that give
    /// the smaller index the priority; 0 elsewhere).
    pub(super) fn make_slots(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layout: &wgpu::BindGroupLayout,
        count: u64,
        by_index: u64,
    ) -> (wgpu::Buffer, wgpu::BindGroup) {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("colour slots"),
            size: count * COLOR_SLOT,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut bytes = vec![0u8; (count * COLOR_SLOT) as usize];
        for j in 0..count as usize {
            let at = j * COLOR_SLOT as usize;
            bytes[at..at + 4].copy_from_slice(&(j as u32).to_le_bytes());
            let flag = (j < by_index as usize) as u32;
            bytes[at + 4..at + 8].copy_from_slice(&flag.to_le_bytes());
        }
        queue.write_buffer(&buffer, 0, &bytes);
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("avbd colour slot"),
            layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &buffer,
                    offset: 0,
                    size: NonZeroU64::new(8),
                }),
            }],
        });
        (buffer, group)
    }

    pub(super) fn make_buffer(
        device: &wgpu::Device,
        label: &str,
        size: u64,
        usage: wgpu::BufferUsages,
    ) -> DeviceBuffer {
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
    pub(super) fn ensure(&mut self, slot: usize, bytes: u64) -> bool {
        let need = bytes.max(256).next_multiple_of(256);
        let buf = &self.buffers[slot];
        if buf.capacity >= need {
            return false;
        }
        let size = need.max(buf.capacity * 2).min(self.max_binding.max(need));
        let old = std::mem::replace(
            &mut self.buffers[slot],
            Self::make_buffer(&self.device, NAMES[slot], size, usage_of(slot)),
        );
        if self.velocities_newer && [VELOCITIES, PREV_VELOCITIES].contains(&slot) {
            // The device alone holds them (bodies were added since): they move along.
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("velocities into a grown buffer"),
                });
            let new = &self.buffers[slot].buffer;
            encoder.copy_buffer_to_buffer(&old.buffer, 0, new, 0, old.capacity);
            self.queue.submit([encoder.finish()]);
        }
        self.shadow[slot].clear();
        self.uploaded_key[slot] = None;
        self.state_stale |= RESIDENT_STATE.contains(&slot);
        self.reallocations += 1;
        true
    }

    /// Writes `data` into buffer `slot`. Tracked buffers get only the runs of
    /// [`DIFF_CHUNK`]-byte chunks that differ from their shadow (all of it after the buffer
    /// was reallocated, when the shadow is empty).
    pub(super) fn upload(&mut self, slot: usize, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if !TRACKED.contains(&slot) {
            self.queue.write_buffer(&self.buffers[slot].buffer, 0, data);
            self.last_traffic.upload_bytes += data.len() as u64;
            return;
        }
        let shadow = &mut self.shadow[slot];
        // Bytes past `valid` are not on the device (yet): never clean.
        let valid = shadow.len().min(data.len());
        shadow.resize(data.len(), 0);
        // Which chunks differ, compared in parallel (a large scene's body state is tens
        // of MiB); the runs and their writes below stay in order.
        let dirty: Vec<bool> = data
            .par_chunks(DIFF_CHUNK)
            .zip(shadow.par_chunks(DIFF_CHUNK))
            .enumerate()
            .with_min_len(PAR_CHUNKS)
            .map(|(k, (d, s))| k * DIFF_CHUNK + d.len() > valid || d != s)
            .collect();
        let mut k = 0;
        while k < dirty.len() {
            if !dirty[k] {
                k += 1;
                continue;
            }
            let first = k;
            while k < dirty.len() && dirty[k] {
                k += 1;
            }
            let (start, at) = (first * DIFF_CHUNK, (k * DIFF_CHUNK).min(data.len()));
            shadow[start..at].copy_from_slice(&data[start..at]);
            self.queue
                .write_buffer(&self.buffers[slot].buffer, start as u64, &data[start..at]);
            self.last_traffic.upload_bytes += (at - start) as u64;
            if BODY_STATE.contains(&slot) {
                self.last_traffic.body_upload_bytes += (at - start) as u64;
            }
        }
    }

    /// [`Self::upload`] of data that changes only with `key` (counters of the edits it
    /// follows from: the bodies' layout and the margin, or the joints added, removed and
    /// broken): skipped, not compared, while the buffer holds the data of that key.
    pub(super) fn upload_keyed(&mut self, slot: usize, data: &[u8], key: UploadKey) {
        if self.uploaded_key[slot] != Some(key) {
            self.upload(slot, data);
            self.uploaded_key[slot] = Some(key);
        }
    }

    /// Uploads the body state the CPU wrote since the last step: all of it when its
    /// buffers are new, the step ran again or the CPU wrote every body (`BodyEdits::all`),
    /// else the touched bodies' records, one write per run of consecutive bodies. Where
    /// the device alone holds the velocities, of those only the ones the CPU wrote.
    pub(super) fn upload_body_state(&mut self, bodies: &BodySet) {
        use std::mem::size_of;
        let velocity = size_of::<VelocityRecord>();
        // (slot, the CPU's copy, record size, a velocity)
        let parts: [(usize, &[u8], usize, bool); 4] = [
            (
                POSES,
                bytemuck::cast_slice(&bodies.poses),
                size_of::<PoseRecord>(),
                false,
            ),
            (
                VELOCITIES,
                bytemuck::cast_slice(&bodies.velocities),
                velocity,
                true,
            ),
            (
                PREV_VELOCITIES,
                bytemuck::cast_slice(&bodies.prev_velocities),
                velocity,
                true,
            ),
            (
                FORCES,
                bytemuck::cast_slice(&bodies.forces),
                size_of::<[f32; 8]>(),
                false,
            ),
        ];
        let mut runs = std::mem::take(&mut self.touched_runs);
        let mut touched = std::mem::take(&mut self.touched);
        let whole = self.state_stale || bodies.edits.all;
        Self::runs_of(
            whole,
            bodies.len(),
            &bodies.edits.touched,
            &mut touched,
            &mut runs,
        );
        // Where the device alone holds the velocities, only those the CPU wrote go up (a
        // step run again restores the others from their copy: `record_step_inputs`).
        let mut velocity_runs = Vec::new();
        if self.velocities_newer {
            Self::runs_of(
                false,
                0,
                &bodies.edits.velocities,
                &mut touched,
                &mut velocity_runs,
            );
        }
        for &(slot, data, size, is_velocity) in &parts {
            debug_assert_eq!(data.len(), size * bodies.len());
            let runs = match is_velocity && self.velocities_newer {
                true => &velocity_runs,
                false => &runs,
            };
            for &(first, end) in runs {
                let bytes = &data[first * size..end * size];
                if bytes.is_empty() {
                    continue;
                }
                self.queue
                    .write_buffer(&self.buffers[slot].buffer, (first * size) as u64, bytes);
                self.last_traffic.upload_bytes += bytes.len() as u64;
                self.last_traffic.body_upload_bytes += bytes.len() as u64;
            }
        }
        self.touched = touched;
        self.touched_runs = runs;
        self.state_stale = false;
    }

    /// The runs of consecutive bodies in `list` (sorted and deduplicated into `scratch`),
    /// or one run of all `n` where `whole`.
    fn runs_of(
        whole: bool,
        n: usize,
        list: &[u32],
        scratch: &mut Vec<u32>,
        runs: &mut Vec<(usize, usize)>,
    ) {
        runs.clear();
        if whole {
            runs.push((0, n));
            return;
        }
        scratch.clear();
        scratch.extend_from_slice(list);
        scratch.sort_unstable();
        scratch.dedup();
        for &i in scratch.iter() {
            match runs.last_mut() {
                Some((_, end)) if *end == i as usize => *end += 1,
                _ => runs.push((i as usize, i as usize + 1)),
            }
        }
    }

    /// Stages buffers that go up whole every step in the upload belt (copied into place
    /// by the step's command buffer), or through `Queue::write_buffer` when they exceed
    /// the largest buffer the device allows.
    pub(super) fn upload_whole(&mut self, parts: &[(usize, &[u8])]) -> Result<(), GpuError> {
        self.belt.copies.clear();
        // Parts start on 256-byte boundaries (mapped ranges start on multiples of 8).
        let mut total = 0u64;
        for &(slot, data) in parts {
            self.belt.copies.push((slot, total, data.len() as u64));
            total = (total + data.len() as u64).next_multiple_of(256);
        }
        let max = self.device.limits().max_buffer_size;
        if total == 0 || total > max {
            self.belt.copies.clear();
            for &(slot, data) in parts {
                self.upload(slot, data);
            }
            return Ok(());
        }
        if self.belt.capacity < total {
            let size = total.max(self.belt.capacity * 2).min(max);
            self.belt.buffer = Some(self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("upload belt"),
                size,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            }));
            self.belt.capacity = size;
            self.belt.mapped = true;
            self.reallocations += 1;
        }
        let belt = self.belt.buffer.clone().expect("sized above");
        if !self.belt.mapped {
            // The last step's submission has finished (its results were read back), so
            // the map completes at once.
            self.map_blocking(belt.slice(..), wgpu::MapMode::Write)
                .map_err(GpuError::Step)?;
        }
        parts
            .par_iter()
            .zip(self.belt.copies.par_iter())
            .flat_map_iter(|(&(_, data), &(_, offset, _))| {
                data.chunks(BELT_PIECE)
                    .enumerate()
                    .map(move |(i, src)| (offset + (i * BELT_PIECE) as u64, src))
            })
            .try_for_each(|(offset, src)| {
                let mut view = belt
                    .get_mapped_range_mut(offset..offset + src.len() as u64)
                    .map_err(|e| GpuError::Step(format!("{e:?}")))?;
                view.slice(..).copy_from_slice(src);
                Ok::<(), GpuError>(())
            })?;
        belt.unmap();
        self.belt.mapped = false;
        self.last_traffic.upload_bytes += parts.iter().map(|(_, d)| d.len() as u64).sum::<u64>();
        Ok(())
    }

    /// A typed error (instead of a wgpu validation panic) when the step does not fit the
    /// device: a buffer larger than the adapter binds, or more workgroups than one dispatch
    /// dimension allows.
    pub(super) fn check_limits(
        &self,
        sizes: &[(usize, usize)],
        n: usize,
        contacts: usize,
    ) -> Result<(), GpuError> {
        let limits = self.device.limits();
        let max_bytes = self.max_binding;
        let unsupported = |reason: String| GpuError::Unsupported {
            adapter: self.info.name.clone(),
            reason,
        };
        for &(slot, bytes) in sizes {
            // Growth doubles, so the next size must fit as well.
            let need = (bytes as u64).max(256).next_multiple_of(256);
            if need > max_bytes {
                return Err(unsupported(format!(
                    "the {} buffer needs {need} bytes, the adapter binds at most {max_bytes}",
                    NAMES[slot]
                )));
            }
        }
        let max_contacts = (CONTACT_CHUNKS as u64) << self.contact_shift;
        if contacts as u64 > max_contacts {
            return Err(unsupported(format!(
                "{contacts} contacts, at most {max_contacts} fit in {CONTACT_CHUNKS} bindings"
            )));
        }
        let max_items = limits.max_compute_workgroups_per_dimension as u64 * WORKGROUP as u64;
        // Contacts and joints run on 2-D grids; bodies (colouring, per-colour indirect
        // dispatches) on 1-D ones.
        if n as u64 > max_items {
            return Err(unsupported(format!(
                "{n} bodies, one dispatch covers at most {max_items}"
            )));
        }
        Ok(())
    }

    /// Maps `slice` and waits until the map completes (after the GPU work that uses it).
    pub(super) fn map_blocking(
        &self,
        slice: wgpu::BufferSlice,
        mode: wgpu::MapMode,
    ) -> Result<(), String> {
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(mode, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| e.to_string())?;
        rx.recv()
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }

    /// Blocking copy of `len` bytes of buffer `slot` from `offset` (a temporary staging
    /// buffer; not part of the per-step path).
    pub(super) fn read(&self, slot: usize, offset: u64, len: u64) -> Result<Vec<u8>, GpuError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let tmp = Self::make_buffer(
            &self.device,
            "debug readback",
            len.next_multiple_of(4),
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("read"),
            });
        encoder.copy_buffer_to_buffer(&self.buffers[slot].buffer, offset, &tmp.buffer, 0, len);
        self.queue.submit([encoder.finish()]);
        let slice = tmp.buffer.slice(..);
        self.map_blocking(slice, wgpu::MapMode::Read)
            .map_err(GpuError::Readback)?;
        let out = slice
            .get_mapped_range()
            .map_err(|e| GpuError::Readback(format!("{e:?}")))?
            .to_vec();
        tmp.buffer.unmap();
        Ok(out)
    }
}
