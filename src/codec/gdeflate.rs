//! GDeflate 1.0 pages on the CPU: the decoder, in Rust, and the encoder,
//! through the reference compressor (`gdeflate-encode` feature).
//!
//! A GDeflate page is a deflate stream (RFC 1951) whose bits are dealt out
//! to 32 sub-streams so that 32 GPU lanes can decode it side by side. A
//! pack block of codec `gdeflate` is exactly one page, the bytes
//! `VK_EXT_memory_decompression` and DirectStorage take. The layout:
//!
//! * The page is read front to back as little-endian 32-bit words. Each
//!   sub-stream has a bit buffer; it starts with one word (sub-streams 0..32
//!   in order) and takes the next word of the page whenever it holds fewer
//!   than 32 bits after a step, so a step never needs more than the 32 bits
//!   it is sure to have (the longest, a length code and its extra bits, is
//!   31).
//! * The symbols are Deflate64's: lengths up to 65,538 bytes (the last
//!   three length symbols take 16 extra bits) and distances up to 64 KiB
//!   (distance symbols 30 and 31), a whole page.
//! * Steps go round the sub-streams in order. A step decodes one symbol:
//!   a literal, a match length (whose distance the same sub-stream decodes
//!   on its next turn, 32 steps later, when the copy is made) or the end of
//!   the deflate block.
//! * A deflate block's header, its code-length code lengths and its code
//!   lengths are dealt out the same way, each group starting again at
//!   sub-stream 0; a stored block's length and bytes too.
//! * After the end-of-block symbol, one more turn round all 32 sub-streams
//!   makes the copies still owed.
//!
//! The decoder here runs those steps one after another (the GPU decoder
//! runs a turn's 32 steps at once, see `shaders/gdeflate_decode.wgsl`).
//! Decoding is table-driven: a 10-bit table for the literal/length code and
//! an 8-bit one for distances answer most symbols in one lookup; longer
//! codes take a canonical walk.
//!
//! The page comes from an untrusted file. Every read is checked against
//! the page (a valid page never reads past its end), every write against
//! the declared size, every copy against the start of the output; a code
//! that is over-subscribed, or incomplete other than the two ways deflate
//! allows (no codes, or one code of one bit), is refused. The loop is
//! bounded: each step consumes input or writes output.

use super::{Codec, CodecError};

/// Sub-streams per page.
const STREAMS: usize = 32;
/// A sub-stream takes the next word when it holds fewer bits than this.
const REFILL_BELOW: u32 = 32;
/// Lookup bits of the literal/length table.
const LITLEN_BITS: u32 = 10;
/// Lookup bits of the distance table.
const DIST_BITS: u32 = 8;
/// Deflate's longest code.
const MAX_CODE_LEN: usize = 15;
/// Literal/length symbols a block may use.
const LITLEN_SYMS: usize = 288;
/// Distance symbols a block may use.
const DIST_SYMS: usize = 32;
/// The order of the code-length code's lengths (RFC 1951, 3.2.7). This and
/// the length and distance tables below are the one copy: the WGSL
/// decoder's twin reads them, and the shader gets them in its preamble
/// (`decode/gpu/preamble.rs`).
pub(crate) const PRECODE_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Match length base and extra bits for symbols 257..=287. GDeflate
/// takes Deflate64's lengths: the last three symbols (285 is 258 in plain
/// deflate) are 3 plus 16 extra bits, matches of up to 65,538 bytes.
pub(crate) const LENGTH_BASE: [u16; 31] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 3, 3, 3,
];
pub(crate) const LENGTH_EXTRA: [u8; 31] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 16, 16, 16,
];
/// Distance base and extra bits for symbols 0..=31: Deflate64's 64 KiB
/// window (30 and 31 reach 32,769 and 49,153 back).
pub(crate) const DIST_BASE: [u16; 32] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577, 32769, 49153,
];
pub(crate) const DIST_EXTRA: [u8; 32] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13, 14, 14,
];

