//! The runtime reading real packs: blob round trips, the fault-injection
//! sweep over 1,000 seeds, and (on a wgpu adapter) buffers and textures
//! streamed tile by tile and read back equal to the source.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpustream::codec::Codec;
use gpustream::completion::{Fence, StatusArray, StatusEntry};
use gpustream::decode::gpu::{Lz4DecodePath, Lz4DecodePipeline};
use gpustream::destinations::HostMemory;
use gpustream::io::{BackendKind, FaultConfig, IoConfig, OpenMode};
use gpustream::pack::{AssetId, PackError, PackWriter, TextureFormat, WriterOptions};
use gpustream::runtime::{
    CompressionSupport, Destination, PackFile, QueueConfig, QueueStats, Request, RequestError,
    Runtime, RuntimeConfig, Source, StagingMemory,
};

/// Bytes that compress about 2:1 with LZ4, and differ per seed.
fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let run = 1 + (x % 24) as usize;
        if x & 1 == 0 {
            let b = (x >> 8) as u8;
            out.extend(std::iter::repeat_n(b, run));
        } else {
            out.extend((0..run).map(|i| (x >> (i % 56)) as u8));
        }
    }
    out.truncate(len);
    out
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    blobs: Vec<(String, Vec<u8>)>,
}

fn blob_pack(codec: Codec) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blobs.gspk");
    let blobs: Vec<(String, Vec<u8>)> = [0usize, 1, 65535, 65536, 65537, 300_000, 1 << 20]
        .iter()
        .enumerate()
        .map(|(i, &len)| (format!("blob{i}"), content(i as u64 + 1, len)))
        .collect();
    let mut w = writer(&path, codec);
    for (name, data) in &blobs {
        w.add_blob(name, data).unwrap();
    }
    w.finish().unwrap();
    Fixture {
        _dir: dir,
        path,
        blobs,
    }
}

/// Enqueues a fence after everything in `q`, submits, and waits for it
/// (false: it did not fire within `limit`).
fn submit_and_wait(q: &gpustream::runtime::Queue, limit: Duration) -> bool {
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    q.submit();
    f.wait_timeout(1, limit)
}

/// Streams every blob of `fx` from `pf` into host memory and returns each
/// blob's bytes (in `fx.blobs`' order).
fn stream_blobs(
    rt: &Runtime,
    pf: &Arc<gpustream::runtime::PackFile>,
    fx: &Fixture,
) -> Vec<Vec<u8>> {
    let q = rt.create_queue(QueueConfig::default());
    let mems: Vec<HostMemory> = fx
        .blobs
        .iter()
        .map(|(name, data)| {
            let memory = HostMemory::new(data.len());
            let asset = pf.pack().find(name).unwrap();
            q.enqueue(Request::new(
                Source::blob(pf, asset),
                Destination::memory(&memory),
            ))
            .unwrap();
            memory
        })
        .collect();
    assert!(submit_and_wait(&q, Duration::from_secs(60)));
    if let Some(f) = q.error_record().first_failure {
        panic!("{}", f.error);
    }
    mems.iter().map(|m| m.to_vec().unwrap()).collect()
}

/// A buffered pack is mapped by the runtime: a new pack written to the
/// same path replaces the file by a rename, so the open pack goes on
/// reading its own bytes, whole, and a newly opened one reads the new.
#[test]
fn a_pack_rewritten_while_open_and_mapped_keeps_its_own_bytes() {
    let fx = blob_pack(Codec::Lz4);
    let rt = mapped_cpu_runtime();
    let old = rt.open_pack(&fx.path).unwrap();
    let want: Vec<Vec<u8>> = fx.blobs.iter().map(|(_, d)| d.clone()).collect();
    assert_eq!(stream_blobs(&rt, &old, &fx), want);

    // The same names, other bytes, written over the same path.
    let mut w = writer(&fx.path, Codec::Lz4);
    let newer: Vec<(String, Vec<u8>)> = fx
        .blobs
        .iter()
        .enumerate()
        .map(|(i, (name, d))| (name.clone(), content(100 + i as u64, d.len())))
        .collect();
    for (name, data) in &newer {
        w.add_blob(name, data).unwrap();
    }
    w.finish().unwrap();

    assert_eq!(
        stream_blobs(&rt, &old, &fx),
        want,
        "the open pack read the new file"
    );
    let new = rt.open_pack(&fx.path).unwrap();
    let fx_new = Fixture {
        _dir: tempfile::tempdir().unwrap(),
        path: fx.path.clone(),
        blobs: newer.clone(),
    };
    let got = stream_blobs(&rt, &new, &fx_new);
    assert_eq!(
        got,
        newer.iter().map(|(_, d)| d.clone()).collect::<Vec<_>>()
    );
    // No temporary file is left beside the pack.
    let left: Vec<_> = std::fs::read_dir(fx.path.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("blobs.gspk")]);
}

/// A pack writer at `path`: `codec` at level 3, one thread.
fn writer(path: &Path, codec: Codec) -> PackWriter {
    PackWriter::create(
        path,
        WriterOptions::default()
            .with_codec(codec)
            .with_level(3)
            .with_threads(1),
    )
    .unwrap()
}

fn cpu_runtime(io: IoConfig) -> Runtime {
    cpu_runtime_opening(io, OpenMode::Auto)
}

/// A CPU-only runtime whose packs open with `open_mode`: `Buffered` packs
/// are read by the CPU threads that decode them, `Auto` ones (O_DIRECT
/// where the filesystem allows) through the I/O engine.
fn cpu_runtime_opening(io: IoConfig, open_mode: OpenMode) -> Runtime {
    Runtime::without_gpu(
        RuntimeConfig::default()
            .with_io(io)
            .with_cpu_threads(2)
            .with_open_mode(open_mode),
    )
    .unwrap()
}

/// A CPU-only runtime that maps the packs it opens through the page cache
/// (`map_cached_files`, off by default).
fn mapped_cpu_runtime() -> Runtime {
    Runtime::without_gpu(
        RuntimeConfig::default()
            .with_cpu_threads(2)
            .with_open_mode(OpenMode::Buffered)
            .with_map_cached_files(true),
    )
    .unwrap()
}

#[test]
fn blobs_round_trip_whole_and_by_range_for_every_codec() {
    for codec in Codec::ALL {
        let fx = blob_pack(codec);
        // Buffered packs are read with `pread` by default; with
        // `map_cached_files` the decode threads read them in place.
        for (backend, open_mode, map) in [
            (BackendKind::IoUring, OpenMode::Auto, false),
            (BackendKind::Threads, OpenMode::Auto, false),
            (BackendKind::Threads, OpenMode::Buffered, true),
            (BackendKind::Threads, OpenMode::Buffered, false),
        ] {
            let rt = match Runtime::without_gpu(
                RuntimeConfig::default()
                    .with_io(IoConfig::default().with_backend(backend))
                    .with_open_mode(open_mode)
                    .with_map_cached_files(map),
            ) {
                Ok(rt) => rt,
                Err(e) if backend == BackendKind::IoUring => {
                    common::io_uring_unavailable("the io_uring round trip", &e);
                    continue;
                }
                Err(e) => panic!("{e}"),
            };
            let pf = rt.open_pack(&fx.path).unwrap();
            let q = rt.create_queue(QueueConfig::default());
            let mut checks = Vec::new();
            for (name, data) in &fx.blobs {
                let asset = pf.pack().find(name).unwrap();
                let whole = HostMemory::new(data.len());
                q.enqueue(Request::new(
                    Source::Blob {
                        pack: pf.clone(),
                        asset,
                        range: None,
                    },
                    Destination::Memory {
                        memory: whole.clone(),
                        offset: 0,
                    },
                ))
                .unwrap();
                checks.push((whole, data.clone()));
                if data.len() > 10 {
                    let r = 3..data.len() as u64 - 5;
                    let part = HostMemory::new(r.end as usize - r.start as usize + 7);
                    q.enqueue(Request::new(
                        Source::Blob {
                            pack: pf.clone(),
                            asset,
                            range: Some(r.clone()),
                        },
                        Destination::Memory {
                            memory: part.clone(),
                            offset: 7,
                        },
                    ))
                    .unwrap();
                    let mut want = vec![0u8; 7];
                    want.extend_from_slice(&data[r.start as usize..r.end as usize]);
                    checks.push((part, want));
                }
            }
            let f = Fence::new();
            q.enqueue_signal(&f, 1);
            q.submit();
            assert!(
                f.wait_timeout(1, Duration::from_secs(60)),
                "{codec} {backend:?} {open_mode:?}"
            );
            assert_eq!(
                q.error_record().failure_count,
                0,
                "{codec} {backend:?} {open_mode:?}"
            );
            for (mem, want) in checks {
                assert!(
                    mem.to_vec().unwrap() == want,
                    "{codec} {backend:?} {open_mode:?}: {} bytes differ",
                    want.len()
                );
            }
            let st = q.stats();
            assert_eq!(st.completed, st.requests);
            // Coalescing reads a block once for every request that wants it.
            assert!(st.bytes_read > 0 && st.bytes_stored > 0);
        }
    }
}

