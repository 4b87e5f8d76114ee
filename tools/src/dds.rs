//! DDS (DirectDraw Surface) reading and writing for the formats a pack
//! holds: `pack` takes DDS files with BCn or RGBA8 data and keeps their mip
//! chain; `unpack -o x.dds` writes a texture back out.
//!
//! The headers are parsed by the `ddsfile` crate; this module maps the
//! legacy FourCC codes and the DX10 header's DXGI formats onto
//! [`TextureFormat`] and checks everything the crate leaves to its caller
//! (arrays, cube maps, volumes, level sizes against the data) before any
//! texel is used. DDS files are untrusted input.

use ddsfile::{Caps2, D3D10ResourceDimension, Dds, DxgiFormat, FourCC, MiscFlag};
use gpustream::pack::{full_mip_count, mip_extent, PackError, TextureFormat, MAX_TEXTURE_DIM};
use std::path::Path;

/// Bytes before the texel data: the magic "DDS " and the 124-byte header.
const LEGACY_DATA_AT: usize = 128;
/// Bytes before the texel data when the 20-byte DX10 header follows.
const DX10_DATA_AT: usize = 148;
/// Offset of the DX10 header's `dxgiFormat` field.
const DXGI_FORMAT_AT: u64 = 128;
/// Offset of the header's pitch-or-linear-size field.
const LINEAR_SIZE_AT: u64 = 20;
/// Offset of the pixel format's FourCC field.
const FOURCC_AT: u64 = 84;

/// A texture read from a DDS file: format, size and the levels it holds
/// (mip 0 first; one level when the file has no chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdsTexture {
    /// The texel format.
    pub format: TextureFormat,
    /// Width of mip 0.
    pub width: u32,
    /// Height of mip 0.
    pub height: u32,
    /// Each level's data, mip 0 first.
    pub mips: Vec<Vec<u8>>,
}

/// The DXGI formats with a pack equivalent.
fn from_dxgi(f: DxgiFormat) -> Option<TextureFormat> {
    use TextureFormat as T;
    Some(match f {
        DxgiFormat::R8G8B8A8_UNorm => T::Rgba8Unorm,
        DxgiFormat::R8G8B8A8_UNorm_sRGB => T::Rgba8UnormSrgb,
        DxgiFormat::BC1_UNorm => T::Bc1,
        DxgiFormat::BC1_UNorm_sRGB => T::Bc1Srgb,
        DxgiFormat::BC3_UNorm => T::Bc3,
        DxgiFormat::BC3_UNorm_sRGB => T::Bc3Srgb,
        DxgiFormat::BC4_UNorm => T::Bc4,
        DxgiFormat::BC5_UNorm => T::Bc5,
        DxgiFormat::BC7_UNorm => T::Bc7,
        DxgiFormat::BC7_UNorm_sRGB => T::Bc7Srgb,
        _ => return None,
    })
}

/// The DXGI format `write_dds` stores for a pack format.
fn to_dxgi(f: TextureFormat) -> DxgiFormat {
    use TextureFormat as T;
    match f {
        T::Rgba8Unorm => DxgiFormat::R8G8B8A8_UNorm,
        T::Rgba8UnormSrgb => DxgiFormat::R8G8B8A8_UNorm_sRGB,
        T::Bc1 => DxgiFormat::BC1_UNorm,
        T::Bc1Srgb => DxgiFormat::BC1_UNorm_sRGB,
        T::Bc3 => DxgiFormat::BC3_UNorm,
        T::Bc3Srgb => DxgiFormat::BC3_UNorm_sRGB,
        T::Bc4 => DxgiFormat::BC4_UNorm,
        T::Bc5 => DxgiFormat::BC5_UNorm,
        T::Bc7 => DxgiFormat::BC7_UNorm,
        T::Bc7Srgb => DxgiFormat::BC7_UNorm_sRGB,
    }
}

/// The legacy FourCC codes with a pack equivalent (the BC4/BC5 codes are
/// the unsigned forms; DXT2-4 and the signed codes have none).
fn from_fourcc(code: u32) -> Option<TextureFormat> {
    Some(match &code.to_le_bytes() {
        b"DXT1" => TextureFormat::Bc1,
        b"DXT5" => TextureFormat::Bc3,
        b"ATI1" | b"BC4U" => TextureFormat::Bc4,
        b"ATI2" | b"BC5U" => TextureFormat::Bc5,
        _ => return None,
    })
}

/// A FourCC for messages: its four characters when printable.
fn fourcc_name(code: u32) -> String {
    let b = code.to_le_bytes();
    if b.iter().all(|c| c.is_ascii_graphic()) {
        format!("'{}'", String::from_utf8_lossy(&b))
    } else {
        format!("{code:#010x}")
    }
}

