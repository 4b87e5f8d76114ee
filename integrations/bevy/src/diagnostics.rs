//! Streaming figures as Bevy diagnostics, shown by any diagnostics overlay
//! or logger (`LogDiagnosticsPlugin`) and read from `DiagnosticsStore`.

use bevy::diagnostic::{Diagnostic, DiagnosticPath, Diagnostics, RegisterDiagnostic};
use bevy::prelude::*;

use crate::stream::TextureStreamer;

/// MiB of resident mip levels (what the budget counts, with in-flight).
pub const RESIDENT_BYTES: DiagnosticPath = DiagnosticPath::const_new("gpustream/resident_mib");
/// MiB reserved for mips on their way.
pub const IN_FLIGHT_BYTES: DiagnosticPath = DiagnosticPath::const_new("gpustream/in_flight_mib");
/// The budget in MiB.
pub const BUDGET_BYTES: DiagnosticPath = DiagnosticPath::const_new("gpustream/budget_mib");
/// MiB of the streamed textures' full mip chains, allocated up front.
pub const ALLOCATED_BYTES: DiagnosticPath = DiagnosticPath::const_new("gpustream/allocated_mib");
/// Requests sent to gpustream this frame.
pub const REQUESTS: DiagnosticPath = DiagnosticPath::const_new("gpustream/requests_per_frame");
/// MiB per second of mips landing.
pub const BYTES_PER_SECOND: DiagnosticPath = DiagnosticPath::const_new("gpustream/mib_per_second");
/// Milliseconds from a frame's submit to its fence being reached, for the
/// batches that landed this frame (the longest).
pub const FENCE_LATENCY: DiagnosticPath = DiagnosticPath::const_new("gpustream/fence_latency_ms");

const MIB: f64 = 1024.0 * 1024.0;

pub(crate) fn register(app: &mut App) {
    app.register_diagnostic(Diagnostic::new(RESIDENT_BYTES).with_suffix(" MiB"))
        .register_diagnostic(Diagnostic::new(IN_FLIGHT_BYTES).with_suffix(" MiB"))
        .register_diagnostic(Diagnostic::new(BUDGET_BYTES).with_suffix(" MiB"))
        .register_diagnostic(Diagnostic::new(ALLOCATED_BYTES).with_suffix(" MiB"))
        .register_diagnostic(Diagnostic::new(REQUESTS))
        .register_diagnostic(Diagnostic::new(BYTES_PER_SECOND).with_suffix(" MiB/s"))
        .register_diagnostic(Diagnostic::new(FENCE_LATENCY).with_suffix(" ms"));
}

pub(crate) fn measure(
    streamer: Res<TextureStreamer>,
    time: Res<Time>,
    mut diagnostics: Diagnostics,
) {
    let s = streamer.stats();
    diagnostics.add_measurement(&RESIDENT_BYTES, || s.resident_bytes as f64 / MIB);
    diagnostics.add_measurement(&IN_FLIGHT_BYTES, || s.in_flight_bytes as f64 / MIB);
    diagnostics.add_measurement(&BUDGET_BYTES, || s.budget_bytes.min(1 << 53) as f64 / MIB);
    diagnostics.add_measurement(&ALLOCATED_BYTES, || s.allocated_bytes as f64 / MIB);
    diagnostics.add_measurement(&REQUESTS, || s.requests_last_frame as f64);
    let dt = time.delta_secs_f64();
    if dt > 0.0 {
        diagnostics.add_measurement(&BYTES_PER_SECOND, || {
            s.bytes_landed_last_frame as f64 / MIB / dt
        });
    }
    if let Some(latency) = s.fence_latency_last_frame {
        diagnostics.add_measurement(&FENCE_LATENCY, || latency.as_secs_f64() * 1000.0);
    }
}
