//! The completion stage: its own thread, `gpustream-complete`, fed by one
//! channel. It owns how every job ends: the parts left, the first error,
//! and the status words of the GPU batches in flight. It ends each job exactly once (done, failed or cancelled),
//! releases its host-memory claim, and tells its queue, which fires
//! fences and status entries.
//!
//! ```text
//! submission thread --Jobs, Parts, Batch--> \
//! GPU poll thread --StatusMapped, Lost-->    > completion --> queues (fences)
//!                                            /     |
//!                        submission thread <--Freed, BatchFree
//! ```
//!
//! It took the part of the submission thread's own work that grows with
//! requests and parts but needs nothing of staging or reads: reading
//! status words, ending parts and jobs, and the queues' locks (measured:
//! the submission thread keeps up with more bytes per second).
//!
//! Order: the submission thread sends a job's `Jobs` entry before it
//! records or reports anything of its parts, and a batch's `Batch` before
//! submitting it, whose readback map is what sends `StatusMapped`; one
//! channel keeps messages in the order their senders' actions happened.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam::channel::{Receiver, Sender};

use crate::completion::Outcome;

use super::batch_status::{lost_error, BatchInFlight, StatusWords};
use super::job::{Ended, JobHot, JobOwner, JobSpec};
use super::job_table::split_key;
use super::part::Part;
use crate::completion::RequestError;

/// What reaches the completion stage.
pub(crate) enum ToCompletion {
    /// Jobs the submission thread took in: key, the job (its parts taken
    /// out) and how many parts it has.
    Jobs(Vec<(u64, JobSpec, usize)>),
    /// Parts that ended on the submission thread's side (CPU decode, read
    /// errors, cancellation, direct copies), by job key.
    Parts(Vec<(u64, Result<(), RequestError>)>),
    /// A batch about to be submitted; its readback is mapped when it is done.
    Batch(BatchInFlight),
    /// Batch `res`'s status words are mapped.
    StatusMapped(usize),
    /// The GPU failed under the runtime: no status will come.
    Lost(String),
    /// The submission thread panicked: every job ends, failed.
    FailAll(String),
    /// Jobs that end at once, failed with `ShutDown`, without ever running
    /// (a batch arriving after shutdown or after a panic).
    Refused(Vec<JobSpec>),
    /// The submission thread's handles of ended jobs, to drop here.
    Release(Vec<Arc<JobHot>>),
    /// Part lists the schedule has used up, to free here.
    Spent(Vec<std::vec::IntoIter<Part>>),
    /// Nothing more will come.
    Stop,
}

/// What the completion stage tells the submission thread.
pub(crate) enum FromCompletion {
    /// These jobs have ended: their keys can be reused.
    Freed(Vec<u64>),
    /// Batch buffer set `res` is free again.
    BatchFree(usize),
}

/// What the completion stage reads of the GPU batches.
pub(crate) struct GpuStatus {
    /// Each buffer set's status readback (`table::COUNT` tables of `stride`
    /// words).
    pub readback: Vec<wgpu::Buffer>,
    pub stride: usize,
    /// wgpu's noop backend: passes do not run.
    pub noop: bool,
    /// The device, asked whether it is lost before status words are
    /// believed.
    pub device: wgpu::Device,
}

/// How the stage is set up.
pub(crate) struct Setup {
    /// The most staging bytes in use at once, which the submission thread
    /// keeps, for the queues' stats.
    pub staging_peak: Arc<AtomicU64>,
    pub gpu: Option<GpuStatus>,
}

/// A job the completion stage holds.
struct Job {
    spec: JobSpec,
    parts_left: usize,
    error: Option<RequestError>,
}

struct Stage {
    setup: Setup,
    /// By the slot index of the job's key (the submission thread frees a
    /// key only when told, so indices never collide).
    jobs: Vec<Option<(u64, Job)>>,
    batches: Vec<Option<BatchInFlight>>,
    lost: Option<String>,
    back: Sender<FromCompletion>,
    /// Jobs ended this turn, by queue, and their keys.
    ended: Vec<(Arc<dyn JobOwner>, Vec<Ended>)>,
    freed: Vec<u64>,
}

