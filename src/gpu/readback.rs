//! On-demand readbacks of what stays on the device (colouring, contact records,
//! adjacency), for tests and tools; not part of the per-step path.

use super::buffers::*;
use super::*;
use crate::pipeline::collision::StepPair;

impl GpuSolver {
    /// Reads the last step's colouring back (blocking; for tests and tools).
    pub fn coloring(&self) -> Result<GpuColoring, GpuError> {
        let n = self.counts.0;
        let raw = self.read(COLOR_OF, 0, n as u64 * 4)?;
        let ranges = self.read(RANGES, 0, RANGES_BYTES)?;
        let r: Vec<u32> = bytemuck::pod_collect_to_vec(&ranges);
        let (start, count) = (r[2 * MAX_COLORS as usize], r[2 * MAX_COLORS as usize + 1]);
        let serial_raw = self.read(COLOR_BODIES, start as u64 * 4, count as u64 * 4)?;
        let color_of = bytemuck::pod_collect_to_vec::<u8, u32>(&raw)
            .into_iter()
            .map(|c| match c {
                c if c < MAX_COLORS => c,
                u32::MAX => NOT_SOLVED,
                _ => SERIAL_GROUP,
            })
            .collect();
        Ok(GpuColoring {
            color_of,
            colors: r[2 * SLOTS as usize],
            palette: self.last_palette,
            serial: bytemuck::pod_collect_to_vec(&serial_raw),
            out_of_rounds: r[2 * SLOTS as usize + 1],
            rounds: self.last_rounds,
            rounds_used: r[2 * SLOTS as usize + 2],
            worklist: r[2 * SLOTS as usize + 3],
        })
    }

    /// The contact records as the last step left them, in the CPU's order (read back on
    /// demand: they stay on the device from step to step). The empty slots of the device
    /// narrow phase's pairs are left out.
    pub fn contacts(&self) -> Result<Vec<ContactRecord>, GpuError> {
        let n = self.counts.1;
        let per_chunk = 1usize << self.contact_shift;
        let mut out = Vec::with_capacity(n);
        for j in 0..CONTACT_CHUNKS {
            let len = n.saturating_sub(j * per_chunk).min(per_chunk);
            if len == 0 {
                break;
            }
            let bytes = self.read(
                contact_chunk(j),
                0,
                (len * std::mem::size_of::<ContactRecord>()) as u64,
            )?;
            out.extend(
                bytemuck::pod_collect_to_vec::<u8, ContactRecord>(&bytes)
                    .into_iter()
                    .filter(|c| c.body_a != u32::MAX),
            );
        }
        Ok(out)
    }

    /// The pair list of the last step whose contacts the device found (bodies, index in
    /// the list before) and each pair's point count, read back on demand (blocking; waits
    /// for a step in flight, whose list goes to the other buffers). Empty when the last
    /// step's contacts came from the CPU.
    pub fn pair_list(&self) -> Result<(Vec<StepPair>, Vec<u8>), GpuError> {
        let side = self.carried_side;
        if self.last_pairs == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let total = self.last_pairs as u64;
        let pairs = self.read(
            PAIR_LIST[side],
            0,
            total * std::mem::size_of::<StepPair>() as u64,
        )?;
        let mut counts = self.read(PAIR_COUNTS[side], 0, total.div_ceil(4) * 4)?;
        counts.truncate(total as usize);
        Ok((bytemuck::pod_collect_to_vec(&pairs), counts))
    }

    /// Row state of joint `i` as the last step left it where the device's copy is newer
    /// than the CPU's (`None`: the CPU's, `JointSet::states`, is current). The first call
    /// after a step reads every joint's back (blocking, and waiting for a step in flight);
    /// the others read that copy.
    pub fn joint_state(&self, i: usize) -> Result<Option<JointRowState>, GpuError> {
        if !self.joint_states_newer {
            return Ok(None);
        }
        let (frame, joints) = (self.frame, self.counts.2);
        let cache = self.cached_read(&self.joint_cache, frame, JOINT_STATES, joints)?;
        Ok(cache.1.get(i).copied())
    }

