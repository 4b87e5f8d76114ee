//! Why a request failed (or was refused at enqueue).

use std::path::PathBuf;

use crate::codec::CodecError;
use crate::destinations::texture::TextureRegionError;

/// Why a request failed. Validation errors come back from `enqueue`; the
/// rest arrive through the status array, the error record and the failure
/// callback.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The pack refused: no such asset or tile, a block failing its checksum
    /// or decode (the error names asset, block and offset).
    #[error(transparent)]
    Pack(#[from] crate::pack::PackError),
    /// A read failed (the error names file, offset, length and OS error).
    #[error(transparent)]
    Io(std::sync::Arc<crate::io::IoError>),
    /// The file ended before the block: it was truncated after the pack was
    /// opened.
    #[error(
        "{file}: block {block} at offset {offset} needs {needed} bytes but the read returned {got}"
    )]
    ShortRead {
        /// The file.
        file: PathBuf,
        /// The block, in words.
        block: String,
        /// The block's offset.
        offset: u64,
        /// Bytes needed.
        needed: u64,
        /// Bytes read.
        got: u64,
    },
    /// A memory source did not decode.
    #[error("memory source: {0}")]
    Codec(#[source] CodecError),
    /// The GPU decoder flagged a block as malformed.
    #[error("GPU LZ4 decode of {block} (offset {offset}) failed: {reason}")]
    GpuDecode {
        /// The block, in words.
        block: String,
        /// Its file offset (0 for memory sources).
        offset: u64,
        /// The decoder's reason code, in words.
        reason: String,
    },
    /// The destination cannot hold the data.
    #[error("destination too small: needs {needed} bytes at offset {offset}, has {have}")]
    DestinationTooSmall {
        /// Bytes the request delivers (rounded up to 4 for buffers).
        needed: u64,
        /// Where in the destination.
        offset: u64,
        /// The destination's size.
        have: u64,
    },
    /// A buffer destination lacks `COPY_DST` or has an offset that is not a
    /// multiple of 4.
    #[error("buffer destination unusable: {0}")]
    BadBuffer(String),
    /// A texture destination cannot take the data.
    #[error(transparent)]
    Texture(#[from] TextureRegionError),
    /// Another request in flight writes an overlapping range of the same
    /// host memory.
    #[error("host memory range {range:?} overlaps a request in flight writing {busy:?}")]
    DestinationBusy {
        /// The range asked for.
        range: std::ops::Range<usize>,
        /// The range in flight.
        busy: std::ops::Range<usize>,
    },
    /// The request needs more staging memory than the runtime has.
    #[error(
        "staging buffer too small: the request needs {needed} bytes, the staging chunk has {have}"
    )]
    StagingTooSmall {
        /// Bytes needed at once.
        needed: u64,
        /// Bytes available.
        have: u64,
    },
    /// A GPU destination on a runtime created without a device.
    #[error("this runtime has no GPU device, so it can only deliver into host memory")]
    NoGpu,
    /// The request's source kind differs from the queue's.
    #[error("the queue takes {queue} sources, the request has a {request} source")]
    WrongSourceKind {
        /// What the queue takes.
        queue: &'static str,
        /// What the request has.
        request: &'static str,
    },
    /// A source the request form does not allow (e.g. a blob range past the
    /// blob's end, a texture request on a blob).
    #[error("invalid source: {0}")]
    InvalidSource(String),
    /// The request was cancelled (never reported as a failure).
    #[error("the request was cancelled")]
    Cancelled,
    /// A bug inside the runtime (its dispatcher panicked); the request was
    /// failed rather than left hanging.
    #[error("internal error: {0}")]
    Internal(String),
    /// The runtime shut down before the request could run.
    #[error("the runtime shut down before the request ran")]
    ShutDown,
}
