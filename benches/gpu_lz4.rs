//! GPU LZ4 decode throughput: GB/s of decompressed output for batches of
//! 64 to 8192 blocks of 64 KiB, timed with GPU timestamp queries where the
//! adapter has them (wall clock around submit and a full poll otherwise),
//! with the compression ratio and the one-thread lz4_flex figure on the same
//! blocks beside it. Every batch's output is checked against the original
//! bytes once, after the warm-up run, before it is timed.
//!
//! Run: `WGPU_BACKEND=vulkan cargo bench --bench gpu_lz4`
//! Options (environment): `GPUSTREAM_BENCH_RUNS` (timed runs per batch,
//! median reported; default 5), `GPUSTREAM_BENCH_BATCHES` (comma-separated
//! block counts; default 64,256,1024,4096,8192), `GPUSTREAM_BENCH_PATH`
//! (`portable` or `subgroup`; default: what the device supports).

use gpustream::decode::gpu::{read_buffer, Lz4Batch, Lz4DecodePath, Lz4DecodePipeline, Lz4Status};
use gpustream::gpu::{open_device, GpuContext};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

const BLOCK: usize = 64 * 1024;
/// Distinct blocks per corpus; batches reuse them round robin.
const POOL: usize = 256;

/// Binary data near ratio 2: 64-byte chunks, about a third fresh random
/// bytes, the rest copies of earlier chunks (up to 4 KiB back) with a few edits.
fn binary_block(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCK);
    while out.len() < BLOCK {
        if out.len() < 4096 || rng.gen_bool(0.3) {
            out.extend((0..64).map(|_| rng.gen::<u8>()));
        } else {
            let back = rng.gen_range(1..=4096usize.min(out.len() / 64)) * 64;
            let start = out.len() - back;
            out.extend_from_within(start..start + 64);
            let n = out.len();
            for _ in 0..rng.gen_range(0..3) {
                let at = n - rng.gen_range(1..=64);
                out[at] = rng.gen();
            }
        }
    }
    out.truncate(BLOCK);
    out
}

/// BC7-like texture data: 16-byte blocks with a few mode bytes, smooth
/// endpoints and noisy indices (stands in for the demo pack's BC7 tiles).
fn texture_block(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCK);
    let mut base = [0u8; 6];
    let mut indices = [0u8; 9];
    while out.len() < BLOCK {
        out.push([0x20u8, 0x40, 0x40, 0x80][rng.gen_range(0..4)]);
        for b in &mut base {
            *b = b.wrapping_add(rng.gen_range(0..3));
        }
        out.extend_from_slice(&base);
        // Flat regions repeat their index bits.
        if rng.gen_bool(0.6) {
            indices = rng.gen();
        }
        out.extend_from_slice(&indices);
    }
    out.truncate(BLOCK);
    out
}

struct Corpus {
    name: &'static str,
    blocks: Vec<(Vec<u8>, Vec<u8>)>,
}

