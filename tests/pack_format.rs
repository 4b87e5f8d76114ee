//! The pack format end to end: writer -> file -> untrusted reader, and the
//! reader against damaged files.

use gpustream::pack::format::{self, ASSET_ENTRY_LEN, BLOCK_ENTRY_LEN, HEADER_LEN};
use gpustream::pack::{
    full_mip_count, AssetKind, BlockId, BlockTransform, Pack, PackError, PackWriter, TextureFormat,
    WriterOptions, TILE_BYTES,
};
use gpustream::{Codec, CodecError};
use rand::{Rng, SeedableRng};
use std::path::Path;

/// Bytes that compress somewhat, like real assets: runs and repeats mixed
/// with noise.
fn sample(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        match rng.gen_range(0..3) {
            0 => {
                let b: u8 = rng.gen();
                let n = rng.gen_range(1..40);
                v.extend(std::iter::repeat_n(b, n));
            }
            1 if v.len() > 64 => {
                let start = rng.gen_range(0..v.len() - 32);
                let n = rng.gen_range(4..32);
                let copy: Vec<u8> = v[start..start + n].to_vec();
                v.extend(copy);
            }
            _ => {
                let n = rng.gen_range(1..16);
                v.extend((0..n).map(|_| rng.gen::<u8>()));
            }
        }
    }
    v.truncate(len);
    v
}

fn opts(codec: Codec) -> WriterOptions {
    WriterOptions::default()
        .with_codec(codec)
        .with_level(3)
        .with_threads(2)
}

fn mip_chain(format: TextureFormat, w: u32, h: u32, mips: u8, seed: u64) -> Vec<Vec<u8>> {
    (0..mips)
        .map(|m| {
            let (mw, mh) = gpustream::pack::mip_extent(w, h, m);
            sample(format.data_size(mw, mh) as usize, seed + m as u64)
        })
        .collect()
}

/// A small pack: a 100-byte blob and an 8x8 BC1 texture with 4 mips.
fn small_pack(dir: &Path) -> Vec<u8> {
    let path = dir.join("small.gspk");
    let mut w = PackWriter::create(&path, opts(Codec::Lz4)).unwrap();
    w.add_blob("notes.txt", &sample(100, 1)).unwrap();
    let mips = mip_chain(TextureFormat::Bc1, 8, 8, 4, 2);
    w.add_texture("tiny", TextureFormat::Bc1, 8, 8, &mips)
        .unwrap();
    w.finish().unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn blobs_round_trip_with_every_codec_at_edge_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [0usize, 1, 65535, 65536, 65537, 3 * 1024 * 1024 + 7];
    for codec in Codec::ALL {
        let path = dir.path().join(format!("blobs-{codec}.gspk"));
        let mut w = PackWriter::create(&path, opts(codec)).unwrap();
        for (i, &len) in sizes.iter().enumerate() {
            w.add_blob(&format!("blob-{len}"), &sample(len, i as u64))
                .unwrap();
        }
        let summary = w.finish().unwrap();
        let pack = Pack::open(&path).unwrap();
        assert_eq!(pack.file_len(), summary.file_len);
        assert_eq!(pack.data_offset(), 4096);
        assert_eq!(pack.assets().len(), sizes.len());
        for (i, &len) in sizes.iter().enumerate() {
            let id = pack.find(&format!("blob-{len}")).unwrap();
            let asset = pack.asset(id);
            assert_eq!(asset.kind, AssetKind::Blob);
            assert_eq!(asset.size, len as u64);
            assert_eq!(asset.block_count() as usize, len.div_ceil(TILE_BYTES));
            for (k, b) in pack.blocks()[asset.blocks.start as usize..asset.blocks.end as usize]
                .iter()
                .enumerate()
            {
                assert_eq!(b.asset, id);
                assert_eq!(b.size as usize, (len - k * TILE_BYTES).min(TILE_BYTES));
                // Compressible data gets the codec; none stays none.
                if codec == Codec::None {
                    assert_eq!(b.codec, Codec::None);
                }
            }
            assert_eq!(
                pack.read_blob(id).unwrap(),
                sample(len, i as u64),
                "{codec} {len}"
            );
        }
        if codec != Codec::None {
            assert!(
                pack.blocks().iter().any(|b| b.codec == codec),
                "{codec}: no block kept its codec"
            );
        }
        // Blocks are contiguous from the data offset, in file order.
        let mut at = pack.data_offset();
        for b in pack.blocks() {
            assert_eq!(b.offset, at);
            at += b.stored_size as u64;
        }
        assert!(pack.verify(|_| {}).unwrap().is_empty());
    }
}

#[test]
fn incompressible_blocks_are_stored_raw() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noise.gspk");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let noise: Vec<u8> = (0..200_000).map(|_| rng.gen()).collect();
    let mut w = PackWriter::create(&path, opts(Codec::Lz4)).unwrap();
    w.add_blob("noise", &noise).unwrap();
    w.finish().unwrap();
    let pack = Pack::open(&path).unwrap();
    assert!(pack.blocks().iter().all(|b| b.codec == Codec::None));
    assert_eq!(pack.read_blob(pack.find("noise").unwrap()).unwrap(), noise);
}

