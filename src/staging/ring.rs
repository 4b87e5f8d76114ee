//! The ring of staging chunks and its allocator.

use std::ptr::NonNull;

/// Where a chunk is in its life (see the module docs).
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub(crate) enum ChunkState {
    /// Mapped and empty.
    Free,
    /// Mapped; slots are being handed out.
    Filling,
    /// Mapped; no more slots, waiting for the ones handed out to be written.
    Sealed,
    /// Unmapped; the GPU is copying it.
    InGpu,
    /// A `map_async` is in flight.
    Mapping,
}

/// A reserved range of one chunk: the only way staging memory is handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The chunk.
    pub chunk: usize,
    /// Byte offset inside the chunk.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Write access to one [`Slot`] of a mapped chunk, for the thread (I/O or
/// CPU decode) that fills it.
///
/// It carries its own length; every safe method stays inside it. On a
/// discrete GPU staging may be write-combined memory behind the BAR, where
/// every CPU read crosses PCIe uncached: there the writer hands out no
/// readable view, only copies in and fills ([`Self::host_slice`] is `None`),
/// so no decoder, checksum or layout step can read staging by accident.
pub(crate) struct SlotWriter {
    ptr: NonNull<u8>,
    len: usize,
    /// The chunk is cached host memory the CPU may read back.
    readable: bool,
}

// SAFETY: a writer covers one slot, handed out once; the chunk stays mapped
// until the slot is reported written (the ring does not unmap a chunk with
// slots outstanding), so the pointer stays valid on whichever thread holds it.
unsafe impl Send for SlotWriter {}

impl SlotWriter {
    /// The start of the slot, for a read the kernel performs into it
    /// (`io::ReadOp::dest`).
    ///
    /// The caller may write `self.len()` bytes from it and must not read
    /// them back: the memory may be write-combined.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The slot's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Copies `src` to `at..at + src.len()` of the slot, with stores that go
    /// around the CPU's caches where they are long enough to pay off.
    /// `false` (and nothing written) when the range leaves the slot.
    pub fn write(&mut self, at: usize, src: &[u8]) -> bool {
        if at.checked_add(src.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: `at + src.len() <= len`, inside the slot, which this
        // writer alone writes; `src` is ordinary memory, not the slot.
        unsafe {
            crate::io::copy_streaming(self.ptr.as_ptr().add(at), src.as_ptr(), src.len());
        }
        true
    }

    /// Zeroes the slot from `from` to its end (a buffer copy's whole-word
    /// tail). Nothing when `from` is past the end.
    pub fn zero_from(&mut self, from: usize) {
        if from < self.len {
            // SAFETY: `from..len` is inside the slot, which this writer
            // alone writes.
            unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(from), 0, self.len - from) };
        }
    }

    /// The slot as a byte slice a decoder may write and read back, where the
    /// chunk is cached host memory (a CPU adapter's, or imported host-cached
    /// memory); `None` where it may be write-combined.
    pub fn host_slice(&mut self) -> Option<&mut [u8]> {
        // SAFETY: the slot is `len` bytes of a live mapping and this writer
        // is its only user (see the `Send` impl).
        self.readable
            .then(|| unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }
}

struct Chunk {
    buffer: wgpu::Buffer,
    view: Option<wgpu::BufferViewMut>,
    ptr: Option<NonNull<u8>>,
    /// Imported host memory (`host_memory.rs`): `ptr` stays valid for the
    /// chunk's whole life, and the chunk is never unmapped or remapped.
    imported: bool,
    /// The imported mapping, held so that it outlives wgpu's buffer: a
    /// lost device's buffers are destroyed at once, and slots handed out
    /// before may still be written.
    _mapping: Option<std::sync::Arc<dyn Send + Sync>>,
    used: u64,
    /// The second budget (decoded bytes the chunk's blocks produce on the GPU).
    weight: u64,
    /// Slots handed out and not yet written or given up.
    outstanding: usize,
    state: ChunkState,
    /// When it began filling (the ring's count of chunks opened).
    opened: u64,
}

/// The ring of staging chunks. Owned by the runtime's submission thread.
pub(crate) struct StagingRing {
    chunks: Vec<Chunk>,
    size: u64,
    open: Option<usize>,
    /// Chunks opened so far: the fill order.
    opened: u64,
    weight_cap: u64,
    region_weight: u64,
    memory: StagingMemory,
    /// The chunks are cached host memory the CPU may read back
    /// ([`SlotWriter::host_slice`]).
    readable: bool,
}

