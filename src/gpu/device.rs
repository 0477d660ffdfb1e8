//! Opening the device: adapter, limits, features and the initial buffers (the layouts and
//! the kernels are built in `pipelines/build.rs`).

use super::buffers::*;
use super::pipelines::build::Layouts;
use super::pipelines::*;
use super::*;

/// The adapter every device of the backend is opened on: high performance, honouring
/// `WGPU_BACKEND`.
pub(super) fn find_adapter() -> Result<wgpu::Adapter, GpuError> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    // `color_scan` keeps every indirect argument within the dispatch limits, so wgpu's
    // validation dispatch before each indirect call (on by default in release builds) is
    // pure cost; `WGPU_VALIDATION_INDIRECT_CALL=1` turns it back on.
    if std::env::var_os("WGPU_VALIDATION_INDIRECT_CALL").is_none() {
        desc.flags
            .remove(wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL);
    }
    let instance = wgpu::Instance::new(desc);
    pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|_| GpuError::NoAdapter)
}

/// A device of its own for a standalone kernel ([`super::narrow`], [`super::broad`],
/// [`super::ccd`]): the adapter's limits (as the solver's device), no optional features.
/// Returns the device, its queue and the adapter's name.
pub(super) fn standalone_device(
    label: &str,
) -> Result<(wgpu::Device, wgpu::Queue, String), GpuError> {
    let adapter = find_adapter()?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some(label),
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| GpuError::Device(e.to_string()))?;
    Ok((device, queue, adapter.get_info().name))
}

