//! How a runtime is set up.

use crate::io::{IoConfig, OpenMode};

use super::error::RuntimeError;

/// How the runtime is set up.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// Total staging memory in bytes (default 32 MiB), split into chunks.
    pub staging_size: u64,
    /// The size of one staging chunk (default: a quarter of the staging
    /// size, at most 8 MiB). One coalesced read or one decoded block must fit.
    pub staging_chunk: Option<u64>,
    /// The I/O engine: backend, queue depth, the largest coalesced read and
    /// over-read, fault injection.
    pub io: IoConfig,
    /// How files are opened (direct I/O where possible by default).
    pub open_mode: OpenMode,
    /// CPU decompression threads (default: the machine's cores).
    pub cpu_threads: usize,
    /// Decode LZ4 blocks bound for the GPU with the WGSL decoder when the
    /// adapter can (default true); false forces the CPU path.
    pub gpu_decompression: bool,
    /// The WGSL LZ4 decoder's variant. `None` (default):
    /// `crate::decode::gpu::default_path` picks by adapter. A variant
    /// that needs subgroups on a device without them is a
    /// [`RuntimeError::Config`].
    pub lz4_decode_path: Option<crate::decode::gpu::Lz4DecodePath>,
    /// Which GDeflate decoder runs on the GPU (default
    /// [`GDeflateDecoderPreference::Wgsl`](crate::decode::gpu::GDeflateDecoderPreference),
    /// which flags malformed pages and measured faster than a driver's).
    /// `Driver` runs the driver's own where the device was opened with
    /// `VK_EXT/NV_memory_decompression`, else WGSL; the environment
    /// variable `GPUSTREAM_GDEFLATE_DECODER` (`wgsl`, `driver`) overrides
    /// this.
    /// [`Runtime::gdeflate_decoder`](super::Runtime::gdeflate_decoder) says which runs and why.
    pub gdeflate_decoder: crate::decode::gpu::GDeflateDecoderPreference,
    /// Check the crc32c of blocks the GPU reads from the pack (default
    /// true), in a GPU pass over the bytes the decode pass reads anyway.
    pub verify_gpu_checksums: bool,
    /// How stored blocks and CPU-decoded bytes reach GPU destinations.
    /// `None` (default) picks by adapter: on a software adapter (lavapipe,
    /// llvmpipe GL), where a compute pass *is* CPU work and a slow one, a CPU
    /// thread writes the bytes into staging laid out for the destination and
    /// plain copy commands deliver them; on any other adapter the GPU's
    /// stored-copy pass lays them out (0 host copies for stored blocks).
    /// `Some(true)` forces the GPU pass, `Some(false)` the CPU layout.
    pub stored_copy_on_gpu: Option<bool>,
    /// A destination buffer receiving at least this many blocks in one GPU
    /// batch is written directly by the decode and copy passes, bound as
    /// their output (no scratch, no copy); fewer go through the batch's
    /// scratch and one copy. Default 1024 (64 MiB): each such buffer takes
    /// passes of its own, and a pass of a few blocks leaves a large GPU
    /// idle, so a small buffer is cheaper copied. `usize::MAX` never.
    pub direct_buffer_blocks: usize,
    /// Host memory for reads bound for CPU decode (default 64 MiB).
    pub bounce_limit: u64,
    /// Map packs read through the page cache (`OpenMode::Buffered`, or a
    /// filesystem without O_DIRECT) read-only, so CPU decode threads check
    /// and decode blocks where the page cache holds them instead of copying
    /// them out with `pread` first, and the I/O threads fill staging from
    /// the mapping. O_DIRECT packs are never mapped.
    ///
    /// Off by default: every pack is read with reads, and the runtime
    /// installs no signal handler. Turning it on saves the `pread` copy
    /// (about a tenth of the CPU path's time with the pack in the page
    /// cache, docs/results.md) at two costs a library should not impose
    /// unasked:
    ///
    /// - **A process-wide SIGBUS handler.** A mapped file cut shorter while
    ///   open makes the kernel raise SIGBUS on the next access past its new
    ///   end. The first mapping installs a handler that turns such a fault
    ///   on a page of a gpustream mapping into a page of zeros and a mark
    ///   the reader checks (the block then fails with
    ///   `RequestError::ShortRead`, or is read again with `pread`), and
    ///   passes every other SIGBUS to the handler installed before it
    ///   (Rust's own, or the application's). A handler the application, a
    ///   crash reporter or a runtime such as a JVM installs later without
    ///   chaining turns a truncated pack into a process kill.
    /// - **Bytes that can change under the reader.** The mapping is
    ///   `MAP_SHARED`: another process rewriting the file in place (not by
    ///   writing a new file and renaming it, as `PackWriter` does) changes
    ///   the bytes while a block is checked and decoded. The checksum is
    ///   taken over the bytes as read, so such a block fails or, if
    ///   rewritten between check and decode, decodes other bytes; with
    ///   reads, the block's bytes are the runtime's own copy.
    pub map_cached_files: bool,
    /// Record every request, signal and submit to this file (see
    /// `trace`); `gpustream replay` plays it back.
    pub trace: Option<std::path::PathBuf>,
    /// Staged bytes one GPU batch takes before it is flushed (default 32
    /// MiB). The next reads land while the GPU decodes the last batch, so a
    /// batch much smaller than staging keeps reads and decoding in flight
    /// together; and the runtime's own GPU memory (two batches, each an
    /// input this size and an output scratch twice it) follows this, not
    /// the staging size. At least one staging chunk.
    pub gpu_batch_size: u64,
    /// Take the discrete-GPU path whatever type the adapter reports
    /// (default false). A CPU adapter otherwise gets the software path:
    /// staging is cached host memory there, so CPU decode threads write
    /// into it in place, and bytes are laid out by the CPU for plain
    /// copies. On a discrete GPU staging may be write-combined memory the
    /// CPU must only write, and the GPU's passes lay bytes out.
    ///
    /// wgpu's noop backend reports a CPU adapter while it runs no shaders;
    /// with this on it takes the same branches a discrete GPU takes, so it
    /// measures that GPU's host side (`gpustream bench --adapter noop`).
    pub assume_discrete_gpu: bool,
    /// Make the staging chunks of host memory the runtime allocates and
    /// imports into Vulkan, where the device was opened with
    /// `VK_EXT_external_memory_host` (default true; the tools open devices
    /// with it where the driver offers it, and
    /// `decode::gpu::driver_gdeflate::request_device` does the same for an
    /// application). Such memory is cached host memory: O_DIRECT reads
    /// land in it by DMA and the GPU pulls it by DMA, where wgpu's own
    /// mappable buffers are, on a GPU with a large BAR, write-combined
    /// device memory the CPU writes slowly and O_DIRECT cannot target.
    /// [`Runtime::staging_memory`](super::Runtime::staging_memory) says which the runtime got, and why.
    pub import_staging_memory: bool,
}

