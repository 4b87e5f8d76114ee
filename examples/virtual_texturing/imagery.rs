//! The demo pack from real images: each virtual texture takes one image of
//! a directory (assets/ by default), mirrored into a seamless square tile
//! and repeated to the texture's size, with a per-texture tint so patches
//! differ, and goes through the packer's BCn encoder
//! (`gpustream_tools::import::encode_mip`).
//!
//! Encoding a 16384^2 image would take seconds per texture and a GiB of
//! memory, so the repetition is used: a texture made of a repeated tile of
//! P texels has mips made of its tile's mips (P/2^m texels) for as long as
//! that tile is whole blocks, and BC blocks are encoded independently, so
//! each large mip is its tile's blocks copied, not encoded again. Mips of
//! 2048 texels and less are built and encoded whole.

use std::path::{Path, PathBuf};

use gpustream::codec::Codec;
use gpustream::pack::{PackWriter, WriterOptions};
use gpustream_tools::import::{decode_image, downsample, encode_mip, Rgba8Image};

use super::content::{pack_matches, SceneConfig};

/// Side of the square each image is resampled to before mirroring.
const SOURCE: u32 = 512;
/// Mips at most this wide are built and encoded whole.
const WHOLE: u32 = 2048;

/// The images (png, jpg, jpeg) in `dir`, sorted by name.
pub fn list_images(dir: &Path) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("--images {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
        })
        .collect();
    out.sort();
    if out.is_empty() {
        return Err(format!("--images {}: no png or jpg files", dir.display()).into());
    }
    Ok(out)
}

/// The cached pack's path for `scene` built from `images`: the name
/// carries a hash of the images' names, sizes and modification times, so
/// editing an image builds a new pack.
pub fn pack_path(dir: &Path, scene: &SceneConfig, images: &[PathBuf]) -> PathBuf {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    };
    for p in images {
        eat(p.to_string_lossy().as_bytes());
        if let Ok(m) = std::fs::metadata(p) {
            eat(&m.len().to_le_bytes());
            if let Ok(t) = m.modified() {
                let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                eat(&d.as_nanos().to_le_bytes());
            }
        }
    }
    dir.join(format!(
        "vt-img-{h:016x}-{}x{}-{}.gspk",
        scene.textures, scene.size, scene.format
    ))
}

/// Bilinear resample of `img` to `w` x `h` (after box-halving while the
/// image is at least twice as large, so big images do not alias).
fn resample(img: &Rgba8Image, w: u32, h: u32) -> Rgba8Image {
    let mut src = img.clone();
    while src.width >= 2 * w && src.height >= 2 * h {
        src = downsample(&src, false);
    }
    let (sw, sh) = (src.width as f32, src.height as f32);
    let at = |x: u32, y: u32| {
        let i = ((y.min(src.height - 1) * src.width + x.min(src.width - 1)) * 4) as usize;
        &src.pixels[i..i + 4]
    };
    let mut pixels = Vec::with_capacity((w * h * 4) as usize);
    for y in 0..h {
        let fy = ((y as f32 + 0.5) * sh / h as f32 - 0.5).max(0.0);
        let (y0, ty) = (fy as u32, fy.fract());
        for x in 0..w {
            let fx = ((x as f32 + 0.5) * sw / w as f32 - 0.5).max(0.0);
            let (x0, tx) = (fx as u32, fx.fract());
            for c in 0..4 {
                let top = at(x0, y0)[c] as f32 * (1.0 - tx) + at(x0 + 1, y0)[c] as f32 * tx;
                let bot = at(x0, y0 + 1)[c] as f32 * (1.0 - tx) + at(x0 + 1, y0 + 1)[c] as f32 * tx;
                pixels.push((top * (1.0 - ty) + bot * ty).round() as u8);
            }
        }
    }
    Rgba8Image {
        width: w,
        height: h,
        pixels,
    }
}

