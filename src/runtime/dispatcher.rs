//! The submission thread: one per runtime. It runs every request's parts
//! through the stages that need staging and reads, each of which owns its
//! state, and hands each part's end to the completion stage:
//!
//! ```text
//! Cmd::Batch (Queue::submit) -> job_table::JobTable (what the stages look up)
//!   -> schedule::Schedule (which part next, by priority)
//!   -> reads::Reads (coalesced runs into staging slots or bounce buffers)
//!   -> cpu_decode (threads: checksum + decode into the final place)
//!   -> gpu_batch::GpuBatcher (staging chunks -> one batch, one submission)
//!   -> complete (its own thread: status words, parts and jobs ending,
//!      queues told; Deliver, Freed and BatchFree come back)
//! ```
//!
//! Its own work per part is a handful of stores: it never touches the
//! bytes. Checksums are checked where the bytes are hot (CPU threads) or
//! where they are read anyway (the GPU's check pass).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam::channel::{Receiver, Sender};

use crate::io::ReadCompletion;
use crate::staging::SlotWriter;

use super::batch_status::lost_error;
use super::complete::{self, FromCompletion, ToCompletion};
use super::cpu_decode;
use super::gpu_batch::{Finished, GpuBatcher, GpuEvent, Staged};
use super::job::{Cmd, JobSpec};
use super::job_table::JobTable;
use super::part::{BlockData, Class, Part};
use super::reads::{Landed, Reads, RunPart};
use super::schedule::Schedule;
use super::shared::RuntimeShared;
use crate::completion::RequestError;

/// A CPU thread finished a part.
struct CpuDone {
    part: Part,
    /// The bounce run it read from.
    run: Option<u64>,
    /// For a run the CPU thread read itself: on its first part the bytes
    /// read and the read's nanoseconds, and on its last that the run is
    /// done.
    cached: Option<CachedRead>,
    /// The staging slot it wrote (chunk, offset, bytes).
    staged: Option<(usize, u64, u32)>,
    result: Result<(), RequestError>,
    nanos: u64,
    copied: u64,
}

/// What a CPU thread that read its run itself reports with a part.
#[derive(Clone, Copy, Default)]
struct CachedRead {
    read: Option<(u64, u64)>,
    last: bool,
}

pub(crate) struct Dispatcher {
    rt: Arc<RuntimeShared>,
    cmds: Receiver<Cmd>,
    io_rx: Receiver<ReadCompletion>,
    io_tx: Sender<ReadCompletion>,
    /// CPU threads report finished parts, a run's worth at a time where
    /// they read the run themselves (one wake-up of this thread per run).
    cpu_rx: Receiver<Vec<CpuDone>>,
    cpu_tx: Sender<Vec<CpuDone>>,
    gpu_rx: Receiver<GpuEvent>,
    pool: cpu_decode::Pool,
    /// A decode thread holds its runs' reports back while more than this
    /// many tasks wait in the pool (see `spawn_cached`).
    hold_while: usize,
    jobs: JobTable,
    schedule: Schedule,
    reads: Reads,
    gpu: Option<GpuBatcher>,
    shutting_down: bool,
    /// `RuntimeShared::cancels` when the schedule was last checked through.
    cancels_seen: u64,
    /// The completion stage's inbox, its replies, and its thread.
    to_complete: Sender<ToCompletion>,
    from_complete: Receiver<FromCompletion>,
    completion: Option<std::thread::JoinHandle<()>>,
    /// Parts that ended here this turn, sent to the completion stage at
    /// its end in one message.
    ended: Vec<(u64, Result<(), RequestError>)>,
    staging_peak: Arc<AtomicU64>,
    /// Scratch lists kept between turns, so their capacity is reused: the
    /// parts one `pump` takes, and what one read completion landed.
    picked: Vec<Part>,
    landed: Vec<Landed>,
}

/// The channels between the GPU batch, the submission thread and the
/// completion stage, made before the batcher (whose callbacks send on them).
pub(crate) struct Wiring {
    pub to_complete: (Sender<ToCompletion>, Receiver<ToCompletion>),
}

impl Wiring {
    pub fn new() -> Wiring {
        Wiring {
            to_complete: crossbeam::channel::unbounded(),
        }
    }
}

