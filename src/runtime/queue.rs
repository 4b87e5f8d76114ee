//! Queues: where the application enqueues requests, fence signals and
//! status writes, and submits them.

use super::id_map::IdMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crate::completion::{ErrorRecord, Fence, Marker, Outcome, StatusArray, Tracker};

use super::job::{Cmd, Ended, FailureInfo, JobCtl, JobHot, JobOwner, JobSpec};
use super::plan;
use super::request::{Destination, Request};
use super::shared::RuntimeShared;
use super::stats::QueueStats;
use crate::completion::RequestError;

/// A queue's priority: the I/O engine's classes. The runtime serves higher
/// priorities first; see `Dispatcher::next_part` for how lower ones are kept
/// from starving.
pub use crate::io::Priority;

/// What a queue reads from (defined beside the errors that name it, so that
/// `completion` needs nothing from `runtime`).
pub use crate::completion::SourceKind;

/// How to create a queue.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct QueueConfig {
    /// Requests the queue holds between enqueue and completion: 128 to 8192.
    pub capacity: usize,
    /// Its priority.
    pub priority: Priority,
    /// What its requests read from.
    pub source: SourceKind,
    /// A name for stats and traces.
    pub name: Option<String>,
}

/// Chained setters, one per field: `QueueConfig` is `#[non_exhaustive]`, so
/// code outside the crate starts from its default (or constructor) and
/// sets what it changes, and new fields never break it.
impl QueueConfig {
    /// Sets [`capacity`](Self::capacity).
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Sets [`priority`](Self::priority).
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Sets [`source`](Self::source).
    pub fn with_source(mut self, source: SourceKind) -> Self {
        self.source = source;
        self
    }

    /// Sets [`name`](Self::name).
    pub fn with_name(mut self, name: Option<String>) -> Self {
        self.name = name;
        self
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            capacity: 1024,
            priority: Priority::Normal,
            source: SourceKind::File,
            name: None,
        }
    }
}

enum Item {
    Request(Box<JobSpec>),
    Marker(u64, Marker),
}

struct State {
    pending: Vec<Item>,
    pending_requests: usize,
    next_seq: u64,
    in_flight: usize,
    /// Threads blocked in `enqueue` waiting for `space`. A finished request
    /// wakes them only when there are some: a futex wake per request was
    /// a fifth of the submission thread's own work.
    space_waiters: usize,
}

pub(crate) struct QueueShared {
    pub id: u32,
    pub config: QueueConfig,
    pub priority: Priority,
    state: Mutex<State>,
    space: Condvar,
    tracker: Mutex<Tracker>,
    registry: Mutex<IdMap<u64, Arc<JobHot>>>,
    pub stats: Mutex<QueueStats>,
    rt: Arc<RuntimeShared>,
}

impl JobOwner for QueueShared {
    fn priority(&self) -> Priority {
        self.priority
    }

    fn stats(&self) -> &Mutex<QueueStats> {
        &self.stats
    }

    /// Called by the submission thread with the requests that ended in
    /// one turn of its loop: each lock is taken once for all of them.
    fn finish(&self, ended: Vec<Ended>, staging_peak: u64) {
        {
            let mut st = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            for e in &ended {
                match &e.outcome {
                    Outcome::Done => {
                        st.completed += 1;
                        st.bytes_delivered += e.delivered;
                        st.bytes_stored += e.stored;
                    }
                    Outcome::Failed(_) => st.failed += 1,
                    Outcome::Cancelled => st.cancelled += 1,
                }
                st.latency_ns_total += e.latency.as_nanos() as u64;
                st.latency.record(e.latency);
            }
            st.staging_peak_bytes = st.staging_peak_bytes.max(staging_peak);
        }
        {
            let mut r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
            for e in &ended {
                r.remove(&e.id);
            }
        }
        let n = ended.len();
        let mut fired = Vec::new();
        {
            let mut t = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
            for e in ended {
                fired.extend(t.complete(e.seq, e.window, e.outcome));
            }
        }
        let wake = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.in_flight -= n;
            s.space_waiters > 0
        };
        if wake {
            self.space.notify_all();
        }
        fired.into_iter().for_each(|f| f.fire());
    }
}

/// Why `try_enqueue` gave a request back.
pub enum TryEnqueueError {
    /// The queue is at capacity; here is the request.
    Full(Request),
    /// The request is invalid.
    Invalid(RequestError),
}

impl std::fmt::Debug for TryEnqueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TryEnqueueError::Full(_) => f.write_str("Full(..)"),
            TryEnqueueError::Invalid(e) => write!(f, "Invalid({e})"),
        }
    }
}

