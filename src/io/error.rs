//! The I/O engine's error type: every variant names the file, and every
//! read error also the offset and length of the request that failed.

use std::path::PathBuf;

/// Why an open, a read or the engine itself failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The file could not be opened (missing, no permission, ...).
    #[error("opening {path}: {source}", path = path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The path exists but is not a regular file (a directory, a socket ...).
    #[error("opening {path}: not a regular file", path = path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A read failed with an OS error (EIO, EBADF, ...). Only this request
    /// fails; the others submitted with it are unaffected.
    #[error("reading {len} bytes at offset {offset} of {path}: {source}", path = path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Offset of the request in the file.
        offset: u64,
        /// Length of the request in bytes.
        len: usize,
        /// How many bytes of the request had arrived before the error.
        done: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// The kernel kept answering EINTR or EAGAIN; the engine gave up after
    /// a bounded number of attempts instead of looping forever.
    #[error("reading {len} bytes at offset {offset} of {path}: still interrupted after {attempts} attempts", path = path.display())]
    RetriesExhausted {
        /// The file.
        path: PathBuf,
        /// Offset of the request.
        offset: u64,
        /// Length of the request.
        len: usize,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The request itself is malformed: its end overflows, or it has a null
    /// destination.
    #[error("reading {len} bytes at offset {offset} of {path}: {reason}", path = path.display())]
    InvalidRange {
        /// The file.
        path: PathBuf,
        /// Offset of the request.
        offset: u64,
        /// Length of the request.
        len: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The I/O backend could not be set up (io_uring refused, threads could
    /// not be spawned).
    #[error("setting up the {backend} I/O backend: {source}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The engine stopped before this request could be read (its worker
    /// failed). Reported rather than losing the request.
    #[error("reading {len} bytes at offset {offset} of {path}: the I/O engine shut down", path = path.display())]
    EngineStopped {
        /// The file.
        path: PathBuf,
        /// Offset of the request.
        offset: u64,
        /// Length of the request.
        len: usize,
    },
    /// The file is a local cache of an object in object storage, and the
    /// bytes this request needs could not be fetched into it (the server
    /// refused or failed, timed out after its retries, or sent bytes that
    /// do not match the pack's checksums). Only this request fails.
    #[error("reading {len} bytes at offset {offset} of {url} (cached in {path}): {reason}", path = path.display())]
    Remote {
        /// The object's URL.
        url: String,
        /// The local cache file.
        path: PathBuf,
        /// Offset of the request in the object.
        offset: u64,
        /// Length of the request.
        len: usize,
        /// What went wrong, with the byte range fetched when it was a fetch.
        reason: String,
    },
}

impl IoError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            IoError::Open { source, .. }
            | IoError::Read { source, .. }
            | IoError::Backend { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// A copy of this error re-targeted at another range of the same file,
    /// used when one coalesced read serves several requesters and each must
    /// get an error naming its own range.
    pub fn for_range(&self, offset: u64, len: usize) -> IoError {
        let copy_source = |s: &std::io::Error| match s.raw_os_error() {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::new(s.kind(), s.to_string()),
        };
        match self {
            IoError::Open { path, source } => IoError::Open {
                path: path.clone(),
                source: copy_source(source),
            },
            IoError::NotAFile { path } => IoError::NotAFile { path: path.clone() },
            IoError::Read { path, source, .. } => IoError::Read {
                path: path.clone(),
                offset,
                len,
                done: 0,
                source: copy_source(source),
            },
            IoError::RetriesExhausted { path, attempts, .. } => IoError::RetriesExhausted {
                path: path.clone(),
                offset,
                len,
                attempts: *attempts,
            },
            IoError::InvalidRange { path, reason, .. } => IoError::InvalidRange {
                path: path.clone(),
                offset,
                len,
                reason,
            },
            IoError::Backend { backend, source } => IoError::Backend {
                backend,
                source: copy_source(source),
            },
            IoError::EngineStopped { path, .. } => IoError::EngineStopped {
                path: path.clone(),
                offset,
                len,
            },
            IoError::Remote {
                url, path, reason, ..
            } => IoError::Remote {
                url: url.clone(),
                path: path.clone(),
                offset,
                len,
                reason: reason.clone(),
            },
        }
    }
}
