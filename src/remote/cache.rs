//! The replica: which of its blocks are present, who waits for which, and
//! the byte budget that least-recently-used eviction keeps.
//!
//! A block is `Missing`, `Busy` (being fetched, or checked after an earlier
//! process left it) or `Present`. Reads pin the blocks they cover from the
//! moment they ask until they complete; eviction passes pinned blocks by.
//! Waiters are resolved outside the lock: resolving may run the engine's
//! callback, which queues a read or drops a pin (which takes the lock).

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::io::{FillDone, IoError};

use super::store::ObjectInfo;
use super::RemoteError;

/// A block's stored bytes in the object (and in the replica).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub(crate) offset: u64,
    pub(crate) len: u32,
    pub(crate) crc: u32,
}

impl Span {
    pub(crate) fn end(&self) -> u64 {
        self.offset + self.len as u64
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Missing,
    Busy,
    /// `checked`: its bytes matched its crc32c in this process.
    Present {
        checked: bool,
    },
}

#[derive(Clone, Copy)]
struct Slot {
    state: State,
    pins: u32,
    /// Its key in `lru` while present.
    tick: u64,
}

struct CacheState {
    slots: Vec<Slot>,
    /// Present blocks by last use.
    lru: BTreeMap<u64, u32>,
    next_tick: u64,
    present_bytes: u64,
    waiters: HashMap<u32, Vec<Arc<Pending>>>,
    /// Blocks made present since the index was last written.
    unsaved: usize,
}

/// Counters of a remote pack's cache and fetches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Ranged GETs that returned the bytes asked for.
    pub gets: u64,
    /// GETs that failed after the client's retries (or timed out).
    pub failed_gets: u64,
    /// Bytes those GETs returned (including gaps between blocks).
    pub fetched_bytes: u64,
    /// Blocks fetched and written into the replica.
    pub blocks_fetched: u64,
    /// Blocks reads found present.
    pub blocks_hit: u64,
    /// Blocks evicted to keep the byte budget.
    pub blocks_evicted: u64,
    /// Blocks whose bytes did not match their crc32c (from the server, or
    /// left in the replica by an earlier process), dropped.
    pub blocks_corrupt: u64,
    /// Bytes of blocks present in the replica now.
    pub cached_bytes: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) gets: AtomicU64,
    pub(crate) failed_gets: AtomicU64,
    pub(crate) fetched_bytes: AtomicU64,
    pub(crate) blocks_fetched: AtomicU64,
    pub(crate) blocks_hit: AtomicU64,
    pub(crate) blocks_evicted: AtomicU64,
    pub(crate) blocks_corrupt: AtomicU64,
}

pub(crate) struct Cache {
    pub(crate) url: String,
    pub(crate) path: PathBuf,
    index_path: PathBuf,
    file: File,
    /// The replica opened for direct writes, where its filesystem allows:
    /// fetched bytes then reach the disk without passing the page cache,
    /// so a direct read of them need not wait for their writeback.
    direct: Option<File>,
    /// Held while a 4 KiB unit shared with a neighbouring block is read,
    /// patched and written back (`write_stretch`).
    edges: Mutex<()>,
    /// Held (with an exclusive `flock`) while the cache is open.
    _lock: File,
    pub(crate) spans: Vec<Span>,
    budget: u64,
    info: ObjectInfo,
    st: Mutex<CacheState>,
    pub(crate) counters: Counters,
}

/// How a read's blocks stand when it asks for them.
pub(crate) enum Claim {
    /// All present and checked: read now, holding the pin.
    Ready(Pin),
    /// Some are missing or unchecked: these to check, these to fetch (both
    /// now `Busy`); the read's answer comes when all its blocks are settled.
    Wait { check: Vec<u32>, fetch: Vec<u32> },
}

/// The unit direct writes of the replica are aligned to (the largest
/// logical block size in use).
const WRITE_ALIGN: u64 = 4096;

const INDEX_MAGIC: &[u8; 8] = b"GSPKCIDX";
const INDEX_VERSION: u32 = 1;
/// Blocks made present between two writes of the index.
const SAVE_EVERY: usize = 1024;

