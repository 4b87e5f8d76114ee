//! The backends that move bytes: io_uring and a `pread` thread pool, behind
//! one small trait the per-device worker drives. Both report raw results
//! (byte counts or errno); the worker owns retries, short-read
//! continuation and error reporting, so the two behave identically.

use std::os::fd::RawFd;
use std::sync::Arc;

pub(crate) mod threads;
pub(crate) mod uring;

/// One read attempt handed to a backend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawRead {
    /// The descriptor to read from.
    pub fd: RawFd,
    /// Identifies the descriptor for registration (file id * 2 + buffered).
    pub fd_key: u64,
    /// File offset.
    pub offset: u64,
    /// Bytes to read (at most [`MAX_ATTEMPT`]).
    pub len: u32,
    /// What offset and length must stay multiples of (1 unless direct), so
    /// the fault injector cuts reads short only where a real disk could.
    pub align: u32,
    /// Where the bytes go.
    pub dest: *mut u8,
    /// Where set, the same `len` bytes in the file's read-only mapping
    /// (buffered files only): the backend copies them from there
    /// (`stream_copy.rs`) instead of reading `fd`. Null: read `fd`.
    pub mapped: *const u8,
    /// The worker's slot for this read, echoed in the completion.
    pub tag: u64,
    /// A stable identity of this attempt (request, position, retry number)
    /// that the fault injector hashes, so its choices do not depend on
    /// thread timing.
    pub ident: u64,
}

// SAFETY: the pointers are only dereferenced by the kernel or a pread
// thread while the worker keeps the request (and so its destination, and
// the file whose mapping `mapped` points into) alive.
unsafe impl Send for RawRead {}

/// The largest single read attempt; longer requests continue like short
/// reads. A multiple of every direct-I/O alignment.
pub(crate) const MAX_ATTEMPT: usize = 1 << 30;

/// A finished attempt: bytes read, or a positive errno.
pub(crate) type RawResult = Result<usize, i32>;

/// Wakes a worker blocked in [`Backend::reap`].
pub(crate) type Waker = Arc<dyn Fn() + Send + Sync>;

/// What the per-device worker needs from a backend.
pub(crate) trait Backend: Send {
    /// Queues one read; it is started at the latest by the next `reap`.
    ///
    /// # Safety
    /// `read.fd` must stay open and `read.dest` valid for `read.len` bytes,
    /// untouched by anyone else, until `reap` returns `read.tag`.
    unsafe fn push(&mut self, read: RawRead);

    /// Starts everything pushed, then appends finished reads to `out`. When
    /// `wait` is set it blocks until at least one read finishes or the
    /// waker is called; otherwise it only collects what is ready.
    fn reap(&mut self, wait: bool, out: &mut Vec<(u64, RawResult)>);

    /// Reads pushed and not yet returned by `reap`.
    fn in_flight(&self) -> usize;

    /// A handle other threads call after queueing work for this worker.
    fn waker(&self) -> Waker;

    /// Memory regions `(address, len)` the caller registered; reads that
    /// land entirely inside one may use it as a fixed buffer. Backends
    /// without the notion ignore it.
    fn set_buffers(&mut self, _regions: &[(usize, usize)]) {}
}

/// Counters the backends and workers keep, read by [`crate::io::IoEngine::stats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub reads: std::sync::atomic::AtomicU64,
    pub bytes: std::sync::atomic::AtomicU64,
    pub short_reads: std::sync::atomic::AtomicU64,
    pub retries: std::sync::atomic::AtomicU64,
    pub fixed_buffer_reads: std::sync::atomic::AtomicU64,
    pub fixed_file_reads: std::sync::atomic::AtomicU64,
    pub mapped_reads: std::sync::atomic::AtomicU64,
    pub enters: std::sync::atomic::AtomicU64,
}

/// Whether io_uring can be used in this process (kernel support, seccomp,
/// `io_uring_disabled` sysctl).
pub(crate) fn uring_available() -> Result<(), std::io::Error> {
    io_uring::IoUring::new(4).map(drop)
}
