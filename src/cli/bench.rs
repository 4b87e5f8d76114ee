//! `gpustream bench`: the main job, modelled on DirectStorage's
//! GpuDecompressionBenchmark. It streams every asset of a pack through the
//! runtime, per case (how blocks are stored and decoded) and per staging
//! size, and prints bandwidth beside a baseline measured in the same run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use gpustream::codec::Codec;
use gpustream::completion::Fence;
use gpustream::destinations::HostMemory;
use gpustream::io::{IoConfig, OpenMode};
use gpustream::pack::{AssetKind, Pack, PackWriter, WriterOptions};
use gpustream::runtime::{
    Destination, QueueConfig, QueueStats, Request, Runtime, RuntimeConfig, Source,
};

use super::CliResult;

/// Arguments of `gpustream bench`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack to stream (default: the demo pack, built under target/ on first use).
    #[arg(long)]
    pack: Option<PathBuf>,
    /// Staging sizes in MiB, comma-separated.
    #[arg(long, value_delimiter = ',')]
    staging: Option<Vec<u64>>,
    /// Cases: none, cpu-lz4, cpu-zstd, gpu-lz4 (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cases: Option<Vec<String>>,
    /// Keep the next batch queued before waiting on the current one.
    #[arg(long)]
    sustained: bool,
    /// Timed iterations per case and staging size (after one warm-up).
    #[arg(long)]
    iters: Option<u32>,
    /// Read through the page cache instead of O_DIRECT.
    #[arg(long)]
    buffered: bool,
    /// Deliver into host memory even where a GPU exists (CPU cases only).
    #[arg(long)]
    memory: bool,
    /// Capture a trace of every run to `<TRACE>.<case>.<staging>MiB`
    /// (compare the figures with and without to see its cost).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a PNG plot of bandwidth against staging size per case.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// A short run: a small slice of the pack, one staging size, two iterations.
    #[arg(long)]
    quick: bool,
    /// Size of the demo pack to build, in MiB of uncompressed data
    /// (default 128, or 64 with --quick).
    #[arg(long)]
    demo_mib: Option<u64>,
}

/// One line of the results table.
#[derive(Serialize, Clone, Debug)]
pub struct BenchRow {
    /// The case.
    pub case: String,
    /// Staging size in MiB.
    pub staging_mib: u64,
    /// Uncompressed bytes delivered per iteration.
    pub bytes_delivered: u64,
    /// Bytes read from the file per iteration.
    pub bytes_read: u64,
    /// Compression ratio of the case's pack (uncompressed / stored).
    pub ratio: f64,
    /// Median GB/s of uncompressed data delivered, submit to fence.
    pub delivered_gbps: f64,
    /// Median GB/s read from the file.
    pub read_gbps: f64,
    /// Process CPU seconds per GB delivered.
    pub cpu_s_per_gb: f64,
    /// Requests per submit.
    pub requests_per_submit: f64,
    /// Request latency p50, microseconds.
    pub latency_p50_us: f64,
    /// Request latency p99, microseconds.
    pub latency_p99_us: f64,
    /// Host bytes copied per byte delivered.
    pub copies_per_byte: f64,
    /// The baseline measured in the same run, GB/s.
    pub baseline_gbps: f64,
    /// What the baseline is.
    pub baseline: String,
    /// delivered_gbps / baseline_gbps.
    pub ratio_to_baseline: f64,
    /// Where the time went (summed over threads), seconds per iteration.
    pub stage_read_s: f64,
    /// CPU decode time per iteration (summed over threads).
    pub stage_cpu_decode_s: f64,
    /// GPU submission time per iteration (summed over chunks in flight).
    pub stage_gpu_s: f64,
}

