//! The CPU decode stage: a pool of threads that check and decode one part
//! each, straight into its final place: the request's host memory, or its
//! slot of mapped staging (for GPU destinations).

use crossbeam::channel::{Receiver, Sender, TryRecvError};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::job::{JobCtl, JobHot};
use super::pack_file::PackFile;
use super::part::{BlockData, Part, Place};
use super::reads::RunPart;
use crate::codec::MAX_BLOCK_SIZE;
use crate::completion::RequestError;
use crate::destinations::HostClaim;
use crate::staging::SlotWriter;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// A pool of decode threads fed through one channel, started as work
/// arrives: a runtime whose every part decodes on the GPU (or that has no
/// CPU work yet) holds no decode thread, so its threads stay within the
/// cores the reads need.
pub(crate) struct Pool {
    tx: Option<Sender<Task>>,
    rx: Receiver<Task>,
    threads: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// The most threads it starts.
    max: usize,
    /// Tasks sent and not yet taken by a thread.
    waiting: Arc<AtomicUsize>,
    before_wait: fn(),
}

impl Pool {
    /// A pool of up to `n` threads, none started yet. Each calls
    /// `before_wait` whenever it finds no task waiting, before it blocks,
    /// and once more before it ends: where a thread that holds results back
    /// (see `Pool::waiting`) hands them on.
    pub(crate) fn new(n: usize, before_wait: fn()) -> std::io::Result<Pool> {
        let (tx, rx): (Sender<Task>, Receiver<Task>) = crossbeam::channel::unbounded();
        Ok(Pool {
            tx: Some(tx),
            rx,
            threads: std::sync::Mutex::new(Vec::new()),
            max: n.max(1),
            waiting: Arc::new(AtomicUsize::new(0)),
            before_wait,
        })
    }

    fn start_thread(&self, i: usize) -> std::io::Result<std::thread::JoinHandle<()>> {
        let rx = self.rx.clone();
        let waiting = self.waiting.clone();
        let before_wait = self.before_wait;
        std::thread::Builder::new()
            .name(format!("gpustream-decode-{i}"))
            .spawn(move || {
                loop {
                    let task = match rx.try_recv() {
                        Ok(t) => t,
                        Err(TryRecvError::Disconnected) => break,
                        Err(TryRecvError::Empty) => {
                            before_wait();
                            match rx.recv() {
                                Ok(t) => t,
                                Err(_) => break,
                            }
                        }
                    };
                    waiting.fetch_sub(1, Ordering::Relaxed);
                    task();
                }
                before_wait();
            })
    }

    /// Queues `f`; starts one more thread while fewer than the most run.
    /// Where not even the first thread can be started, `f` runs here, so
    /// no task waits for a thread that never comes.
    pub(crate) fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        let Some(tx) = &self.tx else {
            return;
        };
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        if threads.len() < self.max {
            match self.start_thread(threads.len()) {
                Ok(t) => threads.push(t),
                Err(_) if threads.is_empty() => {
                    drop(threads);
                    f();
                    // What the task held back goes now, as a thread's
                    // would before it waits.
                    (self.before_wait)();
                    return;
                }
                // A thread short: the ones running take the task.
                Err(_) => {}
            }
        }
        drop(threads);
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let _ = tx.send(Box::new(f));
    }

    /// The count of tasks sent and not yet taken, for a task to read: a
    /// task that finds others still waiting may hold its results back and
    /// hand them on with a later task's, so the thread that takes them is
    /// woken once for several tasks.
    pub(crate) fn waiting(&self) -> Arc<AtomicUsize> {
        self.waiting.clone()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.tx.take();
        let threads = std::mem::take(self.threads.get_mut().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; MAX_BLOCK_SIZE]);
    /// Where a thread reads the runs it reads itself: kept, so the pages
    /// stay mapped and the bytes it reads land in memory it just used.
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How one part of a run read by its CPU thread ended.
pub(crate) struct RunPartDone {
    pub part: Part,
    /// The staging slot it wrote (chunk, offset, bytes).
    pub staged: Option<(usize, u64, u32)>,
    pub result: Result<(), RequestError>,
    pub nanos: u64,
    pub copied: u64,
    /// Where this part read its block: bytes read and nanoseconds reading
    /// (`None`: the previous part read the same block).
    pub read: Option<(u64, u64)>,
    /// On the run's last part.
    pub last: bool,
}

