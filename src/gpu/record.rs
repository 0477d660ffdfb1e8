//! Recording a step: every pass of the step in one command buffer, then the copies into
//! the readback buffer, and the submission. [`GpuSolver::record_and_submit`] reads as the
//! step runs on the device, a method per stage below it.

use super::buffers::*;
use super::pipelines::{ISLAND_KERNELS, MOMENTUM_KERNELS};
use super::recording::{Pass, Recording};
use super::soft::SoftStep;
use super::step::{Stage, StepShape, contact_slots_log2, pass_count};
use super::*;

impl GpuSolver {
    /// Records the whole step in one command buffer and submits it. Returns the staging
    /// buffer used, the bytes to read back and the stages of the timed passes.
    pub(super) fn record_and_submit(&mut self, shape: &StepShape) -> (usize, u64, Vec<Stage>) {
        let soft_on = self.soft_active && self.soft.is_some();
        let (k, read_bytes) = self.staging_for(shape, soft_on);
        let carry_joints = std::mem::take(&mut self.joint_carry) && shape.n_joints > 0;
        let restore_velocities = std::mem::take(&mut self.restore_velocities);
        let stage_clock = self.timestamps.as_ref().filter(|_| shape.timed);
        let kernel_clock = self.kernel_clock.as_ref().filter(|_| self.kernel_timing);
        let mut rec = Recording::new(
            &self.device,
            "avbd step",
            stage_clock.map(|t| &t.set),
            kernel_clock,
        );
        // The deformable half, coupled through the attachments: its passes run after each
        // primal sweep and dual update of the bodies.
        let soft = self.soft.as_ref().filter(|_| self.soft_active);
        self.record_step_inputs(&mut rec.encoder, shape, carry_joints, restore_velocities);
        self.record_broad_phase(&mut rec, shape);
        self.record_begin(&mut rec, shape);
        self.record_contact_warm_start(&mut rec, shape);
        self.record_joint_warm_start(&mut rec, shape);
        match shape.solve {
            true => {
                self.record_adjacency(&mut rec, shape);
                self.record_coloring(&mut rec, shape);
            }
            false => self.carry_colors(&mut rec.encoder, shape.n),
        }
        if let Some(soft) = soft {
            // The contact rows' lists, which the first iteration reads.
            soft.record_start(&mut rec);
        }
        for _ in 0..shape.iterations {
            if let Some(soft) = soft {
                // The deformables' contact rows on the moving bodies, for their solves.
                soft.record_body_terms(&mut rec);
            }
            if shape.solve {
                self.record_primal(&mut rec, shape);
            }
            if let Some(soft) = soft {
                soft.record_sweep(&mut rec);
            }
            self.record_dual(&mut rec, shape);
            if let Some(soft) = soft {
                soft.record_dual(&mut rec);
            }
        }
        if let Some(soft) = soft {
            // Bodies coupled to deformables end the frame at their certified poses.
            soft.record_end(&mut rec);
        }
        self.record_end(&mut rec, shape);
        self.record_contact_store(&mut rec, shape);
        self.record_readback(&mut rec, shape, k, stage_clock);
        if let Some(soft) = soft {
            soft.record_readback(&mut rec.encoder);
        }
        let Recording {
            encoder,
            stages,
            dispatches,
            ..
        } = rec;
        self.queue.submit([encoder.finish()]);
        self.last_traffic = GpuTraffic {
            download_bytes: read_bytes,
            dispatches: dispatches.direct + dispatches.indirect,
            indirect_dispatches: dispatches.indirect,
            submissions: self.last_traffic.submissions + 1,
            ..self.last_traffic
        };
        (k, read_bytes, stages)
    }

    /// The staging buffer this step reads back through (the two alternate), grown to the
    /// bytes it reads: the bodies' records, status, broken joints, pair total and narrow
    /// phase status, the colour ranges and the timestamps. Returns it and the bytes.
    fn staging_for(&mut self, shape: &StepShape, soft_on: bool) -> (usize, u64) {
        let ts_bytes = match shape.timed {
            // Room for the timestamps of the most passes the step may record.
            true => 16 * pass_count(shape.iterations, soft_on) as u64,
            false => 0,
        };
        let read_bytes = ranges_at(shape) + RANGES_BYTES + ts_bytes;
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
        (k, read_bytes)
    }

