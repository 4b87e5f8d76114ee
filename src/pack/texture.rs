//! Texture formats and the tile arithmetic: which texels, bytes and block of
//! the pack hold tile (x, y) of mip m.
//!
//! Everything here is pure arithmetic on validated geometry, shared by the
//! writer (which cuts mips into tiles) and the reader (which answers
//! `tile`/`tile_region` in constant time).

use std::ops::Range;

/// The bytes of texel data one full tile holds, whatever the format: 64 KiB,
/// the same as the largest block.
pub const TILE_BYTES: usize = 64 * 1024;

/// The widest or tallest texture a pack accepts, in texels. 16384 is what
/// every desktop GPU samples; the bound keeps all arithmetic inside `u32`.
pub const MAX_TEXTURE_DIM: u32 = 16384;

/// The number of mips a [`MAX_TEXTURE_DIM`] texture has.
pub const MAX_MIPS: u8 = 15;

/// The texel formats a pack can hold. The list is the pack format's: a new
/// format is a new pack version, so matches on it may be exhaustive (the
/// packer's DDS and KTX2 writers map every one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum TextureFormat {
    /// 8-bit RGBA, linear.
    Rgba8Unorm,
    /// 8-bit RGBA, sRGB colour with linear alpha.
    Rgba8UnormSrgb,
    /// BC1 (DXT1) with 1-bit alpha, linear.
    Bc1,
    /// BC1, sRGB.
    Bc1Srgb,
    /// BC3 (DXT5), linear.
    Bc3,
    /// BC3, sRGB.
    Bc3Srgb,
    /// BC4, one channel.
    Bc4,
    /// BC5, two channels (normal maps).
    Bc5,
    /// BC7, linear.
    Bc7,
    /// BC7, sRGB.
    Bc7Srgb,
}

impl TextureFormat {
    /// All formats, in id order.
    pub const ALL: [TextureFormat; 10] = [
        TextureFormat::Rgba8Unorm,
        TextureFormat::Rgba8UnormSrgb,
        TextureFormat::Bc1,
        TextureFormat::Bc1Srgb,
        TextureFormat::Bc3,
        TextureFormat::Bc3Srgb,
        TextureFormat::Bc4,
        TextureFormat::Bc5,
        TextureFormat::Bc7,
        TextureFormat::Bc7Srgb,
    ];

    /// The id byte stored in the table of contents.
    pub fn id(self) -> u8 {
        Self::ALL.iter().position(|f| *f == self).unwrap_or(0) as u8
    }

    /// The format for a table-of-contents id byte.
    pub fn from_id(id: u8) -> Option<TextureFormat> {
        Self::ALL.get(id as usize).copied()
    }

