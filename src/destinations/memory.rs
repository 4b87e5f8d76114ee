//! Host memory destinations.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

struct Inner {
    /// The bytes, owned (from `Box::into_raw`, freed in `Drop`). Kept as a
    /// raw pointer so that no `&`/`&mut` over the whole allocation is ever
    /// made: each writer and reader gets a slice of its own range only.
    data: *mut u8,
    len: usize,
    /// Byte ranges that requests in flight may write. Reads of the memory
    /// must not overlap them, and a new request may not claim a range that
    /// overlaps one: that is what makes the runtime's writes race-free.
    claims: Mutex<Vec<(u64, Range<usize>)>>,
}

// SAFETY: all writes go through claimed, disjoint ranges (checked in
// `claim`), and reads through `with_bytes`, which refuses ranges with a claim
// in flight while holding the claims lock so no new claim can start.
unsafe impl Sync for Inner {}
unsafe impl Send for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: `data` and `len` came from `Box::into_raw` of a boxed slice
        // in `HostMemory::new`, and nothing refers to the bytes any more.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.data, self.len)) });
    }
}

/// A block of host memory the runtime delivers into, shared between the
/// application and the runtime.
///
/// While a request that writes a range is in flight, that range is claimed:
/// [`HostMemory::with_bytes`] refuses to read it and other requests cannot
/// target it. Once the request's fence is reached the range is free again.
#[derive(Clone)]
pub struct HostMemory {
    inner: Arc<Inner>,
}

/// A read of host memory overlapped a range a request is still writing.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("host memory bytes {range:?} are still being written by a request in flight")]
pub struct HostMemoryBusy {
    /// The overlapping range.
    pub range: Range<usize>,
}

impl std::fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMemory")
            .field("len", &self.len())
            .finish()
    }
}

impl HostMemory {
    /// `len` zeroed bytes.
    pub fn new(len: usize) -> HostMemory {
        let data = Box::into_raw(vec![0u8; len].into_boxed_slice()) as *mut u8;
        HostMemory {
            inner: Arc::new(Inner {
                data,
                len,
                claims: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether two handles name the same memory.
    pub fn same(&self, other: &HostMemory) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Runs `f` on bytes `range` once no request in flight writes them.
    pub fn with_bytes<R>(
        &self,
        range: Range<usize>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, HostMemoryBusy> {
        let claims = self.inner.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = claims
            .iter()
            .find(|(_, c)| c.start < range.end && range.start < c.end)
        {
            return Err(HostMemoryBusy { range: c.clone() });
        }
        if range.start > range.end || range.end > self.inner.len {
            return Err(HostMemoryBusy { range });
        }
        // SAFETY: the range is inside the allocation; no claim overlaps it
        // and none can start while we hold the lock, so nothing writes these
        // bytes during `f`.
        let bytes = unsafe {
            std::slice::from_raw_parts(self.inner.data.add(range.start), range.end - range.start)
        };
        Ok(f(bytes))
    }

    /// A copy of all the bytes, once no request writes any of them.
    pub fn to_vec(&self) -> Result<Vec<u8>, HostMemoryBusy> {
        self.with_bytes(0..self.len(), |b| b.to_vec())
    }

    /// Claims `range` for request `id`; fails if another claim overlaps.
    pub(crate) fn claim(&self, id: u64, range: Range<usize>) -> Result<HostClaim, Range<usize>> {
        let mut claims = self.inner.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = claims
            .iter()
            .find(|(_, c)| c.start < range.end && range.start < c.end)
        {
            return Err(c.clone());
        }
        claims.push((id, range.clone()));
        Ok(HostClaim {
            mem: self.clone(),
            id,
            range,
            released: AtomicBool::new(false),
        })
    }
}

/// A claimed range of host memory: the only way the runtime writes it.
/// [`HostClaim::release`], or dropping the claim, frees the range.
pub(crate) struct HostClaim {
    mem: HostMemory,
    id: u64,
    range: Range<usize>,
    released: AtomicBool,
}

impl HostClaim {
    /// Bytes `range` of the claim (relative to its start), for the one part
    /// of the request that writes them. `None` if the range leaves the claim.
    ///
    /// Only the sub-slice is ever made, so several decode threads can each
    /// hold their own part's slice of one claim at once.
    ///
    /// # Safety
    /// No other live slice from this claim may overlap `range` (each part of
    /// a request writes its own range, and a part is decoded by one thread).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn part_mut(&self, range: Range<usize>) -> Option<&mut [u8]> {
        let len = self.range.end - self.range.start;
        if range.start > range.end || range.end > len || self.released.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: the range lies inside the claim, which lies inside the
        // allocation; the claim excludes other claims and readers, and the
        // caller keeps slices of one claim disjoint.
        Some(unsafe {
            std::slice::from_raw_parts_mut(
                self.mem.inner.data.add(self.range.start + range.start),
                range.end - range.start,
            )
        })
    }
}

impl HostClaim {
    /// Frees the range for readers and new claims: the request has ended and
    /// none of its parts writes any more. Afterwards [`Self::part_mut`]
    /// hands out nothing. Releasing twice is harmless.
    pub(crate) fn release(&self) {
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut claims = self
            .mem
            .inner
            .claims
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(i) = claims
            .iter()
            .position(|(id, r)| *id == self.id && *r == self.range)
        {
            claims.swap_remove(i);
        }
    }
}

impl Drop for HostClaim {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_exclude_overlap_and_reads() {
        let m = HostMemory::new(100);
        let c = m.claim(1, 10..20).unwrap();
        assert_eq!(m.claim(2, 15..30).err(), Some(10..20));
        assert!(m.with_bytes(0..11, |_| ()).is_err());
        assert!(m.with_bytes(20..30, |_| ()).is_ok());
        unsafe { c.part_mut(0..1).unwrap()[0] = 7 };
        assert!(unsafe { c.part_mut(5..11) }.is_none());
        drop(c);
        assert_eq!(m.to_vec().unwrap()[10], 7);
        assert!(m.claim(3, 0..100).is_ok());
    }
}
