//! The end of a step on the device: waiting for its readback, deciding whether it runs
//! again (colours, rows or pairs past what was recorded; a deformable frame whose iterate
//! left its cages, unless `SolverConfig::contact_cage_rebuild` is off), and unpacking the
//! results into the CPU's records.

use super::buffers::*;
use super::soft::ContactOutcome;
use super::step::{InFlight, Stage, StepShape};
use super::*;
use crate::deformable::{AttachmentSet, DeformableSet};
use crate::rigid::joint::flags;

/// A step's readback, in its sections (`StepShape::lens`).
struct StepReadback<'a> {
    /// `end_bodies`' poses, then velocities, packed.
    body_out: &'a [u8],
    /// The bodies whose result was not finite (`frozen_bodies`).
    status: &'a [u8],
    /// A word per joint, set where the fracture test broke it.
    broken: &'a [u8],
    /// The pairs the broad phase found (0 where the CPU finds the contacts).
    found: usize,
    /// The narrow phase's status: deepest penetration, points, touching pairs, islands
    /// anchored nowhere (zeros where the CPU finds the contacts).
    narrow: [u32; 4],
    coloring: ColoringOutcome,
    /// The passes' timestamps, when the step was timed.
    timestamps: &'a [u8],
}

/// What the colouring reports in its ranges' counters.
struct ColoringOutcome {
    colors: u32,
    /// Bodies the recorded rounds left uncoloured, and the rounds used.
    out_of_rounds: u32,
    rounds_used: u32,
    /// Colours before the re-greedy pass (which skipped if it had too few classes).
    top: u32,
    /// Bodies solved serially.
    serial: u32,
}

impl<'a> StepReadback<'a> {
    fn split(data: &'a [u8], shape: &StepShape) -> StepReadback<'a> {
        let [body_out_len, status_len, broken_len, total_len, narrow_len] = shape.lens;
        let (body_out, rest) = data.split_at(body_out_len);
        let (status, rest) = rest.split_at(status_len);
        let (broken, rest) = rest.split_at(broken_len);
        let (total, rest) = rest.split_at(total_len);
        let (narrow, rest) = rest.split_at(narrow_len);
        let (ranges, timestamps) = rest.split_at(RANGES_BYTES as usize);
        let r: Vec<u32> = bytemuck::pod_collect_to_vec(ranges);
        let counters = 2 * SLOTS as usize;
        let (found, narrow) = match shape.device_narrow {
            true => (
                bytemuck::pod_read_unaligned::<u32>(total) as usize,
                bytemuck::pod_read_unaligned(narrow),
            ),
            false => (0, [0; 4]),
        };
        StepReadback {
            body_out,
            status,
            broken,
            found,
            narrow,
            coloring: ColoringOutcome {
                colors: r[counters],
                out_of_rounds: r[counters + 1],
                rounds_used: r[counters + 2],
                top: r[counters + 4],
                serial: r[2 * SERIAL_SLOT as usize + 1],
            },
            timestamps,
        }
    }
}

/// How a step runs again.
enum RunAgain {
    /// With the room it had.
    AsRecorded,
    /// After its buffers are sized again (the pair list grew).
    Resized,
}

impl GpuSolver {
    /// Whether a step was submitted and not yet finished.
    pub fn in_flight(&self) -> bool {
        self.pending.is_some()
    }

