//! The texture files engines already have, through the packer: DDS (legacy
//! FourCC and DX10 headers), zstd-supercompressed KTX2 and Basis Universal
//! KTX2 (UASTC, ETC1S). Every input is made here: DDS headers by hand, zstd
//! with the `zstd` crate, Basis with the `basis-universal` encoder.

#[path = "common/basis_ktx2.rs"]
mod basis_ktx2;

use basis_ktx2::{basis_to_ktx2, encode_basis};
use gpustream::pack::{
    full_mip_count, mip_extent, Pack, PackError, PackWriter, TextureFormat, TextureSourceKind,
    WriterOptions,
};
use gpustream::Codec;
use gpustream_tools::dds::read_dds;
use gpustream_tools::import::{add_file, load_texture, ImageOptions};
use gpustream_tools::ktx2::{read_ktx2, write_ktx2};
use std::path::Path;
use std::process::Command;

// DDS header flags, caps and pixel format flags (Microsoft's DDS_HEADER).
const DDSD_BASE: u32 = 0x1 | 0x2 | 0x4 | 0x1000; // caps, height, width, pixel format
const DDSD_MIPMAPCOUNT: u32 = 0x2_0000;
const DDSD_LINEARSIZE: u32 = 0x8_0000;
const DDPF_FOURCC: u32 = 0x4;
const DDPF_RGBA: u32 = 0x40 | 0x1;
const CAPS_TEXTURE: u32 = 0x1000;
const CAPS2_CUBEMAP_ALL: u32 = 0x200 | 0xFC00;

