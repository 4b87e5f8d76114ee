//! `gpustream bench`: the main job, modelled on DirectStorage's
//! GpuDecompressionBenchmark. It streams every asset of a pack through the
//! runtime, per case (how blocks are stored and decoded) and per staging
//! size, and prints bandwidth and the host side's cost beside a baseline
//! measured in the same run.
//!
//! - [`adapter`]: which wgpu adapter (or none), and why;
//! - [`cases`]: the pack variant per codec, the requests and destinations;
//! - [`baselines`]: the hand-written loop and the `write_buffer` loop;
//! - [`metrics`]: CPU time, submission-thread time, per-dispatch and
//!   per-MiB counts, and the host-side targets;
//! - [`report`]: the rows, tables, JSON and plot.

mod baselines;
mod cases;
pub(crate) mod metrics;
mod report;

use std::path::{Path, PathBuf};
use std::time::Instant;

use gpustream::codec::Codec;
use gpustream::completion::Fence;
use gpustream::decode::gpu::Lz4DecodePath;
use gpustream::io::OpenMode;
use gpustream::pack::Pack;
use gpustream::runtime::{QueueConfig, RequestError, Runtime, RuntimeConfig};
use gpustream_tools::gpu::GpuContext;

use report::{BenchReport, BenchRow, Overlap};

use super::CliResult;
use baselines::{Baseline, BaselineRun, PassTime};
use cases::Targets;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Arguments of `gpustream bench`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack to stream (default: the demo pack, built under target/ on
    /// first use). An `s3://BUCKET/KEY` URL streams a pack in S3-compatible
    /// object storage instead (the client reads `AWS_*` from the
    /// environment): every blob, by the runtime through its local replica
    /// cold and warm, against a plain ranged-GET loop with the same
    /// concurrency and a local copy of the pack.
    #[arg(long)]
    pack: Option<PathBuf>,
    /// Staging sizes in MiB, comma-separated.
    #[arg(long, value_delimiter = ',')]
    staging: Option<Vec<u64>>,
    /// Cases: none, cpu-lz4, cpu-zstd, gpu-lz4, and, not in the default
    /// list, gpu-lz4-sub (LZ4 in 16 KiB sub-blocks decoded on the GPU) and
    /// cpu-lz4-hc, gpu-lz4-hc (the pack at LZ4 HC level 9 with BCn
    /// conditioning, as `gpustream pack` writes it by default) and
    /// cpu-gdeflate, gpu-gdeflate (GDeflate level 12 with conditioning, as
    /// `gpustream pack --codec gdeflate` writes it) (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cases: Option<Vec<String>>,
    /// Keep later batches queued before waiting on the current one, as a
    /// streaming application keeps its queue fed.
    #[arg(long)]
    sustained: bool,
    /// With `--sustained`: how many passes stay queued beyond the one
    /// being waited on, each with its own destination set. Default: enough
    /// that the queue's capacity (8,192 requests), not bench, holds the
    /// application back, as a streaming application keeps its queue full
    /// (at most 8).
    #[arg(long, value_name = "N", requires = "sustained")]
    ahead: Option<u32>,
    /// Timed passes per case and staging size (after one warm-up).
    #[arg(long)]
    iters: Option<u32>,
    /// Read through the page cache instead of O_DIRECT (runtime and
    /// baseline alike).
    #[arg(long)]
    buffered: bool,
    /// The wgpu adapter: `noop` (wgpu's noop backend: the whole host side
    /// runs, shaders do not), a backend (`vulkan`, `gl`, ...), or part of
    /// an adapter's name. Default: the best adapter wgpu offers.
    #[arg(long)]
    adapter: Option<String>,
    /// Staged MiB one GPU batch takes before it is flushed
    /// (`RuntimeConfig::gpu_batch_size`, default 32).
    #[arg(long, value_name = "MIB")]
    batch_mib: Option<u64>,
    /// Skip checksums: the runtime's `verify_gpu_checksums` is off and the
    /// hand-written baseline skips crc32c.
    #[arg(long)]
    no_verify: bool,
    /// Map buffered packs instead of reading them with `pread`
    /// (`RuntimeConfig::map_cached_files = true`, off by default: it
    /// installs a process-wide SIGBUS handler), to see what the mapping
    /// saves.
    #[arg(long)]
    map: bool,
    /// The GPU LZ4 decoder's variant for the gpu-lz4 cases (`subgroup-v2`,
    /// `subgroup-v2-pair`, ...: the names `cargo bench --bench gpu_lz4`
    /// reports). Default: the one the runtime picks for the adapter.
    #[arg(long, value_name = "NAME")]
    lz4_path: Option<String>,
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
    /// (default 128, or 64 with --quick). With `--devices`, the size of
    /// each device's pack, a multiple of 4 (default 1024, or 256 with
    /// --quick), and of its share of the pack striped over them all.
    #[arg(long)]
    demo_mib: Option<u64>,
    /// Directories on separate devices (comma-separated, two or more): one
    /// pack of stored blobs on each, streamed by one runtime all at once,
    /// and one pack striped over all of them (`pack --stripe`), each
    /// against the sum of each device alone measured in the same run.
    /// `scripts/loop-disks.sh` makes simulated devices with their own
    /// bandwidth limits.
    #[arg(long, value_delimiter = ',', value_name = "DIRS")]
    devices: Option<Vec<PathBuf>>,
    /// With --pack: the S3 endpoint (`http://127.0.0.1:9000`), overriding
    /// `AWS_ENDPOINT`.
    #[arg(long, requires = "pack")]
    endpoint: Option<String>,
    /// With --pack: ranged GETs in flight (default 16).
    #[arg(long, requires = "pack")]
    concurrency: Option<usize>,
    /// With --pack: where the replicas and the local copy go (default
    /// target/gpustream-remote-bench).
    #[arg(long, requires = "pack")]
    cache_dir: Option<PathBuf>,
}