    /// The lower-case name the CLI and JSON use (`bc7-srgb`, `rgba8`).
    pub fn name(self) -> &'static str {
        match self {
            TextureFormat::Rgba8Unorm => "rgba8",
            TextureFormat::Rgba8UnormSrgb => "rgba8-srgb",
            TextureFormat::Bc1 => "bc1",
            TextureFormat::Bc1Srgb => "bc1-srgb",
            TextureFormat::Bc3 => "bc3",
            TextureFormat::Bc3Srgb => "bc3-srgb",
            TextureFormat::Bc4 => "bc4",
            TextureFormat::Bc5 => "bc5",
            TextureFormat::Bc7 => "bc7",
            TextureFormat::Bc7Srgb => "bc7-srgb",
        }
    }

    /// The wgpu format a texture of this format is created with.
    pub fn wgpu(self) -> wgpu::TextureFormat {
        use wgpu::TextureFormat as W;
        match self {
            TextureFormat::Rgba8Unorm => W::Rgba8Unorm,
            TextureFormat::Rgba8UnormSrgb => W::Rgba8UnormSrgb,
            TextureFormat::Bc1 => W::Bc1RgbaUnorm,
            TextureFormat::Bc1Srgb => W::Bc1RgbaUnormSrgb,
            TextureFormat::Bc3 => W::Bc3RgbaUnorm,
            TextureFormat::Bc3Srgb => W::Bc3RgbaUnormSrgb,
            TextureFormat::Bc4 => W::Bc4RUnorm,
            TextureFormat::Bc5 => W::Bc5RgUnorm,
            TextureFormat::Bc7 => W::Bc7RgbaUnorm,
            TextureFormat::Bc7Srgb => W::Bc7RgbaUnormSrgb,
        }
    }

    /// True for the block-compressed (BCn) formats.
    pub fn is_compressed(self) -> bool {
        self.block_dim() > 1
    }

    /// True for the sRGB forms.
    pub fn is_srgb(self) -> bool {
        matches!(
            self,
            TextureFormat::Rgba8UnormSrgb
                | TextureFormat::Bc1Srgb
                | TextureFormat::Bc3Srgb
                | TextureFormat::Bc7Srgb
        )
    }

    /// The same format with the sRGB transfer function, where one exists.
    pub fn with_srgb(self, srgb: bool) -> TextureFormat {
        use TextureFormat as F;
        match (self, srgb) {
            (F::Rgba8Unorm | F::Rgba8UnormSrgb, true) => F::Rgba8UnormSrgb,
            (F::Rgba8Unorm | F::Rgba8UnormSrgb, false) => F::Rgba8Unorm,
            (F::Bc1 | F::Bc1Srgb, true) => F::Bc1Srgb,
            (F::Bc1 | F::Bc1Srgb, false) => F::Bc1,
            (F::Bc3 | F::Bc3Srgb, true) => F::Bc3Srgb,
            (F::Bc3 | F::Bc3Srgb, false) => F::Bc3,
            (F::Bc7 | F::Bc7Srgb, true) => F::Bc7Srgb,
            (F::Bc7 | F::Bc7Srgb, false) => F::Bc7,
            (other, _) => other,
        }
    }

    /// Width and height of one texel block: 4 for BCn, 1 for RGBA8.
    pub fn block_dim(self) -> u32 {
        match self {
            TextureFormat::Rgba8Unorm | TextureFormat::Rgba8UnormSrgb => 1,
            _ => 4,
        }
    }

    /// Bytes of one texel block (one texel for RGBA8).
    pub fn bytes_per_block(self) -> u32 {
        match self {
            TextureFormat::Rgba8Unorm | TextureFormat::Rgba8UnormSrgb => 4,
            TextureFormat::Bc1 | TextureFormat::Bc1Srgb | TextureFormat::Bc4 => 8,
            _ => 16,
        }
    }

    /// The texels one full tile covers, (width, height): 256x256 for
    /// 16-byte BCn, 512x256 for 8-byte BCn, 128x128 for RGBA8. Every full
    /// tile is [`TILE_BYTES`] of data in rows of 1024 (BCn) or 512 (RGBA8)
    /// bytes, both multiples of wgpu's 256-byte copy row alignment.
    pub fn tile_extent(self) -> (u32, u32) {
        match self.bytes_per_block() {
            4 => (128, 128),
            8 => (512, 256),
            _ => (256, 256),
        }
    }

    /// Bytes of tightly packed texel data of a `width` x `height` region.
    pub fn data_size(self, width: u32, height: u32) -> u64 {
        let d = self.block_dim();
        width.div_ceil(d) as u64 * height.div_ceil(d) as u64 * self.bytes_per_block() as u64
    }
}

impl std::fmt::Display for TextureFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TextureFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        TextureFormat::ALL
            .into_iter()
            .find(|f| {
                f.name() == lower || (lower == "rgba8unorm" && *f == TextureFormat::Rgba8Unorm)
            })
            .ok_or_else(|| format!("unknown texture format '{s}'"))
    }
}