#[test]
fn pack_source_problems_are_typed_errors_from_enqueue() {
    use gpustream::runtime::SourceProblem;
    let fx = blob_pack(Codec::Lz4);
    let rt = cpu_runtime(IoConfig::default());
    let pf = rt.open_pack(&fx.path).unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let mem = HostMemory::new(2 << 20);
    let blob = pf.find("blob3").unwrap();
    let enqueue = |source: Source| {
        q.enqueue(Request::new(source, Destination::memory(&mem)))
            .expect_err("must be refused")
    };
    // An AssetId is plain data: one past the table (or from another pack)
    // is refused with the pack and the count named, not an index panic.
    let count = pf.assets().len();
    let e = enqueue(Source::blob(
        &pf,
        gpustream::pack::AssetId(count as u32 + 7),
    ));
    match &e {
        RequestError::InvalidSource(SourceProblem::NoSuchAsset {
            asset,
            pack,
            count: c,
        }) => {
            assert_eq!((*asset as usize, *c), (count + 7, count));
            assert_eq!(pack, &fx.path);
        }
        other => panic!("expected NoSuchAsset, got {other:?}"),
    }
    assert!(e.to_string().contains("blobs.gspk"), "{e}");
    // A blob asked for as a texture: the pack's lookup names the asset.
    let e = enqueue(Source::PackedMips {
        pack: pf.clone(),
        asset: blob,
    });
    assert!(
        matches!(&e, RequestError::Pack(PackError::Lookup { asset, .. }) if asset == "blob3"),
        "{e:?}"
    );
    // A range past the blob's end.
    let e = enqueue(Source::Blob {
        pack: pf.clone(),
        asset: blob,
        range: Some(0..65_537),
    });
    assert!(
        matches!(
            &e,
            RequestError::InvalidSource(SourceProblem::RangeOutsideBlob { size: 65_536, .. })
        ),
        "{e:?}"
    );
    // Every refusal left the queue usable: a valid request still completes.
    q.enqueue(Request::new(
        Source::blob(&pf, blob),
        Destination::memory(&mem),
    ))
    .unwrap();
    assert!(submit_and_wait(&q, Duration::from_secs(60)));
    assert_eq!(q.error_record().failure_count, 0);
    assert_eq!(&mem.to_vec().unwrap()[..65_536], &fx.blobs[3].1[..]);
}

#[test]
fn a_corrupt_block_fails_only_its_own_request() {
    for open_mode in [OpenMode::Auto, OpenMode::Buffered] {
        corrupt_block_fails_only_its_own_request(open_mode);
    }
}

fn corrupt_block_fails_only_its_own_request(open_mode: OpenMode) {
    let fx = blob_pack(Codec::Lz4);
    let pack = gpustream::pack::Pack::open(&fx.path).unwrap();
    let victim = pack.find("blob5").unwrap();
    let b = pack.blocks()[pack.asset(victim).blocks.start as usize + 1];
    let mut bytes = std::fs::read(&fx.path).unwrap();
    bytes[b.offset as usize + 10] ^= 0x40;
    std::fs::write(&fx.path, &bytes).unwrap();

    let rt = cpu_runtime_opening(IoConfig::default(), open_mode);
    let pf = rt.open_pack(&fx.path).unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let s = StatusArray::new(fx.blobs.len());
    let mut mems = Vec::new();
    for (i, (name, data)) in fx.blobs.iter().enumerate() {
        let m = HostMemory::new(data.len());
        let asset = pf.pack().find(name).unwrap();
        q.enqueue(
            Request::new(
                Source::Blob {
                    pack: pf.clone(),
                    asset,
                    range: None,
                },
                Destination::Memory {
                    memory: m.clone(),
                    offset: 0,
                },
            )
            .with_name(name.clone()),
        )
        .unwrap();
        q.enqueue_status(&s, i);
        mems.push(m);
    }
    q.submit();
    for (i, (name, data)) in fx.blobs.iter().enumerate() {
        match s.wait(i) {
            StatusEntry::Ok => {
                assert_ne!(name, "blob5");
                assert!(mems[i].to_vec().unwrap() == *data, "{name} {open_mode:?}");
            }
            StatusEntry::Failed(f) => {
                assert_eq!(name, "blob5");
                let msg = f.error.to_string();
                assert!(matches!(&*f.error, RequestError::Pack(_)), "{msg}");
                assert!(
                    msg.contains("blob5") && msg.contains(&b.offset.to_string()),
                    "error names asset and offset: {msg}"
                );
            }
            StatusEntry::Pending => unreachable!(),
        }
    }
}

#[test]
fn a_pack_truncated_after_open_fails_the_missing_blocks() {
    for open_mode in [OpenMode::Auto, OpenMode::Buffered] {
        truncated_pack_fails_the_missing_blocks(open_mode, false);
    }
    // Mapped (opt-in): the cut faults, the handler marks the mapping.
    truncated_pack_fails_the_missing_blocks(OpenMode::Buffered, true);
}

/// Cuts the pack at `path` (`len` bytes long) in the middle of blob6's
/// blocks, as another process might; returns where.
fn cut_inside_blob6(path: &Path, pf: &PackFile, len: u64) -> u64 {
    let last = pf.pack().find("blob6").unwrap();
    let first_block = pf.pack().blocks()[pf.pack().asset(last).blocks.start as usize];
    let cut = first_block.offset + (len - first_block.offset) / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    cut
}

/// Enqueues `asset` of `pf`, whole, into `memory`.
fn enqueue_blob(
    q: &gpustream::runtime::Queue,
    pf: &Arc<PackFile>,
    asset: AssetId,
    memory: HostMemory,
) {
    q.enqueue(Request::new(
        Source::Blob {
            pack: pf.clone(),
            asset,
            range: None,
        },
        Destination::Memory { memory, offset: 0 },
    ))
    .unwrap();
}

fn truncated_pack_fails_the_missing_blocks(open_mode: OpenMode, map: bool) {
    let fx = blob_pack(Codec::Lz4);
    let rt = Runtime::without_gpu(
        RuntimeConfig::default()
            .with_cpu_threads(2)
            .with_open_mode(open_mode)
            .with_map_cached_files(map),
    )
    .unwrap();
    let pf = rt.open_pack(&fx.path).unwrap();
    // Cut the file in the middle of the last blob.
    let len = std::fs::metadata(&fx.path).unwrap().len();
    cut_inside_blob6(&fx.path, &pf, len);
    let q = rt.create_queue(QueueConfig::default());
    let last = pf.pack().find("blob6").unwrap();
    enqueue_blob(&q, &pf, last, HostMemory::new(fx.blobs[6].1.len()));
    let ok = HostMemory::new(fx.blobs[2].1.len());
    enqueue_blob(&q, &pf, pf.pack().find("blob2").unwrap(), ok.clone());
    assert!(submit_and_wait(&q, Duration::from_secs(60)));
    let rec = q.error_record();
    assert_eq!(rec.failure_count, 1, "{open_mode:?}");
    let first = rec.first_failure.expect("the failure is recorded");
    let msg = first.error.to_string();
    // The first block past the cut reads short (or not at all) and the
    // error says which file and where.
    assert!(
        matches!(
            &*first.error,
            RequestError::ShortRead { .. } | RequestError::Pack(_)
        ),
        "{open_mode:?}: {msg}"
    );
    assert!(
        msg.contains(&fx.path.display().to_string()) || msg.contains("blob6"),
        "{open_mode:?}: the error names the pack or asset: {msg}"
    );
    assert!(ok.to_vec().unwrap() == fx.blobs[2].1, "{open_mode:?}");
}

/// A pack read through its mapping, cut shorter and then restored while
/// open: the read that faulted past the cut has marked the mapping, whose
/// pages there now read as zeros, so from then on the blocks are read with
/// `pread`, which sees the restored file, and arrive right.
#[test]
fn a_pack_cut_and_restored_while_open_reads_right_again() {
    let fx = blob_pack(Codec::Lz4);
    let whole = std::fs::read(&fx.path).unwrap();
    let rt = mapped_cpu_runtime();
    let pf = rt.open_pack(&fx.path).unwrap();
    let last = pf.pack().find("blob6").unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let read_blob6 = || {
        let m = HostMemory::new(fx.blobs[6].1.len());
        enqueue_blob(&q, &pf, last, m.clone());
        assert!(submit_and_wait(&q, Duration::from_secs(60)));
        m
    };
    cut_inside_blob6(&fx.path, &pf, whole.len() as u64);
    read_blob6();
    assert_eq!(q.error_record().failure_count, 1, "the cut fails blob6");
    std::fs::write(&fx.path, &whole).unwrap();
    let m = read_blob6();
    let rec = q.error_record();
    assert_eq!(
        rec.failure_count, 0,
        "the restored pack reads without a failure: {:?}",
        rec.first_failure
    );
    assert!(m.to_vec().unwrap() == fx.blobs[6].1);
}

