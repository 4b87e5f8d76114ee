//! The runtime: DirectStorage's factory, queues and requests, in Rust.
//!
//! ```no_run
//! use gpustream::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // With a GPU: Runtime::new(&device, &queue, config); here memory only.
//! let runtime = Runtime::without_gpu(RuntimeConfig::default())?;
//! let pack = runtime.open_pack("assets.gspk")?;
//! let asset = pack.find("level1/mesh.bin").expect("asset exists");
//! let size = pack.asset(asset).size as usize;
//!
//! let queue = runtime.create_queue(QueueConfig::default());
//! let memory = HostMemory::new(size);
//! queue.enqueue(Request::new(
//!     Source::Blob { pack: pack.clone(), asset, range: None },
//!     Destination::Memory { memory: memory.clone(), offset: 0 },
//! ))?;
//! let fence = Fence::new();
//! queue.enqueue_signal(&fence, 1);
//! queue.submit();
//! fence.wait(1);
//! assert_eq!(queue.error_record().failure_count, 0);
//! let bytes = memory.to_vec()?;
//! # let _ = bytes; Ok(()) }
//! ```

mod activity;
mod batch_status;
mod batch_tables;
mod complete;
mod config;
mod cpu_decode;
mod dispatcher;
mod error;
mod gpu_batch;
mod gpu_direct;
mod id_map;
mod job;
mod job_table;
mod pack_file;
mod part;
mod plan;
mod queue;
mod reads;
mod request;
mod schedule;
mod shared;
mod stats;
// Trace records and reading them back: the tools' (`gpustream replay`).
#[cfg(feature = "internals")]
pub mod trace;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod trace;

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Why a request failed: defined in `completion`, which reports it.
pub use crate::completion::{BufferProblem, GpuDecodeFailure, RequestError, SourceProblem};
pub use crate::staging::StagingMemory;
pub use activity::InFlightTimes;
use config::gdeflate_decoder;
pub use config::RuntimeConfig;
pub use error::RuntimeError;
pub use pack_file::PackFile;
pub use queue::{Priority, Queue, QueueConfig, SourceKind, TryEnqueueError};
pub use request::{Destination, Request, Source};
pub(crate) use shared::{GpuInfo, RuntimeShared};
pub use stats::{LatencyHistogram, QueueStats};

use crate::codec::Codec;
use crate::io::IoEngine;
use crate::pack::Pack;

/// Where a codec is decoded for GPU destinations
/// (DirectStorage's `GetCompressionSupport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum CompressionSupport {
    /// By a compute shader on the GPU.
    Gpu,
    /// On CPU threads, then uploaded.
    Cpu,
}

/// The staging memory a GPU runtime allocated ([`Runtime::staging`]):
/// `RuntimeConfig::staging_size` rounded to whole chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagingInfo {
    /// Bytes per chunk: the most one read or one decoded part can stage.
    pub chunk_size: u64,
    /// Bytes in all chunks together.
    pub total: u64,
    /// Bytes of the GPU buffers the runtime made for its decode batches
    /// beyond staging: two sets of batch input, output scratch, descriptor
    /// tables and status words, sized by `RuntimeConfig::gpu_batch_size`
    /// (not by staging), so staging can grow without them.
    pub batch_buffers: u64,
}

/// The runtime (DirectStorage's factory): the I/O engine, the staging
/// buffer, the CPU decode threads and the GPU decoder, shared by its queues.
///
/// Create it from the application's own `wgpu::Device` and `wgpu::Queue`
/// ([`Runtime::new`]): it never opens a device of its own, and records its
/// work on that queue (see the ordering contract on [`Queue`]). Without a
/// GPU ([`Runtime::without_gpu`]) it delivers into host memory only.
///
/// Dropping the runtime waits for every submitted request to finish.
pub struct Runtime {
    shared: Arc<RuntimeShared>,
    thread: Option<std::thread::JoinHandle<()>>,
    adapter_gpu: bool,
}

