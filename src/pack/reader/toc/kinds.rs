//! What an asset's kind asks of its entry and its blocks, checked once the
//! asset's name and block range are known: a blob is cut into tile-sized
//! chunks and never transformed; a texture has a known format, a size and
//! mip count that fit it, and blocks that follow its tile layout.

use super::super::super::format::{self, BLOCK_ENTRY_LEN};
use super::super::super::texture::{full_mip_count, TextureLayout};
use super::super::super::{
    Block, BlockTransform, PackError, TextureFormat, TextureInfo, MAX_TEXTURE_DIM, TILE_BYTES,
};
use super::assets::Entry;
use super::blocks::SubTable;
use super::Toc;

impl Toc<'_> {
    /// Checks a blob's entry (no texture fields, as many blocks as its size
    /// needs) and its blocks: untransformed, each `TILE_BYTES` long but the
    /// last.
    /// `end` is one past its last block, already checked against the
    /// pack's block count.
    pub(super) fn blob(&self, entry: &Entry, end: u32, blocks: &[Block]) -> Result<(), PackError> {
        let hd = &self.hd;
        let Entry {
            what,
            entry_at,
            format_id,
            mip_count,
            width,
            height,
            size,
            first,
            count,
        } = *entry;
        if format_id != 0 || mip_count != 0 || width != 0 || height != 0 {
            return Err(self.corrupt(what, entry_at + 9, "a blob has texture fields set"));
        }
        let expected = size.div_ceil(TILE_BYTES as u64);
        if expected != count as u64 {
            return Err(self.corrupt(
                what,
                entry_at + 20,
                format!("a blob of {size} bytes needs {expected} blocks, the entry has {count}"),
            ));
        }
        for (k, b) in blocks[first as usize..end as usize].iter().enumerate() {
            if b.transform != BlockTransform::None {
                return Err(self.corrupt(
                    format!("block {} ({what} chunk {k})", first as usize + k),
                    hd.toc_offset
                        + ((first as usize + k) * BLOCK_ENTRY_LEN + format::block::TRANSFORM)
                            as u64,
                    format!("a blob block with transform {}", b.transform.name()),
                ));
            }
            let want = (size - k as u64 * TILE_BYTES as u64).min(TILE_BYTES as u64);
            if b.size as u64 != want {
                return Err(self.corrupt(
                    format!("block {} ({what} chunk {k})", first as usize + k),
                    hd.toc_offset + ((first as usize + k) * BLOCK_ENTRY_LEN) as u64 + 4,
                    format!("uncompressed size {}, the blob layout needs {want}", b.size),
                ));
            }
        }
        Ok(())
    }

    /// Checks a texture's entry (format, size, mips, and the block count
    /// and byte size its tile layout gives), then its blocks against that
    /// layout. Returns what the pack keeps about the texture.
    pub(super) fn texture(
        &self,
        entry: &Entry,
        blocks: &[Block],
        subs: &SubTable,
    ) -> Result<(TextureInfo, TextureLayout), PackError> {
        let Entry {
            what,
            entry_at,
            format_id,
            mip_count,
            width,
            height,
            size,
            count,
            ..
        } = *entry;
        let fmt = TextureFormat::from_id(format_id).ok_or_else(|| {
            self.corrupt(
                what,
                entry_at + 9,
                format!("unknown texture format id {format_id}"),
            )
        })?;
        if width == 0 || height == 0 || width > MAX_TEXTURE_DIM || height > MAX_TEXTURE_DIM {
            return Err(self.corrupt(
                what,
                entry_at + 12,
                format!("size {width}x{height} is outside 1..={MAX_TEXTURE_DIM}"),
            ));
        }
        let d = fmt.block_dim();
        if !width.is_multiple_of(d) || !height.is_multiple_of(d) {
            return Err(self.corrupt(
                what,
                entry_at + 12,
                format!("{fmt} size {width}x{height} is not a multiple of its {d}x{d} blocks"),
            ));
        }
        let full = full_mip_count(width, height);
        if mip_count == 0 || mip_count > full {
            return Err(self.corrupt(
                what,
                entry_at + 10,
                format!("{mip_count} mips, a {width}x{height} texture has 1..={full}"),
            ));
        }
        let layout = TextureLayout::new(fmt, width, height, mip_count);
        if layout.block_count != count {
            return Err(self.corrupt(
                what,
                entry_at + 32,
                format!(
                    "the tile layout needs {} blocks, the entry has {count}",
                    layout.block_count
                ),
            ));
        }
        if layout.data_size != size {
            return Err(self.corrupt(
                what,
                entry_at + 20,
                format!(
                    "the mips hold {} bytes, the entry declares {size}",
                    layout.data_size
                ),
            ));
        }
        self.texture_blocks(entry, fmt, &layout, blocks, subs)?;
        let info = TextureInfo {
            format: fmt,
            width,
            height,
            mip_count,
        };
        Ok((info, layout))
    }

    /// Checks each of a texture's blocks against its tile layout: a
    /// transform that fits the format, the tile's size, and sub-blocks that
    /// start on the tile's rows.
    fn texture_blocks(
        &self,
        entry: &Entry,
        fmt: TextureFormat,
        layout: &TextureLayout,
        blocks: &[Block],
        subs: &SubTable,
    ) -> Result<(), PackError> {
        let hd = &self.hd;
        let (what, first, count) = (entry.what, entry.first, entry.count);
        for rel in 0..count {
            let want = layout.block_size(rel);
            let bi = (first + rel) as usize;
            let b = &blocks[bi];
            if !b.transform.fits(fmt) {
                return Err(self.corrupt(
                    format!("block {bi} ({what})"),
                    hd.toc_offset + (bi * BLOCK_ENTRY_LEN + format::block::TRANSFORM) as u64,
                    format!(
                        "transform {} does not fit {fmt} blocks of {} bytes",
                        b.transform.name(),
                        fmt.bytes_per_block()
                    ),
                ));
            }
            if b.size != want {
                return Err(self.corrupt(
                    format!("block {bi} ({what})"),
                    hd.toc_offset + (bi * BLOCK_ENTRY_LEN) as u64 + 4,
                    format!("uncompressed size {}, the tile layout needs {want}", b.size),
                ));
            }
            // A tile's sub-blocks start on its rows, so a GPU decoder
            // writes each to rows of its own.
            if let (Some(row), Some(r)) = (layout.row_bytes(rel), subs.index.get(bi)) {
                let tile_subs = &subs.subs[r.clone()];
                if let Some(s) = tile_subs.iter().find(|s| s.offset % row != 0) {
                    return Err(self.corrupt(
                        format!("block {bi} ({what})"),
                        hd.toc_offset + self.subs_at() as u64,
                        format!(
                            "a sub-block starts at byte {} of a tile with {row}-byte rows",
                            s.offset
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