/// The fault-injection sweep: random request mixes over seeded faults
/// (short reads, EIO, EINTR, delays, reordering) and random cancellation,
/// on both backends.
#[test]
fn fault_injection_keeps_every_promise_over_1000_seeds() {
    let fx = blob_pack(Codec::Lz4);
    let seeds: u64 = std::env::var("GPUSTREAM_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let (mut sweep_failed, mut sweep_delivered) = (0u64, 0u64);
    for seed in 0..seeds {
        let backend = if seed % 2 == 0 {
            BackendKind::Threads
        } else {
            BackendKind::Auto
        };
        let io = IoConfig::default()
            .with_backend(backend)
            .with_queue_depth(1 + (seed % 16) as usize)
            .with_fault(Some(FaultConfig::mixed(seed)));
        let rt = cpu_runtime(io);
        let pf = rt.open_pack(&fx.path).unwrap();
        let q = rt.create_queue(QueueConfig::default());
        let mut rng = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let n = 4 + (next() % 12) as usize;
        let per_request = StatusArray::new(n);
        let mut reqs = Vec::new();
        // Fences after every few requests; each callback checks that every
        // request before it has released its memory (= has finished).
        let fence = Fence::new();
        let ran_ahead = Arc::new(AtomicBool::new(false));
        let last_value = Arc::new(AtomicU64::new(0));
        let mut signals = 0u64;
        let finished_before: Arc<Mutex<Vec<(HostMemory, usize)>>> =
            Arc::new(Mutex::new(Vec::new()));
        // Requests enqueued before the last submit ahead of `cancel` may
        // have finished (or failed) before it.
        let mut submitted_upto = 0;
        for i in 0..n {
            let (name, data) = &fx.blobs[(next() % fx.blobs.len() as u64) as usize];
            let asset = pf.pack().find(name).unwrap();
            let range = if data.len() > 2 && next() % 3 == 0 {
                let a = next() % data.len() as u64;
                let b = a + next() % (data.len() as u64 - a);
                Some(a..b)
            } else {
                None
            };
            let r = range.clone().unwrap_or(0..data.len() as u64);
            let mem = HostMemory::new((r.end - r.start) as usize);
            let tag = next() % 4;
            q.enqueue(
                Request::new(
                    Source::Blob {
                        pack: pf.clone(),
                        asset,
                        range,
                    },
                    Destination::Memory {
                        memory: mem.clone(),
                        offset: 0,
                    },
                )
                .with_tag(tag)
                .with_name(format!("r{i}")),
            )
            .unwrap();
            q.enqueue_status(&per_request, i);
            finished_before
                .lock()
                .unwrap()
                .push((mem.clone(), mem.len()));
            reqs.push((mem, data[r.start as usize..r.end as usize].to_vec(), tag));
            if next() % 4 == 0 || i == n - 1 {
                signals += 1;
                let upto = i + 1;
                let fb = finished_before.clone();
                let bad = ran_ahead.clone();
                let lv = last_value.clone();
                let v = signals;
                fence.on_reached(v, move |reached| {
                    if lv.fetch_max(reached, Ordering::SeqCst) > reached {
                        bad.store(true, Ordering::SeqCst);
                    }
                    for (m, len) in fb.lock().unwrap().iter().take(upto) {
                        if m.with_bytes(0..*len, |_| ()).is_err() {
                            bad.store(true, Ordering::SeqCst);
                        }
                    }
                });
                q.enqueue_signal(&fence, v);
            }
            if next() % 5 == 0 {
                q.submit();
                submitted_upto = i + 1;
            }
        }
        let cancel_tag = next() % 8; // values 4..7 match nothing
        let cancel_early = next() % 2 == 0;
        if cancel_early {
            q.cancel(3, cancel_tag);
        }
        q.submit();
        if !cancel_early {
            q.cancel(3, cancel_tag);
        }
        assert!(
            fence.wait_timeout(signals, Duration::from_secs(60)),
            "seed {seed}: a fence never reached {signals}"
        );
        assert!(
            !ran_ahead.load(Ordering::SeqCst),
            "seed {seed}: a fence ran ahead of an unfinished request"
        );
        let st = q.stats();
        assert_eq!(
            st.completed + st.failed + st.cancelled,
            n as u64,
            "seed {seed}: every request ends once"
        );
        let mut first_failed = None;
        let mut failures = 0;
        for (i, (mem, want, tag)) in reqs.iter().enumerate() {
            let cancelled_unsubmitted =
                cancel_early && *tag & 3 == cancel_tag && i >= submitted_upto;
            match per_request.get(i) {
                StatusEntry::Pending => panic!("seed {seed}: request {i} never finished"),
                StatusEntry::Failed(f) => {
                    assert_eq!(
                        f.name.as_deref(),
                        Some(format!("r{i}").as_str()),
                        "seed {seed}"
                    );
                    assert!(
                        !cancelled_unsubmitted,
                        "seed {seed}: request {i}, cancelled before its submit, failed"
                    );
                    failures += 1;
                    first_failed.get_or_insert(i);
                    // The only fault that fails a request is the injected
                    // EIO (the others are retried or continued): the error
                    // is that read, naming the pack file.
                    assert_injected_eio(&f.error, &fx.path, seed, i);
                    assert_eq!(f.file.as_deref(), Some(fx.path.as_path()), "seed {seed}");
                }
                StatusEntry::Ok => {
                    // Ok: delivered, or cancelled (then untouched if cancelled
                    // before submit).
                    let got = mem.to_vec().unwrap();
                    if *tag & 3 == cancel_tag {
                        if cancelled_unsubmitted {
                            assert!(
                                got.iter().all(|&b| b == 0),
                                "seed {seed}: cancelled request {i} wrote"
                            );
                        }
                    } else {
                        assert!(
                            got == *want,
                            "seed {seed}: request {i} delivered wrong bytes"
                        );
                        sweep_delivered += 1;
                    }
                }
            }
        }
        sweep_failed += failures;
        let rec = q.error_record();
        assert_eq!(rec.failure_count, failures, "seed {seed}");
        assert_eq!(rec.failure_count, st.failed, "seed {seed}");
        if let Some(i) = first_failed {
            assert_eq!(
                rec.first_failure.unwrap().name.as_deref(),
                Some(format!("r{i}").as_str()),
                "seed {seed}: first failure in enqueue order"
            );
        }
    }
    // The faults must really have reached requests, and not all of them.
    eprintln!("fault sweep: {sweep_failed} requests failed, {sweep_delivered} delivered");
    assert!(sweep_failed > 0, "no injected fault failed any request");
    assert!(
        sweep_delivered > sweep_failed,
        "{sweep_failed} failed, {sweep_delivered} delivered"
    );
}

/// `error` is the injected EIO on a read of `pack`.
fn assert_injected_eio(error: &RequestError, pack: &Path, seed: u64, i: usize) {
    let RequestError::Io(io) = error else {
        panic!("seed {seed}: request {i} failed with {error}, not the injected EIO");
    };
    match &**io {
        gpustream::io::IoError::Read { path, source, .. } => {
            assert_eq!(path, pack, "seed {seed}: request {i}");
            assert_eq!(
                source.raw_os_error(),
                Some(libc::EIO),
                "seed {seed}: {error}"
            );
        }
        other => panic!("seed {seed}: request {i} failed with {other}, not the injected EIO"),
    }
    let msg = error.to_string();
    let name = pack.file_name().unwrap().to_string_lossy();
    assert!(msg.contains(&*name) && msg.contains("offset"), "{msg}");
}

// ---------------------------------------------------------------- GPU --

/// Each texture's name, format, size and mips' bytes.
type Textures = Vec<(String, TextureFormat, u32, u32, Vec<Vec<u8>>)>;

fn texture_pack(dir: &Path, codec: Codec) -> (std::path::PathBuf, Textures) {
    texture_pack_with(dir, codec, 0, false)
}

/// BC-like texel blocks: 8 bytes of endpoints that drift slowly from one
/// block to the next, 8 bytes of noisy indices. Stored field by field they
/// compress far better, so the packer conditions them.
fn bc_like(seed: u64, len: usize) -> Vec<u8> {
    // Index-like noise: no runs for an LZ coder to find in the plain
    // interleaving (as in real BC7 indices).
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| match i % 16 {
            k @ 0..8 => ((i / 16 / 64) as u8).wrapping_add(k as u8 * 31),
            _ => {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            }
        })
        .collect()
}

