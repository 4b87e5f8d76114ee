//! GPU LZ4 decode throughput per shader variant: GB/s of decompressed
//! output for batches of distinct 64 KiB blocks (no block is decoded twice in
//! a batch), timed with GPU timestamp queries where the adapter has them
//! (wall clock around submit and a full poll otherwise), with the
//! compression ratio, the sequences, barriers, window loads, 16-byte stores
//! and single-word stores per block (as the variant's twin counts them; v1
//! stores every word singly) and the one-thread lz4_flex figure on the
//! same blocks beside it. Every batch's output is checked against the
//! original bytes after the warm-up run, before it is timed.
//!
//! Corpora:
//! - `demo`: every LZ4 block of the demo pack (`gpustream_tools::demo`):
//!   BC1/BC7 textures the packer encodes from the PNG/JPEG assets with
//!   procedural variation, plus mesh and scene blobs;
//! - `bc7`: the BC7 texture blocks of that pack only, decoded in the rows
//!   layout the runtime uses for texture tiles (1,024-byte rows: a 256-texel
//!   tile's BC7 blocks; pitched one row apart here, so the bytes land as a
//!   linear decode's would), which takes the rows paths of the shaders;
//! - `binary`: generated mixed binaries near ratio 2 (random 64-byte chunks
//!   and edited copies of earlier chunks), every block distinct;
//! - `demo-16k`: the `demo` blocks cut into independent 16 KiB LZ4 blocks,
//!   as the packer's sub-block option stores them (`gpustream pack
//!   --sub-block-kib 16`): four blocks for each of `demo`'s, so a batch of
//!   N of them holds the bytes of N / 4 `demo` blocks;
//! - `bc7-hc`: `bc7`'s blocks compressed with LZ4 HC level 9 (`gpustream
//!   pack`'s default level): more and longer matches, more sequences per
//!   block for the decoder's serial parse;
//! - `bc7-hc-cond`: the same blocks BCn-conditioned (byte planes, as the
//!   packer conditions BC7) before HC; the decoder writes the conditioned
//!   block, and the pass that puts it back in order
//!   (`shaders/bcn_uncondition.wgsl`) is timed on its own after the
//!   table, on the same blocks.
//!
//! A batch bigger than a corpus is skipped (blocks are never reused), and so
//! is one whose output exceeds the device's storage-binding limit.
//!
//! Run: `WGPU_BACKEND=vulkan cargo bench --bench gpu_lz4 -- [options]`
//! - `--paths subgroup-v2,portable-v2,subgroup-v2-wide,portable-v2-wide,subgroup-v2-pair,portable-v2-pair,subgroup,portable`
//!   (default: every variant the device runs; `-wide`: v2 with 16-byte
//!   stores; `-pair`: v2 with two blocks per workgroup, whose storage
//!   barriers are counted per workgroup and whose turn barriers, where the
//!   two agree, are in `turn_barriers_per_block` in `--json`)
//! - `--batches 64,256,1024` (default 1024,2048,4096,8192,16384)
//! - `--corpora demo,bc7,binary,demo-16k,bc7-hc,bc7-hc-cond` (default all six)
//! - `--runs N` timed runs per batch, median reported (default 5)
//! - `--demo-size 256MiB` uncompressed size of the demo pack (default 1.5x
//!   the biggest batch, as about a quarter of its blocks are stored raw), `--demo-pack PATH` where it is built or reused
//!   (default target/gpustream-demo-bench.gspk)
//! - `--json FILE` also writes every row as JSON.
//! - `--subblock-ratio`: no GPU; measures what cutting every 64 KiB block
//!   into independent 16 KiB LZ4 blocks costs in compression ratio, on the
//!   demo pack (default 256 MiB) and its BC7 textures, and exits.
//!
//! The environment variables `GPUSTREAM_BENCH_RUNS`, `GPUSTREAM_BENCH_BATCHES`
//! and `GPUSTREAM_BENCH_PATH` of earlier versions still work.

// The batch harness the GPU decoder tests use, shared by path.
#[path = "../tests/common/lz4_batch.rs"]
#[allow(dead_code)] // the tests use the rest
mod lz4_batch;

