//! A seeded fault injector that wraps either backend: short reads, EIO,
//! EINTR/EAGAIN, held-back (delayed) and reordered completions.
//!
//! Every choice is a hash of the seed and the attempt's identity (request,
//! position, retry number), not of a shared random stream, so a seed gives
//! the same faults for the same requests however the threads are timed.
//! It costs a few multiplications per read, cheap enough for tests that run
//! thousands of seeds.

use super::backend::{errno, Backend, RawRead, RawResult, Waker};

/// What to inject and how often. Probabilities are in parts per thousand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultConfig {
    /// Seeds every choice.
    pub seed: u64,
    /// Reads cut short at a random length (the engine must continue them).
    pub short_read: u16,
    /// Reads failed with EIO (the request must fail with a typed error).
    pub eio: u16,
    /// Reads answered EINTR or EAGAIN (the engine must retry them).
    pub interrupt: u16,
    /// Completions held back for a few rounds (later ones overtake them).
    pub delay: u16,
    /// Batches of completions handed over in a shuffled order.
    pub reorder: u16,
    /// Direct (O_DIRECT) reads answered EINVAL, as by a filesystem that
    /// accepts O_DIRECT at open but not for reads (the engine must switch
    /// the file to buffered reads and carry on).
    pub refuse_direct: u16,
    /// Direct reads answered EFAULT, as when the destination is memory the
    /// kernel cannot pin for DMA (a GPU's write-combined BAR mapping): the
    /// engine must read through a bounce buffer and deliver all the same.
    pub refuse_destination: u16,
}

// Without `tools` the injector is crate-private and its constructors go
// unused outside tests.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
impl FaultConfig {
    /// A mix of every fault, for tests: 20% short reads, 5% EIO, 10%
    /// interruptions, 20% delays, 30% reordered batches.
    pub fn mixed(seed: u64) -> FaultConfig {
        FaultConfig {
            seed,
            short_read: 200,
            eio: 50,
            interrupt: 100,
            delay: 200,
            reorder: 300,
            refuse_direct: 0,
            refuse_destination: 0,
        }
    }

    /// No faults at all (the wrapper only passes reads through).
    pub fn none(seed: u64) -> FaultConfig {
        FaultConfig {
            seed,
            short_read: 0,
            eio: 0,
            interrupt: 0,
            delay: 0,
            reorder: 0,
            refuse_direct: 0,
            refuse_destination: 0,
        }
    }
}

/// splitmix64's finaliser: a good 64-bit mix.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

pub(crate) struct FaultBackend {
    inner: Box<dyn Backend>,
    cfg: FaultConfig,
    /// Completions made up without touching the disk (EIO, EINTR).
    synthetic: Vec<(u64, RawResult)>,
    /// Real completions held back: (rounds left, tag, result).
    held: Vec<(u32, u64, RawResult)>,
    /// Identity of each tag's current attempt, for choices at completion.
    idents: std::collections::HashMap<u64, u64>,
    rounds: u64,
}

impl FaultBackend {
    pub(crate) fn new(inner: Box<dyn Backend>, cfg: FaultConfig) -> FaultBackend {
        FaultBackend {
            inner,
            cfg,
            synthetic: Vec::new(),
            held: Vec::new(),
            idents: std::collections::HashMap::new(),
            rounds: 0,
        }
    }

    fn chance(&self, ident: u64, salt: u64, per_mille: u16) -> Option<u64> {
        let h = mix(self.cfg.seed ^ mix(ident ^ salt.wrapping_mul(0xA24B_AED4_963E_E407)));
        ((h % 1000) < per_mille as u64).then_some(h >> 10)
    }
}

impl Backend for FaultBackend {
    unsafe fn push(&mut self, mut r: RawRead) {
        if r.align > 1 && self.chance(r.ident, 6, self.cfg.refuse_direct).is_some() {
            self.synthetic.push((r.tag, Err(errno::EINVAL)));
            return;
        }
        // Only a read into the caller's memory can be refused: a bounce
        // buffer is the engine's own (the worker passes its address).
        if r.align > 1
            && !r.bounced
            && self
                .chance(r.ident, 7, self.cfg.refuse_destination)
                .is_some()
        {
            self.synthetic.push((r.tag, Err(errno::EFAULT)));
            return;
        }
        if self.chance(r.ident, 1, self.cfg.eio).is_some() {
            self.synthetic.push((r.tag, Err(errno::EIO)));
            return;
        }
        if let Some(h) = self.chance(r.ident, 2, self.cfg.interrupt) {
            let e = if h & 1 == 0 {
                errno::EINTR
            } else {
                errno::EAGAIN
            };
            self.synthetic.push((r.tag, Err(e)));
            return;
        }
        // A direct read can only come back short at a multiple of the
        // alignment; cut there (a cut elsewhere would be an invalid read).
        let units = r.len / r.align.max(1);
        if units > 1 {
            if let Some(h) = self.chance(r.ident, 3, self.cfg.short_read) {
                r.len = (1 + (h % (units as u64 - 1)) as u32) * r.align.max(1);
            }
        }
        self.idents.insert(r.tag, r.ident);
        // SAFETY: forwarded from our caller; a shorter len stays in bounds.
        unsafe { self.inner.push(r) };
    }

    fn reap(&mut self, wait: bool, out: &mut Vec<(u64, RawResult)>) {
        self.rounds += 1;
        let start = out.len();
        out.append(&mut self.synthetic);
        // Release held completions whose time has come, and all of them if
        // nothing else is in flight (so holding back can never hang).
        let release_all = self.inner.in_flight() == 0;
        let mut i = 0;
        while i < self.held.len() {
            if release_all || self.held[i].0 == 0 {
                let (_, tag, res) = self.held.swap_remove(i);
                out.push((tag, res));
            } else {
                self.held[i].0 -= 1;
                i += 1;
            }
        }
        // Block in the inner backend only when there is nothing to hand
        // over yet; it returns on a completion or a wake-up.
        let mut fresh = Vec::new();
        self.inner.reap(wait && out.len() == start, &mut fresh);
        for (tag, res) in fresh {
            let ident = self.idents.remove(&tag).unwrap_or(tag);
            match self.chance(ident, 4, self.cfg.delay) {
                Some(h) => self.held.push(((h % 4) as u32 + 1, tag, res)),
                None => out.push((tag, res)),
            }
        }
        if out.len() == start && !self.held.is_empty() && wait {
            // Everything that finished was held back; hand one over so a
            // waiting worker always makes progress.
            let (_, tag, res) = self.held.swap_remove(0);
            out.push((tag, res));
        }
        if out.len() - start > 1 {
            if let Some(h) = self.chance(self.rounds ^ self.cfg.seed, 5, self.cfg.reorder) {
                let batch = &mut out[start..];
                let mut x = h;
                for k in (1..batch.len()).rev() {
                    x = mix(x);
                    batch.swap(k, (x % (k as u64 + 1)) as usize);
                }
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.synthetic.len() + self.held.len()
    }

    fn waker(&self) -> Waker {
        self.inner.waker()
    }

    fn set_buffers(&mut self, regions: &[(usize, usize)]) {
        self.inner.set_buffers(regions)
    }
}
