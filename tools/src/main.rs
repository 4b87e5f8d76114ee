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
    /// Build a pack from images (PNG, JPEG), KTX2 files and other files.
    Pack(cli::pack::Args),
    /// Show a pack's assets, tiles, codecs and compression ratios.
    Info(cli::info::Args),
    /// Check every block's checksum and decode it; list every bad block.
    Verify(cli::verify::Args),
    /// Write one asset out: a blob's bytes or a texture as KTX2.
    Unpack(cli::unpack::Args),
    /// Build (or reuse) the demo pack from the images in assets/.
    DemoPack(cli::demo_pack::Args),
    /// Run the runtime under load with faults injected, and check that
    /// nothing is lost.
    #[cfg(target_os = "linux")]
    Soak(cli::soak::Args),
    /// Measure the disk like the Xbox article (read size x queue depth x
    /// pattern), compare with fio, or read a directory in physical order.
    Sweep(cli::sweep::Args),
}

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes
    // away (`gpustream trace-info t | head`) instead of panicking in println!.
    // SAFETY: resetting a signal disposition at start-up, before any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::logger::init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Adapters(args) => cli::adapters::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Replay(args) => cli::replay::replay(args),
        Command::TraceInfo(args) => cli::replay::info(args),
        Command::Pack(args) => cli::pack::run(args),
        Command::Info(args) => cli::info::run(args),
        Command::Verify(args) => cli::verify::run(args),
        Command::Unpack(args) => cli::unpack::run(args),
        Command::DemoPack(args) => cli::demo_pack::run(args),
        Command::Sweep(args) => cli::sweep::run(args),
        #[cfg(target_os = "linux")]
        Command::Soak(args) => cli::soak::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
