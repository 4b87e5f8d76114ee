//! Mip-shaped texture batches: all tiles of one (texture, mip) in one
//! submission are decoded into one scratch region laid out like the mip
//! itself, so that a handful of `copy_buffer_to_texture` calls (one when the
//! tiles form a rectangle) replace one copy per tile.
//!
//! The scratch region covers the bounding box of the submission's tiles (in
//! whole tiles, clipped to the mip). Its rows are the mip's rows of texel
//! blocks over that box, `row_pitch` apart (the box's row in bytes rounded
//! up to `wgpu::COPY_BYTES_PER_ROW_ALIGNMENT`). Tile (x, y) starts at block
//! row `y * tile_rows` and byte `x * tile_row_bytes` of its row (both
//! relative to the box), which is where the decoders write it when given
//! its [`TilePlacement`] as `dst_offset` / `row_pitch`.
//!
//! Copy regions are rectangles of tiles: tiles not in the submission are
//! never copied over. Each row of tiles is cut into runs; a run that repeats
//! in the next row grows its rectangle downwards. A full box is one region;
//! a run of tiles contiguous in raster order is at most three (a partial
//! first row, the full rows between, a partial last row).
//!
//! Pure arithmetic, no GPU: [`CopyRegion::record`] is the one place that
//! touches wgpu, to record the copy the plan describes.

use std::collections::HashSet;

/// The mip a batch writes and how the pack cuts it into tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MipShape {
    /// The texture's format.
    pub format: wgpu::TextureFormat,
    /// The mip's width in texels.
    pub width: u32,
    /// The mip's height in texels.
    pub height: u32,
    /// Texels across one full tile (a multiple of the block width).
    pub tile_width: u32,
    /// Texels down one full tile (a multiple of the block height).
    pub tile_height: u32,
}

/// One tile of a batch, as the pack describes it
/// ([`crate::pack::TileRegion`]) plus its place in the tile grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchTile {
    /// Tile column in the mip's tile grid.
    pub tile_x: u32,
    /// Tile row in the mip's tile grid.
    pub tile_y: u32,
    /// Texel x of the tile's top-left corner.
    pub x: u32,
    /// Texel y of the tile's top-left corner.
    pub y: u32,
    /// Width in texels, clipped to the mip.
    pub width: u32,
    /// Height in texels, clipped to the mip.
    pub height: u32,
    /// Bytes of one row of texel blocks (tight).
    pub row_bytes: u32,
    /// Rows of texel blocks.
    pub rows: u32,
}

/// Where the decoder writes one tile in the scratch region: its descriptor's
/// `dst_offset` (plus the region's own offset in its buffer) and
/// `row_bytes` / `row_pitch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TilePlacement {
    /// Byte offset of the tile's first row in the scratch region.
    pub dst_offset: u64,
    /// Bytes of one tile row (the tile's `row_bytes`).
    pub row_bytes: u32,
    /// Bytes from one row start to the next (the region's pitch).
    pub row_pitch: u32,
}

/// One `copy_buffer_to_texture` of a batch: a rectangle of tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRegion {
    /// Byte offset in the scratch region of the rectangle's first block.
    pub buffer_offset: u64,
    /// Bytes between block rows (a multiple of 256).
    pub bytes_per_row: u32,
    /// Block rows copied.
    pub rows: u32,
    /// Texel origin (x, y) in the mip.
    pub origin: (u32, u32),
    /// Extent (width, height) in texels: whole blocks, which at the mip's
    /// edge is the mip's size rounded up to the block, as wgpu wants it.
    pub extent: (u32, u32),
    /// The tiles covered: columns `tiles_x.0..tiles_x.1`, rows
    /// `tiles_y.0..tiles_y.1`.
    pub tiles_x: (u32, u32),
    /// See `tiles_x`.
    pub tiles_y: (u32, u32),
}

impl CopyRegion {
    /// Records this copy from the scratch region, which starts at byte
    /// `scratch_offset` of `scratch` (a multiple of the format's block size;
    /// 256 always works), into `mip` / array `layer` of `texture`.
    pub fn record(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        scratch: &wgpu::Buffer,
        scratch_offset: u64,
        texture: &wgpu::Texture,
        mip: u32,
        layer: u32,
    ) {
        encoder.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo {
                buffer: scratch,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: scratch_offset + self.buffer_offset,
                    bytes_per_row: Some(self.bytes_per_row),
                    rows_per_image: Some(self.rows),
                },
            },
            wgpu::TexelCopyTextureInfo {
                texture,
                mip_level: mip,
                origin: wgpu::Origin3d {
                    x: self.origin.0,
                    y: self.origin.1,
                    z: layer,
                },
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::Extent3d {
                width: self.extent.0,
                height: self.extent.1,
                depth_or_array_layers: 1,
            },
        );
    }
}