/// The pixel format of a DDS header: a FourCC, or RGBA masks.
enum Pf {
    FourCC(&'static [u8; 4]),
    Rgba8,
}

/// A DDS file written byte by byte: magic, the 124-byte header, the DX10
/// header when `dx10` is `(dxgi format, misc flag, array size)`, then data.
fn dds(
    pf: Pf,
    dx10: Option<(u32, u32, u32)>,
    w: u32,
    h: u32,
    mips: u32,
    caps2: u32,
    data: &[u8],
) -> Vec<u8> {
    let mut b = b"DDS ".to_vec();
    let pf = if dx10.is_some() {
        Pf::FourCC(b"DX10")
    } else {
        pf
    };
    let linear = match pf {
        Pf::FourCC(_) => DDSD_LINEARSIZE,
        Pf::Rgba8 => 0,
    };
    let mut put = |v: u32| b.extend_from_slice(&v.to_le_bytes());
    put(124);
    put(DDSD_BASE | DDSD_MIPMAPCOUNT | linear);
    put(h);
    put(w);
    put(0); // pitch or linear size: 0, which readers must tolerate
    put(0); // depth
    put(mips);
    for _ in 0..11 {
        put(0);
    }
    put(32);
    match pf {
        Pf::FourCC(code) => {
            put(DDPF_FOURCC);
            put(u32::from_le_bytes(*code));
            for _ in 0..5 {
                put(0);
            }
        }
        Pf::Rgba8 => {
            put(DDPF_RGBA);
            put(0);
            for v in [32, 0xff, 0xff00, 0xff_0000, 0xff00_0000] {
                put(v);
            }
        }
    }
    put(CAPS_TEXTURE | if mips > 1 { 0x40_0008 } else { 0 });
    put(caps2);
    for _ in 0..3 {
        put(0);
    }
    if let Some((format, misc, array)) = dx10 {
        for v in [format, 3, misc, array, 0] {
            put(v);
        }
    }
    b.extend_from_slice(data);
    b
}

/// Recognisable texel data for every level of a chain.
fn chain(f: TextureFormat, w: u32, h: u32, levels: u8) -> Vec<Vec<u8>> {
    (0..levels)
        .map(|m| {
            let (mw, mh) = mip_extent(w, h, m);
            (0..f.data_size(mw, mh))
                .map(|i| (i as u8).wrapping_mul(31) ^ (m * 17))
                .collect()
        })
        .collect()
}

fn writer(path: &Path, codec: Codec) -> PackWriter {
    PackWriter::create(
        path,
        WriterOptions::default()
            .with_codec(codec)
            .with_level(0)
            .with_threads(2),
    )
    .unwrap()
}

fn gpustream(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpustream"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gpustream {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn dds_legacy_fourcc_and_dx10_headers_map_to_pack_formats() {
    let (w, h) = (32, 16);
    let levels = full_mip_count(w, h);
    let cases: Vec<(Vec<u8>, TextureFormat)> = {
        let mut v = Vec::new();
        for (code, f) in [
            (b"DXT1", TextureFormat::Bc1),
            (b"DXT5", TextureFormat::Bc3),
            (b"ATI1", TextureFormat::Bc4),
            (b"BC4U", TextureFormat::Bc4),
            (b"ATI2", TextureFormat::Bc5),
            (b"BC5U", TextureFormat::Bc5),
        ] {
            let data = chain(f, w, h, levels).concat();
            v.push((
                dds(Pf::FourCC(code), None, w, h, levels.into(), 0, &data),
                f,
            ));
        }
        let data = chain(TextureFormat::Rgba8Unorm, w, h, levels).concat();
        v.push((
            dds(Pf::Rgba8, None, w, h, levels.into(), 0, &data),
            TextureFormat::Rgba8Unorm,
        ));
        // DXGI_FORMAT values: BC1 71/72, BC3 77/78, BC4 80, BC5 83, BC7 98/99, RGBA8 28/29.
        for (dxgi, f) in [
            (71, TextureFormat::Bc1),
            (72, TextureFormat::Bc1Srgb),
            (77, TextureFormat::Bc3),
            (78, TextureFormat::Bc3Srgb),
            (80, TextureFormat::Bc4),
            (83, TextureFormat::Bc5),
            (98, TextureFormat::Bc7),
            (99, TextureFormat::Bc7Srgb),
            (28, TextureFormat::Rgba8Unorm),
            (29, TextureFormat::Rgba8UnormSrgb),
        ] {
            let data = chain(f, w, h, levels).concat();
            v.push((
                dds(Pf::Rgba8, Some((dxgi, 0, 1)), w, h, levels.into(), 0, &data),
                f,
            ));
        }
        v
    };
    for (bytes, f) in cases {
        let t = read_dds(Path::new("t.dds"), &bytes).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!((t.format, t.width, t.height), (f, w, h));
        assert_eq!(t.mips, chain(f, w, h, levels), "{f}");
    }
}

#[test]
fn dds_packs_with_its_chain_and_unpacks_byte_identical_as_dds_and_ktx2() {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (512, 256); // mip 0 is 128 KiB of BC7: tiled, the tail packed
    let f = TextureFormat::Bc7Srgb;
    let mips = chain(f, w, h, full_mip_count(w, h));
    let src = dir.path().join("wall.dds");
    std::fs::write(
        &src,
        dds(
            Pf::Rgba8,
            Some((99, 0, 1)),
            w,
            h,
            mips.len() as u32,
            0,
            &mips.concat(),
        ),
    )
    .unwrap();
    let pack_path = dir.path().join("p.gspk");
    let mut wr = writer(&pack_path, Codec::Zstd);
    add_file(&mut wr, "wall", &src, ImageOptions::default()).unwrap();
    wr.finish().unwrap();

    let pack = Pack::open(&pack_path).unwrap();
    let id = pack.find("wall").unwrap();
    let info = pack.asset(id).texture.unwrap();
    assert_eq!((info.format, info.width, info.height), (f, w, h));
    assert_eq!(pack.read_texture_mips(id).unwrap(), mips);
    assert_eq!(
        pack.texture_source(id).unwrap().kind,
        TextureSourceKind::Dds
    );

    let (out_dds, out_ktx) = (dir.path().join("o.dds"), dir.path().join("o.ktx2"));
    let p = pack_path.to_str().unwrap();
    gpustream(&["unpack", p, "wall", "-o", out_dds.to_str().unwrap()]);
    gpustream(&["unpack", p, "wall", "-o", out_ktx.to_str().unwrap()]);
    let back = read_dds(&out_dds, &std::fs::read(&out_dds).unwrap()).unwrap();
    assert_eq!((back.format, back.width, back.height), (f, w, h));
    assert_eq!(back.mips, mips, "DDS out holds the pack's bytes");
    let back = read_ktx2(&out_ktx, &std::fs::read(&out_ktx).unwrap()).unwrap();
    assert_eq!(back.mips, mips, "KTX2 out holds the pack's bytes");
}

#[test]
fn dds_without_mips_gets_a_chain_when_rgba8_and_an_error_when_bcn() {
    let (w, h) = (64, 32);
    let rgba = chain(TextureFormat::Rgba8Unorm, w, h, 1).concat();
    let bytes = dds(Pf::Rgba8, None, w, h, 1, 0, &rgba);
    let opts = ImageOptions {
        format: TextureFormat::Bc7,
        srgb: false,
    };
    let (t, src) = load_texture(Path::new("flat.dds"), &bytes, opts)
        .unwrap()
        .unwrap();
    assert_eq!(t.format, TextureFormat::Bc7);
    assert_eq!(t.mips.len(), full_mip_count(w, h) as usize);
    assert_eq!(src.kind, TextureSourceKind::Dds);

    let bc = chain(TextureFormat::Bc1, w, h, 1).concat();
    let bytes = dds(Pf::FourCC(b"DXT1"), None, w, h, 1, 0, &bc);
    let e = load_texture(Path::new("flat-bc1.dds"), &bytes, opts).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("flat-bc1.dds: ") && msg.contains("one mip level"),
        "{msg}"
    );
}

