//! Re-wraps an ETC1S (BasisLZ) KTX2 file as the `.basis` file the Basis
//! Universal transcoder reads: the same endpoint and selector codebooks,
//! Huffman tables and slices, byte for byte, behind a `.basis` header and
//! slice descriptors. No texel data is decoded here.
//!
//! Written from the KTX 2.0 specification (section "BasisLZ global data")
//! and basisu_file_headers.h (the `.basis` header, version 0x13).

use crate::ktx2::{malformed, Ktx2Layout};
use gpustream::pack::PackError;
use std::path::Path;

/// `.basis` header length and the length of one slice descriptor.
pub(crate) const BASIS_HEADER_LEN: usize = 77;
pub(crate) const SLICE_DESC_LEN: usize = 23;
/// The BasisLZ global data header: two u16 counts and four u32 lengths.
const SGD_HEADER_LEN: usize = 20;
/// One BasisLZ image descriptor: flags and the RGB and alpha slices'
/// offsets and lengths (five u32).
const SGD_IMAGE_DESC_LEN: usize = 20;

/// The CRC-16 the `.basis` format uses (CCITT polynomial, inverted in and
/// out), as basisu's `crc16`.
pub(crate) fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = !0;
    for &b in bytes {
        let q = u16::from(b) ^ (crc >> 8);
        let k = (q >> 4) ^ q;
        crc = (crc << 8) ^ k ^ (k << 5) ^ (k << 12);
    }
    !crc
}

/// Appends `v`'s low `n` bytes, little-endian (the `.basis` packed ints).
fn put(out: &mut Vec<u8>, v: u64, n: usize) {
    out.extend_from_slice(&v.to_le_bytes()[..n]);
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One slice to be described: level, flags, extent, and its bytes.
struct Slice<'a> {
    level: u32,
    alpha: bool,
    width: u32,
    height: u32,
    data: &'a [u8],
}

/// Builds the `.basis` file for an ETC1S KTX2 file whose container
/// `layout` has been checked. Every offset and length in the global data is
/// checked against it and against its level before use.
pub(crate) fn etc1s_to_basis_file(
    path: &Path,
    bytes: &[u8],
    layout: &Ktx2Layout,
    has_alpha: bool,
    srgb: bool,
) -> Result<Vec<u8>, PackError> {
    let sgd = &bytes[layout.sgd.clone()];
    let at = layout.sgd.start;
    let bad =
        |offset: usize, reason: String| malformed(path, "BasisLZ global data", at + offset, reason);
    let images = layout.levels.len();
    let descs_end = SGD_HEADER_LEN + images * SGD_IMAGE_DESC_LEN;
    if sgd.len() < descs_end {
        return Err(bad(
            0,
            format!(
                "{} bytes, {images} levels need at least {descs_end}",
                sgd.len()
            ),
        ));
    }
    let endpoints = u16::from_le_bytes([sgd[0], sgd[1]]);
    let selectors = u16::from_le_bytes([sgd[2], sgd[3]]);
    let lens = [le32(sgd, 4), le32(sgd, 8), le32(sgd, 12), le32(sgd, 16)];
    let total: u64 = lens.iter().map(|&l| u64::from(l)).sum();
    if descs_end as u64 + total != sgd.len() as u64 {
        return Err(bad(
            4,
            format!(
                "codebooks, tables and extended data of {total} bytes do not fill the {} bytes after the image descriptors",
                sgd.len() - descs_end
            ),
        ));
    }
    // The .basis header stores the codebook lengths in 3 bytes and every
    // offset in 4: refuse what would not fit rather than wrap.
    if lens[0] >= 1 << 24 || lens[1] >= 1 << 24 || bytes.len() as u64 >= u64::from(u32::MAX) / 2 {
        return Err(bad(
            4,
            "codebooks of 16 MiB or more, or a file of 2 GiB or more, do not fit a .basis file"
                .into(),
        ));
    }
    let mut from = descs_end;
    let mut section = |len: u32| {
        let s = &sgd[from..from + len as usize];
        from += len as usize;
        s
    };
    let (ep, sel, tables) = (section(lens[0]), section(lens[1]), section(lens[2]));

    let mut slices = Vec::with_capacity(images * 2);
    for (m, level) in layout.levels.iter().enumerate() {
        let d = SGD_HEADER_LEN + m * SGD_IMAGE_DESC_LEN;
        let level_bytes = &bytes[level.bytes.clone()];
        let (w, h) = gpustream::pack::mip_extent(layout.width, layout.height, m as u8);
        let mut slice = |off_at: usize, alpha: bool| -> Result<(), PackError> {
            let (off, len) = (
                le32(sgd, d + off_at) as usize,
                le32(sgd, d + off_at + 4) as usize,
            );
            let data = off
                .checked_add(len)
                .and_then(|e| level_bytes.get(off..e))
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    bad(
                        d + off_at,
                        format!(
                            "level {m}'s {} slice ({len} bytes at {off}) is empty or outside its {} bytes",
                            if alpha { "alpha" } else { "RGB" },
                            level_bytes.len()
                        ),
                    )
                })?;
            slices.push(Slice {
                level: m as u32,
                alpha,
                width: w,
                height: h,
                data,
            });
            Ok(())
        };
        slice(4, false)?;
        if has_alpha {
            slice(12, true)?;
        }
    }
    Ok(write_basis(
        endpoints, ep, selectors, sel, tables, &slices, has_alpha, srgb,
    ))
}