use gpustream::decode::gpu::{
    BlockDesc, Lz4DecodePath, Lz4DecodePipeline, Lz4Status, UnconditionPipeline,
};
use gpustream::pack::{
    AssetKind, BlockId, BlockTransform, Pack, TextureFormat, STORE_RAW_UNLESS_SAVES_DIVISOR,
};
use gpustream::Codec;
use gpustream_tools::demo::{ensure_demo_pack, DemoConfig};
use gpustream_tools::gpu::read_buffer;
use gpustream_tools::gpu::{open_device, GpuContext};
use lz4_batch::{Lz4Batch, Lz4GpuBatch};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

const BLOCK: usize = 64 * 1024;
/// The corpora built from the demo pack.
const PACK_CORPORA: [&str; 5] = ["demo", "bc7", "demo-16k", "bc7-hc", "bc7-hc-cond"];
/// Blocks the twin counts sequences over, per corpus.
const COUNT_SAMPLE: usize = 256;

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

/// Distinct blocks: (uncompressed bytes, LZ4 block).
struct Corpus {
    name: &'static str,
    blocks: Vec<(Vec<u8>, Vec<u8>)>,
    /// The rows layout its blocks decode into (`(row_bytes, row_pitch)`),
    /// or linear.
    rows: Option<(u32, u32)>,
}

/// The rows `bc7` decodes into: a 256-texel-wide tile's rows of BC7
/// blocks (64 x 16 bytes), as the runtime decodes texture tiles into its
/// mip-shaped scratch, here with a pitch of one row, so each block's output
/// is its bytes in order and the check reads it as it reads a linear one.
const BC7_ROWS: (u32, u32) = (1024, 1024);

fn binary_corpus(n: usize) -> Corpus {
    let mut rng = ChaCha8Rng::seed_from_u64(0x62656e63);
    let blocks = (0..n)
        .map(|_| {
            let data = binary_block(&mut rng);
            let packed = lz4_flex::block::compress(&data);
            (data, packed)
        })
        .collect();
    Corpus {
        name: "binary",
        blocks,
        rows: None,
    }
}

/// Opens (building it first if needed) the demo pack of `size` bytes.
fn demo_pack(path: &str, size: u64) -> Pack {
    let config = DemoConfig {
        size_bytes: size,
        ..DemoConfig::default()
    };
    let t = Instant::now();
    let path = ensure_demo_pack(path, config, false).expect("build the demo pack");
    eprintln!(
        "# demo pack {} ({} MiB) ready in {:.1} s",
        path.display(),
        size >> 20,
        t.elapsed().as_secs_f64()
    );
    Pack::open(&path).expect("open the demo pack")
}

/// Every block of the pack, decoded: (is it a BC7 texture's, the pack's
/// codec for it, its bytes, its stored bytes), up to `limit` blocks each of
/// the LZ4 and BC7 kinds.
fn pack_blocks(pack: &Pack, limit: usize) -> Vec<(bool, Codec, Vec<u8>, Vec<u8>)> {
    let file = pack.open_file().expect("open the demo pack");
    let (mut lz4, mut bc7) = (0, 0);
    let mut blocks = Vec::new();
    let mut stored = Vec::new();
    for asset in pack.assets() {
        let is_bc7 = asset.kind == AssetKind::Texture
            && asset
                .texture
                .is_some_and(|t| matches!(t.format, TextureFormat::Bc7Srgb | TextureFormat::Bc7));
        for i in asset.blocks.clone() {
            let b = *pack.block(BlockId(i)).expect("block of the pack");
            let wanted = (b.codec == Codec::Lz4 && lz4 < limit) || (is_bc7 && bc7 < limit);
            if !wanted {
                continue;
            }
            lz4 += (b.codec == Codec::Lz4) as usize;
            bc7 += is_bc7 as usize;
            let mut out = vec![0u8; b.size as usize];
            pack.read_block(&file, BlockId(i), &mut stored, &mut out)
                .expect("the demo pack decodes");
            blocks.push((is_bc7, b.codec, out, stored.clone()));
        }
    }
    blocks
}