    /// The copies before the first pass: what went up through the belt into place, the
    /// joints' carried row states, and the velocities' copy at the step's start.
    fn record_step_inputs(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        shape: &StepShape,
        carry_joints: bool,
        restore_velocities: bool,
    ) {
        if let Some(belt) = &self.belt.buffer {
            for &(slot, offset, bytes) in self.belt.copies.iter().filter(|c| c.2 > 0) {
                encoder.copy_buffer_to_buffer(belt, offset, &self.buffers[slot].buffer, 0, bytes);
            }
        }
        if carry_joints {
            // The last accepted step's row states are what this one warm-starts from (a
            // run again of this step reads them again).
            let bytes = (shape.n_joints * std::mem::size_of::<JointRowState>()) as u64;
            let (from, to) = (&self.buffers[JOINT_STATES], &self.buffers[JOINT_CARRIED]);
            encoder.copy_buffer_to_buffer(&from.buffer, 0, &to.buffer, 0, bytes);
        }
        if self.velocities_newer && shape.n > 0 {
            // Where the velocities stay on the device, a step keeps a copy of them as it
            // begins, and a run again of it starts from that copy (the CPU's is stale).
            let bytes = (shape.n * std::mem::size_of::<VelocityRecord>()) as u64;
            let start = &self.buffers[VELOCITY_START].buffer;
            for (j, slot) in [VELOCITIES, PREV_VELOCITIES].into_iter().enumerate() {
                let live = &self.buffers[slot].buffer;
                match restore_velocities {
                    true => encoder.copy_buffer_to_buffer(start, j as u64 * bytes, live, 0, bytes),
                    false => encoder.copy_buffer_to_buffer(live, 0, start, j as u64 * bytes, bytes),
                }
            }
        }
    }

    /// The device's broad phase (where it finds the contacts): the bodies' cells counted
    /// and sorted into a hash grid, then each body's pairs written in its own range.
    fn record_broad_phase(&self, rec: &mut Recording, shape: &StepShape) {
        if shape.device_narrow {
            // The cells are counted into the cursors.
            rec.encoder
                .clear_buffer(&self.buffers[CURSOR].buffer, 0, None);
        }
        let mut pass = rec.pass("avbd broad phase", Stage::BroadPhase);
        if !shape.device_narrow {
            return;
        }
        let (p, side, n) = (&self.pipelines, self.carried_side, shape.n as u32);
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
        let (all, buckets) = (all_groups(shape), shape.table.div_ceil(WORKGROUP));
        // A prefix sum of `len` counts with the scan group `g`.
        let scan = |g, len: u32| p.scan.steps(len).map(move |(k, x)| (k, g, x, "bp_scan"));
        let steps = [
            (bounds, broad, all, "bp_bounds"),
            (count_cells, broad, all, "bp_count_cells"),
            (seed_scan, broad, buckets, "bp_seed_scan"),
        ]
        .into_iter()
        .chain(scan(&scans[0], shape.table))
        .chain([
            (seed_fill, broad, buckets, "bp_seed_fill"),
            (fill, broad, all, "bp_fill"),
            (count_pairs, broad, all, "bp_count_pairs"),
        ])
        .chain(scan(&scans[1 + side], n))
        .chain([(write_pairs, broad, all, "bp_write_pairs")]);
        for (k, group, x, kernel) in steps {
            pass.set_bind_group(0, group, &[]);
            pass.dispatch(k, (x, 1), kernel);
        }
    }

    /// The inertial targets and the adaptive initial guess (`integration.wgsl`).
    fn record_begin(&self, rec: &mut Recording, shape: &StepShape) {
        let mut pass = rec.pass("avbd begin", Stage::Integration);
        pass.set_bind_group(0, self.integration_group.as_ref(), &[]);
        pass.dispatch(
            &self.pipelines.begin_bodies,
            self.body_grid(shape),
            "begin_bodies",
        );
    }

    /// This step's contact records, warm-started: each pair's manifold carried or (over
    /// the worklist) found again where the device finds the contacts, else from the points
    /// that went up and the carried state.
    fn record_contact_warm_start(&self, rec: &mut Recording, shape: &StepShape) {
        if shape.device_narrow {
            // The pair counts are OR-ed in, the status is a max and a sum.
            for slot in [PAIR_COUNTS[1 - self.carried_side], NARROW_STATUS] {
                rec.encoder
                    .clear_buffer(&self.buffers[slot].buffer, 0, None);
            }
            // The worklist's count.
            rec.encoder
                .clear_buffer(&self.buffers[NARROW_WORK].buffer, 0, Some(4));
        }
        let mut pass = rec.pass("avbd contact warm start", Stage::WarmStart);
        let p = &self.pipelines;
        pass.set_bind_group(0, self.warm_group(), &[]);
        if shape.device_narrow && shape.n_pairs > 0 {
            pass.dispatch(
                &p.narrow_carry,
                self.grid_over(shape.n_pairs),
                "narrow_carry",
            );
            pass.set_bind_group(1, &self.narrow_args_group, &[]);
            pass.dispatch(&p.narrow_work_args, (1, 1), "narrow_work_args");
            pass.dispatch_indirect(&p.narrow_collide, &self.narrow_args, 0, "narrow_collide");
        } else if !shape.device_narrow && shape.n_contacts > 0 {
            let grid = self.grid_over(shape.n_contacts);
            pass.dispatch(&p.warm_start_contacts, grid, "warm_start_contacts");
        }
    }

