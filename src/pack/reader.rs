//! The untrusted reader: `Pack::open` validates the header and the table of
//! contents completely, so every later lookup is plain indexing.

use super::format::{self, Header, ASSET_ENTRY_LEN, BLOCK_ENTRY_LEN, HEADER_LEN};
use super::source::{TextureSource, TextureSourceKind};
use super::sub_blocks::{self, SubBlock, MAX_SUB_BLOCKS, SUB_ENTRY_LEN};
use super::texture::{full_mip_count, TextureLayout};
use super::{
    Asset, AssetId, AssetKind, Block, BlockId, PackError, PackedMips, TextureFormat, TextureInfo,
    TileRegion, MAX_TEXTURE_DIM, TILE_BYTES,
};
use crate::codec::{Codec, MAX_BLOCK_SIZE};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// An opened pack: its validated table of contents. `Pack` holds no open
/// file; the I/O layer opens the file its own way (O_DIRECT), and the helper
/// readers here take a `&File`.
#[derive(Debug, Clone)]
pub struct Pack {
    path: PathBuf,
    file_len: u64,
    data_offset: u64,
    data_len: u64,
    blocks: Vec<Block>,
    assets: Vec<Asset>,
    layouts: Vec<Option<TextureLayout>>,
    sources: Vec<Option<TextureSource>>,
    by_name: HashMap<String, AssetId>,
    /// Per block, its range of `sub_blocks`; both empty when no block is
    /// split.
    sub_index: Vec<std::ops::Range<usize>>,
    sub_blocks: Vec<SubBlock>,
}

