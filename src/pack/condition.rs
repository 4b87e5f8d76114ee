//! BCn conditioning: a lossless, per-block reordering of a texture block's
//! bytes, field by field, so that a byte-oriented compressor sees long runs
//! of like data.
//!
//! A BCn texel block mixes fields of very different statistics: BC1's two
//! 16-bit endpoints are smooth across neighbouring blocks, its 32 bits of
//! indices are close to noise. Stored as they come, every 8 bytes switch
//! between the two, and LZ4 finds few long matches. Stored field by field
//! (all endpoints of the block, then all indices), the endpoints repeat and
//! the compressor's matches grow. DirectStorage's GACL does the same kind
//! of shuffle before compression, for the same reason.
//!
//! A transform splits every `element`-byte BC block of the decoded block
//! into the fields listed by [`BlockTransform::fields`]; field `f` of all
//! `n` elements is stored back to back, fields in order. Bytes past the last
//! whole element (none in a BCn tile or packed-mip block, whose sizes are
//! multiples of the format's block bytes) stay where they are.
//!
//! ```text
//! original     | e0 i0 | e1 i1 | e2 i2 | ...          (BC1: 4-byte endpoints e, 4-byte indices i)
//! conditioned  | e0 e1 e2 ... | i0 i1 i2 ... | tail |
//! ```
//!
//! The transform is undone wherever a block is decoded: in
//! [`crate::pack::Pack::check_block`] (the CPU decode path, `verify`,
//! `unpack`) and, for GPU destinations, by the runtime before the bytes
//! reach them. [`BlockTransform::source_offset`] is the one mapping both
//! directions are written from, and the GPU's un-conditioning pass uses the
//! same arithmetic.

use super::TextureFormat;

/// How a block's decoded bytes are ordered (the block entry's byte 14).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[repr(u8)]
#[non_exhaustive]
pub enum BlockTransform {
    /// As the texture's blocks are laid out: no transform.
    #[default]
    None = 0,
    /// 8-byte blocks as endpoints (4) | indices (4): BC1.
    Bc1Split = 1,
    /// 16-byte blocks as alpha endpoints (2) | alpha indices (6) | colour
    /// endpoints (4) | colour indices (4): BC3.
    Bc3Split = 2,
    /// 8-byte blocks as endpoints (2) | indices (6): BC4.
    Bc4Split = 3,
    /// 16-byte blocks as red endpoints (2) | red indices (6) | green
    /// endpoints (2) | green indices (6): BC5.
    Bc5Split = 4,
    /// 16-byte blocks as 16 byte planes: byte 0 of every block, then byte
    /// 1, ... BC7, whose fields depend on each block's mode.
    BytePlanes16 = 5,
}

/// The field lengths of each transform, in element order.
const BC1_FIELDS: &[u32] = &[4, 4];
const BC3_FIELDS: &[u32] = &[2, 6, 4, 4];
const BC4_FIELDS: &[u32] = &[2, 6];
const BC5_FIELDS: &[u32] = &[2, 6, 2, 6];
const PLANES16_FIELDS: &[u32] = &[1; 16];

impl BlockTransform {
    /// Every transform, in id order.
    pub const ALL: [BlockTransform; 6] = [
        BlockTransform::None,
        BlockTransform::Bc1Split,
        BlockTransform::Bc3Split,
        BlockTransform::Bc4Split,
        BlockTransform::Bc5Split,
        BlockTransform::BytePlanes16,
    ];

    /// The id byte stored in the block entry.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The transform for an id byte, or `None` for an id this version does
    /// not know.
    pub fn from_id(id: u8) -> Option<BlockTransform> {
        Self::ALL.get(id as usize).copied()
    }

