//! The read stage: coalescing file parts into runs (`io::plan_reads`),
//! reserving where each run lands, issuing the reads, and sorting each
//! completed run's parts into what happens next.
//!
//! A run lands in one of two places:
//! - **staging**, for parts the GPU decodes or copies (`Class::Raw`,
//!   `Class::GpuDecode`): one slot holds the whole run, and the parts are
//!   staged for the GPU batch where they lie;
//! - **a bounce buffer** of host memory, for parts a CPU thread decodes.
//!   CPU parts bound for the GPU reserve their output slot in staging when
//!   the run is issued, so a read never waits for staging after it lands.

use super::activity::{Activity, Kind};
use super::id_map::IdMap;
use std::sync::Arc;
use std::time::Instant;

use crate::io::{self, AlignedBuf, ReadCompletion, ReadOp};
use crate::staging::{Slot, SlotWriter, StagingRing};

use super::job::JobOwner;
use super::pack_file::PackFile;
use super::part::{BlockData, Class, Part, ALIGN_SLACK};
use crate::completion::RequestError;

/// Staging slots for O_DIRECT runs start on this boundary, whatever the
/// file's own alignment.
const DIRECT_ALIGN: u64 = 4096;

/// The smaller bounce-buffer class: a run of one or two blocks rounded out
/// to the direct-I/O alignment.
const SMALL_BOUNCE: usize = 136 << 10;

/// A part of a run, and the staging slot its CPU decode writes (if any).
pub(crate) struct RunPart {
    pub part: Part,
    pub out: Option<(Slot, SlotWriter)>,
}

enum Target {
    Bounce(Arc<AlignedBuf>),
    Staging(Slot),
}

struct Run {
    parts: Vec<RunPart>,
    file_offset: u64,
    target: Target,
    issued: Instant,
    queue: Arc<dyn JobOwner>,
}

/// What became of a completed run's parts.
pub(crate) enum Landed {
    /// The part's stored bytes are at `at` in the staging chunk.
    Staged { part: Part, chunk: usize, at: u64 },
    /// The part's stored bytes are at `at` in `buf`, for a CPU thread.
    Bounce {
        part: RunPart,
        buf: Arc<AlignedBuf>,
        at: usize,
        run: u64,
    },
    /// The read failed for this part.
    Failed { part: RunPart, error: RequestError },
}

/// The read stage's state (see the module docs).
pub(crate) struct Reads {
    /// Counts the reads in flight, for the runtime's overlap times.
    activity: Arc<Activity>,
    runs: IdMap<u64, Run>,
    next_run: u64,
    /// Bounce buffers in flight per run id: parts left, bytes, the buffer.
    bounce_runs: IdMap<u64, (usize, u64, Arc<AlignedBuf>)>,
    /// Bounce buffers kept for reuse, one pool per size class
    /// ([`SMALL_BOUNCE`] and `bounce_cap`): allocating a fresh zeroed
    /// megabyte per read cost page faults and page clearing worth a fifth of
    /// the CPU path's time, and a run of one small block (a packed-mips
    /// tail) taking a whole megabyte emptied the pool on the GPU path.
    bounce_pool: [Vec<AlignedBuf>; 2],
    bounce_cap: usize,
    bounce_bytes: u64,
    bounce_limit: u64,
    /// Runs CPU threads read for themselves, in flight, and how many may
    /// be: a bound, so that parts wait here in priority order rather than
    /// in the thread pool's queue.
    cached_runs: usize,
    cached_limit: usize,
}

/// Reserves the staging output of every part of a run that a CPU thread
/// decodes for the GPU; gives the parts back if staging is short (what
/// this run reserved is returned: its reservations are the latest).
fn reserve_cpu_outputs(
    parts: Vec<Part>,
    mut ring: Option<&mut StagingRing>,
) -> Result<Vec<RunPart>, Vec<Part>> {
    let mut run_parts: Vec<RunPart> = Vec::with_capacity(parts.len());
    for part in &parts {
        let need = part.cpu_staged_len();
        let out = if need > 0 {
            let ring = ring.as_deref_mut().expect("GPU parts imply staging");
            let weight = part.gpu_out(ring.region_weight());
            match ring.alloc(need, crate::staging::STAGING_ALIGN, weight) {
                Some(s) => Some(s),
                None => {
                    for rp in run_parts.into_iter().rev() {
                        if let Some((slot, _)) = rp.out {
                            let weight = rp.part.gpu_out(ring.region_weight());
                            ring.unreserve(slot, weight);
                        }
                    }
                    return Err(parts);
                }
            }
        } else {
            None
        };
        run_parts.push(RunPart {
            part: part.clone(),
            out,
        });
    }
    Ok(run_parts)
}

