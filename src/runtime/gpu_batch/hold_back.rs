//! Holding back a mip's unfinished rows when a full batch is cut.
//!
//! A batch is cut where the next staging chunk does not fit it, which often
//! falls inside a mip: the batch then holds the mip's first rows of tiles
//! and part of the next row. Copied as they are, those take two
//! `copy_buffer_to_texture` (the whole rows, then the partial row), and the
//! next batch's part of the mip takes two more. So the parts the last of
//! such a mip's copies would move (`gpu_copies::unfinished_row`) leave the
//! batch being cut and join the next one: their bytes are copied from the
//! old batch's input into the new one's, on the GPU. Each batch then copies
//! its part of the mip as one rectangle. Only what fits the next batch
//! beside the chunk that did not fit is held back, at most half a batch.
//!
//! Which mips continue is not known here for all of them (a request may
//! cover only some of a mip's tiles), so the unfinished row of every mip
//! the batch's last chunk holds is held back, and of every mip with parts
//! already landed in chunks the batch has not taken; a part is held back at
//! most once. Chunks reach a batch in the order they were filled
//! (`StagingRing::ready`), but reads are placed in file order within each
//! turn of the submission thread, so a mip's last tiles can land behind
//! other parts: the second rule is for those.

use std::collections::{HashMap, HashSet};

use crate::destinations::gpu_copies::unfinished_row;

use super::super::gpu_direct::part_dests;
use super::super::job_table::JobTable;
use super::super::plan::{Part, Place};
use super::{Entry, Finished, GpuBatcher};

/// Where held-back bytes land in the next batch's input, and how they keep
/// their offsets (staging slots and chunk copies are aligned the same way).
const ALIGN: u64 = crate::staging::STAGING_ALIGN;

/// Parts held back from a cut batch, their bytes still in its input: those
/// buffers are not opened again before the next batch takes the parts, and
/// the copy out of them is submitted before anything that could write them.
pub(super) struct HeldBack {
    /// The batch buffers they come from.
    pub from: usize,
    pub entries: Vec<Entry>,
}

/// (texture, mip, array layer) of a part that writes one texture region.
type MipKey<'j> = (&'j wgpu::Texture, u32, u32);

fn mip_key<'j>(part: &Part, jobs: &'j JobTable) -> Option<MipKey<'j>> {
    let Place::Texture { mip, origin, .. } = &part.place else {
        return None;
    };
    match &jobs.get(part.job)?.destination {
        crate::runtime::request::Destination::Texture { texture, .. } => {
            Some((texture, *mip, origin.z))
        }
        _ => None,
    }
}

