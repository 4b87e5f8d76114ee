//! The pipeline that runs `shaders/lz4_decode.wgsl` (twin:
//! `decode::cpu_twin::lz4_decode`) and its v2 entry point
//! `shaders/lz4_decode_v2.wgsl` (twin: `decode::cpu_twin::lz4_decode_v2`)
//! with its two-blocks-per-workgroup entry `shaders/lz4_decode_v2_pair.wgsl`:
//! many LZ4 blocks per dispatch, one workgroup (or one slot of one) per
//! block, a status word per block.

use crate::decode::gpu::kernel::{
    self, check_batch, slice_binding, uniform, Access, BlockPass, Kernel, PassBindings,
};
use crate::decode::BlockDesc;

const SHADER_MAIN: &str = include_str!("../../../shaders/lz4_decode.wgsl");
const SHADER_TAIL_PORTABLE: &str = include_str!("../../../shaders/lz4_tail_portable.wgsl");
const SHADER_TAIL_SUBGROUP: &str = include_str!("../../../shaders/lz4_tail_subgroup.wgsl");
const SHADER_OUTPUT_WORDS: &str = include_str!("../../../shaders/lz4_output_words.wgsl");
const SHADER_OUTPUT_QUADS: &str = include_str!("../../../shaders/lz4_output_quads.wgsl");
const SHADER_V2: &str = include_str!("../../../shaders/lz4_decode_v2.wgsl");
const SHADER_WINDOW_PORTABLE: &str = include_str!("../../../shaders/lz4_window_portable.wgsl");
const SHADER_WINDOW_SUBGROUP: &str = include_str!("../../../shaders/lz4_window_subgroup.wgsl");
const SHADER_V2_PAIR: &str = include_str!("../../../shaders/lz4_decode_v2_pair.wgsl");
const SUBGROUP_LANE_MARKER: &str = "/*@SUBGROUP_LANE_PARAM@*/";
const SUBGROUP_SLOT_MARKER: &str = "/*@SUBGROUP_SLOT_PARAMS@*/";

/// Blocks per workgroup of the pair variants (`override BLOCKS`).
const PAIR_BLOCKS: u32 = 2;

/// Lanes per workgroup on the portable paths: one warp on NVIDIA, half a
/// wave64 on AMD; sequences are short, so wider groups mostly idle.
const PORTABLE_WORKGROUP_SIZE: u32 = 32;

/// Which variant of the shader a pipeline runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lz4DecodePath {
    /// v1 with subgroup operations (needs `wgpu::Features::SUBGROUP`); the
    /// workgroup is sized to the adapter's subgroup size.
    Subgroup,
    /// v1 in plain WGSL that every adapter runs; 32-lane workgroups.
    Portable,
    /// v2 (`lz4_decode_v2`): headers from a subgroup-held window read with
    /// shuffles, barriers only where a match reads fresh output, linear
    /// fast path. Needs `Features::SUBGROUP`; one subgroup per workgroup.
    SubgroupV2,
    /// v2 without subgroups: the same loop and barrier rule, headers read
    /// from the input binding; 32-lane workgroups.
    PortableV2,
    #[cfg(feature = "lz4-experiments")]
    /// [`Self::SubgroupV2`] with 16-byte stores: a pass of more than `WG`
    /// words, linear or in rows of whole 16-byte units (BCn tiles), writes
    /// its 16-byte-aligned units with one vec4 store per
    /// lane (the output is bound as `array<vec4<u32>>`, so its size must be
    /// a multiple of 16). Same shader source, `override WIDE = true`.
    SubgroupV2Wide,
    #[cfg(feature = "lz4-experiments")]
    /// [`Self::PortableV2`] with the 16-byte stores of [`Self::SubgroupV2Wide`].
    PortableV2Wide,
    #[cfg(feature = "lz4-experiments")]
    /// [`Self::SubgroupV2`] with two blocks per workgroup, one per subgroup
    /// (`lz4_decode_v2_pair`): twice the warps a GPU keeps resident where
    /// it caps the workgroups per multiprocessor (Hopper: 32), for one
    /// workgroup barrier per sequence, where the two blocks agree on the
    /// storage barrier.
    SubgroupV2Pair,
    #[cfg(feature = "lz4-experiments")]
    /// [`Self::PortableV2`] with two blocks per workgroup, one per 32-lane
    /// row, as [`Self::SubgroupV2Pair`].
    PortableV2Pair,
}

