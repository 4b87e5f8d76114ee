//! Fuzzes the GPU GDeflate decoder's Rust twin (`cpu_twin::gdeflate_decode`,
//! the spec the shader is held to), with padded output rows.
//!
//! Input: 8 bytes of parameters (declared size, row length, row padding,
//! input and output offsets, mode), then either a raw page or, in the
//! structure-aware mode (mode bit 0 set), data the reference encoder
//! compresses into a page that then gets one byte changed or kept. The
//! twin must never panic nor write outside the page's rows (every other
//! output word keeps its guard); when it accepts a page, the reference
//! decoder must decode the same bytes (the twin accepting means the page
//! is never read past its end, so the reference, which reads the same
//! words in the same order, stays inside it); an unchanged reference page
//! must decode to its data.
#![no_main]

use gpustream::decode::cpu_twin::gdeflate_decode;
use gpustream::decode::{GDeflateStatus, BlockDesc};
use libfuzzer_sys::fuzz_target;

/// Guard value of output word `i`: no two neighbours alike.
fn guard(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ 0xA5C3_5A3C
}

/// The reference decoder's output for a page the twin accepted.
fn reference(page: &[u8], size: usize) -> Option<Vec<u8>> {
    let mut padded = page.to_vec();
    padded.resize(page.len() + 4096, 0);
    let mut out = vec![0u8; size.max(1)];
    let mut got = 0usize;
    // SAFETY: the twin read this page to no further than its end, and the
    // reference reads the same words in the same order; a 4 KiB zero tail
    // is there all the same. `out` holds `size` bytes.
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
    out.truncate(size);
    (ok && got == size).then_some(out)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (params, rest) = data.split_at(8);
    let mut declared = (u32::from_le_bytes([params[0], params[1], params[2], 0]) % 65540) as usize;
    let row_bytes = (params[3] as u32) * 4;
    let row_pitch = row_bytes + (params[4] as u32 & 63) * 4;
    let src_offset = (params[5] & 7) as u32;
    let dst_offset = (params[6] & 3) as u32 * 4;
    let mode = params[7];

    let mut original = None;
    let page: Vec<u8> = if mode & 1 != 0 && !rest.is_empty() {
        // Structure-aware: a real page of `rest` (at most 64 KiB).
        let input = &rest[..rest.len().min(65536)];
        let level = [
            gdeflate::CompressionLevel::None,
            gdeflate::CompressionLevel::Level1,
            gdeflate::CompressionLevel::Level6,
            gdeflate::CompressionLevel::Level12,
        ][(mode as usize >> 1) & 3];
        let mut c = gdeflate::Compressor::new(level).expect("compressor");
        let r = c.compress(input, 65536).expect("compress");
        let mut page = r.bytes[..r.tiles[0].compressed_size as usize].to_vec();
        declared = input.len();
        if mode & 8 != 0 && !page.is_empty() {
            let at = params[0] as usize * 256 + params[1] as usize;
            let at = at % page.len();
            page[at] ^= params[2] | 1;
        } else {
            original = Some(input.to_vec());
        }
        page
    } else {
        rest.to_vec()
    };

    let mut in_bytes = vec![0xC3u8; src_offset as usize];
    in_bytes.extend_from_slice(&page);
    in_bytes.resize(
        in_bytes.len().next_multiple_of(4) + 4 * (mode as usize >> 4 & 1),
        0,
    );
    let input: Vec<u32> = in_bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let desc = BlockDesc {
        src_offset,
        src_size: page.len() as u32,
        dst_offset,
        dst_size: declared as u32,
        row_bytes,
        row_pitch,
        reserved: [0; 2],
    };
    let extent = desc.dst_extent().unwrap_or(u64::MAX);
    if extent > 1 << 20 {
        return;
    }
    let out_words = ((dst_offset as u64 + extent).div_ceil(4) + 2) as usize;
    let mut output: Vec<u32> = (0..out_words).map(guard).collect();
    let status = GDeflateStatus::from_word(gdeflate_decode(&desc, &input, &mut output));

    let out: &[u8] = bytemuck::cast_slice(&output);
    let byte_at = |k: usize| {
        let at = if row_bytes == 0 {
            k
        } else {
            (k / row_bytes as usize) * row_pitch as usize + k % row_bytes as usize
        };
        out[dst_offset as usize + at]
    };
    let pitch_ok = row_bytes == 0 || row_pitch >= row_bytes;
    if let Some(data) = &original {
        if pitch_ok {
            assert_eq!(status, GDeflateStatus::Ok, "a reference page is refused");
        }
        if status.is_ok() {
            assert!(
                (0..data.len()).all(|k| byte_at(k) == data[k]),
                "bytes differ"
            );
        }
    }
    if status.is_ok() {
        let want =
            reference(&page, declared).expect("the twin accepts a page the reference refuses");
        assert!(
            (0..declared).all(|k| byte_at(k) == want[k]),
            "bytes differ from the reference"
        );
    }
    // Nothing outside the rows changed, whatever the verdict (a partial
    // last word of a row belongs to the page).
    for (w, &v) in output.iter().enumerate() {
        let inside = (0..4).any(|j| {
            let at = w as u64 * 4 + j;
            at >= dst_offset as u64 && {
                let rel = at - dst_offset as u64;
                if row_bytes == 0 {
                    rel < (declared as u64).next_multiple_of(4)
                } else {
                    let (row, col) = (rel / row_pitch.max(1) as u64, rel % row_pitch.max(1) as u64);
                    col < row_bytes as u64
                        && row * row_bytes as u64 + col < (declared as u64).next_multiple_of(4)
                }
            }
        });
        if !inside {
            assert_eq!(v, guard(w), "output word {w} outside the page changed");
        }
    }
});
