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
    if origin.x % bw != 0 || origin.y % bh != 0 {
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
}
