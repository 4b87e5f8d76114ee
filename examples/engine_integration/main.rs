//! engine_integration: an existing-style wgpu renderer adopts gpustream.
//!
//! The renderer owns its device and queue, as an engine would. It hands them
//! to a `gpustream::runtime::Runtime`, streams a mesh (a blob into a vertex
//! buffer) and a texture (tile by tile plus its packed mips) from a pack,
//! checks the fence before drawing with them, renders one frame offscreen and
//! writes it as a PNG.
//!
//! Run it headless:
//!
//! ```sh
//! cargo run --release --example engine_integration -- target/engine_integration.png
//! ```
//!
//! It builds its small pack under `target/` first (a 512x512 RGBA8 texture
//! with a full mip chain and a mesh of 2 triangles per grid cell).

use std::time::Duration;

use gpustream::codec::Codec;
use gpustream::completion::Fence;
use gpustream::pack::{PackWriter, TextureFormat, WriterOptions};
use gpustream::runtime::{Destination, QueueConfig, Request, Runtime, RuntimeConfig, Source};

const SIZE: u32 = 512;
const GRID: u32 = 16;
const OUT: u32 = 256;

/// The texture: a checkerboard with a colour gradient, so a screenshot
/// shows at a glance whether tiles landed in the right place.
fn texel(x: u32, y: u32) -> [u8; 4] {
    let check = ((x / 64) + (y / 64)).is_multiple_of(2);
    let (r, g) = ((x * 255 / SIZE) as u8, (y * 255 / SIZE) as u8);
    if check {
        [r, g, 200, 255]
    } else {
        [r / 2, g / 2, 40, 255]
    }
}

fn mips() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut w = SIZE;
    while w >= 1 {
        let step = SIZE / w;
        let mut m = Vec::with_capacity((w * w * 4) as usize);
        for y in 0..w {
            for x in 0..w {
                m.extend_from_slice(&texel(x * step, y * step));
            }
        }
        out.push(m);
        if w == 1 {
            break;
        }
        w /= 2;
    }
    out
}

