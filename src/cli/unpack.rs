//! `gpustream unpack`: write one asset out, a blob as its bytes and a
//! texture as KTX2 with all its mips.

use super::CliResult;
use gpustream::pack::ktx2::write_ktx2;
use gpustream::pack::{AssetKind, Pack};
use std::path::PathBuf;

/// Arguments of `gpustream unpack`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
    /// The asset's name.
    asset: String,
    /// Where to write it.
    #[arg(short, long)]
    output: PathBuf,
}

/// Runs `gpustream unpack`.
pub fn run(args: Args) -> CliResult {
    let pack = Pack::open(&args.pack)?;
    let id = pack
        .find(&args.asset)
        .ok_or_else(|| format!("{}: no asset named '{}'", args.pack.display(), args.asset))?;
    let asset = pack.asset(id);
    let bytes = match (asset.kind, asset.texture) {
        (AssetKind::Texture, Some(t)) => {
            write_ktx2(t.format, t.width, t.height, &pack.read_texture_mips(id)?)
        }
        _ => pack.read_blob(id)?,
    };
    std::fs::write(&args.output, &bytes).map_err(|e| format!("{}: {e}", args.output.display()))?;
    println!(
        "{} -> {} ({} bytes)",
        args.asset,
        args.output.display(),
        bytes.len()
    );
    Ok(())
}