/// Which memory the staging chunks got, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum StagingMemory {
    /// Page-aligned host memory the runtime allocated and imported into
    /// Vulkan (`VK_EXT_external_memory_host`): O_DIRECT reads land in it by
    /// DMA, and the GPU pulls it by DMA. `cached`: Vulkan imported it as a
    /// host-cached memory type.
    ImportedHost {
        /// Whether the memory type is host-cached.
        cached: bool,
    },
    /// wgpu's own `MAP_WRITE` buffers, mapped and unmapped around each GPU
    /// copy: host memory on a CPU adapter; on a GPU, gpu-allocator's
    /// `CpuToGpu` memory, which is device-local memory behind the BAR
    /// (write-combined) where the GPU has a large BAR. `why`: why not
    /// imported host memory.
    Wgpu {
        /// Why the runtime did not import host memory.
        why: String,
    },
}

impl std::fmt::Display for StagingMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StagingMemory::ImportedHost { cached: true } => {
                write!(f, "imported host memory (host-cached; VK_EXT_external_memory_host)")
            }
            StagingMemory::ImportedHost { cached: false } => write!(
                f,
                "imported host memory (not host-cached; VK_EXT_external_memory_host)"
            ),
            StagingMemory::Wgpu { why } => write!(
                f,
                "wgpu's MAP_WRITE buffers (device-local BAR memory on a GPU with a large BAR, host memory on a CPU adapter): {why}"
            ),
        }
    }
}

// SAFETY: the raw pointers point into the chunks' mappings, which live as
// long as `view`; the ring hands out disjoint slots only.
unsafe impl Send for StagingRing {}