/// A grid mesh over the screen: position (x, y) and uv per vertex.
fn mesh() -> Vec<f32> {
    let mut v = Vec::new();
    for j in 0..GRID {
        for i in 0..GRID {
            let (u0, v0) = (i as f32 / GRID as f32, j as f32 / GRID as f32);
            let (u1, v1) = ((i + 1) as f32 / GRID as f32, (j + 1) as f32 / GRID as f32);
            let p = |u: f32, t: f32| [u * 1.8 - 0.9, 0.9 - t * 1.8, u, t];
            for c in [
                p(u0, v0),
                p(u1, v0),
                p(u0, v1),
                p(u1, v0),
                p(u1, v1),
                p(u0, v1),
            ] {
                v.extend_from_slice(&c);
            }
        }
    }
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/engine_integration.png".into());

    // The engine's own device and queue.
    let ctx = gpustream_tools::gpu::open_device()?;
    println!("adapter: {}", ctx.describe());

    // The assets, packed once.
    std::fs::create_dir_all("target")?;
    let pack_path = std::path::Path::new("target").join("engine_integration.gspk");
    let verts = mesh();
    {
        let mut w =
            PackWriter::create(&pack_path, WriterOptions::default().with_codec(Codec::Lz4))?;
        w.add_blob("mesh/grid.vb", bytemuck::cast_slice(&verts))?;
        w.add_texture(
            "textures/checker",
            TextureFormat::Rgba8Unorm,
            SIZE,
            SIZE,
            &mips(),
        )?;
        w.finish()?;
    }

    // Adopt gpustream: a runtime on the engine's device, a pack, a queue.
    let runtime = Runtime::new(&ctx.device, &ctx.queue, RuntimeConfig::default())?;
    let pack = runtime.open_pack(&pack_path)?;
    let queue = runtime.create_queue(QueueConfig::default());
    let mesh_id = pack.pack().find("mesh/grid.vb").ok_or("mesh missing")?;
    let tex_id = pack
        .pack()
        .find("textures/checker")
        .ok_or("texture missing")?;
    let info = pack.pack().asset(tex_id).texture.ok_or("not a texture")?;

    let vertex_buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("grid vertices"),
        size: pack.pack().asset(mesh_id).size.next_multiple_of(4),
        usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let texture = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("checker"),
        size: wgpu::Extent3d {
            width: info.width,
            height: info.height,
            depth_or_array_layers: 1,
        },
        mip_level_count: info.mip_count as u32,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: info.format.wgpu(),
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });

    queue.enqueue(
        Request::new(
            Source::Blob {
                pack: pack.clone(),
                asset: mesh_id,
                range: None,
            },
            Destination::Buffer {
                buffer: vertex_buffer.clone(),
                offset: 0,
            },
        )
        .with_name("mesh"),
    )?;
    for mip in 0..info.mip_count {
        if let Some((tx, ty)) = pack.pack().tile_grid(tex_id, mip)? {
            for y in 0..ty {
                for x in 0..tx {
                    let r = pack.pack().tile_region(tex_id, mip, x, y)?;
                    queue.enqueue(Request::new(
                        Source::Tile {
                            pack: pack.clone(),
                            asset: tex_id,
                            mip,
                            x,
                            y,
                        },
                        Destination::Texture {
                            texture: texture.clone(),
                            mip: mip as u32,
                            origin: wgpu::Origin3d {
                                x: r.x,
                                y: r.y,
                                z: 0,
                            },
                            extent: None,
                        },
                    ))?;
                }
            }
        }
    }
    if let Some(first) = pack.pack().packed_mips(tex_id)?.mips.first() {
        queue.enqueue(Request::new(
            Source::PackedMips {
                pack: pack.clone(),
                asset: tex_id,
            },
            Destination::Texture {
                texture: texture.clone(),
                mip: first.mip as u32,
                origin: wgpu::Origin3d::ZERO,
                extent: None,
            },
        ))?;
    }
    let fence = Fence::new();
    queue.enqueue_signal(&fence, 1);
    queue.submit();

    // The engine checks the fence before drawing with the streamed data.
    // (A real frame loop would test `fence.completed_value() >= 1` each
    // frame and draw a placeholder until then.)
    if !fence.wait_timeout(1, Duration::from_secs(60)) {
        return Err("assets did not arrive within 60 s".into());
    }
    let errors = queue.error_record();
    if let Some(f) = errors.first_failure {
        return Err(format!("{} requests failed; first: {f}", errors.failure_count).into());
    }
    println!(
        "streamed {} requests, {} bytes delivered",
        queue.stats().requests,
        queue.stats().bytes_delivered
    );

    // Draw one frame offscreen.
    let shader = ctx
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("engine_integration"),
            source: wgpu::ShaderSource::Wgsl(include_str!("draw.wgsl").into()),
        });
    let target = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("frame"),
        size: wgpu::Extent3d {
            width: OUT,
            height: OUT,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let sampler = ctx.device.create_sampler(&wgpu::SamplerDescriptor {
        min_filter: wgpu::FilterMode::Linear,
        mag_filter: wgpu::FilterMode::Linear,
        mipmap_filter: wgpu::MipmapFilterMode::Linear,
        ..Default::default()
    });
    let pipeline = ctx
        .device
        .create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("draw"),
            layout: None,
            vertex: wgpu::VertexState {
                module: &shader,
                entry_point: Some("vs_main"),
                compilation_options: Default::default(),
                buffers: &[Some(wgpu::VertexBufferLayout {
                    array_stride: 16,
                    step_mode: wgpu::VertexStepMode::Vertex,
                    attributes: &wgpu::vertex_attr_array![0 => Float32x2, 1 => Float32x2],
                })],
            },
            fragment: Some(wgpu::FragmentState {
                module: &shader,
                entry_point: Some("fs_main"),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::TextureFormat::Rgba8Unorm.into())],
            }),
            primitive: Default::default(),
            depth_stencil: None,
            multisample: Default::default(),
            multiview_mask: None,
            cache: None,
        });
    let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::TextureView(
                    &texture.create_view(&Default::default()),
                ),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: wgpu::BindingResource::Sampler(&sampler),
            },
        ],
    });
    let readback = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: (OUT * OUT * 4) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    {
        let view = target.create_view(&Default::default());
        let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("frame"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: None,
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.set_vertex_buffer(0, vertex_buffer.slice(..));
        pass.draw(0..(verts.len() / 4) as u32, 0..1);
    }
    enc.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture: &target,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &readback,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(OUT * 4),
                rows_per_image: Some(OUT),
            },
        },
        wgpu::Extent3d {
            width: OUT,
            height: OUT,
            depth_or_array_layers: 1,
        },
    );
    ctx.queue.submit([enc.finish()]);
    readback.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    ctx.device.poll(wgpu::PollType::wait_indefinitely())?;
    let pixels = readback.slice(..).get_mapped_range()?.to_vec();
    image::save_buffer(
        &out_path,
        &pixels,
        OUT,
        OUT,
        image::ExtendedColorType::Rgba8,
    )?;
    println!("wrote {out_path}");
    Ok(())
}
