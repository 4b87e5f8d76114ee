//! A request's parts: what one block (or one piece of a block) is, where
//! its stored bytes are, where its output lands, and which path decodes it.
//! The planner makes them; the reads, the decode threads, the GPU batches
//! and the completion code all take them.

use std::ops::Range;
use std::sync::Arc;

use crate::codec::Codec;
use crate::destinations::texture::RegionLayout;
use crate::pack::{BlockId, BlockTransform};

use super::pack_file::PackFile;

/// Where a block's stored bytes are.
#[derive(Clone)]
pub(crate) enum BlockData {
    /// In a pack file, at `Block::offset`.
    File(Arc<PackFile>, BlockId),
    /// Already in memory (memory sources, assembled packed mips).
    Memory(Arc<[u8]>, Range<usize>),
}

/// One block to deliver.
#[derive(Clone)]
pub(crate) struct BlockSrc {
    pub data: BlockData,
    /// Absolute offset in its file (0 for memory).
    pub offset: u64,
    pub stored: u32,
    pub size: u32,
    pub codec: Codec,
    /// Independent LZ4 sub-blocks the block is stored as (0: one stream;
    /// `Pack::sub_blocks` says where they lie).
    pub sub_blocks: u8,
    /// The BCn conditioning the decoded bytes are stored in
    /// (`Pack::check_block` undoes it).
    pub transform: BlockTransform,
}

impl BlockSrc {
    /// Block `id` of `pack`, as its table of contents describes it, read
    /// from the file that holds it (a striped pack's member): the one place
    /// that picks the member, so that everything after plans per file.
    pub fn in_pack(pack: &Arc<PackFile>, id: BlockId) -> BlockSrc {
        let b = pack.pack.blocks()[id.0 as usize];
        BlockSrc {
            data: BlockData::File(pack.member_file(b.member).clone(), id),
            offset: b.offset,
            stored: b.stored_size,
            size: b.size,
            codec: b.codec,
            sub_blocks: b.sub_blocks,
            transform: b.transform,
        }
    }

    pub fn describe(&self) -> String {
        match &self.data {
            BlockData::File(p, id) => {
                format!("{} in {}", p.pack.describe_block(*id), p.path().display())
            }
            BlockData::Memory(..) => "memory block".to_string(),
        }
    }

    /// The file the block comes from (`<memory>` for memory sources).
    pub fn file_path(&self) -> std::path::PathBuf {
        match &self.data {
            BlockData::File(p, _) => p.path().to_path_buf(),
            BlockData::Memory(..) => "<memory>".into(),
        }
    }
}

/// Where a part's bytes go.
#[derive(Clone, Debug)]
pub(crate) enum Place {
    /// Byte offset inside the request's host-memory claim.
    Memory { offset: usize },
    /// Byte offset inside the destination buffer.
    Buffer { offset: u64 },
    /// A texture region, fed from staging with rows at `layout.row_pitch`.
    Texture {
        mip: u32,
        origin: wgpu::Origin3d,
        width: u32,
        height: u32,
        layout: RegionLayout,
    },
    /// Several texture regions, each fed from its own byte range of the
    /// decoded block: a packed-mips block holds several small mips, or
    /// part of one. Every piece's place is a `Place::Texture`.
    Pieces(Arc<[Piece]>),
}

/// One region a [`Place::Pieces`] part delivers.
#[derive(Clone, Debug)]
pub(crate) struct Piece {
    /// The bytes of the decoded block.
    pub take: Range<u32>,
    /// Where they go (a `Place::Texture`).
    pub place: Place,
}

/// How a part is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// On a CPU thread (checksum, decode, then write or copy to staging).
    Cpu,
    /// Stored bytes go to staging and the GPU's stored-copy pass moves them
    /// as they are.
    Raw,
    /// Stored bytes go to staging and the GPU decoder for the block's codec
    /// (LZ4 or GDeflate) expands them.
    GpuDecode,
}

/// One block of one request.
#[derive(Clone)]
pub(crate) struct Part {
    pub job: u64,
    pub block: BlockSrc,
    /// The slice of the decoded block this part delivers.
    pub take: Range<u32>,
    pub place: Place,
    pub class: Class,
    /// A CPU part bound for the GPU whose bytes the CPU writes into staging
    /// laid out for the destination (rows at its pitch), so a plain copy
    /// command delivers them: the layout on software adapters (see
    /// `RuntimeConfig::stored_copy_on_gpu`).
    pub pitched: bool,
}

/// A linear destination (host memory, or a buffer from `base`), checked to
/// hold the stream: where byte `at` of the stream goes. (A plain value, not
/// a boxed closure: planning runs once per request on the application's
/// thread, where a third of `enqueue` was `malloc`.)
#[derive(Clone, Copy)]
pub(crate) enum Linear {
    Memory,
    Buffer { base: u64 },
}

