//! The wgpu side: the device (opened as the solver's is, honouring `WGPU_BACKEND`), the
//! shadow and main pipelines, and one render into an offscreen texture read back to the
//! CPU.

use glam::{Mat4, Vec3};
use wgpu::util::DeviceExt;

use super::camera::{Camera, TO_LIGHT, light_view_projection};
use super::snapshot::{Snapshot, Vertex, plane_quad, rod};
use super::{Image, RenderError};

/// WGSL of both passes.
pub const SHADER: &str = include_str!("../../shaders/render.wgsl");
const COLOR: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8UnormSrgb;
const DEPTH: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;
const SHADOW_SIZE: u32 = 2048;
/// The background (sRGB): a pale blue-grey the ground fades into.
pub(crate) const BACKGROUND: [u8; 3] = [222, 228, 236];

/// Uniforms, laid out as `Globals` in render.wgsl.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Globals {
    view_proj: [f32; 16],
    light_view_proj: [f32; 16],
    light: [f32; 4],
    background: [f32; 4],
    scene: [f32; 4],
}

/// An open device with the pipelines built; renders any number of pictures.
pub struct Renderer {
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter: String,
    samples: u32,
    main: wgpu::RenderPipeline,
    shadow: wgpu::RenderPipeline,
    main_layout: wgpu::BindGroupLayout,
    shadow_layout: wgpu::BindGroupLayout,
    sampler: wgpu::Sampler,
    shadow_view: wgpu::TextureView,
}

