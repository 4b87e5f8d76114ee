//! Residency on the CPU: the physical tile pool's slots, the page tables
//! (one region of one `u32` buffer per virtual texture), which tiles are
//! resident, loading or failed, and the decisions each frame makes: what to
//! load (coarse to fine) and what to evict (least recently needed, only
//! tiles with no finer tile resident or loading, and a slot is reused only
//! once the frames that could still sample it have finished on the GPU).

use std::collections::{HashMap, HashSet, VecDeque};

/// One tile of one tiled mip of one virtual texture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileKey {
    /// The virtual texture.
    pub tex: u32,
    /// The mip.
    pub mip: u8,
    /// Tile column.
    pub x: u32,
    /// Tile row.
    pub y: u32,
}

impl TileKey {
    /// Decodes a feedback word (`1<<31 | tex<<20 | mip<<16 | y<<8 | x`;
    /// 0 = no tile wanted); `None` for 0 or a word outside the geometry.
    pub fn from_feedback(w: u32, geo: &Geometry) -> Option<TileKey> {
        if w & 0x8000_0000 == 0 {
            return None;
        }
        let k = TileKey {
            tex: (w >> 20) & 0x7ff,
            mip: ((w >> 16) & 0xf) as u8,
            x: w & 0xff,
            y: (w >> 8) & 0xff,
        };
        geo.contains(&k).then_some(k)
    }

    /// The tile one mip coarser that covers this one.
    pub fn parent(&self) -> TileKey {
        TileKey {
            tex: self.tex,
            mip: self.mip + 1,
            x: self.x / 2,
            y: self.y / 2,
        }
    }
}

/// The page-table layout shared by every virtual texture (they all have
/// the same size and format).
#[derive(Clone, Debug)]
pub struct Geometry {
    /// Number of virtual textures.
    pub textures: u32,
    /// Per tiled mip (finest first): (entry offset within a texture's
    /// page table, tiles across, tiles down).
    pub mips: Vec<(u32, u32, u32)>,
    /// Page-table entries per texture.
    pub per_texture: u32,
}

impl Geometry {
    /// The layout for `textures` textures whose tiled mips have the given
    /// tile grids (finest first).
    pub fn new(textures: u32, grids: &[(u32, u32)]) -> Geometry {
        let mut off = 0;
        let mips = grids
            .iter()
            .map(|&(x, y)| {
                let e = (off, x, y);
                off += x * y;
                e
            })
            .collect();
        Geometry {
            textures,
            mips,
            per_texture: off,
        }
    }

    /// Tiled mips per texture.
    pub fn tiled_mips(&self) -> u8 {
        self.mips.len() as u8
    }

    /// Whether `k` names a tile of a tiled mip.
    pub fn contains(&self, k: &TileKey) -> bool {
        k.tex < self.textures
            && self
                .mips
                .get(k.mip as usize)
                .is_some_and(|&(_, x, y)| k.x < x && k.y < y)
    }

    /// The page-table index of `k`.
    pub fn index(&self, k: &TileKey) -> usize {
        let (off, x, _) = self.mips[k.mip as usize];
        (k.tex * self.per_texture + off + k.y * x + k.x) as usize
    }

    /// Whether `k` is on the coarsest tiled mip (its parent is packed).
    pub fn is_coarsest(&self, k: &TileKey) -> bool {
        k.mip as usize + 1 >= self.mips.len()
    }
}

#[derive(Clone, Copy, Debug)]
struct Resident {
    slot: u32,
    last_used: u64,
}

/// What one frame's planning decided.
#[derive(Debug, Default)]
pub struct Plan {
    /// Tiles wanted and not resident (before the upload limit).
    pub requested: usize,
    /// Tiles to load now, each into its pool slot (coarse first).
    pub loads: Vec<(TileKey, u32)>,
    /// Tiles evicted (page-table entries cleared this frame).
    pub evicted: usize,
}

/// The pool, the page tables and the residency state.
pub struct Residency {
    /// The page-table layout.
    pub geo: Geometry,
    /// The page tables: 0 = not resident, else pool slot + 1.
    pub page_table: Vec<u32>,
    /// Whether `page_table` changed since the last upload.
    pub dirty: bool,
    pool: u32,
    free: Vec<u32>,
    /// Slots evicted at frame f: reusable once frame f - 1 has completed.
    quarantine: VecDeque<(u64, u32)>,
    resident: HashMap<TileKey, Resident>,
    loading: HashMap<TileKey, u32>,
    /// Children resident or loading, per tile: a tile with any cannot be
    /// evicted (that would leave a finer mip without its coarser fallback).
    children: HashMap<TileKey, u32>,
    failed: HashSet<TileKey>,
}