impl Cache {
    /// Opens (or creates) the replica of `url` in `dir`, reusing what an
    /// earlier process left if its index names the same object version, and
    /// writes the pack's header and table of contents (`meta`) into it.
    pub(crate) fn open(
        dir: &Path,
        url: &str,
        info: ObjectInfo,
        spans: Vec<Span>,
        budget: u64,
        meta: &[(u64, Vec<u8>)],
    ) -> Result<Cache, RemoteError> {
        let stem = file_stem(url);
        let path = replica_path(dir, url);
        let fail = |path: &Path, reason: String| RemoteError::Cache {
            url: url.to_string(),
            path: path.to_path_buf(),
            reason,
        };
        std::fs::create_dir_all(dir).map_err(|e| fail(dir, format!("cannot create: {e}")))?;
        let lock_path = dir.join(format!("{stem}.lock"));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| fail(&lock_path, format!("cannot open: {e}")))?;
        try_lock(&lock).map_err(|e| fail(&lock_path, e))?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| fail(&path, format!("cannot open: {e}")))?;
        let direct = {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .ok()
        };
        let index_path = dir.join(format!("{stem}.index"));
        let kept = load_index(&index_path, url, &info, spans.len());
        let mut slots = vec![
            Slot {
                state: State::Missing,
                pins: 0,
                tick: 0,
            };
            spans.len()
        ];
        if kept.is_none() {
            // Another version of the object, or no index: start empty.
            file.set_len(0)
                .map_err(|e| fail(&path, format!("cannot truncate: {e}")))?;
        }
        file.set_len(info.size)
            .map_err(|e| fail(&path, format!("cannot size to {} bytes: {e}", info.size)))?;
        for (off, bytes) in meta {
            file.write_all_at(bytes, *off)
                .map_err(|e| fail(&path, format!("cannot write at {off}: {e}")))?;
        }
        let mut st = CacheState {
            slots: Vec::new(),
            lru: BTreeMap::new(),
            next_tick: 0,
            present_bytes: 0,
            waiters: HashMap::new(),
            unsaved: 0,
        };
        if let Some(bits) = kept {
            for (b, slot) in slots.iter_mut().enumerate() {
                if bits[b / 8] & (1 << (b % 8)) != 0 {
                    slot.state = State::Present { checked: false };
                    slot.tick = st.next_tick;
                    st.lru.insert(st.next_tick, b as u32);
                    st.next_tick += 1;
                    st.present_bytes += spans[b].len as u64;
                }
            }
        }
        st.slots = slots;
        let cache = Cache {
            url: url.to_string(),
            path,
            index_path,
            file,
            direct,
            edges: Mutex::new(()),
            _lock: lock,
            spans,
            budget,
            info,
            st: Mutex::new(st),
            counters: Counters::default(),
        };
        // A smaller budget than last time: shed the excess now.
        cache.make_room(0);
        Ok(cache)
    }

    fn lock(&self) -> MutexGuard<'_, CacheState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The blocks whose stored bytes lie wholly inside `len` bytes at
    /// `offset`. The runtime reads whole blocks, with the range widened to
    /// the direct-I/O alignment, so a block the range cuts at either end is
    /// a neighbour the read does not need: fetching it would cost a GET
    /// and, with the server gone, fail a read whose own blocks are here.
    pub(crate) fn within(&self, offset: u64, len: usize) -> std::ops::Range<u32> {
        let end = offset.saturating_add(len as u64);
        // Blocks do not overlap, so their ends ascend with their offsets.
        let first = self.spans.partition_point(|s| s.offset < offset);
        let last = self.spans.partition_point(|s| s.end() <= end);
        first as u32..last.max(first) as u32
    }

    /// Pins `blocks` for a read and says whether it can go now. When it
    /// cannot, `done` is kept and answered once every block is settled.
    pub(crate) fn claim(
        self: &Arc<Self>,
        blocks: std::ops::Range<u32>,
        offset: u64,
        len: usize,
        done: FillDone,
    ) -> (Claim, Option<FillDone>) {
        let mut st = self.lock();
        let mut waits = Vec::new();
        let (mut check, mut fetch) = (Vec::new(), Vec::new());
        let mut hits = 0;
        for b in blocks.clone() {
            let i = b as usize;
            st.slots[i].pins += 1;
            let (state, old) = (st.slots[i].state, st.slots[i].tick);
            match state {
                State::Present { checked: true } => {
                    hits += 1;
                    let t = st.next_tick;
                    st.next_tick += 1;
                    st.slots[i].tick = t;
                    st.lru.remove(&old);
                    st.lru.insert(t, b);
                }
                State::Present { checked: false } => {
                    // Out of the budget's books until the check settles it.
                    st.lru.remove(&old);
                    st.present_bytes -= self.spans[i].len as u64;
                    st.slots[i].state = State::Busy;
                    check.push(b);
                    waits.push(b);
                }
                State::Missing => {
                    st.slots[i].state = State::Busy;
                    fetch.push(b);
                    waits.push(b);
                }
                State::Busy => waits.push(b),
            }
        }
        self.counters.blocks_hit.fetch_add(hits, Relaxed);
        let pin = Pin {
            cache: self.clone(),
            blocks,
        };
        if waits.is_empty() {
            return (Claim::Ready(pin), Some(done));
        }
        let pending = Arc::new(Pending {
            url: self.url.clone(),
            path: self.path.clone(),
            offset,
            len,
            inner: Mutex::new(PendingInner {
                remaining: waits.len(),
                error: None,
                done: Some(done),
                pin: Some(pin),
            }),
        });
        for b in waits {
            st.waiters.entry(b).or_default().push(pending.clone());
        }
        (Claim::Wait { check, fetch }, None)
    }

    /// Checks blocks an earlier process left against their crc32c: those
    /// that match are settled present, the others returned (still `Busy`)
    /// to be fetched again.
    pub(crate) fn check(&self, blocks: &[u32]) -> Vec<u32> {
        let mut bad = Vec::new();
        let mut buf = Vec::new();
        for &b in blocks {
            let s = self.spans[b as usize];
            buf.resize(s.len as usize, 0);
            let ok = self.file.read_exact_at(&mut buf, s.offset).is_ok()
                && crc32c::crc32c(&buf) == s.crc;
            if ok {
                self.settle(b, Ok(()));
            } else {
                self.counters.blocks_corrupt.fetch_add(1, Relaxed);
                self.punch(&s);
                bad.push(b);
            }
        }
        bad
    }

    /// Evicts least recently used, unpinned blocks until `incoming` more
    /// bytes fit the budget, or nothing more can go.
    pub(crate) fn make_room(&self, incoming: u64) {
        let mut st = self.lock();
        let mut victims = Vec::new();
        let mut over = (st.present_bytes + incoming).saturating_sub(self.budget);
        for (&tick, &b) in st.lru.iter() {
            if over == 0 {
                break;
            }
            if st.slots[b as usize].pins == 0 {
                victims.push((tick, b));
                over = over.saturating_sub(self.spans[b as usize].len as u64);
            }
        }
        for &(tick, b) in &victims {
            st.lru.remove(&tick);
            st.slots[b as usize].state = State::Missing;
            st.present_bytes -= self.spans[b as usize].len as u64;
            // Punched under the lock: a fetch of the same block, started
            // once it is seen missing, must not be zeroed by this.
            self.punch(&self.spans[b as usize]);
        }
        self.counters
            .blocks_evicted
            .fetch_add(victims.len() as u64, Relaxed);
    }

    /// Writes the blocks `good` (checked, ascending) of a GET whose bytes
    /// (`bytes`) start at `start` into the replica, and nothing else: the
    /// bytes between and around them are unchecked, and may belong to
    /// blocks other reads are reading. Each stretch of adjacent blocks is
    /// written with direct I/O over the whole `WRITE_ALIGN` units inside
    /// it, so reading it back does not wait for writeback, and through the
    /// page cache at its two unaligned ends.
    pub(crate) fn write_blocks(
        &self,
        start: u64,
        bytes: &[u8],
        good: &[u32],
    ) -> Result<(), String> {
        let mut i = 0;
        while i < good.len() {
            let mut j = i + 1;
            while j < good.len()
                && self.spans[good[j] as usize].offset == self.spans[good[j - 1] as usize].end()
            {
                j += 1;
            }
            let (s, e) = (
                self.spans[good[i] as usize].offset,
                self.spans[good[j - 1] as usize].end(),
            );
            self.write_stretch(s, &bytes[(s - start) as usize..(e - start) as usize])
                .map_err(|err| {
                    format!(
                        "writing bytes {s}..{e} into the cache {}: {err}",
                        self.path.display()
                    )
                })?;
            i = j;
        }
        Ok(())
    }

    fn write_stretch(&self, s: u64, bytes: &[u8]) -> std::io::Result<()> {
        let Some(direct) = &self.direct else {
            return self.file.write_all_at(bytes, s);
        };
        let e = s + bytes.len() as u64;
        let a = WRITE_ALIGN;
        let (first, end) = (s / a * a, e.div_ceil(a) * a);
        // Whole units of the stretch are written as they are; a unit the
        // stretch shares with a neighbour (at most one at each end) is
        // read, patched and written back, under `edges`, so two stretches
        // patching one unit never lose each other's bytes. The neighbour's
        // bytes in it are written back unchanged: a read holding it sees
        // the same bytes, and an evicted one's do not matter.
        let head_partial = s > first;
        let tail_partial = e < end;
        let _edges = (head_partial || tail_partial)
            .then(|| self.edges.lock().unwrap_or_else(|p| p.into_inner()));
        let mut buf = crate::io::AlignedBuf::with_alignment((end - first) as usize, a as usize);
        let mut read_unit = |at: u64| -> std::io::Result<()> {
            let unit = &mut buf[(at - first) as usize..(at - first + a) as usize];
            // Past the object's end the unit reads short: the rest is zero.
            let n = direct.read_at(unit, at)?;
            unit[n..].fill(0);
            Ok(())
        };
        let mut edges_read = Ok(());
        if head_partial {
            edges_read = read_unit(first);
        }
        if edges_read.is_ok() && tail_partial && !(head_partial && end - a == first) {
            edges_read = read_unit(end - a);
        }
        match edges_read {
            Ok(()) => {}
            // EINVAL: the filesystem took O_DIRECT at open but not for
            // this read; the stretch goes through the page cache instead.
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
                return self.file.write_all_at(bytes, s);
            }
            Err(err) => return Err(err),
        }
        buf[(s - first) as usize..(e - first) as usize].copy_from_slice(bytes);
        // A unit running past the object's end is written through the
        // page cache, only up to the stretch's end: a direct write of it
        // would grow the replica past the object's length.
        let direct_end = if end > self.info.size { end - a } else { end };
        if direct_end > first {
            match direct.write_all_at(&buf[..(direct_end - first) as usize], first) {
                Ok(()) => {}
                // EINVAL: the filesystem took O_DIRECT at open but not for
                // this write; through the page cache instead.
                Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
                    return self.file.write_all_at(bytes, s);
                }
                Err(err) => return Err(err),
            }
        }
        if direct_end < end {
            let from = direct_end.max(s);
            self.file
                .write_all_at(&bytes[(from - s) as usize..], from)?;
        }
        Ok(())
    }

    /// The GET that fetches `first..=last`'s bytes.
    pub(crate) fn get_range(&self, first: u32, last: u32) -> std::ops::Range<u64> {
        self.spans[first as usize].offset..self.spans[last as usize].end()
    }

    /// Settles a `Busy` block: present (and counted against the budget) or
    /// missing again with `Err`; answers the reads that waited for it.
    pub(crate) fn settle(&self, b: u32, result: Result<(), String>) {
        let mut st = self.lock();
        if st.slots[b as usize].state != State::Busy {
            // Settled already (a guard failing what a finished task had
            // settled): once is all a block gets.
            return;
        }
        let len = self.spans[b as usize].len as u64;
        let waiters = st.waiters.remove(&b).unwrap_or_default();
        let save = if result.is_ok() {
            let t = st.next_tick;
            st.next_tick += 1;
            let slot = &mut st.slots[b as usize];
            slot.state = State::Present { checked: true };
            slot.tick = t;
            st.lru.insert(t, b);
            st.present_bytes += len;
            st.unsaved += 1;
            st.unsaved >= SAVE_EVERY
        } else {
            st.slots[b as usize].state = State::Missing;
            false
        };
        drop(st);
        let err = result.err();
        for w in waiters {
            w.resolve(err.as_deref());
        }
        if save {
            self.save();
        }
    }

    fn punch(&self, s: &Span) {
        // SAFETY: fallocate on our own open descriptor; the range is inside
        // the file (spans lie within the object's size).
        let r = unsafe {
            libc::fallocate(
                std::os::fd::AsRawFd::as_raw_fd(&self.file),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                s.offset as libc::off_t,
                s.len as libc::off_t,
            )
        };
        if r != 0 {
            // A filesystem without hole punching: overwrite with zeros so
            // an evicted block never reads as valid, at the cost of space.
            let _ = self.file.write_all_at(&vec![0; s.len as usize], s.offset);
        }
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> RemoteStats {
        let c = &self.counters;
        RemoteStats {
            gets: c.gets.load(Relaxed),
            failed_gets: c.failed_gets.load(Relaxed),
            fetched_bytes: c.fetched_bytes.load(Relaxed),
            blocks_fetched: c.blocks_fetched.load(Relaxed),
            blocks_hit: c.blocks_hit.load(Relaxed),
            blocks_evicted: c.blocks_evicted.load(Relaxed),
            blocks_corrupt: c.blocks_corrupt.load(Relaxed),
            cached_bytes: self.lock().present_bytes,
        }
    }

    /// Writes which blocks are present (a bitmap after the object's
    /// identity, with a crc32c), through a temporary file and a rename.
    pub(crate) fn save(&self) {
        let mut st = self.lock();
        st.unsaved = 0;
        let mut bits = vec![0u8; self.spans.len().div_ceil(8)];
        for (b, slot) in st.slots.iter().enumerate() {
            if matches!(slot.state, State::Present { .. }) {
                bits[b / 8] |= 1 << (b % 8);
            }
        }
        drop(st);
        let mut out = Vec::with_capacity(64 + bits.len());
        out.extend_from_slice(INDEX_MAGIC);
        out.extend_from_slice(&INDEX_VERSION.to_le_bytes());
        out.extend_from_slice(&self.info.size.to_le_bytes());
        out.extend_from_slice(&(self.spans.len() as u32).to_le_bytes());
        for s in [self.url.as_bytes(), self.info.version.as_bytes()] {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s);
        }
        out.extend_from_slice(&bits);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        let tmp = self.index_path.with_extension("index.tmp");
        // The index is a hint (blocks it names are checked on first use),
        // so failing to write it costs refetches, never wrong bytes.
        let written = std::fs::write(&tmp, &out).and_then(|_| self.file.sync_data());
        if written.is_ok() {
            let _ = std::fs::rename(&tmp, &self.index_path);
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.save();
    }
}

