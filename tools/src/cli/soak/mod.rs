//! `gpustream soak`: hours of load with faults injected, and nothing lost.
//!
//! Several queues, each fed from its own thread, stream every kind of
//! request (blobs and blob ranges into memory and buffers, tiles and packed
//! tails into textures, memory sources) from every kind of pack open at
//! once: local with O_DIRECT, local buffered, striped over three
//! directories, a copy with corrupted blocks, and a remote pack behind a
//! real S3 server on loopback, reached through a fault-injecting proxy.
//! Faults arrive at random times, each behind a flag: injected I/O errors
//! and short reads, corrupted blocks, a striped member cut short while
//! open, the S3 server stopped and restarted, slowed, answering 500s and
//! answering with hostile bodies and redirects, a byte of the remote
//! cache's replica flipped, and the GPU device lost, after which new
//! runtimes are made on a new device and the load goes on.
//!
//! The rules every run is held to:
//! - every request ends, within a bound (else: a hang, with the seed);
//! - a delivered request delivered the right bytes (host memory compared;
//!   buffers and textures read back, on adapters that run copies);
//! - a failed request failed with a typed error a fault it may have met
//!   explains: the buffered pack and memory sources meet none;
//! - each queue's counts add up: completed + failed + cancelled = requests;
//! - resources stay flat: RSS within a bound of its value after the first
//!   minute (runs of two minutes or more), and threads and file
//!   descriptors no more at any runtime rebuild than at the first;
//! - the remote cache stays within its byte budget.
//!
//! The same seed replays the same packs, choices and fault schedule.

mod content;
mod proxy;
mod report;
mod rng;
mod sample;
mod workload;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpustream::prelude::*;
use gpustream::remote::{RemoteConfig, RemotePack};
use gpustream_tools::gpu::GpuContext;
use gpustream_tools::s3::{put_object, S3Server, ACCESS_KEY};

use super::CliResult;
use content::Content;
use proxy::{FaultProxy, Mode};
use rng::Rng;
use workload::{MemorySource, PackHandle, QueueSetup};

/// Runs the runtime under load for a while with faults injected, and checks
/// that nothing was lost.
#[derive(clap::Args)]
pub struct Args {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The seed (default: drawn from the clock, and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Queues, each fed from its own thread.
    #[arg(long, default_value_t = 8)]
    queues: usize,
    /// The adapter for GPU destinations (as `bench --adapter`), or `none`
    /// for host memory only.
    #[arg(long)]
    adapter: Option<String>,
    /// The faults to inject, comma-separated: io, corrupt, cut, s3,
    /// hostile, cache, device-loss; `all` (default) or `none`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    faults: Vec<String>,
    /// Working directory for the packs, the S3 server's store and the
    /// remote cache (under target/, on the disk the tests use).
    #[arg(long, default_value = "target/soak")]
    dir: PathBuf,
    /// How long a request or fence may take before it counts as a hang.
    #[arg(long, default_value_t = 120)]
    hang_seconds: u64,
    /// The most RSS may grow, in MiB, between the end of the first minute
    /// and the end of the run.
    #[arg(long, default_value_t = 256)]
    rss_drift_mib: u64,
    /// With `device-loss`: an epoch loses its device after this many
    /// seconds, give or take half (drawn from the seed).
    #[arg(long, default_value_t = 60)]
    device_loss_every: u64,
    /// The remote pack's cache budget, in MiB.
    #[arg(long, default_value_t = 8)]
    cache_mib: u64,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw RSS and throughput over time as a PNG here.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// The faults a run injects.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Faults {
    /// Injected I/O errors and short reads on the O_DIRECT runtime's reads.
    pub io: bool,
    /// A pack copy with blocks whose bytes no longer match their checksum.
    pub corrupt: bool,
    /// A striped member truncated while open.
    pub cut: bool,
    /// The S3 server stopped and restarted, slowed, answering 500s.
    pub s3: bool,
    /// The proxy answering with hostile bodies, lengths and redirects.
    pub hostile: bool,
    /// A byte of the remote cache's replica flipped.
    pub cache: bool,
    /// The GPU device destroyed, and the runtimes rebuilt on a new one.
    pub device_loss: bool,
}

impl Faults {
    fn parse(list: &[String]) -> Result<Faults, String> {
        let mut f = Faults::default();
        for name in list {
            match name.as_str() {
                "all" => {
                    f = Faults {
                        io: true,
                        corrupt: true,
                        cut: true,
                        s3: true,
                        hostile: true,
                        cache: true,
                        device_loss: true,
                    }
                }
                "none" => f = Faults::default(),
                "io" => f.io = true,
                "corrupt" => f.corrupt = true,
                "cut" => f.cut = true,
                "s3" => f.s3 = true,
                "hostile" => f.hostile = true,
                "cache" => f.cache = true,
                "device-loss" => f.device_loss = true,
                other => return Err(format!("unknown fault '{other}' (io, corrupt, cut, s3, hostile, cache, device-loss, all, none)")),
            }
        }
        Ok(f)
    }
}

/// Which faults have happened so far (sticky: a request may meet a
/// fault's effect after its window, through retries and caches).
#[derive(Default)]
pub struct Events {
    /// The striped member was cut.
    pub cut: AtomicBool,
    /// The S3 path had a fault window (stopped, slow, 500s, hostile).
    pub s3: AtomicBool,
    /// The replica had a byte flipped.
    pub cache: AtomicBool,
    /// The device of the current epoch was lost.
    pub device_lost: AtomicBool,
}

/// What a request's pack is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PackKind {
    /// Local, O_DIRECT.
    Direct,
    /// Local, through the page cache, on a runtime without faults.
    Buffered,
    /// Striped over three directories.
    Striped,
    /// A copy with corrupted blocks.
    Corrupt,
    /// In S3, read through the proxy and the cache.
    Remote,
    /// No pack: a memory source.
    Memory,
}

