//! The on-screen panel: streaming MB/s, tiles per frame, pool occupancy
//! and fence latency as bars with numbers, plus the debug view's name and
//! whether streaming is paused. Drawn by the demo itself: coloured quads
//! built on the CPU each frame, text in a 3x5 pixel font, so no font crate
//! or glyph atlas is needed.

use super::stats::FrameStats;

/// Screen pixels per font pixel.
const SCALE: f32 = 3.0;
/// The panel's top-left corner and width, in pixels.
const ORIGIN: (f32, f32) = (10.0, 10.0);
const PANEL_W: f32 = 330.0;
const LINE_H: f32 = 7.0 * SCALE;
const BAR_X: f32 = 200.0;
const BAR_W: f32 = 120.0;

/// The panel's rectangle in pixels (x, y, w, h), for tests that compare
/// the rest of a screenshot with a reference.
pub fn panel_rect() -> (u32, u32, u32, u32) {
    let h = LINE_H * 6.0 + 2.0 * SCALE;
    (
        ORIGIN.0 as u32,
        ORIGIN.1 as u32,
        PANEL_W as u32 + 1,
        h as u32 + 1,
    )
}

/// What the panel shows; numbers are smoothed over the last frames by the
/// caller (`Smoothed`).
#[derive(Clone, Debug, Default)]
pub struct PanelData {
    /// Streaming bandwidth, MB/s.
    pub mbps: f64,
    /// Tiles that became visible per frame.
    pub tiles_per_frame: f64,
    /// Occupied pool slots over the pool size, 0..=1.
    pub pool: f64,
    /// Fence latency, ms (submit of a batch to its fence value seen).
    pub fence_ms: f64,
    /// Frames per second.
    pub fps: f64,
    /// The debug view's name.
    pub view: &'static str,
    /// Streaming paused.
    pub paused: bool,
}

/// Exponential moving averages of the per-frame figures.
#[derive(Clone, Debug, Default)]
pub struct Smoothed {
    /// The averages, in the panel's units.
    pub data: PanelData,
    /// Peak MB/s seen, the bar's full scale.
    pub peak_mbps: f64,
}

impl Smoothed {
    /// Folds in one frame that took `dt` seconds.
    pub fn add(&mut self, f: &FrameStats, dt: f64) {
        let a = 0.1;
        let d = &mut self.data;
        d.mbps += a * (f.bandwidth_mbps - d.mbps);
        d.tiles_per_frame += a * (f.tiles_uploaded as f64 - d.tiles_per_frame);
        d.pool = f.pool_occupancy;
        if f.fence_ms > 0.0 {
            d.fence_ms += a * (f.fence_ms - d.fence_ms);
        }
        if dt > 0.0 {
            // The first frame seeds the average instead of pulling it up
            // from zero.
            d.fps = if d.fps == 0.0 {
                1.0 / dt
            } else {
                d.fps + a * (1.0 / dt - d.fps)
            };
        }
        self.peak_mbps = self.peak_mbps.max(d.mbps);
    }
}

/// One vertex: position in clip space and an RGBA8 colour.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Vertex {
    pos: [f32; 2],
    rgba: [u8; 4],
}

/// The panel's pipeline and its growing vertex buffer.
pub struct Overlay {
    pipe: wgpu::RenderPipeline,
    vbuf: wgpu::Buffer,
    capacity: u64,
}

