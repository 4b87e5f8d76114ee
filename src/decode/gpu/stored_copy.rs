//! The pipeline that runs `shaders/stored_copy.wgsl` (twin:
//! `decode::cpu_twin::stored_copy`): blocks stored uncompressed (codec
//! `none`) copied from the input binding, at any byte offset, to their
//! output ranges (linear or rows padded for `copy_buffer_to_texture`); many
//! blocks per dispatch, one workgroup per block, one status word per block
//! in the [`Lz4Status`](crate::decode::Lz4Status) format.

use crate::decode::cpu_twin::stored_copy::WORKGROUP_SIZE;
use crate::decode::gpu::lz4_decode::{validate_descs, Lz4EncodeError};
use crate::decode::Lz4BlockDesc;
use wgpu::util::DeviceExt;

/// The shader's WGSL source.
pub const SHADER: &str = include_str!("../../../shaders/stored_copy.wgsl");

/// The compute pipeline copying batches of stored blocks on the GPU.
pub struct StoredCopyPipeline {
    pipeline: wgpu::ComputePipeline,
    bind_group_layout: wgpu::BindGroupLayout,
}

fn buffer_entry(binding: u32, ty: wgpu::BufferBindingType) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn storage(read_only: bool) -> wgpu::BufferBindingType {
    wgpu::BufferBindingType::Storage { read_only }
}

/// Checks the bindings and the table sizes of a batch of `block_count`
/// blocks with `desc_size`-byte descriptors and `status_words` status words
/// per block, and returns the 2D grid `(x, y)` of one workgroup per block.
/// Shared by the stored-copy and crc32c pipelines; the rules are those of
/// `Lz4DecodePipeline::encode`.
pub(crate) fn check_batch(
    device: &wgpu::Device,
    input: &wgpu::BufferSlice<'_>,
    tables: &[(&'static str, &wgpu::Buffer, u64)],
    block_count: u32,
) -> Result<(u32, u32), Lz4EncodeError> {
    let limits = device.limits();
    // The shaders do their byte arithmetic in u32: bindings stay below 4 GiB.
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
            Err(Lz4EncodeError::Binding {
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
    for &(what, buffer, bytes_per_block) in tables {
        check(what, 0, buffer.size())?;
        let needed = block_count as u64 * bytes_per_block;
        if buffer.size() < needed {
            return Err(Lz4EncodeError::TooSmall {
                what,
                blocks: block_count,
                needed,
                have: buffer.size(),
            });
        }
    }
    let per_dim = limits.max_compute_workgroups_per_dimension.max(1);
    let grid_x = block_count.min(per_dim);
    let grid_y = block_count.div_ceil(grid_x);
    if grid_y > per_dim {
        return Err(Lz4EncodeError::TooManyBlocks {
            blocks: block_count as u64,
            limit: per_dim as u64 * per_dim as u64,
        });
    }
    Ok((grid_x, grid_y))
}

impl StoredCopyPipeline {
    /// Builds the pipeline for `device` (plain WGSL, every adapter runs it).
    pub fn new(device: &wgpu::Device) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("stored_copy"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let bind_group_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("stored_copy"),
            entries: &[
                buffer_entry(0, storage(true)),
                buffer_entry(1, storage(true)),
                buffer_entry(2, storage(false)),
                buffer_entry(3, storage(false)),
                buffer_entry(4, wgpu::BufferBindingType::Uniform),
                buffer_entry(5, storage(false)),
            ],
        });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("stored_copy"),
            bind_group_layouts: &[Some(&bind_group_layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("stored_copy"),
            layout: Some(&layout),
            module: &module,
            entry_point: Some("stored_copy"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[("WG", WORKGROUP_SIZE as f64)],
                // The shader uses no workgroup memory.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        Self {
            pipeline,
            bind_group_layout,
        }
    }

    /// Records one dispatch copying `block_count` stored blocks.
    ///
    /// `input` is the range the descriptors' `src_offset` count from (its
    /// offset must meet the device's storage-offset alignment, its size be a
    /// multiple of 4); `descs` holds at least `block_count`
    /// [`Lz4BlockDesc`]s with `src_size == dst_size`; block `i` writes its
    /// output range of `output` (bound whole, twice: as words and as 16-byte
    /// units) and status word `i` of `status` (`Lz4Status::Ok` or
    /// `Lz4Status::BadDescriptor`; clear it to 0 first to tell blocks that
    /// never ran).
    ///
    /// The shader checks every descriptor against the bound buffers; the
    /// caller promises that the blocks' output ranges are disjoint (use
    /// [`validate_stored_descs`] when the table comes from the CPU, as
    /// [`Self::encode_blocks`] does).
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &wgpu::Buffer,
        output: &wgpu::Buffer,
        status: &wgpu::Buffer,
        block_count: u32,
    ) -> Result<(), Lz4EncodeError> {
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

    /// [`Self::encode`] with GPU timestamps written at the start and end of
    /// the pass (needs `Features::TIMESTAMP_QUERY`); for benches.
    #[allow(clippy::too_many_arguments)]
    pub fn encode_timed(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &wgpu::Buffer,
        output: &wgpu::Buffer,
        status: &wgpu::Buffer,
        block_count: u32,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), Lz4EncodeError> {
        if block_count == 0 {
            return Ok(());
        }
        let desc_size = std::mem::size_of::<Lz4BlockDesc>() as u64;
        let (grid_x, grid_y) = check_batch(
            device,
            &input,
            &[
                ("descriptor table", descs, desc_size),
                ("output", output, 0),
                ("status buffer", status, 4),
            ],
            block_count,
        )?;
        let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("stored_copy params"),
            contents: bytemuck::cast_slice(&[block_count, grid_x, 0, 0]),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("stored_copy"),
            layout: &self.bind_group_layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: input.buffer(),
                        offset: input.offset(),
                        size: wgpu::BufferSize::new(input.size()),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: descs.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: output.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: status.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 5,
                    resource: output.as_entire_binding(),
                },
            ],
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("stored_copy"),
            timestamp_writes,
        });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(grid_x, grid_y, 1);
        Ok(())
    }

    /// Checks `descs` with [`validate_stored_descs`], uploads them as the
    /// descriptor table and records the dispatch (see [`Self::encode`]).
    pub fn encode_blocks(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &[Lz4BlockDesc],
        output: &wgpu::Buffer,
        status: &wgpu::Buffer,
    ) -> Result<(), Lz4EncodeError> {
        if descs.is_empty() {
            return Ok(());
        }
        validate_stored_descs(descs, input.size(), output.size())?;
        let count = u32::try_from(descs.len()).map_err(|_| Lz4EncodeError::TooManyBlocks {
            blocks: descs.len() as u64,
            limit: u32::MAX as u64,
        })?;
        let table = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("stored_copy descriptors"),
            contents: bytemuck::cast_slice(descs),
            usage: wgpu::BufferUsages::STORAGE,
        });
        self.encode(device, encoder, input, &table, output, status, count)
    }
}

