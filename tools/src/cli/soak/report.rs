//! What a soak run did and found: requests and bytes by outcome and pack,
//! faults injected by kind, latency by priority, and the resource curves;
//! printed as tables, written as JSON, drawn as a PNG.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use gpustream::prelude::Priority;
use gpustream_tools::table::Table;

use super::sample::Resources;
use super::{Faults, Outcome, PackKind};
use crate::cli::report::plot::{save_png, LinePlot, Series};

/// A resource sample and the work done by then.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Sample {
    /// Seconds since the start.
    pub t: f64,
    /// The process's resources.
    pub resources: Resources,
    /// Requests ended by then.
    pub requests: u64,
    /// Bytes delivered by then.
    pub bytes: u64,
}

/// Counts gathered while the run goes.
pub struct Ledger {
    seed: u64,
    faults: Faults,
    outcomes: BTreeMap<(PackKind, Outcome), (u64, u64)>,
    latencies: BTreeMap<String, Vec<u64>>,
    injected: BTreeMap<String, u64>,
    /// Broken rules, the first 100.
    pub violations: Vec<String>,
    /// Broken rules, all.
    pub violation_count: u64,
    /// Runtimes rebuilt after a device loss.
    pub rebuilds: u64,
    /// `Queue::cancel` calls.
    pub cancel_calls: u64,
    /// Requests the proxy forwarded, refused, answered 500, slowed, and
    /// answered with hostile bodies.
    pub proxy: [u64; 5],
    /// The remote reader's ranged GETs, failed GETs, blocks dropped for a
    /// bad checksum, and blocks evicted, over every epoch.
    pub remote_gets: u64,
    /// See `remote_gets`.
    pub remote_failed_gets: u64,
    /// See `remote_gets`.
    pub remote_corrupt_blocks: u64,
    /// See `remote_gets`.
    pub remote_evicted: u64,
}

impl Ledger {
    /// An empty ledger.
    pub fn new(seed: u64, faults: Faults) -> Ledger {
        Ledger {
            seed,
            faults,
            outcomes: BTreeMap::new(),
            latencies: BTreeMap::new(),
            injected: BTreeMap::new(),
            violations: Vec::new(),
            violation_count: 0,
            rebuilds: 0,
            cancel_calls: 0,
            proxy: [0; 5],
            remote_gets: 0,
            remote_failed_gets: 0,
            remote_corrupt_blocks: 0,
            remote_evicted: 0,
        }
    }

    /// One request's end.
    pub fn record(
        &mut self,
        priority: Priority,
        kind: PackKind,
        latency: Duration,
        outcome: Outcome,
        bytes: u64,
    ) {
        let e = self.outcomes.entry((kind, outcome)).or_default();
        e.0 += 1;
        e.1 += bytes;
        self.latencies
            .entry(format!("{priority:?}").to_lowercase())
            .or_default()
            .push(latency.as_micros() as u64);
    }

    /// One fault injected.
    pub fn fault(&mut self, kind: &str) {
        *self.injected.entry(kind.to_string()).or_default() += 1;
    }

    /// The report, with the resource curves.
    pub fn finish(
        &mut self,
        elapsed: Duration,
        samples: Vec<Sample>,
        rebuilds: Vec<Resources>,
    ) -> Report {
        let outcomes = self
            .outcomes
            .iter()
            .map(|(&(pack, outcome), &(requests, bytes))| OutcomeRow {
                pack,
                outcome,
                requests,
                bytes,
            })
            .collect();
        let latency = self
            .latencies
            .iter_mut()
            .map(|(p, v)| {
                v.sort_unstable();
                let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
                LatencyRow {
                    priority: p.clone(),
                    requests: v.len() as u64,
                    p50_ms: at(0.5),
                    p99_ms: at(0.99),
                    max_ms: at(1.0),
                }
            })
            .collect();
        let first_rss = samples.first().map_or(0, |s| s.resources.rss);
        let max_rss = samples.iter().map(|s| s.resources.rss).max().unwrap_or(0);
        Report {
            seed: self.seed,
            seconds: elapsed.as_secs_f64(),
            faults: self.faults,
            outcomes,
            injected: self.injected.clone(),
            latency,
            cancel_calls: self.cancel_calls,
            rebuilds: self.rebuilds,
            proxy_forwarded: self.proxy[0],
            proxy_refused: self.proxy[1],
            proxy_500: self.proxy[2],
            proxy_slowed: self.proxy[3],
            proxy_hostile: self.proxy[4],
            remote_gets: self.remote_gets,
            remote_failed_gets: self.remote_failed_gets,
            remote_corrupt_blocks: self.remote_corrupt_blocks,
            remote_evicted: self.remote_evicted,
            first_rss,
            max_rss,
            rebuild_resources: rebuilds,
            samples,
            violation_count: self.violation_count,
            violations: self.violations.clone(),
        }
    }
}

/// Requests and bytes of one pack kind and outcome.
#[derive(serde::Serialize)]
pub struct OutcomeRow {
    pack: PackKind,
    outcome: Outcome,
    requests: u64,
    bytes: u64,
}

