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
    /// Measure the disk like the Xbox article (read size x queue depth x
    /// pattern), compare with fio, or read a directory in physical order.
    Sweep(cli::sweep::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Adapters(args) => cli::adapters::run(args),
        Command::Sweep(args) => cli::sweep::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
