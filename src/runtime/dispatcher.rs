//! The dispatcher: one thread per runtime that owns every request in flight
//! and moves its parts through the stages.
//!
//! ```text
//! batch (from Queue::submit)
//!   -> parts waiting, by priority
//!   -> reads: coalesced runs into bounce buffers (CPU path) or straight into
//!      a staging chunk (GPU paths)
//!   -> CPU threads: checksum + decode into host memory, into a staging chunk,
//!      or into a packed-mips assembly
//!   -> a sealed chunk whose parts are all staged: unmapped, GPU copies and
//!      LZ4 decode dispatches recorded on the application's queue, submitted
//!   -> submission done: decode status read back, parts finished, chunk mapped
//!      again for the next fill
//!   -> request finished -> the queue's tracker fires fences and status entries
//! ```
//!
//! All bookkeeping lives on this thread, so none of it needs a lock; CPU
//! threads and wgpu callbacks talk to it through channels.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam::channel::{Receiver, Sender};

use crate::completion::{Outcome, RequestFailure};
use crate::decode::gpu::{Lz4BlockDesc, Lz4DecodePipeline};
use crate::destinations::HostClaim;
use crate::io::{self, ReadCompletion, ReadOp};
use crate::staging::StagingRing;

use super::plan::{Assembly, BlockData, BlockSrc, Class, Part, Place};
use super::queue::{JobCtl, QueueShared};
use super::request::Destination;
use super::{workers, RequestError, RuntimeShared};

/// A request handed to the dispatcher by `Queue::submit`.
pub(crate) struct JobSpec {
    pub id: u64,
    pub seq: u64,
    pub window: u64,
    pub queue: Arc<QueueShared>,
    pub ctl: Arc<JobCtl>,
    pub destination: Destination,
    pub claim: Option<Arc<HostClaim>>,
    pub parts: Vec<Part>,
    pub assembly: Option<Assembly>,
    pub delivered: u64,
    pub stored: u64,
    pub failure_info: FailureInfo,
    pub submitted: Instant,
}

/// What an error record says about a request besides the error.
#[derive(Clone)]
pub(crate) struct FailureInfo {
    pub source: String,
    pub destination: String,
    pub tag: u64,
    pub name: Option<String>,
    pub file: Option<std::path::PathBuf>,
}

/// Commands from queues and the runtime.
pub(crate) enum Cmd {
    Batch(Vec<JobSpec>),
    /// Finish everything in flight, then stop.
    Shutdown,
}

/// Events from CPU threads and wgpu callbacks.
pub(crate) enum Event {
    CpuDone {
        part: Part,
        run: Option<u64>,
        result: Result<(), RequestError>,
        nanos: u64,
        copied: u64,
    },
    GpuDone {
        chunk: usize,
    },
    StatusMapped {
        chunk: usize,
    },
    ChunkMapped {
        chunk: usize,
    },
}

struct Job {
    spec: JobSpec,
    parts_left: usize,
    error: Option<RequestError>,
    assembly_buf: Option<Arc<std::sync::Mutex<Vec<u8>>>>,
}

/// A coalesced read.
struct Run {
    parts: Vec<Part>,
    file_offset: u64,
    len: usize,
    target: RunTarget,
    issued: Instant,
    queue: Arc<QueueShared>,
}

enum RunTarget {
    Bounce(Arc<io::AlignedBuf>),
    Staging { chunk: usize, offset: u64 },
}

/// A part whose bytes sit in a staging chunk, ready for the GPU.
struct Staged {
    part: Part,
    /// Where its bytes (stored for Raw/GpuLz4, decoded for Cpu) start.
    offset: u64,
}

#[derive(PartialEq, Eq, Clone, Copy, Debug)]
enum ChunkState {
    Free,
    Filling,
    Sealed,
    InGpu,
    Mapping,
}

struct ChunkWork {
    state: ChunkState,
    /// Parts that will stage into the chunk but have not yet.
    pending: usize,
    staged: Vec<Staged>,
    /// Parts decoded by the GPU in the submission in flight, in descriptor order.
    decoded: Vec<(Part, u64)>,
    /// Parts copied in the submission in flight.
    copied: Vec<Part>,
    submitted: Option<Instant>,
    res: Option<Lz4Res>,
    /// Decoded bytes the chunk's GPU LZ4 blocks will produce: bounded so
    /// the output fits one storage binding.
    lz4_out: u64,
}

/// Per-chunk GPU buffers for the LZ4 decoder, grown on demand.
struct Lz4Res {
    input: wgpu::Buffer,
    output: wgpu::Buffer,
    descs: wgpu::Buffer,
    status: wgpu::Buffer,
    readback: wgpu::Buffer,
    desc_cap: u64,
}

pub(crate) struct GpuSide {
    device: wgpu::Device,
    queue: wgpu::Queue,
    ring: StagingRing,
    chunks: Vec<ChunkWork>,
    open: Option<usize>,
    lz4: Option<Lz4DecodePipeline>,
    /// Callbacks wgpu still owes us; the poller polls while it is non-zero.
    owed: Arc<AtomicUsize>,
    kick: Sender<()>,
    lz4_out_cap: u64,
}

pub(crate) struct Dispatcher {
    rt: Arc<RuntimeShared>,
    cmds: Receiver<Cmd>,
    io_rx: Receiver<ReadCompletion>,
    io_tx: Sender<ReadCompletion>,
    events: Receiver<Event>,
    event_tx: Sender<Event>,
    workers: workers::Pool,
    gpu: Option<GpuSide>,
    jobs: HashMap<u64, Job>,
    waiting: [VecDeque<Part>; 4],
    picks: u64,
    runs: HashMap<u64, Run>,
    next_run: u64,
    /// Bounce bytes in flight per run id (freed when its last part is done).
    bounce_runs: HashMap<u64, (usize, u64, Arc<io::AlignedBuf>)>,
    /// Bounce buffers of `bounce_cap` bytes kept for reuse: allocating a
    /// fresh zeroed megabyte per read cost page faults and page clearing
    /// worth a fifth of the CPU path's time.
    bounce_pool: Vec<io::AlignedBuf>,
    bounce_cap: usize,
    bounce_bytes: u64,
    bounce_limit: u64,
    shutting_down: bool,
    staging_in_use: u64,
}