    /// Waits for the step begun by [`Self::submit`] and reads the poses, velocities and
    /// joint states back into `bodies` and `joints` (and, when the device found the
    /// contacts, each pair's point count and the narrow phase's status into `pairs`, and
    /// the constraint ends of the islands into `s.adjacency`); bodies whose result was not
    /// finite are frozen and listed in `report`; with deformable bodies (`soft`), their
    /// displacements into `s.vertices` and their attachments' multipliers. `cfg`, `bodies`,
    /// `joints`, `s`, `pairs` and `soft` must be those the step was submitted with: a step
    /// whose colouring needs more dispatches than were recorded is submitted again from
    /// them.
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        &mut self,
        cfg: &SolverConfig,
        bodies: &mut BodySet,
        joints: &mut JointSet,
        s: &mut SolverData,
        pairs: &mut DevicePairs,
        report: &mut StepReport,
        mut soft: Option<(&DeformableSet, &mut AttachmentSet)>,
    ) -> Result<(), GpuError> {
        loop {
            let Some(flight) = self.pending.take() else {
                return Err(GpuError::Step("no step in flight".into()));
            };
            let InFlight {
                shape,
                staging: k,
                read_bytes,
                ts_bytes,
                stages,
                mapped,
                mut host,
            } = flight;
            let t_wait = std::time::Instant::now();
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            // The wait runs the map callback.
            mapped
                .get()
                .ok_or_else(|| GpuError::Readback("the readback map did not complete".into()))?
                .clone()
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            host.wait_ms += elapsed_ms(t_wait);
            let t_unpack = std::time::Instant::now();
            // The deformables' contact stage asks for a run again, once a frame, when an
            // iterate left its cages (the CPU runs the broad phase again mid-step; here the
            // run again's cages hold the first run's final iterate too) or its rows ran out
            // of room; the rows the first run made then start the run again in the active
            // set and the coarse operators. Rows made during a run need none: as on the
            // CPU, they shorten the coarse steps by their stiffness (coarse.wgsl `coarse_solve`).
            let outcome = match (self.soft_active, self.soft.as_mut()) {
                (true, Some(step)) => step.contact_outcome(cfg.contact_cage_rebuild)?,
                _ => Default::default(),
            };
            // At most two runs again; the second only for a run again that left its cages.
            // None where the cages are not built again (`contact_cage_rebuild` off): the
            // islands stopped at their cages, and rows past the room wait for the next
            // frame, which has more.
            let contact = &s.vertices.contact;
            let seed = match (contact.seeded, contact.cross_cages) {
                _ if !cfg.contact_cage_rebuild => false,
                (false, _) => outcome.escaped || outcome.overflow,
                (true, false) => outcome.escaped,
                (true, true) => false,
            };
            if outcome.overflow {
                self.soft.as_mut().expect("uploaded").grow_rows();
            }
            let staging = self.staging[k].buffer.clone();
            let slice = staging.slice(0..read_bytes);
            let run_again = {
                let data = slice
                    .get_mapped_range()
                    .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
                let read = StepReadback::split(&data, &shape);
                let room = outcome.overflow && cfg.contact_cage_rebuild;
                let again = self.run_again_for(&shape, &read, seed || room);
                if again.is_none() {
                    let timestamps = &read.timestamps[..ts_bytes as usize];
                    self.unpack(
                        &shape, &read, timestamps, &stages, bodies, joints, pairs, report,
                    )?;
                }
                again
            };
            staging.unmap();
            host.unpack_ms += elapsed_ms(t_unpack);
            let Some(again) = run_again else {
                self.end_step(&shape, host)?;
                if let (true, Some((set, attachments))) = (self.soft_active, soft.as_mut()) {
                    let step = self.soft.as_mut().expect("uploaded");
                    step.finish(cfg, set, bodies, &mut s.vertices, attachments)?;
                    s.vertices.contact.seeded = false;
                    s.vertices.contact.cross_cages = false;
                }
                return Ok(());
            };
            if seed && let Some((set, attachments)) = soft.as_ref() {
                seed_run_again(cfg, set, attachments, bodies, s, outcome);
            }
            self.prepare_run_again();
            let soft_in = soft
                .as_ref()
                .map(|(set, attachments)| DeformableStep { set, attachments });
            match again {
                RunAgain::Resized => {
                    let t = std::time::Instant::now();
                    self.size_and_launch(cfg, bodies, joints, s, pairs, soft_in, host, t)?;
                }
                RunAgain::AsRecorded => {
                    self.launch(cfg, bodies, joints, s, pairs, soft_in, shape, host)?;
                }
            }
        }
    }

