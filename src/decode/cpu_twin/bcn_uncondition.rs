//! Twin of `shaders/bcn_uncondition.wgsl`: one conditioned block put back
//! in the texture's byte order the way one workgroup of the shader does it,
//! on the same 32-bit word buffer.
//!
//! The functions mirror the shader's one for one (`element_bytes`,
//! `source_offset`, `dst_extent`, `valid`, `bcn_uncondition`). The lanes
//! become a loop over lane indices: every output word is written by one
//! lane, and no lane reads bytes another lane writes (the conditioned bytes
//! and the output range are disjoint), so any order gives the shader's
//! result.

use crate::decode::{status_code, BlockDesc};
use crate::MAX_BLOCK_SIZE;

/// Lanes per workgroup, as the pipeline sets the shader's `WG`.
pub const WORKGROUP_SIZE: u32 = 64;

const TRANSFORM_BYTE_PLANES_16: u32 = 5;
const TRANSFORM_LAST: u32 = 5;
const FIELD_NIBBLES: [u32; 4] = [0x44, 0x4462, 0x62, 0x6262];

/// Bytes of one element of transform `t`; 0 for none (or an unknown id).
pub fn element_bytes(t: u32) -> u32 {
    match t {
        1 | 3 => 8,
        2 | 4 | 5 => 16,
        _ => 0,
    }
}

/// Where byte `at` of a `len`-byte block lies in the conditioned block
/// (`BlockTransform::source_offset`, computed the shader's way).
pub fn source_offset(t: u32, len: u32, at: u32) -> u32 {
    let e = element_bytes(t);
    if e == 0 {
        return at;
    }
    let n = len / e;
    if at >= n * e {
        return at;
    }
    let elem = at / e;
    let mut byte = at % e;
    if t == TRANSFORM_BYTE_PLANES_16 {
        return byte * n + elem;
    }
    let mut fields = FIELD_NIBBLES[(t - 1) as usize];
    let mut start = 0;
    for _ in 0..4 {
        let flen = fields & 15;
        if byte < flen {
            return start * n + elem * flen + byte;
        }
        byte -= flen;
        start += flen;
        fields >>= 4;
    }
    at
}

fn output_byte(output: &[u32], addr: u32) -> u32 {
    (output[(addr >> 2) as usize] >> ((addr & 3) * 8)) & 0xff
}

/// The bytes a block spans in the output, or `u32::MAX` on overflow.
fn dst_extent(d: &BlockDesc) -> u32 {
    if d.row_bytes == 0 || d.dst_size == 0 {
        return d.dst_size;
    }
    let last_row = (d.dst_size - 1) / d.row_bytes;
    let last_len = d.dst_size - last_row * d.row_bytes;
    if last_row != 0 && d.row_pitch > (u32::MAX - last_len) / last_row {
        return u32::MAX;
    }
    last_row * d.row_pitch + last_len
}

/// The shader's descriptor check against an output of `out_words` words.
fn valid(d: &BlockDesc, out_words: usize) -> bool {
    let out_len = out_words.min(0x3fff_ffff) as u32 * 4;
    let extent = dst_extent(d);
    let t = d.reserved[0];
    if t > TRANSFORM_LAST {
        return false;
    }
    if d.src_size != d.dst_size || d.dst_size > MAX_BLOCK_SIZE as u32 || d.dst_offset & 3 != 0 {
        return false;
    }
    if d.row_bytes != 0
        && (d.row_bytes & 3 != 0 || d.row_pitch & 3 != 0 || d.row_pitch < d.row_bytes)
    {
        return false;
    }
    if d.src_offset > out_len || d.src_size > out_len - d.src_offset {
        return false;
    }
    if extent == u32::MAX || d.dst_offset > out_len || extent > out_len - d.dst_offset {
        return false;
    }
    d.src_offset + d.src_size <= d.dst_offset || d.dst_offset + extent <= d.src_offset
}

