//! Per-frame statistics, written as CSV (one row per frame, like Expanse's
//! timing CSV) and summarised at the end.

use std::io::Write;
use std::path::Path;

/// The CSV header; the columns of [`FrameStats::csv_row`].
pub const CSV_HEADER: &str = "frame,cpu_ms,feedback_ms,tiles_requested,tiles_uploaded,tiles_evicted,submits,bytes,bandwidth_mbps,pool_occupancy,resident_tiles,loading_tiles,fence_ms";

/// What one frame did.
#[derive(Clone, Debug, Default)]
pub struct FrameStats {
    /// Frame number.
    pub frame: u64,
    /// CPU time of the frame (planning, enqueueing, encoding, submitting).
    pub cpu_ms: f64,
    /// CPU time turning feedback readbacks into tile requests.
    pub feedback_ms: f64,
    /// Tiles wanted and not resident.
    pub tiles_requested: usize,
    /// Tiles whose load completed (became visible) this frame.
    pub tiles_uploaded: usize,
    /// Tiles evicted this frame.
    pub tiles_evicted: usize,
    /// gpustream queue submits since the previous frame.
    pub submits: u64,
    /// Bytes gpustream delivered since the previous frame.
    pub bytes: u64,
    /// `bytes` over the frame's wall time, MB/s.
    pub bandwidth_mbps: f64,
    /// Occupied pool slots (resident + loading) over the pool size.
    pub pool_occupancy: f64,
    /// Tiles resident.
    pub resident_tiles: usize,
    /// Tiles loading.
    pub loading_tiles: usize,
    /// Mean time from submitting a tile batch to seeing its fence value
    /// reached, over the batches that became visible this frame (0: none).
    pub fence_ms: f64,
}

impl FrameStats {
    /// One CSV row.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.3},{:.3},{},{},{},{},{},{:.1},{:.4},{},{},{:.3}",
            self.frame,
            self.cpu_ms,
            self.feedback_ms,
            self.tiles_requested,
            self.tiles_uploaded,
            self.tiles_evicted,
            self.submits,
            self.bytes,
            self.bandwidth_mbps,
            self.pool_occupancy,
            self.resident_tiles,
            self.loading_tiles,
            self.fence_ms
        )
    }
}

/// Writes the frames as CSV.
pub fn write_csv(path: &Path, frames: &[FrameStats]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "{CSV_HEADER}")?;
    for s in frames {
        writeln!(f, "{}", s.csv_row())?;
    }
    f.flush()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// A summary table (markdown) of a run.
pub fn summary(frames: &[FrameStats], wall_s: f64) -> String {
    let mut cpu: Vec<f64> = frames.iter().map(|f| f.cpu_ms).collect();
    cpu.sort_by(f64::total_cmp);
    let mut fb: Vec<f64> = frames.iter().map(|f| f.feedback_ms).collect();
    fb.sort_by(f64::total_cmp);
    let bytes: u64 = frames.iter().map(|f| f.bytes).sum();
    let up: usize = frames.iter().map(|f| f.tiles_uploaded).sum();
    let ev: usize = frames.iter().map(|f| f.tiles_evicted).sum();
    let subs: u64 = frames.iter().map(|f| f.submits).sum();
    let last = frames.last().cloned().unwrap_or_default();
    let mut t = super::table::Table::new(["metric", "value"]);
    let mut row = |k: &str, v: String| t.row([k.to_string(), v]);
    row("frames", frames.len().to_string());
    row("wall time", format!("{wall_s:.2} s"));
    row(
        "frames per second",
        format!("{:.1}", frames.len() as f64 / wall_s.max(1e-9)),
    );
    row(
        "CPU frame time p50 / p95 / max",
        format!(
            "{:.2} / {:.2} / {:.2} ms",
            quantile(&cpu, 0.5),
            quantile(&cpu, 0.95),
            quantile(&cpu, 1.0)
        ),
    );
    row(
        "feedback time p50 / p95",
        format!("{:.3} / {:.3} ms", quantile(&fb, 0.5), quantile(&fb, 0.95)),
    );
    row("tiles uploaded / evicted", format!("{up} / {ev}"));
    row("gpustream submits", subs.to_string());
    row(
        "bytes delivered",
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64),
    );
    row(
        "streaming bandwidth (avg over wall time)",
        format!("{:.1} MB/s", bytes as f64 / 1e6 / wall_s.max(1e-9)),
    );
    row(
        "final pool occupancy",
        format!(
            "{:.1} % ({} resident)",
            last.pool_occupancy * 100.0,
            last.resident_tiles
        ),
    );
    t.to_markdown()
}
