//! `gpustream demo-pack`: build (or reuse) the demo pack.

use super::CliResult;
use gpustream::Codec;
use gpustream_tools::demo::{build_demo_pack, ensure_demo_pack, DemoConfig, DEFAULT_PATH};
use std::path::PathBuf;

/// Arguments of `gpustream demo-pack`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the pack.
    #[arg(short, long, default_value = DEFAULT_PATH)]
    output: PathBuf,
    /// Uncompressed bytes of asset data: a number with an optional unit
    /// (KiB, MiB, GiB, KB, MB, GB).
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    size: u64,
    /// Seed of the procedural variation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The codec tried for every block.
    #[arg(long, default_value = "lz4")]
    codec: Codec,
    /// zstd level (0 = default).
    #[arg(long, default_value_t = 0)]
    level: i32,
    /// Rebuild even when a matching pack is already there.
    #[arg(long)]
    force: bool,
}

/// Parses "256MiB", "1.5GiB", "100000", "10MB".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{s}' is not a size"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => return Err(format!("unknown size unit '{other}'")),
    };
    let v = n * mult as f64;
    if !(0.0..=(1u64 << 50) as f64).contains(&v) {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(v as u64)
}

/// Runs `gpustream demo-pack`.
pub fn run(args: Args) -> CliResult {
    let config = DemoConfig {
        size_bytes: args.size,
        seed: args.seed,
        codec: args.codec,
        level: args.level,
    };
    let start = std::time::Instant::now();
    if args.force {
        build_demo_pack(&args.output, config, true)?;
    } else {
        ensure_demo_pack(&args.output, config, true)?;
    }
    let pack = gpustream::pack::Pack::open(&args.output)?;
    let total: u64 = pack.assets().iter().map(|a| a.size).sum();
    println!(
        "{}: {} assets, {} blocks, {} bytes of data stored in {} ({:.2}:1), ready after {:.1} s",
        args.output.display(),
        pack.assets().len(),
        pack.blocks().len(),
        total,
        pack.data_len(),
        total as f64 / pack.data_len().max(1) as f64,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_size("100000"), Ok(100_000));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert!(parse_size("ten").is_err());
        assert!(parse_size("5 parsecs").is_err());
    }
}
