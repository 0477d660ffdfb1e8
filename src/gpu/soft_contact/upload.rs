//! The frame's contact set-up for the device: the candidates (12 B each: the pair and a
//! lower bound on its distance; the device derives each one's points, island, penalty and
//! friction, and the room each makes in its points' and bodies' row lists; those the
//! device's broad phase found are copied from its buffer, not uploaded), the carried
//! rows (32 B each: the candidate and the multipliers; the device makes the row, linearised
//! at X), X, the cages and the islands, in the buffers and offsets `surface_contact.wgsl`
//! reads. What changes only with the geometry, the bodies or the settings (the surface's
//! triangles and edges, the points' terms of a row's penalty and friction, the rigid
//! points and half-spaces) heads the read-only buffers and is written only when it
//! changed. Each candidate's row and the lists' contents are not uploaded: the frame's
//! first kernels make them from the carried rows (`contact_lists.wgsl`).
//!
//! A step run again with no iterate out of its cages (its rows ran out of room;
//! `SurfaceContact::begin_frame` kept the first run's broad phase) writes only what its
//! rows change: the rows and the state the first run's kernels wrote over. The
//! candidates, cages and islands in the read-only buffers are the first run's (at 27 soft
//! balls, about 14 of 18–28 MB a run before the lists were made on the device).

use super::*;

/// The upload's vectors, kept from frame to frame: a pile of soft bodies makes hundreds of
/// thousands of candidates, and fresh vectors that size cost their page faults every frame.
#[derive(Default)]
pub(super) struct Packing {
    /// Per candidate: its pair (kind and a in one word, b) and the bits of the lower bound
    /// on its distance at R (the `cands` region). Its points, island, penalty and friction follow
    /// on the device from the surface's primitives and the points' terms (`cand` in
    /// surface_contact.wgsl); its row is in the `cand_row` region, which the kernels write
    /// from the carried rows.
    cands: Vec<[u32; 3]>,
    /// The rigid bodies' flags as last written.
    pub(super) flags: Vec<u32>,
    /// The carried rows' records (`carried_record`).
    carried: Vec<[f32; 4]>,
    state: Vec<[f32; 4]>,
    fixed: Vec<[f32; 4]>,
    fixed_u: Vec<u32>,
    /// The length of the read-only buffers' heads (in items of `fixed` and `fixed_u`),
    /// and the heads as last written.
    head: (usize, usize),
    written_head: (Vec<[f32; 4]>, Vec<u32>),
}

/// The fewest new rows the readback has room for.
const READ_ROOM: usize = 256;

impl ContactStep {
    /// Uploads the frame's contact set-up (after `SurfaceContact::begin_frame` and the
    /// coarse operators' assembly, which marks the carried rows as held by them).
    /// `from_broad_phase`: what the device's broad phase left on it, the records of the
    /// candidates' first `SurfaceContact::device_candidates` and the points' cages (copied
    /// on the device, not uploaded).
    pub(in crate::gpu) fn upload(
        &mut self,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        contact: &SurfaceContact,
        device_name: &str,
        from_broad_phase: Option<crate::gpu::contact_broad::RunRecords>,
    ) -> Result<(), GpuError> {
        self.upload_bytes = 0;
        self.device_name = device_name.to_string();
        // The packing's vectors come back whatever the outcome.
        let mut p = std::mem::take(&mut self.packing);
        let result = self.upload_packed(&mut p, cfg, set, bodies, contact, from_broad_phase);
        self.packing = p;
        result
    }

