//! The binary's logger: the library reports through the `log` facade and
//! never prints itself, so the tool decides what reaches stderr.
//!
//! gpustream's own records show at warning and above (`GPUSTREAM_LOG=info`
//! or `debug` shows more); other crates' (wgpu, naga) only at error, since
//! their warnings are about the driver, not about what the user asked.

use log::{Level, LevelFilter, Log, Metadata, Record};

struct StderrLogger {
    own: Level,
}

impl Log for StderrLogger {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        if m.target().starts_with("gpustream") {
            m.level() <= self.own
        } else {
            m.level() <= Level::Error
        }
    }

    fn log(&self, r: &Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("gpustream: {}", r.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger; the level comes from `GPUSTREAM_LOG` (error, warn,
/// info, debug, trace; warn when unset or unknown).
pub fn init() {
    let own = std::env::var("GPUSTREAM_LOG")
        .ok()
        .and_then(|v| v.parse::<Level>().ok())
        .unwrap_or(Level::Warn);
    // set_logger wants a 'static logger; this one lives as long as the tool.
    let logger: &'static StderrLogger = Box::leak(Box::new(StderrLogger { own }));
    if log::set_logger(logger).is_ok() {
        // No lower than needed: wgpu's trace records sit on hot paths, and
        // the max level is the check that keeps them free.
        log::set_max_level(own.to_level_filter().max(LevelFilter::Error));
    }
}
