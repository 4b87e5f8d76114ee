//! GPU destinations of one submission: where each part's bytes land in the
//! batch's output scratch, and the few copies that move them from there into
//! the application's buffers and textures.
//!
//! Texture parts of one (texture, mip) are laid out *mip-shaped*: a region
//! covering their texels, one row of texel blocks every `pitch` bytes (the
//! region's row rounded up to 256, as `copy_buffer_to_texture` requires).
//! Tiles side by side then share rows, and one copy moves the whole region.
//! Only texels of parts in the submission are ever copied: parts are grouped
//! into runs contiguous in raster order, and runs of equal width stacked
//! without gaps become one rectangle. Whole mips take one copy; any run of
//! tiles contiguous in raster order takes at most three.
//!
//! Buffer parts that are contiguous in their destination buffer share one
//! region and one `copy_buffer_to_buffer`.

use std::collections::BTreeMap;

use super::texture::{copy_extent, RegionLayout};

/// Where one part's bytes go, as the batch sees it.
#[derive(Clone)]
pub(crate) enum PartDest<'a> {
    /// `len` bytes at `offset` of `buffer`.
    Buffer {
        /// The destination buffer.
        buffer: &'a wgpu::Buffer,
        /// Byte offset (a multiple of 4).
        offset: u64,
        /// Bytes the part delivers.
        len: u64,
    },
    /// A texel region of one mip.
    Texture {
        /// The destination texture.
        texture: &'a wgpu::Texture,
        /// Its mip level.
        mip: u32,
        /// The region's texel origin.
        origin: wgpu::Origin3d,
        /// Texels wide.
        width: u32,
        /// Texels high.
        height: u32,
        /// Row bytes and rows of the part's data.
        layout: RegionLayout,
    },
}

/// Where a part's bytes are written: the decode or copy pass writes row `r`
/// at `dst_offset + r * row_pitch` (`row_pitch` 0 for linear bytes) of the
/// output scratch, or of a destination buffer's binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutPlace {
    pub dst_offset: u64,
    pub row_pitch: u32,
    /// `None`: the scratch. `Some(g)`: `OutputPlan::direct[g]`'s binding.
    pub direct: Option<usize>,
}

/// A range of a destination buffer that a batch's passes write directly,
/// bound as their output: no scratch, no copy.
#[derive(Debug)]
pub(crate) struct DirectOutput {
    pub buffer: wgpu::Buffer,
    /// The binding's start in the buffer (on the storage-offset alignment).
    pub offset: u64,
    pub size: u64,
}

/// When a destination buffer is written directly instead of through the
/// scratch: it has `STORAGE` usage and at least `min_parts` parts in the
/// batch (each such buffer costs the batch a pass of its own, so small
/// groups are cheaper through the scratch and one copy), and a binding
/// covering them meets the device's rules.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DirectRule {
    pub min_parts: usize,
    /// `min_storage_buffer_offset_alignment`.
    pub align: u64,
    /// `max_storage_buffer_binding_size`.
    pub max_binding: u64,
    /// The binding's size must be a multiple of this (16 for decoders
    /// that store 16-byte units, else 4).
    pub unit: u64,
    /// Direct groups allowed in one batch.
    pub max_groups: usize,
}

/// One copy out of the scratch.
#[derive(Debug)]
pub(crate) enum OutCopy {
    Buffer {
        src_offset: u64,
        buffer: wgpu::Buffer,
        dst_offset: u64,
        len: u64,
    },
    Texture {
        src_offset: u64,
        bytes_per_row: u32,
        rows: u32,
        texture: wgpu::Texture,
        mip: u32,
        origin: wgpu::Origin3d,
        extent: wgpu::Extent3d,
    },
}

/// The scratch layout and the copies of one submission.
#[derive(Debug, Default)]
pub(crate) struct OutputPlan {
    /// Bytes of scratch needed.
    pub size: u64,
    /// Per part, in the order given.
    pub places: Vec<OutPlace>,
    /// The copies to record after the passes that fill the scratch.
    pub copies: Vec<OutCopy>,
    /// Destination buffers written directly (see [`DirectRule`]).
    pub direct: Vec<DirectOutput>,
}

/// A texture part in texel-block units.
#[derive(Clone, Copy)]
struct Rect {
    part: usize,
    x: u32,
    y: u32,
    w: u32,
    h: u32,
    /// Texel extent (edge parts stop inside their last block).
    tx1: u32,
    ty1: u32,
}

