//! Twin of `shaders/stored_copy.wgsl`: one stored block (codec `none`)
//! copied the way one workgroup of the shader copies it, on the same 32-bit
//! word buffers.
//!
//! The functions mirror the shader's one for one (`input_word`,
//! `input_vec4`, `copy_row`, `stored_copy`). The lanes become a loop over
//! lane indices: every output word is written by exactly one lane and no
//! lane reads a word another lane writes, so any order gives the shader's
//! result.

use crate::decode::{status_code, BlockDesc};
use crate::MAX_BLOCK_SIZE;

/// Lanes per workgroup, as the pipeline sets the shader's `WG`.
pub const WORKGROUP_SIZE: u32 = 64;

struct Buffers<'a> {
    input: &'a [u32],
    output: &'a mut [u32],
}

impl Buffers<'_> {
    /// Four input bytes at any byte address; words past the binding read 0.
    fn input_word(&self, addr: u32) -> u32 {
        let i = (addr >> 2) as usize;
        let shift = (addr & 3) * 8;
        let lo = self.input[i];
        if shift == 0 {
            return lo;
        }
        let hi = self.input.get(i + 1).copied().unwrap_or(0);
        (lo >> shift) | (hi << (32 - shift))
    }

    /// Sixteen input bytes at any byte address, all inside the binding.
    fn input_vec4(&self, addr: u32) -> [u32; 4] {
        let i = (addr >> 2) as usize;
        let shift = (addr & 3) * 8;
        let w = &self.input[i..i + 4];
        if shift == 0 {
            return [w[0], w[1], w[2], w[3]];
        }
        let w4 = self.input[i + 4];
        let back = 32 - shift;
        [
            (w[0] >> shift) | (w[1] << back),
            (w[1] >> shift) | (w[2] << back),
            (w[2] >> shift) | (w[3] << back),
            (w[3] >> shift) | (w4 << back),
        ]
    }

    /// One lane's share of one row (see the shader's `copy_row`).
    fn copy_row(&mut self, src: u32, dst_word: u32, len: u32, lane: u32) {
        let full = len >> 2;
        let head = ((4 - (dst_word & 3)) & 3).min(full);
        let units = (full - head) >> 2;
        let tail_start = head + units * 4;
        let tail = full - tail_start;

        let mut u = lane;
        while u < units {
            let j = head + u * 4;
            // The shader's output4[(dst_word + j) >> 2]: four aligned words.
            let at = ((dst_word + j) >> 2) as usize * 4;
            let v = self.input_vec4(src + j * 4);
            self.output[at..at + 4].copy_from_slice(&v);
            u += WORKGROUP_SIZE;
        }
        if lane < head {
            self.output[(dst_word + lane) as usize] = self.input_word(src + lane * 4);
        }
        if lane >= 4 && lane - 4 < tail {
            let j = tail_start + lane - 4;
            self.output[(dst_word + j) as usize] = self.input_word(src + j * 4);
        }
        let rem = len & 3;
        if lane == 8 && rem != 0 {
            let w = (dst_word + full) as usize;
            let mask = (1u32 << (rem * 8)) - 1;
            self.output[w] = (self.output[w] & !mask) | (self.input_word(src + full * 4) & mask);
        }
    }
}

/// The shader's descriptor check: `Some((row_bytes, pitch))` when the block
/// may run, with a linear block as one row of its whole size.
fn check_desc(desc: &BlockDesc, in_words: usize, out_words: usize) -> Option<(u32, u32)> {
    // The shader computes these in u32 (bindings are below 4 GiB).
    let in_bytes = (in_words as u64 * 4).min(u32::MAX as u64 & !3) as u32;
    let out_bytes = (out_words as u64 * 4).min(u32::MAX as u64 & !3) as u32;
    let ok = desc.dst_size as usize <= MAX_BLOCK_SIZE
        && desc.src_size == desc.dst_size
        && desc.dst_offset & 3 == 0
        && desc.src_size <= in_bytes
        && desc.src_offset <= in_bytes - desc.src_size
        && desc.dst_offset <= out_bytes;
    if !ok {
        return None;
    }
    if desc.row_bytes == 0 {
        return (desc.dst_size <= out_bytes - desc.dst_offset).then_some((desc.dst_size, 0));
    }
    if desc.row_bytes & 3 != 0 || desc.row_pitch & 3 != 0 || desc.row_pitch < desc.row_bytes {
        return None;
    }
    if desc.dst_size > 0 {
        let last_row = (desc.dst_size - 1) / desc.row_bytes;
        let last_len = desc.dst_size - last_row * desc.row_bytes;
        let room = out_bytes - desc.dst_offset;
        let fits =
            last_len <= room && (last_row == 0 || desc.row_pitch <= (room - last_len) / last_row);
        if !fits {
            return None;
        }
    }
    Some((desc.row_bytes, desc.row_pitch))
}

