//! The decoder's dispatch shape: 524,288 blocks (65,536 x 8, past the
//! 65,535 workgroups one grid dimension allows) go in one `encode` and every
//! one of them runs, on the default variant (`Lz4DecodePipeline::new`) and on
//! the device's v2 variant with 16-byte stores (never the default; its output
//! is bound as 16-byte units). The grid arithmetic is the same in both entry
//! points and v2's word and 16-byte variants are one source, so two cover
//! it: lavapipe takes about 18 s per variant here, so not all six.
//!
//! Run: `WGPU_BACKEND=vulkan cargo test --release --test gpu_lz4_dispatch`

mod common;

use common::test_device;
use gpustream::decode::gpu::{default_path, BlockPass, Lz4DecodePath, Lz4DecodePipeline};
use gpustream::decode::{BlockDesc, Lz4Status};
use gpustream_tools::gpu::read_buffer;
use wgpu::util::DeviceExt;

#[test]
fn half_a_million_blocks_in_one_dispatch() {
    let Some(ctx) = test_device() else { return };
    let device = &ctx.device;
    const BLOCKS: u32 = 65_536 * 8;
    // Block i: a 5-byte LZ4 block whose 4 literals spell i; output word i.
    let mut input = Vec::with_capacity(BLOCKS as usize * 5 + 3);
    let mut descs = Vec::with_capacity(BLOCKS as usize);
    for i in 0..BLOCKS {
        descs.push(BlockDesc::linear(input.len() as u32, 5, i * 4, 4));
        input.push(0x40);
        input.extend_from_slice(&i.to_le_bytes());
    }
    input.resize(input.len().next_multiple_of(4), 0);
    let input = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("many blocks input"),
        contents: &input,
        usage: wgpu::BufferUsages::STORAGE,
    });
    let out_len = BLOCKS as u64 * 4;
    let buffer = |label, usage| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: out_len,
            usage,
            mapped_at_creation: false,
        })
    };
    let storage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
    let (output, status) = (buffer("output", storage), buffer("status", storage));
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: out_len * 2,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let default = default_path(device);
    let v2 = if device.features().contains(wgpu::Features::SUBGROUP) {
        Lz4DecodePath::SubgroupV2Wide
    } else {
        Lz4DecodePath::PortableV2Wide
    };
    let mut paths = vec![default];
    if v2 != default {
        paths.push(v2);
    }
    for path in paths {
        let Ok(pipeline) = Lz4DecodePipeline::with_path(device, path) else {
            eprintln!("!!! {path:?} not tested on {}", ctx.describe());
            continue;
        };
        let mut encoder = device.create_command_encoder(&Default::default());
        encoder.clear_buffer(&output, 0, None);
        encoder.clear_buffer(&status, 0, None);
        pipeline
            .encode_blocks(
                device,
                &mut encoder,
                input.slice(..),
                &descs,
                &output,
                &status,
            )
            .unwrap();
        encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, out_len);
        encoder.copy_buffer_to_buffer(&status, 0, &readback, out_len, out_len);
        ctx.queue.submit([encoder.finish()]);
        let words: Vec<u32> =
            bytemuck::pod_collect_to_vec(&read_buffer(device, &readback).expect("device lost"));
        let (out, st) = words.split_at(BLOCKS as usize);
        for i in 0..BLOCKS as usize {
            assert_eq!(
                Lz4Status::from_word(st[i]),
                Lz4Status::Ok,
                "{path:?}: block {i}"
            );
            assert_eq!(out[i], i as u32, "{path:?}: block {i}'s output");
        }
    }
    assert_eq!(Lz4DecodePipeline::new(device).path(), default);
}
