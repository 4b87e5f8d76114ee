//! Turning input files into assets: PNG and JPEG images become tiled
//! textures with a full mip chain, block-compressed with intel_tex_2 (ISPC
//! kernels; see docs/pack-format.md for why this encoder); DDS and KTX2
//! files keep their levels (zstd supercompression is undone, Basis
//! Universal data is transcoded to BC7 or BC1); anything else becomes a
//! blob. Each texture records its source kind and the time its conversion
//! took.

use gpustream::pack::{full_mip_count, mip_extent, PackError, TextureFormat, MAX_TEXTURE_DIM};
use std::path::Path;

mod jpeg_frame;
mod texture_files;
pub use texture_files::{add_file, load_texture};

/// How images are turned into textures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageOptions {
    /// The format images are encoded to: bc7, bc1, bc3, bc4, bc5 or rgba8
    /// (the sRGB flag below picks the sRGB form where one exists).
    pub format: TextureFormat,
    /// Treat colour as sRGB: mips are averaged in linear light and the
    /// texture gets an sRGB format.
    pub srgb: bool,
}

impl Default for ImageOptions {
    fn default() -> Self {
        ImageOptions {
            format: TextureFormat::Bc7Srgb,
            srgb: true,
        }
    }
}

/// An RGBA8 image in memory, rows tightly packed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgba8Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 4` bytes.
    pub pixels: Vec<u8>,
}

/// A texture ready for [`PackWriter::add_texture`](gpustream::pack::PackWriter::add_texture): format, size and mips.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedTexture {
    /// The texel format.
    pub format: TextureFormat,
    /// Width of mip 0 (a multiple of the block size).
    pub width: u32,
    /// Height of mip 0.
    pub height: u32,
    /// Mips, finest first, rows of texel blocks tightly packed.
    pub mips: Vec<Vec<u8>>,
}

/// What kind of input a file is, from its first bytes (and, failing that,
/// its extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// PNG or JPEG.
    Image,
    /// A KTX2 container.
    Ktx2,
    /// A DDS file.
    Dds,
    /// Anything else.
    Blob,
}

/// Classifies an input by its magic bytes; an extension of png/jpg/jpeg/ktx2/dds
/// with other contents is still treated as that kind, so a damaged image is
/// reported as one rather than silently packed as a blob.
pub fn input_kind(path: &Path, head: &[u8]) -> InputKind {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") || head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return InputKind::Image;
    }
    if head.starts_with(&[0xAB, 0x4B, 0x54, 0x58, 0x20, 0x32, 0x30, 0xBB]) {
        return InputKind::Ktx2;
    }
    if head.starts_with(b"DDS ") {
        return InputKind::Dds;
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("png" | "jpg" | "jpeg") => InputKind::Image,
        Some("ktx2") => InputKind::Ktx2,
        Some("dds") => InputKind::Dds,
        _ => InputKind::Blob,
    }
}

/// The most a deflate stream expands (RFC 1951's longest match costs at
/// least 2 bits per 258 bytes: about 1032:1). A PNG's pixels cannot hold
/// more raw bytes than its file, times this.
const DEFLATE_MAX_RATIO: u64 = 1032;

/// The width and height a PNG's IHDR chunk declares (big-endian at offsets
/// 16 and 20), if `bytes` starts like a PNG.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") || bytes.get(12..16)? != b"IHDR" {
        return None;
    }
    let be = |o: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(o..o + 4)?.try_into().ok()?))
    };
    Some((be(16)?, be(20)?))
}

/// The most pixels one byte of a compressed image can describe (see
/// [`decode_image`]).
const MAX_PIXELS_PER_BYTE: u64 = 256;