/// A queue of requests, fence signals and status writes (DirectStorage's
/// `IDStorageQueue`). Thread-safe: enqueue from any thread.
///
/// Nothing runs until [`Queue::submit`] (or the automatic submit when half
/// the capacity is enqueued). Requests then run concurrently and finish in
/// any order, but a fence signal or status entry reports only once every
/// request enqueued before it on this queue has finished.
///
/// # GPU ordering contract
/// The runtime records its copies and decode dispatches on the `wgpu::Queue`
/// the [`super::Runtime`] was created with. A fence reaches its value only
/// after the submissions carrying the data of every earlier request have
/// completed on the GPU, so any work the application submits to that queue
/// after it has seen the fence at that value sees the data.
pub struct Queue {
    shared: Arc<QueueShared>,
}

impl Queue {
    pub(crate) fn new(rt: Arc<RuntimeShared>, mut config: QueueConfig) -> Queue {
        config.capacity = config.capacity.clamp(128, 8192);
        let priority = config.priority;
        let id = rt.next_queue.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = &rt.trace {
            t.queue(id, priority, config.capacity);
        }
        Queue {
            shared: Arc::new(QueueShared {
                id,
                config,
                priority,
                state: Mutex::new(State {
                    pending: Vec::new(),
                    pending_requests: 0,
                    next_seq: 0,
                    in_flight: 0,
                    space_waiters: 0,
                }),
                space: Condvar::new(),
                tracker: Mutex::new(Tracker::new()),
                registry: Mutex::new(IdMap::default()),
                stats: Mutex::new(QueueStats::default()),
                rt,
            }),
        }
    }

    /// The queue's configuration (capacity clamped to 128..=8192).
    pub fn config(&self) -> &QueueConfig {
        &self.shared.config
    }

    fn prepare(&self, req: &Request) -> Result<Box<JobSpec>, RequestError> {
        let sh = &self.shared;
        let kind = req.source.kind();
        let want = sh.config.source;
        if kind != want {
            return Err(RequestError::WrongSourceKind {
                queue: want,
                request: kind,
            });
        }
        let p = plan::plan(&sh.rt, req)?;
        let id = sh.rt.next_job.fetch_add(1, Ordering::Relaxed);
        let claim = match &req.destination {
            Destination::Memory { memory, offset } => Some(
                memory
                    .claim(id, *offset..*offset + p.delivered as usize)
                    .map_err(|busy| RequestError::DestinationBusy {
                        range: *offset..*offset + p.delivered as usize,
                        busy,
                    })?,
            ),
            _ => None,
        };
        if let Some(t) = &sh.rt.trace {
            let first = p.parts.first().map(|x| &x.block);
            t.request(
                sh.id,
                req,
                first.map_or(0, |b| b.offset),
                p.stored,
                p.delivered,
                first.map(|b| b.codec),
            );
        }
        let hot = Arc::new(JobHot {
            queue: sh.clone() as Arc<dyn JobOwner>,
            ctl: JobCtl::new(req.tag),
            destination: req.destination.clone(),
            claim,
        });
        Ok(Box::new(JobSpec {
            id,
            seq: 0,
            window: 0,
            hot,
            parts: p.parts,
            delivered: p.delivered,
            stored: p.stored,
            failure_info: FailureInfo {
                source: req.source.clone(),
                tag: req.tag,
                name: req.name.clone(),
            },
            submitted: Instant::now(),
        }))
    }