/// [`texture_pack`] with LZ4 cut into sub-blocks of `sub_block` bytes, and
/// with `condition`, BC-like BC7 data packed with BCn conditioning.
fn texture_pack_with(
    dir: &Path,
    codec: Codec,
    sub_block: u32,
    condition: bool,
) -> (std::path::PathBuf, Textures) {
    let path = dir.join("textures.gspk");
    let mut w = PackWriter::create(
        &path,
        WriterOptions::default()
            .with_codec(codec)
            .with_level(3)
            .with_threads(1)
            .with_lz4_sub_block(sub_block)
            .with_condition(condition),
    )
    .unwrap();
    let mut textures = Vec::new();
    for (name, format, width, height) in [
        ("bc7", TextureFormat::Bc7, 640u32, 384u32),
        ("rgba8", TextureFormat::Rgba8Unorm, 300, 200),
    ] {
        let mut mips = Vec::new();
        let (mut mw, mut mh) = (width, height);
        let mut m = 0;
        loop {
            let size = format.data_size(mw, mh) as usize;
            mips.push(match condition && format.is_compressed() {
                true => bc_like(1000 + m, size),
                false => content(1000 + m, size),
            });
            if mw == 1 && mh == 1 || (format.is_compressed() && mw <= 4 && mh <= 4) {
                break;
            }
            mw = (mw / 2).max(1);
            mh = (mh / 2).max(1);
            m += 1;
        }
        w.add_texture(name, format, width, height, &mips).unwrap();
        textures.push((name.to_string(), format, width, height, mips));
    }
    w.add_blob("mesh", &content(77, 200_004)).unwrap();
    // Incompressible, so it is stored as is and stages 1 MiB at once.
    let mut x = 88172645463325252u64;
    let noise: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    w.add_blob("big", &noise).unwrap();
    w.finish().unwrap();
    (path, textures)
}

fn read_texture_mip(
    ctx: &gpustream_tools::gpu::GpuContext,
    tex: &wgpu::Texture,
    mip: u32,
    format: TextureFormat,
) -> Vec<u8> {
    let (w, h) = ((tex.width() >> mip).max(1), (tex.height() >> mip).max(1));
    let wf = format.wgpu();
    let (bw, bh) = wf.block_dimensions();
    let row = w.div_ceil(bw) * wf.block_copy_size(None).unwrap();
    let rows = h.div_ceil(bh);
    let pitch = row.next_multiple_of(256);
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: (pitch * rows) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture: tex,
            mip_level: mip,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &buf,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(pitch),
                rows_per_image: Some(rows),
            },
        },
        wgpu::Extent3d {
            width: w.next_multiple_of(bw),
            height: h.next_multiple_of(bh),
            depth_or_array_layers: 1,
        },
    );
    ctx.queue.submit([enc.finish()]);
    buf.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let view = buf.slice(..).get_mapped_range().unwrap();
    let mut out = Vec::with_capacity((row * rows) as usize);
    for r in 0..rows as usize {
        out.extend_from_slice(&view[r * pitch as usize..r * pitch as usize + row as usize]);
    }
    out
}

fn stream_textures(
    ctx: &gpustream_tools::gpu::GpuContext,
    codec: Codec,
    gpu_decompression: bool,
    staging: u64,
    stored_copy_on_gpu: Option<bool>,
) {
    stream_textures_with(
        ctx,
        codec,
        0,
        gpu_decompression,
        staging,
        stored_copy_on_gpu,
        None,
        false,
        false,
    )
}

