//! One step on the device: sizing the buffers, uploading and launching (the passes are
//! recorded in `record.rs`); `finish.rs` reads the results back.

use super::broad::PrefixSum;
use super::buffers::*;
use super::*;
use crate::pipeline::collision::primitive::MANIFOLD_POINTS;
use crate::rigid::joint::flags;

/// What one step records: sizes and options.
#[derive(Clone, Copy)]
pub(super) struct StepShape {
    pub(super) iterations: u32,
    pub(super) palette: u32,
    /// Write timestamp queries.
    pub(super) timed: bool,
    pub(super) n: usize,
    pub(super) n_contacts: usize,
    pub(super) n_joints: usize,
    /// The capacity of the device's pair list (`broad_phase.wgsl`, `contact_narrow.wgsl`);
    /// 0 when the contact points come from the CPU.
    pub(super) n_pairs: usize,
    pub(super) device_narrow: bool,
    /// Some body is solved: else the adjacency, the colouring and the primal sweeps are
    /// not recorded (nothing would be coloured or swept), and the colour ranges read back
    /// are zeros.
    pub(super) solve: bool,
    /// The momentum projection of isolated islands runs on the device (`momentum.wgsl`):
    /// when it finds the contacts, and so the islands.
    pub(super) momentum: bool,
    /// Buckets of the broad phase's hash table.
    pub(super) table: u32,
    /// Bytes read back of the bodies (poses and velocities, packed), the frozen list,
    /// the broken joints' flags, the pair total and the narrow-phase status.
    pub(super) lens: [usize; 5],
}

/// A step submitted and not yet read back.
pub(super) struct InFlight {
    pub(super) shape: StepShape,
    /// The readback staging buffer it copies into, and the bytes it copies.
    pub(super) staging: usize,
    pub(super) read_bytes: u64,
    pub(super) ts_bytes: u64,
    /// The stage of each timed pass, in the order of their timestamps.
    pub(super) stages: Vec<Stage>,
    /// Set when the staging buffer is mapped (the step and its copies are done).
    pub(super) mapped: std::sync::Arc<std::sync::OnceLock<Result<(), wgpu::BufferAsyncError>>>,
    pub(super) host: GpuHostTimes,
}

/// Timestamp queries: one pair per compute pass.
pub(super) struct Timestamps {
    pub(super) set: wgpu::QuerySet,
    pub(super) resolve: wgpu::Buffer,
    pub(super) count: u32,
    pub(super) period_ns: f32,
}

