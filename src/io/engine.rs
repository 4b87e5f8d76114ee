//! The read engine: a worker per device, each ordering reads by priority
//! and physical position and moving them with the chosen backend.

use super::*;

/// One read into caller-owned memory, for `IoEngine::submit` (public with
/// the `tools` feature).
#[derive(Debug, Clone)]
pub struct ReadOp {
    /// The file to read.
    pub file: IoFile,
    /// File offset of the first byte.
    pub offset: u64,
    /// Bytes to read.
    pub len: usize,
    /// Where they go: valid for `len` bytes until the completion arrives.
    /// Direct reads need it (and offset and len) aligned to
    /// [`IoFile::alignment`]; unaligned requests still work, buffered.
    pub dest: *mut u8,
    /// Scheduling priority.
    pub priority: Priority,
    /// Echoed in the completion.
    pub user_data: u64,
}

// SAFETY: `dest` is only written by the engine, under the contract of
// `IoEngine::submit`.
unsafe impl Send for ReadOp {}

/// The outcome of one [`ReadOp`], delivered exactly once.
#[derive(Debug)]
pub struct ReadCompletion {
    /// The op's `user_data`.
    pub user_data: u64,
    /// Bytes read (less than asked only at the end of the file), or why not.
    pub result: Result<usize, IoError>,
}

/// A requested range's bytes inside a shared, coalesced read buffer.
#[derive(Clone)]
pub struct ReadSlice {
    buf: Arc<AlignedBuf>,
    start: usize,
    len: usize,
}

impl ReadSlice {
    /// The buffer of the whole coalesced read this slice is part of.
    pub fn run_buffer(&self) -> &Arc<AlignedBuf> {
        &self.buf
    }
}

impl std::ops::Deref for ReadSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for ReadSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadSlice({} bytes)", self.len)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolved {
    Uring,
    Threads,
}

struct Worker {
    inbox: Arc<worker::Inbox>,
    thread: Option<JoinHandle<()>>,
}

/// The I/O engine. `Send + Sync`: share it behind an `Arc`. Dropping it
/// waits for every submitted read to complete (so no read lands in memory
/// after its owner could have freed it).
pub struct IoEngine {
    cfg: IoConfig,
    kind: Resolved,
    workers: Mutex<HashMap<u64, Worker>>,
    counters: Arc<Counters>,
    regions: Arc<worker::Regions>,
    /// Ops waiting for their file's fill (a remote object's cache) to
    /// answer; dropping the engine waits for them before stopping workers.
    filling: Arc<Filling>,
    /// The disks behind the files it opened and the notices it gave.
    devices: Arc<super::device::Devices>,
}

/// A count of ops whose fill has not answered, and its zero signal.
#[derive(Default)]
struct Filling {
    count: Mutex<usize>,
    zero: std::sync::Condvar,
}

impl Filling {
    fn add(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    fn sub(&self) {
        let mut n = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            self.zero.notify_all();
        }
    }