/// Reads a run of CPU parts of a file opened through the page cache on
/// this thread, then checks and decodes each part straight into its final
/// place, reporting each through `report` (the run's last part last).
/// `jobs[i]` is part `i`'s job (`None`: it ended meanwhile).
///
/// A block's stored bytes come from the file's mapping where it has one
/// (`IoFile::map_for_reads`) and no read of it has faulted: crc32c and the
/// decoder read them where the page cache holds them, with no copy.
/// Otherwise (and for the block during which a fault happened, decoded
/// again, see [`failed_short`]) each block is read on its
/// own with `pread`, just before it is checked and decoded, as a
/// hand-written loop reads: its bytes (at most 64 KiB) are still in this
/// core's cache when crc32c and the decoder go over them, where a whole
/// run read first (up to `max_read`, 1 MiB) would have left the cache by
/// the time its last blocks are decoded. A block that several parts of the
/// run share is read once.
pub(crate) fn read_and_decode(
    pf: &PackFile,
    parts: Vec<RunPart>,
    jobs: Vec<Option<Arc<JobHot>>>,
    mut report: impl FnMut(RunPartDone),
) {
    READ_BUF.with(|b| {
        let mut buf = b.borrow_mut();
        // The block in `buf`, and how its read went (bytes in, or why not).
        let mut held: Option<(u64, u32, Result<usize, crate::io::IoError>)> = None;
        let n = parts.len();
        let mut parts = parts.into_iter().zip(jobs).enumerate().peekable();
        while let Some((i, (RunPart { part, out }, job))) = parts.next() {
            let t = Instant::now();
            let (offset, stored) = (part.block.offset, part.block.stored);
            // The next block's bytes start on their way into this core's
            // cache while this one is checked and decoded (see `prefetch`).
            if let Some((_, (RunPart { part: next, .. }, Some(_)))) = parts.peek() {
                let b = &next.block;
                if b.offset != offset {
                    if let Some(bytes) = pf.file.mapped(b.offset, b.stored as usize) {
                        prefetch(bytes);
                    }
                }
            }
            let (slot, mut writer) = match out {
                Some((s, w)) => (Some(s), Some(w)),
                None => (None, None),
            };
            let mut read = None;
            // Decoded from the mapping, unless a read of it has faulted,
            // before or during this block (`failed_short`): then again
            // with `pread`, below.
            let mut from_mapping = None;
            let mapped = job
                .as_ref()
                .filter(|_| !pf.file.mapping_was_cut())
                .and_then(|j| Some((j, pf.file.mapped(offset, stored as usize)?)));
            if let Some((j, bytes)) = mapped {
                read = Some((stored as u64, t.elapsed().as_nanos() as u64));
                let (r, copied) =
                    decode_part(&part, bytes, &j.ctl, j.claim.as_ref(), writer.as_mut());
                if !pf.file.mapping_was_cut() {
                    from_mapping = Some((failed_short(pf, &part, r), copied));
                }
            }
            if from_mapping.is_none()
                && job.is_some()
                && !matches!(&held, Some((o, l, _)) if *o == offset && *l == stored)
            {
                let len = stored as usize;
                if buf.len() < len {
                    buf.resize(len.max(MAX_BLOCK_SIZE), 0);
                }
                let got = pf.file.read_cached(offset, &mut buf[..len]);
                read = Some((
                    *got.as_ref().unwrap_or(&0) as u64,
                    t.elapsed().as_nanos() as u64,
                ));
                held = Some((offset, stored, got));
            }
            let (result, copied) = match (from_mapping, &held, &job) {
                (_, _, None) => (Err(RequestError::Cancelled), 0),
                (Some(done), _, Some(_)) => done,
                (None, None, _) => (Err(RequestError::Cancelled), 0),
                (None, Some((_, _, Err(e))), _) => (
                    Err(RequestError::Io(Arc::new(
                        e.for_range(offset, stored as usize),
                    ))),
                    0,
                ),
                (None, Some((_, _, Ok(got))), _) if *got < stored as usize => (
                    Err(RequestError::ShortRead {
                        file: pf.path().to_path_buf(),
                        block: part.block.describe(),
                        offset,
                        needed: stored as u64,
                        got: *got as u64,
                    }),
                    0,
                ),
                (None, Some(_), Some(j)) => decode_part(
                    &part,
                    &buf[..stored as usize],
                    &j.ctl,
                    j.claim.as_ref(),
                    writer.as_mut(),
                ),
            };
            report(RunPartDone {
                staged: slot.map(|s| (s.chunk, s.offset, part.cpu_staged_len() as u32)),
                part,
                result,
                nanos: t.elapsed().as_nanos() as u64,
                copied,
                read,
                last: i + 1 == n,
            });
        }
    });
}

