//! The `.gspk` asset pack: its on-disk format (docs/pack-format.md), the
//! untrusted reader [`Pack`] and the writer [`PackWriter`]. Turning images,
//! KTX2 and DDS files into a writer's input is the tools crate's
//! (`gpustream-tools`).
//!
//! A pack is a 64-byte header, a data region of independently compressed
//! blocks starting at 4 KiB, and a table of contents at the end. Each block
//! holds at most 64 KiB of uncompressed data: a 64 KiB chunk of a blob, one
//! tile of one texture mip, or a piece of a texture's packed mip tail.

use crate::codec::Codec;
use std::ops::Range;
use std::path::PathBuf;

// Block transforms and sub-block tables: the layout's details (`internals`).
#[cfg(feature = "internals")]
pub mod condition;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod condition;
mod error;
// The byte layout (header offsets, entry sizes, limits): the packer's,
// the fuzz targets' and the tests'. An engine reads packs through `Pack`.
#[cfg(feature = "internals")]
pub mod format;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod format;
mod member_file;
mod reader;
#[cfg(feature = "internals")]
pub mod sub_blocks;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod sub_blocks;
mod texture;
mod writer;

// Texture sources: what the pack records of where a texture came from.
mod source;
// Writing striped packs and their on-disk layout: the packer's.
#[cfg(feature = "internals")]
pub mod stripe;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod stripe;

pub use condition::BlockTransform;
pub use error::PackError;
pub use reader::{Pack, PackFiles};
pub use source::{TextureSource, TextureSourceKind};
#[cfg(feature = "internals")]
pub use sub_blocks::SubBlock;
#[cfg(not(feature = "internals"))]
pub(crate) use sub_blocks::SubBlock;
pub use texture::{
    full_mip_count, mip_extent, PackedMip, PackedMips, TextureFormat, TileRegion, MAX_MIPS,
    MAX_TEXTURE_DIM, TILE_BYTES,
};
pub use writer::{PackSummary, PackWriter, WriterOptions, STORE_RAW_UNLESS_SAVES_DIVISOR};

/// The index of a block in [`Pack::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BlockId(pub u32);

/// The index of an asset in [`Pack::assets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct AssetId(pub u32);

/// One stored block, as the table of contents describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Block {
    /// The file the stored bytes are in: an index into [`Pack::members`],
    /// 0 but in a striped pack.
    pub member: u16,
    /// Absolute offset of the stored bytes in that file.
    pub offset: u64,
    /// Bytes stored in the file.
    pub stored_size: u32,
    /// Bytes after decoding (at most 64 KiB).
    pub size: u32,
    /// How the bytes are stored.
    pub codec: Codec,
    /// crc32c of the stored bytes.
    pub checksum: u32,
    /// The asset the block belongs to.
    pub asset: AssetId,
    /// 0 for one stream of its codec; `n >= 2` for an LZ4 block stored as
    /// `n` independent sub-blocks ([`Pack::sub_blocks`] says where).
    pub sub_blocks: u8,
    /// How the decoded bytes are ordered: [`BlockTransform::None`], or a
    /// BCn conditioning that decoding undoes (`condition`).
    pub transform: BlockTransform,
    /// The codec level the packer used (0: the codec's default, or a
    /// version 1 pack, which does not record it). Informational.
    pub level: u8,
}

impl Block {
    /// The stored bytes' range in its member's file.
    pub fn file_range(&self) -> Range<u64> {
        self.offset..self.offset + self.stored_size as u64
    }
}

/// One file of a pack: the pack itself, or one member of a striped pack
/// (docs/pack-format.md, "Striped packs").
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Member {
    /// Where the file is (members other than the head: resolved from the
    /// head's directory).
    pub path: PathBuf,
    /// Where its data region starts.
    pub data_offset: u64,
    /// Bytes of its data region.
    pub data_len: u64,
}

/// What an asset is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum AssetKind {
    /// Opaque bytes (meshes, audio, JSON, ...), cut into 64 KiB blocks.
    Blob,
    /// A 2D texture with a mip chain, cut into tiles and packed mips.
    Texture,
}

impl std::fmt::Display for AssetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AssetKind::Blob => "blob",
            AssetKind::Texture => "texture",
        })
    }
}

/// A texture's format and geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TextureInfo {
    /// The texel format.
    pub format: TextureFormat,
    /// Width of mip 0 in texels.
    pub width: u32,
    /// Height of mip 0 in texels.
    pub height: u32,
    /// Number of mips (1 = no chain).
    pub mip_count: u8,
}

impl TextureInfo {
    /// The `wgpu::TextureDescriptor` size of this texture.
    pub fn extent(&self) -> wgpu::Extent3d {
        wgpu::Extent3d {
            width: self.width,
            height: self.height,
            depth_or_array_layers: 1,
        }
    }

    /// Width and height of one mip.
    pub fn mip_extent(&self, mip: u8) -> (u32, u32) {
        mip_extent(self.width, self.height, mip)
    }
}

/// One asset of a pack.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Asset {
    /// Its name (unique within the pack).
    pub name: String,
    /// Blob or texture.
    pub kind: AssetKind,
    /// Bytes of uncompressed data: the blob's length, or all mips' texel
    /// data together.
    pub size: u64,
    /// Its blocks: a contiguous range of [`Pack::blocks`].
    pub blocks: Range<u32>,
    /// Format and geometry, for textures.
    pub texture: Option<TextureInfo>,
}

impl Asset {
    /// The number of blocks.
    pub fn block_count(&self) -> u32 {
        self.blocks.end - self.blocks.start
    }
}