impl PackKind {
    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            PackKind::Direct => "direct",
            PackKind::Buffered => "buffered",
            PackKind::Striped => "striped",
            PackKind::Corrupt => "corrupt",
            PackKind::Remote => "remote",
            PackKind::Memory => "memory",
        }
    }
}

/// How a request ended, as the checker judged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Delivered, and its bytes compared equal.
    Delivered,
    /// Delivered where its bytes cannot be read back (noop adapter, or the
    /// device lost before the readback).
    DeliveredUnchecked,
    /// Cancelled before it finished.
    Cancelled,
    /// Failed with an error a fault explains.
    Failed,
    /// Broke a rule (recorded as a violation).
    Violation,
}

/// What the queues, checkers and the fault thread share.
pub struct Shared {
    content: Content,
    corrupted: HashSet<u32>,
    memory_sources: Vec<MemorySource>,
    faults: Faults,
    events: Events,
    hang_bound: Duration,
    /// Whether GPU destinations can be read back (not on noop).
    gpu_bytes_checked: bool,
    stop_epoch: AtomicBool,
    stop_all: AtomicBool,
    hung: AtomicBool,
    cancels: AtomicU64,
    requests: AtomicU64,
    bytes: AtomicU64,
    ledger: Mutex<report::Ledger>,
}

impl Shared {
    /// Records a broken rule.
    fn violation(&self, what: String) {
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        if l.violations.len() < 100 {
            l.violations.push(what);
        }
        l.violation_count += 1;
    }

    /// Records one request's end.
    fn record(
        &self,
        priority: Priority,
        kind: PackKind,
        latency: Duration,
        outcome: Outcome,
        bytes: u64,
    ) {
        self.requests.fetch_add(1, Relaxed);
        if matches!(outcome, Outcome::Delivered | Outcome::DeliveredUnchecked) {
            self.bytes.fetch_add(bytes, Relaxed);
        }
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        l.record(priority, kind, latency, outcome, bytes);
    }
}

/// One epoch's runtimes and packs: rebuilt after a device loss.
struct Epoch {
    gpu: Option<Arc<GpuContext>>,
    direct: Arc<Runtime>,
    buffered: Arc<Runtime>,
    packs_direct: Vec<PackHandle>,
    packs_buffered: Vec<PackHandle>,
    remote: Option<RemotePack>,
}