const PRIORITIES: usize = 4;

impl Dispatcher {
    pub(crate) fn new(
        rt: Arc<RuntimeShared>,
        cmds: Receiver<Cmd>,
        gpu: Option<(
            wgpu::Device,
            wgpu::Queue,
            StagingRing,
            Option<Lz4DecodePipeline>,
        )>,
        cpu_threads: usize,
        bounce_limit: u64,
    ) -> Dispatcher {
        let (io_tx, io_rx) = crossbeam::channel::unbounded();
        let (event_tx, events) = crossbeam::channel::unbounded();
        let bounce_cap = rt.config.io.max_read + (16 << 10);
        let gpu = gpu.map(|(device, queue, ring, lz4)| {
            let owed = Arc::new(AtomicUsize::new(0));
            let (kick, kicked) = crossbeam::channel::unbounded::<()>();
            spawn_poller(device.clone(), owed.clone(), kicked);
            let chunks = ring
                .chunks
                .iter()
                .map(|_| ChunkWork {
                    state: ChunkState::Free,
                    pending: 0,
                    staged: Vec::new(),
                    decoded: Vec::new(),
                    copied: Vec::new(),
                    submitted: None,
                    res: None,
                    lz4_out: 0,
                })
                .collect();
            let lz4_out_cap =
                (device.limits().max_storage_buffer_binding_size as u64).min(256 << 20);
            GpuSide {
                device,
                queue,
                ring,
                chunks,
                open: None,
                lz4,
                owed,
                kick,
                lz4_out_cap,
            }
        });
        Dispatcher {
            rt,
            cmds,
            io_rx,
            io_tx,
            events,
            workers: workers::Pool::new(cpu_threads),
            event_tx,
            gpu,
            jobs: HashMap::new(),
            waiting: Default::default(),
            picks: 0,
            runs: HashMap::new(),
            next_run: 1,
            bounce_runs: HashMap::new(),
            bounce_pool: Vec::new(),
            bounce_cap,
            bounce_bytes: 0,
            bounce_limit,
            shutting_down: false,
            staging_in_use: 0,
        }
    }

