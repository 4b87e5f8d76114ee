//! The demo pack: a deterministic pack of realistic content built from the
//! small source images in `assets/`, for the benchmarks and the demo.
//!
//! Textures are procedural variations of the sources (scale, offset, tint,
//! extra detail noise), block-compressed by the real encoder, so their LZ4
//! ratio is what real BCn data gives. Blobs are mesh-like vertex and index
//! buffers and JSON-like scene text. The same [`DemoConfig`] always gives the
//! same bytes (on the same CPU: the ISPC encoder picks kernels per
//! instruction set).

use crate::import::{decode_image, encode_texture, ImageOptions, Rgba8Image};
use gpustream::codec::Codec;
use gpustream::pack::{Pack, PackError, PackWriter, TextureFormat, WriterOptions};
use std::path::{Path, PathBuf};

/// Bumped whenever the generator's output changes, so old demo packs are
/// rebuilt instead of reused.
pub const GENERATOR_VERSION: u32 = 1;

/// The name of the blob recording how a demo pack was made.
pub const MANIFEST_ASSET: &str = "demo/manifest.json";

/// Where the CLI puts the demo pack by default.
pub const DEFAULT_PATH: &str = "target/gpustream-demo.gspk";

/// What demo pack to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DemoConfig {
    /// Bytes of uncompressed asset data (the pack holds exactly this much,
    /// plus the small manifest).
    pub size_bytes: u64,
    /// Seed of the procedural variation.
    pub seed: u64,
    /// The codec tried for every block.
    pub codec: Codec,
    /// zstd level (0 = default).
    pub level: i32,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            size_bytes: 256 << 20,
            seed: 1,
            codec: Codec::Lz4,
            level: 0,
        }
    }
}

/// The source images, compiled in so the demo pack can be built from any
/// working directory.
const SOURCES: [(&str, &[u8]); 4] = [
    ("rock", include_bytes!("../../assets/rock.png")),
    ("bricks", include_bytes!("../../assets/bricks.png")),
    ("foliage", include_bytes!("../../assets/foliage.png")),
    ("terrain", include_bytes!("../../assets/terrain.jpg")),
];

/// Deterministic noise and randomness for the generators.
pub mod procedural {
    /// SplitMix64: a tiny, well-mixed generator; good enough for content.
    #[derive(Clone, Debug)]
    pub struct Rng(pub u64);

    impl Rng {
        /// The next 64 random bits.
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// A float in [0, 1).
        pub fn f32(&mut self) -> f32 {
            (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
        }

        /// An integer in [lo, hi).
        pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
            lo + self.next_u64() % (hi - lo).max(1)
        }
    }

    fn hash(x: i32, y: i32, seed: u32) -> f32 {
        let mut h = (x as u32).wrapping_mul(0x27d4_eb2d)
            ^ (y as u32).wrapping_mul(0x1656_67b1)
            ^ seed.wrapping_mul(0x9e37_79b9);
        h ^= h >> 15;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^= h >> 16;
        (h & 0xFFFF) as f32 / 65535.0
    }

    /// Smooth value noise in [0, 1] with integer lattice period `period`
    /// (so textures made from it tile seamlessly).
    pub fn value_noise(x: f32, y: f32, period: i32, seed: u32) -> f32 {
        let (xi, yi) = (x.floor() as i32, y.floor() as i32);
        let (fx, fy) = (x - xi as f32, y - yi as f32);
        let s = |t: f32| t * t * (3.0 - 2.0 * t);
        let (sx, sy) = (s(fx), s(fy));
        let p = period.max(1);
        let at = |dx: i32, dy: i32| hash((xi + dx).rem_euclid(p), (yi + dy).rem_euclid(p), seed);
        let top = at(0, 0) + (at(1, 0) - at(0, 0)) * sx;
        let bottom = at(0, 1) + (at(1, 1) - at(0, 1)) * sx;
        top + (bottom - top) * sy
    }

    /// Fractal noise: `octaves` of value noise, each twice the frequency
    /// and half the amplitude, normalised to [0, 1].
    pub fn fbm(x: f32, y: f32, period: i32, octaves: u32, seed: u32) -> f32 {
        let (mut sum, mut amp, mut norm, mut f) = (0.0, 1.0, 0.0, 1.0);
        for o in 0..octaves {
            sum += amp * value_noise(x * f, y * f, period * f as i32, seed.wrapping_add(o));
            norm += amp;
            amp *= 0.5;
            f *= 2.0;
        }
        sum / norm
    }
}

use procedural::{fbm, Rng};