/// Width and height of mip `mip` of a `width` x `height` texture.
pub fn mip_extent(width: u32, height: u32, mip: u8) -> (u32, u32) {
    let m = u32::from(mip).min(31);
    ((width >> m).max(1), (height >> m).max(1))
}

/// The number of mips of a full chain down to 1x1.
pub fn full_mip_count(width: u32, height: u32) -> u8 {
    (32 - width.max(height).max(1).leading_zeros()) as u8
}

/// What a caller needs to copy one tile (or one packed mip) from a buffer
/// into a texture: where it goes, how big it is, and how its bytes are laid
/// out (rows of texel blocks, tightly packed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TileRegion {
    /// The block holding the tile's data.
    pub block: super::BlockId,
    /// The mip level.
    pub mip: u8,
    /// Texel x of the tile's top-left corner within the mip.
    pub x: u32,
    /// Texel y of the tile's top-left corner within the mip.
    pub y: u32,
    /// Width in texels, clipped to the mip.
    pub width: u32,
    /// Height in texels, clipped to the mip.
    pub height: u32,
    /// Bytes of one row of texel blocks (tight, no padding).
    pub bytes_per_row: u32,
    /// Rows of texel blocks (`height / 4` rounded up for BCn, `height` for RGBA8).
    pub rows: u32,
}

impl TileRegion {
    /// Bytes of the tile's data: `bytes_per_row * rows`.
    pub fn size(&self) -> u32 {
        self.bytes_per_row * self.rows
    }

    /// The extent a `copy_buffer_to_texture` of this region must use for a
    /// format with `block_dim`-texel blocks: wgpu wants whole blocks, so a
    /// region at the edge of a mip smaller than a block is rounded up to the
    /// mip's physical size.
    pub fn copy_extent(&self, block_dim: u32) -> (u32, u32) {
        (
            self.width.div_ceil(block_dim) * block_dim,
            self.height.div_ceil(block_dim) * block_dim,
        )
    }
}

/// One mip of the packed tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PackedMip {
    /// The mip level.
    pub mip: u8,
    /// Where its data starts in the packed stream (the concatenated,
    /// decompressed data of the packed blocks).
    pub offset: u32,
    /// Width in texels.
    pub width: u32,
    /// Height in texels.
    pub height: u32,
    /// Bytes of one row of texel blocks (tight).
    pub bytes_per_row: u32,
    /// Rows of texel blocks.
    pub rows: u32,
}

impl PackedMip {
    /// Bytes of this mip's data.
    pub fn size(&self) -> u32 {
        self.bytes_per_row * self.rows
    }
}

/// The packed tail of a texture's mip chain: every mip whose data is smaller
/// than one tile, stored back to back (coarse mips last, as in the chain:
/// first packed mip first) and cut into 64 KiB blocks like a blob.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PackedMips {
    /// The blocks holding the packed stream, in order (indices into
    /// `Pack::blocks`). Empty when the chain has no mip smaller than a tile.
    pub blocks: Range<u32>,
    /// Bytes of the packed stream (sum of the mips' sizes).
    pub len: u32,
    /// The packed mips, finest first.
    pub mips: Vec<PackedMip>,
}

/// The tile grid of one tiled mip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MipGrid {
    pub width: u32,
    pub height: u32,
    pub tiles_x: u32,
    pub tiles_y: u32,
    /// Index of tile (0, 0) relative to the asset's first block.
    pub first: u32,
}

/// Where every mip of a texture lives: the computed block layout that
/// `tile()` indexes in constant time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TextureLayout {
    pub format: TextureFormat,
    /// Per mip, finest first: `Some(grid)` for tiled mips, `None` for packed.
    pub grids: Vec<Option<MipGrid>>,
    /// The packed tail, with `blocks` relative to the asset's first block.
    pub packed: PackedMips,
    /// Total blocks the texture occupies.
    pub block_count: u32,
    /// Total bytes of texel data, all mips.
    pub data_size: u64,
}

