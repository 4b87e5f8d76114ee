//! Decoding blocks: the GPU LZ4 decoder ([`gpu`]) and its Rust twin
//! (`cpu_twin`), which share the block descriptor and the status codes
//! defined here.
//!
//! The shader `shaders/lz4_decode.wgsl`, the twin
//! `cpu_twin::lz4_decode` and the pipeline `gpu::Lz4DecodePipeline` carry the
//! same name and the same loop structure; the twin is the executable spec the
//! tests hold the shader to.

#[cfg(feature = "internals")]
pub mod cpu_twin;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod cpu_twin;
pub mod gdeflate_status;
pub mod gpu;

pub use gdeflate_status::GDeflateStatus;

use bytemuck::{Pod, Zeroable};

/// One block of a decode batch, as the shader reads it from the descriptor
/// table (8 little-endian `u32`, 32 bytes).
///
/// `src_offset` may be any byte offset into the input binding;
/// `dst_offset` must be a multiple of 4. With `row_bytes == 0` the output is
/// linear: byte `i` lands at `dst_offset + i`. Otherwise output row `r` (of
/// `row_bytes` bytes; the last row may be shorter) lands at
/// `dst_offset + r * row_pitch`, the layout `copy_buffer_to_texture` needs
/// with 256-byte-aligned rows; `row_bytes` and `row_pitch` must then be
/// multiples of 4 with `row_pitch >= row_bytes`.
///
/// The output ranges of the blocks of one batch must not overlap (the
/// shader does not check it: `gpu::validate_descs` does).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Lz4BlockDesc {
    /// Byte offset of the compressed block in the input binding.
    pub src_offset: u32,
    /// Compressed size in bytes.
    pub src_size: u32,
    /// Byte offset of the first output byte in the output binding (multiple of 4).
    pub dst_offset: u32,
    /// Uncompressed size in bytes (at most [`crate::MAX_BLOCK_SIZE`]).
    pub dst_size: u32,
    /// Bytes per output row, or 0 for linear output.
    pub row_bytes: u32,
    /// Bytes from one output row start to the next (ignored when linear).
    pub row_pitch: u32,
    /// Reserved, write 0.
    pub reserved: [u32; 2],
}

impl Lz4BlockDesc {
    /// A linear block: `src_size` bytes at `src_offset` decode to `dst_size`
    /// bytes at `dst_offset`.
    pub fn linear(src_offset: u32, src_size: u32, dst_offset: u32, dst_size: u32) -> Self {
        Self {
            src_offset,
            src_size,
            dst_offset,
            dst_size,
            ..Self::default()
        }
    }

    /// The same block with its output rows padded: rows of `row_bytes`
    /// bytes, `row_pitch` bytes apart.
    pub fn with_rows(self, row_bytes: u32, row_pitch: u32) -> Self {
        Self {
            row_bytes,
            row_pitch,
            ..self
        }
    }

    /// The output bytes the block spans, from `dst_offset` to one past its
    /// last byte (padding between rows included), or `None` on overflow.
    pub fn dst_extent(&self) -> Option<u64> {
        if self.row_bytes == 0 || self.dst_size == 0 {
            return Some(self.dst_size as u64);
        }
        let last_row = (self.dst_size as u64 - 1) / self.row_bytes as u64;
        let last_len = self.dst_size as u64 - last_row * self.row_bytes as u64;
        last_row
            .checked_mul(self.row_pitch as u64)
            .and_then(|v| v.checked_add(last_len))
    }
}

/// Status codes, as the shader writes them in the low 8 bits of a block's
/// status word.
pub mod status_code {
    /// Never written by the shader: the block was not decoded (the status
    /// buffer keeps the zero it was cleared to).
    pub const NOT_RUN: u32 = 0;
    /// Decoded to exactly its declared size.
    pub const OK: u32 = 1;
    /// The descriptor is invalid for the bound buffers.
    pub const BAD_DESCRIPTOR: u32 = 2;
    /// The stream ends inside a sequence.
    pub const TRUNCATED: u32 = 3;
    /// A sequence would write past the declared size.
    pub const OUTPUT_OVERRUN: u32 = 4;
    /// A match offset of 0.
    pub const ZERO_OFFSET: u32 = 5;
    /// A match reaching before the start of the block.
    pub const OFFSET_OUT_OF_RANGE: u32 = 6;
    /// The stream ended before producing the declared size.
    pub const SHORT_OUTPUT: u32 = 7;
}

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
    /// rules of [`Lz4BlockDesc`].
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
        let d = Lz4BlockDesc::linear(0, 10, 0, 1000).with_rows(64, 256);
        // 15 full rows of 64 and a last row of 40 bytes.
        assert_eq!(d.dst_extent(), Some(15 * 256 + 40));
        assert_eq!(Lz4BlockDesc::linear(0, 1, 0, 7).dst_extent(), Some(7));
    }
}
