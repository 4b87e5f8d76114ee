//! `gpustream replay` and `gpustream trace-info`: play a captured trace back
//! against its packs, and summarise one.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use gpustream::completion::Fence;
use gpustream::destinations::HostMemory;
use gpustream::runtime::trace::{TraceHeader, TraceRecord, TraceSource, TRACE_VERSION};
use gpustream::runtime::{
    Destination, PackFile, Priority, Queue, QueueConfig, Request, Runtime, RuntimeConfig, Source,
    SourceKind,
};

use super::CliResult;

/// Arguments of `gpustream replay`.
#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The trace file.
    trace: PathBuf,
    /// Staging size in MiB.
    #[arg(long, default_value_t = 32)]
    staging: u64,
    /// Times to play the trace.
    #[arg(long, default_value_t = 1)]
    iters: u32,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Arguments of `gpustream trace-info`.
#[derive(clap::Args)]
pub struct InfoArgs {
    /// The trace file.
    trace: PathBuf,
    /// Submits carrying fewer requests than this are flagged.
    #[arg(long, default_value_t = 8)]
    few: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// A parsed trace: its records with their line numbers.
struct Trace {
    records: Vec<(usize, TraceRecord)>,
}

fn load(path: &Path) -> Result<Trace, Box<dyn std::error::Error + Send + Sync>> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = std::io::BufReader::new(f).lines();
    let first = lines
        .next()
        .ok_or_else(|| format!("{}: empty trace", path.display()))??;
    let header: TraceHeader = serde_json::from_str(&first)
        .map_err(|e| format!("{}:1: not a gpustream trace header: {e}", path.display()))?;
    if header.format != "gpustream-trace" || header.version != TRACE_VERSION {
        return Err(format!(
            "{}:1: trace format '{}' version {} (this build reads version {TRACE_VERSION})",
            path.display(),
            header.format,
            header.version
        )
        .into());
    }
    let mut records = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let rec: TraceRecord = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: {e}", path.display(), i + 2))?;
        records.push((i + 2, rec));
    }
    Ok(Trace { records })
}

#[derive(Serialize)]
struct ReplayResult {
    trace: String,
    iters: u32,
    requests: u64,
    submits: u64,
    requests_per_submit: f64,
    seconds: f64,
    disk_mb_s: f64,
    uncompressed_mb_s: f64,
    adapter: String,
}

