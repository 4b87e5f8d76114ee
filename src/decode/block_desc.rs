//! The block descriptor every decode and copy pass reads.

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
pub struct BlockDesc {
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

impl BlockDesc {
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
