//! The demo pack: many large virtual textures whose BC blocks are generated
//! procedurally (not encoded from images), so a pack of gigabytes is built
//! in seconds. Every tile of every mip is one flat colour with per-texel
//! noise: the hue says which mip it is, the brightness which texture and
//! tile, so a screenshot shows where each mip landed and a test can check
//! every pixel against the colours it may legally show.

use std::path::{Path, PathBuf};

use gpustream::codec::Codec;
use gpustream::pack::{full_mip_count, Pack, PackWriter, TextureFormat, WriterOptions};

/// What the scene's pack holds: `textures` square textures of `size`
/// texels, all of one BC format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SceneConfig {
    /// Number of virtual textures (one terrain patch each), 1..=2048.
    pub textures: u32,
    /// Width and height of mip 0, a power of two from 1024 to 16384.
    pub size: u32,
    /// `Bc1` or `Bc7`.
    pub format: TextureFormat,
}

/// How far the dark endpoint of every block is below the tile colour: the
/// noise amplitude, and the colour interval a test accepts.
pub const NOISE: u8 = 8;

impl SceneConfig {
    /// Checks the ranges the shaders and the feedback encoding rely on.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=2048).contains(&self.textures) {
            return Err(format!("--textures {} is outside 1..=2048", self.textures));
        }
        if !self.size.is_power_of_two() || !(1024..=16384).contains(&self.size) {
            return Err(format!(
                "--size {} must be a power of two in 1024..=16384",
                self.size
            ));
        }
        if !matches!(self.format, TextureFormat::Bc1 | TextureFormat::Bc7) {
            return Err(format!("format {} is not bc1 or bc7", self.format));
        }
        Ok(())
    }

    /// Mips of each texture (a full chain).
    pub fn mip_count(&self) -> u8 {
        full_mip_count(self.size, self.size)
    }

    /// The asset name of texture `i`.
    pub fn asset_name(i: u32) -> String {
        format!("vt/patch{i:04}")
    }

    /// The pack's file name, which encodes the configuration.
    pub fn pack_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!(
            "vt-{}x{}-{}.gspk",
            self.textures, self.size, self.format
        ))
    }

    /// Uncompressed bytes of texel data of one texture, all mips.
    pub fn texture_bytes(&self) -> u64 {
        (0..self.mip_count())
            .map(|m| {
                let s = (self.size >> m).max(1);
                self.format.data_size(s, s)
            })
            .sum()
    }
}

