//! The descriptor tables of one GPU batch, by output target.
//!
//! A batch's decode and copy passes write the output scratch, and a
//! destination buffer with enough parts in the batch is written directly
//! (`destinations::gpu_copies::DirectRule`): bound as the output of passes
//! of its own, so its bytes need no scratch and no copy. Every target gets
//! its run of the batch's LZ4, GDeflate and stored-copy tables (and of the status
//! tables, which are indexed alike), each run starting on a multiple of 64
//! entries: 64 status words and 8 descriptors are 256 bytes, the storage
//! offset alignment every device allows, so a pass binds its run as a
//! slice of the shared buffers.

use std::ops::Range;

use crate::decode::BlockDesc;

use super::batch_status::table;

/// Entries a target's run starts on a multiple of.
pub(crate) const RUN_ALIGN: usize = 64;

/// The LZ4, GDeflate and stored-copy descriptors of one batch, per target
/// (0: the scratch; `1 + g`: direct output `g`), each kept under its
/// status table's number (`table::LZ4`, `table::GDEFLATE`,
/// `table::STORED`).
pub(crate) struct BatchTables {
    lz4: Vec<Vec<BlockDesc>>,
    gdeflate: Vec<Vec<BlockDesc>>,
    stored: Vec<Vec<BlockDesc>>,
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
    pub lz4: Vec<BlockDesc>,
    pub gdeflate: Vec<BlockDesc>,
    pub stored: Vec<BlockDesc>,
    /// Per target, its run in `lz4`, `gdeflate` and `stored`.
    pub lz4_runs: Vec<Range<usize>>,
    pub gdeflate_runs: Vec<Range<usize>>,
    pub stored_runs: Vec<Range<usize>>,
}

impl BatchTables {
    /// Tables for the scratch and `direct` destination buffers.
    pub fn new(direct: usize) -> BatchTables {
        BatchTables {
            lz4: vec![Vec::new(); direct + 1],
            gdeflate: vec![Vec::new(); direct + 1],
            stored: vec![Vec::new(); direct + 1],
        }
    }

    fn table(&mut self, t: usize) -> &mut Vec<Vec<BlockDesc>> {
        match t {
            table::LZ4 => &mut self.lz4,
            table::GDEFLATE => &mut self.gdeflate,
            _ => &mut self.stored,
        }
    }

    /// The next index in `target`'s run of table `t`.
    pub fn next(&mut self, target: usize, t: usize) -> u32 {
        self.table(t)[target].len() as u32
    }

    /// Adds a descriptor to `target`'s run of table `t`.
    pub fn push(&mut self, target: usize, t: usize, desc: BlockDesc) {
        self.table(t)[target].push(desc);
    }

    /// Lays the runs out back to back, each on a multiple of [`RUN_ALIGN`];
    /// the padding between runs is never dispatched.
    pub fn lay_out(self) -> Laid {
        let flat = |t: Vec<Vec<BlockDesc>>| {
            let mut out: Vec<BlockDesc> = Vec::new();
            let mut runs = Vec::with_capacity(t.len());
            for run in t {
                // An empty run is never dispatched: it takes no padding.
                let at = match run.len() {
                    0 => out.len(),
                    _ => out.len().next_multiple_of(RUN_ALIGN),
                };
                out.resize(at, BlockDesc::linear(0, 0, 0, 0));
                out.extend_from_slice(&run);
                runs.push(at..out.len());
            }
            (out, runs)
        };
        let (lz4, lz4_runs) = flat(self.lz4);
        let (gdeflate, gdeflate_runs) = flat(self.gdeflate);
        let (stored, stored_runs) = flat(self.stored);
        Laid {
            lz4,
            gdeflate,
            stored,
            lz4_runs,
            gdeflate_runs,
            stored_runs,
        }
    }
}

impl Laid {
    /// A part's status slots in the laid-out tables: (table, first, count).
    pub fn slot(&self, s: LocalSlot) -> (usize, u32, u32) {
        let runs = match s.table {
            table::LZ4 => &self.lz4_runs,
            table::GDEFLATE => &self.gdeflate_runs,
            _ => &self.stored_runs,
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
            t.push(0, table::LZ4, BlockDesc::linear(i, 1, 0, 1));
        }
        t.push(2, table::LZ4, BlockDesc::linear(99, 1, 0, 1));
        t.push(1, table::STORED, BlockDesc::linear(7, 1, 0, 1));
        t.push(1, table::GDEFLATE, BlockDesc::linear(8, 1, 0, 1));
        let laid = t.lay_out();
        assert_eq!(laid.lz4_runs, vec![0..70, 70..70, 128..129]);
        assert_eq!(laid.lz4[128].src_offset, 99);
        assert_eq!(laid.stored_runs, vec![0..0, 0..1, 1..1]);
        assert_eq!(laid.gdeflate_runs, vec![0..0, 0..1, 1..1]);
        assert_eq!(laid.gdeflate[0].src_offset, 8);
        let s = LocalSlot {
            table: table::LZ4,
            target: 2,
            first: 0,
            count: 1,
        };
        assert_eq!(laid.slot(s), (table::LZ4, 128, 1));
        // 64 status words and 8 descriptors are 256 bytes.
        assert_eq!(RUN_ALIGN * 4 % 256, 0);
        assert_eq!(RUN_ALIGN * std::mem::size_of::<BlockDesc>() % 256, 0);
    }
}
