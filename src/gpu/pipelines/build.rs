//! Building the step's kernels: the bind group layouts of each kernel group, and the
//! compute pipelines over them.

use super::*;

/// The bind group layouts of the step's kernel groups: group 0 of each (the parameters,
/// then the buffers of its binding list; the broad phase's, its own parameters), and the
/// groups 1 and 2 some kernels add.
pub(in crate::gpu) struct Layouts {
    pub(in crate::gpu) solver: wgpu::BindGroupLayout,
    pub(in crate::gpu) coloring: wgpu::BindGroupLayout,
    pub(in crate::gpu) integration: wgpu::BindGroupLayout,
    pub(in crate::gpu) warm: wgpu::BindGroupLayout,
    pub(in crate::gpu) islands: wgpu::BindGroupLayout,
    pub(in crate::gpu) momentum: wgpu::BindGroupLayout,
    /// The broad phase's: its own parameters (`BroadParams`).
    pub(in crate::gpu) broad: wgpu::BindGroupLayout,
    /// Group 1: a colour slot (a uniform at a dynamic offset).
    pub(in crate::gpu) slot: wgpu::BindGroupLayout,
    /// Group 2 of the solver: the attachments of deformable vertices to bodies (`soft`).
    pub(in crate::gpu) coupling: wgpu::BindGroupLayout,
    /// Group 1: dispatch arguments a kernel writes for the dispatches after it.
    pub(in crate::gpu) args: wgpu::BindGroupLayout,
}

impl Layouts {
    pub(in crate::gpu) fn new(device: &wgpu::Device) -> Layouts {
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
        let broad_params = std::mem::size_of::<crate::gpu::broad::BroadParams>() as u64;
        let mut broad = vec![uniform_entry(0, false, broad_params)];
        broad.extend(
            crate::gpu::broad::BROAD_BINDINGS.map(|(b, read_only)| storage_entry(b, read_only)),
        );
        Layouts {
            solver: layout_of("avbd solver", &SOLVER_BINDINGS),
            coloring: layout_of("avbd colouring", &coloring_bindings(0)),
            integration: layout_of("avbd integration", &INTEGRATION_BINDINGS),
            warm: layout_of("avbd contact warm start", &warm_bindings(0)),
            islands: layout_of("avbd islands", &island_bindings(0)),
            momentum: layout_of("avbd momentum projection", &MOMENTUM_BINDINGS),
            broad: device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("avbd broad phase"),
                entries: &broad,
            }),
            slot: device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("avbd colour slot"),
                entries: &[uniform_entry(0, true, 8)],
            }),
            coupling: crate::gpu::soft::coupling_layout(device),
            args: device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("avbd dispatch arguments"),
                entries: &[storage_entry(1, false)],
            }),
        }
    }
}

impl Pipelines {
    /// Compiles every kernel of the step over `layouts`.
    pub(in crate::gpu) fn new(device: &wgpu::Device, layouts: &Layouts) -> Pipelines {
        let module = |label: &str, source: &str| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            })
        };
        let solver_module = module("avbd.wgsl", SHADER);
        let coloring_module = module("coloring.wgsl", COLORING_SHADER);
        let integration_module = module("integration.wgsl", INTEGRATION_SHADER);
        let adjacency_module = module("adjacency.wgsl", ADJACENCY_SHADER);
        let warm_module = module("contact_warm.wgsl", CONTACT_WARM_SHADER);
        let broad_module = module("broad_phase.wgsl", crate::gpu::broad::BROAD_PHASE_SHADER);
        let island_module = module("islands.wgsl", ISLANDS_SHADER);
        let momentum_module = module("momentum.wgsl", MOMENTUM_SHADER);
        let pipeline_layout = |label: &str, groups: &[&wgpu::BindGroupLayout]| {
            let groups: Vec<Option<&wgpu::BindGroupLayout>> =
                groups.iter().copied().map(Some).collect();
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &groups,
                immediate_size: 0,
            })
        };
        let l = layouts;
        let solver_layout = pipeline_layout("avbd solver", &[&l.solver, &l.slot, &l.coupling]);
        let coloring_layout = pipeline_layout("avbd colouring", &[&l.coloring]);
        // The colouring's rounds take their number from a slot of group 1 and their
        // dispatch arguments from a buffer that `color_work_args` writes through group 1.
        let round_layout = pipeline_layout("avbd colouring round", &[&l.coloring, &l.slot]);
        let work_args_layout = pipeline_layout("avbd colouring worklist", &[&l.coloring, &l.args]);
        let integration_layout = pipeline_layout("avbd integration", &[&l.integration]);
        let warm_layout = pipeline_layout("avbd contact warm start", &[&l.warm]);
        let narrow_args_layout = pipeline_layout("avbd narrow phase worklist", &[&l.warm, &l.args]);
        let broad_layout = pipeline_layout("avbd broad phase", &[&l.broad]);
        let island_layout = pipeline_layout("avbd islands", &[&l.islands]);
        let momentum_layout = pipeline_layout("avbd momentum projection", &[&l.momentum]);
        let pipeline = |layout: &wgpu::PipelineLayout, module: &wgpu::ShaderModule, entry: &str| {
            compute_pipeline(device, layout, module, entry)
        };
        let solve = |entry| pipeline(&solver_layout, &solver_module, entry);
        // The primal sweep writes all of its workgroup memory before reading it: no
        // zeroing at the start of every workgroup.
        let primal = |constants: &[(&str, f64)]| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("primal"),
                layout: Some(&solver_layout),
                module: &solver_module,
                entry_point: Some("primal"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            })
        };
        let color = |entry| pipeline(&coloring_layout, &coloring_module, entry);
        let round = |entry| pipeline(&round_layout, &coloring_module, entry);
        let adjacency = |entry| pipeline(&coloring_layout, &adjacency_module, entry);
        let integrate = |entry| pipeline(&integration_layout, &integration_module, entry);
        let warm = |entry| pipeline(&warm_layout, &warm_module, entry);
        Pipelines {
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
            narrow_work_args: pipeline(&narrow_args_layout, &warm_module, "narrow_work_args"),
            narrow_collide: warm("narrow_collide"),
            broad: {
                let [a, b, c, d, e] = crate::gpu::broad::BROAD_KERNELS;
                [a, b, "bp_seed_scan", "bp_seed_fill", c, d, e]
                    .map(|k| pipeline(&broad_layout, &broad_module, k))
            },
            scan: crate::gpu::broad::PrefixSum::new(device),
            islands: ISLAND_KERNELS.map(|k| pipeline(&island_layout, &island_module, k)),
            momentum: MOMENTUM_KERNELS.map(|k| pipeline(&momentum_layout, &momentum_module, k)),
            adj_clear: adjacency("adj_clear"),
            adj_count: adjacency("adj_count"),
            adj_scan_blocks: adjacency("adj_scan_blocks"),
            adj_scan_top: adjacency("adj_scan_top"),
            adj_scan_add: adjacency("adj_scan_add"),
            adj_fill: adjacency("adj_fill"),
            adj_sort: adjacency("adj_sort"),
            color_init: color("color_init"),
            color_work_args: pipeline(&work_args_layout, &coloring_module, "color_work_args"),
            color_round: round("color_round"),
            color_regreedy: round("color_regreedy"),
            color_unseed_mark: color("color_unseed_mark"),
            color_unseed: color("color_unseed"),
            color_count: color("color_count"),
            color_scan: color("color_scan"),
            color_serial_rank: color("color_serial_rank"),
            color_scatter: color("color_scatter"),
            begin_bodies: integrate("begin_bodies"),
            end_bodies: integrate("end_bodies"),
        }
    }
}
