//! The staging buffer: a ring of host-visible wgpu buffers that reads and
//! CPU decoders write into, and that the GPU copies (or decompresses) from.
//!
//! The staging size is split into chunks, each its own `MAP_WRITE |
//! COPY_SRC` buffer, because wgpu maps and unmaps whole buffers: while the GPU
//! consumes one chunk, reads keep landing in the others. A chunk's life:
//! mapped (filled by reads and decoders) -> unmapped and used by one GPU
//! submission -> mapped again once that submission is done.

use std::ptr::NonNull;

/// The alignment of every allocation inside a chunk: O_DIRECT wants 4 KiB
/// sectors for reads, `copy_buffer_to_texture` 16-byte texel blocks and
/// `copy_buffer_to_buffer` 4 bytes. Reads are placed on their own 4 KiB
/// boundary; everything else on 256 bytes, which also suits row pitches.
pub const STAGING_ALIGN: u64 = 256;

/// One chunk of the ring.
pub struct Chunk {
    /// The wgpu buffer (`MAP_WRITE | COPY_SRC`).
    pub buffer: wgpu::Buffer,
    view: Option<wgpu::BufferViewMut>,
    ptr: Option<NonNull<u8>>,
    /// Bytes handed out so far in the current fill.
    pub used: u64,
    /// The chunk's size.
    pub size: u64,
}

// SAFETY: the raw pointer is into the buffer's mapping, which lives as long as
// `view`, and only the runtime's dispatcher hands out disjoint ranges of it.
unsafe impl Send for Chunk {}

impl Chunk {
    fn new(device: &wgpu::Device, size: u64, index: usize) -> Chunk {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&format!("gpustream staging chunk {index}")),
            size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        let mut c = Chunk {
            buffer,
            view: None,
            ptr: None,
            used: 0,
            size,
        };
        c.attach_mapping();
        c
    }

    /// Takes the pointer of a freshly mapped buffer.
    pub(crate) fn attach_mapping(&mut self) {
        let mut view = self
            .buffer
            .slice(..)
            .get_mapped_range_mut()
            .expect("staging chunk is mapped");
        self.ptr = Some(view.slice(..).as_raw_element_ptr());
        self.view = Some(view);
        self.used = 0;
    }

    /// Whether the chunk is mapped (writable by the host).
    pub fn is_mapped(&self) -> bool {
        self.ptr.is_some()
    }

    /// Reserves `len` bytes aligned to `align` (a power of two); returns the
    /// offset, or `None` when the chunk is full.
    pub fn alloc(&mut self, len: u64, align: u64) -> Option<u64> {
        debug_assert!(self.is_mapped());
        let off = self.used.checked_add(align - 1)? & !(align - 1);
        let end = off.checked_add(len)?;
        if end > self.size {
            return None;
        }
        self.used = end;
        Some(off)
    }

    /// A raw pointer to byte `offset` of the mapping.
    ///
    /// # Safety
    /// The chunk must be mapped, `offset + len` within the chunk, and the
    /// caller must be the only writer of that range until the chunk is
    /// unmapped. The memory may be write-combined: write it, do not read it
    /// except where the caller accepts the cost.
    pub unsafe fn ptr_at(&self, offset: u64) -> *mut u8 {
        let base = self.ptr.expect("staging chunk is mapped").as_ptr();
        // SAFETY: the caller keeps offset within the mapping.
        unsafe { base.add(offset as usize) }
    }

    /// Unmaps the chunk so the GPU can read it.
    pub(crate) fn unmap(&mut self) {
        self.ptr = None;
        self.view = None;
        self.buffer.unmap();
    }
}

/// The ring of staging chunks.
pub struct StagingRing {
    /// The chunks; the dispatcher tracks which are free.
    pub chunks: Vec<Chunk>,
    /// The total size asked for.
    pub total: u64,
}

impl StagingRing {
    /// Splits `total` bytes into chunks of at most `chunk_size` (at least 2
    /// chunks, so reads can fill one while the GPU drains another).
    pub fn new(device: &wgpu::Device, total: u64, chunk_size: u64) -> StagingRing {
        let total = total.max(2 * STAGING_ALIGN);
        let count = total.div_ceil(chunk_size).max(2);
        let size = (total / count) & !4095;
        let size = size.max(4096);
        let chunks = (0..count as usize)
            .map(|i| Chunk::new(device, size, i))
            .collect();
        StagingRing { chunks, total }
    }

    /// The size of every chunk: the most one read run or one decoded block
    /// can occupy.
    pub fn chunk_size(&self) -> u64 {
        self.chunks.first().map(|c| c.size).unwrap_or(0)
    }
}
