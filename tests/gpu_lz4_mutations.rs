//! The GPU LZ4 decoder on malformed input: 16,000 mutated and truncated
//! blocks (over 10,000 of them rejected by lz4_flex) in four dispatches. Whenever lz4_flex rejects a block
//! the GPU flags it, the GPU agrees with the twin word for word, bytes
//! outside every block's output range keep their guard pattern, bad
//! descriptors are caught by the shader itself, and the device survives.
//!
//! Run: `WGPU_BACKEND=vulkan cargo test --release --test gpu_lz4_mutations`

mod common;

use common::lz4_batch::Lz4Batch;
use common::test_device;
use gpustream::decode::gpu::{BlockPass, Lz4DecodePath, Lz4DecodePipeline, PassError};
use gpustream::decode::{BlockDesc, Lz4Status};
use gpustream_tools::gpu::GpuContext;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wgpu::util::DeviceExt;

fn base_blocks(rng: &mut ChaCha8Rng) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..64)
        .map(|i| {
            let len = [1usize, 7, 64, 300, 1500, 4000, 9000][i % 7] + rng.gen_range(0..50);
            let data: Vec<u8> = match i % 4 {
                0 => (0..len).map(|_| rng.gen()).collect(),
                1 => (0..len).map(|j| (j % (1 + i % 13)) as u8).collect(),
                2 => (0..len)
                    .map(|j| b"mip tile block "[j % 15] ^ (j / 700) as u8)
                    .collect(),
                _ => (0..len)
                    .map(|j| {
                        if rng.gen_bool(0.1) {
                            rng.gen()
                        } else {
                            (j / 9) as u8
                        }
                    })
                    .collect(),
            };
            let packed = if i % 2 == 0 {
                lz4_flex::block::compress(&data)
            } else {
                lz4::block::compress(
                    &data,
                    Some(lz4::block::CompressionMode::HIGHCOMPRESSION(9)),
                    false,
                )
                .unwrap()
            };
            (data, packed)
        })
        .collect()
}

/// One malformed (or occasionally still valid) block and its declared size.
fn mutate(rng: &mut ChaCha8Rng, data: &[u8], packed: &[u8]) -> (Vec<u8>, usize) {
    let mut p = packed.to_vec();
    let mut size = data.len();
    let any = |rng: &mut ChaCha8Rng, p: &Vec<u8>| rng.gen_range(0..p.len().max(1));
    match rng.gen_range(0..9) {
        // Flip bits in 1..=3 bytes.
        0 => {
            for _ in 0..rng.gen_range(1..=3) {
                let at = any(rng, &p);
                if let Some(b) = p.get_mut(at) {
                    *b ^= rng.gen_range(1..=255u8);
                }
            }
        }
        // Truncate.
        1 => p.truncate(rng.gen_range(0..p.len().max(1))),
        // Trailing garbage.
        2 => p.extend((0..rng.gen_range(1..9)).map(|_| rng.gen::<u8>())),
        // Force length extensions: a byte becomes 0xFF, or a run of them.
        3 => {
            let at = any(rng, &p);
            let run = rng.gen_range(1..300);
            for b in p.iter_mut().skip(at).take(run) {
                *b = 0xFF;
            }
        }
        // Zero two bytes (zero offsets, empty tokens).
        4 => {
            let at = any(rng, &p);
            for b in p.iter_mut().skip(at).take(2) {
                *b = 0;
            }
        }
        // Wrong declared size.
        5 => {
            let delta = rng.gen_range(1..=16);
            size = if rng.gen_bool(0.5) {
                size + delta
            } else {
                size.saturating_sub(delta)
            };
        }
        // Pure garbage.
        6 => p = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect(),
        // Insert or delete a byte.
        7 => {
            let at = any(rng, &p);
            if rng.gen_bool(0.5) || p.is_empty() {
                p.insert(at.min(p.len()), rng.gen());
            } else {
                p.remove(at);
            }
        }
        // A large offset patched into a random place.
        _ => {
            let at = any(rng, &p);
            let off: u16 = rng.gen_range(1..=u16::MAX);
            for (b, v) in p.iter_mut().skip(at).zip(off.to_le_bytes()) {
                *b = v;
            }
        }
    }
    (p, size.min(gpustream::MAX_BLOCK_SIZE))
}

fn guard_words(n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(0x2545_F491) ^ 0x5AA5_C33C)
        .collect()
}

fn lz4_flex_decode(src: &[u8], size: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; size];
    match lz4_flex::block::decompress_into(src, &mut out) {
        Ok(n) if n == size => Some(out),
        _ => None,
    }
}

/// Every variant the device can run (v2 first); the subgroup ones are
/// reported loudly where the device lacks subgroups.
fn pipelines(ctx: &GpuContext) -> Vec<Lz4DecodePipeline> {
    let mut all = Vec::new();
    for path in Lz4DecodePath::ALL {
        match Lz4DecodePipeline::with_path(&ctx.device, path) {
            Ok(p) => all.push(p),
            Err(e) => eprintln!("!!! {path:?} path not tested on {}: {e}", ctx.describe()),
        }
    }
    all
}

