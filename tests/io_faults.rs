//! The fault-injecting backend over 1,000+ seeds on both backends: every
//! request completes exactly once, with the right bytes or a typed error
//! naming its file, offset and length, and nothing is written outside the
//! destination it was given (guard bytes around every destination).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use crossbeam::channel;
mod common;

use gpustream::io::{
    AlignedBuf, BackendKind, FaultConfig, IoConfig, IoEngine, IoError, IoFile, OpenMode, Priority,
    ReadOp,
};

const GUARD: u8 = 0xA5;
const FILE_LEN: usize = (1 << 20) + 4096 * 3 + 123; // unaligned tail

fn content(i: usize) -> u8 {
    let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 56) as u8 ^ (i as u8)
}

fn make_file(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("faults.bin");
    let data: Vec<u8> = (0..FILE_LEN).map(content).collect();
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    p
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// (offset, len) of each op; a mix of aligned, unaligned, past-EOF and
/// empty ranges.
fn ops_for(seed: u64) -> Vec<(u64, usize)> {
    let mut r = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    let n = 8 + r.below(24) as usize;
    (0..n)
        .map(|_| match r.below(6) {
            0 => (r.below(256) * 4096, 4096 * (1 + r.below(32) as usize)),
            1 => (r.below(FILE_LEN as u64), 1 + r.below(100_000) as usize),
            2 => (
                FILE_LEN as u64 - r.below(5000),
                4096 * (1 + r.below(4) as usize),
            ),
            3 => (
                FILE_LEN as u64 + r.below(10_000),
                1 + r.below(8192) as usize,
            ),
            4 => (r.below(FILE_LEN as u64), 0),
            _ => ((r.below(250) * 4096), 65536),
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Bytes(usize),
    Failed(Option<i32>),
}

fn run_seed(engine: &IoEngine, file: &IoFile, seed: u64) -> Vec<Outcome> {
    let ranges = ops_for(seed);
    // One buffer, each destination at an aligned spot with guard bytes on
    // both sides; some destinations deliberately misaligned.
    let pad = 4096;
    let mut layout = Vec::new();
    let mut at = pad;
    for (i, &(_, len)) in ranges.iter().enumerate() {
        let mis = if i % 5 == 3 { 7 } else { 0 };
        layout.push(at + mis);
        at += (len + mis).div_ceil(4096) * 4096 + pad;
    }
    let mut buf = AlignedBuf::new(at);
    buf.fill(GUARD);
    let base = buf.as_mut_ptr();
    let prios = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Realtime,
    ];
    let ops: Vec<ReadOp> = ranges
        .iter()
        .enumerate()
        .map(|(i, &(offset, len))| ReadOp {
            file: file.clone(),
            offset,
            len,
            // SAFETY: layout[i] + len is inside buf.
            dest: unsafe { base.add(layout[i]) },
            priority: prios[(seed as usize + i) % 4],
            user_data: 1000 + i as u64,
        })
        .collect();
    let (tx, rx) = channel::unbounded();
    // SAFETY: buf outlives every completion (we wait for all of them below
    // and the engine waits for in-flight reads when dropped).
    unsafe { engine.submit(ops, tx) };
    let mut got: HashMap<u64, Result<usize, IoError>> = HashMap::new();
    for _ in 0..ranges.len() {
        let c = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("seed {seed}: a request never completed"));
        assert!(
            got.insert(c.user_data, c.result).is_none(),
            "seed {seed}: request {} completed twice",
            c.user_data
        );
    }
    assert!(
        rx.try_recv().is_err(),
        "seed {seed}: more completions than requests"
    );
    let mut outcomes = Vec::new();
    for (i, &(offset, len)) in ranges.iter().enumerate() {
        let res = got
            .remove(&(1000 + i as u64))
            .unwrap_or_else(|| panic!("seed {seed}: request {i} lost"));
        let dest = layout[i];
        // Guards: nothing before or after the destination was touched.
        let prev_end = if i == 0 {
            0
        } else {
            layout[i - 1] + ranges[i - 1].1
        };
        assert!(
            buf[prev_end..dest].iter().all(|&b| b == GUARD),
            "seed {seed}: bytes before request {i}'s destination were written"
        );
        let expect = (FILE_LEN as u64).saturating_sub(offset).min(len as u64) as usize;
        match res {
            Ok(n) => {
                assert_eq!(
                    n, expect,
                    "seed {seed}: request {i} ({offset}, {len}) byte count"
                );
                for k in 0..n {
                    assert_eq!(
                        buf[dest + k],
                        content(offset as usize + k),
                        "seed {seed}: request {i} byte {k} wrong"
                    );
                }
                outcomes.push(Outcome::Bytes(n));
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("faults.bin"), "error names the file: {msg}");
                assert!(
                    msg.contains(&format!("offset {offset}")),
                    "error names the offset: {msg}"
                );
                assert!(
                    msg.contains(&format!("{len} bytes")),
                    "error names the length: {msg}"
                );
                match &e {
                    IoError::Read {
                        offset: o,
                        len: l,
                        source,
                        ..
                    } => {
                        assert_eq!((*o, *l), (offset, len));
                        assert_eq!(source.raw_os_error(), Some(libc::EIO), "{msg}");
                    }
                    IoError::RetriesExhausted {
                        offset: o, len: l, ..
                    } => {
                        assert_eq!((*o, *l), (offset, len))
                    }
                    other => panic!("seed {seed}: unexpected error {other:?}"),
                }
                outcomes.push(Outcome::Failed(e.raw_os_error()));
            }
        }
    }
    let last_end = layout.last().unwrap() + ranges.last().unwrap().1;
    assert!(
        buf[last_end..].iter().all(|&b| b == GUARD),
        "seed {seed}: tail guard written"
    );
    outcomes
}

