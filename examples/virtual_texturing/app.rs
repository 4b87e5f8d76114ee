//! The frame loop: feedback pass, asynchronous readback, residency
//! planning, tile loads through a gpustream queue (one fence value per
//! frame's batch; tiles become visible only once it is reached), page-table
//! upload and the main pass.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpustream::completion::{Fence, StatusArray, StatusEntry};
use gpustream::gpu::GpuContext;
use gpustream::runtime::{Destination, QueueConfig, Request, Runtime, RuntimeConfig, Source};

use super::camera::{self, Camera};
use super::content::SceneConfig;
use super::residency::{Geometry, Residency, TileKey};
use super::stats::FrameStats;

/// Frames the CPU may run ahead of the GPU.
pub const FRAMES_IN_FLIGHT: usize = 2;
const READBACKS: usize = 3;
/// The colour the sky is cleared to (RGBA8: 26, 26, 38).
pub const SKY: [f64; 3] = [0.1, 0.1, 0.15];

/// One run of the demo.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The scene (pack contents).
    pub scene: SceneConfig,
    /// The pack file (built if missing or different).
    pub pack: PathBuf,
    /// Frames to render.
    pub frames: u64,
    /// Output size.
    pub width: u32,
    /// Output height.
    pub height: u32,
    /// Feedback resolution divisor (the feedback pass is width/div x height/div).
    pub feedback_div: u32,
    /// Physical tile pool slots.
    pub pool: u32,
    /// Most tile loads started per frame.
    pub max_loads: usize,
    /// Camera speed along the path, radians per frame.
    pub speed: f32,
    /// Wait each frame for its feedback and its tile batch (reproducible
    /// runs for tests); otherwise both are asynchronous.
    pub sync: bool,
    /// Show a progress bar while generating the pack.
    pub progress: bool,
    /// Decode LZ4 tiles with the runtime's WGSL decoder (off by default:
    /// see the note in `run`).
    pub gpu_lz4: bool,
}

/// What a run produced.
pub struct RunResult {
    /// Per-frame statistics.
    pub frames: Vec<FrameStats>,
    /// The last frame, RGBA8, `width * height * 4` bytes.
    pub screenshot: Vec<u8>,
    /// Wall time of the frame loop.
    pub wall_s: f64,
    /// Tiles that failed to load.
    pub failed_tiles: usize,
    /// The first load failure, in words.
    pub first_failure: Option<String>,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    view_proj: [[f32; 4]; 4],
    size: f32,
    lod_bias: f32,
    tiled_mips: u32,
    mip_count: u32,
    per_texture: u32,
    textures: u32,
    pad: [u32; 2],
    mips: [[u32; 4]; 16],
}

struct Readback {
    buffer: wgpu::Buffer,
    /// Set by the map callback.
    ready: Arc<AtomicBool>,
    busy: bool,
}

struct Batch {
    value: u64,
    status: StatusArray,
    tiles: Vec<(TileKey, u32)>,
}

