//! The CPU GDeflate decoder against the reference decoder (libdeflate's
//! GDeflate fork, C), one thread, on the same pages in one run; and what
//! the codecs make of the same blocks.
//!
//! The pages are the blocks of packs, each block's bytes (as the pack
//! holds them, conditioning undone) compressed once per codec: GDeflate
//! at the packer's default level 12, LZ4 fast, LZ4 HC 9, zstd 19.
//! Decoding is timed in interleaved rounds, alternating which side goes
//! first, and each side's fastest round counts (this machine is shared).
//!
//! Run: `cargo bench --bench gdeflate [-- PACK... [--json] [--decode-only]]`.
//! Without packs it builds and uses the 32 MiB demo pack of
//! `benches/codec.rs`. `--decode-only` skips the ratios (their columns
//! then read 1.000).

use gpustream::pack::{BlockId, Pack};
use gpustream::Codec;
use gpustream_tools::demo::{ensure_demo_pack, DemoConfig};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

/// One pack's blocks, plain and as GDeflate pages.
struct Corpus {
    name: String,
    plain: Vec<Vec<u8>>,
    pages: Vec<Vec<u8>>,
}

fn load(path: &std::path::Path) -> Corpus {
    let pack = Pack::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = pack.open_file().expect("open pack file");
    let (mut plain, mut pages) = (Vec::new(), Vec::new());
    let mut stored = Vec::new();
    for (i, b) in pack.blocks().iter().enumerate() {
        let id = BlockId(i as u32);
        pack.read_stored(&file, id, &mut stored)
            .expect("read block");
        let mut out = vec![0u8; b.size as usize];
        pack.check_block(id, &stored, &mut out)
            .expect("decode block");
        let page = Codec::GDeflate.compress(&out, 12).expect("gdeflate");
        plain.push(out);
        pages.push(page);
    }
    Corpus {
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        plain,
        pages,
    }
}

/// The reference decoder, reused across pages.
struct Reference(*mut gdeflate::sys::libdeflate_gdeflate_decompressor);

impl Reference {
    fn new() -> Self {
        // SAFETY: allocation only; null is checked.
        let d = unsafe { gdeflate::sys::libdeflate_alloc_gdeflate_decompressor() };
        assert!(!d.is_null());
        Reference(d)
    }

    /// Decodes `page` (one the reference compressor wrote, followed in
    /// `page_buf` by a zero tail) into `out`.
    fn decode(&mut self, page_buf: &[u8], page_len: usize, out: &mut [u8]) {
        assert!(page_buf.len() >= page_len + 256);
        let mut p = gdeflate::sys::libdeflate_gdeflate_in_page {
            data: page_buf.as_ptr().cast(),
            nbytes: page_len,
        };
        let mut got = 0usize;
        // SAFETY: the page is the reference compressor's own output with a
        // 256-byte zero tail (its decoder reads ahead without bounds
        // checks), and `out` is writable for `out.len()` bytes.
        let r = unsafe {
            gdeflate::sys::libdeflate_gdeflate_decompress(
                self.0,
                &mut p,
                1,
                out.as_mut_ptr().cast(),
                out.len(),
                &mut got,
            )
        };
        assert!(r == 0 && got == out.len(), "reference decode failed");
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        // SAFETY: allocated by `new`, freed once.
        unsafe { gdeflate::sys::libdeflate_free_gdeflate_decompressor(self.0) }
    }
}