#[allow(clippy::too_many_arguments)]
fn stream_textures_with(
    ctx: &gpustream_tools::gpu::GpuContext,
    codec: Codec,
    sub_block: u32,
    gpu_decompression: bool,
    staging: u64,
    stored_copy_on_gpu: Option<bool>,
    lz4_decode_path: Option<Lz4DecodePath>,
    condition: bool,
    striped: bool,
) {
    let dir = tempfile::tempdir().unwrap();
    let (mut path, textures) = texture_pack_with(dir.path(), codec, sub_block, condition);
    if striped {
        // Over three directories in the smallest stripe unit, so that
        // every texture's tiles come from every member.
        let dirs: Vec<_> = (0..3)
            .map(|k| dir.path().join(format!("disk{k}")))
            .collect();
        for d in &dirs {
            std::fs::create_dir(d).unwrap();
        }
        let head = dirs[0].join("textures.gspk");
        let members = [
            dirs[1].join("textures.gspk.1"),
            dirs[2].join("textures.gspk.2"),
        ];
        let unit = gpustream::pack::stripe::MIN_UNIT;
        gpustream::pack::stripe::stripe_pack(&path, &head, &members, unit).unwrap();
        path = head;
    }
    if sub_block > 0 {
        let pack = gpustream::pack::Pack::open(&path).unwrap();
        assert!(pack.blocks().iter().any(|b| b.sub_blocks > 0));
    }
    // zstd finds most of what the split exposes by itself: its blocks
    // are rarely conditioned, LZ4's and GDeflate's mostly.
    let conditioned = gpustream::pack::Pack::open(&path)
        .unwrap()
        .blocks()
        .iter()
        .filter(|b| b.transform != gpustream::pack::BlockTransform::None)
        .count();
    if condition && matches!(codec, Codec::Lz4 | Codec::GDeflate) {
        assert!(conditioned > 4, "{codec}: {conditioned} conditioned blocks");
    }
    let rt = Runtime::new(
        &ctx.device,
        &ctx.queue,
        RuntimeConfig::default()
            .with_staging_size(staging)
            .with_gpu_decompression(gpu_decompression)
            .with_stored_copy_on_gpu(stored_copy_on_gpu)
            .with_cpu_threads(2)
            .with_lz4_decode_path(lz4_decode_path),
    )
    .unwrap();
    if let Some(path) = lz4_decode_path.filter(|_| gpu_decompression) {
        assert_eq!(rt.lz4_decode_path(), Some(path));
    }
    if gpu_decompression {
        assert_eq!(rt.compression_support(Codec::Lz4), CompressionSupport::Gpu);
    } else {
        assert_eq!(rt.compression_support(Codec::Lz4), CompressionSupport::Cpu);
    }
    let pf = rt.open_pack(&path).unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let mut gpu_textures = Vec::new();
    for (name, format, width, height, mips) in &textures {
        let asset = pf.pack().find(name).unwrap();
        if format.is_compressed()
            && !common::test_supports(ctx, gpustream_tools::gpu::Capability::BcReadback)
        {
            continue;
        }
        let tex = ctx.device.create_texture(&wgpu::TextureDescriptor {
            label: Some(name),
            size: wgpu::Extent3d {
                width: *width,
                height: *height,
                depth_or_array_layers: 1,
            },
            mip_level_count: mips.len() as u32,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: format.wgpu(),
            usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        for mip in 0..mips.len() as u8 {
            if let Some((tx, ty)) = pf.pack().tile_grid(asset, mip).unwrap() {
                for y in 0..ty {
                    for x in 0..tx {
                        let region = pf.pack().tile_region(asset, mip, x, y).unwrap();
                        q.enqueue(Request::new(
                            Source::Tile {
                                pack: pf.clone(),
                                asset,
                                mip,
                                x,
                                y,
                            },
                            Destination::Texture {
                                texture: tex.clone(),
                                mip: mip as u32,
                                origin: wgpu::Origin3d {
                                    x: region.x,
                                    y: region.y,
                                    z: 0,
                                },
                                extent: None,
                            },
                        ))
                        .unwrap();
                    }
                }
            }
        }
        let packed = pf.pack().packed_mips(asset).unwrap();
        if let Some(first) = packed.mips.first() {
            q.enqueue(Request::new(
                Source::PackedMips {
                    pack: pf.clone(),
                    asset,
                },
                Destination::Texture {
                    texture: tex.clone(),
                    mip: first.mip as u32,
                    origin: wgpu::Origin3d::ZERO,
                    extent: None,
                },
            ))
            .unwrap();
        }
        gpu_textures.push((tex, *format, mips.clone(), name.clone()));
    }
    // A blob into a buffer at an offset, through the same queue.
    let mesh = pf.pack().find("mesh").unwrap();
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("mesh"),
        size: 200_004 + 256,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    q.enqueue(Request::new(
        Source::Blob {
            pack: pf.clone(),
            asset: mesh,
            range: None,
        },
        Destination::Buffer {
            buffer: buf.clone(),
            offset: 256,
        },
    ))
    .unwrap();
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    q.submit();
    assert!(
        f.wait_timeout(1, Duration::from_secs(120)),
        "fence never reached"
    );
    let rec = q.error_record();
    assert_eq!(
        rec.failure_count,
        0,
        "{:?}",
        rec.first_failure.map(|f| f.to_string())
    );
    for (tex, format, mips, name) in &gpu_textures {
        for (m, want) in mips.iter().enumerate() {
            let got = read_texture_mip(ctx, tex, m as u32, *format);
            assert!(
                got == *want,
                "{name} mip {m} differs ({codec}, gpu decode {gpu_decompression})"
            );
        }
    }
    let rb = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 200_004 + 256,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(&buf, 0, &rb, 0, 200_004 + 256);
    ctx.queue.submit([enc.finish()]);
    rb.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let view = rb.slice(..).get_mapped_range().unwrap();
    assert!(
        view[256..256 + 200_004] == content(77, 200_004)[..],
        "mesh blob differs"
    );
    let st = q.stats();
    if gpu_decompression && codec == Codec::Lz4 {
        assert!(
            st.blocks_gpu_decoded > 0,
            "LZ4 blocks went to the GPU decoder"
        );
    }
    // Where the GPU decodes the codec, no CPU thread decodes a block:
    // tiles, packed mips (read back exact above) and the buffer's blob.
    if gpu_decompression && matches!(codec, Codec::Lz4 | Codec::GDeflate) {
        assert_eq!(st.blocks_cpu_decompressed, 0, "{codec}: {st:?}");
        assert_eq!(st.bytes_cpu_decompressed, 0, "{codec}: {st:?}");
    }
    if codec == Codec::GDeflate {
        assert_eq!(
            st.blocks_gpu_gdeflate > 0,
            gpu_decompression,
            "GDeflate pages went to the GPU decoder: {st:?}"
        );
        // The decoder the runtime says it chose is the one that ran: the
        // driver's where it is asked for and the device has it enabled
        // (tools open devices with it where the driver offers it), else
        // WGSL, the default.
        use gpustream::decode::gpu::driver_gdeflate;
        use gpustream::decode::gpu::GDeflateDecoderKind;
        let choice = rt.gdeflate_decoder().cloned();
        if gpu_decompression {
            let choice = choice.expect("a GDeflate decoder on the GPU");
            let enabled = driver_gdeflate::enabled_extension(&ctx.device);
            // This runtime's configuration asks for the default, WGSL; the
            // driver's decoder runs only where a configuration asks for it
            // (the library reads no environment).
            let _ = enabled;
            assert_eq!(choice.kind, GDeflateDecoderKind::Wgsl, "{choice}");
            let driver_ran = matches!(choice.kind, GDeflateDecoderKind::Driver(_));
            assert_eq!(st.gdeflate_driver_pages > 0, driver_ran, "{choice}: {st:?}");
        } else {
            assert!(choice.is_none());
        }
    }
    // Conditioned texture blocks are put back in order on the GPU when it
    // decodes LZ4, by the CPU threads otherwise. (An adapter that cannot
    // read BC textures back, such as GL on llvmpipe, streams none of them.)
    let bc_streamed = ctx
        .lacks(gpustream_tools::gpu::Capability::BcReadback)
        .is_none();
    if condition && matches!(codec, Codec::Lz4 | Codec::GDeflate) && bc_streamed {
        assert_eq!(st.blocks_gpu_unconditioned > 0, gpu_decompression, "{st:?}");
    }
    assert_eq!(st.completed, st.requests);
}

#[test]
fn textures_and_buffers_stream_tile_by_tile_on_the_gpu() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    eprintln!("adapter: {}", ctx.describe());
    // GPU LZ4 decode, CPU LZ4 decode, zstd on CPU, stored blocks copied;
    // the small staging buffer forces many chunk cycles. Stored blocks and
    // CPU output go through the GPU's stored-copy pass into mip-shaped
    // regions (the layout on hardware adapters), and laid out by the CPU
    // for plain copies (the layout on software adapters).
    for on_gpu in [Some(true), Some(false)] {
        stream_textures(&ctx, Codec::Lz4, true, 1 << 20, on_gpu);
        stream_textures(&ctx, Codec::Lz4, false, 32 << 20, on_gpu);
        stream_textures(&ctx, Codec::Zstd, true, 4 << 20, on_gpu);
        stream_textures(&ctx, Codec::None, true, 2 << 20, on_gpu);
        // LZ4 in 16 KiB sub-blocks: each decoded to its own rows on the
        // GPU, and on CPU threads.
        stream_textures_with(
            &ctx,
            Codec::Lz4,
            16 << 10,
            true,
            1 << 20,
            on_gpu,
            None,
            false,
            false,
        );
        stream_textures_with(
            &ctx,
            Codec::Lz4,
            16 << 10,
            false,
            4 << 20,
            on_gpu,
            None,
            false,
            false,
        );
        // BCn-conditioned blocks, whole and in sub-blocks, on both paths:
        // every destination sees the texture's own bytes.
        stream_textures_with(
            &ctx,
            Codec::Lz4,
            0,
            true,
            1 << 20,
            on_gpu,
            None,
            true,
            false,
        );
        stream_textures_with(
            &ctx,
            Codec::Lz4,
            16 << 10,
            true,
            2 << 20,
            on_gpu,
            None,
            true,
            false,
        );
        stream_textures_with(
            &ctx,
            Codec::Zstd,
            0,
            false,
            4 << 20,
            on_gpu,
            None,
            true,
            false,
        );
        // GDeflate pages: the WGSL decoder, plain and conditioned (the pass
        // after it puts them back in order), and the CPU threads.
        stream_textures(&ctx, Codec::GDeflate, true, 1 << 20, on_gpu);
        stream_textures_with(
            &ctx,
            Codec::GDeflate,
            0,
            true,
            2 << 20,
            on_gpu,
            None,
            true,
            false,
        );
        stream_textures_with(
            &ctx,
            Codec::GDeflate,
            0,
            false,
            4 << 20,
            on_gpu,
            None,
            true,
            false,
        );
        // A pack striped over three files: tiles, packed mips and the
        // buffer blob come from every member, GPU- and CPU-decoded.
        stream_textures_with(&ctx, Codec::Lz4, 0, true, 1 << 20, on_gpu, None, true, true);
        stream_textures_with(
            &ctx,
            Codec::Zstd,
            0,
            false,
            4 << 20,
            on_gpu,
            None,
            false,
            true,
        );
    }
}

/// Every variant of the GPU LZ4 decoder the device runs delivers the same
/// textures and buffers through the runtime (`RuntimeConfig::lz4_decode_path`),
/// whole 64 KiB blocks and 16 KiB sub-blocks; one the device cannot run
/// (subgroups missing, or a subgroup size the pair cannot use) is refused
/// by name.
#[test]
fn every_gpu_lz4_decoder_streams_through_the_runtime() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    for path in Lz4DecodePath::ALL {
        if let Err(why) = Lz4DecodePipeline::with_path(&ctx.device, path) {
            eprintln!("!!! {} not run on {}: {why}", path.name(), ctx.describe());
            let refused = Runtime::new(
                &ctx.device,
                &ctx.queue,
                RuntimeConfig::default().with_lz4_decode_path(Some(path)),
            );
            match refused {
                Err(e) => assert!(e.to_string().contains(path.name()), "{e}"),
                Ok(_) => panic!("{} accepted without subgroups", path.name()),
            }
            continue;
        }
        eprintln!("{} on {}", path.name(), ctx.describe());
        stream_textures_with(
            &ctx,
            Codec::Lz4,
            0,
            true,
            2 << 20,
            Some(true),
            Some(path),
            false,
            false,
        );
        stream_textures_with(
            &ctx,
            Codec::Lz4,
            16 << 10,
            true,
            2 << 20,
            Some(true),
            Some(path),
            false,
            false,
        );
        // Conditioned blocks through each variant: the LZ4 pass writes
        // them in their conditioned order, the pass after it puts them back.
        stream_textures_with(
            &ctx,
            Codec::Lz4,
            0,
            true,
            2 << 20,
            Some(true),
            Some(path),
            true,
            false,
        );
    }
}

