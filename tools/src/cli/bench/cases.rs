//! What each case streams: the pack variant for its codec, and the
//! requests and destinations of one pass over it (GPU buffers and textures
//! with a device, host memory without).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpustream::codec::Codec;
use gpustream::destinations::HostMemory;
use gpustream::pack::{AssetId, AssetKind, BlockId, Pack, PackWriter, WriterOptions};
use gpustream::runtime::{Destination, PackFile, Request, Source};

use super::BoxError;

/// The pack for a case: the source pack re-encoded with the case's codec
/// (and, when `sub_block` is not 0, LZ4 in sub-blocks of that many bytes;
/// with `packed`, as `gpustream pack` writes that codec by default: at
/// its default level (LZ4 HC 9, GDeflate 12) with BCn conditioning),
/// cached beside it.
pub(super) fn variant(
    src: &Path,
    codec: Codec,
    sub_block: u32,
    packed: bool,
) -> Result<PathBuf, BoxError> {
    let hc = packed;
    let hc_level = match codec {
        Codec::GDeflate => crate::cli::pack::GDEFLATE_DEFAULT_LEVEL,
        _ => crate::cli::pack::LZ4_DEFAULT_LEVEL,
    };
    let pack = Pack::open(src)?;
    let split = |b: &gpustream::pack::Block| b.sub_blocks > 0;
    if pack
        .blocks()
        .iter()
        .all(|b| (b.codec == codec && split(b) == (sub_block > 0)) || b.codec == Codec::None)
        && pack
            .blocks()
            .iter()
            .all(|b| b.codec == Codec::None || (b.level as i32 == hc_level) == hc)
        && codec != Codec::None
        // The baselines read one file; a striped pack is measured against
        // its devices by `bench --devices`.
        && !pack.is_striped()
    {
        return Ok(src.to_path_buf());
    }
    let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("pack");
    let dir = Path::new("target").join("gpustream-bench");
    std::fs::create_dir_all(&dir)?;
    let mut name = match sub_block {
        0 => codec.name().to_string(),
        n => format!("{}-sub{}k", codec.name(), n >> 10),
    };
    if hc && codec == Codec::Lz4 {
        name.push_str(&format!("-hc{hc_level}-cond"));
    } else if hc {
        name.push_str(&format!("-l{hc_level}-cond"));
    }
    let out = dir.join(format!("{stem}.{name}.gspk"));
    let src_meta = std::fs::metadata(src)?;
    if let Ok(m) = std::fs::metadata(&out) {
        if m.modified()? >= src_meta.modified()? && Pack::open(&out).is_ok() {
            return Ok(out);
        }
    }
    eprintln!(
        "bench: writing the {codec} variant of {} to {}",
        src.display(),
        out.display()
    );
    let level = match codec {
        Codec::Zstd => 3,
        Codec::Lz4 | Codec::GDeflate if hc => hc_level,
        _ => 0,
    };
    // Written beside and renamed into place, so a second bench process
    // running at the same time never reads a half-written variant.
    let tmp = out.with_extension(format!("gspk.partial.{}", std::process::id()));
    let mut w = PackWriter::create(
        &tmp,
        WriterOptions::default()
            .with_codec(codec)
            .with_level(level)
            .with_lz4_sub_block(sub_block)
            .with_condition(hc),
    )?;
    for (i, a) in pack.assets().iter().enumerate() {
        let id = AssetId(i as u32);
        match (a.kind, &a.texture) {
            (AssetKind::Texture, Some(t)) => {
                let mips = pack.read_texture_mips(id)?;
                w.add_texture(&a.name, t.format, t.width, t.height, &mips)?;
            }
            _ => {
                let data = pack.read_blob(id)?;
                w.add_blob(&a.name, &data)?;
            }
        }
    }
    w.finish()?;
    std::fs::rename(&tmp, &out)?;
    Ok(out)
}

/// One pass's requests and destinations for every asset: GPU buffers and textures with a device,
/// host memory without.
pub(super) struct Targets {
    /// One pass's requests.
    pub requests: Vec<Request>,
    /// Uncompressed bytes one pass delivers.
    pub delivered: u64,
    /// Texture mips (tiled and packed) one pass writes: the unit of
    /// "texture copies per mip".
    pub texture_mips: u64,
}

