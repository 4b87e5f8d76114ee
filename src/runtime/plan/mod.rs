//! Turning a request into parts: one per block, each with where its bytes
//! come from, which slice of the decoded block it delivers, where that slice
//! goes, and how it is decoded. The per-source steps are in `sources.rs`.

mod sources;

use crate::codec::Codec;
use crate::pack::{Asset, AssetId, BlockTransform};

use super::pack_file::PackFile;
pub(crate) use super::part::{BlockData, BlockSrc, Class, Linear, Part, Piece, Place, ALIGN_SLACK};
use super::request::{Request, Source};
use super::shared::RuntimeShared;
use crate::completion::{RequestError, SourceProblem};

/// The parts of a request (with `job` left 0).
pub(crate) struct Plan {
    pub parts: Vec<Part>,
    pub delivered: u64,
    pub stored: u64,
}

fn classify(rt: &RuntimeShared, block: &BlockSrc, place: &Place, whole: bool) -> Class {
    let gpu_dest = matches!(place, Place::Buffer { .. } | Place::Texture { .. });
    if !gpu_dest || !whole {
        return Class::Cpu;
    }
    // Buffer copies move whole words: a part whose length is not a multiple
    // of 4 (a blob's last block) gets its zero padding from the GPU batch,
    // which clears that last word before the passes write the bytes before
    // the padding. The GPU passes read any byte offset and lay texture rows out at the
    // destination's pitch themselves, so stored and LZ4 blocks need no CPU.
    match block.codec {
        Codec::None if rt.stored_on_gpu => Class::Raw,
        Codec::None => Class::Cpu,
        // A conditioned block bound for a texture is decoded on the GPU
        // and put back in order by the pass after the decoder, both in the
        // batch's scratch. One bound for a buffer (written directly when a
        // batch holds many parts for it) is put back in order by the CPU
        // decode threads, and its bytes reach the GPU like stored ones.
        Codec::Lz4
            if rt.gpu_lz4.is_some()
                && (block.transform == BlockTransform::None
                    || matches!(place, Place::Texture { .. })) =>
        {
            Class::GpuDecode
        }
        Codec::GDeflate
            if rt.gpu_gdeflate
                && (block.transform == BlockTransform::None
                    || matches!(place, Place::Texture { .. })) =>
        {
            Class::GpuDecode
        }
        _ => Class::Cpu,
    }
}

/// The asset `id` of `pack`, or a typed error: an `AssetId` is plain data,
/// so one from another pack (or made up) must not index out of bounds.
fn asset_of(pack: &PackFile, id: AssetId) -> Result<&Asset, RequestError> {
    pack.pack.get_asset(id).ok_or_else(|| {
        RequestError::InvalidSource(SourceProblem::NoSuchAsset {
            asset: id.0,
            pack: pack.path().to_path_buf(),
            count: pack.pack.assets().len(),
        })
    })
}

/// Validates `req` against the runtime and the queue's source kind, and
/// splits it into parts: the destination's runtime first, then the source's
/// own steps (`sources.rs`), then the staging rule.
pub(crate) fn plan(rt: &RuntimeShared, req: &Request) -> Result<Plan, RequestError> {
    if req.destination.is_gpu() && rt.gpu.is_none() {
        return Err(RequestError::NoGpu);
    }
    // Most requests are one block (a tile); a blob's list grows as needed.
    let mut parts = Vec::with_capacity(1);
    let delivered = match &req.source {
        Source::Blob { pack, asset, range } => {
            sources::blob(rt, req, pack, asset, range, &mut parts)?
        }
        Source::Tile {
            pack,
            asset,
            mip,
            x,
            y,
        } => sources::tile(rt, req, (pack, asset, mip, x, y), &mut parts)?,
        Source::PackedMips { pack, asset } => {
            sources::packed_mips(rt, req, pack, asset, &mut parts)?
        }
        Source::Memory { data, codec, size } => {
            sources::memory(rt, req, (data, codec, size), &mut parts)?
        }
    };
    check_staging(rt, &parts)?;
    let stored = parts.iter().map(|p| p.block.stored as u64).sum();
    Ok(Plan {
        parts,
        delivered,
        stored,
    })
}

/// DirectStorage's rule: everything a request stages must fit at once, and
/// each part in one staging chunk.
fn check_staging(rt: &RuntimeShared, parts: &[Part]) -> Result<(), RequestError> {
    if let Some(g) = &rt.gpu {
        let chunk = g.chunk_size;
        let mut total = 0u64;
        for p in parts {
            let staged = match p.class {
                Class::Raw | Class::GpuDecode => p.block.stored as u64 + ALIGN_SLACK,
                Class::Cpu => p.cpu_staged_len(),
            };
            if staged > chunk {
                return Err(RequestError::StagingTooSmall {
                    needed: staged,
                    have: chunk,
                });
            }
            total += staged;
        }
        if total > g.staging_total {
            return Err(RequestError::StagingTooSmall {
                needed: total,
                have: g.staging_total,
            });
        }
    }
    Ok(())
}
