//! Every `gpustream` command that reads a file, run as a user would on bad
//! files: an empty file, `/dev/zero`, a file of 16 MiB of zeros, a
//! directory, a truncated valid file and seeded random bytes. Each run must
//! exit with code 1 and end with a clean error line naming the file, no
//! panic and no failed allocation, under a memory cap and a time limit.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpustream::codec::Codec;
use gpustream::pack::{PackWriter, TextureFormat, WriterOptions};
use gpustream_tools::ktx2::write_ktx2;
use rand::{RngCore, SeedableRng};

/// The data segment cap on each child (`RLIMIT_DATA`: private writable
/// memory, which every heap allocation counts against). The runs here peak
/// at 6 MiB resident, 120 MiB when they open lavapipe (measured
/// 2026-12-01); the bugs this guards against asked for 2 GiB at once.
/// `RLIMIT_AS` would do on this 2-core machine (replay opens lavapipe under
/// 1 GiB of address space), but the driver's threads and glibc's
/// per-thread arenas reserve address space in proportion to the cores,
/// so a machine with more of them would fail for no fault of ours.
const DATA_CAP: u64 = 1 << 30;

/// Peak resident memory a failing run may reach: a second guard beside
/// `DATA_CAP`, well above the ~120 MiB of a run that opens lavapipe.
const MAX_RSS_KIB: i64 = 512 << 10;

/// Longest a single run may take (the slowest, `bench`, opens the GPU
/// adapter before it reads the pack).
const TIME_LIMIT: Duration = Duration::from_secs(60);

/// One input a command is run on.
struct Input {
    /// What it is, for failure messages.
    label: &'static str,
    path: PathBuf,
}

/// The bad inputs for files of one kind (`ext`), built in `dir`: an empty
/// file, /dev/zero, 16 MiB of zeros, an empty directory, `truncated` and
/// random bytes.
fn inputs(dir: &Path, ext: &str, truncated: &[u8]) -> Vec<Input> {
    std::fs::create_dir_all(dir).unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let p = dir.join(format!("{name}.{ext}"));
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let zeros = dir.join(format!("zeros.{ext}"));
    std::fs::File::create(&zeros)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let empty_dir = dir.join(format!("empty-dir-{ext}"));
    std::fs::create_dir(&empty_dir).unwrap();
    let mut random = vec![0u8; 8192];
    rand_chacha::ChaCha8Rng::seed_from_u64(0x16).fill_bytes(&mut random);
    vec![
        Input {
            label: "empty file",
            path: file("empty", b""),
        },
        Input {
            label: "/dev/zero",
            path: PathBuf::from("/dev/zero"),
        },
        Input {
            label: "16 MiB of zeros",
            path: zeros,
        },
        Input {
            label: "directory",
            path: empty_dir,
        },
        Input {
            label: "truncated valid file",
            path: file("truncated", truncated),
        },
        Input {
            label: "random bytes",
            path: file("random", &random),
        },
    ]
}

/// A valid pack and a valid trace that replays against it.
fn valid_pack_and_trace(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let pack = dir.join("valid.gspk");
    let mut w = PackWriter::create(
        &pack,
        WriterOptions::default()
            .with_codec(Codec::Lz4)
            .with_level(0)
            .with_threads(1),
    )
    .unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i / 7) as u8).collect();
    w.add_blob("a", &data).unwrap();
    w.finish().unwrap();
    let pack_json = serde_json::to_string(&std::fs::canonicalize(&pack).unwrap()).unwrap();
    let trace = [
        r#"{"format":"gpustream-trace","version":1}"#.to_string(),
        format!(r#"{{"op":"pack","id":0,"path":{pack_json}}}"#),
        r#"{"op":"request","queue":0,"t_us":1,"pack":0,"asset":"a","source":{"kind":"blob","range":[0,200000]},"offset":4096,"stored":9000,"size":200000,"codec":"lz4","dest":"memory","tag":0}"#.to_string(),
        r#"{"op":"submit","queue":0,"t_us":2,"requests":1}"#.to_string(),
    ]
    .join("\n");
    (std::fs::read(&pack).unwrap(), trace.into_bytes())
}

