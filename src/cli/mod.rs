//! One module per subcommand of the `gpustream` binary.

pub mod adapters;
pub mod sweep;

/// The error type the subcommands return: a message with its causes.
pub type CliResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;
