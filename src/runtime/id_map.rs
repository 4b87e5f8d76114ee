//! A hash map keyed by the runtime's own sequential ids (jobs, read runs).
//!
//! The standard map hashes with SipHash, which resists keys chosen by an
//! attacker. These keys are counters the runtime hands out itself, so a
//! multiply by an odd constant is enough: the low bits stay a bijection of
//! the key's low bits (consecutive ids land in distinct buckets) and the
//! high bits, which the map uses as a tag, are well mixed. On the
//! submission thread SipHash lookups were about a sixth of its own work
//! per request (`perf` on `bench --adapter noop`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from a runtime-issued id to `V`.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The hasher of [`IdMap`]: for integer keys only.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Integer keys never come here; stay correct (if slow) if one does.
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ b as u64);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_get_distinct_low_bits_and_the_map_works() {
        let hash = |n: u64| {
            let mut h = IdHasher::default();
            h.write_u64(n);
            h.finish()
        };
        let lows: std::collections::HashSet<u64> = (0..4096).map(|n| hash(n) & 4095).collect();
        assert_eq!(lows.len(), 4096);
        let mut m: IdMap<u64, u64> = IdMap::default();
        for i in 0..10_000 {
            m.insert(i, i * 2);
        }
        for i in (0..10_000).step_by(3) {
            assert_eq!(m.remove(&i), Some(i * 2));
        }
        assert_eq!(m.len(), 10_000 - 3334);
        assert_eq!(m.get(&1), Some(&2));
        assert_eq!(m.get(&3), None);
    }
}
