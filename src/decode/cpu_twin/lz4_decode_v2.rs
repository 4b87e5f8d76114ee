//! Twin of `shaders/lz4_decode_v2.wgsl` (entry point `lz4_decode_v2`): one
//! block decoded the way one workgroup of the v2 shader decodes it, with the
//! same header window and the same barrier decisions. Its steps
//! (`BlockDecoder`) also drive the twin of the pair entry point
//! (`lz4_decode_v2_pair`).
//!
//! The window is modelled as the words the subgroup's lanes hold: header
//! bytes are read from that copy, not from the input, so a window that fails
//! to cover a header byte gives a different result here, and the tests that
//! hold this twin to the v1 twin (and to lz4_flex) catch it. The barriers the
//! shader would execute are counted, for the bench and the docs.
//!
//! A pass is modelled as the lanes run it: every value is computed from the
//! buffer as it was before the pass, and only then are the stores applied.
//! So a word or 16-byte unit that read a word of its own pass would read the
//! stale value here, and the output would differ from v1's.

use super::lz4_decode::{check_desc, finish_block, phys_word, Buffers, Layout, Sequence};
use crate::decode::{status_code, BlockDesc};

/// Largest window the twin models (the shader's `WIN`, the adapter's
/// subgroup size; 128 lanes is the widest subgroup any API reports).
pub const MAX_WINDOW_WORDS: u32 = 128;

/// No output word written since the last barrier (the shader's `NO_WORD`).
const NO_WORD: u32 = u32::MAX;

/// What one block's decode did, counted the way the shader's loop runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lz4DecodeCounts {
    /// Sequences decoded (copy passes run).
    pub sequences: u32,
    /// Storage barriers executed (v1 executes one after every pass that
    /// writes a word; the pair variants count one per workgroup that takes
    /// it, whichever of its blocks needed it).
    pub barriers: u32,
    /// Workgroup barriers where the blocks of a pair workgroup agree on the
    /// storage barrier, one per turn (none on the one-block variants).
    pub turn_barriers: u32,
    /// Window loads (one coalesced load of `WIN` words each).
    pub window_loads: u32,
    /// 16-byte (vec4) stores: with `WIDE`, the aligned units of passes of
    /// more than `WG` words, linear or in rows of whole units; none without.
    pub wide_stores: u32,
    /// Of the wide stores, those whose 16 bytes were copied as one run
    /// (literals, or a match that does not wrap inside them); the others
    /// were put together word by word.
    pub wide_copies: u32,
    /// Single-word stores: without `WIDE` every word; with it, the head and
    /// tail words of long passes, every word of shorter ones and of rows
    /// that are not whole units.
    pub word_stores: u32,
}

/// The lanes' window: `words[j]` is input word `word + j`.
struct Window {
    word: u32,
    words: [u32; MAX_WINDOW_WORDS as usize],
    size: u32,
    loads: u32,
}

impl Window {
    /// The shader's `window_load` run by every lane.
    fn load(&mut self, input: &[u32], word: u32) {
        self.word = word;
        for j in 0..self.size {
            self.words[j as usize] = input
                .get(word.wrapping_add(j) as usize)
                .copied()
                .unwrap_or(0);
        }
        self.loads += 1;
    }

    /// The shader's `window_cover`.
    fn cover(&mut self, input: &[u32], addr: u32, n: u32) {
        if ((addr + n - 1) >> 2).wrapping_sub(self.word) >= self.size {
            self.load(input, addr >> 2);
        }
    }

    /// The shader's `window_byte` (a shuffle from lane `addr / 4 - word`).
    fn byte(&self, addr: u32) -> u32 {
        let lane = (addr >> 2).wrapping_sub(self.word);
        let w = self.words.get(lane as usize).copied().unwrap_or(0);
        (w >> ((addr & 3) * 8)) & 0xff
    }