/// Puts one conditioned block back, as one workgroup of the shader does:
/// reads its conditioned bytes at `src_offset` of `output`, writes the
/// block in the texture's order to its output range, and returns the
/// status word.
pub fn bcn_uncondition(output: &mut [u32], d: &BlockDesc) -> u32 {
    if !valid(d, output.len()) {
        return status_code::BAD_DESCRIPTOR;
    }
    let words = d.dst_size.div_ceil(4);
    for lane in 0..WORKGROUP_SIZE {
        let mut w = lane;
        while w < words {
            let p = w * 4;
            let mut dst = d.dst_offset + p;
            // The shader's `if (row_bytes != 0u)`.
            if let Some(row) = p.checked_div(d.row_bytes) {
                dst = d.dst_offset + row * d.row_pitch + (p - row * d.row_bytes);
            }
            let mut word = 0u32;
            let mut mask = 0u32;
            for k in 0..4 {
                if p + k < d.dst_size {
                    let src = d.src_offset + source_offset(d.reserved[0], d.dst_size, p + k);
                    word |= output_byte(output, src) << (k * 8);
                    mask |= 0xff << (k * 8);
                }
            }
            let at = (dst >> 2) as usize;
            output[at] = if mask == u32::MAX {
                word
            } else {
                (output[at] & !mask) | word
            };
            w += WORKGROUP_SIZE;
        }
    }
    status_code::OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::BlockTransform;

    #[test]
    fn source_offsets_are_the_transforms() {
        for t in BlockTransform::ALL {
            for len in [0u32, 5, 8, 16, 24, 1000, 4096, 65536] {
                for at in (0..len).step_by(7).chain(len.saturating_sub(20)..len) {
                    assert_eq!(
                        source_offset(t.id() as u32, len, at),
                        t.source_offset(len, at),
                        "{t:?} len {len} at {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_block_comes_back_in_its_rows_and_nothing_else_changes() {
        // Every transform, and none: a plain relayout into rows.
        for t in BlockTransform::ALL {
            // 12 rows of 96 bytes (whole BC blocks), 128 bytes apart, after
            // a conditioned copy at byte 8192.
            let len = 12 * 96u32;
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 13) as u8).collect();
            let mut cond = vec![0u8; len as usize];
            t.apply(&data, &mut cond);
            let mut out = vec![0xdead_beefu32; 4096];
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
            bytes[8192..8192 + len as usize].copy_from_slice(&cond);
            let before = out.clone();
            let d = BlockDesc {
                reserved: [t.id() as u32, 0],
                ..BlockDesc::linear(8192, len, 256, len).with_rows(96, 128)
            };
            assert_eq!(bcn_uncondition(&mut out, &d), status_code::OK, "{t:?}");
            let bytes: &[u8] = bytemuck::cast_slice(&out);
            let old: &[u8] = bytemuck::cast_slice(&before);
            for r in 0..12usize {
                let at = 256 + r * 128;
                assert_eq!(
                    &bytes[at..at + 96],
                    &data[r * 96..(r + 1) * 96],
                    "{t:?} row {r}"
                );
                assert_eq!(&bytes[at + 96..at + 128], &old[at + 96..at + 128]);
            }
            assert_eq!(&bytes[..256], &old[..256]);
        }
    }

    #[test]
    fn bad_descriptors_write_nothing() {
        let mut out = vec![7u32; 64];
        let ok = BlockDesc {
            reserved: [1, 0],
            ..BlockDesc::linear(128, 64, 0, 64)
        };
        let bad = [
            BlockDesc {
                reserved: [6, 0],
                ..ok
            },
            BlockDesc {
                src_offset: 200,
                ..ok
            },
            BlockDesc {
                dst_offset: 2,
                ..ok
            },
            BlockDesc {
                dst_offset: 100,
                ..ok
            },
            BlockDesc {
                dst_offset: 224,
                ..ok
            },
            BlockDesc { src_size: 60, ..ok },
            ok.with_rows(16, 0x4000_0000),
        ];
        for d in bad {
            assert_eq!(
                bcn_uncondition(&mut out, &d),
                status_code::BAD_DESCRIPTOR,
                "{d:?}"
            );
            assert!(out.iter().all(|&w| w == 7));
        }
        assert_eq!(bcn_uncondition(&mut out, &ok), status_code::OK);
    }
}