#[test]
fn textures_round_trip_in_every_format_and_codec() {
    let dir = tempfile::tempdir().unwrap();
    for format in TextureFormat::ALL {
        for codec in Codec::ALL {
            // Not a multiple of the tile size, so edge tiles are clipped.
            let (w, h) = if format.is_compressed() {
                (1000, 600)
            } else {
                (300, 200)
            };
            let mips = full_mip_count(w, h);
            let data = mip_chain(format, w, h, mips, 100 + format.id() as u64);
            let path = dir.path().join(format!("tex-{format}-{codec}.gspk"));
            let mut wr = PackWriter::create(&path, opts(codec)).unwrap();
            wr.add_texture("t", format, w, h, &data).unwrap();
            wr.finish().unwrap();
            let pack = Pack::open(&path).unwrap();
            let id = pack.find("t").unwrap();
            let info = pack.asset(id).texture.unwrap();
            assert_eq!(
                (info.format, info.width, info.height, info.mip_count),
                (format, w, h, mips)
            );
            assert_eq!(
                pack.read_texture_mips(id).unwrap(),
                data,
                "{format} {codec}"
            );
            // Every tile's region matches its block, and every block is
            // either a tile or part of the packed tail.
            let mut seen = vec![false; pack.blocks().len()];
            for m in 0..mips {
                let Some((tx, ty)) = pack.tile_grid(id, m).unwrap() else {
                    continue;
                };
                for y in 0..ty {
                    for x in 0..tx {
                        let r = pack.tile_region(id, m, x, y).unwrap();
                        assert_eq!(pack.tile(id, m, x, y).unwrap(), r.block);
                        assert_eq!(pack.blocks()[r.block.0 as usize].size, r.size());
                        assert_eq!(
                            pack.describe_block(r.block),
                            format!("asset 't' mip {m} tile ({x},{y})")
                        );
                        assert!(!seen[r.block.0 as usize]);
                        seen[r.block.0 as usize] = true;
                        let (mw, mh) = info.mip_extent(m);
                        assert!(r.x + r.width <= mw && r.y + r.height <= mh);
                    }
                }
            }
            let packed = pack.packed_mips(id).unwrap();
            for b in packed.blocks.clone() {
                assert!(!seen[b as usize]);
                seen[b as usize] = true;
            }
            assert!(
                seen.iter().all(|s| *s),
                "{format}: a block is neither tile nor packed"
            );
            let total: u32 = packed.mips.iter().map(|m| m.size()).sum();
            assert_eq!(total, packed.len);
        }
    }
}

#[test]
fn tile_lookups_reject_what_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = small_pack(dir.path());
    let pack = Pack::from_bytes("small", &bytes).unwrap();
    let blob = pack.find("notes.txt").unwrap();
    let tex = pack.find("tiny").unwrap();
    assert!(matches!(
        pack.tile(blob, 0, 0, 0),
        Err(PackError::Lookup { .. })
    ));
    assert!(matches!(
        pack.packed_mips(blob),
        Err(PackError::Lookup { .. })
    ));
    // The whole 8x8 chain is in the packed tail.
    assert!(matches!(
        pack.tile(tex, 0, 0, 0),
        Err(PackError::Lookup { .. })
    ));
    assert!(matches!(
        pack.tile(tex, 4, 0, 0),
        Err(PackError::Lookup { .. })
    ));
    let packed = pack.packed_mips(tex).unwrap();
    assert_eq!(packed.mips.len(), 4);
    assert_eq!(packed.blocks, 1..2);
    assert_eq!(pack.describe_block(BlockId(0)), "asset 'notes.txt' chunk 0");
    assert!(pack
        .describe_block(BlockId(1))
        .starts_with("asset 'tiny' packed mips 0..=3"));
    assert_eq!(pack.find("missing"), None);

    // A 2048x1024 BC7 texture: mip 0 is 8x4 tiles, mip 1 4x2, mip 2 2x1,
    // mip 3 (256x128 = 32 KiB) starts the packed tail.
    let mips = mip_chain(TextureFormat::Bc7, 2048, 1024, 12, 5);
    let path = dir.path().join("big.gspk");
    let mut w = PackWriter::create(&path, opts(Codec::Lz4)).unwrap();
    w.add_texture("big", TextureFormat::Bc7, 2048, 1024, &mips)
        .unwrap();
    w.finish().unwrap();
    let pack = Pack::open(&path).unwrap();
    let id = pack.find("big").unwrap();
    assert_eq!(pack.tile_grid(id, 0).unwrap(), Some((8, 4)));
    assert_eq!(pack.tile_grid(id, 2).unwrap(), Some((2, 1)));
    assert_eq!(pack.tile_grid(id, 3).unwrap(), None);
    // packed (1 block) + mip 2 (2) + mip 1 (8) then mip 0 row-major.
    assert_eq!(pack.tile(id, 2, 0, 0).unwrap(), BlockId(1));
    assert_eq!(pack.tile(id, 1, 0, 0).unwrap(), BlockId(3));
    assert_eq!(pack.tile(id, 0, 0, 0).unwrap(), BlockId(11));
    assert_eq!(pack.tile(id, 0, 5, 2).unwrap(), BlockId(11 + 2 * 8 + 5));
    let r = pack.tile_region(id, 0, 5, 2).unwrap();
    assert_eq!(
        (r.x, r.y, r.width, r.height, r.bytes_per_row, r.rows),
        (1280, 512, 256, 256, 1024, 64)
    );
    assert!(matches!(
        pack.tile(id, 0, 8, 0),
        Err(PackError::Lookup { .. })
    ));
    assert!(matches!(
        pack.tile(id, 0, 0, 4),
        Err(PackError::Lookup { .. })
    ));
    let p = pack.packed_mips(id).unwrap();
    assert_eq!(p.mips[0].mip, 3);
    assert_eq!(
        (p.mips[0].width, p.mips[0].bytes_per_row, p.mips[0].rows),
        (256, 1024, 32)
    );
}