fn sweep(kind: BackendKind, seeds: std::ops::Range<u64>) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = make_file(dir.path());
    let mut failures = 0usize;
    let mut total = 0usize;
    let (mut retries, mut shorts) = (0u64, 0u64);
    for seed in seeds {
        let cfg = IoConfig::default()
            .with_backend(kind)
            .with_queue_depth(1 + (seed % 8) as usize)
            .with_sort_by_position(seed % 3 != 0)
            .with_fault(Some(FaultConfig::mixed(seed)));
        let engine = IoEngine::new(cfg).unwrap();
        let file = engine.open(&path, OpenMode::Auto).unwrap();
        let out = run_seed(&engine, &file, seed);
        retries += engine.stats().retries;
        shorts += engine.stats().short_reads;
        failures += out
            .iter()
            .filter(|o| matches!(o, Outcome::Failed(_)))
            .count();
        total += out.len();
        if seed % 50 == 0 {
            // Same seed, fresh engine: the same requests fail the same way,
            // whatever the threads' timing.
            let engine2 = IoEngine::new(
                IoConfig::default()
                    .with_backend(kind)
                    .with_queue_depth(1 + (seed % 8) as usize)
                    .with_sort_by_position(seed % 3 == 0)
                    .with_fault(Some(FaultConfig::mixed(seed))),
            )
            .unwrap();
            let file2 = engine2.open(&path, OpenMode::Auto).unwrap();
            assert_eq!(
                run_seed(&engine2, &file2, seed),
                out,
                "seed {seed} not deterministic"
            );
        }
    }
    // The injector must really have injected: some requests failed, most
    // did not.
    assert!(failures > 0, "no injected EIO reached a request");
    assert!(failures < total / 2, "{failures} of {total} failed");
    assert!(retries > 0, "no injected EINTR/EAGAIN was retried");
    assert!(shorts > 0, "no injected short read was continued");
}

#[test]
fn faults_io_uring_1000_seeds() {
    if let Err(e) = IoEngine::new(IoConfig::default().with_backend(BackendKind::IoUring)) {
        common::io_uring_unavailable("the io_uring fault sweep", &e);
        return;
    }
    sweep(BackendKind::IoUring, 0..1000);
}

#[test]
fn faults_threads_1000_seeds() {
    sweep(BackendKind::Threads, 0..1000);
}

#[test]
fn no_faults_means_no_failures() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = make_file(dir.path());
    for kind in [BackendKind::Auto, BackendKind::Threads] {
        for seed in 0..50 {
            let engine = IoEngine::new(
                IoConfig::default()
                    .with_backend(kind)
                    .with_fault(Some(FaultConfig::none(seed))),
            )
            .unwrap();
            let file = engine.open(&path, OpenMode::Auto).unwrap();
            let out = run_seed(&engine, &file, seed);
            assert!(out.iter().all(|o| matches!(o, Outcome::Bytes(_))));
        }
    }
}