impl Overlay {
    /// A panel pipeline drawing into `format`.
    pub fn new(device: &wgpu::Device, format: wgpu::TextureFormat) -> Overlay {
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("overlay.wgsl"),
            source: wgpu::ShaderSource::Wgsl(include_str!("overlay.wgsl").into()),
        });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("overlay"),
            bind_group_layouts: &[],
            immediate_size: 0,
        });
        let pipe = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("overlay"),
            layout: Some(&layout),
            vertex: wgpu::VertexState {
                module: &shader,
                entry_point: Some("vs_main"),
                compilation_options: Default::default(),
                buffers: &[Some(wgpu::VertexBufferLayout {
                    array_stride: 12,
                    step_mode: wgpu::VertexStepMode::Vertex,
                    attributes: &wgpu::vertex_attr_array![0 => Float32x2, 1 => Unorm8x4],
                })],
            },
            fragment: Some(wgpu::FragmentState {
                module: &shader,
                entry_point: Some("fs_main"),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::ColorTargetState {
                    format,
                    blend: Some(wgpu::BlendState::ALPHA_BLENDING),
                    write_mask: wgpu::ColorWrites::ALL,
                })],
            }),
            primitive: Default::default(),
            depth_stencil: None,
            multisample: Default::default(),
            multiview_mask: None,
            cache: None,
        });
        let capacity = 64 * 1024;
        let vbuf = vertex_buffer(device, capacity);
        Overlay {
            pipe,
            vbuf,
            capacity,
        }
    }

    /// Records the panel for `d` (with `peak_mbps` as the bandwidth bar's
    /// full scale) over `view` (`w` x `h` pixels).
    pub fn draw(
        &mut self,
        (device, queue): (&wgpu::Device, &wgpu::Queue),
        enc: &mut wgpu::CommandEncoder,
        view: &wgpu::TextureView,
        (w, h): (u32, u32),
        (d, peak_mbps): (&PanelData, f64),
    ) {
        let verts = build(d, peak_mbps, w as f32, h as f32);
        let bytes: &[u8] = bytemuck::cast_slice(&verts);
        if bytes.len() as u64 > self.capacity {
            self.capacity = (bytes.len() as u64).next_power_of_two();
            self.vbuf = vertex_buffer(device, self.capacity);
        }
        queue.write_buffer(&self.vbuf, 0, bytes);
        let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("overlay"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Load,
                    store: wgpu::StoreOp::Store,
                },
            })],
            depth_stencil_attachment: None,
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        pass.set_pipeline(&self.pipe);
        pass.set_vertex_buffer(0, self.vbuf.slice(..bytes.len() as u64));
        pass.draw(0..verts.len() as u32, 0..1);
    }
}

fn vertex_buffer(device: &wgpu::Device, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("overlay vertices"),
        size,
        usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// Quads in pixels, turned into clip-space triangles.
struct Quads {
    v: Vec<Vertex>,
    w: f32,
    h: f32,
}

impl Quads {
    fn rect(&mut self, x: f32, y: f32, w: f32, h: f32, rgba: [u8; 4]) {
        let (sx, sy) = (2.0 / self.w, 2.0 / self.h);
        let p = |px: f32, py: f32| Vertex {
            pos: [px * sx - 1.0, 1.0 - py * sy],
            rgba,
        };
        let (a, b, c, d) = (p(x, y), p(x + w, y), p(x, y + h), p(x + w, y + h));
        self.v.extend_from_slice(&[a, c, b, b, c, d]);
    }

    /// Text in the 3x5 font, top-left at (x, y); returns the pen's end.
    fn text(&mut self, x: f32, y: f32, s: &str, rgba: [u8; 4]) -> f32 {
        let mut pen = x;
        for ch in s.chars() {
            let g = glyph(ch.to_ascii_uppercase());
            for (row, bits) in g.iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        self.rect(
                            pen + col as f32 * SCALE,
                            y + row as f32 * SCALE,
                            SCALE,
                            SCALE,
                            rgba,
                        );
                    }
                }
            }
            pen += 4.0 * SCALE;
        }
        pen
    }
}

