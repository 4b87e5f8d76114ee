//! Files whose bytes arrive on demand: a local cache of an object held
//! elsewhere (object storage) is read like any file, once the bytes a read
//! covers have been fetched into it.
//!
//! The engine asks the file's [`RangeFill`] to make a range present before
//! it queues the read on the file's device; the fill answers once, with a
//! pin that keeps the bytes in place (the cache may not evict them) until
//! the read has completed, or with the error the read completes with.

use std::any::Any;

use super::IoError;

/// Keeps filled bytes in place while a read of them is queued or in flight;
/// dropped after the read's completion has been sent.
pub(crate) type FillPin = Box<dyn Any + Send>;

/// Called exactly once with the outcome of a fill.
pub(crate) type FillDone = Box<dyn FnOnce(Result<FillPin, IoError>) + Send>;

/// One range to make present, and what to call when it is. (Only remote
/// packs, a feature of Linux builds, read the fields.)
#[cfg_attr(not(all(feature = "remote", target_os = "linux")), allow(dead_code))]
pub(crate) struct FillRequest {
    pub(crate) offset: u64,
    pub(crate) len: usize,
    pub(crate) done: FillDone,
}

/// Makes ranges of a file present before the engine reads them.
pub(crate) trait RangeFill: Send + Sync {
    /// Makes each request's `len` bytes at `offset` present in the file
    /// (those that lie in it, in the units the fill keeps: a pack's replica
    /// keeps whole blocks and fills those inside the range), then calls its
    /// `done`. The requests are the ops of one submission, given together
    /// so that neighbouring ranges can be fetched together. It must call
    /// every `done` exactly once, whatever happens, including when the fill
    /// is dropped with work pending: the engine waits for every answer
    /// before it shuts down.
    fn fill(&self, requests: Vec<FillRequest>);
}
