//! The `gpustream` binary end to end: the bench smoke run CI relies on, and
//! trace capture -> trace-info -> replay, with a broken trace refused by line.

use gpustream_tools::testing as common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gpustream::codec::Codec;
use gpustream::completion::Fence;
use gpustream::destinations::HostMemory;
use gpustream::pack::{PackWriter, WriterOptions};
use gpustream::runtime::{Destination, QueueConfig, Request, Runtime, RuntimeConfig, Source};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpustream"))
}

#[test]
fn bench_quick_smoke_run_reports_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let plot = dir.path().join("bench.png");
    let mut bench = bin();
    // Where only GL is found, the GPU cases are left out (with a notice, or
    // a failure under GPUSTREAM_REQUIRE_GPU=1): bench then sees no adapter.
    if let Some(ctx) = common::test_device() {
        if !common::test_supports(&ctx, gpustream_tools::gpu::Capability::LongStreaming) {
            bench.env("WGPU_BACKEND", "vulkan,metal,dx12");
        }
    }
    let child = bench
        .args(["bench", "--quick", "--json"])
        .arg(&json)
        .arg("--plot")
        .arg(&plot)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(900));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let cases: Vec<&str> = rows.iter().map(|r| r["case"].as_str().unwrap()).collect();
    for c in ["none", "cpu-lz4", "cpu-zstd"] {
        assert!(cases.contains(&c), "{c} missing: {cases:?}");
    }
    if std::env::var("GPUSTREAM_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert!(
            cases.contains(&"gpu-lz4"),
            "gpu-lz4 missing with a GPU required: {cases:?}"
        );
    }
    assert!(!report["adapter_reason"].as_str().unwrap().is_empty());
    for r in rows {
        assert!(r["delivered_gbps"].as_f64().unwrap() > 0.0);
        assert!(r["ratio"].as_f64().unwrap() >= 1.0);
        assert!(r["bytes_delivered"].as_u64().unwrap() > 0);
        assert!(r["baseline_gbps"].as_f64().unwrap() > 0.0);
        assert!(r["host"]["cpu_s_per_gb"].as_f64().unwrap() > 0.0);
        let case = r["case"].as_str().unwrap();
        let baseline = r["baseline"].as_str().unwrap();
        if case.starts_with("cpu-") {
            assert!(
                baseline.starts_with("hand-written") && baseline.contains("crc32c"),
                "{case}: baseline is {baseline:?}"
            );
        }
    }
    let png = std::fs::read(&plot).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
}

/// Runs `gpustream bench` with `args` and returns its JSON report.
fn bench_json(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let child = bin()
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(&json)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(600));
    assert!(
        out.status.success(),
        "bench {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn bench_on_the_noop_adapter_counts_the_host_side_of_the_gpu_path() {
    let report = bench_json(&[
        "--quick",
        "--iters",
        "1",
        "--adapter",
        "noop",
        "--buffered",
        "--cases",
        "gpu-lz4,none",
    ]);
    assert_eq!(report["noop"], true);
    assert!(report["adapter"].as_str().unwrap().contains("Noop"));
    let rows = report["rows"].as_array().unwrap();
    let row = |case: &str| {
        rows.iter()
            .find(|r| r["case"] == case)
            .unwrap_or_else(|| panic!("{case} missing: {rows:?}"))
    };
    let gpu = row("gpu-lz4");
    let host = &gpu["host"];
    // The decoder was dispatched and its copies recorded, though nothing ran.
    assert!(host["blocks_per_dispatch"].as_f64().unwrap() >= 1.0);
    assert!(host["gpu_commands_per_mib"].as_f64().unwrap() > 0.0);
    assert!(host["submit_busy_s_per_gb"].as_f64().unwrap() > 0.0);
    assert!(host["dispatches_per_pass"].as_f64().unwrap() > 0.0);
    // The largest dispatch holds at least the average.
    let peak = host["lz4_blocks_peak_dispatch"].as_u64().unwrap() as f64;
    assert!(peak >= host["blocks_per_dispatch"].as_f64().unwrap());
    // Every mip a submission writes is counted once, with at least one copy.
    assert!(host["texture_copies_per_mip"].as_f64().unwrap() >= 1.0);
    assert!(gpu["delivered_as"].as_str().unwrap().starts_with("noop"));
    let metrics: Vec<&str> = gpu["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["metric"].as_str().unwrap())
        .collect();
    assert!(metrics.contains(&"CPU s/GB") && metrics.contains(&"submit own CPU s/GB"));
    let none = row("none");
    assert_eq!(none["baseline"], "queue.write_buffer loop");
    assert!(none["targets"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["metric"] == "host copies/byte"));
}

#[test]
fn bench_sustained_keeps_passes_queued_and_reports_how_many() {
    let report = bench_json(&[
        "--quick",
        "--iters",
        "4",
        "--adapter",
        "noop",
        "--buffered",
        "--cases",
        "gpu-lz4",
        "--staging",
        "256",
        "--sustained",
        "--ahead",
        "3",
    ]);
    assert_eq!(report["sustained"], true);
    let row = &report["rows"][0];
    assert_eq!(row["passes_ahead"], 3);
    let host = &row["host"];
    // Every pass was waited for and delivered, whatever the batches were.
    assert!(row["delivered_gbps"].as_f64().unwrap() > 0.0);
    assert!(host["dispatches_per_pass"].as_f64().unwrap() > 0.0);
    let peak = host["lz4_blocks_peak_dispatch"].as_u64().unwrap() as f64;
    assert!(peak >= host["blocks_per_dispatch"].as_f64().unwrap());
}

#[test]
fn bench_no_verify_turns_checksums_off_in_the_baseline_too() {
    let report = bench_json(&[
        "--quick",
        "--iters",
        "1",
        "--memory",
        "--no-verify",
        "--cases",
        "cpu-lz4",
    ]);
    assert_eq!(report["verify"], false);
    let row = &report["rows"][0];
    let baseline = row["baseline"].as_str().unwrap();
    assert!(baseline.starts_with("hand-written"), "{baseline}");
    assert!(!baseline.contains("crc32c"), "{baseline}");
    assert!(row["ratio_to_baseline"].as_f64().unwrap() > 0.0);
}

/// Waits for a child, killing it (and failing the test) past the deadline,
/// so a hang shows up as a failure rather than a stuck CI run.
fn wait_with_deadline(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let start = std::time::Instant::now();
    // Drain the pipes on threads so a chatty child cannot block on them.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let t2 = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            let err = t2.join().unwrap();
            panic!(
                "bench did not finish within {limit:?}:\n{}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    std::process::Output {
        status,
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
    }
}

fn make_pack(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("trace.gspk");
    let mut w = PackWriter::create(
        &path,
        WriterOptions::default()
            .with_codec(Codec::Lz4)
            .with_level(0)
            .with_threads(1),
    )
    .unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i / 5) as u8).collect();
    w.add_blob("a", &data).unwrap();
    w.add_blob("b", &data[..70_000]).unwrap();
    w.finish().unwrap();
    path
}