/// Asks the CPU to bring `bytes` into its L2 cache, without waiting for
/// them.
///
/// A block read from the file's mapping comes from the page cache, cold:
/// crc32c is the first to touch it, and the hardware prefetcher stops at
/// every 4 KiB page, so crc32c stalled on memory at each page of a block
/// (its share of the decode threads' time was 2.6x the hand-written loop's,
/// whose `pread` copy pays that instead). Prefetched while the block before
/// it is decoded, it is in cache when crc32c reads it. A prefetch never
/// faults, so a page past a file cut shorter is harmless here.
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch is a hint; it reads nothing architecturally
        // and cannot fault, and `line` points into a live slice anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// The result of a part decoded from the file's mapping while no read of
/// the mapping has faulted, or a short read. A fault (past a cut: the file
/// made shorter under the mapping; or a page the disk failed to deliver)
/// gets a page of zeros and a mark from the SIGBUS handler
/// (`io::IoFile::mapping_was_cut`), and the caller then decodes the block
/// again from `pread`, which tells the two apart. Inside the page holding
/// a cut the kernel leaves zeros with no fault and no mark: a block that
/// failed is checked against the file's length now, and one that no
/// longer fits is reported as `pread` would have.
fn failed_short(
    pf: &PackFile,
    part: &Part,
    result: Result<(), RequestError>,
) -> Result<(), RequestError> {
    if result.is_ok() {
        return result;
    }
    let (offset, stored) = (part.block.offset, part.block.stored as u64);
    match pf.file.current_len() {
        Some(len) if len < offset + stored => Err(RequestError::ShortRead {
            file: pf.path().to_path_buf(),
            block: part.block.describe(),
            offset,
            needed: stored,
            got: len.saturating_sub(offset),
        }),
        _ => result,
    }
}

/// Checks and decodes one block into `out` (its declared size).
fn decode_block(part: &Part, stored: &[u8], out: &mut [u8]) -> Result<(), RequestError> {
    let stored =
        stored
            .get(..part.block.stored as usize)
            .ok_or_else(|| RequestError::ShortRead {
                file: part.block.file_path(),
                block: part.block.describe(),
                offset: part.block.offset,
                needed: part.block.stored as u64,
                got: stored.len() as u64,
            })?;
    match &part.block.data {
        BlockData::File(pf, id) => pf
            .pack
            .check_block(*id, stored, out)
            .map_err(RequestError::Pack),
        // Stored bytes in memory (an assembled packed-mips stream can exceed
        // one block) are copied as they are.
        BlockData::Memory(..) if part.block.codec == crate::codec::Codec::None => {
            if stored.len() != out.len() {
                return Err(RequestError::Codec(crate::codec::CodecError::WrongLength {
                    codec: part.block.codec,
                    expected: out.len(),
                    got: stored.len(),
                }));
            }
            out.copy_from_slice(stored);
            Ok(())
        }
        BlockData::Memory(..) => part
            .block
            .codec
            .decompress_into(stored, out)
            .map_err(RequestError::Codec),
    }
}