    fn wait_zero(&self) {
        let mut n = self.count.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 {
            n = self.zero.wait(n).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl IoEngine {
    /// Creates an engine. Device workers start on first use.
    pub fn new(mut cfg: IoConfig) -> Result<IoEngine, IoError> {
        cfg.queue_depth = cfg.queue_depth.clamp(1, MAX_QUEUE_DEPTH);
        cfg.max_read = cfg.max_read.max(1);
        let kind = match cfg.backend {
            BackendKind::Threads => Resolved::Threads,
            BackendKind::IoUring => {
                backend::uring_available().map_err(|source| IoError::Backend {
                    backend: "io_uring",
                    source,
                })?;
                Resolved::Uring
            }
            // Only Linux has io_uring: elsewhere the pool is the backend,
            // not a fallback worth a notice.
            BackendKind::Auto if !cfg!(target_os = "linux") => Resolved::Threads,
            BackendKind::Auto => match backend::uring_available() {
                Ok(()) => Resolved::Uring,
                Err(e) => {
                    log::warn!("io_uring unavailable ({e}), reading with a thread pool");
                    Resolved::Threads
                }
            },
        };
        Ok(IoEngine {
            cfg,
            kind,
            workers: Mutex::new(HashMap::new()),
            counters: Arc::default(),
            regions: Arc::default(),
            filling: Arc::default(),
            devices: Arc::default(),
        })
    }

    /// Counters since the engine was created.
    pub fn stats(&self) -> IoStats {
        let c = &self.counters;
        IoStats {
            reads: c.reads.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            short_reads: c.short_reads.load(Relaxed),
            retries: c.retries.load(Relaxed),
            fixed_buffer_reads: c.fixed_buffer_reads.load(Relaxed),
            fixed_file_reads: c.fixed_file_reads.load(Relaxed),
            mapped_reads: c.mapped_reads.load(Relaxed),
            enters: c.enters.load(Relaxed),
            bounced_reads: c.bounced_reads.load(Relaxed),
        }
    }

    /// Registers `len` bytes at `ptr` (the runtime's staging memory) with
    /// every io_uring of this engine, so reads landing inside it skip the
    /// kernel's per-read page pinning (`IORING_OP_READ_FIXED`). Takes effect
    /// for reads submitted after this call; where the kernel refuses
    /// (memlock limit) reads simply stay plain. The thread-pool backend
    /// ignores it.
    ///
    /// # Safety
    /// The memory must stay mapped at this address until
    /// [`IoEngine::unregister_memory`] is called for it or the engine is
    /// dropped: the kernel pins the pages it sees now, and reads into the
    /// range would land in those pages even if the range were remapped.
    pub unsafe fn register_memory(&self, ptr: *mut u8, len: usize) {
        if ptr.is_null() || len == 0 {
            return;
        }
        let mut l = self.regions.list.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|&(s, _)| s != ptr as usize);
        l.push((ptr as usize, len));
        self.regions.generation.fetch_add(1, Relaxed);
        drop(l);
        self.poke_workers();
    }

    /// Forgets memory registered with [`IoEngine::register_memory`] at
    /// `ptr`. Reads submitted afterwards into it are plain reads.
    pub fn unregister_memory(&self, ptr: *mut u8) {
        let mut l = self.regions.list.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|&(s, _)| s != ptr as usize);
        self.regions.generation.fetch_add(1, Relaxed);
        drop(l);
        self.poke_workers();
    }

    fn poke_workers(&self) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        for w in workers.values() {
            w.inbox.poke();
        }
    }

    /// The configuration in effect (queue depth clamped to 1..=4096).
    pub fn config(&self) -> &IoConfig {
        &self.cfg
    }

