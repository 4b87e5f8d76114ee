//! The `gpustream` command-line tool.

use clap::{Parser, Subcommand};

mod cli;

/// Streams compressed assets from storage into GPU memory.
#[derive(Parser)]
#[command(name = "gpustream", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the wgpu adapters this machine offers.
    Adapters(cli::adapters::Args),
    /// Stream a pack through the runtime per case and staging size, beside baselines.
    Bench(cli::bench::Args),
    /// Play a captured trace back against its packs.
    Replay(cli::replay::ReplayArgs),
    /// Summarise a captured trace.
    TraceInfo(cli::replay::InfoArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Adapters(args) => cli::adapters::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Replay(args) => cli::replay::replay(args),
        Command::TraceInfo(args) => cli::replay::info(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
