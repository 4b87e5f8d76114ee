//! The demo scene the example and the window tests share: procedural
//! textures packed through the packer's BCn path, a corridor of textured
//! pillars, a camera flying down it and back, and a line of streaming
//! figures on screen.

#![allow(dead_code)] // each user takes what it needs

use std::path::PathBuf;
use std::process::Command;

use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::prelude::*;
use gpustream_bevy::{PackId, StreamingSystems, TextureStreamer};

/// Textures in the demo pack.
pub const TEXTURES: usize = 24;
/// Side of each texture in texels (11 mips; BC7 tiles are 256x256).
pub const SIDE: u32 = 1024;
/// Pillar pairs along the corridor.
pub const PAIRS: usize = 32;
/// Distance between pillar pairs.
pub const SPACING: f32 = 4.0;

/// The crate's directory (the example and tests run from anywhere).
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `gpustream` command-line tool: `GPUSTREAM_BIN`, or the main crate's
/// release build, built here if missing.
fn gpustream_bin() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("GPUSTREAM_BIN") {
        return Ok(PathBuf::from(p));
    }
    let root = crate_dir().join("../..");
    let bin = root.join("target/release/gpustream");
    if !bin.exists() {
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--release",
                "--bin",
                "gpustream",
                "--manifest-path",
            ])
            .arg(root.join("Cargo.toml"))
            .status()
            .map_err(|e| format!("cannot run cargo to build the packer: {e}"))?;
        if !status.success() {
            return Err(format!("building the packer failed: {status}"));
        }
    }
    Ok(bin)
}