#[test]
fn dds_arrays_cube_maps_and_formats_without_an_equivalent_are_not_supported_yet() {
    let (w, h) = (16, 16);
    let one = chain(TextureFormat::Bc1, w, h, 1).concat();
    let cases = [
        (
            "array",
            dds(Pf::Rgba8, Some((71, 0, 4)), w, h, 1, 0, &one.repeat(4)),
            "array",
        ),
        (
            "cube-dx10",
            dds(Pf::Rgba8, Some((71, 4, 1)), w, h, 1, 0, &one.repeat(6)),
            "cube map",
        ),
        (
            "cube-legacy",
            dds(
                Pf::FourCC(b"DXT1"),
                None,
                w,
                h,
                1,
                CAPS2_CUBEMAP_ALL,
                &one.repeat(6),
            ),
            "cube map",
        ),
        (
            "bc6h",
            dds(Pf::Rgba8, Some((95, 0, 1)), w, h, 1, 0, &one.repeat(2)),
            "BC6H",
        ),
        (
            "dxt3",
            dds(Pf::FourCC(b"DXT3"), None, w, h, 1, 0, &one.repeat(2)),
            "'DXT3'",
        ),
    ];
    for (name, bytes, what) in cases {
        let path = format!("{name}.dds");
        match read_dds(Path::new(&path), &bytes) {
            Err(e @ PackError::UnsupportedInput { .. }) => {
                let msg = e.to_string();
                assert!(msg.starts_with(&format!("{path}: DDS: ")), "{msg}");
                assert!(
                    msg.contains(what) && msg.ends_with("not supported yet"),
                    "{msg}"
                );
            }
            other => panic!("{name}: expected UnsupportedInput, got {other:?}"),
        }
    }
}

#[test]
fn bad_dds_files_get_typed_errors_naming_file_and_place() {
    let (w, h) = (16, 8);
    let f = TextureFormat::Bc7;
    let mips = chain(f, w, h, full_mip_count(w, h));
    let good = dds(
        Pf::Rgba8,
        Some((98, 0, 1)),
        w,
        h,
        mips.len() as u32,
        0,
        &mips.concat(),
    );
    assert!(read_dds(Path::new("ok.dds"), &good).is_ok());

    // Every truncation: a typed error, never a panic.
    for len in 0..good.len() {
        let e = read_dds(Path::new("cut.dds"), &good[..len]).unwrap_err();
        assert!(e.to_string().starts_with("cut.dds: "), "{len}: {e}");
        assert!(
            matches!(e, PackError::TruncatedInput { format: "DDS", .. }),
            "{len}: {e:?}"
        );
    }
    // An unknown DXGI format value.
    let mut unknown = good.clone();
    unknown[128..132].copy_from_slice(&5000u32.to_le_bytes());
    match read_dds(Path::new("u.dds"), &unknown).unwrap_err() {
        PackError::UnknownDxgiFormat {
            value: 5000,
            offset: 128,
            ..
        } => {}
        other => panic!("expected UnknownDxgiFormat, got {other:?}"),
    }
    // Level 0's size in the header disagrees with the format and extent.
    let mut wrong = good.clone();
    wrong[20..24].copy_from_slice(&999u32.to_le_bytes());
    match read_dds(Path::new("l.dds"), &wrong).unwrap_err() {
        PackError::LevelSize {
            level: 0,
            found: 999,
            expected: 128,
            ..
        } => {}
        other => panic!("expected LevelSize, got {other:?}"),
    }
    // More data than the header's levels: the chain disagrees with the data.
    let mut long = good.clone();
    long.extend_from_slice(&[0; 16]);
    assert!(matches!(
        read_dds(Path::new("x.dds"), &long).unwrap_err(),
        PackError::LevelSize { .. }
    ));
    // More mips than the extent has.
    let mut deep = good;
    deep[28..32].copy_from_slice(&9u32.to_le_bytes());
    assert!(read_dds(Path::new("d.dds"), &deep)
        .unwrap_err()
        .to_string()
        .contains("mip levels"));
}

