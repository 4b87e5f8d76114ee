//! Heap memory aligned for direct I/O.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// The alignment [`AlignedBuf::new`] uses: enough for O_DIRECT on every
/// disk Linux supports (logical blocks are 512 B or 4 KiB) and for the page
/// granularity io_uring's registered buffers work in.
pub const DEFAULT_BUF_ALIGN: usize = 4096;

/// A zero-initialised, heap-allocated byte buffer whose start is aligned to
/// a power of two, so O_DIRECT reads can land in it.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes aligned to [`DEFAULT_BUF_ALIGN`].
    pub fn new(len: usize) -> AlignedBuf {
        AlignedBuf::with_alignment(len, DEFAULT_BUF_ALIGN)
    }

    /// A zeroed buffer of `len` bytes aligned to `align` (rounded up to a
    /// power of two, at least 1). Aborts like `Vec` if memory runs out;
    /// callers size buffers from validated lengths.
    pub fn with_alignment(len: usize, align: usize) -> AlignedBuf {
        let align = align.max(1).next_power_of_two();
        if len == 0 {
            // A dangling but aligned pointer, as Vec does for empty buffers.
            let ptr = NonNull::new(align as *mut u8).expect("align is non-zero");
            return AlignedBuf { ptr, len, align };
        }
        let layout = Layout::from_size_align(len, align).expect("buffer size overflows isize");
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len, align }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The alignment of the buffer's start.
    pub fn alignment(&self) -> usize {
        self.align
    }

    /// A raw pointer to the first byte, for handing to the I/O engine
    /// (`IoEngine::submit`, public with the `tools` feature).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            let layout = Layout::from_size_align(self.len, self.align).expect("checked at alloc");
            // SAFETY: allocated in with_alignment with this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.align)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0usize, 1, 4095, 4096, 100_000] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_mut_ptr() as usize % 4096, 0);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
        }
        let b = AlignedBuf::with_alignment(10, 3);
        assert_eq!(b.alignment(), 4);
    }
}