/// The whole report.
#[derive(Serialize, Debug)]
pub struct BenchReport {
    /// When it ran (UTC, RFC 3339).
    pub date: String,
    /// The adapter, or "none".
    pub adapter: String,
    /// The I/O backend.
    pub io_backend: String,
    /// Whether reads bypassed the page cache.
    pub page_cache_bypassed: bool,
    /// The pack streamed.
    pub pack: String,
    /// CPU threads.
    pub cpu_threads: usize,
    /// Whether batches overlapped.
    pub sustained: bool,
    /// The rows.
    pub rows: Vec<BenchRow>,
    /// Notes (skipped cases and why).
    pub notes: Vec<String>,
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct we hand it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// The pack for a case: the source pack re-encoded with the case's codec,
/// cached beside it.
fn variant(src: &Path, codec: Codec) -> Result<PathBuf, Box<dyn std::error::Error + Send + Sync>> {
    let pack = Pack::open(src)?;
    if pack
        .blocks()
        .iter()
        .all(|b| b.codec == codec || b.codec == Codec::None)
        && codec != Codec::None
    {
        return Ok(src.to_path_buf());
    }
    let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("pack");
    let dir = Path::new("target").join("gpustream-bench");
    std::fs::create_dir_all(&dir)?;
    let out = dir.join(format!("{stem}.{}.gspk", codec.name()));
    let src_meta = std::fs::metadata(src)?;
    if let Ok(m) = std::fs::metadata(&out) {
        if m.modified()? >= src_meta.modified()? && Pack::open(&out).is_ok() {
            return Ok(out);
        }
    }
    eprintln!(
        "bench: writing the {codec} variant of {} to {}",
        src.display(),
        out.display()
    );
    let level = if codec == Codec::Zstd { 3 } else { 0 };
    let mut w = PackWriter::create(
        &out,
        WriterOptions {
            codec,
            level,
            ..Default::default()
        },
    )?;
    for (i, a) in pack.assets().iter().enumerate() {
        let id = gpustream::pack::AssetId(i as u32);
        match (a.kind, &a.texture) {
            (AssetKind::Texture, Some(t)) => {
                let mips = pack.read_texture_mips(id)?;
                w.add_texture(&a.name, t.format, t.width, t.height, &mips)?;
            }
            _ => {
                let data = pack.read_blob(id)?;
                w.add_blob(&a.name, &data)?;
            }
        }
    }
    w.finish()?;
    Ok(out)
}

/// Destinations for every asset: GPU buffers and textures with a device,
/// host memory without.
struct Targets {
    requests: Vec<Request>,
    delivered: u64,
}

fn build_targets(
    pf: &std::sync::Arc<gpustream::runtime::PackFile>,
    ctx: Option<&gpustream::gpu::GpuContext>,
    limit: u64,
) -> Targets {
    let pack = pf.pack();
    let mut requests = Vec::new();
    let mut delivered = 0u64;
    for (i, a) in pack.assets().iter().enumerate() {
        if delivered >= limit {
            break;
        }
        let asset = gpustream::pack::AssetId(i as u32);
        match (&a.texture, ctx) {
            (Some(t), Some(ctx)) if a.kind == AssetKind::Texture => {
                let fmt = t.format.wgpu();
                if fmt.is_compressed()
                    && !ctx
                        .device
                        .features()
                        .contains(wgpu::Features::TEXTURE_COMPRESSION_BC)
                {
                    continue;
                }
                let tex = ctx.device.create_texture(&wgpu::TextureDescriptor {
                    label: Some(&a.name),
                    size: wgpu::Extent3d {
                        width: t.width,
                        height: t.height,
                        depth_or_array_layers: 1,
                    },
                    mip_level_count: t.mip_count as u32,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D2,
                    format: fmt,
                    usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::TEXTURE_BINDING,
                    view_formats: &[],
                });
                texture_requests(pf, asset, &mut requests, |mip, origin, _| {
                    Destination::Texture {
                        texture: tex.clone(),
                        mip,
                        origin,
                        extent: None,
                    }
                });
            }
            (_, Some(ctx)) => {
                // Blobs go to a buffer in pieces of at most 4 MiB, so a
                // request never outgrows a small staging buffer.
                let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&a.name),
                    size: a.size.next_multiple_of(4).max(4),
                    usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE,
                    mapped_at_creation: false,
                });
                let piece = 4 << 20;
                let mut at = 0;
                while at < a.size {
                    let end = (at + piece).min(a.size);
                    requests.push(Request::new(
                        Source::Blob {
                            pack: pf.clone(),
                            asset,
                            range: Some(at..end),
                        },
                        Destination::Buffer {
                            buffer: buf.clone(),
                            offset: at,
                        },
                    ));
                    at = end;
                }
            }
            (_, None) => {
                // No GPU: everything lands in host memory, textures as their
                // tiles' bytes one after another.
                let mem = HostMemory::new(a.size as usize);
                if a.kind == AssetKind::Blob {
                    requests.push(Request::new(
                        Source::Blob {
                            pack: pf.clone(),
                            asset,
                            range: None,
                        },
                        Destination::Memory {
                            memory: mem,
                            offset: 0,
                        },
                    ));
                } else {
                    let mut off = 0usize;
                    texture_requests(pf, asset, &mut requests, |_, _, size| {
                        let d = Destination::Memory {
                            memory: mem.clone(),
                            offset: off,
                        };
                        off += size as usize;
                        d
                    });
                }
            }
        }
        delivered += a.size;
    }
    Targets {
        requests,
        delivered,
    }
}