/// Plans the scratch layout, the buffers written directly (where `direct`
/// allows) and the copies for `dests`.
pub(crate) fn plan_outputs(dests: &[PartDest<'_>], direct: Option<DirectRule>) -> OutputPlan {
    let mut plan = OutputPlan {
        size: 0,
        places: vec![
            OutPlace {
                dst_offset: 0,
                row_pitch: 0,
                direct: None,
            };
            dests.len()
        ],
        copies: Vec::new(),
        direct: Vec::new(),
    };
    let mut buffers: Groups<&wgpu::Buffer> = Groups::default();
    // Keyed by texture, mip and array layer.
    let mut textures: Groups<(&wgpu::Texture, u32, u32)> = Groups::default();
    for (i, d) in dests.iter().enumerate() {
        match d {
            PartDest::Buffer { buffer, .. } => buffers.push(buffer, i),
            PartDest::Texture {
                texture,
                mip,
                origin,
                ..
            } => textures.push((texture, *mip, origin.z), i),
        }
    }
    for (buffer, mut parts) in buffers.into_sorted() {
        let at = |i: usize| match &dests[i] {
            PartDest::Buffer { offset, len, .. } => (*offset, *len),
            PartDest::Texture { .. } => unreachable!("grouped as a buffer"),
        };
        parts.sort_by_key(|&i| at(i).0);
        if let Some(g) = direct.and_then(|rule| direct_binding(buffer, &parts, &at, rule, &plan)) {
            for &i in &parts {
                plan.places[i] = OutPlace {
                    dst_offset: at(i).0 - g.offset,
                    row_pitch: 0,
                    direct: Some(plan.direct.len()),
                };
            }
            plan.direct.push(g);
            continue;
        }
        let mut k = 0;
        while k < parts.len() {
            let (start, _) = at(parts[k]);
            let mut end = start;
            let base = plan.size;
            // A run: each part starts where the previous ended, on a word.
            while k < parts.len() {
                let (off, len) = at(parts[k]);
                if off != end || end % 4 != 0 {
                    break;
                }
                plan.places[parts[k]] = OutPlace {
                    dst_offset: base + (off - start),
                    row_pitch: 0,
                    direct: None,
                };
                end = off + len;
                k += 1;
            }
            if end == start {
                // An empty or misaligned part stands alone.
                let (off, len) = at(parts[k]);
                plan.places[parts[k]] = OutPlace {
                    dst_offset: base,
                    row_pitch: 0,
                    direct: None,
                };
                end = off + len;
                k += 1;
            }
            let len = (end - start).next_multiple_of(4);
            plan.size = (base + len).next_multiple_of(256);
            if len > 0 {
                plan.copies.push(OutCopy::Buffer {
                    src_offset: base,
                    buffer: buffer.clone(),
                    dst_offset: start,
                    len,
                });
            }
        }
    }
    for ((texture, mip, layer), parts) in textures.into_sorted() {
        let format = texture.format();
        let bpb = format.block_copy_size(None).unwrap_or(4);
        let rects = texture_rects(dests, &parts, format);
        for region in regions(&rects) {
            place_region(
                &mut plan,
                texture,
                (mip, layer),
                format,
                bpb,
                &rects[region],
            );
        }
    }
    plan
}

/// The rectangles of texture parts `parts` of `dests` (all of one mip, in
/// `format`), in raster order.
fn texture_rects(
    dests: &[PartDest<'_>],
    parts: &[usize],
    format: wgpu::TextureFormat,
) -> Vec<Rect> {
    let (bw, bh) = format.block_dimensions();
    let bpb = format.block_copy_size(None).unwrap_or(4);
    let mut rects: Vec<Rect> = parts
        .iter()
        .filter_map(|&i| match &dests[i] {
            PartDest::Texture {
                origin,
                width,
                height,
                layout,
                ..
            } => Some(Rect {
                part: i,
                x: origin.x / bw,
                y: origin.y / bh,
                w: layout.row_bytes / bpb,
                h: layout.rows,
                tx1: origin.x + width,
                ty1: origin.y + height,
            }),
            PartDest::Buffer { .. } => None,
        })
        .collect();
    rects.sort_by_key(|r| (r.y, r.x));
    rects
}

/// Of `dests`, texture parts of one mip of one texture, the ones in an
/// unfinished row: the parts the last of their copies (in raster order)
/// moves, when that copy stops short of the mip's right edge. Empty when the
/// last copy spans the mip's width. A submission that holds those back for
/// the next one, where the rest of their row follows, copies the others as
/// whole rows.
pub(crate) fn unfinished_row(dests: &[PartDest<'_>]) -> Vec<usize> {
    let Some(PartDest::Texture { texture, mip, .. }) = dests.first() else {
        return Vec::new();
    };
    let all: Vec<usize> = (0..dests.len()).collect();
    let rects = texture_rects(dests, &all, texture.format());
    unfinished_in(&rects, (texture.width() >> mip).max(1))
}

/// [`unfinished_row`] of `rects` (in raster order) in a mip `mip_width`
/// texels wide.
fn unfinished_in(rects: &[Rect], mip_width: u32) -> Vec<usize> {
    let Some(last) = regions(rects).pop() else {
        return Vec::new();
    };
    let region = &rects[last];
    // A region's runs span the same columns: its last rect ends them all.
    match region.last() {
        Some(r) if r.tx1 < mip_width => region.iter().map(|r| r.part).collect(),
        _ => Vec::new(),
    }
}

/// The binding through which a batch writes `parts` (sorted by offset) of
/// `buffer` directly, if `rule` allows it.
fn direct_binding(
    buffer: &wgpu::Buffer,
    parts: &[usize],
    at: &impl Fn(usize) -> (u64, u64),
    rule: DirectRule,
    plan: &OutputPlan,
) -> Option<DirectOutput> {
    if parts.len() < rule.min_parts
        || plan.direct.len() >= rule.max_groups
        || !buffer.usage().contains(wgpu::BufferUsages::STORAGE)
    {
        return None;
    }
    let first = at(*parts.first()?).0;
    let end = parts
        .iter()
        .map(|&i| at(i).0 + at(i).1.next_multiple_of(4))
        .max()?;
    let offset = first - first % rule.align.max(1);
    let size = (end - offset).next_multiple_of(rule.unit.max(4));
    (offset + size <= buffer.size() && size <= rule.max_binding).then(|| DirectOutput {
        buffer: buffer.clone(),
        offset,
        size,
    })
}

/// Part indices grouped by destination, in the order of the keys. A
/// batch's parts come mostly in runs of one destination (the tiles of one
/// mip are neighbours in the pack), so a part of the same destination as
/// the one before skips the map: comparing wgpu handles was a twentieth of
/// the submission thread's own work with a map probe per part.
struct Groups<K> {
    index: BTreeMap<K, usize>,
    lists: Vec<Vec<usize>>,
    last: Option<(K, usize)>,
}

impl<K> Default for Groups<K> {
    fn default() -> Self {
        Groups {
            index: BTreeMap::new(),
            lists: Vec::new(),
            last: None,
        }
    }
}

impl<K: Ord + Copy> Groups<K> {
    fn push(&mut self, key: K, part: usize) {
        let g = match self.last {
            Some((k, g)) if k == key => g,
            _ => {
                let next = self.lists.len();
                let g = *self.index.entry(key).or_insert(next);
                if g == next {
                    self.lists.push(Vec::new());
                }
                self.last = Some((key, g));
                g
            }
        };
        self.lists[g].push(part);
    }

    fn into_sorted(mut self) -> impl Iterator<Item = (K, Vec<usize>)> {
        self.index
            .into_iter()
            .map(move |(k, g)| (k, std::mem::take(&mut self.lists[g])))
    }
}

/// Groups rects (sorted by row, then column) into rectangles that each hold
/// exactly the rects in them: runs contiguous in a row, stacked while they
/// span the same columns. A run is a stretch of the sorted rects and a
/// stack joins a run only to the one just before it, so every rectangle is
/// a range of `rects`.
fn regions(rects: &[Rect]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    // (first column, end column, end row, texel end column) of the last run.
    let mut last: Option<(u32, u32, u32, u32)> = None;
    let mut i = 0;
    while i < rects.len() {
        // A run: same row and height, each starting where the previous ended.
        let mut j = i + 1;
        while j < rects.len() {
            let (l, r) = (&rects[j - 1], &rects[j]);
            if !(l.y == r.y && l.h == r.h && l.x + l.w == r.x && l.ty1 == r.ty1) {
                break;
            }
            j += 1;
        }
        let (first, l) = (&rects[i], &rects[j - 1]);
        let span = (first.x, l.x + l.w, l.y + l.h, l.tx1);
        // Stack it on the last run if it spans the same columns (in blocks
        // and in texels) and starts at the row where that one ended.
        let stacks = last.is_some_and(|(x0, x1, y1, tx1)| {
            (x0, x1, tx1) == (span.0, span.1, span.3) && y1 == first.y
        });
        last = Some(span);
        match out.last_mut() {
            Some(region) if stacks => region.end = j,
            _ => out.push(i..j),
        }
        i = j;
    }
    out
}

fn place_region(
    plan: &mut OutputPlan,
    texture: &wgpu::Texture,
    (mip, layer): (u32, u32),
    format: wgpu::TextureFormat,
    bpb: u32,
    region: &[Rect],
) {
    let (bw, bh) = format.block_dimensions();
    let x0 = region.iter().map(|r| r.x).min().unwrap_or(0);
    let y0 = region.iter().map(|r| r.y).min().unwrap_or(0);
    let x1 = region.iter().map(|r| r.x + r.w).max().unwrap_or(0);
    let y1 = region.iter().map(|r| r.y + r.h).max().unwrap_or(0);
    let tx1 = region.iter().map(|r| r.tx1).max().unwrap_or(0);
    let ty1 = region.iter().map(|r| r.ty1).max().unwrap_or(0);
    let row = (x1 - x0) * bpb;
    let pitch = row.next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
    let rows = y1 - y0;
    let base = plan.size;
    for r in region {
        plan.places[r.part] = OutPlace {
            dst_offset: base + (r.y - y0) as u64 * pitch as u64 + ((r.x - x0) * bpb) as u64,
            row_pitch: pitch,
            direct: None,
        };
    }
    let size = if rows == 0 {
        0
    } else {
        pitch as u64 * (rows as u64 - 1) + row as u64
    };
    plan.size = (base + size).next_multiple_of(256);
    if rows > 0 && row > 0 {
        plan.copies.push(OutCopy::Texture {
            src_offset: base,
            bytes_per_row: pitch,
            rows,
            texture: texture.clone(),
            mip,
            origin: wgpu::Origin3d {
                x: x0 * bw,
                y: y0 * bh,
                z: layer,
            },
            extent: copy_extent(format, tx1 - x0 * bw, ty1 - y0 * bh),
        });
    }
}

/// The texture mips one submission's copies write, each counted once:
/// what "texture copies per mip per submission" divides by.
#[derive(Default)]
pub(crate) struct MipsTouched(Vec<(wgpu::Texture, u32)>);

impl MipsTouched {
    /// Notes a copy into `mip` of `texture`.
    pub fn add(&mut self, texture: &wgpu::Texture, mip: u32) {
        self.0.push((texture.clone(), mip));
    }

    /// The distinct mips noted.
    pub fn count(mut self) -> u64 {
        self.0.sort();
        self.0.dedup();
        self.0.len() as u64
    }
}

/// Records `copies` from `scratch`, noting the mips they write in `mips`;
/// returns (commands, texture copies).
pub(crate) fn record_copies(
    enc: &mut wgpu::CommandEncoder,
    scratch: &wgpu::Buffer,
    copies: &[OutCopy],
    mips: &mut MipsTouched,
) -> (u64, u64) {
    let mut textures = 0;
    for c in copies {
        match c {
            OutCopy::Buffer {
                src_offset,
                buffer,
                dst_offset,
                len,
            } => enc.copy_buffer_to_buffer(scratch, *src_offset, buffer, *dst_offset, *len),
            OutCopy::Texture {
                src_offset,
                bytes_per_row,
                rows,
                texture,
                mip,
                origin,
                extent,
            } => {
                textures += 1;
                mips.add(texture, *mip);
                enc.copy_buffer_to_texture(
                    wgpu::TexelCopyBufferInfo {
                        buffer: scratch,
                        layout: wgpu::TexelCopyBufferLayout {
                            offset: *src_offset,
                            bytes_per_row: Some(*bytes_per_row),
                            rows_per_image: Some(*rows),
                        },
                    },
                    wgpu::TexelCopyTextureInfo {
                        texture,
                        mip_level: *mip,
                        origin: *origin,
                        aspect: wgpu::TextureAspect::All,
                    },
                    *extent,
                );
            }
        }
    }
    (copies.len() as u64, textures)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4x4-block tiles on a grid, in raster order, as `regions` gets them.
    fn tiles(cells: &[(u32, u32)]) -> Vec<Rect> {
        let mut v: Vec<Rect> = cells
            .iter()
            .enumerate()
            .map(|(part, &(tx, ty))| Rect {
                part,
                x: tx * 4,
                y: ty * 4,
                w: 4,
                h: 4,
                tx1: (tx * 4 + 4) * 4,
                ty1: (ty * 4 + 4) * 4,
            })
            .collect();
        v.sort_by_key(|r| (r.y, r.x));
        v
    }

    /// The regions of `rects` as the rects in them.
    fn grouped(rects: &[Rect]) -> Vec<Vec<Rect>> {
        regions(rects)
            .into_iter()
            .map(|r| rects[r].to_vec())
            .collect()
    }

    /// Every region is a full rectangle of the tiles in it.
    fn check_exact(regions: &[Vec<Rect>]) {
        for reg in regions {
            let x0 = reg.iter().map(|r| r.x).min().unwrap();
            let x1 = reg.iter().map(|r| r.x + r.w).max().unwrap();
            let y0 = reg.iter().map(|r| r.y).min().unwrap();
            let y1 = reg.iter().map(|r| r.y + r.h).max().unwrap();
            let area: u32 = reg.iter().map(|r| r.w * r.h).sum();
            assert_eq!(
                area,
                (x1 - x0) * (y1 - y0),
                "a region copies texels of no part"
            );
        }
    }

    #[test]
    fn a_full_mip_is_one_region() {
        let cells: Vec<(u32, u32)> = (0..4).flat_map(|y| (0..5).map(move |x| (x, y))).collect();
        let r = grouped(&tiles(&cells));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].len(), 20);
        check_exact(&r);
    }

    #[test]
    fn a_raster_run_is_at_most_three_regions() {
        let all: Vec<(u32, u32)> = (0..6).flat_map(|y| (0..5).map(move |x| (x, y))).collect();
        for start in 0..all.len() {
            for end in start + 1..=all.len() {
                let r = grouped(&tiles(&all[start..end]));
                assert!(r.len() <= 3, "{start}..{end}: {} regions", r.len());
                assert_eq!(r.iter().map(Vec::len).sum::<usize>(), end - start);
                check_exact(&r);
            }
        }
    }

    #[test]
    fn missing_tiles_are_never_covered() {
        // A checkerboard: no two tiles touch, so every tile is its own region.
        let cells: Vec<(u32, u32)> = (0..4)
            .flat_map(|y| (0..4).map(move |x| (x, y)))
            .filter(|(x, y)| (x + y) % 2 == 0)
            .collect();
        let r = grouped(&tiles(&cells));
        assert_eq!(r.len(), cells.len());
        check_exact(&r);
        // A hole in the middle of a 3x3 block.
        let cells: Vec<(u32, u32)> = (0..3)
            .flat_map(|y| (0..3).map(move |x| (x, y)))
            .filter(|&c| c != (1, 1))
            .collect();
        let r = grouped(&tiles(&cells));
        check_exact(&r);
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 8);
    }

    #[test]
    fn holding_back_the_unfinished_row_leaves_whole_rows_on_both_sides() {
        // A mip 5 tiles (80 texels) wide and 6 rows high, cut anywhere by a
        // batch that took it from the start of a row.
        let all: Vec<(u32, u32)> = (0..6).flat_map(|y| (0..5).map(move |x| (x, y))).collect();
        for start in (0..all.len()).step_by(5) {
            for end in start + 1..=all.len() {
                let cut = &all[start..end];
                let rects = tiles(cut);
                let held: Vec<(u32, u32)> = unfinished_in(&rects, 80)
                    .into_iter()
                    .map(|i| cut[i])
                    .collect();
                assert_eq!(held.len(), (end - start) % 5, "{start}..{end}");
                let kept: Vec<(u32, u32)> =
                    cut.iter().copied().filter(|c| !held.contains(c)).collect();
                assert!(grouped(&tiles(&kept)).len() <= 1, "{start}..{end}");
                // The next batch: the held row, then the rest of the mip.
                let next: Vec<(u32, u32)> = held.iter().chain(&all[end..]).copied().collect();
                assert!(grouped(&tiles(&next)).len() <= 1, "{start}..{end}");
            }
        }
        // Whole rows, or a whole mip: nothing is held back.
        assert!(unfinished_in(&tiles(&all), 80).is_empty());
        assert!(unfinished_in(&tiles(&all[5..15]), 80).is_empty());
    }

    #[test]
    fn the_same_tile_twice_is_copied_twice() {
        let r = grouped(&tiles(&[(0, 0), (0, 0), (1, 0)]));
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 3);
        check_exact(&r);
    }
}