impl Reads {
    /// `cpu_threads` bounds the runs CPU threads read for themselves.
    pub fn new(
        max_read: usize,
        bounce_limit: u64,
        cpu_threads: usize,
        activity: Arc<Activity>,
    ) -> Reads {
        Reads {
            activity,
            runs: IdMap::default(),
            next_run: 1,
            bounce_runs: IdMap::default(),
            bounce_pool: [Vec::new(), Vec::new()],
            bounce_cap: (max_read + (16 << 10)).max(SMALL_BOUNCE),
            bounce_bytes: 0,
            bounce_limit,
            cached_runs: 0,
            cached_limit: 8 * cpu_threads.max(1),
        }
    }

    /// Coalesces file parts (all of one file and one family) into runs of
    /// at most `max_read` bytes with at most `max_over` bytes read over.
    pub fn coalesce(parts: Vec<Part>, max_read: u64, max_over: u64) -> Vec<Vec<Part>> {
        let ranges: Vec<(u64, usize)> = parts
            .iter()
            .map(|p| (p.block.offset, p.block.stored as usize))
            .collect();
        let limit = max_read.saturating_sub(ALIGN_SLACK).max(1) as usize;
        let plan = io::plan_reads(&ranges, limit, max_over as usize);
        let mut slots: Vec<Option<Part>> = parts.into_iter().map(Some).collect();
        plan.into_iter()
            .map(|run| {
                // Sized up front: `filter_map` gives no size hint, and
                // growing each run's list was a sixtieth of the submission
                // thread's own work (`perf`).
                let mut parts = Vec::with_capacity(run.parts.len());
                parts.extend(run.parts.iter().filter_map(|p| slots[p.index].take()));
                parts
            })
            .collect()
    }

    /// Reserves where a run lands and builds its read, or gives the parts
    /// back when memory is short.
    pub fn issue(
        &mut self,
        parts: Vec<Part>,
        queue: Arc<dyn JobOwner>,
        mut ring: Option<&mut StagingRing>,
    ) -> Result<ReadOp, Vec<Part>> {
        let BlockData::File(pf, _) = &parts[0].block.data else {
            unreachable!("file parts only")
        };
        let pf: Arc<PackFile> = pf.clone();
        let start = parts.iter().map(|p| p.block.offset).min().unwrap_or(0);
        let end = parts
            .iter()
            .map(|p| p.block.offset + p.block.stored as u64)
            .max()
            .unwrap_or(start);
        let align = pf.file.alignment();
        let (a_off, a_len, _) = io::align_range(start, (end - start) as usize, align);
        let to_staging = matches!(parts[0].class, Class::Raw | Class::GpuDecode);
        let (target, dest, run_parts) = if to_staging {
            let ring = ring.as_deref_mut().expect("GPU parts imply staging");
            let unit = ring.region_weight();
            let weight = parts.iter().map(|p| p.gpu_out(unit)).sum();
            let Some((slot, mut w)) =
                ring.alloc(a_len as u64, (align as u64).max(DIRECT_ALIGN), weight)
            else {
                return Err(parts);
            };
            let dest = w.as_mut_ptr();
            let parts = parts
                .into_iter()
                .map(|part| RunPart { part, out: None })
                .collect();
            (Target::Staging(slot), dest, parts)
        } else {
            // The limit counts the buffers' capacity (a pooled buffer serves
            // any run of its class), so the pools can hold every buffer in
            // flight and no pass allocates fresh, zeroed ones.
            let (class, cap) = self.bounce_class(a_len);
            if self.bounce_bytes > 0 && self.bounce_bytes + cap > self.bounce_limit {
                return Err(parts);
            }
            let run_parts = reserve_cpu_outputs(parts, ring)?;
            let mut buf = match class {
                // 4 KiB alignment suits every file's direct-read rule.
                Some(k) => self.bounce_pool[k]
                    .pop()
                    .unwrap_or_else(|| AlignedBuf::with_alignment(cap as usize, 4096)),
                None => AlignedBuf::with_alignment(a_len, align),
            };
            // The heap block does not move when the buffer moves into the Arc.
            let dest = buf.as_mut_ptr();
            let buf = Arc::new(buf);
            self.bounce_bytes += cap;
            self.bounce_runs
                .insert(self.next_run, (run_parts.len(), cap, buf.clone()));
            (Target::Bounce(buf), dest, run_parts)
        };
        let id = self.next_run;
        self.next_run += 1;
        self.activity.start(Kind::Read, 1);
        let priority = queue.priority();
        self.runs.insert(
            id,
            Run {
                parts: run_parts,
                file_offset: a_off,
                target,
                issued: Instant::now(),
                queue,
            },
        );
        Ok(ReadOp {
            file: pf.file.clone(),
            offset: a_off,
            len: a_len,
            dest,
            priority,
            user_data: id,
        })
    }