struct Outcome {
    code: Option<i32>,
    stderr: String,
    /// Peak resident memory of the child, in KiB (from `wait4`).
    max_rss_kib: i64,
}

/// Runs the binary with `args` in `cwd` under the data cap; kills it and
/// fails past the time limit.
// The child is reaped with wait4, which also returns its peak memory;
// std's `Child::wait` cannot, so clippy cannot see the wait.
#[allow(clippy::zombie_processes)]
fn run(args: &[OsString], cwd: &Path) -> Outcome {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpustream"));
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env_remove("RUST_BACKTRACE");
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls setrlimit, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: DATA_CAP,
                rlim_max: DATA_CAP,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut v).ok();
        v
    });
    let start = Instant::now();
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child, not yet reaped (std's Child is not used
        // to wait); the pointers are valid for the call.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break (status, usage);
        }
        if start.elapsed() > TIME_LIMIT {
            child.kill().ok();
            // Reap it (it has not been reaped by wait4 yet).
            child.wait().ok();
            panic!("gpustream {args:?} ran past {TIME_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Outcome {
        code,
        stderr: String::from_utf8_lossy(&reader.join().unwrap()).into_owned(),
        max_rss_kib: usage.ru_maxrss,
    }
}

/// Runs one command over its inputs; returns the failures found.
fn check(
    command: &str,
    inputs: &[Input],
    args: impl Fn(&Path) -> Vec<OsString>,
    cwd: &Path,
) -> Vec<String> {
    let mut failures = Vec::new();
    for input in inputs {
        let out = run(&args(&input.path), cwd);
        let shown = input.path.display().to_string();
        let err = out.stderr.trim_end();
        // A command that opens the GPU may show the Vulkan loader's own
        // complaints above ours; our error is the last line.
        let last = err.lines().last().unwrap_or("");
        let problem = if out.code != Some(1) {
            Some(format!("exit code {:?}", out.code))
        } else if err.contains("panicked at") || err.contains("memory allocation of") {
            Some("a panic or failed allocation".into())
        } else if out.max_rss_kib > MAX_RSS_KIB {
            Some(format!("peak RSS {} KiB", out.max_rss_kib))
        } else if !last.starts_with("error: ") {
            Some("no clean error line at the end".into())
        } else if !last.contains(&shown) {
            Some("the error does not name the file".into())
        } else {
            None
        };
        eprintln!(
            "{command} on {} ({} KiB peak): {err}",
            input.label, out.max_rss_kib
        );
        if let Some(p) = problem {
            failures.push(format!(
                "{command} on {} ({shown}): {p}:\n{err}",
                input.label
            ));
        }
    }
    failures
}

fn os(parts: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    parts.iter().map(|p| p.as_ref().to_os_string()).collect()
}

