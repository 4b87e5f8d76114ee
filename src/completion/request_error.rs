//! Why a request failed (or was refused at enqueue).

use std::path::PathBuf;

use crate::codec::CodecError;
use crate::decode::gpu::BlockCheck;
use crate::decode::{GDeflateStatus, Lz4Status};
use crate::destinations::texture::TextureRegionError;
use crate::pack::AssetKind;

/// Why a request failed. Validation errors come back from `enqueue`; the
/// rest arrive through the status array and the error record.
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
    /// A GPU pass flagged a block as malformed.
    #[error("GPU decode of {block} (offset {offset}) failed: {failure}")]
    GpuDecode {
        /// The block, in words.
        block: String,
        /// Its file offset (0 for memory sources).
        offset: u64,
        /// Which pass flagged it, and its status word decoded.
        failure: GpuDecodeFailure,
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
    BadBuffer(BufferProblem),
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
    #[error("staging buffer too small: the request needs {needed} bytes at once, staging can hold {have}")]
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
        queue: SourceKind,
        /// What the request has.
        request: SourceKind,
    },
    /// A source the request form does not allow (e.g. a blob range past the
    /// blob's end, a texture request on a blob).
    #[error("invalid source: {0}")]
    InvalidSource(SourceProblem),
    /// The request was cancelled (never reported as a failure).
    #[error("the request was cancelled")]
    Cancelled,
    /// The GPU device was lost (destroyed by the application, reset by the
    /// driver, or failing under the runtime) before the request's writes
    /// landed; every request bound for the GPU from then on fails the same
    /// way. Requests into host memory are unaffected.
    #[error("the GPU device was lost: {reason}")]
    DeviceLost {
        /// What wgpu or the driver said.
        reason: String,
    },
    /// A bug inside the runtime (its dispatcher panicked); the request was
    /// failed rather than left hanging.
    #[error("internal error: {0}")]
    Internal(String),
    /// The runtime shut down before the request could run.
    #[error("the runtime shut down before the request ran")]
    ShutDown,
}

/// Which GPU pass flagged a block, with the status it wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GpuDecodeFailure {
    /// The crc32c pass could not check the block (a descriptor it refused);
    /// a checksum that disagrees is reported as a pack error instead.
    #[error("checksum pass: {0}")]
    Checksum(BlockCheck),
    /// The LZ4 decode pass.
    #[error("LZ4 decode: {0}")]
    Lz4(Lz4Status),
    /// The stored-copy pass (uncompressed blocks).
    #[error("stored copy: {0}")]
    StoredCopy(Lz4Status),
    /// The GDeflate decode pass.
    #[error("GDeflate decode: {0}")]
    GDeflate(GDeflateStatus),
}

impl GpuDecodeFailure {
    /// The pass's status, for the LZ4 and stored-copy passes.
    pub fn status(&self) -> Option<Lz4Status> {
        match self {
            GpuDecodeFailure::Lz4(s) | GpuDecodeFailure::StoredCopy(s) => Some(*s),
            GpuDecodeFailure::Checksum(_) | GpuDecodeFailure::GDeflate(_) => None,
        }
    }

    /// Whether the pass never ran for the block (its status word kept the
    /// zero it was cleared to).
    pub fn not_run(&self) -> bool {
        match self {
            GpuDecodeFailure::GDeflate(s) => *s == GDeflateStatus::NotRun,
            _ => self.status() == Some(Lz4Status::NotRun),
        }
    }
}

/// Why a buffer destination cannot take a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BufferProblem {
    /// The buffer was created without `COPY_DST`.
    #[error("the buffer lacks COPY_DST usage")]
    NoCopyDst,
    /// Buffer copies start at a multiple of 4 bytes.
    #[error("offset {offset} is not a multiple of 4")]
    UnalignedOffset {
        /// The destination offset.
        offset: u64,
    },
    /// A blob range copied into a buffer starts at a multiple of 4 bytes.
    #[error("a blob range into a buffer must start at a multiple of 4, not {start}")]
    UnalignedRange {
        /// The range's start in the blob.
        start: u64,
    },
}

/// Why a source does not fit the request it is in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceProblem {
    /// A blob or memory source sent to a texture without an extent.
    #[error("a blob or memory source needs a memory or buffer destination, or a texture destination with an extent")]
    NeedsLinearDestination,
    /// The asset is of another kind than the request form needs.
    #[error("asset '{asset}' is not a {expected}")]
    WrongAssetKind {
        /// The asset's name.
        asset: String,
        /// What the request form needs.
        expected: AssetKind,
    },
    /// A blob range past the blob's end.
    #[error("range {range:?} is outside blob '{asset}' of {size} bytes")]
    RangeOutsideBlob {
        /// The blob's name.
        asset: String,
        /// The range asked for.
        range: std::ops::Range<u64>,
        /// The blob's size.
        size: u64,
    },
    /// A texture format the runtime cannot copy region by region.
    #[error("format {format:?} cannot be streamed")]
    UnstreamableFormat {
        /// The format.
        format: wgpu::TextureFormat,
    },
    /// The source holds another number of bytes than the texture region needs.
    #[error("{source_kind} holds {have} bytes, the region needs {needed}")]
    RegionSize {
        /// "tile block" or "memory source".
        source_kind: &'static str,
        /// Bytes the source holds.
        have: u64,
        /// Bytes the region needs.
        needed: u64,
    },
    /// Packed mips are delivered to origin (0, 0) of their first mip.
    #[error("packed mips go to origin (0,0)")]
    PackedMipsOrigin,
    /// A packed mip reaches past the end of the packed stream (a malformed pack).
    #[error("packed mip {mip} reaches byte {end} of a {stream}-byte packed stream")]
    PackedMipOverrun {
        /// The mip.
        mip: u8,
        /// Where it ends.
        end: u64,
        /// The stream's length.
        stream: u64,
    },
    /// A packed-mips block lands past the end of its stream (a malformed pack).
    #[error("packed mip block at stream byte {offset} overruns its {stream}-byte stream")]
    PackedBlockOverrun {
        /// Where the block lands in the stream.
        offset: u64,
        /// The stream's length.
        stream: u64,
    },
    /// An asset id the pack does not have (from another pack, or made up).
    #[error("{}: no asset #{asset} (the pack has {count})", pack.display())]
    NoSuchAsset {
        /// The id.
        asset: u32,
        /// The pack.
        pack: std::path::PathBuf,
        /// How many assets the pack has.
        count: usize,
    },
    /// A memory source into a texture says how large its region is.
    #[error("a memory source into a texture needs the extent")]
    MissingExtent,
}

/// What a queue reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum SourceKind {
    /// Pack files.
    #[default]
    File,
    /// Memory.
    Memory,
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SourceKind::File => "file",
            SourceKind::Memory => "memory",
        })
    }
}
