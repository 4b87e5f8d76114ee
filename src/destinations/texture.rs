//! Texture destinations: the layout rules `copy_buffer_to_texture` imposes
//! and the checks a request's texture region must pass.

/// How texel data for one region is laid out in a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionLayout {
    /// Bytes in one row of texel blocks, tightly packed (as a pack stores it).
    pub row_bytes: u32,
    /// Rows of texel blocks.
    pub rows: u32,
    /// Bytes between rows in a staging buffer: `row_bytes` rounded up to 256,
    /// as `copy_buffer_to_texture` requires for copies of several rows.
    pub row_pitch: u32,
}

impl RegionLayout {
    /// The tightly packed size.
    pub fn tight_size(&self) -> u64 {
        self.row_bytes as u64 * self.rows as u64
    }

    /// The size with rows at `row_pitch`.
    pub fn padded_size(&self) -> u64 {
        if self.rows == 0 {
            0
        } else {
            self.row_pitch as u64 * (self.rows as u64 - 1) + self.row_bytes as u64
        }
    }
}

/// The layout of a `width` x `height` texel region of `format`, or `None`
/// for formats gpustream cannot stream into (depth, planar, ASTC...).
pub fn region_layout(format: wgpu::TextureFormat, width: u32, height: u32) -> Option<RegionLayout> {
    let (bw, bh) = format.block_dimensions();
    let bytes = format.block_copy_size(None)?;
    let row_bytes = width.div_ceil(bw).checked_mul(bytes)?;
    let rows = height.div_ceil(bh);
    let row_pitch = row_bytes.checked_next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT)?;
    Some(RegionLayout {
        row_bytes,
        rows,
        row_pitch,
    })
}

/// A texel rectangle of one mip that holds a contiguous byte range of the
/// mip's tightly packed data (see [`mip_spans`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MipSpan {
    /// The bytes, counted from the start of the mip's data.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
    /// The rectangle's texel origin in the mip.
    pub x: u32,
    /// The rectangle's texel origin in the mip.
    pub y: u32,
    /// Its size in texels (clipped to the mip at the right and bottom).
    pub width: u32,
    /// Its size in texels (clipped to the mip at the right and bottom).
    pub height: u32,
}

/// Splits bytes `start..end` of a `width` x `height` mip's tightly packed
/// `format` data into the rectangles that hold them, in byte order: the
/// rest of a partly covered first row, the whole rows, and the start of a
/// partly covered last row (at most three). A packed-mips block that ends
/// inside a mip delivers its share this way, with no CPU assembly.
///
/// `None` if the range does not fall on texel-block boundaries or leaves
/// the mip's data.
pub fn mip_spans(
    format: wgpu::TextureFormat,
    width: u32,
    height: u32,
    start: u32,
    end: u32,
) -> Option<Vec<MipSpan>> {
    let layout = region_layout(format, width, height)?;
    let (bw, bh) = format.block_dimensions();
    let bpb = format.block_copy_size(None)?;
    let rb = layout.row_bytes;
    if rb == 0
        || start > end
        || end as u64 > layout.tight_size()
        || !start.is_multiple_of(bpb)
        || !end.is_multiple_of(bpb)
    {
        return None;
    }
    // A rectangle of rows `r0..r1` (texel-block rows), columns `c0..c1`
    // (bytes within a row).
    let rect = |r0: u32, r1: u32, c0: u32, c1: u32| MipSpan {
        start: r0 * rb + c0,
        end: (r1 - 1) * rb + c1,
        x: c0 / bpb * bw,
        y: r0 * bh,
        width: if c1 == rb {
            width - c0 / bpb * bw
        } else {
            (c1 - c0) / bpb * bw
        },
        height: (r1 * bh).min(height) - r0 * bh,
    };
    let (r0, c0) = (start / rb, start % rb);
    let (r1, c1) = (end / rb, end % rb);
    let mut out = Vec::with_capacity(3);
    if start == end {
        return Some(out);
    }
    if r0 == r1 {
        out.push(rect(r0, r0 + 1, c0, c1));
        return Some(out);
    }
    let mut first_full = r0;
    if c0 != 0 {
        out.push(rect(r0, r0 + 1, c0, rb));
        first_full = r0 + 1;
    }
    if r1 > first_full {
        out.push(rect(first_full, r1, 0, rb));
    }
    if c1 != 0 {
        out.push(rect(r1, r1 + 1, 0, c1));
    }
    Some(out)
}