    /// `cache`, holding the first `count` records of buffer `slot` as read under `key`;
    /// read again (blocking) when the key or the count changed.
    fn cached_read<'a, T: bytemuck::Pod>(
        &self,
        cache: &'a std::sync::Mutex<(u64, Vec<T>)>,
        key: u64,
        slot: usize,
        count: usize,
    ) -> Result<std::sync::MutexGuard<'a, (u64, Vec<T>)>, GpuError> {
        let mut cache = cache
            .lock()
            .map_err(|_| GpuError::Readback(format!("the {} cache was poisoned", NAMES[slot])))?;
        if cache.0 != key || cache.1.len() != count {
            let size = (count * std::mem::size_of::<T>()) as u64;
            *cache = (
                key,
                bytemuck::pod_collect_to_vec(&self.read(slot, 0, size)?),
            );
        }
        Ok(cache)
    }

    /// Brings the CPU's copy of the joints' row states up to date (before joints are added
    /// or removed, when the whole copy goes up again). Blocking.
    pub fn pull_joint_states(&mut self, states: &mut [JointRowState]) -> Result<(), GpuError> {
        if !self.joint_states_newer || states.is_empty() {
            return Ok(());
        }
        for (i, st) in states.iter_mut().enumerate() {
            if let Some(device) = self.joint_state(i)? {
                *st = device;
            }
        }
        self.joint_states_newer = false;
        Ok(())
    }

    /// Whether the device's velocities are newer than the CPU's copy (they stay on the
    /// device: `SolverConfig::gpu_velocity_readback` off), except for the bodies the CPU
    /// wrote since (`BodyEdits::velocities`).
    pub fn velocities_newer(&self) -> bool {
        self.velocities_newer
    }

    /// Body `i`'s velocity as the last step left it where the device's copy is newer than
    /// the CPU's (`None`: the CPU's is current). The first call after a step reads every
    /// body's back (blocking); the others read that copy. While a step is in flight, the
    /// velocities it started from (its copy of them: the CPU's poses are those too), read
    /// after it, so the call waits for the step.
    pub fn velocity(&self, i: usize) -> Result<Option<VelocityRecord>, GpuError> {
        if !self.velocities_newer {
            return Ok(None);
        }
        let key = 2 * self.frame + self.pending.is_some() as u64;
        let slot = match self.pending.is_some() {
            true => VELOCITY_START,
            false => VELOCITIES,
        };
        let cache = self.cached_read(&self.velocity_cache, key, slot, self.counts.0)?;
        Ok(cache.1.get(i).copied())
    }

    /// Brings the CPU's copy of the velocities and previous velocities up to date where
    /// the device's are newer, keeping those the CPU wrote since (before a step that
    /// reads them back). Blocking.
    pub fn pull_velocities(&mut self, bodies: &mut BodySet) -> Result<(), GpuError> {
        if !self.velocities_newer {
            return Ok(());
        }
        // Bodies added since the step are the CPU's (and listed as written).
        let n = self.counts.0.min(bodies.len());
        let size = (n * std::mem::size_of::<VelocityRecord>()) as u64;
        let mut written = vec![false; bodies.len()];
        for &i in &bodies.edits.velocities {
            written[i as usize] = true;
        }
        for (slot, host) in [
            (VELOCITIES, &mut bodies.velocities),
            (PREV_VELOCITIES, &mut bodies.prev_velocities),
        ] {
            let device: Vec<VelocityRecord> =
                bytemuck::pod_collect_to_vec(&self.read(slot, 0, size)?);
            for ((h, d), w) in host.iter_mut().zip(device).zip(&written) {
                if !w {
                    *h = d;
                }
            }
        }
        self.velocities_newer = false;
        Ok(())
    }

    /// Where the device alone holds the velocities, body `from`'s move to body `to` (a
    /// body removed: the last one takes its place, as in the CPU's records). A copy on the
    /// device, submitted now; nothing waits.
    pub fn move_velocity(&mut self, from: usize, to: usize) {
        if !self.velocities_newer || from >= self.counts.0 || from == to {
            return;
        }
        let size = std::mem::size_of::<VelocityRecord>() as u64;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("a removed body's velocity slot"),
            });
        // Through the start copy's buffer (a copy within one buffer is not allowed; it is
        // written again as the next step begins).
        let start = &self.buffers[VELOCITY_START].buffer;
        for (j, slot) in [VELOCITIES, PREV_VELOCITIES].into_iter().enumerate() {
            let b = &self.buffers[slot].buffer;
            let at = j as u64 * size;
            encoder.copy_buffer_to_buffer(b, from as u64 * size, start, at, size);
            encoder.copy_buffer_to_buffer(start, at, b, to as u64 * size, size);
        }
        self.queue.submit([encoder.finish()]);
        // The cached copy is the bodies' before the move.
        if let Ok(cache) = self.velocity_cache.get_mut() {
            cache.0 = u64::MAX;
        }
    }

    /// The body → constraint adjacency the last step built on the device: `(offsets,
    /// items)`, with lists for solved bodies only (read back on demand, for tests).
    pub fn adjacency(&self) -> Result<CsrLists, GpuError> {
        let n = self.counts.0;
        let offsets: Vec<u32> =
            bytemuck::pod_collect_to_vec(&self.read(ADJ_OFFSETS, 0, (n as u64 + 1) * 4)?);
        let items = self.read(ADJ_ITEMS, 0, offsets[n] as u64 * 4)?;
        Ok((offsets, bytemuck::pod_collect_to_vec(&items)))
    }
}

