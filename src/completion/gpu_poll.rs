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
    /// Starts the poll thread for `device`.
    pub fn spawn(device: wgpu::Device) -> std::io::Result<GpuPoller> {
        let (tx, rx) = crossbeam::channel::unbounded();
        let owed = Arc::new(AtomicUsize::new(0));
        let o = owed.clone();
        let thread = std::thread::Builder::new()
            .name("gpustream-poll".into())
            .spawn(move || poll_loop(device, rx, o))?;
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

fn poll_loop(device: wgpu::Device, rx: Receiver<Kick>, owed: Arc<AtomicUsize>) {
    let mut subs: VecDeque<wgpu::SubmissionIndex> = VecDeque::new();
    let take = |k: Kick, subs: &mut VecDeque<wgpu::SubmissionIndex>| {
        if let Kick::Submitted(i) = k {
            subs.push_back(i)
        }
    };
    while let Ok(k) = rx.recv() {
        take(k, &mut subs);
        loop {
            while let Ok(k) = rx.try_recv() {
                take(k, &mut subs);
            }
            if let Some(index) = subs.pop_front() {
                // Blocks until that submission is done and runs its callbacks.
                let _ = device.poll(wgpu::PollType::Wait {
                    submission_index: Some(index),
                    timeout: None,
                });
                continue;
            }
            if owed.load(Ordering::Acquire) == 0 {
                break;
            }
            let _ = device.poll(wgpu::PollType::Poll);
            if owed.load(Ordering::Acquire) == 0 {
                break;
            }
            // A mapping still owed waits on a buffer busy in a submission we
            // were not told of (the application's): wait for news, briefly.
            match rx.recv_timeout(Duration::from_micros(200)) {
                Ok(k) => take(k, &mut subs),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}
