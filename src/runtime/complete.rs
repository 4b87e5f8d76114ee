//! Completion bookkeeping on the submission thread: the table of jobs in
//! flight, each job's parts left, and ending a job exactly once (done,
//! failed or cancelled) so its queue can fire fences and status entries.

use std::sync::{Arc, Mutex};

use crate::codec::Codec;
use crate::completion::{Outcome, RequestFailure};

use super::id_map::IdMap;
use super::job::JobSpec;
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

/// The jobs in flight, by id.
#[derive(Default)]
pub(crate) struct JobTable {
    jobs: IdMap<u64, Job>,
    /// The most staging bytes in use at once, for the stats.
    pub staging_peak: u64,
    /// Whether CPU parts bound for the GPU are laid out by the CPU (see
    /// `Part::pitched`); assembled packed mips follow it.
    pub pitched_cpu_output: bool,
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

    /// Takes a job in; its parts are returned for scheduling.
    pub fn insert(&mut self, mut spec: JobSpec) -> (u64, Vec<Part>) {
        let id = spec.id;
        let parts = std::mem::take(&mut spec.parts);
        let assembly_buf = spec
            .assembly
            .as_ref()
            .map(|a| Arc::new(Mutex::new(vec![0u8; a.len])));
        self.jobs.insert(
            id,
            Job {
                parts_left: parts.len(),
                spec,
                error: None,
                assembly_buf,
            },
        );
        (id, parts)
    }

    /// Takes in a job that already failed (a batch arriving after shutdown)
    /// and ends it.
    pub fn insert_failed(&mut self, spec: JobSpec, error: RequestError) {
        let id = spec.id;
        self.jobs.insert(
            id,
            Job {
                spec,
                parts_left: 0,
                error: Some(error),
                assembly_buf: None,
            },
        );
        self.complete(id);
    }

    /// The job, if still in flight.
    pub fn get(&self, id: u64) -> Option<&Job> {
        self.jobs.get(&id)
    }

    /// Whether no job is in flight.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The ids in flight.
    pub fn ids(&self) -> Vec<u64> {
        self.jobs.keys().copied().collect()
    }

    /// Whether the job is gone or cancelled.
    pub fn cancelled(&self, id: u64) -> bool {
        self.jobs.get(&id).is_none_or(|j| j.spec.ctl.is_cancelled())
    }

    /// Records that the job must fail with `error` (the first error wins).
    pub fn fail(&mut self, id: u64, error: RequestError) {
        if let Some(j) = self.jobs.get_mut(&id) {
            if j.error.is_none() {
                j.error = Some(error);
            }
        }
    }

    /// One part of a job ended.
    pub fn part_done(&mut self, job: u64, result: Result<(), RequestError>) -> Next {
        let Some(j) = self.jobs.get_mut(&job) else {
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
        let Some(j) = self.jobs.get_mut(&id) else {
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
                            pitched: self.pitched_cpu_output,
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

    /// Ends a job: records its stats and tells its queue.
    pub fn complete(&mut self, id: u64) {
        let Some(j) = self.jobs.remove(&id) else {
            return;
        };
        let spec = j.spec;
        let outcome = if spec.ctl.is_cancelled() {
            Outcome::Cancelled
        } else if let Some(e) = j.error {
            let info = spec.failure_info;
            Outcome::Failed(Arc::new(RequestFailure {
                error: Arc::new(e),
                source: info.source,
                destination: info.destination,
                source_size: spec.stored,
                destination_size: spec.delivered,
                tag: info.tag,
                name: info.name,
                file: info.file,
            }))
        } else {
            Outcome::Done
        };
        let peak = self.staging_peak;
        let latency = spec.submitted.elapsed();
        let (delivered, stored) = (spec.delivered, spec.stored);
        let mut st = spec.queue.stats().lock().unwrap_or_else(|e| e.into_inner());
        {
            match &outcome {
                Outcome::Done => {
                    st.completed += 1;
                    st.bytes_delivered += delivered;
                    st.bytes_stored += stored;
                }
                Outcome::Failed(_) => st.failed += 1,
                Outcome::Cancelled => st.cancelled += 1,
            }
            st.latency_ns_total += latency.as_nanos() as u64;
            st.latency.record(latency);
            st.staging_peak_bytes = st.staging_peak_bytes.max(peak);
        }
        drop(st);
        // Release the host-memory claim before the fence can fire, so a
        // waiter woken by it can read the bytes.
        drop(spec.claim);
        spec.queue.finish(id, spec.seq, spec.window, outcome);
    }
}
