//! The parts of each kind of source: a blob (or a range of one), a tile, a
//! texture's packed mips, a block in memory. Each checks its source against
//! the pack and its destination, and pushes one part per block.

use std::ops::Range;
use std::sync::Arc;

use crate::codec::{Codec, MAX_BLOCK_SIZE};
use crate::destinations::texture;
use crate::pack::{AssetId, AssetKind, BlockId, BlockTransform};

use super::super::pack_file::PackFile;
use super::super::request::{Destination, Request};
use super::super::shared::RuntimeShared;
use super::{asset_of, classify, BlockData, BlockSrc, Class, Linear, Part, Piece, Place};
use crate::completion::{BufferProblem, RequestError, SourceProblem};

/// `dest` as a sequence of places for a linear byte stream of `len` bytes,
/// checked to hold it (a texture is not linear).
fn linear_to(dest: &Destination, len: u64) -> Result<Linear, RequestError> {
    match dest {
        Destination::Memory { memory, offset } => {
            let end = (*offset as u64).checked_add(len);
            if end.is_none_or(|e| e > memory.len() as u64) {
                return Err(RequestError::DestinationTooSmall {
                    needed: len,
                    offset: *offset as u64,
                    have: memory.len() as u64,
                });
            }
            Ok(Linear::Memory)
        }
        Destination::Buffer { buffer, offset } => {
            if !buffer.usage().contains(wgpu::BufferUsages::COPY_DST) {
                return Err(RequestError::BadBuffer(BufferProblem::NoCopyDst));
            }
            if offset % 4 != 0 {
                return Err(RequestError::BadBuffer(BufferProblem::UnalignedOffset {
                    offset: *offset,
                }));
            }
            let needed = len.next_multiple_of(4);
            if offset.checked_add(needed).is_none_or(|e| e > buffer.size()) {
                return Err(RequestError::DestinationTooSmall {
                    needed,
                    offset: *offset,
                    have: buffer.size(),
                });
            }
            Ok(Linear::Buffer { base: *offset })
        }
        Destination::Texture { .. } => Err(RequestError::InvalidSource(
            SourceProblem::NeedsLinearDestination,
        )),
    }
}

/// A blob's `range` (all of it when `None`): one part per block it touches,
/// each delivering the block's share of the range. Returns the bytes
/// delivered.
pub(super) fn blob(
    rt: &RuntimeShared,
    req: &Request,
    pack: &Arc<PackFile>,
    asset: &AssetId,
    range: &Option<Range<u64>>,
    parts: &mut Vec<Part>,
) -> Result<u64, RequestError> {
    let a = asset_of(pack, *asset)?;
    if a.kind != AssetKind::Blob {
        return Err(RequestError::InvalidSource(SourceProblem::WrongAssetKind {
            asset: a.name.clone(),
            expected: AssetKind::Blob,
        }));
    }
    let r = range.clone().unwrap_or(0..a.size);
    if r.start > r.end || r.end > a.size {
        return Err(RequestError::InvalidSource(
            SourceProblem::RangeOutsideBlob {
                asset: a.name.clone(),
                range: r,
                size: a.size,
            },
        ));
    }
    if matches!(req.destination, Destination::Buffer { .. }) && !r.start.is_multiple_of(4) {
        return Err(RequestError::BadBuffer(BufferProblem::UnalignedRange {
            start: r.start,
        }));
    }
    let to = linear_to(&req.destination, r.end - r.start)?;
    let blocks = a.blocks.clone();
    let bs = MAX_BLOCK_SIZE as u64;
    let first = r.start / bs;
    let last = if r.end == r.start {
        first
    } else {
        r.end.div_ceil(bs)
    };
    for i in first..last {
        let id = BlockId(blocks.start + i as u32);
        let b = pack.pack.blocks()[id.0 as usize];
        let bstart = i * bs;
        let lo = r.start.max(bstart) - bstart;
        let hi = r.end.min(bstart + b.size as u64) - bstart;
        if hi <= lo {
            continue;
        }
        let place = to.place(bstart + lo - r.start);
        let block = BlockSrc::in_pack(pack, id);
        let whole = lo == 0 && hi == b.size as u64;
        let class = classify(rt, &block, &place, whole);
        parts.push(Part::new(
            rt.stored_on_gpu,
            block,
            lo as u32..hi as u32,
            place,
            class,
        ));
    }
    Ok(r.end - r.start)
}

