//! Twin of `shaders/gdeflate_decode.wgsl`: one GDeflate page decoded the way
//! one 32-lane workgroup of the shader decodes it, on the same 32-bit word
//! buffers.
//!
//! The workgroup's memory is the private `Group`; each shader function
//! that every lane runs is a method here over the 32 lanes (`run_round`,
//! `refill_step`, `build_code`, `copy_round`, ...), each step lane 0 runs
//! alone a plain method (`code_limits`, `plan_code_lengths`). What the
//! shader computes with atomics, prefix sums and popcounts across lanes
//! (first end-of-block, output and refill positions, first error) is
//! computed here from the same per-lane values in lane order. The names,
//! the phases and their order are the shader's. Notes on the format and
//! the design: the shader's header comment.

// Loops over the lanes index several per-lane arrays at once, as the
// shader's lanes index the workgroup arrays by their own index.
#![allow(clippy::needless_range_loop)]

use super::lz4_decode::{check_desc, phys_word, Layout};
use crate::decode::gdeflate_status::code as status;
use crate::decode::BlockDesc;

/// Lanes of the workgroup, one per GDeflate sub-stream.
pub(crate) const LANES: usize = 32;

// What a lane does in a round (the shader's KIND_*).
const KIND_NONE: u32 = 0;
const KIND_LIT: u32 = 1;
const KIND_LEN: u32 = 2;
const KIND_EOB: u32 = 3;
const KIND_COPY: u32 = 4;

/// `r_refill` of a lane that does not refill (code-length rounds).
const NO_REFILL: u32 = 0xffff_ffff;

// Codes held in the tables: their first symbol slot in `code_syms`.
const CODE_LITLEN: usize = 0;
const CODE_DIST: usize = 1;
const CODE_PRE: usize = 2;
const SYM_BASE: [usize; 3] = [0, 288, 320];

// The precode order and Deflate64's length and distance tables: the
// codec's (one copy for the CPU decoder, this twin and the shader's
// preamble), under the shader's names.
use crate::codec::gdeflate::{
    DIST_BASE, DIST_EXTRA, LENGTH_BASE as LEN_BASE, LENGTH_EXTRA as LEN_EXTRA, PRECODE_ORDER,
};

/// An error: the status word to report.
type Step = Result<(), u32>;

/// `w_order` when no lane failed.
const NO_ORDER: u32 = 0xffff_ffff;

/// The workgroup's shared state for one page (the shader's `var<workgroup>`s).
struct Group<'a> {
    input: &'a [u32],
    output: &'a mut [u32],
    dst: Layout,
    desc: BlockDesc,
    // Per-stream 64-bit bit buffers (low, high word) and bit counts.
    s_lo: [u32; LANES],
    s_hi: [u32; LANES],
    s_left: [u32; LANES],
    // Per-stream pending copy: length (0 = none) and output position.
    p_len: [u32; LANES],
    p_dst: [u32; LANES],
    // Code-length rounds, per lane: symbol, repeat count, bits used, refill
    // read position (lane 0 plans them in stream order).
    r_val: [u32; LANES],
    r_aux: [u32; LANES],
    r_used: [u32; LANES],
    r_refill: [u32; LANES],
    // This round's copies in stream order (= output order): destination,
    // length, distance and first byte in the flattened copy space.
    c_dst: [u32; LANES],
    c_len: [u32; LANES],
    c_dist: [u32; LANES],
    c_off: [u32; LANES],
    c_count: u32,
    c_total: u32,
    // Code lengths; per code (entries c * 16 + len): left-justified 15-bit
    // limit, first codeword and first sorted-symbol index of each length;
    // symbols sorted by codeword; 1 + the only symbol of an accepted
    // incomplete code.
    lens: [u32; 320],
    code_lim: [u32; 48],
    code_first: [u32; 48],
    code_index: [u32; 48],
    code_syms: [u32; 339],
    code_single: [u32; 3],
    // Codeword counts per length while a code is built.
    w_count: [u32; 16],
    // Lane 0's results for everyone.
    cursor: u32,
    out: u32,
    eob: u32,
    done: u32,
    code_state: u32,
}

