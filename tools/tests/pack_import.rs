//! Images, KTX2 and blobs through the packer, the CLI commands, and the
//! demo pack.

use gpustream::pack::{AssetKind, Pack, PackError, PackWriter, TextureFormat, WriterOptions};
use gpustream::Codec;
use gpustream_tools::demo::{ensure_demo_pack, DemoConfig, MANIFEST_ASSET};
use gpustream_tools::import::{add_file, decode_image, encode_texture, ImageOptions};
use gpustream_tools::ktx2::{read_ktx2, write_ktx2};
use std::path::Path;
use std::process::Command;

fn test_image(w: u32, h: u32, alpha: bool) -> image::RgbaImage {
    image::RgbaImage::from_fn(w, h, |x, y| {
        let a = if alpha && (x / 8 + y / 8) % 2 == 0 {
            0
        } else {
            255
        };
        image::Rgba([
            (x * 7 % 256) as u8,
            (y * 3 % 256) as u8,
            ((x ^ y) % 256) as u8,
            a,
        ])
    })
}

fn writer(path: &Path) -> PackWriter {
    PackWriter::create(
        path,
        WriterOptions::default()
            .with_codec(Codec::Lz4)
            .with_level(0)
            .with_threads(2),
    )
    .unwrap()
}

#[test]
fn png_and_jpeg_become_tiled_bc_textures() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("checker.png");
    // 601x300: padded to 604x300 for 4x4 blocks; mip 0 of BC7 is 3x2 tiles.
    test_image(601, 300, true).save(&png).unwrap();
    let jpg = dir.path().join("photo.jpg");
    image::DynamicImage::ImageRgba8(test_image(256, 128, false))
        .to_rgb8()
        .save(&jpg)
        .unwrap();
    let path = dir.path().join("img.gspk");
    let mut w = writer(&path);
    let opts = ImageOptions {
        format: TextureFormat::Bc7,
        srgb: true,
    };
    add_file(&mut w, "checker", &png, opts).unwrap();
    add_file(
        &mut w,
        "photo",
        &jpg,
        ImageOptions {
            format: TextureFormat::Bc1,
            srgb: false,
        },
    )
    .unwrap();
    w.finish().unwrap();

    let pack = Pack::open(&path).unwrap();
    let id = pack.find("checker").unwrap();
    let info = pack.asset(id).texture.unwrap();
    assert_eq!(
        (info.format, info.width, info.height, info.mip_count),
        (TextureFormat::Bc7Srgb, 604, 300, 10)
    );
    assert_eq!(pack.tile_grid(id, 0).unwrap(), Some((3, 2)));
    // The pack holds exactly what the encoder produced.
    let img = decode_image(&png, &std::fs::read(&png).unwrap()).unwrap();
    let expected = encode_texture(&img, opts);
    assert_eq!(pack.read_texture_mips(id).unwrap(), expected.mips);

    let photo = pack.asset(pack.find("photo").unwrap()).texture.unwrap();
    assert_eq!(
        (photo.format, photo.width, photo.height, photo.mip_count),
        (TextureFormat::Bc1, 256, 128, 9)
    );
}

#[test]
fn ktx2_is_taken_as_is_and_unpack_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let img = decode_image(Path::new("x.png"), &{
        let mut v = Vec::new();
        test_image(300, 200, false)
            .write_to(&mut std::io::Cursor::new(&mut v), image::ImageFormat::Png)
            .unwrap();
        v
    })
    .unwrap();
    for format in [
        TextureFormat::Bc7Srgb,
        TextureFormat::Bc1,
        TextureFormat::Bc5,
        TextureFormat::Rgba8Unorm,
    ] {
        let t = encode_texture(
            &img,
            ImageOptions {
                format,
                srgb: format.is_srgb(),
            },
        );
        // Drop the two smallest mips: a KTX2 file may hold a partial chain.
        let mips = &t.mips[..t.mips.len() - 2];
        let ktx = dir.path().join(format!("{format}.ktx2"));
        std::fs::write(&ktx, write_ktx2(t.format, t.width, t.height, mips)).unwrap();
        let path = dir.path().join(format!("{format}.gspk"));
        let mut w = writer(&path);
        add_file(&mut w, "tex", &ktx, ImageOptions::default()).unwrap();
        w.finish().unwrap();
        let pack = Pack::open(&path).unwrap();
        let id = pack.find("tex").unwrap();
        let info = pack.asset(id).texture.unwrap();
        assert_eq!(
            (
                info.format,
                info.width,
                info.height,
                info.mip_count as usize
            ),
            (t.format, t.width, t.height, mips.len())
        );
        let back = pack.read_texture_mips(id).unwrap();
        assert_eq!(back, mips);
        // unpack writes KTX2 that reads back to the same levels.
        let again = write_ktx2(info.format, info.width, info.height, &back);
        let parsed = read_ktx2(Path::new("again.ktx2"), &again).unwrap();
        assert_eq!(parsed.mips, mips);
        assert_eq!(std::fs::read(&ktx).unwrap(), again);
    }
}

