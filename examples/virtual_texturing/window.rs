//! The windowed demo (winit): the streaming renderer drawing straight into
//! the swapchain image, a fly camera (WASD, Q/E, mouse drag) or the fixed
//! path, pause, debug views, the on-screen panel and screenshots read back
//! from the very image the window presents.
//!
//! Keys: W/A/S/D move, Q/E down/up, Shift faster, left-drag to look;
//! Space or P pauses streaming; Tab or V cycles the debug views (image, mip
//! tint, residency); H hides the panel; C switches between the fly camera
//! and the fixed path; F12 writes a screenshot; Escape closes.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use winit::application::ApplicationHandler;
use winit::dpi::PhysicalSize;
use winit::event::{ElementState, MouseButton, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{KeyCode, PhysicalKey};
use winit::window::{Window, WindowId};

use super::app::{read_buffer, RunConfig};
use super::camera::Camera;
use super::overlay::{Overlay, Smoothed};
use super::stats::FrameStats;
use super::stream::{DebugView, FrameOptions, Streamer};

/// A windowed run.
#[derive(Clone, Debug)]
pub struct WindowConfig {
    /// The scene, pool and streaming settings; `width`/`height` are the
    /// window's initial inner size, `frames` is ignored (see `frames`).
    pub run: RunConfig,
    /// Close after this many frames (None: when the user closes it).
    pub frames: Option<u64>,
    /// Start on the fixed camera path (C switches).
    pub fixed_path: bool,
    /// Start the fly camera here: x, y, z, yaw, pitch (radians; see
    /// `Camera::looking`) instead of where the path begins.
    pub start: Option<[f32; 5]>,
    /// Show the statistics panel (H switches).
    pub panel: bool,
    /// The first debug view (Tab switches).
    pub view: DebugView,
    /// Where F12 and the final frame's screenshot go (None: F12 writes
    /// target/vt-window-<frame>.png and no final screenshot is taken).
    pub screenshot: Option<PathBuf>,
}

/// A screenshot read back from the swapchain image, RGBA8.
pub struct Shot {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// RGBA8 rows, packed.
    pub rgba: Vec<u8>,
    /// The camera of the frame it shows.
    pub camera: Camera,
}

/// What a windowed run produced.
pub struct WindowResult {
    /// Per-frame statistics.
    pub frames: Vec<FrameStats>,
    /// The final frame, when `screenshot` was set.
    pub last: Option<Shot>,
    /// The adapter, in words.
    pub adapter: String,
    /// The swapchain format.
    pub format: wgpu::TextureFormat,
    /// Tiles that failed to load, and the first failure.
    pub failed_tiles: usize,
    /// The first load failure, in words.
    pub first_failure: Option<String>,
}

/// Opens the window and runs until it closes or `cfg.frames` have shown.
pub fn run(cfg: WindowConfig) -> Result<WindowResult, Box<dyn std::error::Error>> {
    let mut builder = EventLoop::builder();
    // Tests run this off the main thread; X11 allows it.
    #[cfg(target_os = "linux")]
    winit::platform::x11::EventLoopBuilderExtX11::with_any_thread(&mut builder, true);
    let event_loop = builder.build()?;
    event_loop.set_control_flow(ControlFlow::Poll);
    let mut app = App {
        cfg,
        gfx: None,
        error: None,
        frames: Vec::new(),
        last: None,
        keys: HashSet::new(),
        drag: None,
        cursor: None,
        paused: false,
        view: DebugView::Image,
        panel: true,
        fixed: true,
        eye: [0.0; 3],
        yaw: 0.0,
        pitch: 0.0,
        path_frame: 0,
        last_tick: Instant::now(),
        smooth: Smoothed::default(),
        closing: false,
        shots: 0,
    };
    app.view = app.cfg.view;
    app.panel = app.cfg.panel;
    app.fixed = app.cfg.fixed_path;
    event_loop.run_app(&mut app)?;
    if let Some(e) = app.error {
        return Err(e);
    }
    let gfx = app.gfx.ok_or("the window never opened")?;
    Ok(WindowResult {
        frames: app.frames,
        last: app.last,
        adapter: gfx.adapter,
        format: gfx.config.format,
        failed_tiles: gfx.streamer.failed_tiles(),
        first_failure: gfx.streamer.first_failure.clone(),
    })
}

/// What exists once the window does.
struct Gfx {
    window: Arc<Window>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    device: wgpu::Device,
    queue: wgpu::Queue,
    streamer: Streamer,
    overlay: Overlay,
    adapter: String,
}

struct App {
    cfg: WindowConfig,
    gfx: Option<Gfx>,
    error: Option<Box<dyn std::error::Error>>,
    frames: Vec<FrameStats>,
    last: Option<Shot>,
    keys: HashSet<KeyCode>,
    /// Cursor position when the left button went down (dragging).
    drag: Option<(f64, f64)>,
    cursor: Option<(f64, f64)>,
    paused: bool,
    view: DebugView,
    panel: bool,
    fixed: bool,
    eye: [f32; 3],
    yaw: f32,
    pitch: f32,
    /// Frames advanced along the fixed path (it stops while flying).
    path_frame: u64,
    last_tick: Instant,
    smooth: Smoothed,
    /// A close was asked for: render one last frame (for the screenshot).
    closing: bool,
    shots: u32,
}

impl App {
    fn open(&mut self, el: &ActiveEventLoop) -> Result<Gfx, Box<dyn std::error::Error>> {
        let r = &self.cfg.run;
        let window = Arc::new(
            el.create_window(
                Window::default_attributes()
                    .with_title("gpustream virtual texturing")
                    .with_inner_size(PhysicalSize::new(r.width, r.height)),
            )?,
        );
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_with_display_handle_from_env(
                Box::new(el.owned_display_handle()),
            ));
        let surface = instance.create_surface(window.clone())?;
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            compatible_surface: Some(&surface),
            ..Default::default()
        }))?;
        // The features gpustream's own device opener asks for.
        let wanted = wgpu::Features::SUBGROUP
            | wgpu::Features::TEXTURE_COMPRESSION_BC
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        let (device, queue) =
            pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("virtual texturing"),
                required_features: adapter.features() & wanted,
                required_limits: adapter.limits(),
                ..Default::default()
            }))?;
        let info = adapter.get_info();
        let described = format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type);
        let caps = surface.get_capabilities(&adapter);
        // A UNORM format, so pixels hold what the shader wrote, exactly as
        // the headless Rgba8Unorm target does.
        let format = [
            wgpu::TextureFormat::Rgba8Unorm,
            wgpu::TextureFormat::Bgra8Unorm,
        ]
        .into_iter()
        .find(|f| caps.formats.contains(f))
        .or_else(|| caps.formats.first().copied())
        .ok_or("the surface supports no format on this adapter")?;
        if !caps.usages.contains(wgpu::TextureUsages::COPY_SRC) {
            return Err("the swapchain images cannot be copied from (screenshots)".into());
        }
        let size = window.inner_size();
        let config = wgpu::SurfaceConfiguration {
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            format,
            color_space: wgpu::SurfaceColorSpace::Auto,
            width: size.width.max(1),
            height: size.height.max(1),
            desired_maximum_frame_latency: 2,
            present_mode: wgpu::PresentMode::AutoNoVsync,
            alpha_mode: wgpu::CompositeAlphaMode::Auto,
            view_formats: vec![],
        };
        surface.configure(&device, &config);
        let mut run = r.clone();
        run.width = config.width;
        run.height = config.height;
        let streamer = Streamer::new(&device, &queue, &run, format)?;
        let overlay = Overlay::new(&device, format);
        let start = Camera::on_path(r.terrain(), 0, r.speed, 1.0);
        self.eye = start.eye;
        (self.yaw, self.pitch) = start.angles();
        if let Some([x, y, z, yaw, pitch]) = self.cfg.start {
            (self.eye, self.yaw, self.pitch) = ([x, y, z], yaw, pitch);
        }
        println!("adapter: {described}, swapchain {format:?}");
        Ok(Gfx {
            window,
            surface,
            config,
            device,
            queue,
            streamer,
            overlay,
            adapter: described,
        })
    }

    /// The camera of this frame, after moving the fly camera by `dt`.
    fn camera(&mut self, dt: f32, aspect: f32) -> Camera {
        let r = &self.cfg.run;
        if self.fixed {
            self.path_frame += 1;
            let c = Camera::on_path(r.terrain(), self.path_frame, r.speed, aspect);
            self.eye = c.eye;
            (self.yaw, self.pitch) = c.angles();
            return c;
        }
        let c = Camera::looking(self.eye, self.yaw, self.pitch, aspect);
        let fast =
            self.keys.contains(&KeyCode::ShiftLeft) || self.keys.contains(&KeyCode::ShiftRight);
        let step = dt * if fast { 80.0 } else { 20.0 };
        let mut mv = |dir: [f32; 3], s: f32| {
            for (e, d) in self.eye.iter_mut().zip(dir) {
                *e += d * s * step;
            }
        };
        for (key, dir, s) in [
            (KeyCode::KeyW, c.forward, 1.0),
            (KeyCode::KeyS, c.forward, -1.0),
            (KeyCode::KeyD, c.right, 1.0),
            (KeyCode::KeyA, c.right, -1.0),
            (KeyCode::KeyE, [0.0, 1.0, 0.0], 1.0),
            (KeyCode::KeyQ, [0.0, 1.0, 0.0], -1.0),
        ] {
            if self.keys.contains(&key) {
                mv(dir, s);
            }
        }
        // Stay above the ground plane.
        self.eye[1] = self.eye[1].max(0.2);
        Camera::looking(self.eye, self.yaw, self.pitch, aspect)
    }

    /// Renders and presents one frame; `shot` reads the image back first.
    fn redraw(&mut self, shot: Option<PathBuf>) -> Result<(), Box<dyn std::error::Error>> {
        let now = Instant::now();
        let dt = now.duration_since(self.last_tick).as_secs_f64();
        self.last_tick = now;
        let Some((w, h)) = self.gfx.as_ref().map(|g| (g.config.width, g.config.height)) else {
            return Ok(());
        };
        let cam = self.camera(dt as f32, w as f32 / h as f32);
        let gfx = self.gfx.as_mut().expect("checked above");
        let frame = match gfx.surface.get_current_texture() {
            wgpu::CurrentSurfaceTexture::Success(t)
            | wgpu::CurrentSurfaceTexture::Suboptimal(t) => t,
            wgpu::CurrentSurfaceTexture::Outdated | wgpu::CurrentSurfaceTexture::Lost => {
                gfx.surface.configure(&gfx.device, &gfx.config);
                return Ok(());
            }
            // Skip this frame; the next redraw tries again.
            _ => return Ok(()),
        };
        let view = frame.texture.create_view(&Default::default());
        let readback = shot.as_ref().map(|_| {
            gfx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("window screenshot"),
                size: ((w * 4).next_multiple_of(256) * h) as u64,
                usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
                mapped_at_creation: false,
            })
        });
        let opts = FrameOptions {
            paused: self.paused,
            view: self.view,
        };
        let panel = self.panel.then(|| {
            let mut d = self.smooth.data.clone();
            d.view = self.view.name();
            d.paused = self.paused;
            (d, self.smooth.peak_mbps)
        });
        let (device, queue) = (gfx.device.clone(), gfx.queue.clone());
        let overlay = &mut gfx.overlay;
        let texture = &frame.texture;
        let fs = gfx.streamer.frame(&cam, opts, &view, &mut |enc| {
            if let Some((d, peak)) = &panel {
                overlay.draw((&device, &queue), enc, &view, (w, h), (d, *peak));
            }
            if let Some(b) = &readback {
                super::app::copy_to_buffer(enc, texture, b);
            }
        })?;
        self.smooth.add(&fs, dt);
        self.frames.push(fs);
        gfx.window.pre_present_notify();
        gfx.queue.present(frame);
        if let (Some(path), Some(b)) = (shot, readback) {
            let mut rgba = read_buffer(&gfx.device, &b, w, h)?;
            if matches!(
                gfx.config.format,
                wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb
            ) {
                for px in rgba.chunks_exact_mut(4) {
                    px.swap(0, 2);
                }
            }
            if !path.as_os_str().is_empty() {
                image::save_buffer(&path, &rgba, w, h, image::ExtendedColorType::Rgba8)?;
                println!("wrote {}", path.display());
            }
            self.last = Some(Shot {
                width: w,
                height: h,
                rgba,
                camera: cam,
            });
        }
        Ok(())
    }

    fn key(&mut self, el: &ActiveEventLoop, code: KeyCode, pressed: bool) {
        if !pressed {
            self.keys.remove(&code);
            return;
        }
        if !self.keys.insert(code) {
            return; // auto-repeat
        }
        match code {
            KeyCode::Space | KeyCode::KeyP => self.paused = !self.paused,
            KeyCode::Tab | KeyCode::KeyV => self.view = self.view.next(),
            KeyCode::KeyH => self.panel = !self.panel,
            KeyCode::KeyC => self.fixed = !self.fixed,
            KeyCode::F12 => {
                self.shots += 1;
                let path = self.cfg.screenshot.clone().unwrap_or_else(|| {
                    PathBuf::from(format!("target/vt-window-{}.png", self.shots))
                });
                if let Err(e) = self.redraw(Some(path)) {
                    self.fail(el, e);
                }
            }
            KeyCode::Escape => self.close(el),
            _ => {}
        }
    }

    /// Ends the run: one last frame, read back when a screenshot is wanted.
    fn close(&mut self, el: &ActiveEventLoop) {
        if self.closing {
            return;
        }
        self.closing = true;
        if let Some(path) = self.cfg.screenshot.clone() {
            if let Err(e) = self.redraw(Some(path)) {
                self.error.get_or_insert(e);
            }
        }
        el.exit();
    }

    fn fail(&mut self, el: &ActiveEventLoop, e: Box<dyn std::error::Error>) {
        self.error.get_or_insert(e);
        self.closing = true;
        el.exit();
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, el: &ActiveEventLoop) {
        if self.gfx.is_some() {
            return;
        }
        match self.open(el) {
            Ok(g) => {
                g.window.request_redraw();
                self.gfx = Some(g);
                self.last_tick = Instant::now();
            }
            Err(e) => self.fail(el, e),
        }
    }

    fn window_event(&mut self, el: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        if self.closing {
            return;
        }
        match event {
            WindowEvent::CloseRequested => self.close(el),
            WindowEvent::Resized(size) => {
                if let Some(g) = self.gfx.as_mut() {
                    if size.width > 0 && size.height > 0 {
                        g.config.width = size.width;
                        g.config.height = size.height;
                        g.surface.configure(&g.device, &g.config);
                        g.streamer.resize(size.width, size.height);
                    }
                }
            }
            WindowEvent::KeyboardInput { event, .. } => {
                if let PhysicalKey::Code(code) = event.physical_key {
                    self.key(el, code, event.state == ElementState::Pressed);
                }
            }
            WindowEvent::MouseInput {
                state,
                button: MouseButton::Left,
                ..
            } => {
                self.drag = (state == ElementState::Pressed)
                    .then_some(self.cursor)
                    .flatten();
            }
            WindowEvent::CursorMoved { position, .. } => {
                let p = (position.x, position.y);
                if let Some((x, y)) = self.drag {
                    self.yaw += ((p.0 - x) * 0.005) as f32;
                    self.pitch = (self.pitch - ((p.1 - y) * 0.005) as f32).clamp(-1.5, 1.5);
                    self.drag = Some(p);
                }
                self.cursor = Some(p);
            }
            WindowEvent::RedrawRequested => {
                // With a screenshot, the last frame is the one `close` draws.
                let last = u64::from(self.cfg.screenshot.is_some());
                let done = self
                    .cfg
                    .frames
                    .is_some_and(|n| self.frames.len() as u64 + last >= n);
                if done {
                    self.close(el);
                    return;
                }
                let size = self.gfx.as_ref().map(|g| g.window.inner_size());
                if size.is_some_and(|s| s.width > 0 && s.height > 0) {
                    if let Err(e) = self.redraw(None) {
                        self.fail(el, e);
                    }
                }
            }
            _ => {}
        }
    }

    fn about_to_wait(&mut self, _el: &ActiveEventLoop) {
        if let Some(g) = &self.gfx {
            if !self.closing {
                g.window.request_redraw();
            }
        }
    }
}
