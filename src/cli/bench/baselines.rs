//! The baselines bench measures in the same run as the runtime: the code a
//! user would write instead of using gpustream.
//!
//! - Compressed cases (and `none` into host memory): a hand-written loop of
//!   the runtime's CPU thread count. Each thread takes the next few blocks,
//!   `pread`s each block's stored bytes (opened the same way as the runtime's
//!   file: O_DIRECT or buffered), checks its crc32c, and decodes it into its
//!   place in host memory laid out as the runtime's memory destinations are.
//! - `none` into GPU buffers and textures: a plain `queue.write_buffer` loop
//!   over the same stored bytes.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use gpustream::codec::Codec;
use gpustream::pack::format::sector_range;
use gpustream::pack::{Block, BlockId, Pack};

use super::cases::HostLayout;
use super::metrics::{cpu_seconds, median};

/// A baseline's figures, taken like the runtime's: one warm-up pass, then
/// the median of the timed passes.
#[derive(Clone, Debug)]
pub(super) struct Baseline {
    /// What it is, in words.
    pub what: String,
    /// Median GB/s of uncompressed bytes produced.
    pub gbps: f64,
    /// Whole-process CPU seconds per GB over the timed passes.
    pub cpu_s_per_gb: f64,
    /// Uncompressed bytes one pass produces.
    pub bytes: u64,
}

/// How the hand-written loop runs.
pub(super) struct LoopConfig {
    /// Threads (the runtime's `cpu_threads`).
    pub threads: usize,
    /// Open the pack with O_DIRECT (as the runtime did) instead of buffered.
    pub direct: bool,
    /// Check each block's crc32c (off with `--no-verify`).
    pub verify: bool,
    /// Timed passes after the warm-up.
    pub iters: u32,
}

/// Blocks a thread takes at a time: enough to make the shared counter's
/// lock rare, few enough to balance the threads at the end of a pass.
const BATCH: usize = 8;

/// One block and the host memory it decodes into.
struct Job<'p, 'm> {
    block: &'p Block,
    id: BlockId,
    dst: &'m mut [u8],
}

/// Runs the hand-written loop over `layout`'s blocks; `tick` is called after
/// each pass (for a progress bar).
pub(super) fn hand_loop(
    pack: &Pack,
    layout: &HostLayout,
    cfg: &LoopConfig,
    mut tick: impl FnMut(),
) -> Result<Baseline, String> {
    let path = pack.path();
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    if cfg.direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    let file = opts
        .open(path)
        .map_err(|e| format!("baseline: opening {}: {e}", path.display()))?;
    // 4096 is a multiple of every logical sector size Linux supports.
    let align: u64 = if cfg.direct { 4096 } else { 1 };
    let mut memory: Vec<Vec<u8>> = layout.sizes.iter().map(|&n| vec![0u8; n]).collect();
    let mut jobs = split(&mut memory, layout, pack)?;
    let bytes: u64 = jobs.iter().map(|j| j.dst.len() as u64).sum();
    let span = jobs
        .iter()
        .map(|j| sector_range(j.block.offset, j.block.stored_size as u64, align).1)
        .max()
        .unwrap_or(0) as usize;
    let codecs: Vec<Codec> = {
        let mut c: Vec<Codec> = jobs.iter().map(|j| j.block.codec).collect();
        c.sort_by_key(|c| c.name());
        c.dedup();
        c
    };
    let mut times = Vec::new();
    let mut cpu = 0.0;
    for pass in 0..=cfg.iters {
        let (c0, t0) = (cpu_seconds(), Instant::now());
        run_pass(&file, &mut jobs, cfg, align, span, pack)?;
        if pass > 0 {
            times.push(t0.elapsed());
            cpu += cpu_seconds() - c0;
        }
        tick();
    }
    let names: Vec<&str> = codecs.iter().map(|c| c.name()).collect();
    Ok(Baseline {
        what: format!(
            "hand-written: {} threads pread{}{} + {} into host memory",
            cfg.threads,
            if cfg.direct { " (O_DIRECT)" } else { "" },
            if cfg.verify { " + crc32c" } else { "" },
            names.join("/")
        ),
        gbps: bytes as f64 / median(&mut times) / 1e9,
        cpu_s_per_gb: cpu / (bytes as f64 * cfg.iters as f64 / 1e9).max(1e-12),
        bytes,
    })
}

