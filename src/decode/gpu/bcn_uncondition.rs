//! The pipeline that runs `shaders/bcn_uncondition.wgsl` (twin:
//! `decode::cpu_twin::bcn_uncondition`): the pass after the LZ4 decoder
//! that puts BCn-conditioned blocks back in the texture's byte order
//! (`pack::condition`). The decoder writes such a block linearly, in its
//! conditioned order, to a spare region of the output; this pass gathers
//! it to its real output range, linear or in rows padded for
//! `copy_buffer_to_texture`. One workgroup per block, one status word per
//! block in the [`Lz4Status`](crate::decode::Lz4Status) format.

use crate::decode::cpu_twin::bcn_uncondition::{element_bytes, WORKGROUP_SIZE};
use crate::decode::gpu::kernel::{
    check_batch, slice_binding, uniform, upload_table, Access, Kernel,
};
use crate::decode::gpu::lz4_decode::{validate_descs, PassError};
use crate::decode::BlockDesc;

/// The shader's WGSL, without the preamble ([`source`]).
pub const SHADER: &str = include_str!("../../../shaders/bcn_uncondition.wgsl");

/// What the pipeline compiles: [`SHADER`] after the preamble of status
/// codes, limits written from the Rust constants.
pub fn source() -> String {
    crate::decode::gpu::preamble::Preamble {
        codes: crate::decode::gpu::preamble::Codes::Lz4,
        block_desc: false,
    }
    .with(SHADER)
}

/// The compute pipeline putting conditioned blocks back in order.
pub struct UnconditionPipeline {
    kernel: Kernel,
}

impl UnconditionPipeline {
    /// Builds the pipeline for `device` (plain WGSL, every adapter runs it).
    pub fn new(device: &wgpu::Device) -> Self {
        use Access::{Read, ReadWrite, Uniform};
        let kernel = Kernel::new(
            device,
            "bcn_uncondition",
            &source(),
            "bcn_uncondition",
            &[Read, ReadWrite, ReadWrite, Uniform],
            &[("WG", WORKGROUP_SIZE as f64)],
        );
        Self { kernel }
    }

    /// Records one dispatch over `block_count` descriptors of `descs`:
    /// block `i`'s conditioned bytes (`src_size` of them at `src_offset` of
    /// `output`) go back in order to its output range of `output`, and
    /// status word `i` of `status` gets `Lz4Status::Ok` or
    /// `Lz4Status::BadDescriptor`. `reserved[0]` of a descriptor is the
    /// transform id (`BlockTransform::id`).
    ///
    /// The shader checks every descriptor against the binding and its own
    /// ranges; the caller promises that no block's output range overlaps
    /// another's or another's conditioned bytes (use
    /// [`validate_uncondition_descs`] when the table comes from the CPU, as
    /// [`Self::encode_blocks`] does).
    pub fn encode_in(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        descs: wgpu::BufferSlice<'_>,
        output: wgpu::BufferSlice<'_>,
        status: wgpu::BufferSlice<'_>,
        block_count: u32,
    ) -> Result<(), PassError> {
        if block_count == 0 {
            return Ok(());
        }
        let desc_size = std::mem::size_of::<BlockDesc>() as u64;
        let (grid_x, grid_y) = check_batch(
            device,
            &output,
            &[
                ("descriptor table", descs, desc_size),
                ("status buffer", status, 4),
            ],
            block_count,
        )?;
        let params = uniform(
            device,
            "bcn_uncondition params",
            &[block_count, grid_x, 0, 0],
        );
        self.kernel.dispatch(
            device,
            encoder,
            &[
                slice_binding(&descs),
                slice_binding(&output),
                slice_binding(&status),
                params.as_entire_binding(),
            ],
            (grid_x, grid_y),
            None,
        );
        Ok(())
    }

    /// Checks `descs` with [`validate_uncondition_descs`], uploads them and
    /// records the dispatch over all of `output` (see [`Self::encode_in`]).
    pub fn encode_blocks(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        descs: &[BlockDesc],
        output: &wgpu::Buffer,
        status: &wgpu::Buffer,
    ) -> Result<(), PassError> {
        if descs.is_empty() {
            return Ok(());
        }
        validate_uncondition_descs(descs, output.size())?;
        let (table, count) = upload_table(device, "bcn_uncondition descriptors", descs)?;
        self.encode_in(
            device,
            encoder,
            table.slice(..),
            output.slice(..),
            status.slice(..),
            count,
        )
    }
}