/// LZ4 HC at the packer's default level (`gpustream pack`'s `--level`).
fn lz4_hc(data: &[u8]) -> Vec<u8> {
    Codec::Lz4.compress(data, 9).expect("LZ4 HC")
}

/// The demo pack's LZ4 blocks as the packer stored them, and the BC7
/// texture blocks compressed with LZ4 whether or not the packer kept them
/// raw (most BC7 tiles save less than the packer's 1/16 rule asks); the
/// same BC7 blocks with LZ4 HC, and with HC after BCn conditioning (their
/// byte planes: what the decoder then writes is the conditioned block,
/// which the pass after it puts back in order, timed on its own below).
fn pack_corpora(pack: &Pack, limit: usize) -> [Corpus; 5] {
    let (mut demo, mut bc7, mut sub) = (Vec::new(), Vec::new(), Vec::new());
    let (mut hc, mut cond) = (Vec::new(), Vec::new());
    for (is_bc7, codec, data, stored) in pack_blocks(pack, limit) {
        if is_bc7 && hc.len() < limit {
            hc.push((data.clone(), lz4_hc(&data)));
            let mut planes = vec![0u8; data.len()];
            BlockTransform::BytePlanes16.apply(&data, &mut planes);
            let packed = lz4_hc(&planes);
            cond.push((planes, packed));
        }
        if is_bc7 && bc7.len() < limit {
            let packed = if codec == Codec::Lz4 {
                stored.clone()
            } else {
                lz4_flex::block::compress(&data)
            };
            bc7.push((data.clone(), packed));
        }
        if codec == Codec::Lz4 && sub.len() < limit {
            for piece in data.chunks(16 << 10) {
                sub.push((piece.to_vec(), lz4_flex::block::compress(piece)));
            }
        }
        if codec == Codec::Lz4 && demo.len() < limit {
            demo.push((data, stored));
        }
    }
    sub.truncate(limit);
    [
        Corpus {
            name: "demo",
            blocks: demo,
            rows: None,
        },
        Corpus {
            name: "bc7",
            blocks: bc7,
            rows: Some(BC7_ROWS),
        },
        Corpus {
            name: "demo-16k",
            blocks: sub,
            rows: None,
        },
        Corpus {
            name: "bc7-hc",
            blocks: hc,
            rows: Some(BC7_ROWS),
        },
        Corpus {
            name: "bc7-hc-cond",
            blocks: cond,
            rows: Some(BC7_ROWS),
        },
    ]
}

/// Stored bytes of `data` as the packer stores an LZ4 block: compressed
/// unless that saves less than 1/16.
fn stored_len(data: &[u8]) -> usize {
    let packed = lz4_flex::block::compress(data).len();
    if packed <= data.len() - data.len() / STORE_RAW_UNLESS_SAVES_DIVISOR {
        packed
    } else {
        data.len()
    }
}

/// The optional 16 KiB sub-block pack option, measured: the pack's size
/// when every 64 KiB block is cut into independent LZ4 blocks of 16 KiB,
/// against 64 KiB blocks, under the packer's store-raw rule, for the whole
/// demo pack and for its BC7 textures.
fn subblock_ratio(pack: &Pack) -> serde_json::Value {
    let mut rows = Vec::new();
    let blocks = pack_blocks_all(pack);
    for (name, bc7_only) in [("demo", false), ("bc7", true)] {
        let (mut raw, mut whole, mut split) = (0usize, 0usize, 0usize);
        for (is_bc7, data) in &blocks {
            if bc7_only && !is_bc7 {
                continue;
            }
            raw += data.len();
            whole += stored_len(data);
            split += data.chunks(16 * 1024).map(stored_len).sum::<usize>();
        }
        let (r64, r16) = (raw as f64 / whole as f64, raw as f64 / split as f64);
        let cost = (1.0 - r16 / r64) * 100.0;
        println!(
            "| {name} | {} | {r64:.4} | {r16:.4} | {cost:.2} % |",
            raw >> 20
        );
        rows.push(serde_json::json!({
            "corpus": name, "bytes": raw, "stored_64k": whole, "stored_16k": split,
            "ratio_64k": r64, "ratio_16k": r16, "ratio_cost_percent": cost,
        }));
    }
    serde_json::Value::Array(rows)
}

