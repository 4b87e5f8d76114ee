//! Status codes, as the shader writes them in the low 8 bits of a block's
//! status word.

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