impl Lz4DecodePath {
    /// Every variant, v2 first (word stores, then 16-byte stores, then two
    /// blocks per workgroup).
    #[cfg(feature = "lz4-experiments")]
    pub const ALL: [Lz4DecodePath; 8] = [
        Lz4DecodePath::SubgroupV2,
        Lz4DecodePath::PortableV2,
        Lz4DecodePath::SubgroupV2Wide,
        Lz4DecodePath::PortableV2Wide,
        Lz4DecodePath::SubgroupV2Pair,
        Lz4DecodePath::PortableV2Pair,
        Lz4DecodePath::Subgroup,
        Lz4DecodePath::Portable,
    ];

    /// Every variant, v2 first.
    #[cfg(not(feature = "lz4-experiments"))]
    pub const ALL: [Lz4DecodePath; 4] = [
        Lz4DecodePath::SubgroupV2,
        Lz4DecodePath::PortableV2,
        Lz4DecodePath::Subgroup,
        Lz4DecodePath::Portable,
    ];

    /// A short name (benches, JSON, `GPUSTREAM_BENCH_PATH`).
    pub fn name(self) -> &'static str {
        match self {
            Lz4DecodePath::Subgroup => "subgroup",
            Lz4DecodePath::Portable => "portable",
            Lz4DecodePath::SubgroupV2 => "subgroup-v2",
            Lz4DecodePath::PortableV2 => "portable-v2",
            #[cfg(feature = "lz4-experiments")]
            Lz4DecodePath::SubgroupV2Wide => "subgroup-v2-wide",
            #[cfg(feature = "lz4-experiments")]
            Lz4DecodePath::PortableV2Wide => "portable-v2-wide",
            #[cfg(feature = "lz4-experiments")]
            Lz4DecodePath::SubgroupV2Pair => "subgroup-v2-pair",
            #[cfg(feature = "lz4-experiments")]
            Lz4DecodePath::PortableV2Pair => "portable-v2-pair",
        }
    }

    /// The variant called `name` (see [`Self::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the variant needs `wgpu::Features::SUBGROUP`.
    pub fn needs_subgroups(self) -> bool {
        match self {
            Lz4DecodePath::Subgroup | Lz4DecodePath::SubgroupV2 => true,
            #[cfg(feature = "lz4-experiments")]
            Lz4DecodePath::SubgroupV2Wide | Lz4DecodePath::SubgroupV2Pair => true,
            _ => false,
        }
    }

    /// Whether the variant runs v2 (its parse, barrier rule and passes;
    /// one block per workgroup or, [`Self::is_pair`], two).
    pub fn is_v2(self) -> bool {
        !matches!(self, Lz4DecodePath::Subgroup | Lz4DecodePath::Portable)
    }

    /// Whether a workgroup decodes two blocks (`lz4_decode_v2_pair`).
    pub fn is_pair(self) -> bool {
        #[cfg(feature = "lz4-experiments")]
        let pair = matches!(
            self,
            Lz4DecodePath::SubgroupV2Pair | Lz4DecodePath::PortableV2Pair
        );
        #[cfg(not(feature = "lz4-experiments"))]
        let pair = false;
        pair
    }

    /// Blocks one workgroup decodes.
    pub fn blocks_per_workgroup(self) -> u32 {
        if self.is_pair() {
            PAIR_BLOCKS
        } else {
            1
        }
    }

    /// Whether the variant writes long passes with 16-byte stores
    /// (v2's `override WIDE`). Only these bind the output as 16-byte units
    /// and need an output buffer of a multiple of 16 bytes
    /// (`PassError::OutputNotWholeUnits`); the others bind it as
    /// words and store one word per lane, as v2 did before the wide stores.
    pub fn is_wide(self) -> bool {
        #[cfg(feature = "lz4-experiments")]
        let wide = matches!(
            self,
            Lz4DecodePath::SubgroupV2Wide | Lz4DecodePath::PortableV2Wide
        );
        #[cfg(not(feature = "lz4-experiments"))]
        let wide = false;
        wide
    }

    fn entry_point(self) -> &'static str {
        if self.is_pair() {
            "lz4_decode_v2_pair"
        } else if self.is_v2() {
            "lz4_decode_v2"
        } else {
            "lz4_decode"
        }
    }
}

