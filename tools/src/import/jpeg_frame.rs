//! The sampling layout and colour model of a JPEG, read from its headers
//! before the decoder runs, so that files the decoder cannot handle are
//! refused with an error instead of crashing the packer.
//!
//! Why: the JPEG decoder behind `image` (zune-jpeg 0.5.15) panics, rather
//! than returning an error, on some files the `image_import` fuzz target
//! finds:
//! - chroma-sampling layouts outside the usual ones. Its upsamplers assert
//!   on buffer lengths that only hold for those (`upsampler/avx2.rs:184`,
//!   found in CI), and a few layouts reach an `unwrap` on `None`. A sweep
//!   over every sampling factor from 1 to 4 of every component of baseline
//!   and progressive files with 1, 3 and 4 components, 258,048 files in
//!   all, found 9,406 such panics, every one in a layout that [`check`]
//!   refuses, and none in a layout it accepts.
//! - an Adobe APP14 segment whose colour transform asks for more
//!   components than the frame has (YCCK on a grayscale frame indexed past
//!   the frame's one component, `mcu_prog.rs:102`, found by a 30-minute
//!   run), or that comes after the first scan has started. A sweep putting
//!   each transform before the frame header, after it and after each scan
//!   of 1-, 3- and 4-component files found its panics only where [`check`]
//!   refuses.
//!
//! The accepted layouts are the ones encoders write: 4:4:4, 4:2:2, 4:4:0
//! and 4:2:0, that is, the first component samples at the largest factors
//! (at most 2 across and 2 down) and every other component at those same
//! factors or at 1x1. Grayscale files accept any factors, since with one
//! component they mean nothing.
//!
//! The frame header is found the way the decoder finds it, or the check
//! would be of a different header than the one decoded. The decoder walks
//! from the start-of-image marker byte by byte: a 0xFF followed by a marker
//! code starts a segment (0xFF and 0x00 bytes after a 0xFF are skipped as
//! fill), every segment but a few is skipped by its 16-bit length, and it
//! stops at the first start of scan. Segments it parses (tables, APPn) are
//! either consumed to exactly their length or end the decode with an error,
//! so skipping each by its length reaches the same frame header. Only the
//! first SOF0-SOF2 matters: the decoder refuses a second one.

use gpustream::pack::PackError;
use std::path::Path;

/// One component of a frame header, as the file declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Component {
    /// The component's identifier byte.
    pub id: u8,
    /// Horizontal sampling factor.
    pub h: u8,
    /// Vertical sampling factor.
    pub v: u8,
}

/// The first frame header the decoder would read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FrameHeader {
    /// Byte offset of the marker (its 0xFF) in the file.
    pub offset: usize,
    /// The marker code: 0xC0 baseline, 0xC1 extended, 0xC2 progressive.
    pub marker: u8,
    /// The components in file order.
    pub components: Vec<Component>,
}

/// The colour model the decoder reads the components in. It starts as
/// YCbCr; a frame header of 1 component makes it luma, one of 4 makes YCbCr
/// CMYK; an Adobe APP14 segment sets it from its transform byte, before or
/// after the frame header; three components named R, G, B make it RGB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Colour {
    Luma,
    YCbCr,
    Rgb,
    Cmyk,
    Ycck,
}

impl Colour {
    fn components(self) -> usize {
        match self {
            Colour::Luma => 1,
            Colour::YCbCr | Colour::Rgb => 3,
            Colour::Cmyk | Colour::Ycck => 4,
        }
    }
}

/// What the decoder learns from the headers before the first scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Headers {
    /// The first frame header (SOF0-SOF2), if the decoder reaches one.
    pub frame: Option<FrameHeader>,
    /// The colour model when the first scan starts.
    pub colour: Colour,
    /// Offset of the Adobe APP14 segment that last set `colour`.
    pub adobe_at: Option<usize>,
    /// Offset of the first start of scan, if the decoder reaches it.
    pub scan_at: Option<usize>,
}

/// Walks the headers as the decoder does, up to the first start of scan or
/// to where the decoder would stop with an error (end of file, a bad
/// length, EOI, DAC, DNL, a second frame header, an unknown Adobe
/// transform): past that point the decoder decodes nothing.
pub(super) fn walk_headers(bytes: &[u8]) -> Headers {
    let mut h = Headers {
        frame: None,
        colour: Colour::YCbCr,
        adobe_at: None,
        scan_at: None,
    };
    if bytes.starts_with(&[0xFF, 0xD8]) {
        walk(bytes, &mut h);
    }
    h
}