pub(super) fn build_targets(
    pf: &Arc<PackFile>,
    ctx: Option<&gpustream_tools::gpu::GpuContext>,
    limit: u64,
) -> Targets {
    let pack = pf.pack();
    let mut requests = Vec::new();
    let mut delivered = 0u64;
    let mut texture_mips = 0u64;
    for (i, a) in pack.assets().iter().enumerate() {
        if delivered >= limit {
            break;
        }
        let asset = AssetId(i as u32);
        match (&a.texture, ctx) {
            (Some(t), Some(ctx)) if a.kind == AssetKind::Texture => {
                let fmt = t.format.wgpu();
                if fmt.is_compressed()
                    && !ctx
                        .device
                        .features()
                        .contains(wgpu::Features::TEXTURE_COMPRESSION_BC)
                {
                    continue;
                }
                texture_mips += t.mip_count as u64;
                let tex = ctx.device.create_texture(&wgpu::TextureDescriptor {
                    label: Some(&a.name),
                    size: wgpu::Extent3d {
                        width: t.width,
                        height: t.height,
                        depth_or_array_layers: 1,
                    },
                    mip_level_count: t.mip_count as u32,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D2,
                    format: fmt,
                    usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::TEXTURE_BINDING,
                    view_formats: &[],
                });
                texture_requests(pf, asset, &mut requests, |mip, origin, _| {
                    Destination::Texture {
                        texture: tex.clone(),
                        mip,
                        origin,
                        extent: None,
                    }
                });
            }
            (_, Some(ctx)) => {
                // Blobs go to a buffer in pieces of at most 4 MiB, so a
                // request never outgrows a small staging buffer.
                let buf = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&a.name),
                    size: a.size.next_multiple_of(4).max(4),
                    usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE,
                    mapped_at_creation: false,
                });
                let piece = 4 << 20;
                let mut at = 0;
                while at < a.size {
                    let end = (at + piece).min(a.size);
                    requests.push(Request::new(
                        Source::Blob {
                            pack: pf.clone(),
                            asset,
                            range: Some(at..end),
                        },
                        Destination::Buffer {
                            buffer: buf.clone(),
                            offset: at,
                        },
                    ));
                    at = end;
                }
            }
            (_, None) => {
                // No GPU: everything lands in host memory, textures as their
                // tiles' bytes one after another.
                let mem = HostMemory::new(a.size as usize);
                if a.kind == AssetKind::Blob {
                    requests.push(Request::new(
                        Source::Blob {
                            pack: pf.clone(),
                            asset,
                            range: None,
                        },
                        Destination::Memory {
                            memory: mem,
                            offset: 0,
                        },
                    ));
                } else {
                    let mut off = 0usize;
                    texture_requests(pf, asset, &mut requests, |_, _, size| {
                        let d = Destination::Memory {
                            memory: mem.clone(),
                            offset: off,
                        };
                        off += size as usize;
                        d
                    });
                }
            }
        }
        delivered += a.size;
    }
    Targets {
        requests,
        delivered,
        texture_mips,
    }
}

/// Requests for every tile of every tiled mip of a texture and for its
/// packed mips; `dest(mip, origin, bytes)` says where each goes.
fn texture_requests(
    pf: &Arc<PackFile>,
    asset: AssetId,
    out: &mut Vec<Request>,
    mut dest: impl FnMut(u32, wgpu::Origin3d, u64) -> Destination,
) {
    let pack = pf.pack();
    let Some(t) = pack.asset(asset).texture else {
        return;
    };
    for mip in 0..t.mip_count {
        let Ok(Some((tx, ty))) = pack.tile_grid(asset, mip) else {
            continue;
        };
        for y in 0..ty {
            for x in 0..tx {
                let Ok(r) = pack.tile_region(asset, mip, x, y) else {
                    continue;
                };
                let d = dest(
                    mip as u32,
                    wgpu::Origin3d {
                        x: r.x,
                        y: r.y,
                        z: 0,
                    },
                    r.size() as u64,
                );
                out.push(Request::new(
                    Source::Tile {
                        pack: pf.clone(),
                        asset,
                        mip,
                        x,
                        y,
                    },
                    d,
                ));
            }
        }
    }
    if let Ok(p) = pack.packed_mips(asset) {
        if let Some(first) = p.mips.first() {
            let d = dest(first.mip as u32, wgpu::Origin3d::ZERO, p.len as u64);
            out.push(Request::new(
                Source::PackedMips {
                    pack: pf.clone(),
                    asset,
                },
                d,
            ));
        }
    }
}

/// Where every block of one pass lands in host memory, in the layout the
/// runtime's memory destinations get from [`build_targets`] without a
/// device: one allocation per asset; blobs block after block; textures
/// tile after tile (mip, row, column), then the packed mip stream. The
/// hand-written baseline decodes into exactly this.
pub(super) struct HostLayout {
    /// Bytes of each asset's allocation.
    pub sizes: Vec<usize>,
    /// Every block, in offset order within its allocation.
    pub pieces: Vec<Piece>,
}

/// One block's place in a [`HostLayout`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    /// Index into [`HostLayout::sizes`].
    pub slot: usize,
    /// Byte offset in that allocation.
    pub offset: usize,
    /// Uncompressed bytes.
    pub len: usize,
    /// The block.
    pub block: BlockId,
}

/// The [`HostLayout`] of the assets [`build_targets`] streams with the same
/// `limit`; `bc_textures` says whether BC textures are streamed (they are
/// skipped on a device without BC support).
pub(super) fn host_layout(pack: &Pack, limit: u64, bc_textures: bool) -> HostLayout {
    let mut sizes = Vec::new();
    let mut pieces = Vec::new();
    let mut delivered = 0u64;
    for (i, a) in pack.assets().iter().enumerate() {
        if delivered >= limit {
            break;
        }
        let asset = AssetId(i as u32);
        let slot = sizes.len();
        let mut off = 0usize;
        let mut push = |block: BlockId, len: usize, off: &mut usize| {
            pieces.push(Piece {
                slot,
                offset: *off,
                len,
                block,
            });
            *off += len;
        };
        match &a.texture {
            Some(t) if a.kind == AssetKind::Texture => {
                if t.format.wgpu().is_compressed() && !bc_textures {
                    continue;
                }
                for mip in 0..t.mip_count {
                    let Ok(Some((tx, ty))) = pack.tile_grid(asset, mip) else {
                        continue;
                    };
                    for y in 0..ty {
                        for x in 0..tx {
                            if let Ok(r) = pack.tile_region(asset, mip, x, y) {
                                push(r.block, r.size() as usize, &mut off);
                            }
                        }
                    }
                }
                if let Ok(p) = pack.packed_mips(asset) {
                    for b in p.blocks.map(BlockId) {
                        if let Ok(blk) = pack.block(b) {
                            push(b, blk.size as usize, &mut off);
                        }
                    }
                }
            }
            _ => {
                for b in a.blocks.clone().map(BlockId) {
                    if let Ok(blk) = pack.block(b) {
                        push(b, blk.size as usize, &mut off);
                    }
                }
            }
        }
        sizes.push((a.size as usize).max(off));
        delivered += a.size;
    }
    HostLayout { sizes, pieces }
}