fn stored_total(c: &Corpus, codec: Codec, level: i32) -> u64 {
    c.plain
        .iter()
        .map(|b| {
            let s = codec.compress(b, level).expect("compress").len();
            // The packer's rule: a block that saves under 1/16 is stored.
            if s + b.len() / 16 > b.len() {
                b.len()
            } else {
                s
            }
        })
        .sum::<usize>() as u64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let quick = args.iter().any(|a| a == "--test");
    // Decoding only: skip compressing every block with the other codecs.
    let decode_only = args.iter().any(|a| a == "--decode-only");
    let mut packs: Vec<PathBuf> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if packs.is_empty() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/gpustream-bench-codec.gspk");
        let config = DemoConfig {
            size_bytes: 32 << 20,
            ..DemoConfig::default()
        };
        packs.push(ensure_demo_pack(path, config, true).expect("demo pack"));
    }
    let rounds = if quick { 3 } else { 21 };
    let mut rows = Vec::new();
    for path in &packs {
        let c = load(path);
        let total: u64 = c.plain.iter().map(|b| b.len() as u64).sum();
        // Pages with the reference's zero tail, and one output buffer.
        let padded: Vec<Vec<u8>> = c
            .pages
            .iter()
            .map(|p| {
                let mut v = p.clone();
                v.resize(p.len() + 256, 0);
                v
            })
            .collect();
        let mut out = vec![0u8; gpustream::MAX_BLOCK_SIZE];
        let mut reference = Reference::new();
        let (mut ours, mut theirs) = (f64::MAX, f64::MAX);
        for round in 0..rounds {
            for side in [round % 2, 1 - round % 2] {
                let t = Instant::now();
                for (i, b) in c.plain.iter().enumerate() {
                    let dst = &mut out[..b.len()];
                    if side == 0 {
                        Codec::GDeflate
                            .decompress_into(black_box(&c.pages[i]), dst)
                            .expect("our decoder");
                    } else {
                        reference.decode(black_box(&padded[i]), c.pages[i].len(), dst);
                    }
                }
                let s = t.elapsed().as_secs_f64();
                if side == 0 {
                    ours = ours.min(s);
                } else {
                    theirs = theirs.min(s);
                }
            }
        }
        // Both decoders give the block back.
        for (i, b) in c.plain.iter().enumerate() {
            let mut a = vec![0u8; b.len()];
            Codec::GDeflate
                .decompress_into(&c.pages[i], &mut a)
                .unwrap();
            assert_eq!(&a, b, "block {i}");
        }
        let total_of = |codec, level| match decode_only {
            true => total,
            false => stored_total(&c, codec, level),
        };
        let gdeflate = total_of(Codec::GDeflate, 12);
        let lz4 = total_of(Codec::Lz4, 0);
        let lz4_hc = total_of(Codec::Lz4, 9);
        let zstd = total_of(Codec::Zstd, 19);
        let gbs = |t: f64| total as f64 / t / 1e9;
        rows.push(serde_json::json!({
            "corpus": c.name,
            "blocks": c.plain.len(),
            "bytes": total,
            "decode_gbs_ours": gbs(ours),
            "decode_gbs_reference": gbs(theirs),
            "decode_ratio_ours_over_reference": theirs / ours,
            "ratio": {
                "gdeflate12": total as f64 / gdeflate as f64,
                "lz4_fast": total as f64 / lz4 as f64,
                "lz4_hc9": total as f64 / lz4_hc as f64,
                "zstd19": total as f64 / zstd as f64,
            },
            "gdeflate12_vs_lz4_fast": lz4 as f64 / gdeflate as f64,
        }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows).unwrap());
        return;
    }
    println!("GDeflate pages at level 12, one thread; ratio = uncompressed / stored (blocks saving under 1/16 stored raw)");
    println!("| corpus | blocks | MiB | ours GB/s | reference GB/s | ours / reference | gdeflate 12 | lz4 fast | lz4 HC 9 | zstd 19 | gdeflate vs lz4 fast |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap();
        let q = |k: &str| r["ratio"][k].as_f64().unwrap();
        println!(
            "| {} | {} | {:.1} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            r["corpus"].as_str().unwrap(),
            r["blocks"],
            f("bytes") / (1 << 20) as f64,
            f("decode_gbs_ours"),
            f("decode_gbs_reference"),
            f("decode_ratio_ours_over_reference"),
            q("gdeflate12"),
            q("lz4_fast"),
            q("lz4_hc9"),
            q("zstd19"),
            f("gdeflate12_vs_lz4_fast"),
        );
    }
}
