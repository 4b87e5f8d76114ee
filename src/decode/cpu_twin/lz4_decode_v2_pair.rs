//! Twin of `shaders/lz4_decode_v2_pair.wgsl`: the blocks of one workgroup
//! decoded in turns, one sequence of each live block per turn, agreeing on
//! the storage barrier once per turn.
//!
//! The bytes written are v2's, block for block (each block reads and writes
//! only its own output range, so the order of the passes within a turn does
//! not matter); what the turns change is how many barriers run: a barrier
//! one block needs orders every block's stores, so the others' next passes
//! may need none. [`lz4_decode_v2_group`] counts them, and the tests below
//! hold its outputs and status words to [`lz4_decode_v2`](super::lz4_decode_v2::lz4_decode_v2).

use super::lz4_decode_v2::{BlockDecoder, Lz4DecodeCounts};
use crate::decode::BlockDesc;

/// Decodes `descs` as one workgroup of `lz4_decode_v2_pair` with
/// `descs.len()` slots of `lanes` lanes and a `window_words`-word window
/// does, and returns each block's status word with the counts of the whole
/// workgroup (sequences, window loads and stores summed over its blocks;
/// storage barriers and turns once each).
///
/// Never panics and never writes outside the blocks' output ranges.
pub fn lz4_decode_v2_group(
    descs: &[BlockDesc],
    input: &[u32],
    output: &mut [u32],
    window_words: u32,
    lanes: u32,
) -> (Vec<u32>, Lz4DecodeCounts) {
    // A slot without a decoder had a bad descriptor: its status is final.
    let mut slots: Vec<Result<BlockDecoder, u32>> = descs
        .iter()
        .map(|d| BlockDecoder::new(d, input, output.len(), window_words, lanes, false))
        .collect();
    let mut live: Vec<bool> = slots.iter().map(|s| s.is_ok()).collect();
    let mut turns = 0u32;
    let mut barriers = 0u32;
    let mut parsed = Vec::with_capacity(slots.len());
    loop {
        // Every live slot parses its next sequence (an error ends it).
        parsed.clear();
        let mut fence = false;
        for (slot, alive) in slots.iter_mut().zip(live.iter_mut()) {
            let next = match slot {
                Ok(block) if *alive => {
                    let next = block.parse(input);
                    if let Some((seq, _)) = next {
                        fence |= block.fence_needed(seq);
                    }
                    next
                }
                _ => None,
            };
            *alive = next.is_some();
            parsed.push(next);
        }
        // The workgroup barrier where the flags are read: every turn,
        // including the last, where none is live.
        turns += 1;
        if !live.iter().any(|&l| l) {
            break;
        }
        if fence {
            barriers += 1;
            for block in slots.iter_mut().flatten() {
                block.fenced();
            }
        }
        for ((slot, alive), next) in slots.iter_mut().zip(live.iter_mut()).zip(&parsed) {
            if let (Ok(block), Some((seq, last))) = (slot, *next) {
                block.pass(input, output, seq);
                if last {
                    *alive = false;
                }
            }
        }
    }
    let mut counts = Lz4DecodeCounts {
        barriers,
        turn_barriers: turns,
        ..Lz4DecodeCounts::default()
    };
    let status = slots
        .into_iter()
        .map(|slot| match slot {
            Ok(block) => {
                let (word, c) = block.finish(output);
                counts.sequences += c.sequences;
                counts.window_loads += c.window_loads;
                counts.word_stores += c.word_stores;
                word
            }
            Err(word) => word,
        })
        .collect();
    (status, counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::cpu_twin::lz4_decode_v2::tests::{sample, words};
    use crate::decode::cpu_twin::lz4_decode_v2_counted;
    use crate::decode::status_code;

    /// Blocks of every kind side by side in one input and one output: valid
    /// ones of many lengths, corrupted and truncated ones, a bad
    /// descriptor, linear and with padded rows.
    fn blocks(count: u64) -> (Vec<BlockDesc>, Vec<u32>, usize) {
        let mut bytes = Vec::new();
        let mut descs = Vec::new();
        let mut out_at = 16u32;
        for seed in 0..count {
            let len = [0, 1, 5, 17, 255, 1000, 4099, 20_000, 65536][seed as usize % 9];
            let data = sample(len, seed * 31 + 7);
            let mut packed = lz4_flex::block::compress(&data);
            if seed % 4 == 1 && !packed.is_empty() {
                let at = (seed as usize * 7919) % packed.len();
                packed[at] ^= 1 << (seed % 8);
            } else if seed % 4 == 2 {
                packed.truncate(packed.len() / 2);
            }
            let src = bytes.len() as u32;
            bytes.extend_from_slice(&packed);
            let mut desc = BlockDesc::linear(src, packed.len() as u32, out_at, len as u32);
            if seed % 3 == 0 {
                desc = desc.with_rows(64, 256);
            }
            if seed % 11 == 5 {
                // Unaligned output: the shader rejects the descriptor.
                desc.dst_offset += 2;
            }
            out_at += (desc.dst_extent().unwrap() as u32).next_multiple_of(256) + 256;
            descs.push(desc);
        }
        let input = words(&bytes, 0);
        (descs, input, out_at as usize / 4 + 4)
    }

    /// In pairs (and in fours), every block's status word and output are
    /// v2's, guards included; the pair runs no more storage barriers than
    /// the blocks would alone, and one turn per sequence of its longest
    /// block, plus the last.
    #[test]
    fn group_twin_equals_v2_twin() {
        let (descs, input, out_words) = blocks(40);
        let mut expected = vec![0xA5A5_A5A5u32; out_words];
        let mut alone = Vec::new();
        for d in &descs {
            alone.push(lz4_decode_v2_counted(d, &input, &mut expected, 8, 8, false));
        }
        for size in [2, 4] {
            let mut got = vec![0xA5A5_A5A5u32; out_words];
            for (g, group) in descs.chunks(size).enumerate() {
                let (status, counts) = lz4_decode_v2_group(group, &input, &mut got, 8, 8);
                let solo = &alone[g * size..g * size + group.len()];
                for (b, (word, (want, _))) in status.iter().zip(solo).enumerate() {
                    assert_eq!(word, want, "group of {size} #{g}, block {b}: status");
                }
                let solo_barriers: u32 = solo.iter().map(|(_, c)| c.barriers).sum();
                let longest = solo.iter().map(|(_, c)| c.sequences).max().unwrap();
                let sequences: u32 = solo.iter().map(|(_, c)| c.sequences).sum();
                assert!(counts.barriers <= solo_barriers, "{counts:?}");
                assert_eq!(counts.sequences, sequences, "group of {size} #{g}");
                // Sequences a failed block parsed up to its error count as
                // turns too, so: at least the longest run, plus the last.
                assert!(counts.turn_barriers > longest, "{counts:?}");
            }
            assert!(got == expected, "groups of {size}: output");
        }
        // The corpus holds what the test means to cover.
        let bad = alone
            .iter()
            .filter(|(w, _)| w & 0xff == status_code::BAD_DESCRIPTOR)
            .count();
        let ok = alone
            .iter()
            .filter(|(w, _)| w & 0xff == status_code::OK)
            .count();
        assert!(bad >= 2 && ok >= 15 && ok + bad < alone.len(), "{bad} {ok}");
    }

    /// A barrier one block takes orders its partner's stores too: two
    /// copies of a block whose every other pass must wait need as many
    /// barriers in a pair as one of them alone, not twice as many.
    #[test]
    fn a_pair_shares_its_barriers() {
        let data = sample(65536, 3);
        let packed = lz4_flex::block::compress(&data);
        let mut bytes = packed.clone();
        bytes.extend_from_slice(&packed);
        let input = words(&bytes, 0);
        let n = packed.len() as u32;
        let descs = [
            BlockDesc::linear(0, n, 0, 65536),
            BlockDesc::linear(n, n, 65536, 65536),
        ];
        let mut out = vec![0u32; 2 * 65536 / 4];
        let (status, counts) = lz4_decode_v2_group(&descs, &input, &mut out, 32, 32);
        assert!(
            status.iter().all(|w| w & 0xff == status_code::OK),
            "{status:x?}"
        );
        let bytes: &[u8] = bytemuck::cast_slice(&out);
        assert_eq!(&bytes[..65536], &data[..]);
        assert_eq!(&bytes[65536..], &data[..]);
        let mut one = vec![0u32; 65536 / 4];
        let (_, alone) = lz4_decode_v2_counted(&descs[0], &input, &mut one, 32, 32, false);
        assert!(alone.barriers > 0);
        assert_eq!(counts.barriers, alone.barriers, "{counts:?} {alone:?}");
        assert_eq!(counts.turn_barriers, alone.sequences + 1);
    }
}