#[test]
fn every_file_reading_command_fails_cleanly_on_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (pack, trace) = valid_pack_and_trace(d);
    let ktx2 = write_ktx2(TextureFormat::Rgba8Unorm, 8, 8, &[vec![7u8; 256]]);
    // Cut mid-way: through the level data of the texture, the table of
    // contents of the pack, and the request line of the trace.
    let packs = inputs(&d.join("gspk"), "gspk", &pack[..pack.len() / 2]);
    let traces = inputs(&d.join("trace"), "trace", &trace[..trace.len() - 40]);
    let textures = inputs(&d.join("ktx2"), "ktx2", &ktx2[..ktx2.len() - 9]);
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let o = out.join("o.bin");

    let mut failures = Vec::new();
    failures.extend(check(
        "pack",
        &textures,
        |p| os(&[&"pack", &p, &"-o", &o]),
        d,
    ));
    failures.extend(check("info", &packs, |p| os(&[&"info", &p]), d));
    failures.extend(check("verify", &packs, |p| os(&[&"verify", &p]), d));
    failures.extend(check(
        "unpack",
        &packs,
        |p| os(&[&"unpack", &p, &"a", &"-o", &o]),
        d,
    ));
    // bench opens the GPU adapter before it reads the pack: the path a
    // user takes, lavapipe included.
    failures.extend(check(
        "bench --pack",
        &packs,
        |p| os(&[&"bench", &"--pack", &p, &"--quick", &"--cases", &"none"]),
        &out,
    ));
    failures.extend(check("replay", &traces, |p| os(&[&"replay", &p]), d));
    failures.extend(check(
        "trace-info",
        &traces,
        |p| os(&[&"trace-info", &p]),
        d,
    ));
    // A well-formed trace whose request disagrees with its pack: the size
    // recorded is not what the asset delivers. Refused by line before the
    // GPU is opened or any destination allocated.
    let text = String::from_utf8(trace.clone()).unwrap();
    let lying = d.join("lying.trace");
    std::fs::write(
        &lying,
        text.replace(r#""size":200000"#, r#""size":18446744073709551615"#),
    )
    .unwrap();
    failures.extend(check(
        "replay",
        &[Input {
            label: "a size the pack does not deliver",
            path: lying.clone(),
        }],
        |p| os(&[&"replay", &p]),
        d,
    ));
    let out = run(&os(&[&"replay", &lying]), d);
    assert!(
        out.stderr
            .contains("lying.trace:3: the trace says 18446744073709551615 bytes"),
        "{}",
        out.stderr
    );
    failures.extend(check(
        "sweep --files",
        &packs,
        |p| os(&[&"sweep", &"--files", &p]),
        d,
    ));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_regression_files_fail_cleanly_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let regressions =
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("tests/regressions");
    let o = dir.path().join("o.gspk");
    let input = |name: &str, label: &'static str| Input {
        label,
        path: regressions.join(name),
    };
    let mut failures = Vec::new();
    failures.extend(check(
        "pack",
        &[
            input("ktx2-dfd-panic.ktx2", "the DFD panic"),
            input("png-100000x100000.png", "a huge declared PNG"),
            input("png-16384x16384-tiny.png", "a PNG larger than its bytes"),
            input(
                "jpeg-progressive-luma-1x1-chroma-2x2.jpg",
                "a JPEG layout that panicked the decoder",
            ),
            input(
                "jpeg-1x4-2x1-unwrap-none.jpg",
                "a JPEG layout that reached an unwrap",
            ),
        ],
        |p| os(&[&"pack", &p, &"-o", &o]),
        dir.path(),
    ));
    let traces = [
        input("trace-not-utf8.trace", "a trace with bad UTF-8"),
        input("trace-submit-unknown-queue.trace", "a submit on no queue"),
        input("trace-huge-size.trace", "a 2^64-byte request"),
    ];
    // trace-info summarises the last two (they are well-formed traces);
    // replay refuses the first two before it opens the GPU. (The third
    // holds only a memory-source request, which replay skips, then runs an
    // empty plan on the GPU. It is not run here: a process that created a
    // Runtime on lavapipe crashed in an exit handler about once in 70 exits
    // on this branch's runtime (2026-12-01), which is not what this test
    // is about.)
    failures.extend(check(
        "trace-info",
        &traces[..1],
        |p| os(&[&"trace-info", &p]),
        dir.path(),
    ));
    failures.extend(check(
        "replay",
        &traces[..2],
        |p| os(&[&"replay", &p]),
        dir.path(),
    ));
    for (command, t) in [("trace-info", &traces[1]), ("trace-info", &traces[2])] {
        let out = run(&os(&[&command, &t.path]), dir.path());
        assert_eq!(
            out.code,
            Some(0),
            "{command} on {}: {}",
            t.label,
            out.stderr
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