    /// [`Self::upload`] through the packing vectors `p`: the frame's sizes, the room for
    /// its rows, the packed regions and their offsets, the buffers, the parameters.
    fn upload_packed(
        &mut self,
        p: &mut Packing,
        cfg: &SolverConfig,
        set: &DeformableSet,
        bodies: &BodySet,
        contact: &SurfaceContact,
        from_broad_phase: Option<crate::gpu::contact_broad::RunRecords>,
    ) -> Result<(), GpuError> {
        // The read-only buffers hold this broad phase's candidates, cages and islands
        // already: a run again with its first run's broad phase.
        let uploaded = self.uploaded_build.take();
        let g = &contact.geometry;
        let n_cand = contact.candidates.len();
        let flags = body_flags(bodies, contact);
        // (The bodies' flags are made with the islands and shape the bodies' lists: they
        // stand with them.)
        let again = self.on
            && uploaded == Some(contact.candidate_build)
            && self.pairs.len() == n_cand
            && p.flags == flags;
        if !again {
            self.check_numbering(g)?;
        }
        // The candidates the device found are in its memory already.
        let on_device = match (from_broad_phase, contact.device_candidates) {
            (Some(records), Some((_, n))) if !again && n <= n_cand => Some((records, n)),
            _ => None,
        };
        if !again {
            pack_candidates(p, contact, on_device.as_ref().map_or(0, |d| d.1));
        }
        pack_carried(p, contact)?;
        let moving = g
            .rigid_bodies
            .iter()
            .any(|&(b, _)| flags[b as usize] & BODY_MOVES != 0);
        let sizes = self.frame_sizes(set, bodies, contact);
        // The read-only regions' offsets are those of the first run's upload when they
        // stand.
        let mut o = match again {
            true => self.offsets,
            false => Offsets::default(),
        };
        let atomics_bytes = 4 * lay_out_atomics(&mut o, &sizes) as usize;
        // The f32 state. The times of impact and X come first and are not uploaded: the
        // CCD kernel writes every candidate's time before anything reads it, and X starts
        // at the vertices' start positions, which `contact_start` copies from the vertex
        // state (the host's X is that too: checked).
        if contact.certified != set.positions {
            return Err(GpuError::Step(
                "the deformable contact's X is not the start positions at the frame's start".into(),
            ));
        }
        pack_state(p, &mut o, contact, &sizes);
        if !again {
            // The device reads a soft point's cage reference as its start position: the
            // cages are built at the frame's start (the device builds none mid-frame).
            let soft_points = g.soft_points as usize;
            if contact.cages.reference[..soft_points] != set.positions[..soft_points] {
                return Err(GpuError::Step(
                    "the deformable contact cages were not built at the frame's start".into(),
                ));
            }
            pack_fixed(p, &mut o, cfg, set, bodies, contact, &flags);
        }
        let state_bytes = 16 * (sizes.candidates + sizes.soft_points) as usize + 16 * p.state.len();
        self.check_bindings(p, &sizes, atomics_bytes, state_bytes)?;
        self.write_buffers(
            p,
            &o,
            &sizes,
            (atomics_bytes, state_bytes),
            again,
            on_device,
        );
        p.flags = flags;
        o.row_capacity = sizes.row_capacity;
        self.offsets = o;
        self.write_params(cfg, &sizes, o);
        self.sizes = sizes;
        if !again {
            self.pairs.clone_from(&contact.candidates);
        }
        self.uploaded_build = Some(contact.candidate_build);
        self.on = true;
        self.moving = moving;
        Ok(())
    }

    /// The device numbers points and edges in 30 bits (a candidate's kind rides in its
    /// first word's top two).
    fn check_numbering(&self, g: &geometry::Geometry) -> Result<(), GpuError> {
        let numbered =
            (g.point_count() as u64) < 1 << KIND_SHIFT && (g.edges.len() as u64) < 1 << KIND_SHIFT;
        match numbered {
            true => Ok(()),
            false => Err(GpuError::Unsupported {
                adapter: self.device_name.clone(),
                reason: format!(
                    "{} contact points and {} edges: the device numbers fewer than 2^30 of each",
                    g.point_count(),
                    g.edges.len()
                ),
            }),
        }
    }

    /// The frame's counts, with the room for its rows.
    fn frame_sizes(
        &mut self,
        set: &DeformableSet,
        bodies: &BodySet,
        contact: &SurfaceContact,
    ) -> Sizes {
        let g = &contact.geometry;
        let (n_cand, n_rows) = (contact.candidates.len(), contact.rows.len());
        let capacity = self.row_capacity(n_rows, n_cand);
        Sizes {
            candidates: n_cand as u32,
            row_capacity: capacity as u32,
            read_rows: self.read_rows(n_rows, capacity) as u32,
            points: g.point_count() as u32,
            soft_points: g.soft_points,
            objects: contact.island_of.len() as u32,
            soft_bodies: set.len() as u32,
            tets: set.tets.len() as u32,
            bodies: bodies.len() as u32,
            carried_rows: n_rows as u32,
        }
    }

