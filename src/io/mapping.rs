//! A read-only mapping of a whole file read through the page cache, so a
//! CPU decode thread can check and decode a block where the page cache
//! holds it, instead of copying it out with `pread` first.
//!
//! Why: on the CPU path with the pack in the page cache, the `pread` copy
//! was a quarter of a decode thread's time per block (about 10 us for a
//! 48 KiB block on the development VM, page cache to buffer at 5 GB/s,
//! against about 25 us to decode its 64 KiB); reading the mapped pages
//! leaves only the checksum's and the decoder's own reads.
//!
//! **A file cut shorter under its mapping.** Touching a mapped page past a
//! file's end makes the kernel send SIGBUS, which would kill the process
//! where `pread` returns a short read. So the first mapping installs a
//! SIGBUS handler (chained to whatever handler was there before, Rust's
//! own included): a fault inside a live mapping of ours gets a page of
//! zeros mapped over the faulting page and a mark on the mapping
//! ([`Mapping::was_cut`]), and the read goes on. The block then fails its
//! checksum or decode, and the reader, seeing the mark or the failure,
//! asks the file's length and reports the block as read short, as `pread`
//! would have. Faults anywhere else go to the previous handler. At most
//! [`SLOTS`] mappings are live at once; more files are read with `pread`.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Live mappings a SIGBUS is checked against.
pub(crate) const SLOTS: usize = 64;

/// One live mapping's address range (`start` 0: free) and its mark.
struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    cut: AtomicBool,
}

/// Read by the signal handler, so only atomics: no lock, no allocation.
static LIVE: [Slot; SLOTS] = [const {
    Slot {
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        cut: AtomicBool::new(false),
    }
}; SLOTS];

/// The SIGBUS action installed before ours (set once, before ours is
/// installed, so the handler always finds it), and the page size.
static PREVIOUS: OnceLock<Option<(libc::sigaction, usize)>> = OnceLock::new();

/// A `PROT_READ`, `MAP_SHARED` mapping of a file's first `len` bytes,
/// unmapped on drop.
pub(crate) struct Mapping {
    ptr: *const u8,
    len: usize,
    slot: usize,
}

// SAFETY: the mapping is read-only and owned by this value; sharing the
// pointer between threads shares reads only, and it is unmapped once, on
// drop, when no borrow of it is left.
unsafe impl Send for Mapping {}
// SAFETY: as above: `&Mapping` hands out only shared byte slices.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `fd` read-only; `None` for an empty
    /// file, where the kernel refuses, where the SIGBUS handler could not
    /// be installed, or when [`SLOTS`] mappings are live (the caller reads
    /// with `pread`).
    pub(crate) fn new(fd: RawFd, len: u64) -> Option<Mapping> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        PREVIOUS.get_or_init(install).as_ref()?;
        // SAFETY: a fresh read-only mapping at an address the kernel picks;
        // it aliases no Rust object. The result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        let start = ptr as usize;
        // A slot is taken by its `end` (0: free), then published by its
        // `start`, which the handler reads first.
        let slot = LIVE.iter().position(|s| {
            s.end
                .compare_exchange(0, start + len, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        });
        let Some(slot) = slot else {
            // SAFETY: the mapping made above, never handed out.
            unsafe { libc::munmap(ptr, len) };
            return None;
        };
        LIVE[slot].cut.store(false, Ordering::Relaxed);
        LIVE[slot].start.store(start, Ordering::Release);
        Some(Mapping {
            ptr: ptr as *const u8,
            len,
            slot,
        })
    }

    /// Bytes `offset..offset + len`, or `None` when any of them lies past
    /// the mapped length (a file that grew after it was mapped: such ranges
    /// are read with `pread`).
    pub(crate) fn get(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `start..end` lies inside the live mapping, which stays
        // mapped while `self` is borrowed; a page the file no longer backs
        // reads as zeros (the SIGBUS handler maps them), never faults.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(start), len) })
    }

    /// Whether a read of this mapping has touched a page past the file's
    /// end since it was mapped (the file was cut shorter): bytes read from
    /// it since may be zeros, and the reader checks the file's length.
    pub(crate) fn was_cut(&self) -> bool {
        LIVE[self.slot].cut.load(Ordering::Acquire)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let s = &LIVE[self.slot];
        s.start.store(0, Ordering::Release);
        // SAFETY: `ptr` and `len` are exactly what `mmap` returned and was
        // given (pages of zeros the handler mapped inside it go with it);
        // no slice of the mapping outlives `self`.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
        s.end.store(0, Ordering::Release);
    }
}

