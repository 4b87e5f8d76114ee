//! The I/O engine: bytes off the disk into caller-owned memory.
//!
//! - Two backends with the same semantics: io_uring ([`BackendKind::IoUring`],
//!   many reads per `io_uring_enter`, registered files; Linux only) and a
//!   `pread` thread pool ([`BackendKind::Threads`]; positioned `ReadFile`
//!   on Windows), chosen by [`BackendKind::Auto`] or named in
//!   [`IoConfig::backend`].
//! - Files open with O_DIRECT where the filesystem allows (`IoFile`), so
//!   the page cache neither flatters benchmarks nor costs a copy (macOS:
//!   `F_NOCACHE`; Windows: buffered).
//! - One worker per physical disk sorts pending reads by their FIEMAP
//!   position and serves priorities by an aging rule (see `sched.rs` and
//!   docs/io.md), keeping up to the queue depth in flight. Outside Linux a
//!   worker serves a filesystem (a volume on Windows) and sorts by file
//!   offset.
//! - `plan_reads` coalesces nearby ranges, `align_range` rounds a range
//!   to the direct-I/O alignment.
//! - `FaultConfig` (public with the `tools` feature) wraps either backend
//!   in a seeded fault injector.
//!
//! Every request submitted completes exactly once. Reading past the end of
//! the file is not an error: the completion carries the number of bytes
//! that exist (less than asked, possibly 0), so a caller that needs all of
//! them compares the count. Failures are typed [`IoError`]s naming the file,
//! offset and length.

mod backend;
// Parts of the engine only the tools use (`internals`) are dead without it.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
mod buf;
// Which device a file is on, and its physical extents: the engine's, and
// the tools' (`internals`) for reading a directory in disk order.
#[cfg(feature = "internals")]
pub mod device;
#[cfg(not(feature = "internals"))]
mod device;
// Parts of the engine only the tools use (`internals`) are dead without it.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
mod engine;
mod error;
mod fault;
#[cfg(feature = "internals")]
pub mod fiemap;
#[cfg(not(feature = "internals"))]
mod fiemap;
// Parts of the engine only the tools use (`internals`) are dead without it.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
mod file;
mod fill;
// The mapping's SIGBUS handling is written against Linux's signal and
// fault behaviour (`mapping.rs`); elsewhere buffered files are read with
// positioned reads.
#[cfg(target_os = "linux")]
mod mapping;
mod plan;
mod sched;
mod stream_copy;
// Parts of the engine only the tools use (`internals`) are dead without it.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
mod worker;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam::channel::{self, Sender};

pub use error::IoError;
pub use file::OpenMode;
pub(crate) use fill::{FillDone, FillRequest, RangeFill};
pub(crate) use stream_copy::copy_streaming;
// The raw read engine below the runtime, with its buffers, planner and
// fault injection: public with `internals` for the sweep, the benchmarks
// and the tests; an engine reads through the runtime's queues.
#[cfg(feature = "internals")]
pub use {
    buf::{AlignedBuf, DEFAULT_BUF_ALIGN},
    device::DeviceId,
    engine::{IoEngine, ReadCompletion, ReadOp, ReadSlice},
    fault::FaultConfig,
    file::{IoFile, PhysKey},
    plan::{align_range, plan_reads, ReadRun, RunPart},
    sched::AGE_STEP,
};
#[cfg(not(feature = "internals"))]
#[allow(unused_imports)]
pub(crate) use {
    buf::{AlignedBuf, DEFAULT_BUF_ALIGN},
    engine::{IoEngine, ReadCompletion, ReadOp, ReadSlice},
    fault::FaultConfig,
    file::{IoFile, PhysKey},
    plan::{align_range, plan_reads},
};

use backend::{Backend, Counters};
use std::sync::atomic::Ordering::Relaxed;

/// Which backend moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// io_uring when the kernel allows it, the thread pool otherwise (with a
    /// notice). The library reads no environment: an application that wants
    /// a switch of its own sets [`IoConfig::backend`] (the `gpustream` tool
    /// reads `GPUSTREAM_IO` for its commands).
    #[default]
    Auto,
    /// io_uring; `IoEngine::new` fails where it is unavailable.
    IoUring,
    /// The `pread` thread pool.
    Threads,
}

impl std::str::FromStr for BackendKind {
    type Err = String;