    /// The name `info` and the JSON reports use.
    pub fn name(self) -> &'static str {
        match self {
            BlockTransform::None => "none",
            BlockTransform::Bc1Split => "bc1-split",
            BlockTransform::Bc3Split => "bc3-split",
            BlockTransform::Bc4Split => "bc4-split",
            BlockTransform::Bc5Split => "bc5-split",
            BlockTransform::BytePlanes16 => "byte-planes-16",
        }
    }

    /// The field lengths of one element, in element order (empty for
    /// [`BlockTransform::None`]).
    pub fn fields(self) -> &'static [u32] {
        match self {
            BlockTransform::None => &[],
            BlockTransform::Bc1Split => BC1_FIELDS,
            BlockTransform::Bc3Split => BC3_FIELDS,
            BlockTransform::Bc4Split => BC4_FIELDS,
            BlockTransform::Bc5Split => BC5_FIELDS,
            BlockTransform::BytePlanes16 => PLANES16_FIELDS,
        }
    }

    /// Bytes of one element (one BC block): the sum of the fields; 0 for
    /// [`BlockTransform::None`].
    pub fn element_bytes(self) -> u32 {
        self.fields().iter().sum()
    }

    /// The transforms the packer tries on a texture of `format`, most
    /// specific first. A transform is only valid on a texture whose bytes
    /// per block equal its element size (the reader checks).
    pub fn candidates(format: TextureFormat) -> &'static [BlockTransform] {
        use TextureFormat as F;
        match format {
            F::Bc1 | F::Bc1Srgb => &[BlockTransform::Bc1Split],
            F::Bc3 | F::Bc3Srgb => &[BlockTransform::Bc3Split, BlockTransform::BytePlanes16],
            F::Bc4 => &[BlockTransform::Bc4Split],
            F::Bc5 => &[BlockTransform::Bc5Split, BlockTransform::BytePlanes16],
            F::Bc7 | F::Bc7Srgb => &[BlockTransform::BytePlanes16],
            _ => &[],
        }
    }

    /// Whether this transform may be recorded on a block of a `format`
    /// texture: none always; the others where the element is the format's
    /// block.
    pub fn fits(self, format: TextureFormat) -> bool {
        self == BlockTransform::None
            || (format.is_compressed() && self.element_bytes() == format.bytes_per_block())
    }

    /// Where original byte `at` of a `len`-byte block lies in the
    /// conditioned block. A bijection on `0..len`; the identity for
    /// [`BlockTransform::None`] and for bytes past the last whole element.
    /// The GPU pass and its Rust twin compute exactly this.
    pub fn source_offset(self, len: u32, at: u32) -> u32 {
        let e = self.element_bytes();
        if e == 0 {
            return at;
        }
        let n = len / e;
        if at >= n * e {
            return at;
        }
        let (elem, mut byte) = (at / e, at % e);
        let mut start = 0;
        for &f in self.fields() {
            if byte < f {
                return start * n + elem * f + byte;
            }
            byte -= f;
            start += f;
        }
        unreachable!("a byte inside an element lies in one of its fields")
    }

    /// Conditions `src` (a block as the texture lays it out) into `dst`, of
    /// the same length.
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn apply(self, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "a transform keeps the length");
        self.walk(src.len(), |original, conditioned, len| {
            dst[conditioned..conditioned + len].copy_from_slice(&src[original..original + len]);
        });
    }

    /// Undoes [`BlockTransform::apply`]: `src` is a conditioned block,
    /// `dst` (same length) receives the texture's own layout.
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn undo(self, src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len(), "a transform keeps the length");
        match self {
            // The common shapes get fixed-size copies the compiler turns
            // into plain loads and stores (the generic walk below copies
            // a field at a time: 1.4-1.6 GB/s against 5-10 here).
            BlockTransform::Bc1Split => undo_fields::<8, 4, 4, 0, 0>(src, dst),
            BlockTransform::Bc4Split => undo_fields::<8, 2, 6, 0, 0>(src, dst),
            BlockTransform::Bc3Split => undo_fields::<16, 2, 6, 4, 4>(src, dst),
            BlockTransform::Bc5Split => undo_fields::<16, 2, 6, 2, 6>(src, dst),
            BlockTransform::BytePlanes16 => undo_planes16(src, dst),
            _ => self.walk(src.len(), |original, conditioned, len| {
                dst[original..original + len].copy_from_slice(&src[conditioned..conditioned + len]);
            }),
        }
    }

    /// Calls `copy(original, conditioned, len)` for every run of bytes the
    /// transform moves, the tail included, covering `0..len` once on each
    /// side.
    fn walk(self, len: usize, mut copy: impl FnMut(usize, usize, usize)) {
        let e = self.element_bytes() as usize;
        if e == 0 {
            copy(0, 0, len);
            return;
        }
        let n = len / e;
        let mut start = 0;
        let mut off = 0;
        for &f in self.fields() {
            let f = f as usize;
            for i in 0..n {
                copy(i * e + off, start + i * f, f);
            }
            start += n * f;
            off += f;
        }
        copy(n * e, n * e, len - n * e);
    }
}

/// [`BlockTransform::undo`] for elements of `E` bytes in up to four
/// fields of `A`, `B`, `C` and `D` bytes (0: no such field), all known to
/// the compiler.
fn undo_fields<const E: usize, const A: usize, const B: usize, const C: usize, const D: usize>(
    src: &[u8],
    dst: &mut [u8],
) {
    let n = src.len() / E;
    let (fa, rest) = src.split_at(n * A);
    let (fb, rest) = rest.split_at(n * B);
    let (fc, rest) = rest.split_at(n * C);
    let (fd, tail) = rest.split_at(n * D);
    for (i, out) in dst[..n * E].chunks_exact_mut(E).enumerate() {
        out[..A].copy_from_slice(&fa[i * A..i * A + A]);
        out[A..A + B].copy_from_slice(&fb[i * B..i * B + B]);
        out[A + B..A + B + C].copy_from_slice(&fc[i * C..i * C + C]);
        out[A + B + C..E].copy_from_slice(&fd[i * D..i * D + D]);
    }
    dst[n * E..].copy_from_slice(tail);
}