impl Dispatcher {
    pub(crate) fn new(
        rt: Arc<RuntimeShared>,
        cmds: Receiver<Cmd>,
        gpu: Option<(GpuBatcher, Receiver<GpuEvent>)>,
        wiring: Wiring,
        cpu_threads: usize,
        bounce_limit: u64,
    ) -> std::io::Result<Dispatcher> {
        let (io_tx, io_rx) = crossbeam::channel::unbounded();
        let (cpu_tx, cpu_rx) = crossbeam::channel::unbounded();
        let (gpu, gpu_rx) = match gpu {
            Some((g, rx)) => (Some(g), rx),
            None => (None, crossbeam::channel::never()),
        };
        let reads = Reads::new(
            rt.config.io.max_read,
            bounce_limit,
            cpu_threads,
            rt.activity.clone(),
        );
        let staging_peak = Arc::new(AtomicU64::new(0));
        let (back_tx, from_complete) = crossbeam::channel::unbounded();
        let (to_complete, inbox) = wiring.to_complete;
        let completion = complete::spawn(
            complete::Setup {
                staging_peak: staging_peak.clone(),
                gpu: gpu.as_ref().map(GpuBatcher::status_view),
            },
            inbox,
            back_tx,
        )?;
        Ok(Dispatcher {
            rt,
            cmds,
            io_rx,
            io_tx,
            cpu_rx,
            cpu_tx,
            gpu_rx,
            pool: cpu_decode::Pool::new(cpu_threads, send_held)?,
            hold_while: cpu_threads.max(1),
            jobs: JobTable::default(),
            schedule: Schedule::default(),
            reads,
            gpu,
            shutting_down: false,
            cancels_seen: 0,
            to_complete,
            from_complete,
            completion: Some(completion),
            ended: Vec::new(),
            staging_peak,
            picked: Vec::new(),
            landed: Vec::new(),
        })
    }

