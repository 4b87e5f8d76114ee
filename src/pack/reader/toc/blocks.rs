//! The block step of parsing: every block entry on its own (codec,
//! transform, sizes, where its bytes lie), then the sub-block table that
//! follows the asset entries. Which asset owns a block is only known
//! later, so blocks leave here owned by no asset (`AssetId(u32::MAX)`).

use super::super::super::format::{self, ASSET_ENTRY_LEN, BLOCK_ENTRY_LEN};
use super::super::super::stripe::Placement;
use super::super::super::sub_blocks::{self, SubBlock, MAX_SUB_BLOCKS, SUB_ENTRY_LEN};
use super::super::super::{AssetId, Block, BlockTransform, Member, PackError};
use super::Toc;
use crate::codec::{Codec, MAX_BLOCK_SIZE};
use std::ops::Range;

/// The sub-block table: each block's range of sub-blocks (empty for whole
/// blocks), and the sub-blocks, every one checked against its block. Both
/// empty when no block is split.
pub(super) struct SubTable {
    pub(super) index: Vec<Range<usize>>,
    pub(super) subs: Vec<SubBlock>,
}

impl Toc<'_> {
    /// Reads every block entry, checks it, and lays the blocks back to back
    /// from the start of the data region, which they must fill exactly. In
    /// a striped pack they are dealt out over the members' data regions
    /// (`stripe::Placement`), each of which they must fill exactly.
    /// Returns the blocks and how many sub-block entries they declare.
    pub(super) fn blocks(
        &self,
        members: &[Member],
        unit: u64,
    ) -> Result<(Vec<Block>, usize), PackError> {
        let hd = &self.hd;
        let mut blocks = Vec::with_capacity(hd.block_count as usize);
        let mut placement = Placement::new(members.len(), unit);
        let mut sub_count = 0usize;
        for i in 0..hd.block_count as usize {
            let stored = format::get_u32(&self.bytes[i * BLOCK_ENTRY_LEN..], 0);
            let (m, rel) = placement.place(stored);
            let member = &members[m];
            let b = self.block(
                i,
                m,
                member.data_offset + rel,
                member.data_offset + member.data_len,
            )?;
            sub_count += b.sub_blocks as usize;
            blocks.push(b);
        }
        for (m, (member, &filled)) in members.iter().zip(placement.filled()).enumerate() {
            if filled != member.data_len {
                let whose = if members.len() > 1 {
                    format!(" of member {m} ({})", member.path.display())
                } else {
                    String::new()
                };
                return Err(self.corrupt(
                    "table of contents",
                    hd.toc_offset,
                    format!(
                        "blocks cover {filled} bytes of a {}-byte data region{whose}",
                        member.data_len
                    ),
                ));
            }
        }
        Ok((blocks, sub_count))
    }

    /// Checks block entry `i`, whose stored bytes start at `at` in the
    /// file of member `member` (0 but in a striped pack), whose data region
    /// ends at `end`, in the order its fields are validated: codec, reserved
    /// bytes (version 1), transform, sub-block count, sizes, then that its
    /// bytes stay inside the data region.
    fn block(&self, i: usize, member: usize, at: u64, end: u64) -> Result<Block, PackError> {
        let hd = &self.hd;
        let e = &self.bytes[i * BLOCK_ENTRY_LEN..(i + 1) * BLOCK_ENTRY_LEN];
        let entry_at = hd.toc_offset + (i * BLOCK_ENTRY_LEN) as u64;
        let what = || format!("block {i}{}", self.owner_of(i));
        let stored_size = format::get_u32(e, 0);
        let size = format::get_u32(e, 4);
        let checksum = format::get_u32(e, 8);
        let codec = Codec::from_id(e[12])
            .map_err(|err| self.corrupt(what(), entry_at + 12, err.to_string()))?;
        // Bytes 14 and 15 are the transform and the level from
        // version 2 on; before, they were reserved.
        if let Some(k) = (format::block::TRANSFORM..BLOCK_ENTRY_LEN)
            .find(|&k| hd.version == format::VERSION_1 && e[k] != 0)
        {
            return Err(self.corrupt(what(), entry_at + k as u64, "reserved bytes are not zero"));
        }
        let t = e[format::block::TRANSFORM];
        let transform = BlockTransform::from_id(t).ok_or_else(|| {
            self.corrupt(
                what(),
                entry_at + format::block::TRANSFORM as u64,
                format!("unknown transform id {t}"),
            )
        })?;
        if transform != BlockTransform::None && codec == Codec::None {
            return Err(self.corrupt(
                what(),
                entry_at + format::block::TRANSFORM as u64,
                format!("a stored (none) block with transform {}", transform.name()),
            ));
        }
        let subs = e[format::block::SUB_BLOCKS];
        if subs == 1 || subs as usize > MAX_SUB_BLOCKS || (subs > 0 && codec != Codec::Lz4) {
            return Err(self.corrupt(
                what(),
                entry_at + format::block::SUB_BLOCKS as u64,
                format!(
                    "{subs} sub-blocks of a {codec} block (0, or 2..={MAX_SUB_BLOCKS} for lz4)"
                ),
            ));
        }
        if size == 0 || size as usize > MAX_BLOCK_SIZE {
            return Err(self.corrupt(
                what(),
                entry_at + 4,
                format!("uncompressed size {size} is outside 1..={MAX_BLOCK_SIZE}"),
            ));
        }
        let bound = codec.max_stored_size(size as usize);
        if stored_size == 0 || stored_size as usize > bound {
            return Err(self.corrupt(
                what(),
                entry_at,
                format!(
                    "stored size {stored_size} is outside 1..={bound} ({codec} of {size} bytes)"
                ),
            ));
        }
        if at + stored_size as u64 > end {
            return Err(self.corrupt(
                what(),
                entry_at,
                format!(
                    "stored bytes at {at} (+{stored_size}) run past the data region's end {end}"
                ),
            ));
        }
        Ok(Block {
            member: member as u16,
            offset: at,
            stored_size,
            size,
            codec,
            checksum,
            asset: AssetId(u32::MAX),
            sub_blocks: subs,
            transform,
            level: e[format::block::LEVEL],
        })
    }

    /// For messages about a block found bad before the asset table is
    /// validated: " of asset 'name'" when some asset entry's range claims
    /// block `i` and its name reads, else nothing. Only runs on the error
    /// path, so it reads the unchecked entries defensively: the names sit
    /// after the sub-block table, whose length it takes from the sub-block
    /// counts every block entry declares (not yet validated).
    fn owner_of(&self, i: usize) -> String {
        let (toc, hd) = (self.bytes, &self.hd);
        let assets_at = hd.block_count as usize * BLOCK_ENTRY_LEN;
        let declared: usize = (0..hd.block_count as usize)
            .map(|b| toc[b * BLOCK_ENTRY_LEN + format::block::SUB_BLOCKS] as usize)
            .sum();
        let names = toc.get(self.names_at(declared)..).unwrap_or(&[]);
        for a in 0..hd.asset_count as usize {
            let e = &toc[assets_at + a * ASSET_ENTRY_LEN..][..ASSET_ENTRY_LEN];
            let (first, count) = (
                format::get_u32(e, 28) as usize,
                format::get_u32(e, 32) as usize,
            );
            if (first..first.saturating_add(count)).contains(&i) {
                let (off, len) = (
                    format::get_u32(e, 0) as usize,
                    format::get_u32(e, 4) as usize,
                );
                return match off.checked_add(len).and_then(|end| names.get(off..end)) {
                    Some(n) => match std::str::from_utf8(n) {
                        Ok(name) => format!(" of asset '{name}'"),
                        Err(_) => format!(" of asset #{a}"),
                    },
                    None => format!(" of asset #{a}"),
                };
            }
        }
        String::new()
    }

    /// Reads the sub-block table (after the asset entries): `count`
    /// entries in block order, each block's run checked against that
    /// block's sizes.
    pub(super) fn sub_blocks(&self, count: usize, blocks: &[Block]) -> Result<SubTable, PackError> {
        let (toc, hd, subs_at) = (self.bytes, &self.hd, self.subs_at());
        if count == 0 {
            return Ok(SubTable {
                index: Vec::new(),
                subs: Vec::new(),
            });
        }
        let end = subs_at + count * SUB_ENTRY_LEN;
        if end > toc.len() {
            return Err(self.corrupt(
                "table of contents",
                hd.toc_offset + subs_at as u64,
                format!(
                    "{count} sub-block entries need {end} bytes, the table of contents has {}",
                    toc.len()
                ),
            ));
        }
        let mut index = Vec::with_capacity(blocks.len());
        let mut subs = Vec::with_capacity(count);
        let mut at = subs_at;
        for (i, b) in blocks.iter().enumerate() {
            let n = b.sub_blocks as usize;
            let entries: Vec<(u32, u32)> = (0..n)
                .map(|k| {
                    let e = &toc[at + k * SUB_ENTRY_LEN..];
                    (format::get_u32(e, 0), format::get_u32(e, 4))
                })
                .collect();
            let from = subs.len();
            if n > 0 {
                let parsed = sub_blocks::parse(&entries, b.stored_size, b.size).map_err(|why| {
                    self.corrupt(format!("block {i}"), hd.toc_offset + at as u64, why)
                })?;
                subs.extend(parsed);
            }
            index.push(from..subs.len());
            at += n * SUB_ENTRY_LEN;
        }
        Ok(SubTable { index, subs })
    }
}
