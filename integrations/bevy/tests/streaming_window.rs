//! The plugin in a real window: an X server (Xvfb, started here on a free
//! display) and whatever Vulkan adapter exists (lavapipe in CI). Each check
//! runs the demo corridor in its own process, because winit allows one event
//! loop per process and wants it on the main thread:
//!
//! - `budget`: flying the corridor under a tight budget, resident plus
//!   in-flight bytes never pass it, in any frame, while mips both arrive and
//!   are evicted;
//! - `readback`: once a texture is fully resident, every mip read back from
//!   its GPU texture equals the pack's bytes, and the image's view starts at
//!   the finest resident mip;
//! - `asset_source`: the same, for images loaded the Bevy way,
//!   `asset_server.load("demo://surface_04.png")`, from the pack registered
//!   as an asset source: they are streamed images (no CPU data, the full
//!   chain) that the streamer adopts and fills;
//! - `frame_times`: the same flight with streaming on and with every mip
//!   preloaded; the frame-time distributions are printed side by side. Only
//!   robust facts are asserted (both runs render every frame, the streaming
//!   run streams during the flight); timing is reported, not asserted, since
//!   a shared 2-core VM makes thresholds flaky.
//!
//! Without Xvfb or a Vulkan adapter the test says so loudly and skips,
//! unless `GPUSTREAM_REQUIRE_GPU=1` (CI), which makes that a failure.
//! A plain harness (`harness = false`): `main` starts the checks as child
//! processes of this binary with `--scenario NAME`.

#[path = "../examples/common/scene.rs"]
mod scene;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::prelude::*;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured};
use bevy::window::PresentMode;
use bevy::winit::{UpdateMode, WinitSettings};
use gpustream_bevy::{GpuStreamPlugin, PackSourceAppExt, StreamingSystems, TextureStreamer};

const W: u32 = 480;
const H: u32 = 270;
/// Frames of the measured flight (one pass down the corridor and back).
const FLIGHT_FRAMES: u32 = 360;