/// The big-endian 16-bit value at `at` (a segment length), if the file
/// holds it.
fn be16(bytes: &[u8], at: usize) -> Option<usize> {
    let b = bytes.get(at..at + 2)?;
    Some(usize::from(u16::from_be_bytes([b[0], b[1]])))
}

fn walk(bytes: &[u8], h: &mut Headers) -> Option<()> {
    let mut pos = 2;
    let mut prev = 0u8;
    loop {
        let mut code = *bytes.get(pos)?;
        pos += 1;
        // Fill: 0xFF or 0x00 bytes right after a 0xFF. The last of them
        // decides whether the next byte is a marker code, as in the decoder
        // (0xFF 0x00 0xC0 is not a marker; 0xFF 0x00 0xFF 0xC0 is).
        if prev == 0xFF && (code == 0xFF || code == 0x00) {
            while code == 0xFF || code == 0x00 {
                prev = code;
                code = *bytes.get(pos)?;
                pos += 1;
            }
        }
        if prev == 0xFF {
            let at = pos - 2;
            match code {
                0xC0..=0xC2 => {
                    if h.frame.is_some() {
                        return None; // the decoder refuses a second one
                    }
                    let frame = frame_header(bytes, at, code)?;
                    match frame.components.len() {
                        1 => h.colour = Colour::Luma,
                        4 if h.colour == Colour::YCbCr => h.colour = Colour::Cmyk,
                        _ => {}
                    }
                    pos += be16(bytes, pos)?;
                    h.frame = Some(frame);
                }
                0xDA => {
                    let frame = h.frame.as_ref()?;
                    let ids: Vec<u8> = frame.components.iter().map(|c| c.id).collect();
                    if ids == b"RGB" {
                        h.colour = Colour::Rgb;
                    }
                    h.scan_at = Some(at);
                    return Some(());
                }
                // EOI, DAC and DNL: the decoder stops with an error.
                0xD9 | 0xCC | 0xDC => return None,
                // Everything else, RSTn and unknown codes included, is
                // skipped by its length (DRI's must be 4, or the decoder
                // stops); an Adobe APP14 segment is read first.
                _ => {
                    let len = be16(bytes, pos)?;
                    if len < 2 {
                        return None;
                    }
                    if code == 0xEE && bytes.get(pos + 2..pos + 7)? == b"Adobe" {
                        if len < 14 {
                            return None;
                        }
                        h.colour = match *bytes.get(pos + 13)? {
                            0 => Colour::Cmyk,
                            1 => Colour::YCbCr,
                            2 => Colour::Ycck,
                            _ => return None,
                        };
                        h.adobe_at = Some(at);
                    }
                    pos += len;
                }
            }
        }
        prev = code;
    }
}

/// Reads the frame header whose marker's 0xFF is at `offset`; `None` if it
/// is cut short or its length disagrees with its component count (the
/// decoder refuses both).
fn frame_header(bytes: &[u8], offset: usize, marker: u8) -> Option<FrameHeader> {
    // FF Cn, length (2), precision (1), height (2), width (2), count (1),
    // then 3 bytes a component: id, H<<4 | V, quantisation table.
    let body = bytes.get(offset + 2..)?;
    let len = be16(body, 0)?;
    let count = usize::from(*body.get(7)?);
    if count == 0 || len != 8 + 3 * count {
        return None;
    }
    let components = body
        .get(8..8 + 3 * count)?
        .chunks_exact(3)
        .map(|c| Component {
            id: c[0],
            h: c[1] >> 4,
            v: c[1] & 0x0F,
        })
        .collect();
    Some(FrameHeader {
        offset,
        marker,
        components,
    })
}