/// Requests for every tile of every tiled mip of a texture and for its
/// packed mips; `dest(mip, origin, bytes)` says where each goes.
fn texture_requests(
    pf: &std::sync::Arc<gpustream::runtime::PackFile>,
    asset: gpustream::pack::AssetId,
    out: &mut Vec<Request>,
    mut dest: impl FnMut(u32, wgpu::Origin3d, u64) -> Destination,
) {
    let pack = pf.pack();
    let Some(t) = pack.asset(asset).texture else {
        return;
    };
    for mip in 0..t.mip_count {
        let Ok(Some((tx, ty))) = pack.tile_grid(asset, mip) else {
            continue;
        };
        for y in 0..ty {
            for x in 0..tx {
                let Ok(r) = pack.tile_region(asset, mip, x, y) else {
                    continue;
                };
                let d = dest(
                    mip as u32,
                    wgpu::Origin3d {
                        x: r.x,
                        y: r.y,
                        z: 0,
                    },
                    r.size() as u64,
                );
                out.push(Request::new(
                    Source::Tile {
                        pack: pf.clone(),
                        asset,
                        mip,
                        x,
                        y,
                    },
                    d,
                ));
            }
        }
    }
    if let Ok(p) = pack.packed_mips(asset) {
        if let Some(first) = p.mips.first() {
            let d = dest(first.mip as u32, wgpu::Origin3d::ZERO, p.len as u64);
            out.push(Request::new(
                Source::PackedMips {
                    pack: pf.clone(),
                    asset,
                },
                d,
            ));
        }
    }
}

/// The baseline for a case, measured now on the same data: N threads of
/// raw `lz4_flex`/zstd block decompression from memory, or a plain loop of
/// `queue.write_buffer` (or memcpy) for stored blocks.
fn baseline(
    pack: &Pack,
    case: &str,
    threads: usize,
    ctx: Option<&gpustream::gpu::GpuContext>,
    limit: u64,
) -> (f64, String) {
    let bytes = std::fs::read(pack.path()).unwrap_or_default();
    let mut blocks: Vec<(&[u8], usize)> = Vec::new();
    let mut total = 0u64;
    for b in pack.blocks() {
        if total >= limit {
            break;
        }
        let r = b.offset as usize..b.offset as usize + b.stored_size as usize;
        if let Some(s) = bytes.get(r) {
            blocks.push((s, b.size as usize));
            total += b.size as u64;
        }
    }
    match case {
        "none" => {
            let data: Vec<u8> = blocks.iter().flat_map(|(s, _)| s.iter().copied()).collect();
            if let Some(ctx) = ctx {
                let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("baseline"),
                    size: (32 << 20) as u64,
                    usage: wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let t0 = Instant::now();
                for c in data.chunks(32 << 20) {
                    let n = c.len() & !3;
                    ctx.queue.write_buffer(&buf, 0, &c[..n]);
                    ctx.queue.submit([]);
                }
                let _ = ctx.device.poll(wgpu::PollType::wait_indefinitely());
                let s = t0.elapsed().as_secs_f64();
                (
                    data.len() as f64 / s / 1e9,
                    "queue.write_buffer loop".into(),
                )
            } else {
                let mut dst = vec![0u8; data.len()];
                let t0 = Instant::now();
                dst.copy_from_slice(&data);
                std::hint::black_box(&dst);
                (
                    data.len() as f64 / t0.elapsed().as_secs_f64() / 1e9,
                    "memcpy".into(),
                )
            }
        }
        _ => {
            let codec = if case.ends_with("zstd") {
                Codec::Zstd
            } else {
                Codec::Lz4
            };
            let name = if codec == Codec::Zstd {
                "zstd"
            } else {
                "lz4_flex"
            };
            // One thread, raw decoder, same blocks; scaled by N threads.
            let mut out = vec![0u8; gpustream::MAX_BLOCK_SIZE];
            let t0 = Instant::now();
            let mut n = 0u64;
            for (s, size) in &blocks {
                let o = &mut out[..*size];
                let ok = match codec {
                    Codec::Lz4 => lz4_flex::block::decompress_into(s, o).is_ok(),
                    _ => zstd::bulk::decompress_to_buffer(s, o).is_ok(),
                };
                if ok || *size == s.len() {
                    n += *size as u64;
                }
            }
            let gbps = n as f64 / t0.elapsed().as_secs_f64() / 1e9;
            (
                gbps * threads as f64,
                format!("{threads} x raw {name} (1 thread, scaled)"),
            )
        }
    }
}

