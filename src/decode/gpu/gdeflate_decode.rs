//! The pipeline that runs `shaders/gdeflate_decode.wgsl` (twin:
//! `decode::cpu_twin::gdeflate_decode`): GDeflate 1.0 pages decoded on the
//! GPU, one 32-lane workgroup per page, from the input binding into the
//! output binding (linear, or rows padded for `copy_buffer_to_texture`),
//! with one status word per page in the
//! [GDeflate status](crate::decode::GDeflateStatus) format.

use crate::decode::cpu_twin::gdeflate_decode::LANES;
use crate::decode::gpu::kernel::{
    check_batch, slice_binding, uniform, Access, BlockPass, Kernel, PassBindings,
};
use crate::decode::gpu::lz4_decode::{validate_descs, PassError};
use crate::decode::BlockDesc;

/// The shader's WGSL, without the preamble ([`source`]).
pub const SHADER: &str = include_str!("../../../shaders/gdeflate_decode.wgsl");

/// What the pipeline compiles: [`SHADER`] after the preamble of status
/// codes, limits and the block descriptor written from the Rust constants.
pub fn source() -> String {
    crate::decode::gpu::preamble::Preamble {
        codes: crate::decode::gpu::preamble::Codes::GDeflate,
        block_desc: true,
    }
    .with(SHADER)
}

/// The compute pipeline decoding GDeflate pages.
pub struct GDeflateDecodePipeline {
    kernel: Kernel,
}

impl GDeflateDecodePipeline {
    /// Builds the pipeline for `device` (plain WGSL: no subgroup feature
    /// needed, about 5.3 KiB of workgroup memory).
    pub fn new(device: &wgpu::Device) -> Self {
        use Access::{Read, ReadWrite, Uniform};
        let kernel = Kernel::new(
            device,
            "gdeflate_decode",
            &source(),
            "gdeflate_decode",
            &[Read, Read, ReadWrite, ReadWrite, Uniform],
            &[("WG", LANES as f64)],
        );
        Self { kernel }
    }
}

/// Records one dispatch over `block_count` pages: page `i` is
/// descriptor `i` of `bindings.descs` (an [`BlockDesc`]: `src_size`
/// bytes of one GDeflate page at `src_offset` of the input decode to
/// `dst_size` bytes at `dst_offset` of the output), and status word `i`
/// gets its [GDeflate status](crate::decode::GDeflateStatus) word.
///
/// The shader checks every descriptor against the bindings and every
/// read and write against the page's own ranges; the caller promises
/// that the pages' output ranges are disjoint (checked on the CPU by
/// [`validate_gdeflate_descs`], as [`Self::encode_blocks`] does). A
/// page's output words are zeroed before it is decoded, the last partial
/// word included, whatever the page holds.
impl BlockPass for GDeflateDecodePipeline {
    const TABLE_LABEL: &'static str = "gdeflate_decode descriptors";

    fn validate_table(
        &self,
        descs: &[BlockDesc],
        input_len: u64,
        output_len: u64,
    ) -> Result<(), PassError> {
        validate_gdeflate_descs(descs, input_len, output_len)
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
        let (grid_x, grid_y) = check_batch(
            device,
            &input,
            &[
                (
                    "descriptor table",
                    descs,
                    std::mem::size_of::<BlockDesc>() as u64,
                ),
                ("output", output, 0),
                ("status buffer", status, 4),
            ],
            block_count,
        )?;
        let params = uniform(
            device,
            "gdeflate_decode params",
            &[block_count, grid_x, 0, 0],
        );
        self.kernel.dispatch(
            device,
            encoder,
            &[
                slice_binding(&input),
                slice_binding(&descs),
                slice_binding(&output),
                slice_binding(&status),
                params.as_entire_binding(),
            ],
            (grid_x, grid_y),
            timestamp_writes,
        );
        Ok(())
    }
}

/// Checks a GDeflate page table on the CPU: the layout, size and
/// disjointness rules of [`validate_descs`] (a page decodes to at most
/// [`crate::MAX_BLOCK_SIZE`] bytes, as GDeflate pages do). The pages'
/// descriptors follow the LZ4 blocks' rules, so this is one rule, named
/// for the callers of this pipeline.
pub fn validate_gdeflate_descs(
    descs: &[BlockDesc],
    input_len: u64,
    output_len: u64,
) -> Result<(), PassError> {
    validate_descs(descs, input_len, output_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shader_validates() {
        crate::decode::gpu::kernel::assert_wgsl_valid(&source());
        crate::decode::gpu::preamble::assert_takes_preamble("gdeflate_decode.wgsl", SHADER);
    }

    #[test]
    fn descriptor_checks() {
        let ok = BlockDesc::linear(0, 200, 0, 1000);
        assert_eq!(validate_gdeflate_descs(&[ok], 256, 1024), Ok(()));
        let big = BlockDesc::linear(0, 200, 0, 65537);
        assert!(validate_gdeflate_descs(&[big], 256, 1 << 20).is_err());
        let overlap = BlockDesc::linear(0, 200, 996, 8);
        assert!(validate_gdeflate_descs(&[ok, overlap], 256, 1024).is_err());
    }
}
