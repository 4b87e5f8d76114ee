//! `gpustream info`: what a pack holds and how well it compressed.

use super::CliResult;
use gpustream::pack::{AssetKind, Block, Pack};
use gpustream::Codec;
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `gpustream info`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default, Clone, Copy)]
struct Totals {
    blocks: u64,
    /// Blocks stored as independent LZ4 sub-blocks, and how many
    /// sub-blocks they hold (`pack --sub-block-kib`).
    cut_blocks: u64,
    sub_blocks: u64,
    uncompressed: u64,
    stored: u64,
    ratio: f64,
    /// Median LZ4 sequences per LZ4 stream (a block, or each of its
    /// sub-blocks): the serial parse a GPU decoder pays per block.
    #[serde(skip_serializing_if = "Option::is_none")]
    lz4_sequences_median: Option<u32>,
}

impl Totals {
    fn add(&mut self, b: &Block) {
        self.blocks += 1;
        if b.sub_blocks > 0 {
            self.cut_blocks += 1;
            self.sub_blocks += b.sub_blocks as u64;
        }
        self.uncompressed += b.size as u64;
        self.stored += b.stored_size as u64;
        self.ratio = self.uncompressed as f64 / self.stored.max(1) as f64;
    }
}

#[derive(Serialize)]
struct AssetInfo {
    name: String,
    kind: AssetKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mips: Option<u8>,
    /// The kind of file the texture was packed from, when the pack says.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
    /// Milliseconds the packer spent converting it (decode, encode,
    /// decompress, transcode), when the pack says.
    #[serde(skip_serializing_if = "Option::is_none")]
    transcode_ms: Option<f64>,
    /// Tiles per tiled mip, finest first (mips in the packed tail omitted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tiles: Vec<[u32; 3]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    packed_mips: Option<usize>,
    first_block: u32,
    blocks: u32,
    uncompressed: u64,
    stored: u64,
    ratio: f64,
    codecs: Vec<Codec>,
    /// The codec levels its compressed blocks were packed at (0: the
    /// codec's default, or not recorded).
    levels: Vec<u8>,
    /// Blocks per BCn conditioning transform (`none` included).
    transforms: std::collections::BTreeMap<&'static str, u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lz4_sequences_median: Option<u32>,
}

#[derive(Serialize)]
struct Report {
    path: String,
    file_len: u64,
    data_offset: u64,
    /// A striped pack's stripe unit and files (the head first); absent for
    /// an ordinary pack.
    #[serde(skip_serializing_if = "Option::is_none")]
    stripe: Option<StripeInfo>,
    assets: Vec<AssetInfo>,
    by_codec: std::collections::BTreeMap<&'static str, Totals>,
    by_kind: std::collections::BTreeMap<&'static str, Totals>,
    /// Textures by the kind of file they came from ("unrecorded" for packs
    /// that predate the field).
    by_source: std::collections::BTreeMap<&'static str, Totals>,
    /// Compressed blocks by codec and level (`lz4-0` is the fast compressor).
    by_level: std::collections::BTreeMap<String, Totals>,
    /// Texture blocks by BCn conditioning transform.
    by_transform: std::collections::BTreeMap<&'static str, Totals>,
    total: Totals,
}

/// Where a striped pack's blocks lie.
#[derive(serde::Serialize)]
struct StripeInfo {
    unit: u64,
    members: Vec<gpustream::pack::Member>,
}

/// Sequence counts gathered per group, reduced to medians at the end.
#[derive(Default)]
struct Sequences(std::collections::HashMap<String, Vec<u32>>);

impl Sequences {
    fn median_of(&mut self, key: &str) -> Option<u32> {
        let v = self.0.get_mut(key).filter(|v| !v.is_empty())?;
        v.sort_unstable();
        Some(v[v.len() / 2])
    }
}

/// The LZ4 sequence count of each stream of block `i` (empty for other
/// codecs, or where the bytes cannot be read).
fn block_sequences(pack: &Pack, file: Option<&gpustream::pack::PackFiles>, i: u32) -> Vec<u32> {
    let b = pack.blocks()[i as usize];
    let Some(file) = file.filter(|_| b.codec == Codec::Lz4) else {
        return Vec::new();
    };
    let id = gpustream::pack::BlockId(i);
    let mut stored = Vec::new();
    if pack.read_stored(file, id, &mut stored).is_err() {
        return Vec::new();
    }
    let streams: Vec<&[u8]> = match pack.sub_blocks(id) {
        [] => vec![&stored[..]],
        subs => subs
            .iter()
            .filter_map(|s| {
                stored.get(s.stored_offset as usize..(s.stored_offset + s.stored_len) as usize)
            })
            .collect(),
    };
    streams
        .into_iter()
        .filter_map(gpustream::codec::lz4_sequence_count)
        .collect()
}