/// Decodes the GDeflate page `desc` describes from `input` into `output`
/// exactly as one workgroup of `shaders/gdeflate_decode.wgsl` does, and
/// returns the status word the shader would write for it (see
/// [`GDeflateStatus::from_word`](crate::decode::GDeflateStatus::from_word)).
///
/// Never panics and never writes outside the page's output range (its last
/// partial word included), whatever the descriptor and the input hold.
pub fn gdeflate_decode(desc: &BlockDesc, input: &[u32], output: &mut [u32]) -> u32 {
    decode_counted(desc, input, output).0
}

/// [`gdeflate_decode`], also returning the page bytes the decoder read
/// (its cursor when it stopped).
fn decode_counted(desc: &BlockDesc, input: &[u32], output: &mut [u32]) -> (u32, u32) {
    let Some(dst) = check_desc(desc, input.len(), output.len()) else {
        return (status::BAD_DESCRIPTOR, 0);
    };
    clear_output(output, dst, desc.dst_size);
    let mut g = Group {
        input,
        output,
        dst,
        desc: *desc,
        s_lo: [0; LANES],
        s_hi: [0; LANES],
        s_left: [0; LANES],
        p_len: [0; LANES],
        p_dst: [0; LANES],
        r_val: [0; LANES],
        r_aux: [0; LANES],
        r_used: [0; LANES],
        r_refill: [0; LANES],
        c_dst: [0; LANES],
        c_len: [0; LANES],
        c_dist: [0; LANES],
        c_off: [0; LANES],
        c_count: 0,
        c_total: 0,
        lens: [0; 320],
        code_lim: [0; 48],
        code_first: [0; 48],
        code_index: [0; 48],
        code_syms: [0; 339],
        code_single: [0; 3],
        w_count: [0; 16],
        cursor: 0,
        out: 0,
        eob: LANES as u32,
        done: 0,
        code_state: 0,
    };
    let word = match g.decode_page() {
        Ok(()) => status::OK,
        Err(word) => word,
    };
    (word, g.cursor)
}

/// Rounds a page may take: every round but one per block consumes at least
/// one bit, and every bit was read from the page, so a valid decode never
/// gets near this; it only bounds the loops against a bug.
fn round_budget(src_size: u32) -> u32 {
    4 * (8 * src_size + 1024)
}

/// Zeroes the page's output words (rows: each row's words), so bytes can
/// be or-ed in. The last partial word belongs to the page (output ranges
/// start 4-byte aligned and do not share words).
fn clear_output(output: &mut [u32], dst: Layout, size: u32) {
    for w in 0..size.div_ceil(4) {
        output[phys_word(dst, w) as usize] = 0;
    }
}

/// One lane's work in a main or tail round.
#[derive(Clone, Copy, Default)]
struct LaneStep {
    kind: u32,
    val: u32,
    used: u32,
}

