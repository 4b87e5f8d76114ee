//! Requests: a source, a destination, a cancellation tag and a name.

use std::ops::Range;
use std::sync::Arc;

use crate::codec::Codec;
use crate::destinations::HostMemory;
use crate::pack::AssetId;

use super::pack_file::PackFile;
use crate::completion::SourceKind;

/// Where a request's bytes come from.
#[derive(Clone)]
pub enum Source {
    /// A blob asset, whole or a byte range of it.
    Blob {
        /// The pack, opened by [`super::Runtime::open_pack`].
        pack: Arc<PackFile>,
        /// The asset.
        asset: AssetId,
        /// A byte range of the blob; `None` for all of it.
        range: Option<Range<u64>>,
    },
    /// One tile of one mip of a texture asset.
    Tile {
        /// The pack.
        pack: Arc<PackFile>,
        /// The asset.
        asset: AssetId,
        /// The mip level.
        mip: u8,
        /// The tile's column.
        x: u32,
        /// The tile's row.
        y: u32,
    },
    /// The packed tail of a texture's mip chain (every mip smaller than a tile).
    PackedMips {
        /// The pack.
        pack: Arc<PackFile>,
        /// The asset.
        asset: AssetId,
    },
    /// Bytes already in memory, compressed with `codec`.
    Memory {
        /// The stored bytes.
        data: Arc<[u8]>,
        /// How they are compressed.
        codec: Codec,
        /// The uncompressed size (at most 64 KiB unless `codec` is `none`).
        size: u32,
    },
}

impl Source {
    /// A whole blob of an opened pack.
    pub fn blob(pack: &Arc<PackFile>, asset: AssetId) -> Source {
        Source::Blob {
            pack: pack.clone(),
            asset,
            range: None,
        }
    }

    /// The kind of queue that takes this source.
    pub fn kind(&self) -> SourceKind {
        match self {
            Source::Memory { .. } => SourceKind::Memory,
            _ => SourceKind::File,
        }
    }
}

/// Where a request's bytes go.
#[derive(Clone)]
pub enum Destination {
    /// Host memory at a byte offset.
    Memory {
        /// The memory.
        memory: HostMemory,
        /// Where the data starts.
        offset: usize,
    },
    /// A `wgpu::Buffer` (with `COPY_DST`) at a byte offset (a multiple of 4).
    /// Buffers are written in whole 4-byte words: a request whose size is not
    /// a multiple of 4 also writes zeros up to the next word, which must fit.
    Buffer {
        /// The buffer.
        buffer: wgpu::Buffer,
        /// Where the data starts.
        offset: u64,
    },
    /// A region of a `wgpu::Texture` (with `COPY_DST`): mip, origin (x, y,
    /// array layer) and optionally the extent, which must then equal the
    /// source's. For a tile source this places the tile at `origin`; for
    /// packed mips, `mip` receives the first packed mip and the following
    /// mips go to the following levels, at `origin` (x and y must be 0).
    Texture {
        /// The texture.
        texture: wgpu::Texture,
        /// The mip level written (first level for packed mips).
        mip: u32,
        /// The origin in texels; `z` is the array layer.
        origin: wgpu::Origin3d,
        /// The extent in texels (width, height); required for memory sources.
        extent: Option<(u32, u32)>,
    },
}

impl Destination {
    /// The start of `memory`.
    pub fn memory(memory: &HostMemory) -> Destination {
        Destination::Memory {
            memory: memory.clone(),
            offset: 0,
        }
    }

    /// The destination in words, for error records.
    pub fn describe(&self) -> String {
        match self {
            Destination::Memory { memory, offset } => {
                format!("host memory [{offset}..] of {} bytes", memory.len())
            }
            Destination::Buffer { buffer, offset } => {
                format!("buffer of {} bytes at offset {offset}", buffer.size())
            }
            Destination::Texture {
                texture,
                mip,
                origin,
                ..
            } => format!(
                "{:?} texture {}x{} mip {mip} at ({},{}) layer {}",
                texture.format(),
                texture.width(),
                texture.height(),
                origin.x,
                origin.y,
                origin.z
            ),
        }
    }

    pub(crate) fn is_gpu(&self) -> bool {
        !matches!(self, Destination::Memory { .. })
    }
}

/// One read request.
#[derive(Clone)]
pub struct Request {
    /// Where the bytes come from.
    pub source: Source,
    /// Where they go.
    pub destination: Destination,
    /// The cancellation tag: `Queue::cancel(mask, value)` cancels requests
    /// whose `tag & mask == value`.
    pub tag: u64,
    /// A name used in error records.
    pub name: Option<String>,
}

impl Request {
    /// A request with tag 0 and no name.
    pub fn new(source: Source, destination: Destination) -> Request {
        Request {
            source,
            destination,
            tag: 0,
            name: None,
        }
    }

    /// Sets the cancellation tag.
    pub fn with_tag(mut self, tag: u64) -> Request {
        self.tag = tag;
        self
    }

    /// Sets the name used in errors.
    pub fn with_name(mut self, name: impl Into<String>) -> Request {
        self.name = Some(name.into());
        self
    }
}

/// A source in words and the file it reads, for error records. Made only
/// when a request fails: formatting it for every request cost the
/// enqueueing thread more than planning the request did.
pub(crate) fn describe_source(source: &Source) -> (String, Option<std::path::PathBuf>) {
    let asset_name = |pack: &PackFile, id: AssetId| match pack.pack.get_asset(id) {
        Some(a) => a.name.clone(),
        None => format!("#{}", id.0),
    };
    match source {
        Source::Blob { pack, asset, range } => {
            let r = range
                .clone()
                .unwrap_or(0..pack.pack.get_asset(*asset).map_or(0, |a| a.size));
            let name = asset_name(pack, *asset);
            (
                format!("{} asset '{name}' bytes {r:?}", pack.path().display()),
                Some(pack.path().to_path_buf()),
            )
        }
        Source::Tile {
            pack,
            asset,
            mip,
            x,
            y,
        } => {
            let name = asset_name(pack, *asset);
            (
                format!(
                    "{} asset '{name}' mip {mip} tile ({x},{y})",
                    pack.path().display()
                ),
                Some(pack.path().to_path_buf()),
            )
        }
        Source::PackedMips { pack, asset } => {
            let name = asset_name(pack, *asset);
            (
                format!("{} asset '{name}' packed mips", pack.path().display()),
                Some(pack.path().to_path_buf()),
            )
        }
        Source::Memory { data, codec, .. } => {
            (format!("memory ({} bytes, {codec})", data.len()), None)
        }
    }
}