    /// Takes a run of CPU parts of a file read through the page cache,
    /// which the CPU thread decoding it reads itself (`cpu_decode::
    /// read_and_decode`): their staging outputs reserved, or the parts back
    /// when staging is short or enough such runs are in flight already.
    pub fn begin_cached(
        &mut self,
        parts: Vec<Part>,
        ring: Option<&mut StagingRing>,
    ) -> Result<Vec<RunPart>, Vec<Part>> {
        if self.cached_runs >= self.cached_limit {
            return Err(parts);
        }
        let run = reserve_cpu_outputs(parts, ring)?;
        self.cached_runs += 1;
        self.activity.start(Kind::Read, 1);
        Ok(run)
    }

    /// How many more runs [`Self::begin_cached`] would take now.
    pub fn cached_free(&self) -> usize {
        self.cached_limit.saturating_sub(self.cached_runs)
    }

    /// A run taken by [`Self::begin_cached`] is done.
    pub fn end_cached(&mut self) {
        self.cached_runs = self.cached_runs.saturating_sub(1);
        self.activity.end(Kind::Read);
    }

    /// A read completed: sorts its parts into what happens next. Returns
    /// the staging chunk whose slot the run held, if any (the caller reports
    /// it written once its parts are staged).
    pub fn complete(&mut self, c: ReadCompletion, out: &mut Vec<Landed>) -> Option<usize> {
        let run = self.runs.remove(&c.user_data)?;
        self.activity.end(Kind::Read);
        let got = match &c.result {
            Ok(n) => *n as u64,
            Err(_) => 0,
        };
        {
            let mut st = run.queue.stats().lock().unwrap_or_else(|e| e.into_inner());
            st.reads += 1;
            st.read_ns += run.issued.elapsed().as_nanos() as u64;
            st.bytes_read += got;
        }
        let err = c.result.err().map(Arc::new);
        let chunk = match &run.target {
            Target::Staging(slot) => Some(slot.chunk),
            Target::Bounce(_) => None,
        };
        for rp in run.parts {
            let part = &rp.part;
            let rel = part.block.offset - run.file_offset;
            let need = rel + part.block.stored as u64;
            let failure = if let Some(e) = &err {
                Some(RequestError::Io(Arc::new(
                    e.for_range(part.block.offset, part.block.stored as usize),
                )))
            } else if got < need {
                let BlockData::File(pf, _) = &part.block.data else {
                    unreachable!("file parts only")
                };
                Some(RequestError::ShortRead {
                    file: pf.path().to_path_buf(),
                    block: part.block.describe(),
                    offset: part.block.offset,
                    needed: need,
                    got,
                })
            } else {
                None
            };
            if let Some(error) = failure {
                if matches!(run.target, Target::Bounce(_)) {
                    self.bounce_part_done(c.user_data);
                }
                out.push(Landed::Failed { part: rp, error });
                continue;
            }
            match &run.target {
                Target::Bounce(buf) => out.push(Landed::Bounce {
                    part: rp,
                    buf: buf.clone(),
                    at: rel as usize,
                    run: c.user_data,
                }),
                Target::Staging(slot) => out.push(Landed::Staged {
                    part: rp.part,
                    chunk: slot.chunk,
                    at: slot.offset + rel,
                }),
            }
        }
        chunk
    }

    /// A part of a bounce run is done with the buffer.
    pub fn bounce_part_done(&mut self, run: u64) {
        let Some(entry) = self.bounce_runs.get_mut(&run) else {
            return;
        };
        entry.0 -= 1;
        if entry.0 > 0 {
            return;
        }
        let (_, bytes, buf) = self.bounce_runs.remove(&run).expect("entry exists");
        self.bounce_bytes -= bytes;
        // Workers drop their handle before reporting, so this is usually the
        // last one; a buffer still shared is simply freed.
        if let Ok(buf) = Arc::try_unwrap(buf) {
            if let (Some(k), cap) = self.bounce_class(buf.len()) {
                let keep = (self.bounce_limit / cap).max(1) as usize;
                if buf.len() as u64 == cap && self.bounce_pool[k].len() < keep {
                    self.bounce_pool[k].push(buf);
                }
            }
        }
    }

    /// The pool a bounce buffer for `len` bytes comes from, and the
    /// capacity counted against the limit (a pooled buffer's whole size).
    fn bounce_class(&self, len: usize) -> (Option<usize>, u64) {
        if len <= SMALL_BOUNCE {
            (Some(0), SMALL_BOUNCE as u64)
        } else if len <= self.bounce_cap {
            (Some(1), self.bounce_cap as u64)
        } else {
            (None, len as u64)
        }
    }

    /// Forgets every run in flight without freeing its memory (after a
    /// panic, reads may still be landing in it).
    pub fn leak(&mut self) {
        std::mem::forget(std::mem::take(&mut self.runs));
        std::mem::forget(std::mem::take(&mut self.bounce_runs));
        self.activity.clear(Kind::Read);
    }
}
