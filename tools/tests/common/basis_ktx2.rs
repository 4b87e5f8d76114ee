//! Test and measurement input: Basis Universal textures encoded with the
//! `basis-universal` crate's encoder (a `.basis` file) and re-wrapped as the
//! KTX2 files `toktx`/`basisu` write: UASTC levels as raw blocks (optionally
//! zstd-supercompressed), ETC1S levels as BasisLZ with the codebooks in the
//! supercompression global data. Written from the KTX 2.0 specification and
//! basisu_file_headers.h; nothing is downloaded.
#![allow(dead_code)]

use basis_universal::{
    BasisTextureFormat, ColorSpace, Compressor, CompressorParams, UASTC_QUALITY_MIN,
};

/// Encodes RGBA8 pixels as a `.basis` file with a full mip chain.
pub fn encode_basis(rgba: &[u8], w: u32, h: u32, uastc: bool, srgb: bool) -> Vec<u8> {
    let mut params = CompressorParams::new();
    params.set_basis_format(if uastc {
        BasisTextureFormat::UASTC4x4
    } else {
        BasisTextureFormat::ETC1S
    });
    params.set_uastc_quality_level(UASTC_QUALITY_MIN);
    params.set_etc1s_quality_level(64);
    let space = if srgb {
        ColorSpace::Srgb
    } else {
        ColorSpace::Linear
    };
    params.set_color_space(space);
    params.set_mip_color_space(space);
    params.set_generate_mipmaps(true);
    params.set_mipmap_smallest_dimension(1);
    params.set_print_status_to_stdout(false);
    params.source_image_mut(0).init(rgba, w, h, 4);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mut c = Compressor::new(threads);
    // SAFETY: `params` outlives `init` and `process` (both run here).
    unsafe {
        assert!(c.init(&params));
        c.process().expect("basis encode");
    }
    c.basis_file().to_vec()
}

fn get(b: &[u8], at: usize, n: usize) -> usize {
    let mut v = 0usize;
    for i in (0..n).rev() {
        v = v << 8 | b[at + i] as usize;
    }
    v
}

/// One slice of a `.basis` file.
struct Slice {
    level: usize,
    alpha: bool,
    data: std::ops::Range<usize>,
}

