//! The untrusted reader: `Pack::open` validates the header and the table of
//! contents completely, so every later lookup is plain indexing.

use super::format::HEADER_LEN;
use super::source::TextureSource;
use super::stripe::{MemberHeader, MEMBER_HEADER_LEN};
use super::sub_blocks::{self, SubBlock};
use super::texture::TextureLayout;
use super::{
    Asset, AssetId, AssetKind, Block, BlockId, BlockTransform, Member, PackError, PackedMips,
    TileRegion,
};
use crate::codec::MAX_BLOCK_SIZE;
use std::collections::HashMap;
use std::fs::File;
#[cfg(unix)]
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
#[cfg(windows)]
use windows_read::ReadExactAt as _;

/// `read_exact_at` on Windows, where std has only the single positioned
/// read `seek_read` (unix's `FileExt::read_exact_at` is std's own).
#[cfg(windows)]
mod windows_read {
    use std::os::windows::fs::FileExt;

    pub(super) trait ReadExactAt {
        /// Fills `buf` from `offset` on, or fails (`UnexpectedEof` where
        /// the file ends first), as unix's `read_exact_at` does.
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    }

    impl ReadExactAt for std::fs::File {
        fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
            while !buf.is_empty() {
                match self.seek_read(buf, offset) {
                    Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    Ok(n) => {
                        buf = &mut buf[n..];
                        offset += n as u64;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
    }
}

thread_local! {
    /// Where a conditioned block is decoded before its transform is undone
    /// into the caller's buffer: one block's worth per decoding thread.
    static CONDITIONED: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(vec![0u8; MAX_BLOCK_SIZE]);
}

mod toc;

/// An opened pack: its validated table of contents, and the descriptors of
/// the files it checked (the head and any members; see `member_file.rs`).
/// The I/O layer reopens those descriptors its own way (O_DIRECT), and the
/// helper readers here read through clones of them.
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
    /// The files the blocks lie in: this one, then a striped pack's other
    /// members.
    members: Vec<Member>,
    /// A striped pack's stripe unit and pack id.
    stripe: Option<(u64, u64)>,
    /// The files checked when the pack was opened, one per member; empty
    /// for a pack parsed from memory or from a remote reader.
    files: Vec<std::sync::Arc<File>>,
}

/// A pack's files, opened for [`Pack`]'s helper readers: the pack itself,
/// then, for a striped pack, each other member.
#[derive(Debug)]
pub struct PackFiles {
    files: Vec<File>,
}

impl PackFiles {
    /// Fills `buf` from `offset` of member `member`'s file.
    pub fn read_at(&self, member: usize, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        match self.files.get(member) {
            Some(f) => f.read_exact_at(buf, offset),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("member {member} of {} files", self.files.len()),
            )),
        }
    }
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

impl Pack {
    /// Opens a pack and validates its header and table of contents (never
    /// the data region: block checksums are checked as blocks are read).
    pub fn open(path: impl AsRef<Path>) -> Result<Pack, PackError> {
        let path = path.as_ref();
        // A FIFO or a device is refused before any read (`member_file.rs`).
        let (file, file_len) = super::member_file::open_regular(path, true)
            .map_err(|e| PackError::io("open", path, 0, 0, e))?;
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
        let pack = Pack::parse(path.to_path_buf(), file_len, &header, |offset, len| {
            let mut toc = vec![0u8; len];
            file.read_exact_at(&mut toc, offset).map_err(|e| {
                PackError::io("read table of contents of", path, offset, len as u64, e)
            })?;
            Ok(toc)
        })?;
        let mut pack = pack;
        let mut files = vec![std::sync::Arc::new(file)];
        for k in 1..pack.members.len() {
            files.push(std::sync::Arc::new(pack.check_member(k)?));
        }
        pack.files = files;
        Ok(pack)
    }

    /// Validates a pack held elsewhere (object storage) from its header
    /// and a reader of its bytes, which is asked for the stripe section and
    /// the table of contents once the header has bounded them. `path`
    /// names it in errors, and is the file its blocks will be read from.
    #[cfg(all(feature = "remote", target_os = "linux"))]
    pub(crate) fn from_reader(
        path: PathBuf,
        file_len: u64,
        header: &[u8; HEADER_LEN],
        read: impl FnMut(u64, usize) -> Result<Vec<u8>, PackError>,
    ) -> Result<Pack, PackError> {
        Pack::parse(path, file_len, header, read)
    }