    /// Every buffer the frame needs within the adapter's largest storage binding.
    fn check_bindings(
        &self,
        p: &Packing,
        sizes: &Sizes,
        atomics_bytes: usize,
        state_bytes: usize,
    ) -> Result<(), GpuError> {
        let row_bytes = std::mem::size_of::<DeviceRow>() * sizes.row_capacity as usize;
        let largest = [
            row_bytes,
            atomics_bytes,
            state_bytes,
            16 * p.fixed.len(),
            4 * p.fixed_u.len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let limit = self.device.limits().max_storage_buffer_binding_size as usize;
        match largest <= limit {
            true => Ok(()),
            false => Err(GpuError::Unsupported {
                adapter: self.device_name.clone(),
                reason: format!(
                    "{} contact candidates take a {largest}-byte buffer; the adapter binds at most {limit}",
                    sizes.candidates
                ),
            }),
        }
    }

    /// The frame's writes: the rows' and atomics' room, the state, the read-only regions
    /// (unless a run again keeps them) less what the device's broad phase left on it, which
    /// is copied there; the scratch, the prefix sum's parameters, the bind groups where a
    /// buffer grew.
    fn write_buffers(
        &mut self,
        p: &mut Packing,
        o: &Offsets,
        sizes: &Sizes,
        (atomics_bytes, state_bytes): (usize, usize),
        again: bool,
        on_device: Option<(crate::gpu::contact_broad::RunRecords, usize)>,
    ) {
        // The rows are made on the device: the carried ones by `contact_list_rows`, the
        // room after them by `contact_grow`, each before any kernel reads it (the rows
        // are read below the row count or from the lists).
        let row_bytes = std::mem::size_of::<DeviceRow>() * sizes.row_capacity as usize;
        let mut grown = self.put_at(ROWS, row_bytes as u64, 0, &[]);
        grown |= self.put_at(ATOMICS, atomics_bytes as u64, 0, &[]);
        grown |= self.put_at(
            STATE,
            state_bytes as u64,
            16 * (sizes.candidates + sizes.soft_points) as u64,
            bytemuck::cast_slice(&p.state),
        );
        let soft_points = sizes.soft_points as usize;
        if !again {
            let on_device = on_device.as_ref().map(|d| d.1);
            grown |= self.put_fixed(p, o, soft_points, on_device);
        }
        if let Some((records, n)) = on_device {
            self.copy_device_records(&records, o, n, soft_points);
        }
        grown |= self.grow_scratch(sizes);
        // The prefix sum of the lists' room: over the soft points' and bodies' counts.
        let counts = sizes.soft_points + sizes.bodies;
        let scan = [counts, o.slot_offsets, 0, 0];
        self.queue
            .write_buffer(&self.scan_params, 0, bytemuck::cast_slice(&scan));
        self.upload_bytes += 16;
        if grown {
            self.group = Self::make_group(&self.device, &self.layout, &self.params, &self.buffers);
            self.scan_group = Self::make_scan_group(
                &self.device,
                &self.scan.layout,
                &self.scan_params,
                &self.buffers[ATOMICS],
                &self.scan_sums,
            );
        }
    }

    /// Room for the rows: what the last frames needed, never more than the candidates
    /// (every row's pair is one); a step that needs more is run again with more.
    fn row_capacity(&mut self, n_rows: usize, n_cand: usize) -> usize {
        (self.row_room as usize)
            .max(2 * n_rows)
            .min(n_cand)
            .min(self.row_cap_once.take().map_or(usize::MAX, |c| c as usize))
            .max(n_rows)
            .max(1)
    }

    /// The rows the readback copies: the carried rows and room for new ones, twice what a
    /// run made lately, a quarter of the carried rows (a pile pressed together makes rows
    /// frame after frame), at least `READ_ROOM`; a run that makes more reads the rest
    /// after it.
    fn read_rows(&self, n_rows: usize, capacity: usize) -> usize {
        let room = (2 * self.made_peak as usize).max(n_rows / 4).max(READ_ROOM);
        match self.read_carried_only {
            true => n_rows,
            false => n_rows + room,
        }
        .min(capacity)
    }

    /// Writes the read-only buffers (`pack_fixed`): their heads only when they changed,
    /// without the regions the device's broad phase wrote (the first `on_device`
    /// candidates and the soft points' cages), and keeps the heads as written. Returns
    /// whether a buffer grew.
    fn put_fixed(
        &mut self,
        p: &mut Packing,
        o: &Offsets,
        soft_points: usize,
        on_device: Option<usize>,
    ) -> bool {
        let (f, u) = p.head;
        let same = (
            // (By bits: as floats, 0.0 == −0.0.)
            bytemuck::cast_slice::<_, u32>(&p.written_head.0)
                == bytemuck::cast_slice::<_, u32>(&p.fixed[..f]),
            p.written_head.1[..] == p.fixed_u[..u],
        );
        let cages = 16 * o.cage_soft as usize;
        let skipped = match on_device {
            Some(_) => cages..cages + 48 * soft_points,
            None => 0..0,
        };
        let mut grown = self.put_around(
            STATIC_F,
            bytemuck::cast_slice(&p.fixed),
            16 * f,
            same.0,
            skipped,
        );
        let cands = 4 * o.cands as usize;
        let skipped = cands..cands + 12 * on_device.unwrap_or(0);
        grown |= self.put_around(
            STATIC_U,
            bytemuck::cast_slice(&p.fixed_u),
            4 * u,
            same.1,
            skipped,
        );
        p.written_head.0.clear();
        p.written_head.0.extend_from_slice(&p.fixed[..f]);
        p.written_head.1.clear();
        p.written_head.1.extend_from_slice(&p.fixed_u[..u]);
        grown
    }

    /// Copies the first `n` candidates' records and the soft points' cages from where the
    /// device's broad phase left them into their regions, after the caller's writes (a
    /// submission runs after the writes before it).
    fn copy_device_records(
        &self,
        records: &crate::gpu::contact_broad::RunRecords,
        o: &Offsets,
        n: usize,
        soft_points: usize,
    ) {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("the device broad phase's records"),
            });
        let (cands, n) = (4 * o.cands as u64, 12 * n as u64);
        if n > 0 {
            let u = &self.buffers[STATIC_U];
            encoder.copy_buffer_to_buffer(&records.pairs, 0, u, cands, n);
        }
        let (cages, bytes) = (16 * o.cage_soft as u64, 48 * soft_points as u64);
        if bytes > 0 {
            let f = &self.buffers[STATIC_F];
            encoder.copy_buffer_to_buffer(&records.cages, 0, f, cages, bytes);
        }
        self.queue.submit([encoder.finish()]);
    }

    /// Grows what the device writes before every read: the bodies' terms and the prefix
    /// sum's partial sums. Returns whether one grew.
    fn grow_scratch(&mut self, sizes: &Sizes) -> bool {
        let mut grown = false;
        let terms = 16 * BODY_TERMS * sizes.bodies as u64;
        if terms > self.buffers[BODY_TERMS_BUFFER].size() {
            self.buffers[BODY_TERMS_BUFFER] = resident(&self.device, terms.next_power_of_two());
            grown = true;
        }
        let sums = super::super::broad::PrefixSum::sums_bytes(sizes.soft_points + sizes.bodies);
        if sums > self.scan_sums.size() {
            self.scan_sums = resident(&self.device, sums.next_power_of_two());
            grown = true;
        }
        grown
    }

    /// The frame's parameters (`ContactParams`).
    fn write_params(&mut self, cfg: &SolverConfig, sizes: &Sizes, offsets: Offsets) {
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
            n_candidates: sizes.candidates,
            n_points: sizes.points,
            soft_points: sizes.soft_points,
            n_objects: sizes.objects,
            n_soft_bodies: sizes.soft_bodies,
            n_tets: sizes.tets,
            on: 1,
            offsets,
            n_bodies: sizes.bodies,
            carried_rows: sizes.carried_rows,
            ccd_groups: self.max_groups,
        };
        self.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
    }
}