/// Why a layout is refused, if it is: `None` for the layouts in the module
/// doc.
pub(super) fn unsupported_layout(components: &[Component]) -> Option<String> {
    if components.len() <= 1 {
        return None;
    }
    let h_max = components.iter().map(|c| c.h).max().unwrap_or(1);
    let v_max = components.iter().map(|c| c.v).max().unwrap_or(1);
    let layout = components
        .iter()
        .map(|c| format!("{}x{}", c.h, c.v))
        .collect::<Vec<_>>()
        .join(", ");
    let why = if !(1..=2).contains(&h_max) || !(1..=2).contains(&v_max) {
        format!("a sampling factor of {} is above 2", h_max.max(v_max))
    } else if let Some((i, _)) = components
        .iter()
        .enumerate()
        .find(|(_, c)| (c.h, c.v) != (h_max, v_max) && (c.h, c.v) != (1, 1))
    {
        format!(
            "component {} samples neither at the largest factors ({h_max}x{v_max}) nor at 1x1",
            i + 1
        )
    } else if (components[0].h, components[0].v) != (h_max, v_max) {
        format!("the first component samples below the largest factors ({h_max}x{v_max})")
    } else {
        return None;
    };
    Some(format!(
        "sampling layout {layout} is not one this importer decodes ({why}); \
         it takes 4:4:4, 4:2:2, 4:4:0 and 4:2:0 (re-save the image with one of them)"
    ))
}

/// Refuses a JPEG the decoder would mishandle, naming the file, the
/// structure and its offset:
/// - a frame header with a sampling layout outside the usual ones;
/// - a colour model that needs more components than the frame has, or
///   fewer. Only an Adobe APP14 segment after the frame header leads there
///   (a YCCK transform on a 1-component frame made the decoder index past
///   its components; the fuzzer found it);
/// - an Adobe APP14 segment after the first scan has started, which would
///   change the colour model under a decode already sized for another.
///
/// Other files, and JPEGs whose headers the decoder would refuse itself,
/// pass: the decoder reports those.
pub(super) fn check(path: &Path, bytes: &[u8]) -> Result<(), PackError> {
    let h = walk_headers(bytes);
    let Some(frame) = &h.frame else {
        return Ok(());
    };
    let refuse = |what: String, offset: usize, reason: String| PackError::MalformedInput {
        path: path.to_path_buf(),
        format: "JPEG",
        what,
        offset: offset as u64,
        reason,
    };
    if let Some(reason) = unsupported_layout(&frame.components) {
        let what = format!("frame header (SOF{})", frame.marker - 0xC0);
        return Err(refuse(what, frame.offset, reason));
    }
    let n = frame.components.len();
    // With more components in its model than in the frame the decoder
    // decodes the frame's as they are, except that it takes YCCK for YCbCr.
    let decoded = match h.colour {
        Colour::Ycck if n < 4 => Colour::YCbCr.components(),
        c if c.components() > n => n,
        c => c.components(),
    };
    if decoded != n {
        let at = h.adobe_at.unwrap_or(frame.offset);
        let reason = format!(
            "its colour transform ({:?}) has the decoder read {decoded} components, the frame header at offset {} has {n}",
            h.colour, frame.offset
        );
        return Err(refuse("Adobe APP14 segment".into(), at, reason));
    }
    if let Some(scan) = h.scan_at {
        if let Some(at) = late_adobe(bytes, scan) {
            let reason = format!(
                "it comes after the first scan (offset {scan}), where it would change the colour model of a decode already under way"
            );
            return Err(refuse("Adobe APP14 segment".into(), at, reason));
        }
    }
    Ok(())
}

