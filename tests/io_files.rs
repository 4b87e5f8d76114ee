//! The engine on real files, on both backends: missing files, directories,
//! tmpfs fallback, unaligned ranges, reads past the end, coalesced range
//! reads, a file truncated while its reads are in flight, and buffered
//! files read by copying out of their mapping.

use std::io::Write;
use std::path::{Path, PathBuf};

mod common;

use crossbeam::channel;
use gpustream::io::{
    align_range, AlignedBuf, BackendKind, IoConfig, IoEngine, IoError, IoFile, OpenMode, Priority,
    ReadOp,
};

fn content(i: usize) -> u8 {
    ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8 ^ (i as u8)
}

fn write_file(path: &Path, len: usize) {
    let data: Vec<u8> = (0..len).map(content).collect();
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
}

fn engines() -> Vec<IoEngine> {
    let mut v =
        vec![IoEngine::new(IoConfig::default().with_backend(BackendKind::Threads)).unwrap()];
    match IoEngine::new(IoConfig::default().with_backend(BackendKind::IoUring)) {
        Ok(e) => v.push(e),
        Err(e) => common::io_uring_unavailable("io_uring half of this test", &e),
    }
    v
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Cuts the file at `path` to `len` bytes, as another process might.
fn cut_file(path: &Path, len: usize) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len as u64)
        .unwrap();
}

/// `read_ranges` of a file of `len` bytes written by `write_file`: each
/// range reads the bytes of it that exist, and they are the file's.
fn check_ranges(e: &IoEngine, f: &IoFile, len: usize, ranges: &[(u64, usize)]) {
    let out = e.read_ranges(f, ranges, Priority::High);
    for (&(off, l), r) in ranges.iter().zip(&out) {
        let s = r.as_ref().unwrap();
        let want = (len as u64).saturating_sub(off).min(l as u64) as usize;
        assert_eq!(s.len(), want, "range ({off}, {l})");
        for (k, &b) in s.iter().enumerate() {
            assert_eq!(b, content(off as usize + k), "range ({off}, {l}) byte {k}");
        }
    }
}

/// One raw read of `len` bytes at `offset` into a buffer `dest_off` bytes
/// past a 4 KiB-aligned start (`dest_off + len <= buf_len`): the bytes
/// land right and the rest of the buffer stays untouched.
fn check_read_into(
    e: &IoEngine,
    f: &IoFile,
    offset: u64,
    len: usize,
    dest_off: usize,
    buf_len: usize,
) {
    assert!(dest_off + len <= buf_len);
    let mut buf = AlignedBuf::new(buf_len);
    let (tx, rx) = channel::unbounded();
    let op = ReadOp {
        file: f.clone(),
        offset,
        len,
        // SAFETY: dest_off + len <= buf_len, asserted above.
        dest: unsafe { buf.as_mut_ptr().add(dest_off) },
        priority: Priority::Normal,
        user_data: 9,
    };
    // SAFETY: buf outlives the completion received below.
    unsafe { e.submit(vec![op], tx) };
    let c = rx.recv().unwrap();
    assert_eq!(c.user_data, 9);
    assert_eq!(c.result.unwrap(), len);
    assert!((0..len).all(|k| buf[dest_off + k] == content(offset as usize + k)));
    assert!(buf[..dest_off].iter().all(|&b| b == 0));
    assert!(buf[dest_off + len..].iter().all(|&b| b == 0));
}