/// Why a texture region cannot receive a request's data.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextureRegionError {
    /// The texture's format differs from the data's.
    #[error("texture format {got:?} does not match the data's {expected:?}")]
    WrongFormat {
        /// The data's format.
        expected: wgpu::TextureFormat,
        /// The texture's.
        got: wgpu::TextureFormat,
    },
    /// The texture lacks `COPY_DST`.
    #[error("texture lacks COPY_DST usage")]
    MissingCopyDst,
    /// The mip level does not exist.
    #[error("mip {mip} does not exist (texture has {count})")]
    NoSuchMip {
        /// The mip asked for.
        mip: u32,
        /// Mips in the texture.
        count: u32,
    },
    /// The array layer does not exist.
    #[error("array layer {layer} does not exist (texture has {count})")]
    NoSuchLayer {
        /// The layer asked for.
        layer: u32,
        /// Layers in the texture.
        count: u32,
    },
    /// The region reaches outside the mip.
    #[error(
        "region at ({x},{y}) of {width}x{height} is outside mip {mip} of {mip_width}x{mip_height}"
    )]
    OutOfBounds {
        /// Region origin x.
        x: u32,
        /// Region origin y.
        y: u32,
        /// Region width.
        width: u32,
        /// Region height.
        height: u32,
        /// The mip.
        mip: u32,
        /// The mip's width.
        mip_width: u32,
        /// The mip's height.
        mip_height: u32,
    },
    /// The origin is not on a texel-block boundary.
    #[error("origin ({x},{y}) is not a multiple of the {bw}x{bh} texel block")]
    Unaligned {
        /// Origin x.
        x: u32,
        /// Origin y.
        y: u32,
        /// Block width.
        bw: u32,
        /// Block height.
        bh: u32,
    },
    /// The region's extent differs from the data's.
    #[error("region of {got:?} does not match the data's extent {expected:?}")]
    WrongExtent {
        /// The data's extent.
        expected: (u32, u32),
        /// The region's.
        got: (u32, u32),
    },
}

/// Checks that `texture` can take a `width` x `height` region of `format`
/// data at `origin` (x, y, array layer) of mip `mip`.
pub fn check_region(
    texture: &wgpu::Texture,
    format: wgpu::TextureFormat,
    mip: u32,
    origin: wgpu::Origin3d,
    width: u32,
    height: u32,
) -> Result<(), TextureRegionError> {
    if texture.format() != format {
        return Err(TextureRegionError::WrongFormat {
            expected: format,
            got: texture.format(),
        });
    }
    if !texture.usage().contains(wgpu::TextureUsages::COPY_DST) {
        return Err(TextureRegionError::MissingCopyDst);
    }
    if mip >= texture.mip_level_count() {
        return Err(TextureRegionError::NoSuchMip {
            mip,
            count: texture.mip_level_count(),
        });
    }
    let layers = texture.depth_or_array_layers();
    if origin.z >= layers {
        return Err(TextureRegionError::NoSuchLayer {
            layer: origin.z,
            count: layers,
        });
    }
    let (bw, bh) = format.block_dimensions();
    if !origin.x.is_multiple_of(bw) || !origin.y.is_multiple_of(bh) {
        return Err(TextureRegionError::Unaligned {
            x: origin.x,
            y: origin.y,
            bw,
            bh,
        });
    }
    // The mip's size in texels, rounded up to whole blocks: BC mips smaller
    // than a block are still copied as one whole block.
    let mw = (texture.width() >> mip).max(1);
    let mh = (texture.height() >> mip).max(1);
    let pw = mw.next_multiple_of(bw);
    let ph = mh.next_multiple_of(bh);
    let fits = |o: u32, e: u32, lim: u32| o.checked_add(e).is_some_and(|end| end <= lim);
    if !fits(origin.x, width, pw) || !fits(origin.y, height, ph) {
        return Err(TextureRegionError::OutOfBounds {
            x: origin.x,
            y: origin.y,
            width,
            height,
            mip,
            mip_width: mw,
            mip_height: mh,
        });
    }
    Ok(())
}

