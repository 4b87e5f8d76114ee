//! What the GPU passes share: a compute pipeline over one bind group of
//! buffers, the checks every batch passes before it is recorded, the pass
//! that binds the buffers and dispatches one workgroup per block on a 2D
//! grid, and [`BlockPass`], the recording interface of the passes over
//! block descriptors.

use crate::decode::BlockDesc;

/// How a shader uses binding `i` of its bind group.
/// The buffer ranges one decode or copy pass binds, each a slice of its
/// buffer whose offset meets the device's storage-offset alignment: the
/// bytes read, the descriptor table, the output written and the status
/// words. Whole buffers are `buffer.slice(..)`.
#[derive(Clone, Copy, Debug)]
pub struct PassBindings<'a> {
    /// The bytes the descriptors' `src_offset`s count from.
    pub input: wgpu::BufferSlice<'a>,
    /// The descriptor table: block `i` is its `i`th descriptor.
    pub descs: wgpu::BufferSlice<'a>,
    /// Where the blocks are written; `dst_offset`s count from its start.
    pub output: wgpu::BufferSlice<'a>,
    /// One status word per block.
    pub status: wgpu::BufferSlice<'a>,
}

impl<'a> PassBindings<'a> {
    /// Whole buffers bound: `input` and the descriptors, output and status
    /// words from their first byte.
    pub fn whole(
        input: wgpu::BufferSlice<'a>,
        descs: &'a wgpu::Buffer,
        output: &'a wgpu::Buffer,
        status: &'a wgpu::Buffer,
    ) -> Self {
        PassBindings {
            input,
            descs: descs.slice(..),
            output: output.slice(..),
            status: status.slice(..),
        }
    }
}

/// A pass that decodes or copies a batch of blocks described by
/// [`BlockDesc`](crate::decode::BlockDesc)s over one
/// [`PassBindings`]: the LZ4 decoder, the GDeflate decoder and the
/// stored-copy pass. A pipeline writes [`Self::encode_in`]; recording over
/// whole buffers, with or without GPU timestamps, comes with it.
pub trait BlockPass {
    /// Records one dispatch over `block_count` blocks: block `i` is
    /// descriptor `i` of `bindings.descs`, writes its output range of
    /// `bindings.output` and status word `i` of `bindings.status`. Slices
    /// must start at the device's storage-offset alignment; each
    /// pipeline's docs say what else it checks. `timestamp_writes` (needs
    /// `Features::TIMESTAMP_QUERY`) times the pass, for benches. Nothing is
    /// recorded when it returns an error.
    fn encode_in(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        bindings: PassBindings<'_>,
        block_count: u32,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), PassError>;

    /// [`Self::encode_in`] over whole buffers (`input` as given), with GPU
    /// timestamps written at the start and end of the pass.
    #[allow(clippy::too_many_arguments)]
    fn encode_timed(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &wgpu::Buffer,
        output: &wgpu::Buffer,
        status: &wgpu::Buffer,
        block_count: u32,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), PassError> {
        let bindings = PassBindings::whole(input, descs, output, status);
        self.encode_in(device, encoder, bindings, block_count, timestamp_writes)
    }

    /// [`Self::encode_in`] over whole buffers (`input` as given), untimed.
    #[allow(clippy::too_many_arguments)]
    fn encode(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &wgpu::Buffer,
        output: &wgpu::Buffer,
        status: &wgpu::Buffer,
        block_count: u32,
    ) -> Result<(), PassError> {
        self.encode_timed(
            device,
            encoder,
            input,
            descs,
            output,
            status,
            block_count,
            None,
        )
    }

    /// The label of the descriptor table [`Self::encode_blocks`] uploads.
    const TABLE_LABEL: &'static str;

    /// Checks a descriptor table made on the CPU against the pass's rules
    /// and the bindings' sizes, before [`Self::encode_blocks`] uploads it.
    fn validate_table(
        &self,
        descs: &[BlockDesc],
        input_len: u64,
        output_len: u64,
    ) -> Result<(), PassError>;