impl StagingRing {
    /// Splits `total` bytes into chunks of at most `chunk_size` (at least 2
    /// chunks, so reads can fill one while the GPU copies another). A chunk
    /// is sealed early once the weights of its slots would pass `weight_cap`;
    /// `region_weight` is the least weight its users count per region
    /// written (see [`Self::region_weight`]). `import`: make the chunks of
    /// imported host memory where the device allows (see
    /// [`StagingMemory`]), else wgpu's own mappable buffers. `host`: the
    /// device is a CPU adapter, whose buffers are ordinary host memory the
    /// CPU may read (false for one standing in for a discrete GPU). Fails
    /// when the device cannot hand out the chunks' mappings (it is lost).
    pub fn new(
        device: &wgpu::Device,
        total: u64,
        chunk_size: u64,
        (weight_cap, region_weight): (u64, u64),
        import: bool,
        host: bool,
    ) -> Result<StagingRing, String> {
        let total = total.max(2 * super::STAGING_ALIGN);
        let count = total.div_ceil(chunk_size).max(2);
        let size = ((total / count) & !4095).max(4096);
        let ring = |chunks, memory: StagingMemory| StagingRing {
            chunks,
            size,
            open: None,
            opened: 0,
            weight_cap,
            region_weight,
            readable: host || matches!(memory, StagingMemory::ImportedHost { cached: true }),
            memory,
        };
        let why = match import_chunks(device, count as usize, size, import) {
            Ok((chunks, cached)) => {
                return Ok(ring(chunks, StagingMemory::ImportedHost { cached }));
            }
            Err(why) => why,
        };
        let chunks = (0..count as usize)
            .map(|i| {
                let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&format!("gpustream staging chunk {i}")),
                    size,
                    usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: true,
                });
                let mut c = Chunk {
                    buffer,
                    view: None,
                    ptr: None,
                    imported: false,
                    _mapping: None,
                    used: 0,
                    weight: 0,
                    outstanding: 0,
                    state: ChunkState::Free,
                    opened: 0,
                };
                attach(&mut c)?;
                Ok(c)
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(ring(chunks, StagingMemory::Wgpu { why }))
    }

    /// Which memory the chunks got, and why.
    pub fn memory(&self) -> &StagingMemory {
        &self.memory
    }

    /// Whether `chunk` is imported host memory: free again as soon as its
    /// GPU copy is done ([`Self::mapped`] without a [`Self::remap`]).
    pub fn persistent(&self, chunk: usize) -> bool {
        self.chunks[chunk].imported
    }

    /// The least weight a slot's user counts per output region, so that a
    /// chunk's regions are at most `weight_cap / region_weight`.
    pub fn region_weight(&self) -> u64 {
        self.region_weight
    }

    /// The size of every chunk: the most one slot can be.
    pub fn chunk_size(&self) -> u64 {
        self.size
    }

    /// The number of chunks.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The bytes handed out in chunks that are not free.
    pub fn in_use(&self) -> u64 {
        self.chunks
            .iter()
            .filter(|c| c.state != ChunkState::Free)
            .map(|c| c.used)
            .sum()
    }

    /// Bytes used in a chunk.
    pub fn used(&self, chunk: usize) -> u64 {
        self.chunks[chunk].used
    }

    /// The summed weight of a chunk's slots.
    pub fn weight(&self, chunk: usize) -> u64 {
        self.chunks[chunk].weight
    }

    /// Reserves `len` bytes aligned to `align` (a power of two) that carry
    /// `weight` of the second budget, in the open chunk or the next free one.
    /// `None` when no chunk has room (or `len` exceeds a chunk).
    pub fn alloc(&mut self, len: u64, align: u64, weight: u64) -> Option<(Slot, SlotWriter)> {
        if len > self.size || weight > self.weight_cap {
            return None;
        }
        loop {
            let c = match self.open {
                Some(c) => c,
                None => {
                    let c = self
                        .chunks
                        .iter()
                        .position(|w| w.state == ChunkState::Free)?;
                    self.chunks[c].state = ChunkState::Filling;
                    self.chunks[c].opened = self.opened;
                    self.opened += 1;
                    self.open = Some(c);
                    c
                }
            };
            let ch = &mut self.chunks[c];
            let off = ch.used.checked_add(align - 1)? & !(align - 1);
            let fits = off.checked_add(len).is_some_and(|end| end <= self.size)
                && ch.weight + weight <= self.weight_cap;
            if fits {
                ch.used = off + len;
                ch.weight += weight;
                ch.outstanding += 1;
                let base = ch.ptr.expect("a filling chunk is mapped");
                // SAFETY: `off + len <= size`, inside the mapping.
                let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(off as usize)) };
                let slot = Slot {
                    chunk: c,
                    offset: off,
                    len,
                };
                return Some((
                    slot,
                    SlotWriter {
                        ptr,
                        len: len as usize,
                        readable: self.readable,
                    },
                ));
            }
            // Full: seal it and try the next free chunk.
            ch.state = ChunkState::Sealed;
            self.open = None;
        }
    }

    /// Gives back the latest slot of its chunk (a run being placed that could
    /// not get all it needs). Earlier slots cannot be given back this way.
    pub fn unreserve(&mut self, slot: Slot, weight: u64) {
        let ch = &mut self.chunks[slot.chunk];
        debug_assert_eq!(ch.used, slot.offset + slot.len, "only the latest slot");
        if ch.used == slot.offset + slot.len {
            ch.used = slot.offset;
        }
        ch.weight = ch.weight.saturating_sub(weight);
        ch.outstanding -= 1;
    }

    /// The slot's bytes are written (or it was given up): once a sealed
    /// chunk has none outstanding it can go to the GPU.
    pub fn slot_written(&mut self, chunk: usize) {
        self.chunks[chunk].outstanding -= 1;
    }

    /// Seals the open chunk if anything was handed out in it, so it can go
    /// to the GPU as soon as its slots are written.
    pub fn seal_open(&mut self) {
        if let Some(c) = self.open {
            if self.chunks[c].used > 0 {
                self.chunks[c].state = ChunkState::Sealed;
                self.open = None;
            }
        }
    }

    /// Sealed chunks whose slots are all written, in the order they were
    /// filled, up to the first chunk that is not ready yet. Reads land out
    /// of order, but a GPU batch takes chunks in the order their parts were
    /// placed (the pack's order), so that a mip's tiles reach it without
    /// holes and are copied as one rectangle.
    pub fn ready(&self) -> Vec<usize> {
        let mut filled: Vec<usize> = (0..self.chunks.len())
            .filter(|&i| {
                let c = &self.chunks[i];
                c.state == ChunkState::Sealed || (c.state == ChunkState::Filling && c.used > 0)
            })
            .collect();
        filled.sort_unstable_by_key(|&i| self.chunks[i].opened);
        let n = filled
            .iter()
            .take_while(|&&i| {
                let c = &self.chunks[i];
                c.state == ChunkState::Sealed && c.outstanding == 0
            })
            .count();
        filled.truncate(n);
        filled
    }

    /// Whether some chunk is filling or sealed (bytes on their way).
    pub fn filling(&self) -> bool {
        self.chunks
            .iter()
            .any(|c| matches!(c.state, ChunkState::Filling | ChunkState::Sealed) && c.used > 0)
    }

    /// A ready chunk with nothing for the GPU: free again at once (it is
    /// still mapped).
    pub fn recycle(&mut self, chunk: usize) {
        let ch = &mut self.chunks[chunk];
        assert_eq!(
            ch.outstanding, 0,
            "a recycled chunk has no reservation left to write"
        );
        ch.used = 0;
        ch.weight = 0;
        ch.state = ChunkState::Free;
    }

    /// Unmaps a ready chunk for the GPU copy; returns its buffer and the
    /// bytes used.
    pub fn unmap_for_gpu(&mut self, chunk: usize) -> (wgpu::Buffer, u64) {
        let ch = &mut self.chunks[chunk];
        assert_eq!(
            ch.outstanding, 0,
            "a chunk is unmapped only once every reservation in it is written"
        );
        if !ch.imported {
            ch.ptr = None;
            ch.view = None;
            ch.buffer.unmap();
        }
        ch.state = ChunkState::InGpu;
        (ch.buffer.clone(), ch.used)
    }

    /// Starts mapping a chunk whose GPU copy is done; `done` runs (on a wgpu
    /// callback) once the mapping ends, with wgpu's verdict: on success it
    /// must lead to [`Self::mapped`]; a failure means the device is lost.
    pub fn remap(&mut self, chunk: usize, done: impl FnOnce(Result<(), String>) + Send + 'static) {
        let ch = &mut self.chunks[chunk];
        ch.state = ChunkState::Mapping;
        ch.buffer.map_async(wgpu::MapMode::Write, .., move |r| {
            done(r.map_err(|e| format!("mapping a staging chunk failed: {e}")))
        });
    }

    /// The chunk is mapped again: free for the next fill. An error (the
    /// mapping is gone: the device was lost in between) leaves it out of
    /// use.
    pub fn mapped(&mut self, chunk: usize) -> Result<(), String> {
        let ch = &mut self.chunks[chunk];
        if ch.imported {
            ch.used = 0;
        } else {
            attach(ch)?;
        }
        ch.weight = 0;
        ch.outstanding = 0;
        ch.state = ChunkState::Free;
        Ok(())
    }
}