/// The largest page the reference compressor writes for `uncompressed`
/// bytes: all stored blocks (5 bytes each per 10,000 bytes), its end
/// padding and two words per sub-stream. The reader refuses larger blocks.
pub fn max_page_size(uncompressed: usize) -> usize {
    let blocks = uncompressed.div_ceil(10_000).max(1);
    5 * blocks + uncompressed + 1 + 8 + 2 * STREAMS * 4
}

/// What a decode table entry says (the low 4 bits hold the code length).
mod entry {
    /// The symbol is a literal byte, in bits 16..24.
    pub const LITERAL: u32 = 1 << 4;
    /// A match length: base in bits 16..32, extra bits in 8..13.
    pub const LENGTH: u32 = 1 << 5;
    /// The end of the block.
    pub const END: u32 = 1 << 6;
    /// A distance: base in bits 16..32, extra bits in 8..13.
    pub const DISTANCE: u32 = 1 << 7;
    /// A code longer than the table: walk the canonical code.
    pub const LONG: u32 = 1 << 13;
    /// No symbol has this code.
    pub const INVALID: u32 = 1 << 14;
}

/// A canonical Huffman code of up to `N` symbols: a lookup table of `T`
/// entries (a power of two) for the codes up to log2(T) bits long, and the
/// counts and sorted symbols for the rest.
struct Code<const N: usize, const T: usize> {
    table: [u32; T],
    /// Codes of each length.
    counts: [u16; MAX_CODE_LEN + 1],
    /// Symbols in canonical order.
    sorted: [u16; N],
}

impl<const N: usize, const T: usize> Code<N, T> {
    /// The table's index bits.
    const BITS: u32 = T.trailing_zeros();

    fn new() -> Self {
        debug_assert!(T.is_power_of_two());
        Code {
            table: [entry::INVALID; T],
            counts: [0; MAX_CODE_LEN + 1],
            sorted: [0; N],
        }
    }

    /// Builds the code from `lens`; `value(sym)` gives a symbol's entry
    /// without its length. `false` for a code deflate does not allow.
    fn build(&mut self, lens: &[u8], value: impl Fn(usize) -> u32) -> bool {
        self.counts = [0; MAX_CODE_LEN + 1];
        for &l in lens {
            self.counts[l as usize] += 1;
        }
        self.counts[0] = 0;
        // Space left after each length: negative means over-subscribed.
        let mut left: i32 = 1;
        for len in 1..=MAX_CODE_LEN {
            left = (left << 1) - self.counts[len] as i32;
            if left < 0 {
                return false;
            }
        }
        let used: u32 = self.counts.iter().map(|&c| c as u32).sum();
        // Incomplete codes: only none at all, or a single one-bit code.
        if left > 0 && !(used == 0 || (used == 1 && self.counts[1] == 1)) {
            return false;
        }
        let mut offsets = [0u16; MAX_CODE_LEN + 2];
        for len in 1..=MAX_CODE_LEN {
            offsets[len + 1] = offsets[len] + self.counts[len];
        }
        for (sym, &l) in lens.iter().enumerate() {
            if l != 0 {
                self.sorted[offsets[l as usize] as usize] = sym as u16;
                offsets[l as usize] += 1;
            }
        }
        self.table.fill(entry::INVALID);
        // Assign canonical codes in order; fill the table with the
        // bit-reversed code of every short one, and mark the prefixes of
        // long ones.
        let mut code: u32 = 0;
        let mut index = 0usize;
        for len in 1..=MAX_CODE_LEN as u32 {
            for _ in 0..self.counts[len as usize] {
                let sym = self.sorted[index] as usize;
                index += 1;
                let rev = code.reverse_bits() >> (32 - len);
                if len <= Self::BITS {
                    let e = value(sym) | len;
                    let mut i = rev as usize;
                    while i < self.table.len() {
                        self.table[i] = e;
                        i += 1 << len;
                    }
                } else {
                    let prefix = rev as usize & (T - 1);
                    self.table[prefix] = entry::LONG;
                }
                code += 1;
            }
            code <<= 1;
        }
        true
    }

