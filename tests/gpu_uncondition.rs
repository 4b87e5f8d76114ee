//! The BCn un-conditioning pass against its Rust twin and
//! `BlockTransform::undo`: blocks of every transform, linear and in padded
//! rows, their conditioned bytes in a region of the same output, guard
//! words everywhere else; malformed descriptors (including 10,000 mutated
//! ones) flagged and writing nothing outside their own output range; and
//! the decoder bench's pairing: LZ4 pass, then this pass, equal to the
//! CPU's decode of conditioned blocks.
//!
//! Run: `WGPU_BACKEND=vulkan GPUSTREAM_REQUIRE_GPU=1 cargo test --release --test gpu_uncondition`

mod common;

use common::test_device;
use gpustream::decode::gpu::{validate_uncondition_descs, UnconditionPipeline};
use gpustream::decode::{cpu_twin, BlockDesc, Lz4Status};
use gpustream::pack::BlockTransform;
use gpustream_tools::gpu::read_buffer;
use gpustream_tools::gpu::GpuContext;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wgpu::util::DeviceExt;

fn guard_words(n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(0x9E37_79B9) ^ 0x5A3C_A5C3)
        .collect()
}

/// One dispatch over `descs` on an output holding `initial`; returns
/// (output words, status words).
fn run_gpu(ctx: &GpuContext, descs: &[BlockDesc], initial: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let device = &ctx.device;
    let table = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("uncondition descriptors"),
        contents: bytemuck::cast_slice(descs),
        usage: wgpu::BufferUsages::STORAGE,
    });
    let output = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("uncondition output"),
        contents: bytemuck::cast_slice(initial),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    });
    let status_len = (descs.len() as u64 * 4).max(4);
    let status = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("uncondition status"),
        size: status_len,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let out_len = initial.len() as u64 * 4;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("uncondition readback"),
        size: out_len + status_len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let pipeline = UnconditionPipeline::new(device);
    let mut encoder = device.create_command_encoder(&Default::default());
    pipeline
        .encode_in(
            device,
            &mut encoder,
            table.slice(..),
            output.slice(..),
            status.slice(..),
            descs.len() as u32,
        )
        .expect("encode");
    encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, out_len);
    encoder.copy_buffer_to_buffer(&status, 0, &readback, out_len, status_len);
    ctx.queue.submit([encoder.finish()]);
    let back = read_buffer(device, &readback).expect("readback");
    let (out, st) = back.split_at(out_len as usize);
    (
        bytemuck::cast_slice(out).to_vec(),
        bytemuck::cast_slice(st).to_vec(),
    )
}

/// Random blocks of every transform, and of none (a plain relayout into
/// rows, as packed mips decoded on the GPU take): texture-like sizes (whole BC blocks)
/// and odd ones, linear and in padded rows. Output ranges first, the
/// conditioned copies after them. Returns the descriptors, the initial
/// output words and each block's original bytes.
fn layout(rng: &mut ChaCha8Rng, blocks: usize) -> (Vec<BlockDesc>, Vec<u32>, Vec<Vec<u8>>) {
    let transforms = &BlockTransform::ALL;
    let mut descs = Vec::new();
    let mut originals = Vec::new();
    let mut dst = 0u32;
    for i in 0..blocks {
        let t = transforms[i % transforms.len()];
        // A relayout has no elements: rows of whole words.
        let e = t.element_bytes().max(4);
        let size = match rng.gen_range(0..4) {
            0 => e * rng.gen_range(1..8),
            1 => rng.gen_range(1..3000u32),
            2 => 65536,
            _ => e * rng.gen_range(8..512),
        };
        let mut d = BlockDesc::linear(0, size, dst, size);
        if rng.gen_bool(0.5) && size % 4 == 0 {
            let row = (e * rng.gen_range(1..16)).min(size.next_multiple_of(4));
            d = d.with_rows(row, row.next_multiple_of(256));
        }
        d.reserved[0] = t.id() as u32;
        dst = (dst as u64 + d.dst_extent().unwrap()).next_multiple_of(4) as u32
            + 4 * rng.gen_range(0..3);
        originals.push((0..size).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>());
        descs.push(d);
    }
    let mut bytes: Vec<u8> = bytemuck::cast_slice(&guard_words(dst as usize / 4 + 1)).to_vec();
    for (d, data) in descs.iter_mut().zip(&originals) {
        let t = BlockTransform::from_id(d.reserved[0] as u8).unwrap();
        let mut cond = vec![0u8; data.len()];
        t.apply(data, &mut cond);
        bytes.extend((0..rng.gen_range(0..9)).map(|_| 0xEEu8));
        d.src_offset = bytes.len() as u32;
        bytes.extend_from_slice(&cond);
    }
    bytes.resize(bytes.len().next_multiple_of(4) + 4, 0xEE);
    (descs, bytemuck::cast_slice(&bytes).to_vec(), originals)
}

