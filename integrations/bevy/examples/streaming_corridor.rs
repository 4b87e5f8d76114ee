//! A corridor of 64 pillars wearing 24 streamed 1024x1024 BC7 textures,
//! with a camera flying down it and back, so mips arrive as pillars come
//! close and leave (least recently used first) when the budget needs room.
//! The line at the top shows resident bytes against the budget and the
//! streaming figures.
//!
//! The textures are made here as PNGs and packed by `gpustream pack`
//! (sRGB BC7) into `target/demo-pack/demo.gspk` on first run. The pack is
//! registered as the asset source `demo`, and the textures are loaded the
//! Bevy way: `asset_server.load("demo://surface_00.png")`.
//!
//! ```sh
//! cargo run --release --example streaming_corridor            # 12 MiB budget
//! cargo run --release --example streaming_corridor -- 4       # a 4 MiB budget: blurrier, more eviction
//! ```
//!
//! `GPUSTREAM_BEVY_SCREENSHOT=out.png` saves a screenshot after
//! `GPUSTREAM_BEVY_FRAMES` frames (default 240) and exits;
//! `GPUSTREAM_BEVY_WINDOW=640x360` sets the window size (default 960x540).

#[path = "common/scene.rs"]
mod scene;

use bevy::diagnostic::FrameTimeDiagnosticsPlugin;
use bevy::prelude::*;
use bevy::render::view::screenshot::{save_to_disk, Screenshot};
use bevy::window::PresentMode;
use gpustream_bevy::{GpuStreamPlugin, PackSourceAppExt};

fn main() -> AppExit {
    let budget_mib: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(12);
    let (width, height) = std::env::var("GPUSTREAM_BEVY_WINDOW")
        .ok()
        .and_then(|s| {
            let (w, h) = s.split_once('x')?;
            Some((w.parse().ok()?, h.parse().ok()?))
        })
        .unwrap_or((960u32, 540u32));
    let pack = scene::pack_path_or_exit();
    let mut app = App::new();
    // Asset sources are built with AssetPlugin: register before DefaultPlugins.
    app.register_pack_source("demo", &pack)
        .expect("the demo pack opens")
        .add_plugins(DefaultPlugins.set(WindowPlugin {
            primary_window: Some(Window {
                title: "gpustream-bevy: streaming corridor".into(),
                resolution: (width, height).into(),
                present_mode: PresentMode::AutoNoVsync,
                ..default()
            }),
            ..default()
        }))
        .add_plugins(FrameTimeDiagnosticsPlugin::default())
        .add_plugins(GpuStreamPlugin {
            budget_bytes: budget_mib << 20,
            max_requests_per_frame: 24,
            ..default()
        })
        .add_systems(Startup, setup);
    scene::add_scene_systems(&mut app);
    if let Some(path) = std::env::var_os("GPUSTREAM_BEVY_SCREENSHOT") {
        let frames = std::env::var("GPUSTREAM_BEVY_FRAMES")
            .ok()
            .and_then(|f| f.parse().ok())
            .unwrap_or(240u32);
        app.insert_resource(ScreenshotAt {
            path: path.into(),
            frames,
            frame: 0,
        })
        .add_systems(Update, screenshot_then_exit);
    }
    app.run()
}

fn setup(
    mut commands: Commands,
    server: Res<AssetServer>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    scene::spawn_scene(
        &mut commands,
        &mut meshes,
        &mut materials,
        scene::load_from_source(&server, "demo"),
        scene::FlyThrough {
            t: 0.0,
            per_second: 0.04,
            per_frame: None,
        },
    );
    scene::spawn_stats_line(&mut commands);
}

#[derive(Resource)]
struct ScreenshotAt {
    path: std::path::PathBuf,
    frames: u32,
    frame: u32,
}

/// Saves one screenshot after the given frames, then exits once it is
/// written.
fn screenshot_then_exit(
    mut commands: Commands,
    mut at: ResMut<ScreenshotAt>,
    mut exit: MessageWriter<AppExit>,
) {
    at.frame += 1;
    if at.frame == at.frames {
        commands
            .spawn(Screenshot::primary_window())
            .observe(save_to_disk(at.path.clone()));
    }
    if at.frame == at.frames + 30 {
        exit.write(AppExit::Success);
    }
}