/// Cuts the host allocations into one disjoint `&mut` slice per block, so
/// the threads can write their blocks without sharing anything.
fn split<'p, 'm>(
    memory: &'m mut [Vec<u8>],
    layout: &HostLayout,
    pack: &'p Pack,
) -> Result<Vec<Job<'p, 'm>>, String> {
    let mut rest: Vec<&'m mut [u8]> = memory.iter_mut().map(|v| v.as_mut_slice()).collect();
    let mut cursor = vec![0usize; rest.len()];
    let mut jobs = Vec::with_capacity(layout.pieces.len());
    for p in &layout.pieces {
        let block = pack.block(p.block).map_err(|e| format!("baseline: {e}"))?;
        let bad = |why: &str| format!("baseline: {} {why}", pack.describe_block(p.block));
        if block.size as usize != p.len {
            return Err(bad(&format!(
                "is {} bytes, its place holds {}",
                block.size, p.len
            )));
        }
        let (Some(r), Some(at)) = (rest.get_mut(p.slot), cursor.get_mut(p.slot)) else {
            return Err(bad("has no allocation"));
        };
        let whole = std::mem::take(r);
        let gap = p.offset.checked_sub(*at).ok_or_else(|| bad("overlaps"))?;
        if gap + p.len > whole.len() {
            return Err(bad("runs past its allocation"));
        }
        let (_, tail) = whole.split_at_mut(gap);
        let (dst, tail) = tail.split_at_mut(p.len);
        *r = tail;
        *at = p.offset + p.len;
        jobs.push(Job {
            block,
            id: p.block,
            dst,
        });
    }
    Ok(jobs)
}

/// One pass: the threads share the job list through a lock around its
/// batch iterator and stop at the first error.
fn run_pass(
    file: &File,
    jobs: &mut [Job<'_, '_>],
    cfg: &LoopConfig,
    align: u64,
    span: usize,
    pack: &Pack,
) -> Result<(), String> {
    let next = Mutex::new(jobs.chunks_mut(BATCH));
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..cfg.threads.max(1))
            .map(|_| s.spawn(|| worker(file, &next, cfg.verify, align, span, pack)))
            .collect();
        let mut first = Ok(());
        for w in workers {
            let r = w
                .join()
                .unwrap_or_else(|_| Err("baseline thread panicked".into()));
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
}

