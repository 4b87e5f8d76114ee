//! What the runtime's queues, its submission thread and its read and
//! decode stages share: the configuration, the I/O engine, the GPU's
//! decoders and staging, and the counters the runtime reports.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crossbeam::channel::Sender;

use super::config::RuntimeConfig;
use super::{activity, job, trace};
use crate::io::IoEngine;

/// The GPU's staging, as the runtime reports it.
pub(crate) struct GpuInfo {
    pub chunk_size: u64,
    pub staging_total: u64,
    pub batch_buffers: u64,
    pub staging_memory: crate::staging::StagingMemory,
}

pub(crate) struct RuntimeShared {
    pub config: RuntimeConfig,
    pub engine: IoEngine,
    pub gpu: Option<GpuInfo>,
    /// The GPU LZ4 decoder's variant, where LZ4 blocks bound for the GPU
    /// are decoded there.
    pub gpu_lz4: Option<crate::decode::gpu::Lz4DecodePath>,
    /// Whether GDeflate pages bound for the GPU are decoded there.
    pub gpu_gdeflate: bool,
    /// Which GDeflate decoder runs there, and why.
    pub gdeflate_decoder: Option<crate::decode::gpu::GDeflateDecoderChoice>,
    /// Stored blocks and CPU output go to GPU destinations through the GPU's
    /// stored-copy pass (else: laid out by CPU threads, copied directly).
    pub stored_on_gpu: bool,
    pub cmds: Sender<job::Cmd>,
    /// Whether the submission thread still takes batches. Queues send
    /// under this lock and the submission thread clears it before its last
    /// drain of `cmds`, so no batch lands in the channel unseen.
    pub accepting: std::sync::Mutex<bool>,
    pub next_job: AtomicU64,
    /// Bumped by every `Queue::cancel`: while it has not moved, no part
    /// waiting on the submission thread can belong to a cancelled request,
    /// so that thread skips the per-part check.
    pub cancels: AtomicU64,
    pub next_queue: std::sync::atomic::AtomicU32,
    pub trace: Option<trace::TraceWriter>,
    /// Nanoseconds the submission (dispatcher) thread spent working, not
    /// waiting for something to do.
    pub submit_busy_ns: AtomicU64,
    /// Nanoseconds of that spent inside wgpu's `Queue::submit`.
    pub wgpu_submit_ns: Arc<AtomicU64>,
    /// Reads and GPU submissions in flight, and for how long.
    pub activity: Arc<activity::Activity>,
}