/// One tile of a texture: one part, into a texture region of the tile's
/// size or a linear destination. Returns the bytes delivered.
pub(super) fn tile(
    rt: &RuntimeShared,
    req: &Request,
    (pack, asset, mip, x, y): (&Arc<PackFile>, &AssetId, &u8, &u32, &u32),
    parts: &mut Vec<Part>,
) -> Result<u64, RequestError> {
    let a = asset_of(pack, *asset)?;
    let id = pack.pack.tile(*asset, *mip, *x, *y)?;
    let region = pack.pack.tile_region(*asset, *mip, *x, *y)?;
    let tex = a.texture.as_ref().ok_or_else(|| {
        RequestError::InvalidSource(SourceProblem::WrongAssetKind {
            asset: a.name.clone(),
            expected: AssetKind::Texture,
        })
    })?;
    let b = pack.pack.blocks()[id.0 as usize];
    let format = tex.format.wgpu();
    let place = match &req.destination {
        Destination::Texture {
            texture,
            mip: dmip,
            origin,
            extent,
        } => {
            if let Some(e) = extent {
                if *e != (region.width, region.height) {
                    return Err(texture::TextureRegionError::WrongExtent {
                        expected: (region.width, region.height),
                        got: *e,
                    }
                    .into());
                }
            }
            texture::check_region(texture, format, *dmip, *origin, region.width, region.height)?;
            let layout = texture::region_layout(format, region.width, region.height).ok_or({
                RequestError::InvalidSource(SourceProblem::UnstreamableFormat { format })
            })?;
            if layout.tight_size() != b.size as u64 {
                return Err(RequestError::InvalidSource(SourceProblem::RegionSize {
                    source_kind: "tile block",
                    have: b.size as u64,
                    needed: layout.tight_size(),
                }));
            }
            Place::Texture {
                mip: *dmip,
                origin: *origin,
                width: region.width,
                height: region.height,
                layout,
            }
        }
        _ => linear_to(&req.destination, b.size as u64)?.place(0),
    };
    let block = BlockSrc::in_pack(pack, id);
    let class = classify(rt, &block, &place, true);
    parts.push(Part::new(rt.stored_on_gpu, block, 0..b.size, place, class));
    Ok(b.size as u64)
}