#[test]
fn bad_inputs_name_the_file_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(&dir.path().join("bad.gspk"));
    let broken = dir.path().join("broken.png");
    std::fs::write(&broken, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let e = add_file(&mut w, "broken", &broken, ImageOptions::default()).unwrap_err();
    assert!(matches!(e, PackError::Import { .. }), "{e:?}");
    assert!(e.to_string().contains("broken.png"), "{e}");

    let odd = dir.path().join("odd.ktx2");
    let mut ktx = write_ktx2(TextureFormat::Rgba8Unorm, 4, 4, &[vec![0u8; 64]]);
    ktx[12..16].copy_from_slice(&100u32.to_le_bytes()); // an ASTC-range VkFormat
    std::fs::write(&odd, &ktx).unwrap();
    let e = add_file(&mut w, "odd", &odd, ImageOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("odd.ktx2") && e.to_string().contains("not supported"),
        "{e}"
    );

    let short = dir.path().join("short.ktx2");
    let ktx = write_ktx2(TextureFormat::Bc7, 8, 8, &[vec![0u8; 64]]);
    std::fs::write(&short, &ktx[..ktx.len() - 1]).unwrap();
    assert!(add_file(&mut w, "short", &short, ImageOptions::default()).is_err());

    let missing = dir.path().join("missing.bin");
    let e = add_file(&mut w, "missing", &missing, ImageOptions::default()).unwrap_err();
    assert!(e.to_string().contains("missing.bin"), "{e}");
}

fn gpustream(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpustream"))
        .args(args)
        .output()
        .unwrap()
}

/// A folder `in/` under `d` holding `wall.png` (512x512) and a 800,000-byte
/// blob at `blob_name`; returns the folder and the blob's bytes.
fn cli_inputs(d: &Path, blob_name: &str) -> (std::path::PathBuf, Vec<u8>) {
    let inputs = d.join("in");
    let blob_path = inputs.join(blob_name);
    std::fs::create_dir_all(blob_path.parent().unwrap()).unwrap();
    test_image(512, 512, false)
        .save(inputs.join("wall.png"))
        .unwrap();
    let blob: Vec<u8> = (0..200_000u32)
        .flat_map(|i| (i % 1000).to_le_bytes())
        .collect();
    std::fs::write(&blob_path, &blob).unwrap();
    (inputs, blob)
}

