//! The KTX2 container, checked against the file before anything in it is
//! used: the header, the level index, and the byte ranges of the data
//! format descriptor, the supercompression global data and every level;
//! and the bounded inflation of zstd-supercompressed levels. What the
//! levels hold is for the callers (ktx2.rs for BCn/RGBA8, basis.rs for
//! Basis Universal).

use gpustream::pack::PackError;
use std::path::Path;

/// Byte offsets of the KTX2 header fields.
pub(super) mod field {
    pub const VK_FORMAT: usize = 12;
    pub const TYPE_SIZE: usize = 16;
    pub const PIXEL_WIDTH: usize = 20;
    pub const PIXEL_HEIGHT: usize = 24;
    pub const PIXEL_DEPTH: usize = 28;
    pub const LAYER_COUNT: usize = 32;
    pub const FACE_COUNT: usize = 36;
    pub const LEVEL_COUNT: usize = 40;
    pub const SUPERCOMPRESSION: usize = 44;
    pub const DFD_OFFSET: usize = 48;
    pub const DFD_LENGTH: usize = 52;
    pub const KVD_OFFSET: usize = 56;
    pub const KVD_LENGTH: usize = 60;
    pub const SGD_OFFSET: usize = 64;
    pub const SGD_LENGTH: usize = 72;
    /// The header's length; the level index follows.
    pub const HEADER_LEN: usize = 80;
    /// One level index entry: byte offset, byte length, uncompressed length.
    pub const LEVEL_ENTRY_LEN: usize = 24;
}

/// Little-endian u32 at `o`; the caller has checked `o + 4 <= b.len()`.
pub(super) fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Little-endian u64 at `o`; the caller has checked `o + 8 <= b.len()`.
pub(super) fn le64(b: &[u8], o: usize) -> u64 {
    u64::from(le32(b, o)) | u64::from(le32(b, o + 4)) << 32
}

/// The container of a KTX2 file, checked against the file: one 2D texture,
/// every region (DFD, key/value data, supercompression global data, each
/// level) inside the file. What the levels hold is not checked here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ktx2Layout {
    /// `vkFormat` (0 for Basis Universal).
    pub(crate) vk_format: u32,
    /// `supercompressionScheme`: 0 none, 1 BasisLZ, 2 zstd, 3 zlib.
    pub(crate) scheme: u32,
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// Byte range of the data format descriptor.
    pub(crate) dfd: std::ops::Range<usize>,
    /// Byte range of the supercompression global data (empty when none).
    pub(crate) sgd: std::ops::Range<usize>,
    /// Each level, mip 0 first.
    pub(crate) levels: Vec<Ktx2Level>,
}

/// One entry of the level index, its byte range checked against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ktx2Level {
    /// Byte range of the level's (possibly supercompressed) data.
    pub(crate) bytes: std::ops::Range<usize>,
    /// `uncompressedByteLength`.
    pub(crate) uncompressed: u64,
    /// Offset of the level's index entry, for errors.
    pub(crate) entry_at: usize,
}

/// A KTX2 error at a known place: the file, the structure, the offset.
pub(crate) fn malformed(path: &Path, what: &str, offset: usize, reason: String) -> PackError {
    PackError::MalformedInput {
        path: path.to_path_buf(),
        format: "KTX2",
        what: what.to_string(),
        offset: offset as u64,
        reason,
    }
}

/// Parses and checks the container (see [`Ktx2Layout`]).
pub(crate) fn parse_layout(path: &Path, bytes: &[u8]) -> Result<Ktx2Layout, PackError> {
    let mut layout = parse_header(path, bytes)?;
    locate_levels(path, bytes, &mut layout)?;
    Ok(layout)
}

/// Checks every level's byte range against the file (the ranges are empty
/// until this runs). Kept apart from [`parse_header`] so that a reader can
/// report a bad descriptor before levels that a bad descriptor may explain.
pub(crate) fn locate_levels(
    path: &Path,
    bytes: &[u8],
    layout: &mut Ktx2Layout,
) -> Result<(), PackError> {
    let file_len = bytes.len() as u64;
    for (m, level) in layout.levels.iter_mut().enumerate() {
        let at = level.entry_at;
        let (offset, len) = (le64(bytes, at), le64(bytes, at + 8));
        if offset.checked_add(len).is_none_or(|e| e > file_len) {
            return Err(PackError::TruncatedInput {
                path: path.to_path_buf(),
                format: "KTX2",
                what: format!("level {m} (index entry at {at})"),
                offset,
                needed: len,
                file_len,
            });
        }
        // Inside the file, so both fit in usize.
        level.bytes = offset as usize..(offset + len) as usize;
    }
    Ok(())
}

