//! When reads and GPU work were in flight, and when both were at once: the
//! overlap a streaming pipeline exists for. With no overlap, a pass takes
//! the sum of its read time and its GPU time; with full overlap, the
//! larger of the two.
//!
//! The submission thread counts reads (issued to the I/O engine or taken by
//! a decode thread that reads for itself) and GPU submissions (staging
//! copies and decode batches) as they start and end; a batch ends when the
//! completion stage has read its status words back. Every change folds the
//! time since the last one into the totals, under one lock: a few hundred
//! changes per GB at the default read and batch sizes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long reads, GPU work, and both at once were in flight since the
/// runtime started ([`crate::runtime::Runtime::in_flight`]). Take two and
/// subtract them for a window of work; `both` divided by the window's wall
/// time is the share of it during which reads and GPU work overlapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InFlightTimes {
    /// Time with at least one read in flight.
    pub reads: Duration,
    /// Time with at least one GPU submission of the runtime's in flight.
    pub gpu: Duration,
    /// Time with both at once.
    pub both: Duration,
}

impl InFlightTimes {
    /// The times in `self` past those in `earlier` (saturating).
    pub fn since(&self, earlier: &InFlightTimes) -> InFlightTimes {
        InFlightTimes {
            reads: self.reads.saturating_sub(earlier.reads),
            gpu: self.gpu.saturating_sub(earlier.gpu),
            both: self.both.saturating_sub(earlier.both),
        }
    }
}

#[derive(Default)]
struct State {
    since: Option<Instant>,
    reads: u64,
    gpu: u64,
    totals: InFlightTimes,
}

impl State {
    /// Folds the time since the last change into the totals.
    fn fold(&mut self, now: Instant) {
        if let Some(t) = self.since {
            let dt = now.saturating_duration_since(t);
            if self.reads > 0 {
                self.totals.reads += dt;
            }
            if self.gpu > 0 {
                self.totals.gpu += dt;
            }
            if self.reads > 0 && self.gpu > 0 {
                self.totals.both += dt;
            }
        }
        self.since = Some(now);
    }
}

/// The runtime's counts of reads and GPU submissions in flight, and the
/// times they were.
#[derive(Default)]
pub(crate) struct Activity(Mutex<State>);

/// What started or ended.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Read,
    Gpu,
}

impl Activity {
    fn change(&self, kind: Kind, f: impl FnOnce(&mut u64)) {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        s.fold(Instant::now());
        match kind {
            Kind::Read => f(&mut s.reads),
            Kind::Gpu => f(&mut s.gpu),
        }
    }

    /// `n` reads or GPU submissions started.
    pub fn start(&self, kind: Kind, n: u64) {
        self.change(kind, |c| *c += n);
    }

    /// One ended.
    pub fn end(&self, kind: Kind) {
        self.change(kind, |c| *c = c.saturating_sub(1));
    }

    /// None of `kind` will end as counted (the device was lost, or the
    /// submission thread stopped).
    pub fn clear(&self, kind: Kind) {
        self.change(kind, |c| *c = 0);
    }

    /// The totals, the interval running now included.
    pub fn times(&self) -> InFlightTimes {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        s.fold(Instant::now());
        s.totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_only_time_with_both_in_flight() {
        let a = Activity::default();
        a.start(Kind::Read, 2);
        std::thread::sleep(Duration::from_millis(20));
        a.start(Kind::Gpu, 1);
        std::thread::sleep(Duration::from_millis(20));
        a.end(Kind::Read);
        std::thread::sleep(Duration::from_millis(20));
        a.end(Kind::Read);
        std::thread::sleep(Duration::from_millis(20));
        a.end(Kind::Gpu);
        std::thread::sleep(Duration::from_millis(20));
        let t = a.times();
        // Reads 60 ms, GPU 60 ms, both 40 ms; sleeps only ever run long.
        assert!(t.reads >= Duration::from_millis(60), "{t:?}");
        assert!(t.gpu >= Duration::from_millis(60), "{t:?}");
        assert!(t.both >= Duration::from_millis(40), "{t:?}");
        assert!(t.both < t.reads && t.both < t.gpu, "{t:?}");
        // Nothing in flight: the totals stand still.
        let later = a.times();
        assert_eq!(later.since(&t), InFlightTimes::default());
    }

    #[test]
    fn a_cleared_count_stops_counting() {
        let a = Activity::default();
        a.start(Kind::Gpu, 3);
        a.clear(Kind::Gpu);
        a.end(Kind::Gpu);
        let before = a.times();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(a.times().gpu, before.gpu);
        a.start(Kind::Read, 1);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(a.times().both, Duration::ZERO);
    }
}
