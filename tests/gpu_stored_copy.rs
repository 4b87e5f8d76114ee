//! The stored-block copy kernel against its Rust twin and memcpy: thousands
//! of blocks at unaligned input offsets, linear and with padded rows, in one
//! dispatch, guard words around every output range, malformed descriptors
//! flagged while the other blocks still copy; and a grid taller than one
//! dispatch row.
//!
//! Run: `WGPU_BACKEND=vulkan GPUSTREAM_REQUIRE_GPU=1 cargo test --release --test gpu_stored_copy`

mod common;

use common::test_device;
use gpustream::decode::gpu::{validate_stored_descs, BlockPass, StoredCopyPipeline};
use gpustream::decode::{cpu_twin, BlockDesc, Lz4Status};
use gpustream_tools::gpu::read_buffer;
use gpustream_tools::gpu::GpuContext;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wgpu::util::DeviceExt;

/// The guard value of output word `i`: no two neighbours alike, so a stray
/// or shifted write shows.
fn guard_words(n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(0x9E37_79B9) ^ 0xA5C3_5A3C)
        .collect()
}

fn to_words(bytes: &[u8]) -> Vec<u32> {
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().next_multiple_of(4).max(4), 0);
    bytemuck::cast_slice(&padded).to_vec()
}

/// Runs one dispatch over `descs`; the input binding starts `lead` bytes
/// into its buffer (a multiple of the storage-offset alignment) to check
/// that offsets count from the binding. Returns (output words, status words).
fn run_gpu(
    ctx: &GpuContext,
    input: &[u8],
    descs: &[BlockDesc],
    initial: &[u32],
) -> (Vec<u32>, Vec<u32>) {
    let device = &ctx.device;
    let lead = device.limits().min_storage_buffer_offset_alignment as usize;
    let mut bytes = vec![0xEEu8; lead];
    bytes.extend_from_slice(
        &to_words(input)
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<_>>(),
    );
    let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("stored input"),
        contents: &bytes,
        usage: wgpu::BufferUsages::STORAGE,
    });
    let table = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("stored descriptors"),
        contents: bytemuck::cast_slice(descs),
        usage: wgpu::BufferUsages::STORAGE,
    });
    let output = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("stored output"),
        contents: bytemuck::cast_slice(initial),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    });
    let status_len = descs.len() as u64 * 4;
    let status = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("stored status"),
        size: status_len,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let out_len = initial.len() as u64 * 4;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("stored readback"),
        size: out_len + status_len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let pipeline = StoredCopyPipeline::new(device);
    let mut encoder = device.create_command_encoder(&Default::default());
    pipeline
        .encode(
            device,
            &mut encoder,
            input_buf.slice(lead as u64..),
            &table,
            &output,
            &status,
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

/// Whether output byte `at` lies inside `desc`'s output rows; the byte's
/// position in the block if so.
fn inside(desc: &BlockDesc, at: u64) -> Option<usize> {
    let rel = at.checked_sub(desc.dst_offset as u64)?;
    if desc.row_bytes == 0 {
        return (rel < desc.dst_size as u64).then_some(rel as usize);
    }
    let (row, col) = (rel / desc.row_pitch as u64, rel % desc.row_pitch as u64);
    let logical = row * desc.row_bytes as u64 + col;
    (col < desc.row_bytes as u64 && logical < desc.dst_size as u64).then_some(logical as usize)
}

#[test]
fn random_blocks_match_twin_and_memcpy() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let mut input = Vec::new();
    let mut descs = Vec::new();
    let mut out_len = 0u64;
    // Sizes over the whole range, most small so lavapipe stays quick; the
    // edges 0..=5, 65535 and 65536 always included.
    let fixed = [0usize, 1, 2, 3, 4, 5, 15, 16, 17, 65535, 65536];
    for i in 0..3000 {
        let size = if i < fixed.len() {
            fixed[i]
        } else if rng.gen_bool(0.08) {
            rng.gen_range(0..=65536)
        } else {
            rng.gen_range(0..=2048)
        };
        // Unaligned input positions with small gaps of junk between blocks.
        input.extend((0..rng.gen_range(0..8)).map(|_| rng.gen::<u8>()));
        let src = input.len() as u32;
        input.extend((0..size).map(|_| rng.gen::<u8>()));
        out_len += rng.gen_range(0..3u64) * 4;
        let mut d = BlockDesc::linear(src, size as u32, out_len as u32, size as u32);
        if rng.gen_bool(0.4) {
            let row_bytes = rng.gen_range(1..=1024u32) * 4;
            let pitch = row_bytes.next_multiple_of(256) + rng.gen_range(0..2) * 256;
            d = d.with_rows(row_bytes, pitch);
        }
        out_len += d.dst_extent().unwrap().next_multiple_of(4);
        descs.push(d);
    }
    let good = descs.len();
    let out_words = (out_len as usize / 4) + 64;
    let in_len = input.len().next_multiple_of(4) as u32;
    let out_bytes = out_words as u32 * 4;
    // Malformed descriptors, each checked by the shader alone.
    let bad = [
        BlockDesc::linear(0, 8, 0, 12),                    // sizes differ
        BlockDesc::linear(1, 8, 2, 8),                     // unaligned output
        BlockDesc::linear(in_len - 4, 8, 0, 8),            // input past the binding
        BlockDesc::linear(0, 8, out_bytes - 4, 8),         // output past the binding
        BlockDesc::linear(u32::MAX - 2, 8, 0, 8),          // offset near u32::MAX
        BlockDesc::linear(0, 65540, 0, 65540),             // over 64 KiB
        BlockDesc::linear(0, 64, 0, 64).with_rows(6, 256), // row not whole words
        BlockDesc::linear(0, 64, 0, 64).with_rows(32, 16), // pitch below row
        BlockDesc::linear(0, 64, 0, 64).with_rows(4, 0x4000_0000), // rows past the end
    ];
    assert_eq!(
        validate_stored_descs(&descs, in_len as u64, out_bytes as u64),
        Ok(())
    );
    for (k, b) in bad.iter().enumerate() {
        assert!(
            validate_stored_descs(&[*b], in_len as u64, out_bytes as u64).is_err(),
            "CPU check accepts bad descriptor {k}"
        );
        // Interleave them with the good ones.
        descs.insert(k * 300 + 7, *b);
    }
    let initial = guard_words(out_words);

    let (gpu_out, gpu_status) = run_gpu(&ctx, &input, &descs, &initial);

    let in_words = to_words(&input);
    let mut twin_out = initial.clone();
    let twin_status: Vec<u32> = descs
        .iter()
        .map(|d| cpu_twin::stored_copy(d, &in_words, &mut twin_out))
        .collect();
    assert_eq!(gpu_status, twin_status, "status words differ from the twin");
    assert!(gpu_out == twin_out, "output differs from the twin");

    let out: &[u8] = bytemuck::cast_slice(&gpu_out);
    let guard: &[u8] = bytemuck::cast_slice(&initial);
    let mut owned = vec![false; out.len()];
    let mut ok_blocks = 0;
    for (i, d) in descs.iter().enumerate() {
        let status = Lz4Status::from_word(gpu_status[i]);
        if bad.contains(d) {
            assert_eq!(status, Lz4Status::BadDescriptor, "block {i} {d:?}");
            continue;
        }
        assert_eq!(status, Lz4Status::Ok, "block {i} {d:?}");
        ok_blocks += 1;
        let src = &input[d.src_offset as usize..][..d.src_size as usize];
        let end = d.dst_offset as u64 + d.dst_extent().unwrap();
        for at in d.dst_offset as u64..end {
            if let Some(k) = inside(d, at) {
                assert_eq!(out[at as usize], src[k], "block {i} byte {k}");
                owned[at as usize] = true;
            }
        }
    }
    assert_eq!(ok_blocks, good);
    for (at, _) in owned.iter().enumerate().filter(|(_, o)| !**o) {
        assert_eq!(out[at], guard[at], "guard byte {at} overwritten");
    }
}