/// Lays out a `.basis` file: header, slice descriptors, codebooks,
/// tables, slices; the CRCs computed last.
#[allow(clippy::too_many_arguments)]
fn write_basis(
    endpoints: u16,
    ep: &[u8],
    selectors: u16,
    sel: &[u8],
    tables: &[u8],
    slices: &[Slice<'_>],
    has_alpha: bool,
    srgb: bool,
) -> Vec<u8> {
    let descs_at = BASIS_HEADER_LEN;
    let ep_at = descs_at + slices.len() * SLICE_DESC_LEN;
    let sel_at = ep_at + ep.len();
    let tables_at = sel_at + sel.len();
    let mut slice_at = tables_at + tables.len();
    let mut descs = Vec::with_capacity(slices.len() * SLICE_DESC_LEN);
    for s in slices {
        put(&mut descs, 0, 3); // image index: one image with its mips
        put(&mut descs, s.level.into(), 1);
        put(&mut descs, u64::from(s.alpha), 1); // cSliceDescFlagsHasAlpha
        put(&mut descs, s.width.into(), 2);
        put(&mut descs, s.height.into(), 2);
        put(&mut descs, s.width.div_ceil(4).into(), 2);
        put(&mut descs, s.height.div_ceil(4).into(), 2);
        put(&mut descs, slice_at as u64, 4);
        put(&mut descs, s.data.len() as u64, 4);
        put(&mut descs, crc16(s.data).into(), 2);
        slice_at += s.data.len();
    }
    let mut body = descs;
    for part in [ep, sel, tables] {
        body.extend_from_slice(part);
    }
    for s in slices {
        body.extend_from_slice(s.data);
    }
    // Flags: ETC1S (1), has alpha slices (4), sRGB (16).
    let flags = 1 | if has_alpha { 4 } else { 0 } | if srgb { 16 } else { 0 };
    let mut h = Vec::with_capacity(BASIS_HEADER_LEN);
    put(&mut h, u64::from(u16::from_le_bytes(*b"sB")), 2); // 'B' << 8 | 's'
    put(&mut h, 0x13, 2); // the version the transcoder reads
    put(&mut h, BASIS_HEADER_LEN as u64, 2);
    put(&mut h, 0, 2); // header CRC, below
    put(&mut h, body.len() as u64, 4);
    put(&mut h, crc16(&body).into(), 2);
    put(&mut h, slices.len() as u64, 3);
    put(&mut h, 1, 3); // images
    put(&mut h, 0, 1); // tex format: ETC1S
    put(&mut h, flags, 2);
    put(&mut h, 0, 1); // tex type: 2D
    put(&mut h, 0, 3); // us per frame
    put(&mut h, 0, 4); // reserved
    put(&mut h, 0, 8); // user data
    put(&mut h, endpoints.into(), 2);
    put(&mut h, ep_at as u64, 4);
    put(&mut h, ep.len() as u64, 3);
    put(&mut h, selectors.into(), 2);
    put(&mut h, sel_at as u64, 4);
    put(&mut h, sel.len() as u64, 3);
    put(&mut h, tables_at as u64, 4);
    put(&mut h, tables.len() as u64, 4);
    put(&mut h, descs_at as u64, 4);
    put(&mut h, 0, 8); // no extended data
    debug_assert_eq!(h.len(), BASIS_HEADER_LEN);
    let crc = crc16(&h[8..]);
    h[6..8].copy_from_slice(&crc.to_le_bytes());
    h.extend_from_slice(&body);
    h
}