fn corrupt(
    path: &Path,
    what: impl Into<String>,
    offset: u64,
    reason: impl Into<String>,
) -> PackError {
    PackError::Corrupt {
        path: path.to_path_buf(),
        what: what.into(),
        offset,
        reason: reason.into(),
    }
}

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
    /// Opens a pack and validates its header and table of contents (never
    /// the data region: block checksums are checked as blocks are read).
    pub fn open(path: impl AsRef<Path>) -> Result<Pack, PackError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| PackError::io("open", path, 0, 0, e))?;
        let file_len = file
            .metadata()
            .map_err(|e| PackError::io("stat", path, 0, 0, e))?
            .len();
        if file_len < HEADER_LEN as u64 {
            return Err(corrupt(
                path,
                "header",
                0,
                format!("file is {file_len} bytes, shorter than the {HEADER_LEN}-byte header"),
            ));
        }
        let mut header = [0u8; HEADER_LEN];
        file.read_exact_at(&mut header, 0)
            .map_err(|e| PackError::io("read header of", path, 0, HEADER_LEN as u64, e))?;
        Pack::parse(path.to_path_buf(), file_len, &header, |offset, len| {
            let mut toc = vec![0u8; len];
            file.read_exact_at(&mut toc, offset).map_err(|e| {
                PackError::io("read table of contents of", path, offset, len as u64, e)
            })?;
            Ok(toc)
        })
    }

    /// Parses a whole pack held in memory (for tests and fuzzing); `label`
    /// stands in for the path in errors.
    pub fn from_bytes(label: impl Into<PathBuf>, bytes: &[u8]) -> Result<Pack, PackError> {
        let path = label.into();
        let Some(header) = bytes.get(..HEADER_LEN) else {
            return Err(corrupt(
                &path,
                "header",
                0,
                format!(
                    "file is {} bytes, shorter than the {HEADER_LEN}-byte header",
                    bytes.len()
                ),
            ));
        };
        let header: &[u8; HEADER_LEN] = header.try_into().expect("sliced to HEADER_LEN");
        let p = path.clone();
        Pack::parse(path, bytes.len() as u64, header, |offset, len| {
            // parse() has checked offset + len <= file length.
            bytes
                .get(offset as usize..offset as usize + len)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| corrupt(&p, "table of contents", offset, "out of bounds"))
        })
    }

    fn parse(
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
        if hd.version != format::VERSION {
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
            if e[14..16] != [0, 0] {
                return Err(corrupt(
                    p,
                    what(),
                    entry_at + 14,
                    "reserved bytes are not zero",
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

    /// The independent LZ4 sub-blocks block `id` is stored as, in order;
    /// empty for a block stored as one stream (and for an id out of range).
    pub fn sub_blocks(&self, id: BlockId) -> &[SubBlock] {
        match self.sub_index.get(id.0 as usize) {
            Some(r) => &self.sub_blocks[r.clone()],
            None => &[],
        }
    }

    /// The file the pack was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length in bytes.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Where the data region starts (a multiple of 4 KiB).
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Bytes of the data region (all stored blocks).
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Every block, in file order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// One block.
    pub fn block(&self, id: BlockId) -> Result<&Block, PackError> {
        self.blocks
            .get(id.0 as usize)
            .ok_or_else(|| PackError::Lookup {
                asset: "?".into(),
                reason: format!(
                    "block {} does not exist (the pack has {})",
                    id.0,
                    self.blocks.len()
                ),
            })
    }

    /// Every asset, in table-of-contents order.
    pub fn assets(&self) -> &[Asset] {
        &self.assets
    }

    /// The asset with this name.
    pub fn find(&self, name: &str) -> Option<AssetId> {
        self.by_name.get(name).copied()
    }

    /// An asset by id. Ids come from this pack ([`Pack::find`], [`Block::asset`]);
    /// an id from elsewhere that is out of range panics, like slice indexing.
    pub fn asset(&self, id: AssetId) -> &Asset {
        &self.assets[id.0 as usize]
    }

    /// An asset by id, or `None` when out of range.
    pub fn get_asset(&self, id: AssetId) -> Option<&Asset> {
        self.assets.get(id.0 as usize)
    }

    /// Where a texture came from and what transcoding it cost, as the
    /// packer recorded it; `None` for blobs, for packs written before the
    /// field existed, and for an `id` out of range.
    pub fn texture_source(&self, id: AssetId) -> Option<TextureSource> {
        self.sources.get(id.0 as usize).copied().flatten()
    }

    fn texture(&self, id: AssetId) -> Result<(&Asset, &TextureLayout), PackError> {
        let asset = self.get_asset(id).ok_or_else(|| PackError::Lookup {
            asset: format!("#{}", id.0),
            reason: format!("no such asset (the pack has {})", self.assets.len()),
        })?;
        match &self.layouts[id.0 as usize] {
            Some(layout) => Ok((asset, layout)),
            None => Err(PackError::Lookup {
                asset: asset.name.clone(),
                reason: "is a blob, not a texture".into(),
            }),
        }
    }

    /// The block holding tile (`x`, `y`) of mip `mip`, in constant time.
    /// Mips in the packed tail have no tiles: see [`Pack::packed_mips`].
    pub fn tile(&self, id: AssetId, mip: u8, x: u32, y: u32) -> Result<BlockId, PackError> {
        self.tile_region(id, mip, x, y).map(|r| r.block)
    }

    /// Where tile (`x`, `y`) of mip `mip` goes in the texture and how its
    /// bytes are laid out.
    pub fn tile_region(
        &self,
        id: AssetId,
        mip: u8,
        x: u32,
        y: u32,
    ) -> Result<TileRegion, PackError> {
        let (asset, layout) = self.texture(id)?;
        let lookup = |reason: String| PackError::Lookup {
            asset: asset.name.clone(),
            reason,
        };
        let grid = match layout.grids.get(mip as usize) {
            None => {
                return Err(lookup(format!(
                    "mip {mip} does not exist ({} mips)",
                    layout.grids.len()
                )))
            }
            Some(None) => {
                return Err(lookup(format!(
                    "mip {mip} is in the packed mip tail, it has no tiles"
                )))
            }
            Some(Some(g)) => g,
        };
        if x >= grid.tiles_x || y >= grid.tiles_y {
            return Err(lookup(format!(
                "tile ({x},{y}) is outside mip {mip}'s {}x{} tiles",
                grid.tiles_x, grid.tiles_y
            )));
        }
        let mut r = layout.region(mip, grid, x, y);
        r.block.0 += asset.blocks.start;
        Ok(r)
    }

    /// The tile grid of a mip: `Some((tiles_x, tiles_y))`, or `None` when the
    /// mip is in the packed tail.
    pub fn tile_grid(&self, id: AssetId, mip: u8) -> Result<Option<(u32, u32)>, PackError> {
        let (asset, layout) = self.texture(id)?;
        match layout.grids.get(mip as usize) {
            None => Err(PackError::Lookup {
                asset: asset.name.clone(),
                reason: format!("mip {mip} does not exist ({} mips)", layout.grids.len()),
            }),
            Some(g) => Ok(g.map(|g| (g.tiles_x, g.tiles_y))),
        }
    }

    /// The packed mip tail of a texture: its blocks (absolute indices) and
    /// the place of each mip in the decoded stream.
    pub fn packed_mips(&self, id: AssetId) -> Result<PackedMips, PackError> {
        let (asset, layout) = self.texture(id)?;
        let mut p = layout.packed.clone();
        p.blocks = p.blocks.start + asset.blocks.start..p.blocks.end + asset.blocks.start;
        Ok(p)
    }

    /// Says what a block holds, for messages: "asset 'rock' mip 2 tile
    /// (3,1)", "asset 'rock' packed mips 5..9 part 0", "asset 'mesh' chunk 5".
    pub fn describe_block(&self, id: BlockId) -> String {
        let Some(block) = self.blocks.get(id.0 as usize) else {
            return format!("block {} (out of range)", id.0);
        };
        let asset = &self.assets[block.asset.0 as usize];
        let rel = id.0 - asset.blocks.start;
        match &self.layouts[block.asset.0 as usize] {
            None => format!("asset '{}' chunk {rel}", asset.name),
            Some(layout) => match layout.locate(rel) {
                Some((mip, x, y)) => format!("asset '{}' mip {mip} tile ({x},{y})", asset.name),
                None => {
                    let first = layout.packed.mips.first().map_or(0, |m| m.mip);
                    let last = layout.packed.mips.last().map_or(0, |m| m.mip);
                    format!(
                        "asset '{}' packed mips {first}..={last} part {rel}",
                        asset.name
                    )
                }
            },
        }
    }

    /// Verifies a block's checksum over `stored` (its stored bytes) and
    /// decodes it into `out`, which must be exactly the block's size.
    pub fn check_block(&self, id: BlockId, stored: &[u8], out: &mut [u8]) -> Result<(), PackError> {
        let b = *self.block(id)?;
        let len_err = |what, expected: usize, got: usize| PackError::BufferLength {
            at: self.describe_block(id),
            block: id.0,
            offset: b.offset,
            what,
            expected,
            got,
        };
        if stored.len() != b.stored_size as usize {
            return Err(len_err("stored", b.stored_size as usize, stored.len()));
        }
        if out.len() != b.size as usize {
            return Err(len_err("output", b.size as usize, out.len()));
        }
        let computed = crc32c::crc32c(stored);
        if computed != b.checksum {
            return Err(PackError::BlockChecksum {
                at: self.describe_block(id),
                block: id.0,
                offset: b.offset,
                stored: b.checksum,
                computed,
            });
        }
        let subs = self.sub_blocks(id);
        let decoded = if subs.is_empty() {
            b.codec.decompress_into(stored, out)
        } else {
            sub_blocks::decode_into(stored, subs, out)
        };
        decoded.map_err(|source| PackError::BlockDecode {
            at: self.describe_block(id),
            block: id.0,
            offset: b.offset,
            source,
        })
    }

    /// Opens the pack's file for the helper readers below.
    pub fn open_file(&self) -> Result<File, PackError> {
        File::open(&self.path).map_err(|e| PackError::io("open", &self.path, 0, 0, e))
    }

    /// Reads a block's stored bytes with `pread` into `stored` (resized).
    pub fn read_stored(
        &self,
        file: &File,
        id: BlockId,
        stored: &mut Vec<u8>,
    ) -> Result<(), PackError> {
        let b = *self.block(id)?;
        stored.resize(b.stored_size as usize, 0);
        file.read_exact_at(stored, b.offset).map_err(|e| {
            PackError::io(
                "read block of",
                &self.path,
                b.offset,
                b.stored_size as u64,
                e,
            )
        })
    }

    /// Reads, checks and decodes one block into `out` (its size), using
    /// `scratch` for the stored bytes.
    pub fn read_block(
        &self,
        file: &File,
        id: BlockId,
        scratch: &mut Vec<u8>,
        out: &mut [u8],
    ) -> Result<(), PackError> {
        self.read_stored(file, id, scratch)?;
        self.check_block(id, scratch, out)
    }

    /// Reads a whole asset's decoded data: a blob's bytes, or a texture's
    /// blocks in pack order. The output grows block by block as blocks
    /// check out, so memory follows data that really decoded, not sizes the
    /// file merely declares.
    fn read_blocks(&self, file: &File, asset: &Asset) -> Result<Vec<u8>, PackError> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        let mut block = vec![0u8; MAX_BLOCK_SIZE];
        for i in asset.blocks.clone() {
            let size = self.blocks[i as usize].size as usize;
            self.read_block(file, BlockId(i), &mut scratch, &mut block[..size])?;
            out.extend_from_slice(&block[..size]);
        }
        Ok(out)
    }

    /// Reads a blob's bytes.
    pub fn read_blob(&self, id: AssetId) -> Result<Vec<u8>, PackError> {
        let asset = self.get_asset(id).ok_or_else(|| PackError::Lookup {
            asset: format!("#{}", id.0),
            reason: "no such asset".into(),
        })?;
        if asset.kind != AssetKind::Blob {
            return Err(PackError::Lookup {
                asset: asset.name.clone(),
                reason: "is a texture, not a blob".into(),
            });
        }
        self.read_blocks(&self.open_file()?, asset)
    }

    /// Reads a texture's mips (finest first), each as rows of texel blocks,
    /// tightly packed: the tiles reassembled.
    pub fn read_texture_mips(&self, id: AssetId) -> Result<Vec<Vec<u8>>, PackError> {
        let (asset, layout) = self.texture(id)?;
        let raw = self.read_blocks(&self.open_file()?, asset)?;
        let fmt = layout.format;
        let info = asset.texture.expect("textures have info");
        let mut mips: Vec<Vec<u8>> = (0..info.mip_count)
            .map(|m| {
                let (w, h) = info.mip_extent(m);
                vec![0u8; fmt.data_size(w, h) as usize]
            })
            .collect();
        for pm in &layout.packed.mips {
            let start = pm.offset as usize;
            mips[pm.mip as usize].copy_from_slice(&raw[start..start + pm.size() as usize]);
        }
        // Tile data starts after the packed stream, in block order.
        let block_start = |rel: u32| -> usize {
            self.blocks[asset.blocks.start as usize..(asset.blocks.start + rel) as usize]
                .iter()
                .map(|b| b.size as usize)
                .sum()
        };
        for (m, grid) in layout.grids.iter().enumerate() {
            let Some(g) = grid else { continue };
            let mip_row = fmt.data_size(g.width, fmt.block_dim()) as usize;
            let mut at = block_start(g.first);
            for ty in 0..g.tiles_y {
                for tx in 0..g.tiles_x {
                    let r = layout.region(m as u8, g, tx, ty);
                    let d = fmt.block_dim();
                    let col = (r.x / d * fmt.bytes_per_block()) as usize;
                    let row0 = (r.y / d) as usize;
                    for row in 0..r.rows as usize {
                        let dst = (row0 + row) * mip_row + col;
                        let n = r.bytes_per_row as usize;
                        mips[m][dst..dst + n].copy_from_slice(&raw[at..at + n]);
                        at += n;
                    }
                }
            }
        }
        Ok(mips)
    }

    /// Reads every block, checks its checksum and decodes it; returns every
    /// bad block's error (empty when the pack is sound). `progress` is
    /// called with the number of blocks done.
    pub fn verify(&self, mut progress: impl FnMut(usize)) -> Result<Vec<PackError>, PackError> {
        let file = self.open_file()?;
        let mut scratch = Vec::new();
        let mut out = vec![0u8; MAX_BLOCK_SIZE];
        let mut bad = Vec::new();
        for (i, b) in self.blocks.iter().enumerate() {
            match self.read_block(
                &file,
                BlockId(i as u32),
                &mut scratch,
                &mut out[..b.size as usize],
            ) {
                Ok(()) => {}
                Err(e @ PackError::Io { .. }) => return Err(e),
                Err(e) => bad.push(e),
            }
            progress(i + 1);
        }
        Ok(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Pack>();
    }
}
