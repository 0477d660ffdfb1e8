//! Recording the deformable half's passes into the step's command buffer: the contact
//! rows' lists at the frame's start; per iteration the vertex sweep (after the rigid
//! primal), the contact rows' terms of the moving bodies (before it), the dual updates and
//! the contact advance (after the rigid duals); the frame's end of the coupled bodies; the
//! readback copies.

use super::{ATTACHMENTS, DISP, SLOT, SoftStep, WG};
use crate::gpu::kernel_clock::KernelClock;

/// A pass's timestamp writes, asked for only when the pass is recorded.
type Writes<'a> = Option<wgpu::ComputePassTimestampWrites<'a>>;
use crate::deformable::attachment::AttachmentRecord;

impl SoftStep {
    /// One iteration's vertex passes (after the rigid primal sweep): the coarse
    /// correction, then the colours (each in place, after a snapshot of the displacements
    /// when contact rows may join two vertices of a colour). Returns the dispatches
    /// recorded.
    pub(in crate::gpu) fn record_sweep(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        timestamp_writes: Writes<'_>,
        clock: Option<&KernelClock>,
    ) -> u32 {
        let group = self.group.as_ref().expect("bound before recording");
        let (vx, vy) = self.grid(self.n_vertices, WG);
        let (bx, by) = self.grid(self.coarse_bodies, 1);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("avbd vbd sweep"),
            timestamp_writes,
        });
        pass.set_bind_group(0, group, &[]);
        pass.set_bind_group(1, &self.range_group, &[0]);
        pass.set_bind_group(2, self.contact.group(), &[]);
        clock.inspect(|c| c.start(&mut pass));
        let mut dispatches = 0;
        if self.coarse_on {
            let mut passes = vec![];
            let elements: u32 = self.n_elements.iter().sum();
            if elements > 0 {
                let grid = self.grid(elements, WG);
                passes.push((&self.element_forces, grid, "coarse_element_forces"));
            }
            passes.extend([
                (&self.residual, (vx, vy), "coarse_residual"),
                (&self.solve, (bx, by), "coarse_solve"),
            ]);
            passes.push((&self.prolong, (vx, vy), "coarse_prolong"));
            if self.line_search {
                passes.push((&self.checked_residual, (vx, vy), "coarse_residual_checked"));
                passes.push((&self.line_search_cut, (bx, by), "coarse_line_search"));
                passes.push((&self.checked_prolong, (vx, vy), "coarse_prolong_checked"));
            }
            for (pipeline, (x, y), kernel) in passes {
                pass.set_pipeline(pipeline);
                pass.dispatch_workgroups(x, y, 1);
                clock.inspect(|c| c.end(&mut pass, kernel));
                dispatches += 1;
            }
        }
        // (With the line search, its last pass takes the snapshot.)
        if self.contact.on() && !(self.coarse_on && self.line_search) {
            pass.set_pipeline(&self.snapshot);
            pass.dispatch_workgroups(vx, vy, 1);
            clock.inspect(|c| c.end(&mut pass, "vbd_snapshot"));
            dispatches += 1;
        }
        for (c, &(_, count)) in self.colors.iter().enumerate() {
            pass.set_bind_group(1, &self.range_group, &[(c as u64 * SLOT) as u32]);
            let (x, y) = match &self.lanes_sweep {
                // Its workgroups stride over the colour: one row of them.
                Some((lanes, p)) if *lanes == self.vertex_lanes => {
                    pass.set_pipeline(p);
                    (count.div_ceil(WG / lanes).clamp(1, self.dispatch_groups), 1)
                }
                _ => {
                    pass.set_pipeline(&self.sweep);
                    self.grid(count, WG)
                }
            };
            pass.dispatch_workgroups(x, y, 1);
            clock.inspect(|c| c.end(&mut pass, "vbd_sweep"));
            dispatches += 1;
        }
        dispatches
    }

    /// Before a rigid primal sweep: the contact rows' terms of the moving bodies' systems.
    pub(in crate::gpu) fn record_body_terms<'a>(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        writes: impl FnOnce() -> Writes<'a>,
        clock: Option<&KernelClock>,
    ) -> u32 {
        self.record_bodies(
            encoder,
            "avbd contact terms of the bodies",
            writes,
            clock,
            |c, pass| c.record_body_terms(pass, clock),
        )
    }

    /// After the last iteration, before the integration: the contact rows as the readback
    /// takes them, and the coupled bodies' iterates at their certified poses.
    pub(in crate::gpu) fn record_end<'a>(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        writes: impl FnOnce() -> Writes<'a>,
        clock: Option<&KernelClock>,
    ) -> u32 {
        if !self.contact.on() {
            return 0;
        }
        let mut pass = self.begin_pass(encoder, "avbd contact frame end", writes(), clock);
        self.contact
            .record_end(&mut pass, self.dispatch_groups, clock)
    }

    fn record_bodies<'a>(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        label: &str,
        writes: impl FnOnce() -> Writes<'a>,
        clock: Option<&KernelClock>,
        record: impl FnOnce(&crate::gpu::soft_contact::ContactStep, &mut wgpu::ComputePass) -> u32,
    ) -> u32 {
        if !self.contact.moving() {
            return 0;
        }
        let mut pass = self.begin_pass(encoder, label, writes(), clock);
        record(&self.contact, &mut pass)
    }

    /// A compute pass with groups 0 and 1 (colour slot 0) set.
    fn begin_pass<'e>(
        &self,
        encoder: &'e mut wgpu::CommandEncoder,
        label: &str,
        timestamp_writes: Writes<'_>,
        clock: Option<&KernelClock>,
    ) -> wgpu::ComputePass<'e> {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes,
        });
        self.set_groups(&mut pass);
        clock.inspect(|c| c.start(&mut pass));
        pass
    }

    /// Sets groups 0 and 1 (colour slot 0) of the deformable kernels.
    fn set_groups(&self, pass: &mut wgpu::ComputePass) {
        let group = self.group.as_ref().expect("bound before recording");
        pass.set_bind_group(0, group, &[]);
        pass.set_bind_group(1, &self.range_group, &[0]);
    }

    /// Before the first iteration: the contact stage's atomics, and the carried rows in
    /// their candidates and their points' lists.
    pub(in crate::gpu) fn record_start<'a>(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        writes: impl FnOnce() -> Writes<'a>,
        clock: Option<&KernelClock>,
    ) -> u32 {
        if !self.contact.on() {
            return 0;
        }
        let mut pass = self.begin_pass(encoder, "avbd contact lists", writes(), clock);
        let mut dispatches = self
            .contact
            .record_start(&mut pass, self.dispatch_groups, clock);
        dispatches += self.contact.record_list_offsets(&mut pass, clock);
        self.set_groups(&mut pass);
        dispatches
            + self
                .contact
                .record_lists(&mut pass, self.dispatch_groups, clock)
    }

    /// The attachments' dual update (after the rigid dual updates), then the contact
    /// rows' and the advance of the certified configuration.
    pub(in crate::gpu) fn record_dual<'a>(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        writes: impl FnOnce() -> Writes<'a>,
        clock: Option<&KernelClock>,
    ) -> u32 {
        if self.n_attachments == 0 && !self.contact.on() {
            return 0;
        }
        let mut pass = self.begin_pass(encoder, "avbd vbd dual and advance", writes(), clock);
        pass.set_bind_group(2, self.contact.group(), &[]);
        let mut dispatches = 0;
        if self.n_attachments > 0 {
            pass.set_pipeline(&self.attachment_dual);
            let (x, y) = self.grid(self.n_attachments, WG);
            pass.dispatch_workgroups(x, y, 1);
            clock.inspect(|c| c.end(&mut pass, "attachment_dual"));
            dispatches += 1;
        }
        dispatches
            + self
                .contact
                .record_advance(&mut pass, self.dispatch_groups, clock)
    }

    /// The 2-D grid of workgroups of `per_group` items each over `items` (rows of at most
    /// [`SoftStep::dispatch_groups`] workgroups; the kernels' `lane_index`).
    fn grid(&self, items: u32, per_group: u32) -> (u32, u32) {
        crate::gpu::grid(items.div_ceil(per_group).max(1), self.dispatch_groups)
    }

    /// Copies the displacements and the attachments into the staging buffer.
    pub(in crate::gpu) fn record_readback(&self, encoder: &mut wgpu::CommandEncoder) {
        let disp = 16 * self.n_vertices as u64;
        if disp > 0 {
            encoder.copy_buffer_to_buffer(&self.buffers[DISP], 0, &self.staging, 0, disp);
        }
        let att = self.n_attachments as u64 * std::mem::size_of::<AttachmentRecord>() as u64;
        if att > 0 {
            encoder.copy_buffer_to_buffer(&self.buffers[ATTACHMENTS], 0, &self.staging, disp, att);
        }
        self.contact
            .record_readback(encoder, &self.staging, self.contact_offset());
    }
}