#[test]
fn same_inputs_give_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mips = mip_chain(TextureFormat::Bc7Srgb, 1024, 512, 11, 7);
    let blob = sample(300_000, 8);
    let mut files = Vec::new();
    for (i, threads) in [1usize, 2, 3].into_iter().enumerate() {
        for codec in [Codec::Lz4, Codec::Zstd] {
            let path = dir.path().join(format!("det-{i}-{codec}.gspk"));
            let mut w = PackWriter::create(
                &path,
                WriterOptions::default()
                    .with_codec(codec)
                    .with_level(5)
                    .with_threads(threads),
            )
            .unwrap();
            w.add_texture("t", TextureFormat::Bc7Srgb, 1024, 512, &mips)
                .unwrap();
            w.add_blob("b", &blob).unwrap();
            w.finish().unwrap();
            files.push((codec, std::fs::read(&path).unwrap()));
        }
    }
    for (codec, bytes) in &files[2..] {
        let first = &files.iter().find(|(c, _)| c == codec).unwrap().1;
        assert!(bytes == first, "{codec} output depends on the thread count");
    }
}

#[test]
fn truncation_at_every_length_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = small_pack(dir.path());
    assert!(Pack::from_bytes("full", &bytes).is_ok());
    for len in 0..bytes.len() {
        let r = Pack::from_bytes("cut", &bytes[..len]);
        assert!(r.is_err(), "truncated to {len} bytes and still opened");
    }
    // Through the file path too, at a few lengths across the regions.
    for len in [0, 10, 63, 64, 4095, 4096, 4100, bytes.len() - 1] {
        let path = dir.path().join("cut.gspk");
        std::fs::write(&path, &bytes[..len]).unwrap();
        let e = Pack::open(&path).unwrap_err();
        assert!(e.to_string().contains("cut.gspk"), "{e}");
    }
}

#[test]
fn flipping_any_header_or_toc_byte_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = small_pack(dir.path());
    let toc_offset =
        u64::from_le_bytes(bytes[format::header::TOC_OFFSET..][..8].try_into().unwrap());
    let regions = (0..HEADER_LEN).chain(toc_offset as usize..bytes.len());
    for i in regions {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= mask;
            assert!(
                Pack::from_bytes("flip", &b).is_err(),
                "flipping byte {i} with {mask:#x} went unnoticed"
            );
        }
    }
}

/// Builds a pack by hand around one blob whose block entry and declared
/// size the test chooses, with valid checksums, so the reader's own checks
/// (not the TOC checksum) must catch the problem.
fn hand_made(stored: &[u8], block_size: u32, codec: Codec, blob_size: u64) -> Vec<u8> {
    hand_made_names(stored, block_size, codec, blob_size, b"mesh")
}

fn hand_made_names(
    stored: &[u8],
    block_size: u32,
    codec: Codec,
    blob_size: u64,
    names: &[u8],
) -> Vec<u8> {
    let mut toc = Vec::new();
    toc.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    toc.extend_from_slice(&block_size.to_le_bytes());
    toc.extend_from_slice(&crc32c::crc32c(stored).to_le_bytes());
    toc.extend_from_slice(&[codec.id(), 0, 0, 0]);
    let mut asset = [0u8; ASSET_ENTRY_LEN];
    asset[4..8].copy_from_slice(&4u32.to_le_bytes()); // name "mesh" at 0
    asset[20..28].copy_from_slice(&blob_size.to_le_bytes());
    asset[32..36].copy_from_slice(&1u32.to_le_bytes());
    toc.extend_from_slice(&asset);
    toc.extend_from_slice(names);
    assert_eq!(toc.len(), BLOCK_ENTRY_LEN + ASSET_ENTRY_LEN + names.len());
    one_block_file(stored, &toc)
}

/// A pack file of one block and one asset: the header, `stored` at offset
/// 4096, then `toc`.
fn one_block_file(stored: &[u8], toc: &[u8]) -> Vec<u8> {
    let mut file = vec![0u8; 4096];
    file.extend_from_slice(stored);
    let toc_offset = file.len() as u64;
    file.extend_from_slice(toc);
    let header = format::encode_header(
        4096,
        stored.len() as u64,
        toc_offset,
        toc.len() as u64,
        1,
        1,
        crc32c::crc32c(toc),
    );
    file[..HEADER_LEN].copy_from_slice(&header);
    file
}