#[test]
fn mutated_blocks_are_flagged_and_stay_in_range() {
    let Some(ctx) = test_device() else { return };
    let pipelines = pipelines(&ctx);
    let mut rng = ChaCha8Rng::seed_from_u64(0xbad_b10c);
    let bases = base_blocks(&mut rng);
    let (mut rejected, mut accepted, mut total) = (0usize, 0usize, 0usize);
    // Four dispatches of 4,000 blocks each.
    for round in 0..4 {
        let mut batch = Lz4Batch::new();
        let mut oracle = Vec::new();
        for _ in 0..4000 {
            let (data, packed) = &bases[rng.gen_range(0..bases.len())];
            let (bad, size) = mutate(&mut rng, data, packed);
            oracle.push(lz4_flex_decode(&bad, size));
            batch.push(
                &bad,
                size as u32,
                rng.gen_range(0..4),
                rng.gen_range(0..9),
                None,
            );
        }
        let initial = guard_words(batch.output_words());
        // Which output bytes belong to some block: everything else is guard.
        let mut owned = vec![false; batch.output_words() * 4];
        for d in batch.descs() {
            owned[d.dst_offset as usize..(d.dst_offset + d.dst_size) as usize].fill(true);
        }
        let guard_bytes: Vec<u8> = bytemuck::cast_slice(&initial).to_vec();
        for pipeline in &pipelines {
            let what = format!("round {round}, {:?} path", pipeline.path());
            // Each variant against its own twin (v1's and v2's twins agree:
            // cpu_twin::lz4_decode_v2's tests).
            let (twin, _) = batch.run_twin_for(pipeline, &initial);
            let gpu = batch
                .run_gpu(&ctx, pipeline, &initial)
                .unwrap()
                .unwrap_or_else(|| panic!("{what}: device lost"));
            for (b, d) in batch.descs().iter().enumerate() {
                let status = Lz4Status::from_word(gpu.status[b]);
                assert_eq!(
                    gpu.status[b], twin.status[b],
                    "{what}: block {b}: GPU and twin disagree"
                );
                match &oracle[b] {
                    None => assert!(
                        !status.is_ok(),
                        "{what}: block {b} ({d:?}) rejected by lz4_flex, passed by the GPU"
                    ),
                    Some(bytes) => {
                        assert!(
                            status.is_ok(),
                            "{what}: block {b} accepted by lz4_flex, GPU says {status}"
                        );
                        let at = d.dst_offset as usize;
                        assert_eq!(
                            &gpu.output_bytes()[at..at + bytes.len()],
                            &bytes[..],
                            "{what}: block {b}"
                        );
                    }
                }
            }
            for (at, (&byte, &own)) in gpu.output_bytes().iter().zip(&owned).enumerate() {
                if !own {
                    assert_eq!(byte, guard_bytes[at], "{what}: guard byte {at} overwritten");
                }
            }
            assert!(
                gpu.output == twin.output,
                "{what}: output buffer differs from the twin"
            );
        }
        total += oracle.len();
        rejected += oracle.iter().filter(|o| o.is_none()).count();
        accepted += oracle.iter().filter(|o| o.is_some()).count();
    }
    eprintln!("{total} mutated blocks: lz4_flex rejected {rejected}, accepted {accepted}");
    assert!(
        rejected >= 10_000,
        "at least 10,000 blocks lz4_flex rejects"
    );

    // The device survived: a valid batch still decodes.
    let (data, packed) = &bases[5];
    let mut batch = Lz4Batch::new();
    batch.push(packed, data.len() as u32, 1, 0, None);
    for pipeline in &pipelines {
        let out = batch
            .run_gpu(&ctx, pipeline, &vec![0; batch.output_words()])
            .unwrap()
            .expect("device lost after the mutation batches");
        assert_eq!(Lz4Status::from_word(out.status[0]), Lz4Status::Ok);
        assert_eq!(&out.output_bytes()[..data.len()], &data[..]);
    }
}