/// Latency from enqueue to completion, for one priority.
#[derive(serde::Serialize)]
pub struct LatencyRow {
    priority: String,
    requests: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

/// The whole report (`--json` writes it as it is).
#[derive(serde::Serialize)]
pub struct Report {
    seed: u64,
    seconds: f64,
    faults: Faults,
    outcomes: Vec<OutcomeRow>,
    injected: BTreeMap<String, u64>,
    latency: Vec<LatencyRow>,
    cancel_calls: u64,
    rebuilds: u64,
    proxy_forwarded: u64,
    proxy_refused: u64,
    proxy_500: u64,
    proxy_slowed: u64,
    proxy_hostile: u64,
    remote_gets: u64,
    remote_failed_gets: u64,
    remote_corrupt_blocks: u64,
    remote_evicted: u64,
    first_rss: u64,
    max_rss: u64,
    rebuild_resources: Vec<Resources>,
    samples: Vec<Sample>,
    /// Broken rules (the first 100 are listed).
    pub violation_count: u64,
    violations: Vec<String>,
}

impl Report {
    /// The first broken rule, if any.
    pub fn first_violation(&self) -> Option<&str> {
        self.violations.first().map(String::as_str)
    }

    /// Prints the tables.
    pub fn print(&self) {
        println!("\nsoak: seed {}, {:.0} s", self.seed, self.seconds);
        let mut t = Table::new(["pack", "outcome", "requests", "MiB"]);
        for r in &self.outcomes {
            t.row([
                r.pack.name().to_string(),
                format!("{:?}", r.outcome),
                r.requests.to_string(),
                format!("{:.1}", r.bytes as f64 / (1 << 20) as f64),
            ]);
        }
        print!("{t}");
        let mut t = Table::new(["fault", "injected"]);
        for (k, v) in &self.injected {
            t.row([k.clone(), v.to_string()]);
        }
        t.row(["cancel calls".to_string(), self.cancel_calls.to_string()]);
        t.row(["runtime rebuilds".to_string(), self.rebuilds.to_string()]);
        t.row([
            "proxy: forwarded/refused/500/slowed/hostile".to_string(),
            format!(
                "{}/{}/{}/{}/{}",
                self.proxy_forwarded,
                self.proxy_refused,
                self.proxy_500,
                self.proxy_slowed,
                self.proxy_hostile
            ),
        ]);
        t.row([
            "remote: GETs/failed/corrupt blocks/evicted".to_string(),
            format!(
                "{}/{}/{}/{}",
                self.remote_gets,
                self.remote_failed_gets,
                self.remote_corrupt_blocks,
                self.remote_evicted
            ),
        ]);
        print!("{t}");
        let mut t = Table::new(["priority", "requests", "p50 ms", "p99 ms", "max ms"]);
        for r in &self.latency {
            t.row([
                r.priority.clone(),
                r.requests.to_string(),
                format!("{:.2}", r.p50_ms),
                format!("{:.2}", r.p99_ms),
                format!("{:.1}", r.max_ms),
            ]);
        }
        print!("{t}");
        let last = self.samples.last().map(|s| s.resources).unwrap_or_default();
        println!(
            "RSS {} MiB at start, {} MiB max, {} MiB at the end; {} threads, {} descriptors at the end",
            self.first_rss >> 20,
            self.max_rss >> 20,
            last.rss >> 20,
            last.threads,
            last.fds
        );
        if self.violation_count == 0 {
            println!("no violations");
        } else {
            println!("{} VIOLATIONS (seed {}):", self.violation_count, self.seed);
            for v in self.violations.iter().take(20) {
                println!("  {v}");
            }
        }
    }

    /// Draws RSS and throughput over time.
    pub fn plot(&self, path: &Path) -> Result<(), crate::cli::report::ReportError> {
        let rss = Series {
            name: "RSS (MiB)".into(),
            points: self
                .samples
                .iter()
                .map(|s| (s.t, s.resources.rss as f64 / (1 << 20) as f64))
                .collect(),
        };
        let rate: Vec<(f64, f64)> = self
            .samples
            .windows(2)
            .map(|w| {
                let dt = (w[1].t - w[0].t).max(1e-3);
                (
                    w[1].t,
                    (w[1].bytes - w[0].bytes) as f64 / (1 << 20) as f64 / dt,
                )
            })
            .collect();
        let panels = [
            LinePlot {
                title: format!("soak seed {}: resident memory", self.seed),
                x_label: "seconds".into(),
                y_label: "MiB".into(),
                log_x: false,
                log_y: false,
                series: vec![rss],
            },
            LinePlot {
                title: "delivered".into(),
                x_label: "seconds".into(),
                y_label: "MiB/s".into(),
                log_x: false,
                log_y: false,
                series: vec![Series {
                    name: "delivered MiB/s".into(),
                    points: rate,
                }],
            },
        ];
        save_png(path, &panels, 2, 1400, 500)
    }
}