/// Every block of the pack, decoded, with whether it is a BC7 texture's.
fn pack_blocks_all(pack: &Pack) -> Vec<(bool, Vec<u8>)> {
    let file = pack.open_file().expect("open the demo pack");
    let mut stored = Vec::new();
    let mut out = Vec::new();
    for asset in pack.assets() {
        let is_bc7 = asset
            .texture
            .is_some_and(|t| matches!(t.format, TextureFormat::Bc7Srgb | TextureFormat::Bc7));
        for i in asset.blocks.clone() {
            let b = *pack.block(BlockId(i)).expect("block of the pack");
            let mut data = vec![0u8; b.size as usize];
            pack.read_block(&file, BlockId(i), &mut stored, &mut data)
                .expect("the demo pack decodes");
            out.push((is_bc7, data));
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One-thread lz4_flex on the first `n` blocks of the corpus.
fn cpu_gbps(blocks: &[(Vec<u8>, Vec<u8>)]) -> f64 {
    let mut out = vec![0u8; BLOCK];
    let bytes: usize = blocks.iter().map(|(d, _)| d.len()).sum();
    let mut runs = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        for (d, packed) in blocks {
            lz4_flex::block::decompress_into(packed, &mut out[..d.len()]).unwrap();
        }
        runs.push(bytes as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    median(&mut runs)
}

type Queries = (wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer);

/// One timed run: (GPU-timestamp seconds if available, wall seconds).
fn timed_run(
    ctx: &GpuContext,
    pipeline: &Lz4DecodePipeline,
    gpu: &Lz4GpuBatch,
    queries: Option<&Queries>,
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

/// Command-line options (see the file header).
struct Options {
    paths: Option<Vec<Lz4DecodePath>>,
    batches: Vec<usize>,
    corpora: Vec<String>,
    runs: usize,
    demo_size: Option<u64>,
    demo_pack: String,
    json: Option<String>,
    subblock_ratio: bool,
}

fn parse_size(s: &str) -> u64 {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().expect("a size like 256MiB");
    n << match unit {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        other => panic!("unknown size unit {other}"),
    }
}

fn options() -> Options {
    let env = |k: &str| std::env::var(k).ok();
    let mut o = Options {
        paths: env("GPUSTREAM_BENCH_PATH").map(|p| {
            vec![Lz4DecodePath::from_name(&p).unwrap_or_else(|| panic!("unknown path {p}"))]
        }),
        batches: env("GPUSTREAM_BENCH_BATCHES")
            .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![1024, 2048, 4096, 8192, 16384]),
        corpora: vec![
            "demo".into(),
            "bc7".into(),
            "binary".into(),
            "demo-16k".into(),
            "bc7-hc".into(),
            "bc7-hc-cond".into(),
        ],
        runs: env("GPUSTREAM_BENCH_RUNS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(5),
        demo_size: None,
        demo_pack: "target/gpustream-demo-bench.gspk".into(),
        json: None,
        subblock_ratio: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--paths" => {
                o.paths = Some(
                    value()
                        .split(',')
                        .map(|p| {
                            Lz4DecodePath::from_name(p)
                                .unwrap_or_else(|| panic!("unknown path {p}"))
                        })
                        .collect(),
                )
            }
            "--batches" => {
                o.batches = value()
                    .split(',')
                    .map(|s| s.trim().parse().expect("block counts"))
                    .collect()
            }
            "--corpora" => o.corpora = value().split(',').map(str::to_string).collect(),
            "--runs" => o.runs = value().parse().expect("--runs N"),
            "--demo-size" => o.demo_size = Some(parse_size(&value())),
            "--subblock-ratio" => o.subblock_ratio = true,
            "--demo-pack" => o.demo_pack = value(),
            "--json" => o.json = Some(value()),
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            other => panic!("unknown option {other} (see benches/gpu_lz4.rs)"),
        }
    }
    o.runs = o.runs.max(1);
    o
}

fn timestamp_queries(ctx: &GpuContext) -> Option<Queries> {
    let has_ts = ctx
        .device
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY);
    has_ts.then(|| {
        let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("lz4 bench"),
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
    })
}

fn main() {
    let opts = options();
    if opts.subblock_ratio {
        // No GPU needed: the compression-ratio cost of 16 KiB sub-blocks.
        let pack = demo_pack(&opts.demo_pack, opts.demo_size.unwrap_or(256 << 20));
        println!("| corpus | MiB | ratio, 64 KiB blocks | ratio, 16 KiB sub-blocks | ratio cost |");
        println!("| --- | --- | --- | --- | --- |");
        let rows = subblock_ratio(&pack);
        if let Some(path) = &opts.json {
            std::fs::write(path, serde_json::to_string_pretty(&rows).unwrap())
                .unwrap_or_else(|e| panic!("write {path}: {e}"));
        }
        return;
    }
    let ctx = match open_device() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("!!! SKIPPING GPU LZ4 BENCH: {e}");
            return;
        }
    };
    let paths = opts.paths.clone().unwrap_or_else(|| {
        Lz4DecodePath::ALL
            .into_iter()
            .filter(|p| {
                !p.needs_subgroups() || ctx.device.features().contains(wgpu::Features::SUBGROUP)
            })
            .collect()
    });
    let pipelines: Vec<Lz4DecodePipeline> = paths
        .iter()
        .map(|&p| {
            Lz4DecodePipeline::with_path(&ctx.device, p)
                .unwrap_or_else(|e| panic!("{}: {e}", p.name()))
        })
        .collect();
    let queries = timestamp_queries(&ctx);
    let limits = ctx.device.limits();
    let max_binding = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    let biggest = opts.batches.iter().copied().max().unwrap_or(0);
    let timing = if queries.is_some() {
        "GPU timestamps"
    } else {
        "wall clock after a full poll"
    };
    println!(
        "# gpu_lz4 on {}: timing {timing}, median of {} runs",
        ctx.describe(),
        opts.runs
    );

    let mut corpora = Vec::new();
    if opts
        .corpora
        .iter()
        .any(|c| PACK_CORPORA.contains(&c.as_str()))
    {
        let pack = demo_pack(
            &opts.demo_pack,
            opts.demo_size
                .unwrap_or(biggest as u64 * BLOCK as u64 * 3 / 2),
        );
        for c in pack_corpora(&pack, biggest) {
            if opts.corpora.iter().any(|n| n == c.name) {
                corpora.push(c);
            }
        }
    }
    if opts.corpora.iter().any(|c| c == "binary") {
        corpora.push(binary_corpus(biggest));
    }

    let mut rows = Vec::new();
    println!("| corpus | path | lanes | blocks | MiB out | ratio | seq/block | barriers/block | window loads/block | wide stores/block | word stores/block | GPU GB/s | wall GB/s | CPU lz4_flex 1 thread GB/s | GPU / CPU |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for c in &corpora {
        for &n in &opts.batches {
            let skip = |why: String| {
                println!(
                    "| {} | - | - | {n} | - | - | - | - | - | - | - | skipped: {why} | | | |",
                    c.name
                );
            };
            if n > c.blocks.len() {
                skip(format!("the corpus has {} distinct blocks", c.blocks.len()));
                continue;
            }
            let blocks = &c.blocks[..n];
            let mut batch = Lz4Batch::new();
            for (data, packed) in blocks {
                batch.push(packed, data.len() as u32, 0, 0, c.rows);
            }
            let out_bytes = batch.uncompressed_len();
            if out_bytes > max_binding || batch.compressed_len() > max_binding {
                skip(format!(
                    "exceeds the {} MiB storage binding limit",
                    max_binding >> 20
                ));
                continue;
            }
            let ratio = out_bytes as f64 / batch.compressed_len() as f64;
            let cpu = cpu_gbps(blocks);
            // Sequence counts from the twin, on a sample of the batch.
            let mut sample = Lz4Batch::new();
            for (data, packed) in blocks.iter().take(COUNT_SAMPLE) {
                sample.push(packed, data.len() as u32, 0, 0, c.rows);
            }
            let sampled = sample.descs().len() as f64;
            let initial = vec![0u32; batch.output_words()];
            let gpu = batch.upload(&ctx, &initial);
            for pipeline in &pipelines {
                let (_, counts) = sample.run_twin_for(pipeline, &vec![0; sample.output_words()]);
                // Warm up, and check the result once.
                timed_run(&ctx, pipeline, &gpu, queries.as_ref());
                check(&ctx, &gpu, &batch, blocks, c.name, pipeline.path());
                let (mut ts, mut wall) = (Vec::new(), Vec::new());
                for _ in 0..opts.runs {
                    let (g, w) = timed_run(&ctx, pipeline, &gpu, queries.as_ref());
                    if let Some(g) = g {
                        ts.push(out_bytes as f64 / g / 1e9);
                    }
                    wall.push(out_bytes as f64 / w / 1e9);
                }
                let gpu_gbps = (!ts.is_empty()).then(|| median(&mut ts));
                let wall_gbps = median(&mut wall);
                let row = serde_json::json!({
                    "corpus": c.name,
                    "path": pipeline.path().name(),
                    "lanes": pipeline.workgroup_size(),
                    "window_words": pipeline.window_words(),
                    "blocks": n,
                    "bytes_out": out_bytes,
                    "ratio": ratio,
                    "sequences_per_block": counts.sequences as f64 / sampled,
                    "barriers_per_block": counts.barriers as f64 / sampled,
                    "turn_barriers_per_block": counts.turn_barriers as f64 / sampled,
                    "window_loads_per_block": counts.window_loads as f64 / sampled,
                    "wide_stores_per_block": counts.wide_stores as f64 / sampled,
                    "wide_copies_per_block": counts.wide_copies as f64 / sampled,
                    "word_stores_per_block": counts.word_stores as f64 / sampled,
                    "gpu_gbps": gpu_gbps,
                    "wall_gbps": wall_gbps,
                    "cpu_lz4_flex_1thread_gbps": cpu,
                    "runs": opts.runs,
                    "timing": timing,
                });
                println!(
                    "| {} | {} | {} | {n} | {} | {ratio:.2} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {wall_gbps:.3} | {cpu:.2} | {:.3} |",
                    c.name,
                    pipeline.path().name(),
                    pipeline.workgroup_size(),
                    out_bytes >> 20,
                    counts.sequences as f64 / sampled,
                    counts.barriers as f64 / sampled,
                    counts.window_loads as f64 / sampled,
                    counts.wide_stores as f64 / sampled,
                    counts.word_stores as f64 / sampled,
                    gpu_gbps.map_or("-".into(), |g| format!("{g:.3}")),
                    gpu_gbps.unwrap_or(wall_gbps) / cpu
                );
                rows.push(row);
                write_json(&opts, &ctx, max_binding, &rows, false);
            }
        }
    }
    if let Some(c) = corpora.iter().find(|c| c.name == "bc7-hc-cond") {
        for &n in opts.batches.iter().filter(|&&n| n <= c.blocks.len()) {
            let row = uncondition_pass(&ctx, &c.blocks[..n], opts.runs);
            rows.push(row);
            write_json(&opts, &ctx, max_binding, &rows, false);
        }
    }
    write_json(&opts, &ctx, max_binding, &rows, true);
}

