//! virtual_texturing: streams the tiles of many large virtual textures into
//! a small physical tile pool with gpustream, driven by a feedback pass, on
//! wgpu (which has neither sparse textures nor sampler feedback, so both
//! are built in shaders). See docs/virtual-texturing.md.
//!
//! In a window (the default; builds its pack under target/vt/ on first
//! run). Keys: W/A/S/D move, Q/E down/up, Shift faster, left-drag to look,
//! Space or P pauses streaming, Tab or V cycles the debug views, H hides
//! the panel, C switches to the fixed path and back, F12 writes a
//! screenshot, Escape closes:
//!
//! ```sh
//! cargo run --release --example virtual_texturing
//! ```
//!
//! Headless run:
//!
//! ```sh
//! cargo run --release --example virtual_texturing -- --headless --frames 300 \
//!     --screenshot target/vt.png --stats target/vt.csv
//! ```
//!
//! Benchmark (fixed camera path, per-frame CSV and a summary):
//!
//! ```sh
//! cargo run --release --example virtual_texturing -- --benchmark --stats target/vt-bench.csv
//! ```
//!
//! Scale down with `--textures 4 --size 4096 --pool 256`.

#[path = "lib.rs"]
mod vt;

use std::path::PathBuf;

use clap::Parser;
use gpustream::pack::TextureFormat;

