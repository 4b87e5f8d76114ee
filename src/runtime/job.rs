//! The job types shared by the queue (which makes jobs), the submission
//! thread (which runs them) and the CPU decode threads (which write their
//! destinations). They live here, below all three, so that none of those
//! modules imports another's internals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard};
use std::time::Instant;

use crate::completion::Outcome;
use crate::destinations::HostClaim;
use crate::io::Priority;

use super::plan::{Assembly, Part};
use super::request::Destination;
use super::stats::QueueStats;

/// What the submission thread needs of the queue a job came from.
pub(crate) trait JobOwner: Send + Sync {
    /// The queue's priority.
    fn priority(&self) -> Priority;
    /// The queue's statistics.
    fn stats(&self) -> &Mutex<QueueStats>;
    /// The job ended: fire what its end releases (fences, status entries).
    fn finish(&self, id: u64, seq: u64, window: u64, outcome: Outcome);
}

/// A request handed to the submission thread by `Queue::submit`.
pub(crate) struct JobSpec {
    pub id: u64,
    pub seq: u64,
    pub window: u64,
    pub queue: Arc<dyn JobOwner>,
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

impl JobSpec {
    /// The index of the job's priority (0 = lowest).
    pub fn priority_index(&self) -> usize {
        self.queue.priority() as usize
    }

    /// Updates the job's queue statistics.
    pub fn stats(&self, f: impl FnOnce(&mut QueueStats)) {
        f(&mut self.queue.stats().lock().unwrap_or_else(|e| e.into_inner()))
    }
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
    /// GPU writes in flight, and whether `cancel` waits for them to end.
    gpu: Mutex<GpuWrites>,
    gpu_idle: Condvar,
}

#[derive(Default)]
struct GpuWrites {
    pending: u32,
    /// A canceller waits on `gpu_idle`. Only then does the last write wake
    /// it: an unconditional notify is a futex syscall per part on the
    /// submission thread (issue #10).
    waited: bool,
}

impl JobCtl {
    pub(crate) fn new(tag: u64) -> JobCtl {
        JobCtl {
            tag,
            cancelled: AtomicBool::new(false),
            gate: RwLock::new(()),
            gpu: Mutex::new(GpuWrites::default()),
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
    pub(crate) fn begin_gpu(&self) -> bool {
        let _g = self.gate.read().unwrap_or_else(|e| e.into_inner());
        if self.is_cancelled() {
            return false;
        }
        self.gpu.lock().unwrap_or_else(|e| e.into_inner()).pending += 1;
        true
    }

    /// A GPU write recorded by `begin_gpu` has landed.
    pub(crate) fn end_gpu(&self) {
        let mut n = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        n.pending = n.pending.saturating_sub(1);
        if n.pending == 0 && n.waited {
            self.gpu_idle.notify_all();
        }
    }

    /// Marks the request cancelled and waits until no write of it is under
    /// way: CPU writes hold the gate, GPU writes already submitted are
    /// waited for. After this returns the destination is not written again.
    pub(crate) fn cancel(&self) {
        {
            let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
            self.cancelled.store(true, Ordering::Release);
        }
        let mut n = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        while n.pending > 0 {
            n.waited = true;
            n = self.gpu_idle.wait(n).unwrap_or_else(|e| e.into_inner());
        }
    }
}