    /// The table's entry for `bits`: the symbol's, or [`entry::LONG`]
    /// for the prefix of a longer code.
    #[inline(always)]
    fn lookup(&self, bits: u64) -> u32 {
        self.table[(bits as usize) & (T - 1)]
    }

    /// Decodes one symbol from `bits` (at least 15 valid bits, first bit
    /// lowest): its entry, whose low 4 bits are the code length.
    #[inline(always)]
    fn decode(&self, bits: u64, value: impl Fn(usize) -> u32) -> u32 {
        let e = self.lookup(bits);
        if e & entry::LONG == 0 {
            return e;
        }
        self.walk(bits, value)
    }

    /// The canonical walk for codes longer than the table.
    #[cold]
    fn walk(&self, bits: u64, value: impl Fn(usize) -> u32) -> u32 {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..=MAX_CODE_LEN {
            code |= ((bits >> (len - 1)) & 1) as i32;
            let count = self.counts[len] as i32;
            if code - first < count {
                let sym = self.sorted[(index + code - first) as usize] as usize;
                return value(sym) | len as u32;
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        entry::INVALID
    }
}

/// The literal/length entry of a symbol.
fn litlen_value(sym: usize) -> u32 {
    match sym {
        0..=255 => entry::LITERAL | (sym as u32) << 16,
        256 => entry::END,
        257..=287 => {
            let i = sym - 257;
            entry::LENGTH | (LENGTH_EXTRA[i] as u32) << 8 | (LENGTH_BASE[i] as u32) << 16
        }
        _ => entry::INVALID,
    }
}

/// The distance entry of a symbol.
fn dist_value(sym: usize) -> u32 {
    match sym {
        0..=31 => entry::DISTANCE | (DIST_EXTRA[sym] as u32) << 8 | (DIST_BASE[sym] as u32) << 16,
        _ => entry::INVALID,
    }
}

/// The code-length code's entry of a symbol: the symbol itself.
fn precode_value(sym: usize) -> u32 {
    (sym as u32) << 16
}

/// Why a page did not decode; `at` is the input byte position (the next
/// word the page would give) where the decoder stopped.
#[derive(Debug)]
struct PageError {
    reason: &'static str,
    at: usize,
}

/// A page's 32 sub-streams over its bytes.
struct Streams<'a> {
    page: &'a [u8],
    /// The next unread byte of the page.
    next: usize,
    bits: [u64; STREAMS],
    held: [u32; STREAMS],
}

impl<'a> Streams<'a> {
    fn new(page: &'a [u8]) -> Result<Self, PageError> {
        let mut s = Streams {
            page,
            next: 0,
            bits: [0; STREAMS],
            held: [0; STREAMS],
        };
        for i in 0..STREAMS {
            s.refill(i)?;
        }
        Ok(s)
    }

    fn fail(&self, reason: &'static str) -> PageError {
        PageError {
            reason,
            at: self.next,
        }
    }

    /// Tops up sub-stream `i` with the page's next word if it holds fewer
    /// than 32 bits. Whether it does varies from step to step with the
    /// codes' lengths, a branch no predictor learns: while four bytes
    /// remain, the word is loaded every time and taken or not without a
    /// branch.
    #[inline(always)]
    fn refill(&mut self, i: usize) -> Result<(), PageError> {
        let held = self.held[i];
        let need = (held < REFILL_BELOW) as u32;
        match self
            .page
            .get(self.next..)
            .and_then(|r| r.first_chunk::<4>())
        {
            Some(&word) => {
                // `need` is 0 or 1: the word, or nothing, goes in.
                let word = u32::from_le_bytes(word) as u64 * need as u64;
                self.bits[i] |= word << held;
                self.held[i] = held + 32 * need;
                self.next += 4 * need as usize;
                Ok(())
            }
            None if need == 1 => Err(self.fail("page ends inside a sub-stream")),
            None => Ok(()),
        }
    }