/// Per rigid body: whether it moves, and whether a deformable is coupled to it.
fn body_flags(bodies: &BodySet, contact: &SurfaceContact) -> Vec<u32> {
    (0..bodies.len())
        .map(|i| {
            let moves = geometry::moves(bodies, i);
            let coupled = contact.coupled.get(i).copied().unwrap_or(false);
            (moves as u32 * BODY_MOVES) | (coupled as u32 * BODY_COUPLED)
        })
        .collect()
}

/// Each carried row goes up as its candidate and its multipliers: `contact_list_rows`
/// makes the row from them, linearised and lagged at X, gives the candidate its row and
/// puts the row in its points' lists.
fn pack_carried(p: &mut Packing, contact: &SurfaceContact) -> Result<(), GpuError> {
    p.carried.clear();
    for r in &contact.rows {
        let Ok(k) = contact.candidates.binary_search(&r.pair) else {
            return Err(GpuError::Step(format!(
                "a carried contact row's pair {:?} is not a candidate",
                r.pair
            )));
        };
        p.carried.extend(carried_record(r, k as u32));
    }
    Ok(())
}

/// The atomics' regions: status, candidate rows, the lists and their lengths, island
/// steps, the growth filter, the rows as read back. None of it is uploaded: the frame's
/// first kernels write it (contact_lists.wgsl), from the carried rows. Returns its words.
fn lay_out_atomics(o: &mut Offsets, s: &Sizes) -> u32 {
    let mut atomics = super::STATUS_WORDS as u32;
    let mut room = |n: u32| {
        atomics += n;
        atomics - n
    };
    o.cand_row = room(s.candidates);
    // The lists: a candidate makes room in those of its soft points and, once each, of
    // its moving bodies: at most four in all (it has four points, and a body's count
    // once). The device counts the room and sums it into offsets (`contact_count_slots`,
    // then scan.wgsl): the soft points' lists first, then the bodies', in one region.
    o.slot_items = room(4 * s.candidates);
    o.slot_offsets = room(s.soft_points + s.bodies + 1);
    o.bslot_offsets = o.slot_offsets + s.soft_points;
    o.slot_count = room(s.soft_points);
    o.bslot_count = room(s.bodies);
    o.alpha = room(s.objects);
    o.reach = room(s.objects);
    o.separation = room(s.bodies);
    o.earliest_t = room(s.points);
    o.earliest_k = room(s.points);
    o.hold = room(2 * s.soft_points);
    o.ccd_list = room(s.candidates);
    // The rows as the readback takes them (`RowOut`, 16 words), written at the frame's end.
    o.rows_out = room(16 * s.row_capacity);
    atomics
}

