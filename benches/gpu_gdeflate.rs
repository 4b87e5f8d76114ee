//! The GPU GDeflate decoders alone: GB/s of output per batch of pages for
//! the WGSL decoder and, where the Vulkan driver has one
//! (`VK_EXT/NV_memory_decompression`), the driver's own, on the same pages
//! on the device `gpustream_tools::gpu::open_device` picks, beside the ratio of
//! the same blocks as GDeflate and as LZ4 fast.
//!
//! Each pack block (conditioning undone) is compressed to one GDeflate page
//! at level 12, the packer's default; blocks GDeflate saves under 1/16 of
//! are left out, as the packer stores those raw. A batch of pages is
//! decoded in one dispatch, one workgroup per page, into 64 KiB slots; the
//! time is the wall clock from submit to the device going idle, the best
//! of `--runs`. The driver's decoder gets the same pages at 4-byte aligned
//! offsets (its rule) in one `vkCmdDecompressMemory*` command, timed the
//! same way. Each decoder's first run's output is checked against the
//! blocks.
//!
//! Run: `cargo bench --bench gpu_gdeflate [-- PACK... [--batch N,...]
//! [--runs N] [--json FILE] [--quick]]`. Without packs it uses the 32 MiB
//! demo pack of `benches/codec.rs`. Only the pack's first blocks are
//! read, a quarter more than the largest batch needs. On lavapipe the figures say the
//! decoder works, not how fast it is on a GPU.

use gpustream::decode::gpu::driver_gdeflate::{DriverBuffer, DriverGDeflate, DriverRegion};
use gpustream::decode::gpu::{BlockPass, GDeflateDecodePipeline};
use gpustream::decode::{BlockDesc, GDeflateStatus};
use gpustream::pack::{BlockId, Pack};
use gpustream::{Codec, MAX_BLOCK_SIZE};
use gpustream_tools::demo::{ensure_demo_pack, DemoConfig};
use gpustream_tools::gpu::read_buffer;
use std::path::PathBuf;
use std::time::Instant;
use wgpu::util::DeviceExt;

/// One corpus: blocks and their pages, and the LZ4 fast bytes of the same
/// blocks for the ratio.
struct Corpus {
    name: String,
    plain: Vec<Vec<u8>>,
    pages: Vec<Vec<u8>>,
    lz4_bytes: u64,
}

/// The first `max` blocks of the pack that GDeflate compresses (each at
/// most one page), compressed on every core.
fn load(path: &std::path::Path, max: usize) -> Corpus {
    let pack = Pack::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = pack.open_file().expect("open pack file");
    let mut raw = Vec::new();
    let mut stored = Vec::new();
    for (i, b) in pack.blocks().iter().enumerate().take(max) {
        let id = BlockId(i as u32);
        pack.read_stored(&file, id, &mut stored)
            .expect("read block");
        let mut out = vec![0u8; b.size as usize];
        pack.check_block(id, &stored, &mut out)
            .expect("decode block");
        raw.push(out);
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per = raw.len().div_ceil(threads).max(1);
    let encoded: Vec<(Vec<u8>, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = raw
            .chunks(per)
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|out| {
                            let page = Codec::GDeflate.compress(out, 12).expect("gdeflate");
                            let lz4 = Codec::Lz4.compress(out, 0).expect("lz4").len();
                            (page, lz4.min(out.len()))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("compress thread"))
            .collect()
    });
    let mut c = Corpus {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        plain: Vec::new(),
        pages: Vec::new(),
        lz4_bytes: 0,
    };
    for (out, (page, lz4)) in raw.into_iter().zip(encoded) {
        // The packer stores blocks GDeflate saves under 1/16 of raw.
        if page.len() + out.len() / 16 > out.len() {
            continue;
        }
        c.lz4_bytes += lz4 as u64;
        c.plain.push(out);
        c.pages.push(page);
    }
    c
}

/// The device buffers of one batch of `n` pages.
struct Batch {
    input: wgpu::Buffer,
    descs: Vec<BlockDesc>,
    output: wgpu::Buffer,
    status: wgpu::Buffer,
    out_bytes: u64,
    in_bytes: u64,
}

