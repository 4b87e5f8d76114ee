//! Validating a pack's table of contents: `Pack::parse`, which checks the
//! header, every block entry (sizes, codecs, offsets inside the data
//! region, the sector rule), every asset entry and its name, texture
//! layouts, and the sub-block table, so that every later lookup on a
//! `Pack` is plain indexing. Split from `reader.rs`, which keeps the
//! lookups and the block readers.
//!
//! `parse` runs its steps in this order, and the order is part of the
//! behaviour: for a file with several faults, the first step that finds
//! one names it.
//!
//! 1. `header`: magic, version, header checksum, flags, and that the
//!    data region and the table of contents tile the file.
//! 2. `members`: in a striped pack, the stripe section after the header
//!    (the member files themselves are checked by `Pack::open`).
//! 3. `read_checked`: the table of contents itself and its checksum.
//! 4. `blocks`: every block entry (and where it lies), then the
//!    sub-block table.
//! 5. `assets`: every asset entry (its name, source, block range) and,
//!    through `kinds`, what a blob or a texture asks of its blocks.
//! 6. `Toc::check_all_used`: the names fill the name table and the
//!    assets own every block.
//!
//! The table of contents is laid out as block entries, asset entries,
//! sub-block entries, then the names; `Toc` knows where each starts.

mod assets;
mod blocks;
mod header;
mod kinds;

use super::super::format::{self, Header, ASSET_ENTRY_LEN, BLOCK_ENTRY_LEN, HEADER_LEN};
use super::super::stripe::{self, Section, FLAG_STRIPED, MAX_SECTION_LEN};
use super::super::sub_blocks::SUB_ENTRY_LEN;
use super::super::{Member, PackError};
use super::{corrupt, Pack};
use std::path::{Path, PathBuf};

/// The table of contents of one file (its checksum already checked, its
/// entries not yet), with what every step needs to name a place in an
/// error: the file's path and its header (for the table's offset in the
/// file).
struct Toc<'a> {
    path: &'a Path,
    hd: Header,
    bytes: &'a [u8],
}

impl Toc<'_> {
    /// A `PackError::Corrupt` naming this file.
    fn corrupt(
        &self,
        what: impl Into<String>,
        offset: u64,
        reason: impl Into<String>,
    ) -> PackError {
        corrupt(self.path, what, offset, reason)
    }

    /// Where the asset entries start: right after the block entries.
    fn assets_at(&self) -> usize {
        self.hd.block_count as usize * BLOCK_ENTRY_LEN
    }

    /// Where the sub-block entries start: right after the asset entries.
    fn subs_at(&self) -> usize {
        self.assets_at() + self.hd.asset_count as usize * ASSET_ENTRY_LEN
    }

    /// Where the names start: right after the `sub_count` sub-block
    /// entries. Only in bounds once the sub-block step has checked them.
    fn names_at(&self, sub_count: usize) -> usize {
        self.subs_at() + sub_count * SUB_ENTRY_LEN
    }
}

impl Pack {
    /// Validates a pack from its header bytes and a reader of its bytes
    /// (`read(offset, len)`, called once the header has bounded `len` by
    /// the file's size: for the stripe section, then the table of
    /// contents). Every step below returns the first fault it finds; see
    /// the module documentation for the order.
    pub(super) fn parse(
        path: PathBuf,
        file_len: u64,
        hb: &[u8; HEADER_LEN],
        mut read: impl FnMut(u64, usize) -> Result<Vec<u8>, PackError>,
    ) -> Result<Pack, PackError> {
        let hd = header::decode(&path, hb)?;
        header::check_fields(&path, &hd, file_len)?;
        let (members, section) = members(&path, &hd, &mut read)?;
        let bytes = read_checked(&path, &hd, read)?;
        let toc = Toc {
            path: &path,
            hd,
            bytes: &bytes,
        };
        let unit = section.as_ref().map_or(u64::MAX, |s| s.unit);
        let (mut blocks, sub_count) = toc.blocks(&members, unit)?;
        let subs = toc.sub_blocks(sub_count, &blocks)?;
        let assets = toc.assets(sub_count, &mut blocks, &subs)?;
        toc.check_all_used(sub_count, &assets)?;
        Ok(Pack {
            path,
            file_len,
            data_offset: hd.data_offset,
            data_len: hd.data_len,
            blocks,
            assets: assets.assets,
            layouts: assets.layouts,
            sources: assets.sources,
            by_name: assets.by_name,
            sub_index: subs.index,
            sub_blocks: subs.subs,
            members,
            stripe: section.map(|s| (s.unit, s.pack_id)),
            files: Vec::new(),
        })
    }
}

/// The files a pack's blocks lie in: the pack itself, or, with the stripe
/// flag, the head and the members its stripe section names, each with the
/// data region it declares (checked against the blocks in the block step
/// and against the member files by `Pack::open`).
fn members(
    path: &Path,
    hd: &Header,
    read: &mut impl FnMut(u64, usize) -> Result<Vec<u8>, PackError>,
) -> Result<(Vec<Member>, Option<Section>), PackError> {
    let head = Member {
        path: path.to_path_buf(),
        data_offset: hd.data_offset,
        data_len: hd.data_len,
    };
    if hd.flags & FLAG_STRIPED == 0 {
        return Ok((vec![head], None));
    }
    // data_offset <= file_len (checked with the header); the section is
    // bounded whatever padding the file declares.
    let len = (hd.data_offset as usize - HEADER_LEN).min(MAX_SECTION_LEN);
    let bytes = read(HEADER_LEN as u64, len)?;
    let section = Section::decode(&bytes)
        .map_err(|(offset, reason)| corrupt(path, "stripe section", offset, reason))?;
    let mut members = vec![head];
    members.extend(section.members.iter().map(|m| Member {
        path: stripe::resolve(path, &m.path),
        data_offset: format::DATA_ALIGN,
        data_len: m.data_len,
    }));
    Ok((members, Some(section)))
}

/// The most of a table of contents read at once.
const TOC_PIECE: usize = 8 << 20;

/// Reads the table of contents and checks it against the header's
/// checksum, before any of its entries is looked at.
fn read_checked(
    path: &Path,
    hd: &Header,
    mut read_toc: impl FnMut(u64, usize) -> Result<Vec<u8>, PackError>,
) -> Result<Vec<u8>, PackError> {
    // The header bounded toc_len by the counts and MAX_TOC_LEN. Read in
    // pieces all the same: memory grows only as bytes arrive, so a file
    // (or a server) that ends early fails before the whole length is
    // allocated.
    let mut toc = Vec::with_capacity((hd.toc_len as usize).min(TOC_PIECE));
    let mut computed = 0u32;
    while (toc.len() as u64) < hd.toc_len {
        let at = toc.len() as u64;
        let n = (hd.toc_len - at).min(TOC_PIECE as u64) as usize;
        let piece = read_toc(hd.toc_offset + at, n)?;
        if piece.len() != n {
            return Err(corrupt(
                path,
                "table of contents",
                hd.toc_offset + at,
                format!("read {} of {n} bytes", piece.len()),
            ));
        }
        computed = crc32c::crc32c_append(computed, &piece);
        toc.extend_from_slice(&piece);
    }
    if computed != hd.toc_crc {
        return Err(PackError::MetaChecksum {
            path: path.to_path_buf(),
            what: "table of contents",
            offset: hd.toc_offset,
            stored: hd.toc_crc,
            computed,
        });
    }
    Ok(toc)
}