    /// Whether the step just read runs again, and how: its pair list was too short, the
    /// deformables' contact stage asks for it (`contact`), a test asked for one
    /// (`run_again_once`), or its colouring needed more rounds, classes, colours or serial
    /// slots than were recorded. The room for the next recording is grown here.
    fn run_again_for(
        &mut self,
        shape: &StepShape,
        read: &StepReadback,
        contact: bool,
    ) -> Option<RunAgain> {
        let c = &read.coloring;
        if read.found > shape.n_pairs {
            // The broad phase found more pairs than the list holds: grow it.
            self.pair_capacity = (read.found + read.found / 4 + 64) as u32;
            Some(RunAgain::Resized)
        } else if contact || std::mem::take(&mut self.run_again_once) {
            Some(RunAgain::AsRecorded)
        } else if c.out_of_rounds > 0 && !self.scratch_step && self.rounds < JPL_ROUNDS {
            // Fewer rounds than a step may use left bodies uncoloured: run again with all
            // of them, so the colouring is the one they give.
            self.rounds = JPL_ROUNDS;
            Some(RunAgain::AsRecorded)
        } else if self.regreedy_recorded() && c.top > self.class_capacity {
            self.class_capacity = c.top;
            Some(RunAgain::AsRecorded)
        } else if c.colors > self.color_capacity || c.serial > self.serial_capacity {
            self.color_capacity = self.color_capacity.max(c.colors);
            // (0 stays 0: `next_power_of_two` of 0 is 1, a serial dispatch per sweep.)
            let serial = match c.serial {
                0 => 0,
                serial => serial.next_power_of_two(),
            };
            self.serial_capacity = self.serial_capacity.max(serial);
            Some(RunAgain::AsRecorded)
        } else {
            None
        }
    }

    /// Unpacks an accepted step into the CPU's records: the poses and velocities, the
    /// bodies frozen for a result that was not finite, the broken joints, the narrow
    /// phase's status; and keeps what the next step's recording follows: the colouring's
    /// room and rounds, and the stage times.
    #[allow(clippy::too_many_arguments)]
    fn unpack(
        &mut self,
        shape: &StepShape,
        read: &StepReadback,
        timestamps: &[u8],
        stages: &[Stage],
        bodies: &mut BodySet,
        joints: &mut JointSet,
        pairs: &mut DevicePairs,
        report: &mut StepReport,
    ) -> Result<(), GpuError> {
        // The CPU's copy is the device's again (what the CPU writes from here on is
        // recorded in `bodies.edits`). The previous velocities are not read back:
        // `end_bodies` moved each solved body's velocity at the step's start, which the
        // CPU's copy holds (no edit while a step is in flight), into them, and zeroed both
        // for a body whose result was not finite (below).
        let frozen = self.frozen_bodies(read.status, shape.n)?;
        let (poses, velocities) = read.body_out.split_at(shape.n * POSE_OUT_WORDS * 4);
        unpack_poses(poses, &mut bodies.poses);
        if !self.velocities_stay {
            end_previous_velocities(bodies, &self.flags);
            unpack_velocities(velocities, &mut bodies.velocities);
        }
        // Where they stay, the device's velocities are newer than the CPU's.
        self.velocities_newer = self.velocities_stay;
        for i in frozen {
            bodies.prev_velocities[i] = Default::default();
            bodies.frozen[i] = true;
            bodies.relayout();
            report.frozen.push(bodies.handles[i]);
        }
        // The device tested the joints at the step's final poses and multipliers
        // (`dual::fracture` on the CPU).
        let broken: &[u32] = bytemuck::cast_slice(read.broken);
        for (i, _) in broken.iter().enumerate().filter(|(_, b)| **b != 0) {
            joints.records[i].flags |= flags::BROKEN;
            report.broken.push(joints.handles[i]);
            joints.breaks += 1;
        }
        if shape.device_narrow {
            // The islands anchored nowhere had their momentum restored on the device
            // (`momentum.wgsl`), in the velocities read back.
            let [deepest, points, touching, isolated] = read.narrow;
            pairs.candidates = read.found as u32;
            pairs.max_penetration = f32::from_bits(deepest);
            pairs.points = points;
            pairs.touching = touching;
            pairs.isolated = isolated;
        }
        self.last_pairs = read.found as u32;
        let c = &read.coloring;
        self.last_serial = c.serial;
        self.last_colors = c.colors;
        self.last_rounds = self.rounds_recorded();
        self.color_peak = self.color_peak.max(c.colors);
        self.color_window += 1;
        if self.color_window == COLOR_WINDOW {
            self.color_capacity = self.color_peak.max(1);
            (self.color_peak, self.color_window) = (0, 0);
        }
        self.regreedy = c.rounds_used > 0;
        if self.scratch_step {
            // The pass was not recorded; the next step records it for these classes
            // instead of running again for more.
            self.class_capacity = self.class_capacity.max(c.top);
        }
        self.rounds = self
            .pinned_rounds
            .unwrap_or((2 * c.rounds_used).clamp(MIN_ROUNDS, JPL_ROUNDS));
        self.last_palette = shape.palette;
        self.last_timings = match (&self.timestamps, shape.timed) {
            (Some(t), true) => Self::timings_from(timestamps, t.period_ns, stages),
            // Not timed: no adapter support, or more passes than one query set.
            _ => GpuTimings::default(),
        };
        Ok(())
    }

