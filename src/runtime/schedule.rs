//! Scheduling: which waiting part the submission thread places next.

use std::collections::VecDeque;

use super::plan::Part;

/// The number of priority levels (the I/O engine's classes).
pub(crate) const PRIORITIES: usize = 4;

/// Parts waiting for staging or a read, one FIFO per priority.
#[derive(Default)]
pub(crate) struct Schedule {
    waiting: [VecDeque<Part>; PRIORITIES],
    picks: u64,
}

impl Schedule {
    /// Queues parts at priority index `prio`.
    pub fn push(&mut self, prio: usize, parts: impl IntoIterator<Item = Part>) {
        self.waiting[prio.min(PRIORITIES - 1)].extend(parts);
    }

    /// Puts a part that could not be placed back at the front of its level.
    pub fn push_front(&mut self, prio: usize, part: Part) {
        self.waiting[prio.min(PRIORITIES - 1)].push_front(part);
    }

    /// Whether no part waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.iter().all(|w| w.is_empty())
    }

    /// The next part to place: highest priority first, but every 8th pick
    /// goes to the highest-priority *lower* level that has work, so a stream
    /// of realtime requests cannot starve the rest.
    pub fn next(&mut self) -> Option<Part> {
        self.picks += 1;
        let top = (0..PRIORITIES)
            .rev()
            .find(|&p| !self.waiting[p].is_empty())?;
        let level = if self.picks % 8 == 0 {
            (0..top)
                .rev()
                .find(|&p| !self.waiting[p].is_empty())
                .unwrap_or(top)
        } else {
            top
        };
        self.waiting[level].pop_front()
    }
}