/// Chained setters, one per field: `RuntimeConfig` is `#[non_exhaustive]`, so
/// code outside the crate starts from its default (or constructor) and
/// sets what it changes, and new fields never break it.
impl RuntimeConfig {
    /// Sets [`staging_size`](Self::staging_size).
    pub fn with_staging_size(mut self, staging_size: u64) -> Self {
        self.staging_size = staging_size;
        self
    }

    /// Sets [`staging_chunk`](Self::staging_chunk).
    pub fn with_staging_chunk(mut self, staging_chunk: Option<u64>) -> Self {
        self.staging_chunk = staging_chunk;
        self
    }

    /// Sets [`io`](Self::io).
    pub fn with_io(mut self, io: IoConfig) -> Self {
        self.io = io;
        self
    }

    /// Sets [`open_mode`](Self::open_mode).
    pub fn with_open_mode(mut self, open_mode: OpenMode) -> Self {
        self.open_mode = open_mode;
        self
    }

    /// Sets [`cpu_threads`](Self::cpu_threads).
    pub fn with_cpu_threads(mut self, cpu_threads: usize) -> Self {
        self.cpu_threads = cpu_threads;
        self
    }

    /// Sets [`gpu_decompression`](Self::gpu_decompression).
    pub fn with_gpu_decompression(mut self, gpu_decompression: bool) -> Self {
        self.gpu_decompression = gpu_decompression;
        self
    }

    /// Sets [`lz4_decode_path`](Self::lz4_decode_path).
    pub fn with_lz4_decode_path(
        mut self,
        lz4_decode_path: Option<crate::decode::gpu::Lz4DecodePath>,
    ) -> Self {
        self.lz4_decode_path = lz4_decode_path;
        self
    }

