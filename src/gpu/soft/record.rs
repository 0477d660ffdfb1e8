//! Recording the deformable half's passes into the step's command buffer: the contact
//! rows' lists at the frame's start; per iteration the vertex sweep (after the rigid
//! primal), the contact rows' terms of the moving bodies (before it), the dual updates and
//! the contact advance (after the rigid duals); the frame's end of the coupled bodies; the
//! readback copies.

use super::{ATTACHMENTS, DISP, SLOT, SoftStep, WG};
use crate::deformable::attachment::AttachmentRecord;
use crate::gpu::recording::{Pass, Recording};
use crate::gpu::step::Stage;

impl SoftStep {
    /// One iteration's vertex passes (after the rigid primal sweep): the coarse
    /// correction, then the colours (each in place, after a snapshot of the displacements
    /// when contact rows may join two vertices of a colour).
    pub(in crate::gpu) fn record_sweep(&self, rec: &mut Recording) {
        let (vx, vy) = self.grid(self.n_vertices, WG);
        let (bx, by) = self.grid(self.coarse_bodies, 1);
        let mut pass = self.begin_pass(rec, "avbd vbd sweep", Stage::Deformable);
        pass.set_bind_group(2, self.contact.group(), &[]);
        if self.coarse_on {
            let elements: u32 = self.n_elements.iter().sum();
            if elements > 0 {
                let grid = self.grid(elements, WG);
                pass.dispatch(&self.element_forces, grid, "coarse_element_forces");
            }
            pass.dispatch(&self.residual, (vx, vy), "coarse_residual");
            pass.dispatch(&self.solve, (bx, by), "coarse_solve");
            pass.dispatch(&self.prolong, (vx, vy), "coarse_prolong");
            if self.line_search {
                pass.dispatch(&self.checked_residual, (vx, vy), "coarse_residual_checked");
                pass.dispatch(&self.line_search_cut, (bx, by), "coarse_line_search");
                pass.dispatch(&self.checked_prolong, (vx, vy), "coarse_prolong_checked");
            }
        }
        // (With the line search, its last pass takes the snapshot.)
        if self.contact.on() && !(self.coarse_on && self.line_search) {
            pass.dispatch(&self.snapshot, (vx, vy), "vbd_snapshot");
        }
        for (c, &(_, count)) in self.colors.iter().enumerate() {
            pass.set_bind_group(1, &self.range_group, &[(c as u64 * SLOT) as u32]);
            match &self.lanes_sweep {
                // Its workgroups stride over the colour: one row of them.
                Some((lanes, p)) if *lanes == self.vertex_lanes => {
                    let x = count.div_ceil(WG / lanes).clamp(1, self.dispatch_groups);
                    pass.dispatch(p, (x, 1), "vbd_sweep");
                }
                _ => pass.dispatch(&self.sweep, self.grid(count, WG), "vbd_sweep"),
            }
        }
    }

    /// Before a rigid primal sweep: the contact rows' terms of the moving bodies' systems.
    pub(in crate::gpu) fn record_body_terms(&self, rec: &mut Recording) {
        if self.contact.moving() {
            let label = "avbd contact terms of the bodies";
            let mut pass = self.begin_pass(rec, label, Stage::DeformableContact);
            self.contact.record_body_terms(&mut pass);
        }
    }

    /// After the last iteration, before the integration: the contact rows as the readback
    /// takes them, and the coupled bodies' iterates at their certified poses.
    pub(in crate::gpu) fn record_end(&self, rec: &mut Recording) {
        if self.contact.on() {
            let label = "avbd contact frame end";
            let mut pass = self.begin_pass(rec, label, Stage::DeformableContact);
            self.contact.record_end(&mut pass, self.dispatch_groups);
        }
    }

    /// A compute pass with groups 0 and 1 (colour slot 0) set.
    fn begin_pass<'r>(&self, rec: &'r mut Recording, label: &str, stage: Stage) -> Pass<'r> {
        let mut pass = rec.pass(label, stage);
        self.set_groups(&mut pass);
        pass
    }

    /// Sets groups 0 and 1 (colour slot 0) of the deformable kernels.
    fn set_groups(&self, pass: &mut Pass) {
        let group = self.group.as_ref().expect("bound before recording");
        pass.set_bind_group(0, group, &[]);
        pass.set_bind_group(1, &self.range_group, &[0]);
    }

    /// Before the first iteration: the contact stage's atomics, and the carried rows in
    /// their candidates and their points' lists.
    pub(in crate::gpu) fn record_start(&self, rec: &mut Recording) {
        if !self.contact.on() {
            return;
        }
        let mut pass = self.begin_pass(rec, "avbd contact lists", Stage::DeformableContact);
        self.contact.record_start(&mut pass, self.dispatch_groups);
        self.contact.record_list_offsets(&mut pass);
        self.set_groups(&mut pass);
        self.contact.record_lists(&mut pass, self.dispatch_groups);
    }

    /// The attachments' dual update (after the rigid dual updates), then the contact
    /// rows' and the advance of the certified configuration.
    pub(in crate::gpu) fn record_dual(&self, rec: &mut Recording) {
        if self.n_attachments == 0 && !self.contact.on() {
            return;
        }
        let label = "avbd vbd dual and advance";
        let mut pass = self.begin_pass(rec, label, Stage::DeformableContact);
        pass.set_bind_group(2, self.contact.group(), &[]);
        if self.n_attachments > 0 {
            let grid = self.grid(self.n_attachments, WG);
            pass.dispatch(&self.attachment_dual, grid, "attachment_dual");
        }
        self.contact.record_advance(&mut pass, self.dispatch_groups);
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