impl Residency {
    /// An empty pool of `pool` slots.
    pub fn new(geo: Geometry, pool: u32) -> Residency {
        Residency {
            page_table: vec![0; (geo.textures * geo.per_texture) as usize],
            geo,
            dirty: true,
            pool,
            free: (0..pool).rev().collect(),
            quarantine: VecDeque::new(),
            resident: HashMap::new(),
            loading: HashMap::new(),
            children: HashMap::new(),
            failed: HashSet::new(),
        }
    }

    /// Slots holding or receiving a tile.
    pub fn occupied(&self) -> usize {
        self.resident.len() + self.loading.len()
    }

    /// Tiles resident (visible to the shader).
    pub fn resident_count(&self) -> usize {
        self.resident.len()
    }

    /// Tiles whose load is in flight.
    pub fn loading_count(&self) -> usize {
        self.loading.len()
    }

    /// Tiles that failed to load (never requested again).
    pub fn failed_count(&self) -> usize {
        self.failed.len()
    }

    /// Pool size in slots.
    pub fn pool(&self) -> u32 {
        self.pool
    }

    /// Whether `k` is resident.
    pub fn is_resident(&self, k: &TileKey) -> bool {
        self.resident.contains_key(k)
    }

    fn add_child(&mut self, k: &TileKey) {
        if !self.geo.is_coarsest(k) {
            *self.children.entry(k.parent()).or_default() += 1;
        }
    }

    fn remove_child(&mut self, k: &TileKey) {
        if !self.geo.is_coarsest(k) {
            let p = k.parent();
            if let Some(n) = self.children.get_mut(&p) {
                *n -= 1;
                if *n == 0 {
                    self.children.remove(&p);
                }
            }
        }
    }

    /// Returns quarantined slots to the free list once `completed_frame`
    /// (the newest frame the GPU has finished) is past the frames that
    /// could still sample them.
    pub fn release(&mut self, completed_frame: Option<u64>) {
        while let Some(&(f, slot)) = self.quarantine.front() {
            // Evicted at frame f: frames up to f - 1 may still read it.
            let safe = f == 0 || completed_frame.is_some_and(|c| c + 1 >= f);
            if !safe {
                break;
            }
            self.quarantine.pop_front();
            self.free.push(slot);
        }
    }

    /// A load finished: `ok` makes the tile visible (its page-table entry
    /// is written), a failure frees the slot and never asks for it again.
    pub fn complete(&mut self, k: TileKey, slot: u32, ok: bool, frame: u64) {
        if self.loading.remove(&k).is_none() {
            return;
        }
        if ok {
            self.resident.insert(
                k,
                Resident {
                    slot,
                    last_used: frame,
                },
            );
            let i = self.geo.index(&k);
            self.page_table[i] = slot + 1;
            self.dirty = true;
        } else {
            self.remove_child(&k);
            self.failed.insert(k);
            self.free.push(slot);
        }
    }