/// The demo pack, built on first use under `target/demo-pack/`: PNGs made
/// here, packed as sRGB BC7 by `gpustream pack`.
pub fn demo_pack() -> Result<PathBuf, String> {
    let dir = crate_dir().join("target/demo-pack");
    let pack = dir.join("demo.gspk");
    if pack.exists() {
        return Ok(pack);
    }
    let sources = dir.join("textures");
    std::fs::create_dir_all(&sources).map_err(|e| format!("{}: {e}", sources.display()))?;
    for i in 0..TEXTURES {
        let path = sources.join(texture_name(i));
        texture_image(i)
            .save(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let partial = dir.join("demo.gspk.partial");
    let out = Command::new(gpustream_bin()?)
        .args(["pack", "--srgb", "--texture-format", "bc7", "-o"])
        .arg(&partial)
        .arg(&sources)
        .output()
        .map_err(|e| format!("cannot run gpustream pack: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "gpustream pack failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::rename(&partial, &pack).map_err(|e| format!("{}: {e}", pack.display()))?;
    Ok(pack)
}

/// The asset name of texture `i` in the pack.
pub fn texture_name(i: usize) -> String {
    format!("surface_{i:02}.png")
}

/// A small integer hash, for value noise.
fn hash(x: i32, y: i32, seed: u32) -> f32 {
    let mut h = (x as u32).wrapping_mul(0x8DA6_B343)
        ^ (y as u32).wrapping_mul(0xD816_3841)
        ^ seed.wrapping_mul(0xCB1A_B31F);
    h ^= h >> 13;
    h = h.wrapping_mul(0x5BD1_E995);
    h ^= h >> 15;
    (h & 0xFFFF) as f32 / 65535.0
}

/// Smooth value noise at `(x, y)` with lattice spacing `cell`.
fn noise(x: f32, y: f32, cell: f32, seed: u32) -> f32 {
    let (fx, fy) = (x / cell, y / cell);
    let (ix, iy) = (fx.floor() as i32, fy.floor() as i32);
    let (tx, ty) = (fx - fx.floor(), fy - fy.floor());
    let (sx, sy) = (tx * tx * (3.0 - 2.0 * tx), ty * ty * (3.0 - 2.0 * ty));
    let a = hash(ix, iy, seed) + (hash(ix + 1, iy, seed) - hash(ix, iy, seed)) * sx;
    let b = hash(ix, iy + 1, seed) + (hash(ix + 1, iy + 1, seed) - hash(ix, iy + 1, seed)) * sx;
    a + (b - a) * sy
}

/// Texture `i`: one of four surface kinds (bricks, tiles, wood, stone) in
/// its own colour, with detail down to single texels so every mip differs.
pub fn texture_image(i: usize) -> image::RgbImage {
    let hue = i as f32 / TEXTURES as f32 * 6.0;
    let base = Color::hsl(hue * 60.0, 0.55, 0.55).to_srgba();
    let seed = i as u32 * 7 + 1;
    image::RgbImage::from_fn(SIDE, SIDE, |x, y| {
        let (xf, yf) = (x as f32, y as f32);
        let grain = 0.5 * noise(xf, yf, 64.0, seed)
            + 0.25 * noise(xf, yf, 16.0, seed + 1)
            + 0.15 * noise(xf, yf, 4.0, seed + 2)
            + 0.1 * hash(x as i32, y as i32, seed + 3);
        let shade = match i % 4 {
            0 => {
                // Bricks: 128x64 with offset rows and mortar lines.
                let row = y / 64;
                let bx = (x + row % 2 * 64) % 128;
                let mortar = bx < 6 || y % 64 < 6;
                if mortar {
                    0.35
                } else {
                    0.7 + 0.3 * grain
                }
            }
            1 => {
                // Tiles: 256 squares with a bevel and a checker of tones.
                let (cx, cy) = (x % 256, y % 256);
                let edge = cx.min(cy).min(255 - cx).min(255 - cy);
                let tone = if (x / 256 + y / 256) % 2 == 0 {
                    0.85
                } else {
                    0.6
                };
                if edge < 4 {
                    0.3
                } else {
                    tone * (0.8 + 0.2 * grain)
                }
            }
            2 => {
                // Wood: rings around an off-centre axis, warped by noise.
                let d = ((xf - 300.0).powi(2) * 0.02 + (yf - 512.0).powi(2)).sqrt();
                let ring = ((d / 18.0 + 4.0 * grain) * std::f32::consts::TAU).sin();
                0.6 + 0.25 * ring + 0.15 * grain
            }
            _ => 0.35 + 0.65 * grain,
        };
        let c = |v: f32| (v * shade * 255.0).clamp(0.0, 255.0) as u8;
        image::Rgb([c(base.red), c(base.green), c(base.blue)])
    })
}

/// Where the flying camera is along its path.
#[derive(Component)]
pub struct FlyThrough {
    /// Path parameter: 0 at the corridor's start, 1 at its end, 2 back.
    pub t: f32,
    /// Path advance per second of app time, or `None`...
    pub per_second: f32,
    /// ...a fixed advance per frame instead (tests: frames, not seconds,
    /// so two runs see the same views).
    pub per_frame: Option<f32>,
}

/// The camera's pose at path parameter `t`: down the corridor and back,
/// weaving between the pillar rows, looking where it goes.
pub fn fly_pose(t: f32) -> Transform {
    let length = PAIRS as f32 * SPACING;
    let phase = t.rem_euclid(2.0);
    let (along, dir) = if phase < 1.0 {
        (phase, -1.0)
    } else {
        (2.0 - phase, 1.0)
    };
    let z = -along * length + 4.0;
    let x = 2.2 * (along * 9.0).sin();
    let eye = Vec3::new(x, 1.6, z);
    let ahead = Vec3::new(
        2.2 * ((along + 0.02 * -dir) * 9.0).sin(),
        1.4,
        z + dir * 6.0,
    );
    Transform::from_translation(eye).looking_at(ahead, Vec3::Y)
}

/// Moves the camera along its path.
pub fn fly(time: Res<Time>, mut cameras: Query<(&mut FlyThrough, &mut Transform)>) {
    for (mut fly, mut transform) in &mut cameras {
        fly.t += fly.per_frame.unwrap_or(fly.per_second * time.delta_secs());
        *transform = fly_pose(fly.t);
    }
}

/// The streamed images, in texture order.
#[derive(Resource)]
pub struct SceneImages(pub Vec<Handle<Image>>);

/// The demo textures made into streamed images by the streamer itself.
pub fn load_from_streamer(
    streamer: &mut TextureStreamer,
    images: &mut Assets<Image>,
    pack: PackId,
) -> Vec<Handle<Image>> {
    (0..TEXTURES)
        .map(|i| {
            streamer
                .load(images, pack, &texture_name(i))
                .expect("the demo pack has every texture")
        })
        .collect()
}

/// The demo textures loaded through the asset server from the pack
/// registered as asset source `source` (`source://surface_00.png`, ...).
pub fn load_from_source(server: &AssetServer, source: &str) -> Vec<Handle<Image>> {
    (0..TEXTURES)
        .map(|i| server.load(format!("{source}://{}", texture_name(i))))
        .collect()
}

/// Spawns the corridor: `PAIRS` pairs of pillars wearing `handles` (each
/// texture on several), a floor, a light and the flying camera.
pub fn spawn_scene(
    commands: &mut Commands,
    meshes: &mut Assets<Mesh>,
    materials: &mut Assets<StandardMaterial>,
    handles: Vec<Handle<Image>>,
    fly: FlyThrough,
) {
    let mats: Vec<Handle<StandardMaterial>> = handles
        .iter()
        .map(|h| {
            materials.add(StandardMaterial {
                base_color_texture: Some(h.clone()),
                perceptual_roughness: 0.8,
                ..default()
            })
        })
        .collect();
    let pillar = meshes.add(Cuboid::new(2.0, 4.0, 2.0));
    for pair in 0..PAIRS {
        for (side, x) in [(0, -4.0), (1, 4.0)] {
            let material = mats[(pair * 2 + side) % TEXTURES].clone();
            commands.spawn((
                Mesh3d(pillar.clone()),
                MeshMaterial3d(material),
                Transform::from_xyz(x, 2.0, -(pair as f32) * SPACING),
            ));
        }
    }
    commands.spawn((
        Mesh3d(
            meshes.add(
                Plane3d::default()
                    .mesh()
                    .size(12.0, PAIRS as f32 * SPACING + 12.0),
            ),
        ),
        MeshMaterial3d(materials.add(StandardMaterial {
            base_color: Color::srgb(0.25, 0.25, 0.28),
            perceptual_roughness: 1.0,
            ..default()
        })),
        Transform::from_xyz(0.0, 0.0, -(PAIRS as f32) * SPACING * 0.5),
    ));
    commands.spawn((
        DirectionalLight {
            illuminance: 6_000.0,
            ..default()
        },
        Transform::from_xyz(3.0, 10.0, 4.0).looking_at(Vec3::new(0.0, 0.0, -20.0), Vec3::Y),
    ));
    commands.insert_resource(GlobalAmbientLight {
        brightness: 600.0,
        ..default()
    });
    commands.spawn((
        Camera3d::default(),
        // Tonemapping LUTs are a Cargo feature this crate leaves out.
        Tonemapping::Reinhard,
        fly_pose(fly.t),
        fly,
    ));
    commands.insert_resource(SceneImages(handles));
}

/// The on-screen line of budget and streaming figures.
#[derive(Component)]
pub struct StatsLine;

/// Spawns the figures line at the top left.
pub fn spawn_stats_line(commands: &mut Commands) {
    commands.spawn((
        Text::new("gpustream"),
        TextFont {
            font_size: bevy::text::FontSize::Px(15.0),
            ..default()
        },
        TextColor(Color::WHITE),
        BackgroundColor(Color::srgba(0.0, 0.0, 0.0, 0.6)),
        Node {
            position_type: PositionType::Absolute,
            top: Val::Px(6.0),
            left: Val::Px(6.0),
            padding: UiRect::all(Val::Px(4.0)),
            ..default()
        },
        StatsLine,
    ));
}

/// Writes the figures into the line.
pub fn update_stats_line(
    streamer: Res<TextureStreamer>,
    diagnostics: Res<bevy::diagnostic::DiagnosticsStore>,
    mut lines: Query<&mut Text, With<StatsLine>>,
) {
    use gpustream_bevy::diagnostics as d;
    let s = streamer.stats();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let smoothed = |p: &bevy::diagnostic::DiagnosticPath| {
        diagnostics.get(p).and_then(|x| x.smoothed()).unwrap_or(0.0)
    };
    let (rate, fence) = (smoothed(&d::BYTES_PER_SECOND), smoothed(&d::FENCE_LATENCY));
    let fps = diagnostics
        .get(&bevy::diagnostic::FrameTimeDiagnosticsPlugin::FPS)
        .and_then(|x| x.smoothed())
        .unwrap_or(0.0);
    for mut text in &mut lines {
        text.0 = format!(
            "resident {:.1} / budget {:.1} MiB (+{:.1} in flight; {:.1} allocated) | \
             {} req/frame, {:.1} MiB/s, fence {:.0} ms | mips in {} out {} | {:.0} fps",
            mib(s.resident_bytes),
            mib(s.budget_bytes),
            mib(s.in_flight_bytes),
            mib(s.allocated_bytes),
            s.requests_last_frame,
            rate,
            fence,
            s.mips_loaded,
            s.mips_evicted,
            fps,
        );
    }
}

/// Adds the camera path and the figures line to an app.
pub fn add_scene_systems(app: &mut App) {
    app.add_systems(Update, fly)
        .add_systems(PostUpdate, update_stats_line.after(StreamingSystems::View));
}

/// The demo pack's path, or a message for the skip or failure.
pub fn pack_path_or_exit() -> PathBuf {
    match demo_pack() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cannot build the demo pack: {e}");
            std::process::exit(2);
        }
    }
}