/// The pass after the decoder for conditioned blocks, on its own: `blocks`'
/// conditioned bytes in one region of the output, each put back in order
/// into its own 1,024-byte rows (a BC7 tile's, at a 1,024-byte pitch);
/// median wall-clock GB/s of output over `runs` dispatches (submit to a
/// full poll), checked once against `BlockTransform::undo`.
fn uncondition_pass(
    ctx: &GpuContext,
    blocks: &[(Vec<u8>, Vec<u8>)],
    runs: usize,
) -> serde_json::Value {
    use wgpu::util::DeviceExt;
    let total: usize = blocks
        .iter()
        .map(|(d, _)| d.len().next_multiple_of(256))
        .sum();
    let mut bytes = vec![0u8; total * 2];
    let mut descs = Vec::new();
    let (mut dst, mut src) = (0usize, total);
    for (planes, _) in blocks {
        bytes[src..src + planes.len()].copy_from_slice(planes);
        let mut d = BlockDesc::linear(
            src as u32,
            planes.len() as u32,
            dst as u32,
            planes.len() as u32,
        )
        .with_rows(BC7_ROWS.0, BC7_ROWS.1);
        d.reserved[0] = BlockTransform::BytePlanes16.id() as u32;
        descs.push(d);
        dst += planes.len().next_multiple_of(256);
        src += planes.len().next_multiple_of(256);
    }
    let device = &ctx.device;
    let output = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("uncondition bench output"),
        contents: &bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    });
    let status = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("uncondition bench status"),
        size: (blocks.len() * 4) as u64,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let pipeline = UnconditionPipeline::new(device);
    let run = || {
        let mut enc = device.create_command_encoder(&Default::default());
        pipeline
            .encode_blocks(device, &mut enc, &descs, &output, &status)
            .expect("uncondition encode");
        let t = Instant::now();
        ctx.queue.submit([enc.finish()]);
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        t.elapsed().as_secs_f64()
    };
    run();
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("uncondition bench readback"),
        size: total as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(&output, 0, &readback, 0, total as u64);
    ctx.queue.submit([enc.finish()]);
    let back = read_buffer(device, &readback).expect("readback");
    let mut at = 0;
    for (planes, _) in blocks {
        let mut want = vec![0u8; planes.len()];
        BlockTransform::BytePlanes16.undo(planes, &mut want);
        assert!(
            back[at..at + planes.len()] == want[..],
            "uncondition pass put a block back wrong"
        );
        at += planes.len().next_multiple_of(256);
    }
    let out: usize = blocks.iter().map(|(d, _)| d.len()).sum();
    let mut gbps: Vec<f64> = (0..runs).map(|_| out as f64 / run() / 1e9).collect();
    let g = median(&mut gbps);
    println!(
        "| bc7-hc-cond | uncondition pass (byte-planes-16, after the decoder) | 64 | {} | {} | - | - | - | - | - | - | - | {g:.3} | | |",
        blocks.len(),
        out >> 20
    );
    serde_json::json!({
        "corpus": "bc7-hc-cond",
        "path": "uncondition-pass",
        "blocks": blocks.len(),
        "bytes_out": out,
        "wall_gbps": g,
        "runs": runs,
        "timing": "wall clock after a full poll",
    })
}

