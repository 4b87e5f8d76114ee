//! The soak's regressions: seeds that once broke a rule of `gpustream soak`,
//! replayed with the faults that found them. Each runs the real binary for
//! a few seconds on the test device (lavapipe in CI) and must end with no
//! violation.
#![cfg(target_os = "linux")]

use gpustream_tools::testing as common;
use std::process::Command;

/// Runs `gpustream soak` with `args` under its own directory; panics with
/// its output unless it exits 0.
fn soak(name: &str, args: &[&str]) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_gpustream"))
        .arg("soak")
        .args(args)
        .arg("--dir")
        .arg(&dir)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("the gpustream binary runs");
    assert!(
        out.status.success(),
        "gpustream soak {args:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("no violations"), "{text}");
    assert!(text.contains("runtime rebuilds"), "{text}");
}

/// Whether the test device exists (else the test skips, or fails under
/// `GPUSTREAM_REQUIRE_GPU=1`).
fn have_gpu() -> bool {
    common::test_device().is_some()
}

/// Seed 1, the device lost every few seconds: wgpu destroys a lost
/// device's buffers at once, and the staging chunks' imported host memory
/// was unmapped with them while reads and decode threads were still
/// writing the slots they had been handed (reads failed with EFAULT, a
/// decode thread died of SIGSEGV). The ring now holds the mapping until its
/// chunks go.
#[test]
fn soak_seed_1_device_loss_keeps_staging_memory_mapped() {
    if !have_gpu() {
        return;
    }
    soak(
        "soak-seed-1",
        &[
            "--seconds",
            "15",
            "--seed",
            "1",
            "--faults",
            "device-loss",
            "--device-loss-every",
            "6",
        ],
    );
}

/// Seed 2, the device lost every few seconds: the status words of a batch
/// whose device was lost before it ran were read as its verdict ("unknown
/// checksum status word 0xffffffff"), failing requests with a GPU decode
/// error no fault explains. Such batches now fail as lost.
#[test]
fn soak_seed_2_device_loss_fails_unrun_batches_as_lost() {
    if !have_gpu() {
        return;
    }
    soak(
        "soak-seed-2",
        &[
            "--seconds",
            "15",
            "--seed",
            "2",
            "--faults",
            "device-loss",
            "--device-loss-every",
            "6",
        ],
    );
}
