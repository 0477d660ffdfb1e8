//! A step's command buffer as it is recorded: one compute pass per stage, timed as that
//! stage when the step is timed (`GpuTimings`, a pair of timestamps per pass), each
//! dispatch timed as its kernel with `SolverConfig::gpu_kernel_timings` ([`KernelClock`]),
//! and every dispatch counted, so that no stage keeps its own tally.

use std::ops::{Deref, DerefMut};

use super::kernel_clock::KernelClock;
use super::step::Stage;

/// The dispatches recorded: direct, and indirect (arguments the device wrote).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Dispatches {
    pub(super) direct: u32,
    pub(super) indirect: u32,
}

/// A command buffer being recorded, its passes' stages and its dispatch counts.
pub(super) struct Recording<'a> {
    pub(super) encoder: wgpu::CommandEncoder,
    /// The stages' query set, when the step is timed.
    stage_clock: Option<&'a wgpu::QuerySet>,
    /// Each timed pass's stage, in the order of its timestamps.
    pub(super) stages: Vec<Stage>,
    kernel_clock: Option<&'a KernelClock>,
    pub(super) dispatches: Dispatches,
}

impl<'a> Recording<'a> {
    /// A new command buffer: passes timed by `stage_clock`, kernels by `kernel_clock`
    /// (whose last recording's marks are dropped).
    pub(super) fn new(
        device: &wgpu::Device,
        label: &str,
        stage_clock: Option<&'a wgpu::QuerySet>,
        kernel_clock: Option<&'a KernelClock>,
    ) -> Recording<'a> {
        kernel_clock.inspect(|c| c.reset());
        Recording {
            encoder: device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) }),
            stage_clock,
            stages: Vec::new(),
            kernel_clock,
            dispatches: Dispatches::default(),
        }
    }

    /// Begins a compute pass, timed as `stage`.
    pub(super) fn pass(&mut self, label: &str, stage: Stage) -> Pass<'_> {
        let timestamp_writes = self.stage_clock.map(|query_set| {
            let first = 2 * self.stages.len() as u32;
            self.stages.push(stage);
            wgpu::ComputePassTimestampWrites {
                query_set,
                beginning_of_pass_write_index: Some(first),
                end_of_pass_write_index: Some(first + 1),
            }
        });
        let mut pass = self
            .encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(label),
                timestamp_writes,
            });
        self.kernel_clock.inspect(|c| c.start(&mut pass));
        Pass {
            pass,
            clock: self.kernel_clock,
            dispatches: &mut self.dispatches,
        }
    }
}

/// An open compute pass of a [`Recording`]: the pass itself (bind groups are set through
/// it), and dispatches that are timed and counted.
pub(super) struct Pass<'r> {
    pass: wgpu::ComputePass<'r>,
    clock: Option<&'r KernelClock>,
    dispatches: &'r mut Dispatches,
}

impl Pass<'_> {
    /// `pipeline` over `x × y` workgroups, timed as `kernel`.
    pub(super) fn dispatch(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        (x, y): (u32, u32),
        kernel: &'static str,
    ) {
        self.pass.set_pipeline(pipeline);
        self.pass.dispatch_workgroups(x, y, 1);
        self.clock.inspect(|c| c.end(&mut self.pass, kernel));
        self.dispatches.direct += 1;
    }

    /// `pipeline` over the workgroups the device wrote into `args` at `offset`, timed as
    /// `kernel`.
    pub(super) fn dispatch_indirect(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        args: &wgpu::Buffer,
        offset: u64,
        kernel: &'static str,
    ) {
        self.pass.set_pipeline(pipeline);
        self.pass.dispatch_workgroups_indirect(args, offset);
        self.clock.inspect(|c| c.end(&mut self.pass, kernel));
        self.dispatches.indirect += 1;
    }
}

impl<'r> Deref for Pass<'r> {
    type Target = wgpu::ComputePass<'r>;
    fn deref(&self) -> &Self::Target {
        &self.pass
    }
}

impl DerefMut for Pass<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.pass
    }
}