/// The manifest blob's contents for a config: what `ensure_demo_pack`
/// compares to decide whether an existing pack can be reused.
fn manifest(config: &DemoConfig) -> Vec<u8> {
    serde_json::to_vec_pretty(&serde_json::json!({
        "generator": "gpustream demo pack",
        "generator_version": GENERATOR_VERSION,
        "config": config,
    }))
    .expect("plain JSON")
}

/// Returns `path` holding the demo pack for `config`: reused when a valid
/// pack made from the same config is already there, built otherwise (into a
/// temporary file renamed at the end, so an interrupted build never leaves
/// a pack that looks valid). `progress` shows an indicatif progress bar.
pub fn ensure_demo_pack(
    path: impl AsRef<Path>,
    config: DemoConfig,
    progress: bool,
) -> Result<PathBuf, PackError> {
    let path = path.as_ref().to_path_buf();
    if is_demo_pack(&path, &config) {
        return Ok(path);
    }
    build_demo_pack(&path, config, progress)?;
    Ok(path)
}

/// True when `path` is a valid pack (header and table of contents) whose
/// manifest matches `config`.
pub fn is_demo_pack(path: &Path, config: &DemoConfig) -> bool {
    let Ok(pack) = Pack::open(path) else {
        return false;
    };
    let Some(id) = pack.find(MANIFEST_ASSET) else {
        return false;
    };
    pack.read_blob(id).is_ok_and(|m| m == manifest(config))
}

/// Builds the demo pack at `path` unconditionally.
pub fn build_demo_pack(
    path: &Path,
    config: DemoConfig,
    progress: bool,
) -> Result<gpustream::pack::PackSummary, PackError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| PackError::io("create directory", dir, 0, 0, e))?;
    }
    // One temporary file per process: two processes building the same pack
    // at once (parallel tests, two shells) each rename a whole pack into
    // place, and a reader holding the old file keeps it.
    let tmp = path.with_extension(format!("gspk.partial.{}", std::process::id()));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut writer = PackWriter::create(
        &tmp,
        WriterOptions::default()
            .with_codec(config.codec)
            .with_level(config.level)
            .with_threads(threads),
    )?;
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(config.size_bytes);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} demo pack [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    writer.add_blob(MANIFEST_ASSET, &manifest(&config))?;
    let sources: Vec<(&str, Rgba8Image)> = SOURCES
        .iter()
        .map(|(name, bytes)| Ok((*name, decode_image(Path::new(name), bytes)?)))
        .collect::<Result<_, PackError>>()?;

    // Plan every asset first (cheap, sequential, seeded), then generate
    // them in parallel batches and add them in plan order.
    let plan = plan_assets(&config);
    for batch in plan.chunks(threads.max(1)) {
        let made: Vec<Made> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .iter()
                .map(|item| {
                    let sources = &sources;
                    s.spawn(move || make_asset(item, sources))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("demo generator thread panicked"))
                .collect()
        });
        for (item, asset) in batch.iter().zip(made) {
            bar.set_message(item.name.clone());
            match asset {
                Made::Texture(t) => {
                    writer.add_texture(&item.name, t.format, t.width, t.height, &t.mips)?;
                }
                Made::Blob(b) => {
                    writer.add_blob(&item.name, &b)?;
                }
            }
            bar.inc(item.size);
        }
    }
    let summary = writer.finish()?;
    bar.finish_and_clear();
    std::fs::rename(&tmp, path).map_err(|e| PackError::io("rename to", path, 0, 0, e))?;
    Ok(summary)
}

#[derive(Clone, Debug)]
enum Kind {
    Texture {
        source: usize,
        width: u32,
        height: u32,
        format: TextureFormat,
    },
    Mesh,
    Scene,
}

#[derive(Clone, Debug)]
struct PlanItem {
    name: String,
    kind: Kind,
    /// Uncompressed bytes.
    size: u64,
    seed: u64,
}

enum Made {
    Texture(crate::import::EncodedTexture),
    Blob(Vec<u8>),
}

fn texture_size(format: TextureFormat, w: u32, h: u32) -> u64 {
    (0..gpustream::pack::full_mip_count(w, h))
        .map(|m| {
            let (mw, mh) = gpustream::pack::mip_extent(w, h, m);
            format.data_size(mw, mh)
        })
        .sum()
}

