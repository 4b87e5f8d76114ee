//! LZ4 blocks cut into independent sub-blocks: a packer option
//! (`WriterOptions::lz4_sub_block`) that gives a GPU four times the blocks
//! to decode side by side at 16 KiB sub-blocks, for a fraction of a percent
//! of compression ratio (docs/pack-format.md, "Sub-blocks").
//!
//! A block of `n >= 2` sub-blocks stores `n` LZ4 blocks back to back; the
//! table of contents lists each one's stored and decoded length. Sub-blocks
//! are cut on whole rows of a texture tile (each starts a row, so a GPU
//! decoder writes it to its own rows of the destination) and on multiples
//! of 4 bytes elsewhere (each starts on a word).

use crate::codec::{Codec, CodecError};

/// Bytes of one sub-block entry in the table of contents: `u32` stored
/// length, `u32` decoded length.
pub const SUB_ENTRY_LEN: usize = 8;

/// The most sub-blocks one block may have.
pub const MAX_SUB_BLOCKS: usize = 16;

/// One independent LZ4 block of a block cut into several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SubBlock {
    /// Where its stored bytes start in the block's stored bytes.
    pub stored_offset: u32,
    /// Its stored bytes.
    pub stored_len: u32,
    /// Where its decoded bytes start in the block's decoded bytes.
    pub offset: u32,
    /// Its decoded bytes.
    pub size: u32,
}

/// The decoded lengths of the sub-blocks `size` bytes are cut into: as many
/// as `target`-byte pieces would make (at most [`MAX_SUB_BLOCKS`]), of
/// even length, every cut on a multiple of `unit` (a texture tile's row,
/// or 4). One length when the block is not larger than `target`.
pub(crate) fn cut(size: usize, unit: usize, target: usize) -> Vec<usize> {
    let unit = unit.max(4);
    let n = size.div_ceil(target.max(1)).clamp(1, MAX_SUB_BLOCKS);
    // `per * n >= size`, so there are at most `n` pieces.
    let per = size.div_ceil(n).next_multiple_of(unit);
    let mut lens = Vec::with_capacity(n);
    let mut at = 0;
    while at + per < size {
        lens.push(per);
        at += per;
    }
    lens.push(size - at);
    lens
}

/// A block's bytes as sub-blocks: the stored bytes, and each sub-block's
/// (stored, decoded) length.
pub(crate) type Compressed = (Vec<u8>, Vec<(u32, u32)>);

/// Compresses `src` as independent LZ4 blocks of `lens` decoded bytes, at
/// LZ4 `level` ([`Codec::compress_into`]).
pub(crate) fn compress(src: &[u8], lens: &[usize], level: i32) -> Result<Compressed, CodecError> {
    let mut stored = Vec::new();
    let mut entries = Vec::with_capacity(lens.len());
    let mut at = 0;
    for &len in lens {
        let part = Codec::Lz4.compress(&src[at..at + len], level)?;
        entries.push((part.len() as u32, len as u32));
        stored.extend_from_slice(&part);
        at += len;
    }
    Ok((stored, entries))
}

/// Checks the sub-block entries of one block (`(stored, decoded)` lengths,
/// as the table of contents holds them) against the block's stored and
/// decoded sizes: every length at least 1, every stored length within
/// LZ4's bound of its decoded one, the lengths adding up, and every cut on
/// a multiple of 4. Returns the sub-blocks, or why not.
pub(crate) fn parse(
    entries: &[(u32, u32)],
    stored_size: u32,
    size: u32,
) -> Result<Vec<SubBlock>, String> {
    if entries.len() < 2 || entries.len() > MAX_SUB_BLOCKS {
        return Err(format!(
            "{} sub-blocks, a block has 2..={MAX_SUB_BLOCKS}",
            entries.len()
        ));
    }
    let mut subs = Vec::with_capacity(entries.len());
    let (mut s_at, mut d_at) = (0u64, 0u64);
    for (i, &(stored_len, len)) in entries.iter().enumerate() {
        let bound = Codec::Lz4.max_stored_size(len as usize) as u64;
        if len == 0 || stored_len == 0 || stored_len as u64 > bound {
            return Err(format!(
                "sub-block {i} stores {stored_len} bytes for {len} (1..={bound} for 1 or more)"
            ));
        }
        if d_at % 4 != 0 {
            return Err(format!(
                "sub-block {i} starts at byte {d_at}, not on a word"
            ));
        }
        subs.push(SubBlock {
            stored_offset: s_at as u32,
            stored_len,
            offset: d_at as u32,
            size: len,
        });
        s_at += stored_len as u64;
        d_at += len as u64;
    }
    if s_at != stored_size as u64 || d_at != size as u64 {
        return Err(format!(
            "sub-blocks hold {s_at} stored and {d_at} decoded bytes of a block of {stored_size} and {size}"
        ));
    }
    Ok(subs)
}