/// Where the replica of `url` lives in `dir`.
pub(crate) fn replica_path(dir: &Path, url: &str) -> PathBuf {
    dir.join(format!("{}.replica", file_stem(url)))
}

/// The replica's file name: the key's last part (readable) and a hash of
/// the whole URL (unique).
fn file_stem(url: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &c in url.as_bytes() {
        h = (h ^ c as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let last: String = url
        .rsplit('/')
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    format!("{last}-{h:016x}")
}

/// The bitmap an index holds, if it is intact and names this object,
/// version and block count.
fn load_index(path: &Path, url: &str, info: &ObjectInfo, blocks: usize) -> Option<Vec<u8>> {
    let b = std::fs::read(path).ok()?;
    let (body, crc) = b.split_at_checked(b.len().checked_sub(4)?)?;
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().ok()?) {
        return None;
    }
    let mut r = body;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (h, t) = r.split_at_checked(n)?;
        r = t;
        Some(h)
    };
    if take(8)? != INDEX_MAGIC
        || u32::from_le_bytes(take(4)?.try_into().ok()?) != INDEX_VERSION
        || u64::from_le_bytes(take(8)?.try_into().ok()?) != info.size
        || u32::from_le_bytes(take(4)?.try_into().ok()?) as usize != blocks
    {
        return None;
    }
    for want in [url.as_bytes(), info.version.as_bytes()] {
        let n = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
        if take(n)? != want {
            return None;
        }
    }
    let bits = take(blocks.div_ceil(8))?.to_vec();
    r.is_empty().then_some(bits)
}

