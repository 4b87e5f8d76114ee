//! The streaming renderer both modes share: the tile pool, the page tables,
//! the feedback pass with its asynchronous readbacks, residency planning,
//! tile loads through a gpustream queue (one fence value per frame's batch;
//! tiles become visible only once it is reached) and the main pass, which
//! draws into whatever view the caller gives (an offscreen texture headless,
//! the swapchain image in a window).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpustream::completion::{Fence, StatusArray, StatusEntry};
use gpustream::pack::AssetId;
use gpustream::runtime::{
    Destination, PackFile, Queue, QueueConfig, QueueStats, Request, Runtime, RuntimeConfig, Source,
};

use super::app::RunConfig;
use super::camera::{self, Camera};
use super::content::SceneConfig;
use super::residency::{Geometry, Residency, TileKey};
use super::stats::FrameStats;

/// Frames the CPU may run ahead of the GPU.
pub const FRAMES_IN_FLIGHT: usize = 2;
const READBACKS: usize = 3;
/// The colour the sky is cleared to (RGBA8: 26, 26, 38).
pub const SKY: [f64; 3] = [0.1, 0.1, 0.15];

/// What the main pass shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DebugView {
    /// The texture as streamed.
    #[default]
    Image,
    /// The image tinted by the mip it was sampled from (mip 0 red, 1
    /// yellow, 2 green, 3 cyan, 4 blue, 5 magenta, then grey).
    MipTint,
    /// Green where the mip the pixel wants is resident, orange where a
    /// coarser resident tile stands in, red where only the packed tail is.
    Residency,
}

impl DebugView {
    /// The next view in the cycle the debug key walks.
    pub fn next(self) -> DebugView {
        match self {
            DebugView::Image => DebugView::MipTint,
            DebugView::MipTint => DebugView::Residency,
            DebugView::Residency => DebugView::Image,
        }
    }

    /// The name the panel and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            DebugView::Image => "image",
            DebugView::MipTint => "mip tint",
            DebugView::Residency => "residency",
        }
    }

    /// The shader's `p.debug` value.
    fn code(self) -> u32 {
        self as u32
    }
}

/// Per-frame switches the window (or a test) sets.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrameOptions {
    /// Start no tile loads (batches already started still land).
    pub paused: bool,
    /// What the main pass shows.
    pub view: DebugView,
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
    debug: u32,
    pad: u32,
    mips: [[u32; 4]; 16],
}

/// Bytes of the shader's `Params` uniform.
pub const PARAMS_BYTES: u64 = std::mem::size_of::<Params>() as u64;

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
    started: Instant,
}

/// The streaming renderer: everything that lives from the first frame to
/// the last. Fields drop in order; the runtime goes last (see `Drop`).
pub struct Streamer {
    device: wgpu::Device,
    queue: wgpu::Queue,
    scene: SceneConfig,
    max_loads: usize,
    sync: bool,
    div: u32,
    ids: Vec<AssetId>,
    geo: Geometry,
    res: Residency,
    pool: wgpu::Texture,
    pt_buf: wgpu::Buffer,
    main_pipe: wgpu::RenderPipeline,
    fb_pipe: wgpu::RenderPipeline,
    main_bg: wgpu::BindGroup,
    fb_bg: wgpu::BindGroup,
    main_u: wgpu::Buffer,
    fb_u: wgpu::Buffer,
    vbuf: wgpu::Buffer,
    vertices: u32,
    params: Params,
    size: (u32, u32),
    feedback: wgpu::Texture,
    fb_size: (u32, u32),
    /// Depth of the main pass and of the feedback pass.
    depth: (wgpu::TextureView, wgpu::TextureView),
    readbacks: Vec<Readback>,
    /// Readbacks in the order they were submitted (FIFO), by index.
    pending_fb: VecDeque<usize>,
    wanted: HashSet<TileKey>,
    batches: VecDeque<Batch>,
    in_flight: VecDeque<(u64, wgpu::SubmissionIndex)>,
    completed_frame: Option<u64>,
    frame: u64,
    prev: QueueStats,
    last_frame_end: Instant,
    next_value: u64,
    /// The first tile load that failed, in words.
    pub first_failure: Option<String>,
    fence: Fence,
    gqueue: Queue,
    pack: Arc<PackFile>,
    // Last: the runtime outlives the queue and pack handles above.
    _runtime: Runtime,
}