/// A blob whose size is not a multiple of 4 and a texture's packed mips
/// reach GPU buffers through the GPU passes (stored and LZ4 blocks alike)
/// with the bytes past the data's last word zeroed, whatever the buffer
/// held before; packed mips land in a buffer as their stream, as in host
/// memory. A blob of 40 blocks with `direct_buffer_blocks` 16 is written
/// by the passes straight into its buffer, the same bytes.
#[test]
fn odd_sized_blobs_and_packed_mips_reach_gpu_buffers() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    for codec in [Codec::None, Codec::Lz4, Codec::GDeflate] {
        for on_gpu in [Some(true), Some(false)] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("odd.gspk");
            let data = content(5, 100_003);
            let mips: Vec<Vec<u8>> = [(300u32, 200u32), (150, 100), (75, 50), (37, 25)]
                .iter()
                .enumerate()
                .map(|(i, &(w, h))| content(40 + i as u64, (w * h * 4) as usize))
                .collect();
            let mut w = writer(&path, codec);
            w.add_blob("odd", &data).unwrap();
            let big = content(6, 40 * 65536 + 3);
            w.add_blob("big", &big).unwrap();
            w.add_texture("tex", TextureFormat::Rgba8Unorm, 300, 200, &mips)
                .unwrap();
            w.finish().unwrap();
            let rt = Runtime::new(
                &ctx.device,
                &ctx.queue,
                RuntimeConfig::default()
                    .with_stored_copy_on_gpu(on_gpu)
                    .with_cpu_threads(2)
                    .with_direct_buffer_blocks(16)
                    .with_staging_size(16 << 20),
            )
            .unwrap();
            let pf = rt.open_pack(&path).unwrap();
            let tex = pf.pack().find("tex").unwrap();
            let big_id = pf.pack().find("big").unwrap();
            let big_buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("big"),
                size: 512 + (big.len() as u64).next_multiple_of(4) + 256,
                usage: wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            ctx.queue
                .write_buffer(&big_buf, 0, &vec![0xCD; big_buf.size() as usize]);
            let stream: Vec<u8> = mips[1..].concat();
            let odd = pf.pack().find("odd").unwrap();
            let size = 256 + 100_004 + 256 + stream.len() as u64;
            let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("odd"),
                size: size.next_multiple_of(4),
                usage: wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            ctx.queue
                .write_buffer(&buf, 0, &vec![0xAB; size.next_multiple_of(4) as usize]);
            let q = rt.create_queue(QueueConfig::default());
            q.enqueue(Request::new(
                Source::blob(&pf, odd),
                Destination::Buffer {
                    buffer: buf.clone(),
                    offset: 256,
                },
            ))
            .unwrap();
            let packed_at = 256 + 100_004 + 256;
            q.enqueue(Request::new(
                Source::PackedMips {
                    pack: pf.clone(),
                    asset: tex,
                },
                Destination::Buffer {
                    buffer: buf.clone(),
                    offset: packed_at,
                },
            ))
            .unwrap();
            q.enqueue(Request::new(
                Source::blob(&pf, big_id),
                Destination::Buffer {
                    buffer: big_buf.clone(),
                    offset: 512,
                },
            ))
            .unwrap();
            assert!(submit_and_wait(&q, Duration::from_secs(120)));
            let rec = q.error_record();
            assert_eq!(
                rec.failure_count,
                0,
                "{:?}",
                rec.first_failure.map(|f| f.to_string())
            );
            let got = read_buffer(&ctx, &buf);
            let what = format!("{codec}, stored copy on GPU {on_gpu:?}");
            assert!(got[256..256 + 100_003] == data[..], "{what}: blob differs");
            assert_eq!(got[256 + 100_003], 0, "{what}: padding not zeroed");
            assert_eq!(got[255], 0xAB, "{what}: wrote before the blob");
            assert_eq!(got[256 + 100_004], 0xAB, "{what}: wrote past the blob");
            let p = packed_at as usize;
            assert!(
                got[p..p + stream.len()] == stream[..],
                "{what}: packed mips differ"
            );
            let got = read_buffer(&ctx, &big_buf);
            let end = 512 + big.len();
            assert!(got[512..end] == big[..], "{what}: big blob differs");
            assert_eq!(got[end], 0, "{what}: big blob's padding not zeroed");
            assert_eq!(got[511], 0xCD, "{what}: wrote before the big blob");
            assert_eq!(got[end + 1], 0xCD, "{what}: wrote past the big blob's word");
            // The GPU passes deliver it straight into its buffer, except
            // where the CPU lays stored blocks out for plain copies.
            let passes = codec != Codec::None || on_gpu == Some(true);
            assert_eq!(
                q.stats().direct_buffer_bytes > 0,
                passes,
                "{what}: direct writes"
            );
        }
    }
}

fn read_buffer(ctx: &gpustream_tools::gpu::GpuContext, buf: &wgpu::Buffer) -> Vec<u8> {
    let rb = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: buf.size(),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buf, 0, &rb, 0, buf.size());
    ctx.queue.submit([enc.finish()]);
    rb.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let view = rb.slice(..).get_mapped_range().unwrap();
    view.to_vec()
}

#[test]
fn gpu_destination_validation_comes_back_from_enqueue() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = texture_pack(dir.path(), Codec::Lz4);
    let rt = Runtime::new(&ctx.device, &ctx.queue, RuntimeConfig::default()).unwrap();
    let pf = rt.open_pack(&path).unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let rgba = pf.pack().find("rgba8").unwrap();
    let wrong = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: None,
        size: wgpu::Extent3d {
            width: 128,
            height: 128,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::R8Unorm,
        usage: wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    let tile = |texture: &wgpu::Texture, x: u32| {
        Request::new(
            Source::Tile {
                pack: pf.clone(),
                asset: rgba,
                mip: 0,
                x: 0,
                y: 0,
            },
            Destination::Texture {
                texture: texture.clone(),
                mip: 0,
                origin: wgpu::Origin3d { x, y: 0, z: 0 },
                extent: None,
            },
        )
    };
    assert!(matches!(
        q.enqueue(tile(&wrong, 0)),
        Err(RequestError::Texture(_))
    ));
    let small = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: None,
        size: wgpu::Extent3d {
            width: 128,
            height: 128,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    assert!(q.enqueue(tile(&small, 0)).is_ok());
    assert!(
        matches!(q.enqueue(tile(&small, 64)), Err(RequestError::Texture(_))),
        "out of bounds"
    );
    let e = q.enqueue(Request::new(
        Source::Tile {
            pack: pf.clone(),
            asset: rgba,
            mip: 0,
            x: 99,
            y: 0,
        },
        Destination::Texture {
            texture: small.clone(),
            mip: 0,
            origin: wgpu::Origin3d::ZERO,
            extent: None,
        },
    ));
    assert!(matches!(e, Err(RequestError::Pack(_))), "no such tile");
    let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 1000,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mesh = pf.pack().find("mesh").unwrap();
    let e = q.enqueue(Request::new(
        Source::Blob {
            pack: pf.clone(),
            asset: mesh,
            range: None,
        },
        Destination::Buffer {
            buffer: buf,
            offset: 0,
        },
    ));
    assert!(matches!(e, Err(RequestError::DestinationTooSmall { .. })));
    // Buffers: COPY_DST, 4-byte offsets, blob ranges from a multiple of 4.
    use gpustream::pack::AssetKind;
    use gpustream::runtime::{BufferProblem, SourceProblem};
    let buffer = |usage| {
        ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 1 << 20,
            usage,
            mapped_at_creation: false,
        })
    };
    let into = |buffer: wgpu::Buffer, offset: u64, range: Option<std::ops::Range<u64>>| {
        q.enqueue(Request::new(
            Source::Blob {
                pack: pf.clone(),
                asset: mesh,
                range,
            },
            Destination::Buffer { buffer, offset },
        ))
        .expect_err("must be refused")
    };
    let e = into(buffer(wgpu::BufferUsages::STORAGE), 0, None);
    assert!(
        matches!(e, RequestError::BadBuffer(BufferProblem::NoCopyDst)),
        "{e:?}"
    );
    let e = into(buffer(wgpu::BufferUsages::COPY_DST), 6, None);
    assert!(
        matches!(
            e,
            RequestError::BadBuffer(BufferProblem::UnalignedOffset { offset: 6 })
        ),
        "{e:?}"
    );
    let e = into(buffer(wgpu::BufferUsages::COPY_DST), 0, Some(2..100));
    assert!(
        matches!(
            e,
            RequestError::BadBuffer(BufferProblem::UnalignedRange { start: 2 })
        ),
        "{e:?}"
    );
    // A texture asked for as a blob.
    let e = q
        .enqueue(Request::new(
            Source::blob(&pf, rgba),
            Destination::Buffer {
                buffer: buffer(wgpu::BufferUsages::COPY_DST),
                offset: 0,
            },
        ))
        .expect_err("must be refused");
    assert!(
        matches!(&e, RequestError::InvalidSource(SourceProblem::WrongAssetKind { asset, expected: AssetKind::Blob }) if asset == "rgba8"),
        "{e:?}"
    );
    // A request larger than the staging buffer.
    let rt2 = Runtime::new(
        &ctx.device,
        &ctx.queue,
        RuntimeConfig::default().with_staging_size(256 << 10),
    )
    .unwrap();
    let pf2 = rt2.open_pack(&path).unwrap();
    let q2 = rt2.create_queue(QueueConfig::default());
    let big = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 1 << 20,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let noise = pf2.pack().find("big").unwrap();
    let e = q2.enqueue(Request::new(
        Source::Blob {
            pack: pf2.clone(),
            asset: noise,
            range: None,
        },
        Destination::Buffer {
            buffer: big,
            offset: 0,
        },
    ));
    assert!(
        matches!(e, Err(RequestError::StagingTooSmall { .. })),
        "{:?}",
        e.err().map(|e| e.to_string())
    );
    let _: Option<AssetId> = None;
    assert!(submit_and_wait(&q, Duration::from_secs(60)));
}

