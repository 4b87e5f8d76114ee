//! Throughput of the stored-block copy and crc32c verification kernels:
//! GB/s of block bytes for batches of 64 KiB blocks at unaligned input
//! offsets, one dispatch per batch, timed with GPU timestamp queries where
//! the adapter has them (wall clock around submit and a full poll
//! otherwise), beside the one-thread CPU figure on the same bytes (memcpy;
//! the `crc32c` crate, hardware CRC instructions where the CPU has them).
//! Every batch is checked once (status words, copied bytes) before it is
//! timed.
//!
//! Run: `WGPU_BACKEND=vulkan cargo bench --bench gpu_kernels`
//! Options (environment): `GPUSTREAM_BENCH_RUNS` (timed runs per batch,
//! median reported; default 5), `GPUSTREAM_BENCH_BATCHES` (comma-separated
//! block counts; default 64,256,1024,4096,8192; batches over the device's
//! storage-binding limit are skipped).

use gpustream::decode::gpu::{
    BlockCheckDesc, BlockPass, Crc32cPipeline, Lz4Status, StoredCopyPipeline,
};
use gpustream::decode::BlockDesc;
use gpustream_tools::gpu::read_buffer;
use gpustream_tools::gpu::{open_device, GpuContext};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;
use wgpu::util::DeviceExt;

const BLOCK: usize = 64 * 1024;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Timer {
    queries: Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
}

impl Timer {
    fn new(ctx: &GpuContext) -> Self {
        let has = ctx
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY);
        let queries = has.then(|| {
            let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("kernel bench"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let buffer = |usage| {
                ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: 16,
                    usage,
                    mapped_at_creation: false,
                })
            };
            (
                set,
                buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
                buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            )
        });
        Self { queries }
    }

    /// Records with `record`, submits, waits; seconds by GPU timestamps
    /// where available, else by wall clock.
    fn run(
        &self,
        ctx: &GpuContext,
        record: impl FnOnce(&mut wgpu::CommandEncoder, Option<wgpu::ComputePassTimestampWrites<'_>>),
    ) -> f64 {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let writes = self
            .queries
            .as_ref()
            .map(|(set, _, _)| wgpu::ComputePassTimestampWrites {
                query_set: set,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            });
        record(&mut encoder, writes);
        if let Some((set, resolve, readback)) = &self.queries {
            encoder.resolve_query_set(set, 0..2, resolve, 0);
            encoder.copy_buffer_to_buffer(resolve, 0, readback, 0, 16);
        }
        let t = Instant::now();
        ctx.queue.submit([encoder.finish()]);
        ctx.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
        let wall = t.elapsed().as_secs_f64();
        let gpu = self.queries.as_ref().and_then(|(_, _, readback)| {
            let bytes = read_buffer(&ctx.device, readback)?;
            let ticks: [u64; 2] = bytemuck::pod_read_unaligned(&bytes[..16]);
            let ns =
                ticks[1].saturating_sub(ticks[0]) as f64 * ctx.queue.get_timestamp_period() as f64;
            (ns > 0.0).then_some(ns / 1e9)
        });
        gpu.unwrap_or(wall)
    }
}

fn storage_buffer(ctx: &GpuContext, contents: &[u8]) -> wgpu::Buffer {
    ctx.device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        })
}