impl Streamer {
    /// Builds the pack if needed, opens it, loads the packed mips of every
    /// texture and creates the pipelines; the main pass renders `output`
    /// at `width` x `height`.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        cfg: &RunConfig,
        output: wgpu::TextureFormat,
    ) -> Result<Streamer, Box<dyn std::error::Error>> {
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
        match &cfg.images {
            Some(images) => {
                super::imagery::ensure_pack(&cfg.pack, &cfg.scene, images, cfg.progress)?
            }
            None => super::content::ensure_pack(&cfg.pack, &cfg.scene, cfg.progress)?,
        };

        // GPU LZ4 decode is opt-in here (--gpu-lz4): on lavapipe, where the
        // demo and its tests run, the WGSL decoder manages about 12 MB/s,
        // far below the CPU threads. On a real GPU, pass --gpu-lz4.
        let runtime = Runtime::new(
            device,
            queue,
            RuntimeConfig::default().with_gpu_decompression(cfg.gpu_lz4),
        )?;
        let pack = runtime.open_pack(&cfg.pack)?;
        let gqueue = runtime.create_queue(
            QueueConfig::default()
                .with_capacity(2048)
                .with_name(Some("virtual texturing".into())),
        );
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
        let array = |label, width: u32, height: u32, layers, mips| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: Some(label),
                size: wgpu::Extent3d {
                    width,
                    height,
                    depth_or_array_layers: layers,
                },
                mip_level_count: mips,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format,
                usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
                view_formats: &[],
            })
        };
        let pool = array("tile pool", tw, th, cfg.pool, 1);
        let packed = array(
            "packed mips",
            first_packed.width.next_multiple_of(4),
            first_packed.height.next_multiple_of(4),
            cfg.scene.textures,
            packed_info.mips.len() as u32,
        );

        // Packed mips: always resident, loaded before the first frame.
        let fence = Fence::new();
        for (i, &id) in ids.iter().enumerate() {
            gqueue.enqueue(
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
        gqueue.enqueue_signal(&fence, 1);
        gqueue.submit();
        if !fence.wait_timeout(1, Duration::from_secs(120)) {
            return Err("packed mips did not arrive within 120 s".into());
        }
        if let Some(f) = gqueue.error_record().first_failure {
            return Err(format!("loading packed mips failed: {f}").into());
        }

        let res = Residency::new(geo.clone(), cfg.pool);
        let pt_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("page tables"),
            size: (res.page_table.len() * 4).max(4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let p = super::pipes::Pipes::new(device, &pool, &packed, &pt_buf, output);
        if cfg.planets > cfg.scene.textures {
            return Err("more planets than textures".into());
        }
        let verts = camera::mesh(cfg.terrain(), cfg.planets);
        let vbuf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("ground"),
            size: (verts.len() * 4) as u64,
            usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&vbuf, 0, bytemuck::cast_slice(&verts));

        let mut params = Params {
            view_proj: [[0.0; 4]; 4],
            size: cfg.scene.size as f32,
            lod_bias: 0.0,
            tiled_mips: tiled as u32,
            mip_count: mip_count as u32,
            per_texture: geo.per_texture,
            textures: cfg.scene.textures,
            debug: 0,
            pad: 0,
            mips: [[0; 4]; 16],
        };
        for (m, &(off, x, y)) in geo.mips.iter().enumerate() {
            params.mips[m] = [off, x, y, 0];
        }
        let prev = gqueue.stats();
        let div = cfg.feedback_div.max(1);
        let (feedback, readbacks, fb_size) = feedback_targets(device, cfg.width, cfg.height, div);
        let depth = (
            depth_view(device, cfg.width, cfg.height),
            depth_view(device, fb_size.0, fb_size.1),
        );
        Ok(Streamer {
            device: device.clone(),
            queue: queue.clone(),
            scene: cfg.scene,
            max_loads: cfg.max_loads,
            sync: cfg.sync,
            div,
            ids,
            geo,
            res,
            pool,
            pt_buf,
            main_pipe: p.main_pipe,
            fb_pipe: p.fb_pipe,
            main_bg: p.main_bg,
            fb_bg: p.fb_bg,
            main_u: p.main_u,
            fb_u: p.fb_u,
            vbuf,
            vertices: verts.len() as u32 / 6,
            params,
            size: (cfg.width, cfg.height),
            feedback,
            fb_size,
            depth,
            readbacks,
            pending_fb: VecDeque::new(),
            wanted: HashSet::new(),
            batches: VecDeque::new(),
            in_flight: VecDeque::new(),
            completed_frame: None,
            frame: 0,
            prev,
            last_frame_end: Instant::now(),
            next_value: 2,
            first_failure: None,
            fence,
            gqueue,
            pack,
            _runtime: runtime,
        })
    }

    /// The output size the feedback pass is sized for.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// Tiles that failed to load.
    pub fn failed_tiles(&self) -> usize {
        self.res.failed_count()
    }

    /// Follows a window resize: the feedback target and its readbacks are
    /// recreated (readbacks still in flight are dropped; their feedback is
    /// simply lost, as a frame's feedback may be).
    pub fn resize(&mut self, width: u32, height: u32) {
        let (w, h) = (width.max(1), height.max(1));
        if (w, h) == self.size {
            return;
        }
        let (feedback, readbacks, fb_size) = feedback_targets(&self.device, w, h, self.div);
        self.feedback = feedback;
        self.readbacks = readbacks;
        self.fb_size = fb_size;
        self.depth = (
            depth_view(&self.device, w, h),
            depth_view(&self.device, fb_size.0, fb_size.1),
        );
        self.pending_fb.clear();
        self.size = (w, h);
    }

    /// One frame seen by `cam`, its main pass drawn into `target`; `extra`
    /// records more commands (an overlay, a screenshot copy) into the same
    /// submission, after the main pass.
    pub fn frame(
        &mut self,
        cam: &Camera,
        opts: FrameOptions,
        target: &wgpu::TextureView,
        extra: &mut dyn FnMut(&mut wgpu::CommandEncoder),
    ) -> Result<FrameStats, Box<dyn std::error::Error>> {
        self.frame += 1;
        let frame = self.frame;
        let t0 = Instant::now();
        let mut fs = FrameStats {
            frame,
            ..Default::default()
        };
        let device = self.device.clone();

        // Frames in flight: wait for the oldest before running further ahead.
        while self.in_flight.len() >= FRAMES_IN_FLIGHT {
            let (f, idx) = self.in_flight.pop_front().expect("non-empty");
            device.poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })?;
            self.completed_frame = Some(f);
        }
        self.res.release(self.completed_frame);

        // Batches whose fence value is reached become visible now.
        let reached = self.fence.completed_value();
        let mut latency = (0.0, 0u32);
        while self.batches.front().is_some_and(|b| b.value <= reached) {
            let b = self.batches.pop_front().expect("non-empty");
            latency.0 += b.started.elapsed().as_secs_f64() * 1e3;
            latency.1 += 1;
            for (i, (k, slot)) in b.tiles.iter().enumerate() {
                let ok = match b.status.get(i) {
                    StatusEntry::Ok => true,
                    StatusEntry::Failed(f) => {
                        self.first_failure.get_or_insert_with(|| f.to_string());
                        false
                    }
                    StatusEntry::Pending => false,
                };
                self.res.complete(*k, *slot, ok, frame);
                fs.tiles_uploaded += ok as usize;
            }
        }
        if latency.1 > 0 {
            fs.fence_ms = latency.0 / latency.1 as f64;
        }

        // Feedback that has come back, oldest first.
        device.poll(wgpu::PollType::Poll)?;
        let tf = Instant::now();
        self.read_feedback()?;
        fs.feedback_ms = tf.elapsed().as_secs_f64() * 1e3;

        // Plan and start loads: one batch, one fence value.
        if !opts.paused {
            self.start_loads(frame, &mut fs)?;
        }

        // Render: page tables, feedback pass (+ readback), main pass.
        if self.res.dirty {
            self.queue
                .write_buffer(&self.pt_buf, 0, bytemuck::cast_slice(&self.res.page_table));
            self.res.dirty = false;
        }
        self.params.view_proj = cam.view_proj();
        self.params.lod_bias = 0.0;
        self.params.debug = opts.view.code();
        self.queue
            .write_buffer(&self.main_u, 0, bytemuck::bytes_of(&self.params));
        self.params.lod_bias = -(self.div as f32).log2();
        self.params.debug = 0;
        self.queue
            .write_buffer(&self.fb_u, 0, bytemuck::bytes_of(&self.params));

        let mut enc = device.create_command_encoder(&Default::default());
        let rb_index = self.readbacks.iter().position(|r| !r.busy);
        if let Some(i) = rb_index {
            let view = self.feedback.create_view(&Default::default());
            let (fw, fh) = self.fb_size;
            draw(
                &mut enc,
                (&view, &self.depth.1),
                &self.fb_pipe,
                &self.fb_bg,
                &self.vbuf,
                self.vertices,
                wgpu::Color::TRANSPARENT,
            );
            enc.copy_texture_to_buffer(
                self.feedback.as_image_copy(),
                wgpu::TexelCopyBufferInfo {
                    buffer: &self.readbacks[i].buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some((fw * 4).next_multiple_of(256)),
                        rows_per_image: Some(fh),
                    },
                },
                self.feedback.size(),
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
            (target, &self.depth.0),
            &self.main_pipe,
            &self.main_bg,
            &self.vbuf,
            self.vertices,
            sky,
        );
        extra(&mut enc);
        let idx = self.queue.submit([enc.finish()]);
        self.in_flight.push_back((frame, idx.clone()));
        if let Some(i) = rb_index {
            let rb = &mut self.readbacks[i];
            rb.busy = true;
            let ready = rb.ready.clone();
            rb.buffer
                .slice(..)
                .map_async(wgpu::MapMode::Read, move |r| {
                    if r.is_ok() {
                        ready.store(true, Ordering::Release);
                    }
                });
            self.pending_fb.push_back(i);
        }

        if self.sync {
            // Reproducible runs: this frame's feedback and tile batch are
            // complete before the next frame starts.
            device.poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })?;
            if let Some(b) = self.batches.back() {
                if !self.fence.wait_timeout(b.value, Duration::from_secs(60)) {
                    return Err(
                        format!("tile batch of frame {frame} did not finish in 60 s").into(),
                    );
                }
            }
        }

        let qs = self.gqueue.stats();
        fs.submits = qs.submits - self.prev.submits;
        fs.bytes = qs.bytes_delivered - self.prev.bytes_delivered;
        self.prev = qs;
        fs.pool_occupancy = self.res.occupied() as f64 / self.res.pool() as f64;
        fs.resident_tiles = self.res.resident_count();
        fs.loading_tiles = self.res.loading_count();
        fs.cpu_ms = t0.elapsed().as_secs_f64() * 1e3;
        let now = Instant::now();
        fs.bandwidth_mbps = fs.bytes as f64
            / 1e6
            / now
                .duration_since(self.last_frame_end)
                .as_secs_f64()
                .max(1e-9);
        self.last_frame_end = now;
        Ok(fs)
    }

    /// Turns every feedback readback that has mapped into the wanted set.
    fn read_feedback(&mut self) -> Result<(), Box<dyn std::error::Error>> {
        let (fw, fh) = self.fb_size;
        let fb_row = (fw * 4).next_multiple_of(256);
        while let Some(&i) = self.pending_fb.front() {
            if !self.readbacks[i].ready.load(Ordering::Acquire) {
                break;
            }
            self.pending_fb.pop_front();
            let rb = &mut self.readbacks[i];
            self.wanted.clear();
            {
                let data = rb.buffer.slice(..).get_mapped_range()?;
                for row in 0..fh {
                    let line = &data[(row * fb_row) as usize..][..(fw * 4) as usize];
                    for word in line.chunks_exact(4) {
                        let v = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                        if let Some(k) = TileKey::from_feedback(v, &self.geo) {
                            self.wanted.insert(k);
                        }
                    }
                }
            }
            rb.buffer.unmap();
            rb.busy = false;
            rb.ready.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Plans this frame's loads and enqueues them as one batch.
    fn start_loads(
        &mut self,
        frame: u64,
        fs: &mut FrameStats,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let plan = self.res.plan(&self.wanted, frame, self.max_loads);
        fs.tiles_requested = plan.requested;
        fs.tiles_evicted = plan.evicted;
        if plan.loads.is_empty() {
            return Ok(());
        }
        let status = StatusArray::new(plan.loads.len());
        for (i, (k, slot)) in plan.loads.iter().enumerate() {
            self.gqueue.enqueue(
                Request::new(
                    Source::Tile {
                        pack: self.pack.clone(),
                        asset: self.ids[k.tex as usize],
                        mip: k.mip,
                        x: k.x,
                        y: k.y,
                    },
                    Destination::Texture {
                        texture: self.pool.clone(),
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
            self.gqueue.enqueue_status(&status, i);
        }
        let value = self.next_value;
        self.next_value += 1;
        self.gqueue.enqueue_signal(&self.fence, value);
        self.gqueue.submit();
        self.batches.push_back(Batch {
            value,
            status,
            tiles: plan.loads,
            started: Instant::now(),
        });
        Ok(())
    }

    /// The scene this streamer shows.
    pub fn scene(&self) -> &SceneConfig {
        &self.scene
    }
}

impl Drop for Streamer {
    fn drop(&mut self) {
        // Let in-flight loads finish before the pool is dropped.
        self.fence
            .wait_timeout(self.next_value - 1, Duration::from_secs(60));
    }
}

/// The feedback target for a `w` x `h` output and its ring of readbacks.
fn feedback_targets(
    device: &wgpu::Device,
    w: u32,
    h: u32,
    div: u32,
) -> (wgpu::Texture, Vec<Readback>, (u32, u32)) {
    let (fw, fh) = (w.div_ceil(div), h.div_ceil(div));
    let feedback = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("feedback"),
        size: wgpu::Extent3d {
            width: fw,
            height: fh,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::R32Uint,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let fb_row = (fw * 4).next_multiple_of(256);
    let readbacks = (0..READBACKS)
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
    (feedback, readbacks, (fw, fh))
}

/// A depth buffer of `w` x `h`.
fn depth_view(device: &wgpu::Device, w: u32, h: u32) -> wgpu::TextureView {
    device
        .create_texture(&wgpu::TextureDescriptor {
            label: Some("depth"),
            size: wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: super::pipes::DEPTH,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            view_formats: &[],
        })
        .create_view(&Default::default())
}

fn draw(
    enc: &mut wgpu::CommandEncoder,
    (view, depth): (&wgpu::TextureView, &wgpu::TextureView),
    pipe: &wgpu::RenderPipeline,
    bg: &wgpu::BindGroup,
    vbuf: &wgpu::Buffer,
    vertices: u32,
    clear: wgpu::Color,
) {
    let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some("vt"),
        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
            view,
            depth_slice: None,
            resolve_target: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Clear(clear),
                store: wgpu::StoreOp::Store,
            },
        })],
        depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
            view: depth,
            depth_ops: Some(wgpu::Operations {
                load: wgpu::LoadOp::Clear(1.0),
                store: wgpu::StoreOp::Discard,
            }),
            stencil_ops: None,
        }),
        timestamp_writes: None,
        occlusion_query_set: None,
        multiview_mask: None,
    });
    pass.set_pipeline(pipe);
    pass.set_bind_group(0, bg, &[]);
    pass.set_vertex_buffer(0, vbuf.slice(..));
    pass.draw(0..vertices, 0..1);
}