/// A mip larger than a batch: with 512 KiB of staging a batch holds a few
/// of its 64 KiB tiles, so batches end inside rows of tiles, where the
/// runtime holds the unfinished row back for the next batch (its bytes
/// copied from one batch's input to the other's). Every texel arrives,
/// whatever the cuts: LZ4 decoded on the GPU, stored blocks through the
/// GPU's copy pass, CPU-decoded LZ4 laid out by the CPU.
#[test]
fn a_mip_cut_by_many_full_batches_arrives_whole() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    let st = stream_big_texture(&ctx, Codec::Lz4, true, None, false);
    assert!(st.blocks_gpu_decoded > 0);
    // How many parts are held back depends on where the batches are cut,
    // which depends on how reads and flushes interleave; some always are
    // (4 to 17 over runs on lavapipe and llvmpipe GL, one core or two).
    assert!(
        st.texture_parts_held_back > 0,
        "no unfinished row was held back"
    );
    stream_big_texture(&ctx, Codec::None, true, Some(true), false);
    stream_big_texture(&ctx, Codec::Lz4, false, Some(false), false);
}

/// The same, with each mip's rows of tiles enqueued bottom row first. The
/// runtime reads each turn's parts in file order (top row first), so a
/// mip's tiles reach the batches out of order and a batch's part of a mip
/// can have holes; whatever a cut batch then holds back for the next
/// (`gpu_batch/hold_back.rs`), every mip must still read back equal. (How
/// many copies that takes depends on where the cuts fall, which depends
/// on timing, so it is not asserted; `gpustream bench --sustained` counts
/// them.)
#[test]
fn a_mip_enqueued_bottom_up_through_small_staging_arrives_whole() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    let st = stream_big_texture(&ctx, Codec::Lz4, true, None, true);
    assert!(st.blocks_gpu_decoded > 0);
    stream_big_texture(&ctx, Codec::None, true, Some(true), true);
}

/// Streams every mip of a 1024x512 RGBA8 texture through 512 KiB of
/// staging (each mip's rows of tiles bottom first with `bottom_up`),
/// checks each reads back equal, and returns the queue's stats.
fn stream_big_texture(
    ctx: &gpustream_tools::gpu::GpuContext,
    codec: Codec,
    gpu_decompression: bool,
    stored_copy_on_gpu: Option<bool>,
    bottom_up: bool,
) -> gpustream::runtime::QueueStats {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.gspk");
    let mut w = writer(&path, codec);
    let (width, height) = (1024u32, 512u32);
    let format = TextureFormat::Rgba8Unorm;
    let mut mips = Vec::new();
    let (mut mw, mut mh) = (width, height);
    for m in 0.. {
        mips.push(content(500 + m, format.data_size(mw, mh) as usize));
        if mw == 1 && mh == 1 {
            break;
        }
        (mw, mh) = ((mw / 2).max(1), (mh / 2).max(1));
    }
    w.add_texture("big", format, width, height, &mips).unwrap();
    w.finish().unwrap();
    let rt = Runtime::new(
        &ctx.device,
        &ctx.queue,
        RuntimeConfig::default()
            .with_staging_size(512 << 10)
            // Batches as small as staging: the mips are cut by many.
            .with_gpu_batch_size(512 << 10)
            .with_gpu_decompression(gpu_decompression)
            .with_stored_copy_on_gpu(stored_copy_on_gpu)
            .with_cpu_threads(2),
    )
    .unwrap();
    let pf = rt.open_pack(&path).unwrap();
    let asset = pf.pack().find("big").unwrap();
    let tex = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("big"),
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: mips.len() as u32,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: format.wgpu(),
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let q = rt.create_queue(QueueConfig::default());
    for mip in 0..mips.len() as u8 {
        let Some((tx, ty)) = pf.pack().tile_grid(asset, mip).unwrap() else {
            continue;
        };
        for row in 0..ty {
            let y = if bottom_up { ty - 1 - row } else { row };
            for x in 0..tx {
                let region = pf.pack().tile_region(asset, mip, x, y).unwrap();
                let source = Source::Tile {
                    pack: pf.clone(),
                    asset,
                    mip,
                    x,
                    y,
                };
                let origin = wgpu::Origin3d {
                    x: region.x,
                    y: region.y,
                    z: 0,
                };
                let dest = Destination::Texture {
                    texture: tex.clone(),
                    mip: mip as u32,
                    origin,
                    extent: None,
                };
                q.enqueue(Request::new(source, dest)).unwrap();
            }
        }
    }
    if let Some(first) = pf.pack().packed_mips(asset).unwrap().mips.first() {
        let dest = Destination::Texture {
            texture: tex.clone(),
            mip: first.mip as u32,
            origin: wgpu::Origin3d::ZERO,
            extent: None,
        };
        let source = Source::PackedMips {
            pack: pf.clone(),
            asset,
        };
        q.enqueue(Request::new(source, dest)).unwrap();
    }
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    q.submit();
    assert!(
        f.wait_timeout(1, Duration::from_secs(120)),
        "fence never reached"
    );
    let rec = q.error_record();
    assert_eq!(
        rec.failure_count,
        0,
        "{:?}",
        rec.first_failure.map(|f| f.to_string())
    );
    for (m, want) in mips.iter().enumerate() {
        let got = read_texture_mip(ctx, &tex, m as u32, format);
        assert!(
            got == *want,
            "mip {m} differs ({codec}, gpu decode {gpu_decompression})"
        );
    }
    let st = q.stats();
    eprintln!(
        "{codec}: {} texture copies for {} mip submissions, {} parts held back",
        st.texture_copies, st.texture_mip_submissions, st.texture_parts_held_back
    );
    assert!(st.gpu_submits > 2, "the mips took several batches");
    st
}

/// Makes block `id`'s stored bytes in a pack file all 0xFF (an LZ4 stream
/// whose literals run past its end) and every checksum agree again, so
/// only the decoder can tell.
fn break_block(path: &Path, id: u32) {
    let pack = gpustream::pack::Pack::open(path).unwrap();
    let b = pack.blocks()[id as usize];
    drop(pack);
    let mut f = std::fs::read(path).unwrap();
    let range = b.offset as usize..(b.offset + b.stored_size as u64) as usize;
    f[range.clone()].fill(0xFF);
    let toc_at = u64::from_le_bytes(f[32..40].try_into().unwrap()) as usize;
    let crc = crc32c::crc32c(&f[range]);
    let entry = toc_at + id as usize * 16;
    f[entry + 8..entry + 12].copy_from_slice(&crc.to_le_bytes());
    let toc_crc = crc32c::crc32c(&f[toc_at..]);
    f[56..60].copy_from_slice(&toc_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&f[..60]);
    f[60..64].copy_from_slice(&header_crc.to_le_bytes());
    std::fs::write(path, f).unwrap();
}

