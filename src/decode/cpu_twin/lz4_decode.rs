//! Twin of `shaders/lz4_decode.wgsl`: one block decoded the way one
//! workgroup of the shader decodes it, on the same 32-bit word buffers.
//!
//! The functions mirror the shader's one for one (`input_word`,
//! `phys_word`, `sequence_word`, `sequence_tail`, ...). The lanes of the
//! cooperative pass become a plain loop over the pass's words: each word is
//! written by exactly one lane and no lane reads a word written in the same
//! pass, so any order gives the shader's result.

use crate::decode::{status_code, BlockDesc, Lz4Status};
use crate::MAX_BLOCK_SIZE;

/// The largest compressed block the decoder takes (the shader's
/// `MAX_SRC_SIZE`): input positions fit the status word's 24 bits, and
/// length sums (at most 255 per input byte) cannot overflow `u32`.
pub const MAX_SRC_SIZE: u32 = 0xff_ffff;

/// Where one block's output goes, in 32-bit words.
#[derive(Clone, Copy)]
pub(super) struct Layout {
    pub(super) word0: u32,
    pub(super) row_words: u32,
    pub(super) pitch_words: u32,
}

/// The state of one sequence's copy pass.
#[derive(Clone, Copy)]
pub(super) struct Sequence {
    pub(super) lit_start: u32,
    pub(super) match_start: u32,
    pub(super) end: u32,
    pub(super) lit_src: u32,
    pub(super) offset: u32,
    pub(super) pending: u32,
}

pub(super) struct Buffers<'a> {
    pub(super) input: &'a [u32],
    pub(super) output: &'a mut [u32],
}

impl Buffers<'_> {
    pub(super) fn input_byte(&self, addr: u32) -> u32 {
        (self.input[(addr >> 2) as usize] >> ((addr & 3) * 8)) & 0xff
    }

    fn input_word(&self, addr: u32) -> u32 {
        let shift = (addr & 3) * 8;
        let lo = self.input[(addr >> 2) as usize];
        if shift == 0 {
            return lo;
        }
        let hi = self.input[(addr >> 2) as usize + 1];
        (lo >> shift) | (hi << (32 - shift))
    }

    fn output_byte(&self, dst: Layout, pos: u32) -> u32 {
        (self.output[phys_word(dst, pos >> 2) as usize] >> ((pos & 3) * 8)) & 0xff
    }

    pub(super) fn output_word(&self, dst: Layout, pos: u32) -> u32 {
        let shift = (pos & 3) * 8;
        let lo = self.output[phys_word(dst, pos >> 2) as usize];
        if shift == 0 {
            return lo;
        }
        let hi = self.output[phys_word(dst, (pos >> 2) + 1) as usize];
        (lo >> shift) | (hi << (32 - shift))
    }

    fn source_byte(&self, dst: Layout, seq: Sequence, q: u32) -> u32 {
        if q >= seq.lit_start {
            return self.input_byte(seq.lit_src + (q - seq.lit_start));
        }
        if q >= (seq.lit_start & !3) {
            return (seq.pending >> ((q & 3) * 8)) & 0xff;
        }
        self.output_byte(dst, q)
    }

    fn sequence_byte(&self, dst: Layout, seq: Sequence, pos: u32) -> u32 {
        if pos < seq.match_start {
            return self.source_byte(dst, seq, pos);
        }
        self.source_byte(dst, seq, match_source(seq, pos - seq.match_start))
    }

    fn source_word(&self, dst: Layout, seq: Sequence, q: u32) -> u32 {
        if q >= seq.lit_start && q + 4 <= seq.match_start {
            return self.input_word(seq.lit_src + (q - seq.lit_start));
        }
        if q + 4 <= (seq.lit_start & !3) {
            return self.output_word(dst, q);
        }
        self.source_byte(dst, seq, q)
            | (self.source_byte(dst, seq, q + 1) << 8)
            | (self.source_byte(dst, seq, q + 2) << 16)
            | (self.source_byte(dst, seq, q + 3) << 24)
    }

    pub(super) fn sequence_word(&self, dst: Layout, seq: Sequence, p: u32) -> u32 {
        if p >= seq.lit_start && p + 4 <= seq.match_start {
            return self.input_word(seq.lit_src + (p - seq.lit_start));
        }
        if p >= seq.match_start {
            let k = p - seq.match_start;
            let r = if k >= seq.offset { k % seq.offset } else { k };
            if r + 4 <= seq.offset {
                return self.source_word(dst, seq, seq.match_start - seq.offset + r);
            }
        }
        self.sequence_byte(dst, seq, p)
            | (self.sequence_byte(dst, seq, p + 1) << 8)
            | (self.sequence_byte(dst, seq, p + 2) << 16)
            | (self.sequence_byte(dst, seq, p + 3) << 24)
    }

    /// The portable `sequence_tail` of `shaders/lz4_tail_portable.wgsl`.
    pub(super) fn sequence_tail(&self, dst: Layout, seq: Sequence) -> u32 {
        let base = seq.end & !3;
        let n = seq.end & 3;
        let mut tail = 0;
        if n > 0 {
            tail = self.sequence_byte(dst, seq, base);
        }
        if n > 1 {
            tail |= self.sequence_byte(dst, seq, base + 1) << 8;
        }
        if n > 2 {
            tail |= self.sequence_byte(dst, seq, base + 2) << 16;
        }
        tail
    }

    /// The shader's `read_length_ext`: the sum, or why it stopped (the
    /// input ended, or the sum passed `limit`, the output left).
    fn read_length_ext(&self, ip: &mut u32, src_end: u32, limit: u32) -> Result<u32, u32> {
        let mut sum = 0u32;
        loop {
            if *ip >= src_end {
                return Err(status_code::TRUNCATED);
            }
            let b = self.input_byte(*ip);
            *ip += 1;
            sum += b;
            if b != 255 {
                return Ok(sum);
            }
            if sum > limit {
                return Err(status_code::OUTPUT_OVERRUN);
            }
        }
    }
}

