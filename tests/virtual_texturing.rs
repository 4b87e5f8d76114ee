//! The virtual-texturing example, run headless on whatever adapter exists
//! (lavapipe in CI): screenshots are checked pixel by pixel against the
//! colours the CPU reference says each pixel may show, and the stats CSV
//! against its columns. The demo's code is `#[path]`-included, since tests
//! cannot run example binaries.

mod common;

#[path = "../examples/virtual_texturing/lib.rs"]
mod vt;

use std::path::PathBuf;
use std::sync::Mutex;

use gpustream::pack::TextureFormat;
use vt::app::{RunConfig, RunResult};
use vt::camera::Camera;
use vt::content::SceneConfig;

const SCENE: SceneConfig = SceneConfig {
    textures: 4,
    size: 2048,
    format: TextureFormat::Bc7,
};
const W: u32 = 320;
const H: u32 = 180;

/// The pack of `scene`, built once per scene for every test of this binary.
fn pack(scene: &SceneConfig) -> PathBuf {
    static BUILT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let path = scene.pack_path(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.contains(&path) {
        vt::content::ensure_pack(&path, scene, false).expect("build the test pack");
        built.push(path.clone());
    }
    path
}

fn config(pool: u32, frames: u64, speed: f32) -> RunConfig {
    RunConfig {
        scene: SCENE,
        pack: pack(&SCENE),
        images: None,
        planets: 0,
        frames,
        width: W,
        height: H,
        feedback_div: 4,
        pool,
        max_loads: 64,
        speed,
        sync: true,
        progress: false,
        gpu_lz4: false,
    }
}

/// The last frame checked against the CPU reference (see
/// `vt::reference::classify`).
fn classify(r: &RunResult, cfg: &RunConfig) -> (Vec<u8>, usize) {
    let cam = Camera::on_path(
        cfg.scene.textures,
        cfg.frames,
        cfg.speed,
        W as f32 / H as f32,
    );
    vt::reference::classify(&r.screenshot, &cam, &cfg.scene, W, H)
}

fn run(cfg: &RunConfig) -> Option<RunResult> {
    let ctx = common::test_device()?;
    if !common::test_supports(&ctx, gpustream_tools::gpu::Capability::RenderReadback) {
        return None;
    }
    Some(vt::app::run(&ctx, cfg).expect("the demo runs"))
}

#[test]
fn headless_run_shows_the_streamed_tiles() {
    let cfg = config(256, 12, 0.0);
    let Some(r) = run(&cfg) else { return };
    assert_eq!(r.failed_tiles, 0, "{:?}", r.first_failure);
    let uploaded: usize = r.frames.iter().map(|f| f.tiles_uploaded).sum();
    assert!(uploaded > 0, "no tile was streamed");
    let (mips, bad) = classify(&r, &cfg);
    let total = (W * H) as usize;
    assert!(mips.len() > total / 2, "the ground covers most of the view");
    assert!(
        bad * 100 <= total,
        "{bad} of {total} pixels match no tile colour"
    );
    // A static camera with a pool larger than the view needs: the finest
    // mips land (the bottom of the view is at mip 0 or 1).
    let fine = mips.iter().filter(|&&m| m <= 1).count();
    assert!(fine > mips.len() / 10, "only {fine} pixels show mip 0 or 1");

    // The stats CSV: the header names every column, one row per frame.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("stats.csv");
    vt::stats::write_csv(&csv, &r.frames).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "frame",
        "cpu_ms",
        "feedback_ms",
        "tiles_requested",
        "tiles_uploaded",
        "tiles_evicted",
        "submits",
        "bytes",
        "bandwidth_mbps",
        "pool_occupancy",
    ] {
        assert!(
            header.contains(&col),
            "column {col} missing from {header:?}"
        );
    }
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), cfg.frames as usize);
    assert!(rows.iter().all(|r| r.split(',').count() == header.len()));
    let bytes: u64 = r.frames.iter().map(|f| f.bytes).sum();
    assert_eq!(
        bytes,
        uploaded as u64 * 65536,
        "every uploaded tile is 64 KiB"
    );
}

#[test]
fn bc1_tiles_land_where_the_reference_says() {
    // BC1 tiles are 512x256 texels: the non-square tile grid and the 565
    // endpoint colours.
    let mut cfg = config(128, 10, 0.0);
    cfg.scene = SceneConfig {
        textures: 4,
        size: 2048,
        format: TextureFormat::Bc1,
    };
    cfg.pack = pack(&cfg.scene);
    let Some(r) = run(&cfg) else { return };
    assert_eq!(r.failed_tiles, 0, "{:?}", r.first_failure);
    assert!(r.frames.iter().map(|f| f.tiles_uploaded).sum::<usize>() > 0);
    let (mips, bad) = classify(&r, &cfg);
    assert!(mips.len() > (W * H) as usize / 4, "the ground is in view");
    assert!(
        bad * 100 <= (W * H) as usize,
        "{bad} pixels match no tile colour"
    );
    assert!(mips.contains(&0), "mip 0 landed");
}

#[test]
fn a_pool_smaller_than_the_view_evicts_and_shows_coarser_mips() {
    let big = config(256, 24, 0.04);
    let small = config(6, 24, 0.04);
    let Some(rb) = run(&big) else { return };
    let Some(rs) = run(&small) else { return };
    assert_eq!(rs.failed_tiles, 0, "{:?}", rs.first_failure);
    let evicted: usize = rs.frames.iter().map(|f| f.tiles_evicted).sum();
    assert!(evicted > 0, "a moving camera over a 6-tile pool must evict");
    assert!(rs
        .frames
        .iter()
        .all(|f| f.resident_tiles + f.loading_tiles <= 6));
    let (mb, bad_b) = classify(&rb, &big);
    let (ms, bad_s) = classify(&rs, &small);
    let total = (W * H) as usize;
    assert!(
        bad_b * 100 <= total && bad_s * 100 <= total,
        "{bad_b} / {bad_s} bad pixels"
    );
    let mean = |m: &[u8]| m.iter().map(|&x| x as f64).sum::<f64>() / m.len() as f64;
    assert!(
        mean(&ms) > mean(&mb),
        "the small pool shows coarser mips ({} vs {})",
        mean(&ms),
        mean(&mb)
    );
}

#[test]
fn asynchronous_feedback_and_loads_stay_within_the_pool_and_show_valid_tiles() {
    // The demo's default mode: feedback readbacks and tile batches complete
    // whenever they do; whatever has landed, every pixel shows a legal tile.
    let mut cfg = config(12, 30, 0.03);
    cfg.sync = false;
    let Some(r) = run(&cfg) else { return };
    assert_eq!(r.failed_tiles, 0, "{:?}", r.first_failure);
    assert_eq!(r.frames.len(), 30);
    assert!(r
        .frames
        .iter()
        .all(|f| f.resident_tiles + f.loading_tiles <= 12));
    let (_, bad) = classify(&r, &cfg);
    assert!(
        bad * 100 <= (W * H) as usize,
        "{bad} pixels match no tile colour"
    );
}