#[test]
fn a_damaged_conditioned_tile_fails_alone_and_its_neighbours_arrive_whole() {
    // A BC7 texture of 4x2 tiles, conditioned, one tile's stream broken:
    // through the GPU path (LZ4 pass into the spare scratch, then the pass
    // that puts blocks back in order) that tile's request fails with
    // GpuDecode and the other seven tiles read back exactly.
    let Some(ctx) = common::test_device() else {
        return;
    };
    if !common::test_supports(&ctx, gpustream_tools::gpu::Capability::BcReadback) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cond.gspk");
    let (w, h) = (1024u32, 512u32);
    let format = TextureFormat::Bc7;
    let mip0 = bc_like(5, format.data_size(w, h) as usize);
    let mut wr = PackWriter::create(
        &path,
        WriterOptions::default()
            .with_codec(Codec::Lz4)
            .with_level(9)
            .with_threads(1)
            .with_condition(true),
    )
    .unwrap();
    wr.add_texture("t", format, w, h, std::slice::from_ref(&mip0))
        .unwrap();
    wr.finish().unwrap();
    let pack = gpustream::pack::Pack::open(&path).unwrap();
    let asset = pack.find("t").unwrap();
    let broken = pack.tile(asset, 0, 1, 0).unwrap();
    let tiles: Vec<_> = (0..2)
        .flat_map(|y| (0..4).map(move |x| (x, y)))
        .map(|(x, y)| (x, y, pack.tile(asset, 0, x, y).unwrap()))
        .collect();
    assert!(
        tiles
            .iter()
            .all(|t| pack.blocks()[t.2 .0 as usize].transform
                != gpustream::pack::BlockTransform::None)
    );
    drop(pack);
    break_block(&path, broken.0);

    let rt = Runtime::new(
        &ctx.device,
        &ctx.queue,
        RuntimeConfig::default()
            .with_staging_size(4 << 20)
            .with_cpu_threads(2),
    )
    .unwrap();
    assert_eq!(rt.compression_support(Codec::Lz4), CompressionSupport::Gpu);
    let pf = rt.open_pack(&path).unwrap();
    let tex = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("cond"),
        size: wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: format.wgpu(),
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let q = rt.create_queue(QueueConfig::default());
    let status = StatusArray::new(tiles.len());
    for (i, &(x, y, _)) in tiles.iter().enumerate() {
        let region = pf.pack().tile_region(asset, 0, x, y).unwrap();
        q.enqueue(Request::new(
            Source::Tile {
                pack: pf.clone(),
                asset,
                mip: 0,
                x,
                y,
            },
            Destination::Texture {
                texture: tex.clone(),
                mip: 0,
                origin: wgpu::Origin3d {
                    x: region.x,
                    y: region.y,
                    z: 0,
                },
                extent: None,
            },
        ))
        .unwrap();
        q.enqueue_status(&status, i);
    }
    let fence = Fence::new();
    q.enqueue_signal(&fence, 1);
    q.submit();
    assert!(fence.wait_timeout(1, Duration::from_secs(120)));
    let got = read_texture_mip(&ctx, &tex, 0, format);
    let row = format.data_size(w, 4) as usize;
    for (i, &(x, y, id)) in tiles.iter().enumerate() {
        match status.get(i) {
            StatusEntry::Failed(f) if id == broken => {
                assert!(
                    matches!(*f.error, RequestError::GpuDecode { .. }),
                    "{}",
                    f.error
                );
            }
            StatusEntry::Ok if id != broken => {
                // Tile (x, y): 64 block rows of 1,024 bytes.
                for r in 0..64 {
                    let at = (y as usize * 64 + r) * row + x as usize * 1024;
                    assert!(
                        got[at..at + 1024] == mip0[at..at + 1024],
                        "tile ({x},{y}) row {r}"
                    );
                }
            }
            other => panic!("tile ({x},{y}): {other:?}"),
        }
    }
    let st = q.stats();
    assert_eq!(st.blocks_gpu_unconditioned, tiles.len() as u64, "{st:?}");
}

/// Tiles and packed mips of every texture of an LZ4 pack into textures on
/// wgpu's noop backend, with `assume_discrete_gpu`: the stats of the host
/// side a discrete GPU would run (noop runs no shaders and stores nothing).
fn noop_discrete_stats(assume_discrete_gpu: bool, gpu_decompression: bool) -> QueueStats {
    let ctx = gpustream_tools::gpu::open_device_for(Some("noop")).expect("wgpu's noop backend");
    let dir = tempfile::tempdir().unwrap();
    let (path, textures) = texture_pack_with(dir.path(), Codec::Lz4, 0, true);
    let rt = Runtime::new(
        &ctx.device,
        &ctx.queue,
        RuntimeConfig::default()
            .with_cpu_threads(2)
            .with_gpu_decompression(gpu_decompression)
            .with_assume_discrete_gpu(assume_discrete_gpu)
            // noop leaves the checksum pass's status words unwritten.
            .with_verify_gpu_checksums(false),
    )
    .unwrap();
    let pf = rt.open_pack(&path).unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let mut packed_mips = 0;
    for (name, format, width, height, mips) in &textures {
        let asset = pf.pack().find(name).unwrap();
        let tex = ctx.device.create_texture(&wgpu::TextureDescriptor {
            label: Some(name),
            size: wgpu::Extent3d {
                width: *width,
                height: *height,
                depth_or_array_layers: 1,
            },
            mip_level_count: mips.len() as u32,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: format.wgpu(),
            usage: wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        for mip in 0..mips.len() as u8 {
            let Some((tx, ty)) = pf.pack().tile_grid(asset, mip).unwrap() else {
                continue;
            };
            for y in 0..ty {
                for x in 0..tx {
                    let region = pf.pack().tile_region(asset, mip, x, y).unwrap();
                    let source = Source::Tile {
                        pack: pf.clone(),
                        asset,
                        mip,
                        x,
                        y,
                    };
                    let origin = wgpu::Origin3d {
                        x: region.x,
                        y: region.y,
                        z: 0,
                    };
                    q.enqueue(Request::new(
                        source,
                        Destination::Texture {
                            texture: tex.clone(),
                            mip: mip as u32,
                            origin,
                            extent: None,
                        },
                    ))
                    .unwrap();
                }
            }
        }
        let packed = pf.pack().packed_mips(asset).unwrap();
        if let Some(first) = packed.mips.first() {
            packed_mips += 1;
            q.enqueue(Request::new(
                Source::PackedMips {
                    pack: pf.clone(),
                    asset,
                },
                Destination::Texture {
                    texture: tex.clone(),
                    mip: first.mip as u32,
                    origin: wgpu::Origin3d::ZERO,
                    extent: None,
                },
            ))
            .unwrap();
        }
    }
    assert!(packed_mips > 0, "the pack has packed mips");
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    q.submit();
    assert!(
        f.wait_timeout(1, Duration::from_secs(120)),
        "fence never reached"
    );
    let rec = q.error_record();
    assert_eq!(
        rec.failure_count,
        0,
        "{:?}",
        rec.first_failure.map(|f| f.to_string())
    );
    q.stats()
}

/// wgpu's noop backend reports a CPU adapter; told to stand in for a
/// discrete GPU it takes a discrete GPU's branches. With the GPU decoders
/// on, no block of an LZ4 texture pack is decoded on the CPU, packed mips
/// included. With them off, CPU threads decode into their own scratch and
/// write staging once (bytes counted as host copies), as a discrete GPU's
/// write-combined staging needs, where a CPU adapter's cached staging
/// takes the decode in place.
#[test]
fn noop_as_a_discrete_gpu_decodes_nothing_on_the_cpu() {
    let st = noop_discrete_stats(true, true);
    assert_eq!(st.blocks_cpu_decompressed, 0, "{st:?}");
    assert!(st.blocks_gpu_decoded > 0, "{st:?}");
    assert!(st.blocks_gpu_unconditioned > 0, "{st:?}");
    let discrete = noop_discrete_stats(true, false);
    let cpu_adapter = noop_discrete_stats(false, false);
    assert!(discrete.blocks_cpu_decompressed > 0, "{discrete:?}");
    assert_eq!(
        discrete.blocks_cpu_decompressed,
        cpu_adapter.blocks_cpu_decompressed
    );
    assert!(
        discrete.bytes_host_copied >= discrete.bytes_cpu_decompressed,
        "discrete: decoded into scratch, then written to staging once: {discrete:?}"
    );
    assert!(
        cpu_adapter.bytes_host_copied < discrete.bytes_host_copied,
        "a CPU adapter decodes into its cached staging in place: {cpu_adapter:?} vs {discrete:?}"
    );
}

/// Where the device was opened with `VK_EXT_external_memory_host` (the
/// tools and tests open Vulkan devices with it where the driver offers it,
/// as lavapipe does), staging chunks are host memory the runtime imported:
/// O_DIRECT reads land in it, and textures and buffers streamed through it
/// read back exact (`stream_textures` checks every mip and the buffer).
/// Turned off, the runtime keeps wgpu's own buffers and says why.
#[test]
fn staging_in_imported_host_memory_streams_exact() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    let rt = Runtime::new(&ctx.device, &ctx.queue, RuntimeConfig::default()).unwrap();
    let memory = rt.staging_memory().cloned().unwrap();
    drop(rt);
    eprintln!("staging: {memory}");
    let vulkan = ctx.adapter.get_info().backend == wgpu::Backend::Vulkan;
    if vulkan && std::env::var("GPUSTREAM_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        // CI's lavapipe offers the extension.
        assert!(
            matches!(memory, StagingMemory::ImportedHost { .. }),
            "{memory}"
        );
    }
    if !vulkan {
        // wgpu's own buffers, which every other test here streams through.
        assert!(matches!(memory, StagingMemory::Wgpu { .. }), "{memory}");
        return;
    }
    // Reads land in it straight from the disk (the pack is opened direct
    // where the filesystem allows), tiles, packed mips and a blob.
    stream_textures(&ctx, Codec::Lz4, true, 1 << 20, None);
    stream_textures(&ctx, Codec::Lz4, false, 1 << 20, None);
    let off = Runtime::new(
        &ctx.device,
        &ctx.queue,
        RuntimeConfig::default().with_import_staging_memory(false),
    )
    .unwrap();
    let memory = off.staging_memory().cloned().unwrap();
    assert!(
        matches!(&memory, StagingMemory::Wgpu { why } if why.contains("off")),
        "{memory}"
    );
}