/// Runs `gpustream replay`.
pub fn replay(args: ReplayArgs) -> CliResult {
    let trace = load(&args.trace)?;
    let ctx = gpustream::gpu::open_device().ok();
    let rt = match &ctx {
        Some(c) => Runtime::new(
            &c.device,
            &c.queue,
            RuntimeConfig {
                staging_size: args.staging << 20,
                ..Default::default()
            },
        )?,
        None => Runtime::without_gpu(RuntimeConfig {
            staging_size: args.staging << 20,
            ..Default::default()
        })?,
    };
    let tp = args.trace.display().to_string();
    // Validate everything first: a missing pack or an out-of-range block
    // is reported with its line before any I/O happens.
    let mut packs: HashMap<u32, Arc<PackFile>> = HashMap::new();
    let mut queues: HashMap<u32, Queue> = HashMap::new();
    let mut textures: HashMap<(u32, String), wgpu::Texture> = HashMap::new();
    let mut plan: Vec<(u32, Option<Request>)> = Vec::new(); // (queue, request or None = submit)
    for (line, rec) in &trace.records {
        match rec {
            TraceRecord::Pack { id, path } => {
                let pf = rt
                    .open_pack(path)
                    .map_err(|e| format!("{tp}:{line}: pack {id} ({}): {e}", path.display()))?;
                packs.insert(*id, pf);
            }
            TraceRecord::Queue {
                id,
                priority,
                capacity,
            } => {
                queues.insert(
                    *id,
                    rt.create_queue(QueueConfig {
                        capacity: *capacity,
                        priority: *priority,
                        ..Default::default()
                    }),
                );
            }
            TraceRecord::Request {
                queue,
                pack,
                asset,
                source,
                size,
                dest,
                ..
            } => {
                let q = *queue;
                if !queues.contains_key(&q) {
                    queues.insert(
                        q,
                        rt.create_queue(QueueConfig {
                            priority: Priority::Normal,
                            ..Default::default()
                        }),
                    );
                }
                let (Some(pid), Some(name)) = (pack, asset) else {
                    // Memory sources carry no data in the trace: skipped.
                    let _ = SourceKind::Memory;
                    continue;
                };
                let pf = packs
                    .get(pid)
                    .ok_or_else(|| format!("{tp}:{line}: pack {pid} was never declared"))?
                    .clone();
                let id = pf.pack().find(name).ok_or_else(|| {
                    format!("{tp}:{line}: no asset '{name}' in {}", pf.path().display())
                })?;
                let a = pf.pack().asset(id).clone();
                let src = match source {
                    TraceSource::Blob { range } => {
                        if range[0] > range[1] || range[1] > a.size {
                            return Err(format!(
                                "{tp}:{line}: range {range:?} is outside '{name}' ({} bytes)",
                                a.size
                            )
                            .into());
                        }
                        Source::Blob {
                            pack: pf.clone(),
                            asset: id,
                            range: Some(range[0]..range[1]),
                        }
                    }
                    TraceSource::Tile { mip, x, y } => {
                        pf.pack()
                            .tile(id, *mip, *x, *y)
                            .map_err(|e| format!("{tp}:{line}: {e}"))?;
                        Source::Tile {
                            pack: pf.clone(),
                            asset: id,
                            mip: *mip,
                            x: *x,
                            y: *y,
                        }
                    }
                    TraceSource::Packed => Source::PackedMips {
                        pack: pf.clone(),
                        asset: id,
                    },
                    TraceSource::Memory { .. } => continue,
                };
                let dst = match (dest.as_str(), &ctx, &a.texture) {
                    ("texture", Some(c), Some(t)) => {
                        let tex = textures
                            .entry((*pid, name.clone()))
                            .or_insert_with(|| {
                                c.device.create_texture(&wgpu::TextureDescriptor {
                                    label: Some(name),
                                    size: wgpu::Extent3d {
                                        width: t.width,
                                        height: t.height,
                                        depth_or_array_layers: 1,
                                    },
                                    mip_level_count: t.mip_count as u32,
                                    sample_count: 1,
                                    dimension: wgpu::TextureDimension::D2,
                                    format: t.format.wgpu(),
                                    usage: wgpu::TextureUsages::COPY_DST,
                                    view_formats: &[],
                                })
                            })
                            .clone();
                        match source {
                            TraceSource::Tile { mip, x, y } => {
                                let r = pf
                                    .pack()
                                    .tile_region(id, *mip, *x, *y)
                                    .map_err(|e| format!("{tp}:{line}: {e}"))?;
                                Destination::Texture {
                                    texture: tex,
                                    mip: *mip as u32,
                                    origin: wgpu::Origin3d {
                                        x: r.x,
                                        y: r.y,
                                        z: 0,
                                    },
                                    extent: None,
                                }
                            }
                            _ => {
                                let first = pf
                                    .pack()
                                    .packed_mips(id)
                                    .map_err(|e| format!("{tp}:{line}: {e}"))?
                                    .mips
                                    .first()
                                    .map(|m| m.mip)
                                    .unwrap_or(0);
                                Destination::Texture {
                                    texture: tex,
                                    mip: first as u32,
                                    origin: wgpu::Origin3d::ZERO,
                                    extent: None,
                                }
                            }
                        }
                    }
                    ("buffer", Some(c), _) | ("texture", Some(c), None) => Destination::Buffer {
                        buffer: c.device.create_buffer(&wgpu::BufferDescriptor {
                            label: None,
                            size: size.next_multiple_of(4).max(4),
                            usage: wgpu::BufferUsages::COPY_DST,
                            mapped_at_creation: false,
                        }),
                        offset: 0,
                    },
                    _ => Destination::Memory {
                        memory: HostMemory::new(*size as usize),
                        offset: 0,
                    },
                };
                plan.push((q, Some(Request::new(src, dst))));
            }
            TraceRecord::Submit { queue, .. } => plan.push((*queue, None)),
            TraceRecord::Signal { .. } => {}
        }
    }
    let fence = Fence::new();
    let mut value = 0;
    let t0 = Instant::now();
    for _ in 0..args.iters {
        for (q, item) in &plan {
            let queue = &queues[q];
            match item {
                Some(r) => queue.enqueue(r.clone())?,
                None => queue.submit(),
            }
        }
        for queue in queues.values() {
            value += 1;
            queue.enqueue_signal(&fence, value);
            queue.submit();
            fence.wait(value);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let (mut requests, mut submits, mut read, mut delivered, mut failed) = (0, 0, 0, 0, 0);
    for q in queues.values() {
        let s = q.stats();
        requests += s.requests;
        submits += s.submits;
        read += s.bytes_read;
        delivered += s.bytes_delivered;
        failed += s.failed;
    }
    if failed > 0 {
        eprintln!("warning: {failed} requests failed during replay");
    }
    let res = ReplayResult {
        trace: tp,
        iters: args.iters,
        requests,
        submits,
        requests_per_submit: requests as f64 / submits.max(1) as f64,
        seconds: secs,
        disk_mb_s: read as f64 / secs / 1e6,
        uncompressed_mb_s: delivered as f64 / secs / 1e6,
        adapter: ctx
            .as_ref()
            .map(|c| c.describe())
            .unwrap_or_else(|| "none (host memory)".into()),
    };
    println!(
        "{} requests in {} submits ({:.1} per submit), {:.3} s: disk {:.1} MB/s, uncompressed delivered ({}) {:.1} MB/s",
        res.requests,
        res.submits,
        res.requests_per_submit,
        res.seconds,
        res.disk_mb_s,
        if ctx.is_some() { "GPU and traced host-memory destinations" } else { "host memory" },
        res.uncompressed_mb_s
    );
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&res)?)?;
    }
    Ok(())
}