    /// Takes `n` (at most 32) bits from sub-stream `i`. A step takes at
    /// most 31 bits (a 15-bit length code and 16 extra bits) and every
    /// sub-stream holds at least 32 when its turn comes, so this never runs
    /// dry.
    #[inline(always)]
    fn take(&mut self, i: usize, n: u32) -> u32 {
        debug_assert!(n <= self.held[i]);
        let v = (self.bits[i] & ((1u64 << n) - 1)) as u32;
        self.bits[i] >>= n;
        self.held[i] -= n;
        v
    }
}

/// A match whose length is known and whose distance comes on the
/// sub-stream's next turn.
#[derive(Clone, Copy, Default)]
struct Owed {
    at: u32,
    len: u32,
}

/// The decoder's state for one page.
struct Decoder<'a, 'o> {
    s: Streams<'a>,
    out: &'o mut [u8],
    /// Output bytes written or claimed by a match.
    pos: usize,
    /// Sub-streams with a copy owed (bit i for sub-stream i).
    owed_mask: u32,
    owed: [Owed; STREAMS],
    litlen: Code<LITLEN_SYMS, { 1 << LITLEN_BITS }>,
    dist: Code<DIST_SYMS, { 1 << DIST_BITS }>,
    precode: Code<19, 128>,
}

/// Decodes one page into `dst`, whose length is the declared size; the
/// page must produce exactly that many bytes.
pub(crate) fn decompress_page(page: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    if page.is_empty() && dst.is_empty() {
        return Ok(());
    }
    let malformed = |e: PageError| CodecError::Malformed {
        codec: Codec::GDeflate,
        reason: format!("{} at page byte {}", e.reason, e.at),
    };
    let s = Streams::new(page).map_err(malformed)?;
    let mut d = Decoder {
        s,
        out: dst,
        pos: 0,
        owed_mask: 0,
        owed: [Owed::default(); STREAMS],
        litlen: Code::new(),
        dist: Code::new(),
        precode: Code::new(),
    };
    d.run().map_err(malformed)?;
    if d.pos != d.out.len() {
        return Err(CodecError::WrongLength {
            codec: Codec::GDeflate,
            expected: d.out.len(),
            got: d.pos,
        });
    }
    Ok(())
}

impl Decoder<'_, '_> {
    fn run(&mut self) -> Result<(), PageError> {
        loop {
            let last = self.s.take(0, 1);
            let kind = self.s.take(0, 2);
            self.s.refill(0)?;
            let end_stream = match kind {
                0 => self.stored()?,
                1 => {
                    self.fixed_codes();
                    self.symbols()?
                }
                2 => {
                    self.dynamic_codes()?;
                    self.symbols()?
                }
                _ => return Err(self.s.fail("reserved deflate block type 3")),
            };
            self.settle(end_stream)?;
            if last == 1 {
                return Ok(());
            }
        }
    }

    /// A stored block: a 16-bit length from sub-stream 0, then its bytes
    /// one per step. Returns the sub-stream whose turn comes next.
    fn stored(&mut self) -> Result<usize, PageError> {
        let len = self.s.take(0, 16) as usize;
        if len > self.out.len() - self.pos {
            return Err(self.s.fail("stored block overruns the declared size"));
        }
        let mut i = 0;
        for _ in 0..len {
            self.out[self.pos] = self.s.take(i, 8) as u8;
            self.pos += 1;
            self.s.refill(i)?;
            i = (i + 1) % STREAMS;
        }
        Ok(i)
    }