/// The files and servers a run sets up once.
struct World {
    dir: PathBuf,
    content_source: PathBuf,
    corrupt: PathBuf,
    striped_head: PathBuf,
    striped_cut: PathBuf,
    striped_cut_bytes: Vec<u8>,
    s3_root: PathBuf,
    s3: Mutex<Option<S3Server>>,
    s3_port: u16,
    proxy: FaultProxy,
    cache_dir: PathBuf,
}

/// Runs the soak.
pub fn run(args: Args) -> CliResult {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let faults = Faults::parse(&args.faults)?;
    println!(
        "soak: seed {seed}, {} s, {} queues, faults {faults:?}",
        args.seconds, args.queues
    );
    let started = Instant::now();
    let dir = args.dir.join(format!("seed-{seed}"));
    let _ = std::fs::remove_dir_all(&dir);

    // The packs.
    let content = content::build(&dir, seed, 96, 12)?;
    let corrupt = dir.join("corrupt.gspk");
    let corrupted = if faults.corrupt {
        content::corrupt_copy(&content.source, &corrupt, seed, 24)?
    } else {
        std::fs::copy(&content.source, &corrupt)?;
        HashSet::new()
    };
    let members: Vec<PathBuf> = (1..3).map(|i| dir.join(format!("disk{i}"))).collect();
    std::fs::create_dir_all(dir.join("disk0"))?;
    for m in &members {
        std::fs::create_dir_all(m)?;
    }
    let striped_head = dir.join("disk0/striped.gspk");
    let member_paths: Vec<PathBuf> = members.iter().map(|m| m.join("striped.gspk")).collect();
    gpustream::pack::stripe::stripe_pack(
        &content.source,
        &striped_head,
        &member_paths,
        gpustream::pack::stripe::DEFAULT_UNIT,
    )?;
    let striped_cut = member_paths[1].clone();
    let striped_cut_bytes = std::fs::read(&striped_cut)?;
    let memory_sources = memory_sources(&content, seed)?;

    // The S3 server, its object, and the proxy in front of it.
    let s3_root = dir.join("s3");
    std::fs::create_dir_all(s3_root.join("packs"))?;
    let server = S3Server::start(&s3_root, 0, 2)?;
    let s3_port = server.addr.port();
    put_object(
        &server.endpoint(),
        "packs",
        "soak.gspk",
        std::fs::read(&content.source)?,
    )?;
    let proxy = FaultProxy::start(server.addr)?;
    let world = World {
        cache_dir: dir.join("cache"),
        dir: dir.clone(),
        content_source: content.source.clone(),
        corrupt,
        striped_head,
        striped_cut,
        striped_cut_bytes,
        s3_root,
        s3: Mutex::new(Some(server)),
        s3_port,
        proxy,
    };

    let gpu_probe = open_gpu(args.adapter.as_deref());
    let gpu_bytes_checked = gpu_probe
        .as_ref()
        .is_some_and(|g| g.adapter.get_info().backend != wgpu::Backend::Noop);
    let shared = Arc::new(Shared {
        content,
        corrupted,
        memory_sources,
        faults,
        events: Events::default(),
        hang_bound: Duration::from_secs(args.hang_seconds),
        gpu_bytes_checked,
        stop_epoch: AtomicBool::new(false),
        stop_all: AtomicBool::new(false),
        hung: AtomicBool::new(false),
        cancels: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        ledger: Mutex::new(report::Ledger::new(seed, faults)),
    });
    drop(gpu_probe);

    // Resources, once a second, in a thread of their own.
    let samples = Arc::new(Mutex::new(Vec::<report::Sample>::new()));
    let sampler = {
        let (samples, shared) = (samples.clone(), shared.clone());
        std::thread::Builder::new()
            .name("soak-sampler".into())
            .spawn(move || {
                while !shared.stop_all.load(Relaxed) {
                    let r = sample::now();
                    samples
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(report::Sample {
                            t: started.elapsed().as_secs_f64(),
                            resources: r,
                            requests: shared.requests.load(Relaxed),
                            bytes: shared.bytes.load(Relaxed),
                        });
                    std::thread::sleep(Duration::from_secs(1));
                }
            })?
    };

    let end = started + Duration::from_secs(args.seconds);
    let mut rng = Rng::new(seed ^ 0xfa17);
    let mut rebuilds: Vec<sample::Resources> = Vec::new();
    let mut rebuild_names = Vec::new();
    let mut epoch_no = 0u64;
    let progress = indicatif::ProgressBar::new(args.seconds);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} s  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    while Instant::now() < end && !shared.hung.load(Relaxed) {
        epoch_no += 1;
        let epoch = open_epoch(&world, &shared, args.adapter.as_deref(), args.cache_mib)?;
        shared.stop_epoch.store(false, Relaxed);
        shared.events.device_lost.store(false, Relaxed);
        let threads = start_queues(&epoch, &shared, args.queues, seed ^ epoch_no)?;
        // Faults until the end or a device loss ends the epoch.
        let every = args.device_loss_every.max(2);
        let loss_after = Duration::from_secs(every / 2 + rng.below(every));
        let lost = drive_faults(
            &world, &epoch, &shared, &mut rng, end, &progress, started, loss_after,
        );
        shared.stop_epoch.store(true, Relaxed);
        for t in threads {
            let _ = t.join();
        }
        if shared.hung.load(Relaxed) {
            break;
        }
        // Queue counts add up, and the cache stayed in budget.
        check_epoch(&epoch, &shared, args.cache_mib << 20);
        drop(epoch);
        world.proxy.set_mode(Mode::Pass);
        std::fs::write(&world.striped_cut, &world.striped_cut_bytes)?;
        // Threads of a dropped device (a driver's workers) and of the
        // remote reader end shortly after their owners go: wait up to 5 s
        // for the count to come back to the first rebuild's before taking
        // it. A leak grows from rebuild to rebuild and does not come back.
        let settle = Instant::now() + Duration::from_secs(5);
        let mut now = sample::now();
        while let Some(first) = rebuilds.first() {
            if (now.runtime_threads <= first.runtime_threads && now.fds <= first.fds)
                || Instant::now() > settle
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            now = sample::now();
        }
        rebuilds.push(now);
        rebuild_names.push(sample::thread_names());
        if lost {
            shared
                .ledger
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .rebuilds += 1;
        }
    }
    progress.finish_and_clear();
    shared.stop_all.store(true, Relaxed);
    let _ = sampler.join();

    let samples = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let hung = shared.hung.load(Relaxed);
    check_resources(
        &shared,
        &samples,
        (&rebuilds[..], &rebuild_names[..]),
        args.seconds,
        args.rss_drift_mib << 20,
    );
    let report = {
        let mut l = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
        l.cancel_calls = shared.cancels.load(Relaxed);
        l.proxy = std::array::from_fn(|i| world.proxy.counts[i].load(Relaxed));
        l.finish(started.elapsed(), samples, rebuilds)
    };
    report.print();
    if let Some(path) = &args.json {
        super::report::json::write_json(path, &report)?;
    }
    if let Some(path) = &args.plot {
        report.plot(path)?;
        println!("plot: {}", path.display());
    }
    if hung {
        // A hung runtime cannot be dropped (dropping waits for its
        // requests): end here, with the seed.
        eprintln!(
            "soak: HANG (seed {seed}): {}",
            report.first_violation().unwrap_or("?")
        );
        std::process::exit(2);
    }
    drop(world);
    let _ = std::fs::remove_dir_all(&dir);
    match report.first_violation() {
        None => Ok(()),
        Some(v) => Err(format!(
            "soak failed (seed {seed}; replay with --seed {seed}): {} violations, the first: {v}",
            report.violation_count
        )
        .into()),
    }
}