/// `gpustream verify` passes on `pack`, and `unpack` of blob `name` into
/// `out` gives `want`.
fn verify_and_unpack(pack: &Path, name: &str, out: &Path, want: &[u8]) {
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let v = gpustream(&["verify", &s(pack)]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    let u = gpustream(&["unpack", &s(pack), name, "-o", &s(out)]);
    assert!(u.status.success(), "{}", String::from_utf8_lossy(&u.stderr));
    assert_eq!(std::fs::read(out).unwrap(), want);
}

#[test]
fn cli_pack_info_verify_unpack() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (inputs, blob) = cli_inputs(d, "sub/data.bin");
    let pack = d.join("out.gspk");
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let out = gpustream(&[
        "pack",
        &s(&inputs),
        "-o",
        &s(&pack),
        "--codec",
        "zstd",
        "--level",
        "3",
        "--texture-format",
        "bc1",
        "--srgb",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = gpustream(&["info", &s(&pack), "--json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = json["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sub/data.bin", "wall.png"]);
    assert_eq!(json["assets"][1]["format"], "bc1-srgb");
    assert!(json["by_codec"]["zstd"]["ratio"].as_f64().unwrap() > 1.0);
    assert!(json["total"]["ratio"].as_f64().unwrap() > 1.0);
    let text = gpustream(&["info", &s(&pack)]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("overall"));

    verify_and_unpack(&pack, "sub/data.bin", &d.join("data.out"), &blob);
    let out = gpustream(&[
        "unpack",
        &s(&pack),
        "wall.png",
        "-o",
        &s(&d.join("wall.ktx2")),
    ]);
    assert!(out.status.success());
    let ktx = read_ktx2(
        Path::new("wall.ktx2"),
        &std::fs::read(d.join("wall.ktx2")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (ktx.format, ktx.width, ktx.mips.len()),
        (TextureFormat::Bc1Srgb, 512, 10)
    );
    let out = gpustream(&["unpack", &s(&pack), "nope", "-o", &s(&d.join("x"))]);
    assert!(!out.status.success());

    // Damage two blocks: verify lists both and fails.
    let p = Pack::open(&pack).unwrap();
    let mut bytes = std::fs::read(&pack).unwrap();
    let last = p.blocks().len() - 1;
    for b in [0, last] {
        bytes[p.blocks()[b].offset as usize] ^= 0xff;
    }
    std::fs::write(&pack, &bytes).unwrap();
    let out = gpustream(&["verify", &s(&pack)]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("BAD")).count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("asset 'sub/data.bin' chunk 0"), "{stdout}");
    assert!(
        stdout.contains("asset 'wall.png' mip 0 tile (0,1)"),
        "{stdout}"
    );

    // An unreadable image fails the pack command and names the file.
    std::fs::write(inputs.join("bad.jpg"), b"\xff\xd8\xff\xe0 nope").unwrap();
    let out = gpustream(&["pack", &s(&inputs), "-o", &s(&d.join("x.gspk"))]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.jpg"));
}

#[test]
fn demo_pack_is_deterministic_realistic_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let config = DemoConfig {
        size_bytes: 12 << 20,
        ..DemoConfig::default()
    };
    let a = ensure_demo_pack(dir.path().join("a.gspk"), config, false).unwrap();
    let b = ensure_demo_pack(dir.path().join("b.gspk"), config, false).unwrap();
    let bytes = std::fs::read(&a).unwrap();
    assert!(bytes == std::fs::read(&b).unwrap(), "two builds differ");

    let pack = Pack::open(&a).unwrap();
    let data: u64 = pack
        .assets()
        .iter()
        .filter(|x| x.name != MANIFEST_ASSET)
        .map(|x| x.size)
        .sum();
    assert_eq!(data, config.size_bytes);
    let formats: Vec<TextureFormat> = pack
        .assets()
        .iter()
        .filter_map(|x| x.texture.map(|t| t.format))
        .collect();
    assert!(
        formats.contains(&TextureFormat::Bc7Srgb) && formats.contains(&TextureFormat::Bc1Srgb),
        "{formats:?}"
    );
    assert!(pack
        .assets()
        .iter()
        .any(|x| x.kind == AssetKind::Blob && x.name.starts_with("meshes/")));
    assert!(pack.verify(|_| {}).unwrap().is_empty());
    // LZ4 on real BCn data: somewhere in the usual 1.1..2.0 range.
    let (mut size, mut stored) = (0u64, 0u64);
    for x in pack.assets().iter().filter(|x| x.texture.is_some()) {
        for b in &pack.blocks()[x.blocks.start as usize..x.blocks.end as usize] {
            size += b.size as u64;
            stored += b.stored_size as u64;
        }
    }
    let ratio = size as f64 / stored as f64;
    assert!((1.1..2.0).contains(&ratio), "texture LZ4 ratio {ratio}");

    // Reused: a second call leaves the file alone.
    let before = std::fs::metadata(&a).unwrap().modified().unwrap();
    ensure_demo_pack(&a, config, false).unwrap();
    assert_eq!(std::fs::metadata(&a).unwrap().modified().unwrap(), before);
    // A different config, or a damaged file, is rebuilt.
    let other = DemoConfig { seed: 2, ..config };
    ensure_demo_pack(&a, other, false).unwrap();
    assert!(std::fs::read(&a).unwrap() != bytes);
    std::fs::write(&b, &bytes[..bytes.len() / 2]).unwrap();
    ensure_demo_pack(&b, config, false).unwrap();
    assert!(std::fs::read(&b).unwrap() == bytes);
}

/// `pack --sub-block-kib 16`: the pack says how many blocks it cut into
/// how many sub-blocks, verifies, and unpacks to the same bytes.
#[test]
fn cli_pack_with_sub_blocks_reports_verifies_and_unpacks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (inputs, blob) = cli_inputs(d, "data.bin");
    let pack = d.join("sub.gspk");
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let out = gpustream(&[
        "pack",
        &s(&inputs),
        "-o",
        &s(&pack),
        "--codec",
        "lz4",
        "--sub-block-kib",
        "16",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gpustream(&["info", &s(&pack), "--json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cut = json["total"]["cut_blocks"].as_u64().unwrap();
    let subs = json["total"]["sub_blocks"].as_u64().unwrap();
    assert!(cut > 0, "some LZ4 blocks are cut: {json}");
    assert!(subs >= 2 * cut, "a cut block holds 2 or more sub-blocks");
    let text = String::from_utf8(gpustream(&["info", &s(&pack)]).stdout).unwrap();
    assert!(
        text.contains(&format!(
            "{cut} LZ4 blocks stored as {subs} independent sub-blocks"
        )),
        "{text}"
    );
    verify_and_unpack(&pack, "data.bin", &d.join("data.out"), &blob);
}
