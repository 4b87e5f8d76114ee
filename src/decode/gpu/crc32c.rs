//! The pipeline that runs `shaders/crc32c.wgsl` (twin:
//! `decode::cpu_twin::crc32c`): checks the crc32c of thousands of stored
//! blocks in one dispatch on the GPU, where the bytes already are, instead
//! of reading them back out of write-combined staging memory on the CPU.
//! One workgroup per block; per block a status word
//! ([`check_code`]) and the computed checksum, so the host can name both
//! values in its error ([`BlockCheck::from_words`]).

pub use crate::decode::cpu_twin::crc32c::{check_code, BlockCheck, BlockCheckDesc};
use crate::decode::cpu_twin::crc32c::{WORKGROUP_SIZE, X8_POW};
use crate::decode::gpu::lz4_decode::Lz4EncodeError;
use crate::decode::gpu::stored_copy::check_batch;
use wgpu::util::DeviceExt;

/// The shader's WGSL source.
pub const SHADER: &str = include_str!("../../../shaders/crc32c.wgsl");

/// The compute pipeline checking the crc32c of batches of blocks.
pub struct Crc32cPipeline {
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

impl Crc32cPipeline {
    /// Builds the pipeline for `device` (plain WGSL, every adapter runs it).
    pub fn new(device: &wgpu::Device) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("crc32c"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let storage = |read_only| wgpu::BufferBindingType::Storage { read_only };
        let bind_group_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("crc32c"),
            entries: &[
                buffer_entry(0, storage(true)),
                buffer_entry(1, storage(true)),
                buffer_entry(2, storage(false)),
                buffer_entry(3, storage(false)),
                buffer_entry(4, wgpu::BufferBindingType::Uniform),
            ],
        });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("crc32c"),
            bind_group_layouts: &[Some(&bind_group_layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("crc32c"),
            layout: Some(&layout),
            module: &module,
            entry_point: Some("crc32c"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[("WG", WORKGROUP_SIZE as f64)],
                // The shader writes its workgroup memory before reading it.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        Self {
            pipeline,
            bind_group_layout,
        }
    }

    /// Records one dispatch checking `block_count` blocks.
    ///
    /// `input` is the range the descriptors' `src_offset` count from (its
    /// offset must meet the device's storage-offset alignment, its size be a
    /// multiple of 4); `descs` holds at least `block_count`
    /// [`BlockCheckDesc`]s; block `i` writes word `i` of `status` (a
    /// [`check_code`]; clear it to 0 first to tell blocks that never ran)
    /// and word `i` of `computed` (the checksum of its bytes, 0 for a bad
    /// descriptor).
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &wgpu::Buffer,
        status: &wgpu::Buffer,
        computed: &wgpu::Buffer,
        block_count: u32,
    ) -> Result<(), Lz4EncodeError> {
        self.encode_timed(
            device,
            encoder,
            input,
            descs,
            status,
            computed,
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
        status: &wgpu::Buffer,
        computed: &wgpu::Buffer,
        block_count: u32,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), Lz4EncodeError> {
        if block_count == 0 {
            return Ok(());
        }
        let desc_size = std::mem::size_of::<BlockCheckDesc>() as u64;
        let (grid_x, grid_y) = check_batch(
            device,
            &input,
            &[
                ("descriptor table", descs, desc_size),
                ("status buffer", status, 4),
                ("computed-checksum buffer", computed, 4),
            ],
            block_count,
        )?;
        let mut params = vec![block_count, grid_x, 0, 0];
        params.extend_from_slice(&X8_POW);
        let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("crc32c params"),
            contents: bytemuck::cast_slice(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("crc32c"),
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
                    resource: status.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: computed.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: params.as_entire_binding(),
                },
            ],
        });
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("crc32c"),
            timestamp_writes,
        });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(grid_x, grid_y, 1);
        Ok(())
    }

    /// Uploads `descs` as the descriptor table and records the dispatch
    /// (see [`Self::encode`]). The shader checks every range itself, so a
    /// bad descriptor fails its own block only.
    pub fn encode_blocks(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        input: wgpu::BufferSlice<'_>,
        descs: &[BlockCheckDesc],
        status: &wgpu::Buffer,
        computed: &wgpu::Buffer,
    ) -> Result<(), Lz4EncodeError> {
        if descs.is_empty() {
            return Ok(());
        }
        let count = u32::try_from(descs.len()).map_err(|_| Lz4EncodeError::TooManyBlocks {
            blocks: descs.len() as u64,
            limit: u32::MAX as u64,
        })?;
        let table = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("crc32c descriptors"),
            contents: bytemuck::cast_slice(descs),
            usage: wgpu::BufferUsages::STORAGE,
        });
        self.encode(device, encoder, input, &table, status, computed, count)
    }
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
    fn descriptor_is_16_bytes() {
        assert_eq!(std::mem::size_of::<BlockCheckDesc>(), 16);
    }
}
