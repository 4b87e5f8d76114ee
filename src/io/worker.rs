//! One worker thread per physical device: it owns that device's backend
//! (one io_uring ring or one pread pool) and scheduler, keeps up to the
//! queue depth of reads in flight, continues short reads, retries
//! interrupted ones and completes every request exactly once.
//!
//! Because every read to a disk goes through its one worker, reads to two
//! partitions of the same disk are ordered together and each request is
//! issued whole (the interleaved-reads game I/O post-mortem), while different disks proceed in parallel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam::channel::Sender;

use super::backend::{errno, Backend, Counters, RawRead, RawResult, Waker, MAX_ATTEMPT};
use super::fault::mix;
use super::fill::FillPin;
use super::sched::{Queued, Scheduler};
use super::{IoError, ReadCompletion, ReadOp};

use super::file::MAX_RETRIES;

pub(crate) struct Inbox {
    pub(crate) counters: Arc<Counters>,
    pub(crate) regions: Arc<Regions>,
    state: Mutex<InboxState>,
    wake_pending: AtomicBool,
    /// Set by the worker just before it blocks while it could start more
    /// reads. When the device queue is full the worker wakes on the next
    /// completion anyway, so submitters skip the wake-up (and the worker
    /// an extra trip through the kernel).
    wants_work: AtomicBool,
    waker: Waker,
}

#[derive(Default)]
struct InboxState {
    ops: Vec<(ReadOp, Sender<ReadCompletion>, Option<FillPin>)>,
    shutdown: bool,
}

/// Memory the caller registered for fixed-buffer reads, with a generation
/// number the workers compare to pick up changes.
#[derive(Default)]
pub(crate) struct Regions {
    pub(crate) list: Mutex<Vec<(usize, usize)>>,
    pub(crate) generation: std::sync::atomic::AtomicU64,
}

impl Inbox {
    pub(crate) fn new(waker: Waker, counters: Arc<Counters>, regions: Arc<Regions>) -> Inbox {
        Inbox {
            counters,
            regions,
            state: Mutex::new(InboxState::default()),
            wake_pending: AtomicBool::new(false),
            wants_work: AtomicBool::new(true),
            waker,
        }
    }

    pub(crate) fn push(&self, ops: impl IntoIterator<Item = (ReadOp, Sender<ReadCompletion>)>) {
        self.push_pinned(ops.into_iter().map(|(op, done)| (op, done, None)));
    }

    /// Like `push`, each op with what must stay alive until it completes.
    pub(crate) fn push_pinned(
        &self,
        ops: impl IntoIterator<Item = (ReadOp, Sender<ReadCompletion>, Option<FillPin>)>,
    ) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ops
            .extend(ops);
        if self.wants_work.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    /// Wakes the worker whatever it is doing (configuration changes).
    pub(crate) fn poke(&self) {
        self.wake();
    }

    pub(crate) fn shutdown(&self) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .shutdown = true;
        self.wake();
    }

    fn wake(&self) {
        // One wake-up per batch: the worker clears the flag before it looks
        // at the inbox, so nothing queued after that is missed.
        if !self.wake_pending.swap(true, Ordering::AcqRel) {
            (self.waker)();
        }
    }
}

struct InFlight {
    q: Queued,
    done: usize,
    retries: u32,
    attempt_len: usize,
    attempt_direct: bool,
    /// The attempt copies out of the file's mapping instead of reading it.
    attempt_mapped: bool,
    /// Once a direct read into the destination came back EFAULT (memory
    /// the kernel cannot pin for DMA, such as a GPU's write-combined BAR
    /// mapping): the rest of the op is read into this buffer and copied.
    bounce: Option<super::buf::AlignedBuf>,
    /// The attempt read into `bounce`.
    attempt_bounced: bool,
}