/// Copies one stored block as the shader's workgroup does and returns its
/// status word (`OK`, or `BAD_DESCRIPTOR` with nothing written).
pub fn stored_copy(desc: &BlockDesc, input: &[u32], output: &mut [u32]) -> u32 {
    let Some((row_bytes, pitch)) = check_desc(desc, input.len(), output.len()) else {
        return status_code::BAD_DESCRIPTOR;
    };
    let mut buf = Buffers { input, output };
    for lane in 0..WORKGROUP_SIZE {
        let mut src = desc.src_offset;
        let mut dst_word = desc.dst_offset >> 2;
        let mut left = desc.dst_size;
        while left != 0 {
            let len = row_bytes.min(left);
            buf.copy_row(src, dst_word, len, lane);
            src += len;
            dst_word += pitch >> 2;
            left -= len;
        }
    }
    status_code::OK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_le_bytes(w)
            })
            .collect()
    }

    #[test]
    fn every_offset_and_length_copies_like_memcpy() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 37 + 11) as u8).collect();
        let input = words(&src);
        for src_offset in 0..8u32 {
            for len in 0..200u32 {
                for dst_offset in [0u32, 4, 8, 12] {
                    let mut output = vec![0xDEAD_BEEFu32; 80];
                    let d = BlockDesc::linear(src_offset, len, dst_offset, len);
                    assert_eq!(stored_copy(&d, &input, &mut output), status_code::OK);
                    let out: &[u8] = bytemuck::cast_slice(&output);
                    let (a, b) = (dst_offset as usize, (dst_offset + len) as usize);
                    assert_eq!(&out[a..b], &src[src_offset as usize..][..len as usize]);
                    let guard = 0xDEAD_BEEFu32.to_le_bytes();
                    for (i, &byte) in out.iter().enumerate() {
                        if i < a || i >= b {
                            assert_eq!(byte, guard[i & 3], "guard byte {i} ({src_offset}, {len})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn padded_rows_land_at_the_pitch() {
        let src: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let input = words(&src);
        let mut output = vec![0u32; 1024];
        // 10 rows of 36 bytes and a last row of 2, 256 bytes apart.
        let d = BlockDesc::linear(3, 362, 8, 362).with_rows(36, 256);
        assert_eq!(stored_copy(&d, &input, &mut output), status_code::OK);
        let out: &[u8] = bytemuck::cast_slice(&output);
        for r in 0..11usize {
            let len = if r == 10 { 2 } else { 36 };
            let at = 8 + r * 256;
            assert_eq!(&out[at..at + len], &src[3 + r * 36..][..len], "row {r}");
            assert!(out[at + len..at + 256.min(out.len() - at)]
                .iter()
                .take(200)
                .all(|&b| b == 0));
        }
    }

    #[test]
    fn bad_descriptors_write_nothing() {
        let input = vec![1u32; 16];
        let bad = [
            BlockDesc::linear(0, 8, 0, 12),
            BlockDesc::linear(0, 8, 2, 8),
            BlockDesc::linear(60, 8, 0, 8),
            BlockDesc::linear(0, 8, 60, 8),
            BlockDesc::linear(u32::MAX - 3, 8, 0, 8),
            BlockDesc::linear(0, 8, 0, 8).with_rows(6, 8),
            BlockDesc::linear(0, 8, 0, 8).with_rows(8, 4),
            BlockDesc::linear(0, 40, 0, 40).with_rows(4, u32::MAX - 3),
        ];
        for d in bad {
            let mut output = vec![7u32; 16];
            assert_eq!(
                stored_copy(&d, &input, &mut output),
                status_code::BAD_DESCRIPTOR,
                "{d:?}"
            );
            assert!(output.iter().all(|&w| w == 7), "{d:?}");
        }
    }
}