    /// `io_uring` or `threads`, with `+faults` when the injector is on.
    pub fn backend_name(&self) -> &'static str {
        match (self.kind, self.cfg.fault.is_some()) {
            (Resolved::Uring, false) => "io_uring",
            (Resolved::Uring, true) => "io_uring+faults",
            (Resolved::Threads, false) => "threads",
            (Resolved::Threads, true) => "threads+faults",
        }
    }

    /// Opens a file for reading: O_DIRECT unless `mode` is
    /// [`OpenMode::Buffered`] or the filesystem refuses it or keeps files in
    /// memory (tmpfs), in which case it is read buffered and a one-line
    /// notice is logged once per filesystem. macOS reads uncached with
    /// `F_NOCACHE` instead; Windows reads buffered (with that notice).
    pub fn open(&self, path: impl AsRef<Path>, mode: OpenMode) -> Result<IoFile, IoError> {
        let path = path.as_ref();
        IoFile::open_named(path, path, mode, &self.devices)
    }

    /// Opens `open` as [`Self::open`] does, naming `shown` in errors and
    /// reports: for a file reopened through a descriptor already checked
    /// (`/proc/self/fd/N`).
    pub fn open_named(&self, open: &Path, shown: &Path, mode: OpenMode) -> Result<IoFile, IoError> {
        IoFile::open_named(open, shown, mode, &self.devices)
    }

    fn make_backend(&self) -> Box<dyn Backend> {
        let qd = self.cfg.queue_depth;
        let threads = || -> Box<dyn Backend> {
            match backend::threads::ThreadsBackend::new(qd) {
                Ok(b) => Box::new(b),
                // The pool may get fewer threads than asked; one always
                // exists in practice. Retry small rather than fail reads.
                Err(_) => Box::new(
                    backend::threads::ThreadsBackend::new(1)
                        .expect("spawning one I/O thread failed"),
                ),
            }
        };
        let b: Box<dyn Backend> = match self.kind {
            Resolved::Threads => threads(),
            Resolved::Uring => match backend::uring(qd, self.counters.clone()) {
                Ok(b) => b,
                Err(e) => {
                    log::warn!("creating an io_uring failed ({e}), reading with a thread pool");
                    threads()
                }
            },
        };
        match self.cfg.fault {
            Some(f) => Box::new(fault::FaultBackend::new(b, f)),
            None => b,
        }
    }

    /// Queues reads into caller-owned memory. Each op's completion is sent
    /// on `done` exactly once: its byte count (less than `len` only where
    /// the file ends) or an [`IoError`] naming file, offset and length. Ops
    /// go to their device's worker, which orders them by priority and
    /// physical position; they may complete in any order.
    ///
    /// # Safety
    /// For every op, `dest` must be valid for writes of `len` bytes, and
    /// neither read nor written by anyone else, from this call until that
    /// op's completion has been received from `done` (or until the engine
    /// is dropped, which waits for all reads). Ops must not overlap each
    /// other's destinations. On Windows the destination must also hold
    /// initialized bytes (any values): the read goes through std's
    /// `seek_read`, which takes a `&mut [u8]`.
    pub unsafe fn submit(&self, ops: Vec<ReadOp>, done: Sender<ReadCompletion>) {
        let mut by_dev: HashMap<u64, Vec<(ReadOp, Sender<ReadCompletion>)>> = HashMap::new();
        for op in ops {
            by_dev
                .entry(op.file.device().dev)
                .or_default()
                .push((op, done.clone()));
        }
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        for (dev, mut ops) in by_dev {
            let w = workers.entry(dev).or_insert_with(|| self.start_worker(dev));
            if w.thread.is_some() {
                // Ops on a remote object's cache wait for their bytes,
                // then join the device's queue (`fill.rs`). Each file's
                // ops go to its fill together, so it can fetch their
                // missing neighbours with one request.
                let mut by_fill: Vec<(Arc<dyn RangeFill>, Vec<FillRequest>)> = Vec::new();
                ops.retain(|(op, done)| {
                    let Some(fill) = op.file.fill() else {
                        return true;
                    };
                    let req = self.fill_request(op.clone(), done.clone(), &w.inbox);
                    match by_fill.iter_mut().find(|(f, _)| Arc::ptr_eq(f, fill)) {
                        Some((_, reqs)) => reqs.push(req),
                        None => by_fill.push((fill.clone(), vec![req])),
                    }
                    false
                });
                for (fill, reqs) in by_fill {
                    fill.fill(reqs);
                }
            }
            if w.thread.is_none() {
                for (op, d) in ops {
                    let _ = d.send(ReadCompletion {
                        user_data: op.user_data,
                        result: Err(IoError::EngineStopped {
                            path: op.file.path().to_path_buf(),
                            offset: op.offset,
                            len: op.len,
                        }),
                    });
                }
                continue;
            }
            w.inbox.push(ops);
        }
    }

    fn start_worker(&self, dev: u64) -> Worker {
        let b = self.make_backend();
        let inbox = Arc::new(worker::Inbox::new(
            b.waker(),
            self.counters.clone(),
            self.regions.clone(),
        ));
        let ib = inbox.clone();
        let (qd, sort) = (self.cfg.queue_depth, self.cfg.sort_by_position);
        let thread = std::thread::Builder::new()
            .name(format!("gpustream-io-{dev:x}"))
            .spawn(move || worker::run(ib, b, qd, sort))
            .ok();
        Worker { inbox, thread }
    }

    /// The op's range for its file's fill, answered by queueing the op on
    /// `inbox` holding the fill's pin until it completes, or by completing
    /// it with the fill's error. Either way exactly once, and counted in
    /// `filling` until then, so dropping the engine waits for it.
    fn fill_request(
        &self,
        op: ReadOp,
        done: Sender<ReadCompletion>,
        inbox: &Arc<worker::Inbox>,
    ) -> FillRequest {
        let (filling, inbox) = (self.filling.clone(), inbox.clone());
        let (offset, len) = (op.offset, op.len);
        filling.add();
        let then: FillDone = Box::new(move |res| {
            match res {
                Ok(pin) => inbox.push_pinned([(op, done, Some(pin))]),
                Err(e) => {
                    let _ = done.send(ReadCompletion {
                        user_data: op.user_data,
                        result: Err(e),
                    });
                }
            }
            filling.sub();
        });
        FillRequest {
            offset,
            len,
            done: then,
        }
    }

    /// Reads each `(offset, len)` range of `file` into engine-owned memory:
    /// ranges are coalesced by `plan_reads` (bounded by `max_read` and
    /// `max_overread`), each run is read once, aligned for O_DIRECT, and
    /// every range gets its slice of it. A slice is shorter than asked
    /// where the file ends. Blocks until all ranges are done.
    pub fn read_ranges(
        &self,
        file: &IoFile,
        ranges: &[(u64, usize)],
        priority: Priority,
    ) -> Vec<Result<ReadSlice, IoError>> {
        let runs = plan_reads(ranges, self.cfg.max_read, self.cfg.max_overread);
        let align = file.alignment();
        let mut bufs = Vec::with_capacity(runs.len());
        let mut ops = Vec::with_capacity(runs.len());
        let mut placed = Vec::with_capacity(runs.len());
        for (i, run) in runs.iter().enumerate() {
            let (aoff, alen, skip) = align_range(run.offset, run.len, align);
            let mut buf = AlignedBuf::with_alignment(alen, align.max(DEFAULT_BUF_ALIGN));
            ops.push(ReadOp {
                file: file.clone(),
                offset: aoff,
                len: alen,
                dest: buf.as_mut_ptr(),
                priority,
                user_data: i as u64,
            });
            bufs.push(Some(buf));
            placed.push(skip);
        }
        let (tx, rx) = channel::unbounded();
        let n = ops.len();
        // SAFETY: each op writes only its own buffer in `bufs`, which is
        // neither touched nor dropped until its completion arrives below.
        unsafe { self.submit(ops, tx) };
        let mut results: Vec<Option<Result<ReadSlice, IoError>>> =
            (0..ranges.len()).map(|_| None).collect();
        for _ in 0..n {
            let Ok(c) = rx.recv() else { break };
            let i = c.user_data as usize;
            let run = &runs[i];
            let buf = Arc::new(bufs[i].take().expect("one completion per run"));
            for p in &run.parts {
                let (off, len) = ranges[p.index];
                results[p.index] = Some(match &c.result {
                    Ok(got) => {
                        let start = placed[i] + p.offset_in_run;
                        let avail = got.saturating_sub(start).min(len);
                        Ok(ReadSlice {
                            buf: buf.clone(),
                            start,
                            len: avail,
                        })
                    }
                    Err(e) => Err(e.for_range(off, len)),
                });
            }
        }
        results
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.unwrap_or_else(|| {
                    Err(IoError::EngineStopped {
                        path: file.path().to_path_buf(),
                        offset: ranges[i].0,
                        len: ranges[i].1,
                    })
                })
            })
            .collect()
    }

    /// Reads `len` bytes at `offset` (fewer where the file ends) into a
    /// fresh buffer: the simplest safe entry point.
    pub fn read_at(&self, file: &IoFile, offset: u64, len: usize) -> Result<ReadSlice, IoError> {
        self.read_ranges(file, &[(offset, len)], Priority::Normal)
            .pop()
            .expect("one range in, one result out")
    }
}

impl Drop for IoEngine {
    fn drop(&mut self) {
        // Fills answer in bounded time (their fetches time out), and their
        // ops must reach a running worker or complete with an error.
        self.filling.wait_zero();
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        for w in workers.values() {
            w.inbox.shutdown();
        }
        for (_, mut w) in workers.drain() {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[allow(dead_code)]
fn _assert_traits() {
    fn ss<T: Send + Sync>() {}
    ss::<IoEngine>();
    ss::<IoFile>();
}