    /// The joints' rows warm-started from their carried states.
    fn record_joint_warm_start(&self, rec: &mut Recording, shape: &StepShape) {
        if shape.n_joints == 0 {
            return;
        }
        let mut pass = rec.pass("avbd joint warm start", Stage::WarmStart);
        self.set_solver_groups(&mut pass);
        let grid = self.grid_over(shape.n_joints);
        pass.dispatch(&self.pipelines.warm_start_joints, grid, "warm_start_joints");
    }

    /// Each body's list of its contacts (or touching pairs) and joints, sorted
    /// (`adjacency.wgsl`): what the colouring and the primal sweep read.
    fn record_adjacency(&self, rec: &mut Recording, shape: &StepShape) {
        let mut pass = rec.pass("avbd adjacency", Stage::Adjacency);
        pass.set_bind_group(0, self.coloring_group(), &[]);
        let p = &self.pipelines;
        let all = (all_groups(shape), 1);
        let items = shape.n_contacts >> contact_slots_log2(shape.device_narrow);
        let edges = self.grid_over(items + shape.n_joints);
        let blocks = ((shape.n as u32).div_ceil(ADJ_SCAN_BLOCK).max(1), 1);
        for (pipeline, grid, kernel) in [
            (&p.adj_clear, all, "adj_clear"),
            (&p.adj_count, edges, "adj_count"),
            (&p.adj_scan_blocks, blocks, "adj_scan_blocks"),
            (&p.adj_scan_top, (1, 1), "adj_scan_top"),
            (&p.adj_scan_add, blocks, "adj_scan_add"),
            (&p.adj_fill, edges, "adj_fill"),
            (&p.adj_sort, all, "adj_sort"),
        ] {
            pass.dispatch(pipeline, grid, kernel);
        }
    }

    /// The colouring (`coloring.wgsl`): last step's colours, less the loser of every pair
    /// of neighbours now sharing one; rounds over the worklist of the bodies left
    /// uncoloured; the classes greedily again after a step whose rounds coloured a body;
    /// the colour ranges and each colour's bodies in order.
    fn record_coloring(&self, rec: &mut Recording, shape: &StepShape) {
        let mut pass = rec.pass("avbd colouring", Stage::Coloring);
        pass.set_bind_group(0, self.coloring_group(), &[]);
        let p = &self.pipelines;
        let all = (all_groups(shape), 1);
        let init = (all.0.max((COUNTERS as u32).div_ceil(WORKGROUP)), 1);
        pass.dispatch(&p.color_init, init, "color_init");
        pass.dispatch(&p.color_unseed_mark, all, "color_unseed_mark");
        pass.dispatch(&p.color_unseed, all, "color_unseed");
        pass.set_bind_group(1, &self.round_args_group, &[]);
        pass.dispatch(&p.color_work_args, (1, 1), "color_work_args");
        let round_slots = match self.scratch_step {
            true => &self.scratch_slot_group,
            false => &self.slot_group,
        };
        for round in 0..self.rounds_recorded() as u64 {
            pass.set_bind_group(1, round_slots, &[(round * COLOR_SLOT) as u32]);
            pass.dispatch_indirect(&p.color_round, &self.round_args, 0, "color_round");
        }
        let classes = match self.regreedy_recorded() {
            true => self.class_capacity as u64,
            false => 0,
        };
        for class in 0..classes {
            pass.set_bind_group(1, &self.slot_group, &[(class * COLOR_SLOT) as u32]);
            pass.dispatch(&p.color_regreedy, all, "color_regreedy");
        }
        for (pipeline, grid, kernel) in [
            (&p.color_count, all, "color_count"),
            (&p.color_scan, (1, 1), "color_scan"),
            (&p.color_serial_rank, all, "color_serial_rank"),
            (&p.color_scatter, all, "color_scatter"),
        ] {
            pass.dispatch(pipeline, grid, kernel);
        }
    }