fn try_lock(f: &File) -> Result<(), String> {
    // SAFETY: flock on our own open descriptor.
    let r = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(f),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(format!(
            "in use by another open of the same pack ({})",
            std::io::Error::last_os_error()
        ))
    }
}

/// The blocks a read covers stay in the replica while this lives.
pub(crate) struct Pin {
    cache: Arc<Cache>,
    blocks: std::ops::Range<u32>,
}

impl Drop for Pin {
    fn drop(&mut self) {
        let mut st = self.cache.lock();
        for b in self.blocks.clone() {
            st.slots[b as usize].pins -= 1;
        }
        // Blocks kept past the budget only because reads held them go now.
        let over = st.present_bytes > self.cache.budget;
        drop(st);
        if over {
            self.cache.make_room(0);
        }
    }
}

/// A read waiting for some of its blocks.
pub(crate) struct Pending {
    url: String,
    path: PathBuf,
    offset: u64,
    len: usize,
    inner: Mutex<PendingInner>,
}

struct PendingInner {
    remaining: usize,
    error: Option<String>,
    done: Option<FillDone>,
    pin: Option<Pin>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Dropped unanswered only when something between a fetch and its
        // waiters panicked: the read still gets its one answer.
        let p = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = p.done.take() {
            drop(p.pin.take());
            done(Err(IoError::Remote {
                url: self.url.clone(),
                path: self.path.clone(),
                offset: self.offset,
                len: self.len,
                reason: "the fetch of its blocks was abandoned".into(),
            }));
        }
    }
}

