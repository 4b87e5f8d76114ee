//! Host memory destinations.

use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::{Arc, Mutex};

struct Inner {
    data: UnsafeCell<Box<[u8]>>,
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
        HostMemory {
            inner: Arc::new(Inner {
                data: UnsafeCell::new(vec![0u8; len].into_boxed_slice()),
                claims: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        // SAFETY: the length of the box never changes.
        unsafe { (&*self.inner.data.get()).len() }
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
        // SAFETY: no claim overlaps `range` and none can start while we hold
        // the lock, so nothing writes these bytes during `f`.
        let data = unsafe { &*self.inner.data.get() };
        let bytes = data.get(range.clone()).ok_or(HostMemoryBusy { range })?;
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
        })
    }
}

/// A claimed range of host memory: the only way the runtime writes it.
/// Dropping the claim frees the range.
pub(crate) struct HostClaim {
    mem: HostMemory,
    id: u64,
    range: Range<usize>,
}

impl HostClaim {
    /// The claimed bytes, for the writer that owns the claim.
    ///
    /// # Safety
    /// Only one thread may use the returned slice at a time (the runtime
    /// serialises a request's writes through its write lock).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: the claim is exclusive among claims and readers; the caller
        // serialises its own use.
        let data = unsafe { &mut *self.mem.inner.data.get() };
        &mut data[self.range.clone()]
    }
}

impl Drop for HostClaim {
    fn drop(&mut self) {
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
        unsafe { c.bytes_mut()[0] = 7 };
        drop(c);
        assert_eq!(m.to_vec().unwrap()[10], 7);
        assert!(m.claim(3, 0..100).is_ok());
    }
}