    /// The shader's `read_length_ext_win`.
    fn read_length_ext(
        &mut self,
        input: &[u32],
        ip: &mut u32,
        src_end: u32,
        limit: u32,
    ) -> Result<u32, u32> {
        let mut sum = 0u32;
        loop {
            if *ip >= src_end {
                return Err(status_code::TRUNCATED);
            }
            self.cover(input, *ip, 1);
            let b = self.byte(*ip);
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

/// Input bytes [addr, addr + 16) as four words (the shader's `input_quad`).
fn input_quad(input: &[u32], addr: u32) -> [u32; 4] {
    let i = (addr >> 2) as usize;
    let shift = (addr & 3) * 8;
    let w: [u32; 4] = input[i..i + 4].try_into().unwrap();
    if shift == 0 {
        return w;
    }
    let e = input[i + 4];
    let next = [w[1], w[2], w[3], e];
    std::array::from_fn(|j| (w[j] >> shift) | (next[j] << (32 - shift)))
}

/// Output bytes [pos, pos + 16) of a block (the shader's `output_quad`:
/// word by word in rows, which the sixteen bytes may straddle).
fn output_quad(buf: &Buffers<'_>, dst: Layout, pos: u32) -> [u32; 4] {
    if dst.row_words != 0 {
        return std::array::from_fn(|j| buf.output_word(dst, pos + 4 * j as u32));
    }
    let output = &*buf.output;
    let i = (dst.word0 + (pos >> 2)) as usize;
    let shift = (pos & 3) * 8;
    let w: [u32; 4] = output[i..i + 4].try_into().unwrap();
    if shift == 0 {
        return w;
    }
    let e = output[i + 4];
    let next = [w[1], w[2], w[3], e];
    std::array::from_fn(|j| (w[j] >> shift) | (next[j] << (32 - shift)))
}

/// The shader's `rows_in_units`: rows and pitch whole 16-byte units, the
/// block's first word on one.
fn rows_in_units(dst: Layout) -> bool {
    (dst.row_words | dst.pitch_words | dst.word0) & 3 == 0
}

/// The shader's `sequence_quad`: the four words of block positions
/// [p, p + 16) of a pass, and whether they were copied as one run.
fn sequence_quad(buf: &Buffers<'_>, dst: Layout, seq: Sequence, p: u32) -> ([u32; 4], bool) {
    // Where the 16 bytes come from when they are one contiguous run.
    let mut run = None;
    if p >= seq.match_start {
        let k = p - seq.match_start;
        let r = if k >= seq.offset { k % seq.offset } else { k };
        // A match that does not wrap inside the unit.
        if r + 16 <= seq.offset {
            run = Some(seq.match_start - seq.offset + r);
        }
    } else if p >= seq.lit_start {
        run = Some(p);
    }
    if let Some(q) = run {
        if q >= seq.lit_start && q + 16 <= seq.match_start {
            return (
                input_quad(buf.input, seq.lit_src + (q - seq.lit_start)),
                true,
            );
        }
        // Written by an earlier pass (below the pass's first word).
        if q + 16 <= seq.lit_start & !3 {
            return (output_quad(buf, dst, q), true);
        }
    }
    (
        std::array::from_fn(|j| buf.sequence_word(dst, seq, p + 4 * j as u32)),
        false,
    )
}

/// Decodes the block `desc` describes as one workgroup of
/// `lz4_decode_v2` with a `window_words`-word header window does (4 to
/// [`MAX_WINDOW_WORDS`]; clamped), and returns the status word.
///
/// Never panics and never writes outside the block's output range.
pub fn lz4_decode_v2(
    desc: &BlockDesc,
    input: &[u32],
    output: &mut [u32],
    window_words: u32,
) -> u32 {
    lz4_decode_v2_counted(desc, input, output, window_words, window_words, false).0
}

/// [`lz4_decode_v2`], also returning what the decode did, counted for a
/// workgroup of `lanes` lanes (the shader's `WG`) with or without 16-byte
/// stores (the shader's `WIDE`: with them, only passes of more than `lanes`
/// words use them). The bytes written depend on neither.
pub fn lz4_decode_v2_counted(
    desc: &BlockDesc,
    input: &[u32],
    output: &mut [u32],
    window_words: u32,
    lanes: u32,
    wide: bool,
) -> (u32, Lz4DecodeCounts) {
    let mut block = match BlockDecoder::new(desc, input, output.len(), window_words, lanes, wide) {
        Ok(b) => b,
        Err(word) => return (word, Lz4DecodeCounts::default()),
    };
    // The shader's loop: parse, wait if the pass needs it, pass.
    while let Some((seq, last)) = block.parse(input) {
        if block.fence_needed(seq) {
            block.counts.barriers += 1;
            block.fenced();
        }
        block.pass(input, output, seq);
        if last {
            break;
        }
    }
    block.finish(output)
}

/// One block's decode as one workgroup (or one slot of a workgroup) of the
/// v2 shader runs it: the shader's `parse_sequence`, `fence_needed` and
/// `copy_pass`, one call each per sequence, so the one-block loop above and
/// the pair's turns (`lz4_decode_v2_pair`) drive the same steps.
pub(super) struct BlockDecoder {
    dst: Layout,
    src_start: u32,
    src_end: u32,
    dst_size: u32,
    ip: u32,
    op: u32,
    pending: u32,
    code: u32,
    err_at: u32,
    win: Window,
    /// The first output word written since the last barrier.
    dirty: u32,
    lanes: u32,
    wide: bool,
    /// (buffer word, value) of the current pass.
    stores: Vec<(u32, u32)>,
    pub(super) counts: Lz4DecodeCounts,
}

impl BlockDecoder {
    /// The decoder of `desc`'s block, or the status word of a descriptor
    /// the shader rejects.
    pub(super) fn new(
        desc: &BlockDesc,
        input: &[u32],
        output_words: usize,
        window_words: u32,
        lanes: u32,
        wide: bool,
    ) -> Result<BlockDecoder, u32> {
        let Some(dst) = check_desc(desc, input.len(), output_words) else {
            return Err(status_code::BAD_DESCRIPTOR);
        };
        let mut win = Window {
            word: 0,
            words: [0; MAX_WINDOW_WORDS as usize],
            size: window_words.clamp(4, MAX_WINDOW_WORDS),
            loads: 0,
        };
        win.load(input, desc.src_offset >> 2);
        Ok(BlockDecoder {
            dst,
            src_start: desc.src_offset,
            src_end: desc.src_offset + desc.src_size,
            dst_size: desc.dst_size,
            ip: desc.src_offset,
            op: 0,
            pending: 0,
            code: status_code::OK,
            err_at: desc.src_offset,
            win,
            dirty: NO_WORD,
            lanes: lanes.max(4),
            wide,
            stores: Vec::new(),
            counts: Lz4DecodeCounts::default(),
        })
    }

    /// The shader's `parse_sequence`: the next sequence and whether it is
    /// the block's last, or `None` once an error is recorded.
    pub(super) fn parse(&mut self, input: &[u32]) -> Option<(Sequence, bool)> {
        match self.parse_inner(input) {
            Ok(next) => Some(next),
            Err(code) => {
                self.code = code;
                self.err_at = self.ip;
                None
            }
        }
    }

    fn parse_inner(&mut self, input: &[u32]) -> Result<(Sequence, bool), u32> {
        let (src_end, dst_size, op) = (self.src_end, self.dst_size, self.op);
        let win = &mut self.win;
        if self.ip >= src_end {
            return Err(status_code::TRUNCATED);
        }
        win.cover(input, self.ip, 1);
        let token = win.byte(self.ip);
        self.ip += 1;

        let mut lit_len = token >> 4;
        if lit_len == 15 {
            lit_len += win.read_length_ext(input, &mut self.ip, src_end, dst_size - op)?;
        }
        if lit_len > src_end - self.ip {
            return Err(status_code::TRUNCATED);
        }
        if lit_len > dst_size - op {
            return Err(status_code::OUTPUT_OVERRUN);
        }
        let lit_src = self.ip;
        self.ip += lit_len;
        let match_start = op + lit_len;

        let last = self.ip >= src_end;
        let mut offset = 0;
        let mut match_len = 0;
        if !last {
            if src_end - self.ip < 2 {
                return Err(status_code::TRUNCATED);
            }
            win.cover(input, self.ip, 2);
            offset = win.byte(self.ip) | (win.byte(self.ip + 1) << 8);
            if offset == 0 {
                return Err(status_code::ZERO_OFFSET);
            }
            self.ip += 2;
            match_len = 4 + (token & 15);
            if match_len == 19 {
                match_len +=
                    win.read_length_ext(input, &mut self.ip, src_end, dst_size - match_start)?;
            }
            if match_len > dst_size - match_start {
                return Err(status_code::OUTPUT_OVERRUN);
            }
            if offset > match_start {
                return Err(status_code::OFFSET_OUT_OF_RANGE);
            }
            // The next token's window, loaded before the copy pass.
            if self.ip < src_end {
                win.cover(input, self.ip, 1);
            }
        }
        let seq = Sequence {
            lit_start: op,
            match_start,
            end: match_start + match_len,
            lit_src,
            offset,
            pending: self.pending,
        };
        Ok((seq, last))
    }

    /// The shader's `fence_needed`: does the match read an output word
    /// written since the last barrier?
    pub(super) fn fence_needed(&self, seq: Sequence) -> bool {
        if seq.offset == 0 {
            return false;
        }
        let src_lo = seq.match_start - seq.offset;
        let out_hi = seq.lit_start & !3;
        if src_lo >= out_hi {
            return false;
        }
        let match_len = seq.end - seq.match_start;
        let read_end = (src_lo + seq.offset.min(match_len)).min(out_hi);
        (read_end - 1) >> 2 >= self.dirty
    }

    /// A storage barrier ordered every store so far.
    pub(super) fn fenced(&mut self) {
        self.dirty = NO_WORD;
    }

    /// The shader's `copy_pass` and what follows it: every value is
    /// computed before any store lands (the lanes run at once), then the
    /// stores are applied.
    pub(super) fn pass(&mut self, input: &[u32], output: &mut [u32], seq: Sequence) {
        let dst = self.dst;
        let buf = Buffers { input, output };
        let first_word = seq.lit_start >> 2;
        let end_word = seq.end >> 2;
        let counts = &mut self.counts;
        let stores = &mut self.stores;
        stores.clear();
        if self.wide
            && end_word - first_word > self.lanes
            && (dst.row_words == 0 || rows_in_units(dst))
        {
            // A long pass, linear or in rows of whole units: head words up
            // to the first 16-byte boundary of the buffer, whole units, tail
            // words after the last unit. (Shorter passes are one store per
            // lane already.) In rows of whole units the block's first word
            // is on a unit, so the same head applies, and no unit spans two
            // rows.
            let base = dst.word0;
            let head_end = end_word.min(((base + first_word + 3) & !3) - base);
            let units = (end_word - head_end) >> 2;
            let body_end = head_end + units * 4;
            for w in (first_word..head_end).chain(body_end..end_word) {
                stores.push((phys_word(dst, w), buf.sequence_word(dst, seq, w * 4)));
                counts.word_stores += 1;
            }
            for u in 0..units {
                let w = head_end + u * 4;
                let (quad, copied) = sequence_quad(&buf, dst, seq, w * 4);
                let at = phys_word(dst, w);
                assert_eq!(at % 4, 0, "a unit on a 16-byte boundary");
                for (j, v) in quad.into_iter().enumerate() {
                    stores.push((at + j as u32, v));
                }
                counts.wide_stores += 1;
                counts.wide_copies += copied as u32;
            }
        } else {
            for w in first_word..end_word {
                let at = if dst.row_words == 0 {
                    dst.word0 + w
                } else {
                    phys_word(dst, w)
                };
                stores.push((at, buf.sequence_word(dst, seq, w * 4)));
                counts.word_stores += 1;
            }
        }
        for &(at, value) in stores.iter() {
            buf.output[at as usize] = value;
        }
        if end_word != first_word && self.dirty == NO_WORD {
            self.dirty = first_word;
        }
        self.pending = buf.sequence_tail(dst, seq);
        self.op = seq.end;
        counts.sequences += 1;
    }

    /// Ends the block as the shader's last lines do: the status word (and
    /// the last partial word written), with the counts.
    pub(super) fn finish(mut self, output: &mut [u32]) -> (u32, Lz4DecodeCounts) {
        if self.code == status_code::OK && self.op != self.dst_size {
            self.code = status_code::SHORT_OUTPUT;
            self.err_at = self.ip;
        }
        self.counts.window_loads = self.win.loads;
        let word = self.code | ((self.err_at - self.src_start) << 8);
        finish_block(output, self.dst, self.dst_size, word, self.pending);
        (word, self.counts)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::decode::cpu_twin::lz4_decode::lz4_decode;

    /// Bytes with literal runs, short and long repeats and every offset
    /// class, so windows are crossed in every way.
    pub(in crate::decode::cpu_twin) fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let r = next();
            match r % 4 {
                0 => out.extend((0..(r >> 8) % 300).map(|_| next() as u8)),
                1 if !out.is_empty() => {
                    let back = 1 + (r >> 8) as usize % out.len().min(70_000);
                    let n = 4 + (r >> 32) as usize % 600;
                    for _ in 0..n {
                        out.push(out[out.len() - back]);
                    }
                }
                2 => out.extend(std::iter::repeat_n((r >> 8) as u8, (r >> 16) as usize % 50)),
                _ => out.extend(
                    b"a window of header bytes"
                        .iter()
                        .take((r >> 8) as usize % 24),
                ),
            }
        }
        out.truncate(len);
        out
    }

    /// `bytes` after `lead` filler bytes, as words, with a spare word.
    pub(in crate::decode::cpu_twin) fn words(bytes: &[u8], lead: usize) -> Vec<u32> {
        let mut padded = vec![0x5Au8; lead];
        padded.extend_from_slice(bytes);
        padded.resize(padded.len().next_multiple_of(4) + 4, 0);
        bytemuck::pod_collect_to_vec(&padded)
    }

    /// v2 (every window size) and v1 give the same status word and the same
    /// output buffer, guards included, on valid, truncated and corrupted
    /// blocks, linear and with padded rows.
    #[test]
    fn v2_twin_equals_v1_twin() {
        let mut checked = 0;
        // Decodes in rows that took 16-byte stores.
        let mut rows_wide = 0;
        for seed in 0..60u64 {
            let len = [0, 1, 3, 4, 5, 17, 255, 1000, 4099, 65536][seed as usize % 10];
            let data = sample(len, seed);
            let mut packed = lz4_flex::block::compress(&data);
            if seed % 3 == 1 && !packed.is_empty() {
                // Corrupt a byte, or cut the block short.
                let at = (seed as usize * 7919) % packed.len();
                packed[at] ^= 1 << (seed % 8);
            } else if seed % 3 == 2 {
                packed.truncate(packed.len() * 2 / 3);
            }
            let lead = seed as usize % 4;
            let input = words(&packed, lead);
            let rows = (seed % 2 == 0).then_some((64, 256));
            // Rows starting on a 16-byte unit (whole units: the 16-byte
            // stores apply) and rows starting between units (they do not).
            let at = if seed % 4 == 0 { 16 } else { 8 };
            let mut desc = BlockDesc::linear(lead as u32, packed.len() as u32, at, len as u32);
            if let Some((b, p)) = rows {
                desc = desc.with_rows(b, p);
            }
            let out_words = (at as usize + desc.dst_extent().unwrap() as usize) / 4 + 2;
            let mut expected = vec![0xA5A5_A5A5u32; out_words];
            let want = lz4_decode(&desc, &input, &mut expected);
            for win in [4, 8, 16, 32, 64] {
                for wide in [false, true] {
                    let mut got = vec![0xA5A5_A5A5u32; out_words];
                    let (word, counts) =
                        lz4_decode_v2_counted(&desc, &input, &mut got, win, win, wide);
                    let what = format!("seed {seed}, window {win}, wide {wide}");
                    assert_eq!(word, want, "{what}: status");
                    assert!(got == expected, "{what}: output");
                    assert!(counts.barriers <= counts.sequences);
                    if !wide {
                        assert_eq!(counts.wide_stores, 0, "{what}");
                    }
                    if rows.is_some() && at % 16 != 0 {
                        assert_eq!(counts.wide_stores, 0, "{what}: rows off the units");
                    }
                    rows_wide += (rows.is_some() && counts.wide_stores > 0) as u32;
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 600);
        assert!(
            rows_wide >= 10,
            "{rows_wide} decodes in rows took 16-byte stores"
        );
    }

    /// Far fewer barriers than v1's one per pass on ordinary data, and at
    /// least one where a match reads bytes written by the pass before.
    #[test]
    fn barriers_only_where_a_match_reads_fresh_words() {
        let data = sample(65536, 3);
        let packed = lz4_flex::block::compress(&data);
        let input = words(&packed, 0);
        let desc = BlockDesc::linear(0, packed.len() as u32, 0, data.len() as u32);
        let mut out = vec![0u32; data.len() / 4];
        let (word, counts) = lz4_decode_v2_counted(&desc, &input, &mut out, 32, 32, false);
        assert_eq!(word & 0xff, status_code::OK);
        assert_eq!(bytemuck::cast_slice::<u32, u8>(&out), &data[..]);
        assert!(counts.barriers * 2 < counts.sequences, "{counts:?}");

        // The second sequence's match copies bytes the first pass wrote, so
        // it must wait for them.
        let src = b"0123456789abcdef!0123456789abcdef?0123456789abcdef+-*/=.,;:".to_vec();
        let packed = lz4_flex::block::compress(&src);
        let input = words(&packed, 0);
        let desc = BlockDesc::linear(0, packed.len() as u32, 0, src.len() as u32);
        let mut out = vec![0u32; src.len().div_ceil(4)];
        let (word, counts) = lz4_decode_v2_counted(&desc, &input, &mut out, 8, 8, false);
        assert_eq!(word & 0xff, status_code::OK);
        assert_eq!(
            &bytemuck::cast_slice::<u32, u8>(&out)[..src.len()],
            &src[..]
        );
        assert!(counts.barriers >= 1, "{counts:?}");
    }

    /// Decodes a hand-built block on the v2 twin (window and WG 8, output at byte
    /// 0, linear) with 16-byte stores and checks it against the v1 twin and
    /// `want`; also without them, where every word is a single store.
    fn decode_counted(block: &[u8], want: &[u8]) -> Lz4DecodeCounts {
        let input = words(block, 0);
        let desc = BlockDesc::linear(0, block.len() as u32, 0, want.len() as u32);
        let n = want.len().div_ceil(4) + 4;
        let mut v1 = vec![0xA5A5_A5A5u32; n];
        assert_eq!(lz4_decode(&desc, &input, &mut v1) & 0xff, status_code::OK);
        let mut out = vec![0xA5A5_A5A5u32; n];
        let (word, narrow) = lz4_decode_v2_counted(&desc, &input, &mut out, 8, 8, false);
        assert_eq!(word & 0xff, status_code::OK);
        assert!(out == v1);
        assert_eq!(
            (narrow.wide_stores, narrow.word_stores),
            (0, want.len() as u32 / 4)
        );
        let mut out = vec![0xA5A5_A5A5u32; n];
        let (word, counts) = lz4_decode_v2_counted(&desc, &input, &mut out, 8, 8, true);
        assert_eq!(word & 0xff, status_code::OK);
        assert_eq!(&bytemuck::cast_slice::<u32, u8>(&out)[..want.len()], want);
        assert!(out == v1);
        assert_eq!(
            4 * counts.wide_stores + counts.word_stores,
            narrow.word_stores
        );
        assert_eq!(
            (counts.sequences, counts.barriers),
            (narrow.sequences, narrow.barriers)
        );
        counts
    }

    /// 16-byte units are copied as a run only where their 16 bytes are final
    /// before the pass: long literal runs and matches that do not wrap inside
    /// the unit. A short overlapping match (offset 3) is put together word by
    /// word; a copy there would read this pass's own words, which the twin
    /// (stores applied after the whole pass) would see stale.
    #[test]
    fn wide_stores_copy_only_runs_that_are_final_before_the_pass() {
        // "abc", then a match of offset 3 and length 300, then 5 literals.
        let mut a = vec![0x3F, b'a', b'b', b'c', 3, 0, 255, 26];
        a.extend_from_slice(&[0x50, b'a', b'b', b'c', b'a', b'b']);
        let want: Vec<u8> = (0..308).map(|i| b"abc"[i % 3]).collect();
        let counts = decode_counted(&a, &want);
        // Pass 1 writes words 0..75: 18 units and 3 tail words, no unit a
        // run (every one wraps, or crosses the literal/match boundary);
        // pass 2 writes words 75 and 76 singly.
        assert_eq!(
            (counts.wide_stores, counts.wide_copies, counts.word_stores),
            (18, 0, 5),
            "{counts:?}"
        );

        // 1000 literals and a 4-byte match; then a match of offset 1004 and
        // length 600 reading pass 1's output; then 5 literals.
        let lits: Vec<u8> = sample(1000, 9);
        let mut b = vec![0xF0, 255, 255, 255, 220];
        b.extend_from_slice(&lits);
        b.extend_from_slice(&[0xE8, 0x03]);
        b.extend_from_slice(&[0x0F, 0xEC, 0x03, 255, 255, 71]);
        b.extend_from_slice(&[0x50, 1, 2, 3, 4, 5]);
        let mut want = lits.clone();
        want.extend_from_slice(&lits[..4]);
        want.extend_from_slice(&lits[..600]);
        want.extend_from_slice(&[1, 2, 3, 4, 5]);
        let counts = decode_counted(&b, &want);
        // Pass 1: 62 literal units, tail words 248..251. Pass 2: head word
        // 251, 37 units copied from pass 1's output (after a barrier), tail
        // word 400. Pass 3: word 401.
        assert_eq!(
            (counts.wide_stores, counts.wide_copies, counts.word_stores),
            (99, 99, 6),
            "{counts:?}"
        );
        assert_eq!(counts.barriers, 1, "{counts:?}");
    }
}