/// The layout of one batch: the scratch region's size and pitch, where each
/// tile goes in it (in the order the tiles were given), and the copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MipBatchPlan {
    /// Bytes of the scratch region (from the first block of the box to the
    /// last byte of its last row).
    pub scratch_size: u64,
    /// Bytes between block rows of the scratch region (a multiple of 256).
    pub row_pitch: u32,
    /// Each tile's place, in input order.
    pub tiles: Vec<TilePlacement>,
    /// The copies, ordered by tile row then column.
    pub regions: Vec<CopyRegion>,
}

/// Why a batch cannot be planned.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextureBatchError {
    /// The format cannot be streamed (no fixed block size, or blocks that
    /// are not whole 32-bit words, which the decoders need).
    #[error("format {format:?} cannot be batched")]
    UnsupportedFormat {
        /// The format.
        format: wgpu::TextureFormat,
    },
    /// The mip or tile size is zero, or tiles are not whole texel blocks.
    #[error("mip of {width}x{height} in tiles of {tile_width}x{tile_height}: {reason}")]
    BadShape {
        /// Mip width.
        width: u32,
        /// Mip height.
        height: u32,
        /// Tile width.
        tile_width: u32,
        /// Tile height.
        tile_height: u32,
        /// What is wrong.
        reason: &'static str,
    },
    /// The batch has no tiles.
    #[error("the batch has no tiles")]
    Empty,
    /// A tile lies outside the mip's tile grid.
    #[error("tile ({tile_x},{tile_y}) is outside the {tiles_x}x{tiles_y} tile grid")]
    OutsideGrid {
        /// Tile column.
        tile_x: u32,
        /// Tile row.
        tile_y: u32,
        /// Tile columns of the mip.
        tiles_x: u32,
        /// Tile rows of the mip.
        tiles_y: u32,
    },
    /// The same tile appears twice.
    #[error("tile ({tile_x},{tile_y}) appears twice in the batch")]
    Duplicate {
        /// Tile column.
        tile_x: u32,
        /// Tile row.
        tile_y: u32,
    },
    /// A tile's origin, extent or row layout disagrees with the mip's.
    #[error("tile ({tile_x},{tile_y}): {reason}")]
    TileMismatch {
        /// Tile column.
        tile_x: u32,
        /// Tile row.
        tile_y: u32,
        /// What disagrees.
        reason: &'static str,
    },
}

/// The block geometry of a shape, checked.
#[derive(Clone, Copy)]
struct Geometry {
    /// Block width and height in texels.
    bw: u32,
    bh: u32,
    /// Bytes per block.
    bpb: u32,
    /// The mip in blocks.
    blocks_w: u32,
    blocks_h: u32,
    /// One tile in blocks.
    tile_bw: u32,
    tile_bh: u32,
    /// The tile grid.
    tiles_x: u32,
    tiles_y: u32,
}

impl MipShape {
    /// The shape of a mip of a pack texture, tiled as the pack tiles it.
    pub fn of_pack(format: crate::pack::TextureFormat, width: u32, height: u32) -> Self {
        let (tile_width, tile_height) = format.tile_extent();
        Self {
            format: format.wgpu(),
            width,
            height,
            tile_width,
            tile_height,
        }
    }

    /// The mip's tile grid (columns, rows).
    pub fn tile_grid(&self) -> (u32, u32) {
        (
            self.width.div_ceil(self.tile_width.max(1)),
            self.height.div_ceil(self.tile_height.max(1)),
        )
    }

    /// Tile (`tile_x`, `tile_y`) as this shape cuts it, or `None` outside
    /// the grid (or for a shape [`plan_mip_batch`] rejects).
    pub fn tile(&self, tile_x: u32, tile_y: u32) -> Option<BatchTile> {
        let g = self.geometry().ok()?;
        if tile_x >= g.tiles_x || tile_y >= g.tiles_y {
            return None;
        }
        let x = tile_x * self.tile_width;
        let y = tile_y * self.tile_height;
        let width = (self.width - x).min(self.tile_width);
        let height = (self.height - y).min(self.tile_height);
        Some(BatchTile {
            tile_x,
            tile_y,
            x,
            y,
            width,
            height,
            row_bytes: width.div_ceil(g.bw) * g.bpb,
            rows: height.div_ceil(g.bh),
        })
    }

