//! Engine overhead benchmarks (criterion): the coalescing planner, and
//! reading a page-cached file through the engine vs plain `pread` in the
//! same run, so the ratio shows the engine's own cost without the disk;
//! and a CPU decode thread's way to a block's bytes in the page cache,
//! `pread` + crc32c against the file's mapping + crc32c, with the mapping
//! made fresh each time (a pack streamed once) or kept.
//!
//! Run: `cargo bench --bench io_engine`. Disk throughput is measured by
//! `gpustream sweep` (see docs/io.md), not here.

use std::io::Write;
use std::os::fd::AsRawFd;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gpustream::io::{plan_reads, AlignedBuf, IoConfig, IoEngine, OpenMode, Priority, ReadOp};

fn planner(c: &mut Criterion) {
    let mut x = 0x1234_5678u64;
    let ranges: Vec<(u64, usize)> = (0..10_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (1 << 30), 4096 + (x % 60_000) as usize)
        })
        .collect();
    let mut g = c.benchmark_group("plan_reads");
    g.throughput(Throughput::Elements(ranges.len() as u64));
    g.bench_function("10k random ranges", |b| {
        b.iter(|| plan_reads(&ranges, 1 << 20, 64 << 10))
    });
    g.finish();
}

fn cached_reads(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cached.bin");
    let len = 32usize << 20;
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&vec![7u8; len])
        .unwrap();
    let engine = IoEngine::new(IoConfig::default()).unwrap();
    let file = engine.open(&path, OpenMode::Buffered).unwrap();
    let std_file = std::fs::File::open(&path).unwrap();
    let mut g = c.benchmark_group("page-cached 32 MiB");
    g.throughput(Throughput::Bytes(len as u64));
    g.sample_size(20);
    for size in [64usize << 10, 1 << 20] {
        let ranges: Vec<(u64, usize)> =
            (0..len / size).map(|i| ((i * size) as u64, size)).collect();
        g.bench_with_input(
            BenchmarkId::new("engine read_ranges", size),
            &ranges,
            |b, r| b.iter(|| engine.read_ranges(&file, r, Priority::Normal)),
        );
        // Reads into memory that is already mapped and faulted in, as the
        // runtime's staging buffer is.
        let mut staging = AlignedBuf::new(len);
        staging.fill(1);
        let base = staging.as_mut_ptr() as usize;
        // The same reads of a file the engine copies out of its mapping
        // (as the runtime's packs are) instead of reading with `pread`.
        let mapped = engine.open(&path, OpenMode::Buffered).unwrap();
        assert!(mapped.map_for_reads());
        for (name, f) in [
            ("engine submit", &file),
            ("engine submit, mapped file", &mapped),
        ] {
            g.bench_with_input(BenchmarkId::new(name, size), &ranges, |b, r| {
                b.iter(|| {
                    let (tx, rx) = crossbeam::channel::unbounded();
                    let ops = r
                        .iter()
                        .enumerate()
                        .map(|(i, &(off, l))| ReadOp {
                            file: f.clone(),
                            offset: off,
                            len: l,
                            dest: (base + off as usize) as *mut u8,
                            priority: Priority::Normal,
                            user_data: i as u64,
                        })
                        .collect();
                    // SAFETY: every op writes its own range of `staging`,
                    // which outlives the completions awaited here.
                    unsafe { engine.submit(ops, tx) };
                    for _ in 0..r.len() {
                        rx.recv().unwrap().result.unwrap();
                    }
                })
            });
        }
        let mut buf = AlignedBuf::new(size);
        g.bench_with_input(BenchmarkId::new("pread loop", size), &ranges, |b, r| {
            b.iter(|| {
                for &(off, l) in r {
                    // SAFETY: buf holds l bytes.
                    unsafe {
                        libc::pread(std_file.as_raw_fd(), buf.as_mut_ptr().cast(), l, off as i64)
                    };
                }
            })
        });
    }
    g.finish();
}

/// 48 KiB blocks (a 64 KiB tile at the demo pack's ratio) of a page-cached
/// file checked with crc32c: read with `pread` into one buffer, or taken
/// from the file's read-only mapping (`IoFile::mapped`) as the runtime's
/// CPU decode threads take them.
fn mapped_reads(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mapped.bin");
    let len = 32usize << 20;
    let data: Vec<u8> = (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&data)
        .unwrap();
    let engine = IoEngine::new(IoConfig::default()).unwrap();
    let block = 48usize << 10;
    let blocks = len / block;
    let mut g = c.benchmark_group("page cache to crc32c, 48 KiB blocks");
    g.throughput(Throughput::Bytes((blocks * block) as u64));
    g.sample_size(20);
    let file = engine.open(&path, OpenMode::Buffered).unwrap();
    let mut buf = vec![0u8; block];
    g.bench_function("pread + crc32c", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for i in 0..blocks {
                let n = file.read_cached((i * block) as u64, &mut buf).unwrap();
                acc ^= crc32c::crc32c(&buf[..n]);
            }
            acc
        })
    });
    let kept = engine.open(&path, OpenMode::Buffered).unwrap();
    assert!(kept.map_for_reads(), "the file could not be mapped");
    g.bench_function("mapping kept + crc32c", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for i in 0..blocks {
                acc ^= crc32c::crc32c(kept.mapped((i * block) as u64, block).unwrap());
            }
            acc
        })
    });
    g.bench_function("fresh mapping + crc32c", |b| {
        b.iter(|| {
            let f = engine.open(&path, OpenMode::Buffered).unwrap();
            f.map_for_reads();
            let mut acc = 0u32;
            for i in 0..blocks {
                acc ^= crc32c::crc32c(f.mapped((i * block) as u64, block).unwrap());
            }
            acc
        })
    });
    g.finish();
}

criterion_group!(benches, planner, cached_reads, mapped_reads);
criterion_main!(benches);