    /// `auto`, `io_uring` or `threads` (any case).
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(BackendKind::Auto),
            "io_uring" | "uring" => Ok(BackendKind::IoUring),
            "threads" => Ok(BackendKind::Threads),
            other => Err(format!(
                "unknown I/O backend {other:?}: expected auto, io_uring or threads"
            )),
        }
    }
}

/// Request priority. Higher classes go first; lower ones age into higher
/// ones so they are never starved (see `AGE_STEP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Priority {
    /// Background work (prefetch).
    Low,
    /// The default.
    #[default]
    Normal,
    /// Needed soon.
    High,
    /// Needed for the next frame.
    Realtime,
}

/// Engine settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IoConfig {
    /// Which backend to use.
    pub backend: BackendKind,
    /// Reads kept in flight per device (default 32; the seeds recommend
    /// 16-32).
    pub queue_depth: usize,
    /// The largest read `IoEngine::read_ranges` coalesces ranges into
    /// (default 1 MiB).
    pub max_read: usize,
    /// The most bytes nobody asked for that coalescing may read over to
    /// join two ranges (default 64 KiB).
    pub max_overread: usize,
    /// Sort pending reads by physical position (default on). Off gives
    /// FIFO order within a priority, which the sweep uses to measure random
    /// access as the application issued it.
    pub sort_by_position: bool,
    /// Wrap the backend in the seeded fault injector (tests; public with
    /// the `internals` feature).
    #[cfg(feature = "internals")]
    pub fault: Option<FaultConfig>,
    /// See above.
    #[cfg(not(feature = "internals"))]
    pub(crate) fault: Option<FaultConfig>,
}

/// Chained setters, one per field: `IoConfig` is `#[non_exhaustive]`, so
/// code outside the crate starts from its default (or constructor) and
/// sets what it changes, and new fields never break it.
impl IoConfig {
    /// Sets [`backend`](Self::backend).
    pub fn with_backend(mut self, backend: BackendKind) -> Self {
        self.backend = backend;
        self
    }

    /// Sets [`queue_depth`](Self::queue_depth).
    pub fn with_queue_depth(mut self, queue_depth: usize) -> Self {
        self.queue_depth = queue_depth;
        self
    }

    /// Sets [`max_read`](Self::max_read).
    pub fn with_max_read(mut self, max_read: usize) -> Self {
        self.max_read = max_read;
        self
    }

    /// Sets [`max_overread`](Self::max_overread).
    pub fn with_max_overread(mut self, max_overread: usize) -> Self {
        self.max_overread = max_overread;
        self
    }

    /// Sets [`sort_by_position`](Self::sort_by_position).
    pub fn with_sort_by_position(mut self, sort_by_position: bool) -> Self {
        self.sort_by_position = sort_by_position;
        self
    }

    #[cfg(feature = "internals")]
    /// Sets [`fault`](Self::fault).
    pub fn with_fault(mut self, fault: Option<FaultConfig>) -> Self {
        self.fault = fault;
        self
    }
}

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            backend: BackendKind::Auto,
            queue_depth: 32,
            max_read: 1 << 20,
            max_overread: 64 << 10,
            sort_by_position: true,
            fault: None,
        }
    }
}

/// The largest queue depth accepted (io_uring rings are sized from it).
pub const MAX_QUEUE_DEPTH: usize = 4096;

/// What the engine has done so far (all devices together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Read attempts that finished (a continued short read counts twice).
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Attempts that returned fewer bytes than asked (and were continued,
    /// or were the end of the file).
    pub short_reads: u64,
    /// EINTR/EAGAIN answers that were retried.
    pub retries: u64,
    /// io_uring reads into registered memory (see
    /// `IoEngine::register_memory`).
    pub fixed_buffer_reads: u64,
    /// io_uring reads through a registered file.
    pub fixed_file_reads: u64,
    /// Reads of a buffered file served by copying out of its mapping
    /// (`IoFile::map_for_reads`) instead of `pread`.
    pub mapped_reads: u64,
    /// `io_uring_enter` calls (submissions and waits together).
    pub enters: u64,
    /// Direct reads the kernel refused with EFAULT (a destination it cannot
    /// pin for DMA, such as a GPU's write-combined mapping), then read
    /// through a bounce buffer and copied: one per read, however many
    /// attempts it took.
    pub bounced_reads: u64,
}
