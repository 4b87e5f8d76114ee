//! The bench report: its rows, the printed tables, the JSON and the plot.

use std::path::Path;

use serde::Serialize;

use crate::cli::report::plot::{save_png, LinePlot, Series};
use crate::cli::report::Table;

use super::metrics::{HostSide, TargetCheck};
use super::BoxError;

/// One line of the results: one case at one staging size.
#[derive(Serialize, Clone, Debug)]
pub struct BenchRow {
    /// The case.
    pub case: String,
    /// Staging size in MiB.
    pub staging_mib: u64,
    /// Uncompressed bytes delivered per pass.
    pub bytes_delivered: u64,
    /// Bytes read from the file per pass.
    pub bytes_read: u64,
    /// Compression ratio of the case's pack (uncompressed / stored).
    pub ratio: f64,
    /// Median GB/s of uncompressed data delivered, submit to fence.
    pub delivered_gbps: f64,
    /// Median GB/s read from the file.
    pub read_gbps: f64,
    /// Process CPU seconds per GB delivered (also in `host`).
    pub cpu_s_per_gb: f64,
    /// Requests per submit.
    pub requests_per_submit: f64,
    /// Request latency p50, microseconds.
    pub latency_p50_us: f64,
    /// Request latency p99, microseconds.
    pub latency_p99_us: f64,
    /// Host bytes copied per byte delivered (also in `host`).
    pub copies_per_byte: f64,
    /// Compressed blocks CPU threads decoded, per pass (0 for the gpu-*
    /// cases where the GPU decodes the codec).
    pub cpu_decoded_blocks_per_pass: f64,
    /// Their decoded bytes, per pass.
    pub cpu_decoded_bytes_per_pass: f64,
    /// The runtime's threads by kind over the timed passes: how many, and
    /// their CPU and run-queue wait seconds per GB delivered.
    pub threads: Vec<super::metrics::ThreadGroup>,
    /// The baseline measured in the same run, GB/s.
    pub baseline_gbps: f64,
    /// Process CPU seconds per GB of the baseline.
    pub baseline_cpu_s_per_gb: f64,
    /// What the baseline is.
    pub baseline: String,
    /// delivered_gbps / baseline_gbps.
    pub ratio_to_baseline: f64,
    /// Whether the runtime and the baseline did the same work, so that
    /// `ratio_to_baseline` means something: not for a GPU case on the noop
    /// backend, whose shaders do not run while the baseline really decodes
    /// (the host-side columns are its figures there).
    pub ratio_comparable: bool,
    /// Summed read time over reads in flight, seconds per pass.
    pub stage_read_s: f64,
    /// CPU decode time per pass (summed over threads).
    pub stage_cpu_decode_s: f64,
    /// GPU submission time per pass (summed over chunks in flight).
    pub stage_gpu_s: f64,
    /// When reads and GPU work were in flight over the timed passes, and
    /// the runtime's own GPU memory (`None`: a runtime without a GPU).
    pub overlap: Option<Overlap>,
    /// The host side of the pipeline, per delivered byte.
    pub host: HostSide,
    /// Requests per pass the runtime failed only because the GPU decode did
    /// not run (status word NotRun): on the noop adapter bench counts them
    /// as delivered, since shaders do not run there. 0 elsewhere.
    pub noop_decode_not_run: u64,
    /// How the row's requests were counted as delivered.
    pub delivered_as: String,
    /// Passes queued beyond the one waited on (`--sustained`; 0 otherwise).
    pub passes_ahead: u32,
    /// The host-side targets that apply to this row.
    pub targets: Vec<TargetCheck>,
}

/// How a GPU runtime's passes overlapped reads and GPU work
/// (`Runtime::in_flight`), as shares of the timed passes' wall time, and
/// the GPU memory it holds of its own.
#[derive(Serialize, Clone, Copy, Debug)]
pub struct Overlap {
    /// Share of the time with at least one read in flight.
    pub reads: f64,
    /// Share with at least one GPU submission in flight.
    pub gpu: f64,
    /// Share with both: reads landing while the GPU decodes.
    pub both: f64,
    /// Staging plus the batch buffers (`StagingInfo`), MiB.
    pub runtime_gpu_mib: f64,
}