/// Runs `gpustream bench`.
pub fn run(args: Args) -> CliResult {
    let quick = args.quick;
    let iters = args.iters.unwrap_or(if quick { 2 } else { 3 }).max(1);
    let staging =
        args.staging
            .clone()
            .unwrap_or_else(|| if quick { vec![32] } else { vec![16, 64, 256] });
    let ctx = if args.memory {
        None
    } else {
        gpustream::gpu::open_device().ok()
    };
    let mut notes = Vec::new();
    if args.memory {
        notes.push("--memory: every case delivers into host memory".to_string());
    } else if ctx.is_none() {
        notes.push("no GPU adapter: CPU cases only, into host memory".to_string());
    }
    let all_cases = ["none", "cpu-lz4", "cpu-zstd", "gpu-lz4"];
    let cases: Vec<String> = args
        .cases
        .clone()
        .unwrap_or_else(|| all_cases.iter().map(|s| s.to_string()).collect());
    for c in &cases {
        if !all_cases.contains(&c.as_str()) {
            return Err(
                format!("unknown case '{c}' (expected none, cpu-lz4, cpu-zstd, gpu-lz4)").into(),
            );
        }
    }
    let src = match &args.pack {
        Some(p) => p.clone(),
        None => {
            let mib = args.demo_mib.unwrap_or(if quick { 64 } else { 128 });
            let path = Path::new("target").join(format!("gpustream-demo-{mib}MiB.gspk"));
            gpustream::pack::demo::ensure_demo_pack(
                &path,
                gpustream::pack::demo::DemoConfig {
                    size_bytes: mib << 20,
                    ..Default::default()
                },
                true,
            )?
        }
    };
    let limit = if quick { 48 << 20 } else { u64::MAX };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let mut rows = Vec::new();
    let mut io_backend = String::new();
    let mut bypassed = false;
    for case in &cases {
        if case == "gpu-lz4" && ctx.is_none() {
            notes.push("gpu-lz4 skipped: no GPU adapter".into());
            continue;
        }
        let codec = match case.as_str() {
            "none" => Codec::None,
            "cpu-zstd" => Codec::Zstd,
            _ => Codec::Lz4,
        };
        // lavapipe and other software adapters run the decoder at tens of
        // MB/s: a smaller slice keeps the default run short there.
        let soft = ctx
            .as_ref()
            .is_some_and(|c| c.adapter.get_info().device_type == wgpu::DeviceType::Cpu);
        let limit = if case == "gpu-lz4" && soft {
            limit.min(16 << 20)
        } else {
            limit
        };
        if case == "gpu-lz4" && soft {
            notes.push("software adapter: gpu-lz4 streams a 16 MiB slice per pass".into());
        }
        let path = variant(&src, codec)?;
        let pack = Pack::open(&path)?;
        let stored: u64 = pack.blocks().iter().map(|b| b.stored_size as u64).sum();
        let raw: u64 = pack.blocks().iter().map(|b| b.size as u64).sum();
        let ratio = raw as f64 / stored.max(1) as f64;
        let (base_gbps, base_what) = baseline(&pack, case, threads, ctx.as_ref(), limit);
        for &mib in &staging {
            let cfg = RuntimeConfig {
                staging_size: mib << 20,
                gpu_decompression: case == "gpu-lz4",
                cpu_threads: threads,
                open_mode: if args.buffered {
                    OpenMode::Buffered
                } else {
                    OpenMode::Auto
                },
                io: IoConfig::default(),
                trace: args.trace.as_ref().map(|t| {
                    let mut p = t.clone().into_os_string();
                    p.push(format!(".{case}.{mib}MiB"));
                    PathBuf::from(p)
                }),
                ..Default::default()
            };
            let rt = match &ctx {
                Some(c) => Runtime::new(&c.device, &c.queue, cfg)?,
                None => Runtime::without_gpu(cfg)?,
            };
            io_backend = rt.io_backend();
            let pf = rt.open_pack(&path)?;
            bypassed = pf.is_direct();
            // Two destination sets, so sustained mode can queue one while
            // the other is in flight.
            let sets = [
                build_targets(&pf, ctx.as_ref(), limit),
                build_targets(&pf, ctx.as_ref(), limit),
            ];
            let delivered = sets[0].delivered;
            let q = rt.create_queue(QueueConfig {
                capacity: 8192,
                ..Default::default()
            });
            let fence = Fence::new();
            let mut value = 0u64;
            let mut times = Vec::new();
            let enqueue_all =
                |set: &Targets,
                 value: &mut u64|
                 -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
                    for r in &set.requests {
                        q.enqueue(r.clone())?;
                    }
                    *value += 1;
                    q.enqueue_signal(&fence, *value);
                    q.submit();
                    Ok(*value)
                };
            // Warm-up (also fills the page cache for buffered runs).
            let v = enqueue_all(&sets[0], &mut value)?;
            fence.wait(v);
            let warm = q.stats();
            let cpu0 = cpu_seconds();
            let t_all = Instant::now();
            if args.sustained {
                let mut prev = enqueue_all(&sets[1], &mut value)?;
                let mut t_prev = Instant::now();
                for i in 0..iters {
                    let next = if i + 1 < iters {
                        Some(enqueue_all(&sets[(i as usize) % 2], &mut value)?)
                    } else {
                        None
                    };
                    fence.wait(prev);
                    times.push(t_prev.elapsed());
                    t_prev = Instant::now();
                    if let Some(n) = next {
                        prev = n;
                    }
                }
            } else {
                for i in 0..iters {
                    let t0 = Instant::now();
                    let v = enqueue_all(&sets[(i as usize) % 2], &mut value)?;
                    fence.wait(v);
                    times.push(t0.elapsed());
                }
            }
            let wall = t_all.elapsed();
            let cpu = cpu_seconds() - cpu0;
            let st = q.stats();
            let rec = q.error_record();
            if rec.failure_count > 0 {
                return Err(format!(
                    "{case}: {} requests failed; first: {}",
                    rec.failure_count,
                    rec.first_failure.map(|f| f.to_string()).unwrap_or_default()
                )
                .into());
            }
            let d = diff(&st, &warm);
            let per_iter = |x: u64| x as f64 / iters as f64;
            times.sort();
            let median = times[times.len() / 2]
                .max(Duration::from_nanos(1))
                .as_secs_f64();
            let delivered_gbps = delivered as f64 / median / 1e9;
            let read_per_iter = per_iter(d.bytes_read);
            let gb_total = delivered as f64 * iters as f64 / 1e9;
            let _ = wall;
            rows.push(BenchRow {
                case: case.clone(),
                staging_mib: mib,
                bytes_delivered: delivered,
                bytes_read: read_per_iter as u64,
                ratio,
                delivered_gbps,
                read_gbps: read_per_iter / median / 1e9,
                cpu_s_per_gb: cpu / gb_total.max(1e-9),
                requests_per_submit: d.requests as f64 / d.submits.max(1) as f64,
                latency_p50_us: st.latency.quantile_us(0.5),
                latency_p99_us: st.latency.quantile_us(0.99),
                copies_per_byte: d.bytes_host_copied as f64
                    / (delivered as f64 * iters as f64).max(1.0),
                baseline_gbps: base_gbps,
                baseline: base_what.clone(),
                ratio_to_baseline: delivered_gbps / base_gbps.max(1e-9),
                stage_read_s: per_iter(d.read_ns) / 1e9,
                stage_cpu_decode_s: per_iter(d.cpu_decode_ns) / 1e9,
                stage_gpu_s: per_iter(d.gpu_ns) / 1e9,
            });
        }
    }
    let report = BenchReport {
        date: super::utc_now(),
        adapter: ctx
            .as_ref()
            .map(|c| c.describe())
            .unwrap_or_else(|| "none".into()),
        io_backend,
        page_cache_bypassed: bypassed,
        pack: src.display().to_string(),
        cpu_threads: threads,
        sustained: args.sustained,
        rows,
        notes,
    };
    print_report(&report);
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
        println!("wrote {}", p.display());
    }
    if let Some(p) = &args.plot {
        plot(&report, p)?;
        println!("wrote {}", p.display());
    }
    Ok(())
}