fn report(pack: &Pack) -> Result<Report, gpustream::pack::PackError> {
    let mut by_codec = std::collections::BTreeMap::new();
    let mut by_kind = std::collections::BTreeMap::new();
    let mut by_source = std::collections::BTreeMap::new();
    let mut by_level = std::collections::BTreeMap::new();
    let mut by_transform = std::collections::BTreeMap::new();
    let mut seqs = Sequences::default();
    let file = pack.open_file().ok();
    let mut total = Totals::default();
    let mut assets = Vec::new();
    for (i, a) in pack.assets().iter().enumerate() {
        let id = gpustream::pack::AssetId(i as u32);
        let mut t = Totals::default();
        let mut codecs = Vec::new();
        let mut levels = Vec::new();
        let mut transforms = std::collections::BTreeMap::new();
        let kind_name = match a.texture {
            Some(t) => t.format.name(),
            None => "blob",
        };
        let source = pack.texture_source(id);
        let source_name = match (a.texture, source) {
            (Some(_), Some(s)) => Some(s.kind.name()),
            (Some(_), None) => Some("unrecorded"),
            (None, _) => None,
        };
        for i in a.blocks.clone() {
            let b = &pack.blocks()[i as usize];
            let counts = block_sequences(pack, file.as_ref(), i);
            let level_key = format!("{}-{}", b.codec.name(), b.level);
            let transform = b.transform.name();
            for key in [
                format!("asset {}", a.blocks.start),
                format!("codec {}", b.codec.name()),
                format!("kind {kind_name}"),
                format!("level {level_key}"),
                format!("transform {transform}"),
                format!("source {}", source_name.unwrap_or("")),
                "total".to_owned(),
            ] {
                seqs.0.entry(key).or_default().extend(&counts);
            }
            if b.codec != Codec::None {
                by_level
                    .entry(level_key)
                    .or_insert_with(Totals::default)
                    .add(b);
                if !levels.contains(&b.level) {
                    levels.push(b.level);
                }
            }
            if a.texture.is_some() {
                by_transform
                    .entry(transform)
                    .or_insert_with(Totals::default)
                    .add(b);
                *transforms.entry(transform).or_insert(0) += 1;
            }
            t.add(b);
            by_codec
                .entry(b.codec.name())
                .or_insert_with(Totals::default)
                .add(b);
            by_kind
                .entry(kind_name)
                .or_insert_with(Totals::default)
                .add(b);
            if let Some(name) = source_name {
                by_source.entry(name).or_insert_with(Totals::default).add(b);
            }
            total.add(b);
            if !codecs.contains(&b.codec) {
                codecs.push(b.codec);
            }
        }
        let mut tiles = Vec::new();
        let mut packed = None;
        if let Some(info) = a.texture {
            for m in 0..info.mip_count {
                if let Some((x, y)) = pack.tile_grid(id, m)? {
                    tiles.push([m as u32, x, y]);
                }
            }
            packed = Some(pack.packed_mips(id)?.mips.len());
        }
        assets.push(AssetInfo {
            name: a.name.clone(),
            kind: a.kind,
            format: a.texture.map(|t| t.format.name().to_owned()),
            width: a.texture.map(|t| t.width),
            height: a.texture.map(|t| t.height),
            mips: a.texture.map(|t| t.mip_count),
            source: source.map(|s| s.kind.name()),
            transcode_ms: source.map(|s| f64::from(s.transcode_us) / 1000.0),
            tiles,
            packed_mips: packed,
            first_block: a.blocks.start,
            blocks: a.block_count(),
            uncompressed: t.uncompressed,
            stored: t.stored,
            ratio: t.ratio,
            codecs,
            levels,
            transforms,
            lz4_sequences_median: seqs.median_of(&format!("asset {}", a.blocks.start)),
        });
    }
    for (name, t) in by_codec.iter_mut() {
        t.lz4_sequences_median = seqs.median_of(&format!("codec {name}"));
    }
    for (name, t) in by_kind.iter_mut() {
        t.lz4_sequences_median = seqs.median_of(&format!("kind {name}"));
    }
    for (name, t) in by_source.iter_mut() {
        t.lz4_sequences_median = seqs.median_of(&format!("source {name}"));
    }
    for (name, t) in by_level.iter_mut() {
        t.lz4_sequences_median = seqs.median_of(&format!("level {name}"));
    }
    for (name, t) in by_transform.iter_mut() {
        t.lz4_sequences_median = seqs.median_of(&format!("transform {name}"));
    }
    total.lz4_sequences_median = seqs.median_of("total");
    Ok(Report {
        path: pack.path().display().to_string(),
        file_len: pack.file_len(),
        data_offset: pack.data_offset(),
        stripe: pack.stripe_unit().map(|unit| StripeInfo {
            unit,
            members: pack.members().to_vec(),
        }),
        assets,
        by_codec,
        by_kind,
        by_source,
        by_level,
        by_transform,
        total,
    })
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64)
}

/// Appends a line to the report (a `String`, so a closed pipe such as
/// `| head` ends the output quietly instead of panicking in `println!`).
macro_rules! outln {
    ($o:expr) => {
        $o.push('\n')
    };
    ($o:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($o, $($arg)*);
    }};
}