    /// Opens member `k`'s file and checks that it is the member the head
    /// names (`member_file.rs`): a regular file, not reached through a
    /// symlink, exactly as long as the data region the head declares, whose
    /// header carries this pack's id, the member's index and count, and
    /// that length. Returns the descriptor checked.
    ///
    /// The head is untrusted, so the error says only that the path was not
    /// found or is not this member: never the file's type, its length or
    /// its header's fields, which would tell a hostile head about files it
    /// has no business reading.
    fn check_member(&self, k: usize) -> Result<File, PackError> {
        let m = &self.members[k];
        let fail = |reason: String| PackError::Member {
            pack: self.path.clone(),
            index: k,
            member: m.path.clone(),
            reason,
        };
        let count = self.members.len();
        let not_member = || {
            fail(format!(
                "is not member {k} of {count} of this pack: a member is a regular file (not a symlink) of {} bytes starting with this pack's member header",
                m.data_offset + m.data_len
            ))
        };
        let (file, len) = match super::member_file::open_regular(&m.path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(fail("not found".into()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(fail("permission denied".into()))
            }
            Err(_) => return Err(not_member()),
        };
        if len != m.data_offset + m.data_len {
            return Err(not_member());
        }
        let mut b = [0u8; MEMBER_HEADER_LEN];
        file.read_exact_at(&mut b, 0).map_err(|_| not_member())?;
        let h = MemberHeader::decode(&b).map_err(|_| not_member())?;
        let id = self.stripe.map_or(0, |s| s.1);
        if h.index as usize != k
            || h.count as usize != count
            || h.pack_id != id
            || h.data_len != m.data_len
        {
            return Err(not_member());
        }
        Ok(file)
    }

    /// A path through which member `k`'s checked file can be opened again
    /// (`/proc/self/fd/N`): the I/O engine opens that, so it reads the file
    /// checked even if another was swapped in at the member's path since.
    /// `None` for a pack parsed from memory or from a remote reader, and
    /// where the system has no such path; then the member's path is all
    /// there is.
    pub(crate) fn reopen_path(&self, k: usize) -> Option<PathBuf> {
        self.files
            .get(k)
            .and_then(|f| super::member_file::reopen_path(f))
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

    /// The files the pack's blocks lie in ([`Block::member`] indexes it):
    /// the pack itself, then a striped pack's other members.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Whether the blocks lie in several files: a striped pack
    /// (docs/pack-format.md, "Striped packs").
    pub fn is_striped(&self) -> bool {
        self.members.len() > 1
    }

    /// A striped pack's stripe unit in bytes.
    pub fn stripe_unit(&self) -> Option<u64> {
        self.stripe.map(|s| s.0)
    }

    /// The file's length in bytes (of the head, for a striped pack).
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Where the data region starts (a multiple of 4 KiB); for a striped
    /// pack, the head's ([`Pack::members`] has every member's).
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Bytes of the data region (the head's, for a striped pack).
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Bytes of all stored blocks, in every member.
    pub fn stored_len(&self) -> u64 {
        self.members.iter().map(|m| m.data_len).sum()
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
        let what = self.describe_owner(id, block);
        if self.is_striped() {
            let m = block.member as usize;
            return format!("{what} in member {m} ({})", self.members[m].path.display());
        }
        what
    }

    fn describe_owner(&self, id: BlockId, block: &Block) -> String {
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
        let decode = |out: &mut [u8]| {
            if subs.is_empty() {
                b.codec.decompress_into(stored, out)
            } else {
                sub_blocks::decode_into(stored, subs, out)
            }
        };
        let decoded = match b.transform {
            BlockTransform::None => decode(out),
            // A conditioned block decodes to the conditioned order first;
            // the transform then puts every byte back in place. Both steps
            // only ever touch this block's `out`.
            t => CONDITIONED.with_borrow_mut(|scratch| {
                let scratch = &mut scratch[..out.len()];
                decode(scratch)?;
                t.undo(scratch, out);
                Ok(())
            }),
        };
        decoded.map_err(|source| PackError::BlockDecode {
            at: self.describe_block(id),
            block: id.0,
            offset: b.offset,
            source,
        })
    }

    /// Opens the pack's files (every member of a striped pack) for the
    /// helper readers below.
    /// The files checked when the pack was opened are read again (their
    /// descriptors cloned), not whatever their paths name now.
    pub fn open_file(&self) -> Result<PackFiles, PackError> {
        let files = self
            .members
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let e = |e| PackError::io("open", &m.path, 0, 0, e);
                match self.files.get(k) {
                    Some(f) => f.try_clone().map_err(e),
                    None => File::open(&m.path).map_err(e),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(PackFiles { files })
    }

    /// Reads a block's stored bytes with `pread` into `stored` (resized).
    pub fn read_stored(
        &self,
        files: &PackFiles,
        id: BlockId,
        stored: &mut Vec<u8>,
    ) -> Result<(), PackError> {
        let b = *self.block(id)?;
        stored.resize(b.stored_size as usize, 0);
        files
            .read_at(b.member as usize, stored, b.offset)
            .map_err(|e| {
                PackError::io(
                    "read block of",
                    &self.members[b.member as usize].path,
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
        file: &PackFiles,
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
    fn read_blocks(&self, file: &PackFiles, asset: &Asset) -> Result<Vec<u8>, PackError> {
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