/// The f32 state after the times of impact and X (not uploaded): each soft body's
/// translation τ (current and certified), β,
/// the bodies' certified poses and the carried rows.
fn pack_state(p: &mut Packing, o: &mut Offsets, contact: &SurfaceContact, s: &Sizes) {
    let state = &mut p.state;
    state.clear();
    o.toi = 0;
    o.certified = s.candidates;
    let uploaded = o.certified + s.soft_points;
    o.tau = uploaded
        + region(
            state,
            std::iter::repeat_n([0.0; 4], 2 * s.soft_bodies as usize),
        );
    o.beta = uploaded + region(state, contact.beta.iter().map(|&b| [b, 0.0, 0.0, 0.0]));
    o.body_x = uploaded
        + region(
            state,
            contact
                .certified_pose
                .iter()
                .flat_map(|pose| [[pose.p.x, pose.p.y, pose.p.z, 0.0], pose.q.to_array()]),
        );
    o.carried = uploaded + region(state, p.carried.iter().copied());
}

/// The candidates' records after a broad phase: the pair's kind in the top two bits of its
/// first primitive (a point or an edge: fewer than 2³⁰, checked in `upload_packed`), its second,
/// and the bits of the lower bound on its distance.
/// The first `on_device` are on the device already (`gpu::contact_broad` wrote them):
/// their slots are left as zeros, which the upload skips.
fn pack_candidates(p: &mut Packing, contact: &SurfaceContact, on_device: usize) {
    p.cands.clear();
    p.cands.resize(on_device, [0; 3]);
    p.cands.extend(
        contact.candidates[on_device..]
            .iter()
            .zip(&contact.candidate_lower[on_device..])
            .map(|(pair, lower)| candidate_record(pair, *lower)),
    );
}

/// A candidate's record (`cands` in surface_contact.wgsl; `gpu::contact_broad` writes the
/// same).
pub(in crate::gpu) fn candidate_record(pair: &Pair, lower: f32) -> [u32; 3] {
    [
        kind_code(pair.kind) << KIND_SHIFT | pair.a,
        pair.b,
        lower.to_bits(),
    ]
}

/// A carried row's record (`contact_list_rows` in contact_lists.wgsl), 32 B against the
/// row's 128: its candidate `k` (its low and high 16 bits, as floats: a device may flush
/// the subnormal floats that small integers' bits are), its multiplier and decay factor,
/// its friction force, and 1.0 where the coarse operators hold it. The rest follows on the
/// device from the candidate and X (the host's row is linearised and lagged at X already;
/// the device does the same).
fn carried_record(r: &Row, k: u32) -> [[f32; 4]; 2] {
    let coarse = r.in_coarse as u32 as f32;
    [
        [(k & 0xffff) as f32, (k >> 16) as f32, r.lambda, r.gamma],
        [r.lambda_t.x, r.lambda_t.y, r.lambda_t.z, coarse],
    ]
}

/// Where a candidate's kind sits in its first word (`cand` in surface_contact.wgsl).
const KIND_SHIFT: u32 = 30;