    fn push(&self, s: &mut State, mut spec: Box<JobSpec>) {
        spec.seq = s.next_seq;
        s.next_seq += 1;
        self.shared
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.id, spec.hot.clone());
        s.pending.push(Item::Request(spec));
        s.pending_requests += 1;
        s.in_flight += 1;
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .requests += 1;
    }

    /// Enqueues a request, blocking while the queue is at capacity. Invalid
    /// requests (wrong destination size or format, unknown tile, ...) are
    /// refused here and never run.
    pub fn enqueue(&self, req: Request) -> Result<(), RequestError> {
        let spec = self.prepare(&req)?;
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.in_flight >= self.shared.config.capacity {
            // Submit what is pending only when nothing submitted is left to
            // free a slot; otherwise wait, so a full queue does not turn into
            // a stream of one-request submits.
            if s.pending_requests > 0 && s.pending_requests == s.in_flight {
                let fired = self.submit_locked(&mut s);
                drop(s);
                fired.into_iter().for_each(|f| f.fire());
                s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            s.space_waiters += 1;
            s = self.shared.space.wait(s).unwrap_or_else(|e| e.into_inner());
            s.space_waiters -= 1;
        }
        self.push(&mut s, spec);
        self.auto_submit(s);
        Ok(())
    }

    /// Enqueues a request unless the queue is at capacity, in which case it
    /// comes back in [`TryEnqueueError::Full`].
    // The request comes back by value, unboxed, so a caller can retry it
    // without an allocation per refusal; a refusal is the cold path.
    #[allow(clippy::result_large_err)]
    pub fn try_enqueue(&self, req: Request) -> Result<(), TryEnqueueError> {
        let s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.in_flight >= self.shared.config.capacity {
            return Err(TryEnqueueError::Full(req));
        }
        drop(s);
        let spec = self.prepare(&req).map_err(TryEnqueueError::Invalid)?;
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.in_flight >= self.shared.config.capacity {
            return Err(TryEnqueueError::Full(req));
        }
        self.push(&mut s, spec);
        self.auto_submit(s);
        Ok(())
    }

    fn auto_submit(&self, mut s: std::sync::MutexGuard<'_, State>) {
        if s.pending_requests >= self.shared.config.capacity / 2 {
            let fired = self.submit_locked(&mut s);
            drop(s);
            fired.into_iter().for_each(|f| f.fire());
        }
    }

    /// Enqueues a fence signal: `fence` reaches `value` once every request
    /// enqueued before it on this queue has finished (done, failed or
    /// cancelled, GPU work included).
    pub fn enqueue_signal(&self, fence: &Fence, value: u64) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let seq = s.next_seq;
        s.next_seq += 1;
        s.pending
            .push(Item::Marker(seq, Marker::Signal(fence.clone(), value)));
        if let Some(t) = &self.shared.rt.trace {
            t.signal(self.shared.id);
        }
    }

    /// Enqueues a status write: entry `index` of `array` becomes pending now
    /// (at submit) and, once every earlier request has finished, holds Ok or
    /// the first failure (in enqueue order) among the requests enqueued since
    /// the previous status write on this queue.
    pub fn enqueue_status(&self, array: &StatusArray, index: usize) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let seq = s.next_seq;
        s.next_seq += 1;
        s.pending
            .push(Item::Marker(seq, Marker::Status(array.clone(), index)));
    }

    /// Sends everything enqueued so far to the runtime.
    pub fn submit(&self) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        let fired = self.submit_locked(&mut s);
        drop(s);
        fired.into_iter().for_each(|f| f.fire());
    }

    fn submit_locked(&self, s: &mut State) -> Vec<crate::completion::Fired> {
        if s.pending.is_empty() {
            return Vec::new();
        }
        let items = std::mem::take(&mut s.pending);
        s.pending_requests = 0;
        let mut jobs = Vec::new();
        let mut fired = Vec::new();
        {
            let mut t = self
                .shared
                .tracker
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for item in items {
                match item {
                    Item::Request(mut spec) => {
                        spec.window = t.add_request(spec.seq);
                        spec.submitted = Instant::now();
                        jobs.push(*spec);
                    }
                    Item::Marker(seq, m) => fired.extend(t.add_marker(seq, m)),
                }
            }
        }
        if !jobs.is_empty() {
            self.shared
                .stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .submits += 1;
            if let Some(t) = &self.shared.rt.trace {
                t.submit(self.shared.id, jobs.len() as u64);
            }
            let sent = {
                let accepting = self
                    .shared
                    .rt
                    .accepting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if *accepting {
                    self.shared
                        .rt
                        .cmds
                        .send(Cmd::Batch(jobs))
                        .map_err(|crossbeam::channel::SendError(c)| c)
                } else {
                    Err(Cmd::Batch(jobs))
                }
            };
            if let Err(Cmd::Batch(jobs)) = sent {
                // The dispatcher is gone: every request still ends, as failed.
                let mut t = self
                    .shared
                    .tracker
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                for spec in jobs {
                    s.in_flight -= 1;
                    self.shared
                        .registry
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&spec.id);
                    let f = Arc::new(spec.failure(RequestError::ShutDown));
                    fired.extend(t.complete(spec.seq, spec.window, Outcome::Failed(f)));
                }
            }
        }
        fired
    }

    /// Cancels every request of this queue whose `tag & mask == value` and
    /// has not finished. Cancelled requests count as neither done nor failed;
    /// once this returns they never write their destination again (it waits
    /// for GPU copies of theirs already submitted). Do not call it from a
    /// fence callback: those run on the runtime's completion thread, which
    /// is the thread that ends the GPU writes `cancel` waits for.
    pub fn cancel(&self, mask: u64, value: u64) {
        self.shared.rt.cancels.fetch_add(1, Ordering::SeqCst);
        let matching: Vec<Arc<JobHot>> = self
            .shared
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|j| j.ctl.tag & mask == value)
            .cloned()
            .collect();
        for j in matching {
            j.ctl.cancel();
        }
    }

    /// The number of failed requests since the last call and the first of
    /// them in enqueue order; starts a new record.
    pub fn error_record(&self) -> ErrorRecord {
        self.shared
            .tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_error_record()
    }

    /// A snapshot of the queue's statistics.
    pub fn stats(&self) -> QueueStats {
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Requests enqueued and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .in_flight
    }
}

impl Drop for Queue {
    /// Dropping a queue cancels what was enqueued but never submitted and
    /// submits it, so every request still ends once and every fence enqueued
    /// on the queue still reaches its value. Submitted work runs on.
    fn drop(&mut self) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        for item in &s.pending {
            if let Item::Request(spec) = item {
                spec.hot.ctl.cancel();
            }
        }
        let fired = self.submit_locked(&mut s);
        drop(s);
        fired.into_iter().for_each(|f| f.fire());
    }
}