impl GpuSolver {
    /// Per body, its island's root as the last step's `islands.wgsl` left it (bit 31 set
    /// if anchored, `u32::MAX` if not solved); a blocking read (the step reads none back:
    /// the device restores the isolated islands' momentum itself, `momentum.wgsl`).
    pub fn islands(&self) -> Result<Vec<u32>, GpuError> {
        let n = self.counts.0 as u64;
        Ok(bytemuck::pod_collect_to_vec(&self.read(
            ISLANDS,
            0,
            4 * n,
        )?))
    }

    /// The deformable contact rows the device holds after the last step: each live one's
    /// pair, points, penalty and friction (blocking; for tests). Empty without surface
    /// contact.
    #[allow(clippy::type_complexity)]
    pub fn deformable_rows(
        &self,
    ) -> Result<
        Vec<(
            crate::pipeline::surface_contact::rows::Pair,
            [u32; 4],
            f32,
            [f32; 2],
        )>,
        GpuError,
    > {
        match (self.soft_active, self.soft.as_ref()) {
            (true, Some(step)) => step.contact_rows_for_tests(),
            _ => Ok(Vec::new()),
        }
    }

    /// The deformable contact rows' lists' offsets the last step made on the device and
    /// the host's sums of the same (blocking; for tests). Empty without surface contact.
    pub fn deformable_list_offsets(
        &self,
        contact: &crate::pipeline::surface_contact::SurfaceContact,
    ) -> Result<[Vec<u32>; 2], GpuError> {
        match (self.soft_active, self.soft.as_ref()) {
            (true, Some(step)) => step.list_offsets_for_tests(contact),
            _ => Ok([Vec::new(), Vec::new()]),
        }
    }

    /// The previous velocities the device holds after the last step (blocking; for tests:
    /// the CPU's copy derives them instead of reading them back each step).
    pub fn previous_velocities(&self) -> Result<Vec<crate::rigid::body::VelocityRecord>, GpuError> {
        let n = self.counts.0;
        let len = n * std::mem::size_of::<crate::rigid::body::VelocityRecord>();
        Ok(bytemuck::pod_collect_to_vec(&self.read(
            PREV_VELOCITIES,
            0,
            len as u64,
        )?))
    }
}
