//! The crc32c verification kernel against its Rust twin and the `crc32c`
//! crate: thousands of blocks at unaligned offsets, sizes 0..=65536, in one
//! dispatch; corrupted bytes and wrong expected values flagged as mismatches
//! naming both checksums; bad descriptors flagged alone; guard words past
//! the status and checksum arrays intact; a grid taller than one row.
//!
//! Run: `WGPU_BACKEND=vulkan GPUSTREAM_REQUIRE_GPU=1 cargo test --release --test gpu_crc32c`

mod common;

use common::test_device;
use gpustream::decode::cpu_twin;
use gpustream::decode::gpu::crc32c::check_code;
use gpustream::decode::gpu::{BlockCheck, BlockCheckDesc, Crc32cPipeline};
use gpustream_tools::gpu::read_buffer;
use gpustream_tools::gpu::GpuContext;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wgpu::util::DeviceExt;

const GUARD: u32 = 0x5A5A_C3C3;
/// Guard words after the batch's status and checksum words.
const SPARE: usize = 16;

fn to_words(bytes: &[u8]) -> Vec<u32> {
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().next_multiple_of(4).max(4), 0);
    bytemuck::cast_slice(&padded).to_vec()
}

/// One dispatch over `descs`; returns (status words, computed words), each
/// with SPARE guard words after the batch's.
fn run_gpu(ctx: &GpuContext, input: &[u8], descs: &[BlockCheckDesc]) -> (Vec<u32>, Vec<u32>) {
    let device = &ctx.device;
    let lead = device.limits().min_storage_buffer_offset_alignment as usize;
    let mut bytes = vec![0xEEu8; lead];
    bytes.extend(to_words(input).iter().flat_map(|w| w.to_le_bytes()));
    let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("crc input"),
        contents: &bytes,
        usage: wgpu::BufferUsages::STORAGE,
    });
    let words = descs.len() + SPARE;
    let guards = vec![GUARD; words];
    let make = |label| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: bytemuck::cast_slice(&guards),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        })
    };
    let (status, computed) = (make("crc status"), make("crc computed"));
    let len = words as u64 * 4;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("crc readback"),
        size: 2 * len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let pipeline = Crc32cPipeline::new(device);
    let mut encoder = device.create_command_encoder(&Default::default());
    pipeline
        .encode_blocks(
            device,
            &mut encoder,
            input_buf.slice(lead as u64..),
            descs,
            &status,
            &computed,
        )
        .expect("encode");
    encoder.copy_buffer_to_buffer(&status, 0, &readback, 0, len);
    encoder.copy_buffer_to_buffer(&computed, 0, &readback, len, len);
    ctx.queue.submit([encoder.finish()]);
    let back = read_buffer(device, &readback).expect("readback");
    let (s, c) = back.split_at(len as usize);
    (
        bytemuck::cast_slice(s).to_vec(),
        bytemuck::cast_slice(c).to_vec(),
    )
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Intact,
    CorruptByte,
    WrongExpected,
    Bad,
}

#[test]
fn random_blocks_match_twin_and_crc32c_crate() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let mut input = Vec::new();
    let mut descs = Vec::new();
    let mut kinds = Vec::new();
    let fixed = [
        0usize, 1, 2, 3, 4, 5, 63, 64, 65, 255, 256, 257, 65535, 65536,
    ];
    for i in 0..3000 {
        let size = if i < fixed.len() {
            fixed[i]
        } else if rng.gen_bool(0.08) {
            rng.gen_range(0..=65536)
        } else {
            rng.gen_range(0..=2048)
        };
        input.extend((0..rng.gen_range(0..8)).map(|_| rng.gen::<u8>()));
        let src = input.len();
        input.extend((0..size).map(|_| rng.gen::<u8>()));
        let expected = crc32c::crc32c(&input[src..]);
        let kind = match rng.gen_range(0..10) {
            0 if size > 0 => {
                // A flipped bit after the checksum was taken, as a bad read would.
                let at = src + rng.gen_range(0..size);
                input[at] ^= 1 << rng.gen_range(0..8);
                Kind::CorruptByte
            }
            1 => Kind::WrongExpected,
            _ => Kind::Intact,
        };
        let expected = if kind == Kind::WrongExpected {
            expected ^ (1 << rng.gen_range(0..32))
        } else {
            expected
        };
        descs.push(BlockCheckDesc::new(src as u32, size as u32, expected));
        kinds.push(kind);
    }
    let in_len = input.len().next_multiple_of(4) as u32;
    let bad = [
        BlockCheckDesc::new(in_len - 3, 4, 0),
        BlockCheckDesc::new(0, in_len + 1, 0),
        BlockCheckDesc::new(u32::MAX - 1, 4, 0),
        BlockCheckDesc::new(4, u32::MAX, 0),
        BlockCheckDesc::new(0, 0x0100_0000, 0),
    ];
    for (k, b) in bad.iter().enumerate() {
        descs.insert(k * 500 + 3, *b);
        kinds.insert(k * 500 + 3, Kind::Bad);
    }

    let (status, computed) = run_gpu(&ctx, &input, &descs);

    let words = to_words(&input);
    for (i, d) in descs.iter().enumerate() {
        let (twin_status, twin_crc) = cpu_twin::crc32c::crc32c(d, &words);
        assert_eq!(
            (status[i], computed[i]),
            (twin_status, twin_crc),
            "block {i} {d:?}: GPU vs twin"
        );
        let check = BlockCheck::from_words(status[i], computed[i], d.expected);
        match kinds[i] {
            Kind::Bad => assert_eq!(check, BlockCheck::BadDescriptor, "block {i}"),
            kind => {
                let bytes = &input[d.src_offset as usize..][..d.src_size as usize];
                let actual = crc32c::crc32c(bytes);
                assert_eq!(computed[i], actual, "block {i}: GPU vs crc32c crate");
                if kind == Kind::Intact {
                    assert_eq!(check, BlockCheck::Ok, "block {i}");
                } else {
                    assert_eq!(
                        check,
                        BlockCheck::Mismatch {
                            expected: d.expected,
                            computed: actual
                        },
                        "block {i} ({kind:?})"
                    );
                    assert_eq!(status[i], check_code::CHECKSUM_MISMATCH);
                }
            }
        }
    }
    assert!(kinds.contains(&Kind::CorruptByte) && kinds.contains(&Kind::WrongExpected));
    assert!(
        status[descs.len()..].iter().all(|&w| w == GUARD),
        "status guard"
    );
    assert!(
        computed[descs.len()..].iter().all(|&w| w == GUARD),
        "checksum guard"
    );
}

#[test]
fn more_blocks_than_one_grid_row() {
    let Some(ctx) = test_device() else { return };
    let per_dim = ctx.device.limits().max_compute_workgroups_per_dimension;
    let count = per_dim as usize + 1000;
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let input: Vec<u8> = (0..count + 16).map(|_| rng.gen()).collect();
    let descs: Vec<BlockCheckDesc> = (0..count)
        .map(|i| {
            let len = i % 13;
            BlockCheckDesc::new(i as u32, len as u32, crc32c::crc32c(&input[i..i + len]))
        })
        .collect();
    let (status, _) = run_gpu(&ctx, &input, &descs);
    for (i, &s) in status[..count].iter().enumerate() {
        assert_eq!(s, check_code::OK, "block {i}");
    }
}
