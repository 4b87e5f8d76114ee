//! The per-device request scheduler: physical order within a priority
//! class, priority classes by an aging rule that cannot starve anyone.
//!
//! Policy (documented in docs/io.md):
//! - A request's score is `rank * AGE_STEP + waited`, where rank is 0 (Low)
//!   to 3 (Realtime) and `waited` counts dispatches since it was queued.
//!   The class whose oldest request scores highest goes next (ties go to
//!   the higher class). So a fresh Realtime request beats a fresh Low one,
//!   but a Low request that has watched `3 * AGE_STEP` dispatches go by
//!   outranks any newcomer: every request is dispatched within a bounded
//!   number of dispatches after everything queued before it.
//! - Inside the chosen class the next request in physical order after the
//!   last dispatched position is taken (a one-way elevator, C-SCAN, which
//!   wraps to the lowest position), unless the class's oldest request has
//!   waited `AGE_STEP` dispatches, which then goes first.
//! - With sorting off (the sweep's random pattern) a class is FIFO.

use std::collections::BTreeMap;

use crossbeam::channel::Sender;

use super::file::PhysKey;
use super::fill::FillPin;
use super::{Priority, ReadCompletion, ReadOp};

/// Dispatches after which a waiting request gains one priority class (see
/// the scheduling policy in docs/io.md).
pub const AGE_STEP: u64 = 64;

pub(crate) struct Queued {
    pub op: ReadOp,
    pub done: Sender<ReadCompletion>,
    /// Held until the read completes (the request is dropped after its
    /// completion is sent): a cache's hold on the bytes it just fetched.
    pub _pin: Option<FillPin>,
    enq_at: u64,
}

pub(crate) struct Scheduler {
    classes: [BTreeMap<(PhysKey, u64), Queued>; 4],
    oldest: [BTreeMap<u64, PhysKey>; 4],
    head: PhysKey,
    dispatched: u64,
    seq: u64,
    sort: bool,
    len: usize,
}

fn rank(p: Priority) -> usize {
    match p {
        Priority::Low => 0,
        Priority::Normal => 1,
        Priority::High => 2,
        Priority::Realtime => 3,
    }
}

impl Scheduler {
    pub(crate) fn new(sort: bool) -> Scheduler {
        Scheduler {
            classes: Default::default(),
            oldest: Default::default(),
            head: PhysKey(0, 0),
            dispatched: 0,
            seq: 0,
            sort,
            len: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn push(&mut self, op: ReadOp, done: Sender<ReadCompletion>, pin: Option<FillPin>) {
        let seq = self.seq;
        self.seq += 1;
        let key = if self.sort {
            op.file.physical_key(op.offset)
        } else {
            PhysKey(0, seq)
        };
        let c = rank(op.priority);
        self.oldest[c].insert(seq, key);
        self.classes[c].insert(
            (key, seq),
            Queued {
                op,
                done,
                _pin: pin,
                enq_at: self.dispatched,
            },
        );
        self.len += 1;
    }

    pub(crate) fn pop(&mut self) -> Option<Queued> {
        // Pick the class whose oldest request scores highest.
        let mut best: Option<(u64, usize, u64)> = None; // (score, class, waited)
        for c in 0..4 {
            let Some((&seq, &key)) = self.oldest[c].first_key_value() else {
                continue;
            };
            let waited = self.dispatched - self.classes[c][&(key, seq)].enq_at;
            let score = c as u64 * AGE_STEP + waited;
            if best.is_none_or(|(s, _, _)| score >= s) {
                best = Some((score, c, waited));
            }
        }
        let (_, c, waited) = best?;
        let key = if waited >= AGE_STEP {
            let (&seq, &key) = self.oldest[c].first_key_value()?;
            (key, seq)
        } else {
            let after = self.classes[c]
                .range((self.head, 0)..)
                .next()
                .map(|(k, _)| *k);
            match after {
                Some(k) => k,
                None => *self.classes[c].keys().next()?,
            }
        };
        let q = self.classes[c].remove(&key)?;
        self.oldest[c].remove(&key.1);
        self.head = key.0;
        self.dispatched += 1;
        self.len -= 1;
        Some(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{IoFile, OpenMode};

    fn file() -> (tempfile::TempDir, IoFile) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.bin");
        std::fs::write(&p, vec![1u8; 1 << 20]).unwrap();
        let f = IoFile::open(&p, OpenMode::Auto).unwrap();
        (d, f)
    }

    fn op(f: &IoFile, offset: u64, priority: Priority, user_data: u64) -> ReadOp {
        ReadOp {
            file: f.clone(),
            offset,
            len: 4096,
            dest: std::ptr::null_mut(),
            priority,
            user_data,
        }
    }

    #[test]
    fn one_class_goes_in_physical_order() {
        let (_d, f) = file();
        let (tx, _rx) = crossbeam::channel::unbounded();
        let mut s = Scheduler::new(true);
        let offsets = [9u64, 3, 7, 1, 0, 8, 2, 6, 4, 5];
        for (i, &o) in offsets.iter().enumerate() {
            s.push(
                op(&f, o * 65536, Priority::Normal, i as u64),
                tx.clone(),
                None,
            );
        }
        let keys: Vec<PhysKey> = std::iter::from_fn(|| s.pop())
            .map(|q| q.op.file.physical_key(q.op.offset))
            .collect();
        assert_eq!(keys.len(), offsets.len());
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:?}");
    }

    #[test]
    fn unsorted_is_fifo() {
        let (_d, f) = file();
        let (tx, _rx) = crossbeam::channel::unbounded();
        let mut s = Scheduler::new(false);
        for i in 0..20u64 {
            s.push(
                op(&f, (19 - i) * 4096, Priority::Normal, i),
                tx.clone(),
                None,
            );
        }
        let order: Vec<u64> = std::iter::from_fn(|| s.pop())
            .map(|q| q.op.user_data)
            .collect();
        assert_eq!(order, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn higher_priority_first_but_low_is_not_starved() {
        let (_d, f) = file();
        let (tx, _rx) = crossbeam::channel::unbounded();
        let mut s = Scheduler::new(true);
        s.push(op(&f, 0, Priority::Low, 0), tx.clone(), None);
        s.push(op(&f, 4096, Priority::Realtime, 1), tx.clone(), None);
        assert_eq!(s.pop().unwrap().op.user_data, 1, "realtime before low");
        // A steady stream of realtime requests: one new for each dispatch.
        let mut low_at = None;
        for k in 0..1000u64 {
            s.push(
                op(&f, 8192 + k * 4096, Priority::Realtime, 100 + k),
                tx.clone(),
                None,
            );
            let q = s.pop().unwrap();
            if q.op.user_data == 0 {
                low_at = Some(k);
                break;
            }
        }
        let k = low_at.expect("the low request starved");
        assert!(k <= 3 * AGE_STEP + 1, "low waited {k} dispatches");
        assert!(k >= 2 * AGE_STEP, "low overtook realtime too early ({k})");
    }
}