/// Virtual texturing demo on gpustream.
#[derive(Parser, Debug)]
struct Args {
    /// Render offscreen, no window (tests, benchmarks).
    #[arg(long)]
    headless: bool,
    /// In the window: start on the fixed camera path (C switches).
    #[arg(long)]
    fixed_path: bool,
    /// In the window: start the fly camera at x,y,z,yaw,pitch (radians).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    camera: Option<Vec<f32>>,
    /// In the window: hide the statistics panel (H switches).
    #[arg(long)]
    no_panel: bool,
    /// In the window: the first debug view: image, mip-tint or residency.
    #[arg(long, default_value = "image")]
    view: String,
    /// Benchmark: fixed camera path, per-frame CSV, summary at the end.
    #[arg(long)]
    benchmark: bool,
    /// Frames to render (default 300, or 600 with --benchmark; in a
    /// window: until it is closed).
    #[arg(long)]
    frames: Option<u64>,
    /// Write the last frame as a PNG (in a window: the frame shown when it
    /// closes, read back from the swapchain image; also F12's file).
    #[arg(long)]
    screenshot: Option<PathBuf>,
    /// Write per-frame statistics as CSV.
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Virtual textures of the terrain (one per patch).
    #[arg(long, default_value_t = 16)]
    textures: u32,
    /// Planets beside the terrain, one virtual texture each.
    #[arg(long, default_value_t = 4)]
    planets: u32,
    /// Width and height of each texture's mip 0 (power of two, 1024..=16384).
    #[arg(long, default_value_t = 16384)]
    size: u32,
    /// Block format: bc1 or bc7.
    #[arg(long, default_value = "bc1")]
    format: TextureFormat,
    /// Physical tile pool slots (64 KiB each).
    #[arg(long, default_value_t = 1024)]
    pool: u32,
    /// Most tile loads started per frame.
    #[arg(long, default_value_t = 128)]
    max_loads: usize,
    /// Output width.
    #[arg(long, default_value_t = 1280)]
    width: u32,
    /// Output height.
    #[arg(long, default_value_t = 720)]
    height: u32,
    /// Feedback resolution divisor.
    #[arg(long, default_value_t = 8)]
    feedback_div: u32,
    /// Camera speed, radians per frame along the circular path.
    #[arg(long, default_value_t = 0.004)]
    speed: f32,
    /// Wait each frame for its feedback and tile loads (reproducible).
    #[arg(long)]
    sync: bool,
    /// Decode LZ4 tiles on the GPU (off: the runtime's GPU decode path
    /// currently fails validation for texture destinations).
    #[arg(long)]
    gpu_lz4: bool,
    /// Texture content: images (from --images, encoded with the packer's
    /// BCn encoder) or procedural (flat colour per tile and mip, which the
    /// pixel-exact tests check; fast to build at any size).
    #[arg(long, default_value = "images")]
    content: String,
    /// The directory of png/jpg images for --content images.
    #[arg(long, default_value = "assets")]
    images: PathBuf,
    /// The pack (default: under target/vt/, named after the content).
    #[arg(long)]
    pack: Option<PathBuf>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let scene = vt::content::SceneConfig {
        textures: a.textures + a.planets,
        size: a.size,
        format: a.format,
    };
    scene.validate()?;
    let images = match a.content.as_str() {
        "images" => Some(vt::imagery::list_images(&a.images)?),
        "procedural" => None,
        other => return Err(format!("--content {other}: not images or procedural").into()),
    };
    let dir = PathBuf::from("target/vt");
    let pack = a.pack.clone().unwrap_or_else(|| match &images {
        Some(list) => vt::imagery::pack_path(&dir, &scene, list),
        None => scene.pack_path(&dir),
    });
    let windowed = !a.headless && !a.benchmark;
    let cfg = vt::app::RunConfig {
        scene,
        pack,
        images,
        planets: a.planets,
        frames: a.frames.unwrap_or(if a.benchmark { 600 } else { 300 }),
        width: a.width,
        height: a.height,
        feedback_div: a.feedback_div,
        pool: a.pool,
        max_loads: a.max_loads,
        speed: a.speed,
        sync: a.sync,
        progress: true,
        gpu_lz4: a.gpu_lz4,
    };
    if windowed {
        #[cfg(target_os = "linux")]
        if std::env::var_os("DISPLAY").is_none() {
            return Err(
                "no X display (DISPLAY is unset): run with --headless, or under Xvfb".into(),
            );
        }
        if a.camera.as_ref().is_some_and(|c| c.len() != 5) {
            return Err("--camera takes five numbers: x,y,z,yaw,pitch".into());
        }
        let view = match a.view.as_str() {
            "image" => vt::stream::DebugView::Image,
            "mip-tint" => vt::stream::DebugView::MipTint,
            "residency" => vt::stream::DebugView::Residency,
            other => return Err(format!("--view {other}: not image, mip-tint or residency").into()),
        };
        let r = vt::window::run(vt::window::WindowConfig {
            run: cfg,
            frames: a.frames,
            fixed_path: a.fixed_path,
            start: a.camera.as_deref().map(|c| [c[0], c[1], c[2], c[3], c[4]]),
            panel: !a.no_panel,
            view,
            screenshot: a.screenshot.clone(),
        })?;
        if let Some(p) = &a.stats {
            vt::stats::write_csv(p, &r.frames)?;
            println!("wrote {}", p.display());
        }
        if r.failed_tiles > 0 {
            eprintln!(
                "{} tiles failed to load; first: {}",
                r.failed_tiles,
                r.first_failure.as_deref().unwrap_or("?")
            );
        }
        return Ok(());
    }
    let ctx = gpustream_tools::gpu::open_device()?;
    println!("adapter: {}", ctx.describe());
    println!(
        "scene: {} textures of {}x{} {} ({:.2} GiB), pool {} tiles ({:.0} MiB)",
        scene.textures,
        scene.size,
        scene.size,
        scene.format,
        scene.textures as f64 * scene.texture_bytes() as f64 / (1u64 << 30) as f64,
        cfg.pool,
        cfg.pool as f64 / 16.0
    );
    let r = vt::app::run(&ctx, &cfg)?;
    if let Some(p) = &a.screenshot {
        image::save_buffer(
            p,
            &r.screenshot,
            cfg.width,
            cfg.height,
            image::ExtendedColorType::Rgba8,
        )?;
        println!("wrote {}", p.display());
    }
    if let Some(p) = &a.stats {
        vt::stats::write_csv(p, &r.frames)?;
        println!("wrote {}", p.display());
    }
    if r.failed_tiles > 0 {
        eprintln!(
            "{} tiles failed to load; first: {}",
            r.failed_tiles,
            r.first_failure.as_deref().unwrap_or("?")
        );
    }
    println!("{}", vt::stats::summary(&r.frames, r.wall_s));
    Ok(())
}