/// A KTX2 file re-written with every level zstd-supercompressed (scheme 2),
/// as `toktx --zcmp` writes them: levels smallest first, unaligned.
fn zstd_ktx2(f: TextureFormat, w: u32, h: u32, mips: &[Vec<u8>]) -> Vec<u8> {
    let plain = write_ktx2(f, w, h, mips);
    let n = mips.len();
    let index_end = 80 + 24 * n;
    let le64 = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    // Header, index, DFD and key/value data stay where they are; the
    // levels follow them compressed.
    let first_level = (0..n)
        .map(|m| le64(&plain, 80 + 24 * m) as usize)
        .min()
        .unwrap();
    let mut out = plain[..first_level].to_vec();
    out[44..48].copy_from_slice(&2u32.to_le_bytes());
    for m in (0..n).rev() {
        let z = zstd::bulk::compress(&mips[m], 3).unwrap();
        let e = 80 + 24 * m;
        let at = out.len() as u64;
        out[e..e + 8].copy_from_slice(&at.to_le_bytes());
        out[e + 8..e + 16].copy_from_slice(&(z.len() as u64).to_le_bytes());
        out.extend_from_slice(&z);
    }
    assert!(out.len() > index_end);
    out
}

#[test]
fn zstd_supercompressed_ktx2_is_decompressed_at_pack_time() {
    let (w, h) = (64, 64);
    let f = TextureFormat::Bc3;
    let mips = chain(f, w, h, full_mip_count(w, h));
    let bytes = zstd_ktx2(f, w, h, &mips);
    let t = read_ktx2(Path::new("z.ktx2"), &bytes).unwrap();
    assert!(t.zstd);
    assert_eq!(t.mips, mips);
    let (t, src) = load_texture(Path::new("z.ktx2"), &bytes, ImageOptions::default())
        .unwrap()
        .unwrap();
    assert_eq!(t.mips, mips);
    assert_eq!(src.kind, TextureSourceKind::Ktx2Zstd);
}

#[test]
fn supercompressed_levels_that_expand_or_are_cut_get_typed_errors() {
    let (w, h) = (64, 64);
    let f = TextureFormat::Bc1;
    let mips = chain(f, w, h, 1);
    let good = zstd_ktx2(f, w, h, &mips);
    // Level 0 holds 2 KiB; a frame inflating to 4 KiB expands past it.
    let mut big = good[..(u64::from_le_bytes(good[80..88].try_into().unwrap()) as usize)].to_vec();
    let z = zstd::bulk::compress(&[7u8; 4096], 3).unwrap();
    big[88..96].copy_from_slice(&(z.len() as u64).to_le_bytes());
    big.extend_from_slice(&z);
    match read_ktx2(Path::new("big.ktx2"), &big).unwrap_err() {
        e @ PackError::LevelExpands {
            level: 0,
            declared: 2048,
            ..
        } => {
            assert!(e.to_string().starts_with("big.ktx2: KTX2 level 0"), "{e}");
        }
        other => panic!("expected LevelExpands, got {other:?}"),
    }
    // A frame that inflates to less than declared.
    let mut small = big[..big.len() - z.len()].to_vec();
    let z = zstd::bulk::compress(&[7u8; 100], 3).unwrap();
    small[88..96].copy_from_slice(&(z.len() as u64).to_le_bytes());
    small.extend_from_slice(&z);
    assert!(matches!(
        read_ktx2(Path::new("s.ktx2"), &small).unwrap_err(),
        PackError::LevelSize {
            found: 100,
            expected: 2048,
            ..
        }
    ));
    // The declared uncompressed length disagrees with the format.
    let mut wrong = good.clone();
    wrong[96..104].copy_from_slice(&4096u64.to_le_bytes());
    assert!(matches!(
        read_ktx2(Path::new("w.ktx2"), &wrong).unwrap_err(),
        PackError::LevelSize {
            found: 4096,
            expected: 2048,
            ..
        }
    ));
    // Every truncation is refused by name, as a truncation.
    for len in 0..good.len() {
        let e = read_ktx2(Path::new("cut.ktx2"), &good[..len]).unwrap_err();
        assert!(e.to_string().starts_with("cut.ktx2: "), "{e}");
        assert!(
            matches!(e, PackError::TruncatedInput { format: "KTX2", .. }),
            "{len}: {e:?}"
        );
    }
}

