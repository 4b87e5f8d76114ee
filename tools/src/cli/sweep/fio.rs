//! The second experiment of `gpustream sweep` (`--fio`, `--fio-only`):
//! the engine against fio on the same file, read size and queue depth, to
//! show how far the engine is from what the disk gives a tuned reader.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::cli::report::Table;
use gpustream::io::{BackendKind, IoFile};

use super::{fmt_mb, measure_engine, offsets_for, size_label, Pattern};

/// One compared cell: the best MB/s of each side and their ratio.
#[derive(Debug, Clone, Serialize)]
pub(super) struct FioRow {
    pattern: Pattern,
    read_size: usize,
    queue_depth: usize,
    gpustream_mb_per_s: f64,
    fio_mb_per_s: f64,
    ratio: f64,
}

/// Runs fio and our engine alternately on the same file, read size and
/// queue depth (best of `repeat` runs each: `--repeat`, by default 2 with
/// `--quick` and 3 otherwise, so a burst of other load on the machine hurts
/// neither side alone) and prints the ratio.
pub(super) fn run(
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

/// One fio run of `secs` seconds; returns its read MB/s.
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
