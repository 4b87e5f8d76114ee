//! The CPU decode stage: a pool of threads that check and decode one part
//! each, straight into its final place: the request's host memory, or its
//! slot of mapped staging (for GPU destinations).

use crossbeam::channel::{Receiver, Sender};

use super::job::JobCtl;
use super::plan::{BlockData, Part, Place};
use super::RequestError;
use crate::codec::MAX_BLOCK_SIZE;
use crate::destinations::HostClaim;
use crate::staging::SlotWriter;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// A fixed pool of decode threads fed through one channel.
pub(crate) struct Pool {
    tx: Option<Sender<Task>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    pub(crate) fn new(n: usize) -> std::io::Result<Pool> {
        let (tx, rx): (Sender<Task>, Receiver<Task>) = crossbeam::channel::unbounded();
        let threads = (0..n.max(1))
            .map(|i| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("gpustream-decode-{i}"))
                    .spawn(move || {
                        while let Ok(task) = rx.recv() {
                            task();
                        }
                    })
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Pool {
            tx: Some(tx),
            threads,
        })
    }

    pub(crate) fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Box::new(f));
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; MAX_BLOCK_SIZE]);
}

/// Checks and decodes one block into `out` (its declared size).
fn decode_block(part: &Part, stored: &[u8], out: &mut [u8]) -> Result<(), RequestError> {
    let stored =
        stored
            .get(..part.block.stored as usize)
            .ok_or_else(|| RequestError::ShortRead {
                file: part.block.file_path(),
                block: part.block.describe(),
                offset: part.block.offset,
                needed: part.block.stored as u64,
                got: stored.len() as u64,
            })?;
    match &part.block.data {
        BlockData::File(pf, id) => pf
            .pack
            .check_block(*id, stored, out)
            .map_err(RequestError::Pack),
        // Stored bytes in memory (an assembled packed-mips stream can exceed
        // one block) are copied as they are.
        BlockData::Memory(..) if part.block.codec == crate::codec::Codec::None => {
            if stored.len() != out.len() {
                return Err(RequestError::Codec(crate::codec::CodecError::WrongLength {
                    codec: part.block.codec,
                    expected: out.len(),
                    got: stored.len(),
                }));
            }
            out.copy_from_slice(stored);
            Ok(())
        }
        BlockData::Memory(..) => part
            .block
            .codec
            .decompress_into(stored, out)
            .map_err(RequestError::Codec),
    }
}

/// Decodes one part and writes its slice where it goes. Returns the result
/// and the bytes the host copied on the way (for the copies-per-byte stat).
///
/// GPU-bound parts write their bytes tightly packed into their staging slot
/// (`staging`); the GPU's stored-copy pass lays rows out for the
/// destination, so no thread here re-pitches rows.
pub(crate) fn decode_part(
    part: &Part,
    stored: &[u8],
    ctl: &JobCtl,
    claim: Option<&HostClaim>,
    staging: Option<SlotWriter>,
) -> (Result<(), RequestError>, u64) {
    let size = part.block.size as usize;
    let take = part.take.start as usize..part.take.end as usize;
    let whole = take.start == 0 && take.end == size;
    let stored_copy = |n: usize| {
        if part.block.codec == crate::codec::Codec::None {
            n as u64
        } else {
            0
        }
    };
    match (&part.place, claim) {
        (Place::Memory { offset }, Some(claim)) => {
            // Writers share the gate; `cancel` takes it exclusively, so once
            // it returns no write is under way and none starts.
            let Some(_gate) = ctl.write_gate() else {
                return (Err(RequestError::Cancelled), 0);
            };
            // SAFETY: this part alone writes its range of the claim, and the
            // gate serialises against cancel.
            let Some(dst) = (unsafe { claim.part_mut(*offset..*offset + take.len()) }) else {
                return (
                    Err(RequestError::Internal(
                        "a part's range leaves its host-memory claim".into(),
                    )),
                    0,
                );
            };
            if whole {
                // Decoded straight into the destination; a stored block is
                // one memcpy from the read buffer.
                return (decode_block(part, stored, dst), stored_copy(dst.len()));
            }
            with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                Ok(()) => {
                    dst.copy_from_slice(&scratch[take.clone()]);
                    (Ok(()), take.len() as u64)
                }
                Err(e) => (Err(e), 0),
            })
        }
        (Place::Buffer { .. } | Place::Texture { .. } | Place::Pieces(..), _) => {
            let Some(mut slot) = staging else {
                return (Err(RequestError::NoGpu), 0);
            };
            let out = slot.as_mut_slice();
            if out.len() < take.len() {
                return (
                    Err(RequestError::Internal(
                        "a staging slot is smaller than its part".into(),
                    )),
                    0,
                );
            }
            let pitched_rows = match &part.place {
                Place::Texture { layout, .. } => {
                    layout.row_pitch != layout.row_bytes && layout.rows > 1
                }
                Place::Pieces(..) => true,
                _ => false,
            };
            if part.pitched && pitched_rows {
                // Rows at the destination's pitch, for plain copies: each
                // region (each piece) 256 bytes after the one before.
                return with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                    Ok(()) => {
                        let mut at = 0usize;
                        for (range, place) in part.outputs() {
                            let Place::Texture { layout, .. } = place else {
                                continue;
                            };
                            let (rb, rp) = (layout.row_bytes as usize, layout.row_pitch as usize);
                            let Some(src) = scratch.get(range.start as usize..range.end as usize)
                            else {
                                return (
                                    Err(RequestError::Internal(
                                        "a piece leaves its decoded block".into(),
                                    )),
                                    0,
                                );
                            };
                            for (r, row) in src.chunks(rb.max(1)).enumerate() {
                                let o = at + r * rp;
                                match out.get_mut(o..o + row.len()) {
                                    Some(d) => d.copy_from_slice(row),
                                    None => {
                                        return (
                                            Err(RequestError::Internal(
                                                "a staging slot is smaller than its part".into(),
                                            )),
                                            0,
                                        )
                                    }
                                }
                            }
                            at += (layout.padded_size() as usize).next_multiple_of(256);
                        }
                        (Ok(()), take.len() as u64)
                    }
                    Err(e) => (Err(e), 0),
                });
            }
            let (body, pad) = out.split_at_mut(take.len());
            // Buffer copies move whole words: the slot's tail is zeroed.
            pad.fill(0);
            if whole {
                return (decode_block(part, stored, body), stored_copy(body.len()));
            }
            with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                Ok(()) => {
                    body.copy_from_slice(&scratch[take.clone()]);
                    (Ok(()), take.len() as u64)
                }
                Err(e) => (Err(e), 0),
            })
        }
        (Place::Memory { .. }, None) => (
            Err(RequestError::Internal(
                "memory destination without a claim".into(),
            )),
            0,
        ),
    }
}

fn with_scratch<R>(size: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < size {
            s.resize(size, 0);
        }
        f(&mut s[..size])
    })
}
