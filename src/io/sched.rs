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
use super::{Priority, ReadCompletion, ReadOp};

/// Dispatches after which a waiting request gains one priority class (see
/// the scheduling policy in docs/io.md).
pub const AGE_STEP: u64 = 64;

pub(crate) struct Queued {
    pub op: ReadOp,
    pub done: Sender<ReadCompletion>,
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

    pub(crate) fn push(&mut self, op: ReadOp, done: Sender<ReadCompletion>) {
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
