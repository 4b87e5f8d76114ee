//! The headless run: the fixed camera path rendered offscreen by the
//! streaming renderer (`stream.rs`), per-frame statistics, and the last
//! frame read back as a screenshot.

use std::path::PathBuf;
use std::time::Instant;

use gpustream_tools::gpu::GpuContext;

use super::camera::Camera;
use super::content::SceneConfig;
use super::stats::FrameStats;
use super::stream::{FrameOptions, Streamer};

/// One run of the demo.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The scene (pack contents).
    pub scene: SceneConfig,
    /// The pack file (built if missing or different).
    pub pack: PathBuf,
    /// Build the pack from these images (`imagery.rs`); None: procedural
    /// content (`content.rs`), which the pixel-exact tests check.
    pub images: Option<Vec<PathBuf>>,
    /// How many of the scene's textures (the last ones) are planets; the
    /// rest are terrain patches.
    pub planets: u32,
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

impl RunConfig {
    /// Terrain patches: the textures that are not planets.
    pub fn terrain(&self) -> u32 {
        self.scene.textures.saturating_sub(self.planets)
    }
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

/// Builds the pack if needed and renders `cfg.frames` frames headless
/// along the fixed camera path.
pub fn run(ctx: &GpuContext, cfg: &RunConfig) -> Result<RunResult, Box<dyn std::error::Error>> {
    let device = &ctx.device;
    let mut s = Streamer::new(device, &ctx.queue, cfg, wgpu::TextureFormat::Rgba8Unorm)?;
    let (w, h) = (cfg.width, cfg.height);
    let colour = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("frame"),
        size: wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let view = colour.create_view(&Default::default());
    let mut stats = Vec::with_capacity(cfg.frames as usize);
    let start = Instant::now();
    for frame in 1..=cfg.frames {
        let cam = Camera::on_path(cfg.terrain(), frame, cfg.speed, w as f32 / h as f32);
        stats.push(s.frame(&cam, FrameOptions::default(), &view, &mut |_| {})?);
    }
    let wall_s = start.elapsed().as_secs_f64();
    let screenshot = read_texture(device, &ctx.queue, &colour)?;
    Ok(RunResult {
        frames: stats,
        screenshot,
        wall_s,
        failed_tiles: s.failed_tiles(),
        first_failure: s.first_failure.take(),
    })
}

/// Copies a 4-byte-per-texel texture back, rows packed, and waits for it.
pub fn read_texture(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    texture: &wgpu::Texture,
) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let (w, h) = (texture.width(), texture.height());
    let row = (w * 4).next_multiple_of(256);
    let shot = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("screenshot"),
        size: (row * h) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    copy_to_buffer(&mut enc, texture, &shot);
    queue.submit([enc.finish()]);
    read_buffer(device, &shot, w, h)
}

/// Records a copy of `texture` (4 bytes per texel) into `buffer`, rows
/// padded to 256 bytes.
pub fn copy_to_buffer(
    enc: &mut wgpu::CommandEncoder,
    texture: &wgpu::Texture,
    buffer: &wgpu::Buffer,
) {
    let (w, h) = (texture.width(), texture.height());
    enc.copy_texture_to_buffer(
        texture.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some((w * 4).next_multiple_of(256)),
                rows_per_image: Some(h),
            },
        },
        texture.size(),
    );
}

/// Maps a buffer `copy_to_buffer` filled, waits, and returns its rows packed.
pub fn read_buffer(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    w: u32,
    h: u32,
) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let row = (w * 4).next_multiple_of(256);
    buffer.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    device.poll(wgpu::PollType::wait_indefinitely())?;
    let mut out = Vec::with_capacity((w * h * 4) as usize);
    {
        let data = buffer.slice(..).get_mapped_range()?;
        for y in 0..h {
            out.extend_from_slice(&data[(y * row) as usize..][..(w * 4) as usize]);
        }
    }
    buffer.unmap();
    Ok(out)
}