/// Parses and checks the header, the level index's extent and the regions
/// other than the levels (see [`locate_levels`]).
pub(super) fn parse_header(path: &Path, bytes: &[u8]) -> Result<Ktx2Layout, PackError> {
    let bad = |what: &str, offset: usize, reason: String| malformed(path, what, offset, reason);
    let file_len = bytes.len() as u64;
    // A region [offset, offset + len) must lie inside the file.
    let in_file = |offset: u64, len: u64| offset.checked_add(len).is_some_and(|e| e <= file_len);
    let truncated = |what: &str, offset: u64, needed: u64| PackError::TruncatedInput {
        path: path.to_path_buf(),
        format: "KTX2",
        what: what.to_string(),
        offset,
        needed,
        file_len,
    };

    if bytes.len() < 12 && super::IDENTIFIER.starts_with(bytes) {
        return Err(truncated("identifier", 0, 12));
    }
    if bytes.len() < 12 || bytes[..12] != super::IDENTIFIER {
        return Err(bad("header", 0, "not a KTX2 file (bad identifier)".into()));
    }
    if bytes.len() < field::HEADER_LEN {
        return Err(truncated("header", 0, field::HEADER_LEN as u64));
    }
    let vk_format = le32(bytes, field::VK_FORMAT);
    let scheme = le32(bytes, field::SUPERCOMPRESSION);
    let (width, height) = (
        le32(bytes, field::PIXEL_WIDTH),
        le32(bytes, field::PIXEL_HEIGHT),
    );
    let (depth, layers, faces) = (
        le32(bytes, field::PIXEL_DEPTH),
        le32(bytes, field::LAYER_COUNT),
        le32(bytes, field::FACE_COUNT),
    );
    if depth > 1 || layers > 1 || faces != 1 {
        let what = if faces == 6 {
            "a cube map (faceCount 6)".to_string()
        } else if layers > 1 {
            format!("a texture array of {layers} layers (layerCount)")
        } else {
            format!("depth {depth}, {layers} layers, {faces} faces (only single 2D textures)")
        };
        return Err(PackError::UnsupportedInput {
            path: path.to_path_buf(),
            format: "KTX2",
            what: format!("{what} at offset {}", field::PIXEL_DEPTH),
        });
    }
    if width == 0
        || height == 0
        || width > gpustream::pack::MAX_TEXTURE_DIM
        || height > gpustream::pack::MAX_TEXTURE_DIM
    {
        return Err(bad(
            "header",
            field::PIXEL_WIDTH,
            format!(
                "size {width}x{height} is outside 1..={}",
                gpustream::pack::MAX_TEXTURE_DIM
            ),
        ));
    }
    // levelCount 0 means "one level, make the rest at load time".
    let level_count = le32(bytes, field::LEVEL_COUNT).max(1);
    let full = gpustream::pack::full_mip_count(width, height);
    if level_count > u32::from(full) {
        return Err(bad(
            "header",
            field::LEVEL_COUNT,
            format!("{level_count} levels, a {width}x{height} texture has at most {full}"),
        ));
    }
    let index_end = field::HEADER_LEN + level_count as usize * field::LEVEL_ENTRY_LEN;
    if bytes.len() < index_end {
        return Err(truncated(
            "level index",
            field::HEADER_LEN as u64,
            (index_end - field::HEADER_LEN) as u64,
        ));
    }
    let dfd_offset = le32(bytes, field::DFD_OFFSET) as usize;
    let dfd_len = le32(bytes, field::DFD_LENGTH) as usize;
    if dfd_len < 4 {
        return Err(bad(
            "DFD",
            field::DFD_LENGTH,
            format!("dfdByteLength {dfd_len}, at least 4 needed"),
        ));
    }
    if !in_file(dfd_offset as u64, dfd_len as u64) {
        return Err(truncated("DFD", dfd_offset as u64, dfd_len as u64));
    }
    let mut sgd = 0..0;
    for (what, off_at, len_at) in [
        ("key/value data", field::KVD_OFFSET, field::KVD_LENGTH),
        (
            "supercompression global data",
            field::SGD_OFFSET,
            field::SGD_LENGTH,
        ),
    ] {
        let (offset, len) = if off_at == field::SGD_OFFSET {
            (le64(bytes, off_at), le64(bytes, len_at))
        } else {
            (le32(bytes, off_at).into(), le32(bytes, len_at).into())
        };
        if len > 0 && !in_file(offset, len) {
            return Err(truncated(what, offset, len));
        }
        if off_at == field::SGD_OFFSET && len > 0 {
            // In the file, so both fit in usize.
            sgd = offset as usize..(offset + len) as usize;
        }
    }
    let mut levels = Vec::with_capacity(level_count as usize);
    for m in 0..level_count as usize {
        let at = field::HEADER_LEN + m * field::LEVEL_ENTRY_LEN;
        levels.push(Ktx2Level {
            bytes: 0..0,
            uncompressed: le64(bytes, at + 16),
            entry_at: at,
        });
    }
    Ok(Ktx2Layout {
        vk_format,
        scheme,
        width,
        height,
        dfd: dfd_offset..dfd_offset + dfd_len,
        sgd,
        levels,
    })
}

/// Supercompression scheme 2 in the KTX2 specification.
pub(crate) const SCHEME_ZSTD: u32 = 2;

/// Inflates a zstd-supercompressed level to exactly its declared
/// `uncompressedByteLength`. The output grows only as data arrives and
/// stops one byte past the declared length, so a small level claiming (or
/// expanding to) gigabytes costs at most what it declared.
pub(crate) fn inflate_level(
    path: &Path,
    bytes: &[u8],
    level: &Ktx2Level,
    m: u32,
) -> Result<Vec<u8>, PackError> {
    use std::io::Read;
    let at = level.bytes.start;
    let declared = level.uncompressed;
    let mut out = Vec::new();
    let decoder = zstd::stream::read::Decoder::with_buffer(&bytes[level.bytes.clone()])
        .map_err(|e| malformed(path, &format!("level {m}"), at, format!("zstd: {e}")))?;
    decoder
        .take(declared.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| malformed(path, &format!("level {m}"), at, format!("zstd: {e}")))?;
    if out.len() as u64 > declared {
        return Err(PackError::LevelExpands {
            path: path.to_path_buf(),
            format: "KTX2",
            level: m,
            offset: at as u64,
            declared,
        });
    }
    if (out.len() as u64) < declared {
        return Err(PackError::LevelSize {
            path: path.to_path_buf(),
            format: "KTX2",
            level: m,
            offset: at as u64,
            found: out.len() as u64,
            expected: declared,
        });
    }
    Ok(out)
}