/// Decodes a block of `subs` from `stored` into `out` (its whole decoded
/// size), each sub-block into its own range, each with the rule of
/// [`Codec::decompress_into`] (exactly its declared size).
pub(crate) fn decode_into(
    stored: &[u8],
    subs: &[SubBlock],
    out: &mut [u8],
) -> Result<(), CodecError> {
    for s in subs {
        let src = stored
            .get(s.stored_offset as usize..(s.stored_offset + s.stored_len) as usize)
            .ok_or(CodecError::WrongLength {
                codec: Codec::Lz4,
                expected: (s.stored_offset + s.stored_len) as usize,
                got: stored.len(),
            })?;
        let got = out.len();
        let dst = out
            .get_mut(s.offset as usize..(s.offset + s.size) as usize)
            .ok_or(CodecError::WrongLength {
                codec: Codec::Lz4,
                expected: (s.offset + s.size) as usize,
                got,
            })?;
        Codec::Lz4.decompress_into(src, dst)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_units_and_cover_the_block() {
        assert_eq!(cut(65536, 1024, 16384), vec![16384; 4]);
        assert_eq!(cut(65536, 4, 16384), vec![16384; 4]);
        // 102 rows of 640 bytes: 26, 26, 26 and 24 rows.
        assert_eq!(cut(65280, 640, 16384), vec![16640, 16640, 16640, 15360]);
        assert_eq!(cut(20000, 4, 16384), vec![10000, 10000]);
        assert_eq!(cut(1000, 4, 16384), vec![1000]);
        // Tiny rows never make more than MAX_SUB_BLOCKS pieces.
        assert!(cut(65536, 4, 16).len() <= MAX_SUB_BLOCKS);
        for (size, unit) in [(65536, 512), (40000, 1024), (12345, 4), (65536, 4)] {
            let lens = cut(size, unit, 16384);
            assert_eq!(lens.iter().sum::<usize>(), size);
            let mut at = 0;
            for l in &lens {
                assert_eq!(at % unit.max(4), 0);
                at += l;
            }
        }
    }

    #[test]
    fn split_blocks_round_trip_and_bad_tables_are_refused() {
        let src: Vec<u8> = (0..65536u32).map(|i| (i / 7 % 251) as u8).collect();
        let lens = cut(src.len(), 4, 16384);
        let (stored, entries) = compress(&src, &lens, 0).unwrap();
        let subs = parse(&entries, stored.len() as u32, src.len() as u32).unwrap();
        let mut out = vec![0u8; src.len()];
        decode_into(&stored, &subs, &mut out).unwrap();
        assert_eq!(out, src);
        // Lengths that do not add up, a cut off a word, a zero length.
        assert!(parse(&entries, stored.len() as u32 + 1, src.len() as u32).is_err());
        assert!(parse(&[(10, 6), (10, 10)], 20, 16).is_err());
        assert!(parse(&[(0, 8), (10, 8)], 10, 16).is_err());
        assert!(parse(&[(10, 8)], 10, 8).is_err());
        // A stored length past LZ4's bound for its size.
        assert!(parse(&[(100, 8), (10, 8)], 110, 16).is_err());
    }
}
