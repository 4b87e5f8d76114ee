//! KTX2 (Khronos texture container, version 2) writing and reading for the
//! formats a pack holds: `unpack` writes a texture's whole mip chain as KTX2
//! so standard tools can check a round trip, and `pack` takes KTX2 files with
//! BCn or RGBA8 data as they are, or zstd-supercompressed (inflated here).
//! The container checks are shared with the Basis Universal import
//! (basis.rs), which reads vkFormat 0 files.
//!
//! Written from the KTX 2.0 specification and the Khronos Data Format
//! specification (basic data format descriptor). Reading is done here too,
//! not by the `ktx2` crate: KTX2 files are untrusted input, and the crate's
//! 0.5 parser panics on some malformed descriptors (a texel block dimension
//! of 255, `dfd/mod.rs:363`; see tests/regressions/). Every field, offset
//! and length is checked against the file before it is used.

use gpustream::pack::{mip_extent, PackError, TextureFormat};
use std::path::Path;

mod layout;
use layout::{field, le32, parse_header};
pub(crate) use layout::{
    inflate_level, locate_levels, malformed, parse_layout, Ktx2Layout, SCHEME_ZSTD,
};

const IDENTIFIER: [u8; 12] = [
    0xAB, 0x4B, 0x54, 0x58, 0x20, 0x32, 0x30, 0xBB, 0x0D, 0x0A, 0x1A, 0x0A,
];

/// Vulkan `VkFormat` values of the pack's formats.
fn vk_format(f: TextureFormat) -> u32 {
    match f {
        TextureFormat::Rgba8Unorm => 37,
        TextureFormat::Rgba8UnormSrgb => 43,
        TextureFormat::Bc1 => 133,
        TextureFormat::Bc1Srgb => 134,
        TextureFormat::Bc3 => 137,
        TextureFormat::Bc3Srgb => 138,
        TextureFormat::Bc4 => 139,
        TextureFormat::Bc5 => 141,
        TextureFormat::Bc7 => 145,
        TextureFormat::Bc7Srgb => 146,
    }
}

fn from_vk_format(vk: u32) -> Option<TextureFormat> {
    TextureFormat::ALL.into_iter().find(|f| vk_format(*f) == vk)
}

/// One sample of a basic data format descriptor: (bit offset, bit length,
/// channel id with qualifier bits, upper value).
type Sample = (u16, u8, u8, u32);