impl GpuBatcher {
    /// Takes out of the open batch, about to be flushed because the next
    /// chunk does not fit it, the unfinished rows of each of its mips.
    /// `None` when there are none, or when they and the chunk, needing
    /// `chunk` (input bytes, output weight, descriptors), would not fit a
    /// batch together. The next batch to open takes them
    /// ([`Self::take_held_back`]).
    // A texture hashes and compares by its handle's identity, which the
    // interior mutability clippy sees in it never changes.
    #[allow(clippy::mutable_key_type)]
    pub(super) fn hold_back_rows(
        &mut self,
        jobs: &JobTable,
        chunk: (u64, u64, u64),
    ) -> Option<HeldBack> {
        if self.held_back.is_some() {
            return None;
        }
        let region_min = self.ring.region_weight();
        let open = self.open.as_mut()?;
        // The mips of the chunk added last: a batch takes chunks in the
        // order their parts were placed, so a mip cut by this batch's end
        // has parts there. Parts held back once are not held back again.
        let mut keys: HashSet<MipKey<'_>> = HashSet::new();
        for e in &open.entries[open.last_chunk..] {
            if let Some(key) = mip_key(&e.part, jobs).filter(|_| !e.held) {
                keys.insert(key);
            }
        }
        // And the mips with parts already landed in chunks the batch has
        // not taken (the chunk that did not fit among them): those mips
        // continue for certain. Reads are placed in file order within each
        // turn of the submission thread, so a turn boundary inside a mip
        // can put its last tiles behind other parts, and the rest of its
        // row outside the last chunk (measured: the last extra copies of
        // sustained runs). Sets, not lists: a ring of small tiles holds
        // thousands of parts of hundreds of mips.
        for s in self.staged.iter().flatten() {
            if let Some(key) = mip_key(&s.part, jobs) {
                keys.insert(key);
            }
        }
        // Each of those mips' parts in the whole batch (a mip with none
        // holds nothing back).
        let mut mips: HashMap<MipKey<'_>, Vec<usize>> = HashMap::new();
        for (i, e) in open.entries.iter().enumerate() {
            if e.held || !matches!(e.part.place, Place::Texture { .. }) {
                continue;
            }
            if let Some(key) = mip_key(&e.part, jobs).filter(|k| keys.contains(k)) {
                mips.entry(key).or_default().push(i);
            }
        }
        let mut hold: Vec<usize> = Vec::new();
        let mut dests = Vec::new();
        for idx in mips.values() {
            dests.clear();
            let complete = idx.iter().all(|&i| {
                let part = &open.entries[i].part;
                part_dests(part, jobs.get(part.job).map(|j| &j.destination), &mut dests)
            });
            if complete && dests.len() == idx.len() {
                hold.extend(unfinished_row(&dests).into_iter().map(|j| idx[j]));
            }
        }
        // The batch keeps at least one part (so it is flushed, and the next
        // one gets other buffers), and what moves leaves the next batch at
        // least half its input for the chunks that follow, this one first.
        // Each part's copy may take up to 255 bytes more than the part
        // (`take_held_back` keeps offsets modulo 256).
        let parts = hold.iter().map(|&i| &open.entries[i]);
        let bytes: u64 = parts.clone().map(|e| e.len as u64 + 512).sum();
        let weight: u64 = parts.clone().map(|e| e.part.gpu_out(region_min)).sum();
        let descs: u64 = parts.map(|e| e.part.descs()).sum();
        let (used, chunk_weight, chunk_descs) = chunk;
        let fits = bytes <= self.caps.input / 2
            && bytes + used <= self.caps.input
            && weight + chunk_weight <= self.caps.output
            && descs + chunk_descs <= self.caps.blocks;
        if hold.is_empty() || hold.len() == open.entries.len() || !fits {
            return None;
        }
        // Highest first, so each swap_remove moves an entry that stays.
        hold.sort_unstable();
        let mut entries = Vec::with_capacity(hold.len());
        for &i in hold.iter().rev() {
            let e = open.entries.swap_remove(i);
            open.descs -= e.part.descs();
            open.out_need = open.out_need.saturating_sub(e.part.gpu_out(region_min));
            entries.push(e);
        }
        if let Some(j) = entries.first().and_then(|e| jobs.get(e.part.job)) {
            j.stats(|st| st.texture_parts_held_back += entries.len() as u64);
        }
        Some(HeldBack {
            from: open.res,
            entries,
        })
    }

    /// Adds parts held back from the previous batch to the open one (the
    /// first batch opened since), copying their bytes between the two
    /// batches' inputs with `enc`. The open batch may have the buffers they
    /// are in (the previous batch was done, or freed unsubmitted, by the
    /// time it opened): the bytes are then where they were, and the held
    /// parts are flushed at once as a batch of their own, leaving none open.
    pub(super) fn take_held_back(
        &mut self,
        enc: &mut wgpu::CommandEncoder,
        held: HeldBack,
        jobs: &JobTable,
        done: &mut Vec<Finished>,
    ) {
        let region_min = self.ring.region_weight();
        let open = self.open.as_mut().expect("a batch is open");
        let mut entries = held.entries;
        if open.res == held.from {
            for e in &mut entries {
                e.held = true;
                open.descs += e.part.descs();
                open.out_need += e.part.gpu_out(region_min);
                let end = (e.src + e.len as u64).next_multiple_of(ALIGN);
                open.input_used = open.input_used.max(end);
            }
            open.entries.extend(entries);
            self.flush(jobs, done);
            return;
        }
        let (from, to) = (&self.res[held.from].input, &self.res[open.res].input);
        entries.sort_unstable_by_key(|e| e.src);
        let mut i = 0;
        while i < entries.len() {
            // One copy per run of entries whose bytes touch. A run starts
            // on a 256-byte boundary and lands on one, so every part keeps
            // its offset modulo 256: a part copied straight to a texture
            // from the input needs its texel-block alignment.
            let start = entries[i].src & !(ALIGN - 1);
            let mut end = (entries[i].src + entries[i].len as u64).next_multiple_of(4);
            let mut j = i + 1;
            while j < entries.len() && entries[j].src & !(ALIGN - 1) <= end {
                end = end.max((entries[j].src + entries[j].len as u64).next_multiple_of(4));
                j += 1;
            }
            let base = open.input_used;
            enc.copy_buffer_to_buffer(from, start, to, base, end - start);
            for e in &mut entries[i..j] {
                e.src = base + (e.src - start);
                e.held = true;
                open.descs += e.part.descs();
                open.out_need += e.part.gpu_out(region_min);
            }
            open.input_used = (base + (end - start)).next_multiple_of(ALIGN);
            i = j;
        }
        open.entries.extend(entries);
    }
}
