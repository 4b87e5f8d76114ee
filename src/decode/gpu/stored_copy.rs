//! The pipeline that runs `shaders/stored_copy.wgsl` (twin:
//! `decode::cpu_twin::stored_copy`): blocks stored uncompressed (codec
//! `none`) copied from the input binding, at any byte offset, to their
//! output ranges (linear or rows padded for `copy_buffer_to_texture`); many
//! blocks per dispatch, one workgroup per block, one status word per block
//! in the [`Lz4Status`](crate::decode::Lz4Status) format.

use crate::decode::cpu_twin::stored_copy::WORKGROUP_SIZE;
use crate::decode::gpu::kernel::{
    check_batch, slice_binding, uniform, Access, BlockPass, Kernel, PassBindings,
};
use crate::decode::gpu::lz4_decode::{validate_descs, PassError};
use crate::decode::BlockDesc;

/// The shader's WGSL, without the preamble ([`source`]).
pub const SHADER: &str = include_str!("../../../shaders/stored_copy.wgsl");

/// What the pipeline compiles: [`SHADER`] after the preamble of status
/// codes, limits and the block descriptor written from the Rust constants.
pub fn source() -> String {
    crate::decode::gpu::preamble::Preamble {
        codes: crate::decode::gpu::preamble::Codes::Lz4,
        block_desc: true,
    }
    .with(SHADER)
}

/// The compute pipeline copying batches of stored blocks on the GPU.
pub struct StoredCopyPipeline {
    kernel: Kernel,
}

impl StoredCopyPipeline {
    /// Builds the pipeline for `device` (plain WGSL, every adapter runs it).
    pub fn new(device: &wgpu::Device) -> Self {
        use Access::{Read, ReadWrite, Uniform};
        // The output is bound twice: as words, and as 16-byte units for
        // the aligned middle of a block.
        let kernel = Kernel::new(
            device,
            "stored_copy",
            &source(),
            "stored_copy",
            &[Read, Read, ReadWrite, ReadWrite, Uniform, ReadWrite],
            &[("WG", WORKGROUP_SIZE as f64)],
        );
        Self { kernel }
    }
}

/// [`Self::encode_timed`] over ranges of buffers (see
/// [`crate::decode::gpu::Lz4DecodePipeline::encode_in`]): the output
/// slice is bound as words and as 16-byte units alike.
impl BlockPass for StoredCopyPipeline {
    const TABLE_LABEL: &'static str = "stored_copy descriptors";

    fn validate_table(
        &self,
        descs: &[BlockDesc],
        input_len: u64,
        output_len: u64,
    ) -> Result<(), PassError> {
        validate_stored_descs(descs, input_len, output_len)
    }

    fn encode_in(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        bindings: PassBindings<'_>,
        block_count: u32,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), PassError> {
        let PassBindings {
            input,
            descs,
            output,
            status,
        } = bindings;
        if block_count == 0 {
            return Ok(());
        }
        let desc_size = std::mem::size_of::<BlockDesc>() as u64;
        let (grid_x, grid_y) = check_batch(
            device,
            &input,
            &[
                ("descriptor table", descs, desc_size),
                ("output", output, 0),
                ("status buffer", status, 4),
            ],
            block_count,
        )?;
        let params = uniform(device, "stored_copy params", &[block_count, grid_x, 0, 0]);
        self.kernel.dispatch(
            device,
            encoder,
            &[
                slice_binding(&input),
                slice_binding(&descs),
                slice_binding(&output),
                slice_binding(&status),
                params.as_entire_binding(),
                slice_binding(&output),
            ],
            (grid_x, grid_y),
            timestamp_writes,
        );
        Ok(())
    }
}

/// Checks a stored-block descriptor table on the CPU: `src_size ==
/// dst_size` for every block, then the rules of [`validate_descs`] (layout,
/// both bindings, disjoint output ranges).
pub fn validate_stored_descs(
    descs: &[BlockDesc],
    input_len: u64,
    output_len: u64,
) -> Result<(), PassError> {
    if let Some(block) = descs.iter().position(|d| d.src_size != d.dst_size) {
        return Err(PassError::BadDescriptor {
            block,
            reason: "a stored block's src_size must equal its dst_size",
        });
    }
    validate_descs(descs, input_len, output_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shader_validates() {
        crate::decode::gpu::kernel::assert_wgsl_valid(&source());
        crate::decode::gpu::preamble::assert_takes_preamble("stored_copy.wgsl", SHADER);
    }

    #[test]
    fn stored_descriptor_checks() {
        let ok = BlockDesc::linear(3, 10, 0, 10);
        assert_eq!(validate_stored_descs(&[ok], 13, 12), Ok(()));
        let sizes_differ = BlockDesc::linear(3, 10, 16, 12);
        assert!(matches!(
            validate_stored_descs(&[ok, sizes_differ], 13, 64),
            Err(PassError::BadDescriptor { block: 1, .. })
        ));
        let overlap = BlockDesc::linear(0, 4, 8, 4);
        assert!(matches!(
            validate_stored_descs(&[ok, overlap], 13, 64),
            Err(PassError::Overlap { .. })
        ));
    }
}
