//! The byte layout of a `.gspk` file (docs/pack-format.md is the spec; the
//! constants here are the single source of the numbers in it).

/// The first 8 bytes of every pack. The CR LF / ^Z / LF tail catches text-mode
/// transfers the way PNG's signature does.
pub const MAGIC: [u8; 8] = *b"GSPK\r\n\x1a\n";

/// The newest format version this crate writes and reads: 2 records a BCn
/// conditioning transform and the codec level per block (bytes 14 and 15
/// of the block entry). The writer writes [`VERSION_1`] for a pack where
/// both are zero everywhere, so such a pack stays readable by readers that
/// know only version 1.
pub const VERSION: u32 = 2;

/// The first format version; still read, and written for packs whose blocks
/// carry no transform.
pub const VERSION_1: u32 = 1;

/// Bytes of the fixed header at offset 0.
pub const HEADER_LEN: usize = 64;

/// The alignment of the data region: sector (and page) size, so an
/// O_DIRECT reader can round any block's range out to whole sectors.
pub const DATA_ALIGN: u64 = 4096;

/// Bytes of one block entry in the table of contents.
pub const BLOCK_ENTRY_LEN: usize = 16;

/// Bytes of one asset entry in the table of contents.
pub const ASSET_ENTRY_LEN: usize = 40;

/// The longest asset name, in bytes.
pub const MAX_NAME_LEN: usize = 4096;

/// The longest table of contents, in bytes: a pack of 2^24 blocks (1 TiB
/// of 64 KiB blocks) has one of 256 MiB. A reader holds its whole table of
/// contents in memory, so a header declaring more is refused before any
/// of it is read (as is one longer than its block and asset counts can
/// fill).
pub const MAX_TOC_LEN: u64 = 1 << 30;

/// Asset kind ids in the table of contents.
pub const KIND_BLOB: u8 = 0;
/// See [`KIND_BLOB`].
pub const KIND_TEXTURE: u8 = 1;

/// Block entry field offsets that more than one module names.
pub mod block {
    /// `u8` sub-block count: 0 for one stream of the block's codec, `n` in
    /// `2..=16` for an LZ4 block stored as `n` independent sub-blocks, whose
    /// lengths follow the asset entries (`sub_blocks::SUB_ENTRY_LEN` bytes
    /// each). Reserved and zero in packs written before 2026-12-01.
    pub const SUB_BLOCKS: usize = 13;
    /// `u8` BCn conditioning transform id (`BlockTransform::id`; 0 = none).
    /// Version 2 only; reserved and zero in version 1.
    pub const TRANSFORM: usize = 14;
    /// `u8` the codec level the packer used (0 = the codec's default: LZ4's
    /// fast compressor, zstd's default level). Informational: decoding does
    /// not depend on it. Version 2 only; reserved and zero in version 1.
    pub const LEVEL: usize = 15;
}

/// Asset entry field offsets that more than one module names.
pub mod asset {
    /// `u8` source kind id (`TextureSourceKind::id`; 0 = not recorded, always 0
    /// for blobs). Reserved and zero in packs written before 2026-12-01.
    pub const SOURCE_KIND: usize = 11;
    /// `u32` microseconds spent transcoding (0 = none or not recorded; must
    /// be 0 when the source kind is). Reserved and zero before 2026-12-01.
    pub const TRANSCODE_US: usize = 36;
}

/// Header field offsets.
pub mod header {
    /// `[u8; 8]` magic.
    pub const MAGIC: usize = 0;
    /// `u32` version.
    pub const VERSION: usize = 8;
    /// `u32` flags (none defined in v1; must be 0).
    pub const FLAGS: usize = 12;
    /// `u64` data region offset.
    pub const DATA_OFFSET: usize = 16;
    /// `u64` data region length.
    pub const DATA_LEN: usize = 24;
    /// `u64` table of contents offset.
    pub const TOC_OFFSET: usize = 32;
    /// `u64` table of contents length.
    pub const TOC_LEN: usize = 40;
    /// `u32` asset count.
    pub const ASSET_COUNT: usize = 48;
    /// `u32` block count.
    pub const BLOCK_COUNT: usize = 52;
    /// `u32` crc32c of the table of contents.
    pub const TOC_CRC: usize = 56;
    /// `u32` crc32c of header bytes 0..60.
    pub const HEADER_CRC: usize = 60;
}

/// The decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) version: u32,
    pub(crate) flags: u32,
    pub(crate) data_offset: u64,
    pub(crate) data_len: u64,
    pub(crate) toc_offset: u64,
    pub(crate) toc_len: u64,
    pub(crate) asset_count: u32,
    pub(crate) block_count: u32,
    pub(crate) toc_crc: u32,
}