    /// Plans frame `frame` from the tiles the latest feedback asked for:
    /// marks them and their ancestors as used, picks at most `max_loads`
    /// tiles to load (each wanted tile and its missing ancestors, coarse
    /// mips first, so no tile is loaded before its parent), and evicts least recently used tiles to make
    /// room.
    pub fn plan(&mut self, wanted: &HashSet<TileKey>, frame: u64, max_loads: usize) -> Plan {
        let mut want: HashSet<TileKey> = HashSet::new();
        for k in wanted {
            // Walk from the coarsest ancestor down so the first missing
            // tile found is the one to load first.
            let mut chain = vec![*k];
            let mut c = *k;
            while !self.geo.is_coarsest(&c) {
                c = c.parent();
                chain.push(c);
            }
            // Every missing tile of the chain is wanted at once (the sort
            // below puts parents first, in this batch or an earlier one),
            // so reaching mip 0 costs one round trip instead of one per mip.
            for t in chain.iter().rev() {
                if let Some(r) = self.resident.get_mut(t) {
                    r.last_used = frame;
                } else if self.failed.contains(t) {
                    break;
                } else if !self.loading.contains_key(t) {
                    want.insert(*t);
                }
            }
        }
        let mut plan = Plan {
            requested: want.len(),
            ..Plan::default()
        };
        let mut order: Vec<TileKey> = want.into_iter().collect();
        // Coarse first; then a stable order so runs are reproducible.
        order.sort_by(|a, b| b.mip.cmp(&a.mip).then(a.cmp(b)));
        order.truncate(max_loads);

        // Evict enough for this frame's loads; evicted slots become free
        // only after the frames in flight (see `release`).
        let short = order.len().saturating_sub(self.free.len());
        if short > 0 {
            let mut victims: Vec<(u64, TileKey)> = self
                .resident
                .iter()
                .filter(|(k, r)| r.last_used < frame && !self.children.contains_key(k))
                .map(|(k, r)| (r.last_used, *k))
                .collect();
            victims.sort();
            for (_, k) in victims.into_iter().take(short) {
                let r = self.resident.remove(&k).expect("victim is resident");
                self.remove_child(&k);
                let i = self.geo.index(&k);
                self.page_table[i] = 0;
                self.dirty = true;
                self.quarantine.push_back((frame, r.slot));
                plan.evicted += 1;
            }
        }
        for k in order {
            let Some(slot) = self.free.pop() else { break };
            self.loading.insert(k, slot);
            self.add_child(&k);
            plan.loads.push((k, slot));
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        // Mips 0..3 tiled: 4x4, 2x2, 1x1.
        Geometry::new(2, &[(4, 4), (2, 2), (1, 1)])
    }

    #[test]
    fn loads_coarse_first_and_evicts_leaves_only() {
        let mut r = Residency::new(geo(), 3);
        let fine = TileKey {
            tex: 0,
            mip: 0,
            x: 3,
            y: 3,
        };
        let want: HashSet<_> = [fine].into();
        let p = r.plan(&want, 1, 8);
        let mips: Vec<u8> = p.loads.iter().map(|(k, _)| k.mip).collect();
        assert_eq!(mips, vec![2, 1, 0], "the chain, coarsest first");
        assert_eq!(p.loads[2].0, fine);
        // Loading tiles are not asked for again.
        assert!(r.plan(&want, 1, 8).loads.is_empty());
        // The upload limit keeps the coarse end of the chain.
        let other: HashSet<_> = [TileKey {
            tex: 1,
            mip: 0,
            x: 0,
            y: 0,
        }]
        .into();
        let mut r2 = Residency::new(geo(), 3);
        let p2 = r2.plan(&other, 1, 2);
        assert_eq!(
            p2.loads.iter().map(|(k, _)| k.mip).collect::<Vec<_>>(),
            vec![2, 1]
        );
        for (k, s) in p.loads {
            r.complete(k, s, true, 1);
        }
        assert_eq!(r.resident_count(), 3);
        // Another texture's tile: the pool is full; only the mip-0 leaf may go.
        let other: HashSet<_> = [TileKey {
            tex: 1,
            mip: 2,
            x: 0,
            y: 0,
        }]
        .into();
        let p = r.plan(&other, 4, 8);
        assert_eq!(p.evicted, 1);
        assert!(
            p.loads.is_empty(),
            "the evicted slot waits for frames in flight"
        );
        assert!(!r.is_resident(&fine));
        assert_eq!(r.page_table[r.geo.index(&fine)], 0);
        r.release(Some(3));
        let p = r.plan(&other, 5, 8);
        assert_eq!(p.loads.len(), 1);
    }

    #[test]
    fn feedback_words_outside_the_geometry_are_dropped() {
        let g = geo();
        assert_eq!(TileKey::from_feedback(0, &g), None);
        let w = 0x8000_0000 | (1 << 20) | (1 << 16) | (1 << 8) | 1;
        assert_eq!(
            TileKey::from_feedback(w, &g),
            Some(TileKey {
                tex: 1,
                mip: 1,
                x: 1,
                y: 1
            })
        );
        assert_eq!(TileKey::from_feedback(w | (5 << 20), &g), None);
        assert_eq!(TileKey::from_feedback(0x8000_0000 | (3 << 16), &g), None);
    }
}
