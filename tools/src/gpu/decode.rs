//! Blocking GPU decodes for the tools and tests: upload blocks, run one of
//! the library's decode pipelines, read the output and status words back.
//! `verify --gpu`, the decoder tests and the benchmarks use these; the
//! runtime never blocks on a readback like this.

use super::GpuContext;
use gpustream::decode::gpu::{BlockPass, GDeflateDecodePipeline, Lz4DecodePipeline, PassBindings};
use gpustream::decode::{BlockDesc, GDeflateStatus, Lz4Status};
use wgpu::util::DeviceExt;

/// Decodes `blocks` (compressed bytes, uncompressed size) on the GPU of
/// `ctx` with [`Lz4DecodePipeline::new`], in as few dispatches as the
/// device's binding limits allow; for tools (`verify --gpu`) and benches.
/// The result for each block is its bytes or the status the shader
/// reported.
pub fn decode_blocks_on_gpu(
    ctx: &GpuContext,
    blocks: &[(&[u8], usize)],
) -> Vec<Result<Vec<u8>, Lz4Status>> {
    let pipeline = Lz4DecodePipeline::new(&ctx.device);
    decode_blocks_with(ctx, &pipeline, blocks)
}

/// [`decode_blocks_on_gpu`] with a given pipeline.
pub fn decode_blocks_with(
    ctx: &GpuContext,
    pipeline: &Lz4DecodePipeline,
    blocks: &[(&[u8], usize)],
) -> Vec<Result<Vec<u8>, Lz4Status>> {
    let limits = ctx.device.limits();
    let max_binding = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(1 << 30);
    let mut results = Vec::with_capacity(blocks.len());
    let mut start = 0;
    while start < blocks.len() {
        // Grow the batch while its input and output fit one binding each.
        let (mut in_len, mut out_len, mut end) = (0u64, 0u64, start);
        while end < blocks.len() {
            let (src, size) = blocks[end];
            let next_in = in_len + src.len() as u64;
            let next_out = out_len + (size as u64).next_multiple_of(4);
            if end > start && (next_in + 4 > max_binding || next_out + 16 > max_binding) {
                break;
            }
            in_len = next_in;
            out_len = next_out;
            end += 1;
        }
        results.extend(decode_batch(ctx, pipeline, &blocks[start..end]));
        start = end;
    }
    results
}

fn decode_batch(
    ctx: &GpuContext,
    pipeline: &Lz4DecodePipeline,
    blocks: &[(&[u8], usize)],
) -> Vec<Result<Vec<u8>, Lz4Status>> {
    let device = &ctx.device;
    // Blocks sit back to back at arbitrary byte offsets, as in staging.
    let mut input = Vec::new();
    let mut descs = Vec::with_capacity(blocks.len());
    let mut out_len = 0u64;
    for &(src, size) in blocks {
        let sizes_ok = size <= gpustream::MAX_BLOCK_SIZE
            && src.len() <= gpustream::decode::cpu_twin::lz4_decode::MAX_SRC_SIZE as usize;
        let (src_size, dst_size) = if sizes_ok {
            (src.len() as u32, size as u32)
        } else {
            // Left to the shader to flag (its dst_size check fails).
            (0, u32::MAX)
        };
        descs.push(BlockDesc::linear(
            input.len() as u32,
            src_size,
            out_len as u32,
            dst_size,
        ));
        if sizes_ok {
            input.extend_from_slice(src);
            out_len += (size as u64).next_multiple_of(4);
        }
    }
    input.resize(input.len().next_multiple_of(4).max(4), 0);
    // A multiple of 16 for every variant (v2 binds 16-byte units).
    let out_len = out_len.next_multiple_of(16).max(16);

    let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("lz4 input"),
        contents: &input,
        usage: wgpu::BufferUsages::STORAGE,
    });
    let table = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("lz4 descriptors"),
        contents: bytemuck::cast_slice(&descs),
        usage: wgpu::BufferUsages::STORAGE,
    });
    let output = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("lz4 output"),
        size: out_len,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let status_len = (blocks.len() as u64 * 4).max(4);
    let status = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("lz4 status"),
        size: status_len,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("lz4 readback"),
        size: out_len + status_len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    let recorded = pipeline.encode(
        device,
        &mut encoder,
        input_buf.slice(..),
        &table,
        &output,
        &status,
        blocks.len() as u32,
    );
    if recorded.is_err() {
        return blocks.iter().map(|_| Err(Lz4Status::NotRun)).collect();
    }
    encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, out_len);
    encoder.copy_buffer_to_buffer(&status, 0, &readback, out_len, status_len);
    ctx.queue.submit([encoder.finish()]);
    let bytes = read_buffer(device, &readback);
    let Some(bytes) = bytes else {
        return blocks.iter().map(|_| Err(Lz4Status::NotRun)).collect();
    };
    let (out_bytes, status_bytes) = bytes.split_at(out_len as usize);
    descs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let word = u32::from_le_bytes(status_bytes[i * 4..i * 4 + 4].try_into().unwrap());
            match Lz4Status::from_word(word) {
                Lz4Status::Ok => {
                    let at = d.dst_offset as usize;
                    Ok(out_bytes[at..at + d.dst_size as usize].to_vec())
                }
                err => Err(err),
            }
        })
        .collect()
}

/// Maps a MAP_READ buffer after the queue's work and copies it out, or
/// `None` if the mapping failed (device lost).
pub fn read_buffer(device: &wgpu::Device, buffer: &wgpu::Buffer) -> Option<Vec<u8>> {
    let slice = buffer.slice(..);
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device.poll(wgpu::PollType::wait_indefinitely()).ok()?;
    rx.recv().ok()?.ok()?;
    let data = slice.get_mapped_range().ok()?.to_vec();
    buffer.unmap();
    Some(data)
}

/// Decodes `pages` (each a GDeflate page and its declared size) on the GPU,
/// 256 pages a dispatch, and reads the output back: for `gpustream verify
/// --gpu` and the tests. A page the shader flags comes back as its status.
pub fn decode_pages(
    ctx: &GpuContext,
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
            let fits =
                size <= gpustream::MAX_BLOCK_SIZE && src.len() <= gpustream::MAX_BLOCK_SIZE * 2;
            let (src_size, dst_size) = match fits {
                true => (src.len() as u32, size as u32),
                // Left to the shader to flag.
                false => (0, u32::MAX),
            };
            let dst = (i * gpustream::MAX_BLOCK_SIZE) as u32;
            descs.push(BlockDesc::linear(
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
        let out_len = (batch.len() * gpustream::MAX_BLOCK_SIZE) as u64;
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
            read_buffer(device, &readback)
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
fn upload(device: &wgpu::Device, descs: &[BlockDesc]) -> wgpu::Buffer {
    use wgpu::util::DeviceExt;
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("gdeflate descriptors"),
        contents: bytemuck::cast_slice(descs),
        usage: wgpu::BufferUsages::STORAGE,
    })
}
