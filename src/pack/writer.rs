//! The writer: cuts blobs into 64 KiB chunks and textures into tiles and
//! packed mips, compresses every block on its own, and writes the header,
//! the data region and the table of contents.

use super::format::{self, Header, ASSET_ENTRY_LEN, BLOCK_ENTRY_LEN, HEADER_LEN};
use super::texture::{full_mip_count, TextureLayout};
use super::{AssetId, BlockTransform, PackError, TextureFormat, MAX_TEXTURE_DIM, TILE_BYTES};
use crate::codec::Codec;
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A compressed block is kept only if it saves at least 1/16 (6.25 %) of the
/// block: `stored <= size - size / 16`. Below that the decode cost buys
/// almost no I/O, so the block is stored as `none`.
pub const STORE_RAW_UNLESS_SAVES_DIVISOR: usize = 16;

/// How the writer stores blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterOptions {
    /// The codec tried for every block (a block that saves too little is
    /// stored as `none`, see [`STORE_RAW_UNLESS_SAVES_DIVISOR`]).
    pub codec: Codec,
    /// The codec's level: zstd 1..=22 (0 = zstd's default); LZ4 0 for
    /// `lz4_flex`'s fast compressor, 1..=12 for liblz4's HC (needs the
    /// `lz4-hc` feature; `Codec::compress_into`). Ignored for `none`.
    pub level: i32,
    /// Threads compressing blocks (1 = the calling thread only). The output
    /// does not depend on it.
    pub threads: usize,
    /// With LZ4, cut each block larger than this many decoded bytes into
    /// independent sub-blocks of about this size (on whole tile rows, see
    /// `super::sub_blocks`): more blocks for a GPU to decode side by
    /// side. 0 (the default) keeps one LZ4 block per block.
    pub lz4_sub_block: u32,
    /// Try BCn conditioning (`super::condition`) on every compressed
    /// texture block, keeping a transform only where it makes the stored
    /// block smaller. A pack with any conditioned block is written as
    /// format version 2. Off by default in the library, so a pack built
    /// with default options reads with version 1 readers;
    /// `gpustream pack` turns it on.
    pub condition: bool,
}

/// Chained setters, one per field: `WriterOptions` is `#[non_exhaustive]`, so
/// code outside the crate starts from its default (or constructor) and
/// sets what it changes, and new fields never break it.
impl WriterOptions {
    /// Sets [`codec`](Self::codec).
    pub fn with_codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// Sets [`level`](Self::level).
    pub fn with_level(mut self, level: i32) -> Self {
        self.level = level;
        self
    }

    /// Sets [`threads`](Self::threads).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Sets [`lz4_sub_block`](Self::lz4_sub_block).
    pub fn with_lz4_sub_block(mut self, lz4_sub_block: u32) -> Self {
        self.lz4_sub_block = lz4_sub_block;
        self
    }

    /// Sets [`condition`](Self::condition).
    pub fn with_condition(mut self, condition: bool) -> Self {
        self.condition = condition;
        self
    }
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            codec: Codec::Lz4,
            level: 0,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            lz4_sub_block: 0,
            condition: false,
        }
    }
}

/// What a finished pack holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PackSummary {
    /// Number of assets.
    pub assets: u32,
    /// Number of blocks.
    pub blocks: u32,
    /// Bytes of uncompressed data.
    pub uncompressed: u64,
    /// Bytes of the data region (stored blocks).
    pub stored: u64,
    /// Bytes of the whole file.
    pub file_len: u64,
}

/// One compressed block (codec, stored bytes, sub-block lengths), or why
/// it could not be.
type Encoded = Result<EncodedBlock, PackError>;

/// One block as the writer stores it.
struct EncodedBlock {
    codec: Codec,
    transform: BlockTransform,
    stored: Vec<u8>,
    /// (stored, decoded) length of each sub-block; empty for one stream.
    subs: Vec<(u32, u32)>,
}

struct BlockEntry {
    stored_size: u32,
    size: u32,
    checksum: u32,
    codec: Codec,
    transform: BlockTransform,
    /// The level recorded in the entry (0 for stored blocks).
    level: u8,
    /// (stored, decoded) length of each sub-block; empty for one stream.
    subs: Vec<(u32, u32)>,
}

