//! The staging buffer: a ring of host-visible wgpu buffers that reads and
//! CPU decoders write into, and that the GPU copies out of.
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

mod ring;

pub(crate) use ring::{Slot, SlotWriter, StagingRing};

/// The alignment of every allocation inside a chunk: O_DIRECT wants 4 KiB
/// sectors for reads (callers ask for that), `copy_buffer_to_buffer` 4 bytes;
/// 256 also keeps slots on their own cache lines.
pub const STAGING_ALIGN: u64 = 256;
