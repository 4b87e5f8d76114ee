//! Decoding blocks: the GPU LZ4 decoder (`gpu`) and its Rust twin
//! (`cpu_twin`), which share the block descriptor and the status codes
//! defined here.
//!
//! The shader `shaders/lz4_decode.wgsl`, the twin
//! `cpu_twin::lz4_decode` and the pipeline `gpu::Lz4DecodePipeline` carry the
//! same name and the same loop structure; the twin is the executable spec the
//! tests hold the shader to.

mod block_desc;
// The decoders' CPU twins, GPU pipelines and status-word codes: public with
// `internals` for the tools, tests, fuzz targets and benchmarks. An engine
// meets decoding through the runtime, and its outcomes as the statuses in
// a request's error.
#[cfg(feature = "internals")]
pub mod cpu_twin;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod cpu_twin;
#[cfg(feature = "internals")]
pub mod gdeflate_status;
#[cfg(not(feature = "internals"))]
pub(crate) mod gdeflate_status;
#[cfg(feature = "internals")]
pub mod gpu;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod gpu;
#[cfg(feature = "internals")]
pub mod status_code;
#[cfg(not(feature = "internals"))]
pub(crate) mod status_code;

#[cfg(feature = "internals")]
pub use block_desc::BlockDesc;
#[cfg(not(feature = "internals"))]
pub(crate) use block_desc::BlockDesc;
pub use gdeflate_status::GDeflateStatus;
// What an engine chooses or learns about the GPU decoders: which GDeflate
// decoder (and the device request that enables the driver's), and which
// LZ4 shader variant runs.
pub use gpu::driver_gdeflate::{
    request_device, DeviceOpenError, GDeflateDecoderChoice, GDeflateDecoderKind,
    GDeflateDecoderPreference,
};
pub use gpu::lz4_decode::Lz4DecodePath;

/// The outcome of decoding one LZ4 block, shared by the shader and the
/// twin. Every error names the position in the compressed block (bytes
/// from its start) where the decoder stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Lz4Status {
    /// Decoded to exactly the declared size.
    #[error("ok")]
    Ok,
    /// The block was not decoded (its status word was never written).
    #[error("block was not decoded")]
    NotRun,
    /// The descriptor does not fit the bound buffers or breaks the layout
    /// rules of `BlockDesc`.
    #[error("invalid block descriptor")]
    BadDescriptor,
    /// The stream ends inside a sequence.
    #[error("truncated LZ4 block at input byte {at}")]
    Truncated {
        /// Input position, from the block start.
        at: u32,
    },
    /// A sequence would write past the declared size.
    #[error("LZ4 block overruns its declared size at input byte {at}")]
    OutputOverrun {
        /// Input position, from the block start.
        at: u32,
    },
    /// A match offset of 0.
    #[error("LZ4 match offset 0 at input byte {at}")]
    ZeroOffset {
        /// Input position, from the block start.
        at: u32,
    },
    /// A match reaching before the start of the block.
    #[error("LZ4 match offset out of range at input byte {at}")]
    OffsetOutOfRange {
        /// Input position, from the block start.
        at: u32,
    },
    /// The stream ended before producing the declared size.
    #[error("LZ4 block ended short of its declared size at input byte {at}")]
    ShortOutput {
        /// Input position, from the block start.
        at: u32,
    },
    /// A status word with a code this version does not know.
    #[error("unknown LZ4 status word {0:#x}")]
    Unknown(u32),
}

impl Lz4Status {
    /// Decodes a status word as the shader writes it (code in bits 0..8,
    /// input position in bits 8..32).
    pub fn from_word(word: u32) -> Self {
        let at = word >> 8;
        match word & 0xff {
            status_code::NOT_RUN if word == 0 => Lz4Status::NotRun,
            status_code::OK if at == 0 => Lz4Status::Ok,
            status_code::BAD_DESCRIPTOR if at == 0 => Lz4Status::BadDescriptor,
            status_code::TRUNCATED => Lz4Status::Truncated { at },
            status_code::OUTPUT_OVERRUN => Lz4Status::OutputOverrun { at },
            status_code::ZERO_OFFSET => Lz4Status::ZeroOffset { at },
            status_code::OFFSET_OUT_OF_RANGE => Lz4Status::OffsetOutOfRange { at },
            status_code::SHORT_OUTPUT => Lz4Status::ShortOutput { at },
            _ => Lz4Status::Unknown(word),
        }
    }

    /// The status word the shader writes for this outcome.
    pub fn to_word(self) -> u32 {
        match self {
            Lz4Status::Ok => status_code::OK,
            Lz4Status::NotRun => status_code::NOT_RUN,
            Lz4Status::BadDescriptor => status_code::BAD_DESCRIPTOR,
            Lz4Status::Truncated { at } => status_code::TRUNCATED | (at << 8),
            Lz4Status::OutputOverrun { at } => status_code::OUTPUT_OVERRUN | (at << 8),
            Lz4Status::ZeroOffset { at } => status_code::ZERO_OFFSET | (at << 8),
            Lz4Status::OffsetOutOfRange { at } => status_code::OFFSET_OUT_OF_RANGE | (at << 8),
            Lz4Status::ShortOutput { at } => status_code::SHORT_OUTPUT | (at << 8),
            Lz4Status::Unknown(word) => word,
        }
    }

    /// Whether the block decoded to its declared size.
    pub fn is_ok(self) -> bool {
        self == Lz4Status::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_round_trip() {
        let all = [
            Lz4Status::Ok,
            Lz4Status::NotRun,
            Lz4Status::BadDescriptor,
            Lz4Status::Truncated { at: 70000 },
            Lz4Status::OutputOverrun { at: 3 },
            Lz4Status::ZeroOffset { at: 0 },
            Lz4Status::OffsetOutOfRange { at: 9 },
            Lz4Status::ShortOutput { at: 1 },
        ];
        for s in all {
            assert_eq!(Lz4Status::from_word(s.to_word()), s, "{s:?}");
        }
        assert_eq!(Lz4Status::from_word(0x1ff), Lz4Status::Unknown(0x1ff));
        assert_eq!(Lz4Status::from_word(0x101), Lz4Status::Unknown(0x101));
    }

    #[test]
    fn padded_extent() {
        let d = BlockDesc::linear(0, 10, 0, 1000).with_rows(64, 256);
        // 15 full rows of 64 and a last row of 40 bytes.
        assert_eq!(d.dst_extent(), Some(15 * 256 + 40));
        assert_eq!(BlockDesc::linear(0, 1, 0, 7).dst_extent(), Some(7));
    }
}
