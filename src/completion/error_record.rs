//! The error record: how many requests failed, and the first of them.

use std::path::PathBuf;
use std::sync::Arc;

/// A failed request: the error and everything needed to find the request.
#[derive(Debug, Clone)]
pub struct RequestFailure {
    /// What went wrong.
    pub error: Arc<crate::completion::RequestError>,
    /// The request's source, in words (e.g. "pack 'demo.gspk' asset 'rock' mip 0 tile (1,2)").
    pub source: String,
    /// The request's destination, in words.
    pub destination: String,
    /// The stored (compressed) bytes the request reads.
    pub source_size: u64,
    /// The uncompressed bytes it delivers.
    pub destination_size: u64,
    /// The request's cancellation tag.
    pub tag: u64,
    /// The request's name, if it was given one.
    pub name: Option<String>,
    /// The file it reads from, for file sources.
    pub file: Option<PathBuf>,
}

impl std::fmt::Display for RequestFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(n) = &self.name {
            write!(f, "request '{n}' ")?;
        } else {
            write!(f, "request ")?;
        }
        write!(
            f,
            "({} -> {}, tag {:#x}): {}",
            self.source, self.destination, self.tag, self.error
        )
    }
}

/// DirectStorage's error record: the number of requests that failed since
/// the record was last retrieved, and the first of them in enqueue order.
#[derive(Debug, Clone, Default)]
pub struct ErrorRecord {
    /// Failed requests since the last retrieval.
    pub failure_count: u64,
    /// The first failure in enqueue order among them.
    pub first_failure: Option<Arc<RequestFailure>>,
}
