//! The asset step of parsing: every asset entry in order, its name, its
//! texture source, its range of blocks, and (through `kinds`) what its
//! kind asks of those blocks; then the cross-checks that the names fill
//! the name table and the assets own every block.

use super::super::super::format::{self, ASSET_ENTRY_LEN};
use super::super::super::source::{TextureSource, TextureSourceKind};
use super::super::super::texture::TextureLayout;
use super::super::super::{Asset, AssetId, AssetKind, Block, PackError};
use super::blocks::SubTable;
use super::Toc;
use std::collections::HashMap;

/// The asset table, parsed: one entry per asset in each vector, plus what
/// the cross-checks after the last asset need.
pub(super) struct Assets {
    pub(super) assets: Vec<Asset>,
    pub(super) layouts: Vec<Option<TextureLayout>>,
    pub(super) sources: Vec<Option<TextureSource>>,
    pub(super) by_name: HashMap<String, AssetId>,
    /// Bytes of the name table the names take.
    names_used: usize,
    /// One past the last block an asset owns.
    next_block: u32,
}

/// The fields of one asset entry that the kind checks read.
pub(super) struct Entry<'a> {
    /// "asset 'name'", for messages.
    pub(super) what: &'a str,
    /// Where the entry lies in the file.
    pub(super) entry_at: u64,
    pub(super) format_id: u8,
    pub(super) mip_count: u8,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) size: u64,
    pub(super) first: u32,
    pub(super) count: u32,
}

