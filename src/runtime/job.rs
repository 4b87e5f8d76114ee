//! The job types shared by the queue (which makes jobs), the submission
//! thread (which runs them) and the CPU decode threads (which write their
//! destinations). They live here, below all three, so that none of those
//! modules imports another's internals.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard};
use std::time::Instant;

use crate::completion::{Outcome, RequestError, RequestFailure};
use crate::destinations::HostClaim;
use crate::io::Priority;

use super::part::Part;
use super::request::{describe_source, Destination, Source};
use super::stats::QueueStats;

/// What the submission thread needs of the queue a job came from.
pub(crate) trait JobOwner: Send + Sync {
    /// The queue's priority.
    fn priority(&self) -> Priority;
    /// The queue's statistics.
    fn stats(&self) -> &Mutex<QueueStats>;
    /// These jobs ended: count them, and fire what their ends release
    /// (fences, status entries). The submission thread hands over every
    /// job that ended in one turn of its loop at once, so the queue takes
    /// each of its locks once per turn rather than once per request.
    fn finish(&self, ended: Vec<Ended>, staging_peak: u64);
}

/// How one job ended, as its queue records it.
pub(crate) struct Ended {
    pub id: u64,
    pub seq: u64,
    pub window: u64,
    pub outcome: Outcome,
    /// Uncompressed and stored bytes of the request (counted when done).
    pub delivered: u64,
    pub stored: u64,
    /// Submit to completion.
    pub latency: std::time::Duration,
}

/// What the stages need of a job while it runs: one allocation per request,
/// shared by the queue's registry (for `cancel`), the submission thread's
/// [`super::job_table::JobTable`], the CPU threads decoding its parts and
/// the completion stage.
pub(crate) struct JobHot {
    pub queue: Arc<dyn JobOwner>,
    pub ctl: JobCtl,
    pub destination: Destination,
    /// The request's claim on host memory. The completion stage releases it
    /// explicitly when the job ends, before its fence can fire, whoever
    /// still holds this `JobHot`.
    pub claim: Option<HostClaim>,
}

impl JobHot {
    /// The index of the job's priority (0 = lowest).
    pub fn priority_index(&self) -> usize {
        self.queue.priority() as usize
    }

    /// Updates the job's queue statistics.
    pub fn stats(&self, f: impl FnOnce(&mut QueueStats)) {
        f(&mut self.queue.stats().lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A request handed to the submission thread by `Queue::submit`.
pub(crate) struct JobSpec {
    pub id: u64,
    pub seq: u64,
    pub window: u64,
    pub hot: Arc<JobHot>,
    pub parts: Vec<Part>,
    pub delivered: u64,
    pub stored: u64,
    pub failure_info: FailureInfo,
    pub submitted: Instant,
}

/// What an error record says about a request besides the error: kept as
/// the request had it and put into words only if the request fails.
#[derive(Clone)]
pub(crate) struct FailureInfo {
    pub source: Source,
    pub tag: u64,
    pub name: Option<String>,
}

impl JobSpec {
    /// The error record entry of this request failing with `error`.
    pub fn failure(&self, error: RequestError) -> RequestFailure {
        let (source, file) = describe_source(&self.failure_info.source);
        RequestFailure {
            error: Arc::new(error),
            source,
            destination: self.hot.destination.describe(),
            source_size: self.stored,
            destination_size: self.delivered,
            tag: self.failure_info.tag,
            name: self.failure_info.name.clone(),
            file,
        }
    }
}

/// Commands from queues and the runtime to the submission thread.
pub(crate) enum Cmd {
    Batch(Vec<JobSpec>),
    /// Finish everything in flight, then stop.
    Shutdown,
}

/// The per-request switches shared by the queue (for `cancel`) and the
/// runtime threads (which write the destination).
pub(crate) struct JobCtl {
    pub tag: u64,
    cancelled: AtomicBool,
    gate: RwLock<()>,
    /// GPU writes recorded and not yet landed. `begin_gpu` and `end_gpu`
    /// run once per GPU part on the submission thread, so they are plain
    /// atomics: a lock pair per part was a measurable share of its own
    /// work.
    gpu_pending: AtomicU32,
    /// A canceller waits on `gpu_idle` for `gpu_pending` to reach 0; only
    /// then does the last write take the lock and wake it.
    gpu_waited: AtomicBool,
    gpu_lock: Mutex<()>,
    gpu_idle: Condvar,
}

impl JobCtl {
    pub(crate) fn new(tag: u64) -> JobCtl {
        JobCtl {
            tag,
            cancelled: AtomicBool::new(false),
            gate: RwLock::new(()),
            gpu_pending: AtomicU32::new(0),
            gpu_waited: AtomicBool::new(false),
            gpu_lock: Mutex::new(()),
            gpu_idle: Condvar::new(),
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Held while a CPU thread writes the destination; `None` once cancelled.
    pub(crate) fn write_gate(&self) -> Option<RwLockReadGuard<'_, ()>> {
        let g = self.gate.read().unwrap_or_else(|e| e.into_inner());
        (!self.is_cancelled()).then_some(g)
    }

    /// Pins the request for a GPU write; false once cancelled.
    ///
    /// The count goes up before the flag is read, and `cancel` sets the
    /// flag before it reads the count (both sequentially consistent), so
    /// either this call sees the cancel and backs out, or `cancel` sees
    /// the write pending and waits for it.
    pub(crate) fn begin_gpu(&self) -> bool {
        self.gpu_pending.fetch_add(1, Ordering::SeqCst);
        if self.cancelled.load(Ordering::SeqCst) {
            self.end_gpu();
            return false;
        }
        true
    }

    /// A GPU write recorded by `begin_gpu` has landed.
    pub(crate) fn end_gpu(&self) {
        let before = self.gpu_pending.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "end_gpu without begin_gpu");
        if before == 1 && self.gpu_waited.load(Ordering::SeqCst) {
            // Taking the lock orders this wake after the canceller's check.
            let _g = self.gpu_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.gpu_idle.notify_all();
        }
    }

    /// Marks the request cancelled and waits until no write of it is under
    /// way: CPU writes hold the gate, GPU writes already submitted are
    /// waited for. After this returns the destination is not written again.
    pub(crate) fn cancel(&self) {
        {
            let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
            self.cancelled.store(true, Ordering::SeqCst);
        }
        let mut g = self.gpu_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.gpu_waited.store(true, Ordering::SeqCst);
        while self.gpu_pending.load(Ordering::SeqCst) > 0 {
            g = self.gpu_idle.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}
