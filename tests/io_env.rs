//! `GPUSTREAM_IO=threads` forces the thread pool under `BackendKind::Auto`
//! (its own test binary: the environment is process-wide).

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
    if let Ok(u) = IoEngine::new(IoConfig {
        backend: BackendKind::IoUring,
        ..IoConfig::default()
    }) {
        assert_eq!(
            u.backend_name(),
            "io_uring",
            "an explicit choice wins over the variable"
        );
    }
    std::env::remove_var("GPUSTREAM_IO");
}
