//! Validating a pack's table of contents: `Pack::parse`, which checks the
//! header, every block entry (sizes, codecs, offsets inside the data
//! region, the sector rule), every asset entry and its name, texture
//! layouts, and the sub-block table, so that every later lookup on a
//! `Pack` is plain indexing. Split from `reader.rs`, which keeps the
//! lookups and the block readers.

use super::super::format::{self, Header, ASSET_ENTRY_LEN, BLOCK_ENTRY_LEN, HEADER_LEN};
use super::super::source::{TextureSource, TextureSourceKind};
use super::super::sub_blocks::{self, SubBlock, MAX_SUB_BLOCKS, SUB_ENTRY_LEN};
use super::super::texture::{full_mip_count, TextureLayout};
use super::super::{
    Asset, AssetId, AssetKind, Block, BlockTransform, PackError, TextureFormat, TextureInfo,
    MAX_TEXTURE_DIM, TILE_BYTES,
};
use super::{corrupt, Pack};
use crate::codec::{Codec, MAX_BLOCK_SIZE};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The sub-block table (after the asset entries, at `subs_at`): each
/// block's range of sub-blocks (empty for whole blocks), and the sub-blocks,
/// every one checked against its block. Both empty when no block is split.
#[allow(clippy::type_complexity)]
fn read_sub_blocks(
    p: &Path,
    toc: &[u8],
    hd: &Header,
    subs_at: usize,
    count: usize,
    blocks: &[Block],
) -> Result<(Vec<std::ops::Range<usize>>, Vec<SubBlock>), PackError> {
    if count == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    let end = subs_at + count * SUB_ENTRY_LEN;
    if end > toc.len() {
        return Err(corrupt(
            p,
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
            let parsed = sub_blocks::parse(&entries, b.stored_size, b.size)
                .map_err(|why| corrupt(p, format!("block {i}"), hd.toc_offset + at as u64, why))?;
            subs.extend(parsed);
        }
        index.push(from..subs.len());
        at += n * SUB_ENTRY_LEN;
    }
    Ok((index, subs))
}

/// For messages about a block found bad before the asset table is
/// validated: " of asset 'name'" when some asset entry's range claims block
/// `i` and its name reads, else nothing. Only runs on the error path.
fn owner_of(toc: &[u8], hd: &Header, i: usize) -> String {
    let assets_at = hd.block_count as usize * BLOCK_ENTRY_LEN;
    let names_at = assets_at + hd.asset_count as usize * ASSET_ENTRY_LEN;
    let names = toc.get(names_at..).unwrap_or(&[]);
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

impl Pack {
    pub(super) fn parse(
        path: PathBuf,
        file_len: u64,
        hb: &[u8; HEADER_LEN],
        read_toc: impl FnOnce(u64, usize) -> Result<Vec<u8>, PackError>,
    ) -> Result<Pack, PackError> {
        use format::header as h;
        if hb[..8] != format::MAGIC {
            return Err(PackError::BadMagic { path });
        }
        let hd = Header::decode(hb);
        if hd.version != format::VERSION && hd.version != format::VERSION_1 {
            return Err(PackError::UnsupportedVersion {
                path,
                version: hd.version,
            });
        }
        let stored = format::get_u32(hb, h::HEADER_CRC);
        let computed = crc32c::crc32c(&hb[..h::HEADER_CRC]);
        if stored != computed {
            return Err(PackError::MetaChecksum {
                path,
                what: "header",
                offset: 0,
                stored,
                computed,
            });
        }
        let p = path.as_path();
        if hd.flags != 0 {
            return Err(corrupt(
                p,
                "header",
                h::FLAGS as u64,
                format!("unknown flags {:#x}", hd.flags),
            ));
        }
        if hd.data_offset < format::DATA_ALIGN || !hd.data_offset.is_multiple_of(format::DATA_ALIGN)
        {
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
        // Every block stores at least one byte, so the data region bounds
        // the block count too.
        if hd.block_count as u64 > hd.data_len {
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
        // toc_len <= file_len, so this allocation is what the file justifies.
        let toc = read_toc(hd.toc_offset, hd.toc_len as usize)?;
        let computed = crc32c::crc32c(&toc);
        if computed != hd.toc_crc {
            return Err(PackError::MetaChecksum {
                path,
                what: "table of contents",
                offset: hd.toc_offset,
                stored: hd.toc_crc,
                computed,
            });
        }
        let mut blocks = Vec::with_capacity(hd.block_count as usize);
        let mut at = hd.data_offset;
        let mut sub_count = 0usize;
        for i in 0..hd.block_count as usize {
            let e = &toc[i * BLOCK_ENTRY_LEN..(i + 1) * BLOCK_ENTRY_LEN];
            let entry_at = hd.toc_offset + (i * BLOCK_ENTRY_LEN) as u64;
            let what = || format!("block {i}{}", owner_of(&toc, &hd, i));
            let stored_size = format::get_u32(e, 0);
            let size = format::get_u32(e, 4);
            let checksum = format::get_u32(e, 8);
            let codec = Codec::from_id(e[12])
                .map_err(|err| corrupt(p, what(), entry_at + 12, err.to_string()))?;
            // Bytes 14 and 15 are the transform and the level from
            // version 2 on; before, they were reserved.
            if let Some(k) = (format::block::TRANSFORM..BLOCK_ENTRY_LEN)
                .find(|&k| hd.version == format::VERSION_1 && e[k] != 0)
            {
                return Err(corrupt(
                    p,
                    what(),
                    entry_at + k as u64,
                    "reserved bytes are not zero",
                ));
            }
            let t = e[format::block::TRANSFORM];
            let transform = BlockTransform::from_id(t).ok_or_else(|| {
                corrupt(
                    p,
                    what(),
                    entry_at + format::block::TRANSFORM as u64,
                    format!("unknown transform id {t}"),
                )
            })?;
            if transform != BlockTransform::None && codec == Codec::None {
                return Err(corrupt(
                    p,
                    what(),
                    entry_at + format::block::TRANSFORM as u64,
                    format!("a stored (none) block with transform {}", transform.name()),
                ));
            }
            let subs = e[format::block::SUB_BLOCKS];
            if subs == 1 || subs as usize > MAX_SUB_BLOCKS || (subs > 0 && codec != Codec::Lz4) {
                return Err(corrupt(
                    p,
                    what(),
                    entry_at + format::block::SUB_BLOCKS as u64,
                    format!(
                        "{subs} sub-blocks of a {codec} block (0, or 2..={MAX_SUB_BLOCKS} for lz4)"
                    ),
                ));
            }
            sub_count += subs as usize;
            if size == 0 || size as usize > MAX_BLOCK_SIZE {
                return Err(corrupt(
                    p,
                    what(),
                    entry_at + 4,
                    format!("uncompressed size {size} is outside 1..={MAX_BLOCK_SIZE}"),
                ));
            }
            let bound = codec.max_stored_size(size as usize);
            if stored_size == 0 || stored_size as usize > bound {
                return Err(corrupt(
                    p,
                    what(),
                    entry_at,
                    format!("stored size {stored_size} is outside 1..={bound} ({codec} of {size} bytes)"),
                ));
            }
            if at + stored_size as u64 > hd.toc_offset {
                return Err(corrupt(
                    p,
                    what(),
                    entry_at,
                    format!(
                        "stored bytes at {at} (+{stored_size}) run past the data region's end {}",
                        hd.toc_offset
                    ),
                ));
            }
            blocks.push(Block {
                offset: at,
                stored_size,
                size,
                codec,
                checksum,
                asset: AssetId(u32::MAX),
                sub_blocks: subs,
                transform,
                level: e[format::block::LEVEL],
            });
            at += stored_size as u64;
        }
        if at != hd.toc_offset {
            return Err(corrupt(
                p,
                "table of contents",
                hd.toc_offset,
                format!(
                    "blocks cover {} bytes of a {}-byte data region",
                    at - hd.data_offset,
                    hd.data_len
                ),
            ));
        }

        let assets_at = hd.block_count as usize * BLOCK_ENTRY_LEN;
        let subs_at = assets_at + hd.asset_count as usize * ASSET_ENTRY_LEN;
        let (sub_index, sub_blocks) = read_sub_blocks(p, &toc, &hd, subs_at, sub_count, &blocks)?;
        let names_at = subs_at + sub_count * SUB_ENTRY_LEN;
        let names = &toc[names_at..];
        let mut assets = Vec::with_capacity(hd.asset_count as usize);
        let mut layouts = Vec::with_capacity(hd.asset_count as usize);
        let mut sources = Vec::with_capacity(hd.asset_count as usize);
        let mut by_name = HashMap::with_capacity(hd.asset_count as usize);
        let mut next_block = 0u32;
        let mut names_used = 0usize;
        for i in 0..hd.asset_count as usize {
            let e = &toc[assets_at + i * ASSET_ENTRY_LEN..assets_at + (i + 1) * ASSET_ENTRY_LEN];
            let entry_at = hd.toc_offset + (assets_at + i * ASSET_ENTRY_LEN) as u64;
            let name_off = format::get_u32(e, 0) as usize;
            let name_len = format::get_u32(e, 4) as usize;
            let idx_what = format!("asset #{i}");
            // Names lie back to back in asset order, so together they are
            // never longer than the name table (overlapping names would let
            // a small file allocate a name per entry).
            if name_off != names_used {
                return Err(corrupt(p, idx_what, entry_at, format!("name offset {name_off}, expected {names_used} (names are stored in asset order)")));
            }
            if name_len == 0 || name_len > format::MAX_NAME_LEN {
                return Err(corrupt(
                    p,
                    idx_what,
                    entry_at + 4,
                    format!(
                        "name length {name_len} is outside 1..={}",
                        format::MAX_NAME_LEN
                    ),
                ));
            }
            let name_bytes = name_off
                .checked_add(name_len)
                .and_then(|end| names.get(name_off..end))
                .ok_or_else(|| {
                    corrupt(
                        p,
                        &idx_what,
                        entry_at,
                        format!(
                            "name at {name_off} (+{name_len}) is outside the {}-byte name table",
                            names.len()
                        ),
                    )
                })?;
            let name = std::str::from_utf8(name_bytes)
                .map_err(|err| {
                    corrupt(p, &idx_what, entry_at, format!("name is not UTF-8: {err}"))
                })?
                .to_owned();
            names_used += name_len;
            let what = format!("asset '{name}'");
            let kind_id = e[8];
            let format_id = e[9];
            let mip_count = e[10];
            let width = format::get_u32(e, 12);
            let height = format::get_u32(e, 16);
            let size = format::get_u64(e, 20);
            let first = format::get_u32(e, 28);
            let count = format::get_u32(e, 32);
            // Source kind and transcode time: 0 in packs that predate them
            // and in blobs; an id this reader does not know is corrupt.
            let (source_id, transcode_us) = (
                e[format::asset::SOURCE_KIND],
                format::get_u32(e, format::asset::TRANSCODE_US),
            );
            let source = match (kind_id, source_id) {
                (_, 0) => None,
                (format::KIND_TEXTURE, id) => Some(TextureSource {
                    kind: TextureSourceKind::from_id(id).ok_or_else(|| {
                        corrupt(
                            p,
                            &what,
                            entry_at + format::asset::SOURCE_KIND as u64,
                            format!("unknown source kind {id}"),
                        )
                    })?,
                    transcode_us,
                }),
                (_, _) => {
                    return Err(corrupt(
                        p,
                        what,
                        entry_at + format::asset::SOURCE_KIND as u64,
                        "a blob has a source kind",
                    ));
                }
            };
            if source.is_none() && transcode_us != 0 {
                return Err(corrupt(
                    p,
                    what,
                    entry_at + format::asset::TRANSCODE_US as u64,
                    "a transcode time without a source kind",
                ));
            }
            if first != next_block {
                return Err(corrupt(p, what, entry_at + 28, format!("first block {first}, expected {next_block} (assets own consecutive block ranges)")));
            }
            let end = first
                .checked_add(count)
                .filter(|&end| end <= hd.block_count)
                .ok_or_else(|| {
                    corrupt(
                        p,
                        &what,
                        entry_at + 32,
                        format!(
                            "blocks {first} (+{count}) run past the {} blocks of the pack",
                            hd.block_count
                        ),
                    )
                })?;
            let id = AssetId(i as u32);
            let (kind, texture, layout) = match kind_id {
                format::KIND_BLOB => {
                    if format_id != 0 || mip_count != 0 || width != 0 || height != 0 {
                        return Err(corrupt(
                            p,
                            what,
                            entry_at + 9,
                            "a blob has texture fields set",
                        ));
                    }
                    let expected = size.div_ceil(TILE_BYTES as u64);
                    if expected != count as u64 {
                        return Err(corrupt(p, what, entry_at + 20, format!("a blob of {size} bytes needs {expected} blocks, the entry has {count}")));
                    }
                    for (k, b) in blocks[first as usize..end as usize].iter().enumerate() {
                        if b.transform != BlockTransform::None {
                            return Err(corrupt(
                                p,
                                format!("block {} ({what} chunk {k})", first as usize + k),
                                hd.toc_offset
                                    + ((first as usize + k) * BLOCK_ENTRY_LEN
                                        + format::block::TRANSFORM)
                                        as u64,
                                format!("a blob block with transform {}", b.transform.name()),
                            ));
                        }
                        let want = (size - k as u64 * TILE_BYTES as u64).min(TILE_BYTES as u64);
                        if b.size as u64 != want {
                            return Err(corrupt(
                                p,
                                format!("block {} ({what} chunk {k})", first as usize + k),
                                hd.toc_offset + ((first as usize + k) * BLOCK_ENTRY_LEN) as u64 + 4,
                                format!(
                                    "uncompressed size {}, the blob layout needs {want}",
                                    b.size
                                ),
                            ));
                        }
                    }
                    (AssetKind::Blob, None, None)
                }
                format::KIND_TEXTURE => {
                    let fmt = TextureFormat::from_id(format_id).ok_or_else(|| {
                        corrupt(
                            p,
                            &what,
                            entry_at + 9,
                            format!("unknown texture format id {format_id}"),
                        )
                    })?;
                    if width == 0
                        || height == 0
                        || width > MAX_TEXTURE_DIM
                        || height > MAX_TEXTURE_DIM
                    {
                        return Err(corrupt(
                            p,
                            what,
                            entry_at + 12,
                            format!("size {width}x{height} is outside 1..={MAX_TEXTURE_DIM}"),
                        ));
                    }
                    let d = fmt.block_dim();
                    if !width.is_multiple_of(d) || !height.is_multiple_of(d) {
                        return Err(corrupt(p, what, entry_at + 12, format!("{fmt} size {width}x{height} is not a multiple of its {d}x{d} blocks")));
                    }
                    let full = full_mip_count(width, height);
                    if mip_count == 0 || mip_count > full {
                        return Err(corrupt(
                            p,
                            what,
                            entry_at + 10,
                            format!("{mip_count} mips, a {width}x{height} texture has 1..={full}"),
                        ));
                    }
                    let layout = TextureLayout::new(fmt, width, height, mip_count);
                    if layout.block_count != count {
                        return Err(corrupt(
                            p,
                            what,
                            entry_at + 32,
                            format!(
                                "the tile layout needs {} blocks, the entry has {count}",
                                layout.block_count
                            ),
                        ));
                    }
                    if layout.data_size != size {
                        return Err(corrupt(
                            p,
                            what,
                            entry_at + 20,
                            format!(
                                "the mips hold {} bytes, the entry declares {size}",
                                layout.data_size
                            ),
                        ));
                    }
                    for rel in 0..count {
                        let want = layout.block_size(rel);
                        let bi = (first + rel) as usize;
                        let b = &blocks[bi];
                        if !b.transform.fits(fmt) {
                            return Err(corrupt(
                                p,
                                format!("block {bi} ({what})"),
                                hd.toc_offset
                                    + (bi * BLOCK_ENTRY_LEN + format::block::TRANSFORM) as u64,
                                format!(
                                    "transform {} does not fit {fmt} blocks of {} bytes",
                                    b.transform.name(),
                                    fmt.bytes_per_block()
                                ),
                            ));
                        }
                        if b.size != want {
                            return Err(corrupt(
                                p,
                                format!("block {bi} ({what})"),
                                hd.toc_offset + (bi * BLOCK_ENTRY_LEN) as u64 + 4,
                                format!(
                                    "uncompressed size {}, the tile layout needs {want}",
                                    b.size
                                ),
                            ));
                        }
                        // A tile's sub-blocks start on its rows, so a GPU
                        // decoder writes each to rows of its own.
                        if let (Some(row), Some(r)) = (layout.row_bytes(rel), sub_index.get(bi)) {
                            let subs = &sub_blocks[r.clone()];
                            if let Some(s) = subs.iter().find(|s| s.offset % row != 0) {
                                return Err(corrupt(
                                    p,
                                    format!("block {bi} ({what})"),
                                    hd.toc_offset + subs_at as u64,
                                    format!(
                                        "a sub-block starts at byte {} of a tile with {row}-byte rows",
                                        s.offset
                                    ),
                                ));
                            }
                        }
                    }
                    let info = TextureInfo {
                        format: fmt,
                        width,
                        height,
                        mip_count,
                    };
                    (AssetKind::Texture, Some(info), Some(layout))
                }
                other => {
                    return Err(corrupt(
                        p,
                        what,
                        entry_at + 8,
                        format!("unknown asset kind {other}"),
                    ))
                }
            };
            if by_name.insert(name.clone(), id).is_some() {
                return Err(corrupt(p, what, entry_at, "duplicate name"));
            }
            for b in &mut blocks[first as usize..end as usize] {
                b.asset = id;
            }
            assets.push(Asset {
                name,
                kind,
                size,
                blocks: first..end,
                texture,
            });
            layouts.push(layout);
            sources.push(source);
            next_block = end;
        }
        if names_used != names.len() {
            return Err(corrupt(
                p,
                "table of contents",
                hd.toc_offset + names_at as u64,
                format!(
                    "the name table has {} bytes, the names use {names_used}",
                    names.len()
                ),
            ));
        }
        if next_block != hd.block_count {
            return Err(corrupt(
                p,
                "table of contents",
                hd.toc_offset,
                format!("assets own {next_block} of {} blocks", hd.block_count),
            ));
        }
        Ok(Pack {
            path,
            file_len,
            data_offset: hd.data_offset,
            data_len: hd.data_len,
            blocks,
            assets,
            layouts,
            sources,
            by_name,
            sub_index,
            sub_blocks,
        })
    }
}