    /// A step that solves no body colours nothing: the ranges read back are zeros, and
    /// the seeds go on as they were to the side the next step reads.
    fn carry_colors(&self, encoder: &mut wgpu::CommandEncoder, n: usize) {
        encoder.clear_buffer(&self.buffers[RANGES].buffer, 0, None);
        let bytes = (n * 4) as u64;
        if bytes > 0 {
            let from = &self.buffers[COLOR_SEEDS[self.carried_side]].buffer;
            let to = &self.buffers[COLOR_SEEDS[1 - self.carried_side]].buffer;
            encoder.copy_buffer_to_buffer(from, 0, to, 0, bytes);
        }
    }

    /// One primal sweep: each colour's bodies in place, over the lanes the colouring
    /// wrote, then the serial ones.
    fn record_primal(&self, rec: &mut Recording, shape: &StepShape) {
        let mut pass = rec.pass("avbd primal", Stage::Primal);
        let p = &self.pipelines;
        let primal = match shape.n_joints == 0 && !self.soft_on() {
            true => &p.primal_contacts,
            false => &p.primal,
        };
        pass.set_bind_group(0, self.solver_group.as_ref(), &[]);
        pass.set_bind_group(2, self.coupling_group(), &[]);
        let indirect = &self.buffers[INDIRECT].buffer;
        for c in 0..self.color_capacity.min(shape.palette) as u64 {
            pass.set_bind_group(1, &self.slot_group, &[(c * COLOR_SLOT) as u32]);
            pass.dispatch_indirect(primal, indirect, LANE_ARGS_AT + c * 12, "primal");
        }
        for j in 0..self.serial_capacity as u64 {
            let slot = SERIAL_SLOT + j;
            pass.set_bind_group(1, &self.slot_group, &[(slot * COLOR_SLOT) as u32]);
            let at = SERIAL_SLOT * 12;
            pass.dispatch_indirect(&p.primal_serial, indirect, at, "primal_serial");
        }
    }

    /// One dual update of the contacts and the joints.
    fn record_dual(&self, rec: &mut Recording, shape: &StepShape) {
        let mut pass = rec.pass("avbd dual", Stage::Dual);
        self.set_solver_groups(&mut pass);
        let p = &self.pipelines;
        if shape.n_contacts > 0 {
            let grid = self.grid_over(shape.n_contacts);
            pass.dispatch(&p.dual_contacts, grid, "dual_contacts");
        }
        if shape.n_joints > 0 {
            pass.dispatch(
                &p.dual_joints,
                self.grid_over(shape.n_joints),
                "dual_joints",
            );
        }
    }

    /// The step's end: the momentum projection's targets (from the start state it
    /// overwrites), the velocities and poses, the fracture test at the final poses and
    /// multipliers.
    fn record_end(&self, rec: &mut Recording, shape: &StepShape) {
        // The count of bodies whose result was not finite (`end_bodies` appends to its list).
        rec.encoder
            .clear_buffer(&self.buffers[STATUS].buffer, 0, Some(4));
        let mut pass = rec.pass("avbd end", Stage::Integration);
        let (p, bodies) = (&self.pipelines, self.body_grid(shape));
        if shape.momentum {
            pass.set_bind_group(0, self.momentum_group.as_ref(), &[]);
            pass.dispatch(&p.momentum[0], bodies, MOMENTUM_KERNELS[0]);
        }
        pass.set_bind_group(0, self.integration_group.as_ref(), &[]);
        pass.dispatch(&p.end_bodies, bodies, "end_bodies");
        let [_, _, broken_len, ..] = shape.lens;
        if broken_len > 0 {
            self.set_solver_groups(&mut pass);
            let grid = self.grid_over(shape.n_joints);
            pass.dispatch(&p.fracture_joints, grid, "fracture_joints");
        }
    }

    /// What the contacts carry to the next step, stored on the device; where the device
    /// finds the contacts, the islands (components over the touching pairs and unbroken
    /// joints, `islands.wgsl`); the momentum of the islands anchored nowhere restored, in
    /// the velocities and in what the CPU reads back (`momentum.wgsl`).
    fn record_contact_store(&self, rec: &mut Recording, shape: &StepShape) {
        let mut pass = rec.pass("avbd contact store", Stage::WarmStart);
        let p = &self.pipelines;
        if shape.n_contacts > 0 {
            pass.set_bind_group(0, self.warm_group(), &[]);
            let grid = self.grid_over(shape.n_contacts);
            pass.dispatch(&p.store_contact_warm, grid, "store_contact_warm");
        }
        if shape.device_narrow {
            let islands =
                &self.island_groups.as_ref().expect("built with the buffers")[self.carried_side];
            let all = (all_groups(shape), 1);
            let edges = self.grid_over(shape.n_pairs + shape.n_joints);
            pass.set_bind_group(0, islands, &[]);
            let grids = [all, edges, all, all, all];
            for ((k, grid), kernel) in p.islands.iter().zip(grids).zip(ISLAND_KERNELS) {
                pass.dispatch(k, grid, kernel);
            }
        }
        if shape.momentum {
            pass.set_bind_group(0, self.momentum_group.as_ref(), &[]);
            let bodies = self.body_grid(shape);
            for (k, kernel) in p.momentum[1..].iter().zip(&MOMENTUM_KERNELS[1..]) {
                pass.dispatch(k, bodies, kernel);
            }
        }
    }