#[test]
fn missing_file_is_a_typed_error_naming_the_path() {
    for e in engines() {
        let p = PathBuf::from("/nonexistent/gpustream/missing.gspk");
        match e.open(&p, OpenMode::Auto) {
            Err(IoError::Open { path, source }) => {
                assert_eq!(path, p);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected Open error, got {other:?}"),
        }
        let msg = e.open(&p, OpenMode::Buffered).unwrap_err().to_string();
        assert!(msg.contains("missing.gspk"), "{msg}");
    }
}

#[test]
fn a_directory_is_not_a_file() {
    let d = tmp();
    let e = IoEngine::new(IoConfig::default()).unwrap();
    assert!(matches!(
        e.open(d.path(), OpenMode::Auto),
        Err(IoError::NotAFile { .. })
    ));
}

/// Set in the unprivileged child of `unreadable_file_is_an_open_error`: the
/// path it must fail to open.
const UNREADABLE_ENV: &str = "GPUSTREAM_TEST_UNREADABLE";

/// Opening `p` (mode 000) fails with `Open`/`PermissionDenied`.
fn check_unreadable(p: &Path) {
    let e = IoEngine::new(IoConfig::default()).unwrap();
    match e.open(p, OpenMode::Auto) {
        Err(IoError::Open { path, source }) => {
            assert_eq!(path, p);
            assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied)
        }
        other => panic!("expected a permission error, got {other:?}"),
    }
}

#[test]
fn unreadable_file_is_an_open_error() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if let Some(p) = std::env::var_os(UNREADABLE_ENV) {
        // The child: setpriv must really have dropped root.
        assert_ne!(euid, 0, "still root in the unprivileged child");
        return check_unreadable(Path::new(&p));
    }
    // In the system temp directory, not under target/: `nobody` must reach
    // both the file and a copy of this test binary, wherever the checkout is.
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = d.path().join("secret.bin");
    write_file(&p, 100);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    if euid != 0 {
        return check_unreadable(&p);
    }
    // Root bypasses permissions (and CI runs as root): run this test again
    // as `nobody`, with setpriv from util-linux, on the same file.
    let exe = d.path().join("io_files");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&exe)
        .args([
            "--exact",
            "unreadable_file_is_an_open_error",
            "--test-threads=1",
        ])
        .env(UNREADABLE_ENV, &p)
        .output()
        .expect("running setpriv (util-linux), needed to drop root for this test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the unprivileged run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn direct_file_reads_aligned_unaligned_and_past_eof() {
    let d = tmp();
    let p = d.path().join("data.bin");
    let len = 3 * 65536 + 1000;
    write_file(&p, len);
    for e in engines() {
        let f = e.open(&p, OpenMode::Auto).unwrap();
        assert_eq!(f.len(), len as u64);
        if f.is_direct() {
            assert!(f.alignment().is_power_of_two() && f.alignment() >= 512);
        } else {
            common::o_direct_unavailable(&format!(
                "the alignment checks: {} is not on an O_DIRECT filesystem",
                p.display()
            ));
        }
        let ranges = [
            (0u64, 4096usize),
            (1, 10),
            (4095, 2),
            (65536 + 17, 70_000),
            (len as u64 - 10, 100), // crosses the end: 10 bytes
            (len as u64 + 5, 10),   // past the end: 0 bytes
            (7, 0),
        ];
        check_ranges(&e, &f, len, &ranges);
        // An unaligned destination through the raw API still reads right.
        check_read_into(&e, &f, 4096, 4096, 3, 8192);
    }
}

#[test]
fn aligned_reads_stay_direct_and_report_eof_counts() {
    let d = tmp();
    let p = d.path().join("tail.bin");
    let len = 10_000;
    write_file(&p, len);
    let e = IoEngine::new(IoConfig::default()).unwrap();
    let f = e.open(&p, OpenMode::Direct).unwrap();
    let a = f.alignment();
    let (off, alen, skip) = align_range(9000, 1000, a);
    assert_eq!(off + skip as u64, 9000);
    let s = e.read_at(&f, off, alen).unwrap();
    assert_eq!(s.len(), len - off as usize);
    assert_eq!(
        &s[skip..skip + 1000],
        &(9000..10_000).map(content).collect::<Vec<_>>()[..]
    );
}

#[test]
fn tmpfs_falls_back_to_buffered() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("!!! no /dev/shm here: tmpfs fallback not tested !!!");
        return;
    }
    let d = tempfile::tempdir_in(shm).unwrap();
    let p = d.path().join("in-memory.bin");
    write_file(&p, 50_000);
    for e in engines() {
        let f = e.open(&p, OpenMode::Direct).unwrap();
        assert!(!f.is_direct(), "tmpfs must be read buffered");
        assert_eq!(f.alignment(), 1);
        let s = e.read_at(&f, 123, 4567).unwrap();
        assert_eq!(s.len(), 4567);
        assert!(s.iter().enumerate().all(|(k, &b)| b == content(123 + k)));
    }
}