    /// After an accepted step: its counts and sides become what the next one reads.
    fn end_step(&mut self, shape: &StepShape, host: GpuHostTimes) -> Result<(), GpuError> {
        self.counts = (shape.n, shape.n_contacts, shape.n_joints);
        // The next step warm-starts its joints from this one's row states.
        self.joint_carry = shape.n_joints > 0;
        // What this step's contacts carry is now the state the next step reads.
        self.carried_side = 1 - self.carried_side;
        self.seeds_fresh = false;
        self.last_timings.host = host;
        self.last_kernel_timings = match (&self.kernel_clock, self.kernel_timing) {
            (Some(clock), true) => clock.read(&self.device, &self.queue)?,
            _ => Vec::new(),
        };
        Ok(())
    }

    /// Before a step runs again: the deformables' run discarded, the start state to go up
    /// again (the end-of-step kernel overwrote it; where the velocities stay on the device,
    /// they come from their copy), and room for the serial slots it now records.
    fn prepare_run_again(&mut self) {
        if self.soft_active {
            self.soft.as_mut().expect("uploaded").discard();
        }
        self.state_stale = true;
        self.restore_velocities = self.velocities_newer;
        if self.slot_count < SLOTS + self.serial_capacity as u64 {
            let count = SLOTS + self.serial_capacity as u64;
            (self.slots, self.slot_group) =
                Self::make_slots(&self.device, &self.queue, &self.layouts.slot, count, 0);
            self.slot_count = count;
            self.reallocations += 1;
        }
    }

    /// The stage times of a step from its timestamps (a begin and an end tick per pass,
    /// the passes' stages in `stages`).
    fn timings_from(bytes: &[u8], period_ns: f32, stages: &[Stage]) -> GpuTimings {
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(bytes);
        let ms = |a: u64, b: u64| b.saturating_sub(a) as f64 * period_ns as f64 * 1e-6;
        let mut timings = GpuTimings {
            supported: true,
            span_ms: ms(ticks[0], ticks[ticks.len() - 1]),
            ..Default::default()
        };
        for (stage, t) in stages.iter().zip(ticks.chunks_exact(2)) {
            *match stage {
                Stage::BroadPhase => &mut timings.broad_phase_ms,
                Stage::Integration => &mut timings.integration_ms,
                Stage::WarmStart => &mut timings.warm_start_ms,
                Stage::Adjacency => &mut timings.adjacency_ms,
                Stage::Coloring => &mut timings.coloring_ms,
                Stage::Primal => &mut timings.primal_ms,
                Stage::Dual => &mut timings.dual_ms,
                Stage::Deformable => &mut timings.deformable_ms,
                Stage::DeformableContact => &mut timings.deformable_contact_ms,
            } += ms(t[0], t[1]);
        }
        timings
    }
}

/// The frame's contact set-up again for a run again of a deformable step, with the rows
/// the first run made (`outcome.made`) in, and its final iterate in the cages.
fn seed_run_again(
    cfg: &SolverConfig,
    set: &DeformableSet,
    attachments: &AttachmentSet,
    bodies: &BodySet,
    s: &mut SolverData,
    outcome: ContactOutcome,
) {
    let contact = &mut s.vertices.contact;
    contact.cross_cages = contact.seeded;
    contact.seeded = true;
    contact.seed_rows(cfg, set, bodies, &outcome.made);
    contact.reached = outcome
        .reached
        .iter()
        .zip(&set.positions)
        .map(|(d, x)| *x + *d)
        .collect();
    crate::pipeline::vbd::begin_contact_and_coarse(
        cfg,
        set,
        attachments,
        bodies,
        &s.iterate,
        &mut s.vertices,
    );
}