fn emit(text: &str) -> CliResult {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Runs `gpustream info`.
pub fn run(args: Args) -> CliResult {
    let pack = Pack::open(&args.pack)?;
    let r = report(&pack)?;
    let mut o = String::new();
    if args.json {
        outln!(o, "{}", serde_json::to_string_pretty(&r)?);
        return emit(&o);
    }
    outln!(
        o,
        "{}: {} bytes, data from offset {}, {} assets, {} blocks",
        r.path,
        r.file_len,
        r.data_offset,
        r.assets.len(),
        r.total.blocks
    );
    if let Some(s) = &r.stripe {
        outln!(
            o,
            "striped over {} files in units of {} KiB:",
            s.members.len(),
            s.unit >> 10
        );
        for (k, m) in s.members.iter().enumerate() {
            outln!(
                o,
                "  member {k}: {} ({})",
                m.path.display(),
                mib(m.data_len)
            );
        }
    }
    if r.total.cut_blocks > 0 {
        outln!(
            o,
            "{} LZ4 blocks stored as {} independent sub-blocks (decoded side by side on the GPU)",
            r.total.cut_blocks,
            r.total.sub_blocks
        );
    }
    outln!(o);
    outln!(
        o,
        "{:<36} {:<9} {:<20} {:>7} {:>12} {:>12} {:>6}  codecs",
        "asset",
        "kind",
        "texture",
        "blocks",
        "size",
        "stored",
        "ratio"
    );
    for a in &r.assets {
        let tex = match (&a.format, a.width, a.height, a.mips) {
            (Some(f), Some(w), Some(h), Some(m)) => format!("{f} {w}x{h} m{m}"),
            _ => String::new(),
        };
        let codecs: Vec<String> = a
            .codecs
            .iter()
            .map(|c| match c {
                Codec::None => c.name().to_owned(),
                _ => {
                    let levels: Vec<String> = a.levels.iter().map(|l| l.to_string()).collect();
                    format!("{c} level {}", levels.join("/"))
                }
            })
            .collect();
        outln!(
            o,
            "{:<36} {:<9} {:<20} {:>7} {:>12} {:>12} {:>6.2}  {}",
            a.name,
            format!("{:?}", a.kind).to_lowercase(),
            tex,
            a.blocks,
            a.uncompressed,
            a.stored,
            a.ratio,
            codecs.join(",")
        );
        let conditioned: Vec<String> = a
            .transforms
            .iter()
            .filter(|(t, _)| **t != "none")
            .map(|(t, n)| format!("{t} on {n} of {} blocks", a.blocks))
            .collect();
        if !conditioned.is_empty() || a.lz4_sequences_median.is_some() {
            outln!(
                o,
                "{:<36}   conditioning: {}; LZ4 sequences per block (median): {}",
                "",
                if conditioned.is_empty() {
                    "none".to_owned()
                } else {
                    conditioned.join(", ")
                },
                a.lz4_sequences_median
                    .map_or("-".to_owned(), |n| n.to_string())
            );
        }
        if let (Some(src), Some(ms)) = (a.source, a.transcode_ms) {
            outln!(o, "{:<36}   from {src}, {ms:.1} ms to convert", "");
        }
        if !a.tiles.is_empty() {
            let t: Vec<String> = a
                .tiles
                .iter()
                .map(|[m, x, y]| format!("m{m}:{x}x{y}"))
                .collect();
            outln!(
                o,
                "{:<36}   tiles {}; packed mips: {}",
                "",
                t.join(" "),
                a.packed_mips.unwrap_or(0)
            );
        }
    }
    outln!(o);
    outln!(
        o,
        "{:<16} {:>8} {:>14} {:>14} {:>7} {:>9}",
        "by codec",
        "blocks",
        "uncompressed",
        "stored",
        "ratio",
        "seq/block"
    );
    let row = |o: &mut String, name: &str, t: &Totals| {
        outln!(
            o,
            "{:<16} {:>8} {:>14} {:>14} {:>6.2}:1 {:>9}",
            name,
            t.blocks,
            mib(t.uncompressed),
            mib(t.stored),
            t.ratio,
            t.lz4_sequences_median
                .map_or(String::new(), |n| n.to_string())
        )
    };
    for (name, t) in &r.by_codec {
        row(&mut o, name, t);
    }
    outln!(o, "by content (format or blob)");
    for (name, t) in &r.by_kind {
        row(&mut o, name, t);
    }
    if !r.by_source.is_empty() {
        outln!(o, "textures by source");
        for (name, t) in &r.by_source {
            row(&mut o, name, t);
        }
    }
    outln!(o, "compressed blocks by codec and level");
    for (name, t) in &r.by_level {
        row(&mut o, name, t);
    }
    if !r.by_transform.is_empty() {
        outln!(o, "texture blocks by conditioning");
        for (name, t) in &r.by_transform {
            row(&mut o, name, t);
        }
    }
    row(&mut o, "overall", &r.total);
    emit(&o)
}
