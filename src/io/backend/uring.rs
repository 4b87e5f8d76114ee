//! The io_uring backend: one ring per device worker, many reads per
//! `io_uring_enter`, registered files, and an eventfd read kept armed in the
//! ring so other threads can wake a worker that is blocked waiting for
//! completions.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};

use std::sync::atomic::Ordering::Relaxed;

use super::threads::ThreadsBackend;
use super::{Backend, Counters, RawRead, RawResult, Waker};

const WAKE_TAG: u64 = u64::MAX;
/// Registered file slots per ring. Files beyond this are read through
/// plain descriptors; the oldest slot is reused for new files.
const FILE_SLOTS: u32 = 256;

pub(crate) struct UringBackend {
    ring: IoUring,
    eventfd: RawFd,
    /// Where the armed eventfd read lands; boxed so its address is stable.
    wake_buf: Box<u64>,
    wake_armed: bool,
    files: Option<FileTable>,
    /// Registered buffers: (start address, len), index = buffer index.
    buffers: Vec<(usize, usize)>,
    counters: Arc<Counters>,
    in_flight: usize,
    /// Buffered reads go to a small `pread` pool instead of the ring:
    /// measured here, io_uring copied page-cached data 4x slower than
    /// `pread` threads (docs/io.md). Created on the first buffered read.
    buffered: Option<ThreadsBackend>,
    /// Threads of that pool: the queue depth, at most the core count. A
    /// read the page cache holds is a CPU copy, so threads past the cores
    /// only take turns (and take them from the decode threads); a miss
    /// still has the kernel's readahead working for it.
    pool_size: usize,
}

struct FileTable {
    slots: HashMap<u64, u32>,
    owners: Vec<Option<u64>>,
    next: u32,
}

// SAFETY: the ring and the raw pointers in flight are only used by the one
// worker thread that owns the backend; moving it between threads before use
// is fine.
unsafe impl Send for UringBackend {}

impl UringBackend {
    pub(crate) fn new(
        queue_depth: usize,
        counters: Arc<Counters>,
    ) -> std::io::Result<UringBackend> {
        let entries = ((queue_depth + 2) * 2).next_power_of_two() as u32;
        let ring = IoUring::builder().build(entries)?;
        // Blocking on purpose: io_uring answers EAGAIN at once for reads
        // of O_NONBLOCK files instead of waiting for data.
        // SAFETY: plain syscall.
        let eventfd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if eventfd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Registered files save a descriptor lookup per read; kernels
        // without sparse tables (< 5.19) just read through plain fds.
        let files = ring
            .submitter()
            .register_files_sparse(FILE_SLOTS)
            .ok()
            .map(|()| FileTable {
                slots: HashMap::new(),
                owners: vec![None; FILE_SLOTS as usize],
                next: 0,
            });
        let mut b = UringBackend {
            ring,
            eventfd,
            wake_buf: Box::new(0),
            wake_armed: false,
            files,
            buffers: Vec::new(),
            counters,
            in_flight: 0,
            buffered: None,
            pool_size: queue_depth
                .clamp(1, 64)
                .min(std::thread::available_parallelism().map_or(4, |n| n.get())),
        };
        b.arm_wake();
        Ok(b)
    }

    fn arm_wake(&mut self) {
        let e = opcode::Read::new(
            types::Fd(self.eventfd),
            (&mut *self.wake_buf as *mut u64).cast(),
            8,
        )
        .build()
        .user_data(WAKE_TAG);
        // SAFETY: wake_buf lives as long as the ring (see Drop).
        unsafe { self.push_entry(&e) };
        self.wake_armed = true;
    }

    /// Pushes an entry, submitting to make room when the queue is full.
    unsafe fn push_entry(&mut self, e: &squeue::Entry) {
        loop {
            // SAFETY: the caller guarantees the entry's buffers.
            if unsafe { self.ring.submission().push(e) }.is_ok() {
                return;
            }
            let _ = self.ring.submit();
        }
    }

    fn fixed_slot(&mut self, fd: RawFd, key: u64) -> Option<u32> {
        let t = self.files.as_mut()?;
        if let Some(&s) = t.slots.get(&key) {
            return Some(s);
        }
        let slot = t.next;
        t.next = (t.next + 1) % FILE_SLOTS;
        // Replacing a slot is safe with reads in flight on it: the kernel
        // holds its own reference to the file until they finish.
        if self
            .ring
            .submitter()
            .register_files_update(slot, &[fd])
            .is_err()
        {
            return None;
        }
        let t = self.files.as_mut()?;
        if let Some(old) = t.owners[slot as usize].replace(key) {
            t.slots.remove(&old);
        }
        t.slots.insert(key, slot);
        Some(slot)
    }

