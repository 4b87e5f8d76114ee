//! `gpustream sweep`: the Xbox article's measurements on the local disk
//! (read size x queue depth x access pattern, blocking reads vs the
//! engine), an optional same-run comparison with fio, and with `--files`
//! the physical-disk-order article's name-order vs physical-order read of a directory.
//!
//! This file takes the arguments, prepares the file, runs the experiments
//! and writes the JSON report; it also holds what the experiments share
//! (access patterns, measured cells, the engine measurement, number
//! formats). Each experiment has a file of its own:
//!
//! - `grid`: read size x queue depth x pattern, blocking reads vs the engine;
//! - `fio`: the engine against fio on the same reads (`--fio`, `--fio-only`);
//! - `files`: a directory in name order vs physical order (`--files`);
//! - `--devices` (in `cli::devices`, shared with `bench --devices`): 1..N
//!   devices at once by read size, Gray's striping table.

mod files;
mod fio;
mod grid;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam::channel;
use serde::Serialize;

use crate::cli::report;
use gpustream::io::{
    AlignedBuf, BackendKind, IoConfig, IoEngine, IoFile, OpenMode, Priority, ReadOp,
};

use super::CliResult;
use fio::FioRow;

/// Arguments of `gpustream sweep`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to read (created first with --create).
    file: Option<PathBuf>,
    /// Create (or overwrite) the test file with this many bytes of
    /// incompressible data first, e.g. `4GiB`.
    #[arg(long, value_parser = parse_size)]
    create: Option<u64>,
    /// A short sweep (3 read sizes, ~0.2 s per cell): about half a minute.
    #[arg(long)]
    quick: bool,
    /// Seconds per measured cell (default 0.2 with --quick, 1.0 otherwise).
    #[arg(long)]
    seconds: Option<f64>,
    /// Write every measurement as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw throughput vs read size per pattern into this PNG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Also run fio (io_uring engine, O_DIRECT, same file, read size and
    /// queue depth) and print gpustream / fio for each.
    #[arg(long)]
    fio: bool,
    /// Only the fio comparison, not the full sweep.
    #[arg(long)]
    fio_only: bool,
    /// Alternating runs per fio comparison cell (the best of each side
    /// counts; default 2 with --quick, 3 otherwise).
    #[arg(long)]
    repeat: Option<usize>,
    /// Engine backend: auto, io_uring or threads.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Read every file of this directory in name order and in physical
    /// (FIEMAP) order, like the physical-disk-order article.
    #[arg(long, conflicts_with = "file")]
    files: Option<PathBuf>,
    /// With --files: first fill the directory with this many files of
    /// 16-282 KiB (149 KiB on average, as in the physical-disk-order article), written in shuffled
    /// name order.
    #[arg(long)]
    create_files: Option<usize>,
    /// Gray's striping table: directories on separate devices
    /// (comma-separated), one pack of stored blobs on each, read 1, 2, ...,
    /// N devices at once with 64 KiB, 256 KiB and 1 MiB reads.
    #[arg(long, value_delimiter = ',', value_name = "DIRS", conflicts_with_all = ["file", "files"])]
    devices: Option<Vec<PathBuf>>,
    /// With --devices: MiB per device's pack, a multiple of 4 (default
    /// 512, 128 with --quick).
    #[arg(long, requires = "devices")]
    devices_mib: Option<u64>,
}

/// Parses a size such as `4GiB`, `512k` or `1.5 MB` (binary units either way).
fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        "t" | "tib" | "tb" => 1 << 40,
        u => return Err(format!("unknown size unit {u:?} in {s:?}")),
    };
    Ok((n * mult as f64) as u64)
}

/// The order of a cell's reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Pattern {
    Random,
    SortedRandom,
    Sequential,
}

impl Pattern {
    /// The pattern's name in tables and plots.
    fn label(self) -> &'static str {
        match self {
            Pattern::Random => "random",
            Pattern::SortedRandom => "sorted random",
            Pattern::Sequential => "sequential",
        }
    }
}

/// One measured cell.
#[derive(Debug, Clone, Serialize)]
struct Cell {
    pattern: Pattern,
    method: String,
    read_size: usize,
    queue_depth: usize,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
    cpu_seconds_per_gb: f64,
    errors: u64,
}

/// What `--json` writes: the machine, the file, and every measurement.
#[derive(Serialize)]
struct SweepReport {
    date: String,
    file: PathBuf,
    file_len: u64,
    direct: bool,
    device: String,
    rotational: Option<bool>,
    backend: String,
    cells: Vec<Cell>,
    fio: Vec<FioRow>,
}

