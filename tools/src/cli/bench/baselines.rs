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

/// A baseline's figures over its timed passes.
#[derive(Clone, Debug)]
pub(super) struct Baseline {
    /// What it is, in words.
    pub what: String,
    /// Median GB/s of uncompressed bytes produced.
    pub gbps: f64,
    /// CPU seconds of its own work per GB over the timed passes.
    pub cpu_s_per_gb: f64,
    /// Uncompressed bytes one pass produces.
    pub bytes: u64,
}

/// One pass of a baseline: its wall time, and the CPU seconds its own work
/// took.
#[derive(Clone, Copy, Debug)]
pub(super) struct PassTime {
    pub wall: Duration,
    pub cpu: f64,
}

/// A baseline that bench runs one pass at a time, so that its passes can
/// alternate with the runtime's and both meet the same machine: on a
/// shared VM whose host steals CPU time in spells, a baseline timed whole
/// after the runtime measured another machine.
pub(super) trait BaselineRun {
    /// One pass (the first one is the warm-up).
    fn pass(&mut self) -> Result<PassTime, String>;
    /// What it is, in words.
    fn what(&self) -> String;
    /// Uncompressed bytes one pass produces.
    fn bytes(&self) -> u64;
    /// Whether its passes alternate with the runtime's (false: they run
    /// after the runtime is gone).
    fn alternates(&self) -> bool;
}

/// The figures of `passes`, timed passes of `run` (median wall time).
pub(super) fn summarize(run: &dyn BaselineRun, passes: &[PassTime]) -> Baseline {
    let bytes = run.bytes();
    let mut times: Vec<Duration> = passes.iter().map(|p| p.wall).collect();
    let cpu: f64 = passes.iter().map(|p| p.cpu).sum();
    Baseline {
        what: run.what(),
        gbps: bytes as f64 / median(&mut times) / 1e9,
        cpu_s_per_gb: cpu / (bytes as f64 * passes.len() as f64 / 1e9).max(1e-12),
        bytes,
    }
}

/// How the hand-written loop runs.
pub(super) struct LoopConfig {
    /// Threads (the runtime's `cpu_threads`).
    pub threads: usize,
    /// Open the pack with O_DIRECT (as the runtime did) instead of buffered.
    pub direct: bool,
    /// Check each block's crc32c (off with `--no-verify`).
    pub verify: bool,
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

/// The hand-written loop over a layout's blocks, into host memory it owns
/// (allocated once, as a user's loop would).
pub(super) struct HandLoop<'p> {
    pack: &'p Pack,
    layout: HostLayout,
    cfg: LoopConfig,
    file: File,
    memory: Vec<Vec<u8>>,
    align: u64,
    span: usize,
    bytes: u64,
    codecs: String,
}

impl<'p> HandLoop<'p> {
    /// Opens the pack's file as `cfg` says and allocates the layout's memory.
    pub(super) fn new(pack: &'p Pack, layout: HostLayout, cfg: LoopConfig) -> Result<Self, String> {
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
        let jobs = split(&mut memory, &layout, pack)?;
        let bytes: u64 = jobs.iter().map(|j| j.dst.len() as u64).sum();
        let span = jobs
            .iter()
            .map(|j| sector_range(j.block.offset, j.block.stored_size as u64, align).1)
            .max()
            .unwrap_or(0) as usize;
        let mut codecs: Vec<&str> = jobs.iter().map(|j| j.block.codec.name()).collect();
        codecs.sort();
        codecs.dedup();
        let codecs = codecs.join("/");
        drop(jobs);
        Ok(HandLoop {
            pack,
            layout,
            cfg,
            file,
            memory,
            align,
            span,
            bytes,
            codecs,
        })
    }
}

impl BaselineRun for HandLoop<'_> {
    fn pass(&mut self) -> Result<PassTime, String> {
        let mut jobs = split(&mut self.memory, &self.layout, self.pack)?;
        let t0 = Instant::now();
        let cpu = run_pass(
            &self.file, &mut jobs, &self.cfg, self.align, self.span, self.pack,
        )?;
        Ok(PassTime {
            wall: t0.elapsed(),
            cpu,
        })
    }

    fn what(&self) -> String {
        format!(
            "hand-written: {} threads pread{}{} + {} into host memory",
            self.cfg.threads,
            if self.cfg.direct { " (O_DIRECT)" } else { "" },
            if self.cfg.verify { " + crc32c" } else { "" },
            self.codecs
        )
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn alternates(&self) -> bool {
        true
    }
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
/// batch iterator and stop at the first error. Returns the CPU seconds the
/// threads ran, spawn to end.
fn run_pass(
    file: &File,
    jobs: &mut [Job<'_, '_>],
    cfg: &LoopConfig,
    align: u64,
    span: usize,
    pack: &Pack,
) -> Result<f64, String> {
    let next = Mutex::new(jobs.chunks_mut(BATCH));
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..cfg.threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let r = worker(file, &next, cfg.verify, align, span, pack);
                    r.map(|()| thread_cpu_seconds())
                })
            })
            .collect();
        let mut first = Ok(0.0);
        for w in workers {
            let r = w
                .join()
                .unwrap_or_else(|_| Err("baseline thread panicked".into()));
            first = match (first, r) {
                (Ok(a), Ok(b)) => Ok(a + b),
                (Err(e), _) | (Ok(_), Err(e)) => Err(e),
            };
        }
        first
    })
}

