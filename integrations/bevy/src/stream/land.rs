//! Landing: the gpustream fence is read with `completed_value` (never
//! waited on), and the mips of every batch it covers become resident.

use std::time::Instant;

use bevy::prelude::*;
use gpustream::prelude::StatusEntry;

use super::TextureStreamer;

/// Reads the fence (never waits) and makes the mips of every batch it
/// covers resident.
pub(crate) fn land(mut streamer: ResMut<TextureStreamer>) {
    let streamer = &mut *streamer;
    streamer.frame += 1;
    streamer.stats.bytes_landed_last_frame = 0;
    streamer.stats.fence_latency_last_frame = None;
    let reached = streamer.fence.completed_value();
    let now = Instant::now();
    while streamer.batches.front().is_some_and(|b| b.value <= reached) {
        let Some(batch) = streamer.batches.pop_front() else {
            break;
        };
        let at = batch.reached.lock().expect("not poisoned").unwrap_or(now);
        let latency = at.saturating_duration_since(batch.submitted);
        let worst = streamer
            .stats
            .fence_latency_last_frame
            .get_or_insert(latency);
        *worst = (*worst).max(latency);
        for (i, &(texture, requests)) in batch.entries.iter().enumerate() {
            let ok = matches!(batch.status.get(i), StatusEntry::Ok);
            if !ok {
                streamer.stats.failed_requests += u64::from(requests);
            }
            streamer.finish_requests(texture, requests, ok);
        }
    }
    if let Some(gpu) = &streamer.gpu {
        let record = gpu.queue.error_record();
        if let Some(first) = record.first_failure {
            warn!(
                "{} gpustream requests failed; first: {first}",
                record.failure_count
            );
        }
    }
}
