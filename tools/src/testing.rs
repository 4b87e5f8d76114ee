//! The rules the GPU and I/O tests of both crates follow where this machine
//! lacks something: skip with a loud notice, or fail where CI says the
//! machine has it (`GPUSTREAM_REQUIRE_GPU=1`, `GPUSTREAM_REQUIRE_IO_URING=1`,
//! `GPUSTREAM_REQUIRE_O_DIRECT=1`), so that no test passes there by
//! skipping.

use crate::gpu::{open_device, Capability, GpuContext};

/// The device for a GPU test. Where none exists it prints a loud notice and
/// returns `None` so the test can skip, unless `GPUSTREAM_REQUIRE_GPU=1`
/// (set by CI), which turns the missing adapter into a failure.
pub fn test_device() -> Option<GpuContext> {
    match open_device() {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            skip_gpu_test(&format!("{e} (install mesa-vulkan-drivers for lavapipe)"));
            None
        }
    }
}

/// Whether a GPU test may go on to use `cap` on `ctx`. When the device lacks
/// it, prints a loud notice naming what is missing and returns `false`, or,
/// under `GPUSTREAM_REQUIRE_GPU=1`, fails the test.
pub fn test_supports(ctx: &GpuContext, cap: Capability) -> bool {
    match ctx.lacks(cap) {
        None => true,
        Some(why) => {
            skip_gpu_test(&format!("{cap:?}: {why}"));
            false
        }
    }
}

/// A GPU test (or part of one) that cannot run here: a loud notice on
/// stderr, or a panic under `GPUSTREAM_REQUIRE_GPU=1`, where CI expects every
/// GPU test to run.
fn skip_gpu_test(why: &str) {
    if std::env::var("GPUSTREAM_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        panic!("GPUSTREAM_REQUIRE_GPU=1 but this GPU test cannot run: {why}");
    }
    eprintln!("!!! SKIPPING GPU TEST: {why}");
}

/// Called where io_uring could not be set up: prints a loud notice so the
/// test can go on without it, or, under `GPUSTREAM_REQUIRE_IO_URING=1` (set by
/// CI, whose kernel has io_uring), fails the test, so that an io_uring test
/// can never pass there by skipping.
pub fn io_uring_unavailable(what: &str, why: &dyn std::fmt::Display) {
    if std::env::var("GPUSTREAM_REQUIRE_IO_URING").is_ok_and(|v| v == "1") {
        panic!("GPUSTREAM_REQUIRE_IO_URING=1 but io_uring is unavailable ({why}): {what}");
    }
    eprintln!("!!! io_uring unavailable ({why}): SKIPPING {what} !!!");
}

/// Called where a file the test wrote under the target directory could not
/// be opened with O_DIRECT: prints a loud notice so the test can go on
/// without checking direct I/O, or, under `GPUSTREAM_REQUIRE_O_DIRECT=1`
/// (set by CI, whose target directory is on ext4), fails the test, so that
/// a direct-I/O check can never pass there by being skipped.
pub fn o_direct_unavailable(what: &str) {
    if std::env::var("GPUSTREAM_REQUIRE_O_DIRECT").is_ok_and(|v| v == "1") {
        panic!("GPUSTREAM_REQUIRE_O_DIRECT=1 but O_DIRECT is unavailable: {what}");
    }
    eprintln!("!!! O_DIRECT unavailable: SKIPPING {what} !!!");
}