/// [`BlockTransform::undo`] for [`BlockTransform::BytePlanes16`]: a
/// transpose of 16 planes of `n` bytes into `n` elements of 16, done 16
/// elements at a time: 16 bytes of each plane loaded at once, the 16x16
/// tile transposed in registers ([`transpose16`]), 256 bytes stored in
/// order.
fn undo_planes16(src: &[u8], dst: &mut [u8]) {
    let n = src.len() / 16;
    let whole = n / 16 * 16;
    for i0 in (0..whole).step_by(16) {
        let rows: [[u8; 16]; 16] = std::array::from_fn(|b| {
            src[b * n + i0..b * n + i0 + 16]
                .try_into()
                .expect("16 bytes of a plane")
        });
        let elements = transpose16(rows);
        for (k, e) in elements.iter().enumerate() {
            dst[(i0 + k) * 16..(i0 + k + 1) * 16].copy_from_slice(e);
        }
    }
    for i in whole..n {
        for b in 0..16 {
            dst[i * 16 + b] = src[b * n + i];
        }
    }
    dst[n * 16..].copy_from_slice(&src[n * 16..]);
}

/// Transposes a 16x16 byte tile: `out[k][b] == rows[b][k]`. On x86-64,
/// four rounds of SSE2 byte interleaves (row `i` with row `i + 8` into rows
/// `2i` and `2i + 1`: after four, every column is a row), about four times
/// the scalar loop's speed; elsewhere, the loop.
#[cfg(target_arch = "x86_64")]
fn transpose16(rows: [[u8; 16]; 16]) -> [[u8; 16]; 16] {
    use std::arch::x86_64::{__m128i, _mm_unpackhi_epi8, _mm_unpacklo_epi8};
    let mut x: [__m128i; 16] = rows.map(bytemuck::cast);
    for _ in 0..4 {
        let y: [__m128i; 16] = std::array::from_fn(|j| {
            let (a, b) = (x[j / 2], x[j / 2 + 8]);
            // SAFETY: the intrinsics need SSE2, which every x86-64 CPU
            // has (it is part of the target's baseline); they touch no
            // memory.
            unsafe {
                if j % 2 == 0 {
                    _mm_unpacklo_epi8(a, b)
                } else {
                    _mm_unpackhi_epi8(a, b)
                }
            }
        });
        x = y;
    }
    x.map(bytemuck::cast)
}

/// See the x86-64 version.
#[cfg(not(target_arch = "x86_64"))]
fn transpose16(rows: [[u8; 16]; 16]) -> [[u8; 16]; 16] {
    std::array::from_fn(|k| std::array::from_fn(|b| rows[b][k]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed.wrapping_mul(2_654_435_761).max(1);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    #[test]
    fn every_transform_round_trips_every_length() {
        for t in BlockTransform::ALL {
            for len in [0usize, 1, 7, 8, 15, 16, 17, 100, 1024, 4099, 65536] {
                let src = bytes(len, len as u32 + t.id() as u32);
                let mut mid = vec![0u8; len];
                let mut back = vec![0u8; len];
                t.apply(&src, &mut mid);
                t.undo(&mid, &mut back);
                assert_eq!(back, src, "{t:?} len {len}");
                for at in 0..len as u32 {
                    assert_eq!(
                        mid[t.source_offset(len as u32, at) as usize],
                        src[at as usize],
                        "{t:?} len {len} byte {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_tile_transpose_is_one() {
        let rows: [[u8; 16]; 16] =
            std::array::from_fn(|b| std::array::from_fn(|k| (b * 16 + k) as u8));
        let t = transpose16(rows);
        for b in 0..16 {
            for k in 0..16 {
                assert_eq!(t[k][b], rows[b][k]);
            }
        }
    }

    #[test]
    fn bc1_split_puts_endpoints_first() {
        let src: Vec<u8> = (0..24).collect();
        let mut out = vec![0; 24];
        BlockTransform::Bc1Split.apply(&src, &mut out);
        assert_eq!(
            out,
            [
                0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22,
                23
            ]
        );
    }

    #[test]
    fn ids_round_trip_and_unknown_ids_are_refused() {
        for t in BlockTransform::ALL {
            assert_eq!(BlockTransform::from_id(t.id()), Some(t));
        }
        assert_eq!(BlockTransform::from_id(6), None);
        assert_eq!(BlockTransform::from_id(255), None);
    }

    #[test]
    fn candidates_fit_their_format() {
        for id in 0..=255u8 {
            let Some(f) = TextureFormat::from_id(id) else {
                continue;
            };
            for t in BlockTransform::candidates(f) {
                assert!(t.fits(f), "{t:?} on {f}");
            }
        }
        assert!(!BlockTransform::Bc1Split.fits(TextureFormat::Bc7));
        assert!(!BlockTransform::BytePlanes16.fits(TextureFormat::Rgba8Unorm));
    }
}
