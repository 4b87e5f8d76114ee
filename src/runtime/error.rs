//! Why a runtime could not start, or a pack could not be opened.

use std::path::PathBuf;

/// Why a runtime or a pack could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The I/O engine failed to start or to open a file.
    #[error(transparent)]
    Io(#[from] crate::io::IoError),
    /// The pack's header or table of contents is invalid.
    #[error(transparent)]
    Pack(#[from] crate::pack::PackError),
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The GPU device was lost before the runtime could set up on it.
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    /// The trace file could not be created.
    #[error("cannot create trace file {}: {source}", path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A runtime thread could not be started.
    #[error("cannot start the runtime's {0} thread: {1}")]
    Thread(&'static str, #[source] std::io::Error),
}
