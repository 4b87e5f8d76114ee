//! Fuzzes the BCn un-conditioning pass's Rust twin
//! (`cpu_twin::bcn_uncondition`, the spec `shaders/bcn_uncondition.wgsl`
//! is held to) against `BlockTransform::undo`, with any descriptor.
//!
//! Input: 16 bytes of parameters (transform id, block size, row length and
//! padding, where the conditioned bytes and the output range lie), then the
//! bytes the output buffer starts with. A descriptor the twin accepts must
//! put the block back exactly as `undo` does and write nothing outside its
//! output rows; one it refuses must write nothing at all.
#![no_main]

use gpustream::decode::cpu_twin::bcn_uncondition;
use gpustream::decode::{status_code, BlockDesc};
use gpustream::pack::BlockTransform;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let (p, body) = data.split_at(16);
    let word = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
    // Sizes and offsets mostly inside a small buffer, sometimes anywhere.
    let wild = p[15] & 0x80 != 0;
    let size = if wild { word(0) } else { word(0) % 5000 };
    let src = if wild { word(4) } else { word(4) % 12000 };
    let dst = if wild {
        word(8)
    } else {
        (word(8) % 12000) & !3
    };
    let row_bytes = (p[12] as u32) * 4;
    let row_pitch = row_bytes + (p[13] as u32 & 63) * 4;
    let transform = p[14] as u32 % 8;
    let desc = BlockDesc {
        reserved: [transform, 0],
        ..BlockDesc::linear(src, size, dst, size).with_rows(row_bytes, row_pitch)
    };
    let mut initial: Vec<u32> = (0..4096u32)
        .map(|i| i.wrapping_mul(0x9E37_79B9) ^ 0x5A5A_A5A5)
        .collect();
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut initial);
    let n = body.len().min(bytes.len());
    bytes[..n].copy_from_slice(&body[..n]);
    let mut out = initial.clone();
    let status = bcn_uncondition(&mut out, &desc);
    let before: &[u8] = bytemuck::cast_slice(&initial);
    let after: &[u8] = bytemuck::cast_slice(&out);
    if status != status_code::OK {
        assert_eq!(status, status_code::BAD_DESCRIPTOR);
        assert!(out == initial, "a refused descriptor wrote");
        return;
    }
    let t = BlockTransform::from_id(transform as u8).expect("the twin accepts known ids only");
    let (size, src, dst) = (size as usize, src as usize, dst as usize);
    let mut want = vec![0u8; size];
    t.undo(&before[src..src + size], &mut want);
    let row = if row_bytes == 0 {
        size.max(1)
    } else {
        row_bytes as usize
    };
    let pitch = if row_bytes == 0 {
        row
    } else {
        row_pitch as usize
    };
    let mut inside = vec![false; after.len()];
    for (r, chunk) in want.chunks(row).enumerate() {
        let at = dst + r * pitch;
        assert_eq!(&after[at..at + chunk.len()], chunk, "row {r}");
        inside[at..at + chunk.len()]
            .iter_mut()
            .for_each(|b| *b = true);
    }
    // Bytes outside the rows keep their value (the last word's bytes past
    // the block are merged back, not cleared).
    for (i, (a, b)) in after.iter().zip(before).enumerate() {
        assert!(
            inside[i] || a == b,
            "byte {i} written outside the block's rows"
        );
    }
});