impl GpuSolver {
    /// Finds an adapter (honouring `WGPU_BACKEND`), opens a device and builds the pipelines.
    pub fn new() -> Result<Self, GpuError> {
        let adapter = find_adapter()?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let need = SOLVER_BINDINGS
            .len()
            .max(coloring_bindings(0).len())
            .max(warm_bindings(0).len());
        if (limits.max_storage_buffers_per_shader_stage as usize) < need {
            return Err(GpuError::Unsupported {
                adapter: info.name.clone(),
                reason: format!(
                    "{} storage buffers per stage, the solver binds {need}",
                    limits.max_storage_buffers_per_shader_stage,
                ),
            });
        }
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        // A chunk of 1 << shift records, and of 2 << shift points or carried states, must
        // each fit one binding.
        let per_record = std::mem::size_of::<ContactRecord>()
            .max(2 * std::mem::size_of::<crate::rigid::contact::ContactPoint>())
            .max(2 * std::mem::size_of::<crate::rigid::contact::ContactWarm>());
        let contact_shift = (max_binding / per_record as u64).max(1).ilog2().min(31);
        let timestamp = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        // Timestamps inside passes only for `SolverConfig::gpu_kernel_timings` (profiling).
        let required_features = if timestamp {
            wgpu::Features::TIMESTAMP_QUERY
                | (adapter.features() & wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
        } else {
            wgpu::Features::empty()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("avbd"),
            required_limits: limits.clone(),
            required_features,
            ..Default::default()
        }))
        .map_err(|e| GpuError::Device(e.to_string()))?;
        let layouts = Layouts::new(&device);
        let pipelines = Pipelines::new(&device, &layouts);
        let no_coupling = super::soft::empty_coupling(&device, &layouts.coupling);
        // Dispatch arguments a kernel writes through group 1 for the dispatches after it.
        let args_buffer = |label: &str| {
            let buffer = Self::make_buffer(
                &device,
                label,
                16,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::INDIRECT,
            )
            .buffer;
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(label),
                layout: &layouts.args,
                entries: &[wgpu::BindGroupEntry {
                    binding: 1,
                    resource: buffer.as_entire_binding(),
                }],
            });
            (buffer, group)
        };
        let (round_args, round_args_group) = args_buffer("colouring round arguments");
        let (narrow_args, narrow_args_group) = args_buffer("narrow phase worklist arguments");
        let params = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: params_size(),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let uniform = |label: &str, size: u64| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let broad_params = uniform(
            "broad params",
            std::mem::size_of::<super::broad::BroadParams>() as u64,
        );
        let scan_params = [
            uniform("bucket scan params", 16),
            uniform("pair scan params", 16),
        ];
        let (slots, slot_group) = Self::make_slots(&device, &queue, &layouts.slot, SLOTS, 0);
        let (scratch_slots, scratch_slot_group) = Self::make_slots(
            &device,
            &queue,
            &layouts.slot,
            SCRATCH_ROUNDS as u64,
            SCRATCH_INDEX_ROUNDS as u64,
        );
        let buffers = (0..NAMES.len())
            .map(|slot| {
                let size = match slot {
                    RANGES => RANGES_BYTES,
                    INDIRECT => INDIRECT_BYTES,
                    COUNTER => COUNTERS * 4,
                    _ => 256,
                };
                Self::make_buffer(
                    &device,
                    NAMES[slot],
                    size.next_multiple_of(256),
                    usage_of(slot),
                )
            })
            .collect();
        let staging = [0, 1].map(|_| {
            Self::make_buffer(
                &device,
                "readback",
                256,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )
        });
        let timestamps = timestamp.then(|| Timestamps {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("avbd passes"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: Self::make_buffer(
                &device,
                "timestamps",
                256,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            )
            .buffer,
            count: 2,
            period_ns: queue.get_timestamp_period(),
        });
        let mut solver = Self {
            device,
            queue,
            info,
            pipelines,
            layouts,
            params,
            slots,
            slot_count: SLOTS,
            buffers,
            shadow: vec![Vec::new(); NAMES.len()],
            staging,
            belt: UploadBelt::default(),
            pending: None,
            frame: 0,
            timestamps,
            solver_group: None,
            coloring_groups: None,
            integration_group: None,
            warm_groups: None,
            carried_side: 0,
            joints_uploaded: None,
            joint_carry: false,
            joint_states_newer: false,
            joint_cache: Default::default(),
            velocities_stay: false,
            velocities_newer: false,
            restore_velocities: false,
            run_again_once: false,
            velocity_cache: Default::default(),
            contact_broad: None,
            contact_broad_margins: super::ccd::CcdMargins::WGSL,
            contact_broad_fails: false,
            broad_params,
            broad_groups: None,
            scan_params,
            scan_groups: None,
            pair_capacity: 0,
            last_pairs: 0,
            island_groups: None,
            momentum_group: None,
            slot_group,
            _scratch_slots: scratch_slots,
            scratch_slot_group,
            seeds_fresh: true,
            scratch_step: false,
            scratch_coloring: true,
            soft: None,
            soft_active: false,
            no_coupling,
            round_args,
            round_args_group,
            narrow_args,
            narrow_args_group,
            flags: Vec::new(),
            flags_layout: None,
            solves_bodies: false,
            state_stale: true,
            uploaded_key: vec![None; NAMES.len()],
            touched: Vec::new(),
            touched_runs: Vec::new(),
            last_colors: 0,
            last_palette: 0,
            last_serial: 0,
            last_timings: GpuTimings {
                supported: timestamp,
                ..Default::default()
            },
            kernel_clock: None,
            kernel_timing: false,
            last_kernel_timings: Vec::new(),
            last_traffic: GpuTraffic::default(),
            counts: (0, 0, 0),
            color_capacity: 1,
            color_peak: 0,
            color_window: 0,
            serial_capacity: 0,
            rounds: JPL_ROUNDS,
            class_capacity: 1,
            regreedy: true,
            last_rounds: 0,
            pinned_rounds: None,
            contact_shift,
            max_binding,
            max_groups: limits.max_compute_workgroups_per_dimension,
            reallocations: 0,
        };
        solver.rebuild_bind_groups();
        solver.kernel_clock = super::kernel_clock::KernelClock::new(&solver.device, &solver.queue);
        Ok(solver)
    }
}

/// Maps a `MAP_READ` staging buffer and copies it out (blocking; the standalone kernels'
/// readback).
pub(super) fn read_staging<T: bytemuck::Pod>(
    device: &wgpu::Device,
    staging: &wgpu::Buffer,
) -> Result<Vec<T>, GpuError> {
    read_staging_range(device, staging, staging.size())
}

/// The first `bytes` of `staging` (blocking), as [`read_staging`] reads it whole.
pub(super) fn read_staging_range<T: bytemuck::Pod>(
    device: &wgpu::Device,
    staging: &wgpu::Buffer,
    bytes: u64,
) -> Result<Vec<T>, GpuError> {
    let slice = staging.slice(..bytes);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    rx.recv()
        .map_err(|e| GpuError::Readback(e.to_string()))?
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    let out = bytemuck::pod_collect_to_vec(
        &slice
            .get_mapped_range()
            .map_err(|e| GpuError::Readback(format!("{e:?}")))?,
    );
    staging.unmap();
    Ok(out)
}
