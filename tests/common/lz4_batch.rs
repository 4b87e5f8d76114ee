//! A batch of LZ4 blocks laid out in one input and one output buffer the
//! way the runtime's staging does it, runnable on the GPU and on the twin
//! with the same bytes: the harness of the GPU decoder tests and the `gpu_lz4` bench (which
//! includes this file by path).

use gpustream::decode::cpu_twin::{
    lz4_decode, lz4_decode_v2_counted, lz4_decode_v2_group, Lz4DecodeCounts,
};
use gpustream::decode::gpu::lz4_decode::{Lz4DecodePipeline, PassError};
use gpustream::decode::gpu::BlockPass;
use gpustream::decode::BlockDesc;
use gpustream_tools::gpu::read_buffer;
use gpustream_tools::gpu::GpuContext;
use wgpu::util::DeviceExt;

/// Input bytes, descriptors and output size of one decode batch.
#[derive(Clone, Debug, Default)]
pub struct Lz4Batch {
    input: Vec<u8>,
    descs: Vec<BlockDesc>,
    output_len: u64,
}

/// The buffers after a batch ran: the whole output buffer (as words, guard
/// bytes included) and one status word per block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lz4BatchResult {
    /// The whole output buffer.
    pub output: Vec<u32>,
    /// The status words, one per block.
    pub status: Vec<u32>,
}

impl Lz4BatchResult {
    /// The output bytes.
    pub fn output_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.output)
    }
}