    fn fixed_codes(&mut self) {
        let mut lens = [0u8; LITLEN_SYMS];
        lens[..144].fill(8);
        lens[144..256].fill(9);
        lens[256..280].fill(7);
        lens[280..].fill(8);
        let built = self.litlen.build(&lens, litlen_value);
        debug_assert!(built);
        let built = self.dist.build(&[5u8; DIST_SYMS], dist_value);
        debug_assert!(built);
    }

    /// A dynamic block's header: counts from sub-stream 0, the code-length
    /// code dealt out one length per step, then the code lengths one
    /// symbol per step, each group from sub-stream 0.
    fn dynamic_codes(&mut self) -> Result<(), PageError> {
        let nlit = self.s.take(0, 5) as usize + 257;
        let ndist = self.s.take(0, 5) as usize + 1;
        let npre = self.s.take(0, 4) as usize + 4;
        self.s.refill(0)?;
        let mut pre_lens = [0u8; 19];
        for (k, &sym) in PRECODE_ORDER.iter().enumerate().take(npre) {
            let i = k % STREAMS;
            pre_lens[sym] = self.s.take(i, 3) as u8;
            self.s.refill(i)?;
        }
        if !self.precode.build(&pre_lens, precode_value) {
            return Err(self.s.fail("invalid code-length code"));
        }
        let total = nlit + ndist;
        let mut lens = [0u8; LITLEN_SYMS + DIST_SYMS];
        let (mut n, mut i) = (0usize, 0usize);
        while n < total {
            let e = self.precode.decode(self.s.bits[i], precode_value);
            if e & entry::INVALID != 0 {
                return Err(self.s.fail("invalid code-length symbol"));
            }
            self.s.take(i, e & 15);
            let sym = e >> 16;
            let (value, repeat) = match sym {
                0..=15 => (sym as u8, 1),
                16 => {
                    if n == 0 {
                        return Err(self.s.fail("code-length repeat with nothing before it"));
                    }
                    (lens[n - 1], 3 + self.s.take(i, 2) as usize)
                }
                17 => (0, 3 + self.s.take(i, 3) as usize),
                _ => (0, 11 + self.s.take(i, 7) as usize),
            };
            if n + repeat > total {
                return Err(self.s.fail("code lengths run past their count"));
            }
            lens[n..n + repeat].fill(value);
            n += repeat;
            self.s.refill(i)?;
            i = (i + 1) % STREAMS;
        }
        if lens[256] == 0 {
            return Err(self.s.fail("no end-of-block code"));
        }
        if !self.litlen.build(&lens[..nlit], litlen_value)
            || !self.dist.build(&lens[nlit..total], dist_value)
        {
            return Err(self.s.fail("invalid literal/length or distance code"));
        }
        Ok(())
    }

    /// A Huffman block's symbols, one per step round the sub-streams from
    /// sub-stream 0, until the end-of-block symbol. Returns the sub-stream
    /// that read it.
    fn symbols(&mut self) -> Result<usize, PageError> {
        // The position and the owed copies live in locals for the loop.
        let mut pos = self.pos;
        let mut owed_mask = self.owed_mask;
        let mut i = 0usize;
        let end = loop {
            if owed_mask & (1 << i) != 0 {
                owed_mask &= !(1 << i);
                if let Err(e) = self.copy(i) {
                    break Err(e);
                }
            } else {
                // Literals, the common case, never need the long walk:
                // test for them first.
                let bits = self.s.bits[i];
                let mut e = self.litlen.lookup(bits);
                if e & entry::LITERAL == 0 && e & entry::LONG != 0 {
                    e = self.litlen.walk(bits, litlen_value);
                }
                self.s.take(i, e & 15);
                if e & entry::LITERAL != 0 {
                    let Some(byte) = self.out.get_mut(pos) else {
                        break Err(self.s.fail("literal past the declared size"));
                    };
                    *byte = (e >> 16) as u8;
                    pos += 1;
                } else if e & entry::LENGTH != 0 {
                    let len = (e >> 16) + self.s.take(i, (e >> 8) & 31);
                    if len as usize > self.out.len() - pos {
                        break Err(self.s.fail("match past the declared size"));
                    }
                    self.owed[i] = Owed {
                        at: pos as u32,
                        len,
                    };
                    owed_mask |= 1 << i;
                    pos += len as usize;
                } else if e & entry::END != 0 {
                    break Ok(i);
                } else {
                    break Err(self.s.fail("invalid literal/length symbol"));
                }
            }
            if let Err(e) = self.s.refill(i) {
                break Err(e);
            }
            i = (i + 1) % STREAMS;
        };
        self.pos = pos;
        self.owed_mask = owed_mask;
        end
    }