/// Starts the completion thread.
pub(crate) fn spawn(
    setup: Setup,
    inbox: Receiver<ToCompletion>,
    back: Sender<FromCompletion>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("gpustream-complete".into())
        .spawn(move || {
            let mut stage = Stage {
                setup,
                jobs: Vec::new(),
                batches: Vec::new(),
                lost: None,
                back,
                ended: Vec::new(),
                freed: Vec::new(),
            };
            stage.run(inbox)
        })
}

impl Stage {
    fn run(&mut self, inbox: Receiver<ToCompletion>) {
        while let Ok(msg) = inbox.recv() {
            let mut stop = self.handle(msg);
            while let Ok(msg) = inbox.try_recv() {
                stop |= self.handle(msg);
            }
            self.end_turn();
            if stop {
                break;
            }
        }
        // The sender is gone or said stop: anything still held ends, so no
        // fence waits forever.
        self.fail_all("the runtime stopped".into());
        self.end_turn();
    }

    /// Handles one message; true on `Stop`.
    fn handle(&mut self, msg: ToCompletion) -> bool {
        // A bug here must not leave fences hanging: a panic fails
        // everything held, and the stage carries on.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match msg {
            ToCompletion::Jobs(jobs) => {
                for (key, spec, parts) in jobs {
                    self.insert(key, spec, parts);
                }
                false
            }
            ToCompletion::Parts(parts) => {
                for (key, result) in parts {
                    self.part_done(key, result);
                }
                false
            }
            ToCompletion::Batch(b) => {
                if let Some(why) = self.lost.clone() {
                    self.fail_batch(b, &why);
                } else {
                    let r = b.res;
                    if self.batches.len() <= r {
                        self.batches.resize_with(r + 1, || None);
                    }
                    self.batches[r] = Some(b);
                }
                false
            }
            ToCompletion::StatusMapped(r) => {
                self.status_mapped(r);
                false
            }
            ToCompletion::Lost(why) => {
                for r in 0..self.batches.len() {
                    if let Some(b) = self.batches[r].take() {
                        self.fail_batch(b, &why);
                    }
                }
                self.lost = Some(why);
                false
            }
            ToCompletion::FailAll(what) => {
                self.fail_all(format!("the runtime's dispatcher panicked: {what}"));
                false
            }
            ToCompletion::Refused(specs) => {
                for spec in specs {
                    let job = Job {
                        spec,
                        parts_left: 0,
                        error: Some(RequestError::ShutDown),
                    };
                    self.finish(job);
                }
                false
            }
            ToCompletion::Release(handles) => {
                drop(handles);
                false
            }
            ToCompletion::Spent(lists) => {
                drop(lists);
                false
            }
            ToCompletion::Stop => true,
        }));
        match outcome {
            Ok(stop) => stop,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                self.fail_all(format!("the runtime's completion stage panicked: {what}"));
                false
            }
        }
    }

    fn insert(&mut self, key: u64, spec: JobSpec, parts: usize) {
        let (index, _) = split_key(key);
        if self.jobs.len() <= index {
            self.jobs.resize_with(index + 1, || None);
        }
        let job = Job {
            spec,
            parts_left: parts,
            error: None,
        };
        self.jobs[index] = Some((key, job));
        if parts == 0 {
            self.parts_done(key);
        }
    }

    fn get_mut(&mut self, key: u64) -> Option<&mut Job> {
        let (index, _) = split_key(key);
        match self.jobs.get_mut(index) {
            Some(Some((k, job))) if *k == key => Some(job),
            _ => None,
        }
    }

    fn take(&mut self, key: u64) -> Option<Job> {
        let (index, _) = split_key(key);
        match self.jobs.get_mut(index) {
            Some(slot @ Some(_)) if slot.as_ref().is_some_and(|(k, _)| *k == key) => {
                slot.take().map(|(_, j)| j)
            }
            _ => None,
        }
    }

    /// One part of a job ended.
    fn part_done(&mut self, key: u64, result: Result<(), RequestError>) {
        let Some(j) = self.get_mut(key) else {
            return;
        };
        if let Err(e) = result {
            if j.error.is_none() && !matches!(e, RequestError::Cancelled) {
                j.error = Some(e);
            }
        }
        j.parts_left = j.parts_left.saturating_sub(1);
        if j.parts_left == 0 {
            self.parts_done(key);
        }
    }

    /// Every part of a job ended: end it.
    fn parts_done(&mut self, key: u64) {
        if let Some(job) = self.take(key) {
            self.freed.push(key);
            self.finish(job);
        }
    }

    /// Ends a job: releases its claim on host memory at once (before its
    /// fence can fire, so a waiter woken by it can read the bytes), and
    /// queues its end for its queue, told at the end of the turn.
    fn finish(&mut self, job: Job) {
        let spec = job.spec;
        let outcome = if spec.hot.ctl.is_cancelled() {
            Outcome::Cancelled
        } else if let Some(e) = job.error {
            Outcome::Failed(Arc::new(spec.failure(e)))
        } else {
            Outcome::Done
        };
        if let Some(c) = &spec.hot.claim {
            c.release();
        }
        let ended = Ended {
            id: spec.id,
            seq: spec.seq,
            window: spec.window,
            outcome,
            delivered: spec.delivered,
            stored: spec.stored,
            latency: spec.submitted.elapsed(),
        };
        let queue = &spec.hot.queue;
        match self.ended.last_mut() {
            Some((q, list)) if Arc::ptr_eq(q, queue) => list.push(ended),
            _ => self.ended.push((queue.clone(), vec![ended])),
        }
    }

    /// A batch's status words are mapped: each of its parts ends.
    fn status_mapped(&mut self, r: usize) {
        let Some(b) = self.batches.get_mut(r).and_then(Option::take) else {
            return;
        };
        let Some(gpu) = &self.setup.gpu else {
            return;
        };
        let readback = gpu.readback[r].clone();
        let (stride, noop) = (gpu.stride, gpu.noop);
        // A device lost before its status words were read may not have run
        // the batch (or the copies after it), and what the readback holds
        // is not its verdict: every part of it fails as lost, as the
        // batches still in flight do.
        if super::gpu_batch::probe_lost(&gpu.device) {
            let why = "the device was lost (destroyed, or reset by the driver)".to_string();
            readback.unmap();
            self.fail_batch(b, &why);
            let _ = self.back.send(FromCompletion::BatchFree(r));
            return;
        }
        if let Some(first) = b.entries.first() {
            if let Some(j) = self.get_mut(first.part.job) {
                let ns = b.submitted.elapsed().as_nanos() as u64;
                j.spec.hot.stats(|st| st.gpu_ns += ns);
            }
        }
        {
            // Read where mapped: copying the readback out was a fresh
            // 256 KiB allocation, page faults included, per batch.
            let view = readback.slice(..).get_mapped_range().ok();
            let status = StatusWords {
                words: view
                    .as_deref()
                    .and_then(|v| bytemuck::try_cast_slice(v).ok())
                    .unwrap_or(&[]),
                stride,
                noop,
            };
            for e in b.entries {
                let result = status.verdict(&e);
                if let Some(j) = self.get_mut(e.part.job) {
                    j.spec.hot.ctl.end_gpu();
                }
                self.part_done(e.part.job, result);
            }
        }
        readback.unmap();
        let _ = self.back.send(FromCompletion::BatchFree(r));
    }

    fn fail_batch(&mut self, b: BatchInFlight, why: &str) {
        for e in b.entries {
            if let Some(j) = self.get_mut(e.part.job) {
                j.spec.hot.ctl.end_gpu();
            }
            self.part_done(e.part.job, Err(lost_error(why)));
        }
    }

    /// Ends every job held, failed with `what`.
    fn fail_all(&mut self, what: String) {
        self.batches.clear();
        let held: Vec<u64> = self.jobs.iter().flatten().map(|(k, _)| *k).collect();
        for key in held {
            if let Some(mut job) = self.take(key) {
                if job.error.is_none() {
                    job.error = Some(RequestError::Internal(what.clone()));
                }
                self.freed.push(key);
                self.finish(job);
            }
        }
    }

    /// Tells every queue which of its jobs ended this turn (one call per
    /// queue and run of ends, so each queue lock is taken once), and the
    /// submission thread which keys are free.
    fn end_turn(&mut self) {
        let peak = self.setup.staging_peak.load(Ordering::Relaxed);
        for (queue, list) in self.ended.drain(..) {
            queue.finish(list, peak);
        }
        if !self.freed.is_empty() {
            let _ = self
                .back
                .send(FromCompletion::Freed(std::mem::take(&mut self.freed)));
        }
    }
}
