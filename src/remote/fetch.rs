//! The fetcher: makes a replica's blocks present before the engine reads
//! them, with coalesced ranged GETs, a bounded number at a time.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::io::{FillRequest, RangeFill};

use super::cache::{Cache, Claim};
use super::store::Store;

/// Bytes nobody asked for that one GET may span to join two missing
/// blocks: cheaper than a second request.
const MAX_GAP: u64 = 64 << 10;

pub(crate) struct Fetcher {
    pub(crate) store: Arc<Store>,
    pub(crate) cache: Arc<Cache>,
    gets: Arc<Semaphore>,
    max_get: u64,
    /// The longest a GET may take with all its retries before its blocks
    /// are failed anyway: the client's own limits, with room to spare.
    deadline: Duration,
}

impl Fetcher {
    pub(crate) fn new(
        store: Arc<Store>,
        cache: Arc<Cache>,
        concurrency: usize,
        max_get: usize,
        deadline: Duration,
    ) -> Fetcher {
        Fetcher {
            store,
            cache,
            gets: Arc::new(Semaphore::new(concurrency.max(1))),
            max_get: max_get.max(1) as u64,
            deadline,
        }
    }

    /// Groups blocks (ascending) into GETs: neighbours at most `MAX_GAP`
    /// apart, up to `max_get` bytes (a larger block gets a GET of its own).
    fn runs(&self, blocks: &[u32]) -> Vec<Vec<u32>> {
        let spans = &self.cache.spans;
        let mut runs: Vec<Vec<u32>> = Vec::new();
        for &b in blocks {
            let s = spans[b as usize];
            if let Some(run) = runs.last_mut() {
                let first = spans[run[0] as usize];
                let last = spans[*run.last().expect("runs are never empty") as usize];
                if s.offset >= last.end()
                    && s.offset - last.end() <= MAX_GAP
                    && s.end() - first.offset <= self.max_get
                {
                    run.push(b);
                    continue;
                }
            }
            runs.push(vec![b]);
        }
        runs
    }

    /// Fetches one run with one GET, checks each block and writes the good
    /// ones into the replica; every block of the run is settled once,
    /// whatever happens (a dropped task settles them as cancelled).
    async fn fetch_run(
        store: Arc<Store>,
        cache: Arc<Cache>,
        gets: Arc<Semaphore>,
        run: Vec<u32>,
        deadline: Duration,
    ) {
        let mut guard = Unsettled {
            cache: cache.clone(),
            blocks: run,
        };
        let last = *guard.blocks.last().expect("runs are never empty");
        let range = cache.get_range(guard.blocks[0], last);
        let got = match gets.acquire().await {
            Ok(_permit) => tokio::time::timeout(deadline, store.get(range.clone()))
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {deadline:?}"))),
            Err(_) => Err("the fetcher shut down".to_string()),
        };
        let c = &cache.counters;
        let bytes = match got {
            Ok(b) => {
                c.gets.fetch_add(1, Relaxed);
                c.fetched_bytes.fetch_add(b.len() as u64, Relaxed);
                b
            }
            Err(e) => {
                c.failed_gets.fetch_add(1, Relaxed);
                let why = format!("GET bytes {}..{}: {e}", range.start, range.end);
                for b in std::mem::take(&mut guard.blocks) {
                    cache.settle(b, Err(why.clone()));
                }
                return;
            }
        };
        let blocks = guard.blocks.clone();
        // Checking and writing are blocking work: off the I/O threads.
        let cache2 = cache.clone();
        let written = tokio::task::spawn_blocking(move || {
            let incoming: u64 = blocks
                .iter()
                .map(|&b| cache2.spans[b as usize].len as u64)
                .sum();
            cache2.make_room(incoming);
            let mut checked = Vec::with_capacity(blocks.len());
            for &b in &blocks {
                let s = cache2.spans[b as usize];
                let at = (s.offset - range.start) as usize;
                let data = &bytes[at..at + s.len as usize];
                checked.push(if crc32c::crc32c(data) != s.crc {
                    cache2.counters.blocks_corrupt.fetch_add(1, Relaxed);
                    Err(format!(
                        "block at {} ({} bytes) from GET bytes {}..{} does not match its crc32c",
                        s.offset, s.len, range.start, range.end
                    ))
                } else {
                    Ok(())
                });
            }
            let good: Vec<u32> = blocks
                .iter()
                .zip(&checked)
                .filter(|(_, r)| r.is_ok())
                .map(|(&b, _)| b)
                .collect();
            let written = cache2.write_blocks(range.start, &bytes, &good);
            for (&b, mut result) in blocks.iter().zip(checked) {
                if result.is_ok() {
                    if let Err(e) = &written {
                        result = Err(e.clone());
                    }
                }
                if result.is_ok() {
                    cache2.counters.blocks_fetched.fetch_add(1, Relaxed);
                }
                cache2.settle(b, result);
            }
        })
        .await;
        if written.is_ok() {
            guard.blocks.clear();
        } else {
            // The blocking task panicked or was cancelled: the guard fails
            // whatever it left busy (settling is once per block, so those
            // it reached keep their outcome).
            log::error!(
                "writing fetched blocks into {} failed",
                cache.path.display()
            );
        }
    }
}