fn corpus(name: &'static str, make: fn(&mut ChaCha8Rng) -> Vec<u8>) -> Corpus {
    let mut rng = ChaCha8Rng::seed_from_u64(0x62656e63);
    let blocks = (0..POOL)
        .map(|_| {
            let data = make(&mut rng);
            let packed = lz4_flex::block::compress(&data);
            (data, packed)
        })
        .collect();
    Corpus { name, blocks }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn cpu_gbps(c: &Corpus) -> f64 {
    let mut out = vec![0u8; BLOCK];
    let mut runs = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        for (_, packed) in &c.blocks {
            lz4_flex::block::decompress_into(packed, &mut out).unwrap();
        }
        runs.push((POOL * BLOCK) as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    median(&mut runs)
}

/// One timed run: (GPU-timestamp seconds if available, wall seconds).
fn timed_run(
    ctx: &GpuContext,
    pipeline: &Lz4DecodePipeline,
    gpu: &gpustream::decode::gpu::Lz4GpuBatch,
    queries: Option<&(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)>,
) -> (Option<f64>, f64) {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let writes = queries.map(|(set, _, _)| wgpu::ComputePassTimestampWrites {
        query_set: set,
        beginning_of_pass_write_index: Some(0),
        end_of_pass_write_index: Some(1),
    });
    gpu.encode(ctx, pipeline, &mut encoder, writes).unwrap();
    if let Some((set, resolve, readback)) = queries {
        encoder.resolve_query_set(set, 0..2, resolve, 0);
        encoder.copy_buffer_to_buffer(resolve, 0, readback, 0, 16);
    }
    let t = Instant::now();
    ctx.queue.submit([encoder.finish()]);
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let wall = t.elapsed().as_secs_f64();
    let gpu_secs = queries.and_then(|(_, _, readback)| {
        let bytes = read_buffer(&ctx.device, readback)?;
        let ticks: [u64; 2] = bytemuck::pod_read_unaligned(&bytes[..16]);
        let ns = ticks[1].saturating_sub(ticks[0]) as f64 * ctx.queue.get_timestamp_period() as f64;
        (ns > 0.0).then_some(ns / 1e9)
    });
    (gpu_secs, wall)
}

fn main() {
    let ctx = match open_device() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("!!! SKIPPING GPU LZ4 BENCH: {e}");
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
    let pipeline = match std::env::var("GPUSTREAM_BENCH_PATH").as_deref() {
        Ok("portable") => {
            Lz4DecodePipeline::with_path(&ctx.device, Lz4DecodePath::Portable).unwrap()
        }
        Ok("subgroup") => Lz4DecodePipeline::with_path(&ctx.device, Lz4DecodePath::Subgroup)
            .expect("subgroup path unsupported here"),
        _ => Lz4DecodePipeline::new(&ctx.device),
    };
    let has_ts = ctx
        .device
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY);
    let queries = has_ts.then(|| {
        let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("lz4 bench"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        (set, resolve, readback)
    });
    let max_binding = (ctx.device.limits().max_storage_buffer_binding_size as u64)
        .min(ctx.device.limits().max_buffer_size);
    println!(
        "# gpu_lz4 on {}: {:?} path, {} lanes/block, timing: {}",
        ctx.describe(),
        pipeline.path(),
        pipeline.workgroup_size(),
        if has_ts {
            "GPU timestamps"
        } else {
            "wall clock after a full poll"
        }
    );
    println!("| corpus | blocks | MiB out | ratio | GPU GB/s | wall GB/s | CPU lz4_flex 1 thread GB/s | GPU / CPU |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for c in [
        corpus("binary", binary_block),
        corpus("bc7-like", texture_block),
    ] {
        let cpu = cpu_gbps(&c);
        for &n in &batches {
            let out_bytes = (n * BLOCK) as u64;
            if out_bytes > max_binding {
                println!(
                    "| {} | {n} | {} | - | skipped: output exceeds the {} MiB storage binding limit | | | |",
                    c.name,
                    out_bytes >> 20,
                    max_binding >> 20
                );
                continue;
            }
            let mut batch = Lz4Batch::new();
            for i in 0..n {
                let (data, packed) = &c.blocks[i % POOL];
                batch.push(packed, data.len() as u32, 0, 0, None);
            }
            let ratio = batch.uncompressed_len() as f64 / batch.compressed_len() as f64;
            let gpu = batch.upload(&ctx, &vec![0u32; batch.output_words()]);
            // Warm up, and check the result once.
            timed_run(&ctx, &pipeline, &gpu, queries.as_ref());
            let status = read_status(&ctx, &gpu);
            assert!(
                status.iter().all(|s| s.is_ok()),
                "{}: a block failed",
                c.name
            );
            let output = read_whole(&ctx, &gpu.output);
            for (i, d) in batch.descs().iter().enumerate() {
                let at = d.dst_offset as usize;
                assert!(
                    output[at..at + BLOCK] == c.blocks[i % POOL].0[..],
                    "{}: block {i} decoded wrong",
                    c.name
                );
            }
            let (mut ts, mut wall) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                let (g, w) = timed_run(&ctx, &pipeline, &gpu, queries.as_ref());
                if let Some(g) = g {
                    ts.push(out_bytes as f64 / g / 1e9);
                }
                wall.push(out_bytes as f64 / w / 1e9);
            }
            let gpu_gbps = if ts.is_empty() {
                median(&mut wall)
            } else {
                median(&mut ts)
            };
            println!(
                "| {} | {n} | {} | {ratio:.2} | {} | {:.3} | {cpu:.2} | {:.2} |",
                c.name,
                out_bytes >> 20,
                if ts.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.3}", median(&mut ts))
                },
                median(&mut wall),
                gpu_gbps / cpu
            );
        }
    }
}

fn read_whole(ctx: &GpuContext, buffer: &wgpu::Buffer) -> Vec<u8> {
    let readback = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: buffer.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(buffer, 0, &readback, 0, buffer.size());
    ctx.queue.submit([encoder.finish()]);
    read_buffer(&ctx.device, &readback).expect("device lost")
}

fn read_status(ctx: &GpuContext, gpu: &gpustream::decode::gpu::Lz4GpuBatch) -> Vec<Lz4Status> {
    let size = gpu.status.size();
    let readback = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&gpu.status, 0, &readback, 0, size);
    ctx.queue.submit([encoder.finish()]);
    let bytes = read_buffer(&ctx.device, &readback).expect("device lost");
    bytemuck::pod_collect_to_vec::<u8, u32>(&bytes)[..gpu.block_count as usize]
        .iter()
        .map(|&w| Lz4Status::from_word(w))
        .collect()
}
