//! `GPUSTREAM_IO=threads` forces the thread pool under `BackendKind::Auto`
//! (its own test binary: the environment is process-wide).

mod common;

use gpustream::io::{BackendKind, IoConfig, IoEngine};

#[test]
fn env_forces_threads_under_auto_only() {
    std::env::set_var("GPUSTREAM_IO", "threads");
    let auto = IoEngine::new(IoConfig::default()).unwrap();
    assert_eq!(auto.backend_name(), "threads");
    let explicit = IoEngine::new(IoConfig {
        backend: BackendKind::Threads,
        ..IoConfig::default()
    })
    .unwrap();
    assert_eq!(explicit.backend_name(), "threads");
    match IoEngine::new(IoConfig {
        backend: BackendKind::IoUring,
        ..IoConfig::default()
    }) {
        Ok(u) => assert_eq!(
            u.backend_name(),
            "io_uring",
            "an explicit choice wins over the variable"
        ),
        Err(e) => common::io_uring_unavailable("the explicit io_uring choice", &e),
    }
    std::env::remove_var("GPUSTREAM_IO");
}
