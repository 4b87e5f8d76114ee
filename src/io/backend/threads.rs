//! The `pread` thread pool: the fallback where io_uring is unavailable (old
//! kernels, seccomp sandboxes, every OS but Linux) or asked for with
//! `BackendKind::Threads`. Each read is one positioned read
//! ([`super::read_at`]: `pread`, or `ReadFile` at an offset on Windows). One
//! pool per device worker, as many threads as the queue depth, so the
//! device sees the same number of requests in flight as with io_uring.
//! The io_uring backend hands it its buffered reads too (`uring.rs`), in a
//! pool of at most the core count (page-cache hits are CPU copies), and
//! a read of a mapped file is a copy out of the mapping, not a `pread`
//! (`stream_copy.rs`).

use std::thread::JoinHandle;

use crossbeam::channel::{self, Receiver, Sender};

use super::{errno, read_at, Backend, RawRead, RawResult, Waker};
use crate::io::stream_copy::copy_streaming;

enum Event {
    Done(u64, RawResult),
    Wake,
}

pub(crate) struct ThreadsBackend {
    jobs: Option<Sender<RawRead>>,
    events_tx: Sender<Event>,
    events: Receiver<Event>,
    threads: Vec<JoinHandle<()>>,
    in_flight: usize,
}

impl ThreadsBackend {
    pub(crate) fn new(threads: usize) -> std::io::Result<ThreadsBackend> {
        ThreadsBackend::with_notify(threads, None)
    }

    /// A pool whose threads also call `notify` after each completion (the
    /// io_uring backend uses it to wake its ring for buffered reads it
    /// hands to a pool).
    pub(crate) fn with_notify(
        threads: usize,
        notify: Option<Waker>,
    ) -> std::io::Result<ThreadsBackend> {
        let (jobs_tx, jobs_rx) = channel::unbounded::<RawRead>();
        let (events_tx, events) = channel::unbounded();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let rx = jobs_rx.clone();
            let tx = events_tx.clone();
            let notify = notify.clone();
            let h = std::thread::Builder::new()
                .name(format!("gpustream-pread-{i}"))
                .spawn(move || {
                    while let Ok(r) = rx.recv() {
                        let res = if r.mapped.is_null() {
                            // SAFETY: the worker keeps fd open and dest
                            // valid for len bytes until this completion is
                            // reaped.
                            unsafe { read_at(r.fd, r.dest, r.len as usize, r.offset) }
                        } else {
                            // SAFETY: the worker keeps the file (so its
                            // mapping, `mapped..+len`) and `dest..+len`
                            // valid, and dest untouched by anyone else,
                            // until this completion is reaped; a read-only
                            // file mapping never overlaps a destination.
                            unsafe { copy_streaming(r.dest, r.mapped, r.len as usize) };
                            Ok(r.len as usize)
                        };
                        if tx.send(Event::Done(r.tag, res)).is_err() {
                            break;
                        }
                        if let Some(n) = &notify {
                            n();
                        }
                    }
                })?;
            handles.push(h);
        }
        Ok(ThreadsBackend {
            jobs: Some(jobs_tx),
            events_tx,
            events,
            threads: handles,
            in_flight: 0,
        })
    }
}

impl Backend for ThreadsBackend {
    unsafe fn push(&mut self, read: RawRead) {
        self.in_flight += 1;
        let tag = read.tag;
        let sent = self.jobs.as_ref().map(|j| j.send(read).is_ok());
        if sent != Some(true) {
            // Cannot happen while self is alive (the pool holds the
            // receiver); report it as an error rather than losing it.
            let _ = self.events_tx.send(Event::Done(tag, Err(errno::EIO)));
        }
    }

    fn reap(&mut self, wait: bool, out: &mut Vec<(u64, RawResult)>) {
        let take = |e: Event, out: &mut Vec<(u64, RawResult)>, n: &mut usize| {
            if let Event::Done(tag, res) = e {
                *n -= 1;
                out.push((tag, res));
            }
        };
        if wait {
            if let Ok(e) = self.events.recv() {
                take(e, out, &mut self.in_flight);
            }
        }
        while let Ok(e) = self.events.try_recv() {
            take(e, out, &mut self.in_flight);
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn waker(&self) -> Waker {
        let tx = self.events_tx.clone();
        std::sync::Arc::new(move || {
            let _ = tx.send(Event::Wake);
        })
    }
}

impl Drop for ThreadsBackend {
    fn drop(&mut self) {
        self.jobs = None;
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}