    /// The turn after a block's end: from the sub-stream that read it, each
    /// sub-stream makes the copy it owes, if any, and tops up.
    fn settle(&mut self, from: usize) -> Result<(), PageError> {
        for k in 0..STREAMS {
            let i = (from + k) % STREAMS;
            if self.owed_mask & (1 << i) != 0 {
                self.owed_mask &= !(1 << i);
                self.copy(i)?;
            }
            self.s.refill(i)?;
        }
        Ok(())
    }

    /// Decodes sub-stream `i`'s distance and makes the copy it owes (the
    /// caller clears its owed bit).
    #[inline(always)]
    fn copy(&mut self, i: usize) -> Result<(), PageError> {
        let e = self.dist.decode(self.s.bits[i], dist_value);
        if e & entry::DISTANCE == 0 {
            return Err(self.s.fail("invalid distance symbol"));
        }
        self.s.take(i, e & 15);
        let dist = ((e >> 16) + self.s.take(i, (e >> 8) & 31)) as usize;
        let Owed { at, len } = self.owed[i];
        let (at, len) = (at as usize, len as usize);
        if dist > at {
            return Err(self.s.fail("match reaches before the page's output"));
        }
        let from = at - dist;
        let out = &mut *self.out;
        if dist >= 8 {
            // Eight bytes at a time, front to back: each chunk reads bytes
            // at least eight before it, all final. Never past the match:
            // the literals after it are already written.
            let mut k = 0;
            while k + 8 <= len {
                let chunk: [u8; 8] = out[from + k..from + k + 8].try_into().unwrap_or([0; 8]);
                out[at + k..at + k + 8].copy_from_slice(&chunk);
                k += 8;
            }
            for k in k..len {
                out[at + k] = out[from + k];
            }
        } else if dist == 1 {
            let b = out[from];
            out[at..at + len].fill(b);
        } else {
            // Overlapping: each byte repeats the one `dist` before it.
            for k in 0..len {
                out[at + k] = out[from + k];
            }
        }
        Ok(())
    }
}

/// The reference compressor, one per thread and level (a compressor at
/// the high levels holds several MiB of match-finder state).
#[cfg(feature = "gdeflate-encode")]
pub(crate) fn compress_page(src: &[u8], level: i32, out: &mut Vec<u8>) -> Result<(), CodecError> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static COMPRESSORS: RefCell<HashMap<i32, gdeflate::Compressor>> = RefCell::new(HashMap::new());
    }
    let level = level.clamp(0, MAX_LEVEL);
    let failed = |what: String| CodecError::Malformed {
        codec: Codec::GDeflate,
        reason: what,
    };
    if src.is_empty() {
        return Ok(());
    }
    COMPRESSORS.with(|c| {
        let mut map = c.borrow_mut();
        let compressor = match map.entry(level) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let l = gdeflate_level(level);
                v.insert(gdeflate::Compressor::new(l).map_err(|e| failed(e.to_string()))?)
            }
        };
        let page = compressor
            .compress(src, super::MAX_BLOCK_SIZE)
            .map_err(|e| failed(e.to_string()))?;
        if page.tiles.len() != 1 || page.bytes.len() > max_page_size(src.len()) {
            return Err(failed(format!(
                "reference compressor wrote {} pages of {} bytes for {} bytes",
                page.tiles.len(),
                page.bytes.len(),
                src.len()
            )));
        }
        out.extend_from_slice(&page.bytes);
        Ok(())
    })
}