/// The basic DFD block (without the leading total size) for a format.
fn dfd_block(f: TextureFormat) -> Vec<u8> {
    // Khronos data format: colour models and channel ids.
    const MODEL_RGBSDA: u8 = 1;
    const MODEL_BC1A: u8 = 128;
    const MODEL_BC3: u8 = 130;
    const MODEL_BC4: u8 = 131;
    const MODEL_BC5: u8 = 132;
    const MODEL_BC7: u8 = 134;
    const ALPHA: u8 = 15;
    const QUALIFIER_LINEAR: u8 = 0x10;
    let srgb = f.is_srgb();
    // In sRGB formats alpha stays linear, which the qualifier says.
    let alpha = if srgb {
        ALPHA | QUALIFIER_LINEAR
    } else {
        ALPHA
    };
    let (model, samples): (u8, Vec<Sample>) = match f {
        TextureFormat::Rgba8Unorm | TextureFormat::Rgba8UnormSrgb => (
            MODEL_RGBSDA,
            vec![
                (0, 7, 0, 255),
                (8, 7, 1, 255),
                (16, 7, 2, 255),
                (24, 7, alpha, 255),
            ],
        ),
        // BC1 with alpha: channel 1 is "colour with 1-bit alpha".
        TextureFormat::Bc1 | TextureFormat::Bc1Srgb => (MODEL_BC1A, vec![(0, 63, 1, u32::MAX)]),
        TextureFormat::Bc3 | TextureFormat::Bc3Srgb => (
            MODEL_BC3,
            vec![(0, 63, alpha, u32::MAX), (64, 63, 0, u32::MAX)],
        ),
        TextureFormat::Bc4 => (MODEL_BC4, vec![(0, 63, 0, u32::MAX)]),
        TextureFormat::Bc5 => (MODEL_BC5, vec![(0, 63, 0, u32::MAX), (64, 63, 1, u32::MAX)]),
        TextureFormat::Bc7 | TextureFormat::Bc7Srgb => (MODEL_BC7, vec![(0, 127, 0, u32::MAX)]),
    };
    let block_size = 24 + 16 * samples.len();
    let mut b = Vec::with_capacity(block_size);
    b.extend_from_slice(&0u32.to_le_bytes()); // vendor 0 (Khronos), descriptor type 0 (basic)
    b.extend_from_slice(&2u16.to_le_bytes()); // version 1.3 of the data format spec
    b.extend_from_slice(&(block_size as u16).to_le_bytes());
    b.push(model);
    b.push(1); // primaries: BT.709
    b.push(if srgb { 2 } else { 1 }); // transfer: sRGB or linear
    b.push(0); // flags: straight alpha
    let d = (f.block_dim() - 1) as u8;
    b.extend_from_slice(&[d, d, 0, 0]);
    b.extend_from_slice(&[f.bytes_per_block() as u8, 0, 0, 0, 0, 0, 0, 0]);
    for (offset, len, channel, upper) in samples {
        b.extend_from_slice(&offset.to_le_bytes());
        b.push(len);
        b.push(channel);
        b.extend_from_slice(&[0, 0, 0, 0]); // sample position
        b.extend_from_slice(&0u32.to_le_bytes()); // lower
        b.extend_from_slice(&upper.to_le_bytes());
    }
    b
}