impl GpuSolver {
    /// Query set with room for `count` timestamps (grown when the iteration count grows);
    /// false when `count` exceeds what one query set holds (the step is then not timed).
    pub(super) fn ensure_timestamps(&mut self, count: u32) -> bool {
        let Some(t) = &mut self.timestamps else {
            return false;
        };
        if count > wgpu::QUERY_SET_MAX_QUERIES {
            return false;
        }
        if t.count >= count {
            return true;
        }
        t.set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("avbd passes"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        t.resolve = Self::make_buffer(
            &self.device,
            "timestamps",
            (count as u64 * 8).next_multiple_of(256),
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        )
        .buffer;
        t.count = count;
        self.reallocations += 1;
        true
    }

    /// Starts one step on the GPU, in one submission: inertial targets and initial guess,
    /// colouring, `cfg.iterations` AVBD iterations, velocities and poses, and the copy of
    /// the results into a staging buffer whose map is requested. Returns without waiting
    /// for the device; [`Self::finish`] reads the results back. The contacts come from
    /// `s.points`, or, when `pairs` is active, from the device's narrow phase over its
    /// pairs. With deformable bodies (`soft`), their iterations run in the same
    /// submission from the state the host prepared in `s.vertices` (`gpu::soft`).
    pub fn submit(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &mut SolverData,
        pairs: &DevicePairs,
        soft: Option<DeformableStep>,
    ) -> Result<(), GpuError> {
        if self.pending.is_some() {
            return Err(GpuError::Step("a step is already in flight".into()));
        }
        let n = bodies.len();
        let t_start = std::time::Instant::now();
        let host = GpuHostTimes::default();
        // The adjacency is built on the device (`adjacency.wgsl`); the CPU only gathers the
        // constraint ends for the momentum projection's islands, and only where it projects
        // them: where the device finds the contacts, it finds the islands too
        // (`islands.wgsl`), and a steady step's host work does not grow with the joints.
        if cfg.conserve_momentum && !pairs.active() {
            crate::pipeline::coloring::gather_ends(&s.points, joints, &mut s.adjacency);
        }
        // The flags follow from the layout: made again only when it changed.
        let layout = bodies.edits.layout;
        if self.flags_layout != Some(layout) || self.flags.len() != n {
            self.flags.clear();
            self.flags.extend((0..n).map(|i| {
                let solved = bodies.is_solved(i);
                let kinematic = bodies.kinds[i] == BodyKind::Kinematic && !bodies.frozen[i];
                (solved as u32 * FLAG_SOLVED) | (kinematic as u32 * FLAG_KINEMATIC)
            }));
            self.flags_layout = Some(layout);
            self.solves_bodies = self.flags.iter().any(|f| f & FLAG_SOLVED != 0);
        }
        self.velocities_stay = Self::keeps_velocities(cfg, pairs.active(), soft.is_some());
        self.kernel_timing = cfg.gpu_kernel_timings;
        if self.velocities_newer && !self.velocities_stay {
            return Err(GpuError::Step(
                "the step reads the velocities back, but the CPU's copy is stale \
                 (`pull_velocities` first)"
                    .into(),
            ));
        }
        self.last_traffic = GpuTraffic::default();
        if let Some(step) = self.soft.as_mut() {
            step.begin_step();
        }

        self.size_and_launch(cfg, bodies, joints, s, pairs, soft, host, t_start)
    }

    /// Whether a step keeps the bodies' velocities on the device, reading back the poses
    /// only: where `cfg` asks it and the host's part of the step needs no velocity (the
    /// device finds the contacts and so projects the islands' momentum; no deformable
    /// bodies, whose contact set-up starts from the bodies' initial guess).
    pub fn keeps_velocities(cfg: &SolverConfig, device_contacts: bool, deformables: bool) -> bool {
        !cfg.gpu_velocity_readback && device_contacts && !deformables
    }

    /// Sizes the buffers for the step (growing what must grow), then launches it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn size_and_launch(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &SolverData,
        pairs: &DevicePairs,
        soft: Option<DeformableStep>,
        mut host: GpuHostTimes,
        t_start: std::time::Instant,
    ) -> Result<(), GpuError> {
        let n = bodies.len();
        // A body's smallest free colour never exceeds its number of neighbours, so the
        // full palette colours exactly as one of (largest degree + 1) would.
        let palette = MAX_COLORS;
        let iterations = cfg.iterations;
        let device_narrow = pairs.active();
        // The pair list's capacity: the pairs the last step found and some room.
        if device_narrow && self.pair_capacity == 0 {
            self.pair_capacity = (4 * n as u32).max(256);
        }
        let n_pairs = if device_narrow {
            self.pair_capacity as usize
        } else {
            0
        };
        // A record slot per manifold point when the device finds the contacts (empty slots
        // skipped).
        let n_contacts = if device_narrow {
            MANIFOLD_POINTS * n_pairs
        } else {
            s.points.len()
        };
        let n_joints = joints.records.len();
        // The readback holds the poses, and the velocities unless they stay.
        let out_words = POSE_OUT_WORDS + (!self.velocities_stay as usize) * VELOCITY_OUT_WORDS;
        let body_out_len = n * out_words * 4;
        // The fracture test's flags come back only where a joint can break.
        let breakable = flags::BREAKABLE_FORCE | flags::BREAKABLE_TORQUE;
        let broken_len = match joints.records.iter().any(|r| r.flags & breakable != 0) {
            true => n_joints * 4,
            false => 0,
        };
        let table = super::broad::table_size(pairs.grid_bodies()) as usize;
        let sizes = self.buffer_sizes(cfg, bodies, joints, s, pairs, n_pairs, n_contacts, table);
        self.check_limits(&sizes, n, n_contacts)?;
        let max_groups = self.device.limits().max_compute_workgroups_per_dimension;
        if device_narrow && (table as u32).div_ceil(WORKGROUP) > max_groups {
            return Err(GpuError::Unsupported {
                adapter: self.info.name.clone(),
                reason: format!("a broad phase table of {table} buckets is one dispatch too many"),
            });
        }
        let scopes = self.push_error_scopes();
        let mut grown = false;
        for &(slot, bytes) in &sizes {
            let grew = self.ensure(slot, bytes as u64);
            // A seed buffer just made holds no colouring (zeros, or another body count's).
            self.seeds_fresh |= grew && COLOR_SEEDS.contains(&slot);
            grown |= grew;
        }
        if grown {
            self.rebuild_bind_groups();
        }
        self.pop_error_scopes(scopes)?;
        // Readback layout: bodies | frozen list | joints broken | pair total | narrow
        // status | ranges | timestamps.
        let timed = self.ensure_timestamps(2 * pass_count(iterations, soft.is_some()));
        host.prepare_ms += elapsed_ms(t_start);
        let narrow_only = |len: usize| if device_narrow { len } else { 0 };
        let shape = StepShape {
            iterations,
            palette,
            timed,
            n,
            n_contacts,
            n_joints,
            n_pairs,
            device_narrow,
            solve: self.solves_bodies,
            momentum: device_narrow && cfg.conserve_momentum,
            table: table as u32,
            lens: [
                body_out_len,
                FROZEN_LIST_BYTES,
                broken_len,
                narrow_only(4),
                narrow_only(NARROW_STATUS_BYTES as usize),
            ],
        };
        self.launch(cfg, bodies, joints, s, pairs, soft, shape, host)
    }

