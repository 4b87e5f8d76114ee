//! Untrusted inputs through the library's parsers: the files in
//! `tests/regressions/` that once crashed a command, every truncation and
//! seeded mutations of valid KTX2, PNG, JPEG and trace files. Each must end
//! in `Ok` or a typed error naming the file, never a panic or an allocation
//! the file does not justify.

use std::path::{Path, PathBuf};

use gpustream::pack::{PackError, TextureFormat};
use gpustream::runtime::trace::{TraceError, TraceReader, TraceRecord, MAX_LINE_BYTES};
use gpustream_tools::import::{decode_image, read_input};
use gpustream_tools::ktx2::{read_ktx2, write_ktx2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn regression(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/regressions")
        .join(name)
}

/// Up to 8 random byte changes (set, flip, or cut the tail).
fn mutate(rng: &mut ChaCha8Rng, valid: &[u8]) -> Vec<u8> {
    let mut b = valid.to_vec();
    for _ in 0..rng.gen_range(1..=8) {
        if b.is_empty() {
            break;
        }
        let i = rng.gen_range(0..b.len());
        match rng.gen_range(0..4) {
            0 => b[i] = rng.gen(),
            1 => b[i] ^= 1 << rng.gen_range(0..8),
            2 => b[i] = [0, 0xFF, 0x7F, 0x80][rng.gen_range(0..4)],
            _ => b.truncate(i),
        }
    }
    b
}

fn valid_ktx2() -> Vec<u8> {
    let (w, h) = (16, 8);
    let mips: Vec<Vec<u8>> = (0..gpustream::pack::full_mip_count(w, h))
        .map(|m| {
            let (mw, mh) = gpustream::pack::mip_extent(w, h, m);
            vec![m + 1; TextureFormat::Bc7.data_size(mw, mh) as usize]
        })
        .collect();
    write_ktx2(TextureFormat::Bc7, w, h, &mips)
}

#[test]
fn the_ktx2_dfd_regression_is_a_typed_error_with_its_offset() {
    let path = regression("ktx2-dfd-panic.ktx2");
    let bytes = std::fs::read(&path).unwrap();
    let e = read_ktx2(&path, &bytes).unwrap_err();
    match &e {
        PackError::MalformedInput {
            path: p,
            format,
            what,
            ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*format, "KTX2");
            assert!(what.starts_with("DFD"), "{e}");
        }
        other => panic!("expected MalformedInput, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("ktx2-dfd-panic.ktx2") && msg.contains("at offset"),
        "{msg}"
    );
}

#[test]
fn every_truncation_of_a_valid_ktx2_is_refused_by_name() {
    let bytes = valid_ktx2();
    assert!(read_ktx2(Path::new("ok.ktx2"), &bytes).is_ok());
    for len in 0..bytes.len() {
        let e = read_ktx2(Path::new("cut.ktx2"), &bytes[..len])
            .err()
            .unwrap_or_else(|| panic!("a {len}-byte prefix was accepted"));
        assert!(e.to_string().starts_with("cut.ktx2: "), "{e}");
    }
}

#[test]
fn mutated_ktx2_files_parse_or_fail_cleanly() {
    let valid = valid_ktx2();
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let b = mutate(&mut rng, &valid);
        match read_ktx2(Path::new("m.ktx2"), &b) {
            Ok(t) => {
                // What is accepted is self-consistent: a full set of levels
                // of exactly the sizes the format needs.
                accepted += 1;
                for (m, mip) in t.mips.iter().enumerate() {
                    let (w, h) = gpustream::pack::mip_extent(t.width, t.height, m as u8);
                    assert_eq!(mip.len() as u64, t.format.data_size(w, h));
                }
            }
            Err(e) => assert!(e.to_string().starts_with("m.ktx2: "), "{e}"),
        }
    }
    // Mutations of level data and padding leave the file valid: some pass.
    assert!(accepted > 0);
}

fn encoded(format: image::ImageFormat) -> Vec<u8> {
    let img = image::RgbImage::from_fn(24, 16, |x, y| image::Rgb([x as u8 * 9, y as u8 * 15, 77]));
    let mut v = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut std::io::Cursor::new(&mut v), format)
        .unwrap();
    v
}

#[test]
fn png_regressions_declaring_huge_sizes_are_refused_before_decoding() {
    for (name, want) in [
        (
            "png-100000x100000.png",
            "(offset 16) declares 100000x100000",
        ),
        (
            "png-16384x16384-tiny.png",
            "more than its 69 bytes can hold",
        ),
    ] {
        let path = regression(name);
        let e = decode_image(&path, &std::fs::read(&path).unwrap()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(name) && msg.contains(want), "{msg}");
    }
}