/// Checks an un-conditioning table on the CPU: a known transform and
/// `src_size == dst_size` for every block, the layout and disjointness
/// rules of [`validate_descs`] for the output ranges, and no output range
/// overlapping any block's conditioned bytes.
pub fn validate_uncondition_descs(descs: &[BlockDesc], output_len: u64) -> Result<(), PassError> {
    let bad = |block, reason| Err(PassError::BadDescriptor { block, reason });
    for (i, d) in descs.iter().enumerate() {
        // 0 (none) is a plain relayout into rows.
        if d.reserved[0] != 0 && element_bytes(d.reserved[0]) == 0 {
            return bad(i, "reserved[0] is not a BCn transform id");
        }
        if d.src_size != d.dst_size {
            return bad(i, "a conditioned block's src_size must equal its dst_size");
        }
    }
    validate_descs(descs, output_len, output_len)?;
    // Output row spans, sorted, against every conditioned range.
    let mut spans: Vec<(u64, u64, usize)> = Vec::new();
    for (i, d) in descs.iter().enumerate() {
        let (mut left, mut start) = (d.dst_size as u64, d.dst_offset as u64);
        let row = if d.row_bytes == 0 {
            left
        } else {
            d.row_bytes as u64
        };
        while left > 0 {
            let len = left.min(row);
            spans.push((start, start + len, i));
            left -= len;
            start += d.row_pitch as u64;
        }
    }
    spans.sort_unstable();
    for (i, d) in descs.iter().enumerate() {
        let (s, e) = (d.src_offset as u64, d.src_offset as u64 + d.src_size as u64);
        // The first span ending after `s` is the only one that can start
        // before `e` without a later one doing so first.
        let k = spans.partition_point(|sp| sp.1 <= s);
        if let Some(sp) = spans[k..].iter().find(|sp| sp.0 < e) {
            return Err(PassError::Overlap {
                first: i,
                second: sp.2,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shader_validates() {
        crate::decode::gpu::kernel::assert_wgsl_valid(&source());
        crate::decode::gpu::preamble::assert_takes_preamble("bcn_uncondition.wgsl", SHADER);
    }

    #[test]
    fn uncondition_descriptor_checks() {
        let ok = BlockDesc {
            reserved: [1, 0],
            ..BlockDesc::linear(1024, 64, 0, 64)
        };
        assert_eq!(validate_uncondition_descs(&[ok], 2048), Ok(()));
        // Transform 0 is a plain relayout; an unknown id is refused.
        let plain = BlockDesc {
            reserved: [0, 0],
            ..ok
        };
        assert_eq!(validate_uncondition_descs(&[plain], 2048), Ok(()));
        let unknown = BlockDesc {
            reserved: [6, 0],
            ..ok
        };
        assert!(matches!(
            validate_uncondition_descs(&[unknown], 2048),
            Err(PassError::BadDescriptor { block: 0, .. })
        ));
        // Block 1 writes over block 0's conditioned bytes.
        let over = BlockDesc {
            reserved: [2, 0],
            ..BlockDesc::linear(1536, 64, 1040, 64)
        };
        assert!(matches!(
            validate_uncondition_descs(&[ok, over], 2048),
            Err(PassError::Overlap {
                first: 0,
                second: 1
            })
        ));
        // In rows, the padding between rows is free.
        let rows = BlockDesc {
            reserved: [2, 0],
            ..BlockDesc::linear(1536, 64, 960, 64).with_rows(32, 96)
        };
        assert!(validate_uncondition_descs(&[ok, rows], 2048).is_err());
        let rows = BlockDesc {
            reserved: [2, 0],
            ..BlockDesc::linear(1536, 64, 64, 64).with_rows(32, 96)
        };
        assert_eq!(validate_uncondition_descs(&[ok, rows], 2048), Ok(()));
    }
}