fn batch(ctx: &gpustream_tools::gpu::GpuContext, c: &Corpus, n: usize) -> Batch {
    let mut input = Vec::new();
    let mut descs = Vec::with_capacity(n);
    let mut out_bytes = 0u64;
    for (i, page) in c.pages.iter().take(n).enumerate() {
        let src = input.len() as u32;
        input.extend_from_slice(page);
        let size = c.plain[i].len() as u32;
        descs.push(BlockDesc::linear(
            src,
            page.len() as u32,
            (i * MAX_BLOCK_SIZE) as u32,
            size,
        ));
        out_bytes += size as u64;
    }
    let in_bytes = input.len() as u64;
    input.resize(input.len().next_multiple_of(4).max(4), 0);
    let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
    Batch {
        input: ctx
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("gdeflate bench pages"),
                contents: &input,
                usage: wgpu::BufferUsages::STORAGE,
            }),
        output: ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gdeflate bench output"),
            size: (n * MAX_BLOCK_SIZE) as u64,
            usage,
            mapped_at_creation: false,
        }),
        status: ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gdeflate bench status"),
            size: (n as u64 * 4).next_multiple_of(256),
            usage,
            mapped_at_creation: false,
        }),
        descs,
        out_bytes,
        in_bytes,
    }
}

/// One dispatch over the batch: wall seconds from submit to idle.
fn run(ctx: &gpustream_tools::gpu::GpuContext, p: &GDeflateDecodePipeline, b: &Batch) -> f64 {
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    p.encode_blocks(
        &ctx.device,
        &mut enc,
        b.input.slice(..),
        &b.descs,
        &b.output,
        &b.status,
    )
    .expect("encode");
    let t = Instant::now();
    ctx.queue.submit([enc.finish()]);
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    t.elapsed().as_secs_f64()
}

/// The batch's output and statuses against the blocks.
fn check(ctx: &gpustream_tools::gpu::GpuContext, c: &Corpus, b: &Batch) {
    let back = |buf: &wgpu::Buffer| {
        let rb = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gdeflate bench readback"),
            size: buf.size(),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(buf, 0, &rb, 0, buf.size());
        ctx.queue.submit([enc.finish()]);
        read_buffer(&ctx.device, &rb).expect("read back")
    };
    let out = back(&b.output);
    let st = back(&b.status);
    for (i, d) in b.descs.iter().enumerate() {
        let word = u32::from_le_bytes(st[i * 4..i * 4 + 4].try_into().unwrap_or([0; 4]));
        let status = GDeflateStatus::from_word(word);
        assert!(status.is_ok(), "{}: page {i}: {status}", c.name);
        let at = d.dst_offset as usize;
        assert!(
            out[at..at + d.dst_size as usize] == c.plain[i][..],
            "{}: page {i} decoded wrong",
            c.name
        );
    }
}

/// The same pages for the driver's decoder: 4-byte aligned in its source
/// buffer, outputs 64 KiB apart.
struct DriverBatch {
    src: DriverBuffer,
    dst: DriverBuffer,
    regions: Vec<DriverRegion>,
}

fn driver_batch(
    ctx: &gpustream_tools::gpu::GpuContext,
    d: &DriverGDeflate,
    c: &Corpus,
    n: usize,
) -> DriverBatch {
    let mut input = Vec::new();
    let mut regions = Vec::with_capacity(n);
    for (i, page) in c.pages.iter().take(n).enumerate() {
        input.resize(input.len().next_multiple_of(4), 0);
        regions.push(DriverRegion {
            src_offset: input.len() as u64,
            src_size: page.len() as u64,
            dst_offset: (i * MAX_BLOCK_SIZE) as u64,
            dst_size: c.plain[i].len() as u64,
        });
        input.extend_from_slice(page);
    }
    input.resize(input.len().next_multiple_of(4).max(4), 0);
    let src = d
        .buffer(input.len() as u64, "driver bench pages")
        .expect("driver buffer");
    let dst = d
        .buffer((n * MAX_BLOCK_SIZE) as u64, "driver bench output")
        .expect("driver buffer");
    ctx.queue.write_buffer(&src.buffer, 0, &input);
    DriverBatch { src, dst, regions }
}

/// One driver command over the batch: wall seconds from submit to idle.
fn driver_run(ctx: &gpustream_tools::gpu::GpuContext, d: &DriverGDeflate, b: &DriverBatch) -> f64 {
    let cb = d
        .record(&b.src, &b.dst, &b.regions)
        .expect("record driver decode");
    let t = Instant::now();
    ctx.queue.submit([cb]);
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    t.elapsed().as_secs_f64()
}