/// What every row of one run shares.
struct Plan {
    ctx: Option<GpuContext>,
    noop: bool,
    iters: u32,
    threads: usize,
    buffered: bool,
    sustained: bool,
    /// `--ahead` (sustained only; `None`: from the queue's capacity).
    ahead: Option<u32>,
    verify: bool,
    map: bool,
    /// `--batch-mib`, in bytes.
    batch: Option<u64>,
    lz4_path: Option<Lz4DecodePath>,
    trace: Option<PathBuf>,
    progress: indicatif::ProgressBar,
}

#[cfg(target_os = "linux")]
fn remote_bench(args: &Args, url: &str, iters: u32) -> CliResult {
    let dir = args
        .cache_dir
        .clone()
        .unwrap_or_else(super::remote::default_work_dir);
    let mut cfg = gpustream::remote::RemoteConfig::new(dir);
    cfg.endpoint = args.endpoint.clone();
    if let Some(n) = args.concurrency {
        cfg.concurrency = n.max(1);
    }
    let r = super::remote::bench(url, cfg, iters)?;
    super::remote::print(&r);
    if let Some(path) = &args.json {
        super::report::json::write_json(path, &r)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn remote_bench(_: &Args, _: &str, _: u32) -> CliResult {
    Err(
        "packs in object storage are read on Linux only (the cache evicts by punching holes)"
            .into(),
    )
}

/// Runs `gpustream bench`.
pub fn run(args: Args) -> CliResult {
    let quick = args.quick;
    let iters = args.iters.unwrap_or(if quick { 2 } else { 3 }).max(1);
    if let Some(url) = args
        .pack
        .as_ref()
        .and_then(|p| p.to_str())
        .filter(|p| p.starts_with("s3://"))
    {
        return remote_bench(&args, url, iters);
    }
    if let Some(dirs) = &args.devices {
        let mib = args.demo_mib.unwrap_or(if quick { 256 } else { 1024 });
        let r = super::devices::bench(dirs, mib, iters)?;
        super::devices::print_bench(&r);
        if let Some(path) = &args.json {
            super::report::json::write_json(path, &r)?;
            println!("wrote {}", path.display());
        }
        return Ok(());
    }
    let staging =
        args.staging
            .clone()
            .unwrap_or_else(|| if quick { vec![32] } else { vec![16, 64, 256] });
    let mut notes = Vec::new();
    let (ctx, adapter_reason) = if args.memory {
        if args.adapter.is_some() {
            return Err("--memory and --adapter exclude each other".into());
        }
        (
            None,
            "--memory: every case delivers into host memory".into(),
        )
    } else {
        match gpustream_tools::gpu::open_device_for(args.adapter.as_deref()) {
            Ok(c) => {
                let why = c.reason.clone();
                (Some(c), why)
            }
            // Asked for by name: not finding it is an error, not a fallback.
            Err(e) if args.adapter.is_some() => return Err(e.to_string().into()),
            Err(e) => {
                notes.push("no GPU adapter: CPU cases only, into host memory".to_string());
                (None, e.to_string())
            }
        }
    };
    let noop = ctx
        .as_ref()
        .is_some_and(|c| c.adapter.get_info().backend == wgpu::Backend::Noop);
    if noop {
        notes.push(
            "noop adapter: buffers are created, mapped and copied, shaders do not run and textures store nothing; \
             GB/s and CPU figures measure the host side only, and GPU cases get no ratio against \
             baselines that really decode (\"- (noop)\")"
                .into(),
        );
    }
    if args.no_verify {
        notes.push(
            "--no-verify: the runtime skips crc32c on stored blocks bound for the GPU (verify_gpu_checksums = false); \
             its CPU decode path checks every block regardless; the baseline checks none"
                .into(),
        );
    }
    let lz4_path = match &args.lz4_path {
        None => None,
        Some(name) => Some(Lz4DecodePath::from_name(name).ok_or_else(|| {
            let names: Vec<_> = Lz4DecodePath::ALL.iter().map(|p| p.name()).collect();
            format!(
                "unknown LZ4 decoder '{name}' (expected one of {})",
                names.join(", ")
            )
        })?),
    };
    let all_cases = [
        "none",
        "cpu-lz4",
        "cpu-zstd",
        "gpu-lz4",
        "gpu-lz4-sub",
        "cpu-lz4-hc",
        "gpu-lz4-hc",
        "cpu-gdeflate",
        "gpu-gdeflate",
    ];
    let cases: Vec<String> = args
        .cases
        .clone()
        .unwrap_or_else(|| all_cases[..4].iter().map(|s| s.to_string()).collect());
    for c in &cases {
        if !all_cases.contains(&c.as_str()) {
            return Err(format!(
                "unknown case '{c}' (expected one of {})",
                all_cases.join(", ")
            )
            .into());
        }
    }
    let src = match &args.pack {
        Some(p) => p.clone(),
        None => {
            let mib = args.demo_mib.unwrap_or(if quick { 64 } else { 128 });
            let path = Path::new("target").join(format!("gpustream-demo-{mib}MiB.gspk"));
            gpustream_tools::demo::ensure_demo_pack(
                &path,
                gpustream_tools::demo::DemoConfig {
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
    // Per case and staging size: the runtime's and the baseline's passes.
    let passes = cases.len() as u64 * staging.len() as u64 * 2 * (iters as u64 + 1);
    let progress = indicatif::ProgressBar::new(passes);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} passes  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let plan = Plan {
        ctx,
        noop,
        iters,
        threads,
        buffered: args.buffered,
        batch: args.batch_mib.map(|m| m.max(1) << 20),
        sustained: args.sustained,
        ahead: args.ahead.map(|a| a.max(1)),
        verify: !args.no_verify,
        map: args.map,
        lz4_path,
        trace: args.trace.clone(),
        progress,
    };
    let mut rows = Vec::new();
    let mut io_backend = String::new();
    let mut bypassed = false;
    let mut lz4_decoder = None;
    let mut staging_memory = None;
    let mut gdeflate_decoder = None;
    // wgpu's GL backend gives up on its context lock after a second and
    // panics the runtime's poll thread ("Could not lock adapter context")
    // while llvmpipe runs a long decode dispatch; the run then never ends.
    // Seen 2026-12-01 on llvmpipe GL. A default run leaves the case out
    // there; asking for it by name still runs it.
    let gl = plan
        .ctx
        .as_ref()
        .is_some_and(|c| c.adapter.get_info().backend == wgpu::Backend::Gl);
    for case in &cases {
        let gpu_case = case.starts_with("gpu-");
        let skip = if gpu_case && plan.ctx.is_none() {
            Some("GPU cases skipped: no GPU adapter")
        } else if gpu_case && gl && args.cases.is_none() {
            Some(
                "gpu-lz4 skipped on the GL backend (wgpu's GL context lock times out during long \
                 decode dispatches and the runtime's poll thread panics); --cases gpu-lz4 runs it anyway",
            )
        } else {
            None
        };
        if let Some(why) = skip {
            notes.push(why.into());
            plan.progress
                .inc(staging.len() as u64 * 2 * (iters as u64 + 1));
            continue;
        }
        let codec = match case.as_str() {
            "none" => Codec::None,
            "cpu-zstd" => Codec::Zstd,
            c if c.ends_with("-gdeflate") => Codec::GDeflate,
            _ => Codec::Lz4,
        };
        // lavapipe and other software adapters run the decoder at tens of
        // MB/s: a smaller slice keeps the default run short there. (The noop
        // adapter is a Cpu device too, but runs no shader.)
        let soft = !noop
            && plan
                .ctx
                .as_ref()
                .is_some_and(|c| c.adapter.get_info().device_type == wgpu::DeviceType::Cpu);
        let limit = if gpu_case && soft {
            notes.push(format!(
                "software adapter: {case} streams a 16 MiB slice per pass"
            ));
            limit.min(16 << 20)
        } else {
            limit
        };
        // The sub-block case streams the pack written with 16 KiB LZ4
        // sub-blocks (docs/pack-format.md): four times the blocks per batch.
        let sub_block = if case == "gpu-lz4-sub" { 16 << 10 } else { 0 };
        // The HC and GDeflate cases stream the pack as `gpustream pack`
        // writes that codec by default: LZ4 HC level 9 or GDeflate level
        // 12, BCn-conditioned where that is smaller.
        let hc = case.ends_with("-hc") || codec == Codec::GDeflate;
        let path = plan
            .progress
            .suspend(|| cases::variant(&src, codec, sub_block, hc))?;
        let pack = Pack::open(&path)?;
        for &mib in &staging {
            plan.progress.set_message(format!("{case} at {mib} MiB"));
            let (mut row, base, info) = measure(&plan, case, mib, &path, limit, |direct| {
                baseline_run(&plan, case, &pack, limit, direct)
            })?;
            io_backend = info.io_backend;
            bypassed = info.direct;
            lz4_decoder = info.lz4.map(|p| p.name().to_string()).or(lz4_decoder);
            staging_memory = info.staging_memory.or(staging_memory);
            if case == "gpu-gdeflate" {
                // Which decoder the runtime chose, and why.
                gdeflate_decoder = plan
                    .ctx
                    .as_ref()
                    .map(|c| crate::cli::adapters::gdeflate_choice(&c.device));
            }
            if base.bytes != row.bytes_delivered && case != "none" {
                notes.push(format!(
                    "{case}: the baseline produces {} bytes per pass, the runtime delivers {}",
                    base.bytes, row.bytes_delivered
                ));
            }
            let setting = metrics::Setting {
                noop,
                memory: plan.ctx.is_none(),
                buffered: !bypassed,
            };
            row.baseline_gbps = base.gbps;
            row.baseline_cpu_s_per_gb = base.cpu_s_per_gb;
            row.baseline = base.what.clone();
            row.ratio_to_baseline = row.delivered_gbps / base.gbps.max(1e-12);
            // On noop a GPU case records and submits but decodes nothing,
            // while its baseline decodes on the CPU: no ratio between them.
            row.ratio_comparable = !(noop && case.starts_with("gpu-"));
            row.targets = metrics::targets(
                case,
                row.staging_mib,
                &row.host,
                row.ratio_to_baseline,
                &setting,
            );
            rows.push(row);
        }
    }
    plan.progress.finish_and_clear();
    let report = BenchReport {
        date: super::utc_now(),
        adapter: plan
            .ctx
            .as_ref()
            .map(|c| c.describe())
            .unwrap_or_else(|| "none".into()),
        adapter_reason,
        noop,
        io_backend,
        page_cache_bypassed: bypassed,
        lz4_decoder,
        staging_memory,
        gdeflate_decoder,
        verify: plan.verify,
        pack: src.display().to_string(),
        cpu_threads: threads,
        sustained: args.sustained,
        iters,
        rows,
        notes,
    };
    report::print(&report);
    if let Some(p) = &args.json {
        crate::cli::report::json::write_json(p, &report)?;
        println!("wrote {}", p.display());
    }
    if let Some(p) = &args.plot {
        report::plot(&report, p)?;
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// The baseline of a case: the `write_buffer` loop for stored blocks into a
/// GPU, the hand-written loop otherwise (reading the pack O_DIRECT when
/// `direct`, as the runtime did).
fn baseline_run<'a>(
    plan: &'a Plan,
    case: &str,
    pack: &'a Pack,
    limit: u64,
    direct: bool,
) -> Result<Box<dyn BaselineRun + 'a>, BoxError> {
    match &plan.ctx {
        Some(ctx) if case == "none" => {
            Ok(Box::new(baselines::WriteBufferLoop::new(pack, ctx, limit)?))
        }
        ctx => {
            let bc = ctx.as_ref().is_none_or(|c| {
                c.device
                    .features()
                    .contains(wgpu::Features::TEXTURE_COMPRESSION_BC)
            });
            let layout = cases::host_layout(pack, limit, bc);
            let cfg = baselines::LoopConfig {
                threads: plan.threads,
                direct,
                verify: plan.verify,
            };
            Ok(Box::new(baselines::HandLoop::new(pack, layout, cfg)?))
        }
    }
}

/// What a measured row learnt about the runtime's I/O.
struct RunInfo {
    io_backend: String,
    direct: bool,
    /// The GPU LZ4 decoder the runtime ran, if any.
    lz4: Option<Lz4DecodePath>,
    /// Which memory its staging chunks got, and why.
    staging_memory: Option<String>,
}

/// The capacity of bench's queue, in requests (DirectStorage's largest).
const QUEUE_CAPACITY: usize = 8192;

/// Passes a sustained run queues beyond the one it waits on, by default:
/// enough that the queue's capacity holds the application back (one pass
/// more than fits), at most 8 (each has its own destination set).
fn passes_to_fill(requests_per_pass: usize) -> u32 {
    let per_pass = requests_per_pass + 1; // and its fence
    (QUEUE_CAPACITY / per_pass + 1).clamp(1, 8) as u32
}

/// Streams one case at one staging size: a warm-up pass, then the timed
/// passes, each followed by one pass of the baseline that `base` makes
/// (given whether the runtime reads the pack O_DIRECT), so the two
/// alternate and meet the same machine. Baselines that do not alternate
/// (`BaselineRun::alternates`), and every baseline with `--sustained`
/// (whose runtime passes overlap one another), run after the runtime is
/// dropped.
fn measure<'a>(
    plan: &Plan,
    case: &str,
    mib: u64,
    path: &Path,
    limit: u64,
    base: impl FnOnce(bool) -> Result<Box<dyn BaselineRun + 'a>, BoxError>,
) -> Result<(BenchRow, Baseline, RunInfo), BoxError> {
    let iters = plan.iters;
    let cfg = RuntimeConfig::default()
        .with_staging_size(mib << 20)
        .with_gpu_decompression(case.starts_with("gpu-"))
        .with_lz4_decode_path(plan.lz4_path)
        .with_verify_gpu_checksums(plan.verify)
        .with_cpu_threads(plan.threads)
        .with_open_mode(if plan.buffered {
            OpenMode::Buffered
        } else {
            OpenMode::Auto
        })
        .with_io(crate::cli::env::io_config()?)
        .with_gdeflate_decoder(crate::cli::env::gdeflate_decoder()?.0)
        .with_map_cached_files(plan.map)
        // The noop backend stands in for a discrete GPU: it takes the
        // branches one takes (staging the CPU only writes, GPU layout).
        .with_assume_discrete_gpu(plan.noop)
        .with_gpu_batch_size(
            plan.batch
                .unwrap_or(RuntimeConfig::default().gpu_batch_size),
        )
        .with_trace(plan.trace.as_ref().map(|t| {
            let mut p = t.clone().into_os_string();
            p.push(format!(".{case}.{mib}MiB"));
            PathBuf::from(p)
        }));
    let ctx = plan.ctx.as_ref();
    let rt = match ctx {
        Some(c) => Runtime::new(&c.device, &c.queue, cfg)?,
        None => Runtime::without_gpu(cfg)?,
    };
    let pf = rt.open_pack(path)?;
    let pack = pf.pack();
    let stored: u64 = pack.blocks().iter().map(|b| b.stored_size as u64).sum();
    let raw: u64 = pack.blocks().iter().map(|b| b.size as u64).sum();
    // One destination set per pass that can be in flight at once:
    // sustained mode queues `ahead` passes beyond the one it waits on, and
    // a set is queued again only once its previous pass is waited for (a
    // plain run uses the first).
    let first = cases::build_targets(&pf, ctx, limit);
    let ahead = match (plan.sustained, plan.ahead) {
        (false, _) => 0,
        (true, Some(a)) => a,
        (true, None) => passes_to_fill(first.requests.len()),
    };
    let mut sets = vec![first];
    for _ in 0..ahead {
        sets.push(cases::build_targets(&pf, ctx, limit));
    }
    let delivered = sets[0].delivered;
    let q = rt.create_queue(QueueConfig::default().with_capacity(QUEUE_CAPACITY));
    let fence = Fence::new();
    let mut value = 0u64;
    let mut times = Vec::new();
    let enqueue_all = |set: &Targets, value: &mut u64| -> Result<u64, BoxError> {
        for r in &set.requests {
            q.enqueue(r.clone())?;
        }
        *value += 1;
        q.enqueue_signal(&fence, *value);
        q.submit();
        Ok(*value)
    };
    // Warm-up (also fills the page cache for buffered runs), over every
    // destination set the timed passes use: a set's first pass pays the
    // page faults of its fresh memory (about 2 us a page in this VM), which
    // the hand-written loop, reusing one allocation, pays in its own
    // warm-up only.
    for set in &sets {
        let v = enqueue_all(set, &mut value)?;
        fence.wait(v);
    }
    plan.progress.inc(1);
    let mut base = base(pf.is_direct())?;
    let alternate = !plan.sustained && base.alternates();
    if alternate {
        base.pass()?;
        plan.progress.inc(1);
    }
    let mut base_passes: Vec<PassTime> = Vec::new();
    let warm = q.stats();
    let busy0 = rt.submit_thread_busy();
    let wgpu0 = rt.wgpu_submit_time();
    let busy_cpu0 = metrics::submit_thread_cpu();
    let threads0 = metrics::thread_times();
    let flight0 = rt.in_flight();
    let cpu0 = metrics::cpu_seconds();
    if plan.sustained {
        // Pass `p` writes set `p % sets.len()`. Before waiting on pass `i`,
        // pass `i + ahead` is queued: its set's last pass, `i - 1`, was
        // waited on in the previous turn.
        let ahead = ahead as usize;
        let mut queued = std::collections::VecDeque::new();
        let start = Instant::now();
        for p in 0..ahead.min(iters as usize) {
            queued.push_back(enqueue_all(&sets[p % sets.len()], &mut value)?);
        }
        for i in 0..iters as usize {
            let p = i + ahead;
            if p < iters as usize {
                queued.push_back(enqueue_all(&sets[p % sets.len()], &mut value)?);
            }
            let v = queued.pop_front().expect("pass i is queued");
            fence.wait(v);
            plan.progress.inc(1);
        }
        // Passes overlap, and a batch spanning passes signals their fences
        // together, so the gaps between fences say nothing: a pass's time
        // is the whole run's over its passes.
        times.push(start.elapsed() / iters);
    } else {
        for _ in 0..iters {
            let t0 = Instant::now();
            // One set, warmed up above, as the hand-written loop has one.
            let v = enqueue_all(&sets[0], &mut value)?;
            fence.wait(v);
            times.push(t0.elapsed());
            plan.progress.inc(1);
            if alternate {
                // The fence fires before the runtime's threads finish their
                // bookkeeping (claims released, handles dropped); let them
                // go idle, so the baseline's pass runs alone.
                std::thread::sleep(std::time::Duration::from_millis(20));
                base_passes.push(base.pass()?);
                plan.progress.inc(1);
            }
        }
    }
    // The baseline's own CPU time is taken out of the process's: its
    // passes ran inside this window when they alternated.
    let cpu = metrics::cpu_seconds() - cpu0 - base_passes.iter().map(|p| p.cpu).sum::<f64>();
    let busy = rt.submit_thread_busy().saturating_sub(busy0);
    let flight = rt.in_flight().since(&flight0);
    // The runtime's own passes (the baseline's, alternating, apart).
    let pass_wall: f64 = times.iter().map(|t| t.as_secs_f64()).sum::<f64>()
        * if plan.sustained { iters as f64 } else { 1.0 };
    let overlap = rt.staging().map(|s| Overlap {
        reads: flight.reads.as_secs_f64() / pass_wall.max(1e-9),
        gpu: flight.gpu.as_secs_f64() / pass_wall.max(1e-9),
        both: flight.both.as_secs_f64() / pass_wall.max(1e-9),
        runtime_gpu_mib: (s.total + s.batch_buffers) as f64 / (1 << 20) as f64,
    });
    let wgpu_submit = rt.wgpu_submit_time().saturating_sub(wgpu0);
    let busy_cpu = metrics::submit_thread_cpu()
        .zip(busy_cpu0)
        .map(|(b, a)| b.saturating_sub(a));
    let threads = metrics::thread_groups(
        &threads0,
        &metrics::thread_times(),
        delivered as f64 * iters as f64,
    );
    let st = q.stats();
    let d = metrics::diff(&st, &warm);
    let noop_decode_not_run = noop_failures(plan, case, &q.error_record(), &d)?;
    let per_iter = |x: u64| x as f64 / iters as f64;
    let median = metrics::median(&mut times);
    let delivered_gbps = delivered as f64 / median / 1e9;
    let read_per_iter = per_iter(d.bytes_read);
    let host = metrics::host_side(
        &d,
        cpu,
        busy,
        busy_cpu,
        wgpu_submit,
        &metrics::PassShape {
            delivered,
            texture_mips: sets[0].texture_mips,
            passes: iters,
        },
    );
    let delivered_as = if noop_decode_not_run > 0 {
        format!(
            "noop: {noop_decode_not_run} of {} requests/pass had their GPU decode treated as done",
            sets[0].requests.len()
        )
    } else if plan.noop {
        "noop: recorded and submitted, nothing stored".into()
    } else {
        "delivered".into()
    };
    let row = BenchRow {
        case: case.to_string(),
        staging_mib: mib,
        bytes_delivered: delivered,
        bytes_read: read_per_iter as u64,
        ratio: raw as f64 / stored.max(1) as f64,
        delivered_gbps,
        read_gbps: read_per_iter / median / 1e9,
        cpu_s_per_gb: host.cpu_s_per_gb,
        requests_per_submit: d.requests as f64 / d.submits.max(1) as f64,
        latency_p50_us: st.latency.quantile_us(0.5),
        latency_p99_us: st.latency.quantile_us(0.99),
        copies_per_byte: host.copies_per_byte,
        cpu_decoded_blocks_per_pass: per_iter(d.blocks_cpu_decompressed),
        cpu_decoded_bytes_per_pass: per_iter(d.bytes_cpu_decompressed),
        threads,
        baseline_gbps: 0.0,
        baseline_cpu_s_per_gb: 0.0,
        baseline: String::new(),
        ratio_to_baseline: 0.0,
        ratio_comparable: true,
        stage_read_s: per_iter(d.read_ns) / 1e9,
        stage_cpu_decode_s: per_iter(d.cpu_decode_ns) / 1e9,
        stage_gpu_s: per_iter(d.gpu_ns) / 1e9,
        overlap,
        host,
        noop_decode_not_run,
        delivered_as,
        passes_ahead: ahead,
        targets: Vec::new(),
    };
    let info = RunInfo {
        io_backend: rt.io_backend(),
        direct: pf.is_direct(),
        lz4: rt.lz4_decode_path(),
        staging_memory: rt.staging_memory().map(|m| m.to_string()),
    };
    if !alternate {
        // Sustained passes overlap one another, and the `write_buffer` loop
        // shares the runtime's device (alive, it made that loop 3x slower
        // on noop): these baselines run after the runtime is gone.
        drop((q, sets, pf, rt));
        for pass in 0..=iters {
            let p = base.pass()?;
            if pass > 0 {
                base_passes.push(p);
            }
            plan.progress.inc(1);
        }
    }
    let baseline = baselines::summarize(&*base, &base_passes);
    Ok((row, baseline, info))
}

/// Failed requests are an error, except on the noop adapter where a GPU
/// decode that never ran (status NotRun) is what shaders that do not run
/// leave behind: those count as delivered, and their number per pass is
/// returned so the report can say so.
fn noop_failures(
    plan: &Plan,
    case: &str,
    rec: &gpustream::completion::ErrorRecord,
    d: &gpustream::runtime::QueueStats,
) -> Result<u64, BoxError> {
    let Some(first) = &rec.first_failure else {
        return Ok(0);
    };
    let not_run =
        matches!(&*first.error, RequestError::GpuDecode { failure, .. } if failure.not_run());
    if plan.noop && not_run && d.completed + d.failed == d.requests {
        return Ok(d.failed / plan.iters.max(1) as u64);
    }
    Err(format!(
        "{case}: {} requests failed; first: {first}",
        rec.failure_count
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::passes_to_fill;

    #[test]
    fn sustained_runs_queue_one_pass_more_than_the_queue_holds() {
        // The demo pack's 1,522 requests: 5 passes (and fences) fit in
        // 8,192, so 6 stay queued beyond the one waited on.
        assert_eq!(passes_to_fill(1522), 6);
        // A pass bigger than the queue still has one queued behind it.
        assert_eq!(passes_to_fill(20_000), 1);
        assert_eq!(passes_to_fill(8191), 2);
        // Tiny passes stop at 8 destination sets.
        assert_eq!(passes_to_fill(10), 8);
    }
}
