//! Block decompression through `Codec::decompress_into` against raw
//! `lz4_flex::block::decompress_into` on the same blocks: every LZ4 block
//! of a 32 MiB demo pack (real BC7/BC1 tiles, mesh and scene blobs).
//!
//! Run: `cargo bench --bench codec`. Besides criterion's report it prints
//! the throughput ratio codec / raw, measured in this run with interleaved
//! rounds (target: >= 0.95, i.e. the codec layer's checks cost under 5 %).

use criterion::{black_box, Criterion, Throughput};
use gpustream::pack::{BlockId, Pack};
use gpustream::Codec;
use gpustream_tools::demo::{ensure_demo_pack, DemoConfig};
use std::time::Instant;

struct Blocks {
    stored: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    total: u64,
}

fn load() -> Blocks {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/gpustream-bench-codec.gspk");
    let config = DemoConfig {
        size_bytes: 32 << 20,
        ..DemoConfig::default()
    };
    let path = ensure_demo_pack(path, config, true).expect("demo pack");
    let pack = Pack::open(&path).expect("open demo pack");
    let file = pack.open_file().expect("open file");
    let mut blocks = Blocks {
        stored: Vec::new(),
        sizes: Vec::new(),
        total: 0,
    };
    for (i, b) in pack.blocks().iter().enumerate() {
        if b.codec != Codec::Lz4 {
            continue;
        }
        let mut stored = Vec::new();
        pack.read_stored(&file, BlockId(i as u32), &mut stored)
            .expect("read block");
        blocks.stored.push(stored);
        blocks.sizes.push(b.size as usize);
        blocks.total += b.size as u64;
    }
    blocks
}

fn run_codec(blocks: &Blocks, out: &mut [u8]) {
    for (s, &n) in blocks.stored.iter().zip(&blocks.sizes) {
        Codec::Lz4
            .decompress_into(black_box(s), &mut out[..n])
            .expect("valid block");
    }
}

fn run_raw(blocks: &Blocks, out: &mut [u8]) {
    for (s, &n) in blocks.stored.iter().zip(&blocks.sizes) {
        let got =
            lz4_flex::block::decompress_into(black_box(s), &mut out[..n]).expect("valid block");
        assert_eq!(got, n);
    }
}

fn main() {
    let blocks = load();
    let mut out = vec![0u8; gpustream::MAX_BLOCK_SIZE];
    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("lz4 block decompression");
        g.throughput(Throughput::Bytes(blocks.total));
        g.bench_function("Codec::decompress_into", |b| {
            b.iter(|| run_codec(&blocks, &mut out))
        });
        g.bench_function("lz4_flex::block::decompress_into", |b| {
            b.iter(|| run_raw(&blocks, &mut out))
        });
        g.finish();
    }
    c.final_summary();

    // The ratio, from interleaved rounds in alternating order so both
    // sides see the same machine state (this machine is shared); each
    // side's fastest round is compared, as the one least disturbed.
    let rounds = if std::env::args().any(|a| a == "--test") {
        3
    } else {
        61
    };
    let (mut o, mut r) = (f64::MAX, f64::MAX);
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            let t = Instant::now();
            if side == 0 {
                run_codec(&blocks, &mut out);
                o = o.min(t.elapsed().as_secs_f64());
            } else {
                run_raw(&blocks, &mut out);
                r = r.min(t.elapsed().as_secs_f64());
            }
        }
    }
    let gbs = |t: f64| blocks.total as f64 / t / 1e9;
    println!(
        "{} LZ4 blocks, {:.1} MiB: codec {:.2} GB/s, raw lz4_flex {:.2} GB/s, ratio codec/raw = {:.3} (target >= 0.95)",
        blocks.stored.len(),
        blocks.total as f64 / (1 << 20) as f64,
        gbs(o),
        gbs(r),
        r / o
    );
}
