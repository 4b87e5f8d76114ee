//! What a recorded GPU batch owes its parts: each part's entry, where its
//! status words are, and how they read. The GPU batch stage writes this
//! (`gpu_batch`), the completion stage reads it (`complete`); it sits
//! below both.

use std::time::Instant;

use crate::decode::gpu::BlockCheck;
use crate::decode::{GDeflateStatus, Lz4Status};

use super::plan::{BlockData, Part};
use crate::completion::{GpuDecodeFailure, RequestError};

/// The status tables of a batch, in the order they are copied to its
/// readback buffer, `stride` words apart.
pub(crate) mod table {
    /// LZ4 decode status words.
    pub const LZ4: usize = 0;
    /// Stored-copy status words.
    pub const STORED: usize = 1;
    /// crc32c check status words.
    pub const CHECK: usize = 2;
    /// The crc32c each check computed.
    pub const CRC: usize = 3;
    /// GDeflate decode status words.
    pub const GDEFLATE: usize = 4;
    /// How many tables.
    pub const COUNT: usize = 5;
}

/// Where a part's status words are, by table and index.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Slots {
    /// The pass that delivers the part: (`table::LZ4`, `table::GDEFLATE`
    /// or `table::STORED`,
    /// first index, count: one per region the part writes); `None` for a
    /// part copied as it is (`Part::pitched`).
    pub decode: Option<(usize, u32, u32)>,
    /// Its checksum check's index, for a block read from a pack.
    pub check: Option<u32>,
}

/// One part of a recorded batch.
pub(crate) struct BatchEntry {
    pub part: Part,
    /// The crc32c the check pass compares with (blocks read from a pack).
    pub check: Option<u32>,
    pub slots: Slots,
}

/// A batch the GPU is running: the completion stage ends its parts once
/// its status words are mapped.
pub(crate) struct BatchInFlight {
    /// Which of the batcher's buffer sets it uses.
    pub res: usize,
    pub entries: Vec<BatchEntry>,
    pub submitted: Instant,
}

/// The mapped status words of one batch.
pub(crate) struct StatusWords<'a> {
    /// The readback buffer's words; empty if the map failed, so that
    /// every block then fails rather than hangs.
    pub words: &'a [u32],
    /// Words per table.
    pub stride: usize,
    /// wgpu's noop backend ran no pass: checks count as matching.
    pub noop: bool,
}

impl StatusWords<'_> {
    fn word(&self, table: usize, i: u32) -> u32 {
        self.words
            .get(table * self.stride + i as usize)
            .copied()
            .unwrap_or(u32::MAX)
    }

    /// How a part's passes ended.
    pub fn verdict(&self, e: &BatchEntry) -> Result<(), RequestError> {
        if let (Some(i), Some(expected)) = (e.slots.check, e.check) {
            let computed = if self.noop {
                expected
            } else {
                self.word(table::CRC, i)
            };
            let check = BlockCheck::from_words(self.word(table::CHECK, i), computed, expected);
            if !check.is_ok() {
                if let (BlockCheck::Mismatch { expected, computed }, BlockData::File(pf, id)) =
                    (check, &e.part.block.data)
                {
                    return Err(RequestError::Pack(crate::pack::PackError::BlockChecksum {
                        at: pf.pack.describe_block(*id),
                        block: id.0,
                        offset: e.part.block.offset,
                        stored: expected,
                        computed,
                    }));
                }
                return Err(RequestError::GpuDecode {
                    block: e.part.block.describe(),
                    offset: e.part.block.offset,
                    failure: GpuDecodeFailure::Checksum(check),
                });
            }
        }
        let Some((t, first, count)) = e.slots.decode else {
            return Ok(());
        };
        let mut words = (first..first.saturating_add(count)).map(|i| self.word(t, i));
        let failure = if t == table::GDEFLATE {
            words
                .map(GDeflateStatus::from_word)
                .find(|st| !st.is_ok())
                .map(GpuDecodeFailure::GDeflate)
        } else {
            words
                .find_map(|w| Some(Lz4Status::from_word(w)).filter(|st| !st.is_ok()))
                .map(|st| match t {
                    table::LZ4 => GpuDecodeFailure::Lz4(st),
                    _ => GpuDecodeFailure::StoredCopy(st),
                })
        };
        match failure {
            None => Ok(()),
            Some(failure) => Err(RequestError::GpuDecode {
                block: e.part.block.describe(),
                offset: e.part.block.offset,
                failure,
            }),
        }
    }
}

/// The error of a part the GPU can no longer deliver.
pub(crate) fn lost_error(why: &str) -> RequestError {
    RequestError::DeviceLost {
        reason: why.to_string(),
    }
}