    /// The event loop; returns once shut down and idle.
    pub(crate) fn run(mut self) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_loop()));
        if let Err(panic) = outcome {
            // A bug in the dispatcher must not leave fences hanging: fail
            // every request it held. Reads may still be landing in bounce
            // buffers and staging chunks, so those are leaked, not freed.
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            std::mem::forget(std::mem::take(&mut self.runs));
            if let Some(g) = self.gpu.take() {
                std::mem::forget(g);
            }
            let ids: Vec<u64> = self.jobs.keys().copied().collect();
            for id in ids {
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.error = Some(RequestError::Internal(format!(
                        "the runtime's dispatcher panicked: {what}"
                    )));
                }
                self.complete_job(id);
            }
            self.shutting_down = true;
        }
        self.fail_late_batches();
    }

    fn run_loop(&mut self) {
        let mut busy_from;
        loop {
            if self.shutting_down && self.jobs.is_empty() {
                break;
            }
            crossbeam::select! {
                recv(self.cmds) -> cmd => {
                    busy_from = Instant::now();
                    match cmd {
                        Ok(Cmd::Batch(jobs)) => self.accept(jobs),
                        Ok(Cmd::Shutdown) | Err(_) => self.shutting_down = true,
                    }
                },
                recv(self.io_rx) -> c => {
                    busy_from = Instant::now();
                    if let Ok(c) = c { self.on_read(c) }
                },
                recv(self.events) -> e => {
                    busy_from = Instant::now();
                    if let Ok(e) = e { self.on_event(e) }
                },
            }
            // Drain whatever else is ready before planning, so one planning
            // pass sees as many parts as possible (better coalescing).
            while let Ok(c) = self.io_rx.try_recv() {
                self.on_read(c);
            }
            while let Ok(e) = self.events.try_recv() {
                self.on_event(e);
            }
            self.pump();
            self.rt
                .submit_busy_ns
                .fetch_add(busy_from.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Batches that raced with shutdown (or arrived after a panic) fail
    /// rather than vanish.
    fn fail_late_batches(&mut self) {
        while let Ok(cmd) = self.cmds.try_recv() {
            if let Cmd::Batch(jobs) = cmd {
                for spec in jobs {
                    let id = spec.id;
                    self.jobs.insert(
                        id,
                        Job {
                            spec,
                            parts_left: 0,
                            error: Some(RequestError::ShutDown),
                            assembly_buf: None,
                        },
                    );
                    self.complete_job(id);
                }
            }
        }
    }

    fn accept(&mut self, specs: Vec<JobSpec>) {
        for mut spec in specs {
            let id = spec.id;
            let parts = std::mem::take(&mut spec.parts);
            let prio = spec.queue.priority_index();
            let assembly_buf = spec
                .assembly
                .as_ref()
                .map(|a| Arc::new(std::sync::Mutex::new(vec![0u8; a.len])));
            let n = parts.len();
            self.jobs.insert(
                id,
                Job {
                    spec,
                    parts_left: n,
                    error: None,
                    assembly_buf,
                },
            );
            if n == 0 {
                self.parts_done(id);
                continue;
            }
            self.waiting[prio].extend(parts);
        }
    }

    /// The next part to place: highest priority first, but every 8th pick
    /// goes to the highest-priority *lower* level that has work, so a stream
    /// of realtime requests cannot starve the rest.
    fn next_part(&mut self) -> Option<Part> {
        self.picks += 1;
        let top = (0..PRIORITIES)
            .rev()
            .find(|&p| !self.waiting[p].is_empty())?;
        let level = if self.picks % 8 == 0 {
            (0..top)
                .rev()
                .find(|&p| !self.waiting[p].is_empty())
                .unwrap_or(top)
        } else {
            top
        };
        self.waiting[level].pop_front()
    }

    fn push_back_front(&mut self, part: Part) {
        let prio = self
            .jobs
            .get(&part.job)
            .map(|j| j.spec.queue.priority_index())
            .unwrap_or(1);
        self.waiting[prio].push_front(part);
    }

    /// Places waiting parts: reads for file parts, CPU tasks for memory
    /// parts, staging for GPU-bound parts, as far as memory allows.
    fn pump(&mut self) {
        let mut batch: Vec<Part> = Vec::new();
        let cap = self.rt.config.io.queue_depth.max(1) * 8;
        while batch.len() < cap {
            let Some(part) = self.next_part() else { break };
            if self
                .jobs
                .get(&part.job)
                .is_none_or(|j| j.spec.ctl.is_cancelled())
            {
                self.finish_part(part.job, None, Err(RequestError::Cancelled));
                continue;
            }
            batch.push(part);
        }
        if !batch.is_empty() {
            self.place(batch);
        }
        self.seal_if_idle();
        self.submit_ready_chunks();
    }

    fn place(&mut self, parts: Vec<Part>) {
        let mut file_parts: Vec<Part> = Vec::new();
        let mut blocked: Vec<Part> = Vec::new();
        for part in parts {
            match &part.block.data {
                BlockData::Memory(..) => {
                    if let Err(p) = self.place_memory_part(part) {
                        blocked.push(p);
                    }
                }
                BlockData::File(..) => file_parts.push(part),
            }
        }
        // Sort by file and offset, then coalesce neighbours of one target
        // family into runs bounded by the maximum read and over-read.
        file_parts.sort_by_key(|p| match &p.block.data {
            BlockData::File(f, _) => (Arc::as_ptr(f) as usize, staging_family(p), p.block.offset),
            _ => (0, false, 0),
        });
        let max_read = self.rt.config.io.max_read as u64;
        let max_over = self.rt.config.io.max_overread as u64;
        let chunk_cap = self
            .gpu
            .as_ref()
            .map(|g| g.ring.chunk_size())
            .unwrap_or(u64::MAX);
        let mut runs: Vec<Vec<Part>> = Vec::new();
        for p in file_parts {
            if let Some(last) = runs.last_mut() {
                let l = last.last().expect("runs are non-empty");
                let same = match (&l.block.data, &p.block.data) {
                    (BlockData::File(a, _), BlockData::File(b, _)) => Arc::ptr_eq(a, b),
                    _ => false,
                };
                let start = last[0].block.offset;
                let end = last
                    .iter()
                    .map(|q| q.block.offset + q.block.stored as u64)
                    .max()
                    .unwrap_or(start);
                let new_end = end.max(p.block.offset + p.block.stored as u64);
                if same
                    && staging_family(l) == staging_family(&p)
                    && p.block.offset <= end + max_over
                    && new_end - start + 8192 <= max_read.min(chunk_cap)
                {
                    last.push(p);
                    continue;
                }
            }
            runs.push(vec![p]);
        }
        let mut ops = Vec::new();
        let mut stuck = false;
        for run in runs {
            if stuck {
                blocked.extend(run);
                continue;
            }
            match self.issue_run(run) {
                Ok(op) => ops.push(op),
                Err(run) => {
                    stuck = true;
                    blocked.extend(run);
                }
            }
        }
        if !ops.is_empty() {
            // SAFETY: every destination is a bounce buffer held by its run or
            // a range of a mapped staging chunk reserved for the run; neither
            // is touched or unmapped until the run's completion arrives.
            unsafe { self.rt.engine.submit(ops, self.io_tx.clone()) };
        }
        for p in blocked.into_iter().rev() {
            self.push_back_front(p);
        }
    }

    /// Reserves the memory a run needs and builds its read, or gives the run
    /// back when memory is short.
    fn issue_run(&mut self, parts: Vec<Part>) -> Result<ReadOp, Vec<Part>> {
        let BlockData::File(pf, _) = &parts[0].block.data else {
            unreachable!("file parts only")
        };
        let pf = pf.clone();
        let start = parts[0].block.offset;
        let end = parts
            .iter()
            .map(|p| p.block.offset + p.block.stored as u64)
            .max()
            .unwrap_or(start);
        let align = pf.file.alignment() as u64;
        let (a_off, a_len, _) = io::align_range(start, (end - start) as usize, align as usize);
        let queue = self.jobs[&parts[0].job].spec.queue.clone();
        // Outputs of CPU parts bound for the GPU need staging too.
        let to_staging = staging_family(&parts[0]);
        let (target, dest) = if to_staging {
            let out: u64 = parts.iter().map(lz4_out).sum();
            self.make_room_for_lz4(out);
            let Some((chunk, offset, ptr)) = self.alloc_staging(a_len as u64, align.max(256))
            else {
                return Err(parts);
            };
            let w = &mut self.gpu.as_mut().expect("staging implies a GPU").chunks[chunk];
            w.pending += parts.len();
            w.lz4_out += out;
            (RunTarget::Staging { chunk, offset }, ptr)
        } else {
            if self.bounce_bytes > 0 && self.bounce_bytes + a_len as u64 > self.bounce_limit {
                return Err(parts);
            }
            // CPU parts with GPU destinations reserve their decoded output now,
            // so a run never waits for staging after its read.
            let mut reserved: Vec<(usize, u64)> = Vec::new();
            for p in &parts {
                let need = p.staging_out();
                if need > 0 {
                    match self.alloc_staging(need, 256) {
                        Some((c, off, _)) => reserved.push((c, off)),
                        None => {
                            // Give back what this run reserved: only possible
                            // because reservations are the latest in their chunk.
                            for (c, off) in reserved.into_iter().rev() {
                                self.unreserve(c, off);
                            }
                            return Err(parts);
                        }
                    }
                } else {
                    reserved.push((usize::MAX, 0));
                }
            }
            let mut buf = if a_len <= self.bounce_cap {
                // 4 KiB alignment suits every file's direct-read rule.
                self.bounce_pool
                    .pop()
                    .unwrap_or_else(|| io::AlignedBuf::with_alignment(self.bounce_cap, 4096))
            } else {
                io::AlignedBuf::with_alignment(a_len, align as usize)
            };
            // The heap block does not move when the buffer moves into the Arc.
            let dest = buf.as_mut_ptr();
            let buf = Arc::new(buf);
            self.bounce_bytes += a_len as u64;
            // Stash each part's staging slot in its place for the worker.
            let parts: Vec<Part> = parts;
            let run_id = self.next_run;
            self.bounce_runs
                .insert(run_id, (parts.len(), a_len as u64, buf.clone()));
            let mut parts = parts;
            for (p, (c, off)) in parts.iter_mut().zip(reserved) {
                if c != usize::MAX {
                    self.gpu.as_mut().expect("staging implies a GPU").chunks[c].pending += 1;
                    p.staged_at = Some((c, off));
                }
            }
            return Ok(self.make_op(parts, pf, a_off, a_len, RunTarget::Bounce(buf), dest, queue));
        };
        Ok(self.make_op(parts, pf, a_off, a_len, target, dest, queue))
    }

    #[allow(clippy::too_many_arguments)]
    fn make_op(
        &mut self,
        parts: Vec<Part>,
        pf: Arc<super::PackFile>,
        a_off: u64,
        a_len: usize,
        target: RunTarget,
        dest: *mut u8,
        queue: Arc<QueueShared>,
    ) -> ReadOp {
        let id = self.next_run;
        self.next_run += 1;
        let prio = queue.priority;
        self.runs.insert(
            id,
            Run {
                parts,
                file_offset: a_off,
                len: a_len,
                target,
                issued: Instant::now(),
                queue,
            },
        );
        ReadOp {
            file: pf.file.clone(),
            offset: a_off,
            len: a_len,
            dest,
            priority: prio,
            user_data: id,
        }
    }

    fn alloc_staging(&mut self, len: u64, align: u64) -> Option<(usize, u64, *mut u8)> {
        let g = self.gpu.as_mut()?;
        if len > g.ring.chunk_size() {
            return None;
        }
        loop {
            let c = match g.open {
                Some(c) => c,
                None => {
                    let c = g.chunks.iter().position(|w| w.state == ChunkState::Free)?;
                    g.chunks[c].state = ChunkState::Filling;
                    g.open = Some(c);
                    c
                }
            };
            if let Some(off) = g.ring.chunks[c].alloc(len, align) {
                self.staging_in_use = self.staging_in_use.max(
                    g.chunks
                        .iter()
                        .enumerate()
                        .filter(|(_, w)| w.state != ChunkState::Free)
                        .map(|(i, _)| g.ring.chunks[i].used)
                        .sum(),
                );
                // SAFETY: the range was just reserved inside the mapped chunk.
                let ptr = unsafe { g.ring.chunks[c].ptr_at(off) };
                return Some((c, off, ptr));
            }
            // Full: seal it and try the next free chunk.
            g.chunks[c].state = ChunkState::Sealed;
            g.open = None;
        }
    }

    /// Gives back a reservation made by the run being placed; `usize::MAX`
    /// marks a part that reserved nothing.
    fn unreserve(&mut self, chunk: usize, offset: u64) {
        if let Some(c) = self.gpu.as_mut().and_then(|g| g.ring.chunks.get_mut(chunk)) {
            if c.used > offset {
                c.used = offset;
            }
        }
    }

    /// Memory parts need no read: straight to a CPU thread, or copied into
    /// staging for the GPU paths.
    fn place_memory_part(&mut self, mut part: Part) -> Result<(), Part> {
        match part.class {
            Class::Cpu => {
                let need = part.staging_out();
                if need > 0 {
                    let Some((c, off, _)) = self.alloc_staging(need, 256) else {
                        return Err(part);
                    };
                    self.gpu.as_mut().expect("staging implies a GPU").chunks[c].pending += 1;
                    part.staged_at = Some((c, off));
                }
                let BlockData::Memory(data, range) = part.block.data.clone() else {
                    unreachable!()
                };
                self.spawn_cpu(part, Arc::new(data), range.start, None);
            }
            Class::Raw | Class::GpuLz4 => {
                let len = part.block.stored as u64;
                let out = lz4_out(&part);
                self.make_room_for_lz4(out);
                let Some((c, off, ptr)) = self.alloc_staging(len.max(4), 256) else {
                    return Err(part);
                };
                self.gpu.as_mut().expect("staging implies a GPU").chunks[c].lz4_out += out;
                let BlockData::Memory(data, range) = &part.block.data else {
                    unreachable!()
                };
                // SAFETY: `ptr` is a fresh reservation of `len` bytes in a mapped chunk.
                unsafe {
                    std::ptr::copy_nonoverlapping(data[range.clone()].as_ptr(), ptr, len as usize)
                };
                self.count_copy(part.job, len);
                let g = self.gpu.as_mut().expect("staging implies a GPU");
                g.chunks[c].staged.push(Staged { part, offset: off });
            }
        }
        Ok(())
    }

    fn count_copy(&self, job: u64, bytes: u64) {
        if let Some(j) = self.jobs.get(&job) {
            j.spec
                .queue
                .stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .bytes_host_copied += bytes;
        }
    }

    fn spawn_cpu<D: std::ops::Deref<Target = [u8]> + Send + Sync + 'static>(
        &mut self,
        part: Part,
        data: Arc<D>,
        at: usize,
        run: Option<u64>,
    ) {
        let Some(job) = self.jobs.get(&part.job) else {
            return;
        };
        let ctl = job.spec.ctl.clone();
        let claim = job.spec.claim.clone();
        let assembly = job.assembly_buf.clone();
        let staging = part.staged_at.map(|(c, off)| {
            let g = self.gpu.as_ref().expect("staging implies a GPU");
            // SAFETY: the slot was reserved for this part in a mapped chunk
            // that stays mapped while the chunk has pending parts.
            workers::StagingPtr(unsafe { g.ring.chunks[c].ptr_at(off) })
        });
        let tx = self.event_tx.clone();
        self.workers.spawn(move || {
            let t0 = Instant::now();
            let bytes: &[u8] = std::ops::Deref::deref(&*data);
            let (result, copied) = workers::decode_part(
                &part,
                &bytes[at..],
                &ctl,
                claim.as_deref(),
                assembly.as_deref(),
                staging,
            );
            // Let go of the claim before reporting: the job may complete (and
            // its fence fire) as soon as the dispatcher hears of this part.
            drop(claim);
            drop(assembly);
            drop(data);
            let _ = tx.send(Event::CpuDone {
                part,
                run,
                result,
                nanos: t0.elapsed().as_nanos() as u64,
                copied,
            });
        });
    }

    fn on_read(&mut self, c: ReadCompletion) {
        let Some(run) = self.runs.remove(&c.user_data) else {
            return;
        };
        {
            let mut st = run.queue.stats.lock().unwrap_or_else(|e| e.into_inner());
            st.reads += 1;
            st.read_ns += run.issued.elapsed().as_nanos() as u64;
            if let Ok(n) = &c.result {
                st.bytes_read += *n as u64;
            }
        }
        let got = match &c.result {
            Ok(n) => *n as u64,
            Err(_) => 0,
        };
        let err = c.result.err().map(Arc::new);
        for part in run.parts {
            let rel = part.block.offset - run.file_offset;
            let need = rel + part.block.stored as u64;
            let failure = if let Some(e) = &err {
                Some(RequestError::Io(Arc::new(
                    e.for_range(part.block.offset, part.block.stored as usize),
                )))
            } else if got < need {
                let BlockData::File(pf, _) = &part.block.data else {
                    unreachable!()
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
            match &run.target {
                RunTarget::Bounce(buf) => {
                    if let Some(e) = failure {
                        let chunk = part.staged_at.map(|s| s.0);
                        self.bounce_part_done(c.user_data);
                        self.finish_part(part.job, chunk, Err(e));
                        continue;
                    }
                    self.spawn_cpu(part, buf.clone(), rel as usize, Some(c.user_data));
                }
                RunTarget::Staging { chunk, offset } => {
                    let chunk = *chunk;
                    let at = offset + rel;
                    let verdict = match failure {
                        Some(e) => Err(e),
                        None => self.verify_staged(&part, chunk, at),
                    };
                    match verdict {
                        Ok(()) => {
                            let g = self.gpu.as_mut().expect("staging implies a GPU");
                            g.chunks[chunk].pending -= 1;
                            g.chunks[chunk].staged.push(Staged { part, offset: at });
                        }
                        Err(e) => self.finish_part(part.job, Some(chunk), Err(e)),
                    }
                }
            }
        }
        let _ = run.len;
    }

    /// Checks a block that landed in staging against its checksum. The
    /// staging memory may be write-combined, so this read is the price of
    /// verifying data the GPU will consume; `verify_gpu_checksums = false`
    /// skips it and leaves malformed streams to the GPU decoder's checks.
    fn verify_staged(&self, part: &Part, chunk: usize, at: u64) -> Result<(), RequestError> {
        if !self.rt.config.verify_gpu_checksums {
            return Ok(());
        }
        let BlockData::File(pf, id) = &part.block.data else {
            return Ok(());
        };
        let g = self.gpu.as_ref().expect("staging implies a GPU");
        // SAFETY: the read for this range completed and nothing writes it
        // until the chunk is submitted and remapped.
        let stored = unsafe {
            std::slice::from_raw_parts(g.ring.chunks[chunk].ptr_at(at), part.block.stored as usize)
        };
        let block = pf.pack.blocks()[id.0 as usize];
        let computed = crc32c::crc32c(stored);
        if computed != block.checksum {
            return Err(RequestError::Pack(crate::pack::PackError::BlockChecksum {
                at: pf.pack.describe_block(*id),
                block: id.0,
                offset: block.offset,
                stored: block.checksum,
                computed,
            }));
        }
        Ok(())
    }

    fn bounce_part_done(&mut self, run: u64) {
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
            if buf.len() == self.bounce_cap && self.bounce_pool.len() < 64 {
                self.bounce_pool.push(buf);
            }
        }
    }

    fn on_event(&mut self, e: Event) {
        match e {
            Event::CpuDone {
                part,
                run,
                result,
                nanos,
                copied,
            } => {
                if let Some(r) = run {
                    self.bounce_part_done(r);
                }
                if let Some(j) = self.jobs.get(&part.job) {
                    let mut st = j.spec.queue.stats.lock().unwrap_or_else(|e| e.into_inner());
                    st.cpu_decode_ns += nanos;
                    st.bytes_host_copied += copied;
                    st.blocks_cpu_decoded += 1;
                }
                match (result, part.staged_at) {
                    // Decoded into staging: the GPU copy delivers it.
                    (Ok(()), Some((c, offset))) => {
                        let g = self.gpu.as_mut().expect("staging implies a GPU");
                        g.chunks[c].pending -= 1;
                        g.chunks[c].staged.push(Staged { part, offset });
                    }
                    (r, staged) => self.finish_part(part.job, staged.map(|s| s.0), r),
                }
            }
            Event::GpuDone { chunk } => self.on_gpu_done(chunk),
            Event::StatusMapped { chunk } => self.on_status_mapped(chunk),
            Event::ChunkMapped { chunk } => {
                let g = self.gpu.as_mut().expect("GPU event without a GPU");
                g.ring.chunks[chunk].attach_mapping();
                g.chunks[chunk].lz4_out = 0;
                g.chunks[chunk].state = ChunkState::Free;
            }
        }
    }
}

impl Dispatcher {
    /// One part of a job ended. `chunk` is the staging chunk it had reserved
    /// (and now releases) if any.
    fn finish_part(&mut self, job: u64, chunk: Option<usize>, result: Result<(), RequestError>) {
        if let (Some(c), Some(g)) = (chunk, self.gpu.as_mut()) {
            g.chunks[c].pending -= 1;
        }
        let Some(j) = self.jobs.get_mut(&job) else {
            return;
        };
        if let Err(e) = result {
            if j.error.is_none() && !matches!(e, RequestError::Cancelled) {
                j.error = Some(e);
            }
        }
        j.parts_left -= 1;
        if j.parts_left == 0 {
            self.parts_done(job);
        }
    }

    /// Every part of a job ended: deliver an assembly, or complete the job.
    fn parts_done(&mut self, id: u64) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.error.is_none() && !j.spec.ctl.is_cancelled() {
            if let (Some(asm), Some(buf)) = (j.spec.assembly.take(), j.assembly_buf.take()) {
                let bytes: Arc<[u8]> =
                    std::mem::take(&mut *buf.lock().unwrap_or_else(|e| e.into_inner())).into();
                let prio = j.spec.queue.priority_index();
                let parts: Vec<Part> = asm
                    .outputs
                    .into_iter()
                    .map(|(range, place)| {
                        let len = (range.end - range.start) as u32;
                        Part {
                            job: id,
                            block: BlockSrc {
                                data: BlockData::Memory(bytes.clone(), range),
                                offset: 0,
                                stored: len,
                                size: len,
                                codec: crate::codec::Codec::None,
                            },
                            take: 0..len,
                            place,
                            class: Class::Cpu,
                            staged_at: None,
                        }
                    })
                    .collect();
                if !parts.is_empty() {
                    j.parts_left = parts.len();
                    self.waiting[prio].extend(parts);
                    return;
                }
            }
        }
        self.complete_job(id);
    }

    fn complete_job(&mut self, id: u64) {
        let Some(j) = self.jobs.remove(&id) else {
            return;
        };
        let spec = j.spec;
        let outcome = if spec.ctl.is_cancelled() {
            Outcome::Cancelled
        } else if let Some(e) = j.error {
            let info = spec.failure_info;
            Outcome::Failed(Arc::new(RequestFailure {
                error: Arc::new(e),
                source: info.source,
                destination: info.destination,
                source_size: spec.stored,
                destination_size: spec.delivered,
                tag: info.tag,
                name: info.name,
                file: info.file,
            }))
        } else {
            Outcome::Done
        };
        {
            let mut st = spec.queue.stats.lock().unwrap_or_else(|e| e.into_inner());
            match &outcome {
                Outcome::Done => {
                    st.completed += 1;
                    st.bytes_delivered += spec.delivered;
                    st.bytes_stored += spec.stored;
                }
                Outcome::Failed(_) => st.failed += 1,
                Outcome::Cancelled => st.cancelled += 1,
            }
            let latency = spec.submitted.elapsed();
            st.latency_ns_total += latency.as_nanos() as u64;
            st.latency.record(latency);
            st.staging_peak_bytes = st.staging_peak_bytes.max(self.staging_in_use);
        }
        // Release the host-memory claim before the fence can fire, so a
        // waiter woken by it can read the bytes.
        drop(spec.claim);
        spec.queue
            .finish(id, spec.seq, spec.window, outcome, spec.submitted);
    }

    /// Seals the open chunk so its GPU work can go as soon as its parts are
    /// staged: one chunk per planning pass keeps the GPU fed without waiting
    /// for a chunk to fill.
    fn seal_if_idle(&mut self) {
        if let Some(g) = self.gpu.as_mut() {
            if let Some(c) = g.open {
                if g.ring.chunks[c].used > 0 {
                    g.chunks[c].state = ChunkState::Sealed;
                    g.open = None;
                }
            }
        }
    }

    fn submit_ready_chunks(&mut self) {
        let Some(g) = self.gpu.as_mut() else { return };
        let ready: Vec<usize> = (0..g.chunks.len())
            .filter(|&c| g.chunks[c].state == ChunkState::Sealed && g.chunks[c].pending == 0)
            .collect();
        for c in ready {
            let g = self.gpu.as_mut().expect("checked above");
            if g.chunks[c].staged.is_empty() {
                // Nothing for the GPU (all parts failed or were cancelled):
                // the chunk is still mapped, so it is free at once.
                g.ring.chunks[c].used = 0;
                g.chunks[c].lz4_out = 0;
                g.chunks[c].state = ChunkState::Free;
                continue;
            }
            self.submit_chunk(c);
        }
    }

    /// Unmaps chunk `c`, records its copies and decode dispatch on the
    /// application's queue and submits them.
    fn submit_chunk(&mut self, c: usize) {
        let staged = std::mem::take(&mut self.gpu.as_mut().expect("GPU").chunks[c].staged);
        // A cancelled request's parts are dropped here; the others are
        // pinned so `cancel` waits for their GPU writes.
        let mut live = Vec::with_capacity(staged.len());
        for s in staged {
            let ok = self
                .jobs
                .get(&s.part.job)
                .is_some_and(|j| j.spec.ctl.begin_gpu());
            if ok {
                live.push(s);
            } else {
                let job = s.part.job;
                self.finish_part(job, None, Err(RequestError::Cancelled));
            }
        }
        let g = self.gpu.as_mut().expect("GPU");
        let used = g.ring.chunks[c].used;
        g.ring.chunks[c].unmap();
        let src = g.ring.chunks[c].buffer.clone();
        let mut enc = g
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpustream chunk"),
            });
        let (lz4_parts, copy_parts): (Vec<Staged>, Vec<Staged>) = live
            .into_iter()
            .partition(|s| s.part.class == Class::GpuLz4);
        let mut decoded = Vec::new();
        // Commands recorded, texture copies among them, and dispatches.
        let (mut commands, mut tex_copies, mut dispatches) = (0u64, 0u64, 0u64);
        if !lz4_parts.is_empty() {
            let pipeline = g.lz4.as_ref().expect("GpuLz4 parts imply the decoder");
            let mut descs = Vec::with_capacity(lz4_parts.len());
            let mut out = 0u64;
            for s in &lz4_parts {
                let (row_bytes, row_pitch) = match &s.part.place {
                    Place::Texture { layout, .. } => (layout.row_bytes, layout.row_pitch),
                    _ => (0, 0),
                };
                let dst_len = s.part.staging_out().max(s.part.block.size as u64);
                descs.push(
                    Lz4BlockDesc::linear(
                        s.offset as u32,
                        s.part.block.stored,
                        out as u32,
                        s.part.block.size,
                    )
                    .with_rows(row_bytes, row_pitch),
                );
                decoded.push((s.part.clone(), out));
                out += dst_len.next_multiple_of(256);
            }
            let res = ensure_lz4_res(
                &g.device,
                &mut g.chunks[c].res,
                g.ring.chunk_size(),
                out,
                descs.len() as u64,
            );
            enc.copy_buffer_to_buffer(
                &src,
                0,
                &res.input,
                0,
                used.next_multiple_of(4).min(g.ring.chunk_size()),
            );
            g.queue
                .write_buffer(&res.descs, 0, bytemuck::cast_slice(&descs));
            // Cleared so a block the shader never reached reads as NotRun.
            enc.clear_buffer(&res.status, 0, None);
            if let Err(e) = pipeline.encode(
                &g.device,
                &mut enc,
                res.input.slice(..),
                &res.descs,
                &res.output,
                &res.status,
                descs.len() as u32,
            ) {
                // Cannot happen with buffers sized here; if it does, the
                // blocks fail (status stays NotRun) rather than the runtime.
                eprintln!("gpustream: LZ4 dispatch not recorded: {e}");
            }
            enc.copy_buffer_to_buffer(&res.status, 0, &res.readback, 0, descs.len() as u64 * 4);
            // input copy, descriptor upload, status clear, dispatch, status copy
            commands += 5;
            dispatches += 1;
            for (part, off) in &decoded {
                commands += 1;
                tex_copies += matches!(part.place, Place::Texture { .. }) as u64;
                record_copy(
                    &mut enc,
                    &res.output,
                    *off,
                    part,
                    self.jobs.get(&part.job).map(|j| &j.spec.destination),
                );
            }
        }
        let mut copied = Vec::new();
        for s in copy_parts {
            commands += 1;
            tex_copies += matches!(s.part.place, Place::Texture { .. }) as u64;
            record_copy(
                &mut enc,
                &src,
                s.offset,
                &s.part,
                self.jobs.get(&s.part.job).map(|j| &j.spec.destination),
            );
            copied.push(s.part);
        }
        let g = self.gpu.as_mut().expect("GPU");
        {
            // Stats for the first job's queue stand for the submission.
            let any = decoded
                .first()
                .map(|d| d.0.job)
                .or(copied.first().map(|p| p.job));
            if let Some(j) = any.and_then(|id| self.jobs.get(&id)) {
                let mut st = j.spec.queue.stats.lock().unwrap_or_else(|e| e.into_inner());
                st.gpu_submits += 1;
                st.gpu_commands += commands;
                st.texture_copies += tex_copies;
                st.gpu_dispatches += dispatches;
                st.blocks_gpu_decoded += decoded.len() as u64;
                st.blocks_copied += copied.iter().filter(|p| p.class == Class::Raw).count() as u64;
            }
        }
        g.chunks[c].decoded = decoded;
        g.chunks[c].copied = copied;
        g.chunks[c].state = ChunkState::InGpu;
        g.chunks[c].submitted = Some(Instant::now());
        g.queue.submit([enc.finish()]);
        g.owed.fetch_add(1, Ordering::AcqRel);
        let (tx, owed) = (self.event_tx.clone(), g.owed.clone());
        g.queue.on_submitted_work_done(move || {
            owed.fetch_sub(1, Ordering::AcqRel);
            let _ = tx.send(Event::GpuDone { chunk: c });
        });
        let _ = g.kick.send(());
    }

    fn on_gpu_done(&mut self, c: usize) {
        let g = self.gpu.as_mut().expect("GPU");
        let elapsed = g.chunks[c]
            .submitted
            .take()
            .map(|t| t.elapsed().as_nanos() as u64)
            .unwrap_or(0);
        let first = g.chunks[c]
            .decoded
            .first()
            .map(|d| d.0.job)
            .or(g.chunks[c].copied.first().map(|p| p.job));
        if let Some(j) = first.and_then(|id| self.jobs.get(&id)) {
            j.spec
                .queue
                .stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .gpu_ns += elapsed;
        }
        let g = self.gpu.as_mut().expect("GPU");
        if g.chunks[c].decoded.is_empty() {
            self.finalize_chunk(c, None);
            return;
        }
        let n = g.chunks[c].decoded.len() as u64 * 4;
        let res = g.chunks[c]
            .res
            .as_ref()
            .expect("decoded parts imply LZ4 buffers");
        g.owed.fetch_add(1, Ordering::AcqRel);
        let (tx, owed) = (self.event_tx.clone(), g.owed.clone());
        res.readback.map_async(wgpu::MapMode::Read, 0..n, move |_| {
            owed.fetch_sub(1, Ordering::AcqRel);
            let _ = tx.send(Event::StatusMapped { chunk: c });
        });
        let _ = g.kick.send(());
    }

    fn on_status_mapped(&mut self, c: usize) {
        let g = self.gpu.as_mut().expect("GPU");
        let n = g.chunks[c].decoded.len() as u64 * 4;
        let res = g.chunks[c]
            .res
            .as_ref()
            .expect("decoded parts imply LZ4 buffers");
        let status: Vec<u32> = match res.readback.slice(0..n).get_mapped_range() {
            Ok(view) => bytemuck::cast_slice(&view).to_vec(),
            // The map failed (device lost): report every block as failed
            // rather than hang.
            Err(_) => vec![u32::MAX; n as usize / 4],
        };
        res.readback.unmap();
        self.finalize_chunk(c, Some(status));
    }

    /// The chunk's submission is done: finish its parts and map it again.
    fn finalize_chunk(&mut self, c: usize, status: Option<Vec<u32>>) {
        let g = self.gpu.as_mut().expect("GPU");
        let decoded = std::mem::take(&mut g.chunks[c].decoded);
        let copied = std::mem::take(&mut g.chunks[c].copied);
        g.chunks[c].state = ChunkState::Mapping;
        g.owed.fetch_add(1, Ordering::AcqRel);
        let (tx, owed) = (self.event_tx.clone(), g.owed.clone());
        g.ring.chunks[c]
            .buffer
            .map_async(wgpu::MapMode::Write, .., move |_| {
                owed.fetch_sub(1, Ordering::AcqRel);
                let _ = tx.send(Event::ChunkMapped { chunk: c });
            });
        let _ = g.kick.send(());
        for part in copied {
            if let Some(j) = self.jobs.get(&part.job) {
                j.spec.ctl.end_gpu();
            }
            self.finish_part(part.job, None, Ok(()));
        }
        for (i, (part, _)) in decoded.into_iter().enumerate() {
            if let Some(j) = self.jobs.get(&part.job) {
                j.spec.ctl.end_gpu();
            }
            let code = status
                .as_ref()
                .and_then(|s| s.get(i).copied())
                .unwrap_or(u32::MAX);
            let st = crate::decode::Lz4Status::from_word(code);
            let result = if st.is_ok() {
                Ok(())
            } else {
                Err(RequestError::GpuDecode {
                    block: part.block.describe(),
                    offset: part.block.offset,
                    reason: format!("{st:?}"),
                })
            };
            self.finish_part(part.job, None, result);
        }
    }
}