    /// The copies into staging buffer `k`: the bodies' records, the status, the broken
    /// joints, the pair total, the narrow phase's status, the colour ranges, and the
    /// passes' timestamps when the step is timed.
    fn record_readback(
        &self,
        rec: &mut Recording,
        shape: &StepShape,
        k: usize,
        stage_clock: Option<&Timestamps>,
    ) {
        let [body_out_len, status_len, broken_len, total_len, narrow_len] = shape.lens;
        let (encoder, staging) = (&mut rec.encoder, &self.staging[k].buffer);
        let written = 1 - self.carried_side;
        let copies = [
            (BODY_OUT, 0, body_out_len),
            (STATUS, 0, status_len),
            (JOINT_BROKEN, 0, broken_len),
            // The pair total is the last entry of the pair starts.
            (PAIR_START[written], 4 * shape.n as u64, total_len),
            (NARROW_STATUS, 0, narrow_len),
        ];
        let mut offset = 0u64;
        for (slot, from, len) in copies {
            let len = len as u64;
            if len > 0 {
                let buffer = &self.buffers[slot].buffer;
                encoder.copy_buffer_to_buffer(buffer, from, staging, offset, len);
            }
            offset += len;
        }
        let ranges_at = ranges_at(shape);
        let ranges = &self.buffers[RANGES].buffer;
        encoder.copy_buffer_to_buffer(ranges, 0, staging, ranges_at, RANGES_BYTES);
        if let Some(t) = stage_clock {
            let queries = 2 * rec.stages.len() as u32;
            encoder.resolve_query_set(&t.set, 0..queries, &t.resolve, 0);
            let at = ranges_at + RANGES_BYTES;
            encoder.copy_buffer_to_buffer(&t.resolve, 0, staging, at, 8 * queries as u64);
        }
    }

    /// Sets the groups of the solver module's whole-step kernels (joint warm start, dual,
    /// fracture test): colour slot 0, the deformables' coupling terms.
    fn set_solver_groups(&self, pass: &mut Pass) {
        pass.set_bind_group(0, self.solver_group.as_ref(), &[]);
        pass.set_bind_group(1, &self.slot_group, &[0]);
        pass.set_bind_group(2, self.coupling_group(), &[]);
    }

    /// Whether the deformable half runs in this step.
    fn soft_on(&self) -> bool {
        self.soft_active && self.soft.is_some()
    }

    /// The deformables' coupling terms on the bodies, or none.
    fn coupling_group(&self) -> &wgpu::BindGroup {
        self.soft
            .as_ref()
            .filter(|_| self.soft_active)
            .and_then(SoftStep::coupling)
            .unwrap_or(&self.no_coupling)
    }

    /// The warm start's group on the side this step reads.
    fn warm_group(&self) -> &wgpu::BindGroup {
        &self.warm_groups.as_ref().expect("built with the buffers")[self.carried_side]
    }

    /// The adjacency's and colouring's group on the side this step reads.
    fn coloring_group(&self) -> &wgpu::BindGroup {
        &self
            .coloring_groups
            .as_ref()
            .expect("built with the buffers")[self.carried_side]
    }

    /// The 2-D grid of workgroups over `items`, one lane each.
    fn grid_over(&self, items: usize) -> (u32, u32) {
        grid((items as u32).div_ceil(WORKGROUP).max(1), self.max_groups)
    }

    /// The 2-D grid of workgroups over the bodies.
    fn body_grid(&self, shape: &StepShape) -> (u32, u32) {
        grid(all_groups(shape), self.max_groups)
    }
}

/// Workgroups over the bodies, in one row.
fn all_groups(shape: &StepShape) -> u32 {
    (shape.n as u32).div_ceil(WORKGROUP).max(1)
}

/// Where the colour ranges begin in the staging buffer: after the bodies' records, the
/// status, the broken joints, the pair total and the narrow phase's status.
fn ranges_at(shape: &StepShape) -> u64 {
    shape.lens.iter().sum::<usize>() as u64
}