/// The panel's triangles for a `w` x `h` target.
fn build(d: &PanelData, peak_mbps: f64, w: f32, h: f32) -> Vec<Vertex> {
    let mut q = Quads {
        v: Vec::new(),
        w,
        h,
    };
    let (x0, y0) = ORIGIN;
    let (_, _, pw, ph) = panel_rect();
    q.rect(x0, y0, pw as f32 - 1.0, ph as f32 - 1.0, [0, 0, 0, 170]);
    let white = [235, 235, 235, 255];
    let lines: [(String, f64, [u8; 4]); 4] = [
        (
            format!("MB/S {:.1}", d.mbps),
            d.mbps / peak_mbps.max(1.0),
            [80, 200, 255, 255],
        ),
        (
            format!("TILES/F {:.1}", d.tiles_per_frame),
            d.tiles_per_frame / 64.0,
            [120, 255, 120, 255],
        ),
        (
            format!("POOL {:.0}%", d.pool * 100.0),
            d.pool,
            [255, 200, 80, 255],
        ),
        (
            format!("FENCE MS {:.1}", d.fence_ms),
            d.fence_ms / 100.0,
            [255, 120, 120, 255],
        ),
    ];
    let mut y = y0 + 2.0 * SCALE;
    for (label, frac, colour) in &lines {
        q.text(x0 + 2.0 * SCALE, y, label, white);
        q.rect(x0 + BAR_X, y, BAR_W, 5.0 * SCALE, [60, 60, 60, 255]);
        q.rect(
            x0 + BAR_X,
            y,
            BAR_W * frac.clamp(0.0, 1.0) as f32,
            5.0 * SCALE,
            *colour,
        );
        y += LINE_H;
    }
    q.text(x0 + 2.0 * SCALE, y, &format!("VIEW {}", d.view), white);
    y += LINE_H;
    let status = if d.paused { "PAUSED" } else { "STREAMING" };
    let end = q.text(x0 + 2.0 * SCALE, y, status, white);
    q.text(end, y, &format!(" {:.0} FPS", d.fps), white);
    q.v
}

/// The 3x5 font: five rows of three bits (4 = left column), top row first.
/// Unknown characters draw as blanks.
fn glyph(c: char) -> [u8; 5] {
    match c {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 3, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 2, 2],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        'A' => [2, 5, 7, 5, 5],
        'B' => [6, 5, 6, 5, 6],
        'C' => [3, 4, 4, 4, 3],
        'D' => [6, 5, 5, 5, 6],
        'E' => [7, 4, 6, 4, 7],
        'F' => [7, 4, 6, 4, 4],
        'G' => [3, 4, 5, 5, 3],
        'H' => [5, 5, 7, 5, 5],
        'I' => [7, 2, 2, 2, 7],
        'J' => [1, 1, 1, 5, 2],
        'K' => [5, 5, 6, 5, 5],
        'L' => [4, 4, 4, 4, 7],
        'M' => [5, 7, 7, 5, 5],
        'N' => [6, 5, 5, 5, 5],
        'O' => [2, 5, 5, 5, 2],
        'P' => [6, 5, 6, 4, 4],
        'Q' => [2, 5, 5, 6, 3],
        'R' => [6, 5, 6, 5, 5],
        'S' => [3, 4, 2, 1, 6],
        'T' => [7, 2, 2, 2, 2],
        'U' => [5, 5, 5, 5, 7],
        'V' => [5, 5, 5, 5, 2],
        'W' => [5, 5, 7, 7, 5],
        'X' => [5, 5, 2, 5, 5],
        'Y' => [5, 5, 2, 2, 2],
        'Z' => [7, 1, 2, 4, 7],
        '/' => [1, 1, 2, 4, 4],
        '%' => [5, 1, 2, 4, 5],
        '.' => [0, 0, 0, 0, 2],
        '-' => [0, 0, 7, 0, 0],
        _ => [0; 5],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panel_stays_inside_its_rectangle() {
        let d = PanelData {
            mbps: 1234.0,
            tiles_per_frame: 99.5,
            pool: 1.0,
            fence_ms: 999.0,
            fps: 60.0,
            view: "residency",
            paused: true,
        };
        let (w, h) = (640.0, 360.0);
        let (rx, ry, rw, rh) = panel_rect();
        for v in build(&d, 2000.0, w, h) {
            let px = (v.pos[0] + 1.0) * 0.5 * w;
            let py = (1.0 - v.pos[1]) * 0.5 * h;
            assert!(px >= rx as f32 - 0.01 && px <= (rx + rw) as f32 + 0.01);
            assert!(py >= ry as f32 - 0.01 && py <= (ry + rh) as f32 + 0.01);
        }
    }
}
