//! Input files to textures and assets: which reader a file goes to (image
//! decode and encode, DDS, KTX2, Basis Universal), the chain built for a
//! DDS without one, and the source kind and conversion time each texture
//! records.

use super::read_input;
use super::{
    decode_image, encode_texture, input_kind, EncodedTexture, ImageOptions, InputKind, Rgba8Image,
};
use crate::basis::transcode_ktx2;
use crate::dds::read_dds;
use crate::ktx2::{parse_layout, read_ktx2};
use gpustream::pack::{
    full_mip_count, AssetId, PackError, PackWriter, TextureFormat, TextureSource, TextureSourceKind,
};
use std::path::Path;
use std::time::Instant;

/// Reads one input file and adds it to `writer` under `name`: images as
/// encoded textures, DDS and KTX2 with their own levels (see
/// [`load_texture`]), anything else as a blob. Textures record their source
/// kind and conversion time in the pack.
pub fn add_file(
    writer: &mut PackWriter,
    name: &str,
    path: &Path,
    opts: ImageOptions,
) -> Result<AssetId, PackError> {
    let bytes = read_input(path)?;
    match load_texture(path, &bytes, opts)? {
        Some((t, source)) => {
            let id = writer.add_texture(name, t.format, t.width, t.height, &t.mips)?;
            writer.set_texture_source(id, source)?;
            Ok(id)
        }
        None => writer.add_blob(name, &bytes),
    }
}

/// Turns a file's bytes into a texture, or `None` when the file is not one
/// (it becomes a blob). `path` names the file in errors.
///
/// - PNG/JPEG: decoded and encoded to `opts` with a full mip chain.
/// - DDS: its format and levels as they are. A file with one level (of a
///   texture that could have more) gets its chain built when its data can
///   be re-encoded: RGBA8 is encoded to `opts` like an image. BCn without a
///   chain is an error: decoding and re-encoding would lose quality
///   silently.
/// - KTX2: its levels as they are, zstd supercompression undone; Basis
///   Universal (vkFormat 0) transcoded to BC7, or to BC1 for opaque ETC1S
///   when `opts.format` is BC1.
pub fn load_texture(
    path: &Path,
    bytes: &[u8],
    opts: ImageOptions,
) -> Result<Option<(EncodedTexture, TextureSource)>, PackError> {
    let start = Instant::now();
    let (t, kind) = match input_kind(path, bytes) {
        InputKind::Image => {
            let kind = if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
                TextureSourceKind::Jpeg
            } else {
                TextureSourceKind::Png
            };
            (encode_texture(&decode_image(path, bytes)?, opts), kind)
        }
        InputKind::Dds => (dds_texture(path, bytes, opts)?, TextureSourceKind::Dds),
        InputKind::Ktx2 => {
            let layout = parse_layout(path, bytes)?;
            if layout.vk_format == 0 {
                let bc1 = opts.format.with_srgb(false) == TextureFormat::Bc1;
                let b = transcode_ktx2(path, bytes, &layout, bc1)?;
                let t = EncodedTexture {
                    format: b.format,
                    width: b.width,
                    height: b.height,
                    mips: b.mips,
                };
                (t, b.kind)
            } else {
                let k = read_ktx2(path, bytes)?;
                let kind = if k.zstd {
                    TextureSourceKind::Ktx2Zstd
                } else {
                    TextureSourceKind::Ktx2
                };
                let t = EncodedTexture {
                    format: k.format,
                    width: k.width,
                    height: k.height,
                    mips: k.mips,
                };
                (t, kind)
            }
        }
        InputKind::Blob => return Ok(None),
    };
    let d = t.format.block_dim();
    if !t.width.is_multiple_of(d) || !t.height.is_multiple_of(d) {
        return Err(PackError::Import {
            path: path.to_path_buf(),
            reason: format!(
                "{} size {}x{} is not a multiple of its {d}x{d} blocks",
                t.format, t.width, t.height
            ),
        });
    }
    let transcode_us = u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX);
    Ok(Some((t, TextureSource { kind, transcode_us })))
}

/// A DDS file's texture, with its chain built where it is missing and can
/// be (see [`load_texture`]).
fn dds_texture(path: &Path, bytes: &[u8], opts: ImageOptions) -> Result<EncodedTexture, PackError> {
    let d = read_dds(path, bytes)?;
    let full = full_mip_count(d.width, d.height);
    if d.mips.len() > 1 || full == 1 {
        return Ok(EncodedTexture {
            format: d.format,
            width: d.width,
            height: d.height,
            mips: d.mips,
        });
    }
    if d.format.is_compressed() {
        return Err(PackError::Import {
            path: path.to_path_buf(),
            reason: format!(
                "a {}x{} {} DDS with one mip level: its {full}-level chain cannot be built without decoding and re-encoding the blocks (save it with mips, e.g. texconv -m 0)",
                d.width, d.height, d.format
            ),
        });
    }
    let mut pixels = d.mips;
    let img = Rgba8Image {
        width: d.width,
        height: d.height,
        pixels: pixels.swap_remove(0),
    };
    Ok(encode_texture(
        &img,
        ImageOptions {
            format: opts.format,
            srgb: opts.srgb || d.format.is_srgb(),
        },
    ))
}