impl Lz4Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a block: its compressed bytes go `src_gap` bytes after the
    /// previous block's (any byte offset), its output `dst_gap` bytes after
    /// the previous block's output range, rounded up to a multiple of 4.
    /// `rows` pads the output rows (`(row_bytes, row_pitch)`). `dst_size`
    /// is the declared size, which a test may set wrong on purpose.
    /// Returns the block's descriptor.
    pub fn push(
        &mut self,
        src: &[u8],
        dst_size: u32,
        src_gap: usize,
        dst_gap: u64,
        rows: Option<(u32, u32)>,
    ) -> BlockDesc {
        self.input.resize(self.input.len() + src_gap, 0x5A);
        let dst_offset = (self.output_len + dst_gap).next_multiple_of(4);
        let mut desc = BlockDesc::linear(
            self.input.len() as u32,
            src.len() as u32,
            dst_offset as u32,
            dst_size,
        );
        if let Some((row_bytes, row_pitch)) = rows {
            desc = desc.with_rows(row_bytes, row_pitch);
        }
        self.input.extend_from_slice(src);
        self.output_len = dst_offset + desc.dst_extent().unwrap_or(0);
        self.descs.push(desc);
        desc
    }

    /// The descriptors, in push order.
    pub fn descs(&self) -> &[BlockDesc] {
        &self.descs
    }

    /// Input bytes, padded to a multiple of 4.
    pub fn input_words(&self) -> Vec<u32> {
        let mut bytes = self.input.clone();
        bytes.resize(bytes.len().next_multiple_of(4).max(4), 0);
        bytemuck::pod_collect_to_vec(&bytes)
    }

    /// Words in the output buffer: a multiple of 4 (the v2 variants with
    /// 16-byte stores bind it as 16-byte units), at least 4.
    pub fn output_words(&self) -> usize {
        (self.output_len.div_ceil(16) as usize).max(1) * 4
    }

    /// Uncompressed bytes the batch declares.
    pub fn uncompressed_len(&self) -> u64 {
        self.descs.iter().map(|d| d.dst_size as u64).sum()
    }

    /// Compressed bytes in the batch (gaps excluded).
    pub fn compressed_len(&self) -> u64 {
        self.descs.iter().map(|d| d.src_size as u64).sum()
    }

    /// Runs the twin over the batch on an output buffer that starts as
    /// `initial` (its length is [`Self::output_words`]).
    pub fn run_twin(&self, initial: &[u32]) -> Lz4BatchResult {
        let input = self.input_words();
        let mut output = initial.to_vec();
        let status = self
            .descs
            .iter()
            .map(|d| lz4_decode(d, &input, &mut output))
            .collect();
        Lz4BatchResult { output, status }
    }

    /// Runs the twin of `pipeline`'s variant (v1, v2 or v2 in pairs, with
    /// its window size, lane count and 16-byte stores or not) over the batch, like [`Self::run_twin`], and adds up what the
    /// v2 twin counts (sequences, barriers, window loads, wide and word
    /// stores; v1's barriers are counted as one per pass and all its stores
    /// as single words, as it runs them).
    pub fn run_twin_for(
        &self,
        pipeline: &Lz4DecodePipeline,
        initial: &[u32],
    ) -> (Lz4BatchResult, Lz4DecodeCounts) {
        let input = self.input_words();
        let mut output = initial.to_vec();
        let mut total = Lz4DecodeCounts::default();
        if pipeline.path().is_pair() {
            // The pair twin: the blocks of each workgroup in turns.
            let mut status = Vec::with_capacity(self.descs.len());
            for group in self
                .descs
                .chunks(pipeline.path().blocks_per_workgroup() as usize)
            {
                let (words, counts) = lz4_decode_v2_group(
                    group,
                    &input,
                    &mut output,
                    pipeline.window_words(),
                    pipeline.workgroup_size(),
                );
                status.extend(words);
                total.sequences += counts.sequences;
                total.barriers += counts.barriers;
                total.turn_barriers += counts.turn_barriers;
                total.window_loads += counts.window_loads;
                total.word_stores += counts.word_stores;
            }
            return (Lz4BatchResult { output, status }, total);
        }
        let status = self
            .descs
            .iter()
            .map(|d| {
                if pipeline.path().is_v2() {
                    let (word, counts) = lz4_decode_v2_counted(
                        d,
                        &input,
                        &mut output,
                        pipeline.window_words(),
                        pipeline.workgroup_size(),
                        pipeline.path().is_wide(),
                    );
                    total.sequences += counts.sequences;
                    total.barriers += counts.barriers;
                    total.window_loads += counts.window_loads;
                    total.wide_stores += counts.wide_stores;
                    total.wide_copies += counts.wide_copies;
                    total.word_stores += counts.word_stores;
                    word
                } else {
                    // Counted with a v2 run first (same sequences; it writes
                    // the same words v1 then writes again); v1 barriers after
                    // each pass, every word a single store.
                    let (_, counts) = lz4_decode_v2_counted(d, &input, &mut output, 32, 32, false);
                    total.sequences += counts.sequences;
                    total.barriers += counts.sequences;
                    total.word_stores += counts.word_stores;
                    lz4_decode(d, &input, &mut output)
                }
            })
            .collect();
        (Lz4BatchResult { output, status }, total)
    }

    /// Runs the batch on the GPU in one dispatch on an output buffer that
    /// starts as `initial`. `None` when the readback failed (device lost).
    pub fn run_gpu(
        &self,
        ctx: &GpuContext,
        pipeline: &Lz4DecodePipeline,
        initial: &[u32],
    ) -> Result<Option<Lz4BatchResult>, PassError> {
        let gpu = self.upload(ctx, initial);
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        gpu.encode(ctx, pipeline, &mut encoder, None)?;
        let out_bytes = gpu.output.size();
        let status_bytes = gpu.status.size();
        let readback = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("lz4 batch readback"),
            size: out_bytes + status_bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(&gpu.output, 0, &readback, 0, out_bytes);
        encoder.copy_buffer_to_buffer(&gpu.status, 0, &readback, out_bytes, status_bytes);
        ctx.queue.submit([encoder.finish()]);
        let Some(bytes) = read_buffer(&ctx.device, &readback) else {
            return Ok(None);
        };
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        let (output, status) = words.split_at(out_bytes as usize / 4);
        Ok(Some(Lz4BatchResult {
            output: output.to_vec(),
            status: status[..self.descs.len()].to_vec(),
        }))
    }

    /// Uploads the batch's buffers (output starting as `initial`), for
    /// callers that dispatch it repeatedly (benches).
    pub fn upload(&self, ctx: &GpuContext, initial: &[u32]) -> Lz4GpuBatch {
        let device = &ctx.device;
        let input = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("lz4 batch input"),
            contents: bytemuck::cast_slice(&self.input_words()),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let mut table = self.descs.clone();
        if table.is_empty() {
            table.push(BlockDesc::default());
        }
        let descs = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("lz4 batch descriptors"),
            contents: bytemuck::cast_slice(&table),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let output = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("lz4 batch output"),
            contents: bytemuck::cast_slice(initial),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        let status = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("lz4 batch status"),
            size: (self.descs.len() as u64 * 4).max(4),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        Lz4GpuBatch {
            input,
            descs,
            output,
            status,
            block_count: self.descs.len() as u32,
        }
    }
}

/// A batch's buffers on the GPU.
pub struct Lz4GpuBatch {
    /// The compressed bytes.
    pub input: wgpu::Buffer,
    /// The descriptor table.
    pub descs: wgpu::Buffer,
    /// The output buffer.
    pub output: wgpu::Buffer,
    /// The status words.
    pub status: wgpu::Buffer,
    /// Blocks in the batch.
    pub block_count: u32,
}

impl Lz4GpuBatch {
    /// Records one decode dispatch of the whole batch, with timestamps
    /// around it when given.
    pub fn encode(
        &self,
        ctx: &GpuContext,
        pipeline: &Lz4DecodePipeline,
        encoder: &mut wgpu::CommandEncoder,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), PassError> {
        pipeline.encode_timed(
            &ctx.device,
            encoder,
            self.input.slice(..),
            &self.descs,
            &self.output,
            &self.status,
            self.block_count,
            timestamp_writes,
        )
    }
}