    /// Sets [`gdeflate_decoder`](Self::gdeflate_decoder).
    pub fn with_gdeflate_decoder(
        mut self,
        gdeflate_decoder: crate::decode::gpu::GDeflateDecoderPreference,
    ) -> Self {
        self.gdeflate_decoder = gdeflate_decoder;
        self
    }

    /// Sets [`verify_gpu_checksums`](Self::verify_gpu_checksums).
    pub fn with_verify_gpu_checksums(mut self, verify_gpu_checksums: bool) -> Self {
        self.verify_gpu_checksums = verify_gpu_checksums;
        self
    }

    /// Sets [`stored_copy_on_gpu`](Self::stored_copy_on_gpu).
    pub fn with_stored_copy_on_gpu(mut self, stored_copy_on_gpu: Option<bool>) -> Self {
        self.stored_copy_on_gpu = stored_copy_on_gpu;
        self
    }

    /// Sets [`direct_buffer_blocks`](Self::direct_buffer_blocks).
    pub fn with_direct_buffer_blocks(mut self, direct_buffer_blocks: usize) -> Self {
        self.direct_buffer_blocks = direct_buffer_blocks;
        self
    }

    /// Sets [`bounce_limit`](Self::bounce_limit).
    pub fn with_bounce_limit(mut self, bounce_limit: u64) -> Self {
        self.bounce_limit = bounce_limit;
        self
    }

    /// Sets [`map_cached_files`](Self::map_cached_files).
    pub fn with_map_cached_files(mut self, map_cached_files: bool) -> Self {
        self.map_cached_files = map_cached_files;
        self
    }

    /// Sets [`trace`](Self::trace).
    pub fn with_trace(mut self, trace: Option<std::path::PathBuf>) -> Self {
        self.trace = trace;
        self
    }

    /// Sets [`gpu_batch_size`](Self::gpu_batch_size).
    pub fn with_gpu_batch_size(mut self, gpu_batch_size: u64) -> Self {
        self.gpu_batch_size = gpu_batch_size;
        self
    }

    /// Sets [`assume_discrete_gpu`](Self::assume_discrete_gpu).
    pub fn with_assume_discrete_gpu(mut self, assume_discrete_gpu: bool) -> Self {
        self.assume_discrete_gpu = assume_discrete_gpu;
        self
    }

    /// Sets [`import_staging_memory`](Self::import_staging_memory).
    pub fn with_import_staging_memory(mut self, import_staging_memory: bool) -> Self {
        self.import_staging_memory = import_staging_memory;
        self
    }
}

/// The GDeflate decoder for `device` under the configured `preference`,
/// with the driver's decoder where that is the choice.
pub(super) fn gdeflate_decoder(
    device: &wgpu::Device,
    preference: crate::decode::gpu::GDeflateDecoderPreference,
) -> Result<
    (
        crate::decode::gpu::GDeflateDecoderChoice,
        Option<crate::decode::gpu::driver_gdeflate::DriverGDeflate>,
    ),
    RuntimeError,
> {
    use crate::decode::gpu::driver_gdeflate::{self as driver, DriverGDeflate};
    use crate::decode::gpu::GDeflateDecoderKind;
    let mut choice = driver::choose(driver::support(device), preference, "configured");
    let decoder = match choice.kind {
        GDeflateDecoderKind::Driver(e) => {
            let d = DriverGDeflate::new(device);
            if d.is_none() {
                choice.kind = GDeflateDecoderKind::Wgsl;
                choice.reason = format!(
                    "{} is enabled, but its commands could not be loaded",
                    e.name()
                );
            }
            d
        }
        GDeflateDecoderKind::Wgsl => None,
    };
    Ok((choice, decoder))
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            staging_size: 32 << 20,
            staging_chunk: None,
            io: IoConfig::default(),
            open_mode: OpenMode::Auto,
            cpu_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            gpu_decompression: true,
            lz4_decode_path: None,
            gdeflate_decoder: Default::default(),
            verify_gpu_checksums: true,
            stored_copy_on_gpu: None,
            direct_buffer_blocks: 1024,
            bounce_limit: 64 << 20,
            map_cached_files: false,
            trace: None,
            gpu_batch_size: 32 << 20,
            assume_discrete_gpu: false,
            import_staging_memory: true,
        }
    }
}