/// An RGBA test image with smooth colour and, when asked, varying alpha.
fn picture(w: u32, h: u32, alpha: bool) -> Vec<u8> {
    let mut p = Vec::with_capacity((w * h * 4) as usize);
    for y in 0..h {
        for x in 0..w {
            let a = if alpha {
                ((x + y) * 255 / (w + h)) as u8
            } else {
                255
            };
            p.extend_from_slice(&[
                (x * 255 / w) as u8,
                (y * 255 / h) as u8,
                ((x * y) % 251) as u8,
                a,
            ]);
        }
    }
    p
}

/// What Binomial's `.basis` transcoder makes of every level, the reference
/// the KTX2 path must match byte for byte.
fn reference(basis: &[u8], target: basis_universal::TranscoderTextureFormat) -> Vec<Vec<u8>> {
    let mut t = basis_universal::Transcoder::new();
    t.prepare_transcoding(basis).unwrap();
    let levels = t.image_level_count(basis, 0);
    (0..levels)
        .map(|m| {
            let p = basis_universal::TranscodeParameters {
                image_index: 0,
                level_index: m,
                decode_flags: Some(basis_universal::DecodeFlags::HIGH_QUALITY),
                ..Default::default()
            };
            t.transcode_image_level(basis, target, p).unwrap()
        })
        .collect()
}

#[test]
fn basis_uastc_ktx2_plain_and_zstd_transcodes_to_bc7() {
    use basis_universal::TranscoderTextureFormat as T;
    let (w, h) = (64, 32);
    for alpha in [false, true] {
        let basis = encode_basis(&picture(w, h, alpha), w, h, true, true);
        let want = reference(&basis, T::BC7_RGBA);
        assert_eq!(want.len(), full_mip_count(w, h) as usize);
        for (zstd, kind) in [
            (None, TextureSourceKind::BasisUastc),
            (Some(5), TextureSourceKind::BasisUastcZstd),
        ] {
            let ktx = basis_to_ktx2(&basis, w, h, true, zstd);
            let (t, src) = load_texture(Path::new("u.ktx2"), &ktx, ImageOptions::default())
                .unwrap()
                .unwrap();
            assert_eq!(
                (t.format, t.width, t.height),
                (TextureFormat::Bc7Srgb, w, h)
            );
            assert_eq!(src.kind, kind);
            assert_eq!(t.mips, want, "alpha {alpha}, zstd {zstd:?}");
        }
    }
}

