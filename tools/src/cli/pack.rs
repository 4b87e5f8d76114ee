//! `gpustream pack`: build a pack from images, DDS and KTX2 files and other
//! files.

use super::CliResult;
use gpustream::pack::{PackWriter, TextureFormat, WriterOptions};
use gpustream::Codec;
use gpustream_tools::import::{add_file, ImageOptions};
use std::path::{Path, PathBuf};

/// The LZ4 level `pack` uses unless told: HC level 9, where the ratio
/// on real BC1/BC3 textures is within 1% of the strongest level at a
/// fraction of its packing time (docs/results.md).
pub const LZ4_DEFAULT_LEVEL: i32 = 9;

/// The GDeflate level `pack` uses unless told: the reference compressor's
/// strongest, its near-optimal parse (docs/results.md has its ratio and
/// packing time beside the other levels').
pub const GDEFLATE_DEFAULT_LEVEL: i32 = 12;

/// Arguments of `gpustream pack`.
#[derive(clap::Args)]
pub struct Args {
    /// Input files or directories (directories are walked, in name order;
    /// assets are named by their path relative to the directory given).
    /// PNG/JPEG become textures, DDS and KTX2 keep their levels (zstd
    /// undone, Basis transcoded to BC7/BC1), anything else a blob.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The pack to write.
    #[arg(short, long)]
    output: PathBuf,
    /// The codec tried for every block (blocks that save under 1/16 are stored raw).
    #[arg(long, default_value = "lz4")]
    codec: Codec,
    /// The codec's level. lz4: 0 is the fast compressor, 1..=12 LZ4 HC
    /// (10..=12 its optimal parse), all read by the same decoders; the
    /// default is HC level 9, the best trade measured (docs/results.md).
    /// zstd: 1..=22, default 0 (zstd's own default, 3). gdeflate: 0..=12
    /// (0 writes stored deflate blocks), default 12.
    #[arg(long)]
    level: Option<i32>,
    /// Do not try BCn conditioning. By default every compressed BC1, BC3,
    /// BC4, BC5 and BC7 block is also compressed with its BC blocks stored
    /// field by field (endpoints, then indices), and that order is kept
    /// where it makes the block smaller; decoding restores the original
    /// bytes: on the GPU, a pass after the LZ4 decoder; on the CPU, the
    /// decode threads (docs/pack-format.md).
    #[arg(long)]
    no_condition: bool,
    /// With lz4: cut every block into independent LZ4 sub-blocks of about
    /// this many KiB (16 is the size measured), on whole tile rows, for
    /// four times the blocks a GPU decodes side by side. 0: one LZ4 block
    /// per block.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=64))]
    sub_block_kib: u32,
    /// The format images (and RGBA8 DDS files without mips) are encoded to:
    /// bc7, bc1, bc3, bc4, bc5 or rgba8. Basis ETC1S KTX2 files without
    /// alpha are transcoded to BC1 when this is bc1, to BC7 otherwise.
    #[arg(long, default_value = "bc7")]
    texture_format: TextureFormat,
    /// Images hold sRGB colour: sRGB formats, mips filtered in linear light.
    #[arg(long)]
    srgb: bool,
    /// Stripe the pack over these directories, one per disk (2 to 64): the
    /// head (named by --output, which then names a file in the first
    /// directory) holds the table of contents and the first stripe unit,
    /// and each other directory gets a member file `<name>.<k>` with every
    /// N-th unit. It opens as one pack, read from every disk at once.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    stripe: Vec<PathBuf>,
    /// The stripe unit in KiB: runs of whole blocks of at most this many
    /// stored bytes go to one member in turn.
    #[arg(long, default_value_t = gpustream::pack::stripe::DEFAULT_UNIT >> 10)]
    stripe_unit_kib: u64,
}

/// Where `pack --stripe` writes the head and each member: the head in the
/// first directory under the output's file name, member `k` in directory
/// `k` as `<name>.<k>`.
fn stripe_paths(output: &Path, dirs: &[PathBuf]) -> Result<(PathBuf, Vec<PathBuf>), String> {
    if !(2..=gpustream::pack::stripe::MAX_MEMBERS).contains(&dirs.len()) {
        return Err(format!(
            "--stripe takes 2..={} directories, got {}",
            gpustream::pack::stripe::MAX_MEMBERS,
            dirs.len()
        ));
    }
    let name = output
        .file_name()
        .ok_or_else(|| format!("--output {} names no file", output.display()))?;
    let canon = |p: &Path| {
        std::fs::canonicalize(p).map_err(|e| format!("stripe directory {}: {e}", p.display()))
    };
    let first = canon(&dirs[0])?;
    match output.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) if canon(parent)? != first => {
            return Err(format!(
                "with --stripe, --output names the head in the first directory {}; {} is elsewhere",
                dirs[0].display(),
                output.display()
            ))
        }
        _ => {}
    }
    let mut members = Vec::new();
    for (k, dir) in dirs.iter().enumerate().skip(1) {
        canon(dir)?;
        let mut m = name.to_os_string();
        m.push(format!(".{k}"));
        members.push(dir.join(m));
    }
    Ok((dirs[0].join(name), members))
}