#[test]
fn a_captured_trace_replays_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let pack = make_pack(dir.path());
    let trace = dir.path().join("run.trace");
    {
        let rt =
            Runtime::without_gpu(RuntimeConfig::default().with_trace(Some(trace.clone()))).unwrap();
        let pf = rt.open_pack(&pack).unwrap();
        let q = rt.create_queue(QueueConfig::default());
        let f = Fence::new();
        for round in 0..3u64 {
            for name in ["a", "b"] {
                let id = pf.pack().find(name).unwrap();
                let n = pf.pack().asset(id).size as usize;
                q.enqueue(Request::new(
                    Source::Blob {
                        pack: pf.clone(),
                        asset: id,
                        range: None,
                    },
                    Destination::Memory {
                        memory: HostMemory::new(n),
                        offset: 0,
                    },
                ))
                .unwrap();
            }
            q.enqueue_signal(&f, round + 1);
            q.submit();
        }
        assert!(f.wait_timeout(3, Duration::from_secs(60)));
    }
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.lines().next().unwrap().contains("gpustream-trace"));
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("\"op\":\"request\""))
            .count(),
        6
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("\"op\":\"submit\""))
            .count(),
        3
    );

    let info = bin()
        .arg("trace-info")
        .arg(&trace)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["requests"], 6);
    assert_eq!(v["submits"], 3);
    assert_eq!(
        v["few_request_submits"], 3,
        "2-request submits are below the default threshold of 8"
    );

    let json = dir.path().join("replay.json");
    let rep = bin()
        .arg("replay")
        .arg(&trace)
        .args(["--iters", "2", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["requests"], 12);
    assert!(r["uncompressed_mb_s"].as_f64().unwrap() > 0.0);

    // A trace naming a pack that is gone is refused with its line.
    std::fs::remove_file(&pack).unwrap();
    let bad = bin().arg("replay").arg(&trace).output().unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("run.trace:3") && err.contains("trace.gspk"),
        "error names the line: {err}"
    );
}

#[test]
fn a_trace_with_an_out_of_range_block_is_refused_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let pack = make_pack(dir.path());
    let trace = dir.path().join("bad.trace");
    let pack_abs = std::fs::canonicalize(&pack).unwrap();
    let lines = [
        r#"{"format":"gpustream-trace","version":1}"#.to_string(),
        format!(r#"{{"op":"pack","id":0,"path":{}}}"#, serde_json::to_string(&pack_abs).unwrap()),
        r#"{"op":"request","queue":0,"t_us":1,"pack":0,"asset":"a","source":{"kind":"blob","range":[0,999999999]},"offset":0,"stored":1,"size":1,"codec":"lz4","dest":"memory","tag":0}"#.to_string(),
    ];
    std::fs::write(&trace, lines.join("\n")).unwrap();
    let out = bin().arg("replay").arg(&trace).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.trace:3") && err.contains("outside"),
        "{err}"
    );
    std::fs::write(&trace, r#"{"format":"gpustream-trace","version":99}"#).unwrap();
    let out = bin().arg("trace-info").arg(&trace).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("version 99"));
}