/// Takes the pointer of a freshly mapped buffer.
fn attach(c: &mut Chunk) -> Result<(), String> {
    let mut view = c
        .buffer
        .slice(..)
        .get_mapped_range_mut()
        .map_err(|e| format!("a staging chunk reported mapped is not: {e}"))?;
    c.ptr = Some(view.slice(..).as_raw_element_ptr());
    c.view = Some(view);
    c.used = 0;
    Ok(())
}

/// `count` chunks of `size` bytes of imported host memory, and whether
/// their memory is host-cached; or why not.
#[cfg(target_os = "linux")]
fn import_chunks(
    device: &wgpu::Device,
    count: usize,
    size: u64,
    import: bool,
) -> Result<(Vec<Chunk>, bool), String> {
    use super::host_memory;
    if !import {
        return Err("importing host memory is off (RuntimeConfig::import_staging_memory)".into());
    }
    if !host_memory::enabled(device) {
        return Err(
            "the device was not opened with VK_EXT_external_memory_host (not Vulkan, not offered, or the application's device lacks it)"
                .into(),
        );
    }
    let mut cached = true;
    let chunks = (0..count)
        .map(|i| {
            let c = host_memory::import(device, size, &format!("gpustream staging chunk {i}"))?;
            cached &= c.cached;
            Ok(Chunk {
                buffer: c.buffer,
                view: None,
                ptr: Some(c.ptr),
                imported: true,
                _mapping: Some(c.mapping),
                used: 0,
                weight: 0,
                outstanding: 0,
                state: ChunkState::Free,
                opened: 0,
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| format!("importing host memory failed: {e}"))?;
    Ok((chunks, cached))
}

/// Only Linux builds Vulkan's host-memory import here.
#[cfg(not(target_os = "linux"))]
fn import_chunks(
    _device: &wgpu::Device,
    _count: usize,
    _size: u64,
    _import: bool,
) -> Result<(Vec<Chunk>, bool), String> {
    Err("importing host memory is built on Linux only".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A discrete GPU's staging (wgpu's noop backend standing in for one,
    /// `host: false`) hands out no readable view: only copies and fills.
    /// A CPU adapter's cached memory does.
    #[test]
    fn only_cached_host_staging_is_readable() {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::NOOP;
        desc.backend_options.noop = wgpu::NoopBackendOptions::enabled();
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&Default::default())).unwrap();
        let (device, _queue) =
            pollster::block_on(adapter.request_device(&Default::default())).unwrap();
        for host in [false, true] {
            let mut ring =
                StagingRing::new(&device, 1 << 20, 256 << 10, (1 << 30, 1), false, host).unwrap();
            let (_, mut w) = ring.alloc(1000, 256, 0).unwrap();
            assert!(w.write(0, &[1u8; 1000]));
            assert!(!w.write(1, &[1u8; 1000]), "a copy past the slot");
            w.zero_from(500);
            assert_eq!(w.host_slice().is_some(), host);
            if let Some(s) = w.host_slice() {
                assert_eq!((s.len(), s[499], s[500]), (1000, 1, 0));
            }
        }
    }
}
