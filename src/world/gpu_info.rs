//! What the world tells about its GPU backend (adapter, memory, timings, uploads) and the
//! debug readbacks that compare the GPU's intermediate results with the CPU's.

use super::PhysicsWorld;
use crate::error::PhysicsError;

impl PhysicsWorld {
    /// The GPU adapter's name and API, when on the GPU backend.
    pub fn adapter(&self) -> Option<String> {
        self.gpu.as_ref().map(|g| g.adapter_name())
    }

    /// GPU buffer reallocations so far (zero growth once a scene is steady).
    pub fn gpu_reallocations(&self) -> Option<u64> {
        self.gpu.as_ref().map(|g| g.reallocations)
    }

    /// GPU memory per body, contact and joint and in total, when on the GPU backend.
    pub fn gpu_memory(&self) -> Option<crate::gpu::GpuMemory> {
        self.gpu.as_ref().map(|g| g.memory())
    }

    /// Per-stage GPU times of the last step (timestamp queries), when on the GPU backend.
    pub fn gpu_timings(&self) -> Option<crate::gpu::GpuTimings> {
        self.gpu.as_ref().map(|g| g.timings())
    }

    /// Per-kernel GPU times of the last step (every dispatch of the step's passes, summed
    /// per kernel with their count), with `SolverConfig::gpu_kernel_timings` on a device
    /// that writes timestamps inside passes; empty otherwise, `None` off the GPU backend.
    pub fn gpu_kernel_timings(&self) -> Option<Vec<crate::gpu::KernelTime>> {
        self.gpu.as_ref().map(|g| g.kernel_timings().to_vec())
    }

    /// Bytes uploaded to the GPU in the last step, when on the GPU backend.
    pub fn gpu_upload_bytes(&self) -> Option<u64> {
        self.gpu.as_ref().map(|g| g.upload_bytes())
    }

    /// Of [`Self::gpu_upload_bytes`], the per-body state (the GPU backend keeps poses and
    /// velocities on the device and uploads only the bodies the CPU changed).
    pub fn gpu_body_upload_bytes(&self) -> Option<u64> {
        self.gpu.as_ref().map(|g| g.body_upload_bytes())
    }

    /// Bytes up and down and dispatches of the last GPU step, when on the GPU backend.
    pub fn gpu_traffic(&self) -> Option<crate::gpu::GpuTraffic> {
        self.gpu.as_ref().map(|g| g.traffic())
    }

    /// Bytes the last step's deformable half uploaded and read back (vertex state, coarse
    /// factors; displacements), when on the GPU backend.
    pub fn gpu_deformable_traffic(&self) -> Option<(u64, u64)> {
        self.gpu.as_ref().map(|g| g.deformable_traffic())
    }

    /// Bytes the last step's deformable contact broad phases on the device wrote to it and
    /// read back (`SolverConfig::gpu_contact_broad_phase`), when on the GPU backend.
    pub fn gpu_contact_broad_phase_traffic(&self) -> Option<(u64, u64)> {
        self.gpu.as_ref().map(|g| g.contact_broad_phase_traffic())
    }

    /// Bodies solved in the serial fallback group of the GPU colouring in the last step.
    pub fn gpu_serial_bodies(&self) -> Option<usize> {
        self.gpu.as_ref().map(|g| g.serial_bodies())
    }

    /// Test hook: split GPU contacts in chunks of `1 << shift` records and cap dual
    /// dispatches at `max_groups` workgroups per dimension (as if the scene were huge).
    #[doc(hidden)]
    pub fn gpu_limit_for_tests(&mut self, shift: u32, max_groups: u32) {
        if let Some(g) = self.gpu.as_mut() {
            g.limit_contact_chunk(shift);
            g.limit_dispatch(max_groups);
        }
    }