fn worker<'a, 'p, 'm>(
    file: &File,
    next: &Mutex<std::slice::ChunksMut<'a, Job<'p, 'm>>>,
    verify: bool,
    align: u64,
    span: usize,
    pack: &Pack,
) -> Result<(), String> {
    // O_DIRECT wants the buffer aligned too: over-allocate and start at the
    // first aligned byte.
    let mut raw = vec![0u8; span + align as usize];
    let start = raw.as_ptr().align_offset(align as usize);
    let buf = &mut raw[start..start + span];
    let mut zstd = None;
    loop {
        let batch = match next.lock() {
            Ok(mut it) => it.next(),
            Err(_) => return Err("baseline: another thread failed".into()),
        };
        let Some(batch) = batch else {
            return Ok(());
        };
        for job in batch.iter_mut() {
            let b = job.block;
            let stored_len = b.stored_size as usize;
            let (at, len, skip) = sector_range(b.offset, stored_len as u64, align);
            let need = skip as usize + stored_len;
            read_at_least(file, &mut buf[..len as usize], at, need).map_err(|e| {
                format!(
                    "baseline: pread {} at {at} ({len} bytes): {e}",
                    pack.path().display()
                )
            })?;
            let stored = &buf[skip as usize..need];
            let fail = |why: String| format!("baseline: {}: {why}", pack.describe_block(job.id));
            if verify && crc32c::crc32c(stored) != b.checksum {
                return Err(fail(format!("checksum mismatch at offset {}", b.offset)));
            }
            let got = match b.codec {
                Codec::Lz4 if b.sub_blocks > 0 => {
                    // A block in independent sub-blocks: each decoded into
                    // its range, as a hand-written loop over such a pack would.
                    let mut n = 0;
                    for s in pack.sub_blocks(job.id) {
                        let src = &stored[s.stored_offset as usize..][..s.stored_len as usize];
                        let dst = &mut job.dst[s.offset as usize..][..s.size as usize];
                        n += lz4_flex::block::decompress_into(src, dst)
                            .map_err(|e| fail(e.to_string()))?;
                    }
                    n
                }
                Codec::Lz4 => lz4_flex::block::decompress_into(stored, job.dst)
                    .map_err(|e| fail(e.to_string()))?,
                Codec::Zstd => {
                    if zstd.is_none() {
                        zstd =
                            Some(zstd::bulk::Decompressor::new().map_err(|e| fail(e.to_string()))?);
                    }
                    let z = zstd
                        .as_mut()
                        .ok_or_else(|| fail("no zstd context".into()))?;
                    z.decompress_to_buffer(stored, job.dst)
                        .map_err(|e| fail(e.to_string()))?
                }
                Codec::None => {
                    if stored.len() != job.dst.len() {
                        return Err(fail("stored size differs from size".into()));
                    }
                    job.dst.copy_from_slice(stored);
                    stored.len()
                }
            };
            if got != job.dst.len() {
                return Err(fail(format!("decoded {got} bytes of {}", job.dst.len())));
            }
        }
    }
}

/// `pread`s into `buf` from `offset` until at least `need` bytes are in
/// (an O_DIRECT read of the file's last sector comes back short).
fn read_at_least(file: &File, buf: &mut [u8], offset: u64, need: usize) -> std::io::Result<()> {
    let mut got = 0;
    while got < need {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("end of file after {got} of {need} bytes"),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The `queue.write_buffer` loop for stored blocks into a GPU: the same
/// stored bytes (read into memory first, untimed) written in 32 MiB pieces
/// into one buffer, a submit after each, then a wait for the GPU.
pub(super) fn write_buffer_loop(
    pack: &Pack,
    ctx: &gpustream::gpu::GpuContext,
    limit: u64,
    iters: u32,
    mut tick: impl FnMut(),
) -> Result<Baseline, String> {
    let bytes = std::fs::read(pack.path())
        .map_err(|e| format!("baseline: reading {}: {e}", pack.path().display()))?;
    let mut data = Vec::new();
    for b in pack.blocks() {
        if data.len() as u64 >= limit {
            break;
        }
        let r = b.offset as usize..b.offset as usize + b.stored_size as usize;
        if let Some(s) = bytes.get(r) {
            data.extend_from_slice(s);
        }
    }
    let piece = 32usize << 20;
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpustream bench write_buffer baseline"),
        size: piece as u64,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut times: Vec<Duration> = Vec::new();
    let mut cpu = 0.0;
    for pass in 0..=iters {
        let (c0, t0) = (cpu_seconds(), Instant::now());
        for c in data.chunks(piece) {
            let n = c.len() & !3;
            ctx.queue.write_buffer(&buf, 0, &c[..n]);
            ctx.queue.submit([]);
        }
        let _ = ctx.device.poll(wgpu::PollType::wait_indefinitely());
        if pass > 0 {
            times.push(t0.elapsed());
            cpu += cpu_seconds() - c0;
        }
        tick();
    }
    let n = data.len() as u64;
    Ok(Baseline {
        what: "queue.write_buffer loop".into(),
        gbps: n as f64 / median(&mut times) / 1e9,
        cpu_s_per_gb: cpu / (n as f64 * iters as f64 / 1e9).max(1e-12),
        bytes: n,
    })
}