    fn geometry(&self) -> Result<Geometry, TextureBatchError> {
        let (bw, bh) = self.format.block_dimensions();
        let bpb = self.format.block_copy_size(None).unwrap_or(0);
        if bpb == 0 || !bpb.is_multiple_of(4) || self.format.is_depth_stencil_format() {
            return Err(TextureBatchError::UnsupportedFormat {
                format: self.format,
            });
        }
        let bad = |reason| TextureBatchError::BadShape {
            width: self.width,
            height: self.height,
            tile_width: self.tile_width,
            tile_height: self.tile_height,
            reason,
        };
        if self.width == 0 || self.height == 0 || self.tile_width == 0 || self.tile_height == 0 {
            return Err(bad("a size is zero"));
        }
        // Far above any texture (16384 texels): keeps every product in range.
        const LIMIT: u32 = 1 << 24;
        if self.width > LIMIT
            || self.height > LIMIT
            || self.tile_width > LIMIT
            || self.tile_height > LIMIT
        {
            return Err(bad("a size exceeds 2^24 texels"));
        }
        if !self.tile_width.is_multiple_of(bw) || !self.tile_height.is_multiple_of(bh) {
            return Err(bad("tiles are not whole texel blocks"));
        }
        // Rows stay below 2^24 blocks of at most 16 bytes: pitches fit u32.
        let tile_bw = self.tile_width / bw;
        let blocks_w = self.width.div_ceil(bw);
        let (tiles_x, tiles_y) = self.tile_grid();
        Ok(Geometry {
            bw,
            bh,
            bpb,
            blocks_w,
            blocks_h: self.height.div_ceil(bh),
            tile_bw,
            tile_bh: self.tile_height / bh,
            tiles_x,
            tiles_y,
        })
    }
}

impl BatchTile {
    /// The batch tile for a pack's tile region of a mip of `shape` (the
    /// tile's grid position follows from its texel origin).
    pub fn from_region(shape: &MipShape, region: &crate::pack::TileRegion) -> Self {
        Self {
            tile_x: region.x / shape.tile_width.max(1),
            tile_y: region.y / shape.tile_height.max(1),
            x: region.x,
            y: region.y,
            width: region.width,
            height: region.height,
            row_bytes: region.bytes_per_row,
            rows: region.rows,
        }
    }
}

/// A rectangle of tiles being grown row by row: columns `a..=b`, rows
/// `top..=bottom`.
#[derive(Clone, Copy)]
struct Rect {
    a: u32,
    b: u32,
    top: u32,
    bottom: u32,
}