    /// Checks `descs` ([`Self::validate_table`]), uploads them as the
    /// descriptor table and records the dispatch over whole buffers.
    fn encode_blocks(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &[BlockDesc],
        output: &wgpu::Buffer,
        status: &wgpu::Buffer,
    ) -> Result<(), PassError> {
        if descs.is_empty() {
            return Ok(());
        }
        self.validate_table(descs, input.size(), output.size())?;
        let (table, count) = upload_table(device, Self::TABLE_LABEL, descs)?;
        self.encode(device, encoder, input, &table, output, status, count)
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Access {
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    ReadWrite,
    /// `var<uniform>`.
    Uniform,
}

/// A compute pipeline whose bindings are buffers `0..n` of group 0.
pub(crate) struct Kernel {
    label: &'static str,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

impl Kernel {
    /// Builds `entry_point` of the WGSL `source` with `bindings` and the
    /// pipeline-overridable `constants`.
    pub(crate) fn new(
        device: &wgpu::Device,
        label: &'static str,
        source: &str,
        entry_point: &str,
        bindings: &[Access],
        constants: &[(&str, f64)],
    ) -> Kernel {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let entries: Vec<_> = bindings
            .iter()
            .enumerate()
            .map(|(i, access)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match access {
                        Access::Read => wgpu::BufferBindingType::Storage { read_only: true },
                        Access::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                        Access::Uniform => wgpu::BufferBindingType::Uniform,
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(label),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(entry_point),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants,
                // Every shader here writes its workgroup memory before it
                // reads it (or has none): zeroing it would be wasted work.
                // (lz4_decode_v2_pair clears its first flag word itself.)
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        Kernel {
            label,
            pipeline,
            layout,
        }
    }

    /// Binds `buffers` (binding `i` is `buffers[i]`) and records one
    /// dispatch of `grid` workgroups in a pass of its own.
    pub(crate) fn dispatch(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        buffers: &[wgpu::BindingResource<'_>],
        (grid_x, grid_y): (u32, u32),
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        let entries: Vec<_> = buffers
            .iter()
            .enumerate()
            .map(|(i, resource)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: resource.clone(),
            })
            .collect();
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.label),
            layout: &self.layout,
            entries: &entries,
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(self.label),
            timestamp_writes,
        });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(grid_x, grid_y, 1);
    }
}

/// A buffer slice as a binding (the input: a range of a larger buffer).
pub(crate) fn slice_binding<'a>(slice: &wgpu::BufferSlice<'a>) -> wgpu::BindingResource<'a> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer: slice.buffer(),
        offset: slice.offset(),
        size: wgpu::BufferSize::new(slice.size()),
    })
}

/// A uniform buffer holding `words`.
pub(crate) fn uniform(device: &wgpu::Device, label: &str, words: &[u32]) -> wgpu::Buffer {
    buffer_init(
        device,
        label,
        bytemuck::cast_slice(words),
        wgpu::BufferUsages::UNIFORM,
    )
}

/// A buffer holding `contents`, as wgpu's `create_buffer_init` makes it,
/// without its panic on a lost device: there the mapping wgpu hands back
/// is an error, and the buffer (as invalid as its device) is returned
/// unwritten and not unmapped (an unmap would be a validation error);
/// nothing recorded with it will run.
pub(crate) fn buffer_init(
    device: &wgpu::Device,
    label: &str,
    contents: &[u8],
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    let size = (contents.len() as u64).next_multiple_of(4).max(4);
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage,
        mapped_at_creation: true,
    });
    if let Ok(mut view) = buffer.get_mapped_range_mut(..) {
        view.slice(..contents.len()).copy_from_slice(contents);
        drop(view);
        buffer.unmap();
    }
    buffer
}

/// Uploads a descriptor table; returns it with its block count.
pub(crate) fn upload_table<T: bytemuck::Pod>(
    device: &wgpu::Device,
    label: &str,
    descs: &[T],
) -> Result<(wgpu::Buffer, u32), PassError> {
    let count = u32::try_from(descs.len()).map_err(|_| PassError::TooManyBlocks {
        blocks: descs.len() as u64,
        limit: u32::MAX as u64,
    })?;
    let table = buffer_init(
        device,
        label,
        bytemuck::cast_slice(descs),
        wgpu::BufferUsages::STORAGE,
    );
    Ok((table, count))
}

