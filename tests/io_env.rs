//! The library reads no environment: `GPUSTREAM_IO` set in the process
//! changes nothing under `BackendKind::Auto`; only the `gpustream` tool reads
//! it, for its own commands (its own test binary: the environment is
//! process-wide).

mod common;

use gpustream::io::{BackendKind, IoConfig, IoEngine};

#[test]
fn the_library_ignores_the_environment() {
    let before = IoEngine::new(IoConfig::default()).unwrap();
    std::env::set_var("GPUSTREAM_IO", "threads");
    let after = IoEngine::new(IoConfig::default()).unwrap();
    assert_eq!(before.backend_name(), after.backend_name());
    let explicit = IoEngine::new(IoConfig::default().with_backend(BackendKind::Threads)).unwrap();
    assert_eq!(explicit.backend_name(), "threads");
    assert_eq!("threads".parse::<BackendKind>(), Ok(BackendKind::Threads));
    assert_eq!("IO_URING".parse::<BackendKind>(), Ok(BackendKind::IoUring));
    assert!("fast".parse::<BackendKind>().is_err());
    std::env::remove_var("GPUSTREAM_IO");
}
