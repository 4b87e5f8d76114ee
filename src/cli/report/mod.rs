//! Reporting helpers of the measuring tools (`sweep`, `bench`): plain-text
//! and Markdown tables, PNG line plots, JSON output. Part of the binary, not
//! the library; the virtual-texturing example includes `table.rs` by path.

pub mod json;
pub mod plot;
pub mod table;

pub use plot::{LinePlot, Series};
pub use table::Table;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// Writing the output file failed.
    #[error("writing {path}: {source}", path = path.display())]
    Write {
        /// The output file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Drawing the plot failed.
    #[error("drawing {path}: {message}", path = path.display())]
    Plot {
        /// The output file.
        path: std::path::PathBuf,
        /// What the plotting library said.
        message: String,
    },
    /// Serialising JSON failed.
    #[error("serialising {path}: {source}", path = path.display())]
    Json {
        /// The output file.
        path: std::path::PathBuf,
        /// The serialiser's error.
        source: serde_json::Error,
    },
}
