//! Per-kernel GPU times, for profiling (`SolverConfig::gpu_kernel_timings`): a timestamp
//! written inside the compute pass at its start and after each timed dispatch, so that a
//! stage's time (`GpuTimings`, one pair of timestamps per pass) splits into its kernels.
//! Every dispatch of the step is timed so, once (the rigid stages and the deformables'
//! sweeps and contact passes); the query set is resolved and read back after the step,
//! with a blocking copy of its own.
//!
//! Within a pass, a kernel's time is from the timestamp before its dispatch to the one
//! after: with the barriers wgpu puts between dependent dispatches, that is its own
//! execution, but a kernel that overlaps the next one's start on a device that does not
//! wait is credited only up to it.

use std::sync::Mutex;

/// One kernel's GPU time over a step: its dispatches' times summed (ms), and how many
/// there were (the mean tells a dispatch's fixed cost from its work, across sizes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelTime {
    /// The kernel's entry point in the WGSL.
    pub kernel: &'static str,
    pub ms: f64,
    pub dispatches: u32,
}

impl KernelTime {
    /// Adds this to `sums`: to its kernel's entry, or as a new one at the end.
    pub(crate) fn add_to(self, sums: &mut Vec<KernelTime>) {
        match sums.iter_mut().find(|t| t.kernel == self.kernel) {
            Some(t) => {
                t.ms += self.ms;
                t.dispatches += self.dispatches;
            }
            None => sums.push(self),
        }
    }
}

/// Timestamps one step may write (the rest of a longer step goes untimed).
const CAPACITY: u32 = 4096;

pub(crate) struct KernelClock {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    /// Per timestamp written in this recording: the kernel it ends (`None`: a pass's start).
    /// (A mutex only so that the solver stays `Sync`: recording is single-threaded.)
    marks: Mutex<Vec<Option<&'static str>>>,
    period_ns: f32,
}

impl KernelClock {
    /// A clock on `device`, if it can write timestamps inside passes.
    pub(crate) fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Option<KernelClock> {
        let needed =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
        if !device.features().contains(needed) {
            return None;
        }
        let bytes = 8 * CAPACITY as u64;
        let buffer = |label, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        use wgpu::BufferUsages as U;
        Some(KernelClock {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("avbd kernels"),
                ty: wgpu::QueryType::Timestamp,
                count: CAPACITY,
            }),
            resolve: buffer("kernel timestamps", U::QUERY_RESOLVE | U::COPY_SRC),
            read: buffer("kernel timestamps readback", U::MAP_READ | U::COPY_DST),
            marks: Mutex::new(Vec::new()),
            period_ns: queue.get_timestamp_period(),
        })
    }

    /// Forgets the marks of the last recording (a step, or its run again, starts).
    pub(crate) fn reset(&self) {
        self.marks.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The start of a timed pass.
    pub(crate) fn start(&self, pass: &mut wgpu::ComputePass) {
        self.write(pass, None);
    }

    /// After a dispatch of `kernel`, in the pass [`Self::start`] began.
    pub(crate) fn end(&self, pass: &mut wgpu::ComputePass, kernel: &'static str) {
        self.write(pass, Some(kernel));
    }

    fn write(&self, pass: &mut wgpu::ComputePass, mark: Option<&'static str>) {
        let mut marks = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        if (marks.len() as u32) < CAPACITY {
            pass.write_timestamp(&self.set, marks.len() as u32);
            marks.push(mark);
        }
    }

    /// Reads the last recording's timestamps back once its submission is done (blocking):
    /// per kernel, its time summed over the step and its dispatches, in the order first met.
    pub(crate) fn read(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Result<Vec<KernelTime>, super::GpuError> {
        let marks = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        if marks.is_empty() {
            return Ok(Vec::new());
        }
        let n = marks.len() as u32;
        let mut encoder = device.create_command_encoder(&Default::default());
        encoder.resolve_query_set(&self.set, 0..n, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, 8 * n as u64);
        queue.submit([encoder.finish()]);
        let slice = self.read.slice(0..8 * n as u64);
        let mapped = std::sync::Arc::new(std::sync::OnceLock::new());
        let done = mapped.clone();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = done.set(r);
        });
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| super::GpuError::Readback(e.to_string()))?;
        let unmapped = || super::GpuError::Readback("the kernel timestamps did not map".into());
        mapped
            .get()
            .ok_or_else(unmapped)?
            .clone()
            .map_err(|e| super::GpuError::Readback(e.to_string()))?;
        let ticks: Vec<u64> = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| super::GpuError::Readback(format!("{e:?}")))?;
            bytemuck::pod_collect_to_vec(&view)
        };
        self.read.unmap();
        let mut out: Vec<KernelTime> = Vec::new();
        for (k, mark) in marks.iter().enumerate().skip(1) {
            let Some(kernel) = *mark else { continue };
            let ms = ticks[k].saturating_sub(ticks[k - 1]) as f64 * self.period_ns as f64 * 1e-6;
            let dispatches = 1;
            KernelTime {
                kernel,
                ms,
                dispatches,
            }
            .add_to(&mut out);
        }
        Ok(out)
    }
}
