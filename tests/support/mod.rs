//! Helpers shared by the integration tests (not part of the library: a test
//! binary includes this with `mod support;`).

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