/// The asset list: about 70 % textures, 20 % meshes and 10 % scene text by
/// bytes, summing exactly to `size_bytes`.
fn plan_assets(config: &DemoConfig) -> Vec<PlanItem> {
    let mut rng = Rng(config.seed ^ 0x6770_7374_7265_616d);
    let mut items = Vec::new();
    let mut left = config.size_bytes;
    let dims = [
        (2048, 2048),
        (2048, 1024),
        (1024, 1024),
        (1024, 512),
        (512, 512),
        (256, 256),
    ];
    let mut n = 0u32;
    while left > 0 {
        let slot = n % 10;
        let seed = rng.next_u64();
        let item = if slot < 7 {
            let format = if rng.range(0, 5) < 2 {
                TextureFormat::Bc1Srgb
            } else {
                TextureFormat::Bc7Srgb
            };
            let first = rng.range(0, 3) as usize;
            let fit = dims[first..]
                .iter()
                .map(|&(w, h)| (w, h, texture_size(format, w, h)))
                .find(|&(_, _, size)| size <= left);
            fit.map(|(width, height, size)| {
                let source = rng.range(0, SOURCES.len() as u64) as usize;
                PlanItem {
                    name: format!("textures/{}_{n:04}", SOURCES[source].0),
                    kind: Kind::Texture {
                        source,
                        width,
                        height,
                        format,
                    },
                    size,
                    seed,
                }
            })
        } else {
            None
        };
        let item = item.unwrap_or_else(|| {
            let want = if slot == 9 {
                rng.range(256 << 10, 1 << 20)
            } else {
                rng.range(1 << 20, 4 << 20)
            };
            let size = want.min(left);
            if slot == 9 {
                PlanItem {
                    name: format!("scenes/level_{n:04}.json"),
                    kind: Kind::Scene,
                    size,
                    seed,
                }
            } else {
                PlanItem {
                    name: format!("meshes/mesh_{n:04}.bin"),
                    kind: Kind::Mesh,
                    size,
                    seed,
                }
            }
        });
        left -= item.size;
        items.push(item);
        n += 1;
    }
    items
}

fn make_asset(item: &PlanItem, sources: &[(&str, Rgba8Image)]) -> Made {
    let mut rng = Rng(item.seed);
    match item.kind {
        Kind::Texture {
            source,
            width,
            height,
            format,
        } => {
            let img = vary(&sources[source].1, width, height, &mut rng);
            Made::Texture(encode_texture(&img, ImageOptions { format, srgb: true }))
        }
        Kind::Mesh => Made::Blob(mesh_bytes(item.size as usize, &mut rng)),
        Kind::Scene => Made::Blob(scene_text(item.size as usize, &mut rng)),
    }
}

/// A procedural variation of a source image at `width` x `height`: scaled
/// and offset (with wrap-around), tinted, and overlaid with detail noise so
/// that no two demo textures share blocks. Fully transparent texels keep
/// their colour, as exported cut-out textures usually do.
fn vary(src: &Rgba8Image, width: u32, height: u32, rng: &mut Rng) -> Rgba8Image {
    let scale = 0.5 + rng.f32() * 1.5;
    let (ox, oy) = (rng.f32() * src.width as f32, rng.f32() * src.height as f32);
    let tint = [
        0.75 + rng.f32() * 0.5,
        0.75 + rng.f32() * 0.5,
        0.75 + rng.f32() * 0.5,
    ];
    let detail_seed = rng.next_u64() as u32;
    let detail_amp = 2.0 + rng.f32() * 6.0;
    // The detail noise is evaluated once on a small tile and repeated:
    // per-texel fractal noise would dominate the build time.
    const DETAIL: usize = 128;
    let period = 4 + rng.range(0, 8) as i32;
    let detail: Vec<f32> = (0..DETAIL * DETAIL)
        .map(|i| {
            let (x, y) = ((i % DETAIL) as f32, (i / DETAIL) as f32);
            let f = period as f32 / DETAIL as f32;
            (fbm(x * f, y * f, period, 3, detail_seed) - 0.5) * detail_amp
        })
        .collect();
    let (sw, sh) = (src.width as usize, src.height as usize);
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 4);
    for y in 0..height as usize {
        let sy = ((y as f32 / scale + oy) as usize) % sh;
        let drow = &detail[(y % DETAIL) * DETAIL..][..DETAIL];
        for x in 0..width as usize {
            let sx = ((x as f32 / scale + ox) as usize) % sw;
            let p = &src.pixels[(sy * sw + sx) * 4..][..4];
            if p[3] == 0 {
                pixels.extend_from_slice(p);
                continue;
            }
            let d = drow[x % DETAIL];
            for c in 0..3 {
                pixels.push((p[c] as f32 * tint[c] + d).clamp(0.0, 255.0) as u8);
            }
            pixels.push(p[3]);
        }
    }
    Rgba8Image {
        width,
        height,
        pixels,
    }
}

