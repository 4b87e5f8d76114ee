//! The first experiment of `gpustream sweep`, after the Xbox article:
//! throughput of every read size x queue depth x access pattern, blocking
//! reads against the engine, printed as one table per pattern and
//! optionally plotted.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli::report::{self, LinePlot, Series, Table};
use gpustream::io::{AlignedBuf, BackendKind, IoFile};

use super::{cell, cpu_seconds, fmt_mb, measure_engine, offsets_for, size_label, Cell, Pattern};
use crate::cli::CliResult;

/// The engine's queue depths, one column each.
const QUEUE_DEPTHS: [usize; 6] = [1, 2, 4, 16, 32, 64];

/// The access patterns, one table (and plot panel) each.
const PATTERNS: [Pattern; 3] = [Pattern::Random, Pattern::SortedRandom, Pattern::Sequential];

/// Measures every cell of the grid on `file` (3 read sizes with `quick`,
/// 9 from 4 KiB to 1 MiB otherwise), each for `budget`, printing a
/// pattern's table as soon as its cells are done.
pub(super) fn run(
    backend: BackendKind,
    file: &IoFile,
    quick: bool,
    budget: Duration,
) -> Result<Vec<Cell>, gpustream::io::IoError> {
    let sizes: Vec<usize> = if quick {
        vec![4 << 10, 64 << 10, 1 << 20]
    } else {
        (0..9).map(|i| (4 << 10) << i).collect()
    };
    let qds = QUEUE_DEPTHS;
    let mut cells = Vec::new();
    for &pattern in &PATTERNS {
        for &size in &sizes {
            let offsets = offsets_for(pattern, size, file.len(), 0x5EED ^ size as u64);
            cells.push(measure_blocking(file, pattern, &offsets, size, budget));
            for &qd in &qds {
                cells.push(measure_engine(
                    backend, file, pattern, &offsets, size, qd, budget,
                )?);
            }
        }
        print_pattern_table(&cells, pattern, &sizes, &qds);
    }
    Ok(cells)
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

/// A descriptor of `file` for blocking reads, kept open for the whole run.
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

/// Prints one pattern's table: MB/s per read size and method, and the
/// engine's CPU cost at queue depth 32.
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

/// Draws throughput against read size, one panel per pattern and one line
/// per method, into the PNG at `path`.
pub(super) fn plot(path: &Path, cells: &[Cell]) -> CliResult {
    let panels: Vec<LinePlot> = PATTERNS
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
            for &q in &QUEUE_DEPTHS {
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