#[test]
fn buffered_mode_is_honoured() {
    let d = tmp();
    let p = d.path().join("b.bin");
    write_file(&p, 5000);
    let e = IoEngine::new(IoConfig::default()).unwrap();
    let f = e.open(&p, OpenMode::Buffered).unwrap();
    assert!(!f.is_direct());
    assert_eq!(f.alignment(), 1);
    assert_eq!(
        &*e.read_at(&f, 4990, 100).unwrap(),
        &(4990..5000).map(content).collect::<Vec<_>>()[..]
    );
}

#[test]
fn truncation_while_reads_are_in_flight() {
    truncate_under_reads(OpenMode::Auto, false, 1 << 20);
}

/// The same through a mapping: a copy out of it reads zeros where the
/// file was cut (the SIGBUS handler's pages past the new end's page, and
/// the kernel's own zeros in the rest of that page, which raise no fault),
/// yet no read may count one of them as a byte of the file.
#[test]
fn truncation_under_a_mapped_file_counts_only_the_bytes_left() {
    for keep in [1 << 20, (1 << 20) + 1000] {
        truncate_under_reads(OpenMode::Buffered, true, keep);
    }
}

/// Cut before the read, deterministic. A read that ends inside the page
/// holding the new end raises no fault (the kernel zeroed the rest of that
/// page), is copied out of the mapping and must still count only the bytes
/// before the end. One that runs past that page faults: the mapping is
/// marked, the read is redone with `pread`, and so is every read after.
#[test]
fn a_mapped_read_across_a_cut_made_before_it_counts_only_the_bytes_left() {
    let d = tmp();
    let p = d.path().join("cut.bin");
    let keep: usize = (1 << 20) + 1000;
    for e in engines() {
        write_file(&p, 4 << 20);
        let f = e.open(&p, OpenMode::Buffered).unwrap();
        assert!(f.map_for_reads());
        cut_file(&p, keep);
        // (offset, len, bytes that exist, copied out of the mapping)
        for (off, len, want, mapped) in [
            (keep - 3000, 2000, 2000, true),
            (keep - 500, 2000, 500, true),
            (keep - 500, 200_000, 500, true),
            (keep - 700, 600, 600, false),
            (keep + 100, 50, 0, false),
            (2 << 20, 4096, 0, false),
        ] {
            let before = e.stats();
            let s = e.read_at(&f, off as u64, len).unwrap();
            assert_eq!(s.len(), want, "read ({off}, {len})");
            assert!(s.iter().enumerate().all(|(k, &b)| b == content(off + k)));
            let after = e.stats();
            assert_eq!(
                after.mapped_reads > before.mapped_reads,
                mapped,
                "read ({off}, {len}): {after:?}"
            );
        }
        assert!(f.mapping_was_cut(), "the long read faulted past the cut");
        assert!(e.stats().retries >= 1, "the faulted copy was redone");
    }
}