/// Plans one batch: checks every tile against `shape`, lays the scratch
/// region out and finds the copy regions (see the module docs).
pub fn plan_mip_batch(
    shape: &MipShape,
    tiles: &[BatchTile],
) -> Result<MipBatchPlan, TextureBatchError> {
    let g = shape.geometry()?;
    if tiles.is_empty() {
        return Err(TextureBatchError::Empty);
    }
    let mut seen = HashSet::with_capacity(tiles.len());
    for t in tiles {
        if t.tile_x >= g.tiles_x || t.tile_y >= g.tiles_y {
            return Err(TextureBatchError::OutsideGrid {
                tile_x: t.tile_x,
                tile_y: t.tile_y,
                tiles_x: g.tiles_x,
                tiles_y: g.tiles_y,
            });
        }
        if !seen.insert((t.tile_x, t.tile_y)) {
            return Err(TextureBatchError::Duplicate {
                tile_x: t.tile_x,
                tile_y: t.tile_y,
            });
        }
        let expected = shape.tile(t.tile_x, t.tile_y).expect("inside the grid");
        let reason = if (t.x, t.y) != (expected.x, expected.y) {
            Some("origin is not the tile's place in the grid")
        } else if (t.width, t.height) != (expected.width, expected.height) {
            Some("extent differs from the tile's, clipped to the mip")
        } else if (t.row_bytes, t.rows) != (expected.row_bytes, expected.rows) {
            Some("row bytes or row count differ from the extent's")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(TextureBatchError::TileMismatch {
                tile_x: t.tile_x,
                tile_y: t.tile_y,
                reason,
            });
        }
    }

    // The bounding box, in tiles and in blocks.
    let tx0 = tiles.iter().map(|t| t.tile_x).min().expect("not empty");
    let tx1 = tiles.iter().map(|t| t.tile_x).max().expect("not empty");
    let ty0 = tiles.iter().map(|t| t.tile_y).min().expect("not empty");
    let ty1 = tiles.iter().map(|t| t.tile_y).max().expect("not empty");
    let bx0 = tx0 as u64 * g.tile_bw as u64;
    let by0 = ty0 as u64 * g.tile_bh as u64;
    let bx_end = ((tx1 as u64 + 1) * g.tile_bw as u64).min(g.blocks_w as u64);
    let by_end = ((ty1 as u64 + 1) * g.tile_bh as u64).min(g.blocks_h as u64);
    let width_bytes = (bx_end - bx0) * g.bpb as u64;
    // At most 2^24 blocks of 16 bytes (checked in geometry): fits a u32.
    let row_pitch = width_bytes.next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as u64) as u32;
    let scratch_size = (by_end - by0 - 1) * row_pitch as u64 + width_bytes;
    // The byte offset of tile (tx, ty)'s first block in the scratch region.
    let offset_of = |tx: u32, ty: u32| {
        (ty as u64 * g.tile_bh as u64 - by0) * row_pitch as u64
            + (tx as u64 * g.tile_bw as u64 - bx0) * g.bpb as u64
    };

    let placements = tiles
        .iter()
        .map(|t| TilePlacement {
            dst_offset: offset_of(t.tile_x, t.tile_y),
            row_bytes: t.row_bytes,
            row_pitch,
        })
        .collect();

    // Runs of adjacent tiles per tile row, grown downwards while the same
    // run repeats in the next row.
    let mut order: Vec<(u32, u32)> = tiles.iter().map(|t| (t.tile_y, t.tile_x)).collect();
    order.sort_unstable();
    let mut done: Vec<Rect> = Vec::new();
    let mut open: Vec<Rect> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let ty = order[i].0;
        // This row's runs.
        let mut runs = Vec::new();
        while i < order.len() && order[i].0 == ty {
            let a = order[i].1;
            let mut b = a;
            i += 1;
            while i < order.len() && order[i].0 == ty && order[i].1 == b + 1 {
                b += 1;
                i += 1;
            }
            runs.push((a, b));
        }
        let mut next = Vec::with_capacity(runs.len());
        for (a, b) in runs {
            match open
                .iter()
                .position(|r| r.a == a && r.b == b && r.bottom + 1 == ty)
            {
                Some(k) => {
                    let mut r = open.swap_remove(k);
                    r.bottom = ty;
                    next.push(r);
                }
                None => next.push(Rect {
                    a,
                    b,
                    top: ty,
                    bottom: ty,
                }),
            }
        }
        done.append(&mut open);
        open = next;
    }
    done.append(&mut open);
    done.sort_unstable_by_key(|r| (r.top, r.a));

    let regions = done
        .iter()
        .map(|r| {
            let bx = r.a * g.tile_bw;
            let by = r.top * g.tile_bh;
            let blocks_w = ((r.b + 1) * g.tile_bw).min(g.blocks_w) - bx;
            let blocks_h = ((r.bottom + 1) * g.tile_bh).min(g.blocks_h) - by;
            CopyRegion {
                buffer_offset: offset_of(r.a, r.top),
                bytes_per_row: row_pitch,
                rows: blocks_h,
                origin: (bx * g.bw, by * g.bh),
                extent: (blocks_w * g.bw, blocks_h * g.bh),
                tiles_x: (r.a, r.b + 1),
                tiles_y: (r.top, r.bottom + 1),
            }
        })
        .collect();

    Ok(MipBatchPlan {
        scratch_size,
        row_pitch,
        tiles: placements,
        regions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use wgpu::TextureFormat as F;

    fn shape(format: F, width: u32, height: u32, tw: u32, th: u32) -> MipShape {
        MipShape {
            format,
            width,
            height,
            tile_width: tw,
            tile_height: th,
        }
    }

    fn all_tiles(s: &MipShape) -> Vec<BatchTile> {
        let (tx, ty) = s.tile_grid();
        (0..ty)
            .flat_map(|y| (0..tx).map(move |x| (x, y)))
            .map(|(x, y)| s.tile(x, y).unwrap())
            .collect()
    }

    /// Checks a plan block by block: regions obey copy_buffer_to_texture's
    /// rules and fit the scratch; every block a region copies belongs to a
    /// tile of the batch and sits where that tile's placement put it; every
    /// block of every tile is copied exactly once.
    fn check(s: &MipShape, tiles: &[BatchTile], plan: &MipBatchPlan) {
        let (bw, bh) = s.format.block_dimensions();
        let bpb = s.format.block_copy_size(None).unwrap() as u64;
        let (tile_bw, tile_bh) = (s.tile_width / bw, s.tile_height / bh);
        let phys = (s.width.next_multiple_of(bw), s.height.next_multiple_of(bh));
        assert_eq!(plan.tiles.len(), tiles.len());
        assert_eq!(plan.row_pitch % 256, 0);
        let index: std::collections::HashMap<(u32, u32), usize> = tiles
            .iter()
            .enumerate()
            .map(|(i, t)| ((t.tile_x, t.tile_y), i))
            .collect();
        for (t, p) in tiles.iter().zip(&plan.tiles) {
            assert_eq!(p.dst_offset % 4, 0, "decoders need 4-byte aligned rows");
            assert_eq!(p.row_bytes, t.row_bytes);
            assert_eq!(p.row_pitch, plan.row_pitch);
            let end = p.dst_offset + (t.rows as u64 - 1) * p.row_pitch as u64 + t.row_bytes as u64;
            assert!(end <= plan.scratch_size, "tile {t:?} past the scratch");
        }
        let mut copied = vec![0u32; tiles.len()];
        for r in &plan.regions {
            assert_eq!(r.bytes_per_row % 256, 0);
            assert_eq!(r.buffer_offset % bpb, 0);
            assert_eq!((r.extent.0 % bw, r.extent.1 % bh), (0, 0), "{r:?}");
            assert_eq!(r.rows * bh, r.extent.1);
            assert!(r.extent.0 > 0 && r.extent.1 > 0);
            assert!(r.origin.0 + r.extent.0 <= phys.0 && r.origin.1 + r.extent.1 <= phys.1);
            let (rbw, rbh) = (r.extent.0 / bw, r.extent.1 / bh);
            let need =
                r.buffer_offset + (rbh as u64 - 1) * r.bytes_per_row as u64 + rbw as u64 * bpb;
            assert!(need <= plan.scratch_size, "{r:?} reads past the scratch");
            let (bx0, by0) = (r.origin.0 / bw, r.origin.1 / bh);
            for by in by0..by0 + rbh {
                for bx in bx0..bx0 + rbw {
                    let tile = (bx / tile_bw, by / tile_bh);
                    let Some(&i) = index.get(&tile) else {
                        panic!("{r:?} copies over tile {tile:?}, which is not in the batch");
                    };
                    let addr = r.buffer_offset
                        + (by - by0) as u64 * r.bytes_per_row as u64
                        + (bx - bx0) as u64 * bpb;
                    let t = &tiles[i];
                    let p = &plan.tiles[i];
                    let want = p.dst_offset
                        + (by - t.y / bh) as u64 * p.row_pitch as u64
                        + (bx - t.x / bw) as u64 * bpb;
                    assert_eq!(addr, want, "block ({bx},{by}) of {r:?}");
                    copied[i] += 1;
                }
            }
        }
        for (t, n) in tiles.iter().zip(copied) {
            // Blocks of the tile, counting the mip edge's partial blocks whole.
            assert_eq!(
                n,
                t.row_bytes / bpb as u32 * t.rows,
                "tile {t:?} copied {n} blocks"
            );
        }
    }

    #[test]
    fn a_full_mip_is_one_region() {
        let s = shape(F::Bc7RgbaUnorm, 1000, 602, 256, 256);
        let tiles = all_tiles(&s);
        assert_eq!(tiles.len(), 12);
        let plan = plan_mip_batch(&s, &tiles).unwrap();
        check(&s, &tiles, &plan);
        assert_eq!(plan.regions.len(), 1);
        let r = plan.regions[0];
        assert_eq!((r.origin, r.extent, r.rows), ((0, 0), (1000, 604), 151));
        assert_eq!(plan.row_pitch, 4096);
        assert_eq!(plan.scratch_size, 150 * 4096 + 4000);
        // Tile (1, 2) starts 64 block rows per tile row down, 64 blocks in.
        assert_eq!(plan.tiles[9].dst_offset, 2 * 64 * 4096 + 64 * 16);
    }

    #[test]
    fn pack_shaped_tiles_match_the_pack_layout() {
        let fmt = crate::pack::TextureFormat::Bc1;
        let s = MipShape::of_pack(fmt, 700, 300);
        assert_eq!((s.tile_width, s.tile_height), fmt.tile_extent());
        let t = s.tile(1, 1).unwrap();
        assert_eq!((t.x, t.y, t.width, t.height), (512, 256, 188, 44));
        assert_eq!((t.row_bytes, t.rows), (47 * 8, 11));
    }

    #[test]
    fn raster_runs_need_at_most_three_regions() {
        let shapes = [
            shape(F::Bc7RgbaUnorm, 40, 30, 8, 8),
            shape(F::Bc1RgbaUnorm, 18, 14, 8, 4),
            shape(F::Rgba8Unorm, 13, 9, 3, 2),
            shape(F::Rgba8Unorm, 4, 10, 4, 2),
        ];
        for s in shapes {
            let all = all_tiles(&s);
            let (cols, _) = s.tile_grid();
            for start in 0..all.len() {
                for end in start + 1..=all.len() {
                    let run = &all[start..end];
                    let plan = plan_mip_batch(&s, run).unwrap();
                    check(&s, run, &plan);
                    assert!(plan.regions.len() <= 3, "{s:?} {start}..{end}");
                    let whole_rows = start % cols as usize == 0 && end % cols as usize == 0;
                    let one_row = start / cols as usize == (end - 1) / cols as usize;
                    if whole_rows || one_row {
                        assert_eq!(plan.regions.len(), 1, "{s:?} {start}..{end}");
                    }
                }
            }
        }
    }

    #[test]
    fn random_subsets_copy_exactly_their_tiles() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let s = shape(F::Bc3RgbaUnorm, 61, 47, 8, 12);
        let all = all_tiles(&s);
        for _ in 0..300 {
            let p = rng.gen_range(0.05..1.0);
            let mut tiles: Vec<BatchTile> =
                all.iter().filter(|_| rng.gen_bool(p)).copied().collect();
            if tiles.is_empty() {
                continue;
            }
            // Any input order.
            for i in (1..tiles.len()).rev() {
                tiles.swap(i, rng.gen_range(0..=i));
            }
            let plan = plan_mip_batch(&s, &tiles).unwrap();
            check(&s, &tiles, &plan);
            assert!(plan.regions.len() <= tiles.len());
        }
    }

    #[test]
    fn bad_batches_are_rejected() {
        let s = shape(F::Bc7RgbaUnorm, 100, 60, 32, 32);
        let t = s.tile(1, 1).unwrap();
        assert_eq!(plan_mip_batch(&s, &[]), Err(TextureBatchError::Empty));
        assert!(matches!(
            plan_mip_batch(&s, &[t, t]),
            Err(TextureBatchError::Duplicate {
                tile_x: 1,
                tile_y: 1
            })
        ));
        let outside = BatchTile { tile_x: 4, ..t };
        assert!(matches!(
            plan_mip_batch(&s, &[outside]),
            Err(TextureBatchError::OutsideGrid {
                tiles_x: 4,
                tiles_y: 2,
                ..
            })
        ));
        for bad in [
            BatchTile { x: 4, ..t },
            BatchTile { width: 28, ..t },
            BatchTile { rows: 9, ..t },
            BatchTile { row_bytes: 64, ..t },
        ] {
            assert!(
                matches!(
                    plan_mip_batch(&s, &[bad]),
                    Err(TextureBatchError::TileMismatch { .. })
                ),
                "{bad:?}"
            );
        }
        let depth = shape(F::Depth32Float, 64, 64, 32, 32);
        assert!(matches!(
            plan_mip_batch(&depth, &[t]),
            Err(TextureBatchError::UnsupportedFormat { .. })
        ));
        let unaligned = shape(F::Bc7RgbaUnorm, 64, 64, 30, 32);
        assert!(matches!(
            plan_mip_batch(&unaligned, &[t]),
            Err(TextureBatchError::BadShape { .. })
        ));
        let huge = shape(F::Rgba8Unorm, u32::MAX, 1, u32::MAX, 1);
        assert!(matches!(
            plan_mip_batch(&huge, &[t]),
            Err(TextureBatchError::BadShape { .. })
        ));
    }
}