/// Re-wraps a `.basis` file (one 2D image with mips) as KTX2; UASTC levels
/// are zstd-supercompressed at `zstd_level` when given.
pub fn basis_to_ktx2(basis: &[u8], w: u32, h: u32, srgb: bool, zstd_level: Option<i32>) -> Vec<u8> {
    let uastc = basis[20] == 1;
    let total_slices = get(basis, 14, 3);
    let descs = get(basis, 65, 4);
    let slices: Vec<Slice> = (0..total_slices)
        .map(|i| {
            let d = descs + i * 23;
            let ofs = get(basis, d + 13, 4);
            Slice {
                level: get(basis, d + 3, 1),
                // ETC1S keeps alpha in slices of its own; a UASTC slice
                // with this flag holds RGBA blocks.
                alpha: !uastc && get(basis, d + 4, 1) & 1 != 0,
                data: ofs..ofs + get(basis, d + 17, 4),
            }
        })
        .collect();
    let has_alpha = get(basis, 21, 2) & 4 != 0
        || (0..total_slices).any(|i| get(basis, descs + i * 23 + 4, 1) & 1 != 0);
    let levels = slices.iter().filter(|s| !s.alpha).count();
    let slice = |level: usize, alpha: bool| -> &[u8] {
        slices
            .iter()
            .find(|s| s.level == level && s.alpha == alpha)
            .map_or(&[][..], |s| &basis[s.data.clone()])
    };

    // Level data (mip 0 first) and, for ETC1S, the global data.
    let mut level_data = Vec::new();
    let mut uncompressed = Vec::new();
    let mut sgd = Vec::new();
    if uastc {
        for m in 0..levels {
            let raw = slice(m, false);
            uncompressed.push(raw.len() as u64);
            level_data.push(match zstd_level {
                Some(l) => zstd::bulk::compress(raw, l).unwrap(),
                None => raw.to_vec(),
            });
        }
    } else {
        let (ep, sel, tables) = (
            get(basis, 41, 4)..get(basis, 41, 4) + get(basis, 45, 3),
            get(basis, 50, 4)..get(basis, 50, 4) + get(basis, 54, 3),
            get(basis, 57, 4)..get(basis, 57, 4) + get(basis, 61, 4),
        );
        sgd.extend_from_slice(&basis[39..41]); // endpoint count
        sgd.extend_from_slice(&basis[48..50]); // selector count
        for r in [&ep, &sel, &tables] {
            sgd.extend_from_slice(&(r.len() as u32).to_le_bytes());
        }
        sgd.extend_from_slice(&0u32.to_le_bytes()); // extended
        for m in 0..levels {
            let (rgb, a) = (slice(m, false), slice(m, true));
            for v in [0, 0, rgb.len(), rgb.len(), a.len()] {
                sgd.extend_from_slice(&(v as u32).to_le_bytes());
            }
            let mut d = rgb.to_vec();
            d.extend_from_slice(a);
            uncompressed.push(0); // BasisLZ levels declare 0
            level_data.push(d);
        }
        for r in [ep, sel, tables] {
            sgd.extend_from_slice(&basis[r]);
        }
    }
    let scheme: u32 = match (uastc, zstd_level) {
        (false, _) => 1,
        (true, Some(_)) => 2,
        (true, None) => 0,
    };

    // DFD: the basic block for ETC1S (model 163) or UASTC (166).
    let samples: Vec<(u16, u8, u8)> = if uastc {
        vec![(0, 127, if has_alpha { 3 } else { 0 })]
    } else if has_alpha {
        vec![(0, 63, 0), (64, 63, 15)]
    } else {
        vec![(0, 63, 0)]
    };
    let block = 24 + 16 * samples.len();
    let mut dfd = Vec::new();
    dfd.extend_from_slice(&((4 + block) as u32).to_le_bytes());
    dfd.extend_from_slice(&0u32.to_le_bytes());
    dfd.extend_from_slice(&2u16.to_le_bytes());
    dfd.extend_from_slice(&(block as u16).to_le_bytes());
    dfd.extend_from_slice(&[
        if uastc { 166 } else { 163 },
        1,
        if srgb { 2 } else { 1 },
        0,
    ]);
    dfd.extend_from_slice(&[3, 3, 0, 0]);
    dfd.extend_from_slice(&[if uastc { 16 } else { 0 }, 0, 0, 0, 0, 0, 0, 0]);
    for (off, len, ch) in samples {
        dfd.extend_from_slice(&off.to_le_bytes());
        dfd.extend_from_slice(&[len, ch, 0, 0, 0, 0]);
        dfd.extend_from_slice(&0u32.to_le_bytes());
        dfd.extend_from_slice(&u32::MAX.to_le_bytes());
    }

    let dfd_at = 80 + 24 * levels;
    let sgd_at = (dfd_at + dfd.len()).div_ceil(8) * 8;
    let align = if scheme == 0 { 16 } else { 1 };
    let mut at = sgd_at + sgd.len();
    let mut offsets = vec![0; levels];
    for m in (0..levels).rev() {
        at = at.div_ceil(align) * align;
        offsets[m] = at;
        at += level_data[m].len();
    }
    let mut out = Vec::with_capacity(at);
    out.extend_from_slice(&[
        0xAB, 0x4B, 0x54, 0x58, 0x20, 0x32, 0x30, 0xBB, 0x0D, 0x0A, 0x1A, 0x0A,
    ]);
    for v in [0u32, 1, w, h, 0, 0, 1, levels as u32, scheme] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [dfd_at as u32, dfd.len() as u32, 0, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let sgd_offset = if sgd.is_empty() { 0 } else { sgd_at as u64 };
    out.extend_from_slice(&sgd_offset.to_le_bytes());
    out.extend_from_slice(&(sgd.len() as u64).to_le_bytes());
    for m in 0..levels {
        for v in [
            offsets[m] as u64,
            level_data[m].len() as u64,
            uncompressed[m],
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out.extend_from_slice(&dfd);
    out.resize(sgd_at, 0);
    out.extend_from_slice(&sgd);
    for m in (0..levels).rev() {
        out.resize(offsets[m], 0);
        out.extend_from_slice(&level_data[m]);
    }
    out
}