/// Reads a DDS file holding one 2D texture in one of the pack's formats.
/// `path` names the file in errors.
///
/// The file's levels are returned as they are, however many it holds; the
/// caller decides what to do about a missing chain. Arrays, cube maps and
/// volumes are refused, as are formats without a pack equivalent and files
/// whose data is shorter or longer than the header's levels.
pub fn read_dds(path: &Path, bytes: &[u8]) -> Result<DdsTexture, PackError> {
    let truncated = |what: &str, offset: usize, needed: usize| PackError::TruncatedInput {
        path: path.to_path_buf(),
        format: "DDS",
        what: what.to_string(),
        offset: offset as u64,
        needed: needed as u64,
        file_len: bytes.len() as u64,
    };
    let unsupported = |what: String| PackError::UnsupportedInput {
        path: path.to_path_buf(),
        format: "DDS",
        what,
    };
    let bad = |what: &str, offset: u64, reason: String| PackError::MalformedInput {
        path: path.to_path_buf(),
        format: "DDS",
        what: what.to_string(),
        offset,
        reason,
    };
    if !bytes.starts_with(b"DDS ") && !b"DDS ".starts_with(bytes) {
        return Err(bad("header", 0, "not a DDS file (bad magic)".into()));
    }
    if bytes.len() < LEGACY_DATA_AT {
        return Err(truncated("header", 0, LEGACY_DATA_AT));
    }
    let is_dx10 = bytes[FOURCC_AT as usize..][..4] == *b"DX10";
    if is_dx10 && bytes.len() < DX10_DATA_AT {
        return Err(truncated(
            "DX10 header",
            LEGACY_DATA_AT,
            DX10_DATA_AT - LEGACY_DATA_AT,
        ));
    }
    let dds = Dds::read(bytes).map_err(|e| match e {
        ddsfile::Error::InvalidField(ref f) if f == "dxgi_format" => PackError::UnknownDxgiFormat {
            path: path.to_path_buf(),
            offset: DXGI_FORMAT_AT,
            value: u32::from_le_bytes([bytes[128], bytes[129], bytes[130], bytes[131]]),
        },
        other => bad("header", 0, other.to_string()),
    })?;
    let h = &dds.header;
    let data_at = if is_dx10 {
        DX10_DATA_AT
    } else {
        LEGACY_DATA_AT
    };

    // Shape: one 2D texture only, said loudly rather than flattened.
    if h.caps2.contains(Caps2::CUBEMAP) {
        return Err(unsupported("a cube map (caps2 at offset 112)".into()));
    }
    if h.caps2.contains(Caps2::VOLUME) || h.depth.is_some_and(|d| d > 1) {
        return Err(unsupported(
            "a volume texture (caps2 / depth at offset 24)".into(),
        ));
    }
    let format = match &dds.header10 {
        Some(h10) => {
            if h10.misc_flag.contains(MiscFlag::TEXTURECUBE) {
                return Err(unsupported(
                    "a cube map (DX10 miscFlag at offset 136)".into(),
                ));
            }
            if h10.array_size > 1 {
                return Err(unsupported(format!(
                    "a texture array of {} layers (DX10 arraySize at offset 140)",
                    h10.array_size
                )));
            }
            if !matches!(h10.resource_dimension, D3D10ResourceDimension::Texture2D) {
                return Err(unsupported(format!(
                    "resource dimension {:?} (DX10 header at offset 132; only 2D textures)",
                    h10.resource_dimension
                )));
            }
            from_dxgi(h10.dxgi_format).ok_or_else(|| {
                unsupported(format!(
                    "DXGI format {:?} (offset 128; the pack holds RGBA8, BC1, BC3, BC4, BC5 and BC7)",
                    h10.dxgi_format
                ))
            })?
        }
        None => legacy_format(&dds, &unsupported)?,
    };

    let (width, height) = (h.width, h.height);
    if width == 0 || height == 0 || width > MAX_TEXTURE_DIM || height > MAX_TEXTURE_DIM {
        return Err(bad(
            "header",
            12,
            format!("size {width}x{height} is outside 1..={MAX_TEXTURE_DIM}"),
        ));
    }
    let full = full_mip_count(width, height);
    // A mip count of 0 (or no MIPMAPCOUNT flag) means one level.
    let levels = h.mip_map_count.unwrap_or(1).max(1);
    if levels > u32::from(full) {
        return Err(bad(
            "header",
            28,
            format!("{levels} mip levels, a {width}x{height} texture has at most {full}"),
        ));
    }
    // Writers fill pitch-or-linear-size inconsistently; when the header
    // claims a linear size for a compressed level 0, it must be right.
    if let (Some(ls), true) = (h.linear_size, format.is_compressed()) {
        let want = format.data_size(width, height);
        if ls != 0 && u64::from(ls) != want {
            return Err(PackError::LevelSize {
                path: path.to_path_buf(),
                format: "DDS",
                level: 0,
                offset: LINEAR_SIZE_AT,
                found: ls.into(),
                expected: want,
            });
        }
    }

    let data = &dds.data;
    let mut mips = Vec::with_capacity(levels as usize);
    let mut at = 0usize;
    for m in 0..levels {
        let (w, h) = mip_extent(width, height, m as u8);
        // At most 16384^2 * 4 bytes: fits usize on every target we build.
        let len = format.data_size(w, h) as usize;
        if data.len() - at < len {
            return Err(truncated(&format!("level {m}"), data_at + at, len));
        }
        mips.push(data[at..at + len].to_vec());
        at += len;
    }
    if at != data.len() {
        return Err(PackError::LevelSize {
            path: path.to_path_buf(),
            format: "DDS",
            level: levels - 1,
            offset: data_at as u64,
            found: data.len() as u64,
            expected: at as u64,
        });
    }
    Ok(DdsTexture {
        format,
        width,
        height,
        mips,
    })
}

