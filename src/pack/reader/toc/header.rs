//! The first step of parsing: the header's own fields, checked before the
//! table of contents is read, so that its length is one the file
//! justifies.

use super::super::super::format::{
    self, header as h, Header, ASSET_ENTRY_LEN, BLOCK_ENTRY_LEN, HEADER_LEN,
};
use super::super::super::stripe::FLAG_STRIPED;
use super::super::super::sub_blocks::{MAX_SUB_BLOCKS, SUB_ENTRY_LEN};
use super::super::super::PackError;
use super::corrupt;
use std::path::Path;

/// Decodes the header after the checks that say whether this is a pack
/// this reader knows at all: the magic, the version, then the header's
/// checksum.
pub(super) fn decode(path: &Path, hb: &[u8; HEADER_LEN]) -> Result<Header, PackError> {
    if hb[..8] != format::MAGIC {
        return Err(PackError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    let hd = Header::decode(hb);
    if hd.version != format::VERSION && hd.version != format::VERSION_1 {
        return Err(PackError::UnsupportedVersion {
            path: path.to_path_buf(),
            version: hd.version,
        });
    }
    let stored = format::get_u32(hb, h::HEADER_CRC);
    let computed = crc32c::crc32c(&hb[..h::HEADER_CRC]);
    if stored != computed {
        return Err(PackError::MetaChecksum {
            path: path.to_path_buf(),
            what: "header",
            offset: 0,
            stored,
            computed,
        });
    }
    Ok(hd)
}

/// Checks the flags and the layout the header declares: the data region
/// (aligned) followed by the table of contents, which ends the file, and
/// counts of blocks and assets that the table and the data can hold.
pub(super) fn check_fields(p: &Path, hd: &Header, file_len: u64) -> Result<(), PackError> {
    if hd.flags & !FLAG_STRIPED != 0 {
        return Err(corrupt(
            p,
            "header",
            h::FLAGS as u64,
            format!("unknown flags {:#x}", hd.flags),
        ));
    }
    if hd.data_offset < format::DATA_ALIGN || !hd.data_offset.is_multiple_of(format::DATA_ALIGN) {
        return Err(corrupt(
            p,
            "header",
            h::DATA_OFFSET as u64,
            format!(
                "data offset {} is not a non-zero multiple of {}",
                hd.data_offset,
                format::DATA_ALIGN
            ),
        ));
    }
    if hd.data_offset.checked_add(hd.data_len) != Some(hd.toc_offset) {
        return Err(corrupt(
            p,
            "header",
            h::TOC_OFFSET as u64,
            format!(
                "table of contents offset {} does not follow the data region ({} + {})",
                hd.toc_offset, hd.data_offset, hd.data_len
            ),
        ));
    }
    if hd.toc_offset.checked_add(hd.toc_len) != Some(file_len) {
        return Err(corrupt(
            p,
            "header",
            h::TOC_LEN as u64,
            format!(
                "table of contents ({} + {}) does not end at the end of the {file_len}-byte file",
                hd.toc_offset, hd.toc_len
            ),
        ));
    }
    // The block and asset entries are fixed-size; everything after them
    // (sub-blocks, names) is checked by the steps that read it.
    let fixed = hd.block_count as u64 * BLOCK_ENTRY_LEN as u64
        + hd.asset_count as u64 * ASSET_ENTRY_LEN as u64;
    if fixed > hd.toc_len {
        return Err(corrupt(
            p,
            "header",
            h::BLOCK_COUNT as u64,
            format!(
                "{} blocks and {} assets need {fixed} bytes, the table of contents has {}",
                hd.block_count, hd.asset_count, hd.toc_len
            ),
        ));
    }
    // The table of contents is held in memory whole: its length must be
    // one the counts can fill (entries, each block's sub-blocks at most,
    // each asset's name at most) and at most MAX_TOC_LEN, whatever the
    // file's length says (a sparse file is long for free).
    let justified = hd.block_count as u64
        * (BLOCK_ENTRY_LEN + MAX_SUB_BLOCKS * SUB_ENTRY_LEN) as u64
        + hd.asset_count as u64 * (ASSET_ENTRY_LEN + format::MAX_NAME_LEN) as u64;
    if hd.toc_len > justified.min(format::MAX_TOC_LEN) {
        return Err(corrupt(
            p,
            "header",
            h::TOC_LEN as u64,
            format!(
                "a table of contents of {} bytes is longer than {} blocks and {} assets can fill ({}), or than {} bytes",
                hd.toc_len,
                hd.block_count,
                hd.asset_count,
                justified,
                format::MAX_TOC_LEN
            ),
        ));
    }
    // Every block stores at least one byte, so the data region bounds
    // the block count too. A striped head's data region holds only member
    // 0's blocks; there the table of contents alone bounds the count (the
    // block step checks that the blocks fill every member exactly).
    if hd.flags & FLAG_STRIPED == 0 && hd.block_count as u64 > hd.data_len {
        return Err(corrupt(
            p,
            "header",
            h::BLOCK_COUNT as u64,
            format!(
                "{} blocks cannot fit in {} bytes of data",
                hd.block_count, hd.data_len
            ),
        ));
    }
    Ok(())
}
