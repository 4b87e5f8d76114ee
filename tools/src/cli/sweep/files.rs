//! The third experiment of `gpustream sweep` (`--files`), after the
//! physical-disk-order article: reading a directory's files in name order
//! against physical (FIEMAP) order, and against the engine, which sorts
//! by position itself.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crossbeam::channel;

use crate::cli::report::Table;
use gpustream::io::{fiemap, AlignedBuf, IoEngine, IoFile, OpenMode, Priority, ReadOp};

use super::fmt_mb;
use crate::cli::CliResult;

/// The physical-disk-order article's experiment: read every file of `dir` in name order, then in
/// physical order (first extent from FIEMAP), then all at once through the
/// engine (which sorts by physical position itself).
pub(super) fn run(dir: &Path, create: Option<usize>) -> CliResult {
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

/// Fills `dir` with `n` files of 16-282 KiB, written in shuffled name order
/// so that name order and physical order differ.
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

/// Opens `p` for blocking reads, with O_DIRECT when `direct`.
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
    let engine = IoEngine::new(crate::cli::env::io_config()?)?;
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
