//! The pipelines and bind groups of `vt.wgsl`: the feedback pass (R32Uint)
//! and the main pass (into the output format the caller names).

/// The depth format of both passes.
pub const DEPTH: wgpu::TextureFormat = wgpu::TextureFormat::Depth32Float;

/// The feedback and main pipelines with their uniforms and bind groups.
pub struct Pipes {
    /// Main pass pipeline.
    pub main_pipe: wgpu::RenderPipeline,
    /// Feedback pass pipeline.
    pub fb_pipe: wgpu::RenderPipeline,
    /// Main pass bindings.
    pub main_bg: wgpu::BindGroup,
    /// Feedback pass bindings.
    pub fb_bg: wgpu::BindGroup,
    /// Main pass parameters.
    pub main_u: wgpu::Buffer,
    /// Feedback pass parameters.
    pub fb_u: wgpu::Buffer,
}

impl Pipes {
    /// Creates both pipelines, sampling `pool` (tiles, via `page_tables`)
    /// and `packed` (the always-resident tail).
    pub fn new(
        device: &wgpu::Device,
        pool: &wgpu::Texture,
        packed: &wgpu::Texture,
        page_tables: &wgpu::Buffer,
        output: wgpu::TextureFormat,
    ) -> Pipes {
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("vt.wgsl"),
            source: wgpu::ShaderSource::Wgsl(include_str!("vt.wgsl").into()),
        });
        let buffer = |ty| wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        };
        let bgl = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("vt"),
            entries: &[
                entry(0, buffer(wgpu::BufferBindingType::Uniform)),
                entry(
                    1,
                    buffer(wgpu::BufferBindingType::Storage { read_only: true }),
                ),
                entry(2, texture_array()),
                entry(3, texture_array()),
                entry(
                    4,
                    wgpu::BindingType::Sampler(wgpu::SamplerBindingType::Filtering),
                ),
            ],
        });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("vt"),
            bind_group_layouts: &[Some(&bgl)],
            immediate_size: 0,
        });
        let vbl = [Some(wgpu::VertexBufferLayout {
            array_stride: 24,
            step_mode: wgpu::VertexStepMode::Vertex,
            attributes: &wgpu::vertex_attr_array![0 => Float32x3, 1 => Float32x2, 2 => Uint32],
        })];
        let pipeline = |entry_point: &str, target: wgpu::TextureFormat| {
            device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some(entry_point),
                layout: Some(&layout),
                vertex: wgpu::VertexState {
                    module: &shader,
                    entry_point: Some("vs_main"),
                    compilation_options: Default::default(),
                    buffers: &vbl,
                },
                fragment: Some(wgpu::FragmentState {
                    module: &shader,
                    entry_point: Some(entry_point),
                    compilation_options: Default::default(),
                    targets: &[Some(target.into())],
                }),
                primitive: Default::default(),
                // Planets and ground: nearest surface wins, in both passes.
                depth_stencil: Some(wgpu::DepthStencilState {
                    format: DEPTH,
                    depth_write_enabled: Some(true),
                    depth_compare: Some(wgpu::CompareFunction::Less),
                    stencil: Default::default(),
                    bias: Default::default(),
                }),
                multisample: Default::default(),
                multiview_mask: None,
                cache: None,
            })
        };
        let main_pipe = pipeline("fs_main", output);
        let fb_pipe = pipeline("fs_feedback", wgpu::TextureFormat::R32Uint);
        let uniform = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: super::stream::PARAMS_BYTES,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let (main_u, fb_u) = (uniform("main params"), uniform("feedback params"));
        let sampler = device.create_sampler(&wgpu::SamplerDescriptor {
            mag_filter: wgpu::FilterMode::Linear,
            min_filter: wgpu::FilterMode::Linear,
            // Nearest between mips: each mip has its own colour, and the
            // tests check pixels against single mips.
            mipmap_filter: wgpu::MipmapFilterMode::Nearest,
            ..Default::default()
        });
        let array_view = |t: &wgpu::Texture| {
            t.create_view(&wgpu::TextureViewDescriptor {
                dimension: Some(wgpu::TextureViewDimension::D2Array),
                ..Default::default()
            })
        };
        let (pool_view, packed_view) = (array_view(pool), array_view(packed));
        let bind = |u: &wgpu::Buffer| {
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &bgl,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: u.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: page_tables.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: wgpu::BindingResource::TextureView(&pool_view),
                    },
                    wgpu::BindGroupEntry {
                        binding: 3,
                        resource: wgpu::BindingResource::TextureView(&packed_view),
                    },
                    wgpu::BindGroupEntry {
                        binding: 4,
                        resource: wgpu::BindingResource::Sampler(&sampler),
                    },
                ],
            })
        };
        let (main_bg, fb_bg) = (bind(&main_u), bind(&fb_u));
        Pipes {
            main_pipe,
            fb_pipe,
            main_bg,
            fb_bg,
            main_u,
            fb_u,
        }
    }
}

fn entry(binding: u32, ty: wgpu::BindingType) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
        ty,
        count: None,
    }
}

fn texture_array() -> wgpu::BindingType {
    wgpu::BindingType::Texture {
        sample_type: wgpu::TextureSampleType::Float { filterable: true },
        view_dimension: wgpu::TextureViewDimension::D2Array,
        multisampled: false,
    }
}
