//! `gpustream sweep`: the Xbox article's measurements on the local disk
//! (read size x queue depth x access pattern, blocking reads vs the
//! engine), an optional same-run comparison with fio, and with `--files`
//! the physical-disk-order article's name-order vs physical-order read of a directory.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam::channel;
use serde::Serialize;

use crate::cli::report::{self, LinePlot, Series, Table};
use gpustream::io::{
    fiemap, AlignedBuf, BackendKind, IoConfig, IoEngine, IoFile, OpenMode, Priority, ReadOp,
};

use super::CliResult;

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
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Pattern {
    Random,
    SortedRandom,
    Sequential,
}

impl Pattern {
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

#[derive(Debug, Clone, Serialize)]
struct FioRow {
    pattern: Pattern,
    read_size: usize,
    queue_depth: usize,
    gpustream_mb_per_s: f64,
    fio_mb_per_s: f64,
    ratio: f64,
}

/// Runs the sweep.
pub fn run(args: Args) -> CliResult {
    if let Some(dir) = &args.files {
        return run_files(dir, args.create_files);
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
    let probe = IoEngine::new(IoConfig {
        backend,
        ..IoConfig::default()
    })?;
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
    let sizes: Vec<usize> = if args.quick {
        vec![4 << 10, 64 << 10, 1 << 20]
    } else {
        (0..9).map(|i| (4 << 10) << i).collect()
    };
    let qds = [1usize, 2, 4, 16, 32, 64];
    let patterns = [Pattern::Random, Pattern::SortedRandom, Pattern::Sequential];

    let mut cells = Vec::new();
    if !args.fio_only {
        for &pattern in &patterns {
            for &size in &sizes {
                let offsets = offsets_for(pattern, size, file.len(), 0x5EED ^ size as u64);
                cells.push(measure_blocking(&file, pattern, &offsets, size, budget));
                for &qd in &qds {
                    cells.push(measure_engine(
                        backend, &file, pattern, &offsets, size, qd, budget,
                    )?);
                }
            }
            print_pattern_table(&cells, pattern, &sizes, &qds);
        }
    }

    let mut fio_rows = Vec::new();
    if args.fio || args.fio_only {
        let repeat = args.repeat.unwrap_or(if args.quick { 2 } else { 3 }).max(1);
        fio_rows = run_fio_comparison(backend, &file, &path, args.quick, budget, repeat)?;
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
            plot_cells(p, &cells, &patterns, &qds)?;
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

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

fn cpu_seconds() -> f64 {
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

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

/// Blocking reads, one at a time (`pread` on the O_DIRECT descriptor): the
/// article's "blocking" baseline.
fn measure_blocking(
    file: &IoFile,
    pattern: Pattern,
    offsets: &[u64],
    size: usize,
    budget: Duration,
) -> Cell {
    let fd = raw_fd(file);
    let mut buf = AlignedBuf::new(size);
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let (mut bytes, mut errors) = (0u64, 0u64);
    for &off in offsets {
        // SAFETY: buf is valid for size bytes.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), size, off as i64) };
        if n < 0 {
            errors += 1;
        } else {
            bytes += n as u64;
        }
        if t0.elapsed() >= budget {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    cell(
        pattern,
        "blocking",
        size,
        1,
        bytes,
        secs,
        cpu_seconds() - cpu0,
        errors,
    )
}

fn raw_fd(file: &IoFile) -> i32 {
    // Blocking reads use their own descriptor with the same O_DIRECT
    // setting as the engine's, opened once per file.
    use std::sync::OnceLock;
    static CACHE: OnceLock<std::sync::Mutex<Vec<(PathBuf, std::fs::File)>>> = OnceLock::new();
    let c = CACHE.get_or_init(Default::default);
    let mut c = c.lock().expect("fd cache");
    if let Some((_, f)) = c.iter().find(|(p, _)| p == file.path()) {
        return f.as_raw_fd();
    }
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    if file.is_direct() {
        o.custom_flags(libc::O_DIRECT);
    }
    let f = o.open(file.path()).expect("reopening the sweep file");
    let fd = f.as_raw_fd();
    c.push((file.path().to_path_buf(), f));
    fd
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
    let engine = IoEngine::new(IoConfig {
        backend,
        queue_depth: qd,
        sort_by_position: false,
        ..IoConfig::default()
    })?;
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

fn fmt_mb(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn size_label(s: usize) -> String {
    if s >= 1 << 20 {
        format!("{} MiB", s >> 20)
    } else {
        format!("{} KiB", s >> 10)
    }
}

fn print_pattern_table(cells: &[Cell], pattern: Pattern, sizes: &[usize], qds: &[usize]) {
    let mut headers = vec!["read size".to_string(), "blocking".to_string()];
    headers.extend(qds.iter().map(|q| format!("QD {q}")));
    headers.push("CPU s/GB (QD 32)".into());
    let mut t = Table::new(headers);
    for &s in sizes {
        let find = |blocking: bool, qd: usize| {
            cells.iter().find(|c| {
                c.pattern == pattern
                    && c.read_size == s
                    && (c.method == "blocking") == blocking
                    && (blocking || c.queue_depth == qd)
            })
        };
        let mut row = vec![size_label(s)];
        row.push(
            find(true, 1)
                .map(|c| fmt_mb(c.mb_per_s))
                .unwrap_or_default(),
        );
        for &q in qds {
            row.push(
                find(false, q)
                    .map(|c| fmt_mb(c.mb_per_s))
                    .unwrap_or_default(),
            );
        }
        row.push(
            find(false, 32)
                .map(|c| format!("{:.2}", c.cpu_seconds_per_gb))
                .unwrap_or_default(),
        );
        t.row(row);
    }
    println!("\n{} reads, MB/s:\n{t}", pattern.label());
}

fn plot_cells(path: &Path, cells: &[Cell], patterns: &[Pattern], qds: &[usize]) -> CliResult {
    let panels: Vec<LinePlot> = patterns
        .iter()
        .map(|&p| {
            let mut series = Vec::new();
            let pts = |f: &dyn Fn(&Cell) -> bool| -> Vec<(f64, f64)> {
                let mut v: Vec<(f64, f64)> = cells
                    .iter()
                    .filter(|c| c.pattern == p && f(c))
                    .map(|c| ((c.read_size >> 10) as f64, c.mb_per_s))
                    .collect();
                v.sort_by(|a, b| a.0.total_cmp(&b.0));
                v
            };
            series.push(Series {
                name: "blocking".into(),
                points: pts(&|c| c.method == "blocking"),
            });
            for &q in qds {
                series.push(Series {
                    name: format!("QD {q}"),
                    points: pts(&|c| c.method != "blocking" && c.queue_depth == q),
                });
            }
            LinePlot {
                title: format!("{} reads", p.label()),
                x_label: "read size (KiB)".into(),
                y_label: "MB/s".into(),
                log_x: true,
                log_y: true,
                series,
            }
        })
        .collect();
    report::plot::save_png(path, &panels, 3, 1800, 600)?;
    Ok(())
}

/// Runs fio and our engine alternately on the same file, read size and
/// queue depth (best of two each, so a burst of other load on the machine
/// hurts neither side alone) and prints the ratio.
fn run_fio_comparison(
    backend: BackendKind,
    file: &IoFile,
    path: &Path,
    quick: bool,
    budget: Duration,
    repeat: usize,
) -> Result<Vec<FioRow>, Box<dyn std::error::Error + Send + Sync>> {
    if std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_err()
    {
        return Err("fio is not installed (Debian: apt-get install fio)".into());
    }
    let secs = budget.as_secs_f64().max(if quick { 1.0 } else { 3.0 });
    let sizes: Vec<usize> = if quick {
        vec![64 << 10, 1 << 20]
    } else {
        vec![64 << 10, 256 << 10, 1 << 20]
    };
    let qds = [16usize, 32];
    let patterns = [Pattern::Random, Pattern::Sequential];
    let mut rows = Vec::new();
    let mut t = Table::new([
        "pattern",
        "read size",
        "QD",
        "gpustream MB/s",
        "fio MB/s",
        "gpustream/fio",
    ]);
    for &pattern in &patterns {
        for &size in &sizes {
            for &qd in &qds {
                let offsets = offsets_for(pattern, size, file.len(), 0xF10 ^ size as u64);
                let mut ours: f64 = 0.0;
                let mut theirs: f64 = 0.0;
                for _ in 0..repeat {
                    let c = measure_engine(
                        backend,
                        file,
                        pattern,
                        &offsets,
                        size,
                        qd,
                        Duration::from_secs_f64(secs),
                    )?;
                    ours = ours.max(c.mb_per_s);
                    theirs = theirs.max(fio_once(path, pattern, size, qd, secs)?);
                }
                let ratio = ours / theirs.max(1e-9);
                t.row([
                    pattern.label().to_string(),
                    size_label(size),
                    qd.to_string(),
                    fmt_mb(ours),
                    fmt_mb(theirs),
                    format!("{ratio:.2}x"),
                ]);
                rows.push(FioRow {
                    pattern,
                    read_size: size,
                    queue_depth: qd,
                    gpustream_mb_per_s: ours,
                    fio_mb_per_s: theirs,
                    ratio,
                });
            }
        }
    }
    println!(
        "\ngpustream vs fio (io_uring, O_DIRECT, same file, {secs:.1} s per run, best of {repeat}):\n{t}"
    );
    Ok(rows)
}

fn fio_once(
    path: &Path,
    pattern: Pattern,
    size: usize,
    qd: usize,
    secs: f64,
) -> Result<f64, Box<dyn std::error::Error + Send + Sync>> {
    let rw = match pattern {
        Pattern::Sequential => "read",
        _ => "randread",
    };
    let out = std::process::Command::new("fio")
        .arg("--name=gpustream-cmp")
        .arg(format!("--filename={}", path.display()))
        .arg("--readonly")
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={size}"))
        .arg(format!("--iodepth={qd}"))
        .arg("--ioengine=io_uring")
        .arg("--direct=1")
        .arg("--time_based")
        .arg(format!("--runtime={}ms", (secs * 1000.0) as u64))
        .arg("--norandommap")
        .arg("--randrepeat=0")
        .arg("--output-format=json")
        .output()?;
    if !out.status.success() {
        return Err(format!("fio failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let bw = v["jobs"][0]["read"]["bw_bytes"]
        .as_f64()
        .ok_or("fio's JSON has no jobs[0].read.bw_bytes")?;
    Ok(bw / 1e6)
}

/// The physical-disk-order article's experiment: read every file of `dir` in name order, then in
/// physical order (first extent from FIEMAP), then all at once through the
/// engine (which sorts by physical position itself).
fn run_files(dir: &Path, create: Option<usize>) -> CliResult {
    if let Some(n) = create {
        create_files(dir, n)?;
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e} (--files takes a directory)", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .map(|e| e.path())
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(format!(
            "{} has no files (fill it with --create-files 2000)",
            dir.display()
        )
        .into());
    }
    // Time to query positions: open + FIEMAP of the first extent.
    let t = Instant::now();
    let mut located: Vec<(u64, u64, PathBuf)> = Vec::with_capacity(names.len());
    let mut unmapped = 0usize;
    for (i, p) in names.iter().enumerate() {
        let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let phys = match fiemap::extents(f.as_raw_fd(), 1) {
            Ok(e) if !e.is_empty() => e[0].physical,
            _ => {
                unmapped += 1;
                u64::MAX
            }
        };
        located.push((phys, i as u64, p.clone()));
    }
    let query_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    located.sort();
    let sort_s = t.elapsed().as_secs_f64();
    let physical: Vec<PathBuf> = located.into_iter().map(|(_, _, p)| p).collect();

    let (name_s, bytes) = read_files_blocking(&names)?;
    let (phys_s, _) = read_files_blocking(&physical)?;
    let engine_s = read_files_engine(&names)?;

    let mb = |s: f64| bytes as f64 / 1e6 / s.max(1e-9);
    println!(
        "{} files, {:.1} MiB ({:.0} KiB average), in {}",
        names.len(),
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / 1024.0 / names.len() as f64,
        dir.display()
    );
    if unmapped > 0 {
        println!("note: FIEMAP could not place {unmapped} files (they are read last)");
    }
    let mut t = Table::new(["step", "seconds", "MB/s", "vs name order"]);
    t.row([
        "query positions (open + FIEMAP)".to_string(),
        format!("{query_s:.3}"),
        String::new(),
        String::new(),
    ]);
    t.row([
        "sort by position".to_string(),
        format!("{sort_s:.4}"),
        String::new(),
        String::new(),
    ]);
    for (label, s) in [
        ("read in name order (blocking)", name_s),
        ("read in physical order (blocking)", phys_s),
        ("read all via engine (QD 32, sorted)", engine_s),
    ] {
        t.row([
            label.to_string(),
            format!("{s:.3}"),
            fmt_mb(mb(s)),
            format!("{:.2}x", name_s / s.max(1e-9)),
        ]);
    }
    println!("{t}");
    println!(
        "name order takes {:.2}x as long as physical order including the position query",
        name_s / (phys_s + query_s + sort_s).max(1e-9)
    );
    Ok(())
}

fn create_files(dir: &Path, n: usize) -> CliResult {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    println!("creating {n} files in {}...", dir.display());
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = 0x9E37_79B9u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in (1..n).rev() {
        order.swap(i, (rnd() % (i as u64 + 1)) as usize);
    }
    let mut data = vec![0u8; 282 << 10];
    for w in data.chunks_exact_mut(8) {
        w.copy_from_slice(&rnd().to_le_bytes());
    }
    for &i in &order {
        let size = (16 << 10) + (rnd() % (266 << 10)) as usize;
        let mut f = std::fs::File::create(dir.join(format!("file{i:06}.bin")))?;
        data[..8].copy_from_slice(&(i as u64).to_le_bytes());
        f.write_all(&data[..size])?;
    }
    // One sync at the end: the files get real extents (FIEMAP reports
    // delayed allocations without a position).
    let d = std::fs::File::open(dir)?;
    // SAFETY: syncfs on a valid descriptor.
    unsafe { libc::syncfs(d.as_raw_fd()) };
    Ok(())
}

/// Reads each file whole, one after another, with O_DIRECT where possible.
fn read_files_blocking(
    paths: &[PathBuf],
) -> Result<(f64, u64), Box<dyn std::error::Error + Send + Sync>> {
    let t = Instant::now();
    let mut bytes = 0u64;
    let mut buf = AlignedBuf::new(1 << 20);
    for p in paths {
        let f = IoFile::open(p, OpenMode::Direct)?;
        let fd = raw_fd_of(p, f.is_direct()).map_err(|e| format!("{}: {e}", p.display()))?;
        let mut off = 0u64;
        loop {
            // SAFETY: buf is valid for its length.
            let n = unsafe {
                libc::pread(
                    fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    off as i64,
                )
            };
            if n <= 0 {
                break;
            }
            off += n as u64;
            bytes += n as u64;
        }
    }
    Ok((t.elapsed().as_secs_f64(), bytes))
}

fn raw_fd_of(p: &Path, direct: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(p)
}

/// Submits every file (in name order) to the engine in batches; the
/// engine's scheduler reorders each batch by physical position.
fn read_files_engine(paths: &[PathBuf]) -> Result<f64, Box<dyn std::error::Error + Send + Sync>> {
    let engine = IoEngine::new(IoConfig::default())?;
    let t = Instant::now();
    for chunk in paths.chunks(512) {
        let files: Vec<IoFile> = chunk
            .iter()
            .map(|p| engine.open(p, OpenMode::Direct))
            .collect::<Result<_, _>>()?;
        let mut bufs: Vec<AlignedBuf> = files
            .iter()
            .map(|f| AlignedBuf::new((f.len() as usize).div_ceil(4096) * 4096))
            .collect();
        let (tx, rx) = channel::unbounded();
        let ops: Vec<ReadOp> = files
            .iter()
            .zip(bufs.iter_mut())
            .enumerate()
            .map(|(i, (f, b))| ReadOp {
                file: f.clone(),
                offset: 0,
                len: b.len(),
                dest: b.as_mut_ptr(),
                priority: Priority::Normal,
                user_data: i as u64,
            })
            .collect();
        let n = ops.len();
        // SAFETY: each op owns its buffer, kept until all n completions
        // have arrived below.
        unsafe { engine.submit(ops, tx) };
        for _ in 0..n {
            rx.recv()?.result?;
        }
        drop(bufs);
    }
    Ok(t.elapsed().as_secs_f64())
}
