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
}

#[derive(Serialize)]
struct Report {
    path: String,
    file_len: u64,
    data_offset: u64,
    assets: Vec<AssetInfo>,
    by_codec: std::collections::BTreeMap<&'static str, Totals>,
    by_kind: std::collections::BTreeMap<&'static str, Totals>,
    /// Textures by the kind of file they came from ("unrecorded" for packs
    /// that predate the field).
    by_source: std::collections::BTreeMap<&'static str, Totals>,
    total: Totals,
}

fn report(pack: &Pack) -> Result<Report, gpustream::pack::PackError> {
    let mut by_codec = std::collections::BTreeMap::new();
    let mut by_kind = std::collections::BTreeMap::new();
    let mut by_source = std::collections::BTreeMap::new();
    let mut total = Totals::default();
    let mut assets = Vec::new();
    for (i, a) in pack.assets().iter().enumerate() {
        let id = gpustream::pack::AssetId(i as u32);
        let mut t = Totals::default();
        let mut codecs = Vec::new();
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
        for b in &pack.blocks()[a.blocks.start as usize..a.blocks.end as usize] {
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
        });
    }
    Ok(Report {
        path: pack.path().display().to_string(),
        file_len: pack.file_len(),
        data_offset: pack.data_offset(),
        assets,
        by_codec,
        by_kind,
        by_source,
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
        let codecs: Vec<&str> = a.codecs.iter().map(|c| c.name()).collect();
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
        "{:<16} {:>8} {:>14} {:>14} {:>7}",
        "by codec",
        "blocks",
        "uncompressed",
        "stored",
        "ratio"
    );
    let row = |o: &mut String, name: &str, t: &Totals| {
        outln!(
            o,
            "{:<16} {:>8} {:>14} {:>14} {:>6.2}:1",
            name,
            t.blocks,
            mib(t.uncompressed),
            mib(t.stored),
            t.ratio
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
    row(&mut o, "overall", &r.total);
    emit(&o)
}
