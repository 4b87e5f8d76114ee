//! Which mips of which texture are resident, and the budget they count
//! against. Pure bookkeeping: no Bevy, no GPU, so the budget rule is unit
//! tested on its own.
//!
//! A texture's resident mips are always one contiguous run from its finest
//! resident mip (`base`) down to the smallest, because the texture view that
//! samples it is one contiguous range of levels. Loading adds the next finer
//! mip, evicting drops the finest; the packed tail (every mip smaller than a
//! tile) is one unit that is loaded first and never evicted.
//!
//! The budget counts bytes of mip levels that are resident or on their way
//! (in flight): a mip's bytes are reserved when its requests are started, so
//! the resident bytes can never pass the budget when they land.

/// One texture's residency.
#[derive(Clone, Debug)]
pub(crate) struct TextureResidency {
    /// Bytes of each mip level, finest first.
    mip_bytes: Vec<u64>,
    /// The coarsest unit: the first mip of the packed tail (or the last mip
    /// when the chain has no tail). Loaded first, never evicted.
    floor: u8,
    /// Finest resident mip; `mip_count` while nothing is resident.
    base: u8,
    /// The mip whose requests are out, if any (`base - 1`, or `floor`).
    in_flight: Option<u8>,
    /// The finest mip the screen asked for in the latest frame that used it.
    wanted: u8,
    /// The latest frame in which something on screen used the texture.
    last_used: u64,
    /// Mips at or finer than this failed to load and are not asked for
    /// again (a damaged pack stays blurry rather than retried every frame).
    failed_at: Option<u8>,
}

impl TextureResidency {
    /// A texture with nothing resident.
    pub(crate) fn new(mip_bytes: Vec<u64>, floor: u8) -> TextureResidency {
        let count = mip_bytes.len() as u8;
        assert!(
            count > 0 && floor < count,
            "a texture has at least its floor mip"
        );
        TextureResidency {
            mip_bytes,
            floor,
            base: count,
            in_flight: None,
            wanted: floor,
            last_used: 0,
            failed_at: None,
        }
    }

    fn mip_count(&self) -> u8 {
        self.mip_bytes.len() as u8
    }

    /// Bytes a load of `mip` adds: the mip, or the whole tail for the floor.
    pub(crate) fn unit_bytes(&self, mip: u8) -> u64 {
        if mip == self.floor {
            self.mip_bytes[mip as usize..].iter().sum()
        } else {
            self.mip_bytes[mip as usize]
        }
    }

    /// The finest resident mip, or `None` while nothing is resident.
    pub(crate) fn base(&self) -> Option<u8> {
        (self.base < self.mip_count()).then_some(self.base)
    }

    /// The mip being loaded, if any.
    pub(crate) fn in_flight(&self) -> Option<u8> {
        self.in_flight
    }

    /// Bytes of the resident mips.
    #[cfg(test)]
    pub(crate) fn resident_bytes(&self) -> u64 {
        self.mip_bytes[self.base as usize..].iter().sum()
    }

    /// The next mip a load would bring in, if the screen wants one.
    fn next_load(&self, frame: u64) -> Option<u8> {
        if self.in_flight.is_some() {
            return None;
        }
        let next = match self.base() {
            None => self.floor,
            Some(0) => return None,
            Some(b) => b - 1,
        };
        if self.failed_at.is_some_and(|f| next <= f) {
            return None;
        }
        // The tail always loads; finer mips only while the screen wants them.
        (self.base().is_none() || (self.last_used == frame && self.wanted <= next)).then_some(next)
    }

    /// Whether the finest resident mip may be evicted, and how urgently:
    /// `Some(0)` for a mip finer than the screen wants, `Some(1)` for a mip
    /// of a texture unused in `frame`, `None` when it is needed now (or is
    /// the floor, or a finer mip is loading on top of it).
    fn eviction_class(&self, frame: u64) -> Option<u8> {
        let base = self.base()?;
        if base >= self.floor || self.in_flight.is_some() {
            return None;
        }
        if base < self.wanted {
            Some(0)
        } else if self.last_used < frame {
            Some(1)
        } else {
            None
        }
    }
}

/// What [`Residency::plan`] decided for one texture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// Its finest resident mip is dropped: the view no longer samples it.
    Evict {
        /// Index of the texture.
        texture: usize,
        /// The mip dropped.
        mip: u8,
    },
    /// Requests for this mip (or, at the floor, the whole packed tail)
    /// start; its bytes are reserved.
    Load {
        /// Index of the texture.
        texture: usize,
        /// The mip to load.
        mip: u8,
    },
}

