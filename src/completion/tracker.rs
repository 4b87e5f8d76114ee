//! Per-queue ordering: requests finish in any order, but fences and status
//! entries report in enqueue order.
//!
//! Every item a queue accepts gets a sequence number. A marker (a fence
//! signal or a status entry) at sequence `m` is due once no request with a
//! sequence below `m` is outstanding. Due markers fire in sequence order, so
//! a fence can never run ahead of an unfinished earlier request.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::{ErrorRecord, Fence, RequestFailure, StatusArray, StatusEntry};

/// A completion marker enqueued on a queue.
#[derive(Clone, Debug)]
pub enum Marker {
    /// Raise `fence` to the value.
    Signal(Fence, u64),
    /// Write the status entry at the index.
    Status(StatusArray, usize),
}

/// How a request ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Delivered.
    Done,
    /// Failed, with the record of why.
    Failed(Arc<RequestFailure>),
    /// Cancelled before it finished: not a failure.
    Cancelled,
}

/// A marker that became due, ready to fire outside the tracker's lock.
pub struct Fired {
    marker: Marker,
    status: Option<StatusEntry>,
}

impl Fired {
    /// Raises the fence or writes the status entry.
    pub fn fire(self) {
        match self.marker {
            Marker::Signal(f, v) => f.signal(v),
            Marker::Status(a, i) => a.set(i, self.status.unwrap_or(StatusEntry::Ok)),
        }
    }
}

/// The bookkeeping of one queue. Not thread-safe by itself: the queue keeps
/// it behind a mutex and fires what [`Tracker::complete`] returns after
/// releasing it.
#[derive(Default)]
pub struct Tracker {
    outstanding: BTreeSet<u64>,
    markers: VecDeque<(u64, Marker, u64)>,
    /// The first failure (lowest sequence) of each status window still open.
    window_first: BTreeMap<u64, (u64, Arc<RequestFailure>)>,
    /// The window new requests join: bumped by every status marker.
    window: u64,
    record: ErrorRecord,
    record_first_seq: u64,
}

impl Tracker {
    /// A tracker with nothing outstanding.
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// Registers request `seq` as outstanding; returns its status window,
    /// which the caller hands back to [`Tracker::complete`].
    pub fn add_request(&mut self, seq: u64) -> u64 {
        self.outstanding.insert(seq);
        self.window
    }

    /// Registers a marker at `seq` (greater than every request added so far
    /// on this queue) and returns the markers due now.
    pub fn add_marker(&mut self, seq: u64, marker: Marker) -> Vec<Fired> {
        let window = self.window;
        if let Marker::Status(a, i) = &marker {
            a.reset(*i);
            self.window += 1;
        }
        self.markers.push_back((seq, marker, window));
        self.drain_due()
    }

    /// Records how request `seq` (of status window `window`) ended and
    /// returns the markers that became due.
    pub fn complete(&mut self, seq: u64, window: u64, outcome: Outcome) -> Vec<Fired> {
        if !self.outstanding.remove(&seq) {
            // Completing twice would be a runtime bug; never let it move a fence.
            debug_assert!(false, "request {seq} completed twice");
            return Vec::new();
        }
        if let Outcome::Failed(f) = outcome {
            let e = self
                .window_first
                .entry(window)
                .or_insert_with(|| (seq, f.clone()));
            if seq < e.0 {
                *e = (seq, f.clone());
            }
            self.record.failure_count += 1;
            if self.record.first_failure.is_none() || seq < self.record_first_seq {
                self.record.first_failure = Some(f);
                self.record_first_seq = seq;
            }
        }
        self.drain_due()
    }

    /// Returns the error record and starts a new one.
    pub fn take_error_record(&mut self) -> ErrorRecord {
        self.record_first_seq = 0;
        std::mem::take(&mut self.record)
    }

    fn drain_due(&mut self) -> Vec<Fired> {
        let lowest = self.outstanding.first().copied().unwrap_or(u64::MAX);
        let mut fired = Vec::new();
        while let Some((seq, _, _)) = self.markers.front() {
            if *seq > lowest {
                break;
            }
            let (_, marker, window) = self.markers.pop_front().expect("front exists");
            let status = match &marker {
                Marker::Status(..) => Some(match self.window_first.remove(&window) {
                    Some((_, f)) => StatusEntry::Failed(f),
                    None => StatusEntry::Ok,
                }),
                Marker::Signal(..) => None,
            };
            fired.push(Fired { marker, status });
        }
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::RequestError;

    fn failure(tag: u64) -> Arc<RequestFailure> {
        Arc::new(RequestFailure {
            error: Arc::new(RequestError::ShutDown),
            source: format!("test {tag}"),
            destination: "memory".into(),
            source_size: 0,
            destination_size: 0,
            tag,
            name: None,
            file: None,
        })
    }

    fn fire(v: Vec<Fired>) {
        v.into_iter().for_each(Fired::fire)
    }

    #[test]
    fn fence_waits_for_every_earlier_request() {
        let mut t = Tracker::new();
        let f = Fence::new();
        let w0 = t.add_request(0);
        let w1 = t.add_request(1);
        fire(t.add_marker(2, Marker::Signal(f.clone(), 1)));
        let w3 = t.add_request(3);
        fire(t.add_marker(4, Marker::Signal(f.clone(), 2)));
        fire(t.complete(1, w1, Outcome::Done));
        assert_eq!(f.completed_value(), 0);
        fire(t.complete(3, w3, Outcome::Done));
        assert_eq!(f.completed_value(), 0, "request 0 is still outstanding");
        fire(t.complete(0, w0, Outcome::Cancelled));
        assert_eq!(f.completed_value(), 2);
    }

    #[test]
    fn marker_with_nothing_outstanding_fires_at_once() {
        let mut t = Tracker::new();
        let f = Fence::new();
        fire(t.add_marker(0, Marker::Signal(f.clone(), 9)));
        assert_eq!(f.completed_value(), 9);
    }

    #[test]
    fn status_holds_first_failure_of_its_window() {
        let mut t = Tracker::new();
        let s = StatusArray::new(2);
        let w: Vec<u64> = (0..3).map(|i| t.add_request(i)).collect();
        fire(t.add_marker(3, Marker::Status(s.clone(), 0)));
        let w4 = t.add_request(4);
        fire(t.add_marker(5, Marker::Status(s.clone(), 1)));
        // Failures arrive out of order: the entry must name request 1, not 2.
        fire(t.complete(2, w[2], Outcome::Failed(failure(2))));
        fire(t.complete(1, w[1], Outcome::Failed(failure(1))));
        assert!(!s.is_complete(0));
        fire(t.complete(0, w[0], Outcome::Cancelled));
        match s.get(0) {
            StatusEntry::Failed(f) => assert_eq!(f.tag, 1),
            other => panic!("{other:?}"),
        }
        fire(t.complete(4, w4, Outcome::Done));
        assert!(
            matches!(s.get(1), StatusEntry::Ok),
            "the second window had no failure"
        );
        let rec = t.take_error_record();
        assert_eq!(rec.failure_count, 2);
        assert_eq!(rec.first_failure.unwrap().tag, 1);
        assert_eq!(t.take_error_record().failure_count, 0);
    }
}