pub(crate) fn run(
    inbox: Arc<Inbox>,
    mut backend: Box<dyn Backend>,
    queue_depth: usize,
    sort: bool,
) {
    let mut sched = Scheduler::new(sort);
    let mut slots: Vec<Option<InFlight>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut events: Vec<(u64, RawResult)> = Vec::new();
    let mut generation = 0u64;
    let c = inbox.counters.clone();
    loop {
        inbox.wake_pending.store(false, Ordering::Release);
        let g = inbox.regions.generation.load(Ordering::Acquire);
        if g != generation {
            generation = g;
            let list = inbox
                .regions
                .list
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            backend.set_buffers(&list);
        }
        let (new_ops, shutdown) = {
            let mut st = inbox.state.lock().unwrap_or_else(|e| e.into_inner());
            (std::mem::take(&mut st.ops), st.shutdown)
        };
        for (op, done, pin) in new_ops {
            match validate(&op) {
                Ok(true) => sched.push(op, done, pin),
                Ok(false) => complete(&op, &done, Ok(0)),
                Err(e) => complete(&op, &done, Err(e)),
            }
        }
        while backend.in_flight() < queue_depth {
            let Some(q) = sched.pop() else { break };
            let slot = free.pop().unwrap_or_else(|| {
                slots.push(None);
                slots.len() - 1
            });
            let f = InFlight {
                q,
                done: 0,
                retries: 0,
                attempt_len: 0,
                attempt_direct: false,
                attempt_mapped: false,
                bounce: None,
                attempt_bounced: false,
            };
            if let Some(f) = start(&mut *backend, slot, f) {
                slots[slot] = Some(f);
            } else {
                free.push(slot);
            }
        }
        if shutdown && sched.is_empty() && backend.in_flight() == 0 {
            return;
        }
        // Announce whether new work could start now, then look once more:
        // a submitter either sees the flag and wakes us, or we see its ops.
        let room = backend.in_flight() < queue_depth;
        inbox.wants_work.store(room, Ordering::SeqCst);
        let more = room
            && !inbox
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .ops
                .is_empty();
        backend.reap(!more, &mut events);
        for (tag, res) in events.drain(..) {
            let slot = tag as usize;
            let Some(f) = slots.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            if f.attempt_mapped && res.is_ok() {
                c.mapped_reads.fetch_add(1, Ordering::Relaxed);
            }
            let res = settle_mapped(&f, res);
            match res {
                Ok(n) => {
                    c.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    if n > 0 && n < f.attempt_len {
                        c.short_reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(errno::EINTR) | Err(errno::EAGAIN) => {
                    c.retries.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {}
            }
            c.reads.fetch_add(1, Ordering::Relaxed);
            if let Some(f) = finish_attempt(&mut *backend, slot, f, res, &c) {
                slots[slot] = Some(f);
            } else {
                free.push(slot);
            }
        }
    }
}

/// Ok(true): queue it; Ok(false): nothing to read (len 0).
fn validate(op: &ReadOp) -> Result<bool, IoError> {
    let invalid = |reason| IoError::InvalidRange {
        path: op.file.path().to_path_buf(),
        offset: op.offset,
        len: op.len,
        reason,
    };
    if op.len == 0 {
        return Ok(false);
    }
    if op.dest.is_null() {
        return Err(invalid("null destination"));
    }
    if op
        .offset
        .checked_add(op.len as u64)
        .is_none_or(|e| e > i64::MAX as u64)
    {
        return Err(invalid("the range ends past the largest file offset"));
    }
    Ok(true)
}

fn complete(op: &ReadOp, done: &Sender<ReadCompletion>, result: Result<usize, IoError>) {
    // A caller that dropped its receiver no longer wants the answer.
    let _ = done.send(ReadCompletion {
        user_data: op.user_data,
        result,
    });
}

/// Issues the next attempt of `f`; None when it completed instead.
fn start(backend: &mut dyn Backend, slot: usize, mut f: InFlight) -> Option<InFlight> {
    let op = &f.q.op;
    let file = &op.file;
    let off = op.offset + f.done as u64;
    let left = op.len - f.done;
    // SAFETY: done < len, and the caller promised dest..dest+len.
    let dest = unsafe { op.dest.add(f.done) };
    let a = file.inner.alignment;
    // A bounced op reads into its own aligned buffer, one attempt of at
    // most the buffer at a time.
    let bounce = f.bounce.as_mut().map(|b| b.as_mut_ptr());
    let direct = file.is_direct()
        && off.is_multiple_of(a as u64)
        && left.is_multiple_of(a)
        && (bounce.is_some() || (dest as usize).is_multiple_of(a));
    let fd = if direct {
        file.direct_fd()
    } else {
        match file.buffered_fd() {
            Ok(fd) => fd,
            Err(errno) => {
                let e = IoError::Read {
                    path: file.path().to_path_buf(),
                    offset: op.offset,
                    len: op.len,
                    done: f.done,
                    source: std::io::Error::from_raw_os_error(errno),
                };
                complete(op, &f.q.done, Err(e));
                return None;
            }
        }
    };
    let bounced = direct && bounce.is_some();
    let (dest, len) = match (bounced, &f.bounce) {
        (true, Some(b)) => (bounce.unwrap_or(dest), left.min(MAX_ATTEMPT).min(b.len())),
        _ => (dest, left.min(MAX_ATTEMPT)),
    };
    f.attempt_bounced = bounced;
    // A buffered file the runtime mapped is copied out of its mapping,
    // which is half the CPU time of `pread`'s copy (`stream_copy.rs`). Once
    // a read of the mapping faulted (a cut file, a failed disk read),
    // `pread` answers again (`settle_mapped`).
    let mapped = (!direct && !file.mapping_was_cut())
        .then(|| file.mapped(off, len))
        .flatten()
        .map_or(std::ptr::null(), <[u8]>::as_ptr);
    f.attempt_len = len;
    f.attempt_direct = direct;
    f.attempt_mapped = !mapped.is_null();
    let read = RawRead {
        fd,
        fd_key: file.id() * 2 + u64::from(!direct),
        offset: off,
        len: len as u32,
        align: if direct { a as u32 } else { 1 },
        dest,
        mapped,
        tag: slot as u64,
        bounced,
        ident: mix(op.user_data ^ mix(off ^ mix(left as u64 ^ mix(f.retries as u64)))),
    };
    // SAFETY: the op (and its IoFile, keeping fd open and the mapping
    // mapped) stays in the slot until this attempt's completion is reaped;
    // the caller of submit guaranteed dest stays valid until the request
    // completes.
    unsafe { backend.push(read) };
    Some(f)
}

/// A copy out of a mapping can read zeros that are not the file's bytes,
/// and nothing in the copy says so:
/// - past a cut (the file made shorter under the mapping), and on a page
///   the kernel failed to read from the disk, the SIGBUS handler maps a
///   page of zeros and marks the mapping (`mapping.rs`). Then the attempt
///   is redone, answered as EAGAIN (one of the bounded retries): the mark
///   makes `start` read with `pread`, which knows where the file ends and
///   reports a failed disk read as the error it is;
/// - inside the page that holds a cut, the kernel has zeroed the rest of
///   the page and no fault happens. So every mapped attempt also asks the
///   file's length afterwards and counts only the bytes the file still
///   has, as `pread` would have answered.
fn settle_mapped(f: &InFlight, res: RawResult) -> RawResult {
    let file = &f.q.op.file;
    match res {
        Ok(_) if f.attempt_mapped && file.mapping_was_cut() => Err(errno::EAGAIN),
        Ok(n) if f.attempt_mapped => {
            let off = f.q.op.offset + f.done as u64;
            match file.current_len() {
                Some(end) => Ok(n.min(end.saturating_sub(off).try_into().unwrap_or(usize::MAX))),
                None => Err(errno::EIO),
            }
        }
        res => res,
    }
}

/// Applies one attempt's result; Some when the request needs another.
fn finish_attempt(
    backend: &mut dyn Backend,
    slot: usize,
    mut f: InFlight,
    res: RawResult,
    counters: &Counters,
) -> Option<InFlight> {
    let op = &f.q.op;
    match res {
        Ok(0) => {
            // End of file: the bytes that exist are the answer.
            complete(op, &f.q.done, Ok(f.done));
            return None;
        }
        Ok(n) if f.attempt_bounced => {
            let n = n.min(f.attempt_len);
            if let Some(b) = &f.bounce {
                // SAFETY: the bounce buffer holds `n <= attempt_len <=
                // b.len()` bytes the kernel just wrote; the caller of
                // submit promised dest..dest+len, and done + n <= len.
                unsafe {
                    std::ptr::copy_nonoverlapping(b.as_ptr(), op.dest.add(f.done), n);
                }
            }
            f.done += n;
            if f.done >= op.len {
                complete(op, &f.q.done, Ok(op.len));
                return None;
            }
        }
        Ok(n) => {
            f.done += n.min(f.attempt_len);
            if f.done >= op.len {
                complete(op, &f.q.done, Ok(op.len));
                return None;
            }
        }
        Err(errno::EINTR) | Err(errno::EAGAIN) | Err(errno::EINVAL) if f.retries < MAX_RETRIES => {
            if res == Err(errno::EINVAL) {
                if !f.attempt_direct {
                    return fail(f, errno::EINVAL);
                }
                // The filesystem took O_DIRECT at open but refuses the
                // read: continue through the page cache.
                op.file.refuse_direct();
            }
            f.retries += 1;
        }
        Err(errno::EINTR) | Err(errno::EAGAIN) => {
            let e = IoError::RetriesExhausted {
                path: op.file.path().to_path_buf(),
                offset: op.offset,
                len: op.len,
                attempts: f.retries + 1,
            };
            complete(op, &f.q.done, Err(e));
            return None;
        }
        Err(errno::EFAULT) if f.attempt_direct && f.bounce.is_none() => {
            // The kernel could not pin the destination for DMA: read the
            // rest through a bounce buffer. Counted, and warned of once.
            let len = (op.len - f.done).min(MAX_ATTEMPT);
            f.bounce = Some(super::buf::AlignedBuf::with_alignment(
                len,
                op.file.inner.alignment.max(super::buf::DEFAULT_BUF_ALIGN),
            ));
            counters.bounced_reads.fetch_add(1, Ordering::Relaxed);
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                log::warn!(
                    "a direct read into {:?} (its destination) failed with EFAULT: the kernel cannot pin that memory for DMA (a GPU's write-combined mapping?); such reads go through a bounce buffer and one more copy",
                    op.file.path()
                )
            });
        }
        Err(errno) => return fail(f, errno),
    }
    start(backend, slot, f)
}

fn fail(f: InFlight, errno: i32) -> Option<InFlight> {
    let op = &f.q.op;
    let e = IoError::Read {
        path: op.file.path().to_path_buf(),
        offset: op.offset,
        len: op.len,
        done: f.done,
        source: std::io::Error::from_raw_os_error(errno),
    };
    complete(op, &f.q.done, Err(e));
    None
}

#[allow(dead_code)]
fn _assert_send() {
    fn s<T: Send>() {}
    s::<Queued>();
}