/// JPEGs that made the JPEG decoder (zune-jpeg 0.5.15) panic: two found by
/// the `image_import` fuzz target, three by a sweep of every sampling
/// factor of every component. Each is refused from its headers, naming the
/// file, the structure and its offset, before the decoder runs; none
/// reaches the decoder's own panic guard.
#[test]
fn jpeg_regressions_the_decoder_mishandles_are_refused_from_their_headers() {
    for (name, header) in [
        (
            "jpeg-progressive-luma-1x1-chroma-2x2.jpg",
            "frame header (SOF2) at offset 169",
        ),
        ("jpeg-ycck-4x2-upsampler-assert.jpg", "frame header (SOF0)"),
        ("jpeg-1x4-2x1-unwrap-none.jpg", "frame header (SOF0)"),
        ("jpeg-cmyk-k-2x2-only.jpg", "frame header (SOF0)"),
        (
            "jpeg-progressive-gray-ycck-transform.jpg",
            "Adobe APP14 segment at offset 499",
        ),
    ] {
        let path = regression(name);
        let e = decode_image(&path, &std::fs::read(&path).unwrap()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, PackError::MalformedInput { .. }), "{msg}");
        assert!(msg.contains(name) && msg.contains(header), "{msg}");
    }
}

/// Every sampling layout of a 3-component baseline JPEG (each factor 1 to
/// 4 on each component): the usual ones decode, the rest are refused from
/// the header, and none ends in the decoder's panic guard.
#[test]
fn every_sampling_layout_decodes_or_is_refused_from_its_header() {
    let jpeg = encoded(image::ImageFormat::Jpeg);
    let sof = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline JPEG has SOF0");
    assert_eq!(jpeg[sof + 9], 3, "three components");
    let (mut decoded, mut refused) = (0, 0);
    for layout in 0..16usize.pow(3) {
        let mut b = jpeg.clone();
        let f: Vec<(u8, u8)> = (0..3)
            .map(|k| {
                let x = (layout >> (4 * k)) & 15;
                (1 + (x / 4) as u8, 1 + (x % 4) as u8)
            })
            .collect();
        for (k, (h, v)) in f.iter().enumerate() {
            b[sof + 11 + 3 * k] = h << 4 | v;
        }
        let (hm, vm) = (
            f.iter().map(|x| x.0).max().unwrap(),
            f.iter().map(|x| x.1).max().unwrap(),
        );
        let usual = hm <= 2
            && vm <= 2
            && f[0] == (hm, vm)
            && f.iter().all(|&x| x == (hm, vm) || x == (1, 1));
        match decode_image(Path::new("layout.jpg"), &b) {
            Err(PackError::MalformedInput { what, offset, .. }) => {
                assert!(!usual, "{f:?} refused");
                assert_eq!((what.as_str(), offset), ("frame header (SOF0)", sof as u64));
                refused += 1;
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(!msg.contains("decoder failed"), "{f:?}: {msg}");
                assert!(usual, "{f:?} not refused from its header: {msg}");
            }
            Ok(img) => {
                assert!(usual, "{f:?} decoded");
                assert_eq!(
                    img.pixels.len(),
                    img.width as usize * img.height as usize * 4
                );
                decoded += 1;
            }
        }
    }
    // The usual layouts: 4:4:4, then 4:2:2, 4:4:0 and 4:2:0 with each
    // chroma component at full or reduced resolution: 1 + 3 * 4. Their
    // scans no longer match the rewritten header, but the decoder fills
    // what is missing.
    assert_eq!((refused, decoded), (4096 - 13, 13));
}

#[test]
fn a_small_jpeg_declaring_a_huge_size_is_refused_before_decoding() {
    let mut jpeg = encoded(image::ImageFormat::Jpeg);
    // The baseline frame header (SOF0): marker, length, precision, then
    // height and width, big-endian.
    let sof = jpeg
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("a baseline JPEG has SOF0");
    jpeg[sof + 5..sof + 7].copy_from_slice(&16384u16.to_be_bytes());
    jpeg[sof + 7..sof + 9].copy_from_slice(&16384u16.to_be_bytes());
    let e = decode_image(Path::new("huge.jpg"), &jpeg).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("huge.jpg")
            && msg.contains("declares 16384x16384")
            && msg.contains("can describe"),
        "{msg}"
    );
}

#[test]
fn mutated_png_and_jpeg_files_decode_or_fail_cleanly() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for (format, name) in [
        (image::ImageFormat::Png, "m.png"),
        (image::ImageFormat::Jpeg, "m.jpg"),
    ] {
        let valid = encoded(format);
        assert!(decode_image(Path::new(name), &valid).is_ok());
        for _ in 0..1500 {
            let b = mutate(&mut rng, &valid);
            if let Err(e) = decode_image(Path::new(name), &b) {
                assert!(e.to_string().starts_with(&format!("{name}: ")), "{e}");
            }
        }
    }
}