/// Records the copy of one part's bytes from `src` at `offset` to its
/// destination.
fn record_copy(
    enc: &mut wgpu::CommandEncoder,
    src: &wgpu::Buffer,
    offset: u64,
    part: &Part,
    dest: Option<&Destination>,
) {
    match (&part.place, dest) {
        (Place::Buffer { offset: dst }, Some(Destination::Buffer { buffer, .. })) => {
            let len = (part.take.end - part.take.start) as u64;
            enc.copy_buffer_to_buffer(src, offset, buffer, *dst, len.next_multiple_of(4));
        }
        (
            Place::Texture {
                mip,
                origin,
                width,
                height,
                layout,
            },
            Some(Destination::Texture { texture, .. }),
        ) => {
            enc.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer: src,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset,
                        bytes_per_row: Some(layout.row_pitch),
                        rows_per_image: Some(layout.rows),
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture,
                    mip_level: *mip,
                    origin: *origin,
                    aspect: wgpu::TextureAspect::All,
                },
                crate::destinations::texture::copy_extent(texture.format(), *width, *height),
            );
        }
        _ => {}
    }
}

fn ensure_lz4_res<'a>(
    device: &wgpu::Device,
    slot: &'a mut Option<Lz4Res>,
    input: u64,
    output: u64,
    descs: u64,
) -> &'a Lz4Res {
    let fits = slot.as_ref().is_some_and(|r| {
        r.input.size() >= input && r.output.size() >= output.max(4) && r.desc_cap >= descs
    });
    if !fits {
        let output = output.max(4).next_power_of_two();
        let descs = descs.max(64).next_power_of_two();
        let storage = wgpu::BufferUsages::STORAGE;
        let mk = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        *slot = Some(Lz4Res {
            input: mk(
                "gpustream lz4 input",
                input,
                storage | wgpu::BufferUsages::COPY_DST,
            ),
            output: mk(
                "gpustream lz4 output",
                output,
                storage | wgpu::BufferUsages::COPY_SRC,
            ),
            descs: mk(
                "gpustream lz4 descriptors",
                descs * std::mem::size_of::<Lz4BlockDesc>() as u64,
                storage | wgpu::BufferUsages::COPY_DST,
            ),
            status: mk(
                "gpustream lz4 status",
                descs * 4,
                storage | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            ),
            readback: mk(
                "gpustream lz4 status readback",
                descs * 4,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            desc_cap: descs,
        });
    }
    slot.as_ref().expect("just filled")
}