/// Checks a stored-block descriptor table on the CPU: `src_size ==
/// dst_size` for every block, then the rules of [`validate_descs`] (layout,
/// both bindings, disjoint output ranges).
pub fn validate_stored_descs(
    descs: &[Lz4BlockDesc],
    input_len: u64,
    output_len: u64,
) -> Result<(), Lz4EncodeError> {
    if let Some(block) = descs.iter().position(|d| d.src_size != d.dst_size) {
        return Err(Lz4EncodeError::BadDescriptor {
            block,
            reason: "a stored block's src_size must equal its dst_size",
        });
    }
    validate_descs(descs, input_len, output_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shader_validates() {
        let module = naga::front::wgsl::parse_str(SHADER)
            .unwrap_or_else(|e| panic!("{}", e.emit_to_string(SHADER)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}", e.emit_to_string(SHADER)));
    }

    #[test]
    fn stored_descriptor_checks() {
        let ok = Lz4BlockDesc::linear(3, 10, 0, 10);
        assert_eq!(validate_stored_descs(&[ok], 13, 12), Ok(()));
        let sizes_differ = Lz4BlockDesc::linear(3, 10, 16, 12);
        assert!(matches!(
            validate_stored_descs(&[ok, sizes_differ], 13, 64),
            Err(Lz4EncodeError::BadDescriptor { block: 1, .. })
        ));
        let overlap = Lz4BlockDesc::linear(0, 4, 8, 4);
        assert!(matches!(
            validate_stored_descs(&[ok, overlap], 13, 64),
            Err(Lz4EncodeError::Overlap { .. })
        ));
    }
}