/// The extent to copy for a region: texels rounded up to whole blocks, but
/// clipped to the mip's physical size as wgpu wants it.
pub(crate) fn copy_extent(format: wgpu::TextureFormat, width: u32, height: u32) -> wgpu::Extent3d {
    let (bw, bh) = format.block_dimensions();
    wgpu::Extent3d {
        width: width.next_multiple_of(bw),
        height: height.next_multiple_of(bh),
        depth_or_array_layers: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_of_full_tiles_need_no_padding() {
        let l = region_layout(wgpu::TextureFormat::Bc7RgbaUnorm, 256, 256).unwrap();
        assert_eq!((l.row_bytes, l.rows, l.row_pitch), (1024, 64, 1024));
        assert_eq!(l.tight_size(), 65536);
        let l = region_layout(wgpu::TextureFormat::Bc1RgbaUnorm, 512, 256).unwrap();
        assert_eq!(l.tight_size(), 65536);
        let l = region_layout(wgpu::TextureFormat::Rgba8Unorm, 128, 128).unwrap();
        assert_eq!(l.tight_size(), 65536);
        let l = region_layout(wgpu::TextureFormat::Rgba8Unorm, 5, 3).unwrap();
        assert_eq!((l.row_bytes, l.rows, l.row_pitch), (20, 3, 256));
        assert_eq!(l.padded_size(), 512 + 20);
    }

    /// Every byte range on block boundaries of a few mips splits into
    /// rectangles that hold exactly its bytes, in order.
    #[test]
    fn mip_spans_cover_exactly_the_range() {
        for (format, w, h) in [
            (wgpu::TextureFormat::Bc7RgbaUnorm, 64, 32),
            (wgpu::TextureFormat::Bc1RgbaUnorm, 20, 12),
            (wgpu::TextureFormat::Bc7RgbaUnorm, 2, 2),
            (wgpu::TextureFormat::Rgba8Unorm, 7, 5),
        ] {
            let l = region_layout(format, w, h).unwrap();
            let bpb = format.block_copy_size(None).unwrap();
            let (bw, bh) = format.block_dimensions();
            let size = l.tight_size() as u32;
            for start in (0..=size).step_by(bpb as usize) {
                for end in (start..=size).step_by(bpb as usize) {
                    let spans = mip_spans(format, w, h, start, end).unwrap();
                    assert!(spans.len() <= 3);
                    let mut at = start;
                    for s in &spans {
                        assert_eq!(s.start, at, "{format:?} {start}..{end}");
                        let rl = region_layout(format, s.width, s.height).unwrap();
                        assert_eq!((s.end - s.start) as u64, rl.tight_size());
                        // The rectangle's first byte is where it starts.
                        assert_eq!(s.start, s.y / bh * l.row_bytes + s.x / bw * bpb);
                        assert!(s.x + s.width <= w && s.y + s.height <= h);
                        at = s.end;
                    }
                    assert_eq!(at, end);
                }
            }
        }
        assert!(mip_spans(wgpu::TextureFormat::Bc7RgbaUnorm, 64, 32, 8, 16).is_none());
        assert!(mip_spans(wgpu::TextureFormat::Bc7RgbaUnorm, 64, 32, 0, 4096).is_none());
    }
}