/// Mesh-like bytes: an interleaved vertex buffer (position, normal, uv as
/// f32) of a displaced grid, then its u32 triangle indices, cut to `size`.
fn mesh_bytes(size: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(size);
    let seed = rng.next_u64() as u32;
    let side = 64 + rng.range(0, 192) as usize;
    let scale = 0.1 + rng.f32() * 10.0;
    let f = 8.0 / side as f32;
    let height: Vec<f32> = (0..(side + 1) * (side + 1))
        .map(|i| {
            fbm(
                (i % (side + 1)) as f32 * f,
                (i / (side + 1)) as f32 * f,
                8,
                4,
                seed,
            ) * scale
        })
        .collect();
    while out.len() < size {
        for y in 0..side {
            for x in 0..side {
                let (u, v) = (x as f32 / side as f32, y as f32 / side as f32);
                let h = height[y * (side + 1) + x];
                let hx = height[y * (side + 1) + x + 1] - h;
                let hy = height[(y + 1) * (side + 1) + x] - h;
                let len = (hx * hx + hy * hy + 1e-4).sqrt();
                for f in [
                    u * scale,
                    h,
                    v * scale,
                    -hx / len,
                    0.01 / len,
                    -hy / len,
                    u,
                    v,
                ] {
                    out.extend_from_slice(&f.to_le_bytes());
                }
            }
        }
        let side = side as u32;
        for y in 0..side - 1 {
            for x in 0..side - 1 {
                let i = y * side + x;
                for idx in [i, i + 1, i + side, i + 1, i + side + 1, i + side] {
                    out.extend_from_slice(&idx.to_le_bytes());
                }
            }
        }
    }
    out.truncate(size);
    out
}

/// JSON-like scene text: entities with names, transforms and components.
fn scene_text(size: usize, rng: &mut Rng) -> Vec<u8> {
    use std::fmt::Write;
    const KINDS: [&str; 6] = ["rock", "tree", "crate", "lamp", "wall", "npc"];
    const COMPONENTS: [&str; 5] = [
        "MeshRenderer",
        "Collider",
        "RigidBody",
        "AudioSource",
        "Script",
    ];
    let mut s = String::with_capacity(size + 512);
    s.push_str("{\"entities\":[\n");
    let mut id = 0u32;
    while s.len() < size {
        let kind = KINDS[rng.range(0, KINDS.len() as u64) as usize];
        let _ = write!(
            s,
            "  {{\"id\":{id},\"name\":\"{kind}_{id:05}\",\"transform\":{{\"position\":[{:.3},{:.3},{:.3}],\"rotation\":[0,{:.4},0,{:.4}],\"scale\":{:.2}}},\"components\":[",
            rng.f32() * 2000.0 - 1000.0,
            rng.f32() * 50.0,
            rng.f32() * 2000.0 - 1000.0,
            rng.f32(),
            rng.f32(),
            0.5 + rng.f32()
        );
        let n = rng.range(1, 4);
        for c in 0..n {
            let comp = COMPONENTS[rng.range(0, COMPONENTS.len() as u64) as usize];
            let _ = write!(
                s,
                "{}{{\"type\":\"{comp}\",\"asset\":\"meshes/{kind}_{:02}.bin\"}}",
                if c > 0 { "," } else { "" },
                rng.range(0, 40)
            );
        }
        s.push_str("]},\n");
        id += 1;
    }
    let mut b = s.into_bytes();
    b.truncate(size);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_sum_to_the_requested_size() {
        for size in [1u64, 100_000, 3 << 20, 64 << 20] {
            let plan = plan_assets(&DemoConfig {
                size_bytes: size,
                ..Default::default()
            });
            assert_eq!(plan.iter().map(|p| p.size).sum::<u64>(), size);
        }
        let plan = plan_assets(&DemoConfig::default());
        let tex: u64 = plan
            .iter()
            .filter(|p| matches!(p.kind, Kind::Texture { .. }))
            .map(|p| p.size)
            .sum();
        let share = tex as f64 / (256u64 << 20) as f64;
        assert!((0.55..0.85).contains(&share), "texture share {share}");
    }

    #[test]
    fn noise_tiles_with_its_period() {
        for (x, y) in [(0.3f32, 0.7f32), (2.5, 5.25)] {
            let a = procedural::value_noise(x, y, 4, 9);
            let b = procedural::value_noise(x + 4.0, y + 8.0, 4, 9);
            assert!((a - b).abs() < 1e-5);
        }
    }
}