#[test]
fn more_blocks_than_one_grid_row() {
    let Some(ctx) = test_device() else { return };
    let per_dim = ctx.device.limits().max_compute_workgroups_per_dimension;
    // Tiny blocks: only the count matters here.
    let count = per_dim as usize + 1000;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut input = Vec::new();
    let mut descs = Vec::with_capacity(count);
    let mut out_len = 0u32;
    for _ in 0..count {
        let size = rng.gen_range(0..=9u32);
        let src = input.len() as u32;
        input.extend((0..size).map(|_| rng.gen::<u8>()));
        descs.push(BlockDesc::linear(src, size, out_len, size));
        out_len += size.next_multiple_of(4) + 4;
    }
    let initial = guard_words(out_len as usize / 4 + 1);
    let (gpu_out, status) = run_gpu(&ctx, &input, &descs, &initial);
    let out: &[u8] = bytemuck::cast_slice(&gpu_out);
    for (i, d) in descs.iter().enumerate() {
        assert_eq!(Lz4Status::from_word(status[i]), Lz4Status::Ok, "block {i}");
        assert_eq!(
            &out[d.dst_offset as usize..][..d.dst_size as usize],
            &input[d.src_offset as usize..][..d.src_size as usize],
            "block {i}"
        );
    }
}
