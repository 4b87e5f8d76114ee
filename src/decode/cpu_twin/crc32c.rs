//! Twin of `shaders/crc32c.wgsl`: the crc32c (Castagnoli) of one block
//! computed the way one workgroup of the shader computes it: per-lane
//! segments, a 256-entry table, each segment's raw CRC shifted past the
//! bytes after it (multiplication by `x^(8n)` modulo the polynomial) and
//! the lanes' values combined with XOR.
//!
//! The functions mirror the shader's (`table_entry`, `crc_byte`, `mul_mod`,
//! `shift_bytes`, `segment_crc`, `crc32c`); the tests hold both to the
//! `crc32c` crate. The descriptor and status codes shared with the pipeline
//! live here too.

use bytemuck::{Pod, Zeroable};

/// Lanes per workgroup, as the pipeline sets the shader's `WG`.
pub const WORKGROUP_SIZE: u32 = 64;

/// The reflected Castagnoli polynomial.
pub const POLY: u32 = 0x82F6_3B78;

/// The largest block the kernel checks (as the LZ4 decoder's
/// `MAX_SRC_SIZE`); larger descriptors are bad.
pub const MAX_CHECK_SIZE: u32 = 0xff_ffff;

/// Status codes of the crc32c kernel, one word per block.
pub mod check_code {
    /// Never written: the block was not checked.
    pub const NOT_RUN: u32 = 0;
    /// The stored bytes match the expected checksum (as `Lz4Status`'s OK).
    pub const OK: u32 = 1;
    /// The range lies outside the input binding or exceeds
    /// `MAX_CHECK_SIZE` (as `Lz4Status`'s
    /// BAD_DESCRIPTOR).
    pub const BAD_DESCRIPTOR: u32 = 2;
    /// The stored bytes' checksum differs from the expected one; a code the
    /// LZ4 decoder never writes, so the two kinds of status word can share
    /// one readback.
    pub const CHECKSUM_MISMATCH: u32 = 16;
}

/// One block to check, as the shader reads it (4 little-endian `u32`,
/// 16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockCheckDesc {
    /// Byte offset of the stored bytes in the input binding (any offset).
    pub src_offset: u32,
    /// Bytes to check.
    pub src_size: u32,
    /// The crc32c the pack recorded (as `crc32c::crc32c` computes it).
    pub expected: u32,
    /// Reserved, write 0.
    pub _pad: u32,
}

impl BlockCheckDesc {
    /// A check of `src_size` bytes at `src_offset` against `expected`.
    pub fn new(src_offset: u32, src_size: u32, expected: u32) -> Self {
        Self {
            src_offset,
            src_size,
            expected,
            _pad: 0,
        }
    }
}

/// The outcome of checking one block, from its status word and computed
/// checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum BlockCheck {
    /// The checksum matches.
    #[error("ok")]
    Ok,
    /// The block was not checked (its status word was never written).
    #[error("block was not checked")]
    NotRun,
    /// The descriptor's range lies outside the input binding.
    #[error("invalid checksum descriptor")]
    BadDescriptor,
    /// The stored bytes do not have the expected checksum.
    #[error("crc32c mismatch: expected {expected:#010x}, computed {computed:#010x}")]
    Mismatch {
        /// The checksum the pack recorded.
        expected: u32,
        /// The checksum of the bytes that arrived.
        computed: u32,
    },
    /// A status word with a code this version does not know.
    #[error("unknown checksum status word {0:#x}")]
    Unknown(u32),
}

impl BlockCheck {
    /// Decodes a block's status word and computed checksum, with the
    /// descriptor's expected checksum.
    pub fn from_words(status: u32, computed: u32, expected: u32) -> Self {
        match status {
            check_code::NOT_RUN => BlockCheck::NotRun,
            check_code::OK => BlockCheck::Ok,
            check_code::BAD_DESCRIPTOR => BlockCheck::BadDescriptor,
            check_code::CHECKSUM_MISMATCH => BlockCheck::Mismatch { expected, computed },
            other => BlockCheck::Unknown(other),
        }
    }

    /// Whether the checksum matched.
    pub fn is_ok(self) -> bool {
        self == BlockCheck::Ok
    }
}

/// The table entry for byte value `i`: `i` run through 8 register steps.
pub const fn table_entry(i: u32) -> u32 {
    let mut c = i;
    let mut k = 0;
    while k < 8 {
        c = (c >> 1) ^ (POLY & 0u32.wrapping_sub(c & 1));
        k += 1;
    }
    c
}

/// `a(x) * b(x)` modulo the polynomial, both reflected (bit 31 is `x^0`).
pub const fn mul_mod(a: u32, b_in: u32) -> u32 {
    let mut b = b_in;
    let mut p = 0u32;
    let mut k = 0;
    while k < 32 {
        p ^= b & 0u32.wrapping_sub((a >> (31 - k)) & 1);
        b = (b >> 1) ^ (POLY & 0u32.wrapping_sub(b & 1));
        k += 1;
    }
    p
}

/// `x^(8 * 2^j)` modulo the polynomial for `j` in `0..32`: the shift
/// operator's table, which the pipeline puts in the shader's uniform block.
pub const X8_POW: [u32; 32] = {
    // x^8, reflected: x^k is bit 31 - k.
    let mut t = [0u32; 32];
    t[0] = 1 << 23;
    let mut j = 1;
    while j < 32 {
        t[j] = mul_mod(t[j - 1], t[j - 1]);
        j += 1;
    }
    t
};

struct Workgroup<'a> {
    input: &'a [u32],
    table: [u32; 256],
}

