//! The staging buffer: a ring of host-visible wgpu buffers that reads and
//! CPU decoders write into, and that the GPU copies out of.
//!
//! Where the device was opened with `VK_EXT_external_memory_host` the
//! chunks are host memory the runtime allocates and imports into Vulkan
//! (`host_memory.rs`): cached memory O_DIRECT reads land in by DMA, and the
//! GPU pulls by DMA, never unmapped; elsewhere they are wgpu's `MAP_WRITE`
//! buffers, which on a discrete GPU may be write-combined BAR memory
//! ([`StagingMemory`] says which the ring got, and why).
//!
//! The staging size is split into chunks, each its own `MAP_WRITE |
//! COPY_SRC` buffer, because wgpu maps and unmaps whole buffers: while the GPU
//! copies one chunk, reads keep landing in the others. A chunk's life:
//!
//! ```text
//! Free -> Filling (slots handed out) -> Sealed (no more slots)
//!      -> InGpu (unmapped; one GPU copy moves its bytes to device memory)
//!      -> Mapping (map_async in flight) -> Free
//! ```
//!
//! The ring owns this state and its allocator: callers get [`Slot`]s (a
//! chunk, an offset and a length) and write them through a [`SlotWriter`],
//! which carries its length, so no unbounded pointer travels between
//! threads. A chunk goes to the GPU only once every slot handed out in it has
//! been reported written ([`StagingRing::slot_written`]) or given up.

#[cfg(target_os = "linux")]
mod host_memory;
mod ring;

#[cfg(target_os = "linux")]
pub(crate) use host_memory::EXTENSION as HOST_MEMORY_EXTENSION;
pub use ring::StagingMemory;
pub(crate) use ring::{Slot, SlotWriter, StagingRing};

/// The alignment of every allocation inside a chunk: O_DIRECT wants 4 KiB
/// sectors for reads (callers ask for that), `copy_buffer_to_buffer` 4 bytes;
/// 256 also keeps slots on their own cache lines.
pub const STAGING_ALIGN: u64 = 256;
