//! Fences: a monotonically increasing counter the runtime raises when every
//! request enqueued before a signal has finished.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

type Callback = Box<dyn FnOnce(u64) + Send + 'static>;

#[derive(Default)]
struct State {
    value: u64,
    callbacks: Vec<(u64, Callback)>,
    wakers: Vec<(u64, Waker)>,
}

struct Inner {
    state: Mutex<State>,
    cond: Condvar,
}

/// A fence: a `u64` that only grows. `Queue::enqueue_signal(&fence, v)` makes
/// the runtime raise it to `v` once every request enqueued before the signal
/// on that queue has finished (done, failed or cancelled; GPU work included).
///
/// Cloning a fence gives another handle to the same counter.
#[derive(Clone)]
pub struct Fence {
    inner: Arc<Inner>,
}

impl Default for Fence {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("completed_value", &self.completed_value())
            .finish()
    }
}

impl Fence {
    /// A new fence at value 0.
    pub fn new() -> Fence {
        Fence {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                cond: Condvar::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A callback that panicked must not wedge every later waiter.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The highest value reached so far.
    pub fn completed_value(&self) -> u64 {
        self.lock().value
    }

    /// Blocks until the fence reaches `value`.
    pub fn wait(&self, value: u64) {
        let mut s = self.lock();
        while s.value < value {
            s = self.inner.cond.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Blocks until the fence reaches `value` or `timeout` passes; returns
    /// whether it was reached.
    pub fn wait_timeout(&self, value: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        while s.value < value {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            s = self
                .inner
                .cond
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Calls `callback` (on a runtime thread, or at once on this one if the
    /// value is already reached) when the fence reaches `value`. Keep it
    /// short: it runs on the thread that raised the fence.
    pub fn on_reached(&self, value: u64, callback: impl FnOnce(u64) + Send + 'static) {
        let mut s = self.lock();
        if s.value >= value {
            let v = s.value;
            drop(s);
            callback(v);
        } else {
            s.callbacks.push((value, Box::new(callback)));
        }
    }

    /// A future that resolves once the fence reaches `value`.
    pub fn reached(&self, value: u64) -> FenceReached {
        FenceReached {
            fence: self.clone(),
            value,
        }
    }

    /// Raises the fence to `value` (never lowers it) and wakes whoever waits
    /// for a value it now covers.
    pub(crate) fn signal(&self, value: u64) {
        let mut s = self.lock();
        if value <= s.value {
            return;
        }
        s.value = value;
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut s.callbacks)
            .into_iter()
            .partition(|(v, _)| *v <= value);
        s.callbacks = keep;
        let (wake, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut s.wakers)
            .into_iter()
            .partition(|(v, _)| *v <= value);
        s.wakers = wait;
        drop(s);
        self.inner.cond.notify_all();
        for (_, w) in wake {
            w.wake();
        }
        for (_, cb) in due {
            cb(value);
        }
    }
}

/// The future returned by [`Fence::reached`]; resolves to the fence's value.
pub struct FenceReached {
    fence: Fence,
    value: u64,
}

impl Future for FenceReached {
    type Output = u64;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let mut s = self.fence.lock();
        if s.value >= self.value {
            return Poll::Ready(s.value);
        }
        s.wakers.retain(|(_, w)| !w.will_wake(cx.waker()));
        s.wakers.push((self.value, cx.waker().clone()));
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn signal_is_monotonic() {
        let f = Fence::new();
        f.signal(5);
        f.signal(3);
        assert_eq!(f.completed_value(), 5);
    }

    #[test]
    fn wait_timeout_reports_reach() {
        let f = Fence::new();
        assert!(!f.wait_timeout(1, Duration::from_millis(10)));
        let g = f.clone();
        let t = std::thread::spawn(move || g.signal(2));
        assert!(f.wait_timeout(2, Duration::from_secs(30)));
        t.join().unwrap();
        f.wait(1);
    }

    #[test]
    fn callbacks_fire_once_at_their_value() {
        let f = Fence::new();
        let hits = Arc::new(AtomicU64::new(0));
        for v in [1u64, 2, 3] {
            let h = hits.clone();
            f.on_reached(v, move |_| {
                h.fetch_add(v, Ordering::SeqCst);
            });
        }
        f.signal(2);
        assert_eq!(hits.load(Ordering::SeqCst), 3);
        f.signal(2);
        assert_eq!(hits.load(Ordering::SeqCst), 3);
        f.signal(10);
        assert_eq!(hits.load(Ordering::SeqCst), 6);
        let h = hits.clone();
        f.on_reached(4, move |v| {
            h.fetch_add(100 + v, Ordering::SeqCst);
        });
        assert_eq!(hits.load(Ordering::SeqCst), 116);
    }

    #[test]
    fn future_resolves() {
        let f = Fence::new();
        let g = f.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            g.signal(7)
        });
        assert_eq!(pollster::block_on(f.reached(7)), 7);
        t.join().unwrap();
    }
}