/// A device for GPU destinations, or none.
fn open_gpu(adapter: Option<&str>) -> Option<GpuContext> {
    if adapter == Some("none") {
        return None;
    }
    match gpustream_tools::gpu::open_device_for(adapter) {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            eprintln!("soak: no GPU ({e}); host-memory destinations only");
            None
        }
    }
}

/// Compressed blocks held in memory: a piece of each of a few blobs, in
/// each codec.
fn memory_sources(
    content: &Content,
    seed: u64,
) -> Result<Vec<MemorySource>, Box<dyn std::error::Error + Send + Sync>> {
    let mut rng = Rng::new(seed ^ 0x3e3);
    let mut out = Vec::new();
    let blobs: Vec<&Vec<u8>> = content
        .assets
        .iter()
        .filter_map(|(_, e)| match e {
            content::Expected::Blob(b) if !b.is_empty() => Some(b),
            _ => None,
        })
        .collect();
    for codec in [Codec::Lz4, Codec::GDeflate, Codec::Zstd] {
        for _ in 0..6 {
            let b = blobs[rng.below(blobs.len() as u64) as usize];
            let len = (1 + rng.below(b.len().min(gpustream::MAX_BLOCK_SIZE) as u64)) as usize;
            let at = rng.below((b.len() - len + 1) as u64) as usize;
            let expected = b[at..at + len].to_vec();
            let data: Arc<[u8]> = Arc::from(codec.compress(&expected, 0)?);
            out.push(MemorySource {
                data,
                codec,
                expected,
            });
        }
    }
    Ok(out)
}