impl Group<'_> {
    fn fail(&self, code: u32) -> u32 {
        code | (self.cursor << 8)
    }

    fn decode_page(&mut self) -> Step {
        let mut budget = round_budget(self.desc.src_size);
        self.refill_all(0)?;
        loop {
            spend(&mut budget, self)?;
            // Block header: BFINAL and BTYPE from stream 0, then its refill.
            let bits = self.s_lo[0];
            self.refill_step(0, &lane0_uses(3))?;
            match (bits >> 1) & 3 {
                0 => self.stored_block(&mut budget)?,
                1 => {
                    self.fixed_codes()?;
                    self.huffman_block(&mut budget)?;
                }
                2 => {
                    self.dynamic_codes(&mut budget)?;
                    self.huffman_block(&mut budget)?;
                }
                _ => return Err(self.fail(status::BAD_BLOCK_TYPE)),
            }
            if bits & 1 != 0 {
                break;
            }
        }
        if self.out != self.desc.dst_size {
            return Err(self.fail(status::SHORT_OUTPUT));
        }
        Ok(())
    }

    // ---- bit buffers -----------------------------------------------------

    /// Four page bytes at page position `at`; the caller checked the range.
    fn input_word(&self, at: u32) -> u32 {
        let addr = self.desc.src_offset + at;
        let shift = (addr & 3) * 8;
        let lo = self.input[(addr >> 2) as usize];
        if shift == 0 {
            return lo;
        }
        let hi = self.input[(addr >> 2) as usize + 1];
        (lo >> shift) | (hi << (32 - shift))
    }

    fn consume(&mut self, l: usize, n: u32) {
        if n == 0 {
            return;
        }
        self.s_lo[l] = (self.s_lo[l] >> n) | (self.s_hi[l] << (32 - n));
        self.s_hi[l] >>= n;
        self.s_left[l] = self.s_left[l].wrapping_sub(n);
    }

    fn refill(&mut self, l: usize, at: u32) {
        let w = self.input_word(at);
        let n = self.s_left[l];
        self.s_lo[l] |= w << n;
        if n != 0 {
            self.s_hi[l] |= w >> (32 - n);
        }
        self.s_left[l] += 32;
    }

    /// Lane 0, code-length rounds: lane `l`'s refill after it uses
    /// `r_used[l]` bits. A read past the page end is an error: the
    /// reference encoder's pages never need one (the tests check that every
    /// valid page is read exactly to its end), so one means the page is cut
    /// short.
    fn schedule_refill(&mut self, l: usize) -> Step {
        self.r_refill[l] = NO_REFILL;
        if self.s_left[l].wrapping_sub(self.r_used[l]) >= 32 {
            return Ok(());
        }
        if self.cursor + 4 > self.desc.src_size {
            return Err(self.fail(status::TRUNCATED));
        }
        self.r_refill[l] = self.cursor;
        self.cursor += 4;
        Ok(())
    }

    fn apply_refills(&mut self) {
        for l in 0..LANES {
            self.consume(l, self.r_used[l]);
            if self.r_refill[l] != NO_REFILL {
                self.refill(l, self.r_refill[l]);
            }
        }
    }

    /// Every lane uses `used[lane]` bits; then the streams refill in stream
    /// order from `first`, each at the cursor plus 4 bytes per refill
    /// before it in that order (a popcount of the refill mask).
    fn refill_step(&mut self, first: usize, used: &[u32; LANES]) -> Step {
        let walk = |l: usize| (l + LANES - first) % LANES;
        let mut mask = 0u32;
        for l in 0..LANES {
            if self.s_left[l].wrapping_sub(used[l]) < 32 {
                mask |= 1 << walk(l);
            }
        }
        let mut at = [0u32; LANES];
        let mut order = NO_ORDER;
        let mut err = 0;
        for l in 0..LANES {
            let i = walk(l);
            at[l] = self.cursor + 4 * (mask & ((1u32 << i) - 1)).count_ones();
            let need = mask & (1 << i) != 0;
            if need && at[l] + 4 > self.desc.src_size && (i as u32) < order {
                order = i as u32;
                err = status::TRUNCATED | (at[l] << 8);
            }
        }
        self.cursor += 4 * mask.count_ones();
        if err != 0 {
            return Err(err);
        }
        for l in 0..LANES {
            self.consume(l, used[l]);
            if mask & (1 << walk(l)) != 0 {
                self.refill(l, at[l]);
            }
        }
        Ok(())
    }

    fn refill_all(&mut self, first: usize) -> Step {
        self.refill_step(first, &[0; LANES])
    }

    // ---- Huffman codes ---------------------------------------------------

    /// Lane 0, once the counts per length are in `w_count`: checks them
    /// like the reference (oversubscribed: bad; incomplete: bad unless no
    /// codeword or a single codeword of length 1, both then one symbol of
    /// 1 bit) and fills the limits. `code_state`: 0 bad, 1 single, 2
    /// complete.
    fn code_limits(&mut self, c: usize, first: usize, n: usize, max_len: u32) {
        let cb = c * 16;
        let mut used = 0u32;
        for len in 1..=max_len as usize {
            used = (used << 1) + self.w_count[len];
        }
        self.code_single[c] = 0;
        self.code_state = 0;
        if used > 1 << max_len {
            return;
        }
        if used < 1 << max_len {
            if used == 0 {
                self.code_single[c] = 1;
                self.code_state = 1;
            } else if used == 1 << (max_len - 1) && self.w_count[1] == 1 {
                for s in 0..n {
                    if self.lens[first + s] == 1 {
                        self.code_single[c] = s as u32 + 1;
                    }
                }
                self.code_state = 1;
            }
            return;
        }
        let (mut code, mut index) = (0u32, 0u32);
        for len in 1..=15usize {
            let count = self.w_count[len];
            self.code_first[cb + len] = code;
            self.code_index[cb + len] = index;
            self.code_lim[cb + len] = (code + count) << (15 - len);
            index += count;
            code = (code + count) << 1;
        }
        self.code_state = 2;
    }

    /// The canonical code of `lens[first..first + n]`: counts (every lane
    /// a slice of the symbols), limits (lane 0), then lane `len` places the
    /// symbols of that length in symbol order. False when the lengths are
    /// invalid.
    fn build_code(&mut self, c: usize, first: usize, n: usize, max_len: u32) -> bool {
        self.w_count = [0; 16];
        for s in 0..n {
            self.w_count[self.lens[first + s] as usize] += 1;
        }
        self.code_limits(c, first, n, max_len);
        if self.code_state == 2 {
            for len in 1..=15u32 {
                let mut slot = SYM_BASE[c] + self.code_index[c * 16 + len as usize] as usize;
                for s in 0..n {
                    if self.lens[first + s] == len {
                        self.code_syms[slot] = s as u32;
                        slot += 1;
                    }
                }
            }
        }
        self.code_state != 0
    }

    /// One symbol of code `c` from the low bits of `bits`: (symbol,
    /// codeword length); the length is 1 + the number of length limits the
    /// next 15 bits (first bit highest) reach.
    fn decode_symbol(&self, c: usize, bits: u32) -> (u32, u32) {
        let single = self.code_single[c];
        if single != 0 {
            return (single - 1, 1);
        }
        let code15 = bits.reverse_bits() >> 17;
        let cb = c * 16;
        let len = 1
            + (1..=14)
                .filter(|&l| code15 >= self.code_lim[cb + l])
                .count();
        let off = (code15 >> (15 - len)).wrapping_sub(self.code_first[cb + len]);
        let slot = SYM_BASE[c] + self.code_index[cb + len].wrapping_add(off) as usize;
        // Always inside the table for a complete code (the shader clamps
        // an index past its array the same way).
        (self.code_syms[slot.min(338)], len as u32)
    }

    fn build_tables(&mut self, nlit: usize, ndist: usize) -> Step {
        if !self.build_code(CODE_DIST, nlit, ndist, 15)
            || !self.build_code(CODE_LITLEN, 0, nlit, 15)
        {
            return Err(self.fail(status::BAD_HUFFMAN_CODE));
        }
        Ok(())
    }

    fn fixed_codes(&mut self) -> Step {
        for (s, len) in self.lens.iter_mut().enumerate() {
            *len = match s {
                0..=143 => 8,
                144..=255 => 9,
                256..=279 => 7,
                280..=287 => 8,
                _ => 5,
            };
        }
        self.build_tables(288, 32)
    }

    fn dynamic_codes(&mut self, budget: &mut u32) -> Step {
        // HLIT, HDIST, HCLEN from stream 0, then its refill.
        let bits = self.s_lo[0];
        let nlit = 257 + (bits & 31) as usize;
        let ndist = 1 + ((bits >> 5) & 31) as usize;
        let npre = 4 + ((bits >> 10) & 15) as usize;
        self.refill_step(0, &lane0_uses(14))?;

        // The precode lengths: 3 bits from each of streams 0 .. npre-1.
        let mut used = [0u32; LANES];
        for l in 0..19 {
            self.lens[PRECODE_ORDER[l]] = if l < npre { self.s_lo[l] & 7 } else { 0 };
        }
        used[..npre].fill(3);
        self.refill_step(0, &used)?;
        if !self.build_code(CODE_PRE, 0, 19, 7) {
            return Err(self.fail(status::BAD_HUFFMAN_CODE));
        }

        // The code lengths, one precode symbol per stream and round.
        let total = (nlit + ndist) as u32;
        self.done = 0;
        while self.done < total {
            spend(budget, self)?;
            self.code_length_decode();
            self.plan_code_lengths(total)?;
            self.apply_refills();
        }
        self.build_tables(nlit, ndist)
    }

    /// Every lane: one precode symbol and its repeat bits.
    fn code_length_decode(&mut self) {
        for l in 0..LANES {
            let bits = self.s_lo[l];
            let (sym, n) = self.decode_symbol(CODE_PRE, bits);
            let (rep, extra) = match sym {
                16 => (3 + ((bits >> n) & 3), 2),
                17 => (3 + ((bits >> n) & 7), 3),
                18 => (11 + ((bits >> n) & 127), 7),
                _ => (1, 0),
            };
            self.r_val[l] = sym;
            self.r_aux[l] = rep;
            self.r_used[l] = n + extra;
            self.r_refill[l] = NO_REFILL;
        }
    }

    /// Lane 0: in stream order, the round's code lengths (lanes past the
    /// last length use no bits) and refills.
    fn plan_code_lengths(&mut self, total: u32) -> Step {
        let mut i = self.done;
        for l in 0..LANES {
            if i >= total {
                self.r_used[l] = 0;
                self.r_refill[l] = NO_REFILL;
                continue;
            }
            let sym = self.r_val[l];
            let mut value = 0;
            if sym < 16 {
                value = sym;
            } else if sym == 16 {
                if i == 0 {
                    return Err(self.fail(status::BAD_REPEAT));
                }
                value = self.lens[i as usize - 1];
            }
            let rep = self.r_aux[l].min(total - i);
            for k in 0..rep {
                self.lens[(i + k) as usize] = value;
            }
            i += rep;
            self.schedule_refill(l)?;
        }
        self.done = i;
        Ok(())
    }

    // ---- stored blocks ---------------------------------------------------

    fn stored_block(&mut self, budget: &mut u32) -> Step {
        let len = self.s_lo[0] & 0xffff;
        self.consume(0, 16);
        if len > self.desc.dst_size - self.out {
            return Err(self.fail(status::OUTPUT_OVERRUN));
        }
        let out = self.out;
        let mut base = 0;
        while base < len {
            spend(budget, self)?;
            let m = (len - base).min(LANES as u32) as usize;
            let mut byte = [0u32; LANES];
            let mut used = [0u32; LANES];
            for l in 0..m {
                byte[l] = self.s_lo[l] & 0xff;
                used[l] = 8;
            }
            self.refill_step(0, &used)?;
            for (l, &b) in byte.iter().enumerate().take(m) {
                self.write_byte(out + base + l as u32, b);
            }
            base += LANES as u32;
        }
        self.out = out + len;
        self.refill_all(len as usize % LANES)
    }

    // ---- Huffman blocks: the main rounds ---------------------------------

    fn huffman_block(&mut self, budget: &mut u32) -> Step {
        loop {
            spend(budget, self)?;
            self.run_round(LANES)?;
            if self.eob < LANES as u32 {
                break;
            }
        }
        // The tail of the block-done turn: lanes before the end-of-block
        // lane run the copies they reserved in the last round.
        spend(budget, self)?;
        self.run_round(self.eob as usize)
    }

    /// Lane `l < end`: a distance if it has a pending copy, otherwise (main
    /// rounds only: `end == LANES`) one literal/length symbol and its extra
    /// bits. Nothing is consumed yet.
    fn decode_round(&self, l: usize, end: usize) -> LaneStep {
        let none = LaneStep {
            kind: KIND_NONE,
            val: 0,
            used: 0,
        };
        if l >= end {
            return none;
        }
        let bits = self.s_lo[l];
        if self.p_len[l] != 0 {
            let (sym, n) = self.decode_symbol(CODE_DIST, bits);
            let e = u32::from(DIST_EXTRA[sym as usize]);
            let val = u32::from(DIST_BASE[sym as usize]) + ((bits >> n) & ((1 << e) - 1));
            return LaneStep {
                kind: KIND_COPY,
                val,
                used: n + e,
            };
        }
        if end != LANES {
            return none;
        }
        let (sym, n) = self.decode_symbol(CODE_LITLEN, bits);
        if sym < 256 {
            return LaneStep {
                kind: KIND_LIT,
                val: sym,
                used: n,
            };
        }
        if sym == 256 {
            return LaneStep {
                kind: KIND_EOB,
                val: 0,
                used: n,
            };
        }
        let k = (sym - 257) as usize;
        let e = u32::from(LEN_EXTRA[k]);
        LaneStep {
            kind: KIND_LEN,
            val: u32::from(LEN_BASE[k]) + ((bits >> n) & ((1 << e) - 1)),
            used: n + e,
        }
    }

    /// One round: every lane as `decode_round` says, then in stream order
    /// (prefix sums and popcounts): output positions, the first
    /// end-of-block (later lanes keep only their copies), refill positions,
    /// the first error, the copy table; then the bytes.
    fn run_round(&mut self, end: usize) -> Step {
        let mut r: [LaneStep; LANES] = std::array::from_fn(|l| self.decode_round(l, end));
        let eob = (0..LANES).find(|&l| r[l].kind == KIND_EOB).unwrap_or(LANES) as u32;
        let (mut mask, mut cmask) = (0u32, 0u32);
        let mut size = [0u32; LANES];
        let mut clen = [0u32; LANES];
        for l in 0..LANES {
            if l as u32 > eob && r[l].kind != KIND_COPY {
                r[l] = LaneStep::default();
            }
            match r[l].kind {
                KIND_LIT => size[l] = 1,
                KIND_LEN => size[l] = r[l].val,
                KIND_COPY => {
                    clen[l] = self.p_len[l];
                    cmask |= 1 << l;
                }
                _ => {}
            }
            if self.s_left[l].wrapping_sub(r[l].used) < 32 {
                mask |= 1 << l;
            }
        }
        // Exclusive prefix sums of sizes and copy lengths (scan2).
        let (mut excl, mut run) = ([(0u32, 0u32); LANES], (0u32, 0u32));
        for l in 0..LANES {
            excl[l] = run;
            run = (run.0.wrapping_add(size[l]), run.1.wrapping_add(clen[l]));
        }
        let size_limit = self.desc.dst_size;
        let mut order = NO_ORDER;
        let mut err = 0;
        let mut pos = [0u32; LANES];
        let mut at = [0u32; LANES];
        for l in 0..LANES {
            let lower = (1u32 << l) - 1;
            let LaneStep { kind, val, .. } = r[l];
            pos[l] = self.out.wrapping_add(excl[l].0);
            at[l] = self.cursor + 4 * (mask & lower).count_ones();
            let need = mask & (1 << l) != 0;
            let overrun = (kind == KIND_LIT && pos[l] >= size_limit)
                || (kind == KIND_LEN && (pos[l] > size_limit || val > size_limit - pos[l]));
            let (code, ord) = if overrun {
                (status::OUTPUT_OVERRUN, 2 * l)
            } else if kind == KIND_COPY && val > self.p_dst[l] {
                (status::OFFSET_OUT_OF_RANGE, 2 * l)
            } else if need && at[l] + 4 > self.desc.src_size {
                (status::TRUNCATED, 2 * l + 1)
            } else {
                (0, 0)
            };
            if code != 0 && (ord as u32) < order {
                order = ord as u32;
                err = code | (at[l] << 8);
            }
            if kind == KIND_COPY {
                let ci = (cmask & lower).count_ones() as usize;
                self.c_dst[ci] = self.p_dst[l];
                self.c_len[ci] = clen[l];
                self.c_dist[ci] = val;
                self.c_off[ci] = excl[l].1;
            }
        }
        self.out = self.out.wrapping_add(run.0);
        self.cursor += 4 * mask.count_ones();
        self.c_total = run.1;
        self.c_count = cmask.count_ones();
        self.eob = eob;
        if err != 0 {
            return Err(err);
        }
        for l in 0..LANES {
            self.consume(l, r[l].used);
            match r[l].kind {
                KIND_LIT => self.write_byte(pos[l], r[l].val),
                KIND_LEN => {
                    self.p_len[l] = r[l].val;
                    self.p_dst[l] = pos[l];
                }
                KIND_COPY => self.p_len[l] = 0,
                _ => {}
            }
            if mask & (1 << l) != 0 {
                self.refill(l, at[l]);
            }
        }
        self.copy_round();
        Ok(())
    }

    /// The last of copies `0..count` whose start (destination, or first
    /// byte in the flattened copy space) is at or before `at`; 0 if none
    /// (the shader's unrolled binary search).
    fn last_copy_at_or_before(&self, at: u32, count: u32, by_off: bool) -> u32 {
        let start = |i: u32| {
            if by_off {
                self.c_off[i as usize]
            } else {
                self.c_dst[i as usize]
            }
        };
        let mut j = 0;
        for step in [16, 8, 4, 2, 1] {
            if j + step < count && start(j + step) <= at {
                j += step;
            }
        }
        j
    }

    fn copy_source(&self, j: u32, b: u32) -> u32 {
        let j = j as usize;
        self.c_dst[j] - self.c_dist[j] + b % self.c_dist[j]
    }

    fn in_copy(&self, i: u32, q: u32) -> bool {
        let i = i as usize;
        q >= self.c_dst[i] && q < self.c_dst[i] + self.c_len[i]
    }

    /// Where byte `b0` of copy `j0` reads from, followed back through the
    /// earlier copies of the same round to a byte written before it.
    fn resolve_source(&self, j0: u32, b0: u32) -> u32 {
        let mut q = self.copy_source(j0, b0);
        if j0 == 0 {
            return q;
        }
        let mut i = self.last_copy_at_or_before(q, j0, false);
        if self.in_copy(i, q) {
            loop {
                q = self.copy_source(i, q - self.c_dst[i as usize]);
                if i == 0 {
                    break;
                }
                let next = self.last_copy_at_or_before(q, i, false);
                if !self.in_copy(next, q) {
                    break;
                }
                i = next;
            }
        }
        q
    }

    /// Every lane `t`: bytes `t, t + 32, ...` of the round's copies laid
    /// end to end. (Each byte's source was written before the round, so
    /// the lanes' order does not matter.)
    fn copy_round(&mut self) {
        for t in 0..LANES as u32 {
            let mut f = t;
            while f < self.c_total {
                let j = self.last_copy_at_or_before(f, self.c_count, true);
                let b = f - self.c_off[j as usize];
                let q = self.resolve_source(j, b);
                let v = self.read_byte(q);
                self.write_byte(self.c_dst[j as usize] + b, v);
                f += LANES as u32;
            }
        }
    }

    // ---- output bytes ----------------------------------------------------

    fn write_byte(&mut self, p: u32, v: u32) {
        let w = phys_word(self.dst, p >> 2) as usize;
        self.output[w] |= v << ((p & 3) * 8);
    }

    fn read_byte(&self, p: u32) -> u32 {
        let w = phys_word(self.dst, p >> 2) as usize;
        (self.output[w] >> ((p & 3) * 8)) & 0xff
    }
}

