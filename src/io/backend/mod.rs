//! The backends that move bytes: io_uring and a `pread` thread pool, behind
//! one small trait the per-device worker drives. Both report raw results
//! (byte counts or an OS error code); the worker owns retries, short-read
//! continuation and error reporting, so the two behave identically.
//!
//! io_uring exists on Linux only; elsewhere the pool is the one backend,
//! reading with the OS's positioned read (`pread` on unix, `ReadFile` at an
//! offset on Windows, see [`read_at`]).

use std::sync::Arc;

pub(crate) mod threads;
// io_uring is a Linux kernel interface; no other system has it.
#[cfg(target_os = "linux")]
pub(crate) mod uring;

/// The OS handle a read goes to: a descriptor on unix, a file handle on
/// Windows. Borrowed: the worker keeps the file that owns it open.
#[cfg(unix)]
pub(crate) type RawFile = std::os::fd::RawFd;
/// The OS handle a read goes to: a descriptor on unix, a file handle on
/// Windows. Borrowed: the worker keeps the file that owns it open.
#[cfg(windows)]
pub(crate) type RawFile = std::os::windows::io::RawHandle;

/// The OS error codes the worker and the fault injector speak, as
/// [`std::io::Error::raw_os_error`] reports them on this OS, so an error
/// made from one reads as the right [`std::io::ErrorKind`].
#[cfg(unix)]
pub(crate) mod errno {
    pub(crate) const EINTR: i32 = libc::EINTR;
    pub(crate) const EAGAIN: i32 = libc::EAGAIN;
    pub(crate) const EINVAL: i32 = libc::EINVAL;
    pub(crate) const EIO: i32 = libc::EIO;
    pub(crate) const EFAULT: i32 = libc::EFAULT;
}

/// The OS error codes the worker and the fault injector speak, as
/// [`std::io::Error::raw_os_error`] reports them on this OS, so an error
/// made from one reads as the right [`std::io::ErrorKind`]. Windows has no
/// errno: these are its codes that std maps to the same kinds
/// (`Interrupted`, `WouldBlock`, `InvalidInput`; EIO's is a device error).
#[cfg(windows)]
pub(crate) mod errno {
    /// WSAEINTR, which std reads as `ErrorKind::Interrupted`.
    pub(crate) const EINTR: i32 = 10004;
    /// WSAEWOULDBLOCK, which std reads as `ErrorKind::WouldBlock`.
    pub(crate) const EAGAIN: i32 = 10035;
    /// ERROR_INVALID_PARAMETER, which std reads as `ErrorKind::InvalidInput`.
    pub(crate) const EINVAL: i32 = 87;
    /// ERROR_IO_DEVICE: the request could not be performed because of an
    /// I/O device error.
    pub(crate) const EIO: i32 = 1117;
    /// ERROR_NOACCESS: invalid access to a memory location.
    pub(crate) const EFAULT: i32 = 998;
}

/// One positioned read of up to `len` bytes at `offset` of `file` into
/// `dest`: the byte count (0 at the end of the file, fewer than `len` where
/// the OS returns less) or the OS error code.
///
/// # Safety
/// `file` must be open and `dest` valid for writes of `len` bytes, written
/// by nobody else, for the duration of the call.
#[cfg(unix)]
pub(crate) unsafe fn read_at(file: RawFile, dest: *mut u8, len: usize, offset: u64) -> RawResult {
    // SAFETY: forwarded from our caller.
    let n = unsafe { libc::pread(file, dest.cast(), len, offset as i64) };
    if n < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(errno::EIO))
    } else {
        Ok(n as usize)
    }
}

/// One positioned read of up to `len` bytes at `offset` of `file` into
/// `dest`: the byte count (0 at the end of the file, fewer than `len` where
/// the OS returns less) or the OS error code. `seek_read` passes the offset
/// with the read, so reads of one handle from several pool threads do not
/// race on a shared file position.
///
/// # Safety
/// `file` must be open and `dest` valid for writes of `len` initialized
/// bytes (std's `seek_read` takes a `&mut [u8]`; `IoEngine::submit` asks
/// this of its callers on Windows), written by nobody else, for the
/// duration of the call.
#[cfg(windows)]
pub(crate) unsafe fn read_at(file: RawFile, dest: *mut u8, len: usize, offset: u64) -> RawResult {
    use std::os::windows::fs::FileExt;
    use std::os::windows::io::FromRawHandle;
    // SAFETY: the caller keeps the handle open for the call; ManuallyDrop
    // keeps this borrowed `File` from closing it.
    let f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_handle(file) });
    // SAFETY: the caller gives `dest..dest + len`, initialized, to this
    // read alone.
    let buf = unsafe { std::slice::from_raw_parts_mut(dest, len) };
    f.seek_read(buf, offset)
        .map_err(|e| e.raw_os_error().unwrap_or(errno::EIO))
}

/// One read attempt handed to a backend.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawRead {
    /// The descriptor (Windows: handle) to read from.
    pub fd: RawFile,
    /// Identifies the descriptor for registration (file id * 2 + buffered).
    /// Read by io_uring's file table only, which outside Linux is not built.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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
    /// `dest` is the engine's own bounce buffer, not the caller's memory
    /// (the fault injector refuses only the caller's).
    pub bounced: bool,
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

/// A finished attempt: bytes read, or a positive OS error code ([`errno`]).
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
    pub bounced_reads: std::sync::atomic::AtomicU64,
}

/// Whether io_uring can be used in this process (kernel support, seccomp,
/// `io_uring_disabled` sysctl).
#[cfg(target_os = "linux")]
pub(crate) fn uring_available() -> Result<(), std::io::Error> {
    io_uring::IoUring::new(4).map(drop)
}

/// io_uring is Linux's alone: [`crate::io::BackendKind::IoUring`] fails
/// here with this error, and `Auto` takes the thread pool without a notice.
#[cfg(not(target_os = "linux"))]
pub(crate) fn uring_available() -> Result<(), std::io::Error> {
    Err(no_uring())
}

#[cfg(not(target_os = "linux"))]
fn no_uring() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Unsupported, "io_uring is Linux-only")
}

/// An io_uring backend of `queue_depth` for one device worker.
#[cfg(target_os = "linux")]
pub(crate) fn uring(
    queue_depth: usize,
    counters: Arc<Counters>,
) -> std::io::Result<Box<dyn Backend>> {
    Ok(Box::new(uring::UringBackend::new(queue_depth, counters)?))
}

/// No io_uring outside Linux ([`uring_available`] keeps the engine from
/// asking for one there).
#[cfg(not(target_os = "linux"))]
pub(crate) fn uring(
    _queue_depth: usize,
    _counters: Arc<Counters>,
) -> std::io::Result<Box<dyn Backend>> {
    Err(no_uring())
}