pub(super) fn phys_word(dst: Layout, w: u32) -> u32 {
    if dst.row_words == 0 {
        return dst.word0 + w;
    }
    dst.word0 + (w / dst.row_words) * dst.pitch_words + (w % dst.row_words)
}

fn match_source(seq: Sequence, k: u32) -> u32 {
    let r = if k >= seq.offset { k % seq.offset } else { k };
    seq.match_start - seq.offset + r
}

/// Validates `desc` against buffers of `in_words` and `out_words` words the
/// way the shader does; returns the output layout when it is valid.
pub(super) fn check_desc(desc: &BlockDesc, in_words: usize, out_words: usize) -> Option<Layout> {
    // The shader computes these in u32: bindings are below 4 GiB.
    let in_bytes = (in_words as u64 * 4).min(u32::MAX as u64) as u32;
    let out_bytes = (out_words as u64 * 4).min(u32::MAX as u64) as u32;
    let mut ok = desc.dst_size <= MAX_BLOCK_SIZE as u32
        && desc.src_size <= MAX_SRC_SIZE
        && desc.dst_offset & 3 == 0
        && desc.src_size <= in_bytes
        && desc.src_offset <= in_bytes - desc.src_size
        && desc.dst_offset <= out_bytes;
    let mut dst = Layout {
        word0: desc.dst_offset >> 2,
        row_words: 0,
        pitch_words: 0,
    };
    if ok && desc.row_bytes == 0 {
        ok = desc.dst_size <= out_bytes - desc.dst_offset;
    } else if ok {
        ok = desc.row_bytes & 3 == 0 && desc.row_pitch & 3 == 0 && desc.row_pitch >= desc.row_bytes;
        if ok && desc.dst_size > 0 {
            let last_row = (desc.dst_size - 1) / desc.row_bytes;
            let last_len = desc.dst_size - last_row * desc.row_bytes;
            let room = out_bytes - desc.dst_offset;
            ok = last_len <= room
                && (last_row == 0 || desc.row_pitch <= (room - last_len) / last_row);
        }
        dst.row_words = desc.row_bytes >> 2;
        dst.pitch_words = desc.row_pitch >> 2;
    }
    ok.then_some(dst)
}