/// The WGSL source of one variant, as the pipeline compiles it.
pub fn shader_source(path: Lz4DecodePath) -> String {
    let (lane_param, slot_params, tail) = if path.needs_subgroups() {
        (
            "@builtin(subgroup_invocation_id) sg_lane: u32,",
            "@builtin(subgroup_invocation_id) sg_lane: u32, \
             @builtin(subgroup_id) sg_id: u32, @builtin(subgroup_size) sg_size: u32,",
            SHADER_TAIL_SUBGROUP,
        )
    } else {
        ("", "", SHADER_TAIL_PORTABLE)
    };
    // v1 and v2 with word stores bind the output as words, v2 with 16-byte
    // stores as 16-byte units (for its vec4 stores); the shared helpers
    // reach it through the include's accessors. Whether v2's loop takes its
    // 16-byte path is the pipeline constant WIDE (one v2 source).
    let output = if path.is_wide() {
        SHADER_OUTPUT_QUADS
    } else {
        SHADER_OUTPUT_WORDS
    };
    let preamble = crate::decode::gpu::preamble::Preamble {
        codes: crate::decode::gpu::preamble::Codes::Lz4,
        block_desc: true,
    };
    let mut source = preamble.with(&format!("{SHADER_MAIN}\n{output}\n{tail}\n"));
    if path.is_v2() {
        let window = if path.needs_subgroups() {
            SHADER_WINDOW_SUBGROUP
        } else {
            SHADER_WINDOW_PORTABLE
        };
        source.push_str(SHADER_V2);
        source.push('\n');
        if path.is_pair() {
            source.push_str(SHADER_V2_PAIR);
            source.push('\n');
        }
        source.push_str(window);
    }
    source
        .replace(SUBGROUP_LANE_MARKER, lane_param)
        .replace(SUBGROUP_SLOT_MARKER, slot_params)
}

/// The variant [`Lz4DecodePipeline::new`] builds for `device`: v2 with
/// word stores through the portable window on real GPUs, v1 on CPU
/// adapters (lavapipe, llvmpipe), where v1 measured 25-40% faster
/// (docs/gpu-decode.md) because barriers cost a CPU driver little and v2's
/// window bookkeeping is extra scalar work (the subgroup path there where
/// the device has subgroups). On an NVIDIA H100 the portable v2 decoded
/// the demo pack's 16,384 blocks at 35.6 GB/s against 29.5 for the
/// subgroup v2 and 26.5-33.5 for the 16-byte-store and two-block variants
/// (docs/results.md), so real GPUs get it with or without subgroups.
pub fn default_path(device: &wgpu::Device) -> Lz4DecodePath {
    let subgroups = device.features().contains(wgpu::Features::SUBGROUP);
    let cpu = device.adapter_info().device_type == wgpu::DeviceType::Cpu;
    match (subgroups, cpu) {
        (_, false) => Lz4DecodePath::PortableV2,
        (true, true) => Lz4DecodePath::Subgroup,
        (false, true) => Lz4DecodePath::Portable,
    }
}

/// Why a pipeline could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Lz4PipelineError {
    /// The subgroup path was asked for on a device without subgroups.
    #[error("the device lacks wgpu::Features::SUBGROUP, which the subgroup LZ4 path needs")]
    SubgroupsUnsupported,
    /// [`Lz4DecodePath::SubgroupV2Pair`] gives each block one subgroup of
    /// a workgroup two subgroups wide, which holds only where every
    /// subgroup has the same size, at most 64: a wider one would span both
    /// blocks, a narrower one leave subgroups without a block.
    #[error("the device's subgroups are {min} to {max} lanes; the subgroup pair decoder needs one fixed size of at most 64")]
    SubgroupSizeNotFixed {
        /// The adapter's smallest subgroup size.
        min: u32,
        /// Its largest.
        max: u32,
    },
}

pub use super::kernel::PassError;

/// The compute pipeline decoding batches of LZ4 blocks on the GPU.
pub struct Lz4DecodePipeline {
    kernel: Kernel,
    path: Lz4DecodePath,
    workgroup_size: u32,
    window_words: u32,
}

impl Lz4DecodePipeline {
    /// Builds the pipeline for `device` with [`default_path`].
    pub fn new(device: &wgpu::Device) -> Self {
        Self::with_path(device, default_path(device))
            .expect("the path was chosen from the device's features")
    }