/// Blocks of a run not yet settled: settled as failed if the run's task is
/// dropped (the runtime shutting down) before it gets to them.
struct Unsettled {
    cache: Arc<Cache>,
    blocks: Vec<u32>,
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        let blocks = std::mem::take(&mut self.blocks);
        let (Some(&first), Some(&last)) = (blocks.first(), blocks.last()) else {
            return;
        };
        let r = self.cache.get_range(first, last);
        let why = format!(
            "GET bytes {}..{}: abandoned (the pack was closed, or its task failed)",
            r.start, r.end
        );
        for b in blocks {
            self.cache.settle(b, Err(why.clone()));
        }
    }
}

impl RangeFill for Fetcher {
    fn fill(&self, requests: Vec<FillRequest>) {
        let (mut check, mut fetch) = (Vec::new(), Vec::new());
        for r in requests {
            let blocks = self.cache.within(r.offset, r.len);
            match self.cache.claim(blocks, r.offset, r.len, r.done) {
                (Claim::Ready(pin), Some(done)) => done(Ok(Box::new(pin))),
                (Claim::Ready(_), None) => unreachable!("a ready claim hands the callback back"),
                (Claim::Wait { check: c, fetch: f }, _) => {
                    check.extend(c);
                    fetch.extend(f);
                }
            }
        }
        if check.is_empty() && fetch.is_empty() {
            // Everything missing is already being fetched for other reads.
            return;
        }
        // Claims mark what they take busy, so no block is listed twice;
        // sorted, the missing blocks of all the requests coalesce.
        fetch.sort_unstable();
        let (store, cache, gets) = (self.store.clone(), self.cache.clone(), self.gets.clone());
        let deadline = self.deadline;
        let runs_now = self.runs(&fetch);
        self.store.handle().spawn(async move {
            let mut runs = runs_now;
            if !check.is_empty() {
                // Blocks an earlier process left: check, refetch the bad.
                // Should the check not finish, the guard fails what it
                // left busy.
                let mut guard = Unsettled {
                    cache: cache.clone(),
                    blocks: check.clone(),
                };
                let c = cache.clone();
                if let Ok(bad) = tokio::task::spawn_blocking(move || c.check(&check)).await {
                    guard.blocks.clear();
                    for b in bad {
                        runs.push(vec![b]);
                    }
                }
            }
            let mut tasks = Vec::with_capacity(runs.len());
            for run in runs {
                tasks.push(tokio::spawn(Fetcher::fetch_run(
                    store.clone(),
                    cache.clone(),
                    gets.clone(),
                    run,
                    deadline,
                )));
            }
            for t in tasks {
                let _ = t.await;
            }
        });
    }
}
