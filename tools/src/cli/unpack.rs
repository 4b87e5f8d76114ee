//! `gpustream unpack`: write one asset out, a blob as its bytes and a
//! texture with all its mips as KTX2, or as DDS when the output ends in
//! `.dds`. The texel data is exactly what the pack holds.

use super::CliResult;
use gpustream::pack::{AssetKind, Pack};
use gpustream_tools::dds::write_dds;
use gpustream_tools::ktx2::write_ktx2;
use std::path::PathBuf;

/// Arguments of `gpustream unpack`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
    /// The asset's name.
    asset: String,
    /// Where to write it (a texture: KTX2, or DDS when it ends in `.dds`).
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
            let mips = pack.read_texture_mips(id)?;
            let dds = args
                .output
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("dds"));
            if dds {
                write_dds(t.format, t.width, t.height, &mips)?
            } else {
                write_ktx2(t.format, t.width, t.height, &mips)
            }
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