/// Makes one epoch's runtimes and opens its packs.
fn open_epoch(
    world: &World,
    shared: &Shared,
    adapter: Option<&str>,
    cache_mib: u64,
) -> Result<Epoch, Box<dyn std::error::Error + Send + Sync>> {
    let gpu = open_gpu(adapter).map(Arc::new);
    if let Some(g) = &gpu {
        // Once the device is destroyed, the checkers' readbacks of it are
        // validation errors: they come back as failed mappings (bytes not
        // seen), not as wgpu's default panic.
        g.device
            .on_uncaptured_error(Arc::new(|e| log::debug!("soak device: {e}")));
    }
    let mut io = gpustream::io::IoConfig::default();
    if shared.faults.io {
        io = io.with_fault(Some(gpustream::io::FaultConfig::mixed(
            world.dir.as_os_str().len() as u64 ^ shared.requests.load(Relaxed),
        )));
    }
    let config = RuntimeConfig::default()
        .with_staging_size(16 << 20)
        .with_io(io);
    let direct = Arc::new(match &gpu {
        Some(g) => Runtime::new(&g.device, &g.queue, config)?,
        None => Runtime::without_gpu(config)?,
    });
    let buffered = Arc::new(Runtime::without_gpu(
        RuntimeConfig::default().with_open_mode(gpustream::io::OpenMode::Buffered),
    )?);
    let mut packs_direct = vec![
        PackHandle {
            kind: PackKind::Direct,
            file: direct.open_pack(&world.content_source)?,
        },
        PackHandle {
            kind: PackKind::Corrupt,
            file: direct.open_pack(&world.corrupt)?,
        },
        PackHandle {
            kind: PackKind::Striped,
            file: direct.open_pack(&world.striped_head)?,
        },
    ];
    let remote = RemotePack::open(
        "s3://packs/soak.gspk",
        &RemoteConfig::new(&world.cache_dir)
            .with_cache_bytes(cache_mib << 20)
            .with_endpoint(Some(world.proxy.endpoint()))
            .with_credentials(Some((ACCESS_KEY.0.into(), ACCESS_KEY.1.into())))
            .with_retries(2)
            .with_request_timeout(Duration::from_secs(5))
            .with_retry_timeout(Duration::from_secs(10)),
    );
    let remote = match remote {
        Ok(r) => {
            packs_direct.push(PackHandle {
                kind: PackKind::Remote,
                file: direct.open_remote_pack(&r)?,
            });
            Some(r)
        }
        Err(e) => {
            shared.violation(format!(
                "the remote pack did not open with the proxy passing: {e}"
            ));
            None
        }
    };
    let packs_buffered = vec![PackHandle {
        kind: PackKind::Buffered,
        file: buffered.open_pack(&world.content_source)?,
    }];
    Ok(Epoch {
        gpu,
        direct,
        buffered,
        packs_direct,
        packs_buffered,
        remote,
    })
}