/// A texture's packed small mips: into the texture, one part per block with
/// a piece per mip region it holds; or into a linear destination as one
/// stream. Returns the bytes delivered.
pub(super) fn packed_mips(
    rt: &RuntimeShared,
    req: &Request,
    pack: &Arc<PackFile>,
    asset: &AssetId,
    parts: &mut Vec<Part>,
) -> Result<u64, RequestError> {
    let a = asset_of(pack, *asset)?;
    let packed = pack.pack.packed_mips(*asset)?;
    let tex = a.texture.as_ref().ok_or_else(|| {
        RequestError::InvalidSource(SourceProblem::WrongAssetKind {
            asset: a.name.clone(),
            expected: AssetKind::Texture,
        })
    })?;
    let format = tex.format.wgpu();
    // Each block's decoded bytes in the packed stream.
    let mut blocks = Vec::new();
    let mut stream = 0u64;
    for id in packed.blocks.clone() {
        let b = pack.pack.blocks()[id as usize];
        let block = BlockSrc::in_pack(pack, BlockId(id));
        blocks.push((stream, block));
        stream += b.size as u64;
    }
    match &req.destination {
        Destination::Texture {
            texture,
            mip: dmip,
            origin,
            ..
        } => {
            if origin.x != 0 || origin.y != 0 {
                return Err(RequestError::InvalidSource(SourceProblem::PackedMipsOrigin));
            }
            let first = packed.mips.first().map(|m| m.mip).unwrap_or(0);
            // Every mip's bytes in the stream, checked, and where it goes.
            let mut mips = Vec::with_capacity(packed.mips.len());
            for m in &packed.mips {
                let level = dmip + (m.mip - first) as u32;
                texture::check_region(texture, format, level, *origin, m.width, m.height)?;
                let layout = texture::region_layout(format, m.width, m.height).ok_or({
                    RequestError::InvalidSource(SourceProblem::UnstreamableFormat { format })
                })?;
                let start = m.offset as u64;
                let end = start + layout.tight_size();
                if end > stream {
                    return Err(RequestError::InvalidSource(
                        SourceProblem::PackedMipOverrun {
                            mip: m.mip,
                            end,
                            stream,
                        },
                    ));
                }
                mips.push((start..end, level, m.width, m.height));
            }
            // One part per block, delivering its share of each mip
            // as pieces: no CPU assembly, and stored blocks reach the
            // texture with no host copy.
            for (at, block) in blocks {
                let end = at + block.size as u64;
                let mut pieces = Vec::new();
                for (range, level, w, h) in &mips {
                    let lo = range.start.max(at);
                    let hi = range.end.min(end);
                    if lo >= hi {
                        continue;
                    }
                    let (m0, m1) = ((lo - range.start) as u32, (hi - range.start) as u32);
                    let spans = texture::mip_spans(format, *w, *h, m0, m1).ok_or(
                        RequestError::InvalidSource(SourceProblem::PackedBlockOverrun {
                            offset: at,
                            stream,
                        }),
                    )?;
                    for sp in spans {
                        let layout = texture::region_layout(format, sp.width, sp.height).ok_or(
                            RequestError::InvalidSource(SourceProblem::UnstreamableFormat {
                                format,
                            }),
                        )?;
                        let from = (range.start + sp.start as u64 - at) as u32;
                        pieces.push(Piece {
                            take: from..from + (sp.end - sp.start),
                            place: Place::Texture {
                                mip: *level,
                                origin: wgpu::Origin3d {
                                    x: sp.x,
                                    y: sp.y,
                                    z: origin.z,
                                },
                                width: sp.width,
                                height: sp.height,
                                layout,
                            },
                        });
                    }
                }
                if pieces.is_empty() {
                    continue;
                }
                // Compressed blocks decode on the GPU wherever their
                // codec does: linearly into the batch's scratch, then each
                // piece is laid into its region by the pass after the
                // decoder. No CPU thread touches them.
                let class = match block.codec {
                    Codec::None if rt.stored_on_gpu => Class::Raw,
                    Codec::Lz4 if rt.gpu_lz4.is_some() => Class::GpuDecode,
                    Codec::GDeflate if rt.gpu_gdeflate => Class::GpuDecode,
                    _ => Class::Cpu,
                };
                let take = 0..block.size;
                parts.push(Part::new(
                    rt.stored_on_gpu,
                    block,
                    take,
                    Place::Pieces(pieces.into()),
                    class,
                ));
            }
        }
        _ => {
            // A linear destination takes the stream as it is: each
            // block goes straight to its place, like a blob's.
            let to = linear_to(&req.destination, stream)?;
            for (at, block) in blocks {
                let place = to.place(at);
                let class = classify(rt, &block, &place, true);
                let take = 0..block.size;
                parts.push(Part::new(rt.stored_on_gpu, block, take, place, class));
            }
        }
    }
    Ok(stream)
}

/// One block in memory, decoded to `size` bytes: into a texture region (its
/// extent given) or a linear destination. Returns the bytes delivered.
pub(super) fn memory(
    rt: &RuntimeShared,
    req: &Request,
    (data, codec, size): (&Arc<[u8]>, &Codec, &u32),
    parts: &mut Vec<Part>,
) -> Result<u64, RequestError> {
    let size = *size;
    if *codec != Codec::None && size as usize > MAX_BLOCK_SIZE {
        return Err(RequestError::Codec(crate::codec::CodecError::TooLarge {
            what: "declared size",
            size: size as usize,
            limit: MAX_BLOCK_SIZE,
        }));
    }
    let block = BlockSrc {
        data: BlockData::Memory(data.clone(), 0..data.len()),
        offset: 0,
        stored: data.len() as u32,
        size,
        codec: *codec,
        sub_blocks: 0,
        transform: BlockTransform::None,
    };
    let place = match &req.destination {
        Destination::Texture {
            texture,
            mip,
            origin,
            extent,
        } => {
            let (w, h) =
                extent.ok_or_else(|| RequestError::InvalidSource(SourceProblem::MissingExtent))?;
            let format = texture.format();
            texture::check_region(texture, format, *mip, *origin, w, h)?;
            let layout = texture::region_layout(format, w, h).ok_or({
                RequestError::InvalidSource(SourceProblem::UnstreamableFormat { format })
            })?;
            if layout.tight_size() != size as u64 {
                return Err(RequestError::InvalidSource(SourceProblem::RegionSize {
                    source_kind: "memory source",
                    have: size as u64,
                    needed: layout.tight_size(),
                }));
            }
            Place::Texture {
                mip: *mip,
                origin: *origin,
                width: w,
                height: h,
                layout,
            }
        }
        _ => linear_to(&req.destination, size as u64)?.place(0),
    };
    let class = classify(rt, &block, &place, true);
    if size > 0 {
        parts.push(Part::new(rt.stored_on_gpu, block, 0..size, place, class));
    }
    Ok(size as u64)
}