/// The decoder output a part needs (GPU LZ4 parts only).
fn lz4_out(p: &Part) -> u64 {
    if p.class == Class::GpuLz4 {
        p.staging_out()
            .max(p.block.size as u64)
            .next_multiple_of(256)
    } else {
        0
    }
}

impl Dispatcher {
    /// Seals the open chunk if `out` more decoded bytes would overflow its
    /// LZ4 output binding.
    fn make_room_for_lz4(&mut self, out: u64) {
        let Some(g) = self.gpu.as_mut() else { return };
        if let Some(c) = g.open {
            if out > 0 && g.chunks[c].lz4_out + out > g.lz4_out_cap {
                g.chunks[c].state = ChunkState::Sealed;
                g.open = None;
            }
        }
    }
}

fn staging_family(p: &Part) -> bool {
    matches!(p.class, Class::Raw | Class::GpuLz4)
}

fn spawn_poller(device: wgpu::Device, owed: Arc<AtomicUsize>, kicked: Receiver<()>) {
    std::thread::Builder::new()
        .name("gpustream-poll".into())
        .spawn(move || {
            while kicked.recv().is_ok() {
                // Non-blocking polls with a short, growing sleep rather than
                // `PollType::Wait`: the application polls the same device from
                // its own threads, and wgpu-core 30.0.2 can panic when two
                // threads wait on one device at once (gfx-rs/wgpu#9958).
                let mut nap = std::time::Duration::from_micros(20);
                while owed.load(Ordering::Acquire) > 0 {
                    match device.poll(wgpu::PollType::Poll) {
                        Ok(status) if !status.is_queue_empty() => {
                            nap = std::time::Duration::from_micros(20)
                        }
                        _ => {}
                    }
                    std::thread::sleep(nap);
                    nap = (nap * 2).min(std::time::Duration::from_millis(1));
                }
            }
        })
        .expect("spawn the GPU poll thread");
}