fn truncate_under_reads(mode: OpenMode, map: bool, keep: usize) {
    let d = tmp();
    let p = d.path().join("shrinking.bin");
    let len: usize = 32 << 20;
    for e in engines() {
        write_file(&p, len);
        let f = e.open(&p, mode).unwrap();
        assert_eq!(f.map_for_reads(), map, "mapping {map}");
        let n = 256;
        let chunk = len / n;
        let mut buf = AlignedBuf::new(len);
        let base = buf.as_mut_ptr();
        let ops: Vec<ReadOp> = (0..n)
            .map(|i| ReadOp {
                file: f.clone(),
                offset: (i * chunk) as u64,
                len: chunk,
                // SAFETY: i * chunk + chunk <= len.
                dest: unsafe { base.add(i * chunk) },
                priority: Priority::Normal,
                user_data: i as u64,
            })
            .collect();
        let (tx, rx) = channel::unbounded();
        // SAFETY: buf outlives all completions, received below.
        unsafe { e.submit(ops, tx) };
        cut_file(&p, keep);
        let mut seen = vec![false; n];
        for _ in 0..n {
            let c = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a read hung");
            let i = c.user_data as usize;
            assert!(
                !std::mem::replace(&mut seen[i], true),
                "request {i} completed twice"
            );
            let got = c
                .result
                .expect("truncation is not an error: reads return what exists");
            assert!(got <= chunk);
            let start = i * chunk;
            // Whatever arrived below the kept size is the file's content;
            // bytes above it may be the old data or nothing.
            for k in 0..got.min(keep.saturating_sub(start)) {
                assert_eq!(buf[start + k], content(start + k));
            }
            if start >= keep || map {
                // Either read before the truncation (old bytes) or after
                // (nothing); never something else, zeros included.
                for k in 0..got {
                    assert_eq!(buf[start + k], content(start + k), "read {i} byte {k}");
                }
            }
        }
        assert!(rx.try_recv().is_err());
        if map {
            assert!(e.stats().mapped_reads > 0, "no read used the mapping");
        }
    }
}

/// A buffered file the runtime maps is read by copying out of the
/// mapping: the same bytes as `pread`, at any offset, length and
/// destination alignment, and a range reaching past the mapped length
/// still reads (with `pread`) the bytes that exist.
#[test]
fn a_mapped_file_reads_the_same_bytes_as_pread() {
    let d = tmp();
    let p = d.path().join("mapped.bin");
    let len = 5 * 65536 + 777;
    write_file(&p, len);
    for e in engines() {
        let f = e.open(&p, OpenMode::Buffered).unwrap();
        assert!(f.map_for_reads());
        let inside = [
            (0u64, 4096usize),
            (1, 10),
            (4095, 2),
            (65536 + 17, 70_000),
            (3, 5 * 65536),
        ];
        let outside = [
            (len as u64 - 10, 100), // crosses the end: 10 bytes
            (len as u64 + 5, 10),   // past the end: 0 bytes
        ];
        for (ranges, mapped) in [(&inside[..], true), (&outside[..], false)] {
            let before = e.stats().mapped_reads;
            check_ranges(&e, &f, len, ranges);
            assert_eq!(e.stats().mapped_reads > before, mapped, "{ranges:?}");
        }
        let before = e.stats().mapped_reads;
        for dest_off in [0usize, 3, 17, 64] {
            check_read_into(&e, &f, 999, 2 * 65536, dest_off, 3 * 65536);
        }
        assert!(
            e.stats().mapped_reads >= before + 4,
            "the ranges inside the mapping were not copied out of it: {:?}",
            e.stats()
        );
    }
}

#[test]
fn engine_drop_waits_for_submitted_reads() {
    let d = tmp();
    let p = d.path().join("drop.bin");
    write_file(&p, 4 << 20);
    for e in engines() {
        let f = e.open(&p, OpenMode::Auto).unwrap();
        let mut buf = AlignedBuf::new(4 << 20);
        let (tx, rx) = channel::unbounded();
        let ops: Vec<ReadOp> = (0..64)
            .map(|i| ReadOp {
                file: f.clone(),
                offset: i * 65536,
                len: 65536,
                // SAFETY: in bounds.
                dest: unsafe { buf.as_mut_ptr().add(i as usize * 65536) },
                priority: Priority::Low,
                user_data: i,
            })
            .collect();
        // SAFETY: buf outlives the engine, which waits for the reads.
        unsafe { e.submit(ops, tx) };
        drop(e);
        assert_eq!(rx.try_iter().count(), 64);
        assert!((0..4 << 20).all(|k| buf[k] == content(k)));
    }
}