impl Toc<'_> {
    /// Reads and checks every asset entry in order. Each asset takes the
    /// next name of the name table (after the `sub_count` sub-block
    /// entries) and the next run of `blocks`, and marks those blocks as
    /// its own.
    pub(super) fn assets(
        &self,
        sub_count: usize,
        blocks: &mut [Block],
        subs: &SubTable,
    ) -> Result<Assets, PackError> {
        let hd = &self.hd;
        let assets_at = self.assets_at();
        let names = &self.bytes[self.names_at(sub_count)..];
        let n = hd.asset_count as usize;
        let mut out = Assets {
            assets: Vec::with_capacity(n),
            layouts: Vec::with_capacity(n),
            sources: Vec::with_capacity(n),
            by_name: HashMap::with_capacity(n),
            names_used: 0,
            next_block: 0,
        };
        for i in 0..n {
            let e =
                &self.bytes[assets_at + i * ASSET_ENTRY_LEN..assets_at + (i + 1) * ASSET_ENTRY_LEN];
            let entry_at = hd.toc_offset + (assets_at + i * ASSET_ENTRY_LEN) as u64;
            let name = self.name(i, e, entry_at, names, &mut out.names_used)?;
            let what = format!("asset '{name}'");
            let kind_id = e[8];
            let entry = Entry {
                what: &what,
                entry_at,
                format_id: e[9],
                mip_count: e[10],
                width: format::get_u32(e, 12),
                height: format::get_u32(e, 16),
                size: format::get_u64(e, 20),
                first: format::get_u32(e, 28),
                count: format::get_u32(e, 32),
            };
            let source = self.source(e, &entry, kind_id)?;
            let end = self.block_range(&entry, out.next_block)?;
            let id = AssetId(i as u32);
            let (kind, texture, layout) = match kind_id {
                format::KIND_BLOB => {
                    self.blob(&entry, end, blocks)?;
                    (AssetKind::Blob, None, None)
                }
                format::KIND_TEXTURE => {
                    let (info, layout) = self.texture(&entry, blocks, subs)?;
                    (AssetKind::Texture, Some(info), Some(layout))
                }
                other => {
                    return Err(self.corrupt(
                        &what,
                        entry_at + 8,
                        format!("unknown asset kind {other}"),
                    ))
                }
            };
            if out.by_name.insert(name.clone(), id).is_some() {
                return Err(self.corrupt(&what, entry_at, "duplicate name"));
            }
            let first = entry.first;
            for b in &mut blocks[first as usize..end as usize] {
                b.asset = id;
            }
            out.assets.push(Asset {
                name,
                kind,
                size: entry.size,
                blocks: first..end,
                texture,
            });
            out.layouts.push(layout);
            out.sources.push(source);
            out.next_block = end;
        }
        Ok(out)
    }

    /// The name of asset `i` (entry `e`, at `entry_at` in the file), which
    /// must start where the previous one ended (`names_used` bytes into
    /// `names`), be 1..=`MAX_NAME_LEN` bytes inside the table, and be
    /// UTF-8. Advances `names_used` past it.
    fn name(
        &self,
        i: usize,
        e: &[u8],
        entry_at: u64,
        names: &[u8],
        names_used: &mut usize,
    ) -> Result<String, PackError> {
        let name_off = format::get_u32(e, 0) as usize;
        let name_len = format::get_u32(e, 4) as usize;
        let idx_what = format!("asset #{i}");
        // Names lie back to back in asset order, so together they are
        // never longer than the name table (overlapping names would let
        // a small file allocate a name per entry).
        if name_off != *names_used {
            return Err(self.corrupt(
                idx_what,
                entry_at,
                format!(
                    "name offset {name_off}, expected {} (names are stored in asset order)",
                    *names_used
                ),
            ));
        }
        if name_len == 0 || name_len > format::MAX_NAME_LEN {
            return Err(self.corrupt(
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
                self.corrupt(
                    &idx_what,
                    entry_at,
                    format!(
                        "name at {name_off} (+{name_len}) is outside the {}-byte name table",
                        names.len()
                    ),
                )
            })?;
        let name = std::str::from_utf8(name_bytes)
            .map_err(|err| self.corrupt(&idx_what, entry_at, format!("name is not UTF-8: {err}")))?
            .to_owned();
        *names_used += name_len;
        Ok(name)
    }

    /// The texture source of an asset: its kind and transcode time, both 0
    /// in packs that predate them and in blobs. An id this reader does not
    /// know is corrupt, and so is a transcode time without a source.
    fn source(
        &self,
        e: &[u8],
        entry: &Entry,
        kind_id: u8,
    ) -> Result<Option<TextureSource>, PackError> {
        let (what, entry_at) = (entry.what, entry.entry_at);
        let (source_id, transcode_us) = (
            e[format::asset::SOURCE_KIND],
            format::get_u32(e, format::asset::TRANSCODE_US),
        );
        let source = match (kind_id, source_id) {
            (_, 0) => None,
            (format::KIND_TEXTURE, id) => Some(TextureSource {
                kind: TextureSourceKind::from_id(id).ok_or_else(|| {
                    self.corrupt(
                        what,
                        entry_at + format::asset::SOURCE_KIND as u64,
                        format!("unknown source kind {id}"),
                    )
                })?,
                transcode_us,
            }),
            (_, _) => {
                return Err(self.corrupt(
                    what,
                    entry_at + format::asset::SOURCE_KIND as u64,
                    "a blob has a source kind",
                ));
            }
        };
        if source.is_none() && transcode_us != 0 {
            return Err(self.corrupt(
                what,
                entry_at + format::asset::TRANSCODE_US as u64,
                "a transcode time without a source kind",
            ));
        }
        Ok(source)
    }

    /// Checks that the asset's blocks start at `next_block` (assets own
    /// consecutive runs, so together they cover each block once) and stay
    /// inside the pack; returns one past its last block.
    fn block_range(&self, entry: &Entry, next_block: u32) -> Result<u32, PackError> {
        let (what, entry_at) = (entry.what, entry.entry_at);
        let (first, count) = (entry.first, entry.count);
        if first != next_block {
            return Err(self.corrupt(
                what,
                entry_at + 28,
                format!(
                    "first block {first}, expected {next_block} (assets own consecutive block ranges)"
                ),
            ));
        }
        first
            .checked_add(count)
            .filter(|&end| end <= self.hd.block_count)
            .ok_or_else(|| {
                self.corrupt(
                    what,
                    entry_at + 32,
                    format!(
                        "blocks {first} (+{count}) run past the {} blocks of the pack",
                        self.hd.block_count
                    ),
                )
            })
    }

    /// The cross-checks after the last asset: the names use the whole name
    /// table (after the `sub_count` sub-block entries), and the assets own
    /// every block.
    pub(super) fn check_all_used(
        &self,
        sub_count: usize,
        assets: &Assets,
    ) -> Result<(), PackError> {
        let hd = &self.hd;
        let names_at = self.names_at(sub_count);
        let names_len = self.bytes[names_at..].len();
        if assets.names_used != names_len {
            return Err(self.corrupt(
                "table of contents",
                hd.toc_offset + names_at as u64,
                format!(
                    "the name table has {names_len} bytes, the names use {}",
                    assets.names_used
                ),
            ));
        }
        if assets.next_block != hd.block_count {
            return Err(self.corrupt(
                "table of contents",
                hd.toc_offset,
                format!(
                    "assets own {} of {} blocks",
                    assets.next_block, hd.block_count
                ),
            ));
        }
        Ok(())
    }
}
