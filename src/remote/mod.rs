//! Packs in S3-compatible object storage, read through a local disk cache.
//!
//! A remote pack opens from two ranged GETs (its header, then its table of
//! contents), like a local one from two reads. Its bytes then live in a
//! **replica**: a sparse local file as long as the object, each block at its
//! own offset, so the runtime reads it as an ordinary pack file, through
//! io_uring and O_DIRECT, and checks the pack's checksums as for any pack.
//!
//! - Before a read of the replica is queued, the I/O engine asks the
//!   replica's fetcher (`fetch.rs`) to make the blocks it covers present.
//!   Present blocks answer at once; missing ones are fetched with coalesced
//!   ranged GETs (a bounded number at a time, with the client's retries and
//!   timeouts), checked against their crc32c, and written into the replica.
//!   A fetch that fails completes only the reads that needed it, with a
//!   typed [`IoError::Remote`](crate::io::IoError::Remote) naming the URL
//!   and the range.
//! - The cache (`cache.rs`) keeps at most its byte budget of blocks,
//!   evicting the least recently used by punching holes in the replica.
//!   Blocks a read is waiting for are pinned until it completes.
//! - The cache outlives the process: which blocks are present is written
//!   beside the replica, and a block an earlier process left is checked
//!   against its crc32c on first use, and fetched again if it does not
//!   match.
//!
//! The store is built from the URL and the usual `AWS_*` environment
//! (`AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION`, `AWS_ALLOW_HTTP`, ...), with [`RemoteConfig`] on top.

mod cache;
mod fetch;
#[cfg(feature = "internals")]
pub mod http;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod http;
mod open;
mod store;

use std::path::PathBuf;
use std::time::Duration;

pub use cache::RemoteStats;
pub use open::RemotePack;

/// How a remote pack is fetched and cached.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RemoteConfig {
    /// Where the replica and its index live (created if missing). One
    /// process at a time may use a replica: a second open of the same URL
    /// in the same directory is refused while the first is open.
    pub cache_dir: PathBuf,
    /// The most bytes of blocks the cache keeps on disk (default 4 GiB).
    /// Blocks being read are kept even past it until their reads complete.
    pub cache_bytes: u64,
    /// Ranged GETs in flight at once (default 16).
    pub concurrency: usize,
    /// The largest ranged GET: neighbouring missing blocks are fetched
    /// together up to this many bytes (default 4 MiB).
    pub max_get: usize,
    /// Time allowed for one HTTP request, connection included (default
    /// 30 s).
    pub request_timeout: Duration,
    /// Time allowed to connect (default 5 s).
    pub connect_timeout: Duration,
    /// Retries of a failed request, with exponential backoff (default 3).
    pub retries: usize,
    /// Time after which a request is not retried again (default 30 s).
    pub retry_timeout: Duration,
    /// The S3 endpoint (`http://127.0.0.1:9000`), overriding
    /// `AWS_ENDPOINT`; plain HTTP is allowed when it is given here.
    pub endpoint: Option<String>,
    /// Access key id and secret, overriding `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`.
    pub credentials: Option<(String, String)>,
}

/// Chained setters, one per field: `RemoteConfig` is `#[non_exhaustive]`, so
/// code outside the crate starts from its default (or constructor) and
/// sets what it changes, and new fields never break it.
impl RemoteConfig {
    /// Sets [`cache_dir`](Self::cache_dir).
    pub fn with_cache_dir(mut self, cache_dir: PathBuf) -> Self {
        self.cache_dir = cache_dir;
        self
    }

    /// Sets [`cache_bytes`](Self::cache_bytes).
    pub fn with_cache_bytes(mut self, cache_bytes: u64) -> Self {
        self.cache_bytes = cache_bytes;
        self
    }

    /// Sets [`concurrency`](Self::concurrency).
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Sets [`max_get`](Self::max_get).
    pub fn with_max_get(mut self, max_get: usize) -> Self {
        self.max_get = max_get;
        self
    }

    /// Sets [`request_timeout`](Self::request_timeout).
    pub fn with_request_timeout(mut self, request_timeout: Duration) -> Self {
        self.request_timeout = request_timeout;
        self
    }

    /// Sets [`connect_timeout`](Self::connect_timeout).
    pub fn with_connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// Sets [`retries`](Self::retries).
    pub fn with_retries(mut self, retries: usize) -> Self {
        self.retries = retries;
        self
    }

    /// Sets [`retry_timeout`](Self::retry_timeout).
    pub fn with_retry_timeout(mut self, retry_timeout: Duration) -> Self {
        self.retry_timeout = retry_timeout;
        self
    }

    /// Sets [`endpoint`](Self::endpoint).
    pub fn with_endpoint(mut self, endpoint: Option<String>) -> Self {
        self.endpoint = endpoint;
        self
    }

    /// Sets [`credentials`](Self::credentials).
    pub fn with_credentials(mut self, credentials: Option<(String, String)>) -> Self {
        self.credentials = credentials;
        self
    }
}

impl RemoteConfig {
    /// The defaults above, caching in `cache_dir`.
    pub fn new(cache_dir: impl Into<PathBuf>) -> RemoteConfig {
        RemoteConfig {
            cache_dir: cache_dir.into(),
            cache_bytes: 4 << 30,
            concurrency: 16,
            max_get: 4 << 20,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retries: 3,
            retry_timeout: Duration::from_secs(30),
            endpoint: None,
            credentials: None,
        }
    }
}

/// Why a remote pack could not be opened. Reads that fail later are
/// [`IoError::Remote`](crate::io::IoError::Remote)s of the requests that
/// needed them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The URL or the configuration cannot make a store.
    #[error("{url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A request for the pack's size, header or table of contents failed.
    #[error("fetching {what} of {url}: {reason}")]
    Fetch {
        /// The URL.
        url: String,
        /// What was being fetched, and which bytes.
        what: String,
        /// The client's error.
        reason: String,
    },
    /// The local cache could not be set up.
    #[error("cache {} for {url}: {reason}", path.display())]
    Cache {
        /// The URL.
        url: String,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The object is not a valid pack.
    #[error("{url}: {source}")]
    Pack {
        /// The URL.
        url: String,
        /// What is wrong, naming the replica in place of the object.
        #[source]
        source: crate::pack::PackError,
    },
    /// The object is the head of a striped pack, whose members are files
    /// beside it: stripe a pack over disks, not over objects.
    #[error("{url} is the head of a pack striped over {members} files; object storage serves whole packs")]
    Striped {
        /// The URL.
        url: String,
        /// How many files the pack is striped over.
        members: usize,
    },
}