/// User plus system CPU seconds the calling thread has run.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: `u` is a plain C struct that getrusage fills in; all-zero is
    // a valid value for it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is valid and writable for the call; RUSAGE_THREAD cannot
    // fail on Linux.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
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
    // Conditioned blocks decode here first, then the transform is undone
    // into the destination, as `Pack::check_block` does.
    let mut conditioned = vec![0u8; gpustream::MAX_BLOCK_SIZE];
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
            let plain = b.transform == gpustream::pack::BlockTransform::None;
            let dst: &mut [u8] = if plain {
                &mut *job.dst
            } else {
                &mut conditioned[..job.dst.len()]
            };
            let got = match b.codec {
                Codec::Lz4 if b.sub_blocks > 0 => {
                    // A block in independent sub-blocks: each decoded into
                    // its range, as a hand-written loop over such a pack would.
                    let mut n = 0;
                    for s in pack.sub_blocks(job.id) {
                        let src = &stored[s.stored_offset as usize..][..s.stored_len as usize];
                        let dst = &mut dst[s.offset as usize..][..s.size as usize];
                        n += lz4_flex::block::decompress_into(src, dst)
                            .map_err(|e| fail(e.to_string()))?;
                    }
                    n
                }
                Codec::Lz4 => lz4_flex::block::decompress_into(stored, dst)
                    .map_err(|e| fail(e.to_string()))?,
                Codec::Zstd => {
                    if zstd.is_none() {
                        zstd =
                            Some(zstd::bulk::Decompressor::new().map_err(|e| fail(e.to_string()))?);
                    }
                    let z = zstd
                        .as_mut()
                        .ok_or_else(|| fail("no zstd context".into()))?;
                    z.decompress_to_buffer(stored, dst)
                        .map_err(|e| fail(e.to_string()))?
                }
                // The library's own GDeflate decoder: the same one the
                // runtime's CPU threads run (there is no other Rust one).
                Codec::GDeflate => {
                    Codec::GDeflate
                        .decompress_into(stored, dst)
                        .map_err(|e| fail(e.to_string()))?;
                    dst.len()
                }
                Codec::None => {
                    if stored.len() != dst.len() {
                        return Err(fail("stored size differs from size".into()));
                    }
                    dst.copy_from_slice(stored);
                    stored.len()
                }
            };
            if got != job.dst.len() {
                return Err(fail(format!("decoded {got} bytes of {}", job.dst.len())));
            }
            if !plain {
                b.transform.undo(&conditioned[..got], job.dst);
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
pub(super) struct WriteBufferLoop<'c> {
    ctx: &'c gpustream_tools::gpu::GpuContext,
    data: Vec<u8>,
    /// Made on the first pass, after the runtime is gone (see `alternates`).
    buf: Option<wgpu::Buffer>,
}

/// The pieces the `write_buffer` loop writes at a time.
const PIECE: usize = 32 << 20;

impl<'c> WriteBufferLoop<'c> {
    /// Reads the stored bytes of `pack`'s blocks, up to `limit`.
    pub(super) fn new(
        pack: &Pack,
        ctx: &'c gpustream_tools::gpu::GpuContext,
        limit: u64,
    ) -> Result<Self, String> {
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
        Ok(WriteBufferLoop {
            ctx,
            data,
            buf: None,
        })
    }
}

impl BaselineRun for WriteBufferLoop<'_> {
    fn pass(&mut self) -> Result<PassTime, String> {
        let device = &self.ctx.device;
        let buf = self.buf.get_or_insert_with(|| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gpustream bench write_buffer baseline"),
                size: PIECE as u64,
                usage: wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let (c0, t0) = (cpu_seconds(), Instant::now());
        for c in self.data.chunks(PIECE) {
            let n = c.len() & !3;
            self.ctx.queue.write_buffer(buf, 0, &c[..n]);
            self.ctx.queue.submit([]);
        }
        let _ = self.ctx.device.poll(wgpu::PollType::wait_indefinitely());
        Ok(PassTime {
            wall: t0.elapsed(),
            // Its work runs on this thread and wgpu's: the process's time.
            cpu: cpu_seconds() - c0,
        })
    }

    fn what(&self) -> String {
        "queue.write_buffer loop".into()
    }

    fn bytes(&self) -> u64 {
        self.data.len() as u64
    }

    /// It records on the runtime's device: with the runtime alive, its
    /// passes ran 3x slower on the noop adapter (shared device state), so
    /// it runs after the runtime is dropped.
    fn alternates(&self) -> bool {
        false
    }
}