/// The read-only regions: the candidates' records, the points' terms of a row's penalty
/// and friction, the rigid points and half-spaces, the surface's triangles and edges, the
/// cages, the islands, the deformables' ranges and the bodies' flags.
fn pack_fixed(
    p: &mut Packing,
    o: &mut Offsets,
    cfg: &SolverConfig,
    set: &DeformableSet,
    bodies: &BodySet,
    contact: &SurfaceContact,
    flags: &[u32],
) {
    let g = &contact.geometry;
    let v4 = |v: Vec3A, w: f32| [v.x, v.y, v.z, w];
    let cages = &contact.cages;
    // First the regions that change only with the geometry, the bodies' masses and
    // friction or the settings (each buffer's head, written only when it changed), then
    // the broad phase's.
    let fixed = &mut p.fixed;
    fixed.clear();
    let h2 = cfg.dt * cfg.dt;
    o.point_terms = region(
        fixed,
        (0..g.point_count() as u32).map(|q| {
            let [fs, fd] = point_friction(set, bodies, g, q);
            [point_stiffness(cfg, set, bodies, g, q, h2), fs, fd, 0.0]
        }),
    );
    o.rigid = region(
        fixed,
        g.rigid_points.iter().map(|&(_, r)| [r.x, r.y, r.z, 0.0]),
    );
    // (w: the friction of the half-space's body, static and dynamic.)
    o.planes = region(
        fixed,
        g.planes.iter().flat_map(|&(b, n, p)| {
            let [fs, fd] = bodies.masses[b as usize].friction;
            [[n.x, n.y, n.z, fs], [p.x, p.y, p.z, fd]]
        }),
    );
    p.head.0 = fixed.len();
    // A soft point's absolute and comoving cages in three vec4s (`soft_cages` in
    // contact_advance.wgsl), a moving rigid point's absolute cage in two.
    let soft = g.soft_points as usize;
    o.cage_soft =
        region(
            fixed,
            cages.absolute[..soft].iter().zip(&cages.comoving).flat_map(
                |(&absolute, &comoving)| crate::gpu::contact_broad::pack_cages(absolute, comoving),
            ),
        );
    // The cages and references of the moving bodies' points, body after body (a soft
    // point's reference is its start position, on the device already: checked in
    // `upload_packed`). A point of a body that does not move stays at its reference, and the
    // device reads neither (`rigid_cage_slot`).
    let moving = || {
        g.rigid_bodies
            .iter()
            .filter(|(b, _)| flags[*b as usize] & BODY_MOVES != 0)
            .flat_map(|(_, range)| range.clone().map(|q| q as usize))
    };
    o.cage_rigid = region(
        fixed,
        moving().flat_map(|q| {
            let (lo, hi) = cages.absolute[q];
            [v4(lo, 0.0), v4(hi, 0.0)]
        }),
    );
    o.cage_ref = region(fixed, moving().map(|q| v4(cages.reference[q], 0.0)));
    o.body_ref = region(fixed, cages.body_reference.iter().map(|&r| v4(r, 0.0)));
    let fixed_u = &mut p.fixed_u;
    fixed_u.clear();
    o.triangles = region(fixed_u, g.triangles.iter().flat_map(|(t, _)| *t));
    o.edges = region(fixed_u, g.edges.iter().flat_map(|(e, _)| *e));
    o.owner = region(fixed_u, set.owner.iter().copied());
    o.rigid_body = region(fixed_u, g.rigid_points.iter().map(|&(b, _)| b));
    o.plane_body = region(fixed_u, g.planes.iter().map(|&(b, _, _)| b));
    o.ranges = region(
        fixed_u,
        (0..set.len()).flat_map(|b| {
            let r = set.vertex_range(b);
            [r.start as u32, r.end as u32]
        }),
    );
    p.head.1 = fixed_u.len();
    o.island = region(fixed_u, contact.island_of.iter().copied());
    o.cands = region(fixed_u, p.cands.iter().flatten().copied());
    o.body_flags = region(fixed_u, flags.iter().copied());
    // Per body: its points' first cage slot less its first point (a moving rigid point p's
    // slot is this plus p, wrapping), NONE for a body that does not move.
    let mut base = vec![NONE; bodies.len()];
    let mut slot = 0u32;
    for (b, range) in &g.rigid_bodies {
        if flags[*b as usize] & BODY_MOVES != 0 {
            base[*b as usize] = slot.wrapping_sub(range.start);
            slot += range.len() as u32;
        }
    }
    o.cage_base = region(fixed_u, base);
}