fn diff(a: &QueueStats, b: &QueueStats) -> QueueStats {
    QueueStats {
        requests: a.requests - b.requests,
        submits: a.submits - b.submits,
        bytes_read: a.bytes_read - b.bytes_read,
        bytes_host_copied: a.bytes_host_copied - b.bytes_host_copied,
        read_ns: a.read_ns - b.read_ns,
        cpu_decode_ns: a.cpu_decode_ns - b.cpu_decode_ns,
        gpu_ns: a.gpu_ns - b.gpu_ns,
        ..Default::default()
    }
}

fn print_report(r: &BenchReport) {
    println!("gpustream bench  {}", r.date);
    println!(
        "adapter: {}   I/O: {}   page cache bypassed: {}   CPU threads: {}",
        r.adapter, r.io_backend, r.page_cache_bypassed, r.cpu_threads
    );
    println!(
        "pack: {}{}",
        r.pack,
        if r.sustained { "   (sustained)" } else { "" }
    );
    for n in &r.notes {
        println!("note: {n}");
    }
    let mut t = gpustream::report::table::Table::new([
        "case",
        "staging MiB",
        "ratio",
        "delivered GB/s",
        "read GB/s",
        "CPU s/GB",
        "req/submit",
        "p50 ms",
        "p99 ms",
        "baseline GB/s",
        "ours/baseline",
        "baseline",
    ]);
    for row in &r.rows {
        t.row([
            row.case.clone(),
            row.staging_mib.to_string(),
            format!("{:.2}", row.ratio),
            format!("{:.3}", row.delivered_gbps),
            format!("{:.3}", row.read_gbps),
            format!("{:.3}", row.cpu_s_per_gb),
            format!("{:.1}", row.requests_per_submit),
            format!("{:.2}", row.latency_p50_us / 1e3),
            format!("{:.2}", row.latency_p99_us / 1e3),
            format!("{:.3}", row.baseline_gbps),
            format!("{:.2}", row.ratio_to_baseline),
            row.baseline.clone(),
        ]);
    }
    print!("{t}");
    println!("where the time goes (per iteration, summed over threads/chunks in flight):");
    for row in &r.rows {
        println!(
            "  {:<9} {:>4} MiB  read {:.3}s  CPU decode {:.3}s  GPU submissions {:.3}s  host copies/byte {:.2}",
            row.case, row.staging_mib, row.stage_read_s, row.stage_cpu_decode_s, row.stage_gpu_s, row.copies_per_byte
        );
    }
}

fn plot(r: &BenchReport, path: &Path) -> CliResult {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for row in &r.rows {
        match series.iter_mut().find(|(n, _)| *n == row.case) {
            Some((_, pts)) => pts.push((row.staging_mib as f64, row.delivered_gbps)),
            None => series.push((
                row.case.clone(),
                vec![(row.staging_mib as f64, row.delivered_gbps)],
            )),
        }
    }
    let panel = gpustream::report::plot::LinePlot {
        title: format!("gpustream bench ({})", r.adapter),
        x_label: "staging buffer (MiB)".into(),
        y_label: "GB/s of uncompressed data delivered".into(),
        log_x: true,
        log_y: false,
        series: series
            .into_iter()
            .map(|(name, points)| gpustream::report::plot::Series { name, points })
            .collect(),
    };
    gpustream::report::plot::save_png(path, &[panel], 1, 1000, 650)?;
    Ok(())
}