#[test]
fn shader_rejects_bad_descriptors_itself() {
    let Some(ctx) = test_device() else { return };
    let packed = lz4_flex::block::compress(&[7u8; 100]);
    let mut input = packed.clone();
    input.resize(input.len().next_multiple_of(4), 0);
    let in_len = input.len() as u32;
    let descs = [
        // Fine, as a control.
        BlockDesc::linear(0, packed.len() as u32, 0, 100),
        // Unaligned output.
        BlockDesc::linear(0, packed.len() as u32, 2, 100),
        // Input range past the binding.
        BlockDesc::linear(in_len - 2, packed.len() as u32, 128, 100),
        // Output range past the binding.
        BlockDesc::linear(0, packed.len() as u32, 1024 - 64, 100),
        // Over the 64 KiB block limit.
        BlockDesc::linear(0, packed.len() as u32, 0, 65537),
        // Rows that are not whole words.
        BlockDesc::linear(0, packed.len() as u32, 256, 100).with_rows(10, 256),
        // A row pitch so large the rows leave the binding.
        BlockDesc::linear(0, packed.len() as u32, 256, 100).with_rows(64, 0x4000_0000),
        // Offsets near u32::MAX must not wrap around.
        BlockDesc::linear(u32::MAX - 3, 8, 0, 100),
        BlockDesc::linear(0, packed.len() as u32, u32::MAX - 3, 100),
    ];
    let expected = [1u32, 2, 2, 2, 2, 2, 2, 2, 2];
    let initial = guard_words(256);
    for pipeline in pipelines(&ctx) {
        let device = &ctx.device;
        let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: &input,
            usage: wgpu::BufferUsages::STORAGE,
        });
        let table = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&descs),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let output = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&initial),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        let status = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: descs.len() as u64 * 4,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 1024 + descs.len() as u64 * 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        // The raw table, unchecked on the CPU: the shader must catch these.
        pipeline
            .encode(
                device,
                &mut encoder,
                input_buf.slice(..),
                &table,
                &output,
                &status,
                descs.len() as u32,
            )
            .unwrap();
        encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, 1024);
        encoder.copy_buffer_to_buffer(&status, 0, &readback, 1024, descs.len() as u64 * 4);
        ctx.queue.submit([encoder.finish()]);
        let slice = readback.slice(..);
        slice.map_async(wgpu::MapMode::Read, |r| r.unwrap());
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&slice.get_mapped_range().unwrap());
        assert_eq!(&words[256..], &expected, "{:?}", pipeline.path());
        assert_eq!(
            &bytemuck::cast_slice::<u32, u8>(&words)[..100],
            &[7u8; 100][..]
        );
        assert_eq!(
            &words[25..256],
            &initial[25..],
            "{:?}: a rejected block wrote",
            pipeline.path()
        );
        // The twin agrees.
        let input_words: Vec<u32> = bytemuck::pod_collect_to_vec(&input);
        let mut twin_out = initial.clone();
        for (d, &e) in descs.iter().zip(&expected) {
            assert_eq!(
                gpustream::decode::cpu_twin::lz4_decode(d, &input_words, &mut twin_out),
                e,
                "{d:?}"
            );
        }
    }
}

/// The v2 variants with 16-byte stores (`SubgroupV2Wide`, `PortableV2Wide`)
/// bind the output as 16-byte units: `encode` rejects an output buffer whose
/// size is not a multiple of 16 with a typed error before recording anything
/// (its last bytes could not be reached); v1 and v2 with word stores (output
/// bound as words) decode into it; every variant decodes a block ending at
/// the last byte of a buffer that is a multiple of 16.
#[test]
fn v2_needs_an_output_of_whole_16_byte_units() {
    let Some(ctx) = test_device() else { return };
    let device = &ctx.device;
    let data: Vec<u8> = (0..100u32).map(|i| (i * 7 % 13) as u8).collect();
    let mut input = lz4_flex::block::compress(&data);
    let src_size = input.len() as u32;
    input.resize(input.len().next_multiple_of(4), 0);
    let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: None,
        contents: &input,
        usage: wgpu::BufferUsages::STORAGE,
    });
    for pipeline in pipelines(&ctx) {
        for out_len in [1028u64, 1024] {
            // The block ends at the buffer's last byte.
            let desc = BlockDesc::linear(0, src_size, out_len as u32 - 100, 100);
            let batch_output = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: &vec![0xEEu8; out_len as usize],
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            });
            let status = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 4,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let mut encoder = device.create_command_encoder(&Default::default());
            let recorded = pipeline.encode_blocks(
                device,
                &mut encoder,
                input_buf.slice(..),
                &[desc],
                &batch_output,
                &status,
            );
            if pipeline.path().is_wide() && out_len % 16 != 0 {
                assert_eq!(
                    recorded,
                    Err(PassError::OutputNotWholeUnits {
                        path: pipeline.path().name(),
                        size: out_len
                    })
                );
                continue;
            }
            recorded.unwrap();
            let readback = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: out_len + 4,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(&batch_output, 0, &readback, 0, out_len);
            encoder.copy_buffer_to_buffer(&status, 0, &readback, out_len, 4);
            ctx.queue.submit([encoder.finish()]);
            let bytes = gpustream_tools::gpu::read_buffer(device, &readback).unwrap();
            let at = out_len as usize - 100;
            let word = u32::from_le_bytes(bytes[out_len as usize..].try_into().unwrap());
            let what = format!("{:?}, {out_len}-byte output", pipeline.path());
            assert_eq!(Lz4Status::from_word(word), Lz4Status::Ok, "{what}");
            assert_eq!(&bytes[at..at + 100], &data[..], "{what}");
            assert!(bytes[..at].iter().all(|&b| b == 0xEE), "{what}: guard");
        }
    }
}