/// Builds the pack if needed and renders `cfg.frames` frames headless.
pub fn run(ctx: &GpuContext, cfg: &RunConfig) -> Result<RunResult, Box<dyn std::error::Error>> {
    let device = &ctx.device;
    if !device
        .features()
        .contains(wgpu::Features::TEXTURE_COMPRESSION_BC)
    {
        return Err("the adapter cannot sample BC textures (TEXTURE_COMPRESSION_BC)".into());
    }
    let max_layers = device.limits().max_texture_array_layers;
    if cfg.pool == 0 || cfg.pool > max_layers {
        return Err(format!(
            "--pool {} is outside 1..={max_layers} (array layers)",
            cfg.pool
        )
        .into());
    }
    if cfg.scene.textures > max_layers {
        return Err(format!(
            "--textures exceeds the {max_layers} array layers of the packed-mip texture"
        )
        .into());
    }
    super::content::ensure_pack(&cfg.pack, &cfg.scene, cfg.progress)?;

    // GPU LZ4 decode is opt-in here (--gpu-lz4): on lavapipe, where the demo
    // and its tests run, the WGSL decoder manages about 12 MB/s, far below
    // the CPU threads. On a real GPU, pass --gpu-lz4.
    let runtime = Runtime::new(
        device,
        &ctx.queue,
        RuntimeConfig {
            gpu_decompression: cfg.gpu_lz4,
            ..RuntimeConfig::default()
        },
    )?;
    let pack = runtime.open_pack(&cfg.pack)?;
    let queue = runtime.create_queue(QueueConfig {
        capacity: 2048,
        name: Some("virtual texturing".into()),
        ..Default::default()
    });
    let ids: Vec<_> = (0..cfg.scene.textures)
        .map(|i| {
            pack.pack()
                .find(&SceneConfig::asset_name(i))
                .ok_or("texture missing")
        })
        .collect::<Result<_, _>>()?;

    // Geometry: every texture has the same tile grids and packed tail.
    let mip_count = cfg.scene.mip_count();
    let mut grids = Vec::new();
    for m in 0..mip_count {
        match pack.pack().tile_grid(ids[0], m)? {
            Some(g) => grids.push(g),
            None => break,
        }
    }
    let geo = Geometry::new(cfg.scene.textures, &grids);
    let tiled = geo.tiled_mips();
    let packed_info = pack.pack().packed_mips(ids[0])?;
    let first_packed = packed_info.mips.first().ok_or("no packed mips")?;
    if first_packed.mip != tiled {
        return Err("packed mips do not follow the tiled ones".into());
    }
    let format = cfg.scene.format.wgpu();
    let (tw, th) = cfg.scene.format.tile_extent();

    let pool = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("tile pool"),
        size: wgpu::Extent3d {
            width: tw,
            height: th,
            depth_or_array_layers: cfg.pool,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    let packed = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("packed mips"),
        size: wgpu::Extent3d {
            width: first_packed.width.next_multiple_of(4),
            height: first_packed.height.next_multiple_of(4),
            depth_or_array_layers: cfg.scene.textures,
        },
        mip_level_count: packed_info.mips.len() as u32,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });

    // Packed mips: always resident, loaded before the first frame.
    let fence = Fence::new();
    for (i, &id) in ids.iter().enumerate() {
        queue.enqueue(
            Request::new(
                Source::PackedMips {
                    pack: pack.clone(),
                    asset: id,
                },
                Destination::Texture {
                    texture: packed.clone(),
                    mip: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: 0,
                        z: i as u32,
                    },
                    extent: None,
                },
            )
            .with_name(format!("packed mips of texture {i}")),
        )?;
    }
    queue.enqueue_signal(&fence, 1);
    queue.submit();
    if !fence.wait_timeout(1, Duration::from_secs(120)) {
        return Err("packed mips did not arrive within 120 s".into());
    }
    if let Some(f) = queue.error_record().first_failure {
        return Err(format!("loading packed mips failed: {f}").into());
    }

    // Pipelines.
    let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("vt.wgsl"),
        source: wgpu::ShaderSource::Wgsl(include_str!("vt.wgsl").into()),
    });
    let bgl = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("vt"),
        entries: &[
            entry(
                0,
                wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
            ),
            entry(
                1,
                wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: true },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
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
        array_stride: 20,
        step_mode: wgpu::VertexStepMode::Vertex,
        attributes: &wgpu::vertex_attr_array![0 => Float32x2, 1 => Float32x2, 2 => Uint32],
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
            depth_stencil: None,
            multisample: Default::default(),
            multiview_mask: None,
            cache: None,
        })
    };
    let main_pipe = pipeline("fs_main", wgpu::TextureFormat::Rgba8Unorm);
    let fb_pipe = pipeline("fs_feedback", wgpu::TextureFormat::R32Uint);

    let verts = camera::mesh(cfg.scene.textures);
    let vbuf = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("ground"),
        size: (verts.len() * 4) as u64,
        usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    ctx.queue
        .write_buffer(&vbuf, 0, bytemuck::cast_slice(&verts));
    let uniform = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: std::mem::size_of::<Params>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    };
    let (main_u, fb_u) = (uniform("main params"), uniform("feedback params"));
    let mut res = Residency::new(geo.clone(), cfg.pool);
    let pt_buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("page tables"),
        size: (res.page_table.len() * 4).max(4) as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let sampler = device.create_sampler(&wgpu::SamplerDescriptor {
        mag_filter: wgpu::FilterMode::Linear,
        min_filter: wgpu::FilterMode::Linear,
        // Nearest between mips: each mip has its own colour, and the tests
        // check pixels against single mips.
        mipmap_filter: wgpu::MipmapFilterMode::Nearest,
        ..Default::default()
    });
    let pool_view = pool.create_view(&wgpu::TextureViewDescriptor {
        dimension: Some(wgpu::TextureViewDimension::D2Array),
        ..Default::default()
    });
    let packed_view = packed.create_view(&wgpu::TextureViewDescriptor {
        dimension: Some(wgpu::TextureViewDimension::D2Array),
        ..Default::default()
    });
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
                    resource: pt_buf.as_entire_binding(),
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

    let (w, h) = (cfg.width, cfg.height);
    let div = cfg.feedback_div.max(1);
    let (fw, fh) = (w.div_ceil(div), h.div_ceil(div));
    let target = |label, width, height, format| {
        device.create_texture(&wgpu::TextureDescriptor {
            label: Some(label),
            size: wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        })
    };
    let colour = target("frame", w, h, wgpu::TextureFormat::Rgba8Unorm);
    let feedback = target("feedback", fw, fh, wgpu::TextureFormat::R32Uint);
    let fb_row = (fw * 4).next_multiple_of(256);
    let mut readbacks: Vec<Readback> = (0..READBACKS)
        .map(|_| Readback {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("feedback readback"),
                size: (fb_row * fh) as u64,
                usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
                mapped_at_creation: false,
            }),
            ready: Arc::new(AtomicBool::new(false)),
            busy: false,
        })
        .collect();
    // Readbacks in the order they were submitted (FIFO), by index.
    let mut pending_fb: VecDeque<usize> = VecDeque::new();

    let mut params = Params {
        view_proj: [[0.0; 4]; 4],
        size: cfg.scene.size as f32,
        lod_bias: 0.0,
        tiled_mips: tiled as u32,
        mip_count: mip_count as u32,
        per_texture: geo.per_texture,
        textures: cfg.scene.textures,
        pad: [0; 2],
        mips: [[0; 4]; 16],
    };
    for (m, &(off, x, y)) in geo.mips.iter().enumerate() {
        params.mips[m] = [off, x, y, 0];
    }

    let mut batches: VecDeque<Batch> = VecDeque::new();
    let mut in_flight: VecDeque<(u64, wgpu::SubmissionIndex)> = VecDeque::new();
    let mut completed_frame: Option<u64> = None;
    let mut wanted: HashSet<TileKey> = HashSet::new();
    let mut stats = Vec::with_capacity(cfg.frames as usize);
    let mut prev = queue.stats();
    let mut first_failure = None;
    let mut next_value = 2u64;
    let start = Instant::now();
    let mut last_frame_end = start;

    for frame in 1..=cfg.frames {
        let t0 = Instant::now();
        let mut fs = FrameStats {
            frame,
            ..Default::default()
        };

        // Frames in flight: wait for the oldest before running further ahead.
        while in_flight.len() >= FRAMES_IN_FLIGHT {
            let (f, idx) = in_flight.pop_front().expect("non-empty");
            device.poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })?;
            completed_frame = Some(f);
        }
        res.release(completed_frame);

        // Batches whose fence value is reached become visible now.
        let reached = fence.completed_value();
        while batches.front().is_some_and(|b| b.value <= reached) {
            let b = batches.pop_front().expect("non-empty");
            for (i, (k, slot)) in b.tiles.iter().enumerate() {
                let ok = match b.status.get(i) {
                    StatusEntry::Ok => true,
                    StatusEntry::Failed(f) => {
                        first_failure.get_or_insert_with(|| f.to_string());
                        false
                    }
                    StatusEntry::Pending => false,
                };
                res.complete(*k, *slot, ok, frame);
                fs.tiles_uploaded += ok as usize;
            }
        }

        // Feedback that has come back, oldest first.
        device.poll(wgpu::PollType::Poll)?;
        let tf = Instant::now();
        while let Some(&i) = pending_fb.front() {
            if !readbacks[i].ready.load(Ordering::Acquire) {
                break;
            }
            pending_fb.pop_front();
            let rb = &mut readbacks[i];
            wanted.clear();
            {
                let data = rb.buffer.slice(..).get_mapped_range()?;
                for row in 0..fh {
                    let line = &data[(row * fb_row) as usize..][..(fw * 4) as usize];
                    for word in line.chunks_exact(4) {
                        let v = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                        if let Some(k) = TileKey::from_feedback(v, &geo) {
                            wanted.insert(k);
                        }
                    }
                }
            }
            rb.buffer.unmap();
            rb.busy = false;
            rb.ready.store(false, Ordering::Release);
        }
        fs.feedback_ms = tf.elapsed().as_secs_f64() * 1e3;

        // Plan and start loads: one batch, one fence value.
        let plan = res.plan(&wanted, frame, cfg.max_loads);
        fs.tiles_requested = plan.requested;
        fs.tiles_evicted = plan.evicted;
        if !plan.loads.is_empty() {
            let status = StatusArray::new(plan.loads.len());
            for (i, (k, slot)) in plan.loads.iter().enumerate() {
                queue.enqueue(
                    Request::new(
                        Source::Tile {
                            pack: pack.clone(),
                            asset: ids[k.tex as usize],
                            mip: k.mip,
                            x: k.x,
                            y: k.y,
                        },
                        Destination::Texture {
                            texture: pool.clone(),
                            mip: 0,
                            origin: wgpu::Origin3d {
                                x: 0,
                                y: 0,
                                z: *slot,
                            },
                            extent: None,
                        },
                    )
                    .with_tag(frame),
                )?;
                queue.enqueue_status(&status, i);
            }
            let value = next_value;
            next_value += 1;
            queue.enqueue_signal(&fence, value);
            queue.submit();
            batches.push_back(Batch {
                value,
                status,
                tiles: plan.loads,
            });
        }

        // Render: page tables, feedback pass (+ readback), main pass.
        if res.dirty {
            ctx.queue
                .write_buffer(&pt_buf, 0, bytemuck::cast_slice(&res.page_table));
            res.dirty = false;
        }
        let cam = Camera::on_path(cfg.scene.textures, frame, cfg.speed, w as f32 / h as f32);
        params.view_proj = cam.view_proj();
        params.lod_bias = 0.0;
        ctx.queue
            .write_buffer(&main_u, 0, bytemuck::bytes_of(&params));
        params.lod_bias = -(div as f32).log2();
        ctx.queue
            .write_buffer(&fb_u, 0, bytemuck::bytes_of(&params));

        let mut enc = device.create_command_encoder(&Default::default());
        let rb_index = readbacks.iter().position(|r| !r.busy);
        if let Some(i) = rb_index {
            draw(
                &mut enc,
                &feedback,
                &fb_pipe,
                &fb_bg,
                &vbuf,
                verts.len() as u32 / 5,
                wgpu::Color::TRANSPARENT,
            );
            enc.copy_texture_to_buffer(
                feedback.as_image_copy(),
                wgpu::TexelCopyBufferInfo {
                    buffer: &readbacks[i].buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(fb_row),
                        rows_per_image: Some(fh),
                    },
                },
                feedback.size(),
            );
        }
        let sky = wgpu::Color {
            r: SKY[0],
            g: SKY[1],
            b: SKY[2],
            a: 1.0,
        };
        draw(
            &mut enc,
            &colour,
            &main_pipe,
            &main_bg,
            &vbuf,
            verts.len() as u32 / 5,
            sky,
        );
        let idx = ctx.queue.submit([enc.finish()]);
        in_flight.push_back((frame, idx.clone()));
        if let Some(i) = rb_index {
            let rb = &mut readbacks[i];
            rb.busy = true;
            let ready = rb.ready.clone();
            rb.buffer
                .slice(..)
                .map_async(wgpu::MapMode::Read, move |r| {
                    if r.is_ok() {
                        ready.store(true, Ordering::Release);
                    }
                });
            pending_fb.push_back(i);
        }

        if cfg.sync {
            // Reproducible runs: this frame's feedback and tile batch are
            // complete before the next frame starts.
            device.poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })?;
            if let Some(b) = batches.back() {
                if !fence.wait_timeout(b.value, Duration::from_secs(60)) {
                    return Err(
                        format!("tile batch of frame {frame} did not finish in 60 s").into(),
                    );
                }
            }
        }

        let qs = queue.stats();
        fs.submits = qs.submits - prev.submits;
        fs.bytes = qs.bytes_delivered - prev.bytes_delivered;
        prev = qs;
        fs.pool_occupancy = res.occupied() as f64 / res.pool() as f64;
        fs.resident_tiles = res.resident_count();
        fs.loading_tiles = res.loading_count();
        fs.cpu_ms = t0.elapsed().as_secs_f64() * 1e3;
        let now = Instant::now();
        fs.bandwidth_mbps =
            fs.bytes as f64 / 1e6 / now.duration_since(last_frame_end).as_secs_f64().max(1e-9);
        last_frame_end = now;
        stats.push(fs);
    }
    let wall_s = start.elapsed().as_secs_f64();

    // Screenshot of the last frame.
    let row = (w * 4).next_multiple_of(256);
    let shot = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("screenshot"),
        size: (row * h) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_texture_to_buffer(
        colour.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &shot,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(row),
                rows_per_image: Some(h),
            },
        },
        colour.size(),
    );
    ctx.queue.submit([enc.finish()]);
    shot.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    device.poll(wgpu::PollType::wait_indefinitely())?;
    let mut screenshot = Vec::with_capacity((w * h * 4) as usize);
    {
        let data = shot.slice(..).get_mapped_range()?;
        for y in 0..h {
            screenshot.extend_from_slice(&data[(y * row) as usize..][..(w * 4) as usize]);
        }
    }
    // Let in-flight loads finish before the pool is dropped.
    fence.wait_timeout(next_value - 1, Duration::from_secs(60));
    Ok(RunResult {
        frames: stats,
        screenshot,
        wall_s,
        failed_tiles: res.failed_count(),
        first_failure,
    })
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

fn draw(
    enc: &mut wgpu::CommandEncoder,
    target: &wgpu::Texture,
    pipe: &wgpu::RenderPipeline,
    bg: &wgpu::BindGroup,
    vbuf: &wgpu::Buffer,
    vertices: u32,
    clear: wgpu::Color,
) {
    let view = target.create_view(&Default::default());
    let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some("vt"),
        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
            view: &view,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Clear(clear),
                store: wgpu::StoreOp::Store,
            },
        })],
        depth_stencil_attachment: None,
        timestamp_writes: None,
        occlusion_query_set: None,
        multiview_mask: None,
    });
    pass.set_pipeline(pipe);
    pass.set_bind_group(0, bg, &[]);
    pass.set_vertex_buffer(0, vbuf.slice(..));
    pass.draw(0..vertices, 0..1);
}
