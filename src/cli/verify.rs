//! `gpustream verify`: check every block's checksum and decode it.

use super::CliResult;
use gpustream::pack::{Pack, PackError};
use std::path::PathBuf;

/// Arguments of `gpustream verify`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
}

/// Runs `gpustream verify`: lists every bad block and fails if there is one.
pub fn run(args: Args) -> CliResult {
    let pack = Pack::open(&args.pack)?;
    let bar = indicatif::ProgressBar::new(pack.blocks().len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} verifying [{bar:40}] {pos}/{len} blocks",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let bad = pack.verify(|n| bar.set_position(n as u64))?;
    bar.finish_and_clear();
    for e in &bad {
        let what = match e {
            PackError::BlockChecksum { .. } => "checksum mismatch",
            PackError::BlockDecode { .. } => "does not decode",
            _ => "bad",
        };
        println!("BAD {what}: {e}");
    }
    let total: u64 = pack.blocks().iter().map(|b| b.size as u64).sum();
    if bad.is_empty() {
        println!(
            "{}: all {} blocks of {} assets OK ({} bytes decoded)",
            args.pack.display(),
            pack.blocks().len(),
            pack.assets().len(),
            total
        );
        Ok(())
    } else {
        Err(format!(
            "{}: {} of {} blocks are bad",
            args.pack.display(),
            bad.len(),
            pack.blocks().len()
        )
        .into())
    }
}
