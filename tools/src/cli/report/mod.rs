//! Reporting helpers of the measuring tools (`sweep`, `bench`): plain-text
//! and Markdown tables, PNG line plots, JSON output. The table printer
//! is the tools library's (`gpustream_tools::table`), which the
//! virtual-texturing example shares.

pub mod json;
pub mod plot;

pub use gpustream_tools::table::Table;
pub use plot::{LinePlot, Series};

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