#[test]
fn hand_made_pack_is_accepted_when_consistent() {
    let data = sample(1000, 3);
    let stored = Codec::Lz4.compress(&data, 0).unwrap();
    let bytes = hand_made(&stored, 1000, Codec::Lz4, 1000);
    let pack = Pack::from_bytes("hand", &bytes).unwrap();
    let mut out = vec![0u8; 1000];
    pack.check_block(BlockId(0), &stored, &mut out).unwrap();
    assert_eq!(out, data);
}

#[test]
fn names_must_fill_the_name_table_exactly() {
    let data = sample(1000, 3);
    let stored = Codec::Lz4.compress(&data, 0).unwrap();
    let e = Pack::from_bytes(
        "names",
        &hand_made_names(&stored, 1000, Codec::Lz4, 1000, b"meshX"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("name table"), "{e}");
    let e = Pack::from_bytes(
        "names",
        &hand_made_names(&stored, 1000, Codec::Lz4, 1000, b"me\xffh"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("UTF-8"), "{e}");
}

#[test]
fn a_declared_size_of_4_gib_is_rejected() {
    let data = sample(1000, 3);
    let stored = Codec::Lz4.compress(&data, 0).unwrap();
    let e = Pack::from_bytes("huge", &hand_made(&stored, 1000, Codec::Lz4, 4 << 30)).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, PackError::Corrupt { .. }), "{e:?}");
    assert!(
        msg.contains("asset 'mesh'") && msg.contains("4294967296"),
        "{msg}"
    );
    // A block claiming 4 GiB - 1 of uncompressed data.
    let e = Pack::from_bytes("huge", &hand_made(&stored, u32::MAX, Codec::Lz4, 1000)).unwrap_err();
    assert!(e.to_string().contains("block 0 of asset 'mesh'"), "{e}");
    assert!(e.to_string().contains("offset 4"), "{e}");
    // A stored size beyond the codec's bound.
    let e =
        Pack::from_bytes("huge", &hand_made(&[0u8; 1001], 1000, Codec::None, 1000)).unwrap_err();
    assert!(e.to_string().contains("stored size"), "{e}");
}

#[test]
fn streams_of_the_wrong_length_are_typed_errors() {
    for codec in [Codec::Lz4, Codec::Zstd] {
        for actual in [999usize, 1001] {
            let stored = codec.compress(&sample(actual, 4), 3).unwrap();
            let bytes = hand_made(&stored, 1000, codec, 1000);
            let pack = Pack::from_bytes("len", &bytes).unwrap();
            let mut out = vec![0u8; 1000];
            let e = pack.check_block(BlockId(0), &stored, &mut out).unwrap_err();
            match &e {
                PackError::BlockDecode {
                    at,
                    block,
                    offset,
                    source,
                } => {
                    assert_eq!(at, "asset 'mesh' chunk 0");
                    assert_eq!((*block, *offset), (0, 4096));
                    if actual < 1000 {
                        assert!(
                            matches!(source, CodecError::WrongLength { got: 999, .. }),
                            "{codec}: {source:?}"
                        );
                    }
                }
                other => panic!("{codec} {actual}: {other:?}"),
            }
        }
    }
}

#[test]
fn checksum_mismatches_are_all_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.gspk");
    let mut w = PackWriter::create(&path, opts(Codec::Lz4)).unwrap();
    w.add_blob("mesh", &sample(5 * 65536, 11)).unwrap();
    w.finish().unwrap();
    let pack = Pack::open(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    for b in [1usize, 3] {
        bytes[pack.blocks()[b].offset as usize + 5] ^= 0x40;
    }
    std::fs::write(&path, &bytes).unwrap();
    let bad = pack.verify(|_| {}).unwrap();
    assert_eq!(bad.len(), 2);
    for (e, b) in bad.iter().zip([1u32, 3]) {
        match e {
            PackError::BlockChecksum {
                at, block, offset, ..
            } => {
                assert_eq!(*block, b);
                assert_eq!(*offset, pack.blocks()[b as usize].offset);
                assert_eq!(at, &format!("asset 'mesh' chunk {b}"));
            }
            other => panic!("{other:?}"),
        }
    }
    // check_block insists on the declared lengths.
    let blk = pack.blocks()[0];
    let stored = &bytes[blk.offset as usize..(blk.offset + blk.stored_size as u64) as usize];
    let mut out = vec![0u8; blk.size as usize + 1];
    assert!(matches!(
        pack.check_block(BlockId(0), stored, &mut out),
        Err(PackError::BufferLength { what: "output", .. })
    ));
    assert!(matches!(
        pack.check_block(BlockId(0), &stored[1..], &mut out[1..]),
        Err(PackError::BufferLength { what: "stored", .. })
    ));
}