/// The seamless tile of texture `tex`: the image mirrored in x and y
/// (2 * SOURCE texels square), tinted per texture.
fn period_tile(src: &Rgba8Image, tex: u32) -> Rgba8Image {
    let q = SOURCE;
    let base = resample(src, q, q);
    let mut s = (tex as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut tint = [0f32; 3];
    for t in &mut tint {
        s ^= s >> 29;
        s = s.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        *t = 0.8 + 0.3 * ((s >> 40) as f32 / (1u64 << 24) as f32);
    }
    let p = 2 * q;
    let mut pixels = Vec::with_capacity((p * p * 4) as usize);
    for y in 0..p {
        let sy = if y < q { y } else { p - 1 - y };
        for x in 0..p {
            let sx = if x < q { x } else { p - 1 - x };
            let i = ((sy * q + sx) * 4) as usize;
            for (c, t) in tint.iter().enumerate() {
                pixels.push((base.pixels[i + c] as f32 * t).min(255.0) as u8);
            }
            pixels.push(base.pixels[i + 3]);
        }
    }
    Rgba8Image {
        width: p,
        height: p,
        pixels,
    }
}

/// `tile` repeated to `size` x `size` (at least 4, a whole BC block; a
/// texture smaller than a block samples only its top-left corner).
fn repeat(tile: &Rgba8Image, size: u32) -> Rgba8Image {
    let s = size.max(4);
    let mut pixels = Vec::with_capacity((s * s * 4) as usize);
    for y in 0..s {
        let row = ((y % tile.height) * tile.width * 4) as usize;
        for x in 0..s {
            let i = row + ((x % tile.width) * 4) as usize;
            pixels.extend_from_slice(&tile.pixels[i..i + 4]);
        }
    }
    Rgba8Image {
        width: s,
        height: s,
        pixels,
    }
}

/// Every mip of texture `tex` (finest first, rows of BC blocks) repeating
/// `tile` over `scene.size` texels.
pub fn texture_mips(scene: &SceneConfig, tile: Rgba8Image) -> Vec<Vec<u8>> {
    let bpb = scene.format.bytes_per_block() as usize;
    let mut period = tile;
    let mut whole: Option<Rgba8Image> = None;
    let mut out = Vec::new();
    for m in 0..scene.mip_count() {
        let sm = (scene.size >> m).max(1);
        if whole.is_none() && (sm <= WHOLE || period.width < 4 || !sm.is_multiple_of(period.width))
        {
            whole = Some(repeat(&period, sm));
        }
        let data = match &whole {
            Some(img) => {
                let mut d = encode_mip(img, scene.format);
                // A mip smaller than a block was encoded from a 4x4 image.
                d.truncate(scene.format.data_size(sm, sm) as usize);
                d
            }
            None => {
                // The tile's blocks, copied across and down the mip.
                let tb = (period.width / 4) as usize;
                let blocks = encode_mip(&period, scene.format);
                let n = (sm / 4) as usize;
                let mut d = Vec::with_capacity(n * n * bpb);
                for by in 0..n {
                    let row = &blocks[(by % tb) * tb * bpb..][..tb * bpb];
                    for _ in 0..n / tb {
                        d.extend_from_slice(row);
                    }
                }
                d
            }
        };
        out.push(data);
        match &mut whole {
            Some(img) => *img = downsample(img, false),
            None => period = downsample(&period, false),
        }
    }
    out
}

/// Builds the image pack at `path` unless a matching one is there, with a
/// progress bar when `progress`. Written under a temporary name first.
pub fn ensure_pack(
    path: &Path,
    scene: &SceneConfig,
    images: &[PathBuf],
    progress: bool,
) -> Result<bool, Box<dyn std::error::Error>> {
    scene.validate()?;
    if pack_matches(path, scene) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut sources = Vec::with_capacity(images.len());
    for p in images {
        let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        sources.push(decode_image(p, &bytes)?);
    }
    let bar = if progress {
        let b = indicatif::ProgressBar::new(scene.textures as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "encoding {msg} [{bar:40}] {pos}/{len} textures (eta {eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.set_message(path.display().to_string());
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let tmp = path.with_extension("gspk.partial");
    let mut w = PackWriter::create(&tmp, WriterOptions::default().with_codec(Codec::Lz4))?;
    for i in 0..scene.textures {
        let tile = period_tile(&sources[i as usize % sources.len()], i);
        let mips = texture_mips(scene, tile);
        w.add_texture(
            &SceneConfig::asset_name(i),
            scene.format,
            scene.size,
            scene.size,
            &mips,
        )?;
        bar.inc(1);
    }
    let summary = w.finish()?;
    std::fs::rename(&tmp, path)?;
    bar.finish_and_clear();
    if progress {
        println!(
            "built {} from {} images: {} textures, {:.2} GiB of texel data, {:.2} GiB stored",
            path.display(),
            images.len(),
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
    use gpustream::pack::TextureFormat;

    #[test]
    fn repeated_mips_equal_mips_encoded_whole() {
        // A 4096 texture (repetition path for mips 0 and 1) against the
        // same texture built and encoded whole at every mip.
        let scene = SceneConfig {
            textures: 1,
            size: 4096,
            format: TextureFormat::Bc1,
        };
        let src = Rgba8Image {
            width: 8,
            height: 8,
            pixels: (0..256u32).map(|i| (i * 37 % 251) as u8).collect(),
        };
        let tile = period_tile(&src, 3);
        let fast = texture_mips(&scene, tile.clone());
        let mut img = repeat(&tile, scene.size);
        for (m, data) in fast.iter().enumerate() {
            let sm = (scene.size >> m).max(1);
            assert_eq!(data.len() as u64, scene.format.data_size(sm, sm), "mip {m}");
            if sm > WHOLE {
                assert!(*data == encode_mip(&img, scene.format), "mip {m} differs");
            }
            img = downsample(&img, false);
        }
    }
}