impl TextureLayout {
    /// Lays out a texture. The caller has checked the dimensions
    /// (1..=MAX_TEXTURE_DIM, base a multiple of the block size) and
    /// `1 <= mips <= full_mip_count`.
    ///
    /// Block order: the packed tail first (its blocks in stream order), then
    /// the tiled mips from coarse to fine, each mip's tiles row-major. A
    /// streamer that reads front to back so gets a usable low-resolution
    /// texture first and refines it.
    pub fn new(format: TextureFormat, width: u32, height: u32, mips: u8) -> TextureLayout {
        let (tw, th) = format.tile_extent();
        let mut grids = vec![None; mips as usize];
        let mut packed = PackedMips::default();
        let mut data_size = 0u64;
        for m in 0..mips {
            let (w, h) = mip_extent(width, height, m);
            let size = format.data_size(w, h);
            data_size += size;
            if size < TILE_BYTES as u64 {
                let d = format.block_dim();
                packed.mips.push(PackedMip {
                    mip: m,
                    offset: packed.len,
                    width: w,
                    height: h,
                    bytes_per_row: w.div_ceil(d) * format.bytes_per_block(),
                    rows: h.div_ceil(d),
                });
                packed.len += size as u32;
            } else {
                grids[m as usize] = Some(MipGrid {
                    width: w,
                    height: h,
                    tiles_x: w.div_ceil(tw),
                    tiles_y: h.div_ceil(th),
                    first: 0,
                });
            }
        }
        let packed_blocks = (packed.len as usize).div_ceil(TILE_BYTES) as u32;
        packed.blocks = 0..packed_blocks;
        let mut next = packed_blocks;
        for grid in grids.iter_mut().rev().flatten() {
            grid.first = next;
            next += grid.tiles_x * grid.tiles_y;
        }
        TextureLayout {
            format,
            grids,
            packed,
            block_count: next,
            data_size,
        }
    }

    /// The region of tile (x, y) of a tiled mip, with `block` relative to
    /// the asset's first block.
    pub fn region(&self, mip: u8, grid: &MipGrid, x: u32, y: u32) -> TileRegion {
        let (tw, th) = self.format.tile_extent();
        let d = self.format.block_dim();
        let width = (grid.width - x * tw).min(tw);
        let height = (grid.height - y * th).min(th);
        TileRegion {
            block: super::BlockId(grid.first + y * grid.tiles_x + x),
            mip,
            x: x * tw,
            y: y * th,
            width,
            height,
            bytes_per_row: width.div_ceil(d) * self.format.bytes_per_block(),
            rows: height.div_ceil(d),
        }
    }

    /// The uncompressed size of the asset-relative block `rel`.
    pub fn block_size(&self, rel: u32) -> u32 {
        if self.packed.blocks.contains(&rel) {
            let start = rel as usize * TILE_BYTES;
            return (self.packed.len as usize - start).min(TILE_BYTES) as u32;
        }
        match self.locate(rel) {
            Some((mip, x, y)) => {
                let grid = self.grids[mip as usize]
                    .as_ref()
                    .expect("located a tiled mip");
                self.region(mip, grid, x, y).size()
            }
            None => 0,
        }
    }

    /// Bytes per row of the tile an asset-relative block holds, or `None`
    /// for packed blocks (a byte stream) and indices past the end.
    pub fn row_bytes(&self, rel: u32) -> Option<u32> {
        let (mip, x, y) = self.locate(rel)?;
        let grid = self.grids[mip as usize].as_ref()?;
        Some(self.region(mip, grid, x, y).bytes_per_row)
    }