/// Writes a pack. Add assets in the order they should be read (the data
/// region follows it), then call [`PackWriter::finish`].
///
/// The pack is written to a temporary file beside `path` and renamed over
/// it by `finish`, so a pack that a runtime has open (and may have mapped:
/// `RuntimeConfig::map_cached_files`) is replaced, never cut short under
/// it; a writer dropped unfinished removes its temporary file and leaves
/// `path` as it was.
pub struct PackWriter {
    path: PathBuf,
    /// Where the bytes go until `finish` renames it to `path`.
    tmp: PathBuf,
    out: BufWriter<File>,
    opts: WriterOptions,
    blocks: Vec<BlockEntry>,
    assets: Vec<[u8; ASSET_ENTRY_LEN]>,
    names: Vec<u8>,
    seen: HashSet<String>,
    data_len: u64,
    uncompressed: u64,
}

impl Drop for PackWriter {
    fn drop(&mut self) {
        // After `finish` the temporary file has been renamed: nothing to
        // remove. Unfinished, it is removed; `path` is untouched.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

impl PackWriter {
    /// Starts a pack that `finish` puts at `path` (replacing any file there).
    pub fn create(path: impl AsRef<Path>, opts: WriterOptions) -> Result<PackWriter, PackError> {
        let path = path.as_ref().to_path_buf();
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        // Unique per writer, so two writers of one path never share it.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        name.push(format!(".{}-{n}.tmp", std::process::id()));
        let tmp = path.with_file_name(name);
        let file = File::create(&tmp).map_err(|e| PackError::io("create", &tmp, 0, 0, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        // The header is written last; the data region starts on a sector.
        out.write_all(&[0u8; format::DATA_ALIGN as usize])
            .map_err(|e| PackError::io("write", &path, 0, format::DATA_ALIGN, e))?;
        Ok(PackWriter {
            path,
            tmp,
            out,
            opts,
            blocks: Vec::new(),
            assets: Vec::new(),
            names: Vec::new(),
            seen: HashSet::new(),
            data_len: 0,
            uncompressed: 0,
        })
    }

    /// Sets the options for the assets added from now on: one pack may mix
    /// codecs, levels and sub-block sizes (blobs in GDeflate, tiles in LZ4).
    pub fn set_options(&mut self, opts: WriterOptions) {
        self.opts = opts;
    }

    /// Bytes of uncompressed data added so far.
    pub fn uncompressed_len(&self) -> u64 {
        self.uncompressed
    }

    /// Bytes of stored data written so far.
    pub fn stored_len(&self) -> u64 {
        self.data_len
    }

    fn check_name(&self, name: &str) -> Result<(), PackError> {
        let bad = |reason: &str| {
            Err(PackError::InvalidInput {
                asset: name.to_owned(),
                reason: reason.to_owned(),
            })
        };
        if name.is_empty() || name.len() > format::MAX_NAME_LEN {
            return bad("a name must be 1 to 4096 bytes long");
        }
        if self.seen.contains(name) {
            return bad("an asset of this name is already in the pack");
        }
        if self.assets.len() >= u32::MAX as usize {
            return bad("the pack already holds the most assets it can");
        }
        Ok(())
    }

    /// Adds a blob: `data` cut into 64 KiB blocks.
    pub fn add_blob(&mut self, name: &str, data: &[u8]) -> Result<AssetId, PackError> {
        self.check_name(name)?;
        let chunks: Vec<(&[u8], usize)> = data.chunks(TILE_BYTES).map(|c| (c, 4)).collect();
        let first = self.write_blocks(name, &chunks, None)?;
        Ok(self.push_asset(
            name,
            format::KIND_BLOB,
            0,
            0,
            0,
            0,
            data.len() as u64,
            first,
        ))
    }

    /// Adds a texture. `mips[m]` holds mip `m` (finest first) as rows of
    /// texel blocks, tightly packed, as wgpu and KTX2 lay them out. The
    /// writer cuts them into tiles and the packed tail.
    pub fn add_texture(
        &mut self,
        name: &str,
        format: TextureFormat,
        width: u32,
        height: u32,
        mips: &[impl AsRef<[u8]>],
    ) -> Result<AssetId, PackError> {
        self.check_name(name)?;
        let bad = |reason: String| PackError::InvalidInput {
            asset: name.to_owned(),
            reason,
        };
        if width == 0 || height == 0 || width > MAX_TEXTURE_DIM || height > MAX_TEXTURE_DIM {
            return Err(bad(format!(
                "size {width}x{height} is outside 1..={MAX_TEXTURE_DIM}"
            )));
        }
        let d = format.block_dim();
        if !width.is_multiple_of(d) || !height.is_multiple_of(d) {
            return Err(bad(format!(
                "{format} size {width}x{height} is not a multiple of {d}x{d}"
            )));
        }
        let full = full_mip_count(width, height);
        if mips.is_empty() || mips.len() > full as usize {
            return Err(bad(format!(
                "{} mips, a {width}x{height} texture has 1..={full}",
                mips.len()
            )));
        }
        let layout = TextureLayout::new(format, width, height, mips.len() as u8);
        for (m, data) in mips.iter().enumerate() {
            let (w, h) = super::mip_extent(width, height, m as u8);
            let want = format.data_size(w, h);
            if data.as_ref().len() as u64 != want {
                return Err(bad(format!(
                    "mip {m} ({w}x{h} {format}) has {} bytes, expected {want}",
                    data.as_ref().len()
                )));
            }
        }
        // Assemble every block's bytes in layout order: packed stream first,
        // then tiled mips coarse to fine, tiles row-major.
        let mut packed = Vec::with_capacity(layout.packed.len as usize);
        for pm in &layout.packed.mips {
            packed.extend_from_slice(mips[pm.mip as usize].as_ref());
        }
        let mut tiles: Vec<(Vec<u8>, usize)> =
            Vec::with_capacity((layout.block_count - layout.packed.blocks.end) as usize);
        for (m, grid) in layout.grids.iter().enumerate().rev() {
            let Some(g) = grid else { continue };
            let src = mips[m].as_ref();
            let mip_row = format.data_size(g.width, d) as usize;
            for ty in 0..g.tiles_y {
                for tx in 0..g.tiles_x {
                    let r = layout.region(m as u8, g, tx, ty);
                    let col = (r.x / d * format.bytes_per_block()) as usize;
                    let row0 = (r.y / d) as usize;
                    let mut tile = Vec::with_capacity(r.size() as usize);
                    for row in 0..r.rows as usize {
                        let at = (row0 + row) * mip_row + col;
                        tile.extend_from_slice(&src[at..at + r.bytes_per_row as usize]);
                    }
                    tiles.push((tile, r.bytes_per_row as usize));
                }
            }
        }
        // Sub-blocks of a tile start on its rows; of the packed stream, on
        // words.
        let mut chunks: Vec<(&[u8], usize)> = packed.chunks(TILE_BYTES).map(|c| (c, 4)).collect();
        chunks.extend(tiles.iter().map(|(t, row)| (t.as_slice(), *row)));
        debug_assert_eq!(chunks.len() as u32, layout.block_count);
        let first = self.write_blocks(name, &chunks, Some(format))?;
        Ok(self.push_asset(
            name,
            format::KIND_TEXTURE,
            format.id(),
            mips.len() as u8,
            width,
            height,
            layout.data_size,
            first,
        ))
    }

    /// Records where texture `id` came from (kind and transcode time) in
    /// its asset entry, for `info`. Blobs have no source.
    pub fn set_texture_source(
        &mut self,
        id: AssetId,
        source: super::TextureSource,
    ) -> Result<(), PackError> {
        let e = self
            .assets
            .get_mut(id.0 as usize)
            .filter(|e| e[8] == format::KIND_TEXTURE)
            .ok_or_else(|| PackError::Lookup {
                asset: format!("#{}", id.0),
                reason: "not a texture of this writer".into(),
            })?;
        e[format::asset::SOURCE_KIND] = source.kind.id();
        format::put_u32(e, format::asset::TRANSCODE_US, source.transcode_us);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn push_asset(
        &mut self,
        name: &str,
        kind: u8,
        format_id: u8,
        mips: u8,
        width: u32,
        height: u32,
        size: u64,
        first: u32,
    ) -> AssetId {
        let mut e = [0u8; ASSET_ENTRY_LEN];
        format::put_u32(&mut e, 0, self.names.len() as u32);
        format::put_u32(&mut e, 4, name.len() as u32);
        e[8] = kind;
        e[9] = format_id;
        e[10] = mips;
        format::put_u32(&mut e, 12, width);
        format::put_u32(&mut e, 16, height);
        format::put_u64(&mut e, 20, size);
        format::put_u32(&mut e, 28, first);
        format::put_u32(&mut e, 32, self.blocks.len() as u32 - first);
        self.names.extend_from_slice(name.as_bytes());
        self.seen.insert(name.to_owned());
        self.assets.push(e);
        self.uncompressed += size;
        AssetId(self.assets.len() as u32 - 1)
    }

    /// Compresses `chunks` (bytes, and the unit their sub-blocks are cut
    /// on) in parallel when allowed and appends them to the data region in
    /// order; returns the index of the first. `texture` is the format of a
    /// texture's blocks, whose BCn conditioning transforms are tried when
    /// the options ask for it.
    fn write_blocks(
        &mut self,
        asset: &str,
        chunks: &[(&[u8], usize)],
        texture: Option<TextureFormat>,
    ) -> Result<u32, PackError> {
        let first = self.blocks.len();
        if first + chunks.len() > u32::MAX as usize {
            return Err(PackError::InvalidInput {
                asset: asset.to_owned(),
                reason: "the pack would exceed 2^32 blocks".into(),
            });
        }
        let opts = self.opts;
        let transforms: &[BlockTransform] = match texture {
            Some(f) if opts.condition && opts.codec != Codec::None => BlockTransform::candidates(f),
            _ => &[],
        };
        let encode = |i: usize, (src, unit): (&[u8], usize)| -> Encoded {
            let raw = || EncodedBlock {
                codec: Codec::None,
                transform: BlockTransform::None,
                stored: src.to_vec(),
                subs: Vec::new(),
            };
            if opts.codec == Codec::None {
                return Ok(raw());
            }
            let err = |source| PackError::Encode {
                asset: asset.to_owned(),
                block: (first + i) as u32,
                source,
            };
            let lens = match (opts.codec, opts.lz4_sub_block) {
                (Codec::Lz4, sub) if sub > 0 => {
                    super::sub_blocks::cut(src.len(), unit, sub as usize)
                }
                _ => Vec::new(),
            };
            let compress = |bytes: &[u8]| -> Result<super::sub_blocks::Compressed, PackError> {
                if lens.len() >= 2 {
                    super::sub_blocks::compress(bytes, &lens, opts.level).map_err(err)
                } else {
                    Ok((
                        opts.codec.compress(bytes, opts.level).map_err(err)?,
                        Vec::new(),
                    ))
                }
            };
            let (stored, subs) = compress(src)?;
            let mut best = EncodedBlock {
                codec: opts.codec,
                transform: BlockTransform::None,
                stored,
                subs,
            };
            // Each transform is kept only if it beats everything before
            // it: a tie keeps the plain block, which costs nothing to read.
            let mut conditioned = vec![0u8; if transforms.is_empty() { 0 } else { src.len() }];
            for &t in transforms {
                t.apply(src, &mut conditioned);
                let (stored, subs) = compress(&conditioned)?;
                if stored.len() < best.stored.len() {
                    best = EncodedBlock {
                        codec: opts.codec,
                        transform: t,
                        stored,
                        subs,
                    };
                }
            }
            if best.stored.len() <= src.len() - src.len() / STORE_RAW_UNLESS_SAVES_DIVISOR {
                Ok(best)
            } else {
                Ok(raw())
            }
        };
        // Compress a bounded batch at a time so memory stays small for
        // large blobs; each thread takes an interleaved share.
        let threads = opts.threads.clamp(1, 16);
        for (batch_no, batch) in chunks.chunks(64 * threads).enumerate() {
            let base = batch_no * 64 * threads;
            let results: Vec<Encoded> = if threads == 1 || batch.len() < 2 {
                batch
                    .iter()
                    .enumerate()
                    .map(|(i, c)| encode(base + i, *c))
                    .collect()
            } else {
                let mut slots: Vec<Option<Encoded>> = (0..batch.len()).map(|_| None).collect();
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..threads)
                        .map(|t| {
                            let encode = &encode;
                            s.spawn(move || {
                                (t..batch.len())
                                    .step_by(threads)
                                    .map(|i| (i, encode(base + i, batch[i])))
                                    .collect::<Vec<_>>()
                            })
                        })
                        .collect();
                    for h in handles {
                        for (i, r) in h.join().expect("compression thread panicked") {
                            slots[i] = Some(r);
                        }
                    }
                });
                slots
                    .into_iter()
                    .map(|r| r.expect("every slot filled"))
                    .collect()
            };
            for ((src, _), r) in batch.iter().zip(results) {
                let EncodedBlock {
                    codec,
                    transform,
                    stored,
                    subs,
                } = r?;
                let offset = format::DATA_ALIGN + self.data_len;
                self.out.write_all(&stored).map_err(|e| {
                    PackError::io("write", &self.path, offset, stored.len() as u64, e)
                })?;
                self.blocks.push(BlockEntry {
                    stored_size: stored.len() as u32,
                    size: src.len() as u32,
                    checksum: crc32c::crc32c(&stored),
                    codec,
                    transform,
                    level: match codec {
                        Codec::None => 0,
                        _ => opts.level.clamp(0, u8::MAX as i32) as u8,
                    },
                    subs,
                });
                self.data_len += stored.len() as u64;
            }
        }
        Ok(first as u32)
    }

    /// Writes the table of contents and the header and closes the file.
    pub fn finish(mut self) -> Result<PackSummary, PackError> {
        let mut toc = Vec::with_capacity(
            self.blocks.len() * BLOCK_ENTRY_LEN
                + self.assets.len() * ASSET_ENTRY_LEN
                + self.names.len(),
        );
        for b in &self.blocks {
            let mut e = [0u8; BLOCK_ENTRY_LEN];
            format::put_u32(&mut e, 0, b.stored_size);
            format::put_u32(&mut e, 4, b.size);
            format::put_u32(&mut e, 8, b.checksum);
            e[12] = b.codec.id();
            e[format::block::SUB_BLOCKS] = b.subs.len() as u8;
            e[format::block::TRANSFORM] = b.transform.id();
            e[format::block::LEVEL] = b.level;
            toc.extend_from_slice(&e);
        }
        for a in &self.assets {
            toc.extend_from_slice(a);
        }
        for (stored, size) in self.blocks.iter().flat_map(|b| &b.subs) {
            toc.extend_from_slice(&stored.to_le_bytes());
            toc.extend_from_slice(&size.to_le_bytes());
        }
        toc.extend_from_slice(&self.names);
        if toc.len() as u64 > format::MAX_TOC_LEN {
            // Readers refuse it (they hold the table in memory whole).
            return Err(PackError::InvalidInput {
                asset: "(the table of contents)".into(),
                reason: format!(
                    "{} bytes, more than the {} a reader takes: split the pack",
                    toc.len(),
                    format::MAX_TOC_LEN
                ),
            });
        }
        let toc_offset = format::DATA_ALIGN + self.data_len;
        self.out.write_all(&toc).map_err(|e| {
            PackError::io(
                "write table of contents of",
                &self.path,
                toc_offset,
                toc.len() as u64,
                e,
            )
        })?;
        // Version 2 only where a block records something in it: a pack
        // without transforms or levels stays readable by version 1
        // readers, byte for byte as before.
        let v2 = self
            .blocks
            .iter()
            .any(|b| b.transform != BlockTransform::None || b.level != 0);
        let header = Header {
            version: if v2 {
                format::VERSION
            } else {
                format::VERSION_1
            },
            flags: 0,
            data_offset: format::DATA_ALIGN,
            data_len: self.data_len,
            toc_offset,
            toc_len: toc.len() as u64,
            asset_count: self.assets.len() as u32,
            block_count: self.blocks.len() as u32,
            toc_crc: crc32c::crc32c(&toc),
        };
        let path = self.path.clone();
        let werr = |e| PackError::io("write header of", &path, 0, HEADER_LEN as u64, e);
        self.out.seek(SeekFrom::Start(0)).map_err(werr)?;
        self.out.write_all(&header.encode()).map_err(werr)?;
        self.out.flush().map_err(werr)?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| PackError::io("rename the finished pack to", &self.path, 0, 0, e))?;
        Ok(PackSummary {
            assets: self.assets.len() as u32,
            blocks: self.blocks.len() as u32,
            uncompressed: self.uncompressed,
            stored: self.data_len,
            file_len: toc_offset + toc.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_pack_appears_at_its_path_only_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.gspk");
        std::fs::write(&path, b"the old file").unwrap();
        // Dropped unfinished: the old file stays, the temporary one goes.
        let mut w = PackWriter::create(&path, WriterOptions::default()).unwrap();
        w.add_blob("a", &[7u8; 1000]).unwrap();
        drop(w);
        assert_eq!(std::fs::read(&path).unwrap(), b"the old file");
        assert_eq!(names(dir.path()), ["p.gspk"]);
        // Finished: the pack replaces it.
        let mut w = PackWriter::create(&path, WriterOptions::default()).unwrap();
        w.add_blob("a", &[7u8; 1000]).unwrap();
        w.finish().unwrap();
        assert_eq!(names(dir.path()), ["p.gspk"]);
        let pack = crate::pack::Pack::open(&path).unwrap();
        assert!(pack.find("a").is_some());
    }
}