impl Workgroup<'_> {
    fn input_byte(&self, addr: u32) -> u32 {
        (self.input[(addr >> 2) as usize] >> ((addr & 3) * 8)) & 0xff
    }

    fn crc_byte(&self, c: u32, b: u32) -> u32 {
        self.table[((c ^ b) & 0xff) as usize] ^ (c >> 8)
    }

    /// The raw CRC (register from 0) of input bytes `[lo, hi)`.
    fn segment_crc(&self, lo: u32, hi: u32) -> u32 {
        let mut c = 0u32;
        let mut p = lo;
        while p < hi && p & 3 != 0 {
            c = self.crc_byte(c, self.input_byte(p));
            p += 1;
        }
        while hi - p >= 4 {
            c ^= self.input[(p >> 2) as usize];
            c = self.table[(c & 0xff) as usize] ^ (c >> 8);
            c = self.table[(c & 0xff) as usize] ^ (c >> 8);
            c = self.table[(c & 0xff) as usize] ^ (c >> 8);
            c = self.table[(c & 0xff) as usize] ^ (c >> 8);
            p += 4;
        }
        while p < hi {
            c = self.crc_byte(c, self.input_byte(p));
            p += 1;
        }
        c
    }
}

/// The raw CRC register `c` advanced past `n` zero bytes: `c * x^(8n)`.
pub fn shift_bytes(c: u32, n: u32) -> u32 {
    let mut r = c;
    let mut left = n;
    let mut j = 0;
    while left != 0 && r != 0 {
        if left & 1 != 0 {
            r = mul_mod(r, X8_POW[j]);
        }
        left >>= 1;
        j += 1;
    }
    r
}

/// Checks one block as the shader's workgroup does; returns its status word
/// and computed checksum (0 for a bad descriptor), as the shader writes them.
pub fn crc32c(desc: &BlockCheckDesc, input: &[u32]) -> (u32, u32) {
    let in_bytes = (input.len() as u64 * 4).min(u32::MAX as u64 & !3) as u32;
    let ok = desc.src_size <= MAX_CHECK_SIZE
        && desc.src_size <= in_bytes
        && desc.src_offset <= in_bytes - desc.src_size;
    if !ok {
        return (check_code::BAD_DESCRIPTOR, 0);
    }
    let mut table = [0u32; 256];
    for (i, t) in table.iter_mut().enumerate() {
        *t = table_entry(i as u32);
    }
    let wg = Workgroup { input, table };

    let start = desc.src_offset;
    let end = start + desc.src_size;
    let base = start & !3;
    let seg = ((end - base).div_ceil(WORKGROUP_SIZE) + 3) & !3;
    let head = start - base;
    let span = end - base;
    let mut combined = 0u32;
    for lane in 0..WORKGROUP_SIZE {
        let lo = base + head.max(span.min(lane * seg));
        let hi = base + head.max(span.min((lane + 1) * seg));
        combined ^= shift_bytes(wg.segment_crc(lo, hi), end - hi);
    }
    let crc = !(shift_bytes(0xffff_ffff, desc.src_size) ^ combined);
    let code = if crc == desc.expected {
        check_code::OK
    } else {
        check_code::CHECKSUM_MISMATCH
    };
    (code, crc)
}

/// The crc32c of `data` computed the shader's way (equal to
/// `crc32c::crc32c(data)`); `data` is placed at byte `offset & 3` of a word
/// buffer so that every alignment of the segment boundaries can be tested.
pub fn crc32c_bytes(data: &[u8], offset: usize) -> u32 {
    let lead = offset & 3;
    let mut bytes = vec![0u8; lead];
    bytes.extend_from_slice(data);
    bytes.resize(bytes.len().next_multiple_of(4).max(4), 0);
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let desc = BlockCheckDesc::new(lead as u32, data.len() as u32, 0);
    crc32c(&desc, &words).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn shift_by_zero_bytes_matches_appending_zeros() {
        // Shifting a register by n bytes equals feeding it n zero bytes.
        let table: Vec<u32> = (0..256).map(table_entry).collect();
        for n in [0u32, 1, 2, 3, 7, 64, 1000] {
            let mut c = 0x1234_5678u32;
            for _ in 0..n {
                c = table[(c & 0xff) as usize] ^ (c >> 8);
            }
            assert_eq!(shift_bytes(0x1234_5678, n), c, "n = {n}");
        }
    }

    #[test]
    fn every_length_and_offset_matches_the_crc32c_crate() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(32);
        let data: Vec<u8> = (0..65536 + 3).map(|_| rng.gen()).collect();
        for len in 0..=65536usize {
            let offset = rng.gen_range(0..4);
            let slice = &data[offset..offset + len];
            assert_eq!(
                crc32c_bytes(slice, offset),
                ::crc32c::crc32c(slice),
                "length {len}, offset {offset}"
            );
        }
    }

    #[test]
    fn mismatch_and_bad_descriptor_codes() {
        let input = [0x0403_0201u32, 0x0807_0605];
        let good = ::crc32c::crc32c(&[2, 3, 4, 5, 6]);
        assert_eq!(
            crc32c(&BlockCheckDesc::new(1, 5, good), &input),
            (check_code::OK, good)
        );
        assert_eq!(
            crc32c(&BlockCheckDesc::new(1, 5, !good), &input),
            (check_code::CHECKSUM_MISMATCH, good)
        );
        assert_eq!(
            crc32c(&BlockCheckDesc::new(5, 4, 0), &input).0,
            check_code::BAD_DESCRIPTOR
        );
        assert_eq!(
            crc32c(&BlockCheckDesc::new(u32::MAX, 2, 0), &input).0,
            check_code::BAD_DESCRIPTOR
        );
        assert_eq!(
            BlockCheck::from_words(16, good, !good),
            BlockCheck::Mismatch {
                expected: !good,
                computed: good
            }
        );
    }
}
