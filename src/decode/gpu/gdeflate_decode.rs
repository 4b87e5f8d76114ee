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
#[cfg(feature = "tools")]
use crate::decode::GDeflateStatus;
use crate::decode::Lz4BlockDesc;

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
/// descriptor `i` of `bindings.descs` (an [`Lz4BlockDesc`]: `src_size`
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
        descs: &[Lz4BlockDesc],
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
                    std::mem::size_of::<Lz4BlockDesc>() as u64,
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
    descs: &[Lz4BlockDesc],
    input_len: u64,
    output_len: u64,
) -> Result<(), PassError> {
    validate_descs(descs, input_len, output_len)
}

/// Decodes `pages` (each a GDeflate page and its declared size) on the GPU,
/// 256 pages a dispatch, and reads the output back: for `gpustream verify
/// --gpu` and the tests. A page the shader flags comes back as its status.
#[cfg(feature = "tools")]
pub fn decode_pages(
    ctx: &crate::gpu::GpuContext,
    pipeline: &GDeflateDecodePipeline,
    pages: &[(&[u8], usize)],
) -> Vec<Result<Vec<u8>, GDeflateStatus>> {
    use wgpu::util::DeviceExt;
    let device = &ctx.device;
    let mut results = Vec::with_capacity(pages.len());
    for batch in pages.chunks(256) {
        // Pages back to back at arbitrary byte offsets, as in staging;
        // outputs a whole block apart.
        let mut input = Vec::new();
        let mut descs = Vec::with_capacity(batch.len());
        for (i, &(src, size)) in batch.iter().enumerate() {
            let fits = size <= crate::MAX_BLOCK_SIZE && src.len() <= crate::MAX_BLOCK_SIZE * 2;
            let (src_size, dst_size) = match fits {
                true => (src.len() as u32, size as u32),
                // Left to the shader to flag.
                false => (0, u32::MAX),
            };
            let dst = (i * crate::MAX_BLOCK_SIZE) as u32;
            descs.push(Lz4BlockDesc::linear(
                input.len() as u32,
                src_size,
                dst,
                dst_size,
            ));
            if fits {
                input.extend_from_slice(src);
            }
        }
        input.resize(input.len().next_multiple_of(4).max(4), 0);
        let out_len = (batch.len() * crate::MAX_BLOCK_SIZE) as u64;
        let status_len = (batch.len() as u64 * 4).max(4);
        let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("gdeflate input"),
            contents: &input,
            usage: wgpu::BufferUsages::STORAGE,
        });
        let buffer = |label, size, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
        let output = buffer("gdeflate output", out_len, storage);
        let status = buffer("gdeflate status", status_len, storage);
        let readback = buffer(
            "gdeflate readback",
            out_len + status_len,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut encoder = device.create_command_encoder(&Default::default());
        let recorded = pipeline.encode_in(
            device,
            &mut encoder,
            PassBindings::whole(
                input_buf.slice(..),
                &upload(device, &descs),
                &output,
                &status,
            ),
            batch.len() as u32,
            None,
        );
        let bytes = recorded.ok().and_then(|()| {
            encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, out_len);
            encoder.copy_buffer_to_buffer(&status, 0, &readback, out_len, status_len);
            ctx.queue.submit([encoder.finish()]);
            super::read_buffer(device, &readback)
        });
        let Some(bytes) = bytes else {
            results.extend(batch.iter().map(|_| Err(GDeflateStatus::NotRun)));
            continue;
        };
        let (out, st) = bytes.split_at(out_len as usize);
        results.extend(descs.iter().enumerate().map(|(i, d)| {
            let word = st
                .get(i * 4..i * 4 + 4)
                .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            match GDeflateStatus::from_word(word) {
                GDeflateStatus::Ok => {
                    let at = d.dst_offset as usize;
                    Ok(out[at..at + d.dst_size as usize].to_vec())
                }
                err => Err(err),
            }
        }));
    }
    results
}

/// A descriptor table in a storage buffer.
#[cfg(feature = "tools")]
fn upload(device: &wgpu::Device, descs: &[Lz4BlockDesc]) -> wgpu::Buffer {
    use wgpu::util::DeviceExt;
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("gdeflate descriptors"),
        contents: bytemuck::cast_slice(descs),
        usage: wgpu::BufferUsages::STORAGE,
    })
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
        let ok = Lz4BlockDesc::linear(0, 200, 0, 1000);
        assert_eq!(validate_gdeflate_descs(&[ok], 256, 1024), Ok(()));
        let big = Lz4BlockDesc::linear(0, 200, 0, 65537);
        assert!(validate_gdeflate_descs(&[big], 256, 1 << 20).is_err());
        let overlap = Lz4BlockDesc::linear(0, 200, 996, 8);
        assert!(validate_gdeflate_descs(&[ok, overlap], 256, 1024).is_err());
    }
}