    /// Each buffer the step uses and the bytes it needs: the bodies' state and readback,
    /// the joints', the adjacency's and colouring's, the contact records in chunks of a
    /// binding each, the points and carried states, and where the device finds the
    /// contacts, the broad and narrow phases', the islands' and the momentum projection's.
    #[allow(clippy::too_many_arguments)]
    fn buffer_sizes(
        &self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &SolverData,
        pairs: &DevicePairs,
        n_pairs: usize,
        n_contacts: usize,
        table: usize,
    ) -> Vec<(usize, usize)> {
        let counts_len = n_pairs.div_ceil(4) * 4;
        let list_len = n_pairs * std::mem::size_of::<crate::pipeline::collision::StepPair>();
        let (n, n_joints, device_narrow) = (bodies.len(), joints.records.len(), pairs.active());
        let (vel_len, js_len) = (
            std::mem::size_of_val(bodies.velocities.as_slice()),
            std::mem::size_of_val(joints.states.as_slice()),
        );
        let it_len = n * std::mem::size_of::<IterateRecord>();
        let chunk_bytes = std::mem::size_of::<ContactRecord>() << self.contact_shift;
        let mut sizes = vec![
            (POSES, n * std::mem::size_of::<PoseRecord>()),
            (MASSES, n * std::mem::size_of::<MassRecord>()),
            (ITERATE, it_len),
            (INERTIAL, n * std::mem::size_of::<InertialRecord>()),
            (JOINTS, std::mem::size_of_val(joints.records.as_slice())),
            (JOINT_STATES, js_len),
            (JOINT_CARRIED, js_len),
            (JOINT_HEAVIEST, n_joints * 8),
            (JOINT_BROKEN, n_joints * 4),
            (ADJ_OFFSETS, (n + 1) * 4),
            // At most two items per constraint (a list for each solved body).
            (
                ADJ_ITEMS,
                2 * ((n_contacts >> contact_slots_log2(device_narrow)) + joints.records.len()) * 4,
            ),
            (COLOR_BODIES, 2 * n * 4),
            (BODY_FLAGS, n * 4),
            (COLOR_OF, n * 4),
            (COLOR_SEEDS[0], n * 4),
            (COLOR_SEEDS[1], n * 4),
            (VELOCITIES, vel_len),
            (PREV_VELOCITIES, vel_len),
            (FORCES, std::mem::size_of_val(bodies.forces.as_slice())),
            (STATUS, FROZEN_LIST_BYTES + n * 4),
            (BODY_OUT, n * (POSE_OUT_WORDS + VELOCITY_OUT_WORDS) * 4),
        ];
        if self.velocities_stay {
            sizes.push((VELOCITY_START, 2 * vel_len));
        }
        let records_len = n_contacts * std::mem::size_of::<ContactRecord>();
        for j in 0..CONTACT_CHUNKS {
            let bytes = records_len.saturating_sub(j * chunk_bytes).min(chunk_bytes);
            sizes.push((contact_chunk(j), bytes));
        }
        // 64-byte records: twice as many per binding (2 << contact_shift) as records. The
        // carried state the last step wrote is read by this one and keeps its buffers; the
        // other side is written.
        let points_len = s.points.len() * std::mem::size_of::<ContactPoint>();
        let half_len = n_contacts * std::mem::size_of::<ContactWarm>();
        let half_bytes = std::mem::size_of::<ContactPoint>() << (self.contact_shift + 1);
        let side = self.carried_side;
        let next = CARRIED[1 - side];
        for j in 0..HALF_CHUNKS {
            let part = |len: usize| len.saturating_sub(j * half_bytes).min(half_bytes);
            sizes.push((POINTS + j, part(points_len)));
            sizes.push((next + j, part(half_len)));
        }
        if device_narrow {
            // What the pairs carried, and the last step's pair list, are read by this
            // step and keep their buffers.
            let pair_state =
                std::mem::size_of::<crate::pipeline::collision::primitive::PrimitiveContact>();
            sizes.extend([
                (SHAPES, std::mem::size_of_val(pairs.shapes.as_slice())),
                (CLASSES, n * 4),
                (SPECIALS, pairs.layout.specials.len() * 4),
                (EXCLUDED, std::mem::size_of_val(pairs.excluded.as_slice())),
                (BOUNDS, n * 32),
                (BUCKET_START, (table + 1) * 4),
                (CURSOR, table * 4),
                (ENTRIES, 8 * pairs.grid_bodies() as usize * 4),
                (PAIR_START[1 - side], (n + 1) * 4),
                (PAIR_LIST[1 - side], list_len),
                (SCAN_SUMS[0], PrefixSum::sums_bytes(table as u32) as usize),
                (SCAN_SUMS[1], PrefixSum::sums_bytes(n as u32 + 1) as usize),
                (PAIR_STATE[1 - side], n_pairs * pair_state),
                (PAIR_COUNTS[1 - side], counts_len),
                (NARROW_STATUS, NARROW_STATUS_BYTES as usize),
                (NARROW_WORK, (n_pairs + 4) * 4),
                (ISLAND_PARENT, n * 4),
                (ISLAND_ANCHORED, n * 4),
                (ISLANDS, n * 4),
            ]);
            if cfg.conserve_momentum {
                sizes.extend([
                    (MOMENTUM_TARGETS, n * MOMENTUM_TARGET_BYTES),
                    (MOMENTUM_SUMS, n * MOMENTUM_SUM_BYTES),
                ]);
            }
        }
        sizes
    }

