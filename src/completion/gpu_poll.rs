//! The GPU poll thread: drives wgpu's callbacks (submitted work done, buffer
//! mapped) for the runtime's submissions.
//!
//! It blocks in the driver on the oldest submission still owed, with no
//! timeout, rather than sleeping between non-blocking polls. A wait without
//! a timeout is also what keeps clear of wgpu-core 30.0.2's defensive
//! assert in `Device::maintain`, which a *timed-out* wait can trip while the
//! application polls the same device from its own thread
//! (gfx-rs/wgpu#9958): after a finished wait the fence is at least the
//! waited-for index. Map requests on idle buffers are resolved by a plain
//! poll; while one is still owed, the thread waits on its channel for new
//! work, not on a timer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};

enum Kick {
    Submitted(wgpu::SubmissionIndex),
    Mapping,
}

/// The handle the submission thread uses to tell the poll thread what
/// wgpu owes it.
pub(crate) struct GpuPoller {
    tx: Option<Sender<Kick>>,
    owed: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A callback the poll thread is owed; call [`Owed::paid`] inside it.
pub(crate) struct Owed(Arc<AtomicUsize>);

impl Owed {
    /// The callback ran.
    pub fn paid(self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl GpuPoller {
    /// Starts the poll thread for `device`. `on_lost` runs (on the poll
    /// thread) if wgpu panics while polling: the callbacks still owed will
    /// never run.
    pub fn spawn(
        device: wgpu::Device,
        on_lost: impl Fn(String) + Send + 'static,
    ) -> std::io::Result<GpuPoller> {
        let (tx, rx) = crossbeam::channel::unbounded();
        let owed = Arc::new(AtomicUsize::new(0));
        let o = owed.clone();
        let thread = std::thread::Builder::new()
            .name("gpustream-poll".into())
            .spawn(move || poll_loop(device, rx, o, Box::new(on_lost)))?;
        Ok(GpuPoller {
            tx: Some(tx),
            owed,
            thread: Some(thread),
        })
    }

    /// Counts a callback about to be registered (before `submit` or
    /// `map_async`, so it cannot run first).
    pub fn owe(&self) -> Owed {
        self.owed.fetch_add(1, Ordering::AcqRel);
        Owed(self.owed.clone())
    }

    /// A submission whose callbacks are owed.
    pub fn submitted(&self, index: wgpu::SubmissionIndex) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Kick::Submitted(index));
        }
    }

    /// A `map_async` whose callback is owed.
    pub fn mapping(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Kick::Mapping);
        }
    }
}

impl Drop for GpuPoller {
    /// Stops the poll thread and waits for it, so no thread of ours is
    /// inside the driver once the runtime is gone (or the process exits).
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn poll_loop(
    device: wgpu::Device,
    rx: Receiver<Kick>,
    owed: Arc<AtomicUsize>,
    on_lost: Box<dyn Fn(String) + Send>,
) {
    // wgpu's GL backend holds its context lock for the whole of a blocking
    // wait, and other threads' GL calls give up on that lock after a few
    // seconds (a panic inside wgpu): on GL this thread polls without
    // blocking and waits on its channel between polls.
    let blocking = device.adapter_info().backend != wgpu::Backend::Gl;
    let mut subs: VecDeque<wgpu::SubmissionIndex> = VecDeque::new();
    let take = |k: Kick, subs: &mut VecDeque<wgpu::SubmissionIndex>| {
        if let Kick::Submitted(i) = k {
            subs.push_back(i)
        }
    };
    // A panic inside wgpu must not leave the runtime waiting for callbacks
    // that will never run: it is reported, and the runtime fails what the
    // GPU still held.
    let poll = |kind: wgpu::PollType| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device.poll(kind))).map_err(|p| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into())
        })
    };
    while let Ok(k) = rx.recv() {
        take(k, &mut subs);
        loop {
            while let Ok(k) = rx.try_recv() {
                take(k, &mut subs);
            }
            let next = if blocking { subs.pop_front() } else { None };
            let outcome = match next {
                // Blocks until that submission is done and runs its callbacks.
                Some(index) => poll(wgpu::PollType::Wait {
                    submission_index: Some(index),
                    timeout: None,
                }),
                None if owed.load(Ordering::Acquire) == 0 => {
                    subs.clear();
                    break;
                }
                None => poll(wgpu::PollType::Poll),
            };
            if let Err(what) = outcome {
                on_lost(what);
                return;
            }
            if blocking && !subs.is_empty() {
                continue;
            }
            if owed.load(Ordering::Acquire) == 0 {
                subs.clear();
                break;
            }
            // Work still owed (a mapping on a buffer the application's own
            // submission holds, or any work on GL): wait for news, briefly.
            match rx.recv_timeout(Duration::from_micros(200)) {
                Ok(k) => take(k, &mut subs),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}
