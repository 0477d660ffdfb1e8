//! Opening the device: adapter, limits, features, pipelines and the initial buffers.

use super::buffers::*;
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
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("avbd.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let coloring_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("coloring.wgsl"),
            source: wgpu::ShaderSource::Wgsl(COLORING_SHADER.into()),
        });
        let integration_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("integration.wgsl"),
            source: wgpu::ShaderSource::Wgsl(INTEGRATION_SHADER.into()),
        });
        let adjacency_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("adjacency.wgsl"),
            source: wgpu::ShaderSource::Wgsl(ADJACENCY_SHADER.into()),
        });
        let warm_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("contact_warm.wgsl"),
            source: wgpu::ShaderSource::Wgsl(CONTACT_WARM_SHADER.into()),
        });
        let broad_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("broad_phase.wgsl"),
            source: wgpu::ShaderSource::Wgsl(super::broad::BROAD_PHASE_SHADER.into()),
        });
        let mut broad_entries = vec![uniform_entry(
            0,
            false,
            std::mem::size_of::<super::broad::BroadParams>() as u64,
        )];
        broad_entries
            .extend(super::broad::BROAD_BINDINGS.map(|(b, read_only)| storage_entry(b, read_only)));
        let broad_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd broad phase"),
            entries: &broad_entries,
        });
        let single = |layout: &wgpu::BindGroupLayout, label: &str| {
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(layout)],
                immediate_size: 0,
            })
        };
        let broad_pipeline_layout = single(&broad_layout, "avbd broad phase");
        let island_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("islands.wgsl"),
            source: wgpu::ShaderSource::Wgsl(ISLANDS_SHADER.into()),
        });
        let momentum_module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("momentum.wgsl"),
            source: wgpu::ShaderSource::Wgsl(MOMENTUM_SHADER.into()),
        });
        let layout_of = |label: &str, bindings: &[(usize, bool)]| {
            let mut entries = vec![uniform_entry(0, false, params_size())];
            for (i, (_, read_only)) in bindings.iter().enumerate() {
                entries.push(storage_entry(i as u32 + 1, *read_only));
            }
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries: &entries,
            })
        };
        let solver_layout = layout_of("avbd solver", &SOLVER_BINDINGS);
        let coloring_layout = layout_of("avbd colouring", &coloring_bindings(0));
        let integration_layout = layout_of("avbd integration", &INTEGRATION_BINDINGS);
        let warm_layout = layout_of("avbd contact warm start", &warm_bindings(0));
        let island_layout = layout_of("avbd islands", &island_bindings(0));
        let momentum_layout = layout_of("avbd momentum projection", &MOMENTUM_BINDINGS);
        let slot_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd colour slot"),
            entries: &[uniform_entry(0, true, 8)],
        });
        // Group 2: the attachments of deformable vertices to bodies (`soft`).
        let coupling_layout = super::soft::coupling_layout(&device);
        let no_coupling = super::soft::empty_coupling(&device, &coupling_layout);
        let solver_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd solver"),
                bind_group_layouts: &[
                    Some(&solver_layout),
                    Some(&slot_layout),
                    Some(&coupling_layout),
                ],
                immediate_size: 0,
            });
        let coloring_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd colouring"),
                bind_group_layouts: &[Some(&coloring_layout)],
                immediate_size: 0,
            });
        // The colouring's rounds take their number from a slot of group 1 and their
        // dispatch arguments from a buffer that `color_work_args` writes through group 1.
        let round_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd colouring round"),
                bind_group_layouts: &[Some(&coloring_layout), Some(&slot_layout)],
                immediate_size: 0,
            });
        let round_args_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("avbd colouring round arguments"),
            entries: &[storage_entry(1, false)],
        });
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
                layout: &round_args_layout,
                entries: &[wgpu::BindGroupEntry {
                    binding: 1,
                    resource: buffer.as_entire_binding(),
                }],
            });
            (buffer, group)
        };
        let (round_args, round_args_group) = args_buffer("colouring round arguments");
        let (narrow_args, narrow_args_group) = args_buffer("narrow phase worklist arguments");
        let work_args_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd colouring worklist"),
                bind_group_layouts: &[Some(&coloring_layout), Some(&round_args_layout)],
                immediate_size: 0,
            });
        let integration_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd integration"),
                bind_group_layouts: &[Some(&integration_layout)],
                immediate_size: 0,
            });
        let warm_pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("avbd contact warm start"),
            bind_group_layouts: &[Some(&warm_layout)],
            immediate_size: 0,
        });
        let pipeline = |layout: &wgpu::PipelineLayout, module: &wgpu::ShaderModule, entry: &str| {
            super::pipelines::compute_pipeline(&device, layout, module, entry)
        };
        let solve = |entry| pipeline(&solver_pipeline_layout, &module, entry);
        // The primal sweep writes all of its workgroup memory before reading it: no
        // zeroing at the start of every workgroup.
        let primal = |constants: &[(&str, f64)]| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("primal"),
                layout: Some(&solver_pipeline_layout),
                module: &module,
                entry_point: Some("primal"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            })
        };
        let color = |entry| pipeline(&coloring_pipeline_layout, &coloring_module, entry);
        let adjacency = |entry| pipeline(&coloring_pipeline_layout, &adjacency_module, entry);
        let integrate = |entry| pipeline(&integration_pipeline_layout, &integration_module, entry);
        let warm = |entry| pipeline(&warm_pipeline_layout, &warm_module, entry);
        let narrow_args_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("avbd narrow phase worklist"),
                bind_group_layouts: &[Some(&warm_layout), Some(&round_args_layout)],
                immediate_size: 0,
            });
        let pipelines = Pipelines {
            primal: primal(&[]),
            primal_contacts: primal(&[("JOINTS", 0.0), ("COUPLED", 0.0)]),
            primal_serial: solve("primal_serial"),
            dual_contacts: solve("dual_contacts"),
            dual_joints: solve("dual_joints"),
            warm_start_joints: solve("warm_start_joints"),
            fracture_joints: solve("fracture_joints"),
            warm_start_contacts: warm("warm_start_contacts"),
            store_contact_warm: warm("store_contact_warm"),
            narrow_carry: warm("narrow_carry"),
            narrow_work_args: pipeline(
                &narrow_args_pipeline_layout,
                &warm_module,
                "narrow_work_args",
            ),
            narrow_collide: warm("narrow_collide"),
            broad: {
                let [a, b, c, d, e] = super::broad::BROAD_KERNELS;
                [a, b, "bp_seed_scan", "bp_seed_fill", c, d, e]
                    .map(|k| pipeline(&broad_pipeline_layout, &broad_module, k))
            },
            scan: super::broad::PrefixSum::new(&device),
            islands: {
                let layout = single(&island_layout, "avbd islands");
                super::pipelines::ISLAND_KERNELS.map(|k| pipeline(&layout, &island_module, k))
            },
            momentum: {
                let layout = single(&momentum_layout, "avbd momentum projection");
                MOMENTUM_KERNELS.map(|k| pipeline(&layout, &momentum_module, k))
            },
            adj_clear: adjacency("adj_clear"),
            adj_count: adjacency("adj_count"),
            adj_scan_blocks: adjacency("adj_scan_blocks"),
            adj_scan_top: adjacency("adj_scan_top"),
            adj_scan_add: adjacency("adj_scan_add"),
            adj_fill: adjacency("adj_fill"),
            adj_sort: adjacency("adj_sort"),
            color_init: color("color_init"),
            color_work_args: pipeline(
                &work_args_pipeline_layout,
                &coloring_module,
                "color_work_args",
            ),
            color_round: pipeline(&round_pipeline_layout, &coloring_module, "color_round"),
            color_regreedy: pipeline(&round_pipeline_layout, &coloring_module, "color_regreedy"),
            color_unseed_mark: color("color_unseed_mark"),
            color_unseed: color("color_unseed"),
            color_count: color("color_count"),
            color_scan: color("color_scan"),
            color_serial_rank: color("color_serial_rank"),
            color_scatter: color("color_scatter"),
            begin_bodies: integrate("begin_bodies"),
            end_bodies: integrate("end_bodies"),
        };
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
        let (slots, slot_group) = Self::make_slots(&device, &queue, &slot_layout, SLOTS, 0);
        let (scratch_slots, scratch_slot_group) = Self::make_slots(
            &device,
            &queue,
            &slot_layout,
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
            solver_layout,
            coloring_layout,
            integration_layout,
            warm_layout,
            params,
            slots,
            slot_layout,
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
            broad_layout,
            broad_groups: None,
            scan_params,
            scan_groups: None,
            pair_capacity: 0,
            last_pairs: 0,
            island_layout,
            island_groups: None,
            momentum_layout,
            momentum_group: None,
            slot_group,
            _scratch_slots: scratch_slots,
            scratch_slot_group,
            seeds_fresh: true,
            scratch_step: false,
            scratch_coloring: true,
            soft: None,
            soft_active: false,
            coupling_layout,
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
