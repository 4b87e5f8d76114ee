//! Requests: the gpustream runtime on Bevy's device, the loads the
//! residency plan starts turned into tile requests, and one frame's
//! requests sent with one status entry per texture, one fence signal and
//! one submit. Nothing here waits on I/O.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bevy::prelude::*;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use gpustream::prelude::{
    Destination, Priority, Queue, QueueConfig, Request, Runtime, Source, StatusArray,
};

use super::TextureStreamer;
use crate::residency::Change;

/// The runtime and its one queue.
pub(super) struct Gpu {
    // Dropped after the queue (field order): the runtime waits for every
    // submitted request when it goes.
    pub(super) queue: Queue,
    pub(super) runtime: Runtime,
}

/// One request waiting for the per-frame cap.
pub(super) struct Waiting {
    texture: usize,
    source: Source,
    mip: u8,
    origin: (u32, u32),
}

/// One frame's requests, drawable once the fence reaches `value`.
pub(super) struct Batch {
    pub(super) value: u64,
    pub(super) submitted: Instant,
    pub(super) reached: Arc<Mutex<Option<Instant>>>,
    pub(super) status: StatusArray,
    /// (texture, requests) per status entry, in enqueue order.
    pub(super) entries: Vec<(usize, u32)>,
}

/// Makes the gpustream runtime on Bevy's own device and queue once the
/// renderer exists, and opens the packs for streaming.
pub(crate) fn start_runtime(
    mut streamer: ResMut<TextureStreamer>,
    device: Option<Res<RenderDevice>>,
    queue: Option<Res<RenderQueue>>,
) {
    if streamer.gpu.is_some() || streamer.runtime_error.is_some() {
        return;
    }
    let (Some(device), Some(queue)) = (device, queue) else {
        return;
    };
    let wgpu_queue: &wgpu::Queue = &queue;
    let runtime = match Runtime::new(
        device.wgpu_device(),
        wgpu_queue,
        streamer.settings.runtime.clone(),
    ) {
        Ok(r) => r,
        Err(e) => {
            error!("gpustream runtime did not start: {e}");
            streamer.runtime_error = Some(e.to_string());
            return;
        }
    };
    let queue = runtime.create_queue(
        QueueConfig::default()
            .with_capacity((streamer.settings.max_requests_per_frame * 8).clamp(128, 8192))
            .with_priority(Priority::High)
            .with_name(Some("bevy textures".into())),
    );
    streamer.gpu = Some(Gpu { queue, runtime });
    streamer.open_pack_files();
}

/// Takes in the GPU textures Bevy has made, plans loads and evictions, and
/// sends at most the per-frame cap of requests with one fence signal.
pub(crate) fn request(mut streamer: ResMut<TextureStreamer>) {
    let streamer = &mut *streamer;
    streamer.stats.requests_last_frame = 0;
    if streamer.gpu.is_none() {
        return;
    }
    streamer.join_created_textures();
    if streamer.settings.preload_all {
        for t in 0..streamer.textures.len() {
            if let Some(r) = streamer.textures[t].residency {
                streamer.residency.want(r, 0, streamer.frame);
            }
        }
    }
    let cap = streamer.settings.max_requests_per_frame.max(1);
    // Plan only while the backlog is under a frame's worth, so what waits
    // reflects the screen of a few frames ago at most.
    if streamer.waiting.len() < cap {
        let changes = streamer.residency.plan(streamer.frame, cap);
        for change in changes {
            match change {
                Change::Evict { texture, .. } => {
                    if let Some(i) = streamer.texture_of_residency(texture) {
                        streamer.changed.push(i);
                        streamer.stats.mips_evicted += 1;
                    }
                }
                Change::Load { texture, mip } => {
                    if let Some(i) = streamer.texture_of_residency(texture) {
                        queue_mip(streamer, i, mip);
                    }
                }
            }
        }
    }
    send(streamer, cap);
}