#[test]
fn writer_rejects_bad_input_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = PackWriter::create(dir.path().join("w.gspk"), opts(Codec::Lz4)).unwrap();
    w.add_blob("a", b"x").unwrap();
    assert!(w
        .add_blob("a", b"y")
        .unwrap_err()
        .to_string()
        .contains("'a'"));
    assert!(w.add_blob("", b"y").is_err());
    let e = w
        .add_texture("odd", TextureFormat::Bc7, 10, 8, &[vec![0u8; 48]])
        .unwrap_err();
    assert!(e.to_string().contains("'odd'"), "{e}");
    let e = w
        .add_texture("short", TextureFormat::Bc7, 8, 8, &[vec![0u8; 63]])
        .unwrap_err();
    assert!(e.to_string().contains("mip 0"), "{e}");
    let too_many: Vec<Vec<u8>> = vec![vec![0u8; 16]; 5];
    assert!(w
        .add_texture("many", TextureFormat::Bc7, 4, 4, &too_many)
        .is_err());
}

/// A pack written with 16 KiB LZ4 sub-blocks: blobs cut on words, tiles on
/// whole rows, the packed tail on words; it reads back the same bytes as
/// the pack without them, every block checks, and its sub-block table is
/// held to the same damage tests as the rest of the table of contents.
#[test]
fn sub_blocks_round_trip_and_damage_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let blob = sample(200_003, 7);
    let mips = mip_chain(TextureFormat::Bc7, 640, 384, 7, 8);
    let write = |name: &str, sub: u32| {
        let path = dir.path().join(name);
        let mut w = PackWriter::create(&path, opts(Codec::Lz4).with_lz4_sub_block(sub)).unwrap();
        w.add_blob("blob", &blob).unwrap();
        w.add_texture("tex", TextureFormat::Bc7, 640, 384, &mips)
            .unwrap();
        w.finish().unwrap();
        path
    };
    let whole = Pack::open(write("whole.gspk", 0)).unwrap();
    let path = write("split.gspk", 16 << 10);
    let split = Pack::open(&path).unwrap();
    assert!(whole.blocks().iter().all(|b| b.sub_blocks == 0));
    let cut: Vec<_> = (0..split.blocks().len() as u32)
        .map(BlockId)
        .filter(|&id| !split.sub_blocks(id).is_empty())
        .collect();
    assert!(
        cut.len() >= 6,
        "the LZ4 blocks past 16 KiB are cut: {}",
        cut.len()
    );
    for &id in &cut {
        let b = split.blocks()[id.0 as usize];
        let subs = split.sub_blocks(id);
        assert_eq!(subs.len(), b.sub_blocks as usize);
        assert!(subs.iter().all(|s| s.size < 20 << 10), "{subs:?}");
    }
    let blob_id = split.find("blob").unwrap();
    let tex = split.find("tex").unwrap();
    // Every tile's sub-blocks start on its rows.
    let mut tiles_cut = 0;
    for mip in 0..7 {
        let Some((tx, ty)) = split.tile_grid(tex, mip).unwrap() else {
            continue;
        };
        for y in 0..ty {
            for x in 0..tx {
                let r = split.tile_region(tex, mip, x, y).unwrap();
                let subs = split.sub_blocks(r.block);
                tiles_cut += !subs.is_empty() as usize;
                for s in subs {
                    assert_eq!(s.offset % r.bytes_per_row, 0, "mip {mip} tile ({x},{y})");
                }
            }
        }
    }
    assert!(tiles_cut > 0);
    assert_eq!(split.read_blob(blob_id).unwrap(), blob);
    assert_eq!(split.read_texture_mips(tex).unwrap(), mips);
    assert!(split.verify(|_| ()).unwrap().is_empty());
    // Its table of contents, damaged anywhere, is refused.
    let bytes = std::fs::read(&path).unwrap();
    let toc_offset =
        u64::from_le_bytes(bytes[format::header::TOC_OFFSET..][..8].try_into().unwrap()) as usize;
    for i in toc_offset..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x01;
        assert!(
            Pack::from_bytes("flip", &b).is_err(),
            "flipped TOC byte {i}"
        );
    }
    for len in (toc_offset..bytes.len()).step_by(7) {
        assert!(Pack::from_bytes("cut", &bytes[..len]).is_err());
    }
}