    /// Uploads the step's data, records and submits it, and requests the readback map.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &SolverData,
        pairs: &DevicePairs,
        soft: Option<DeformableStep>,
        shape: StepShape,
        mut host: GpuHostTimes,
    ) -> Result<(), GpuError> {
        let t_upload = std::time::Instant::now();
        let scopes = self.push_error_scopes();
        let launched = self
            .upload_step(cfg, bodies, joints, s, pairs, &shape)
            .and_then(|()| self.upload_soft(cfg, bodies, s, soft))
            .map(|()| self.record_and_submit(&shape));
        self.pop_error_scopes(scopes)?;
        let (k, read_bytes, stages) = launched?;
        let ts_bytes = 16 * stages.len() as u64;
        let mapped = std::sync::Arc::new(std::sync::OnceLock::new());
        let done = mapped.clone();
        self.staging[k]
            .buffer
            .slice(0..read_bytes)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = done.set(r);
            });
        if self.soft_active {
            self.soft.as_mut().expect("uploaded").request_map();
        }
        host.upload_ms += elapsed_ms(t_upload);
        self.pending = Some(InFlight {
            shape,
            staging: k,
            read_bytes,
            ts_bytes,
            stages,
            mapped,
            host,
        });
        Ok(())
    }

    /// The deformable half's upload and bind groups (`soft`), when the world has deformable
    /// bodies.
    fn upload_soft(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        s: &SolverData,
        soft: Option<DeformableStep>,
    ) -> Result<(), GpuError> {
        self.soft_active = soft.is_some();
        let Some(input) = soft else {
            return Ok(());
        };
        let step = self.soft.get_or_insert_with(|| {
            super::soft::SoftStep::new(
                &self.device,
                &self.queue,
                &self.info.name,
                &self.pipelines.scan,
            )
        });
        // What the device's broad phase left on it (candidates and cages), where it ran.
        let from_broad_phase = match (&self.contact_broad, s.vertices.contact.device_candidates) {
            (Some(finder), Some((token, _))) => finder.records_of(token),
            _ => None,
        };
        step.upload(cfg, input, &s.vertices, bodies, from_broad_phase)?;
        step.bind(
            &self.buffers[POSES].buffer,
            &self.buffers[ITERATE].buffer,
            &self.layouts.coupling,
        );
        Ok(())
    }

    /// wgpu reports validation and out-of-memory errors to these scopes (instead of the
    /// default handler, which panics); [`Self::pop_error_scopes`] turns them into typed
    /// errors. The guards are not `Send`: pushed and popped within one call.
    pub(super) fn push_error_scopes(&self) -> [wgpu::ErrorScopeGuard; 2] {
        [
            self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory),
            self.device.push_error_scope(wgpu::ErrorFilter::Validation),
        ]
    }

    pub(super) fn pop_error_scopes(
        &self,
        [oom, validation]: [wgpu::ErrorScopeGuard; 2],
    ) -> Result<(), GpuError> {
        for scope in [validation, oom] {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(GpuError::Step(e.to_string()));
            }
        }
        Ok(())
    }

    /// Uploads the step's data (tracked buffers only when changed) and the parameters.
    pub(super) fn upload_step(
        &mut self,
        cfg: &SolverConfig,
        bodies: &BodySet,
        joints: &JointSet,
        s: &SolverData,
        pairs: &DevicePairs,
        shape: &StepShape,
    ) -> Result<(), GpuError> {
        let n = bodies.len();
        // The body state is resident: only what the CPU wrote since the last readback
        // (user edits, the momentum projection, added or removed bodies) goes up.
        self.upload_body_state(bodies);
        // What follows from the bodies' layout (and the margin, for the grid's classes)
        // goes up by difference when that changed, else is not even compared.
        let layout = [
            bodies.edits.layout,
            cfg.collision_margin.to_bits() as u64,
            0,
        ];
        self.upload_keyed(MASSES, bytemuck::cast_slice(&bodies.masses), layout);
        // A colouring from scratch starts with every body uncoloured (no seed), so that
        // its rounds make the CPU's greedy colouring (whatever rounds a test pinned).
        self.scratch_step = self.seeds_fresh && self.scratch_coloring;
        if self.scratch_step && n > 0 {
            let seeds = &self.buffers[COLOR_SEEDS[self.carried_side]].buffer;
            self.queue.write_buffer(seeds, 0, &vec![0xff; n * 4]);
            self.last_traffic.upload_bytes += 4 * n as u64;
        }
        // A joint record changes when joints are added, removed or broken, or when a body
        // is removed (its joints' body indices move with the layout).
        let joint_key = joints.edit_key(bodies);
        self.upload_keyed(JOINTS, bytemuck::cast_slice(&joints.records), joint_key);
        if shape.device_narrow {
            // Colliders, classes, special bodies and jointed pairs: by difference, nothing
            // while they stay the same.
            self.upload_keyed(SHAPES, bytemuck::cast_slice(&pairs.shapes), layout);
            let classes = bytemuck::cast_slice(&pairs.layout.classes);
            self.upload_keyed(CLASSES, classes, layout);
            let specials = bytemuck::cast_slice(&pairs.layout.specials);
            self.upload_keyed(SPECIALS, specials, layout);
            let excluded = bytemuck::cast_slice(&pairs.excluded);
            self.upload_keyed(EXCLUDED, excluded, joints.edit_key(bodies));
            let layout = &pairs.layout;
            let broad = super::broad::BroadParams {
                n_bodies: n as u32,
                table_mask: shape.table - 1,
                capacity: shape.n_pairs as u32,
                n_specials: layout.specials.len() as u32,
                cell: layout.cell,
                inv_cell: 1.0 / layout.cell,
                margin: cfg.collision_margin,
                n_excluded: pairs.excluded.len() as u32,
                has_old: pairs.has_old as u32,
                pad: [0; 3],
            };
            self.queue
                .write_buffer(&self.broad_params, 0, bytemuck::bytes_of(&broad));
            for (buffer, len) in self.scan_params.iter().zip([shape.table, n as u32]) {
                self.queue
                    .write_buffer(buffer, 0, bytemuck::cast_slice(&[len, 0, 0, 0]));
            }
            self.last_traffic.upload_bytes += std::mem::size_of_val(&broad) as u64 + 2 * 16;
        }
        // The contact points, if any, go up whole (the device warm-starts them into
        // records).
        let per_chunk = 2usize << self.contact_shift;
        let whole: Vec<(usize, &[u8])> = s
            .points
            .chunks(per_chunk)
            .enumerate()
            .map(|(j, chunk)| (POINTS + j, bytemuck::cast_slice(chunk)))
            .collect();
        self.upload_whole(&whole)?;
        // The joints' row states stay on the device; the CPU's copy goes up only after
        // joints were added or removed (`PhysicsWorld` brings it up to date first).
        if self.joints_uploaded != Some(joints.edits) {
            debug_assert!(!self.joint_states_newer, "the CPU's joint states are stale");
            self.upload(JOINT_CARRIED, bytemuck::cast_slice(&joints.states));
            self.joints_uploaded = Some(joints.edits);
            self.joint_carry = false;
        }
        self.joint_states_newer |= !joints.records.is_empty();
        let heaviest = bytemuck::cast_slice(&s.joint_islands.per_joint);
        self.upload(JOINT_HEAVIEST, heaviest);
        let flags = std::mem::take(&mut self.flags);
        self.upload_keyed(BODY_FLAGS, bytemuck::cast_slice(&flags), layout);
        self.flags = flags;
        let params = Params {
            dt: cfg.dt,
            alpha: cfg.alpha,
            beta_linear: cfg.beta_linear,
            beta_angular: cfg.beta_angular,
            k_max: cfg.k_max,
            lambda_max: cfg.lambda_max,
            n_contacts: shape.n_contacts as u32,
            n_joints: joints.records.len() as u32,
            n_bodies: n as u32,
            palette: shape.palette,
            contact_shift: self.contact_shift,
            max_groups: self.max_groups,
            max_angular_speed: cfg.max_angular_speed,
            gamma: cfg.gamma,
            k_start: cfg.k_start,
            new_row_mass_ratio: cfg.new_row_mass_ratio,
            floor_mass_ratio: cfg.floor_mass_ratio,
            contact_error_scale: cfg.contact_error_scale,
            n_prev_contacts: self.counts.1 as u32,
            n_pairs: shape.n_pairs as u32,
            gravity: cfg.gravity.extend(0.0).to_array(),
            margin: cfg.collision_margin,
            color_classes: match self.regreedy_recorded() {
                true => self.class_capacity,
                false => 0,
            },
            joint_error_scale: cfg.joint_error_scale,
            contact_slots_log2: contact_slots_log2(shape.device_narrow),
        };
        self.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
        self.last_traffic.upload_bytes += params_size();
        Ok(())
    }
}

/// log2 of the contact records an adjacency item stands for (`Params::contact_slots_log2`):
/// where the device finds the contacts, a pair's [`MANIFOLD_POINTS`] slots.
pub(super) fn contact_slots_log2(device_narrow: bool) -> u32 {
    const { assert!(MANIFOLD_POINTS.is_power_of_two()) };
    if device_narrow {
        MANIFOLD_POINTS.trailing_zeros()
    } else {
        0
    }
}

/// The most compute passes a step records: broad phase, begin, contact warm start, joint
/// warm start,
/// adjacency, colouring, a primal and a dual pass per iteration, end, contact store; with
/// deformables (`soft`) also their contact terms, vertex sweep and dual update per
/// iteration and their end.
pub(super) fn pass_count(iterations: u32, soft: bool) -> u32 {
    8 + 2 * iterations + if soft { 3 * iterations + 2 } else { 0 }
}

/// The stage of [`GpuTimings`] a timed compute pass counts towards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    BroadPhase,
    Integration,
    WarmStart,
    Adjacency,
    Coloring,
    Primal,
    Dual,
    Deformable,
    DeformableContact,
}