/// The whole report.
#[derive(Serialize, Debug)]
pub struct BenchReport {
    /// When it ran (UTC, RFC 3339).
    pub date: String,
    /// The adapter and backend, or "none".
    pub adapter: String,
    /// Why that adapter (or none) was used.
    pub adapter_reason: String,
    /// The adapter is wgpu's noop backend: shaders do not run.
    pub noop: bool,
    /// The I/O backend.
    pub io_backend: String,
    /// Whether reads bypassed the page cache.
    pub page_cache_bypassed: bool,
    /// The GPU LZ4 decoder's variant the gpu-lz4 cases ran (`None`: no
    /// such case ran on a GPU).
    pub lz4_decoder: Option<String>,
    /// The GPU GDeflate decoder the gpu-gdeflate case ran, and whether the
    /// driver offers its own (`None`: no such case ran on a GPU).
    pub gdeflate_decoder: Option<String>,
    /// Which memory the runtime's staging chunks got, and why (`None`: no
    /// case ran on a GPU).
    pub staging_memory: Option<String>,
    /// Whether checksums were checked (off with `--no-verify`).
    pub verify: bool,
    /// The pack streamed.
    pub pack: String,
    /// CPU threads of the runtime and of the hand-written baseline.
    pub cpu_threads: usize,
    /// Whether batches overlapped.
    pub sustained: bool,
    /// Timed passes per row (after one warm-up).
    pub iters: u32,
    /// The rows.
    pub rows: Vec<BenchRow>,
    /// Notes (skipped cases and why, what a figure means here).
    pub notes: Vec<String>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// Prints the report as tables.
pub(super) fn print(r: &BenchReport) {
    println!("gpustream bench  {}", r.date);
    println!("adapter: {}", r.adapter);
    println!("  why: {}", r.adapter_reason);
    println!(
        "I/O: {}   page cache bypassed: {}   checksums: {}   CPU threads: {}   passes: 1 warm-up + {}",
        r.io_backend,
        r.page_cache_bypassed,
        if r.verify { "on" } else { "off (--no-verify)" },
        r.cpu_threads,
        r.iters
    );
    if let Some(d) = &r.lz4_decoder {
        println!("GPU LZ4 decoder: {d}");
    }
    if let Some(m) = &r.staging_memory {
        println!("staging memory: {m}");
    }
    if let Some(d) = &r.gdeflate_decoder {
        println!("GPU GDeflate decoder: {d}");
    }
    let sustained = if r.sustained {
        let ahead = r.rows.first().map_or(0, |row| row.passes_ahead);
        format!("   (sustained: {ahead} passes queued beyond the one waited on)")
    } else {
        String::new()
    };
    println!("pack: {}{sustained}", r.pack);
    for n in &r.notes {
        println!("note: {n}");
    }
    let mut t = Table::new([
        "case",
        "staging MiB",
        "ratio",
        "delivered GB/s",
        "read GB/s",
        "req/submit",
        "p50 ms",
        "p99 ms",
        "baseline GB/s",
        "ours/baseline",
        "baseline",
    ]);
    for row in &r.rows {
        t.row([
            row.case.clone(),
            row.staging_mib.to_string(),
            format!("{:.2}", row.ratio),
            format!("{:.3}", row.delivered_gbps),
            format!("{:.3}", row.read_gbps),
            format!("{:.1}", row.requests_per_submit),
            format!("{:.2}", row.latency_p50_us / 1e3),
            format!("{:.2}", row.latency_p99_us / 1e3),
            format!("{:.3}", row.baseline_gbps),
            if row.ratio_comparable {
                format!("{:.2}", row.ratio_to_baseline)
            } else {
                "- (noop)".to_string()
            },
            row.baseline.clone(),
        ]);
    }
    print!("{t}");
    println!(
        "host side (per GB or MiB delivered over the timed passes; the host-side targets below):"
    );
    print!("{}", host_table(&r.rows));
    let checks: Vec<String> = r
        .rows
        .iter()
        .flat_map(|row| {
            row.targets.iter().map(move |c| {
                format!(
                    "  {:<8} {:>4} MiB  {:<22} {:>10.4}  target {:<8} {}{}",
                    row.case,
                    row.staging_mib,
                    c.metric,
                    c.value,
                    c.target,
                    if c.met { "met" } else { "NOT MET" },
                    c.note.as_ref().map(|n| format!(" {n}")).unwrap_or_default()
                )
            })
        })
        .collect();
    if !checks.is_empty() {
        println!("targets (host side):");
        for c in checks {
            println!("{c}");
        }
    } else if r.page_cache_bypassed {
        println!("targets (host side): set for runs with the page cache warm (--buffered); none read here");
    }
    println!("where the time goes (per pass, summed over threads/chunks in flight):");
    for row in &r.rows {
        println!(
            "  {:<9} {:>4} MiB  read {:.3}s  CPU decode {:.3}s ({:.0} compressed blocks, {:.1} MiB)  GPU submissions {:.3}s",
            row.case,
            row.staging_mib,
            row.stage_read_s,
            row.stage_cpu_decode_s,
            row.cpu_decoded_blocks_per_pass,
            row.cpu_decoded_bytes_per_pass / (1 << 20) as f64,
            row.stage_gpu_s
        );
        if let Some(o) = &row.overlap {
            println!(
                "  {:<9} {:>4} MiB  in flight: reads {:.0}% of the passes, GPU {:.0}%, both at once {:.0}%; runtime GPU memory {:.0} MiB (staging + batch buffers)",
                row.case,
                row.staging_mib,
                o.reads * 100.0,
                o.gpu * 100.0,
                o.both * 100.0,
                o.runtime_gpu_mib
            );
        }
        let groups: Vec<String> = row
            .threads
            .iter()
            .map(|g| {
                format!(
                    "{} x{} {:.3} (wait {:.3})",
                    g.name.trim_start_matches("gpustream-"),
                    g.threads,
                    g.cpu_s_per_gb,
                    g.wait_s_per_gb
                )
            })
            .collect();
        if !groups.is_empty() {
            let n: usize = row.threads.iter().map(|g| g.threads).sum();
            println!(
                "  {:<9} {:>4} MiB  {n} runtime threads, CPU s/GB (run-queue wait s/GB): {}",
                row.case,
                row.staging_mib,
                groups.join(", ")
            );
        }
    }
}

/// The host-side table (also used for docs/results.md via `to_markdown`).
pub(super) fn host_table(rows: &[BenchRow]) -> Table {
    let mut t = Table::new([
        "case",
        "staging MiB",
        "CPU s/GB",
        "submit s/GB",
        "submit CPU s/GB",
        "in wgpu submit s/GB",
        "submit own s/GB",
        "blocks/dispatch",
        "GPU cmds/MiB",
        "tex copies/mip/submit",
        "GPU submits/pass",
        "host copies/byte",
        "baseline CPU s/GB",
        "delivered as",
    ]);
    for row in rows {
        let h = &row.host;
        t.row([
            row.case.clone(),
            row.staging_mib.to_string(),
            format!("{:.3}", h.cpu_s_per_gb),
            format!("{:.4}", h.submit_busy_s_per_gb),
            opt(h.submit_cpu_s_per_gb, 4),
            format!("{:.4}", h.wgpu_submit_s_per_gb),
            opt(h.submit_own_s_per_gb, 4),
            opt(h.blocks_per_dispatch, 1),
            opt(h.gpu_commands_per_mib, 1),
            opt(h.texture_copies_per_mip, 2),
            format!("{:.1}", h.gpu_submits_per_pass),
            format!("{:.3}", h.copies_per_byte),
            format!("{:.3}", row.baseline_cpu_s_per_gb),
            row.delivered_as.clone(),
        ]);
    }
    t
}

/// Writes a PNG: delivered GB/s (ours and baseline) and process CPU s/GB
/// against staging size, one line per case.
pub(super) fn plot(r: &BenchReport, path: &Path) -> Result<(), BoxError> {
    let mut gbps: Vec<Series> = Vec::new();
    let mut cpu: Vec<Series> = Vec::new();
    let add = |set: &mut Vec<Series>, name: String, x: f64, y: f64| match set
        .iter_mut()
        .find(|s| s.name == name)
    {
        Some(s) => s.points.push((x, y)),
        None => set.push(Series {
            name,
            points: vec![(x, y)],
        }),
    };
    for row in &r.rows {
        let x = row.staging_mib as f64;
        add(&mut gbps, row.case.clone(), x, row.delivered_gbps);
        add(
            &mut gbps,
            format!("{} baseline", row.case),
            x,
            row.baseline_gbps,
        );
        // The same series in the same order in both panels, so a case has
        // one colour throughout.
        add(&mut cpu, row.case.clone(), x, row.host.cpu_s_per_gb);
        add(
            &mut cpu,
            format!("{} baseline", row.case),
            x,
            row.baseline_cpu_s_per_gb,
        );
    }
    let panel = |title: &str, y_label: &str, log_y: bool, series: Vec<Series>| LinePlot {
        title: format!("{title} ({})", r.adapter),
        x_label: "staging buffer (MiB)".into(),
        y_label: y_label.into(),
        log_x: true,
        log_y,
        series,
    };
    save_png(
        path,
        &[
            panel("delivered", "GB/s of uncompressed data", false, gbps),
            // Log scale: software GPU decode costs 100x the CPU paths.
            panel(
                "whole-process CPU",
                "CPU seconds per GB delivered",
                true,
                cpu,
            ),
        ],
        2,
        1600,
        650,
    )?;
    Ok(())
}
