//! The virtual-texturing demo in a real window: an X server (Xvfb, started
//! here on a free display) and whatever Vulkan adapter exists (lavapipe in
//! CI). A window opens, frames render into its swapchain, and the image
//! read back from the swapchain is checked pixel by pixel against the CPU
//! reference, as the headless tests check their offscreen frames.
//!
//! Without Xvfb (or a Vulkan adapter) the test says so loudly and skips,
//! unless `GPUSTREAM_REQUIRE_GPU=1` (CI), which makes that a failure.
//! One test per binary: winit allows one event loop per process.

#[path = "../examples/virtual_texturing/lib.rs"]
mod vt;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpustream::pack::TextureFormat;
use vt::app::RunConfig;
use vt::content::SceneConfig;
use vt::stream::DebugView;
use vt::window::WindowConfig;

const W: u32 = 320;
const H: u32 = 180;

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
fn skip(why: &str) {
    assert!(!required(), "GPUSTREAM_REQUIRE_GPU=1 but {why}");
    eprintln!("\n*** SKIPPED: {why} ***\n");
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
            "640x480x24",
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

#[test]
fn a_window_opens_renders_and_its_screenshot_matches_the_reference() {
    let (_xvfb, display) = match start_xvfb() {
        Ok(x) => x,
        Err(why) => return skip(&why),
    };
    // Winit's X11 backend reads DISPLAY. This binary has one test, and it
    // sets the variable before any thread that reads the environment
    // (winit, wgpu, the runtime) starts.
    std::env::set_var("DISPLAY", &display);

    let scene = SceneConfig {
        textures: 4,
        size: 2048,
        format: TextureFormat::Bc7,
    };
    let pack = scene.pack_path(&PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("window"));
    std::fs::create_dir_all(pack.parent().unwrap()).unwrap();
    vt::content::ensure_pack(&pack, &scene, false).expect("build the test pack");
    let frames = 12;
    let shot_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vt-window.png");
    let _ = std::fs::remove_file(&shot_path);
    let cfg = WindowConfig {
        run: RunConfig {
            scene,
            pack,
            images: None,
            planets: 0,
            frames,
            width: W,
            height: H,
            feedback_div: 4,
            pool: 256,
            max_loads: 64,
            speed: 0.0,
            sync: true,
            progress: false,
            gpu_lz4: false,
        },
        frames: Some(frames),
        fixed_path: true,
        start: None,
        panel: false,
        view: DebugView::Image,
        screenshot: Some(shot_path.clone()),
    };
    let r = match vt::window::run(cfg) {
        Ok(r) => r,
        Err(e) if e.to_string().contains("BC textures") => {
            return skip(&format!("the adapter cannot sample BC textures: {e}"))
        }
        // wgpu's GL backend (a machine without a Vulkan driver) gives a
        // surface whose images cannot be read back for the screenshot.
        Err(e) if e.to_string().contains("cannot be copied from") => {
            return skip(&format!(
                "the adapter's window surface cannot be read back (GL without a Vulkan driver): {e}"
            ))
        }
        Err(e) => panic!("the windowed demo failed on {display}: {e}"),
    };
    eprintln!("adapter {}, swapchain {:?}", r.adapter, r.format);
    assert_eq!(r.failed_tiles, 0, "{:?}", r.first_failure);
    assert_eq!(r.frames.len() as u64, frames, "every frame rendered");
    let uploaded: usize = r.frames.iter().map(|f| f.tiles_uploaded).sum();
    assert!(uploaded > 0, "no tile was streamed");

    let shot = r.last.expect("the final frame was read back");
    assert_eq!((shot.width, shot.height), (W, H), "the window's size");
    let file = image::open(&shot_path).expect("the screenshot was written");
    assert_eq!(file.to_rgba8().into_raw(), shot.rgba, "file and readback");

    let (mips, bad) = vt::reference::classify(&shot.rgba, &shot.camera, &scene, W, H);
    let total = (W * H) as usize;
    assert!(mips.len() > total / 2, "the ground covers most of the view");
    assert!(
        bad * 100 <= total,
        "{bad} of {total} pixels match no tile colour"
    );
    let fine = mips.iter().filter(|&&m| m <= 1).count();
    assert!(fine > mips.len() / 10, "only {fine} pixels show mip 0 or 1");
}
