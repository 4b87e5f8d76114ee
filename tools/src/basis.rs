//! Basis Universal KTX2 files (vkFormat 0), transcoded at pack time to the
//! formats a pack holds: UASTC to BC7, ETC1S to BC7 or (opaque, when asked)
//! BC1. The transcoding is Binomial's, through the `basis-universal` crate;
//! this module only finds the levels in the KTX2 container and hands them
//! over.
//!
//! UASTC levels are raw UASTC blocks (optionally zstd-supercompressed), the
//! input of the crate's low-level UASTC transcoder. ETC1S levels are
//! BasisLZ slices whose codebooks live in the KTX2 supercompression global
//! data; the crate binds only the `.basis` file transcoder for those, so the
//! same codebooks and slices are re-wrapped, byte for byte, as an in-memory
//! `.basis` file (basis_etc1s.rs).
//!
//! Memory: a UASTC level is as large as its BC7 output, so what the
//! transcoder allocates is justified by the file (or by the zstd-inflated
//! level, itself bounded by its declared length). An ETC1S level's output
//! is bounded only by the 16384-texel limit (at most 256 MiB of BC7 for mip
//! 0): BasisLZ codes runs of repeated endpoints and selectors, so a small
//! file can describe a large flat texture and there is no useful ratio to
//! check against.

use crate::basis_etc1s::etc1s_to_basis_file;
use crate::ktx2::{inflate_level, malformed, Ktx2Layout, SCHEME_ZSTD};
use basis_universal::{
    DecodeFlags, LowLevelUastcTranscoder, SliceParametersUastc, TranscodeParameters, Transcoder,
    TranscoderBlockFormat, TranscoderTextureFormat,
};
use gpustream::pack::{mip_extent, PackError, TextureFormat, TextureSourceKind};
use std::path::Path;

/// Khronos data format colour models of Basis Universal data.
const MODEL_ETC1S: u8 = 163;
const MODEL_UASTC: u8 = 166;
/// The basic DFD's transfer function value for sRGB.
const TRANSFER_SRGB: u8 = 2;
/// Supercompression scheme 1: BasisLZ (ETC1S).
const SCHEME_BASISLZ: u32 = 1;

/// A transcoded Basis Universal texture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasisTexture {
    /// BC7 (or BC1 for opaque ETC1S when asked), sRGB when the file is.
    pub format: TextureFormat,
    /// Width of mip 0.
    pub width: u32,
    /// Height of mip 0.
    pub height: u32,
    /// Each level, mip 0 first.
    pub mips: Vec<Vec<u8>>,
    /// UASTC (with or without zstd) or ETC1S.
    pub kind: TextureSourceKind,
}

/// What the basic data format descriptor says about Basis data.
struct BasisDfd {
    model: u8,
    srgb: bool,
    has_alpha: bool,
}

fn read_dfd(path: &Path, bytes: &[u8], layout: &Ktx2Layout) -> Result<BasisDfd, PackError> {
    // dfdTotalSize (4), then the basic block: vendor/type (4), version (2),
    // size (2), model, primaries, transfer, flags, texel block (4), bytes
    // per plane (8), samples of 16 bytes from block offset 24.
    let dfd = &bytes[layout.dfd.clone()];
    let at = layout.dfd.start;
    if dfd.len() < 4 + 24 {
        return Err(malformed(
            path,
            "DFD",
            at,
            format!("{} bytes, a basic descriptor needs 28", dfd.len()),
        ));
    }
    let block_size = usize::from(u16::from_le_bytes([dfd[10], dfd[11]]));
    let samples = block_size.saturating_sub(24) / 16;
    let (model, transfer) = (dfd[12], dfd[14]);
    let has_alpha = match model {
        // One sample per slice: RGB, or RGB then alpha.
        MODEL_ETC1S => samples >= 2,
        // The channel id of the only sample: 3 RGBA, 5 RRRG have alpha.
        MODEL_UASTC => {
            let channel = dfd.get(4 + 24 + 3).copied().unwrap_or(0) & 0x0f;
            matches!(channel, 3 | 5)
        }
        other => {
            return Err(malformed(
                path,
                "DFD block 0",
                at + 12,
                format!(
                    "colour model {other} with vkFormat 0: neither ETC1S (163) nor UASTC (166)"
                ),
            ))
        }
    };
    Ok(BasisDfd {
        model,
        srgb: transfer == TRANSFER_SRGB,
        has_alpha,
    })
}

/// Reads a Basis Universal KTX2 file (vkFormat 0) and transcodes it (see
/// `transcode_ktx2` for `bc1`). `path` names the file in errors.
pub fn read_basis_ktx2(path: &Path, bytes: &[u8], bc1: bool) -> Result<BasisTexture, PackError> {
    let layout = crate::ktx2::parse_layout(path, bytes)?;
    if layout.vk_format != 0 {
        return Err(malformed(
            path,
            "header",
            12,
            format!("vkFormat {}, Basis Universal data has 0", layout.vk_format),
        ));
    }
    transcode_ktx2(path, bytes, &layout, bc1)
}