impl Pending {
    /// One of its blocks settled (`err` when it failed); the last one
    /// answers the read.
    fn resolve(&self, err: Option<&str>) {
        let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(e), None) = (err, &p.error) {
            p.error = Some(e.to_string());
        }
        p.remaining -= 1;
        if p.remaining > 0 {
            return;
        }
        let (done, pin, error) = (p.done.take(), p.pin.take(), p.error.take());
        drop(p);
        let Some(done) = done else { return };
        match (error, pin) {
            (None, Some(pin)) => done(Ok(Box::new(pin))),
            (error, pin) => {
                drop(pin);
                done(Err(IoError::Remote {
                    url: self.url.clone(),
                    path: self.path.clone(),
                    offset: self.offset,
                    len: self.len,
                    reason: error.unwrap_or_else(|| "no pin".into()),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn info(size: u64) -> ObjectInfo {
        ObjectInfo {
            size,
            version: "v1".into(),
        }
    }

    /// Blocks of 10,000 bytes back to back from 8192, in a 64 KiB object.
    fn spans() -> Vec<Span> {
        (0..5)
            .map(|i| Span {
                offset: 8192 + i * 10_000,
                len: 10_000,
                crc: 0,
            })
            .collect()
    }

    fn open(dir: &Path, budget: u64) -> Arc<Cache> {
        Arc::new(Cache::open(dir, "s3://b/k.gspk", info(65536), spans(), budget, &[]).unwrap())
    }

    fn noop_done() -> FillDone {
        Box::new(|_| {})
    }

    /// Claims `blocks` and settles every one fetched, as a fetch would.
    fn fetch(c: &Arc<Cache>, blocks: std::ops::Range<u32>) {
        let (claim, _) = c.claim(blocks, 0, 0, noop_done());
        if let Claim::Wait { fetch, check } = claim {
            for b in fetch.into_iter().chain(check) {
                c.settle(b, Ok(()));
            }
        }
    }

    #[test]
    fn a_read_needs_the_blocks_wholly_inside_its_range() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path(), 1 << 20);
        // Aligned out from block 1 alone: cuts blocks 0 and 2.
        assert_eq!(c.within(16384, 12288), 1..2);
        assert_eq!(c.within(8192, 20000), 0..2);
        assert_eq!(c.within(0, 65536), 0..5);
        assert!(c.within(9000, 100).is_empty());
        assert!(c.within(60000, 5536).is_empty());
        assert_eq!(c.get_range(1, 2), 18192..38192);
    }

    #[test]
    fn the_index_survives_a_reopen_and_a_damaged_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path(), 1 << 20);
        fetch(&c, 1..3);
        assert_eq!(c.stats().cached_bytes, 20_000);
        drop(c);
        let c = open(dir.path(), 1 << 20);
        assert_eq!(c.stats().cached_bytes, 20_000);
        // Present but unchecked: the first read checks them.
        let (claim, _) = c.claim(0..5, 0, 0, noop_done());
        match claim {
            Claim::Wait { check, fetch } => {
                assert_eq!(check, vec![1, 2]);
                assert_eq!(fetch, vec![0, 3, 4]);
                for b in fetch {
                    c.settle(b, Err("not fetched".into()));
                }
                assert!(c.check(&check).len() == 2, "zeros do not match crc 0");
                for b in check {
                    c.settle(b, Err("not fetched".into()));
                }
            }
            Claim::Ready(_) => panic!("nothing was checked yet"),
        }
        drop(c);
        let index = dir.path().read_dir().unwrap().find_map(|e| {
            let p = e.unwrap().path();
            (p.extension().is_some_and(|x| x == "index")).then_some(p)
        });
        let index = index.expect("an index was written");
        let mut b = std::fs::read(&index).unwrap();
        let n = b.len();
        b[n / 2] ^= 1;
        std::fs::write(&index, b).unwrap();
        let c = open(dir.path(), 1 << 20);
        assert_eq!(
            c.stats().cached_bytes,
            0,
            "a damaged index empties the cache"
        );
    }

    #[test]
    fn eviction_keeps_the_budget_and_passes_pinned_blocks_by() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path(), 25_000);
        fetch(&c, 0..2);
        // Block 0 is the oldest, but a read holds it.
        let (claim, done) = c.claim(0..1, 0, 0, noop_done());
        let Claim::Ready(pin) = claim else {
            panic!("block 0 is present")
        };
        drop(done);
        c.make_room(10_000);
        let s = c.stats();
        assert_eq!(s.blocks_evicted, 1, "{s:?}");
        assert_eq!(s.cached_bytes, 10_000, "block 1 went, block 0 stayed");
        let (claim, _) = c.claim(1..2, 0, 0, noop_done());
        assert!(matches!(claim, Claim::Wait { .. }), "block 1 is missing");
        drop(claim);
        drop(pin);
    }

    #[test]
    fn a_waiting_read_is_answered_once_when_its_last_block_settles() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path(), 1 << 20);
        let calls = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let (k, f) = (calls.clone(), failed.clone());
        let done: FillDone = Box::new(move |r| {
            k.fetch_add(1, Relaxed);
            if r.is_err() {
                f.fetch_add(1, Relaxed);
            }
        });
        let (claim, _) = c.claim(0..3, 4096, 40_000, done);
        let Claim::Wait { fetch, .. } = claim else {
            panic!("nothing is present")
        };
        c.settle(fetch[0], Ok(()));
        c.settle(fetch[1], Err("GET bytes 0..1: refused".into()));
        assert_eq!(calls.load(Relaxed), 0);
        c.settle(fetch[2], Ok(()));
        assert_eq!((calls.load(Relaxed), failed.load(Relaxed)), (1, 1));
        // The failed block is missing again; the others are present.
        let (claim, _) = c.claim(0..3, 0, 0, noop_done());
        match claim {
            Claim::Wait { fetch, .. } => assert_eq!(fetch, vec![1]),
            Claim::Ready(_) => panic!("block 1 failed"),
        }
    }
}