    /// The event loop; returns once shut down and idle.
    pub(crate) fn run(mut self) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_loop()));
        if let Err(panic) = outcome {
            // A bug in a stage must not leave fences hanging: the
            // completion stage fails every request. Reads may still be
            // landing in bounce buffers and staging chunks, so those are
            // leaked, not freed.
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            self.reads.leak();
            if let Some(g) = self.gpu.take() {
                std::mem::forget(g);
            }
            let _ = self.to_complete.send(ToCompletion::FailAll(what));
            self.shutting_down = true;
        }
        // Batches that raced with shutdown (or arrived after a panic) fail
        // rather than vanish: once `accepting` is clear no queue sends, so
        // this drain sees every batch ever sent.
        *self.rt.accepting.lock().unwrap_or_else(|e| e.into_inner()) = false;
        while let Ok(cmd) = self.cmds.try_recv() {
            if let Cmd::Batch(specs) = cmd {
                let _ = self.to_complete.send(ToCompletion::Refused(specs));
            }
        }
        let _ = self.to_complete.send(ToCompletion::Stop);
        if let Some(t) = self.completion.take() {
            let _ = t.join();
        }
    }

    fn run_loop(&mut self) {
        while !(self.shutting_down && self.jobs.is_empty()) {
            crossbeam::select! {
                recv(self.cmds) -> cmd => match cmd {
                    Ok(Cmd::Batch(specs)) => self.accept(specs),
                    Ok(Cmd::Shutdown) | Err(_) => self.shutting_down = true,
                },
                recv(self.io_rx) -> c => if let Ok(c) = c { self.on_read(c) },
                recv(self.cpu_rx) -> d => if let Ok(d) = d { d.into_iter().for_each(|d| self.on_cpu_done(d)) },
                recv(self.gpu_rx) -> e => if let Ok(e) = e { self.on_gpu(e) },
                recv(self.from_complete) -> m => if let Ok(m) = m { self.on_completion(m) },
            }
            let busy_from = Instant::now();
            // Drain whatever else is ready before planning, so one planning
            // pass sees as many parts as possible (better coalescing).
            while let Ok(c) = self.io_rx.try_recv() {
                self.on_read(c);
            }
            while let Ok(d) = self.cpu_rx.try_recv() {
                d.into_iter().for_each(|d| self.on_cpu_done(d));
            }
            while let Ok(e) = self.gpu_rx.try_recv() {
                self.on_gpu(e);
            }
            while let Ok(m) = self.from_complete.try_recv() {
                self.on_completion(m);
            }
            self.pump();
            // Every part that ended here in this turn reaches the
            // completion stage in one message.
            if !self.ended.is_empty() {
                let parts = std::mem::take(&mut self.ended);
                let _ = self.to_complete.send(ToCompletion::Parts(parts));
            }
            let spent = self.schedule.take_spent();
            if !spent.is_empty() {
                let _ = self.to_complete.send(ToCompletion::Spent(spent));
            }
            self.rt
                .submit_busy_ns
                .fetch_add(busy_from.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    fn accept(&mut self, specs: Vec<JobSpec>) {
        let mut jobs = Vec::with_capacity(specs.len());
        // A batch is one queue's submit: one priority for all of it.
        let prio = specs.first().map_or(0, |s| s.hot.priority_index());
        for mut spec in specs {
            let key = self.jobs.insert(spec.hot.clone());
            let mut parts = std::mem::take(&mut spec.parts);
            for p in &mut parts {
                p.job = key;
            }
            jobs.push((key, spec, parts.len()));
            self.schedule.push(prio, parts);
        }
        // Sent before any part of these jobs can end or be recorded.
        let _ = self.to_complete.send(ToCompletion::Jobs(jobs));
    }

    fn on_completion(&mut self, m: FromCompletion) {
        match m {
            FromCompletion::Freed(keys) => {
                // The last handles of ended jobs go back to the completion
                // stage to be dropped there: freeing a job (its destination's
                // and queue's reference counts, its allocation) was a
                // twentieth of this thread's own work.
                let handles: Vec<_> = keys
                    .into_iter()
                    .filter_map(|k| self.jobs.remove(k))
                    .collect();
                if !handles.is_empty() {
                    let _ = self.to_complete.send(ToCompletion::Release(handles));
                }
            }
            FromCompletion::BatchFree(r) => {
                if let Some(g) = self.gpu.as_mut() {
                    g.batch_free(r);
                }
            }
        }
    }

    fn part_done(&mut self, job: u64, result: Result<(), RequestError>) {
        self.ended.push((job, result));
    }

    fn finished(&mut self, done: Vec<Finished>) {
        for (part, result) in done {
            self.part_done(part.job, result);
        }
    }

    /// Places waiting parts as far as memory allows, hands ready staging
    /// chunks to the GPU batch, and flushes the batch when nothing more is
    /// on its way to it.
    fn pump(&mut self) {
        let cap = self.rt.config.io.queue_depth.max(1) * 8;
        let mut batch = std::mem::take(&mut self.picked);
        // Parts of cancelled requests are dropped before they are read. The
        // check is skipped while no cancel has happened since the schedule
        // was last checked through: a part missed here still ends as
        // cancelled where its destination would be written.
        let epoch = self.rt.cancels.load(Ordering::SeqCst);
        let check = epoch != self.cancels_seen;
        // Parts that CPU threads read for themselves are taken only as far
        // as the free read slots can use them (a run is at most `max_read`
        // bytes): taking more, only to coalesce them and put them back, was
        // most of this thread's work on `cpu-lz4`.
        let max_read = self.rt.config.io.max_read.max(1) as u64;
        let mut cached_budget = self.reads.cached_free() as u64 * max_read;
        let mut cached_taken = false;
        while batch.len() < cap {
            if let Some(p) = self.schedule.peek() {
                if !to_staging(p) && self.reads_cached(p) {
                    let b = p.block.stored as u64;
                    if cached_budget == 0 || (b > cached_budget && cached_taken) {
                        break;
                    }
                    cached_budget = cached_budget.saturating_sub(b);
                    cached_taken = true;
                }
            }
            let Some(part) = self.schedule.next() else {
                break;
            };
            if check && self.jobs.cancelled(part.job) {
                self.part_done(part.job, Err(RequestError::Cancelled));
                continue;
            }
            batch.push(part);
        }
        if check && self.schedule.is_empty() {
            self.cancels_seen = epoch;
        }
        if !batch.is_empty() {
            self.place(&mut batch);
        }
        self.picked = batch;
        let Some(g) = self.gpu.as_mut() else { return };
        g.ring.seal_open();
        let mut done = Vec::new();
        g.take_ready_chunks(&self.jobs, &mut done);
        // Flush once nothing more is on its way to the batch: no part waits
        // (parts waiting for staging get it back as soon as the chunks
        // already copied are remapped, whatever the batch is doing) and no
        // chunk is still filling.
        if g.has_open() && !g.ring.filling() && self.schedule.is_empty() {
            g.flush(&self.jobs, &mut done);
        }
        self.staging_peak
            .fetch_max(g.ring.in_use(), Ordering::Relaxed);
        self.finished(done);
    }

    /// Places `parts` (left empty, its capacity kept for the next turn).
    fn place(&mut self, parts: &mut Vec<Part>) {
        let mut blocked: Vec<Part> = Vec::new();
        // File parts by (file, family): a run lands either in staging or in
        // a bounce buffer, never both.
        let mut groups: Vec<((usize, bool), Vec<Part>)> = Vec::new();
        let lost = self.gpu.as_ref().and_then(|g| g.lost().map(str::to_string));
        let n = parts.len();
        for part in parts.drain(..) {
            if let (Some(why), true) = (&lost, part.to_gpu()) {
                self.part_done(part.job, Err(lost_error(why)));
                continue;
            }
            match &part.block.data {
                BlockData::Memory(..) => {
                    if let Err(p) = self.place_memory_part(part) {
                        blocked.push(p);
                    }
                }
                BlockData::File(f, _) => {
                    let key = (Arc::as_ptr(f) as usize, to_staging(&part));
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, g)) => g.push(part),
                        None => {
                            // Most turns have one group: size the first.
                            let mut g = Vec::with_capacity(if groups.is_empty() { n } else { 4 });
                            g.push(part);
                            groups.push((key, g));
                        }
                    }
                }
            }
        }
        let chunk = self.gpu.as_ref().map_or(u64::MAX, |g| g.ring.chunk_size());
        let max_read = (self.rt.config.io.max_read as u64).min(chunk);
        let max_over = self.rt.config.io.max_overread as u64;
        let mut ops = Vec::new();
        let mut stuck = false;
        for (_, group) in groups {
            // A remote pack's replica reads no bytes it was not asked for:
            // every block a read covers is fetched first, so reading over
            // a gap would fetch blocks nobody wants, and fail with them.
            let filled =
                matches!(&group[0].block.data, BlockData::File(f, _) if f.file.fill().is_some());
            let max_over = if filled { 0 } else { max_over };
            for run in Reads::coalesce(group, max_read, max_over) {
                if stuck {
                    blocked.extend(run);
                    continue;
                }
                let Some(queue) = self.jobs.get(run[0].job).map(|j| j.queue.clone()) else {
                    run.into_iter()
                        .for_each(|p| self.part_done(p.job, Err(RequestError::Cancelled)));
                    continue;
                };
                // A run a CPU thread decodes, of a file read through the
                // page cache, is read by that thread (as a hand-written loop
                // reads): no pool thread, no bounce buffer, and the bytes
                // are still in its cache when it checks and decodes them.
                // Injected faults live in the engine, so with them every
                // read goes there.
                if !to_staging(&run[0]) && self.reads_cached(&run[0]) {
                    match self
                        .reads
                        .begin_cached(run, self.gpu.as_mut().map(|g| &mut g.ring))
                    {
                        Ok(parts) => self.spawn_cached(parts),
                        Err(run) => {
                            stuck = true;
                            blocked.extend(run);
                        }
                    }
                    continue;
                }
                match self
                    .reads
                    .issue(run, queue, self.gpu.as_mut().map(|g| &mut g.ring))
                {
                    Ok(op) => ops.push(op),
                    Err(run) => {
                        stuck = true;
                        blocked.extend(run);
                    }
                }
            }
        }
        if !ops.is_empty() {
            // SAFETY: every destination is a bounce buffer held by its run or
            // a staging slot reserved for the run, whose chunk stays mapped
            // while the slot is outstanding; neither is touched, freed or
            // unmapped until the run's completion arrives.
            unsafe { self.rt.engine.submit(ops, self.io_tx.clone()) };
        }
        // Back at the front, in order, one list per run of one priority.
        let mut lists: Vec<(usize, Vec<Part>)> = Vec::new();
        for p in blocked {
            let prio = self.jobs.get(p.job).map_or(1, |j| j.priority_index());
            match lists.last_mut() {
                Some((q, list)) if *q == prio => list.push(p),
                _ => lists.push((prio, vec![p])),
            }
        }
        for (prio, list) in lists.into_iter().rev() {
            self.schedule.push_front(prio, list);
        }
    }

    /// Memory parts need no read: straight to a CPU thread, or copied into
    /// staging for the GPU passes.
    fn place_memory_part(&mut self, part: Part) -> Result<(), Part> {
        let BlockData::Memory(data, range) = part.block.data.clone() else {
            unreachable!("memory parts only")
        };
        match part.class {
            Class::Cpu => {
                let out = match part.cpu_staged_len() {
                    0 => None,
                    need => {
                        let g = self.gpu.as_mut().expect("GPU parts imply staging");
                        let Some(s) = g.ring.alloc(
                            need,
                            crate::staging::STAGING_ALIGN,
                            part.gpu_out(g.region_weight()),
                        ) else {
                            return Err(part);
                        };
                        Some(s)
                    }
                };
                let rp = RunPart { part, out };
                self.spawn_cpu(rp, Arc::new(data), range.start, None);
            }
            Class::Raw | Class::GpuDecode => {
                let g = self.gpu.as_mut().expect("GPU parts imply staging");
                let len = part.block.stored as u64;
                let Some((slot, mut w)) = g.ring.alloc(
                    len.max(4),
                    crate::staging::STAGING_ALIGN,
                    part.gpu_out(g.region_weight()),
                ) else {
                    return Err(part);
                };
                w.write(0, &data[range]);
                if let Some(j) = self.jobs.get(part.job) {
                    j.stats(|st| st.bytes_host_copied += len);
                }
                g.stage(
                    slot.chunk,
                    Staged {
                        part,
                        at: slot.offset,
                        len: len as u32,
                    },
                );
                g.ring.slot_written(slot.chunk);
            }
        }
        Ok(())
    }

    fn spawn_cpu<D: std::ops::Deref<Target = [u8]> + Send + Sync + 'static>(
        &mut self,
        rp: RunPart,
        data: Arc<D>,
        at: usize,
        run: Option<u64>,
    ) {
        let RunPart { part, out } = rp;
        let Some(job) = self.jobs.get_arc(part.job) else {
            return;
        };
        let (slot, mut writer): (Option<_>, Option<SlotWriter>) = match out {
            Some((s, w)) => (Some(s), Some(w)),
            None => (None, None),
        };
        let tx = self.cpu_tx.clone();
        self.pool.spawn(move || {
            let t0 = Instant::now();
            let bytes: &[u8] = std::ops::Deref::deref(&*data);
            let (result, copied) = cpu_decode::decode_part(
                &part,
                &bytes[at..],
                &job.ctl,
                job.claim.as_ref(),
                writer.as_mut(),
            );
            // Let go of the read buffer before reporting, so the read stage
            // can take it back into its pool.
            drop(job);
            drop(data);
            let _ = tx.send(vec![CpuDone {
                staged: slot.map(|s| (s.chunk, s.offset, part.cpu_staged_len() as u32)),
                part,
                run,
                cached: None,
                result,
                nanos: t0.elapsed().as_nanos() as u64,
                copied,
            }]);
        });
    }

    /// Whether the part's file is read through the page cache, and neither
    /// fault injection nor a remote origin wants every read to go through
    /// the engine.
    fn reads_cached(&self, part: &Part) -> bool {
        match &part.block.data {
            // A remote pack's replica is read through the engine, which
            // fetches missing blocks first.
            BlockData::File(pf, _) => {
                !pf.file.is_direct()
                    && pf.file.fill().is_none()
                    && self.rt.config.io.fault.is_none()
            }
            BlockData::Memory(..) => false,
        }
    }

    /// Hands a run of CPU parts to a decode thread that reads it itself
    /// (see `place`).
    fn spawn_cached(&mut self, parts: Vec<RunPart>) {
        let BlockData::File(pf, _) = &parts[0].part.block.data else {
            unreachable!("file parts only")
        };
        let pf = pf.clone();
        let jobs: Vec<_> = parts
            .iter()
            .map(|rp| self.jobs.get_arc(rp.part.job))
            .collect();
        let tx = self.cpu_tx.clone();
        let (waiting, hold_while) = (self.pool.waiting(), self.hold_while);
        self.pool.spawn(move || {
            HELD.with(|held| {
                let mut held = held.borrow_mut();
                let (to, done) = &mut *held;
                to.get_or_insert(tx);
                cpu_decode::read_and_decode(&pf, parts, jobs, |d| {
                    done.push(CpuDone {
                        staged: d.staged,
                        part: d.part,
                        run: None,
                        cached: Some(CachedRead {
                            read: d.read,
                            last: d.last,
                        }),
                        result: d.result,
                        nanos: d.nanos,
                        copied: d.copied,
                    });
                });
            });
            // While other runs wait for the pool, this run's reports wait
            // with them: the submission thread is woken once for several
            // runs instead of once a run. On two cores each of its turns
            // preempted a decode thread. The runs in flight
            // are bounded (`Reads::cached_free`), so the held reports go on
            // at the latest when the pool runs short or idle.
            if waiting.load(Ordering::Relaxed) <= hold_while {
                send_held();
            }
        });
    }

    fn on_read(&mut self, c: ReadCompletion) {
        // One list for every read: growing a fresh one per read was a
        // fortieth of this thread's own work (`perf`).
        let mut landed = std::mem::take(&mut self.landed);
        let chunk = self.reads.complete(c, &mut landed);
        for l in landed.drain(..) {
            match l {
                Landed::Staged { part, chunk, at } => {
                    let len = part.block.stored;
                    let g = self.gpu.as_mut().expect("staging implies a GPU");
                    g.stage(chunk, Staged { part, at, len });
                }
                Landed::Bounce { part, buf, at, run } => self.spawn_cpu(part, buf, at, Some(run)),
                Landed::Failed { part, error } => {
                    if let Some((slot, _)) = part.out {
                        if let Some(g) = self.gpu.as_mut() {
                            g.ring.slot_written(slot.chunk);
                        }
                    }
                    self.part_done(part.part.job, Err(error));
                }
            }
        }
        self.landed = landed;
        if let (Some(c), Some(g)) = (chunk, self.gpu.as_mut()) {
            g.ring.slot_written(c);
        }
    }

    fn on_cpu_done(&mut self, d: CpuDone) {
        if let Some(r) = d.run {
            self.reads.bounce_part_done(r);
        }
        if let Some(c) = d.cached {
            if let (Some((bytes, ns)), Some(j)) = (c.read, self.jobs.get(d.part.job)) {
                j.stats(|st| {
                    st.reads += 1;
                    st.read_ns += ns;
                    st.bytes_read += bytes;
                });
            }
            if c.last {
                self.reads.end_cached();
            }
        }
        if let Some(j) = self.jobs.get(d.part.job) {
            j.stats(|st| {
                st.cpu_decode_ns += d.nanos;
                st.bytes_host_copied += d.copied;
                st.blocks_cpu_decoded += 1;
                if d.part.block.codec != crate::codec::Codec::None {
                    st.blocks_cpu_decompressed += 1;
                    st.bytes_cpu_decompressed += d.part.block.size as u64;
                }
            });
        }
        match (d.result, d.staged) {
            // Decoded into staging: the GPU batch delivers it.
            (Ok(()), Some((chunk, at, len))) => {
                let g = self.gpu.as_mut().expect("staging implies a GPU");
                g.stage(
                    chunk,
                    Staged {
                        part: d.part,
                        at,
                        len,
                    },
                );
                g.ring.slot_written(chunk);
            }
            (r, staged) => {
                if let (Some((chunk, ..)), Some(g)) = (staged, self.gpu.as_mut()) {
                    g.ring.slot_written(chunk);
                }
                self.part_done(d.part.job, r);
            }
        }
    }

    fn on_gpu(&mut self, e: GpuEvent) {
        let Some(g) = self.gpu.as_mut() else { return };
        let mut done = Vec::new();
        g.on_event(e, &self.jobs, &mut done);
        self.finished(done);
    }
}

/// Reports a decode thread holds back (see `spawn_cached`), and the
/// submission thread's channel they go to.
type Held = (Option<Sender<Vec<CpuDone>>>, Vec<CpuDone>);

thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new((None, Vec::new())) };
}

/// Sends a decode thread's held reports on: the pool calls it before a
/// thread waits for work, and `spawn_cached` when few runs are left waiting.
fn send_held() {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        let (to, done) = &mut *held;
        if !done.is_empty() {
            if let Some(to) = to {
                let _ = to.send(std::mem::take(done));
            }
        }
    });
}

/// Whether a file part's run lands in staging (the GPU reads the stored
/// bytes) rather than in a bounce buffer (a CPU thread reads them).
fn to_staging(p: &Part) -> bool {
    matches!(p.class, Class::Raw | Class::GpuDecode)
}