impl Runtime {
    /// A runtime on the application's device and queue.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        config: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        Self::build(Some((device.clone(), queue.clone())), config)
    }

    /// A runtime without a GPU: host-memory destinations only.
    pub fn without_gpu(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        Self::build(None, config)
    }

    fn build(
        gpu: Option<(wgpu::Device, wgpu::Queue)>,
        config: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        if config.staging_size < 256 << 10 {
            return Err(RuntimeError::Config(format!(
                "staging size {} is below 256 KiB",
                config.staging_size
            )));
        }
        let engine = IoEngine::new(config.io.clone())?;
        let trace = match &config.trace {
            Some(p) => {
                Some(
                    trace::TraceWriter::create(p).map_err(|source| RuntimeError::Trace {
                        path: p.clone(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let (tx, rx) = crossbeam::channel::unbounded();
        let chunk = config
            .staging_chunk
            .unwrap_or((config.staging_size / 4).min(8 << 20))
            .max(128 << 10);
        let (gpu_tx, gpu_rx) = crossbeam::channel::unbounded();
        let wiring = dispatcher::Wiring::new();
        let wgpu_submit_ns = Arc::new(AtomicU64::new(0));
        let activity = Arc::new(activity::Activity::default());
        let mut gdeflate_choice = None;
        let gpu_parts = match gpu {
            Some((device, queue)) => {
                let mut caps = gpu_batch::BatchCaps::new(
                    &device,
                    config.gpu_batch_size,
                    chunk,
                    config.assume_discrete_gpu,
                );
                caps.direct_min = config.direct_buffer_blocks.max(1);
                // A chunk's GPU outputs always fit one batch.
                let ring = crate::staging::StagingRing::new(
                    &device,
                    config.staging_size,
                    chunk,
                    (caps.output, caps.region_weight()),
                    config.import_staging_memory,
                    caps.host_staging,
                )
                .map_err(RuntimeError::DeviceLost)?;
                // The decoder has a portable path for every adapter with
                // compute shaders, and a subgroup path where the adapter has
                // subgroups.
                use crate::decode::gpu::Lz4DecodePipeline;
                let lz4 = match (config.gpu_decompression, config.lz4_decode_path) {
                    (false, _) => None,
                    (true, None) => Some(Lz4DecodePipeline::new(&device)),
                    (true, Some(path)) => {
                        Some(Lz4DecodePipeline::with_path(&device, path).map_err(|e| {
                            RuntimeError::Config(format!("LZ4 decoder {}: {e}", path.name()))
                        })?)
                    }
                };
                // GDeflate pages decode on the GPU wherever LZ4 does: with
                // the driver's own decoder where the device has it (and it
                // is not forced off), else with the WGSL decoder (one
                // workgroup of 32 lanes a page), which also takes batches
                // the driver's buffers cannot hold.
                let gdeflate = config
                    .gpu_decompression
                    .then(|| crate::decode::gpu::GDeflateDecodePipeline::new(&device));
                let (choice, driver) = if gdeflate.is_some() {
                    let (c, d) = gdeflate_decoder(&device, config.gdeflate_decoder)?;
                    (Some(c), d)
                } else {
                    (None, None)
                };
                gdeflate_choice = choice;
                let batcher = gpu_batch::GpuBatcher::new(
                    device,
                    queue,
                    ring,
                    caps,
                    gpu_batch::Decoders {
                        lz4,
                        gdeflate,
                        driver,
                    },
                    config.verify_gpu_checksums,
                    gpu_batch::BatchLinks {
                        events: gpu_tx,
                        to_complete: wiring.to_complete.0.clone(),
                        submit_ns: wgpu_submit_ns.clone(),
                        activity: activity.clone(),
                    },
                )
                .map_err(|e| RuntimeError::Thread("GPU poll", e))?;
                Some(batcher)
            }
            None => None,
        };
        let gpu_info = gpu_parts.as_ref().map(|g| GpuInfo {
            chunk_size: g.ring.chunk_size(),
            staging_total: g.ring.chunk_size() * g.ring.chunk_count() as u64,
            batch_buffers: g.own_gpu_bytes(),
            staging_memory: g.ring.memory().clone(),
        });
        let gpu_lz4 = gpu_parts.as_ref().and_then(|g| g.lz4_path());
        let gpu_gdeflate = gpu_parts.as_ref().is_some_and(|g| g.gdeflate_on());
        let stored_on_gpu = gpu_parts.as_ref().is_some_and(|g| {
            config
                .stored_copy_on_gpu
                .unwrap_or_else(|| !g.software_adapter())
        });
        let adapter_gpu = gpu_parts.is_some();
        let shared = Arc::new(RuntimeShared {
            config: config.clone(),
            engine,
            gpu: gpu_info,
            gpu_lz4,
            gpu_gdeflate,
            gdeflate_decoder: gdeflate_choice,
            stored_on_gpu,
            cmds: tx,
            accepting: std::sync::Mutex::new(true),
            next_job: AtomicU64::new(1),
            cancels: AtomicU64::new(0),
            next_queue: std::sync::atomic::AtomicU32::new(0),
            trace,
            submit_busy_ns: AtomicU64::new(0),
            wgpu_submit_ns,
            activity,
        });
        let d = dispatcher::Dispatcher::new(
            shared.clone(),
            rx,
            gpu_parts.map(|g| (g, gpu_rx)),
            wiring,
            config.cpu_threads,
            config.bounce_limit,
        )
        .map_err(|e| RuntimeError::Thread("CPU decode", e))?;
        let thread = std::thread::Builder::new()
            .name("gpustream-dispatch".into())
            .spawn(move || d.run())
            .map_err(|e| RuntimeError::Thread("submission", e))?;
        Ok(Runtime {
            shared,
            thread: Some(thread),
            adapter_gpu,
        })
    }

    /// Opens a pack: reads and validates its table of contents, and opens
    /// the file for the I/O engine (direct I/O where the filesystem allows).
    /// A striped pack opens every member (a missing one is a
    /// [`PackError::Member`](crate::pack::PackError::Member)), each on the
    /// device it lies on.
    pub fn open_pack(&self, path: impl AsRef<Path>) -> Result<Arc<PackFile>, RuntimeError> {
        let pack = Arc::new(Pack::open(path.as_ref())?);
        let open = |member: usize| -> Result<PackFile, RuntimeError> {
            // The very file `Pack::open` checked, reopened through its
            // descriptor; by path only where there is no such reopening.
            let (path, mode) = (&pack.members()[member].path, self.shared.config.open_mode);
            let file = match pack.reopen_path(member) {
                Some(open) => self.shared.engine.open_named(&open, path, mode)?,
                None => self.shared.engine.open(path, mode)?,
            };
            if self.shared.config.map_cached_files {
                // A refused mapping leaves the file read with `pread`.
                file.map_for_reads();
            }
            Ok(PackFile {
                pack: pack.clone(),
                file,
                member,
                members: Vec::new(),
            })
        };
        let mut head = open(0)?;
        for k in 1..pack.members().len() {
            head.members.push(Arc::new(open(k)?));
        }
        Ok(Arc::new(head))
    }

    /// Opens a pack in object storage ([`RemotePack`](crate::remote::RemotePack))
    /// for streaming: its replica is read like a local pack, through the
    /// I/O engine (io_uring, direct I/O where the cache's filesystem allows
    /// it), and each read first waits for the blocks it covers to be
    /// fetched into the replica. A failed fetch fails the requests that
    /// needed it with an [`IoError::Remote`](crate::io::IoError::Remote);
    /// every other request completes.
    #[cfg(all(feature = "remote", target_os = "linux"))]
    pub fn open_remote_pack(
        &self,
        remote: &crate::remote::RemotePack,
    ) -> Result<Arc<PackFile>, RuntimeError> {
        let file = self
            .shared
            .engine
            .open(remote.replica(), self.shared.config.open_mode)?;
        file.set_fill(remote.fill());
        Ok(Arc::new(PackFile {
            pack: remote.pack().clone(),
            file,
            member: 0,
            members: Vec::new(),
        }))
    }

    /// Creates a queue.
    pub fn create_queue(&self, config: QueueConfig) -> Queue {
        Queue::new(self.shared.clone(), config)
    }

    /// Which GDeflate decoder runs on the GPU, and why; `None` where
    /// GDeflate pages decode on CPU threads.
    pub fn gdeflate_decoder(&self) -> Option<&crate::decode::gpu::GDeflateDecoderChoice> {
        self.shared.gdeflate_decoder.as_ref()
    }

    /// Where `codec` blocks bound for GPU destinations are decoded.
    pub fn compression_support(&self, codec: Codec) -> CompressionSupport {
        match codec {
            Codec::Lz4 if self.shared.gpu_lz4.is_some() => CompressionSupport::Gpu,
            Codec::GDeflate if self.shared.gpu_gdeflate => CompressionSupport::Gpu,
            // Stored blocks are copied by the GPU's copy engine.
            Codec::None if self.adapter_gpu => CompressionSupport::Gpu,
            _ => CompressionSupport::Cpu,
        }
    }

    /// The variant of the WGSL LZ4 decoder this runtime runs, or `None` where
    /// LZ4 blocks are decoded on CPU threads.
    pub fn lz4_decode_path(&self) -> Option<crate::decode::gpu::Lz4DecodePath> {
        self.shared.gpu_lz4
    }

    /// The I/O backend in use ("io_uring" or "threads").
    pub fn io_backend(&self) -> String {
        self.shared.engine.backend_name().to_string()
    }

    /// Time the submission thread (which plans, reserves staging, issues
    /// reads and records GPU work for every queue) has spent busy so far,
    /// as opposed to waiting for work. Divide by delivered bytes to see
    /// whether one thread keeps up.
    pub fn submit_thread_busy(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(
            self.shared
                .submit_busy_ns
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// CPU time the submission thread spent inside wgpu's `Queue::submit`
    /// (thread CPU time, so preemption on a loaded machine does not count).
    /// On wgpu's noop backend that includes executing the recorded copies
    /// as host `memcpy`s, work a real GPU does by DMA.
    pub fn wgpu_submit_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(
            self.shared
                .wgpu_submit_ns
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// How long reads, the runtime's GPU work, and both at once have been
    /// in flight since it started. Subtract two of them
    /// ([`InFlightTimes::since`]) for a window of work: `both` over the
    /// window's wall time is the share of it during which reads overlapped
    /// GPU decoding, which is what keeps a pass bound by the disk.
    pub fn in_flight(&self) -> InFlightTimes {
        self.shared.activity.times()
    }

    /// The staging memory actually allocated; `None` on a runtime without
    /// a GPU, which has none.
    pub fn staging(&self) -> Option<StagingInfo> {
        self.shared.gpu.as_ref().map(|g| StagingInfo {
            chunk_size: g.chunk_size,
            total: g.staging_total,
            batch_buffers: g.batch_buffers,
        })
    }

    /// Which memory the staging chunks live in, and why
    /// (`RuntimeConfig::import_staging_memory`); `None` on a runtime
    /// without a GPU.
    pub fn staging_memory(&self) -> Option<&crate::staging::StagingMemory> {
        self.shared.gpu.as_ref().map(|g| &g.staging_memory)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.shared.cmds.send(job::Cmd::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(t) = &self.shared.trace {
            t.flush();
        }
    }
}