#[test]
fn basis_etc1s_ktx2_transcodes_to_bc7_or_to_bc1_when_asked_and_opaque() {
    use basis_universal::TranscoderTextureFormat as T;
    let (w, h) = (64, 64);
    let bc1 = ImageOptions {
        format: TextureFormat::Bc1,
        srgb: true,
    };
    for alpha in [false, true] {
        let basis = encode_basis(&picture(w, h, alpha), w, h, false, true);
        let ktx = basis_to_ktx2(&basis, w, h, true, None);
        let (t, src) = load_texture(Path::new("e.ktx2"), &ktx, ImageOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(src.kind, TextureSourceKind::BasisEtc1s);
        assert_eq!(t.format, TextureFormat::Bc7Srgb);
        assert_eq!(t.mips, reference(&basis, T::BC7_RGBA), "alpha {alpha}");
        let (t, _) = load_texture(Path::new("e.ktx2"), &ktx, bc1)
            .unwrap()
            .unwrap();
        if alpha {
            assert_eq!(t.format, TextureFormat::Bc7Srgb, "alpha keeps BC7");
        } else {
            assert_eq!(t.format, TextureFormat::Bc1Srgb);
            assert_eq!(t.mips, reference(&basis, T::BC1_RGB));
        }
    }
}

#[test]
fn damaged_basis_ktx2_files_fail_cleanly_by_name() {
    let (w, h) = (32, 32);
    for uastc in [true, false] {
        let basis = encode_basis(&picture(w, h, true), w, h, uastc, false);
        let good = basis_to_ktx2(&basis, w, h, false, None);
        assert!(load_texture(Path::new("ok.ktx2"), &good, ImageOptions::default()).is_ok());
        for len in (0..good.len()).step_by(7) {
            match load_texture(Path::new("cut.ktx2"), &good[..len], ImageOptions::default()) {
                Err(e) => assert!(e.to_string().starts_with("cut.ktx2: "), "{e}"),
                Ok(_) => panic!("uastc {uastc}: a {len}-byte prefix was accepted"),
            }
        }
        // Flipped bytes across the file: an error or a texture, never a crash.
        for i in (0..good.len()).step_by(3) {
            let mut b = good.clone();
            b[i] ^= 0x5a;
            if let Err(e) = load_texture(Path::new("m.ktx2"), &b, ImageOptions::default()) {
                assert!(e.to_string().starts_with("m.ktx2: "), "{e}");
            }
        }
    }
}

#[test]
fn info_shows_each_textures_source_and_old_packs_still_open() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    let (w, h) = (64, 64);
    let img = image::RgbaImage::from_raw(w, h, picture(w, h, false)).unwrap();
    img.save(inputs.join("a.png")).unwrap();
    let f = TextureFormat::Bc1;
    let mips = chain(f, w, h, full_mip_count(w, h));
    std::fs::write(
        inputs.join("b.dds"),
        dds(
            Pf::FourCC(b"DXT1"),
            None,
            w,
            h,
            mips.len() as u32,
            0,
            &mips.concat(),
        ),
    )
    .unwrap();
    std::fs::write(inputs.join("c.ktx2"), write_ktx2(f, w, h, &mips)).unwrap();
    std::fs::write(inputs.join("d.ktx2"), zstd_ktx2(f, w, h, &mips)).unwrap();
    let basis = encode_basis(&picture(w, h, false), w, h, true, false);
    std::fs::write(
        inputs.join("e.ktx2"),
        basis_to_ktx2(&basis, w, h, false, None),
    )
    .unwrap();
    let basis = encode_basis(&picture(w, h, false), w, h, false, false);
    std::fs::write(
        inputs.join("f.ktx2"),
        basis_to_ktx2(&basis, w, h, false, None),
    )
    .unwrap();
    std::fs::write(inputs.join("g.bin"), b"blob").unwrap();
    let pack = dir.path().join("p.gspk");
    let p = pack.to_str().unwrap();
    gpustream(&["pack", inputs.to_str().unwrap(), "-o", p]);

    let json: serde_json::Value =
        serde_json::from_slice(&gpustream(&["info", p, "--json"]).stdout).unwrap();
    let sources: Vec<(String, Option<String>)> = json["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_owned(),
                a["source"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let want = [
        ("a.png", Some("png")),
        ("b.dds", Some("dds")),
        ("c.ktx2", Some("ktx2")),
        ("d.ktx2", Some("ktx2+zstd")),
        ("e.ktx2", Some("basis-uastc")),
        ("f.ktx2", Some("basis-etc1s")),
        ("g.bin", None),
    ];
    let want: Vec<(String, Option<String>)> = want
        .iter()
        .map(|(n, s)| (n.to_string(), s.map(str::to_owned)))
        .collect();
    assert_eq!(sources, want);
    assert!(
        json["assets"][0]["transcode_ms"].as_f64().unwrap() > 0.0,
        "PNG encoding takes time"
    );
    let text = String::from_utf8(gpustream(&["info", p]).stdout).unwrap();
    assert!(
        text.contains("from basis-etc1s, ") && text.contains("textures by source"),
        "{text}"
    );

    // A pack written without sources (as every pack before them) opens,
    // and says nothing about where its textures came from.
    let old = dir.path().join("old.gspk");
    let mut wr = writer(&old, Codec::Lz4);
    let id = wr.add_texture("t", f, w, h, &mips).unwrap();
    wr.finish().unwrap();
    let pack = Pack::open(&old).unwrap();
    assert_eq!(pack.texture_source(id), None);
    let json: serde_json::Value =
        serde_json::from_slice(&gpustream(&["info", old.to_str().unwrap(), "--json"]).stdout)
            .unwrap();
    assert!(json["assets"][0].get("source").is_none());
}

#[test]
fn a_pack_with_an_unknown_source_kind_or_a_blob_with_one_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.gspk");
    let mut wr = writer(&path, Codec::None);
    wr.add_blob("b", b"x").unwrap();
    wr.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    // The asset entry follows the one block entry at the TOC's start.
    let toc = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
    let entry = toc + 16;
    for (at, v) in [(11, 1u8), (36, 1)] {
        let mut b = bytes.clone();
        b[entry + at] = v;
        let crc = crc32c::crc32c(&b[toc..]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        let crc = crc32c::crc32c(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        let e = Pack::from_bytes("p.gspk", &b).unwrap_err();
        assert!(matches!(e, PackError::Corrupt { .. }), "{e:?}");
    }
}

/// Writes the fuzz seeds for `dds_reader` and the zstd and Basis seeds of
/// `ktx2_reader` (small files, all made here):
/// `cargo test --release --test texture_sources -- --ignored write_fuzz_seeds`
#[test]
#[ignore = "a tool: rewrites the checked-in fuzz seeds under fuzz/seeds/"]
fn write_fuzz_seeds() {
    let seeds = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("fuzz/seeds");
    let d = seeds.join("dds_reader");
    std::fs::create_dir_all(&d).unwrap();
    let (w, h) = (16, 8);
    let levels = full_mip_count(w, h);
    let f = |f: TextureFormat| chain(f, w, h, levels).concat();
    let files = [
        (
            "dxt1-16x8.dds",
            dds(
                Pf::FourCC(b"DXT1"),
                None,
                w,
                h,
                levels.into(),
                0,
                &f(TextureFormat::Bc1),
            ),
        ),
        (
            "dxt5-16x8.dds",
            dds(
                Pf::FourCC(b"DXT5"),
                None,
                w,
                h,
                levels.into(),
                0,
                &f(TextureFormat::Bc3),
            ),
        ),
        (
            "ati2-16x8.dds",
            dds(
                Pf::FourCC(b"ATI2"),
                None,
                w,
                h,
                levels.into(),
                0,
                &f(TextureFormat::Bc5),
            ),
        ),
        (
            "rgba8-16x8.dds",
            dds(
                Pf::Rgba8,
                None,
                w,
                h,
                levels.into(),
                0,
                &f(TextureFormat::Rgba8Unorm),
            ),
        ),
        (
            "dx10-bc7srgb-16x8.dds",
            dds(
                Pf::Rgba8,
                Some((99, 0, 1)),
                w,
                h,
                levels.into(),
                0,
                &f(TextureFormat::Bc7Srgb),
            ),
        ),
        (
            "dx10-bc4-16x8-1mip.dds",
            dds(
                Pf::Rgba8,
                Some((80, 0, 1)),
                w,
                h,
                1,
                0,
                &chain(TextureFormat::Bc4, w, h, 1).concat(),
            ),
        ),
        (
            "dx10-array2.dds",
            dds(Pf::Rgba8, Some((71, 0, 2)), 4, 4, 1, 0, &[0; 16]),
        ),
    ];
    for (name, bytes) in files {
        std::fs::write(d.join(name), bytes).unwrap();
    }
    let k = seeds.join("ktx2_reader");
    let mips = chain(TextureFormat::Bc1, w, h, levels);
    std::fs::write(
        k.join("bc1-16x8-zstd.ktx2"),
        zstd_ktx2(TextureFormat::Bc1, w, h, &mips),
    )
    .unwrap();
    let (w, h) = (16, 16);
    for (uastc, alpha, zstd, name) in [
        (true, false, None, "uastc-16.ktx2"),
        (true, true, Some(3), "uastc-rgba-16-zstd.ktx2"),
        (false, false, None, "etc1s-16.ktx2"),
        (false, true, None, "etc1s-rgba-16.ktx2"),
    ] {
        let basis = encode_basis(&picture(w, h, alpha), w, h, uastc, false);
        std::fs::write(k.join(name), basis_to_ktx2(&basis, w, h, false, zstd)).unwrap();
    }
}

/// The images in assets/ converted to each source kind, packed with lz4
/// and with zstd: pack time and ratio per kind (docs/results.md):
/// `cargo test --release --test texture_sources -- --ignored --nocapture measure_source_kinds`
#[test]
#[ignore = "a measurement for docs/results.md, not a check: pack times on a shared machine"]
fn measure_source_kinds() {
    use gpustream_tools::import::{decode_image, encode_texture};
    use std::time::Instant;
    let assets = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("assets");
    let dir = tempfile::tempdir().unwrap();
    let kinds = [
        "png",
        "dds",
        "ktx2",
        "ktx2+zstd",
        "basis-uastc",
        "basis-uastc+zstd",
        "basis-etc1s",
    ];
    let mut names: Vec<_> = std::fs::read_dir(&assets)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("png" | "jpg")))
        .collect();
    names.sort();
    let opts = ImageOptions {
        format: TextureFormat::Bc7,
        srgb: false,
    };
    let mut convert_s = vec![0f64; kinds.len()];
    for (k, kind) in kinds.iter().enumerate() {
        let out = dir.path().join(kind.replace('+', "_"));
        std::fs::create_dir(&out).unwrap();
        for p in &names {
            let bytes = std::fs::read(p).unwrap();
            let stem = p.file_stem().unwrap().to_str().unwrap();
            let t0 = Instant::now();
            if *kind == "png" {
                std::fs::write(out.join(p.file_name().unwrap()), &bytes).unwrap();
                continue;
            }
            let img = decode_image(p, &bytes).unwrap();
            let (w, h) = (img.width, img.height);
            let (file, data) = match *kind {
                "dds" | "ktx2" | "ktx2+zstd" => {
                    let t = encode_texture(&img, opts);
                    match *kind {
                        "dds" => (
                            "dds",
                            gpustream_tools::dds::write_dds(t.format, w, h, &t.mips).unwrap(),
                        ),
                        "ktx2" => ("ktx2", write_ktx2(t.format, w, h, &t.mips)),
                        _ => ("ktx2", zstd_ktx2(t.format, w, h, &t.mips)),
                    }
                }
                _ => {
                    let uastc = kind.starts_with("basis-uastc");
                    let zstd = kind.ends_with("+zstd").then_some(3);
                    let basis = encode_basis(&img.pixels, w, h, uastc, false);
                    ("ktx2", basis_to_ktx2(&basis, w, h, false, zstd))
                }
            };
            convert_s[k] += t0.elapsed().as_secs_f64();
            std::fs::write(out.join(format!("{stem}.{file}")), data).unwrap();
        }
    }
    println!("| source kind | input bytes | conversion before packing (s) | codec | pack time (ms) | of which converting (ms) | texture bytes | stored bytes | ratio |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (k, kind) in kinds.iter().enumerate() {
        let src = dir.path().join(kind.replace('+', "_"));
        let mut files: Vec<_> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let input: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
        for codec in [Codec::Lz4, Codec::Zstd] {
            // Best of 3: the machine is shared.
            let mut best = (f64::MAX, 0u64, 0u64, 0u64);
            for _ in 0..3 {
                let out = dir.path().join("p.gspk");
                let t0 = Instant::now();
                let mut wr =
                    PackWriter::create(&out, WriterOptions::default().with_codec(codec)).unwrap();
                for f in &files {
                    add_file(&mut wr, f.file_name().unwrap().to_str().unwrap(), f, opts).unwrap();
                }
                let s = wr.finish().unwrap();
                let ms = t0.elapsed().as_secs_f64() * 1000.0;
                let pack = Pack::open(&out).unwrap();
                let conv: u64 = (0..pack.assets().len() as u32)
                    .filter_map(|i| pack.texture_source(gpustream::pack::AssetId(i)))
                    .map(|s| u64::from(s.transcode_us))
                    .sum();
                if ms < best.0 {
                    best = (ms, conv, s.uncompressed, s.stored);
                }
            }
            println!(
                "| {kind} | {input} | {:.2} | {} | {:.0} | {:.0} | {} | {} | {:.3} |",
                convert_s[k],
                codec.name(),
                best.0,
                best.1 as f64 / 1000.0,
                best.2,
                best.3,
                best.2 as f64 / best.3 as f64
            );
        }
    }
}