    /// Test hook: cap the GPU deformable half's dispatches over vertices, attachments,
    /// coarse bodies, candidates and rows at `max_groups` workgroups per dimension (its
    /// kernels then run in 2-D grids, as in a huge scene).
    #[doc(hidden)]
    pub fn gpu_limit_deformable_dispatch_for_tests(&mut self, max_groups: u32) {
        if let Some(g) = self.gpu.as_mut() {
            g.limit_deformable_dispatch(max_groups);
        }
    }

    /// Test hook: pin the GPU colouring's rounds recorded per step (`None`: as many as the
    /// last step needed); a step they leave with uncoloured bodies still runs again with
    /// all of them.
    #[doc(hidden)]
    pub fn gpu_rounds_for_tests(&mut self, rounds: Option<u32>) {
        if let Some(g) = self.gpu.as_mut() {
            g.pin_rounds(rounds);
        }
    }

    /// Test hook: `false` seeds the GPU colouring of a step with no colouring yet (the
    /// first) with colour 0 for every body instead of colouring it from scratch in the
    /// CPU's order, so that the rounds of a seeded colouring run from the first step.
    #[doc(hidden)]
    pub fn gpu_colour_from_scratch_for_tests(&mut self, on: bool) {
        if let Some(g) = self.gpu.as_mut() {
            g.colour_from_scratch(on);
        }
    }

    /// Test hook: room for at most `room` deformable contact rows (or those carried in) in
    /// the next GPU step's first run; a step that makes more runs again with more room.
    #[doc(hidden)]
    pub fn gpu_cap_contact_rows_once_for_tests(&mut self, room: u32) {
        if let Some(g) = self.gpu.as_mut() {
            g.cap_contact_rows_once(room);
        }
    }

    /// Test hook: the GPU step's readback copies only the deformable contact rows carried
    /// into the frame; the rows it makes are read after it (the path of a step that makes
    /// more rows than the readback has room for).
    #[doc(hidden)]
    pub fn gpu_read_carried_rows_only_for_tests(&mut self, on: bool) {
        if let Some(g) = self.gpu.as_mut() {
            g.read_carried_rows_only(on);
        }
    }

    /// Test hook: on the GPU backend, the next step runs again once (as one whose colours
    /// outgrew what was recorded does).
    #[doc(hidden)]
    pub fn gpu_run_again_once_for_tests(&mut self) {
        if let Some(g) = self.gpu.as_mut() {
            g.run_again_once();
        }
    }

    /// Test hook: on the GPU backend, the device's deformable contact broad phase bounds
    /// distances with the CPU's margins, so that a device that computes like the CPU
    /// (lavapipe) finds the host's candidates bit for bit.
    #[doc(hidden)]
    pub fn gpu_contact_broad_phase_with_cpu_margins_for_tests(&mut self, on: bool) {
        if let Some(g) = self.gpu.as_mut() {
            g.contact_broad_phase_with_cpu_margins(on);
        }
    }

    /// Test hook: on the GPU backend, the device's deformable contact broad phase fails
    /// every time, as a device error would make it.
    #[doc(hidden)]
    pub fn gpu_contact_broad_phase_fails_for_tests(&mut self, on: bool) {
        if let Some(g) = self.gpu.as_mut() {
            g.contact_broad_phase_fails(on);
        }
    }

    /// Test hook: on the GPU backend, find the contact points on the CPU (and upload them)
    /// even where the device could find them, to compare the two paths.
    #[doc(hidden)]
    pub fn gpu_narrow_phase_on_host_for_tests(&mut self, on: bool) {
        self.collision.device.host_only = on;
    }

    /// Test hook: the islands the device found in the last step (per body, its island's
    /// root, bit 31 set if anchored; `u32::MAX` if not solved), when it found the contacts
    /// (a blocking read: the step reads them back only where some island is anchored
    /// nowhere).
    #[doc(hidden)]
    pub fn gpu_islands_for_tests(&self) -> Option<Result<Vec<u32>, PhysicsError>> {
        let device = &self.collision.device;
        let gpu = self.gpu.as_ref().filter(|_| device.active())?;
        Some(gpu.islands().map_err(|e| PhysicsError::Gpu(e.to_string())))
    }