#[test]
fn registered_memory_and_files_are_used_by_io_uring() {
    let e = match IoEngine::new(IoConfig::default().with_backend(BackendKind::IoUring)) {
        Ok(e) => e,
        Err(e) => return common::io_uring_unavailable("registered buffers", &e),
    };
    let d = tmp();
    let p = d.path().join("fixed.bin");
    write_file(&p, 1 << 20);
    let f = e.open(&p, OpenMode::Auto).unwrap();
    let mut staging = AlignedBuf::new(1 << 20);
    let base = staging.as_mut_ptr();
    // SAFETY: staging outlives the engine's use of it (unregistered below,
    // before it is dropped).
    unsafe { e.register_memory(base, staging.len()) };
    let (tx, rx) = channel::unbounded();
    let ops: Vec<ReadOp> = (0..16)
        .map(|i| ReadOp {
            file: f.clone(),
            offset: i * 65536,
            len: 65536,
            // SAFETY: in bounds.
            dest: unsafe { base.add(i as usize * 65536) },
            priority: Priority::Normal,
            user_data: i,
        })
        .collect();
    // SAFETY: staging outlives the completions received below.
    unsafe { e.submit(ops, tx) };
    for _ in 0..16 {
        assert_eq!(rx.recv().unwrap().result.unwrap(), 65536);
    }
    assert!((0..1 << 20).all(|k| staging[k] == content(k)));
    let s = e.stats();
    assert_eq!(s.bytes, 1 << 20);
    assert!(s.reads >= 16);
    // Every read landed in registered memory and went through the
    // registered file; a kernel that refused the registration fails here.
    assert!(
        s.fixed_buffer_reads >= 16,
        "registered memory unused: {s:?}"
    );
    assert!(s.fixed_file_reads >= 16, "{s:?}");
    e.unregister_memory(base);
    drop(e);
}

#[test]
fn direct_reads_refused_after_open_fall_back_to_buffered() {
    use gpustream::io::FaultConfig;
    let d = tmp();
    let p = d.path().join("refused.bin");
    write_file(&p, 256 << 10);
    for kind in [BackendKind::Threads, BackendKind::Auto] {
        let e = IoEngine::new(IoConfig::default().with_backend(kind).with_fault(Some(
            FaultConfig {
                refuse_direct: 1000,
                ..FaultConfig::none(7)
            },
        )))
        .unwrap();
        let f = e.open(&p, OpenMode::Direct).unwrap();
        if !f.is_direct() {
            common::o_direct_unavailable(&format!(
                "the refused-O_DIRECT fallback for {kind:?}: nothing to refuse"
            ));
            continue;
        }
        let s = e.read_at(&f, 0, 256 << 10).unwrap();
        assert_eq!(s.len(), 256 << 10);
        assert!(s.iter().enumerate().all(|(k, &b)| b == content(k)));
        assert!(!f.is_direct(), "the file must now be read buffered");
        assert_eq!(f.alignment(), 1);
    }
}

/// A direct read whose destination the kernel cannot pin for DMA (EFAULT,
/// as a GPU's write-combined mapping answers) is read again through a
/// bounce buffer and copied: the bytes arrive, the file stays direct, and
/// the engine counts the fallback.
#[test]
fn direct_reads_into_memory_the_kernel_refuses_go_through_a_bounce_buffer() {
    use gpustream::io::FaultConfig;
    let d = tmp();
    let p = d.path().join("bounced.bin");
    write_file(&p, 512 << 10);
    for kind in [BackendKind::Threads, BackendKind::Auto] {
        let e = IoEngine::new(IoConfig::default().with_backend(kind).with_fault(Some(
            FaultConfig {
                refuse_destination: 1000,
                ..FaultConfig::none(11)
            },
        )))
        .unwrap();
        let f = e.open(&p, OpenMode::Direct).unwrap();
        if !f.is_direct() {
            common::o_direct_unavailable(&format!(
                "the bounce-buffer fallback for {kind:?}: no direct reads"
            ));
            continue;
        }
        let s = e.read_at(&f, 0, 512 << 10).unwrap();
        assert_eq!(s.len(), 512 << 10);
        assert!(s.iter().enumerate().all(|(k, &b)| b == content(k)));
        assert!(f.is_direct(), "the file is still read direct");
        let st = e.stats();
        assert!(st.bounced_reads >= 1, "{kind:?}: {st:?}");
    }
}