/// Starts the queues' feeding and checking threads: one in four takes
/// memory sources; the rest alternate between the faulty runtime's packs
/// and the buffered runtime's.
fn start_queues(
    epoch: &Epoch,
    shared: &Arc<Shared>,
    queues: usize,
    seed: u64,
) -> Result<Vec<std::thread::JoinHandle<()>>, std::io::Error> {
    let mut rng = Rng::new(seed ^ 0x9e);
    let priorities = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Realtime,
    ];
    let mut threads = Vec::new();
    for i in 0..queues {
        let priority = priorities[rng.below(4) as usize];
        let memory = i % 4 == 3;
        let on_direct = memory || i % 2 == 0;
        let runtime = if on_direct {
            &epoch.direct
        } else {
            &epoch.buffered
        };
        let queue = runtime.create_queue(
            QueueConfig::default()
                .with_priority(priority)
                .with_capacity(64 + rng.below(512) as usize)
                .with_source(if memory {
                    SourceKind::Memory
                } else {
                    SourceKind::File
                })
                .with_name(Some(format!("soak-{i}"))),
        );
        let gpu = if on_direct { epoch.gpu.clone() } else { None };
        let packs = match (memory, on_direct) {
            (true, _) => Vec::new(),
            (false, true) => epoch.packs_direct.clone(),
            (false, false) => epoch.packs_buffered.clone(),
        };
        let (tx, rx) = crossbeam::channel::bounded(4);
        let setup = QueueSetup {
            index: i,
            queue,
            packs,
            gpu: gpu.clone(),
        };
        let (s1, s2) = (shared.clone(), shared.clone());
        threads.push(
            std::thread::Builder::new()
                .name(format!("soak-feed-{i}"))
                .spawn(move || workload::feed(setup, seed, s1, tx))?,
        );
        threads.push(
            std::thread::Builder::new()
                .name(format!("soak-check-{i}"))
                .spawn(move || workload::check(rx, priority, gpu, s2))?,
        );
    }
    Ok(threads)
}

/// Injects faults at random times until `end`, or until a device loss
/// ends the epoch (returns true then).
#[allow(clippy::too_many_arguments)]
fn drive_faults(
    world: &World,
    epoch: &Epoch,
    shared: &Shared,
    rng: &mut Rng,
    end: Instant,
    progress: &indicatif::ProgressBar,
    started: Instant,
    loss_after: Duration,
) -> bool {
    let f = shared.faults;
    let epoch_start = Instant::now();
    let mut next = Instant::now() + Duration::from_millis(500 + rng.below(3000));
    loop {
        let now = Instant::now();
        progress.set_position(started.elapsed().as_secs());
        progress.set_message(format!(
            "{} requests, {} MiB, {} violations",
            shared.requests.load(Relaxed),
            shared.bytes.load(Relaxed) >> 20,
            shared.ledger.lock().map_or(0, |l| l.violation_count)
        ));
        if now >= end || shared.hung.load(Relaxed) {
            return false;
        }
        if now < next {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        next = now + Duration::from_millis(1000 + rng.below(5000));
        let mut kinds = Vec::new();
        if f.cut {
            kinds.push("cut");
        }
        if f.s3 {
            kinds.extend(["s3-stop", "s3-500", "s3-slow"]);
        }
        if f.hostile {
            kinds.push("hostile");
        }
        if f.cache {
            kinds.push("cache");
        }
        // The device is lost once its epoch is `loss_after` old, so most
        // requests run on a live device and every run of a few times that
        // rebuilds.
        let kind = if f.device_loss && epoch.gpu.is_some() && epoch_start.elapsed() >= loss_after {
            "device-loss"
        } else if kinds.is_empty() {
            continue;
        } else {
            kinds[rng.below(kinds.len() as u64) as usize]
        };
        shared
            .ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fault(kind);
        match kind {
            "cut" => {
                let len = world.striped_cut_bytes.len() as u64;
                if let Ok(file) = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&world.striped_cut)
                {
                    let _ = file.set_len(rng.below(len));
                }
                shared.events.cut.store(true, Relaxed);
            }
            "s3-stop" | "s3-500" | "s3-slow" | "hostile" => {
                shared.events.s3.store(true, Relaxed);
                let window = Duration::from_millis(300 + rng.below(2000));
                match kind {
                    "s3-stop" => {
                        world.proxy.set_mode(Mode::Refuse);
                        drop(world.s3.lock().unwrap_or_else(|e| e.into_inner()).take());
                        std::thread::sleep(window);
                        match S3Server::start(&world.s3_root, world.s3_port, 2) {
                            Ok(s) => *world.s3.lock().unwrap_or_else(|e| e.into_inner()) = Some(s),
                            Err(e) => {
                                shared.violation(format!("the S3 server did not restart: {e}"))
                            }
                        }
                    }
                    _ => {
                        world.proxy.set_mode(match kind {
                            "s3-500" => Mode::Error500,
                            "s3-slow" => Mode::Slow,
                            _ => Mode::Hostile,
                        });
                        std::thread::sleep(window);
                    }
                }
                world.proxy.set_mode(Mode::Pass);
            }
            "cache" => {
                if let Some(r) = &epoch.remote {
                    if let Ok(bytes) = std::fs::metadata(r.replica()).map(|m| m.len()) {
                        let at = rng.below(bytes.max(1));
                        flip_byte(r.replica(), at);
                        shared.events.cache.store(true, Relaxed);
                    }
                }
            }
            "device-loss" => {
                if let Some(g) = &epoch.gpu {
                    shared.events.device_lost.store(true, Relaxed);
                    g.device.destroy();
                    // Let the queues meet the loss, then rebuild.
                    std::thread::sleep(Duration::from_secs(2));
                    return true;
                }
            }
            _ => {}
        }
    }
}

