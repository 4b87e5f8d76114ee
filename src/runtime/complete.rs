//! Completion bookkeeping on the submission thread: the table of jobs in
//! flight, each job's parts left, and ending a job exactly once (done,
//! failed or cancelled) so its queue can fire fences and status entries.

use std::sync::{Arc, Mutex};

use crate::codec::Codec;
use crate::completion::Outcome;

use super::job::{Ended, JobOwner, JobSpec};
use super::plan::{BlockData, BlockSrc, Class, Part};
use super::RequestError;

/// A job the submission thread holds.
pub(crate) struct Job {
    pub spec: JobSpec,
    pub parts_left: usize,
    pub error: Option<RequestError>,
    /// The packed-mips stream being assembled, if the job has one.
    pub assembly_buf: Option<Arc<Mutex<Vec<u8>>>>,
}

/// The jobs in flight, in a slab. A job's key, which every part of it
/// carries in `Part::job`, is its slot in the low 32 bits and the slot's
/// generation in the high 32, so a key outlives its job harmlessly (lookups
/// return `None`) and a lookup is one index, not a hash probe: jobs are
/// touched several times per part on the submission thread, and a hash map
/// of these 400-byte jobs scattered them over cache lines (issue #10).
#[derive(Default)]
pub(crate) struct JobTable {
    slots: Vec<JobSlot>,
    /// Free slots, most recently freed last (reused first: still in cache).
    free: Vec<u32>,
    live: usize,
    /// The most staging bytes in use at once, for the stats.
    pub staging_peak: u64,
    /// Jobs ended and not yet reported to their queues, by queue.
    ended: Vec<(Arc<dyn JobOwner>, Vec<Ended>)>,
    /// Whether CPU parts bound for the GPU are laid out by the CPU (see
    /// `Part::pitched`); assembled packed mips follow it.
    pub pitched_cpu_output: bool,
}

#[derive(Default)]
struct JobSlot {
    generation: u32,
    job: Option<Job>,
}

fn split_key(key: u64) -> (usize, u32) {
    (key as u32 as usize, (key >> 32) as u32)
}

/// What ending a part asks of the submission thread.
pub(crate) enum Next {
    /// Nothing more.
    Nothing,
    /// The job's packed mips are assembled: these parts deliver them.
    Deliver(usize, Vec<Part>),
}

impl JobTable {
    /// An empty table; `pitched_cpu_output` as in `Part::pitched`.
    pub fn new(pitched_cpu_output: bool) -> JobTable {
        JobTable {
            pitched_cpu_output,
            ..JobTable::default()
        }
    }

    /// Takes a job in; returns its key and its parts (each now carrying
    /// the key) for scheduling.
    pub fn insert(&mut self, mut spec: JobSpec) -> (u64, Vec<Part>) {
        let mut parts = std::mem::take(&mut spec.parts);
        let assembly_buf = spec
            .assembly
            .as_ref()
            .map(|a| Arc::new(Mutex::new(vec![0u8; a.len])));
        let job = Job {
            parts_left: parts.len(),
            spec,
            error: None,
            assembly_buf,
        };
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.slots.push(JobSlot::default());
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.job = Some(job);
        self.live += 1;
        let key = ((slot.generation as u64) << 32) | index as u64;
        for p in &mut parts {
            p.job = key;
        }
        (key, parts)
    }