/// An Xvfb server, killed when dropped.
struct Xvfb(Child);

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn required() -> bool {
    std::env::var("GPUSTREAM_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Skips (or, under GPUSTREAM_REQUIRE_GPU=1, fails) with a loud notice.
fn skip(why: &str) -> ! {
    if required() {
        eprintln!("FAILED: GPUSTREAM_REQUIRE_GPU=1 but {why}");
        std::process::exit(1);
    }
    eprintln!("\n*** SKIPPED: {why} ***\n");
    std::process::exit(0);
}

/// Starts Xvfb on the first display number without a socket.
fn start_xvfb() -> Result<(Xvfb, String), String> {
    let n = (90..190)
        .find(|n| {
            !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
                && !Path::new(&format!("/tmp/.X{n}-lock")).exists()
        })
        .ok_or("no free X display number in 90..190")?;
    let child = Command::new("Xvfb")
        .args([
            &format!(":{n}"),
            "-screen",
            "0",
            "800x600x24",
            "-nolisten",
            "tcp",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start Xvfb ({e}); install the xvfb package"))?;
    let xvfb = Xvfb(child);
    let socket = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
    let t = Instant::now();
    while !socket.exists() {
        if t.elapsed() > Duration::from_secs(20) {
            return Err(format!("Xvfb :{n} did not come up within 20 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((xvfb, format!(":{n}")))
}

/// Whether wgpu finds any adapter on the backends `WGPU_BACKEND` allows.
fn adapter_found() -> Option<String> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter =
        bevy::tasks::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
            .ok()?;
    Some(format!("{:?}", adapter.get_info().name))
}

/// A private runtime directory for the children (winit warns without one).
fn xdg_runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        return PathBuf::from(d);
    }
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xdg-runtime");
    let _ = std::fs::create_dir_all(&d);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    }
    d
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--scenario") {
        let name = args.get(i + 1).cloned().unwrap_or_default();
        std::process::exit(run_scenario(&name));
    }
    // `cargo test -- --list` and filters: one test, named after the file.
    if args.iter().any(|a| a == "--list") {
        println!("streaming_window: test");
        return;
    }
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // Before any thread starts: the Vulkan loader and winit read it.
        std::env::set_var("XDG_RUNTIME_DIR", xdg_runtime_dir());
    }
    let Some(adapter) = adapter_found() else {
        skip("no wgpu adapter (for lavapipe: apt-get install mesa-vulkan-drivers)")
    };
    let pack = match scene::demo_pack() {
        Ok(p) => p,
        Err(e) => panic!("cannot build the demo pack: {e}"),
    };
    let (_xvfb, display) = match start_xvfb() {
        Ok(x) => x,
        Err(e) => skip(&e),
    };
    println!(
        "adapter {adapter}, pack {}, X display {display}",
        pack.display()
    );
    let mut failed = Vec::new();
    let mut outputs = Vec::new();
    let checks = [
        "budget",
        "readback",
        "asset_source",
        "frame_times_streaming",
        "frame_times_preloaded",
    ];
    for name in checks {
        let t = Instant::now();
        let out = Command::new(std::env::current_exe().expect("own path"))
            .args(["--scenario", name])
            .env("DISPLAY", &display)
            .env("GPUSTREAM_BEVY_PACK", &pack)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("the test binary runs itself");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let ok = out.status.success();
        println!(
            "check {name} ... {} ({:.1} s)",
            if ok { "ok" } else { "FAILED" },
            t.elapsed().as_secs_f64()
        );
        for line in stdout.lines().filter(|l| !l.starts_with("frame_ms ")) {
            println!("    {line}");
        }
        if !ok {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
            for line in tail.into_iter().rev() {
                println!("    stderr: {line}");
            }
            failed.push(name);
        }
        outputs.push((name, stdout));
    }
    report_frame_times(&outputs);
    if !failed.is_empty() {
        eprintln!("failed checks: {failed:?}");
        std::process::exit(1);
    }
    println!("test result: ok. {} checks passed", checks.len());
}

/// Prints the two runs' distributions and their ratios.
fn report_frame_times(outputs: &[(&str, String)]) {
    let read = |name: &str| -> Option<Vec<f64>> {
        let (_, out) = outputs.iter().find(|(n, _)| *n == name)?;
        let line = out.lines().find(|l| l.starts_with("frame_ms "))?;
        Some(
            line["frame_ms ".len()..]
                .split(',')
                .filter_map(|v| v.parse().ok())
                .collect(),
        )
    };
    let (Some(mut s), Some(mut p)) = (read("frame_times_streaming"), read("frame_times_preloaded"))
    else {
        return;
    };
    s.sort_by(f64::total_cmp);
    p.sort_by(f64::total_cmp);
    let q = |v: &[f64], f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "frame times over {} frames (ms): run       p50    p90    p99    max   mean",
        s.len()
    );
    for (name, v) in [("streaming", &s), ("preloaded", &p)] {
        println!(
            "                                {name:<9} {:6.1} {:6.1} {:6.1} {:6.1} {:6.1}",
            q(v, 0.5),
            q(v, 0.9),
            q(v, 0.99),
            v[v.len() - 1],
            mean(v)
        );
    }
    println!(
        "streaming / preloaded: p50 {:.2}x, p90 {:.2}x, p99 {:.2}x, mean {:.2}x",
        q(&s, 0.5) / q(&p, 0.5),
        q(&s, 0.9) / q(&p, 0.9),
        q(&s, 0.99) / q(&p, 0.99),
        mean(&s) / mean(&p)
    );
}

/// What one child process checks.
#[derive(Resource, Clone, Copy, PartialEq, Eq, Debug)]
enum Check {
    Budget,
    /// Images made by `TextureStreamer::load`, or loaded through the asset
    /// server from the pack as an asset source.
    Readback {
        via_source: bool,
    },
    FrameTimes {
        preload: bool,
    },
}

/// The asset source name the `asset_source` check registers the pack as.
const SOURCE: &str = "demo";

/// Per-run state of a check.
#[derive(Resource, Default)]
struct Progress {
    frame: u32,
    /// Frame at which the flight (and measurement) started.
    started: Option<u32>,
    frame_ms: Vec<f64>,
    max_committed: u64,
    requests_at_start: u64,
    failure: Option<String>,
    done: bool,
}

fn run_scenario(name: &str) -> i32 {
    let check = match name {
        "budget" => Check::Budget,
        "readback" => Check::Readback { via_source: false },
        "asset_source" => Check::Readback { via_source: true },
        "frame_times_streaming" => Check::FrameTimes { preload: false },
        "frame_times_preloaded" => Check::FrameTimes { preload: true },
        other => {
            eprintln!("unknown scenario {other}");
            return 2;
        }
    };
    let pack = PathBuf::from(std::env::var_os("GPUSTREAM_BEVY_PACK").expect("set by the parent"));
    let plugin = match check {
        // Tails (24 x ~21 KiB) plus 4 MiB: a few pillars' full chains.
        Check::Budget => GpuStreamPlugin {
            budget_bytes: 4 << 20,
            max_requests_per_frame: 16,
            ..default()
        },
        // Every visible texture wants mip 0 (a strong negative bias) and the
        // budget holds them all.
        Check::Readback { .. } => GpuStreamPlugin {
            budget_bytes: 64 << 20,
            max_requests_per_frame: 32,
            mip_bias: -8.0,
            extra_texture_usages: wgpu::TextureUsages::COPY_SRC,
            ..default()
        },
        Check::FrameTimes { preload } => GpuStreamPlugin {
            budget_bytes: 8 << 20,
            max_requests_per_frame: 16,
            preload_all: preload,
            ..default()
        },
    };
    let mut app = App::new();
    if check == (Check::Readback { via_source: true }) {
        // Before DefaultPlugins: AssetPlugin builds the sources it knows.
        app.register_pack_source(SOURCE, &pack)
            .expect("the demo pack registers as an asset source");
    }
    app.add_plugins(DefaultPlugins.set(WindowPlugin {
        primary_window: Some(Window {
            title: format!("gpustream-bevy test: {name}"),
            resolution: (W, H).into(),
            present_mode: PresentMode::AutoNoVsync,
            ..default()
        }),
        ..default()
    }))
    // Under Xvfb the window may never be focused: keep updating regardless.
    .insert_resource(WinitSettings {
        focused_mode: UpdateMode::Continuous,
        unfocused_mode: UpdateMode::Continuous,
    })
    .add_plugins(plugin)
    .insert_resource(check)
    .insert_resource(Progress::default())
    .insert_resource(PackFile(pack))
    .init_resource::<ShotSlot>()
    .add_systems(Startup, setup)
    .add_systems(PostUpdate, observe.after(StreamingSystems::View))
    .add_systems(Update, scene::fly);
    match app.run() {
        AppExit::Success => 0,
        AppExit::Error(code) => i32::from(code.get()),
    }
}

#[derive(Resource)]
struct PackFile(PathBuf);

/// The screenshot the readback check takes, once captured.
#[derive(Resource, Clone, Default)]
struct ShotSlot(Arc<Mutex<Option<Image>>>);

/// Least detail the readback check's frame must show. Measured on lavapipe
/// at 480x270: 0.16 with the streamed mips drawn, 0.05 with materials left
/// bound to the first (1x1) view.
const MIN_DETAIL: f64 = 0.10;

/// The share (0..1) of horizontally neighbouring pixels whose luminances
/// differ by at least 4 of 255: texel detail (mortar, grain) makes many,
/// flat faces few (only the edges of the geometry).
fn detail(image: Image) -> f64 {
    let Ok(dynamic) = image.try_into_dynamic() else {
        return 0.0;
    };
    let luma = dynamic.to_luma8();
    let (mut edges, mut n) = (0u64, 0u64);
    // Below the figures line, which is text on a plain band.
    for y in (luma.height() / 6..luma.height()).step_by(2) {
        for x in 0..luma.width() - 1 {
            edges += u64::from(luma.get_pixel(x, y)[0].abs_diff(luma.get_pixel(x + 1, y)[0]) >= 4);
            n += 1;
        }
    }
    edges as f64 / n.max(1) as f64
}

#[allow(clippy::too_many_arguments)]
fn setup(
    mut commands: Commands,
    check: Res<Check>,
    pack: Res<PackFile>,
    server: Res<AssetServer>,
    mut streamer: ResMut<TextureStreamer>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let handles = if *check == (Check::Readback { via_source: true }) {
        scene::load_from_source(&server, SOURCE)
    } else {
        let pack = streamer.add_pack(&pack.0).expect("the demo pack opens");
        scene::load_from_streamer(&mut streamer, &mut images, pack)
    };
    // Paused at the corridor's start until a check starts the flight.
    let fly = scene::FlyThrough {
        t: 0.0,
        per_second: 0.0,
        per_frame: Some(0.0),
    };
    scene::spawn_scene(&mut commands, &mut meshes, &mut materials, handles, fly);
}

/// Runs every frame after the plugin: checks, measures, and ends the run.
#[allow(clippy::too_many_arguments)]
fn observe(
    check: Res<Check>,
    mut progress: ResMut<Progress>,
    streamer: Res<TextureStreamer>,
    time: Res<Time<Real>>,
    images: Res<Assets<Image>>,
    scene_images: Option<Res<scene::SceneImages>>,
    mut flyers: Query<&mut scene::FlyThrough>,
    device: Option<Res<RenderDevice>>,
    queue: Option<Res<RenderQueue>>,
    shot: Res<ShotSlot>,
    server: Res<AssetServer>,
    mut commands: Commands,
    mut exit: MessageWriter<AppExit>,
) {
    if progress.done {
        return;
    }
    progress.frame += 1;
    let frame = progress.frame;
    if let Some(e) = streamer.runtime_error() {
        fail(
            &mut progress,
            &mut exit,
            format!("gpustream runtime did not start: {e}"),
        );
        return;
    }
    let s = streamer.stats();
    let committed = s.resident_bytes + s.in_flight_bytes;
    progress.max_committed = progress.max_committed.max(committed);
    if committed > s.budget_bytes {
        fail(
            &mut progress,
            &mut exit,
            format!(
                "frame {frame}: resident {} + in flight {} > budget {}",
                s.resident_bytes, s.in_flight_bytes, s.budget_bytes
            ),
        );
        return;
    }
    if frame > 3000 {
        fail(
            &mut progress,
            &mut exit,
            format!("no result after {frame} frames; stats {s:?}"),
        );
        return;
    }
    let Some(scene_images) = scene_images else {
        return;
    };
    match *check {
        Check::Budget | Check::FrameTimes { .. } => {
            // Start the flight once every tail (and, preloading, every mip)
            // is resident, after a few frames of warm-up.
            let ready = match *check {
                Check::FrameTimes { preload: true } => streamer.all_resident(),
                _ => scene_images
                    .0
                    .iter()
                    .all(|h| streamer.residency(h).is_some_and(|r| r.base.is_some())),
            };
            match progress.started {
                None if ready && frame > 10 => {
                    progress.started = Some(frame);
                    progress.requests_at_start = s.requests;
                    for mut f in &mut flyers {
                        f.per_frame = Some(2.0 / FLIGHT_FRAMES as f32);
                    }
                }
                None => {}
                Some(start) => {
                    progress.frame_ms.push(time.delta_secs_f64() * 1000.0);
                    if frame - start >= FLIGHT_FRAMES {
                        finish_flight(&check, &mut progress, &streamer, &mut exit);
                    }
                }
            }
        }
        Check::Readback { via_source } => {
            // Texture 4 is on the left pillar of the third pair, in view
            // from the paused camera.
            let handle = &scene_images.0[4];
            if let bevy::asset::LoadState::Failed(e) = server.load_state(handle) {
                return fail(&mut progress, &mut exit, format!("loading failed: {e}"));
            }
            let Some(r) = streamer.residency(handle) else {
                // Streamer-made images are streamed from the start; an asset
                // source's are adopted once loaded, a few frames in.
                if via_source && frame > 600 {
                    fail(
                        &mut progress,
                        &mut exit,
                        format!(
                            "{} was never handed to the streamer",
                            server
                                .get_path(handle)
                                .map(|p| p.to_string())
                                .unwrap_or_default()
                        ),
                    );
                }
                return;
            };
            if r.base != Some(0) {
                return;
            }
            if progress.started.is_none() {
                let (Some(device), Some(queue)) = (device, queue) else {
                    return;
                };
                match read_back_and_compare(&streamer, &images, handle, &device, &queue) {
                    Ok(line) => println!("{line}"),
                    Err(e) => return fail(&mut progress, &mut exit, e),
                }
                progress.started = Some(frame);
                return;
            }
            // Then what is drawn: a few frames on (materials rebind a frame
            // after their views move), a screenshot must show texture detail.
            // A bind group stuck on a stale view samples the smallest mip and
            // draws flat faces.
            let start = progress.started.unwrap_or(frame);
            if frame == start + 8 {
                let slot = shot.0.clone();
                commands.spawn(Screenshot::primary_window()).observe(
                    move |captured: On<ScreenshotCaptured>| {
                        *slot.lock().expect("not poisoned") = Some(captured.image.clone());
                    },
                );
            }
            let taken = shot.0.lock().expect("not poisoned").take();
            if let Some(image) = taken {
                progress.done = true;
                let detail = detail(image);
                println!("screenshot detail (share of neighbouring pixels differing by 4/255 or more): {detail:.3}");
                if detail < MIN_DETAIL {
                    fail(&mut progress, &mut exit, format!("the drawn frame is flat (detail {detail:.3} < {MIN_DETAIL}): materials do not sample the streamed mips"));
                } else {
                    exit.write(AppExit::Success);
                }
            }
        }
    }
}

fn finish_flight(
    check: &Check,
    progress: &mut Progress,
    streamer: &TextureStreamer,
    exit: &mut MessageWriter<AppExit>,
) {
    progress.done = true;
    let s = streamer.stats();
    let flight_requests = s.requests - progress.requests_at_start;
    println!(
        "budget {} B, max resident+in-flight {} B over {} frames; mips loaded {}, evicted {}, requests {} ({} during the flight), failed {}",
        s.budget_bytes.min(u64::MAX >> 1),
        progress.max_committed,
        progress.frame,
        s.mips_loaded,
        s.mips_evicted,
        s.requests,
        flight_requests,
        s.failed_requests
    );
    let frame_ms: Vec<String> = progress
        .frame_ms
        .iter()
        .map(|v| format!("{v:.3}"))
        .collect();
    println!("frame_ms {}", frame_ms.join(","));
    let problem = match check {
        _ if s.failed_requests > 0 => Some(format!("{} requests failed", s.failed_requests)),
        _ if progress.frame_ms.len() < FLIGHT_FRAMES as usize => {
            Some("the flight was cut short".to_string())
        }
        Check::Budget if s.mips_evicted == 0 => {
            Some("no mip was evicted: the budget was never under pressure".to_string())
        }
        Check::Budget if s.mips_loaded <= scene::TEXTURES as u64 => {
            Some("no mip finer than the tails was loaded".to_string())
        }
        Check::FrameTimes { preload: false } if flight_requests == 0 => {
            Some("nothing streamed during the flight".to_string())
        }
        Check::FrameTimes { preload: true } if flight_requests != 0 => {
            Some("preloaded, yet requests went out during the flight".to_string())
        }
        _ => None,
    };
    match problem {
        Some(p) => {
            eprintln!("FAILED: {p}");
            exit.write(AppExit::error());
        }
        None => {
            exit.write(AppExit::Success);
        }
    }
}

fn fail(progress: &mut Progress, exit: &mut MessageWriter<AppExit>, why: String) {
    eprintln!("FAILED: {why}");
    progress.failure = Some(why);
    progress.done = true;
    exit.write(AppExit::error());
}

/// Reads every mip of the image's texture back and compares it with the
/// pack's bytes for that texture, and checks the view's first level.
fn read_back_and_compare(
    streamer: &TextureStreamer,
    images: &Assets<Image>,
    handle: &Handle<Image>,
    device: &RenderDevice,
    queue: &RenderQueue,
) -> Result<String, String> {
    let residency = streamer.residency(handle).ok_or("not streamed")?;
    let image = images
        .get(handle)
        .ok_or("the image is not in Assets<Image>")?;
    if image.data.is_some() {
        return Err("the image has CPU data: it was not made as a streamed image".into());
    }
    if image.texture_descriptor.mip_level_count != u32::from(residency.mip_count) {
        return Err(format!(
            "the image has {} mip levels, the pack's texture {}",
            image.texture_descriptor.mip_level_count, residency.mip_count
        ));
    }
    let view_base = image
        .texture_view_descriptor
        .as_ref()
        .map(|v| v.base_mip_level);
    if view_base != residency.base.map(u32::from) {
        return Err(format!(
            "view starts at {view_base:?}, finest resident mip is {:?}",
            residency.base
        ));
    }
    let texture = streamer.gpu_texture(handle).ok_or("no GPU texture")?;
    let path = streamer.pack_path(handle).ok_or("no pack")?;
    let pack = gpustream::pack::Pack::open(path).map_err(|e| e.to_string())?;
    let name = streamer
        .images()
        .find(|(h, _)| *h == handle)
        .map(|(_, n)| n.to_string())
        .ok_or("no name")?;
    let asset = pack.find(&name).ok_or("asset not in pack")?;
    let expected = pack.read_texture_mips(asset).map_err(|e| e.to_string())?;
    let format = texture.format();
    let (bw, bh) = format.block_dimensions();
    let block_bytes = format.block_copy_size(None).ok_or("no block size")?;
    let mut compared = 0usize;
    for (mip, want) in expected.iter().enumerate() {
        let size = texture
            .size()
            .mip_level_size(mip as u32, wgpu::TextureDimension::D2)
            .physical_size(format);
        let (bx, by) = (size.width / bw, size.height / bh);
        let row = bx * block_bytes;
        let padded =
            row.div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
        let buffer = device.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: u64::from(padded * by),
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
            mapped_at_creation: false,
        });
        let mut encoder = device
            .wgpu_device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &texture,
                mip_level: mip as u32,
                origin: wgpu::Origin3d::ZERO,
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded),
                    rows_per_image: Some(by),
                },
            },
            size,
        );
        let wgpu_queue: &wgpu::Queue = queue;
        wgpu_queue.submit([encoder.finish()]);
        let slice = buffer.slice(..);
        slice.map_async(wgpu::MapMode::Read, |r| r.expect("readback maps"));
        device
            .wgpu_device()
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| e.to_string())?;
        let data = slice.get_mapped_range().map_err(|e| format!("{e:?}"))?;
        let mut got = Vec::with_capacity(want.len());
        for y in 0..by as usize {
            let start = y * padded as usize;
            got.extend_from_slice(&data[start..start + row as usize]);
        }
        drop(data);
        buffer.unmap();
        if got != *want {
            let first = got.iter().zip(want.iter()).position(|(a, b)| a != b);
            return Err(format!(
                "mip {mip}: {} bytes read back differ from the pack's {} (first difference at {first:?})",
                got.len(),
                want.len()
            ));
        }
        compared += want.len();
    }
    Ok(format!(
        "texture {name}: all {} mips ({compared} bytes) read back equal to the pack; view base {:?}",
        expected.len(),
        view_base
    ))
}