    /// Test hook: each contact row of the deformables' active set as the last step left it
    /// (its pair's kind, whether it has a rigid point; points, penalty μ, static and dynamic
    /// friction), beside a new row of its pair as the host makes one (`new_row`). On the GPU
    /// backend the rows are those the device holds (a blocking read): it makes them from the
    /// candidates' pairs, and the readback leaves out what the pair gives.
    #[doc(hidden)]
    #[allow(clippy::type_complexity)]
    pub fn deformable_rows_for_tests(
        &self,
    ) -> Result<Vec<(String, bool, [([u32; 4], f32, [f32; 2]); 2])>, PhysicsError> {
        let sc = &self.solver.vertices.contact;
        let rows = match &self.gpu {
            Some(g) => g
                .deformable_rows()
                .map_err(|e| PhysicsError::Gpu(e.to_string()))?,
            None => sc
                .rows
                .iter()
                .map(|r| (r.pair, r.points, r.mu, r.friction))
                .collect(),
        };
        let soft = sc.geometry.soft_points;
        Ok(rows
            .into_iter()
            .map(|(pair, points, mu, friction)| {
                let host = crate::pipeline::surface_contact::frame::new_row(
                    &self.config,
                    &self.deformables,
                    &self.bodies,
                    sc,
                    pair,
                );
                (
                    format!("{:?}", pair.kind),
                    points.iter().any(|&p| p != u32::MAX && p >= soft),
                    [
                        (points, mu, friction),
                        (host.points, host.mu, host.friction),
                    ],
                )
            })
            .collect())
    }

    /// Test hook: the deformable contact rows' lists' offsets (per soft point, then per
    /// rigid body, then the total) that the last step's start made on the device from its
    /// candidates (`contact_count_slots` and a prefix sum), and the host's sums of each
    /// one's candidates, with the number of soft points (`None` on the CPU backend; a
    /// blocking readback).
    #[doc(hidden)]
    #[allow(clippy::type_complexity)]
    pub fn gpu_deformable_list_offsets_for_tests(
        &self,
    ) -> Option<Result<(usize, [Vec<u32>; 2]), PhysicsError>> {
        let contact = &self.solver.vertices.contact;
        let soft = contact.geometry.soft_points as usize;
        self.gpu.as_ref().map(|g| {
            g.deformable_list_offsets(contact)
                .map(|offsets| (soft, offsets))
                .map_err(|e| PhysicsError::Gpu(e.to_string()))
        })
    }

    /// Test hook: how many of those islands the device counted as anchored nowhere (whose
    /// momentum its projection restores, `shaders/momentum.wgsl`).
    #[doc(hidden)]
    pub fn gpu_isolated_islands_for_tests(&self) -> Option<u32> {
        let device = &self.collision.device;
        (self.gpu.is_some() && device.active()).then_some(device.isolated)
    }

    /// The previous velocities of every body (linear, angular) on the device and in the
    /// CPU's copy, which derives them from the step's start rather than reading them back
    /// (`None` on the CPU backend; a blocking readback).
    #[doc(hidden)]
    pub fn gpu_previous_velocities_for_tests(
        &self,
    ) -> Option<Result<[Vec<[f32; 8]>; 2], PhysicsError>> {
        let host = self
            .bodies
            .prev_velocities
            .iter()
            .map(|v| bytemuck::cast(*v));
        let host: Vec<[f32; 8]> = host.collect();
        self.gpu.as_ref().map(|g| {
            let device = g
                .previous_velocities()
                .map_err(|e| PhysicsError::Gpu(e.to_string()))?;
            Ok([device.into_iter().map(bytemuck::cast).collect(), host])
        })
    }

    /// Candidate pairs of the last step's broad phase (pairs of colliders whose bounds,
    /// loosened by the margin, overlap).
    pub fn candidate_pairs(&self) -> usize {
        self.collision.pair_count()
    }