#[test]
fn inputs_that_are_not_regular_files_are_refused_without_reading() {
    let dir = tempfile::tempdir().unwrap();
    for p in [dir.path(), Path::new("/dev/zero")] {
        let e = read_input(p).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&p.display().to_string()) && msg.contains("not a regular file"),
            "{msg}"
        );
    }
}

#[test]
fn trace_regressions_name_the_file_and_line() {
    let path = regression("trace-not-utf8.trace");
    let f = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    let e = TraceReader::new(&path, f)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err();
    assert!(matches!(e, TraceError::NotUtf8 { line: 2, .. }), "{e}");
    assert!(
        e.to_string().contains("trace-not-utf8.trace:2: not UTF-8"),
        "{e}"
    );

    // A file without newlines, larger than the line bound.
    let dir = tempfile::tempdir().unwrap();
    let flat = dir.path().join("flat.trace");
    std::fs::write(&flat, vec![b'{'; 3 * MAX_LINE_BYTES]).unwrap();
    let e = TraceReader::open(&flat).err().unwrap();
    assert!(matches!(e, TraceError::LineTooLong { line: 1, .. }), "{e}");
    assert!(e.to_string().contains("flat.trace:1: "), "{e}");

    // A directory is an I/O error naming it.
    let e = TraceReader::open(dir.path()).err().unwrap();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
    assert!(
        e.to_string().contains(&dir.path().display().to_string()),
        "{e}"
    );

    // The huge request size parses (the reader does not judge sizes; its
    // users do, see tests/cli_untrusted.rs).
    let path = regression("trace-huge-size.trace");
    let recs: Vec<_> = TraceReader::open(&path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(matches!(
        recs[0].1,
        TraceRecord::Request { size: u64::MAX, .. }
    ));
}

#[test]
fn mutated_traces_parse_or_fail_by_line() {
    let valid = concat!(
        "{\"format\":\"gpustream-trace\",\"version\":1}\n",
        "{\"op\":\"pack\",\"id\":0,\"path\":\"/tmp/x.gspk\"}\n",
        "{\"op\":\"queue\",\"id\":0,\"priority\":\"normal\",\"capacity\":1024}\n",
        "{\"op\":\"request\",\"queue\":0,\"t_us\":1,\"pack\":0,\"asset\":\"a\",\"source\":{\"kind\":\"tile\",\"mip\":0,\"x\":1,\"y\":2},\"offset\":4096,\"stored\":100,\"size\":65536,\"codec\":\"lz4\",\"dest\":\"texture\",\"tag\":0}\n",
        "{\"op\":\"signal\",\"queue\":0,\"t_us\":2}\n",
        "{\"op\":\"submit\",\"queue\":0,\"t_us\":3,\"requests\":1}\n",
    )
    .as_bytes();
    let all: Vec<_> = TraceReader::new("v.trace", valid)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all.len(), 5);
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    for _ in 0..5000 {
        let b = mutate(&mut rng, valid);
        let lines = b.split(|&c| c == b'\n').count() as u64;
        let r = match TraceReader::new("m.trace", &b[..]) {
            Ok(r) => r,
            Err(e) => {
                assert!(e.to_string().starts_with("m.trace:1: "), "{e}");
                continue;
            }
        };
        for rec in r {
            match rec {
                Ok((line, _)) => assert!((2..=lines).contains(&line)),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.starts_with("m.trace:"), "{msg}");
                }
            }
        }
    }
}

/// A one-blob pack in `dir`, its header rewritten by `f` and sealed again
/// with a good header checksum, as a hostile writer would.
fn pack_with_header(dir: &Path, f: impl FnOnce(&mut [u8])) -> PathBuf {
    use gpustream::pack::{PackWriter, WriterOptions};
    let path = dir.join("hostile.gspk");
    let mut w = PackWriter::create(&path, WriterOptions::default()).unwrap();
    w.add_blob("blob", &[7u8; 10_000]).unwrap();
    w.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    f(&mut bytes[..64]);
    let crc = crc32c::crc32c(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn a_sparse_pack_declaring_a_huge_table_of_contents_is_refused_before_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    for toc_len in [1u64 << 40, 1 << 32, 1 << 31] {
        let path = pack_with_header(dir.path(), |h| {
            h[40..48].copy_from_slice(&toc_len.to_le_bytes());
        });
        // The file is as long as the header says, for free.
        let toc_offset =
            u64::from_le_bytes(std::fs::read(&path).unwrap()[32..40].try_into().unwrap());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(toc_offset + toc_len)
            .unwrap();
        match gpustream::pack::Pack::open(&path) {
            Err(PackError::Corrupt {
                what,
                offset,
                reason,
                ..
            }) => {
                assert_eq!((what.as_str(), offset), ("header", 40), "{reason}");
                assert!(reason.contains("longer than"), "{reason}");
            }
            // Refused from the header (offset 40): nothing of the table
            // was read or allocated.
            other => panic!("a {toc_len}-byte table of contents: {other:?}"),
        }
    }
}