    /// Which tiled mip and tile an asset-relative block holds, or `None`
    /// for packed blocks and indices past the end.
    pub fn locate(&self, rel: u32) -> Option<(u8, u32, u32)> {
        for (m, grid) in self.grids.iter().enumerate() {
            if let Some(g) = grid {
                let n = g.tiles_x * g.tiles_y;
                if rel >= g.first && rel < g.first + n {
                    let i = rel - g.first;
                    return Some((m as u8, i % g.tiles_x, i / g.tiles_x));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_tiles_are_64k_with_aligned_rows() {
        for f in TextureFormat::ALL {
            let (tw, th) = f.tile_extent();
            assert_eq!(f.data_size(tw, th), TILE_BYTES as u64, "{f}");
            let row = tw / f.block_dim() * f.bytes_per_block();
            assert_eq!(row % 256, 0, "{f}");
            assert_eq!(TextureFormat::from_id(f.id()), Some(f));
            assert_eq!(f.name().parse::<TextureFormat>().unwrap(), f);
        }
    }

    #[test]
    fn bc7_layout_of_a_1000x600_texture() {
        let l = TextureLayout::new(TextureFormat::Bc7, 1000, 600, full_mip_count(1000, 600));
        assert_eq!(l.grids.len(), 10);
        // mip 0: 1000x600 -> 4x3 tiles; mip 1: 500x300 -> 2x2; mip 2: 250x150
        // is 63*38*16 = 38304 bytes < 64 KiB: packed from there on.
        let g0 = l.grids[0].unwrap();
        let g1 = l.grids[1].unwrap();
        assert_eq!((g0.tiles_x, g0.tiles_y), (4, 3));
        assert_eq!((g1.tiles_x, g1.tiles_y), (2, 2));
        assert!(l.grids[2].is_none());
        assert_eq!(l.packed.mips.len(), 8);
        assert_eq!(l.packed.mips[0].mip, 2);
        assert_eq!(l.packed.mips[0].size(), 38304);
        assert_eq!(l.packed.mips[1].offset, 38304);
        assert_eq!(l.packed.blocks, 0..1);
        // Coarse to fine after the packed blocks.
        assert_eq!(g1.first, 1);
        assert_eq!(g0.first, 5);
        assert_eq!(l.block_count, 17);
        let edge = l.region(0, &g0, 3, 2);
        assert_eq!(
            (edge.x, edge.y, edge.width, edge.height),
            (768, 512, 232, 88)
        );
        assert_eq!((edge.bytes_per_row, edge.rows), (58 * 16, 22));
        assert_eq!(edge.block.0, 5 + 2 * 4 + 3);
        let full = l.region(0, &g0, 0, 0);
        assert_eq!(
            (full.bytes_per_row, full.rows, full.size()),
            (1024, 64, 65536)
        );
        assert_eq!(l.locate(16), Some((0, 3, 2)));
        assert_eq!(l.locate(0), None);
        let total: u64 = (0..l.block_count).map(|b| l.block_size(b) as u64).sum();
        assert_eq!(total, l.data_size);
    }

    #[test]
    fn tiny_mips_round_up_to_whole_blocks() {
        let l = TextureLayout::new(TextureFormat::Bc1, 8, 8, 4);
        let sizes: Vec<u32> = l.packed.mips.iter().map(|m| m.size()).collect();
        assert_eq!(sizes, vec![32, 8, 8, 8]);
        assert_eq!(l.block_count, 1);
        let r = TileRegion {
            block: super::super::BlockId(0),
            mip: 3,
            x: 0,
            y: 0,
            width: 1,
            height: 1,
            bytes_per_row: 8,
            rows: 1,
        };
        assert_eq!(r.copy_extent(4), (4, 4));
    }

    #[test]
    fn packed_tail_can_span_two_blocks() {
        // RGBA8 128x127: mip 0 is 65024 bytes (< 64 KiB, packed) and the
        // rest of the chain pushes the stream past one block.
        let l = TextureLayout::new(TextureFormat::Rgba8Unorm, 128, 127, 8);
        assert!(l.grids.iter().all(Option::is_none));
        assert_eq!(l.packed.blocks, 0..2);
        assert_eq!(l.block_size(0), 65536);
        assert_eq!(l.block_size(1) as u64, l.data_size - 65536);
    }
}