impl Header {
    /// Encodes the header, computing its own checksum.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        put_u32(&mut b, header::VERSION, self.version);
        put_u32(&mut b, header::FLAGS, self.flags);
        put_u64(&mut b, header::DATA_OFFSET, self.data_offset);
        put_u64(&mut b, header::DATA_LEN, self.data_len);
        put_u64(&mut b, header::TOC_OFFSET, self.toc_offset);
        put_u64(&mut b, header::TOC_LEN, self.toc_len);
        put_u32(&mut b, header::ASSET_COUNT, self.asset_count);
        put_u32(&mut b, header::BLOCK_COUNT, self.block_count);
        put_u32(&mut b, header::TOC_CRC, self.toc_crc);
        let crc = crc32c::crc32c(&b[..header::HEADER_CRC]);
        put_u32(&mut b, header::HEADER_CRC, crc);
        b
    }

    /// Decodes the fields (no validation beyond the slice length).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Header {
        Header {
            version: get_u32(b, header::VERSION),
            flags: get_u32(b, header::FLAGS),
            data_offset: get_u64(b, header::DATA_OFFSET),
            data_len: get_u64(b, header::DATA_LEN),
            toc_offset: get_u64(b, header::TOC_OFFSET),
            toc_len: get_u64(b, header::TOC_LEN),
            asset_count: get_u32(b, header::ASSET_COUNT),
            block_count: get_u32(b, header::BLOCK_COUNT),
            toc_crc: get_u32(b, header::TOC_CRC),
        }
    }
}

/// Encodes a version 1 header with the given fields (magic, version and
/// both checksums filled in). Tests use it to build packs by hand;
/// [`encode_header_version`] writes either version.
pub fn encode_header(
    data_offset: u64,
    data_len: u64,
    toc_offset: u64,
    toc_len: u64,
    asset_count: u32,
    block_count: u32,
    toc_crc: u32,
) -> [u8; HEADER_LEN] {
    encode_header_version(
        VERSION_1,
        data_offset,
        data_len,
        toc_offset,
        toc_len,
        asset_count,
        block_count,
        toc_crc,
    )
}

/// Encodes a header of `version` with the given fields (magic and both
/// checksums filled in). The writer uses it.
#[allow(clippy::too_many_arguments)]
pub fn encode_header_version(
    version: u32,
    data_offset: u64,
    data_len: u64,
    toc_offset: u64,
    toc_len: u64,
    asset_count: u32,
    block_count: u32,
    toc_crc: u32,
) -> [u8; HEADER_LEN] {
    Header {
        version,
        flags: 0,
        data_offset,
        data_len,
        toc_offset,
        toc_len,
        asset_count,
        block_count,
        toc_crc,
    }
    .encode()
}

pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian `u32`; the caller has checked the bounds.
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// Reads a little-endian `u64`; the caller has checked the bounds.
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Rounds the byte range `[offset, offset + len)` out to whole sectors of
/// `align` bytes (a power of two), as an O_DIRECT read of a block must:
/// returns the aligned start, the aligned length, and where the wanted bytes
/// begin inside the aligned range.
pub fn sector_range(offset: u64, len: u64, align: u64) -> (u64, u64, u64) {
    let start = offset & !(align - 1);
    let end = (offset + len).div_ceil(align) * align;
    (start, end - start, offset - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_ranges_cover_the_block() {
        assert_eq!(sector_range(4096, 100, 4096), (4096, 4096, 0));
        assert_eq!(sector_range(5000, 100, 4096), (4096, 4096, 904));
        // A block straddling a sector boundary needs both sectors.
        assert_eq!(sector_range(8000, 300, 4096), (4096, 8192, 3904));
        assert_eq!(sector_range(8192, 65536, 4096), (8192, 65536, 0));
        assert_eq!(sector_range(100, 10, 512), (0, 512, 100));
        for (offset, len) in [(4097u64, 65535u64), (12345, 1), (4096 * 7 - 1, 2)] {
            let (start, n, skip) = sector_range(offset, len, 4096);
            assert_eq!(start % 4096, 0);
            assert_eq!(n % 4096, 0);
            assert_eq!(start + skip, offset);
            assert!(start + n >= offset + len && n < len + 2 * 4096);
        }
    }

    #[test]
    fn header_round_trips() {
        let h = Header {
            version: VERSION,
            flags: 0,
            data_offset: 4096,
            data_len: 123,
            toc_offset: 4219,
            toc_len: 77,
            asset_count: 2,
            block_count: 3,
            toc_crc: 0xdead_beef,
        };
        let b = h.encode();
        assert_eq!(b[..8], MAGIC);
        assert_eq!(Header::decode(&b), h);
        assert_eq!(get_u32(&b, header::HEADER_CRC), crc32c::crc32c(&b[..60]));
    }
}