/// Decodes a PNG or JPEG to RGBA8. `path` names the file in errors.
///
/// The declared size is checked before anything is decoded: at most
/// [`MAX_TEXTURE_DIM`] a side, no more pixels than the file's bytes can
/// describe (tighter for PNG), and the decoder is held to the allocation
/// that size needs, so a small file declaring a huge image costs an error,
/// not the memory. A JPEG's headers are checked too, because its decoder
/// panics on some files: only 4:4:4, 4:2:2, 4:4:0 and 4:2:0 sampling (and
/// grayscale) reach it, with an Adobe colour transform that fits the frame's
/// components ([`PackError::MalformedInput`] names the header and its
/// offset).
pub fn decode_image(path: &Path, bytes: &[u8]) -> Result<Rgba8Image, PackError> {
    let err = |reason: String| PackError::Import {
        path: path.to_path_buf(),
        reason,
    };
    let reader = || {
        image::ImageReader::new(std::io::Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|e| err(format!("cannot read image: {e}")))
    };
    if let Some((w, h)) = png_size(bytes) {
        // Checked from the header before the decoder sees the file: a size
        // out of range, or more pixels than the file's bytes can hold even
        // at 1 bit per pixel (a filter byte and w/8 bytes a row), deflated
        // at the best ratio deflate has.
        if w == 0 || h == 0 || w > MAX_TEXTURE_DIM || h > MAX_TEXTURE_DIM {
            return Err(err(format!(
                "PNG header (offset 16) declares {w}x{h}, outside 1..={MAX_TEXTURE_DIM}"
            )));
        }
        let raw_min = u64::from(h) * (1 + u64::from(w).div_ceil(8));
        if raw_min > bytes.len() as u64 * DEFLATE_MAX_RATIO {
            return Err(err(format!(
                "PNG header (offset 16) declares {w}x{h}: at least {raw_min} bytes of pixels, more than its {} bytes can hold compressed",
                bytes.len()
            )));
        }
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        // Before any decoding: the JPEG decoder panics on some sampling
        // layouts and colour transforms instead of returning an error (see
        // jpeg_frame).
        jpeg_frame::check(path, bytes)?;
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_TEXTURE_DIM);
    limits.max_image_height = Some(MAX_TEXTURE_DIM);
    let mut header = reader()?;
    header.limits(limits.clone());
    // Reads the header only (IHDR, SOF), with the size limits applied.
    let (w, h) = header
        .into_dimensions()
        .map_err(|e| err(format!("cannot decode image header: {e}")))?;
    if w == 0 || h == 0 || w > MAX_TEXTURE_DIM || h > MAX_TEXTURE_DIM {
        return Err(err(format!(
            "image size {w}x{h} is outside 1..={MAX_TEXTURE_DIM}"
        )));
    }
    let pixels = u64::from(w) * u64::from(h);
    // Any format: no more pixels than the file's bytes can describe at the
    // best ratio its codec reaches. A baseline JPEG spends at least 2 bits
    // (a DC difference and an end-of-block) on each 8x8 block of each
    // component, so one byte describes at most 256 pixels of one component;
    // PNG is bounded more tightly above. Without this, a few hundred bytes
    // declaring 16384x16384 would make the decoder allocate 768 MiB.
    if pixels > bytes.len() as u64 * MAX_PIXELS_PER_BYTE {
        return Err(err(format!(
            "the header declares {w}x{h} ({pixels} pixels), more than its {} bytes can describe",
            bytes.len()
        )));
    }
    // The decoder's own buffers: at most 8 bytes a pixel (16-bit RGBA),
    // plus room for its tables and a row or two.
    limits.max_alloc = Some(pixels * 8 + (16 << 20));
    let mut decoder = reader()?;
    decoder.limits(limits);
    // The decoders are third-party code fed untrusted bytes; the header
    // check above keeps the JPEG decoder off every panic the fuzzer and the
    // sweeps in jpeg_frame found, and this keeps one they did not find
    // an error naming the file instead of the end of the packer (in builds
    // that unwind; the fuzz targets still abort on it, so it gets found).
    // Nothing outlives the decoder, so no broken state is seen afterwards.
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decoder.decode()))
        .map_err(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            err(format!(
                "the image decoder failed on this file's data ({what}): the file is damaged or laid out in a way the decoder does not handle"
            ))
        })?;
    let img = decoded.map_err(|e| err(format!("cannot decode image: {e}")))?;
    let rgba = img.to_rgba8();
    Ok(Rgba8Image {
        width: rgba.width(),
        height: rgba.height(),
        pixels: rgba.into_raw(),
    })
}

/// Reads an input file whole. Only regular files are read: a directory,
/// a device such as `/dev/zero` or a FIFO has no length to bound the read
/// by. The read never goes past the length the file had when opened.
pub fn read_input(path: &Path) -> Result<Vec<u8>, PackError> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| PackError::io("open", path, 0, 0, e))?;
    let meta = f
        .metadata()
        .map_err(|e| PackError::io("stat", path, 0, 0, e))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "a device, FIFO or socket"
        };
        return Err(PackError::Import {
            path: path.to_path_buf(),
            reason: format!("not a regular file ({kind}): inputs must be files"),
        });
    }
    let len = meta.len();
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len as usize)
        .map_err(|e| PackError::Import {
            path: path.to_path_buf(),
            reason: format!("cannot hold its {len} bytes in memory: {e}"),
        })?;
    f.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| PackError::io("read", path, bytes.len() as u64, len, e))?;
    if (bytes.len() as u64) < len {
        return Err(PackError::io(
            "read",
            path,
            bytes.len() as u64,
            len - bytes.len() as u64,
            std::io::ErrorKind::UnexpectedEof.into(),
        ));
    }
    Ok(bytes)
}