/// Decodes the block `desc` describes from `input` into `output` exactly as
/// one workgroup of `shaders/lz4_decode.wgsl` does, and returns the status
/// word the shader would write for it (see [`Lz4Status::from_word`]).
///
/// Never panics and never writes outside the block's output range, whatever
/// the descriptor and the input bytes hold.
pub fn lz4_decode(desc: &BlockDesc, input: &[u32], output: &mut [u32]) -> u32 {
    let Some(dst) = check_desc(desc, input.len(), output.len()) else {
        return status_code::BAD_DESCRIPTOR;
    };
    let buf = Buffers { input, output };

    let src_start = desc.src_offset;
    let src_end = desc.src_offset + desc.src_size;
    let dst_size = desc.dst_size;
    let mut ip = src_start;
    let mut op = 0u32;
    let mut pending = 0u32;
    let mut code = status_code::OK;
    let mut err_at = src_start;

    // Each iteration consumes at least the token byte.
    loop {
        if ip >= src_end {
            code = status_code::TRUNCATED;
            err_at = ip;
            break;
        }
        let token = buf.input_byte(ip);
        ip += 1;

        let mut lit_len = token >> 4;
        if lit_len == 15 {
            match buf.read_length_ext(&mut ip, src_end, dst_size - op) {
                Ok(ext) => lit_len += ext,
                Err(why) => {
                    code = why;
                    err_at = ip;
                    break;
                }
            }
        }
        if lit_len > src_end - ip {
            code = status_code::TRUNCATED;
            err_at = ip;
            break;
        }
        if lit_len > dst_size - op {
            code = status_code::OUTPUT_OVERRUN;
            err_at = ip;
            break;
        }
        let lit_src = ip;
        ip += lit_len;
        let match_start = op + lit_len;

        let last = ip >= src_end;
        let mut offset = 0;
        let mut match_len = 0;
        if !last {
            if src_end - ip < 2 {
                code = status_code::TRUNCATED;
                err_at = ip;
                break;
            }
            offset = buf.input_byte(ip) | (buf.input_byte(ip + 1) << 8);
            if offset == 0 {
                code = status_code::ZERO_OFFSET;
                err_at = ip;
                break;
            }
            ip += 2;
            match_len = 4 + (token & 15);
            if match_len == 19 {
                match buf.read_length_ext(&mut ip, src_end, dst_size - match_start) {
                    Ok(ext) => match_len += ext,
                    Err(why) => {
                        code = why;
                        err_at = ip;
                        break;
                    }
                }
            }
            if match_len > dst_size - match_start {
                code = status_code::OUTPUT_OVERRUN;
                err_at = ip;
                break;
            }
            if offset > match_start {
                code = status_code::OFFSET_OUT_OF_RANGE;
                err_at = ip;
                break;
            }
        }

        let seq = Sequence {
            lit_start: op,
            match_start,
            end: match_start + match_len,
            lit_src,
            offset,
            pending,
        };

        // The cooperative pass; the shader's lanes split these words (lane
        // i takes words i, i + WG, ...).
        let first_word = seq.lit_start >> 2;
        let end_word = seq.end >> 2;
        for w in first_word..end_word {
            let value = buf.sequence_word(dst, seq, w * 4);
            buf.output[phys_word(dst, w) as usize] = value;
        }
        pending = buf.sequence_tail(dst, seq);
        op = seq.end;
        // (storageBarrier in the shader)
        if last {
            break;
        }
    }

    if code == status_code::OK && op != dst_size {
        code = status_code::SHORT_OUTPUT;
        err_at = ip;
    }
    let word = code | ((err_at - src_start) << 8);
    finish_block(buf.output, dst, dst_size, word, pending);
    word
}

/// The shader's `finish_block`: merges the last partial word (keeping the
/// bytes past the block) when the status word says OK.
pub(super) fn finish_block(
    output: &mut [u32],
    dst: Layout,
    dst_size: u32,
    word: u32,
    pending: u32,
) {
    if word & 0xff == status_code::OK && dst_size & 3 != 0 {
        let pw = phys_word(dst, dst_size >> 2) as usize;
        let mask = (1u32 << ((dst_size & 3) * 8)) - 1;
        output[pw] = (output[pw] & !mask) | (pending & mask);
    }
}