/// The driver's output against the blocks.
fn driver_check(ctx: &gpustream_tools::gpu::GpuContext, c: &Corpus, b: &DriverBatch) {
    let size = b.dst.size();
    let rb = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("driver bench readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(&b.dst.buffer, 0, &rb, 0, size);
    ctx.queue.submit([enc.finish()]);
    let out = read_buffer(&ctx.device, &rb).expect("read back");
    for (i, r) in b.regions.iter().enumerate() {
        let at = r.dst_offset as usize;
        assert!(
            out[at..at + r.dst_size as usize] == c.plain[i][..],
            "{}: page {i}: the driver's decoder decoded it wrong",
            c.name
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick" || a == "--test");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let runs: usize = value("--runs")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 5 });
    let batches: Vec<usize> = value("--batch")
        .map(|v| v.split(',').filter_map(|s| s.parse().ok()).collect())
        .unwrap_or_else(|| {
            if quick {
                vec![16]
            } else {
                vec![256, 1024, 4096]
            }
        });
    let json = value("--json");
    let skip_values: Vec<String> = ["--batch", "--runs", "--json"]
        .iter()
        .filter_map(|f| value(f))
        .collect();
    let mut packs: Vec<PathBuf> = args
        .iter()
        .filter(|a| !a.starts_with("--") && !skip_values.contains(a))
        .map(PathBuf::from)
        .collect();
    if packs.is_empty() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/gpustream-bench-codec.gspk");
        let config = DemoConfig {
            size_bytes: 32 << 20,
            ..DemoConfig::default()
        };
        packs.push(ensure_demo_pack(path, config, true).expect("demo pack"));
    }
    let ctx = match gpustream_tools::gpu::open_device() {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("gpu_gdeflate: no GPU adapter ({e}); nothing measured");
            return;
        }
    };
    let pipeline = GDeflateDecodePipeline::new(&ctx.device);
    let driver = DriverGDeflate::new(&ctx.device);
    println!("# gpu_gdeflate on {}", ctx.describe());
    let offered = gpustream::decode::gpu::driver_gdeflate::offered_extension(&ctx.adapter);
    println!(
        "# driver's decoder: {}",
        match (&driver, offered) {
            (Some(d), _) => format!("{} (timed beside WGSL)", d.extension().name()),
            (None, Some(e)) => format!("{} offered but not enabled on this device", e.name()),
            (None, None) => "none (no VK_EXT/VK_NV_memory_decompression)".into(),
        }
    );
    println!("| corpus | pages | MiB out | ratio gdeflate | ratio lz4 fast | gdeflate / lz4 | WGSL GB/s (best of {runs}) | driver GB/s |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut rows = Vec::new();
    for path in &packs {
        let c = load(path, *batches.iter().max().unwrap_or(&0) * 5 / 4 + 16);
        let plain: u64 = c.plain.iter().map(|b| b.len() as u64).sum();
        let gd: u64 = c.pages.iter().map(|p| p.len() as u64).sum();
        for &n in &batches {
            if n > c.pages.len() {
                println!(
                    "| {} | {n} | skipped: the corpus has {} pages | | | | | |",
                    c.name,
                    c.pages.len()
                );
                continue;
            }
            let b = batch(&ctx, &c, n);
            let first = run(&ctx, &pipeline, &b);
            check(&ctx, &c, &b);
            let best = (1..runs).fold(first, |t, _| t.min(run(&ctx, &pipeline, &b)));
            let gbs = b.out_bytes as f64 / best / 1e9;
            let driver_gbs = driver.as_ref().map(|d| {
                let db = driver_batch(&ctx, d, &c, n);
                let first = driver_run(&ctx, d, &db);
                driver_check(&ctx, &c, &db);
                let best = (1..runs).fold(first, |t, _| t.min(driver_run(&ctx, d, &db)));
                b.out_bytes as f64 / best / 1e9
            });
            let driver_cell = driver_gbs.map_or("n/a".to_string(), |g| format!("{g:.3}"));
            println!(
                "| {} | {n} | {:.1} | {:.3} | {:.3} | {:.3} | {gbs:.3} | {driver_cell} |",
                c.name,
                b.out_bytes as f64 / (1 << 20) as f64,
                plain as f64 / gd as f64,
                plain as f64 / c.lz4_bytes as f64,
                c.lz4_bytes as f64 / gd as f64,
            );
            rows.push(serde_json::json!({
                "corpus": c.name, "pages": n, "bytes_out": b.out_bytes, "bytes_in": b.in_bytes,
                "ratio_gdeflate": plain as f64 / gd as f64,
                "ratio_lz4_fast": plain as f64 / c.lz4_bytes as f64,
                "wall_gbs": gbs, "driver_wall_gbs": driver_gbs,
                "driver_extension": driver.as_ref().map(|d| d.extension().name()),
                "runs": runs, "adapter": ctx.describe(),
            }));
        }
    }
    if let Some(f) = json {
        std::fs::write(&f, serde_json::to_string_pretty(&rows).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}