/// Checks the bindings and table sizes of a batch of `block_count` blocks
/// and returns the 2D grid `(x, y)` of one workgroup per block. `tables`
/// names each other buffer with the bytes it needs per block (0: no
/// per-block entries).
///
/// The rules: every binding's offset meets the device's storage-offset
/// alignment, its size is a non-zero multiple of 4 below 4 GiB (the shaders
/// do their byte arithmetic in u32) and within the device's binding limit;
/// the grid fits the per-dimension workgroup limit.
pub(crate) fn check_batch(
    device: &wgpu::Device,
    input: &wgpu::BufferSlice<'_>,
    tables: &[(&'static str, wgpu::BufferSlice<'_>, u64)],
    block_count: u32,
) -> Result<(u32, u32), PassError> {
    let limits = device.limits();
    let max_binding = limits
        .max_storage_buffer_binding_size
        .min(u32::MAX as u64 & !3);
    let align = limits.min_storage_buffer_offset_alignment as u64;
    let check = |binding, offset: u64, size: u64| {
        if !offset.is_multiple_of(align)
            || size == 0
            || !size.is_multiple_of(4)
            || size > max_binding
        {
            Err(PassError::Binding {
                binding,
                offset,
                size,
                align,
                max: max_binding,
            })
        } else {
            Ok(())
        }
    };
    check("input", input.offset(), input.size())?;
    for (what, slice, bytes_per_block) in tables {
        check(what, slice.offset(), slice.size())?;
        let needed = block_count as u64 * bytes_per_block;
        if slice.size() < needed {
            return Err(PassError::TooSmall {
                what,
                blocks: block_count,
                needed,
                have: slice.size(),
            });
        }
    }
    grid(device, block_count, 1)
}

/// The dispatch grid for `block_count` blocks, `per_group` of them per
/// workgroup: (x, y) with x the row stride the shaders count blocks by.
pub(crate) fn grid(
    device: &wgpu::Device,
    block_count: u32,
    per_group: u32,
) -> Result<(u32, u32), PassError> {
    let per_dim = device.limits().max_compute_workgroups_per_dimension.max(1);
    let groups = block_count.div_ceil(per_group.max(1)).max(1);
    let grid_x = groups.min(per_dim);
    let grid_y = groups.div_ceil(grid_x);
    if grid_y > per_dim {
        return Err(PassError::TooManyBlocks {
            blocks: block_count as u64,
            limit: per_dim as u64 * per_dim as u64 * per_group.max(1) as u64,
        });
    }
    Ok((grid_x, grid_y))
}

/// Why a GPU pass (an LZ4 or GDeflate decode, a stored copy, a checksum or
/// un-conditioning pass) could not record a batch. Nothing is recorded when
/// `encode` returns one of these.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PassError {
    /// A binding's offset or size breaks the device's storage-binding rules.
    #[error("{binding} binding at offset {offset}, {size} bytes: needs offset a multiple of {align}, size a non-zero multiple of 4, at most {max} bytes")]
    Binding {
        /// Which binding (input, descriptors, output, status).
        binding: &'static str,
        /// Its offset in its buffer.
        offset: u64,
        /// Its size.
        size: u64,
        /// The required offset alignment.
        align: u64,
        /// The largest storage binding the device allows.
        max: u64,
    },
    /// The descriptor table or the status buffer is too small for the batch.
    #[error("{what} holds {have} bytes, the batch of {blocks} blocks needs {needed}")]
    TooSmall {
        /// Which buffer.
        what: &'static str,
        /// Blocks in the batch.
        blocks: u32,
        /// Bytes needed.
        needed: u64,
        /// Bytes it has.
        have: u64,
    },
    /// More blocks than a 2D dispatch can address.
    #[error("{blocks} blocks exceed the {limit} one dispatch can address")]
    TooManyBlocks {
        /// Blocks in the batch.
        blocks: u64,
        /// The device's limit.
        limit: u64,
    },
    /// A descriptor breaks the layout rules of [`BlockDesc`](crate::decode::BlockDesc).
    #[error("block {block}: {reason}")]
    BadDescriptor {
        /// Index of the block in the batch.
        block: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// The v2 variants with 16-byte stores
    /// ([`Lz4DecodePath::is_wide`](crate::decode::gpu::Lz4DecodePath::is_wide)) bind
    /// the output as 16-byte units (for their vec4 stores), so the output
    /// buffer's size must be a multiple of 16: the last bytes of any other
    /// size could not be reached.
    #[error("output buffer of {size} bytes: the {path} decoder binds it as 16-byte units, so its size must be a multiple of 16")]
    OutputNotWholeUnits {
        /// The variant's name ([`Lz4DecodePath::name`](crate::decode::gpu::Lz4DecodePath::name)).
        path: &'static str,
        /// The output buffer's size.
        size: u64,
    },
    /// Two blocks' output ranges overlap.
    #[error("blocks {first} and {second} write overlapping output ranges")]
    Overlap {
        /// The block with the lower output offset.
        first: usize,
        /// The other block.
        second: usize,
    },
}

#[cfg(test)]
pub(crate) fn assert_wgsl_valid(source: &str) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{}", e.emit_to_string(source)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}", e.emit_to_string(source)));
}