/// Expands directories into their files, sorted, with asset names.
/// Symbolic links to directories are not followed (a link to a parent would
/// walk forever); every error names the path.
fn collect(
    inputs: &[PathBuf],
) -> Result<Vec<(String, PathBuf)>, Box<dyn std::error::Error + Send + Sync>> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), String> {
        let at = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        let mut entries = Vec::new();
        for e in std::fs::read_dir(dir).map_err(|e| at(dir, e))? {
            let e = e.map_err(|e| at(dir, e))?;
            let kind = e.file_type().map_err(|err| at(&e.path(), err))?;
            entries.push((e.path(), kind));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (p, kind) in entries {
            if kind.is_dir() {
                walk(&p, base, out)?;
            } else if kind.is_symlink() && p.is_dir() {
                return Err(format!(
                    "{}: a symbolic link to a directory (not followed; give its target)",
                    p.display()
                ));
            } else {
                let rel = p.strip_prefix(base).unwrap_or(&p);
                out.push((rel.to_string_lossy().replace('\\', "/"), p.clone()));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for input in inputs {
        if input.is_dir() {
            walk(input, input, &mut out)?;
        } else {
            let name = input
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| input.display().to_string());
            out.push((name, input.clone()));
        }
    }
    if out.is_empty() {
        let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        return Err(format!("{}: no files to pack", names.join(", ")).into());
    }
    Ok(out)
}

/// Runs `gpustream pack`.
pub fn run(args: Args) -> CliResult {
    if !matches!(
        args.texture_format.with_srgb(false),
        TextureFormat::Bc7
            | TextureFormat::Bc1
            | TextureFormat::Bc3
            | TextureFormat::Bc4
            | TextureFormat::Bc5
            | TextureFormat::Rgba8Unorm
    ) {
        return Err(format!(
            "--texture-format {} is not one the encoder writes",
            args.texture_format
        )
        .into());
    }
    if let Some(level) = args.level {
        let range = match args.codec {
            Codec::Lz4 => 0..=gpustream::codec::LZ4_MAX_LEVEL,
            Codec::Zstd => 0..=22,
            Codec::GDeflate => 0..=gpustream::codec::gdeflate::MAX_LEVEL,
            Codec::None => 0..=0,
        };
        if !range.contains(&level) {
            return Err(format!(
                "--level {level} is outside {}..={} for {}",
                range.start(),
                range.end(),
                args.codec
            )
            .into());
        }
    }
    let stripe = if args.stripe.is_empty() {
        None
    } else {
        Some(stripe_paths(&args.output, &args.stripe)?)
    };
    let files = collect(&args.inputs)?;
    let started = std::time::Instant::now();
    // A striped pack is written whole first, beside its head, then dealt
    // out over the members (the stored bytes are copied, not re-encoded).
    let whole = match &stripe {
        Some((head, _)) => {
            let mut name = head.file_name().unwrap_or_default().to_os_string();
            name.push(".whole");
            head.with_file_name(name)
        }
        None => args.output.clone(),
    };
    let opts = ImageOptions {
        format: args.texture_format,
        srgb: args.srgb,
    };
    let mut writer = PackWriter::create(
        &whole,
        WriterOptions::default()
            .with_codec(args.codec)
            .with_level(args.level.unwrap_or(match args.codec {
                Codec::Lz4 => LZ4_DEFAULT_LEVEL,
                Codec::GDeflate => GDEFLATE_DEFAULT_LEVEL,
                _ => 0,
            }))
            .with_lz4_sub_block(args.sub_block_kib << 10)
            .with_condition(!args.no_condition),
    )?;
    let bar = indicatif::ProgressBar::new(files.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} packing [{bar:40}] {pos}/{len} {wide_msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    for (name, path) in &files {
        bar.set_message(name.clone());
        add_file(&mut writer, name, path, opts)?;
        bar.inc(1);
    }
    let s = writer.finish()?;
    bar.finish_and_clear();
    let out = match &stripe {
        Some((head, members)) => {
            let unit = args.stripe_unit_kib << 10;
            let striped = gpustream::pack::stripe::stripe_pack(&whole, head, members, unit);
            let _ = std::fs::remove_file(&whole);
            let striped = striped?;
            for (k, (path, len)) in striped.members.iter().zip(&striped.data_len).enumerate() {
                println!("member {k}: {} ({len} bytes of blocks)", path.display());
            }
            head.clone()
        }
        None => args.output.clone(),
    };
    println!(
        "{}: {} assets, {} blocks, {} -> {} bytes ({:.2}:1) in {:.2} s",
        out.display(),
        s.assets,
        s.blocks,
        s.uncompressed,
        s.stored,
        s.uncompressed as f64 / s.stored.max(1) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
