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
    /// Who may touch which bytes: the runtime's writes and the
    /// application's reads, which never overlap.
    claims: Mutex<Claims>,
}

/// Byte ranges in use, with the id of their user.
#[derive(Default)]
struct Claims {
    /// Ranges that requests in flight may write. A read must not overlap
    /// them, and a new request may not claim a range that overlaps one:
    /// that is what makes the runtime's writes race-free.
    writes: Vec<(u64, Range<usize>)>,
    /// Ranges `with_bytes` is reading now. A request may not claim a range
    /// that overlaps one. The lock is not held while the reader's closure
    /// runs, so the closure may enqueue requests (on other bytes).
    reads: Vec<(u64, Range<usize>)>,
    next_read: u64,
}

fn overlapping<'a>(
    ranges: &'a [(u64, Range<usize>)],
    range: &Range<usize>,
) -> Option<&'a Range<usize>> {
    ranges
        .iter()
        .map(|(_, r)| r)
        .find(|r| r.start < range.end && range.start < r.end)
}

// SAFETY: all writes go through claimed, disjoint ranges (checked in
// `claim`), and reads through `with_bytes`, which registers its range under
// the claims lock only where no claim overlaps it, and a claim is refused
// where a registered read overlaps it.
unsafe impl Sync for Inner {}
// SAFETY: `Inner` owns its allocation (freed once, in `Drop`) and holds no
// thread-bound state; moving it to another thread moves that ownership.
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

/// Why a read of host memory was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostMemoryError {
    /// The range overlaps one a request in flight is still writing.
    #[error("host memory bytes {range:?} are still being written by a request in flight")]
    Busy {
        /// The overlapping range the request writes.
        range: Range<usize>,
    },
    /// The range does not lie inside the memory.
    #[error("bytes {range:?} lie outside host memory of {len} bytes")]
    OutOfBounds {
        /// The range asked for.
        range: Range<usize>,
        /// The memory's size.
        len: usize,
    },
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
                claims: Mutex::new(Claims::default()),
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

    /// Runs `f` on bytes `range`, unless a request in flight writes any of
    /// them ([`HostMemoryError::Busy`]) or the range leaves the memory
    /// ([`HostMemoryError::OutOfBounds`]).
    ///
    /// While `f` runs, the range is held for reading: a request enqueued
    /// meanwhile (by `f` itself, or by another thread) whose destination
    /// overlaps it is refused with `RequestError::DestinationBusy` rather
    /// than waiting; one on other bytes of the same memory is accepted. An
    /// application that reads on one thread while another enqueues into the
    /// same bytes orders the two itself (a fence, or reading only ranges
    /// whose requests have completed).
    pub fn with_bytes<R>(
        &self,
        range: Range<usize>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, HostMemoryError> {
        if range.start > range.end || range.end > self.inner.len {
            return Err(HostMemoryError::OutOfBounds {
                range,
                len: self.inner.len,
            });
        }
        let id = {
            let mut claims = self.inner.claims.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = overlapping(&claims.writes, &range) {
                return Err(HostMemoryError::Busy { range: c.clone() });
            }
            let id = claims.next_read;
            claims.next_read += 1;
            claims.reads.push((id, range.clone()));
            id
        };
        // Removes the read when `f` returns or unwinds.
        struct Reading<'a>(&'a Inner, u64);
        impl Drop for Reading<'_> {
            fn drop(&mut self) {
                let mut claims = self.0.claims.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(i) = claims.reads.iter().position(|(id, _)| *id == self.1) {
                    claims.reads.swap_remove(i);
                }
            }
        }
        let _reading = Reading(&self.inner, id);
        // SAFETY: the range is inside the allocation (checked above); no
        // claim overlapped it when the read was registered, and none that
        // overlaps it can be made until `_reading` is dropped after `f`, so
        // nothing writes these bytes while the slice lives.
        let bytes = unsafe {
            std::slice::from_raw_parts(self.inner.data.add(range.start), range.end - range.start)
        };
        Ok(f(bytes))
    }

    /// A copy of all the bytes, once no request writes any of them.
    pub fn to_vec(&self) -> Result<Vec<u8>, HostMemoryError> {
        self.with_bytes(0..self.len(), |b| b.to_vec())
    }

    /// Claims `range` for request `id`; fails if another claim overlaps.
    pub(crate) fn claim(&self, id: u64, range: Range<usize>) -> Result<HostClaim, Range<usize>> {
        let mut claims = self.inner.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = overlapping(&claims.writes, &range).or(overlapping(&claims.reads, &range))
        {
            return Err(c.clone());
        }
        claims.writes.push((id, range.clone()));
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
            .writes
            .iter()
            .position(|(id, r)| *id == self.id && *r == self.range)
        {
            claims.writes.swap_remove(i);
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
    fn a_reader_may_claim_other_bytes_but_not_its_own() {
        let m = HostMemory::new(100);
        // Inside the closure the lock is free: claiming other bytes works,
        // claiming the bytes being read is refused, and neither deadlocks.
        let (other, same) = m
            .with_bytes(0..50, |_| {
                (
                    m.claim(1, 50..60).map(|c| c.range.clone()),
                    m.claim(2, 40..60).err(),
                )
            })
            .unwrap();
        assert_eq!(other, Ok(50..60));
        assert_eq!(same, Some(0..50));
        // The read is over: its bytes can be claimed again.
        assert!(m.claim(3, 0..50).is_ok());
    }

    #[test]
    fn out_of_bounds_and_busy_are_told_apart() {
        let m = HostMemory::new(10);
        assert_eq!(
            m.with_bytes(5..11, |_| ()).err(),
            Some(HostMemoryError::OutOfBounds {
                range: 5..11,
                len: 10
            })
        );
        let _c = m.claim(1, 2..4).unwrap();
        assert_eq!(
            m.with_bytes(0..10, |_| ()).err(),
            Some(HostMemoryError::Busy { range: 2..4 })
        );
    }

    #[test]
    fn claims_exclude_overlap_and_reads() {
        let m = HostMemory::new(100);
        let c = m.claim(1, 10..20).unwrap();
        assert_eq!(m.claim(2, 15..30).err(), Some(10..20));
        assert!(m.with_bytes(0..11, |_| ()).is_err());
        assert!(m.with_bytes(20..30, |_| ()).is_ok());
        // SAFETY: the only slice of this claim made in this test, and it
        // is dropped at the end of the statement.
        unsafe { c.part_mut(0..1).unwrap()[0] = 7 };
        // SAFETY: refused (outside the claim), so no slice is made.
        assert!(unsafe { c.part_mut(5..11) }.is_none());
        drop(c);
        assert_eq!(m.to_vec().unwrap()[10], 7);
        assert!(m.claim(3, 0..100).is_ok());
    }
}