/// Installs the SIGBUS handler; the action it replaced and the page size,
/// or `None` when it could not be installed.
fn install() -> Option<(libc::sigaction, usize)> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    // SAFETY: all-zero is a valid `sigaction`; it is filled in below.
    let mut ours: libc::sigaction = unsafe { std::mem::zeroed() };
    ours.sa_sigaction = on_sigbus as *const () as usize;
    // On the alternate stack, as Rust's own handler runs: a fault may come
    // from a thread whose stack is exhausted, for the previous handler.
    ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: all-zero is a valid `sigaction` for the kernel to fill in.
    let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `ours.sa_mask` is a valid set to empty.
    unsafe { libc::sigemptyset(&mut ours.sa_mask) };
    // Ours and the previous action are swapped in one call; `PREVIOUS` is
    // set from the result. In between, a SIGBUS that is not ours finds no
    // previous action and takes the default one (no mapping of ours exists
    // yet, so none can be ours).
    // SAFETY: valid pointers to `sigaction` values for the call.
    if unsafe { libc::sigaction(libc::SIGBUS, &ours, &mut prev) } != 0 {
        return None;
    }
    Some((prev, page))
}

/// The SIGBUS handler (see the module docs). Async-signal-safe: it reads
/// atomics, calls `mmap`, `sigaction` and `raise`, and nothing else.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.get().copied().flatten();
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    if let Some((_, page)) = prev {
        for s in &LIVE {
            let start = s.start.load(Ordering::Acquire);
            if start == 0 || addr < start || addr >= s.end.load(Ordering::Acquire) {
                continue;
            }
            let at = addr & !(page - 1);
            // SAFETY: `at` is a page of a live mapping of ours (a borrow of
            // it is what faulted, so it cannot be unmapped meanwhile);
            // replacing it with zeros changes bytes only that mapping's
            // readers see, and they check for it (`was_cut`).
            let p = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                s.cut.store(true, Ordering::Release);
                return;
            }
        }
    }
    // Not ours: whatever was installed before, as if we were not here.
    // SAFETY: calls the previous handler with the arguments the kernel
    // gave us, or restores the default action and raises the signal again
    // (it is blocked while this handler runs, so it is delivered, with
    // the default action, when it returns).
    unsafe {
        match prev {
            Some((p, _)) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
                if p.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(p.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                    f(sig);
                }
            }
            _ => {
                // SAFETY: all-zero with SIG_DFL is the default action.
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
                libc::raise(libc::SIGBUS);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn maps_a_file_and_bounds_every_range() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        f.write_all(&data).unwrap();
        let m = Mapping::new(f.as_raw_fd(), data.len() as u64).unwrap();
        assert_eq!(m.get(0, data.len()).unwrap(), &data[..]);
        assert_eq!(m.get(4096, 100).unwrap(), &data[4096..4196]);
        assert_eq!(m.get(9_999, 1).unwrap(), &data[9_999..]);
        assert!(m.get(9_999, 2).is_none());
        assert!(m.get(10_000, 1).is_none());
        assert!(m.get(u64::MAX, 1).is_none());
        assert!(m.get(1, usize::MAX).is_none());
        assert!(!m.was_cut());
    }

    #[test]
    fn an_empty_file_is_not_mapped() {
        let f = tempfile::tempfile().unwrap();
        assert!(Mapping::new(f.as_raw_fd(), 0).is_none());
    }

    #[test]
    fn a_file_cut_under_its_mapping_reads_zeros_and_is_marked() {
        let mut f = tempfile::tempfile().unwrap();
        let data = vec![0xA5u8; 5 * 4096];
        f.write_all(&data).unwrap();
        let m = Mapping::new(f.as_raw_fd(), data.len() as u64).unwrap();
        assert_eq!(m.get(0, data.len()).unwrap(), &data[..]);
        f.set_len(4096).unwrap();
        // The first page is still the file's; the rest faults and reads as
        // zeros instead of killing the process.
        let all = m.get(0, data.len()).unwrap();
        assert!(all[..4096].iter().all(|&b| b == 0xA5));
        assert!(all[4096..].iter().all(|&b| b == 0));
        assert!(m.was_cut());
    }
}
