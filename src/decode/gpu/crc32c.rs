//! The pipeline that runs `shaders/crc32c.wgsl` (twin:
//! `decode::cpu_twin::crc32c`): checks the crc32c of thousands of stored
//! blocks in one dispatch on the GPU, where the bytes already are, instead
//! of reading them back out of write-combined staging memory on the CPU.
//! One workgroup per block; per block a status word
//! ([`check_code`]) and the computed checksum, so the host can name both
//! values in its error ([`BlockCheck::from_words`]).

pub use crate::decode::cpu_twin::crc32c::{check_code, BlockCheck, BlockCheckDesc};
use crate::decode::cpu_twin::crc32c::{WORKGROUP_SIZE, X8_POW};
use crate::decode::gpu::kernel::{
    check_batch, slice_binding, uniform, upload_table, Access, Kernel,
};
use crate::decode::gpu::lz4_decode::PassError;

/// The shader's WGSL, without the preamble ([`source`]).
pub const SHADER: &str = include_str!("../../../shaders/crc32c.wgsl");

/// What the pipeline compiles: [`SHADER`] after the preamble of status
/// codes, limits written from the Rust constants.
pub fn source() -> String {
    crate::decode::gpu::preamble::Preamble {
        codes: crate::decode::gpu::preamble::Codes::Check,
        block_desc: false,
    }
    .with(SHADER)
}

/// The compute pipeline checking the crc32c of batches of blocks.
pub struct Crc32cPipeline {
    kernel: Kernel,
}

impl Crc32cPipeline {
    /// Builds the pipeline for `device` (plain WGSL, every adapter runs it).
    pub fn new(device: &wgpu::Device) -> Self {
        use Access::{Read, ReadWrite, Uniform};
        let kernel = Kernel::new(
            device,
            "crc32c",
            &source(),
            "crc32c",
            &[Read, Read, ReadWrite, ReadWrite, Uniform],
            &[("WG", WORKGROUP_SIZE as f64)],
        );
        Self { kernel }
    }

    /// Records one dispatch checking `block_count` blocks.
    ///
    /// `input` is the range the descriptors' `src_offset` count from (its
    /// offset must meet the device's storage-offset alignment, its size be a
    /// multiple of 4); `descs` holds at least `block_count`
    /// [`BlockCheckDesc`]s; block `i` writes word `i` of `status` (a
    /// [`check_code`]; clear it to 0 first to tell blocks that never ran)
    /// and word `i` of `computed` (the checksum of its bytes, 0 for a bad
    /// descriptor).
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &wgpu::Buffer,
        status: &wgpu::Buffer,
        computed: &wgpu::Buffer,
        block_count: u32,
    ) -> Result<(), PassError> {
        self.encode_timed(
            device,
            encoder,
            input,
            descs,
            status,
            computed,
            block_count,
            None,
        )
    }

    /// [`Self::encode`] with GPU timestamps written at the start and end of
    /// the pass (needs `Features::TIMESTAMP_QUERY`); for benches.
    #[allow(clippy::too_many_arguments)]
    pub fn encode_timed(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &wgpu::Buffer,
        status: &wgpu::Buffer,
        computed: &wgpu::Buffer,
        block_count: u32,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), PassError> {
        if block_count == 0 {
            return Ok(());
        }
        let desc_size = std::mem::size_of::<BlockCheckDesc>() as u64;
        let (grid_x, grid_y) = check_batch(
            device,
            &input,
            &[
                ("descriptor table", descs.slice(..), desc_size),
                ("status buffer", status.slice(..), 4),
                ("computed-checksum buffer", computed.slice(..), 4),
            ],
            block_count,
        )?;
        let mut params = vec![block_count, grid_x, 0, 0];
        params.extend_from_slice(&X8_POW);
        let params = uniform(device, "crc32c params", &params);
        self.kernel.dispatch(
            device,
            encoder,
            &[
                slice_binding(&input),
                descs.as_entire_binding(),
                status.as_entire_binding(),
                computed.as_entire_binding(),
                params.as_entire_binding(),
            ],
            (grid_x, grid_y),
            timestamp_writes,
        );
        Ok(())
    }

    /// Uploads `descs` as the descriptor table and records the dispatch
    /// (see [`Self::encode`]). The shader checks every range itself, so a
    /// bad descriptor fails its own block only.
    pub fn encode_blocks(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &[BlockCheckDesc],
        status: &wgpu::Buffer,
        computed: &wgpu::Buffer,
    ) -> Result<(), PassError> {
        if descs.is_empty() {
            return Ok(());
        }
        let (table, count) = upload_table(device, "crc32c descriptors", descs)?;
        self.encode(device, encoder, input, &table, status, computed, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shader_validates() {
        crate::decode::gpu::kernel::assert_wgsl_valid(&source());
        crate::decode::gpu::preamble::assert_takes_preamble("crc32c.wgsl", SHADER);
    }

    #[test]
    fn descriptor_is_16_bytes() {
        assert_eq!(std::mem::size_of::<BlockCheckDesc>(), 16);
    }
}