/// Hand-made sub-block tables that break a rule are refused with the rule
/// named, even with every checksum right.
#[test]
fn bad_sub_block_tables_are_refused() {
    let data = sample(20_000, 9);
    let (a, b) = data.split_at(10_000);
    let (sa, sb) = (
        Codec::Lz4.compress(a, 0).unwrap(),
        Codec::Lz4.compress(b, 0).unwrap(),
    );
    let stored = [sa.clone(), sb.clone()].concat();
    let build = |count: u8, entries: &[(u32, u32)], codec: Codec| {
        let mut toc = Vec::new();
        toc.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        toc.extend_from_slice(&20_000u32.to_le_bytes());
        toc.extend_from_slice(&crc32c::crc32c(&stored).to_le_bytes());
        toc.extend_from_slice(&[codec.id(), count, 0, 0]);
        let mut asset = [0u8; ASSET_ENTRY_LEN];
        asset[4..8].copy_from_slice(&4u32.to_le_bytes());
        asset[20..28].copy_from_slice(&20_000u64.to_le_bytes());
        asset[32..36].copy_from_slice(&1u32.to_le_bytes());
        toc.extend_from_slice(&asset);
        for (s, d) in entries {
            toc.extend_from_slice(&s.to_le_bytes());
            toc.extend_from_slice(&d.to_le_bytes());
        }
        toc.extend_from_slice(b"mesh");
        one_block_file(&stored, &toc)
    };
    let good = [(sa.len() as u32, 10_000), (sb.len() as u32, 10_000)];
    let pack = Pack::from_bytes("good", &build(2, &good, Codec::Lz4)).unwrap();
    let mut out = vec![0u8; 20_000];
    pack.check_block(BlockId(0), &stored, &mut out).unwrap();
    assert_eq!(out, data);
    let refused = |count: u8, entries: &[(u32, u32)], codec: Codec, want: &str| {
        let e = Pack::from_bytes("bad", &build(count, entries, codec)).unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
    };
    refused(1, &good[..1], Codec::Lz4, "sub-blocks of a lz4 block");
    refused(17, &good, Codec::Lz4, "sub-blocks");
    refused(2, &good, Codec::Zstd, "sub-blocks of a zstd block");
    refused(
        2,
        &[(sa.len() as u32, 9_998), (sb.len() as u32, 10_002)],
        Codec::Lz4,
        "not on a word",
    );
    refused(
        2,
        &[(sa.len() as u32, 10_000), (sb.len() as u32, 9_996)],
        Codec::Lz4,
        "sub-blocks hold",
    );
    // Lengths that add up but cut the streams in the wrong place open (the
    // table is consistent) and fail to decode, naming the block.
    let shifted = [(sa.len() as u32 + 1, 10_000), (sb.len() as u32 - 1, 10_000)];
    let pack = Pack::from_bytes("shifted", &build(2, &shifted, Codec::Lz4)).unwrap();
    let e = pack.check_block(BlockId(0), &stored, &mut out).unwrap_err();
    assert!(matches!(e, PackError::BlockDecode { block: 0, .. }), "{e}");
    refused(
        2,
        &[(0, 10_000), (stored.len() as u32, 10_000)],
        Codec::Lz4,
        "stores 0 bytes",
    );
}

/// BC-like texel data: endpoints that drift slowly from block to block,
/// indices close to noise; `element` bytes per block, the first half
/// endpoints.
fn bc_like(len: usize, element: usize, seed: u64) -> Vec<u8> {
    let noise = sample(len, seed);
    (0..len)
        .map(|i| match i % element {
            k if k < element / 2 => ((i / element / 50) as u8).wrapping_add(k as u8 * 29),
            _ => noise[i].wrapping_mul(151) ^ (i / 7) as u8,
        })
        .collect()
}

fn version_of(path: &Path) -> u32 {
    let b = std::fs::read(path).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

#[test]
fn conditioned_textures_round_trip_with_every_codec_and_level() {
    let dir = tempfile::tempdir().unwrap();
    for format in TextureFormat::ALL.into_iter().filter(|f| f.is_compressed()) {
        for (codec, level) in [
            (Codec::Lz4, 0),
            (Codec::Lz4, 9),
            (Codec::Lz4, 12),
            (Codec::Zstd, 19),
            (Codec::GDeflate, 12),
        ] {
            let (w, h) = (1000, 600);
            let mips: Vec<Vec<u8>> = (0..full_mip_count(w, h))
                .map(|m| {
                    let (mw, mh) = gpustream::pack::mip_extent(w, h, m);
                    let len = format.data_size(mw, mh) as usize;
                    bc_like(len, format.bytes_per_block() as usize, m as u64)
                })
                .collect();
            let path = dir.path().join(format!("c-{format}-{codec}-{level}.gspk"));
            let mut wr = PackWriter::create(
                &path,
                opts(codec)
                    .with_codec(codec)
                    .with_level(level)
                    .with_condition(true),
            )
            .unwrap();
            wr.add_texture("t", format, w, h, &mips).unwrap();
            wr.add_blob("b", &sample(70_000, 5)).unwrap();
            wr.finish().unwrap();
            let pack = Pack::open(&path).unwrap();
            let what = format!("{format} {codec} level {level}");
            let conditioned: Vec<_> = pack
                .blocks()
                .iter()
                .filter(|b| b.transform != BlockTransform::None)
                .collect();
            // zstd (and GDeflate's entropy coding) find most of what the
            // split exposes by themselves; LZ4 takes the split on most
            // blocks.
            let want = if codec == Codec::Lz4 { 3 } else { 0 };
            assert!(
                conditioned.len() >= want,
                "{what}: {} conditioned",
                conditioned.len()
            );
            assert!(conditioned
                .iter()
                .all(|b| b.transform.fits(format) && b.codec == codec));
            assert!(pack
                .blocks()
                .iter()
                .filter(|b| b.codec != Codec::None)
                .all(|b| b.level == level as u8));
            assert_eq!(version_of(&path), format::VERSION, "{what}");
            let id = pack.find("t").unwrap();
            assert_eq!(pack.read_texture_mips(id).unwrap(), mips, "{what}");
            // The same texture without conditioning takes more bytes.
            let plain_path = dir.path().join("plain.gspk");
            let mut wr =
                PackWriter::create(&plain_path, opts(codec).with_codec(codec).with_level(level))
                    .unwrap();
            wr.add_texture("t", format, w, h, &mips).unwrap();
            wr.add_blob("b", &sample(70_000, 5)).unwrap();
            let plain = wr.finish().unwrap();
            let summary_len = std::fs::metadata(&path).unwrap().len();
            if !conditioned.is_empty() {
                assert!(
                    summary_len < plain.file_len,
                    "{what}: {summary_len} >= {}",
                    plain.file_len
                );
            }
        }
    }
}

#[test]
fn packs_without_transforms_or_levels_are_still_version_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.gspk");
    let mut wr = PackWriter::create(&path, WriterOptions::default()).unwrap();
    wr.add_texture(
        "t",
        TextureFormat::Bc1,
        8,
        8,
        &mip_chain(TextureFormat::Bc1, 8, 8, 4, 2),
    )
    .unwrap();
    wr.finish().unwrap();
    assert_eq!(version_of(&path), format::VERSION_1);
    assert!(Pack::open(&path)
        .unwrap()
        .blocks()
        .iter()
        .all(|b| b.transform == BlockTransform::None && b.level == 0));
}