/// Every streamed texture's residency and the budget over all of them.
#[derive(Clone, Debug)]
pub(crate) struct Residency {
    textures: Vec<TextureResidency>,
    budget: u64,
    resident: u64,
    in_flight: u64,
}

impl Residency {
    /// Nothing resident, with a budget in bytes.
    pub(crate) fn new(budget: u64) -> Residency {
        Residency {
            textures: Vec::new(),
            budget,
            resident: 0,
            in_flight: 0,
        }
    }

    /// Adds a texture; returns its index.
    pub(crate) fn add(&mut self, texture: TextureResidency) -> usize {
        self.textures.push(texture);
        self.textures.len() - 1
    }

    /// One texture's residency.
    pub(crate) fn texture(&self, index: usize) -> &TextureResidency {
        &self.textures[index]
    }

    /// The budget in bytes.
    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes of resident mip levels, over every texture.
    pub(crate) fn resident_bytes(&self) -> u64 {
        self.resident
    }

    /// Bytes reserved for mips whose requests are out.
    pub(crate) fn in_flight_bytes(&self) -> u64 {
        self.in_flight
    }

    /// Bytes every texture's packed tail takes: the least budget with which
    /// every texture has something to sample.
    #[cfg(test)]
    pub(crate) fn floor_bytes(&self) -> u64 {
        self.textures.iter().map(|t| t.unit_bytes(t.floor)).sum()
    }

    /// Records that something on screen in `frame` wants `texture` at `mip`
    /// or finer. Several users in one frame: the finest wins.
    pub(crate) fn want(&mut self, texture: usize, mip: u8, frame: u64) {
        let t = &mut self.textures[texture];
        let mip = mip.min(t.floor);
        if t.last_used != frame {
            t.last_used = frame;
            t.wanted = mip;
        } else {
            t.wanted = t.wanted.min(mip);
        }
    }