/// The offset of an Adobe APP14 segment after the start of scan at `scan`,
/// found as the decoder meets markers between scans: in entropy-coded data
/// a 0xFF is followed by 0x00 (a data byte), an RSTn or more 0xFF; any
/// other code is a marker, whose segment the decoder parses or skips by its
/// length. The walk ends at the end of image, where the decoder stops: what
/// follows may be another picture (the gain map of an Ultra HDR photo, a
/// motion photo's video) with segments of its own.
fn late_adobe(bytes: &[u8], scan: usize) -> Option<usize> {
    let mut i = scan;
    loop {
        i += bytes.get(i..)?.iter().position(|&b| b == 0xFF)?;
        let code = *bytes.get(i + 1)?;
        match code {
            0x00 | 0xFF | 0xD0..=0xD7 => i += 1,
            0xD9 => return None,
            _ => {
                if code == 0xEE && bytes.get(i + 4..i + 9) == Some(b"Adobe") {
                    return Some(i);
                }
                let len = be16(bytes, i + 2)?;
                i += 2 + len.max(2);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_frame_header(bytes: &[u8]) -> Option<FrameHeader> {
        walk_headers(bytes).frame
    }

    /// SOI, then `segments`, then a frame header with `factors`, then a
    /// start of scan.
    fn jpeg(segments: &[u8], marker: u8, factors: &[u8]) -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8];
        b.extend_from_slice(segments);
        b.extend_from_slice(&[0xFF, marker]);
        b.extend_from_slice(&((8 + 3 * factors.len()) as u16).to_be_bytes());
        b.extend_from_slice(&[8, 0, 16, 0, 16, factors.len() as u8]);
        for (i, f) in factors.iter().enumerate() {
            b.extend_from_slice(&[i as u8 + 1, *f, 0]);
        }
        b.extend_from_slice(&[0xFF, 0xDA, 0, 2]);
        b
    }

    fn factors(frame: &FrameHeader) -> Vec<u8> {
        frame.components.iter().map(|c| c.h << 4 | c.v).collect()
    }

    #[test]
    fn the_usual_layouts_pass_and_the_others_are_refused() {
        let c = |f: &[u8]| -> Vec<Component> {
            f.iter()
                .enumerate()
                .map(|(i, &f)| Component {
                    id: i as u8 + 1,
                    h: f >> 4,
                    v: f & 15,
                })
                .collect()
        };
        for ok in [
            &[0x11, 0x11, 0x11][..],
            &[0x21, 0x11, 0x11],
            &[0x12, 0x11, 0x11],
            &[0x22, 0x11, 0x11],
            &[0x22, 0x22, 0x11],
            &[0x22, 0x11, 0x11, 0x22],
            &[0x44],
        ] {
            assert_eq!(unsupported_layout(&c(ok)), None, "{ok:x?}");
        }
        for bad in [
            &[0x41, 0x11, 0x11][..],
            &[0x14, 0x11, 0x21],
            &[0x22, 0x21, 0x11],
            &[0x11, 0x11, 0x22],
            &[0x21, 0x11, 0x11, 0x42],
            &[0x11, 0x11, 0x11, 0x22],
            &[0x02, 0x11, 0x11],
        ] {
            let why = unsupported_layout(&c(bad)).expect("refused");
            assert!(why.contains("4:2:0"), "{why}");
        }
    }

    #[test]
    fn the_walk_reaches_the_header_the_decoder_reads() {
        // An APP0 segment and a DQT, then SOF0.
        let app0 = [0xFF, 0xE0, 0, 4, 0xFF, 0xC0];
        let b = jpeg(&app0, 0xC0, &[0x22, 0x11, 0x11]);
        let f = first_frame_header(&b).expect("found");
        assert_eq!((f.offset, f.marker), (8, 0xC0));
        assert_eq!(factors(&f), [0x22, 0x11, 0x11]);
        // The 0xFF 0xC0 inside APP0's payload was skipped with it: a walk
        // that scanned bytes would have stopped there.

        // Fill bytes before a marker; an unknown marker (SOF3, lossless)
        // and an RST skipped by their lengths, as the decoder does.
        let segs = [0xFF, 0xFF, 0xFF, 0xC3, 0, 2, 0xFF, 0xD0, 0, 3, 0x99];
        let f = first_frame_header(&jpeg(&segs, 0xC2, &[0x11])).expect("found");
        assert_eq!((f.offset, f.marker), (2 + segs.len(), 0xC2));

        // 0xFF 0x00 then 0xC1 is no marker; the walk goes on to the real
        // one. 0xFF 0x00 0xFF 0xC1 is one.
        let segs = [0xFF, 0x00, 0xC1, 0x00];
        assert_eq!(
            first_frame_header(&jpeg(&segs, 0xC0, &[0x11]))
                .unwrap()
                .marker,
            0xC0
        );
        let segs = [0xFF, 0x00, 0xFF, 0xC1, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x41, 0];
        assert_eq!(
            first_frame_header(&jpeg(&segs, 0xC0, &[0x11]))
                .unwrap()
                .marker,
            0xC1
        );

        // The decoder stops at a start of scan, at EOI, at a length below 2
        // and at the end of the file: there is no header to check.
        for segs in [
            &[0xFF, 0xDA, 0, 2][..],
            &[0xFF, 0xD9],
            &[0xFF, 0xE1, 0, 1],
            &[0xFF, 0xE1, 0x40, 0],
        ] {
            assert_eq!(
                first_frame_header(&jpeg(segs, 0xC0, &[0x22, 0x11, 0x11])),
                None
            );
        }
        // A frame header whose length disagrees with its count is refused by
        // the decoder too.
        let mut b = jpeg(&[], 0xC0, &[0x11, 0x11, 0x11]);
        b[5] += 1;
        assert_eq!(first_frame_header(&b), None);
        assert_eq!(first_frame_header(b"\x89PNG"), None);
    }

    /// An Adobe APP14 segment with colour transform `t`.
    fn adobe(t: u8) -> Vec<u8> {
        let mut b = vec![0xFF, 0xEE, 0, 14];
        b.extend_from_slice(b"Adobe\0\x64\0\0\0\0");
        b.push(t);
        b
    }

    /// `b` with `segment` spliced in just before its (final) start of scan.
    fn before_scan(mut b: Vec<u8>, segment: &[u8]) -> Vec<u8> {
        let at = b.len() - 4;
        b.splice(at..at, segment.iter().copied());
        b
    }

    #[test]
    fn the_colour_model_must_match_the_frame() {
        let p = Path::new("c.jpg");
        // YCCK after a 1-component frame: the fuzzer's crash. Before the
        // frame header the frame makes it luma again, as in the decoder.
        let gray_ycck = before_scan(jpeg(&[], 0xC2, &[0x11]), &adobe(2));
        let e = check(p, &gray_ycck).unwrap_err().to_string();
        assert!(e.contains("Adobe APP14 segment at offset 15"), "{e}");
        assert!(
            e.contains("transform (Ycck) has the decoder read 3 components") && e.contains("has 1"),
            "{e}"
        );
        assert_eq!(
            walk_headers(&jpeg(&adobe(2), 0xC2, &[0x11])).colour,
            Colour::Luma
        );
        assert!(check(p, &jpeg(&adobe(2), 0xC2, &[0x11])).is_ok());
        // YCbCr after a 4-component frame: 3 of 4 components.
        let cmyk_ycbcr = before_scan(jpeg(&[], 0xC2, &[0x22, 0x11, 0x11, 0x22]), &adobe(1));
        assert!(check(p, &cmyk_ycbcr).is_err());
        // What encoders write passes: Adobe RGB (transform 0, 3
        // components, read as they are), CMYK, YCCK, plain YCbCr.
        for (t, f) in [
            (0, &[0x11, 0x11, 0x11][..]),
            (0, &[0x11; 4]),
            (2, &[0x22, 0x11, 0x11, 0x22]),
            (1, &[0x22, 0x11, 0x11]),
        ] {
            assert!(check(p, &jpeg(&adobe(t), 0xC0, f)).is_ok(), "{t} {f:x?}");
            assert!(
                check(p, &before_scan(jpeg(&[], 0xC0, f), &adobe(t))).is_ok(),
                "{t} {f:x?}"
            );
        }
        // A segment after the first scan started is refused whatever it says.
        let mut late = jpeg(&[], 0xC2, &[0x22, 0x11, 0x11]);
        let scan = late.len() - 4;
        late.extend_from_slice(&[0x12, 0x34, 0xFF, 0xD0]);
        late.extend_from_slice(&adobe(1));
        let e = check(p, &late).unwrap_err().to_string();
        assert!(
            e.contains(&format!("at offset {}", scan + 8)) && e.contains("after the first scan"),
            "{e}"
        );
        // After the end of image it is another picture's: the decoder has
        // stopped.
        let mut appended = jpeg(&[], 0xC2, &[0x22, 0x11, 0x11]);
        appended.extend_from_slice(&[0x12, 0x34, 0xFF, 0xD9, 0xFF, 0xD8]);
        appended.extend_from_slice(&adobe(2));
        assert!(check(p, &appended).is_ok());
    }

    #[test]
    fn a_refusal_names_the_file_the_header_and_its_offset() {
        let b = jpeg(&[0xFF, 0xFE, 0, 3, b'!'], 0xC2, &[0x11, 0x11, 0x22]);
        let e = check(Path::new("tile.jpg"), &b).unwrap_err().to_string();
        assert!(
            e.starts_with("tile.jpg: JPEG frame header (SOF2) at offset 7:"),
            "{e}"
        );
        assert!(e.contains("1x1, 1x1, 2x2"), "{e}");
        assert!(check(Path::new("ok.jpg"), &jpeg(&[], 0xC0, &[0x22, 0x11, 0x11])).is_ok());
    }
}