fn main() {
    let ctx = match open_device() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("!!! SKIPPING GPU KERNEL BENCH: {e}");
            return;
        }
    };
    let runs: usize = std::env::var("GPUSTREAM_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let batches: Vec<usize> = std::env::var("GPUSTREAM_BENCH_BATCHES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![64, 256, 1024, 4096, 8192]);
    let limits = ctx.device.limits();
    let max_binding = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    let timer = Timer::new(&ctx);
    let copy = StoredCopyPipeline::new(&ctx.device);
    let crc = Crc32cPipeline::new(&ctx.device);
    println!(
        "# gpu_kernels on {}, timing: {}",
        ctx.describe(),
        if timer.queries.is_some() {
            "GPU timestamps"
        } else {
            "wall clock after a full poll"
        }
    );
    println!("| kernel | blocks | MiB | GPU GB/s | CPU 1 thread GB/s | GPU / CPU |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    // One pool of distinct bytes; blocks start 1 byte apart from alignment.
    let pool: Vec<u8> = (0..(256 * BLOCK + 1024)).map(|_| rng.gen()).collect();
    for &blocks in &batches {
        let bytes = blocks * BLOCK;
        let in_len = (blocks * (BLOCK + 1) + 4).next_multiple_of(4);
        if in_len as u64 > max_binding || bytes as u64 > max_binding {
            println!(
                "| both | {blocks} | {} | skipped: over the storage binding limit | | |",
                bytes >> 20
            );
            continue;
        }
        let mut input = vec![0u8; in_len];
        let mut copy_descs = Vec::with_capacity(blocks);
        let mut check_descs = Vec::with_capacity(blocks);
        let mut crcs = Vec::with_capacity(256);
        for b in 0..blocks.min(256) {
            crcs.push(crc32c::crc32c(&pool[b * BLOCK..][..BLOCK]));
        }
        for b in 0..blocks {
            let src = b * (BLOCK + 1) + 1;
            let k = b % 256;
            input[src..src + BLOCK].copy_from_slice(&pool[k * BLOCK..][..BLOCK]);
            let (s, n) = (src as u32, BLOCK as u32);
            copy_descs.push(BlockDesc::linear(s, n, (b * BLOCK) as u32, n));
            check_descs.push(BlockCheckDesc::new(s, n, crcs[k]));
        }
        let input_buf = storage_buffer(&ctx, &input);
        let copy_table = storage_buffer(&ctx, bytemuck::cast_slice(&copy_descs));
        let check_table = storage_buffer(&ctx, bytemuck::cast_slice(&check_descs));
        let output = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let words = vec![0u8; blocks * 4];
        let (status, computed) = (storage_buffer(&ctx, &words), storage_buffer(&ctx, &words));
        let n = blocks as u32;
        let record_copy =
            |enc: &mut wgpu::CommandEncoder, ts: Option<wgpu::ComputePassTimestampWrites<'_>>| {
                copy.encode_timed(
                    &ctx.device,
                    enc,
                    input_buf.slice(..),
                    &copy_table,
                    &output,
                    &status,
                    n,
                    ts,
                )
                .unwrap()
            };
        let record_crc =
            |enc: &mut wgpu::CommandEncoder, ts: Option<wgpu::ComputePassTimestampWrites<'_>>| {
                crc.encode_timed(
                    &ctx.device,
                    enc,
                    input_buf.slice(..),
                    &check_table,
                    &status,
                    &computed,
                    n,
                    ts,
                )
                .unwrap()
            };

        // Warm-up and check: copy, then read back the output and statuses.
        timer.run(&ctx, record_copy);
        let out = readback(&ctx, &output);
        let st = readback(&ctx, &status);
        for b in 0..blocks {
            let k = b % 256;
            let word = u32::from_le_bytes(st[b * 4..b * 4 + 4].try_into().unwrap());
            assert_eq!(Lz4Status::from_word(word), Lz4Status::Ok, "copy block {b}");
            assert!(
                out[b * BLOCK..][..BLOCK] == pool[k * BLOCK..][..BLOCK],
                "copy block {b}"
            );
        }
        let mut t: Vec<f64> = (0..runs).map(|_| timer.run(&ctx, record_copy)).collect();
        let gpu_copy = bytes as f64 / median(&mut t) / 1e9;
        let mut dst = vec![0u8; bytes];
        let mut t: Vec<f64> = (0..runs)
            .map(|_| {
                let start = Instant::now();
                for d in &copy_descs {
                    let s = d.src_offset as usize;
                    let o = d.dst_offset as usize;
                    dst[o..o + BLOCK].copy_from_slice(&input[s..s + BLOCK]);
                }
                std::hint::black_box(&dst);
                start.elapsed().as_secs_f64()
            })
            .collect();
        let cpu_copy = bytes as f64 / median(&mut t) / 1e9;
        println!(
            "| stored_copy | {blocks} | {} | {gpu_copy:.3} | {cpu_copy:.2} | {:.3} |",
            bytes >> 20,
            gpu_copy / cpu_copy
        );

        timer.run(&ctx, record_crc);
        let st = readback(&ctx, &status);
        for b in 0..blocks {
            let word = u32::from_le_bytes(st[b * 4..b * 4 + 4].try_into().unwrap());
            assert_eq!(word, 1, "crc block {b}");
        }
        let mut t: Vec<f64> = (0..runs).map(|_| timer.run(&ctx, record_crc)).collect();
        let gpu_crc = bytes as f64 / median(&mut t) / 1e9;
        let mut t: Vec<f64> = (0..runs)
            .map(|_| {
                let start = Instant::now();
                let mut acc = 0u32;
                for d in &check_descs {
                    let s = d.src_offset as usize;
                    acc ^= crc32c::crc32c(&input[s..s + BLOCK]);
                }
                std::hint::black_box(acc);
                start.elapsed().as_secs_f64()
            })
            .collect();
        let cpu_crc = bytes as f64 / median(&mut t) / 1e9;
        println!(
            "| crc32c | {blocks} | {} | {gpu_crc:.3} | {cpu_crc:.2} | {:.3} |",
            bytes >> 20,
            gpu_crc / cpu_crc
        );
    }
}

/// Copies a STORAGE | COPY_SRC buffer out through a MAP_READ buffer.
fn readback(ctx: &GpuContext, buffer: &wgpu::Buffer) -> Vec<u8> {
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: buffer.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, buffer.size());
    ctx.queue.submit([encoder.finish()]);
    read_buffer(&ctx.device, &staging).expect("readback")
}