fn srgb_to_linear(c: u8) -> f32 {
    let c = c as f32 / 255.0;
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

impl Renderer {
    /// Opens a device: [`RenderError::NoAdapter`] when wgpu finds none.
    pub fn new() -> Result<Self, RenderError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|_| RenderError::NoAdapter)?;
        let info = adapter.get_info();
        // 4× MSAA where the adapter has it (it is required of every WebGPU adapter).
        let samples = if adapter
            .get_texture_format_features(COLOR)
            .flags
            .sample_count_supported(4)
        {
            4
        } else {
            1
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("avbd render"),
            required_limits: wgpu::Limits::downlevel_defaults().using_resolution(adapter.limits()),
            ..Default::default()
        }))
        .map_err(|e| RenderError::Device(e.to_string()))?;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("render.wgsl"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let uniform = wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let shadow_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("render shadow"),
            entries: &[uniform],
        });
        let main_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("render main"),
            entries: &[
                uniform,
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Depth,
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                    count: None,
                },
                wgpu::BindGroupLayoutEntry {
                    binding: 2,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Sampler(wgpu::SamplerBindingType::Comparison),
                    count: None,
                },
            ],
        });
        let vertex_layout = wgpu::VertexBufferLayout {
            array_stride: std::mem::size_of::<Vertex>() as u64,
            step_mode: wgpu::VertexStepMode::Vertex,
            attributes: &wgpu::vertex_attr_array![0 => Float32x3, 1 => Float32x3, 2 => Unorm8x4],
        };
        let pipeline = |label: &str,
                        layout: &wgpu::BindGroupLayout,
                        entry: &str,
                        fragment: Option<wgpu::FragmentState>,
                        depth_compare: wgpu::CompareFunction,
                        bias: wgpu::DepthBiasState,
                        samples: u32| {
            let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(layout)],
                immediate_size: 0,
            });
            device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some(label),
                layout: Some(&layout),
                vertex: wgpu::VertexState {
                    module: &module,
                    entry_point: Some(entry),
                    compilation_options: Default::default(),
                    buffers: &[Some(vertex_layout.clone())],
                },
                // No culling: cloths are two-sided and the winding of imported meshes is
                // not trusted.
                primitive: wgpu::PrimitiveState::default(),
                depth_stencil: Some(wgpu::DepthStencilState {
                    format: DEPTH,
                    depth_write_enabled: Some(true),
                    depth_compare: Some(depth_compare),
                    stencil: Default::default(),
                    bias,
                }),
                multisample: wgpu::MultisampleState {
                    count: samples,
                    ..Default::default()
                },
                fragment,
                multiview_mask: None,
                cache: None,
            })
        };
        let main = pipeline(
            "render main",
            &main_layout,
            "vs_main",
            Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs_main"),
                compilation_options: Default::default(),
                targets: &[Some(COLOR.into())],
            }),
            // Reversed depth: nearer is larger.
            wgpu::CompareFunction::Greater,
            Default::default(),
            samples,
        );
        let shadow = pipeline(
            "render shadow",
            &shadow_layout,
            "vs_shadow",
            None,
            wgpu::CompareFunction::LessEqual,
            // Slope-scaled bias: surfaces grazing the light do not shadow themselves.
            wgpu::DepthBiasState {
                constant: 2,
                slope_scale: 2.0,
                clamp: 0.0,
            },
            1,
        );
        let sampler = device.create_sampler(&wgpu::SamplerDescriptor {
            label: Some("shadow"),
            address_mode_u: wgpu::AddressMode::ClampToEdge,
            address_mode_v: wgpu::AddressMode::ClampToEdge,
            mag_filter: wgpu::FilterMode::Linear,
            min_filter: wgpu::FilterMode::Linear,
            compare: Some(wgpu::CompareFunction::LessEqual),
            ..Default::default()
        });
        let shadow_view = device
            .create_texture(&wgpu::TextureDescriptor {
                label: Some("shadow map"),
                size: wgpu::Extent3d {
                    width: SHADOW_SIZE,
                    height: SHADOW_SIZE,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: DEPTH,
                usage: wgpu::TextureUsages::RENDER_ATTACHMENT
                    | wgpu::TextureUsages::TEXTURE_BINDING,
                view_formats: &[],
            })
            .create_view(&Default::default());
        Ok(Renderer {
            device,
            queue,
            adapter: format!("{} ({:?})", info.name, info.backend),
            samples,
            main,
            shadow,
            main_layout,
            shadow_layout,
            sampler,
            shadow_view,
        })
    }

    /// The adapter's name and backend.
    pub fn adapter(&self) -> &str {
        &self.adapter
    }

    /// Samples per pixel of the main pass (4 with MSAA).
    pub fn samples(&self) -> u32 {
        self.samples
    }

    fn target(
        &self,
        label: &str,
        w: u32,
        h: u32,
        format: wgpu::TextureFormat,
        samples: u32,
        usage: wgpu::TextureUsages,
    ) -> wgpu::Texture {
        self.device.create_texture(&wgpu::TextureDescriptor {
            label: Some(label),
            size: wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: samples,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage,
            view_formats: &[],
        })
    }

    /// Draws `snap` seen by `camera` into a `width` × `height` picture. `framed` is the
    /// box the shadows, the ground's size and its fog are fitted to (the bounds of
    /// everything the picture shows: one frame, or every frame of an animation).
    pub fn render(
        &self,
        snap: &Snapshot,
        camera: &Camera,
        framed: (Vec3, Vec3),
        width: u32,
        height: u32,
    ) -> Result<Image, RenderError> {
        let scene = SceneDraw::new(snap, camera, framed);
        let d = &self.device;
        let uniforms = d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("render globals"),
            contents: bytemuck::bytes_of(&scene.globals),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let vertex_buffer = (!scene.vertices.is_empty()).then(|| {
            d.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("render vertices"),
                contents: bytemuck::cast_slice(&scene.vertices),
                usage: wgpu::BufferUsages::VERTEX,
            })
        });
        let attach = wgpu::TextureUsages::RENDER_ATTACHMENT;
        let resolved = self.target(
            "render out",
            width,
            height,
            COLOR,
            1,
            attach | wgpu::TextureUsages::COPY_SRC,
        );
        let mut encoder = d.create_command_encoder(&Default::default());
        self.shadow_pass(
            &mut encoder,
            &uniforms,
            vertex_buffer.as_ref(),
            scene.body_vertices,
        );
        self.main_pass(
            &mut encoder,
            &uniforms,
            vertex_buffer.as_ref(),
            &scene,
            &resolved,
        );
        self.read_back(encoder, &resolved, width, height)
    }

    /// The shadow map: the bodies seen from the light (half-spaces receive shadows but
    /// cast none).
    fn shadow_pass(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        uniforms: &wgpu::Buffer,
        vertices: Option<&wgpu::Buffer>,
        body_vertices: u32,
    ) {
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("render shadow"),
            layout: &self.shadow_layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: uniforms.as_entire_binding(),
            }],
        });
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("shadow"),
            color_attachments: &[],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: &self.shadow_view,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(1.0),
                    store: wgpu::StoreOp::Store,
                }),
                stencil_ops: None,
            }),
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        if let Some(vb) = vertices
            && body_vertices > 0
        {
            pass.set_pipeline(&self.shadow);
            pass.set_bind_group(0, &group, &[]);
            pass.set_vertex_buffer(0, vb.slice(..));
            pass.draw(0..body_vertices, 0..1);
        }
    }

    /// The picture: every vertex shaded with the shadow map, multisampled where the
    /// adapter can, resolved into `resolved`.
    fn main_pass(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        uniforms: &wgpu::Buffer,
        vertices: Option<&wgpu::Buffer>,
        scene: &SceneDraw,
        resolved: &wgpu::Texture,
    ) {
        let d = &self.device;
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("render main"),
            layout: &self.main_layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: uniforms.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::TextureView(&self.shadow_view),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: wgpu::BindingResource::Sampler(&self.sampler),
                },
            ],
        });
        let (width, height) = (resolved.width(), resolved.height());
        let attach = wgpu::TextureUsages::RENDER_ATTACHMENT;
        let resolved_view = resolved.create_view(&Default::default());
        let msaa = (self.samples > 1).then(|| {
            self.target("render msaa", width, height, COLOR, self.samples, attach)
                .create_view(&Default::default())
        });
        let depth = self
            .target("render depth", width, height, DEPTH, self.samples, attach)
            .create_view(&Default::default());
        let (view, resolve_target) = match &msaa {
            Some(m) => (m, Some(&resolved_view)),
            None => (&resolved_view, None),
        };
        let bg = scene.background;
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("main"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view,
                depth_slice: None,
                resolve_target,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color {
                        r: bg[0] as f64,
                        g: bg[1] as f64,
                        b: bg[2] as f64,
                        a: 1.0,
                    }),
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: &depth,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(0.0),
                    store: wgpu::StoreOp::Discard,
                }),
                stencil_ops: None,
            }),
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        if let Some(vb) = vertices {
            pass.set_pipeline(&self.main);
            pass.set_bind_group(0, &group, &[]);
            pass.set_vertex_buffer(0, vb.slice(..));
            pass.draw(0..scene.vertices.len() as u32, 0..1);
        }
    }

    /// Submits `encoder` with a copy of `resolved` to the host and returns its RGB.
    fn read_back(
        &self,
        mut encoder: wgpu::CommandEncoder,
        resolved: &wgpu::Texture,
        width: u32,
        height: u32,
    ) -> Result<Image, RenderError> {
        let d = &self.device;
        // Rows of a texture-to-buffer copy are padded to 256 bytes.
        let row = (width * 4).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
        let readback = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("render readback"),
            size: row as u64 * height as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: resolved,
                mip_level: 0,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &readback,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(row),
                    rows_per_image: Some(height),
                },
            },
            wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
        );
        self.queue.submit([encoder.finish()]);
        let slice = readback.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let device_err = |e: String| RenderError::Device(e);
        d.poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| device_err(e.to_string()))?;
        rx.recv()
            .map_err(|e| device_err(e.to_string()))?
            .map_err(|e| device_err(e.to_string()))?;
        let mapped = slice
            .get_mapped_range()
            .map_err(|e| device_err(format!("{e:?}")))?;
        let mut rgb = Vec::with_capacity((width * height * 3) as usize);
        for y in 0..height as usize {
            let line = &mapped[y * row as usize..][..width as usize * 4];
            for px in line.chunks_exact(4) {
                rgb.extend_from_slice(&px[..3]);
            }
        }
        drop(mapped);
        readback.unmap();
        Ok(Image { width, height, rgb })
    }
}