/// Unpacks the poses of `end_bodies`' results (`BODY_OUT`) into the CPU's records, whose
/// padding the device's records hold zero too.
fn unpack_poses(packed: &[u8], poses: &mut [PoseRecord]) {
    use rayon::prelude::*;
    poses
        .par_iter_mut()
        .zip(packed.par_chunks_exact(POSE_OUT_WORDS * 4))
        .with_min_len(4096)
        .for_each(|(pose, bytes)| {
            let w: [f32; POSE_OUT_WORDS] = bytemuck::pod_read_unaligned(bytes);
            pose.position = [w[0], w[1], w[2], 0.0];
            pose.rotation = [w[3], w[4], w[5], w[6]];
        });
}

/// Unpacks the velocities of `end_bodies`' results (`BODY_OUT`, after the poses).
fn unpack_velocities(packed: &[u8], velocities: &mut [VelocityRecord]) {
    use rayon::prelude::*;
    velocities
        .par_iter_mut()
        .zip(packed.par_chunks_exact(VELOCITY_OUT_WORDS * 4))
        .with_min_len(4096)
        .for_each(|(vel, bytes)| {
            let w: [f32; VELOCITY_OUT_WORDS] = bytemuck::pod_read_unaligned(bytes);
            vel.linear = [w[0], w[1], w[2], 0.0];
            vel.angular = [w[3], w[4], w[5], 0.0];
        });
}

impl GpuSolver {
    /// The bodies whose result the last step found not finite, in index order: the list
    /// `end_bodies` made (`list`: the count, then the bodies), or where more froze than it
    /// holds, the per-body flags that follow it (a blocking read).
    fn frozen_bodies(&mut self, list: &[u8], n: usize) -> Result<Vec<usize>, GpuError> {
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(list);
        let count = words[0] as usize;
        let mut frozen: Vec<usize> = if count <= FROZEN_ROOM {
            words[1..=count].iter().map(|&i| i as usize).collect()
        } else {
            let flags = self.read(STATUS, FROZEN_LIST_BYTES as u64, 4 * n as u64)?;
            self.last_traffic.download_bytes += 4 * n as u64;
            bytemuck::pod_collect_to_vec::<u8, u32>(&flags)
                .iter()
                .enumerate()
                .filter(|(_, f)| **f != 0)
                .map(|(i, _)| i)
                .collect()
        };
        frozen.sort_unstable();
        Ok(frozen)
    }
}

/// What `end_bodies` (integration.wgsl) does to the previous velocities of the bodies it
/// ends with a finite result, on the CPU's copy: each solved body's velocity at the step's
/// start becomes its previous one (before the device's new velocities are copied in);
/// kinematic, static and frozen bodies keep theirs. Bit for bit the device's, so the
/// previous velocities need not come back.
fn end_previous_velocities(bodies: &mut crate::rigid::BodySet, flags: &[u32]) {
    use rayon::prelude::*;
    bodies
        .prev_velocities
        .par_iter_mut()
        .zip(bodies.velocities.par_iter())
        .zip(flags.par_iter())
        .with_min_len(4096)
        .filter(|(_, f)| **f & FLAG_SOLVED != 0)
        .for_each(|((prev, v), _)| *prev = *v);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The readback's layout is written twice, in `integration.wgsl` and here.
    #[test]
    fn the_shader_packs_the_readback_as_the_host_unpacks_it() {
        let shader = super::super::pipelines::INTEGRATION_SHADER;
        assert!(shader.contains(&format!("const FROZEN_ROOM: u32 = {FROZEN_ROOM}u;")));
        for shader in [shader, super::super::pipelines::MOMENTUM_SHADER] {
            assert!(shader.contains(&format!("const POSE_OUT_WORDS: u32 = {POSE_OUT_WORDS}u;")));
            assert!(shader.contains(&format!(
                "const VELOCITY_OUT_WORDS: u32 = {VELOCITY_OUT_WORDS}u;"
            )));
        }
    }
}