#[test]
fn random_blocks_match_twin_and_undo() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(30);
    let (descs, initial, originals) = layout(&mut rng, 600);
    validate_uncondition_descs(&descs, initial.len() as u64 * 4).unwrap();
    let (out, status) = run_gpu(&ctx, &descs, &initial);
    let mut twin = initial.clone();
    for (i, d) in descs.iter().enumerate() {
        assert_eq!(cpu_twin::bcn_uncondition(&mut twin, d), 1, "twin block {i}");
        assert_eq!(Lz4Status::from_word(status[i]), Lz4Status::Ok, "block {i}");
    }
    assert!(out == twin, "the shader and its twin differ");
    // Every block reads back as the original, row by row.
    let bytes: &[u8] = bytemuck::cast_slice(&out);
    for (d, data) in descs.iter().zip(&originals) {
        let row = if d.row_bytes == 0 {
            d.dst_size
        } else {
            d.row_bytes
        } as usize;
        for (r, chunk) in data.chunks(row).enumerate() {
            let at = d.dst_offset as usize + r * d.row_pitch as usize;
            assert_eq!(&bytes[at..at + chunk.len()], chunk);
        }
    }
}

#[test]
fn mutated_descriptors_never_write_outside_their_range() {
    // 10,000 descriptors with one field mutated at random, in 20 rounds of
    // 500: through the twin, a valid one writes only inside its own range;
    // on the GPU, every one the twin refuses is flagged in one dispatch
    // and the output is left as it was.
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    for round in 0..20 {
        let (good, initial, _) = layout(&mut rng, 8);
        let len = initial.len() as u32 * 4;
        let mut descs = Vec::new();
        for k in 0..500 {
            let mut d = good[k % good.len()];
            let v = match rng.gen_range(0..4) {
                0 => rng.gen::<u32>(),
                1 => rng.gen_range(0..len + 64),
                2 => d.src_offset ^ (1 << rng.gen_range(0..20)),
                _ => 0,
            };
            match rng.gen_range(0..7) {
                0 => d.src_offset = v,
                1 => d.src_size = v,
                2 => d.dst_offset = v,
                3 => d.dst_size = v,
                4 => d.row_bytes = v,
                5 => d.row_pitch = v,
                _ => d.reserved[0] = v % 8,
            }
            descs.push(d);
        }
        // Each alone through the twin: a valid one writes only inside its
        // own extent (valid mutated ones may overlap each other, so they
        // are not run together).
        let mut want_status = Vec::new();
        for d in &descs {
            let mut alone = initial.clone();
            want_status.push(cpu_twin::bcn_uncondition(&mut alone, d));
            if want_status.last() == Some(&1) {
                // A valid descriptor writes only inside its own extent.
                let ext = d.dst_extent().unwrap();
                let (a, b) = (
                    d.dst_offset as usize / 4,
                    (d.dst_offset as u64 + ext).div_ceil(4) as usize,
                );
                for (w, (x, y)) in alone.iter().zip(&initial).enumerate() {
                    assert!(
                        x == y || (a..b).contains(&w),
                        "round {round}: word {w} written outside"
                    );
                }
            }
        }
        // On the GPU: the bad ones in one dispatch must all be flagged and
        // leave the buffer as it was.
        let bad: Vec<BlockDesc> = descs
            .iter()
            .zip(&want_status)
            .filter(|(_, &s)| s != 1)
            .map(|(d, _)| *d)
            .collect();
        if bad.is_empty() {
            continue;
        }
        let (out, status) = run_gpu(&ctx, &bad, &initial);
        assert!(status
            .iter()
            .all(|&s| Lz4Status::from_word(s) == Lz4Status::BadDescriptor));
        assert!(out == initial, "round {round}: a bad descriptor wrote");
    }
}