    /// Builds the pipeline for a given path (tests and benches use it to
    /// run every variant).
    pub fn with_path(device: &wgpu::Device, path: Lz4DecodePath) -> Result<Self, Lz4PipelineError> {
        if path.needs_subgroups() && !device.features().contains(wgpu::Features::SUBGROUP) {
            return Err(Lz4PipelineError::SubgroupsUnsupported);
        }
        let info = device.adapter_info();
        if path.is_pair()
            && path.needs_subgroups()
            && (info.subgroup_min_size != info.subgroup_max_size || info.subgroup_max_size > 64)
        {
            return Err(Lz4PipelineError::SubgroupSizeNotFixed {
                min: info.subgroup_min_size,
                max: info.subgroup_max_size,
            });
        }
        let (workgroup_size, window_words) = if path.needs_subgroups() {
            // One subgroup per workgroup where the driver's size is fixed
            // (NVIDIA 32, lavapipe 8); clamped to what every device's
            // workgroup limit allows. The window is the smallest subgroup,
            // so every lane it names exists whatever size the driver picks.
            (
                info.subgroup_max_size.clamp(4, 64),
                info.subgroup_min_size.clamp(4, 64),
            )
        } else {
            (PORTABLE_WORKGROUP_SIZE, PORTABLE_WORKGROUP_SIZE)
        };
        // WIN and WIDE exist only in the v2 modules, BLOCKS only in the
        // pair ones.
        let wide = if path.is_wide() { 1.0 } else { 0.0 };
        let constants = [
            ("WG", workgroup_size as f64),
            ("WIN", window_words as f64),
            ("WIDE", wide),
            ("BLOCKS", path.blocks_per_workgroup() as f64),
        ];
        let count = match (path.is_v2(), path.is_pair()) {
            (_, true) => 4,
            (true, false) => 3,
            (false, _) => 1,
        };
        use Access::{Read, ReadWrite, Uniform};
        let kernel = Kernel::new(
            device,
            "lz4_decode",
            &shader_source(path),
            path.entry_point(),
            &[Read, Read, ReadWrite, ReadWrite, Uniform],
            &constants[..count],
        );
        Ok(Self {
            kernel,
            path,
            workgroup_size,
            window_words,
        })
    }

    /// The shader variant this pipeline runs.
    pub fn path(&self) -> Lz4DecodePath {
        self.path
    }

    /// Lanes decoding one block: the workgroup, or one slot of it on the
    /// pair variants ([`Lz4DecodePath::blocks_per_workgroup`]).
    pub fn workgroup_size(&self) -> u32 {
        self.workgroup_size
    }

    /// Input words in v2's header window (the twin's `window_words`).
    pub fn window_words(&self) -> u32 {
        self.window_words
    }
}

/// [`Self::encode_timed`] over ranges of buffers: the descriptor table,
/// output and status words of the pass are `bindings`' slices (offsets
/// on the device's storage-offset alignment), so one set of tables can
/// feed several passes, each writing its own output buffer. Descriptor
/// `dst_offset`s count from the output slice's start; block `i` is the
/// slice's `i`th descriptor and writes its `i`th status word.
impl BlockPass for Lz4DecodePipeline {
    const TABLE_LABEL: &'static str = "lz4_decode descriptors";

    fn validate_table(
        &self,
        descs: &[BlockDesc],
        input_len: u64,
        output_len: u64,
    ) -> Result<(), PassError> {
        validate_descs(descs, input_len, output_len)
    }

    fn encode_in(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        bindings: PassBindings<'_>,
        block_count: u32,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), PassError> {
        let PassBindings {
            input,
            descs,
            output,
            status,
        } = bindings;
        if block_count == 0 {
            return Ok(());
        }
        if self.path.is_wide() && !output.size().is_multiple_of(16) {
            return Err(PassError::OutputNotWholeUnits {
                path: self.path.name(),
                size: output.size(),
            });
        }
        let grid = check_batch(
            device,
            &input,
            &[
                (
                    "descriptor table",
                    descs,
                    std::mem::size_of::<BlockDesc>() as u64,
                ),
                ("output", output, 0),
                ("status buffer", status, 4),
            ],
            block_count,
        )?;
        let grid = match self.path.blocks_per_workgroup() {
            1 => grid,
            n => kernel::grid(device, block_count, n)?,
        };
        let params = uniform(device, "lz4_decode params", &[block_count, grid.0, 0, 0]);
        self.kernel.dispatch(
            device,
            encoder,
            &[
                slice_binding(&input),
                slice_binding(&descs),
                slice_binding(&output),
                slice_binding(&status),
                params.as_entire_binding(),
            ],
            grid,
            timestamp_writes,
        );
        Ok(())
    }
}