    /// The last step's GPU colouring (a blocking readback), when on the GPU backend.
    pub fn gpu_coloring(&self) -> Option<Result<crate::gpu::GpuColoring, PhysicsError>> {
        self.gpu
            .as_ref()
            .map(|g| g.coloring().map_err(|e| PhysicsError::Gpu(e.to_string())))
    }

    /// The body → constraint adjacency (CSR `offsets`, `items`) the GPU built in the last
    /// step, with its items as the CPU's (`(record << 1) | is_joint`); `None` on the CPU
    /// backend. Where the device finds the contacts its lists hold pairs, and each pair is
    /// listed here as its records that hold a point.
    pub fn gpu_adjacency(&self) -> Option<Result<crate::gpu::CsrLists, PhysicsError>> {
        let gpu = self.gpu.as_ref()?;
        let (offsets, items) = match gpu.adjacency() {
            Ok(lists) => lists,
            Err(e) => return Some(Err(PhysicsError::Gpu(e.to_string()))),
        };
        if !self.collision.device.active() {
            return Some(Ok((offsets, items)));
        }
        let points = self.step_points();
        let mut records = vec![0u32];
        let mut expanded = Vec::with_capacity(4 * items.len());
        for body in 0..offsets.len() - 1 {
            for &item in &items[offsets[body] as usize..offsets[body + 1] as usize] {
                if item & 1 == 1 {
                    expanded.push(item);
                    continue;
                }
                let pair = (item >> 1) as usize;
                for r in 4 * pair..(4 * pair + 4).min(points.len()) {
                    let p = &points[r];
                    if p.body_a == body as u32 || p.body_b == body as u32 {
                        expanded.push((r as u32) << 1);
                    }
                }
            }
            records.push(expanded.len() as u32);
        }
        Some(Ok((records, expanded)))
    }

    /// The adjacency the CPU backend builds (`(offsets, items)`, every body) from the last
    /// step's contacts and the joints unbroken now, e.g. to check the GPU's.
    pub fn cpu_adjacency(&self) -> crate::gpu::CsrLists {
        let mut adj = crate::pipeline::coloring::Adjacency::default();
        crate::pipeline::coloring::build_adjacency(
            self.bodies.len(),
            &self.step_points(),
            &self.joints,
            &mut adj,
            &mut Vec::new(),
        );
        (adj.offsets, adj.items)
    }

    /// Solver indices of the two bodies of every contact of the last step and every
    /// unbroken joint (`u32::MAX` for the world), e.g. to check a colouring.
    pub fn constraint_pairs(&self) -> Vec<(u32, u32)> {
        let points = self.step_points();
        let contacts = points
            .iter()
            .filter(|c| c.body_a != u32::MAX)
            .map(|c| (c.body_a, c.body_b));
        let joints = self
            .joints
            .records
            .iter()
            .filter(|j| !j.broken())
            .map(|j| (j.body_a, j.body_b));
        contacts.chain(joints).collect()
    }

    /// The last step's contact points by record index, bodies only: the CPU's points, or,
    /// when the device found them, four slots per pair, the empty ones `(u32::MAX,
    /// u32::MAX)` (built from the pairs' point counts that came back).
    fn step_points(&self) -> Vec<crate::rigid::contact::ContactPoint> {
        use crate::pipeline::collision::primitive::MANIFOLD_POINTS;
        use crate::rigid::contact::ContactPoint;
        let (pairs, counts) = match &self.gpu {
            Some(gpu) if self.collision.device.active() => gpu.pair_list().unwrap_or_default(),
            _ => return self.solver.points.clone(),
        };
        let mut points = vec![
            ContactPoint {
                body_a: u32::MAX,
                body_b: u32::MAX,
                ..Default::default()
            };
            MANIFOLD_POINTS * pairs.len()
        ];
        for (i, (p, &count)) in pairs.iter().zip(&counts).enumerate() {
            let first = MANIFOLD_POINTS * i;
            for slot in &mut points[first..first + count as usize] {
                (slot.body_a, slot.body_b) = (p.a, p.b);
            }
        }
        points
    }
}