/// Transcodes a Basis Universal KTX2 file (already checked by
/// `ktx2::parse_layout`, vkFormat 0). `bc1` asks for BC1 where that is
/// possible without losing alpha (opaque ETC1S); everything else becomes
/// BC7. Every level's size is checked before the transcoder sees it, and
/// a transcoder failure is an error naming the level.
pub(crate) fn transcode_ktx2(
    path: &Path,
    bytes: &[u8],
    layout: &Ktx2Layout,
    bc1: bool,
) -> Result<BasisTexture, PackError> {
    let dfd = read_dfd(path, bytes, layout)?;
    let (width, height) = (layout.width, layout.height);
    if !width.is_multiple_of(4) || !height.is_multiple_of(4) {
        return Err(PackError::Import {
            path: path.to_path_buf(),
            reason: format!(
                "Basis size {width}x{height} is not a multiple of 4 (BCn mips would not line up with the pack's)"
            ),
        });
    }
    let (format, mips, kind) = match dfd.model {
        MODEL_UASTC => {
            let kind = match layout.scheme {
                0 => TextureSourceKind::BasisUastc,
                SCHEME_ZSTD => TextureSourceKind::BasisUastcZstd,
                s => return Err(scheme_error(path, s, "UASTC takes none or zstd")),
            };
            (
                TextureFormat::Bc7,
                uastc_levels(path, bytes, layout, dfd.has_alpha)?,
                kind,
            )
        }
        _ => {
            if layout.scheme != SCHEME_BASISLZ {
                return Err(scheme_error(path, layout.scheme, "ETC1S needs BasisLZ (1)"));
            }
            let format = if bc1 && !dfd.has_alpha {
                TextureFormat::Bc1
            } else {
                TextureFormat::Bc7
            };
            let basis = etc1s_to_basis_file(path, bytes, layout, dfd.has_alpha, dfd.srgb)?;
            (
                format,
                etc1s_levels(path, &basis, layout, format)?,
                TextureSourceKind::BasisEtc1s,
            )
        }
    };
    Ok(BasisTexture {
        format: format.with_srgb(dfd.srgb),
        width,
        height,
        mips,
        kind,
    })
}

fn scheme_error(path: &Path, scheme: u32, rule: &str) -> PackError {
    malformed(
        path,
        "header",
        44,
        format!("supercompression scheme {scheme} with Basis data: {rule}"),
    )
}

fn level_error(path: &Path, m: usize, at: usize, what: &str) -> PackError {
    malformed(
        path,
        &format!("level {m}"),
        at,
        format!("Basis transcoder: {what}"),
    )
}

fn uastc_levels(
    path: &Path,
    bytes: &[u8],
    layout: &Ktx2Layout,
    has_alpha: bool,
) -> Result<Vec<Vec<u8>>, PackError> {
    let transcoder = LowLevelUastcTranscoder::new();
    let mut mips = Vec::with_capacity(layout.levels.len());
    for (m, level) in layout.levels.iter().enumerate() {
        let (w, h) = mip_extent(layout.width, layout.height, m as u8);
        let (bx, by) = (w.div_ceil(4), h.div_ceil(4));
        // UASTC blocks are 16 bytes, like BC7's.
        let want = u64::from(bx) * u64::from(by) * 16;
        let size_err = |found: u64, offset: usize| PackError::LevelSize {
            path: path.to_path_buf(),
            format: "KTX2",
            level: m as u32,
            offset: offset as u64,
            found,
            expected: want,
        };
        if level.uncompressed != want {
            return Err(size_err(level.uncompressed, level.entry_at + 16));
        }
        let inflated;
        let data = if layout.scheme == SCHEME_ZSTD {
            inflated = inflate_level(path, bytes, level, m as u32)?;
            &inflated[..]
        } else {
            if level.bytes.len() as u64 != want {
                return Err(size_err(level.bytes.len() as u64, level.entry_at + 8));
            }
            &bytes[level.bytes.clone()]
        };
        let params = SliceParametersUastc {
            num_blocks_x: bx,
            num_blocks_y: by,
            has_alpha,
            original_width: w,
            original_height: h,
        };
        let out = transcoder
            .transcode_slice(
                data,
                params,
                DecodeFlags::HIGH_QUALITY,
                TranscoderBlockFormat::BC7,
            )
            .map_err(|e| level_error(path, m, level.bytes.start, &format!("{e:?}")))?;
        mips.push(exact(path, m, level.bytes.start, out, want)?);
    }
    Ok(mips)
}

fn etc1s_levels(
    path: &Path,
    basis: &[u8],
    layout: &Ktx2Layout,
    format: TextureFormat,
) -> Result<Vec<Vec<u8>>, PackError> {
    let mut transcoder = Transcoder::new();
    transcoder
        .prepare_transcoding(basis)
        .map_err(|_| level_error(path, 0, layout.sgd.start, "the codebooks do not decode"))?;
    let target = if format == TextureFormat::Bc1 {
        TranscoderTextureFormat::BC1_RGB
    } else {
        TranscoderTextureFormat::BC7_RGBA
    };
    let mut mips = Vec::with_capacity(layout.levels.len());
    for (m, level) in layout.levels.iter().enumerate() {
        let (w, h) = mip_extent(layout.width, layout.height, m as u8);
        let params = TranscodeParameters {
            image_index: 0,
            level_index: m as u32,
            decode_flags: Some(DecodeFlags::HIGH_QUALITY),
            output_row_pitch_in_blocks_or_pixels: None,
            output_rows_in_pixels: None,
        };
        let out = transcoder
            .transcode_image_level(basis, target, params)
            .map_err(|e| level_error(path, m, level.bytes.start, &format!("{e:?}")))?;
        mips.push(exact(
            path,
            m,
            level.bytes.start,
            out,
            format.data_size(w, h),
        )?);
    }
    transcoder.end_transcoding();
    Ok(mips)
}

/// The transcoder's output, checked to be exactly one level of blocks.
fn exact(path: &Path, m: usize, at: usize, out: Vec<u8>, want: u64) -> Result<Vec<u8>, PackError> {
    if out.len() as u64 != want {
        return Err(level_error(
            path,
            m,
            at,
            &format!("wrote {} bytes, the level has {want}", out.len()),
        ));
    }
    Ok(out)
}
