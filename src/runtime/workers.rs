//! The CPU decode threads and what they do with one part.

use std::sync::Mutex;

use crossbeam::channel::{Receiver, Sender};

use super::plan::{BlockData, Part, Place};
use super::queue::JobCtl;
use super::RequestError;
use crate::codec::MAX_BLOCK_SIZE;
use crate::destinations::HostClaim;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// A fixed pool of decode threads fed through one channel.
pub(crate) struct Pool {
    tx: Option<Sender<Task>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    pub(crate) fn new(n: usize) -> Pool {
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
                    .expect("spawn a decode thread")
            })
            .collect();
        Pool {
            tx: Some(tx),
            threads,
        }
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

/// A pointer to a part's reserved staging slot, carried to a decode thread.
#[derive(Clone, Copy)]
pub(crate) struct StagingPtr(pub *mut u8);
// SAFETY: the slot is reserved for exactly one part; only its decode thread
// writes it, and the chunk stays mapped until that part reports back.
unsafe impl Send for StagingPtr {}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; MAX_BLOCK_SIZE]);
}

/// Checks and decodes one block into `out` (its declared size).
fn decode_block(part: &Part, stored: &[u8], out: &mut [u8]) -> Result<(), RequestError> {
    let stored =
        stored
            .get(..part.block.stored as usize)
            .ok_or_else(|| RequestError::ShortRead {
                file: Default::default(),
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
pub(crate) fn decode_part(
    part: &Part,
    stored: &[u8],
    ctl: &JobCtl,
    claim: Option<&HostClaim>,
    assembly: Option<&Mutex<Vec<u8>>>,
    staging: Option<StagingPtr>,
) -> (Result<(), RequestError>, u64) {
    let size = part.block.size as usize;
    let take = part.take.start as usize..part.take.end as usize;
    let whole = take.start == 0 && take.end == size;
    match (&part.place, claim) {
        (Place::Memory { offset }, Some(claim)) => {
            // Writers share the gate; `cancel` takes it exclusively, so once
            // it returns no write is under way and none starts.
            let Some(_gate) = ctl.write_gate() else {
                return (Err(RequestError::Cancelled), 0);
            };
            // SAFETY: the gate serialises against cancel, and this part's
            // range of the claim is written by this part alone.
            let dst = unsafe { &mut claim.bytes_mut()[*offset..*offset + take.len()] };
            if whole {
                // Decoded straight into the destination; a stored block is
                // one memcpy from the bounce buffer.
                let copied = if part.block.codec == crate::codec::Codec::None {
                    dst.len() as u64
                } else {
                    0
                };
                return (decode_block(part, stored, dst), copied);
            }
            with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                Ok(()) => {
                    dst.copy_from_slice(&scratch[take.clone()]);
                    (Ok(()), take.len() as u64)
                }
                Err(e) => (Err(e), 0),
            })
        }
        (Place::Assemble { offset }, _) => {
            with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                Ok(()) => {
                    let Some(asm) = assembly else {
                        return (Err(RequestError::Cancelled), 0);
                    };
                    let mut a = asm.lock().unwrap_or_else(|e| e.into_inner());
                    match a.get_mut(*offset..*offset + take.len()) {
                        Some(d) => d.copy_from_slice(&scratch[take.clone()]),
                        None => {
                            return (
                                Err(RequestError::InvalidSource(
                                    "packed mip block overruns its stream".into(),
                                )),
                                0,
                            )
                        }
                    }
                    (Ok(()), take.len() as u64)
                }
                Err(e) => (Err(e), 0),
            })
        }
        (Place::Buffer { .. }, _) | (Place::Texture { .. }, _) => {
            let Some(StagingPtr(ptr)) = staging else {
                return (Err(RequestError::NoGpu), 0);
            };
            with_scratch(size, |scratch| match decode_block(part, stored, scratch) {
                Ok(()) => {
                    let src = &scratch[take.clone()];
                    // SAFETY: the slot was reserved with `Part::staging_out`
                    // bytes, which covers what is written below.
                    unsafe {
                        match &part.place {
                            Place::Texture { layout, .. } => {
                                let rb = layout.row_bytes as usize;
                                for r in 0..layout.rows as usize {
                                    let row = &src[r * rb..(r + 1) * rb];
                                    std::ptr::copy_nonoverlapping(
                                        row.as_ptr(),
                                        ptr.add(r * layout.row_pitch as usize),
                                        rb,
                                    );
                                }
                            }
                            _ => {
                                std::ptr::copy_nonoverlapping(src.as_ptr(), ptr, src.len());
                                let pad = src.len().next_multiple_of(4) - src.len();
                                std::ptr::write_bytes(ptr.add(src.len()), 0, pad);
                            }
                        }
                    }
                    (Ok(()), src.len() as u64)
                }
                Err(e) => (Err(e), 0),
            })
        }
        (Place::Memory { .. }, None) => (
            Err(RequestError::InvalidSource(
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