/// Decodes one compressed block of `dst_size` bytes with the twin.
pub fn decode_block(src: &[u8], dst_size: usize) -> Result<Vec<u8>, Lz4Status> {
    if dst_size > MAX_BLOCK_SIZE || src.len() > MAX_SRC_SIZE as usize {
        return Err(Lz4Status::BadDescriptor);
    }
    let input: Vec<u32> = src
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect();
    let mut output = vec![0u32; dst_size.div_ceil(4)];
    let desc = BlockDesc::linear(0, src.len() as u32, 0, dst_size as u32);
    match Lz4Status::from_word(lz4_decode(&desc, &input, &mut output)) {
        Lz4Status::Ok => {
            let mut bytes: Vec<u8> = output.iter().flat_map(|w| w.to_le_bytes()).collect();
            bytes.truncate(dst_size);
            Ok(bytes)
        }
        err => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                // Runs and repeats mixed with noise.
                match (i / 300) % 3 {
                    0 => (x & 0xff) as u8,
                    1 => b"overlapping"[i % 11],
                    _ => (i / 50) as u8,
                }
            })
            .collect()
    }

    #[test]
    fn twin_matches_lz4_flex_on_valid_blocks() {
        for (len, seed) in [
            (0, 1),
            (1, 2),
            (3, 3),
            (4, 4),
            (5, 5),
            (4097, 6),
            (65536, 7),
        ] {
            let src = sample(len, seed);
            let packed = lz4_flex::block::compress(&src);
            assert_eq!(decode_block(&packed, len).unwrap(), src, "len {len}");
        }
    }

    #[test]
    fn overlapping_matches_every_offset() {
        for offset in 1..=16usize {
            // An `offset`-byte pattern repeated: lz4 encodes it as one
            // literal run and one long overlapping match.
            let src: Vec<u8> = (0..5000).map(|i| (i % offset) as u8 * 37 + 1).collect();
            let packed = lz4_flex::block::compress(&src);
            assert_eq!(
                decode_block(&packed, src.len()).unwrap(),
                src,
                "offset {offset}"
            );
        }
    }

    #[test]
    fn twin_rejects_what_lz4_flex_rejects() {
        let src = sample(3000, 9);
        let packed = lz4_flex::block::compress(&src);
        for cut in 0..packed.len() {
            let mut out = vec![0u8; src.len()];
            let flex = lz4_flex::block::decompress_into(&packed[..cut], &mut out);
            let flex_ok = matches!(flex, Ok(n) if n == src.len());
            assert_eq!(
                decode_block(&packed[..cut], src.len()).is_ok(),
                flex_ok,
                "cut {cut}"
            );
        }
        // Named errors.
        assert_eq!(decode_block(&[], 0), Err(Lz4Status::Truncated { at: 0 }));
        assert_eq!(decode_block(&[0x00], 0), Ok(vec![]));
        assert_eq!(
            decode_block(&[0x10, 7], 0),
            Err(Lz4Status::OutputOverrun { at: 1 })
        );
        assert_eq!(
            decode_block(&[0x10, 7, 0, 0], 5),
            Err(Lz4Status::ZeroOffset { at: 2 })
        );
        assert_eq!(
            decode_block(&[0x10, 7, 2, 0], 5),
            Err(Lz4Status::OffsetOutOfRange { at: 4 })
        );
        assert_eq!(
            decode_block(&[0x10, 7], 2),
            Err(Lz4Status::ShortOutput { at: 2 })
        );
    }

    #[test]
    fn padded_rows_and_guards() {
        let src = sample(1000, 11);
        let packed = lz4_flex::block::compress(&src);
        let mut input = vec![0u32; packed.len().div_ceil(4) + 1];
        bytemuck::cast_slice_mut::<u32, u8>(&mut input)[3..3 + packed.len()]
            .copy_from_slice(&packed);
        let desc = BlockDesc::linear(3, packed.len() as u32, 8, 1000).with_rows(64, 256);
        let mut output = vec![0xA5A5_A5A5u32; 2 + 4096 / 4 + 4];
        let word = lz4_decode(&desc, &input, &mut output);
        assert_eq!(Lz4Status::from_word(word), Lz4Status::Ok);
        let bytes: &[u8] = bytemuck::cast_slice(&output);
        for (i, &b) in bytes.iter().enumerate() {
            let rel = i as i64 - 8;
            let inside = rel >= 0 && (rel as u64) < desc.dst_extent().unwrap() && (rel % 256) < 64;
            if inside {
                let logical = (rel / 256 * 64 + rel % 256) as usize;
                assert_eq!(b, src[logical], "byte {i}");
            } else {
                assert_eq!(b, 0xA5, "guard byte {i}");
            }
        }
    }
}