/// The pack format of a legacy (no DX10 header) DDS file: a known FourCC,
/// or 32-bit RGBA in R, G, B, A byte order.
fn legacy_format(
    dds: &Dds,
    unsupported: &impl Fn(String) -> PackError,
) -> Result<TextureFormat, PackError> {
    let spf = &dds.header.spf;
    if let Some(FourCC(code)) = spf.fourcc {
        return from_fourcc(code).ok_or_else(|| {
            unsupported(format!(
                "FourCC {} (offset {FOURCC_AT}; the pack takes DXT1, DXT5, ATI1/BC4U, ATI2/BC5U or a DX10 header)",
                fourcc_name(code)
            ))
        });
    }
    let masks = (
        spf.rgb_bit_count,
        spf.r_bit_mask,
        spf.g_bit_mask,
        spf.b_bit_mask,
        spf.a_bit_mask,
    );
    if masks
        == (
            Some(32),
            Some(0xff),
            Some(0xff00),
            Some(0xff_0000),
            Some(0xff00_0000),
        )
    {
        return Ok(TextureFormat::Rgba8Unorm);
    }
    Err(unsupported(format!(
        "the uncompressed pixel format with bit count {:?} and masks {:x?} (offset 88; only 32-bit RGBA in byte order R, G, B, A)",
        spf.rgb_bit_count,
        (spf.r_bit_mask, spf.g_bit_mask, spf.b_bit_mask, spf.a_bit_mask)
    )))
}

/// Encodes a texture as a DDS file with a DX10 header (the only header that
/// names every pack format, sRGB included): one 2D texture, `mips.len()`
/// levels, mip 0 first, the texel data exactly as given.
pub fn write_dds(
    format: TextureFormat,
    width: u32,
    height: u32,
    mips: &[impl AsRef<[u8]>],
) -> Result<Vec<u8>, PackError> {
    let err = |reason: String| PackError::InvalidInput {
        asset: format!("{width}x{height} {format}"),
        reason,
    };
    let mut dds = Dds::new_dxgi(ddsfile::NewDxgiParams {
        height,
        width,
        depth: None,
        format: to_dxgi(format),
        mipmap_levels: Some(mips.len() as u32),
        array_layers: None,
        caps2: None,
        is_cubemap: false,
        resource_dimension: D3D10ResourceDimension::Texture2D,
        alpha_mode: ddsfile::AlphaMode::Unknown,
    })
    .map_err(|e| err(format!("cannot build a DDS header: {e}")))?;
    dds.data = mips
        .iter()
        .flat_map(|m| m.as_ref().iter().copied())
        .collect();
    let mut out = Vec::with_capacity(DX10_DATA_AT + dds.data.len());
    dds.write(&mut out)
        .map_err(|e| err(format!("cannot write DDS: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back_in_every_format() {
        for (f, (w, h)) in TextureFormat::ALL
            .into_iter()
            .flat_map(|f| [(36, 20), (1, 1), (2, 6), (5, 3)].map(|s| (f, s)))
        {
            let mips: Vec<Vec<u8>> = (0..full_mip_count(w, h))
                .map(|m| {
                    let (mw, mh) = mip_extent(w, h, m);
                    (0..f.data_size(mw, mh)).map(|i| (i as u8) ^ m).collect()
                })
                .collect();
            let bytes = write_dds(f, w, h, &mips).unwrap();
            let back = read_dds(Path::new("t.dds"), &bytes).unwrap();
            assert_eq!(
                (back.format, back.width, back.height),
                (f, w, h),
                "{f} {w}x{h}"
            );
            assert_eq!(back.mips, mips, "{f} {w}x{h}");
        }
    }
}