/// Checks a descriptor table on the CPU: every block obeys the layout rules
/// of [`BlockDesc`], fits an input binding of `input_len` and an output
/// binding of `output_len` bytes, and no two blocks' output ranges overlap
/// (rows of different blocks may interleave: the check is per row).
pub fn validate_descs(
    descs: &[BlockDesc],
    input_len: u64,
    output_len: u64,
) -> Result<(), PassError> {
    let bad = |block, reason| Err(PassError::BadDescriptor { block, reason });
    // Output byte ranges [start, end) with their block, one per row.
    let mut spans: Vec<(u64, u64, usize)> = Vec::with_capacity(descs.len());
    for (i, d) in descs.iter().enumerate() {
        if d.dst_size as usize > crate::MAX_BLOCK_SIZE {
            return bad(i, "dst_size exceeds the 64 KiB block limit");
        }
        if d.src_size > crate::decode::cpu_twin::lz4_decode::MAX_SRC_SIZE {
            return bad(i, "src_size exceeds 16 MiB");
        }
        if d.dst_offset % 4 != 0 {
            return bad(i, "dst_offset is not a multiple of 4");
        }
        if d.src_offset as u64 + d.src_size as u64 > input_len {
            return bad(i, "compressed range outside the input binding");
        }
        if d.row_bytes != 0
            && (d.row_bytes % 4 != 0 || d.row_pitch % 4 != 0 || d.row_pitch < d.row_bytes)
        {
            return bad(
                i,
                "row_bytes and row_pitch must be multiples of 4, pitch >= bytes",
            );
        }
        let extent = d.dst_extent().unwrap_or(u64::MAX);
        if d.dst_offset as u64 + extent > output_len {
            return bad(i, "output range outside the output binding");
        }
        if d.dst_size == 0 {
            continue;
        }
        if d.row_bytes == 0 {
            spans.push((
                d.dst_offset as u64,
                d.dst_offset as u64 + d.dst_size as u64,
                i,
            ));
        } else {
            let mut left = d.dst_size as u64;
            let mut start = d.dst_offset as u64;
            while left > 0 {
                let len = left.min(d.row_bytes as u64);
                spans.push((start, start + len, i));
                left -= len;
                start += d.row_pitch as u64;
            }
        }
    }
    spans.sort_unstable();
    for pair in spans.windows(2) {
        // Ranges start 4-byte aligned, so disjoint ranges never share a word.
        if pair[1].0 < pair[0].1 {
            return Err(PassError::Overlap {
                first: pair[0].2,
                second: pair[1].2,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_validates() {
        for path in Lz4DecodePath::ALL {
            crate::decode::gpu::kernel::assert_wgsl_valid(&shader_source(path));
            assert_eq!(Lz4DecodePath::from_name(path.name()), Some(path));
        }
        for (name, body) in [
            ("lz4_decode.wgsl", SHADER_MAIN),
            ("lz4_decode_v2.wgsl", SHADER_V2),
            ("lz4_decode_v2_pair.wgsl", SHADER_V2_PAIR),
            ("lz4_tail_portable.wgsl", SHADER_TAIL_PORTABLE),
            ("lz4_tail_subgroup.wgsl", SHADER_TAIL_SUBGROUP),
            ("lz4_output_words.wgsl", SHADER_OUTPUT_WORDS),
            ("lz4_output_quads.wgsl", SHADER_OUTPUT_QUADS),
            ("lz4_window_portable.wgsl", SHADER_WINDOW_PORTABLE),
            ("lz4_window_subgroup.wgsl", SHADER_WINDOW_SUBGROUP),
        ] {
            crate::decode::gpu::preamble::assert_takes_preamble(name, body);
        }
    }

    #[test]
    fn descriptor_checks() {
        let ok = BlockDesc::linear(0, 10, 0, 100);
        assert_eq!(validate_descs(&[ok], 10, 100), Ok(()));
        assert!(matches!(
            validate_descs(&[ok], 9, 100),
            Err(PassError::BadDescriptor { block: 0, .. })
        ));
        let other = BlockDesc::linear(0, 10, 96, 8);
        assert_eq!(
            validate_descs(&[ok, other], 10, 200),
            Err(PassError::Overlap {
                first: 0,
                second: 1
            })
        );
        // Rows of two blocks interleaving in each other's padding is fine.
        let a = BlockDesc::linear(0, 10, 0, 128).with_rows(64, 256);
        let b = BlockDesc::linear(0, 10, 64, 128).with_rows(64, 256);
        assert_eq!(validate_descs(&[a, b], 10, 512), Ok(()));
        let unaligned = BlockDesc::linear(0, 10, 2, 8);
        assert!(validate_descs(&[unaligned], 10, 100).is_err());
    }
}