/// Takes one round from the page's budget.
fn spend(budget: &mut u32, g: &Group) -> Step {
    if *budget == 0 {
        return Err(g.fail(status::TRUNCATED));
    }
    *budget -= 1;
    Ok(())
}

/// Bits used per lane when only stream 0 reads.
fn lane0_uses(bits: u32) -> [u32; LANES] {
    let mut used = [0; LANES];
    used[0] = bits;
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::GDeflateStatus;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Pages of `data` from the reference encoder (64 KiB pages).
    fn compress(data: &[u8], level: gdeflate::CompressionLevel) -> Vec<Vec<u8>> {
        let mut c = gdeflate::Compressor::new(level).unwrap();
        let r = c.compress(data, 65536).unwrap();
        let mut pages = Vec::new();
        let mut at = 0usize;
        for t in &r.tiles {
            pages.push(r.bytes[at..at + t.compressed_size as usize].to_vec());
            at += t.compressed_size as usize;
        }
        pages
    }

    /// The reference decoder's verdict on one page (only valid pages, or
    /// pages with a long zero tail: it does not bounds-check its input).
    fn reference(page: &[u8], size: usize) -> Option<Vec<u8>> {
        let mut padded = page.to_vec();
        padded.resize(page.len() + 4096, 0);
        let mut out = vec![0u8; size];
        let mut got = 0usize;
        // SAFETY: the page is valid for `page.len()` bytes plus a 4 KiB zero
        // tail, the output for `size` bytes; the decompressor is freed below.
        let ok = unsafe {
            let d = gdeflate::sys::libdeflate_alloc_gdeflate_decompressor();
            let mut p = gdeflate::sys::libdeflate_gdeflate_in_page {
                data: padded.as_ptr().cast(),
                nbytes: page.len(),
            };
            let r = gdeflate::sys::libdeflate_gdeflate_decompress(
                d,
                &mut p,
                1,
                out.as_mut_ptr().cast(),
                size,
                &mut got,
            );
            gdeflate::sys::libdeflate_free_gdeflate_decompressor(d);
            r == 0
        };
        (ok && got == size).then_some(out)
    }

    fn twin(page: &[u8], size: usize) -> (u32, Vec<u8>) {
        let (st, out, _) = twin_counted(page, size);
        (st, out)
    }

    /// The twin's status, output and the page bytes it read.
    fn twin_counted(page: &[u8], size: usize) -> (u32, Vec<u8>, u32) {
        let mut bytes = vec![0xAAu8; 3];
        bytes.extend_from_slice(page);
        bytes.resize(bytes.len().next_multiple_of(4), 0xAA);
        let input: Vec<u32> = bytemuck::cast_slice(&bytes).to_vec();
        let desc = BlockDesc::linear(3, page.len() as u32, 0, size as u32);
        let mut out = vec![0x5555_5555u32; size.div_ceil(4) + 1];
        let (st, read) = decode_counted(&desc, &input, &mut out);
        let b: &[u8] = bytemuck::cast_slice(&out);
        (st, b[..size].to_vec(), read)
    }

    fn sample(rng: &mut ChaCha8Rng, size: usize) -> Vec<u8> {
        match rng.gen_range(0..6) {
            0 => vec![0; size],
            1 => (0..size).map(|_| rng.gen()).collect(),
            2 => {
                let words = [
                    &b"the "[..],
                    b"quick ",
                    b"brown ",
                    b"fox ",
                    b"jumps\n",
                    b"over ",
                ];
                let mut v = Vec::new();
                while v.len() < size {
                    v.extend_from_slice(words[rng.gen_range(0..words.len())]);
                }
                v.truncate(size);
                v
            }
            3 => {
                let period = rng.gen_range(1..9);
                let pat: Vec<u8> = (0..period).map(|_| rng.gen()).collect();
                (0..size)
                    .map(|i| pat[i % period] ^ if rng.gen_ratio(1, 50) { 1 } else { 0 })
                    .collect()
            }
            4 => {
                let mut v = Vec::new();
                while v.len() < size {
                    let b: u8 = rng.gen();
                    v.extend(std::iter::repeat_n(b, rng.gen_range(1..300)));
                }
                v.truncate(size);
                v
            }
            _ => {
                // BCn-like: 16-byte blocks from a small palette.
                let pal: Vec<[u8; 16]> = (0..8).map(|_| rng.gen()).collect();
                let mut v = Vec::new();
                while v.len() < size {
                    v.extend_from_slice(&pal[rng.gen_range(0..8)]);
                }
                v.truncate(size);
                v
            }
        }
    }

    #[test]
    fn twin_matches_reference_on_valid_pages() {
        use gdeflate::CompressionLevel::*;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let levels = [None, Level1, Level6, Level12];
        for i in 0..160 {
            let size = match i % 4 {
                0 => rng.gen_range(1..64),
                1 => rng.gen_range(64..4096),
                2 => 65536,
                _ => rng.gen_range(1..=65536),
            };
            let data = sample(&mut rng, size);
            let pages = compress(&data, levels[i % 4]);
            assert_eq!(pages.len(), 1);
            let page = &pages[0];
            assert_eq!(reference(page, size).as_deref(), Some(&data[..]));
            let (st, out) = twin(page, size);
            assert_eq!(
                GDeflateStatus::from_word(st),
                GDeflateStatus::Ok,
                "page {i}"
            );
            assert!(out == data, "page {i}: output differs");
        }
    }

    #[test]
    fn twin_verdicts_match_reference_on_mutations() {
        use gdeflate::CompressionLevel::*;
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let mut agree_ok = 0;
        for i in 0..400 {
            let size = rng.gen_range(1..5000);
            let data = sample(&mut rng, size);
            let level = [Level1, Level6, Level12, None][i % 4];
            let mut page = compress(&data, level).remove(0);
            let at = rng.gen_range(0..page.len());
            page[at] ^= 1 << rng.gen_range(0..8);
            let want = reference(&page, size);
            let (st, out) = twin(&page, size);
            if let Some(bytes) = want {
                // The reference accepts it: so must the twin, unless the
                // reference read past the page end (into its zero tail).
                if st == status::OK {
                    assert!(out == bytes, "mutation {i}: bytes differ");
                    agree_ok += 1;
                } else {
                    assert_eq!(st & 0xff, status::TRUNCATED, "mutation {i}");
                }
            } else {
                assert_ne!(st, status::OK, "mutation {i}: twin accepts a bad page");
            }
        }
        assert!(agree_ok > 0);
    }

    #[test]
    fn truncated_and_empty_pages() {
        let data = vec![7u8; 1000];
        let page = compress(&data, gdeflate::CompressionLevel::Level6).remove(0);
        for cut in [0, 1, 4, 64, page.len() - 4, page.len() - 1] {
            let (st, _) = twin(&page[..cut], 1000);
            assert_eq!(st & 0xff, status::TRUNCATED, "cut at {cut}");
        }
        // A declared size the page does not reach, and one it exceeds.
        assert_eq!(twin(&page, 1001).0 & 0xff, status::SHORT_OUTPUT);
        assert_eq!(twin(&page, 999).0 & 0xff, status::OUTPUT_OVERRUN);
    }
}