/// Decodes one part and writes its slice where it goes. Returns the result
/// and the bytes the host copied on the way (for the copies-per-byte stat).
///
/// GPU-bound parts write their bytes tightly packed into their staging slot
/// (`staging`); the GPU's stored-copy pass lays rows out for the
/// destination, so no thread here re-pitches rows.
pub(crate) fn decode_part(
    part: &Part,
    stored: &[u8],
    ctl: &JobCtl,
    claim: Option<&HostClaim>,
    staging: Option<&mut SlotWriter>,
) -> (Result<(), RequestError>, u64) {
    let size = part.block.size as usize;
    let take = part.take.start as usize..part.take.end as usize;
    let whole = take.start == 0 && take.end == size;
    let stored_copy = |n: usize| {
        if part.block.codec == crate::codec::Codec::None {
            n as u64
        } else {
            0
        }
    };
    match (&part.place, claim) {
        (Place::Memory { offset }, Some(claim)) => {
            // Writers share the gate; `cancel` takes it exclusively, so once
            // it returns no write is under way and none starts.
            let Some(_gate) = ctl.write_gate() else {
                return (Err(RequestError::Cancelled), 0);
            };
            // SAFETY: this part alone writes its range of the claim, and the
            // gate serialises against cancel.
            let Some(dst) = (unsafe { claim.part_mut(*offset..*offset + take.len()) }) else {
                return (
                    Err(RequestError::Internal(
                        "a part's range leaves its host-memory claim".into(),
                    )),
                    0,
                );
            };
            if whole {
                // Decoded straight into the destination; a stored block is
                // one memcpy from the read buffer.
                return (decode_block(part, stored, dst), stored_copy(dst.len()));
            }
            with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                Ok(()) => {
                    dst.copy_from_slice(&scratch[take.clone()]);
                    (Ok(()), take.len() as u64)
                }
                Err(e) => (Err(e), 0),
            })
        }
        (Place::Buffer { .. } | Place::Texture { .. } | Place::Pieces(..), _) => {
            let Some(slot) = staging else {
                return (Err(RequestError::NoGpu), 0);
            };
            if slot.len() < take.len() {
                return (
                    Err(RequestError::Internal(
                        "a staging slot is smaller than its part".into(),
                    )),
                    0,
                );
            }
            let pitched_rows = match &part.place {
                Place::Texture { layout, .. } => {
                    layout.row_pitch != layout.row_bytes && layout.rows > 1
                }
                Place::Pieces(..) => true,
                _ => false,
            };
            if part.pitched && pitched_rows {
                // Rows at the destination's pitch, for plain copies: each
                // region (each piece) 256 bytes after the one before.
                return with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                    Ok(()) => match write_pitched(part, scratch, slot) {
                        Ok(()) => (Ok(()), take.len() as u64),
                        Err(e) => (Err(e), 0),
                    },
                    Err(e) => (Err(e), 0),
                });
            }
            // Buffer copies move whole words: the slot's tail is zeroed.
            slot.zero_from(take.len());
            // A decoder reads back what it wrote (every LZ77 match), and a
            // GPU's staging slot may be write-combined memory, which the
            // CPU reads uncached: on an H100, GDeflate decoded into staging
            // slots took 379 CPU s/GB, 48 times the hand-written loop
            // running the same decoder into ordinary memory
            // (docs/results.md). There the slot hands out no readable view
            // (`SlotWriter::host_slice`): a block is decoded into this
            // thread's scratch and copied out once, which writes the slot
            // sequentially and never reads it. Where staging is cached host
            // memory, a whole block goes straight into the slot.
            if whole {
                if let Some(body) = slot.host_slice() {
                    let body = &mut body[..take.len()];
                    return (decode_block(part, stored, body), stored_copy(body.len()));
                }
            }
            with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                Ok(()) => {
                    slot.write(0, &scratch[take.clone()]);
                    (Ok(()), take.len() as u64)
                }
                Err(e) => (Err(e), 0),
            })
        }
        (Place::Memory { .. }, None) => (
            Err(RequestError::Internal(
                "memory destination without a claim".into(),
            )),
            0,
        ),
    }
}

/// Writes a decoded block's regions into `slot` at the destination's row
/// pitch, each region 256 bytes after the one before.
fn write_pitched(part: &Part, decoded: &[u8], slot: &mut SlotWriter) -> Result<(), RequestError> {
    let mut at = 0usize;
    for (range, place) in part.outputs() {
        let Place::Texture { layout, .. } = place else {
            continue;
        };
        let (rb, rp) = (layout.row_bytes as usize, layout.row_pitch as usize);
        let Some(src) = decoded.get(range.start as usize..range.end as usize) else {
            return Err(RequestError::Internal(
                "a piece leaves its decoded block".into(),
            ));
        };
        for (r, row) in src.chunks(rb.max(1)).enumerate() {
            if !slot.write(at + r * rp, row) {
                return Err(RequestError::Internal(
                    "a staging slot is smaller than its part".into(),
                ));
            }
        }
        at += (layout.padded_size() as usize).next_multiple_of(256);
    }
    Ok(())
}

fn with_scratch<R>(size: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < size {
            s.resize(size, 0);
        }
        f(&mut s[..size])
    })
}