impl Linear {
    pub(crate) fn place(self, at: u64) -> Place {
        match self {
            Linear::Memory => Place::Memory {
                offset: at as usize,
            },
            Linear::Buffer { base } => Place::Buffer { offset: base + at },
        }
    }
}

/// Slack for rounding a read run out to the file's direct-I/O alignment:
/// one 4 KiB unit at each end.
pub(crate) const ALIGN_SLACK: u64 = 8192;

impl Part {
    /// A part of a request not yet given its job (`job` 0), laid out by a
    /// CPU thread where the runtime does not copy stored bytes on the GPU
    /// (`stored_on_gpu` false).
    pub fn new(
        stored_on_gpu: bool,
        block: BlockSrc,
        take: Range<u32>,
        place: Place,
        class: Class,
    ) -> Part {
        Part {
            job: 0,
            block,
            take,
            place,
            pitched: class == Class::Cpu && !stored_on_gpu,
            class,
        }
    }

    /// Whether the part's bytes go to the GPU (buffer or texture).
    pub fn to_gpu(&self) -> bool {
        matches!(
            self.place,
            Place::Buffer { .. } | Place::Texture { .. } | Place::Pieces(..)
        )
    }

    /// What the part delivers: (bytes of the decoded block, where they go),
    /// once, or once per piece.
    pub fn outputs(&self) -> impl Iterator<Item = (Range<u32>, &Place)> + '_ {
        let pieces: &[Piece] = match &self.place {
            Place::Pieces(p) => p,
            _ => &[],
        };
        let single =
            (!matches!(self.place, Place::Pieces(..))).then(|| (self.take.clone(), &self.place));
        single
            .into_iter()
            .chain(pieces.iter().map(|p| (p.take.clone(), &p.place)))
    }

    /// Descriptors the part takes in a GPU batch: one per region, times
    /// its sub-blocks for an LZ4 block the GPU decodes in sub-blocks
    /// (GDeflate blocks have none).
    pub fn descs(&self) -> u64 {
        self.outputs().count() as u64 * self.descs_per_region()
    }

    fn descs_per_region(&self) -> u64 {
        match self.class {
            Class::GpuDecode => (self.block.sub_blocks as u64).max(1),
            _ => 1,
        }
    }

    /// Bytes of staging a CPU part bound for the GPU writes, padded to
    /// whole words; 0 for other parts. Tightly packed, its slice (for
    /// pieces, the whole decoded block, which the GPU's stored-copy pass
    /// cuts up), or, when `pitched`, each region with rows at its pitch,
    /// regions 256 bytes apart.
    pub fn cpu_staged_len(&self) -> u64 {
        match &self.place {
            _ if self.class != Class::Cpu || !self.to_gpu() => 0,
            Place::Texture { layout, .. } if self.pitched => {
                layout.padded_size().next_multiple_of(4)
            }
            Place::Pieces(pieces) if self.pitched => pieces
                .iter()
                .map(|p| match &p.place {
                    Place::Texture { layout, .. } => layout.padded_size().next_multiple_of(256),
                    _ => 0,
                })
                .sum(),
            Place::Pieces(..) => (self.block.size as u64).next_multiple_of(4),
            _ => (self.take.end - self.take.start).next_multiple_of(4) as u64,
        }
    }

    /// Bytes of the GPU batch's output scratch the part may need: texture
    /// rows at the region's pitch, buffer bytes in whole words, each region
    /// on a 256-byte boundary and counted as at least `region_min` bytes
    /// (so a batch whose regions fit its scratch also fits its descriptor
    /// tables: `BatchCaps::region_weight`). 0 for parts that do not go to
    /// the GPU.
    pub fn gpu_out(&self, region_min: u64) -> u64 {
        if self.pitched {
            return 0;
        }
        self.outputs()
            .map(|(take, place)| match place {
                Place::Texture { layout, .. } => {
                    (layout.row_pitch as u64 * layout.rows as u64).next_multiple_of(256)
                }
                Place::Buffer { .. } => ((take.end - take.start) as u64).next_multiple_of(256),
                _ => 0,
            })
            .map(|w| w.max(region_min * self.descs_per_region()))
            .sum::<u64>()
            + self.conditioned_out()
    }

    /// Bytes of output scratch a block decoded on the GPU needs besides
    /// its destination regions, when the decode pass cannot write it in
    /// place: a conditioned block is decoded there in its conditioned
    /// order, and a block of packed mips (pieces) linearly; the pass after
    /// the decoder puts it back into its regions. A conditioned block of
    /// pieces takes twice that: once conditioned, once put back in order
    /// (linearly), before its pieces are laid out. 0 for every other part.
    pub fn conditioned_out(&self) -> u64 {
        if self.class != Class::GpuDecode {
            return 0;
        }
        let one = (self.block.size as u64).next_multiple_of(256);
        let pieces = matches!(self.place, Place::Pieces(..));
        let conditioned = self.block.transform != BlockTransform::None;
        one * (pieces as u64 + conditioned as u64)
    }
}