/// Encodes a texture as KTX2: no supercompression, one layer, one face,
/// `mips.len()` levels (mip 0 first in `mips`, as the pack holds them; the
/// file stores them smallest first, as KTX2 requires).
pub fn write_ktx2(
    format: TextureFormat,
    width: u32,
    height: u32,
    mips: &[impl AsRef<[u8]>],
) -> Vec<u8> {
    let levels = mips.len();
    let header_len = 80 + 24 * levels;
    let dfd_body = dfd_block(format);
    let dfd_len = 4 + dfd_body.len();
    let dfd_offset = header_len;
    // Key/value data: the writer, which tools display.
    let mut kvd = Vec::new();
    let kv = b"KTXwriter\0gpustream\0";
    kvd.extend_from_slice(&(kv.len() as u32).to_le_bytes());
    kvd.extend_from_slice(kv);
    while kvd.len() % 4 != 0 {
        kvd.push(0);
    }
    let kvd_offset = dfd_offset + dfd_len;
    // Level data must start on lcm(texel block size, 4).
    let align = match format.bytes_per_block() {
        4 => 4,
        n => n as usize,
    };
    let mut offsets = vec![0usize; levels];
    let mut at = kvd_offset + kvd.len();
    for m in (0..levels).rev() {
        at = at.div_ceil(align) * align;
        offsets[m] = at;
        at += mips[m].as_ref().len();
    }
    let mut out = Vec::with_capacity(at);
    out.extend_from_slice(&IDENTIFIER);
    for v in [
        vk_format(format),
        1, // typeSize: 1 for block-compressed and 8-bit formats
        width,
        height,
        0, // pixelDepth: 2D
        0, // layerCount: not an array
        1, // faceCount
        levels as u32,
        0, // no supercompression
        dfd_offset as u32,
        dfd_len as u32,
        kvd_offset as u32,
        kvd.len() as u32,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&0u64.to_le_bytes()); // sgdByteOffset
    out.extend_from_slice(&0u64.to_le_bytes()); // sgdByteLength
    for (m, mip) in mips.iter().enumerate() {
        let len = mip.as_ref().len() as u64;
        out.extend_from_slice(&(offsets[m] as u64).to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(&(dfd_len as u32).to_le_bytes());
    out.extend_from_slice(&dfd_body);
    out.extend_from_slice(&kvd);
    for m in (0..levels).rev() {
        out.resize(offsets[m], 0);
        out.extend_from_slice(mips[m].as_ref());
    }
    out
}

/// A texture read from a KTX2 file: format, size and mips (mip 0 first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ktx2Texture {
    /// The texel format.
    pub format: TextureFormat,
    /// Width of mip 0.
    pub width: u32,
    /// Height of mip 0.
    pub height: u32,
    /// Each level's data, mip 0 first (inflated when supercompressed).
    pub mips: Vec<Vec<u8>>,
    /// The file was supercompressed with zstd (scheme 2).
    pub zstd: bool,
}

/// Reads a KTX2 file holding a 2D texture in one of the pack's formats,
/// stored as it is or supercompressed with zstd (scheme 2, decompressed
/// here). `path` names the file in errors, which also name the structure
/// and byte offset at fault.
///
/// The parse is bounded by the file: nothing is allocated but the mips,
/// whose lengths are checked against the format and the file first; a
/// supercompressed level is inflated to at most its expected length (one
/// byte more is an error, [`PackError::LevelExpands`]).
pub fn read_ktx2(path: &Path, bytes: &[u8]) -> Result<Ktx2Texture, PackError> {
    let mut layout = parse_header(path, bytes)?;
    let bad = |what: &str, offset: usize, reason: String| malformed(path, what, offset, reason);
    let vk = layout.vk_format;
    let format = from_vk_format(vk).ok_or_else(|| {
        bad(
            "header",
            field::VK_FORMAT,
            if vk == 0 {
                "vkFormat 0 (Basis Universal) is transcoded by the packer's import, not read here"
                    .into()
            } else {
                format!("vkFormat {vk} is not supported (use RGBA8, BC1, BC3, BC4, BC5 or BC7)")
            },
        )
    })?;
    let type_size = le32(bytes, field::TYPE_SIZE);
    if type_size != 1 {
        return Err(bad(
            "header",
            field::TYPE_SIZE,
            format!("typeSize {type_size}, {format} requires 1"),
        ));
    }
    if layout.scheme != 0 && layout.scheme != SCHEME_ZSTD {
        return Err(bad(
            "header",
            field::SUPERCOMPRESSION,
            format!(
                "supercompression scheme {} is not supported (none or zstd)",
                layout.scheme
            ),
        ));
    }
    check_dfd(bytes, format, &bad)?;
    locate_levels(path, bytes, &mut layout)?;
    let (width, height) = (layout.width, layout.height);
    let mut mips = Vec::with_capacity(layout.levels.len());
    for (m, level) in layout.levels.iter().enumerate() {
        let (w, h) = mip_extent(width, height, m as u8);
        let want = format.data_size(w, h);
        let stored = level.bytes.len() as u64;
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
        if layout.scheme == 0 {
            if stored != want {
                return Err(size_err(stored, level.entry_at + 8));
            }
            mips.push(bytes[level.bytes.clone()].to_vec());
        } else {
            mips.push(inflate_level(path, bytes, level, m as u32)?);
        }
    }
    Ok(Ktx2Texture {
        format,
        width,
        height,
        mips,
        zstd: layout.scheme == SCHEME_ZSTD,
    })
}

/// Checks the data format descriptor: the section lies inside the file, its
/// total size matches the header, its blocks tile it exactly, and the first
/// is a basic descriptor whose texel block and bytes per block match
/// `format` (so the vkFormat and the DFD agree).
fn check_dfd(
    bytes: &[u8],
    format: TextureFormat,
    bad: &impl Fn(&str, usize, String) -> PackError,
) -> Result<(), PackError> {
    let offset = le32(bytes, field::DFD_OFFSET) as usize;
    let len = le32(bytes, field::DFD_LENGTH) as usize;
    if len < 4 || offset.checked_add(len).is_none_or(|e| e > bytes.len()) {
        return Err(bad(
            "DFD",
            field::DFD_OFFSET,
            format!(
                "{len} bytes at offset {offset} do not fit the {}-byte file (at least 4 needed)",
                bytes.len()
            ),
        ));
    }
    let dfd = &bytes[offset..offset + len];
    let total = le32(dfd, 0) as usize;
    if total != len {
        return Err(bad(
            "DFD",
            offset,
            format!("dfdTotalSize is {total}, the header's dfdByteLength is {len}"),
        ));
    }
    // Blocks: vendor/type (4 bytes), version (2), block size (2), body.
    let mut at = 4;
    let mut index = 0;
    while at < len {
        let what = format!("DFD block {index}");
        if len - at < 8 {
            return Err(bad(
                &what,
                offset + at,
                format!("{} bytes left, a block header needs 8", len - at),
            ));
        }
        let kind = le32(dfd, at);
        let size = u16::from_le_bytes([dfd[at + 6], dfd[at + 7]]) as usize;
        if size < 8 || size > len - at {
            return Err(bad(
                &what,
                offset + at + 6,
                format!(
                    "descriptorBlockSize {size} is outside 8..={} (the rest of the DFD)",
                    len - at
                ),
            ));
        }
        if index == 0 {
            // Vendor 0 (Khronos), descriptor type 0: the basic descriptor.
            if kind != 0 {
                return Err(bad(
                    &what,
                    offset + at,
                    format!("the first block is vendor/type {kind:#x}, not the basic descriptor"),
                ));
            }
            if size < 24 || !(size - 24).is_multiple_of(16) {
                return Err(bad(
                    &what,
                    offset + at + 6,
                    format!("a basic descriptor is 24 bytes plus 16 per sample, not {size}"),
                ));
            }
            let d = (format.block_dim() - 1) as u8;
            let dims = &dfd[at + 12..at + 16];
            if dims != [d, d, 0, 0] {
                return Err(bad(
                    &what,
                    offset + at + 12,
                    format!(
                        "texel block dimensions {dims:?} (each minus 1) do not match {format}'s {0}x{0} blocks",
                        d + 1
                    ),
                ));
            }
            let plane0 = dfd[at + 16];
            if u32::from(plane0) != format.bytes_per_block() {
                return Err(bad(
                    &what,
                    offset + at + 16,
                    format!(
                        "bytesPlane0 is {plane0}, a {format} block is {} bytes",
                        format.bytes_per_block()
                    ),
                ));
            }
        }
        at += size;
        index += 1;
    }
    if index == 0 {
        return Err(bad("DFD", offset, "no descriptor block".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back_in_every_format() {
        for f in TextureFormat::ALL {
            let (w, h) = (36, 20);
            let mips: Vec<Vec<u8>> = (0..gpustream::pack::full_mip_count(w, h))
                .map(|m| {
                    let (mw, mh) = mip_extent(w, h, m);
                    (0..f.data_size(mw, mh))
                        .map(|i| (i as u8).wrapping_mul(m + 3))
                        .collect()
                })
                .collect();
            let bytes = write_ktx2(f, w, h, &mips);
            let r = ktx2::Reader::new(&bytes[..]).unwrap();
            assert_eq!(r.header().format.unwrap().value(), vk_format(f));
            let dfd = r.basic_dfd().expect("a basic DFD");
            // The descriptor matches the one the ktx2 crate derives from the
            // Vulkan format (written independently from the same spec).
            let (reference, type_size) =
                ktx2::dfd::Basic::from_format(ktx2::Format::new(vk_format(f)).unwrap()).unwrap();
            assert_eq!(dfd, &reference, "{f}");
            assert_eq!(type_size, 1);
            let back = read_ktx2(Path::new("t.ktx2"), &bytes).unwrap();
            assert_eq!((back.format, back.width, back.height), (f, w, h));
            assert_eq!(back.mips, mips);
        }
    }
}