/// Flips the byte at `at` of `path` (a read-modify-write in place).
fn flip_byte(path: &std::path::Path, at: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        let mut b = [0u8; 1];
        if f.seek(SeekFrom::Start(at)).is_ok() && f.read_exact(&mut b).is_ok() {
            b[0] ^= 0xff;
            let _ = f.seek(SeekFrom::Start(at)).and_then(|_| f.write_all(&b));
        }
    }
}

/// Every queue's counts add up, and the remote cache kept its budget.
fn check_epoch(epoch: &Epoch, shared: &Shared, cache_budget: u64) {
    let _ = (&epoch.direct, &epoch.buffered);
    if let Some(r) = &epoch.remote {
        let s = r.stats();
        if s.cached_bytes > cache_budget {
            shared.violation(format!(
                "the remote cache holds {} bytes, past its budget of {cache_budget}",
                s.cached_bytes
            ));
        }
        let mut l = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
        l.remote_gets += s.gets;
        l.remote_failed_gets += s.failed_gets;
        l.remote_corrupt_blocks += s.blocks_corrupt;
        l.remote_evicted += s.blocks_evicted;
    }
}

/// RSS stayed within its bound, and threads and descriptors were the same
/// at every rebuild.
fn check_resources(
    shared: &Shared,
    samples: &[report::Sample],
    (rebuilds, names): (
        &[sample::Resources],
        &[std::collections::BTreeMap<String, u64>],
    ),
    seconds: u64,
    rss_drift: u64,
) {
    // After the first minute: allocators, staging and caches have grown to
    // their working size by then. A run shorter than two minutes has no
    // steady state to hold to, and is not checked.
    let warm = 60.0;
    let base = samples
        .iter()
        .find(|s| s.t >= warm && seconds >= 120)
        .map(|s| s.resources.rss);
    let last = samples.last().map(|s| s.resources.rss);
    if let (Some(b), Some(l)) = (base, last) {
        if l > b + rss_drift {
            shared.violation(format!(
                "RSS grew from {} MiB (at {warm} s) to {} MiB, past the bound of {} MiB",
                b >> 20,
                l >> 20,
                rss_drift >> 20
            ));
        }
    }
    if let Some(first) = rebuilds.first() {
        for (i, r) in rebuilds.iter().enumerate().skip(1) {
            if r.runtime_threads > first.runtime_threads || r.fds > first.fds {
                shared.violation(format!(
                    "after rebuild {i}: {} threads (the harness's aside) and {} descriptors, against {} and {} after the first; threads by name: {:?}",
                    r.runtime_threads, r.fds, first.runtime_threads, first.fds, names.get(i)
                ));
            }
        }
    }
}