/// The requests that load `mip` (every tile of it, or the packed tail at
/// the floor) join the waiting line.
fn queue_mip(streamer: &mut TextureStreamer, texture: usize, mip: u8) {
    let t = &streamer.textures[texture];
    let entry = &streamer.packs[t.pack];
    let Some(file) = entry.file.clone() else {
        // Cannot happen: textures join the plan after the packs open. Release
        // the reservation rather than hold it forever.
        let r = t.residency.expect("planned textures have residency");
        streamer.residency.landed(r, false);
        return;
    };
    let mut requests = Vec::new();
    let packed_first = file
        .packed_mips(t.asset)
        .ok()
        .and_then(|p| p.mips.first().map(|m| m.mip));
    if packed_first == Some(mip) {
        requests.push((
            Source::PackedMips {
                pack: file.clone(),
                asset: t.asset,
            },
            mip,
            (0, 0),
        ));
    } else if let Ok(Some((tx, ty))) = file.tile_grid(t.asset, mip) {
        for y in 0..ty {
            for x in 0..tx {
                let Ok(region) = file.tile_region(t.asset, mip, x, y) else {
                    continue;
                };
                requests.push((
                    Source::Tile {
                        pack: file.clone(),
                        asset: t.asset,
                        mip,
                        x,
                        y,
                    },
                    mip,
                    (region.x, region.y),
                ));
            }
        }
    }
    if requests.is_empty() {
        let r = t.residency.expect("planned textures have residency");
        streamer.residency.landed(r, false);
        return;
    }
    streamer.textures[texture].outstanding = requests.len() as u32;
    streamer.textures[texture].failed = false;
    for (source, mip, origin) in requests {
        streamer.waiting.push_back(Waiting {
            texture,
            source,
            mip,
            origin,
        });
    }
}

/// Sends up to `cap` waiting requests, a status entry per run of one
/// texture's requests, one fence signal and one submit.
fn send(streamer: &mut TextureStreamer, cap: usize) {
    let Some(gpu) = &streamer.gpu else { return };
    let n = cap.min(streamer.waiting.len());
    let mut runs: Vec<Vec<Waiting>> = Vec::new();
    for w in streamer.waiting.drain(..n) {
        match runs.last_mut() {
            Some(run) if run[0].texture == w.texture => run.push(w),
            _ => runs.push(vec![w]),
        }
    }
    let status = StatusArray::new(runs.len().max(1));
    let mut sent: Vec<(usize, u32)> = Vec::new();
    let mut refused: Vec<usize> = Vec::new();
    let submitted = Instant::now();
    for run in runs {
        let texture_index = run[0].texture;
        let mut count = 0;
        for w in run {
            let Some(texture) = streamer.textures[w.texture].texture.clone() else {
                refused.push(w.texture);
                continue;
            };
            let request = Request::new(
                w.source,
                Destination::Texture {
                    texture,
                    mip: u32::from(w.mip),
                    origin: wgpu::Origin3d {
                        x: w.origin.0,
                        y: w.origin.1,
                        z: 0,
                    },
                    extent: None,
                },
            )
            .with_tag(w.texture as u64);
            match gpu.queue.enqueue(request) {
                Ok(()) => count += 1,
                Err(e) => {
                    warn!(
                        "gpustream refused a request for {}: {e}",
                        streamer.textures[w.texture].name
                    );
                    refused.push(w.texture);
                }
            }
        }
        if count > 0 {
            // Entry i covers the requests since entry i - 1: this run.
            gpu.queue.enqueue_status(&status, sent.len());
            sent.push((texture_index, count));
        }
    }
    let count: u32 = sent.iter().map(|&(_, c)| c).sum();
    streamer.stats.requests_last_frame = u64::from(count);
    streamer.stats.requests += u64::from(count);
    if !sent.is_empty() {
        let value = streamer.next_value;
        streamer.next_value += 1;
        gpu.queue.enqueue_signal(&streamer.fence, value);
        gpu.queue.submit();
        let reached = Arc::new(Mutex::new(None));
        let slot = reached.clone();
        // Runs on the runtime's completion thread: a timestamp, nothing more.
        streamer.fence.on_reached(value, move |_| {
            if let Ok(mut s) = slot.lock() {
                *s = Some(Instant::now());
            }
        });
        streamer.batches.push_back(Batch {
            value,
            submitted,
            reached,
            status,
            entries: sent,
        });
    }
    for texture in refused {
        streamer.stats.failed_requests += 1;
        streamer.finish_requests(texture, 1, false);
    }
}
