//! Status arrays: per-entry completion results, DirectStorage style.

use std::sync::{Arc, Condvar, Mutex};

use super::RequestFailure;

/// What one status entry holds.
#[derive(Clone, Debug)]
pub enum StatusEntry {
    /// Some request before the entry has not finished yet (or the entry was
    /// never enqueued).
    Pending,
    /// Every request between this entry and the previous one on its queue
    /// finished without failing (cancelled requests are not failures).
    Ok,
    /// The first failure, in enqueue order, among those requests.
    Failed(Arc<RequestFailure>),
}

impl StatusEntry {
    /// Whether the entry is no longer pending.
    pub fn is_complete(&self) -> bool {
        !matches!(self, StatusEntry::Pending)
    }
}

struct Inner {
    entries: Mutex<Vec<StatusEntry>>,
    cond: Condvar,
}

/// An array of status entries. `Queue::enqueue_status(&array, i)` makes entry
/// `i` pending until every request enqueued before it on that queue has
/// finished; it then holds [`StatusEntry::Ok`] or the first failure among the
/// requests enqueued between it and the previous status entry of that queue
/// (DirectStorage's `IDStorageStatusArray` semantics).
#[derive(Clone)]
pub struct StatusArray {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StatusArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusArray")
            .field("len", &self.len())
            .finish()
    }
}

impl StatusArray {
    /// An array of `len` entries, all pending.
    pub fn new(len: usize) -> StatusArray {
        StatusArray {
            inner: Arc::new(Inner {
                entries: Mutex::new(vec![StatusEntry::Pending; len]),
                cond: Condvar::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<StatusEntry>> {
        self.inner.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the array has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry at `index` (`Pending` for an index out of range).
    pub fn get(&self, index: usize) -> StatusEntry {
        self.lock()
            .get(index)
            .cloned()
            .unwrap_or(StatusEntry::Pending)
    }

    /// Whether entry `index` is complete.
    pub fn is_complete(&self, index: usize) -> bool {
        self.get(index).is_complete()
    }

    /// Blocks until entry `index` is complete and returns it.
    pub fn wait(&self, index: usize) -> StatusEntry {
        let mut e = self.lock();
        loop {
            match e.get(index) {
                Some(s) if s.is_complete() => return s.clone(),
                None => return StatusEntry::Pending,
                _ => e = self.inner.cond.wait(e).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }

    /// Marks entry `index` pending again (done by `enqueue_status`).
    pub(crate) fn reset(&self, index: usize) {
        if let Some(e) = self.lock().get_mut(index) {
            *e = StatusEntry::Pending;
        }
    }

    pub(crate) fn set(&self, index: usize, entry: StatusEntry) {
        if let Some(e) = self.lock().get_mut(index) {
            *e = entry;
        }
        self.inner.cond.notify_all();
    }
}