/// The strongest GDeflate level (the reference's near-optimal parse).
pub const MAX_LEVEL: i32 = 12;

#[cfg(feature = "gdeflate-encode")]
fn gdeflate_level(level: i32) -> gdeflate::CompressionLevel {
    use gdeflate::CompressionLevel as L;
    [
        L::None,
        L::Level1,
        L::Level2,
        L::Level3,
        L::Level4,
        L::Level5,
        L::Level6,
        L::Level7,
        L::Level8,
        L::Level9,
        L::Level10,
        L::Level11,
        L::Level12,
    ][level.clamp(0, MAX_LEVEL) as usize]
}

/// Without the `gdeflate-encode` feature there is no compressor.
#[cfg(not(feature = "gdeflate-encode"))]
pub(crate) fn compress_page(
    _src: &[u8],
    _level: i32,
    _out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    Err(CodecError::Malformed {
        codec: Codec::GDeflate,
        reason: "GDeflate compression needs the crate's `gdeflate-encode` feature".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The reference compressor's page for `src` at `level`.
    fn reference_page(src: &[u8], level: gdeflate::CompressionLevel) -> Vec<u8> {
        let mut c = gdeflate::Compressor::new(level).unwrap();
        let r = c.compress(src, crate::MAX_BLOCK_SIZE).unwrap();
        assert_eq!(r.tiles.len(), 1);
        r.bytes
    }

    /// The reference decoder on a valid page (it does not bounds-check its
    /// input, so only pages the reference wrote go through it, with a zero
    /// tail as its format asks).
    fn reference_decode(page: &[u8], len: usize) -> Vec<u8> {
        let mut padded = page.to_vec();
        padded.resize(page.len() + 256, 0);
        // A pattern, not zeros, so that bytes the decoder leaves alone show.
        let mut out = vec![0xA5u8; len];
        let mut got = 0usize;
        // SAFETY: the page is the reference compressor's own output, the
        // input pointer covers `page.len()` bytes plus the zero tail, and
        // `out` is writable for `len` bytes, the size the call is given.
        unsafe {
            let d = gdeflate::sys::libdeflate_alloc_gdeflate_decompressor();
            assert!(!d.is_null());
            let mut p = gdeflate::sys::libdeflate_gdeflate_in_page {
                data: padded.as_ptr().cast(),
                nbytes: page.len(),
            };
            let r = gdeflate::sys::libdeflate_gdeflate_decompress(
                d,
                &mut p,
                1,
                out.as_mut_ptr().cast(),
                len,
                &mut got,
            );
            gdeflate::sys::libdeflate_free_gdeflate_decompressor(d);
            assert_eq!(r, 0, "reference decoder result");
        }
        assert_eq!(got, len, "reference decoder output size");
        out
    }

    /// Data of several kinds: zeros, noise, text-like, BC-like 8-byte
    /// blocks, runs with short distances.
    fn sample(kind: usize, len: usize, rng: &mut ChaCha8Rng) -> Vec<u8> {
        match kind % 5 {
            0 => vec![0u8; len],
            1 => (0..len).map(|_| rng.gen()).collect(),
            2 => (0..len)
                .map(|i| b"the quick brown fox jumps over "[(i * 7 + i / 31) % 31])
                .collect(),
            3 => {
                let palette: Vec<[u8; 8]> = (0..40).map(|_| rng.gen()).collect();
                (0..len.div_ceil(8))
                    .flat_map(|_| {
                        let mut b = palette[rng.gen_range(0..palette.len())];
                        b[4 + rng.gen_range(0..4)] ^= rng.gen::<u8>() & 3;
                        b
                    })
                    .take(len)
                    .collect()
            }
            _ => {
                let mut v = Vec::with_capacity(len);
                while v.len() < len {
                    let b: u8 = rng.gen();
                    let n = rng.gen_range(1..300);
                    v.extend(std::iter::repeat_n(b, n));
                    v.push(rng.gen());
                }
                v.truncate(len);
                v
            }
        }
    }

    #[test]
    fn reference_pages_decode_to_the_original_and_agree_with_the_reference() {
        use gdeflate::CompressionLevel as L;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let levels = [L::None, L::Level1, L::Level6, L::Level9, L::Level12];
        let mut n = 0;
        for kind in 0..5 {
            for len in [1usize, 3, 31, 100, 4095, 10_001, 65535, 65536] {
                let src = sample(kind, len, &mut rng);
                for &level in &levels {
                    let page = reference_page(&src, level);
                    assert!(page.len() <= max_page_size(len));
                    let mut out = vec![0u8; len];
                    decompress_page(&page, &mut out)
                        .unwrap_or_else(|e| panic!("kind {kind} len {len} {level:?}: {e}"));
                    assert_eq!(out, src, "kind {kind} len {len} {level:?}");
                    assert_eq!(reference_decode(&page, len), src);
                    n += 1;
                }
            }
        }
        assert_eq!(n, 5 * 8 * 5);
    }

    #[test]
    #[cfg(feature = "gdeflate-encode")]
    fn through_the_codec_type() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let src = sample(3, 65536, &mut rng);
        let page = Codec::GDeflate.compress(&src, 12).unwrap();
        assert!(page.len() < src.len());
        let mut out = vec![0u8; src.len()];
        Codec::GDeflate.decompress_into(&page, &mut out).unwrap();
        assert_eq!(out, src);
        // An empty block is an empty page.
        assert!(Codec::GDeflate.compress(&[], 12).unwrap().is_empty());
        Codec::GDeflate.decompress_into(&[], &mut []).unwrap();
    }

    #[test]
    fn cut_and_wrong_sizes_are_errors() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let src = sample(2, 20_000, &mut rng);
        let page = reference_page(&src, gdeflate::CompressionLevel::Level6);
        for cut in 0..page.len() {
            let mut out = vec![0u8; src.len()];
            assert!(
                decompress_page(&page[..cut], &mut out).is_err(),
                "cut {cut}"
            );
        }
        for len in [src.len() - 1, src.len() + 1] {
            let mut out = vec![0u8; len];
            assert!(decompress_page(&page, &mut out).is_err(), "len {len}");
        }
    }

    #[test]
    fn mutated_pages_never_panic() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut bad = 0;
        for round in 0..3000 {
            let src = sample(round, rng.gen_range(1..5000), &mut rng);
            let mut page = reference_page(&src, gdeflate::CompressionLevel::Level6);
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..page.len());
                page[i] ^= 1 << rng.gen_range(0..8);
            }
            let mut out = vec![0u8; src.len()];
            bad += decompress_page(&page, &mut out).is_err() as u32;
        }
        // Most flips land in literal bits (another valid page) or in the
        // zero tail; the pack's checksum catches those. The point is that
        // none panics or writes out of bounds; many are still refused.
        assert!(bad > 500, "only {bad} of 3000 mutated pages flagged");
    }

    #[test]
    fn codes_deflate_forbids_are_refused() {
        let mut c = Code::<19, 128>::new();
        // Over-subscribed: three one-bit codes.
        assert!(!c.build(&[1, 1, 1], precode_value));
        // Incomplete beyond the allowed cases: two two-bit codes.
        assert!(!c.build(&[2, 2, 0], precode_value));
        // Allowed: none at all, or a single one-bit code.
        assert!(c.build(&[0, 0, 0], precode_value));
        assert!(c.build(&[0, 1, 0], precode_value));
        assert_eq!(c.decode(0, precode_value), precode_value(1) | 1);
        assert_eq!(c.decode(1, precode_value), entry::INVALID);
    }
}