// sRGB <-> linear through tables: mip generation touches every texel of
// every mip, and powf per channel would dominate the demo pack's build.
fn srgb_to_linear_table() -> &'static [f32; 256] {
    static TABLE: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0f32; 256];
        for (i, v) in t.iter_mut().enumerate() {
            let c = i as f32 / 255.0;
            *v = if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            };
        }
        t
    })
}

fn linear_to_srgb_table() -> &'static [u8; 4096] {
    static TABLE: std::sync::OnceLock<[u8; 4096]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [0u8; 4096];
        for (i, v) in t.iter_mut().enumerate() {
            let l = (i as f32 + 0.5) / 4096.0;
            let c = if l <= 0.003_130_8 {
                l * 12.92
            } else {
                1.055 * l.powf(1.0 / 2.4) - 0.055
            };
            *v = (c * 255.0 + 0.5).clamp(0.0, 255.0) as u8;
        }
        t
    })
}

/// Halves an image (each dimension to at least 1) with a 2x2 box filter,
/// averaging colour in linear light when `srgb` (alpha always linearly).
pub fn downsample(img: &Rgba8Image, srgb: bool) -> Rgba8Image {
    let (w, h) = (img.width as usize, img.height as usize);
    let (nw, nh) = ((w / 2).max(1), (h / 2).max(1));
    let mut out = vec![0u8; nw * nh * 4];
    let to_lin = srgb_to_linear_table();
    let to_srgb = linear_to_srgb_table();
    for y in 0..nh {
        let y0 = (2 * y).min(h - 1);
        let y1 = (2 * y + 1).min(h - 1);
        for x in 0..nw {
            let x0 = (2 * x).min(w - 1);
            let x1 = (2 * x + 1).min(w - 1);
            let px = [(x0, y0), (x1, y0), (x0, y1), (x1, y1)];
            let o = (y * nw + x) * 4;
            for c in 0..4 {
                let v = if srgb && c < 3 {
                    let sum: f32 = px
                        .iter()
                        .map(|&(sx, sy)| to_lin[img.pixels[(sy * w + sx) * 4 + c] as usize])
                        .sum();
                    to_srgb[((sum * 0.25 * 4096.0) as usize).min(4095)]
                } else {
                    let sum: u32 = px
                        .iter()
                        .map(|&(sx, sy)| img.pixels[(sy * w + sx) * 4 + c] as u32)
                        .sum();
                    ((sum + 2) / 4) as u8
                };
                out[o + c] = v;
            }
        }
    }
    Rgba8Image {
        width: nw as u32,
        height: nh as u32,
        pixels: out,
    }
}

/// Pads an image by repeating its last column and row up to multiples of
/// `d` (BCn encoders and wgpu work in whole 4x4 blocks).
fn pad_to_blocks(img: &Rgba8Image, d: u32) -> std::borrow::Cow<'_, Rgba8Image> {
    let (pw, ph) = (img.width.div_ceil(d) * d, img.height.div_ceil(d) * d);
    if (pw, ph) == (img.width, img.height) {
        return std::borrow::Cow::Borrowed(img);
    }
    let (w, h) = (img.width as usize, img.height as usize);
    let mut pixels = Vec::with_capacity(pw as usize * ph as usize * 4);
    for y in 0..ph as usize {
        let row = &img.pixels[y.min(h - 1) * w * 4..][..w * 4];
        pixels.extend_from_slice(row);
        let last = &row[(w - 1) * 4..];
        for _ in w..pw as usize {
            pixels.extend_from_slice(last);
        }
    }
    std::borrow::Cow::Owned(Rgba8Image {
        width: pw,
        height: ph,
        pixels,
    })
}

/// Block-compresses (or, for RGBA8, copies) one mip.
pub fn encode_mip(img: &Rgba8Image, format: TextureFormat) -> Vec<u8> {
    let d = format.block_dim();
    if d == 1 {
        return img.pixels.clone();
    }
    let padded = pad_to_blocks(img, d);
    let surface = intel_tex_2::RgbaSurface {
        data: &padded.pixels,
        width: padded.width,
        height: padded.height,
        stride: padded.width * 4,
    };
    let channel = |keep: usize| -> Vec<u8> {
        padded
            .pixels
            .chunks_exact(4)
            .flat_map(|p| p[..keep].to_vec())
            .collect()
    };
    match format {
        TextureFormat::Bc1 | TextureFormat::Bc1Srgb => intel_tex_2::bc1::compress_blocks(&surface),
        TextureFormat::Bc3 | TextureFormat::Bc3Srgb => intel_tex_2::bc3::compress_blocks(&surface),
        TextureFormat::Bc4 => {
            let r = channel(1);
            intel_tex_2::bc4::compress_blocks(&intel_tex_2::RSurface {
                data: &r,
                width: padded.width,
                height: padded.height,
                stride: padded.width,
            })
        }
        TextureFormat::Bc5 => {
            let rg = channel(2);
            intel_tex_2::bc5::compress_blocks(&intel_tex_2::RgSurface {
                data: &rg,
                width: padded.width,
                height: padded.height,
                stride: padded.width * 2,
            })
        }
        _ => {
            // BC7's opaque modes spend no bits on alpha; use them unless
            // the image has any.
            let opaque = padded.pixels.chunks_exact(4).all(|p| p[3] == 255);
            let settings = if opaque {
                intel_tex_2::bc7::opaque_ultra_fast_settings()
            } else {
                intel_tex_2::bc7::alpha_ultra_fast_settings()
            };
            intel_tex_2::bc7::compress_blocks(&settings, &surface)
        }
    }
}

