//! The submission thread's table of the jobs it runs: what its stages look
//! up per part (the destination, the cancel switch, the queue).
//!
//! A slab. A job's key, which every part of it carries in `Part::job`, is
//! its slot in the low 32 bits and the slot's generation in the high 32,
//! so a key outlives its job harmlessly (lookups return `None`) and a
//! lookup is one index, not a hash probe. A slot holds one pointer to the
//! job's [`JobHot`]: the table stays a few cache lines for thousands of
//! jobs (a hash map of whole jobs, 440 bytes each, cost the submission
//! thread a cache miss per lookup).
//!
//! A slot is freed only when the completion stage says the job has ended,
//! so the completion stage can key its own table by the same keys.

use std::sync::Arc;

use super::job::JobHot;

#[derive(Default)]
struct Slot {
    generation: u32,
    job: Option<Arc<JobHot>>,
}

/// The jobs the submission thread runs, by key (see the module docs).
#[derive(Default)]
pub(crate) struct JobTable {
    slots: Vec<Slot>,
    /// Free slots, most recently freed last (reused first: still in cache).
    free: Vec<u32>,
    live: usize,
}

/// The slot index and generation of a key.
pub(crate) fn split_key(key: u64) -> (usize, u32) {
    (key as u32 as usize, (key >> 32) as u32)
}

impl JobTable {
    /// Takes a job in and returns its key.
    pub fn insert(&mut self, job: Arc<JobHot>) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.job = Some(job);
        self.live += 1;
        ((slot.generation as u64) << 32) | index as u64
    }

    /// Forgets an ended job (its key no longer finds anything) and returns
    /// its handle.
    pub fn remove(&mut self, key: u64) -> Option<Arc<JobHot>> {
        let (index, generation) = split_key(key);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let job = slot.job.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index as u32);
        self.live -= 1;
        Some(job)
    }

    /// The job, if still in flight.
    pub fn get(&self, key: u64) -> Option<&JobHot> {
        let (index, generation) = split_key(key);
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.job.as_deref()
    }

    /// The job's shared handle, for a thread that works on it.
    pub fn get_arc(&self, key: u64) -> Option<Arc<JobHot>> {
        let (index, generation) = split_key(key);
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.job.clone()
    }

    /// Whether no job is in flight.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Whether the job is gone or cancelled.
    pub fn cancelled(&self, key: u64) -> bool {
        self.get(key).is_none_or(|j| j.ctl.is_cancelled())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_freed_slots_find_nothing() {
        assert_eq!(split_key((7u64 << 32) | 3), (3, 7));
        let t = JobTable::default();
        assert!(t.is_empty());
        assert!(t.get(0).is_none());
        assert!(t.cancelled(0), "a missing job counts as cancelled");
    }
}