/// A one-block BC1 texture (8x8, one mip... packed), hand-made so the
/// block entry's bytes 14 and 15 can be anything, at `version`.
fn texture_file(version: u32, codec: Codec, transform: u8, level: u8, kind_blob: bool) -> Vec<u8> {
    let data = bc_like(32, 8, 1); // 8x8 BC1: 4 blocks of 8 bytes
    let mut mid = vec![0u8; 32];
    if let Some(t) = BlockTransform::from_id(transform) {
        t.apply(&data, &mut mid);
    } else {
        mid.copy_from_slice(&data);
    }
    let stored = codec.compress(&mid, 0).unwrap();
    let mut toc = Vec::new();
    toc.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    toc.extend_from_slice(&32u32.to_le_bytes());
    toc.extend_from_slice(&crc32c::crc32c(&stored).to_le_bytes());
    toc.extend_from_slice(&[codec.id(), 0, transform, level]);
    let mut asset = [0u8; ASSET_ENTRY_LEN];
    asset[4..8].copy_from_slice(&1u32.to_le_bytes()); // name "t" at 0
    if !kind_blob {
        asset[8] = 1; // texture
        asset[9] = TextureFormat::Bc1.id();
        asset[10] = 1; // one mip
        asset[12..16].copy_from_slice(&8u32.to_le_bytes());
        asset[16..20].copy_from_slice(&8u32.to_le_bytes());
    }
    asset[20..28].copy_from_slice(&32u64.to_le_bytes());
    asset[32..36].copy_from_slice(&1u32.to_le_bytes());
    toc.extend_from_slice(&asset);
    toc.extend_from_slice(b"t");
    let mut file = one_block_file(&stored, &toc);
    let header = format::encode_header_version(
        version,
        4096,
        stored.len() as u64,
        4096 + stored.len() as u64,
        toc.len() as u64,
        1,
        1,
        crc32c::crc32c(&toc),
    );
    file[..HEADER_LEN].copy_from_slice(&header);
    file
}

#[test]
fn transform_and_level_bytes_are_checked_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let open = |bytes: Vec<u8>| {
        let path = dir.path().join("t.gspk");
        std::fs::write(&path, bytes).unwrap();
        Pack::open(&path)
    };
    // Consistent: version 2 with a BC1 split at LZ4 HC level 9 decodes to
    // the texture's own bytes.
    let pack = open(texture_file(2, Codec::Lz4, 1, 9, false)).unwrap();
    assert_eq!(pack.blocks()[0].transform, BlockTransform::Bc1Split);
    assert_eq!(pack.blocks()[0].level, 9);
    let id = pack.find("t").unwrap();
    assert_eq!(pack.read_texture_mips(id).unwrap(), vec![bc_like(32, 8, 1)]);
    let corrupt_at = |r: Result<Pack, PackError>, offset: u64, words: &str| match r {
        Err(PackError::Corrupt {
            offset: o, reason, ..
        }) => {
            assert_eq!(o, offset, "{reason}");
            assert!(reason.contains(words), "{reason}");
        }
        other => panic!("expected Corrupt at {offset}, got {other:?}"),
    };
    let toc_at = |f: &[u8]| u64::from_le_bytes(f[32..40].try_into().unwrap());
    // Version 1 keeps bytes 14 and 15 reserved.
    let f = texture_file(1, Codec::Lz4, 1, 0, false);
    let at = toc_at(&f) + 14;
    corrupt_at(open(f), at, "reserved");
    let f = texture_file(1, Codec::Lz4, 0, 9, false);
    let at = toc_at(&f) + 15;
    corrupt_at(open(f), at, "reserved");
    // An id this version does not know.
    let f = texture_file(2, Codec::Lz4, 6, 0, false);
    let at = toc_at(&f) + 14;
    corrupt_at(open(f), at, "unknown transform id 6");
    // A stored block with a transform.
    let f = texture_file(2, Codec::None, 1, 0, false);
    let at = toc_at(&f) + 14;
    corrupt_at(open(f), at, "stored (none) block");
    // A transform whose element is not the format's block (BC3's 16 bytes
    // on BC1's 8).
    let f = texture_file(2, Codec::Lz4, 2, 0, false);
    let at = toc_at(&f) + 14;
    corrupt_at(open(f), at, "does not fit bc1");
    // A blob block with a transform.
    let f = texture_file(2, Codec::Lz4, 1, 0, true);
    let at = toc_at(&f) + 14;
    corrupt_at(open(f), at, "blob block");
    // Version 3 is not one this reader knows.
    match open(texture_file(3, Codec::Lz4, 1, 0, false)) {
        Err(PackError::UnsupportedVersion { version: 3, .. }) => {}
        other => panic!("{other:?}"),
    }
}