/// Runs the sweep: `--files` alone, else the grid and the fio comparison
/// (as the flags ask) on one file, then the JSON report and the plot.
pub fn run(args: Args) -> CliResult {
    if let Some(dir) = &args.files {
        return files::run(dir, args.create_files);
    }
    if let Some(dirs) = &args.devices {
        let mib = args
            .devices_mib
            .unwrap_or(if args.quick { 128 } else { 512 });
        let sizes = [64 << 10, 256 << 10, 1 << 20];
        let r = super::devices::sweep(dirs, mib, &sizes, if args.quick { 1 } else { 3 })?;
        super::devices::print_sweep(&r);
        if let Some(path) = &args.json {
            report::json::write_json(path, &r)?;
            println!("wrote {}", path.display());
        }
        return Ok(());
    }
    let Some(path) = args.file.clone() else {
        return Err("give a file to sweep (create one with --create 4GiB) or --files <dir>".into());
    };
    if let Some(size) = args.create {
        create_file(&path, size)?;
    }
    let backend = match args.backend.as_str() {
        "auto" => BackendKind::Auto,
        "io_uring" | "uring" => BackendKind::IoUring,
        "threads" => BackendKind::Threads,
        b => return Err(format!("unknown backend {b:?} (auto, io_uring, threads)").into()),
    };
    let probe = IoEngine::new(IoConfig::default().with_backend(backend))?;
    let file = probe.open(&path, OpenMode::Direct)?;
    if !file.is_direct() {
        println!(
            "note: {} cannot be read with O_DIRECT here; figures include the page cache",
            path.display()
        );
    }
    if file.len() < 64 << 20 {
        return Err(format!(
            "{} is {} bytes; the sweep needs at least 64 MiB (use --create 4GiB)",
            path.display(),
            file.len()
        )
        .into());
    }
    let secs = args.seconds.unwrap_or(if args.quick { 0.2 } else { 1.0 });
    let budget = Duration::from_secs_f64(secs.clamp(0.01, 60.0));
    println!(
        "sweep of {} ({:.2} GiB, {}, device {}{}), engine backend {}, {:.2} s per cell",
        path.display(),
        file.len() as f64 / (1u64 << 30) as f64,
        if file.is_direct() {
            "O_DIRECT"
        } else {
            "buffered"
        },
        file.device().name,
        match file.device().rotational {
            Some(true) => ", rotational",
            Some(false) => ", solid state",
            None => "",
        },
        probe.backend_name(),
        budget.as_secs_f64()
    );
    let cells = if args.fio_only {
        Vec::new()
    } else {
        grid::run(backend, &file, args.quick, budget)?
    };

    let mut fio_rows = Vec::new();
    if args.fio || args.fio_only {
        let repeat = args.repeat.unwrap_or(if args.quick { 2 } else { 3 }).max(1);
        fio_rows = fio::run(backend, &file, &path, args.quick, budget, repeat)?;
    }

    if let Some(p) = &args.json {
        let rep = SweepReport {
            date: utc_now(),
            file: path.clone(),
            file_len: file.len(),
            direct: file.is_direct(),
            device: file.device().name.clone(),
            rotational: file.device().rotational,
            backend: probe.backend_name().to_string(),
            cells: cells.clone(),
            fio: fio_rows.clone(),
        };
        report::json::write_json(p, &rep)?;
        println!("wrote {}", p.display());
    }
    if let Some(p) = &args.plot {
        if cells.is_empty() {
            println!("no sweep cells to plot (--fio-only)");
        } else {
            grid::plot(p, &cells)?;
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// The current date and time in UTC for the report, from `date -u`, or
/// "unknown" where `date` cannot run.
fn utc_now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Err(_) => String::from("unknown"),
    }
}

/// Writes `size` bytes of cheap pseudo-random data (so nothing below us
/// can compress or deduplicate it) and syncs it to the disk.
fn create_file(path: &Path, size: u64) -> CliResult {
    use std::io::Write;
    println!("creating {} ({} bytes)...", path.display(), size);
    let t = Instant::now();
    let mut f = std::fs::File::create(path)?;
    let chunk = 8 << 20;
    let mut buf = vec![0u8; chunk];
    let mut x = 0x243F_6A88_85A3_08D3u64;
    let mut left = size;
    while left > 0 {
        for w in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(chunk as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    println!(
        "created in {:.1} s ({:.0} MB/s)",
        t.elapsed().as_secs_f64(),
        size as f64 / 1e6 / t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Offsets for one cell: random multiples of the read size (as fio's
/// randread picks them), the same sorted, or consecutive reads.
fn offsets_for(pattern: Pattern, size: usize, file_len: u64, seed: u64) -> Vec<u64> {
    let slots = (file_len / size as u64).max(1);
    // Enough for any cell's time budget at this disk's speeds, capped so
    // small reads do not build huge lists.
    let n = (slots as usize).clamp(1, 200_000);
    let mut x = seed | 1;
    let mut v: Vec<u64> = match pattern {
        Pattern::Sequential => (0..n as u64).map(|i| (i % slots) * size as u64).collect(),
        _ => (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % slots) * size as u64
            })
            .collect(),
    };
    if pattern == Pattern::SortedRandom {
        v.sort_unstable();
    }
    v
}

/// This process's user plus system CPU time so far, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Builds a cell from what a measurement counted, deriving its MB/s and
/// CPU cost.
#[allow(clippy::too_many_arguments)]
fn cell(
    pattern: Pattern,
    method: &str,
    size: usize,
    qd: usize,
    bytes: u64,
    secs: f64,
    cpu: f64,
    errors: u64,
) -> Cell {
    Cell {
        pattern,
        method: method.to_string(),
        read_size: size,
        queue_depth: qd,
        bytes,
        seconds: secs,
        mb_per_s: bytes as f64 / 1e6 / secs.max(1e-9),
        cpu_seconds_per_gb: if bytes > 0 {
            cpu / (bytes as f64 / 1e9)
        } else {
            0.0
        },
        errors,
    }
}

/// The engine at queue depth `qd` (reads in flight at the device), refilled
/// in batches as completions arrive, issued in the pattern's order (the
/// engine's own sorting is off so "random" stays random).
fn measure_engine(
    backend: BackendKind,
    file: &IoFile,
    pattern: Pattern,
    offsets: &[u64],
    size: usize,
    qd: usize,
    budget: Duration,
) -> Result<Cell, gpustream::io::IoError> {
    let engine = IoEngine::new(
        IoConfig::default()
            .with_backend(backend)
            .with_queue_depth(qd)
            .with_sort_by_position(false),
    )?;
    let method = engine.backend_name().to_string();
    // Twice the queue depth in buffers: the engine keeps `qd` reads at the
    // device and the rest queued, so the device is refilled by the worker
    // the moment a read finishes, not after a round trip to this thread.
    let nbuf = 2 * qd;
    let mut bufs: Vec<AlignedBuf> = (0..nbuf).map(|_| AlignedBuf::new(size)).collect();
    let ptrs: Vec<usize> = bufs.iter_mut().map(|b| b.as_mut_ptr() as usize).collect();
    for (&p, b) in ptrs.iter().zip(&bufs) {
        // Registered like the runtime's staging memory would be.
        // SAFETY: the buffers outlive the engine (dropped first below).
        unsafe { engine.register_memory(p as *mut u8, b.len()) };
    }
    let (tx, rx) = channel::unbounded();
    let op = |i: usize, buf: usize| ReadOp {
        file: file.clone(),
        offset: offsets[i],
        len: size,
        dest: ptrs[buf] as *mut u8,
        priority: Priority::Normal,
        user_data: buf as u64,
    };
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut next = nbuf.min(offsets.len());
    let first: Vec<ReadOp> = (0..next).map(|i| op(i, i)).collect();
    let mut in_flight = first.len();
    // SAFETY: each op targets its own buffer in `bufs`, reused only after
    // that op's completion arrived; the engine is dropped (waiting for any
    // read still in flight) before the buffers.
    unsafe { engine.submit(first, tx.clone()) };
    let (mut bytes, mut errors) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(nbuf);
    while in_flight > 0 {
        let Ok(c) = rx.recv() else { break };
        let mut handle = |c: gpustream::io::ReadCompletion| {
            in_flight -= 1;
            match c.result {
                Ok(n) => bytes += n as u64,
                Err(_) => errors += 1,
            }
            if next < offsets.len() && t0.elapsed() < budget {
                batch.push(op(next, c.user_data as usize));
                next += 1;
            }
        };
        handle(c);
        while let Ok(c) = rx.try_recv() {
            handle(c);
        }
        if !batch.is_empty() {
            in_flight += batch.len();
            // SAFETY: as above: every buffer reused here just completed.
            unsafe { engine.submit(std::mem::take(&mut batch), tx.clone()) };
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    drop(engine);
    drop(bufs);
    Ok(cell(pattern, &method, size, qd, bytes, secs, cpu, errors))
}

/// MB/s with about three significant digits.
fn fmt_mb(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A read size in KiB or MiB.
fn size_label(s: usize) -> String {
    if s >= 1 << 20 {
        format!("{} MiB", s >> 20)
    } else {
        format!("{} KiB", s >> 10)
    }
}