#[derive(Serialize, Default)]
struct TraceInfo {
    requests: u64,
    submits: u64,
    signals: u64,
    queues: u64,
    packs: u64,
    bytes_stored: u64,
    bytes_delivered: u64,
    by_source: HashMap<String, u64>,
    by_dest: HashMap<String, u64>,
    few_request_submits: u64,
    few_threshold: u64,
    /// Request sizes: (upper bound in bytes, count), powers of two.
    size_histogram: Vec<(u64, u64)>,
    duration_s: f64,
}

/// Runs `gpustream trace-info`.
pub fn info(args: InfoArgs) -> CliResult {
    let trace = load(&args.trace)?;
    let mut t = TraceInfo {
        few_threshold: args.few,
        ..Default::default()
    };
    let mut hist = vec![0u64; 40];
    let mut last_t = 0u64;
    for (_, rec) in &trace.records {
        match rec {
            TraceRecord::Pack { .. } => t.packs += 1,
            TraceRecord::Queue { .. } => t.queues += 1,
            TraceRecord::Request {
                source,
                size,
                stored,
                dest,
                t_us,
                ..
            } => {
                t.requests += 1;
                t.bytes_stored += stored;
                t.bytes_delivered += size;
                let k = match source {
                    TraceSource::Blob { .. } => "blob",
                    TraceSource::Tile { .. } => "tile",
                    TraceSource::Packed => "packed-mips",
                    TraceSource::Memory { .. } => "memory",
                };
                *t.by_source.entry(k.into()).or_default() += 1;
                *t.by_dest.entry(dest.clone()).or_default() += 1;
                hist[(64 - (*size).max(1).saturating_sub(1).leading_zeros()) as usize] += 1;
                last_t = last_t.max(*t_us);
            }
            TraceRecord::Signal { .. } => t.signals += 1,
            TraceRecord::Submit { requests, t_us, .. } => {
                t.submits += 1;
                if *requests < args.few {
                    t.few_request_submits += 1;
                }
                last_t = last_t.max(*t_us);
            }
        }
    }
    t.size_histogram = hist
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (1u64 << i, *n))
        .collect();
    t.duration_s = last_t as f64 / 1e6;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&t)?);
        return Ok(());
    }
    println!("{}: {} requests, {} submits ({:.1} requests per submit), {} signals, {} queues, {} packs over {:.3} s",
        args.trace.display(), t.requests, t.submits, t.requests as f64 / t.submits.max(1) as f64, t.signals, t.queues, t.packs, t.duration_s);
    println!(
        "bytes: {} stored, {} delivered (ratio {:.2})",
        t.bytes_stored,
        t.bytes_delivered,
        t.bytes_delivered as f64 / t.bytes_stored.max(1) as f64
    );
    println!("by source: {:?}", t.by_source);
    println!("by destination: {:?}", t.by_dest);
    println!(
        "submits with fewer than {} requests: {} of {}{}",
        args.few,
        t.few_request_submits,
        t.submits,
        if t.few_request_submits * 2 > t.submits && t.submits > 0 {
            "  <- most submits are small: batch more requests per submit (see seed 004)"
        } else {
            ""
        }
    );
    println!("request sizes:");
    for (bound, n) in &t.size_histogram {
        println!("  <= {:>10} B: {n}", bound);
    }
    Ok(())
}