fn hash(mut x: u64) -> u64 {
    // splitmix64 finaliser: cheap, well mixed, deterministic.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The colour of tile (`tx`, `ty`) of `mip` of texture `tex` (the bright
/// block endpoint). Hue encodes the mip; value the texture and tile, with a
/// checkerboard so tile borders show. Channels are even (BC7 mode 6 stores
/// them exactly with a zero p-bit) and at least 48 (so the dark endpoint
/// stays below it in every channel).
pub fn tile_colour(tex: u32, mip: u8, tx: u32, ty: u32) -> [u8; 3] {
    let h = hash(((tex as u64) << 40) ^ ((mip as u64) << 32) ^ ((ty as u64) << 16) ^ tx as u64);
    let hue = (mip as f32 * 47.0) % 360.0;
    let mut v = 0.72 + 0.23 * ((h & 0xffff) as f32 / 65535.0);
    if (tx + ty) % 2 == 1 {
        v -= 0.15;
    }
    let s = 0.6;
    let c = v * s;
    let hp = hue / 60.0;
    let x = c * (1.0 - ((hp % 2.0) - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = v - c;
    let q = |f: f32| (((f + m) * 255.0).round() as u8).clamp(48, 254) & !1;
    [q(r), q(g), q(b)]
}

/// The dark endpoint: the tile colour minus [`NOISE`].
pub fn dark(c: [u8; 3]) -> [u8; 3] {
    c.map(|v| v - NOISE)
}

fn to565(c: [u8; 3]) -> u16 {
    ((c[0] as u16 >> 3) << 11) | ((c[1] as u16 >> 2) << 5) | (c[2] as u16 >> 3)
}

/// The 8-bit colour a BC1 endpoint decodes to.
pub fn bc1_endpoint(c: [u8; 3]) -> [u8; 3] {
    let v = to565(c);
    let (r, g, b) = ((v >> 11) as u8, ((v >> 5) & 63) as u8, (v & 31) as u8);
    [
        (r << 3) | (r >> 2),
        (g << 2) | (g >> 4),
        (b << 3) | (b >> 2),
    ]
}

/// The colour interval (dark, bright) texels of this tile decode to.
pub fn tile_interval(
    format: TextureFormat,
    tex: u32,
    mip: u8,
    tx: u32,
    ty: u32,
) -> ([u8; 3], [u8; 3]) {
    let c = tile_colour(tex, mip, tx, ty);
    match format {
        TextureFormat::Bc1 => (bc1_endpoint(dark(c)), bc1_endpoint(c)),
        _ => (dark(c), c),
    }
}

fn bc1_block(c: [u8; 3], noise: u32) -> [u8; 8] {
    let (c0, c1) = (to565(c), to565(dark(c)));
    let mut b = [0u8; 8];
    b[0..2].copy_from_slice(&c0.to_le_bytes());
    b[2..4].copy_from_slice(&c1.to_le_bytes());
    // Indices 0 and 1 only select the endpoints; 2 and 3 the points between.
    b[4..8].copy_from_slice(&noise.to_le_bytes());
    b
}

/// A BC7 mode 6 block: endpoints `c` and `dark(c)` (alpha 254), p-bits 0,
/// random 4-bit indices (the first one 3 bits, its top bit implied 0).
fn bc7_block(c: [u8; 3], noise: u64) -> [u8; 16] {
    let d = dark(c);
    let mut bits: u128 = 1 << 6; // mode 6
    let mut at = 7;
    let mut put = |v: u128, n: u32| {
        bits |= v << at;
        at += n;
    };
    for ch in 0..3 {
        put((c[ch] >> 1) as u128, 7);
        put((d[ch] >> 1) as u128, 7);
    }
    put(127, 7);
    put(127, 7);
    put(0, 2); // p-bits
    put((noise & 0x7) as u128, 3);
    put((noise >> 3) as u128 & ((1u128 << 60) - 1), 60);
    bits.to_le_bytes()
}

/// Every mip of texture `tex`, finest first, as rows of BC blocks.
pub fn texture_mips(cfg: &SceneConfig, tex: u32) -> Vec<Vec<u8>> {
    let (tw, th) = cfg.format.tile_extent();
    let bpb = cfg.format.bytes_per_block() as usize;
    let mut rng = hash(tex as u64 + 1);
    (0..cfg.mip_count())
        .map(|m| {
            let s = (cfg.size >> m).max(1);
            let blocks = s.div_ceil(4);
            // Mips smaller than a tile are packed: one colour (tile 0, 0).
            let tiled = cfg.format.data_size(s, s) >= gpustream::pack::TILE_BYTES as u64;
            let mut out = Vec::with_capacity(blocks as usize * blocks as usize * bpb);
            for by in 0..blocks {
                let ty = if tiled { by * 4 / th } else { 0 };
                let mut last = (u32::MAX, [0u8; 3]);
                for bx in 0..blocks {
                    let tx = if tiled { bx * 4 / tw } else { 0 };
                    if last.0 != tx {
                        last = (tx, tile_colour(tex, m, tx, ty));
                    }
                    rng = hash(rng);
                    if bpb == 8 {
                        out.extend_from_slice(&bc1_block(last.1, rng as u32));
                    } else {
                        out.extend_from_slice(&bc7_block(last.1, rng));
                    }
                }
            }
            out
        })
        .collect()
}

/// Whether `path` holds a complete pack of this configuration.
pub fn pack_matches(path: &Path, cfg: &SceneConfig) -> bool {
    let Ok(pack) = Pack::open(path) else {
        return false;
    };
    pack.assets().len() == cfg.textures as usize
        && (0..cfg.textures).all(|i| {
            pack.find(&SceneConfig::asset_name(i))
                .and_then(|id| pack.asset(id).texture)
                .is_some_and(|t| {
                    t.format == cfg.format
                        && t.width == cfg.size
                        && t.height == cfg.size
                        && t.mip_count == cfg.mip_count()
                })
        })
}

/// Builds the pack at `path` unless a matching one is there; shows a
/// progress bar when `progress`. Writes to a temporary name first so an
/// interrupted run never leaves a pack that looks complete.
pub fn ensure_pack(
    path: &Path,
    cfg: &SceneConfig,
    progress: bool,
) -> Result<bool, Box<dyn std::error::Error>> {
    cfg.validate()?;
    if pack_matches(path, cfg) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("gspk.partial");
    let bar = if progress {
        let b = indicatif::ProgressBar::new(cfg.textures as u64 * cfg.texture_bytes());
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "generating {msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.set_message(path.display().to_string());
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut w = PackWriter::create(&tmp, WriterOptions::default().with_codec(Codec::Lz4))?;
    for i in 0..cfg.textures {
        let mips = texture_mips(cfg, i);
        w.add_texture(
            &SceneConfig::asset_name(i),
            cfg.format,
            cfg.size,
            cfg.size,
            &mips,
        )?;
        bar.inc(cfg.texture_bytes());
    }
    let summary = w.finish()?;
    std::fs::rename(&tmp, path)?;
    bar.finish_and_clear();
    if progress {
        println!(
            "built {}: {} textures, {:.2} GiB of texel data, {:.2} GiB stored",
            path.display(),
            summary.assets,
            summary.uncompressed as f64 / (1u64 << 30) as f64,
            summary.stored as f64 / (1u64 << 30) as f64
        );
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bc1_endpoints_keep_four_colour_mode() {
        for t in 0..50 {
            for m in 0..15 {
                let c = tile_colour(t, m, t % 7, m as u32 % 3);
                assert!(to565(c) > to565(dark(c)));
            }
        }
    }
}