/// Replaces block 0's stored bytes in a pack file with `stored` (same
/// length) and makes every checksum agree again, so that only a decoder
/// can notice.
fn replace_block_0(file: &mut [u8], stored: &[u8]) {
    let data_at = u64::from_le_bytes(file[16..24].try_into().unwrap()) as usize;
    let toc_at = u64::from_le_bytes(file[32..40].try_into().unwrap()) as usize;
    file[data_at..data_at + stored.len()].copy_from_slice(stored);
    file[toc_at + 8..toc_at + 12].copy_from_slice(&crc32c::crc32c(stored).to_le_bytes());
    let toc_crc = crc32c::crc32c(&file[toc_at..]);
    file[56..60].copy_from_slice(&toc_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&file[..60]);
    file[60..64].copy_from_slice(&header_crc.to_le_bytes());
}

#[test]
fn damaged_conditioned_blocks_fail_their_decode_and_never_write_outside_it() {
    // 2,000 conditioned LZ4 blocks with one flipped bit each, checksums
    // made to agree: each decode either fails with a typed error naming
    // the block or fills exactly the block's buffer; the guard bytes
    // around it never change.
    let format = TextureFormat::Bc3;
    let data = bc_like(16 * 1024, 16, 9);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.gspk");
    let mut wr =
        PackWriter::create(&path, opts(Codec::Lz4).with_condition(true).with_level(9)).unwrap();
    wr.add_texture("t", format, 128, 128, std::slice::from_ref(&data))
        .unwrap();
    wr.finish().unwrap();
    let file = std::fs::read(&path).unwrap();
    let pack = Pack::open(&path).unwrap();
    let b = pack.blocks()[0];
    assert_eq!(b.transform, BlockTransform::Bc3Split);
    let good = file[b.offset as usize..(b.offset + b.stored_size as u64) as usize].to_vec();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
    let (mut failed, mut decoded) = (0, 0);
    for _ in 0..2000 {
        let mut bad = good.clone();
        let at = rng.gen_range(0..bad.len());
        bad[at] ^= 1 << rng.gen_range(0..8);
        let mut damaged = file.clone();
        replace_block_0(&mut damaged, &bad);
        std::fs::write(&path, &damaged).unwrap();
        let pack = Pack::open(&path).unwrap();
        let mut guarded = vec![0xA5u8; data.len() + 64];
        let r = pack.check_block(BlockId(0), &bad, &mut guarded[32..32 + data.len()]);
        assert!(guarded[..32]
            .iter()
            .chain(&guarded[32 + data.len()..])
            .all(|&g| g == 0xA5));
        match r {
            Ok(()) => decoded += 1,
            Err(PackError::BlockDecode { block: 0, at, .. }) => {
                assert!(at.contains("asset 't'"), "{at}");
                failed += 1
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    // Most flips break the stream; flips inside literals decode to other
    // bytes, which only the checksum (made to agree here) would catch.
    assert!(
        failed > 100 && decoded > 100,
        "failed {failed}, decoded {decoded}"
    );
}

/// A bad block entry in a pack whose blocks are cut into sub-blocks still
/// names its asset: the name table sits after the sub-block table, whose
/// length the entries declare.
#[test]
fn a_bad_block_in_a_split_pack_names_its_asset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("split.gspk");
    let mut w = PackWriter::create(&path, opts(Codec::Lz4).with_lz4_sub_block(16 << 10)).unwrap();
    w.add_blob("first", &sample(70_000, 5)).unwrap();
    w.add_blob("second", &sample(140_000, 6)).unwrap();
    w.finish().unwrap();
    let good = Pack::open(&path).unwrap();
    assert!(
        good.blocks().iter().any(|b| b.sub_blocks > 0),
        "blocks are cut"
    );
    let mut bytes = std::fs::read(&path).unwrap();
    let get_u64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let toc_at = get_u64(&bytes, format::header::TOC_OFFSET) as usize;
    let toc_len = get_u64(&bytes, format::header::TOC_LEN) as usize;
    // Block 2 is the first of "second" ("first" takes two 64 KiB blocks):
    // it now declares 4 GiB - 1 of uncompressed data.
    let size_at = toc_at + 2 * BLOCK_ENTRY_LEN + 4;
    bytes[size_at..size_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    // Sealed again, so the entry itself is what is refused.
    let toc_crc = crc32c::crc32c(&bytes[toc_at..toc_at + toc_len]);
    bytes[56..60].copy_from_slice(&toc_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&bytes[..60]);
    bytes[60..64].copy_from_slice(&header_crc.to_le_bytes());
    let e = Pack::from_bytes("split", &bytes).unwrap_err();
    assert!(e.to_string().contains("block 2 of asset 'second'"), "{e}");
}