/// What one picture draws: the vertices (the bodies', then the half-spaces' quads) and
/// the globals fitted to the framed box.
struct SceneDraw {
    vertices: Vec<Vertex>,
    /// The bodies' vertices, which cast shadows (the rest are half-spaces).
    body_vertices: u32,
    globals: Globals,
    /// The clear colour, linear.
    background: [f32; 3],
}

impl SceneDraw {
    fn new(snap: &Snapshot, camera: &Camera, framed: (Vec3, Vec3)) -> Self {
        let centre = (framed.0 + framed.1) * 0.5;
        let radius = ((framed.1 - framed.0).length() * 0.5).max(0.05);
        // The scale of the ground: the scene, or the view when the camera is far from it
        // (a small body seen from afar). Squares of 10 m, 1 m, 10 cm…, about an eighth of
        // it across; the fog starts at 2.5 times it.
        let extent = radius.max(0.35 * (camera.eye - centre).length());
        let cell = 10f32.powf((extent / 8.0).log10().round());
        let mut vertices = snap.vertices.clone();
        for &(a, b) in &snap.segments {
            rod(a, b, 0.004 * radius, &mut vertices);
        }
        let body_vertices = vertices.len() as u32;
        for &(point, normal) in &snap.planes {
            vertices.extend(plane_quad(point, normal, centre, 60.0 * extent));
        }
        // The shadow map covers the scene and the shadows it casts nearby.
        let shadow_radius = 1.6 * radius;
        let light_vp: Mat4 = light_view_projection(centre, shadow_radius);
        let bg = BACKGROUND.map(srgb_to_linear);
        let globals = Globals {
            view_proj: camera.view_projection().to_cols_array(),
            light_view_proj: light_vp.to_cols_array(),
            light: TO_LIGHT
                .normalize()
                .extend(2.0 * shadow_radius / SHADOW_SIZE as f32)
                .to_array(),
            background: [bg[0], bg[1], bg[2], cell],
            scene: centre.extend(extent).to_array(),
        };
        SceneDraw {
            vertices,
            body_vertices,
            globals,
            background: bg,
        }
    }
}
