//! Fuzzes the GPU LZ4 decoder's Rust twin (`cpu_twin::lz4_decode`, the spec
//! the shader is held to) against lz4_flex, with padded output rows.
//!
//! Input: 8 bytes of parameters (declared size, row length, row padding,
//! input offset), then the compressed stream. The twin must give the same
//! verdict as lz4_flex (decodes to exactly the declared size, or not), the
//! same bytes in the padded row layout when both accept, and must never
//! write outside the block's rows: every other output word keeps its guard.
#![no_main]

use gpustream::decode::cpu_twin::lz4_decode;
use gpustream::decode::{BlockDesc, Lz4Status};
use libfuzzer_sys::fuzz_target;

/// Guard value of output word `i`: no two neighbours alike.
fn guard(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ 0xA5C3_5A3C
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (params, stream) = data.split_at(8);
    // Up to 64 KiB + 3: sizes just past the block limit are tried too.
    let declared = (u32::from_le_bytes([params[0], params[1], params[2], 0]) % 65540) as usize;
    // Rows: linear (0), or 4..=1020 bytes padded by 0..=252 bytes.
    let row_bytes = (params[3] as u32 & 0xff) * 4;
    let row_pitch = row_bytes + (params[4] as u32 & 63) * 4;
    let src_offset = (params[5] & 7) as u32;
    let dst_offset = (params[6] & 3) as u32 * 4;
    let twist = params[7];

    let limit = gpustream::MAX_BLOCK_SIZE;
    let want = if declared <= limit {
        let mut out = vec![0u8; declared];
        match lz4_flex::block::decompress_into(stream, &mut out) {
            Ok(n) if n == declared => Some(out),
            _ => None,
        }
    } else {
        None
    };

    // The input binding: the stream at src_offset, zero padded to words.
    let mut in_bytes = vec![0u8; src_offset as usize];
    in_bytes.extend_from_slice(stream);
    in_bytes.resize(
        in_bytes.len().next_multiple_of(4) + 4 * (twist as usize & 1),
        0,
    );
    let input: Vec<u32> = in_bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let desc = BlockDesc {
        src_offset,
        src_size: stream.len() as u32,
        dst_offset,
        dst_size: declared as u32,
        row_bytes,
        row_pitch,
        reserved: [0; 2],
    };
    let extent = desc.dst_extent().unwrap_or(u64::MAX);
    // Keeps each run fast: sparse rows of a large block are still tried
    // up to 1 MiB of output binding.
    if extent > 1 << 20 {
        return;
    }
    let out_words = ((dst_offset as u64 + extent).div_ceil(4) + 2) as usize;
    let mut output: Vec<u32> = (0..out_words).map(guard).collect();
    let status = Lz4Status::from_word(lz4_decode(&desc, &input, &mut output));

    let pitch_ok = row_bytes == 0 || row_pitch >= row_bytes;
    match (&want, status) {
        (Some(bytes), Lz4Status::Ok) => {
            let out: &[u8] = bytemuck_bytes(&output);
            for (k, &b) in bytes.iter().enumerate() {
                let at = if row_bytes == 0 {
                    k
                } else {
                    (k / row_bytes as usize) * row_pitch as usize + k % row_bytes as usize
                };
                assert_eq!(out[dst_offset as usize + at], b, "byte {k}");
            }
        }
        (None, Lz4Status::Ok) => panic!("the twin accepts a block lz4_flex rejects"),
        (Some(_), s) if pitch_ok => panic!("lz4_flex decodes the block, the twin says {s:?}"),
        _ => {}
    }
    // Nothing outside the rows changed, whatever the verdict.
    for (w, &v) in output.iter().enumerate() {
        let first = w as u64 * 4;
        let inside = (0..4).any(|j| {
            let at = first + j;
            at >= dst_offset as u64 && {
                let rel = at - dst_offset as u64;
                if row_bytes == 0 {
                    rel < declared as u64
                } else {
                    let (row, col) = (rel / row_pitch as u64, rel % row_pitch as u64);
                    col < row_bytes as u64 && row * row_bytes as u64 + col < declared as u64
                }
            }
        });
        if !inside {
            assert_eq!(v, guard(w), "output word {w} outside the block changed");
        }
    }
});

/// The output words as bytes (little-endian, as the GPU stores them).
fn bytemuck_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding and any byte is a valid u8; the length is
    // the words' byte length and the alignment of u8 is 1.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 4) }
}