/// Writes the rows so far as JSON (after every row, so a run cut short by
/// the device script's time limit still leaves what it measured).
fn write_json(
    opts: &Options,
    ctx: &GpuContext,
    max_binding: u64,
    rows: &[serde_json::Value],
    complete: bool,
) {
    let Some(path) = &opts.json else { return };
    let info = ctx.adapter.get_info();
    let doc = serde_json::json!({
        "bench": "gpu_lz4",
        "adapter": ctx.describe(),
        "driver": info.driver_info,
        "subgroup_size": [info.subgroup_min_size, info.subgroup_max_size],
        "max_storage_binding": max_binding,
        "complete": complete,
        "rows": rows,
    });
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap())
        .unwrap_or_else(|e| panic!("write {path}: {e}"));
}

/// Every block decoded OK to its original bytes.
fn check(
    ctx: &GpuContext,
    gpu: &Lz4GpuBatch,
    batch: &Lz4Batch,
    blocks: &[(Vec<u8>, Vec<u8>)],
    corpus: &str,
    path: Lz4DecodePath,
) {
    let status = read_status(ctx, gpu);
    if let Some((i, s)) = status.iter().enumerate().find(|(_, s)| !s.is_ok()) {
        panic!("{corpus}, {}: block {i} failed: {s}", path.name());
    }
    let output = read_whole(ctx, &gpu.output);
    for (i, d) in batch.descs().iter().enumerate() {
        let at = d.dst_offset as usize;
        let want = &blocks[i].0;
        assert!(
            output[at..at + want.len()] == want[..],
            "{corpus}, {}: block {i} decoded wrong",
            path.name()
        );
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

fn read_status(ctx: &GpuContext, gpu: &Lz4GpuBatch) -> Vec<Lz4Status> {
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