    /// Submits what is queued in the ring and collects its completions,
    /// blocking for one (or a wake-up) when `wait` is set.
    fn reap_ring(&mut self, wait: bool, out: &mut Vec<(u64, RawResult)>) {
        let mut want = usize::from(wait);
        // Bounded: EINTR/EBUSY retries only while nothing has completed, and
        // each loop round either completes or backs off.
        for round in 0..10_000u32 {
            self.counters.enters.fetch_add(1, Relaxed);
            match self.ring.submit_and_wait(want) {
                Ok(_) => break,
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                        // Completion queue full or kernel short of memory:
                        // collect what is done before trying again.
                        if !self.ring.completion().is_empty() {
                            want = 0;
                        } else if round > 100 {
                            std::thread::sleep(std::time::Duration::from_micros(100));
                        }
                    }
                    _ => {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                        want = 0;
                    }
                },
            }
        }
        let mut rearm = false;
        for cqe in self.ring.completion() {
            let tag = cqe.user_data();
            if tag == WAKE_TAG {
                rearm = true;
                continue;
            }
            self.in_flight -= 1;
            let res = cqe.result();
            out.push((tag, if res < 0 { Err(-res) } else { Ok(res as usize) }));
        }
        if rearm {
            self.wake_armed = false;
            self.arm_wake();
        }
    }
}

impl Backend for UringBackend {
    unsafe fn push(&mut self, r: RawRead) {
        if r.align <= 1 {
            if self.buffered.is_none() {
                // Pool threads write the eventfd after each completion, so
                // a worker waiting in the ring sees them.
                self.buffered =
                    ThreadsBackend::with_notify(self.pool_size, Some(self.waker())).ok();
            }
            if let Some(pool) = self.buffered.as_mut() {
                // SAFETY: forwarded from our caller.
                unsafe { pool.push(r) };
                return;
            }
        }
        let (d, end) = (r.dest as usize, r.dest as usize + r.len as usize);
        let buf = self
            .buffers
            .iter()
            .position(|&(s, l)| d >= s && end <= s + l)
            .map(|i| i as u16);
        let slot = self.fixed_slot(r.fd, r.fd_key);
        if slot.is_some() {
            self.counters.fixed_file_reads.fetch_add(1, Relaxed);
        }
        if buf.is_some() {
            self.counters.fixed_buffer_reads.fetch_add(1, Relaxed);
        }
        let e = match (slot, buf) {
            (Some(s), Some(b)) => opcode::ReadFixed::new(types::Fixed(s), r.dest, r.len, b)
                .offset(r.offset)
                .build(),
            (None, Some(b)) => opcode::ReadFixed::new(types::Fd(r.fd), r.dest, r.len, b)
                .offset(r.offset)
                .build(),
            (Some(s), None) => opcode::Read::new(types::Fixed(s), r.dest, r.len)
                .offset(r.offset)
                .build(),
            (None, None) => opcode::Read::new(types::Fd(r.fd), r.dest, r.len)
                .offset(r.offset)
                .build(),
        }
        .user_data(r.tag);
        // SAFETY: the caller keeps fd and dest valid until the completion.
        unsafe { self.push_entry(&e) };
        self.in_flight += 1;
    }

    fn reap(&mut self, wait: bool, out: &mut Vec<(u64, RawResult)>) {
        let before = out.len();
        if let Some(pool) = self.buffered.as_mut() {
            pool.reap(false, out);
        }
        // Wait in the ring only if the pool had nothing; a pool read that
        // finishes later writes the eventfd and ends the wait.
        self.reap_ring(wait && out.len() == before, out);
        if let Some(pool) = self.buffered.as_mut() {
            pool.reap(false, out);
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight + self.buffered.as_ref().map_or(0, |p| p.in_flight())
    }

    fn set_buffers(&mut self, regions: &[(usize, usize)]) {
        // Re-registering needs no quiet ring on current kernels: reads in
        // flight keep their own reference to the old table.
        let _ = self.ring.submitter().unregister_buffers();
        self.buffers.clear();
        if regions.is_empty() || regions.len() > u16::MAX as usize {
            return;
        }
        let iov: Vec<libc::iovec> = regions
            .iter()
            .map(|&(s, l)| libc::iovec {
                iov_base: s as *mut libc::c_void,
                iov_len: l,
            })
            .collect();
        // SAFETY: the engine's caller promised (register_memory) that the
        // regions stay valid until unregistered; failure (memlock limit,
        // old kernel) just means plain reads.
        if unsafe { self.ring.submitter().register_buffers(&iov) }.is_ok() {
            self.buffers = regions.to_vec();
        }
    }

    fn waker(&self) -> Waker {
        // The eventfd outlives the waker's users: the engine joins the
        // worker (and drops the backend) only after the last submit.
        let fd = Arc::new(WakeFd(
            // SAFETY: dup of our own valid descriptor.
            unsafe { libc::fcntl(self.eventfd, libc::F_DUPFD_CLOEXEC, 0) },
        ));
        Arc::new(move || {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes from a valid u64 to an eventfd.
            unsafe { libc::write(fd.0, (&one as *const u64).cast(), 8) };
        })
    }
}

struct WakeFd(RawFd);
impl Drop for WakeFd {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: we own this duplicate.
            unsafe { libc::close(self.0) };
        }
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        // The armed eventfd read targets wake_buf: complete it before the
        // buffer is freed, so the kernel never writes to freed memory.
        if self.wake_armed {
            let one: u64 = 1;
            // SAFETY: as in the waker.
            unsafe { libc::write(self.eventfd, (&one as *const u64).cast(), 8) };
            for _ in 0..1000 {
                let _ = self.ring.submit_and_wait(1);
                let done = self.ring.completion().any(|c| c.user_data() == WAKE_TAG);
                if done {
                    break;
                }
            }
        }
        // SAFETY: we own the eventfd.
        unsafe { libc::close(self.eventfd) };
    }
}