    /// This frame's loads and evictions. Loads go to the textures furthest
    /// from what the screen wants (textures with nothing resident first);
    /// room for them is made by evicting, least recently used first, mips
    /// finer than their texture wants and then mips of textures not used
    /// this frame. A mip needed on screen now is never evicted for another,
    /// so a full budget means blurrier textures, not thrashing. At most
    /// `max_loads` loads start, and the budget always holds
    /// `resident + in_flight <= budget`.
    pub(crate) fn plan(&mut self, frame: u64, max_loads: usize) -> Vec<Change> {
        let mut candidates: Vec<(usize, u8)> = self
            .textures
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.next_load(frame).map(|m| (i, m)))
            .collect();
        candidates.sort_by_key(|&(i, mip)| {
            let t = &self.textures[i];
            let empty = t.base().is_none();
            let gap = i32::from(mip) - i32::from(t.wanted);
            (
                !empty,
                std::cmp::Reverse(gap),
                std::cmp::Reverse(t.last_used),
                i,
            )
        });
        let mut changes = Vec::new();
        let mut loads = 0;
        for (index, mip) in candidates {
            if loads == max_loads {
                break;
            }
            let need = self.textures[index].unit_bytes(mip);
            while self.resident + self.in_flight + need > self.budget {
                let Some(victim) = self.victim(frame, index) else {
                    break;
                };
                changes.push(self.evict(victim));
            }
            if self.resident + self.in_flight + need > self.budget {
                continue;
            }
            self.textures[index].in_flight = Some(mip);
            self.in_flight += need;
            loads += 1;
            changes.push(Change::Load {
                texture: index,
                mip,
            });
        }
        changes
    }

    /// The texture to evict from next, never `except`.
    fn victim(&self, frame: u64, except: usize) -> Option<usize> {
        self.textures
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != except)
            .filter_map(|(i, t)| t.eviction_class(frame).map(|c| (c, t.last_used, i)))
            .min()
            .map(|(_, _, i)| i)
    }

    fn evict(&mut self, index: usize) -> Change {
        let t = &mut self.textures[index];
        let mip = t.base;
        t.base += 1;
        self.resident -= t.mip_bytes[mip as usize];
        Change::Evict {
            texture: index,
            mip,
        }
    }

    /// A load finished: on success the mip becomes resident, otherwise its
    /// reservation is released and the texture stops asking for it.
    pub(crate) fn landed(&mut self, index: usize, ok: bool) {
        let t = &mut self.textures[index];
        let Some(mip) = t.in_flight.take() else {
            return;
        };
        let bytes = t.unit_bytes(mip);
        self.in_flight -= bytes;
        if ok {
            t.base = mip;
            self.resident += bytes;
        } else {
            t.failed_at = Some(mip);
        }
    }

    /// Raises the budget (or lowers it; nothing is evicted until the next
    /// plan needs room, so resident bytes may exceed a lowered budget until
    /// then).
    pub(crate) fn set_budget(&mut self, budget: u64) {
        self.budget = budget;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1024x1024 BC7 texture: 11 mips, tail from mip 3 (128x128 and down).
    fn bc7_1k() -> TextureResidency {
        let bytes = (0..11u32).map(|m| {
            let side = (1024u64 >> m).max(1);
            side.div_ceil(4) * side.div_ceil(4) * 16
        });
        TextureResidency::new(bytes.collect(), 3)
    }

    fn apply_landings(r: &mut Residency, changes: &[Change]) {
        for c in changes {
            if let Change::Load { texture, .. } = *c {
                r.landed(texture, true);
            }
        }
    }

    #[test]
    fn tail_loads_first_and_finer_mips_follow_the_screen() {
        let mut r = Residency::new(u64::MAX);
        let t = r.add(bc7_1k());
        let tail = r.texture(t).unit_bytes(3);
        let changes = r.plan(1, 8);
        assert_eq!(changes, vec![Change::Load { texture: t, mip: 3 }]);
        r.landed(t, true);
        assert_eq!(r.resident_bytes(), tail);
        // Nothing wants more: nothing loads.
        assert!(r.plan(2, 8).is_empty());
        r.want(t, 1, 3);
        assert_eq!(r.plan(3, 8), vec![Change::Load { texture: t, mip: 2 }]);
        r.landed(t, true);
        assert_eq!(r.plan(3, 8), vec![Change::Load { texture: t, mip: 1 }]);
        r.landed(t, true);
        assert!(r.plan(3, 8).is_empty());
        assert_eq!(r.texture(t).base(), Some(1));
    }

    #[test]
    fn budget_holds_under_pressure_and_lru_goes_first() {
        let mut r = Residency::new(0);
        let a = r.add(bc7_1k());
        let b = r.add(bc7_1k());
        let tail = r.texture(a).unit_bytes(3);
        let mip2 = r.texture(a).unit_bytes(2);
        // Room for both tails and one extra mip 2.
        r.set_budget(2 * tail + mip2);
        let c = r.plan(1, 8);
        apply_landings(&mut r, &c);
        r.want(a, 2, 2);
        let c = r.plan(2, 8);
        assert_eq!(c, vec![Change::Load { texture: a, mip: 2 }]);
        apply_landings(&mut r, &c);
        // Now only b is on screen and wants mip 2: a's mip 2 (unused this
        // frame) is evicted to make room.
        r.want(b, 2, 3);
        let c = r.plan(3, 8);
        assert_eq!(
            c,
            vec![
                Change::Evict { texture: a, mip: 2 },
                Change::Load { texture: b, mip: 2 }
            ]
        );
        apply_landings(&mut r, &c);
        assert!(r.resident_bytes() <= r.budget());
        // Both on screen, both want mip 2: the budget holds one, and a
        // needed mip is never evicted for another.
        r.want(a, 2, 4);
        r.want(b, 2, 4);
        assert!(r.plan(4, 8).is_empty());
    }

    #[test]
    fn random_wants_never_exceed_the_budget() {
        // A small deterministic generator: the rule must hold for any
        // sequence, not one hand-picked.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut r = Residency::new(0);
        for _ in 0..12 {
            r.add(bc7_1k());
        }
        r.set_budget(r.floor_bytes() + 3 * 1024 * 1024);
        let mut out: Vec<(usize, u64)> = Vec::new();
        for frame in 1..2000u64 {
            for _ in 0..(next() % 6) {
                r.want((next() % 12) as usize, (next() % 4) as u8, frame);
            }
            for c in r.plan(frame, (next() % 4) as usize + 1) {
                if let Change::Load { texture, .. } = c {
                    out.push((texture, frame + next() % 5));
                }
            }
            out.retain(|&(t, at)| {
                if at <= frame {
                    r.landed(t, next() % 50 != 0);
                    false
                } else {
                    true
                }
            });
            assert!(r.resident_bytes() + r.in_flight_bytes() <= r.budget());
            let sum: u64 = (0..12).map(|i| r.texture(i).resident_bytes()).sum();
            assert_eq!(sum, r.resident_bytes());
        }
    }
}
