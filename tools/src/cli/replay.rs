//! `gpustream replay` and `gpustream trace-info`: play a captured trace back
//! against its packs, and summarise one.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use gpustream::completion::Fence;
use gpustream::destinations::HostMemory;
use gpustream::pack::{AssetId, Pack};
use gpustream::runtime::trace::{TraceDest, TraceError, TraceReader, TraceRecord, TraceSource};
use gpustream::runtime::{
    Destination, PackFile, Priority, Queue, QueueConfig, Request, Runtime, Source,
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

/// Most records a replay holds: its plan keeps one request, with its own
/// destination, per record.
const MAX_REPLAY_RECORDS: u64 = 1 << 20;

/// Most bytes of destinations (host memory, buffers, textures) a replay
/// allocates for its plan. Each record can name a whole asset, so without
/// this a small trace could ask for far more memory than the machine has.
const MAX_REPLAY_DESTINATION_BYTES: u64 = 4 << 30;

/// Most pack and queue records a replay accepts: each opens a file or
/// creates a queue.
const MAX_REPLAY_PACKS: usize = 256;
const MAX_REPLAY_QUEUES: usize = 256;

/// Reads a whole trace for replay, with the record bound.
fn load(path: &Path) -> Result<Vec<(u64, TraceRecord)>, TraceError> {
    TraceReader::open(path)?
        .with_max_records(MAX_REPLAY_RECORDS)
        .collect()
}

/// Checks a traced request against its pack: the asset exists, the range or
/// tile lies inside it, and the size the trace recorded is what the pack
/// delivers. Returns the asset and that size.
fn resolve(
    pack: &Pack,
    name: &str,
    source: &TraceSource,
    size: u64,
) -> Result<(AssetId, u64), String> {
    let id = pack
        .find(name)
        .ok_or_else(|| format!("no asset '{name}' in {}", pack.path().display()))?;
    let a = pack.asset(id);
    let delivers = match source {
        TraceSource::Blob { range } => {
            if range[0] > range[1] || range[1] > a.size {
                return Err(format!(
                    "range {range:?} is outside '{name}' ({} bytes)",
                    a.size
                ));
            }
            range[1] - range[0]
        }
        TraceSource::Tile { mip, x, y } => pack
            .tile(id, *mip, *x, *y)
            .and_then(|b| pack.block(b).map(|b| u64::from(b.size)))
            .map_err(|e| e.to_string())?,
        TraceSource::Packed => u64::from(pack.packed_mips(id).map_err(|e| e.to_string())?.len),
        TraceSource::Memory { .. } => {
            return Err("a memory source has no pack asset to replay".into())
        }
    };
    if size != delivers {
        return Err(format!(
            "the trace says {size} bytes, '{name}' in {} delivers {delivers} here (was the pack rebuilt?)",
            pack.path().display()
        ));
    }
    Ok((id, delivers))
}

/// Checks the whole trace against its packs before any device or runtime
/// exists, so a bad trace is refused by line without touching the GPU:
/// every pack opens, every request fits its pack, queues are created before
/// they are used, and the pack and queue bounds hold.
fn check(tp: &str, trace: &[(u64, TraceRecord)]) -> Result<(), String> {
    let mut packs: HashMap<u32, Pack> = HashMap::new();
    let mut queues: HashSet<u32> = HashSet::new();
    let mut pack_records = 0;
    for (line, rec) in trace {
        let at = |msg: String| format!("{tp}:{line}: {msg}");
        let mut queue = |id: u32| {
            if !queues.contains(&id) && queues.len() >= MAX_REPLAY_QUEUES {
                return Err(at(format!(
                    "queue {id}: a replay creates at most {MAX_REPLAY_QUEUES} queues"
                )));
            }
            queues.insert(id);
            Ok(())
        };
        match rec {
            TraceRecord::Pack { id, path } => {
                pack_records += 1;
                if pack_records > MAX_REPLAY_PACKS {
                    return Err(at(format!(
                        "a replay opens at most {MAX_REPLAY_PACKS} packs"
                    )));
                }
                let p = Pack::open(path)
                    .map_err(|e| at(format!("pack {id} ({}): {e}", path.display())))?;
                packs.insert(*id, p);
            }
            TraceRecord::Queue { id, .. } => queue(*id)?,
            TraceRecord::Request {
                queue: q,
                pack,
                asset,
                source,
                size,
                ..
            } => {
                // A request on a queue no record created makes one (traces
                // written by hand often leave queue records out).
                queue(*q)?;
                let (Some(pid), Some(name)) = (pack, asset) else {
                    continue;
                };
                if matches!(source, TraceSource::Memory { .. }) {
                    continue;
                }
                let p = packs
                    .get(pid)
                    .ok_or_else(|| at(format!("pack {pid} was never declared")))?;
                resolve(p, name, source, *size).map_err(at)?;
            }
            TraceRecord::Submit { queue: q, .. } | TraceRecord::Signal { queue: q, .. } => {
                // The writer records a queue before anything is done on it.
                if !queues.contains(q) {
                    return Err(at(format!(
                        "queue {q} is used before any record creates it"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Builds each traced request's source and destination, checking the
/// record against its pack, and keeps the total size of destinations under
/// [`MAX_REPLAY_DESTINATION_BYTES`].
struct Destinations<'a> {
    ctx: Option<&'a gpustream_tools::gpu::GpuContext>,
    /// One texture per (pack, asset), shared by that asset's requests.
    textures: HashMap<(u32, String), wgpu::Texture>,
    /// Bytes of destinations allocated so far.
    bytes: u64,
}

impl Destinations<'_> {
    /// Counts `n` more destination bytes against the bound.
    fn reserve(&mut self, n: u64) -> Result<(), String> {
        let total = self.bytes.saturating_add(n);
        if total > MAX_REPLAY_DESTINATION_BYTES {
            return Err(format!(
                "the replay's destinations would exceed {} GiB (a replay allocates one per request)",
                MAX_REPLAY_DESTINATION_BYTES >> 30
            ));
        }
        self.bytes = total;
        Ok(())
    }

    /// The request for one traced record: `size` and the asset are checked
    /// against the pack, and the destination is sized from the pack, never
    /// from the trace alone.
    fn request(
        &mut self,
        pf: &Arc<PackFile>,
        pid: u32,
        name: &str,
        source: &TraceSource,
        size: u64,
        dest: TraceDest,
    ) -> Result<Request, String> {
        let (id, delivers) = resolve(pf.pack(), name, source, size)?;
        let a = pf.pack().asset(id).clone();
        let src = match source {
            TraceSource::Blob { range } => Source::Blob {
                pack: pf.clone(),
                asset: id,
                range: Some(range[0]..range[1]),
            },
            TraceSource::Tile { mip, x, y } => Source::Tile {
                pack: pf.clone(),
                asset: id,
                mip: *mip,
                x: *x,
                y: *y,
            },
            // resolve() refused memory sources.
            _ => Source::PackedMips {
                pack: pf.clone(),
                asset: id,
            },
        };
        let dst = match (dest, self.ctx, &a.texture) {
            (TraceDest::Texture, Some(c), Some(t)) => {
                let key = (pid, name.to_string());
                if !self.textures.contains_key(&key) {
                    // wgpu treats a texture the device cannot hold as a
                    // fatal validation error: refuse it here instead.
                    let needs = t.format.wgpu().required_features();
                    if !c.device.features().contains(needs) {
                        return Err(format!(
                            "'{name}' is {}, which this adapter cannot hold (needs {needs:?})",
                            t.format
                        ));
                    }
                    let chain: u64 = (0..t.mip_count)
                        .map(|m| {
                            let (w, h) = t.mip_extent(m);
                            t.format.data_size(w, h)
                        })
                        .sum();
                    self.reserve(chain)?;
                    let tex = c.device.create_texture(&wgpu::TextureDescriptor {
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
                    });
                    self.textures.insert(key.clone(), tex);
                }
                let texture = self.textures[&key].clone();
                match source {
                    TraceSource::Tile { mip, x, y } => {
                        let r = pf
                            .pack()
                            .tile_region(id, *mip, *x, *y)
                            .map_err(|e| e.to_string())?;
                        Destination::Texture {
                            texture,
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
                            .map_err(|e| e.to_string())?
                            .mips
                            .first()
                            .map(|m| m.mip)
                            .unwrap_or(0);
                        Destination::Texture {
                            texture,
                            mip: first as u32,
                            origin: wgpu::Origin3d::ZERO,
                            extent: None,
                        }
                    }
                }
            }
            (TraceDest::Buffer, Some(c), _) | (TraceDest::Texture, Some(c), None) => {
                let len = delivers.next_multiple_of(4).max(4);
                let max = c.device.limits().max_buffer_size;
                if len > max {
                    return Err(format!(
                        "a {len}-byte buffer for '{name}' is larger than this adapter's limit of {max} bytes"
                    ));
                }
                self.reserve(len)?;
                Destination::Buffer {
                    buffer: c.device.create_buffer(&wgpu::BufferDescriptor {
                        label: None,
                        size: len,
                        usage: wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    }),
                    offset: 0,
                }
            }
            _ => {
                self.reserve(delivers)?;
                Destination::Memory {
                    memory: HostMemory::new(delivers as usize),
                    offset: 0,
                }
            }
        };
        Ok(Request::new(src, dst))
    }
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
    let tp = args.trace.display().to_string();
    check(&tp, &trace)?;
    let ctx = gpustream_tools::gpu::open_device().ok();
    let rt = match &ctx {
        Some(c) => Runtime::new(
            &c.device,
            &c.queue,
            (crate::cli::env::runtime_config()?).with_staging_size(args.staging << 20),
        )?,
        None => Runtime::without_gpu(
            (crate::cli::env::runtime_config()?).with_staging_size(args.staging << 20),
        )?,
    };
    // check() has validated every record; what can still fail here is
    // what depends on the device (buffer limits, texture formats) and the
    // bound on destination bytes.
    let mut packs: HashMap<u32, Arc<PackFile>> = HashMap::new();
    let mut queues: HashMap<u32, Queue> = HashMap::new();
    let mut dests = Destinations {
        ctx: ctx.as_ref(),
        textures: HashMap::new(),
        bytes: 0,
    };
    // (line, queue, request or None = submit)
    let mut plan: Vec<(u64, u32, Option<Request>)> = Vec::new();
    for (line, rec) in &trace {
        let at = |msg: String| format!("{tp}:{line}: {msg}");
        let mut queue_for = |id: u32, config: QueueConfig| {
            queues.entry(id).or_insert_with(|| rt.create_queue(config));
        };
        match rec {
            TraceRecord::Pack { id, path } => {
                let pf = rt
                    .open_pack(path)
                    .map_err(|e| at(format!("pack {id} ({}): {e}", path.display())))?;
                packs.insert(*id, pf);
            }
            TraceRecord::Queue {
                id,
                priority,
                capacity,
            } => queue_for(
                *id,
                QueueConfig::default()
                    .with_capacity(*capacity)
                    .with_priority(*priority),
            ),
            TraceRecord::Request {
                queue,
                pack,
                asset,
                source,
                size,
                dest,
                ..
            } => {
                queue_for(
                    *queue,
                    QueueConfig::default().with_priority(Priority::Normal),
                );
                // Memory sources carry no data in the trace: skipped.
                let (Some(pid), Some(name)) = (pack, asset) else {
                    continue;
                };
                if matches!(source, TraceSource::Memory { .. }) {
                    continue;
                }
                let pf = packs
                    .get(pid)
                    .ok_or_else(|| at(format!("pack {pid} was never declared")))?;
                let req = dests
                    .request(pf, *pid, name, source, *size, *dest)
                    .map_err(at)?;
                plan.push((*line, *queue, Some(req)));
            }
            TraceRecord::Submit { queue, .. } => plan.push((*line, *queue, None)),
            TraceRecord::Signal { .. } => {}
        }
    }
    let fence = Fence::new();
    let mut value = 0;
    let t0 = Instant::now();
    for _ in 0..args.iters {
        for (line, q, item) in &plan {
            // Every queue in the plan was created (checked above); a
            // missing one would only mean nothing to submit there.
            let Some(queue) = queues.get(q) else { continue };
            match item {
                Some(r) => queue
                    .enqueue(r.clone())
                    .map_err(|e| format!("{tp}:{line}: {e}"))?,
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
        trace: tp.clone(),
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
        std::fs::write(p, serde_json::to_string_pretty(&res)?)
            .map_err(|e| format!("{}: {e}", p.display()))?;
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
    // Streams the records: trace-info holds nothing per record, so it
    // reads traces of any length.
    let trace = TraceReader::open(&args.trace)?;
    let mut t = TraceInfo {
        few_threshold: args.few,
        ..Default::default()
    };
    // Bucket i counts sizes in (2^(i-1), 2^i]; 65 buckets cover every u64.
    let mut hist = [0u64; 65];
    let mut last_t = 0u64;
    for rec in trace {
        let (_, rec) = rec?;
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
                // Saturating: the sizes are the trace's word, not checked.
                t.bytes_stored = t.bytes_stored.saturating_add(stored);
                t.bytes_delivered = t.bytes_delivered.saturating_add(size);
                let k = match source {
                    TraceSource::Blob { .. } => "blob",
                    TraceSource::Tile { .. } => "tile",
                    TraceSource::Packed => "packed-mips",
                    TraceSource::Memory { .. } => "memory",
                };
                *t.by_source.entry(k.into()).or_default() += 1;
                *t.by_dest.entry(dest.name().into()).or_default() += 1;
                hist[(64 - size.max(1).saturating_sub(1).leading_zeros()) as usize] += 1;
                last_t = last_t.max(t_us);
            }
            TraceRecord::Signal { .. } => t.signals += 1,
            TraceRecord::Submit { requests, t_us, .. } => {
                t.submits += 1;
                if requests < args.few {
                    t.few_request_submits += 1;
                }
                last_t = last_t.max(t_us);
            }
        }
    }
    t.size_histogram = hist
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| (1u64.checked_shl(i as u32).unwrap_or(u64::MAX), *n))
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
            "  <- most submits are small: batch more requests per submit (see the article DirectStorage 1.1 for Intel GPUs)"
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
