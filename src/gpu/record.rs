//! Recording a step: every pass of the step in one command buffer (the broad phase, the
//! integration, the contacts' warm start with the narrow phase, the adjacency, the
//! colouring, the iterations, the end of the step, the contact store and the islands),
//! then the copies into the readback buffer, and the submission.

use super::buffers::*;
use super::pipelines::{ISLAND_KERNELS, MOMENTUM_KERNELS};
use super::step::{Stage, StepShape, contact_slots_log2, pass_count};
use super::*;

impl GpuSolver {
    /// Records the whole step in one command buffer and submits it: the inertial targets,
    /// the colouring, the iterations, the velocities and poses, and the copies into a
    /// staging buffer. Returns the staging buffer used, the bytes to read back and the
    /// timestamp bytes.
    pub(super) fn record_and_submit(&mut self, shape: &StepShape) -> (usize, u64, Vec<Stage>) {
        let &StepShape {
            iterations,
            palette,
            timed,
            n,
            n_contacts,
            n_joints,
            n_pairs,
            device_narrow,
            solve,
            momentum,
            table,
            lens: [body_out_len, status_len, broken_len, total_len, narrow_len],
        } = shape;
        // Room for the timestamps of the most passes the step may record.
        let soft_on = self.soft_active && self.soft.is_some();
        let ts_bytes = if timed {
            16 * pass_count(iterations, soft_on) as u64
        } else {
            0
        };
        let ranges_at = (body_out_len + status_len + broken_len + total_len + narrow_len) as u64;
        let read_bytes = ranges_at + RANGES_BYTES + ts_bytes;
        let k = (self.frame % 2) as usize;
        self.frame += 1;
        if self.staging[k].capacity < read_bytes {
            self.staging[k] = Self::make_buffer(
                &self.device,
                "readback",
                read_bytes
                    .next_multiple_of(256)
                    .max(self.staging[k].capacity * 2),
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            );
            self.reallocations += 1;
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("avbd step"),
            });
        if let Some(belt) = &self.belt.buffer {
            for &(slot, offset, bytes) in self.belt.copies.iter().filter(|c| c.2 > 0) {
                encoder.copy_buffer_to_buffer(belt, offset, &self.buffers[slot].buffer, 0, bytes);
            }
        }
        if std::mem::take(&mut self.joint_carry) && n_joints > 0 {
            // The last accepted step's row states are what this one warm-starts from (a
            // run again of this step reads them again).
            let bytes = (n_joints * std::mem::size_of::<JointRowState>()) as u64;
            let (from, to) = (&self.buffers[JOINT_STATES], &self.buffers[JOINT_CARRIED]);
            encoder.copy_buffer_to_buffer(&from.buffer, 0, &to.buffer, 0, bytes);
        }
        if self.velocities_newer && n > 0 {
            // Where the velocities stay on the device, a step keeps a copy of them as it
            // begins, and a run again of it starts from that copy (the CPU's is stale).
            let bytes = (n * std::mem::size_of::<VelocityRecord>()) as u64;
            let restore = std::mem::take(&mut self.restore_velocities);
            let start = &self.buffers[VELOCITY_START].buffer;
            for (j, slot) in [VELOCITIES, PREV_VELOCITIES].into_iter().enumerate() {
                let live = &self.buffers[slot].buffer;
                match restore {
                    true => encoder.copy_buffer_to_buffer(start, j as u64 * bytes, live, 0, bytes),
                    false => encoder.copy_buffer_to_buffer(live, 0, start, j as u64 * bytes, bytes),
                }
            }
        }
        let groups = |n: usize| (n as u32).div_ceil(WORKGROUP);
        let (mut dispatches, mut indirect_dispatches) = (0u32, 0u32);
        // Each timed pass's stage, in the order of its timestamps.
        let mut stages: Vec<Stage> = Vec::new();
        let ts = self.timestamps.as_ref().filter(|_| timed);
        let mut writes = |stage: Stage| {
            let w = ts.map(|t| wgpu::ComputePassTimestampWrites {
                query_set: &t.set,
                beginning_of_pass_write_index: Some(2 * stages.len() as u32),
                end_of_pass_write_index: Some(2 * stages.len() as u32 + 1),
            });
            if w.is_some() {
                stages.push(stage);
            }
            w
        };
        let clock = self.kernel_clock.as_ref().filter(|_| self.kernel_timing);
        clock.inspect(|c| c.reset());
        // With `SolverConfig::gpu_kernel_timings`, a timestamp at a pass's start and after
        // each of its dispatches (`KernelClock`).
        let start = |pass: &mut wgpu::ComputePass| clock.inspect(|c| c.start(pass));
        let tick = |pass: &mut wgpu::ComputePass, kernel| clock.inspect(|c| c.end(pass, kernel));
        let p = &self.pipelines;
        let all = groups(n).max(1);
        let warm_group =
            &self.warm_groups.as_ref().expect("built with the buffers")[self.carried_side];
        let (cx, cy) = grid(groups(n_contacts).max(1), self.max_groups);
        let (bx, by) = grid(all, self.max_groups);
        // One compute pass per stage, so each is timed.
        if device_narrow {
            // The cells are counted into the cursors.
            encoder.clear_buffer(&self.buffers[CURSOR].buffer, 0, None);
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd broad phase"),
                timestamp_writes: writes(Stage::BroadPhase),
            });
            start(&mut pass);
            if device_narrow {
                let side = self.carried_side;
                let broad = &self.broad_groups.as_ref().expect("built with the buffers")[side];
                let scans = self.scan_groups.as_ref().expect("built with the buffers");
                let [
                    bounds,
                    count_cells,
                    seed_scan,
                    seed_fill,
                    fill,
                    count_pairs,
                    write_pairs,
                ] = &p.broad;
                let buckets = table.div_ceil(WORKGROUP);
                // A prefix sum of `len` counts with the scan group `g`.
                let scan = |g, len: u32| p.scan.steps(len).map(move |(k, x)| (k, g, x, "bp_scan"));
                let steps = [
                    (bounds, broad, all, "bp_bounds"),
                    (count_cells, broad, all, "bp_count_cells"),
                    (seed_scan, broad, buckets, "bp_seed_scan"),
                ]
                .into_iter()
                .chain(scan(&scans[0], table))
                .chain([
                    (seed_fill, broad, buckets, "bp_seed_fill"),
                    (fill, broad, all, "bp_fill"),
                    (count_pairs, broad, all, "bp_count_pairs"),
                ])
                .chain(scan(&scans[1 + side], n as u32))
                .chain([(write_pairs, broad, all, "bp_write_pairs")]);
                for (k, group, x, kernel) in steps {
                    pass.set_bind_group(0, group, &[]);
                    pass.set_pipeline(k);
                    pass.dispatch_workgroups(x, 1, 1);
                    tick(&mut pass, kernel);
                    dispatches += 1;
                }
            }
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd begin"),
                timestamp_writes: writes(Stage::Integration),
            });
            start(&mut pass);
            pass.set_bind_group(0, self.integration_group.as_ref(), &[]);
            pass.set_pipeline(&p.begin_bodies);
            pass.dispatch_workgroups(bx, by, 1);
            tick(&mut pass, "begin_bodies");
            dispatches += 1;
        }
        if device_narrow {
            // The pair counts are OR-ed in, the status is a max and a sum.
            for slot in [PAIR_COUNTS[1 - self.carried_side], NARROW_STATUS] {
                encoder.clear_buffer(&self.buffers[slot].buffer, 0, None);
            }
            // The worklist's count.
            encoder.clear_buffer(&self.buffers[NARROW_WORK].buffer, 0, Some(4));
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd contact warm start"),
                timestamp_writes: writes(Stage::WarmStart),
            });
            start(&mut pass);
            if device_narrow && n_pairs > 0 {
                // Each pair's manifold, carried or (over the worklist) found again, and
                // its points' records warm-started.
                pass.set_bind_group(0, warm_group, &[]);
                pass.set_pipeline(&p.narrow_carry);
                let (x, y) = grid(groups(n_pairs), self.max_groups);
                pass.dispatch_workgroups(x, y, 1);
                tick(&mut pass, "narrow_carry");
                pass.set_pipeline(&p.narrow_work_args);
                pass.set_bind_group(1, &self.narrow_args_group, &[]);
                pass.dispatch_workgroups(1, 1, 1);
                tick(&mut pass, "narrow_work_args");
                pass.set_pipeline(&p.narrow_collide);
                pass.dispatch_workgroups_indirect(&self.narrow_args, 0);
                tick(&mut pass, "narrow_collide");
                dispatches += 2;
                indirect_dispatches += 1;
            } else if !device_narrow && n_contacts > 0 {
                // This step's contact records from its points and the carried state.
                pass.set_bind_group(0, warm_group, &[]);
                pass.set_pipeline(&p.warm_start_contacts);
                pass.dispatch_workgroups(cx, cy, 1);
                tick(&mut pass, "warm_start_contacts");
                dispatches += 1;
            }
        }
        let soft = match self.soft_active {
            true => self.soft.as_ref(),
            false => None,
        };
        let coupling = soft.and_then(|s| s.coupling()).unwrap_or(&self.no_coupling);
        // The solver module's groups for its whole-step kernels (joint warm start, dual,
        // fracture test): colour slot 0, the deformables' coupling terms.
        let (solver_group, slot_group) = (self.solver_group.as_ref(), &self.slot_group);
        let solver_groups = |pass: &mut wgpu::ComputePass<'_>| {
            pass.set_bind_group(0, solver_group, &[]);
            pass.set_bind_group(1, slot_group, &[0]);
            pass.set_bind_group(2, coupling, &[]);
        };
        let (jx, jy) = grid(groups(n_joints).max(1), self.max_groups);
        if n_joints > 0 {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd joint warm start"),
                timestamp_writes: writes(Stage::WarmStart),
            });
            start(&mut pass);
            solver_groups(&mut pass);
            pass.set_pipeline(&p.warm_start_joints);
            pass.dispatch_workgroups(jx, jy, 1);
            tick(&mut pass, "warm_start_joints");
            dispatches += 1;
        }
        let coloring_group = &self
            .coloring_groups
            .as_ref()
            .expect("built with the buffers")[self.carried_side];
        if solve {
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("avbd adjacency"),
                    timestamp_writes: writes(Stage::Adjacency),
                });
                start(&mut pass);
                pass.set_bind_group(0, coloring_group, &[]);
                // The adjacency of this step's contacts and joints, then the colouring over it.
                let items = n_contacts >> contact_slots_log2(device_narrow);
                let (ex, ey) = grid(groups(items + n_joints).max(1), self.max_groups);
                let blocks = (n as u32).div_ceil(ADJ_SCAN_BLOCK).max(1);
                for (pipeline, (x, y), kernel) in [
                    (&p.adj_clear, (all, 1), "adj_clear"),
                    (&p.adj_count, (ex, ey), "adj_count"),
                    (&p.adj_scan_blocks, (blocks, 1), "adj_scan_blocks"),
                    (&p.adj_scan_top, (1, 1), "adj_scan_top"),
                    (&p.adj_scan_add, (blocks, 1), "adj_scan_add"),
                    (&p.adj_fill, (ex, ey), "adj_fill"),
                    (&p.adj_sort, (all, 1), "adj_sort"),
                ] {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(x, y, 1);
                    tick(&mut pass, kernel);
                    dispatches += 1;
                }
            }
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("avbd colouring"),
                    timestamp_writes: writes(Stage::Coloring),
                });
                start(&mut pass);
                pass.set_bind_group(0, coloring_group, &[]);
                pass.set_pipeline(&p.color_init);
                pass.dispatch_workgroups(all.max(groups(COUNTERS as usize)), 1, 1);
                tick(&mut pass, "color_init");
                dispatches += 1;
                // Last step's colours, less the loser of every pair of neighbours now sharing one;
                // the bodies left uncoloured make the worklist of the rounds.
                for (pipeline, kernel) in [
                    (&p.color_unseed_mark, "color_unseed_mark"),
                    (&p.color_unseed, "color_unseed"),
                ] {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(all, 1, 1);
                    tick(&mut pass, kernel);
                    dispatches += 1;
                }
                pass.set_pipeline(&p.color_work_args);
                pass.set_bind_group(1, &self.round_args_group, &[]);
                pass.dispatch_workgroups(1, 1, 1);
                tick(&mut pass, "color_work_args");
                dispatches += 1;
                pass.set_pipeline(&p.color_round);
                let round_slots = match self.scratch_step {
                    true => &self.scratch_slot_group,
                    false => &self.slot_group,
                };
                for round in 0..self.rounds_recorded() as u64 {
                    pass.set_bind_group(1, round_slots, &[(round * COLOR_SLOT) as u32]);
                    pass.dispatch_workgroups_indirect(&self.round_args, 0);
                    tick(&mut pass, "color_round");
                    indirect_dispatches += 1;
                }
                // The colour classes greedily again, highest first, after a step whose rounds
                // coloured a body.
                pass.set_pipeline(&p.color_regreedy);
                let classes = if self.regreedy_recorded() {
                    self.class_capacity
                } else {
                    0
                };
                for class in 0..classes as u64 {
                    pass.set_bind_group(1, &self.slot_group, &[(class * COLOR_SLOT) as u32]);
                    pass.dispatch_workgroups(all, 1, 1);
                    tick(&mut pass, "color_regreedy");
                    dispatches += 1;
                }
                for (pipeline, x, kernel) in [
                    (&p.color_count, all, "color_count"),
                    (&p.color_scan, 1, "color_scan"),
                    (&p.color_serial_rank, all, "color_serial_rank"),
                    (&p.color_scatter, all, "color_scatter"),
                ] {
                    pass.set_pipeline(pipeline);
                    pass.dispatch_workgroups(x, 1, 1);
                    tick(&mut pass, kernel);
                    dispatches += 1;
                }
            }
        } else {
            // Nothing to colour: the ranges read back are zeros, and the seeds go on as
            // they were to the side the next step reads.
            encoder.clear_buffer(&self.buffers[RANGES].buffer, 0, None);
            let bytes = (n * 4) as u64;
            if bytes > 0 {
                let from = &self.buffers[COLOR_SEEDS[self.carried_side]].buffer;
                let to = &self.buffers[COLOR_SEEDS[1 - self.carried_side]].buffer;
                encoder.copy_buffer_to_buffer(from, 0, to, 0, bytes);
            }
        }
        let indirect = &self.buffers[INDIRECT].buffer;
        let colors = self.color_capacity.min(palette) as u64;
        // The deformable half (`soft`), coupled through the attachments: its passes run
        // after each primal sweep and dual update of the bodies.
        let primal = match n_joints == 0 && soft.is_none() {
            true => &p.primal_contacts,
            false => &p.primal,
        };
        if let Some(soft) = soft {
            // The contact rows' lists, which the first iteration reads.
            dispatches +=
                soft.record_start(&mut encoder, || writes(Stage::DeformableContact), clock);
        }
        for _ in 0..iterations {
            if let Some(soft) = soft {
                // The deformables' contact rows on the moving bodies, for their solves.
                dispatches += soft.record_body_terms(
                    &mut encoder,
                    || writes(Stage::DeformableContact),
                    clock,
                );
            }
            if solve {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("avbd primal"),
                    timestamp_writes: writes(Stage::Primal),
                });
                start(&mut pass);
                pass.set_bind_group(0, self.solver_group.as_ref(), &[]);
                pass.set_bind_group(2, coupling, &[]);
                for c in 0..colors {
                    pass.set_bind_group(1, &self.slot_group, &[(c * COLOR_SLOT) as u32]);
                    pass.set_pipeline(primal);
                    pass.dispatch_workgroups_indirect(indirect, LANE_ARGS_AT + c * 12);
                    tick(&mut pass, "primal");
                    indirect_dispatches += 1;
                }
                pass.set_pipeline(&p.primal_serial);
                for j in 0..self.serial_capacity as u64 {
                    let slot = SERIAL_SLOT + j;
                    pass.set_bind_group(1, &self.slot_group, &[(slot * COLOR_SLOT) as u32]);
                    pass.dispatch_workgroups_indirect(indirect, SERIAL_SLOT * 12);
                    tick(&mut pass, "primal_serial");
                    indirect_dispatches += 1;
                }
            }
            if let Some(soft) = soft {
                dispatches += soft.record_sweep(&mut encoder, writes(Stage::Deformable), clock);
            }
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd dual"),
                timestamp_writes: writes(Stage::Dual),
            });
            start(&mut pass);
            solver_groups(&mut pass);
            if n_contacts > 0 {
                pass.set_pipeline(&p.dual_contacts);
                let (x, y) = grid(groups(n_contacts), self.max_groups);
                pass.dispatch_workgroups(x, y, 1);
                tick(&mut pass, "dual_contacts");
                dispatches += 1;
            }
            if n_joints > 0 {
                pass.set_pipeline(&p.dual_joints);
                let (x, y) = grid(groups(n_joints), self.max_groups);
                pass.dispatch_workgroups(x, y, 1);
                tick(&mut pass, "dual_joints");
                dispatches += 1;
            }
            drop(pass);
            if let Some(soft) = soft {
                dispatches +=
                    soft.record_dual(&mut encoder, || writes(Stage::DeformableContact), clock);
            }
        }
        if let Some(soft) = soft {
            // Bodies coupled to deformables end the frame at their certified poses.
            dispatches += soft.record_end(&mut encoder, || writes(Stage::DeformableContact), clock);
        }
        // The count of bodies whose result was not finite (`end_bodies` appends to its list).
        encoder.clear_buffer(&self.buffers[STATUS].buffer, 0, Some(4));
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd end"),
                timestamp_writes: writes(Stage::Integration),
            });
            start(&mut pass);
            if momentum {
                // The momentum projection's targets, from the start state `end_bodies`
                // overwrites.
                pass.set_bind_group(0, self.momentum_group.as_ref(), &[]);
                pass.set_pipeline(&p.momentum[0]);
                pass.dispatch_workgroups(bx, by, 1);
                tick(&mut pass, MOMENTUM_KERNELS[0]);
                dispatches += 1;
            }
            pass.set_bind_group(0, self.integration_group.as_ref(), &[]);
            pass.set_pipeline(&p.end_bodies);
            pass.dispatch_workgroups(bx, by, 1);
            tick(&mut pass, "end_bodies");
            dispatches += 1;
            if broken_len > 0 {
                // The fracture test at the step's final poses and multipliers.
                solver_groups(&mut pass);
                pass.set_pipeline(&p.fracture_joints);
                pass.dispatch_workgroups(jx, jy, 1);
                tick(&mut pass, "fracture_joints");
                dispatches += 1;
            }
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("avbd contact store"),
                timestamp_writes: writes(Stage::WarmStart),
            });
            start(&mut pass);
            if n_contacts > 0 {
                // What the contacts carry to the next step stays on the device.
                pass.set_bind_group(0, warm_group, &[]);
                pass.set_pipeline(&p.store_contact_warm);
                pass.dispatch_workgroups(cx, cy, 1);
                tick(&mut pass, "store_contact_warm");
                dispatches += 1;
            }
            if device_narrow {
                // The islands of the momentum projection: components over the touching
                // pairs and unbroken joints (`islands.wgsl`).
                let islands = &self.island_groups.as_ref().expect("built with the buffers")
                    [self.carried_side];
                let (ex, ey) = grid(groups(n_pairs + n_joints).max(1), self.max_groups);
                pass.set_bind_group(0, islands, &[]);
                let sizes = [(all, 1), (ex, ey), (all, 1), (all, 1), (all, 1)];
                for ((k, (x, y)), kernel) in p.islands.iter().zip(sizes).zip(ISLAND_KERNELS) {
                    pass.set_pipeline(k);
                    pass.dispatch_workgroups(x, y, 1);
                    tick(&mut pass, kernel);
                    dispatches += 1;
                }
            }
            if momentum {
                // The momentum of the islands anchored nowhere restored, in the velocities
                // and in what the CPU reads back (`momentum.wgsl`).
                pass.set_bind_group(0, self.momentum_group.as_ref(), &[]);
                for (k, kernel) in p.momentum[1..].iter().zip(&MOMENTUM_KERNELS[1..]) {
                    pass.set_pipeline(k);
                    pass.dispatch_workgroups(bx, by, 1);
                    tick(&mut pass, kernel);
                    dispatches += 1;
                }
            }
        }
        let staging = &self.staging[k].buffer;
        let mut copies = vec![(BODY_OUT, body_out_len as u64), (STATUS, status_len as u64)];
        copies.push((JOINT_BROKEN, broken_len as u64));
        let written = 1 - self.carried_side;
        copies.extend([
            (PAIR_START[written], total_len as u64),
            (NARROW_STATUS, narrow_len as u64),
        ]);
        let mut offset = 0u64;
        for (slot, len) in copies {
            // The pair total is the last entry of the pair starts.
            let from = if slot == PAIR_START[written] {
                4 * n as u64
            } else {
                0
            };
            if len > 0 {
                encoder.copy_buffer_to_buffer(
                    &self.buffers[slot].buffer,
                    from,
                    staging,
                    offset,
                    len,
                );
            }
            offset += len;
        }
        encoder.copy_buffer_to_buffer(
            &self.buffers[RANGES].buffer,
            0,
            staging,
            ranges_at,
            RANGES_BYTES,
        );
        if let Some(t) = ts {
            let queries = 2 * stages.len() as u32;
            encoder.resolve_query_set(&t.set, 0..queries, &t.resolve, 0);
            encoder.copy_buffer_to_buffer(
                &t.resolve,
                0,
                staging,
                ranges_at + RANGES_BYTES,
                8 * queries as u64,
            );
        }
        if let Some(soft) = soft {
            soft.record_readback(&mut encoder);
        }
        self.queue.submit([encoder.finish()]);
        self.last_traffic = GpuTraffic {
            download_bytes: read_bytes,
            dispatches: dispatches + indirect_dispatches,
            indirect_dispatches,
            submissions: self.last_traffic.submissions + 1,
            ..self.last_traffic
        };
        (k, read_bytes, stages)
    }
}
