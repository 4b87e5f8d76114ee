//! Copies of parts already laid out for their destinations: bytes the CPU
//! decoded or laid out with the destination's row pitch, which need one plain
//! copy each and no pass. The batch records them from its input; on software
//! adapters, where every copy is CPU work, a chunk holding only such parts
//! is copied from straight away ([`copy_from_chunk`]).

use crate::destinations::gpu_copies::{MipsTouched, PartDest};

use super::job_table::JobTable;
use super::plan::{Part, Place};
use super::request::Destination;
use crate::completion::RequestError;

/// Ends a part whose job was pinned for GPU writes (`begin_gpu`): unpins
/// the job and reports how the part ended.
pub(super) fn end_pinned(
    jobs: &JobTable,
    part: Part,
    result: Result<(), RequestError>,
    done: &mut Vec<(Part, Result<(), RequestError>)>,
) {
    if let Some(j) = jobs.get(part.job) {
        j.ctl.end_gpu();
    }
    done.push((part, result));
}

/// Records the copies of parts the CPU laid out for their destinations
/// straight from their staging chunk `chunk` (software adapters). Parts of
/// cancelled requests end here; the others are pinned until the copies are
/// done, and returned.
pub(super) fn copy_from_chunk(
    enc: &mut wgpu::CommandEncoder,
    chunk: &wgpu::Buffer,
    staged: impl IntoIterator<Item = (Part, u64)>,
    jobs: &JobTable,
    done: &mut Vec<(Part, Result<(), RequestError>)>,
    mips: &mut MipsTouched,
) -> Vec<Part> {
    let (mut commands, mut texture_copies) = (0u64, 0u64);
    let mut parts = Vec::new();
    for (part, at) in staged {
        let job = jobs.get(part.job);
        if !job.is_some_and(|j| j.ctl.begin_gpu()) {
            done.push((part, Err(RequestError::Cancelled)));
            continue;
        }
        match record_part_direct(enc, chunk, at, &part, job.map(|j| &j.destination), mips) {
            Some((c, t)) => {
                commands += c;
                texture_copies += t;
                parts.push(part);
            }
            None => {
                let lost = RequestError::Internal("a GPU part lost its destination".into());
                end_pinned(jobs, part, Err(lost), done);
            }
        }
    }
    if let Some(j) = parts.first().and_then(|p| jobs.get(p.job)) {
        j.stats(|st| {
            st.gpu_commands += commands;
            st.texture_copies += texture_copies;
        });
    }
    parts
}

/// Records the copies of a part the CPU laid out for its destinations at
/// `at` of `input`: one region, or each piece 256 bytes after the one
/// before (as `cpu_decode` writes them). Returns (commands, texture
/// copies), or `None` when the part's destination is gone.
pub(super) fn record_part_direct(
    enc: &mut wgpu::CommandEncoder,
    input: &wgpu::Buffer,
    at: u64,
    part: &Part,
    dest: Option<&Destination>,
    mips: &mut MipsTouched,
) -> Option<(u64, u64)> {
    let mut dests = Vec::new();
    if !part_dests(part, dest, &mut dests) {
        return None;
    }
    let (mut commands, mut textures) = (0, 0);
    let mut src = at;
    for d in &dests {
        textures += record_direct(enc, input, src, d, mips);
        commands += 1;
        if let PartDest::Texture { layout, .. } = d {
            src += layout.padded_size().next_multiple_of(256);
        }
    }
    Some((commands, textures))
}

/// Records the copy of one region whose bytes sit at `src` of `input`
/// already laid out for its destination; returns 1 for a texture copy.
fn record_direct(
    enc: &mut wgpu::CommandEncoder,
    input: &wgpu::Buffer,
    src: u64,
    dest: &PartDest<'_>,
    mips: &mut MipsTouched,
) -> u64 {
    match dest {
        PartDest::Buffer {
            buffer,
            offset,
            len,
        } => {
            enc.copy_buffer_to_buffer(input, src, buffer, *offset, len.next_multiple_of(4));
            0
        }
        PartDest::Texture {
            texture,
            mip,
            origin,
            width,
            height,
            layout,
        } => {
            mips.add(texture, *mip);
            enc.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer: input,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: src,
                        bytes_per_row: Some(layout.row_pitch),
                        rows_per_image: Some(layout.rows),
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture,
                    mip_level: *mip,
                    origin: *origin,
                    aspect: wgpu::TextureAspect::All,
                },
                crate::destinations::texture::copy_extent(texture.format(), *width, *height),
            );
            1
        }
    }
}

/// The regions a GPU part writes, borrowed from its request, pushed to
/// `out` in the order of `Part::outputs`: one, or one per piece. False
/// (and nothing pushed) when they do not match the request's destination.
pub(super) fn part_dests<'a>(
    part: &Part,
    dest: Option<&'a Destination>,
    out: &mut Vec<PartDest<'a>>,
) -> bool {
    let Some(dest) = dest else {
        return false;
    };
    let mark = out.len();
    for (take, place) in part.outputs() {
        match (place, dest) {
            (Place::Buffer { offset }, Destination::Buffer { buffer, .. }) => {
                out.push(PartDest::Buffer {
                    buffer,
                    offset: *offset,
                    len: (take.end - take.start) as u64,
                })
            }
            (
                Place::Texture {
                    mip,
                    origin,
                    width,
                    height,
                    layout,
                },
                Destination::Texture { texture, .. },
            ) => out.push(PartDest::Texture {
                texture,
                mip: *mip,
                origin: *origin,
                width: *width,
                height: *height,
                layout: *layout,
            }),
            _ => {
                out.truncate(mark);
                return false;
            }
        }
    }
    true
}