/// Builds a full mip chain from an image and encodes every mip. An image
/// whose size is not a multiple of the format's block is first padded by
/// repeating its edge (wgpu requires BCn textures in whole blocks).
pub fn encode_texture(img: &Rgba8Image, opts: ImageOptions) -> EncodedTexture {
    let format = opts.format.with_srgb(opts.srgb);
    let base = pad_to_blocks(img, format.block_dim()).into_owned();
    let (width, height) = (base.width, base.height);
    let count = full_mip_count(width, height);
    let mut mips = Vec::with_capacity(count as usize);
    let mut level = base;
    for m in 0..count {
        debug_assert_eq!((level.width, level.height), mip_extent(width, height, m));
        mips.push(encode_mip(&level, format));
        if m + 1 < count {
            level = downsample(&level, opts.srgb);
        }
    }
    EncodedTexture {
        format,
        width,
        height,
        mips,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(w: u32, h: u32) -> Rgba8Image {
        let mut pixels = Vec::new();
        for y in 0..h {
            for x in 0..w {
                pixels.extend_from_slice(&[(x * 255 / w) as u8, (y * 255 / h) as u8, 128, 255]);
            }
        }
        Rgba8Image {
            width: w,
            height: h,
            pixels,
        }
    }

    #[test]
    fn downsample_averages_and_handles_odd_sizes() {
        let img = Rgba8Image {
            width: 3,
            height: 1,
            pixels: vec![0, 0, 0, 0, 255, 255, 255, 255, 7, 7, 7, 7],
        };
        let half = downsample(&img, false);
        assert_eq!((half.width, half.height), (1, 1));
        assert_eq!(half.pixels, vec![128, 128, 128, 128]);
        // In linear light, black and white average to sRGB 188, not 128.
        let s = downsample(&img, true);
        assert!((186..=189).contains(&s.pixels[0]), "{}", s.pixels[0]);
        assert_eq!(s.pixels[3], 128);
    }

    #[test]
    fn every_format_encodes_a_full_chain_of_the_right_sizes() {
        for format in [
            TextureFormat::Bc7,
            TextureFormat::Bc1,
            TextureFormat::Bc3,
            TextureFormat::Bc4,
            TextureFormat::Bc5,
            TextureFormat::Rgba8Unorm,
        ] {
            let t = encode_texture(
                &gradient(70, 33),
                ImageOptions {
                    format,
                    srgb: false,
                },
            );
            let d = format.block_dim();
            assert_eq!(
                (t.width, t.height),
                (70u32.div_ceil(d) * d, 33u32.div_ceil(d) * d)
            );
            assert_eq!(t.mips.len(), full_mip_count(t.width, t.height) as usize);
            for (m, mip) in t.mips.iter().enumerate() {
                let (w, h) = mip_extent(t.width, t.height, m as u8);
                assert_eq!(mip.len() as u64, format.data_size(w, h), "{format} mip {m}");
            }
        }
    }

    #[test]
    fn kinds_come_from_magic_then_extension() {
        assert_eq!(
            input_kind(Path::new("x.bin"), b"\x89PNG\r\n\x1a\n...."),
            InputKind::Image
        );
        assert_eq!(
            input_kind(Path::new("x"), &[0xFF, 0xD8, 0xFF, 0xE0]),
            InputKind::Image
        );
        assert_eq!(input_kind(Path::new("x.png"), b"garbage"), InputKind::Image);
        assert_eq!(input_kind(Path::new("x.KTX2"), b""), InputKind::Ktx2);
        assert_eq!(input_kind(Path::new("x.bin"), b"DDS |"), InputKind::Dds);
        assert_eq!(input_kind(Path::new("x.dds"), b""), InputKind::Dds);
        assert_eq!(input_kind(Path::new("mesh.bin"), b"abc"), InputKind::Blob);
    }

    #[test]
    fn a_damaged_image_names_the_file() {
        let e = decode_image(Path::new("broken.png"), b"\x89PNG\r\n\x1a\nnot really").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("broken.png: "), "{msg}");
    }
}
