//! One module per subcommand of the `gpustream` binary.

pub mod adapters;
pub mod demo_pack;
pub mod info;
pub mod pack;
pub mod unpack;
pub mod verify;

/// The error type the subcommands return: a message with its causes.
pub type CliResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;