    fn remove(&mut self, key: u64) -> Option<Job> {
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

    fn get_mut(&mut self, key: u64) -> Option<&mut Job> {
        let (index, generation) = split_key(key);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.job.as_mut()
    }

    /// Takes in a job that already failed (a batch arriving after shutdown)
    /// and ends it.
    pub fn insert_failed(&mut self, mut spec: JobSpec, error: RequestError) {
        spec.parts.clear();
        let (key, _) = self.insert(spec);
        self.fail(key, error);
        self.complete(key);
    }

    /// The job, if still in flight.
    pub fn get(&self, key: u64) -> Option<&Job> {
        let (index, generation) = split_key(key);
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.job.as_ref()
    }

    /// Whether no job is in flight.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The keys of the jobs in flight.
    pub fn ids(&self) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.job.is_some())
            .map(|(i, s)| ((s.generation as u64) << 32) | i as u64)
            .collect()
    }

    /// Whether the job is gone or cancelled.
    pub fn cancelled(&self, key: u64) -> bool {
        self.get(key).is_none_or(|j| j.spec.ctl.is_cancelled())
    }

    /// Records that the job must fail with `error` (the first error wins).
    pub fn fail(&mut self, key: u64, error: RequestError) {
        if let Some(j) = self.get_mut(key) {
            if j.error.is_none() {
                j.error = Some(error);
            }
        }
    }

    /// One part of a job ended.
    pub fn part_done(&mut self, job: u64, result: Result<(), RequestError>) -> Next {
        let Some(j) = self.get_mut(job) else {
            return Next::Nothing;
        };
        if let Err(e) = result {
            if j.error.is_none() && !matches!(e, RequestError::Cancelled) {
                j.error = Some(e);
            }
        }
        j.parts_left -= 1;
        if j.parts_left == 0 {
            return self.parts_done(job);
        }
        Next::Nothing
    }

    /// Every part of a job ended: deliver an assembly, or complete the job.
    pub fn parts_done(&mut self, id: u64) -> Next {
        let pitched = self.pitched_cpu_output;
        let Some(j) = self.get_mut(id) else {
            return Next::Nothing;
        };
        if j.error.is_none() && !j.spec.ctl.is_cancelled() {
            if let (Some(asm), Some(buf)) = (j.spec.assembly.take(), j.assembly_buf.take()) {
                let bytes: Arc<[u8]> =
                    std::mem::take(&mut *buf.lock().unwrap_or_else(|e| e.into_inner())).into();
                let parts: Vec<Part> = asm
                    .outputs
                    .into_iter()
                    .map(|(range, place)| {
                        let len = (range.end - range.start) as u32;
                        Part {
                            job: id,
                            block: BlockSrc {
                                data: BlockData::Memory(bytes.clone(), range),
                                offset: 0,
                                stored: len,
                                size: len,
                                codec: Codec::None,
                            },
                            take: 0..len,
                            pitched,
                            place,
                            class: Class::Cpu,
                        }
                    })
                    .collect();
                if !parts.is_empty() {
                    j.parts_left = parts.len();
                    return Next::Deliver(j.spec.priority_index(), parts);
                }
            }
        }
        self.complete(id);
        Next::Nothing
    }

    /// Ends a job: its claim on host memory is released at once, and its
    /// queue hears of it at the next [`JobTable::flush_ended`].
    pub fn complete(&mut self, key: u64) {
        let Some(j) = self.remove(key) else {
            return;
        };
        let spec = j.spec;
        let outcome = if spec.ctl.is_cancelled() {
            Outcome::Cancelled
        } else if let Some(e) = j.error {
            Outcome::Failed(Arc::new(spec.failure(e)))
        } else {
            Outcome::Done
        };
        // Release the host-memory claim before the fence can fire, so a
        // waiter woken by it can read the bytes.
        drop(spec.claim);
        let ended = Ended {
            id: spec.id,
            seq: spec.seq,
            window: spec.window,
            outcome,
            delivered: spec.delivered,
            stored: spec.stored,
            latency: spec.submitted.elapsed(),
        };
        match self.ended.last_mut() {
            Some((q, list)) if Arc::ptr_eq(q, &spec.queue) => list.push(ended),
            _ => self.ended.push((spec.queue, vec![ended])),
        }
    }

    /// Tells every queue which of its jobs ended since the last call, one
    /// call per queue and run of ends. The submission thread calls it at
    /// the end of every turn of its loop.
    pub fn flush_ended(&mut self) {
        let peak = self.staging_peak;
        for (queue, list) in self.ended.drain(..) {
            queue.finish(list, peak);
        }
    }
}
