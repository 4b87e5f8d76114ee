//! Scheduling: which waiting part the submission thread places next.

use std::collections::VecDeque;

use super::plan::Part;

/// The number of priority levels (the I/O engine's classes).
pub(crate) const PRIORITIES: usize = 4;

/// Parts waiting for staging or a read, one FIFO per priority. A FIFO
/// holds the part lists as they came (a submitted batch's parts, in order)
/// and hands parts out of them, so a part is not moved once more into the
/// schedule (measured: moving every part into a deque was a twentieth of
/// the submission thread's own work).
#[derive(Default)]
pub(crate) struct Schedule {
    waiting: [VecDeque<std::vec::IntoIter<Part>>; PRIORITIES],
    picks: u64,
    /// Lists used up, kept for [`Self::take_spent`]: freeing a submit's
    /// list (allocated by the application's thread, often large enough for
    /// glibc to unmap) was a thirtieth of the submission thread's own work
    /// (`perf`), so the completion thread frees them.
    spent: Vec<std::vec::IntoIter<Part>>,
}

impl Schedule {
    /// Queues parts at priority index `prio`.
    pub fn push(&mut self, prio: usize, parts: Vec<Part>) {
        if !parts.is_empty() {
            self.waiting[prio.min(PRIORITIES - 1)].push_back(parts.into_iter());
        }
    }

    /// Puts parts that could not be placed back at the front of their
    /// level, in their order.
    pub fn push_front(&mut self, prio: usize, parts: Vec<Part>) {
        if !parts.is_empty() {
            self.waiting[prio.min(PRIORITIES - 1)].push_front(parts.into_iter());
        }
    }

    /// Whether no part waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.iter().all(|w| w.is_empty())
    }

    /// The level the next pick takes from: the highest with work, but
    /// every 8th pick the highest-priority *lower* level that has work, so
    /// a stream of realtime requests cannot starve the rest.
    fn level(&self, pick: u64) -> Option<usize> {
        let top = (0..PRIORITIES)
            .rev()
            .find(|&p| !self.waiting[p].is_empty())?;
        Some(if pick.is_multiple_of(8) {
            (0..top)
                .rev()
                .find(|&p| !self.waiting[p].is_empty())
                .unwrap_or(top)
        } else {
            top
        })
    }

    /// The part [`Self::next`] would hand out, left in place.
    pub fn peek(&self) -> Option<&Part> {
        let level = self.level(self.picks + 1)?;
        self.waiting[level].front()?.as_slice().first()
    }

    /// The next part to place (see [`Self::level`] for which level).
    pub fn next(&mut self) -> Option<Part> {
        self.picks += 1;
        let level = self.level(self.picks)?;
        let fifo = &mut self.waiting[level];
        let front = fifo.front_mut()?;
        let part = front.next();
        // A list leaves the queue as soon as it is used up, so no empty
        // list stays queued: a queued list always has a part.
        if front.len() == 0 {
            self.spent.extend(fifo.pop_front());
        }
        part
    }

    /// The lists used up since the last call, to be freed elsewhere.
    pub fn take_spent(&mut self) -> Vec<std::vec::IntoIter<Part>> {
        std::mem::take(&mut self.spent)
    }
}
