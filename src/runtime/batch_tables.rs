//! The descriptor tables of one GPU batch, by output target.
//!
//! A batch's decode and copy passes write the output scratch, and a
//! destination buffer with enough parts in the batch is written directly
//! (`destinations::gpu_copies::DirectRule`): bound as the output of passes
//! of its own, so its bytes need no scratch and no copy. Every target gets
//! its run of the batch's LZ4 and stored-copy tables (and of the status
//! tables, which are indexed alike), each run starting on a multiple of 64
//! entries: 64 status words and 8 descriptors are 256 bytes, the storage
//! offset alignment every device allows, so a pass binds its run as a
//! slice of the shared buffers.

use std::ops::Range;

use crate::decode::Lz4BlockDesc;

use super::batch_status::table;

/// Entries a target's run starts on a multiple of.
pub(crate) const RUN_ALIGN: usize = 64;

/// The LZ4 and stored-copy descriptors of one batch, per target (0: the
/// scratch; `1 + g`: direct output `g`).
pub(crate) struct BatchTables {
    lz4: Vec<Vec<Lz4BlockDesc>>,
    stored: Vec<Vec<Lz4BlockDesc>>,
}

/// Where a part's descriptors went before the tables are laid out:
/// (status table, target, first index in that target's run, count).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalSlot {
    pub table: usize,
    pub target: usize,
    pub first: u32,
    pub count: u32,
}

/// The laid-out tables: flat, with each target's run.
pub(crate) struct Laid {
    pub lz4: Vec<Lz4BlockDesc>,
    pub stored: Vec<Lz4BlockDesc>,
    /// Per target, its run in `lz4` and in `stored`.
    pub lz4_runs: Vec<Range<usize>>,
    pub stored_runs: Vec<Range<usize>>,
}

impl BatchTables {
    /// Tables for the scratch and `direct` destination buffers.
    pub fn new(direct: usize) -> BatchTables {
        BatchTables {
            lz4: vec![Vec::new(); direct + 1],
            stored: vec![Vec::new(); direct + 1],
        }
    }

    /// The next index in `target`'s run of the LZ4 (or stored-copy) table.
    pub fn next(&self, target: usize, lz4: bool) -> u32 {
        let t = if lz4 { &self.lz4 } else { &self.stored };
        t[target].len() as u32
    }

    /// Adds a descriptor to `target`'s run of the LZ4 (or stored-copy) table.
    pub fn push(&mut self, target: usize, lz4: bool, desc: Lz4BlockDesc) {
        let t = if lz4 { &mut self.lz4 } else { &mut self.stored };
        t[target].push(desc);
    }

    /// Lays the runs out back to back, each on a multiple of [`RUN_ALIGN`];
    /// the padding between runs is never dispatched.
    pub fn lay_out(self) -> Laid {
        let flat = |t: Vec<Vec<Lz4BlockDesc>>| {
            let mut out: Vec<Lz4BlockDesc> = Vec::new();
            let mut runs = Vec::with_capacity(t.len());
            for run in t {
                // An empty run is never dispatched: it takes no padding.
                let at = match run.len() {
                    0 => out.len(),
                    _ => out.len().next_multiple_of(RUN_ALIGN),
                };
                out.resize(at, Lz4BlockDesc::linear(0, 0, 0, 0));
                out.extend_from_slice(&run);
                runs.push(at..out.len());
            }
            (out, runs)
        };
        let (lz4, lz4_runs) = flat(self.lz4);
        let (stored, stored_runs) = flat(self.stored);
        Laid {
            lz4,
            stored,
            lz4_runs,
            stored_runs,
        }
    }
}

impl Laid {
    /// A part's status slots in the laid-out tables: (table, first, count).
    pub fn slot(&self, s: LocalSlot) -> (usize, u32, u32) {
        let runs = if s.table == table::LZ4 {
            &self.lz4_runs
        } else {
            &self.stored_runs
        };
        (s.table, runs[s.target].start as u32 + s.first, s.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_start_on_whole_binding_units() {
        let mut t = BatchTables::new(2);
        for i in 0..70 {
            t.push(0, true, Lz4BlockDesc::linear(i, 1, 0, 1));
        }
        t.push(2, true, Lz4BlockDesc::linear(99, 1, 0, 1));
        t.push(1, false, Lz4BlockDesc::linear(7, 1, 0, 1));
        let laid = t.lay_out();
        assert_eq!(laid.lz4_runs, vec![0..70, 70..70, 128..129]);
        assert_eq!(laid.lz4[128].src_offset, 99);
        assert_eq!(laid.stored_runs, vec![0..0, 0..1, 1..1]);
        let s = LocalSlot {
            table: table::LZ4,
            target: 2,
            first: 0,
            count: 1,
        };
        assert_eq!(laid.slot(s), (table::LZ4, 128, 1));
        // 64 status words and 8 descriptors are 256 bytes.
        assert_eq!(RUN_ALIGN * 4 % 256, 0);
        assert_eq!(RUN_ALIGN * std::mem::size_of::<Lz4BlockDesc>() % 256, 0);
    }
}
