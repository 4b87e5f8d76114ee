//! The GPU LZ4 decoder against the Rust twin and lz4_flex on valid blocks of
//! varied content from two encoders, on both shader paths, with guard
//! patterns around every output range; and the padded-row layout.
//!
//! Run: `WGPU_BACKEND=vulkan cargo test --release --test gpu_lz4`

mod common;

use common::lz4_batch::{Lz4Batch, Lz4BatchResult};
use common::test_device;
use gpustream::decode::gpu::{BlockPass, Lz4DecodePath, Lz4DecodePipeline};
use gpustream::decode::{cpu_twin, BlockDesc, Lz4Status};
use gpustream_tools::gpu::decode_blocks_on_gpu;
use gpustream_tools::gpu::GpuContext;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Content kinds a game's packs hold, from noise to runs.
fn content(kind: usize, len: usize, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    match kind {
        // Incompressible.
        0 => out.extend((0..len).map(|_| rng.gen::<u8>())),
        // Highly compressible: one byte value.
        1 => out.resize(len, rng.gen()),
        // Long matches: a random chunk repeated with rare edits.
        2 => {
            let chunk: Vec<u8> = (0..rng.gen_range(64..3000)).map(|_| rng.gen()).collect();
            while out.len() < len {
                out.extend_from_slice(&chunk);
                if rng.gen_bool(0.3) {
                    out.push(rng.gen());
                }
            }
        }
        // Overlapping matches: a pattern of period 1..=16, with breaks.
        3 => {
            let period = rng.gen_range(1..=16);
            let pattern: Vec<u8> = (0..period).map(|_| rng.gen()).collect();
            while out.len() < len {
                let run = rng.gen_range(20..2000);
                out.extend((0..run).map(|i| pattern[i % period]));
                out.extend((0..rng.gen_range(0..8)).map(|_| rng.gen::<u8>()));
            }
        }
        // Long literal runs between short repeats.
        4 => {
            while out.len() < len {
                let lit = rng.gen_range(200..6000);
                out.extend((0..lit).map(|_| rng.gen::<u8>()));
                let back = out.len().min(rng.gen_range(4..40));
                let start = out.len() - back;
                out.extend_from_within(start..);
            }
        }
        // Text from a small vocabulary.
        5 => {
            const WORDS: [&str; 12] = [
                "texture ", "mip ", "tile ", "block ", "stream ", "queue ", "fence ", "staging ",
                "decode ", "the ", "of ", "GPU\n",
            ];
            while out.len() < len {
                out.extend_from_slice(WORDS[rng.gen_range(0..WORDS.len())].as_bytes());
            }
        }
        // Structured binary: vertex-like records of counters and floats.
        _ => {
            let mut i = 0u32;
            while out.len() < len {
                out.extend_from_slice(&i.to_le_bytes());
                out.extend_from_slice(&((i as f32) * 0.25).to_le_bytes());
                out.extend_from_slice(&[rng.gen_range(0..4), 0, 0, 255]);
                i += rng.gen_range(1..3);
            }
        }
    }
    out.truncate(len);
    out
}

/// Compresses with lz4_flex, liblz4's high-compression mode, or liblz4's
/// default mode.
fn compress(encoder: usize, data: &[u8]) -> Vec<u8> {
    match encoder {
        0 => lz4_flex::block::compress(data),
        1 => lz4::block::compress(
            data,
            Some(lz4::block::CompressionMode::HIGHCOMPRESSION(12)),
            false,
        )
        .unwrap(),
        _ => lz4::block::compress(data, Some(lz4::block::CompressionMode::DEFAULT), false).unwrap(),
    }
}

/// The guard value of output word `i` before decoding: no two neighbours
/// alike, so a stray or shifted write shows.
fn guard_words(n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(0x9E37_79B9) ^ 0xA5C3_5A3C)
        .collect()
}

/// Whether output byte `at` lies inside `desc`'s output rows.
fn inside(desc: &BlockDesc, at: u64) -> Option<usize> {
    let rel = at.checked_sub(desc.dst_offset as u64)?;
    if desc.row_bytes == 0 {
        return (rel < desc.dst_size as u64).then_some(rel as usize);
    }
    let (row, col) = (rel / desc.row_pitch as u64, rel % desc.row_pitch as u64);
    let logical = row * desc.row_bytes as u64 + col;
    (col < desc.row_bytes as u64 && logical < desc.dst_size as u64).then_some(logical as usize)
}

/// Checks a batch result: every block OK with its original bytes, every
/// byte outside all blocks' output still its guard.
fn check_result(batch: &Lz4Batch, originals: &[Vec<u8>], result: &Lz4BatchResult, what: &str) {
    let guards = guard_words(batch.output_words());
    let guard_bytes: &[u8] = bytemuck::cast_slice(&guards);
    let out = result.output_bytes();
    let mut owner = vec![None; out.len()];
    for (b, desc) in batch.descs().iter().enumerate() {
        assert_eq!(
            Lz4Status::from_word(result.status[b]),
            Lz4Status::Ok,
            "{what}: block {b} ({desc:?})"
        );
        let start = desc.dst_offset as u64;
        let end = start + desc.dst_extent().unwrap();
        for at in start..end {
            if let Some(logical) = inside(desc, at) {
                owner[at as usize] = Some((b, logical));
            }
        }
    }
    for (at, &byte) in out.iter().enumerate() {
        match owner[at] {
            Some((b, logical)) => assert_eq!(
                byte, originals[b][logical],
                "{what}: block {b} byte {logical} (output byte {at})"
            ),
            None => assert_eq!(byte, guard_bytes[at], "{what}: guard byte {at} overwritten"),
        }
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
fn valid_blocks_match_twin_and_lz4_flex() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(0x6c7a_3400);
    let mut batch = Lz4Batch::new();
    let mut originals = Vec::new();
    let edge_sizes = [
        1usize, 2, 3, 4, 5, 7, 12, 13, 15, 16, 17, 19, 255, 256, 4096, 65535, 65536,
    ];
    for i in 0..1200 {
        let len = if i < edge_sizes.len() * 3 {
            edge_sizes[i % edge_sizes.len()]
        } else if i % 40 == 0 {
            65536
        } else {
            // Mostly small blocks keep lavapipe fast; all sizes appear.
            let max = if rng.gen_bool(0.8) { 4096 } else { 65536 };
            rng.gen_range(1..=max)
        };
        let kind = i % 7;
        let encoder = (i / 7) % 3;
        let data = content(kind, len, &mut rng);
        let packed = compress(encoder, &data);
        // The oracle: lz4_flex decodes it to the original.
        let mut check = vec![0u8; len];
        assert_eq!(
            lz4_flex::block::decompress_into(&packed, &mut check).ok(),
            Some(len)
        );
        assert_eq!(check, data);
        batch.push(
            &packed,
            len as u32,
            rng.gen_range(0..9),
            rng.gen_range(0..12),
            None,
        );
        originals.push(data);
    }
    let total: u64 = originals.iter().map(|d| d.len() as u64).sum();
    eprintln!(
        "{} blocks, {} bytes, ratio {:.2}, on {}",
        originals.len(),
        total,
        total as f64 / batch.compressed_len() as f64,
        ctx.describe()
    );

    let initial = guard_words(batch.output_words());
    let twin = batch.run_twin(&initial);
    check_result(&batch, &originals, &twin, "twin");
    for pipeline in pipelines(&ctx) {
        let what = format!(
            "{:?} path, {} lanes",
            pipeline.path(),
            pipeline.workgroup_size()
        );
        let gpu = batch
            .run_gpu(&ctx, &pipeline, &initial)
            .unwrap()
            .expect("device lost");
        for (b, (g, t)) in gpu.status.iter().zip(&twin.status).enumerate() {
            if g != t {
                eprintln!(
                    "{what}: block {b} {:?}: gpu {:#x} twin {:#x}",
                    batch.descs()[b],
                    g,
                    t
                );
            }
        }
        assert_eq!(
            gpu.status, twin.status,
            "{what}: status words differ from the twin"
        );
        check_result(&batch, &originals, &gpu, &what);
        assert!(
            gpu.output == twin.output,
            "{what}: output buffer differs from the twin"
        );
    }
}

#[test]
fn padded_rows_land_where_copy_buffer_to_texture_reads() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(0x7061_6464);
    let mut batch = Lz4Batch::new();
    let mut originals = Vec::new();
    // (row bytes, bytes): BC1/BC7 tile rows, RGBA8 rows, rows above 256,
    // a last row that is partial, a block of one row.
    let shapes: [(u32, usize); 8] = [
        (64, 64 * 64),
        (128, 128 * 32),
        (16, 16 * 100),
        (1024, 1024 * 16 + 512),
        (4, 4 * 50),
        (256, 256 * 8),
        (4096, 4096),
        (520, 520 * 20 + 3),
    ];
    for i in 0..120 {
        let (row_bytes, len) = shapes[i % shapes.len()];
        let data = content(i % 7, len, &mut rng);
        let packed = compress(i % 3, &data);
        let pitch = row_bytes.next_multiple_of(256);
        batch.push(
            &packed,
            len as u32,
            rng.gen_range(0..5),
            256,
            Some((row_bytes, pitch)),
        );
        originals.push(data);
    }
    let initial = guard_words(batch.output_words());
    let twin = batch.run_twin(&initial);
    check_result(&batch, &originals, &twin, "twin");
    for pipeline in pipelines(&ctx) {
        let what = format!("{:?} path, padded rows", pipeline.path());
        let gpu = batch
            .run_gpu(&ctx, &pipeline, &initial)
            .unwrap()
            .expect("device lost");
        assert_eq!(gpu.status, twin.status, "{what}");
        check_result(&batch, &originals, &gpu, &what);
        // Rows of whole 16-byte units that start on a unit (some of the
        // blocks here; a shape of 4- or 520-byte rows puts the blocks after
        // it off the units) take the 16-byte stores on the wide variants;
        // the others keep single stores.
        let (own, counts) = batch.run_twin_for(&pipeline, &initial);
        assert!(own.output == twin.output, "{what}: its twin");
        assert_eq!(
            counts.wide_stores > 0,
            pipeline.path().is_wide(),
            "{what}: {counts:?}"
        );
    }
}

#[test]
fn blocks_interleaved_in_each_others_row_padding() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // Two blocks whose rows alternate in one 256-byte pitch, each row
    // ending mid-word... is not allowed (rows are whole words), so rows of
    // 60 and 68 bytes share the pitch with no byte between them.
    let a = content(5, 60 * 40, &mut rng);
    let b = content(2, 68 * 40 - 2, &mut rng);
    let (pa, pb) = (compress(0, &a), compress(1, &b));
    let mut input = pa.clone();
    input.extend_from_slice(&pb);
    input.resize(input.len().next_multiple_of(4), 0);
    let descs = [
        BlockDesc::linear(0, pa.len() as u32, 0, a.len() as u32).with_rows(60, 256),
        BlockDesc::linear(pa.len() as u32, pb.len() as u32, 60, b.len() as u32).with_rows(68, 256),
    ];
    gpustream::decode::gpu::validate_descs(&descs, input.len() as u64, 256 * 40).unwrap();
    let input_words: Vec<u32> = bytemuck::pod_collect_to_vec(&input);
    let initial = guard_words(256 * 40 / 4);
    let mut twin = initial.clone();
    for d in &descs {
        assert_eq!(
            Lz4Status::from_word(cpu_twin::lz4_decode(d, &input_words, &mut twin)),
            Lz4Status::Ok
        );
    }
    for pipeline in pipelines(&ctx) {
        let device = &ctx.device;
        use wgpu::util::DeviceExt;
        let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: &input,
            usage: wgpu::BufferUsages::STORAGE,
        });
        let output = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&initial),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        let status = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 8,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 256 * 40 + 8,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        pipeline
            .encode_blocks(
                device,
                &mut encoder,
                input_buf.slice(..),
                &descs,
                &output,
                &status,
            )
            .unwrap();
        encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, 256 * 40);
        encoder.copy_buffer_to_buffer(&status, 0, &readback, 256 * 40, 8);
        ctx.queue.submit([encoder.finish()]);
        let slice = readback.slice(..);
        slice.map_async(wgpu::MapMode::Read, |r| r.unwrap());
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&slice.get_mapped_range().unwrap());
        assert_eq!(&words[256 * 10..], &[1, 1], "{:?}", pipeline.path());
        assert!(
            words[..256 * 10] == twin[..],
            "{:?}: output differs from the twin",
            pipeline.path()
        );
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        for r in 0..40 {
            let a_end = (a.len() - r * 60).min(60);
            assert_eq!(&bytes[r * 256..r * 256 + a_end], &a[r * 60..r * 60 + a_end]);
            let b_end = (b.len() - r * 68).min(68);
            assert_eq!(
                &bytes[r * 256 + 60..r * 256 + 60 + b_end],
                &b[r * 68..r * 68 + b_end]
            );
        }
    }
}

#[test]
fn convenience_decode_matches_lz4_flex() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let datas: Vec<Vec<u8>> = (0..50)
        .map(|i| content(i % 7, rng.gen_range(0..9000), &mut rng))
        .collect();
    let packed: Vec<Vec<u8>> = datas.iter().map(|d| lz4_flex::block::compress(d)).collect();
    let mut blocks: Vec<(&[u8], usize)> = packed
        .iter()
        .zip(&datas)
        .map(|(p, d)| (p.as_slice(), d.len()))
        .collect();
    // A declared size one short: lz4_flex rejects it, so must the GPU.
    blocks.push((&packed[7], datas[7].len() - 1));
    let results = decode_blocks_on_gpu(&ctx, &blocks);
    for (i, d) in datas.iter().enumerate() {
        assert_eq!(results[i].as_ref(), Ok(d), "block {i}");
    }
    assert!(
        matches!(results[50], Err(Lz4Status::OutputOverrun { .. })),
        "{:?}",
        results[50]
    );
}

/// Decodes padded rows into a buffer, copies it into a texture with
/// `copy_buffer_to_texture` (no repacking), copies the texture back and
/// checks every texel row: the layout is the one wgpu's copy reads.
fn decode_into_texture(
    ctx: &GpuContext,
    pipeline: &Lz4DecodePipeline,
    format: wgpu::TextureFormat,
    (width, height): (u32, u32),
    rows: u32,
    row_bytes: u32,
    seed: u64,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let data = content(3, (row_bytes * rows) as usize, &mut rng);
    let pitch = row_bytes.next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
    let mut batch = Lz4Batch::new();
    batch.push(
        &lz4_flex::block::compress(&data),
        data.len() as u32,
        3,
        0,
        Some((row_bytes, pitch)),
    );
    let gpu = batch.upload(ctx, &guard_words(batch.output_words()));
    let device = &ctx.device;
    let texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("lz4 texture"),
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: (pitch * rows) as u64 + 4,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let extent = wgpu::Extent3d {
        width,
        height,
        depth_or_array_layers: 1,
    };
    let layout = wgpu::TexelCopyBufferLayout {
        offset: 0,
        bytes_per_row: Some(pitch),
        rows_per_image: Some(rows),
    };
    let mut encoder = device.create_command_encoder(&Default::default());
    gpu.encode(ctx, pipeline, &mut encoder, None).unwrap();
    encoder.copy_buffer_to_texture(
        wgpu::TexelCopyBufferInfo {
            buffer: &gpu.output,
            layout,
        },
        texture.as_image_copy(),
        extent,
    );
    encoder.copy_texture_to_buffer(
        texture.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &readback,
            layout,
        },
        extent,
    );
    encoder.copy_buffer_to_buffer(&gpu.status, 0, &readback, (pitch * rows) as u64, 4);
    ctx.queue.submit([encoder.finish()]);
    let bytes = gpustream_tools::gpu::read_buffer(device, &readback).expect("device lost");
    let status = u32::from_le_bytes(bytes[(pitch * rows) as usize..][..4].try_into().unwrap());
    assert_eq!(Lz4Status::from_word(status), Lz4Status::Ok, "{format:?}");
    for r in 0..rows as usize {
        let got = &bytes[r * pitch as usize..][..row_bytes as usize];
        let want = &data[r * row_bytes as usize..][..row_bytes as usize];
        assert_eq!(
            got,
            want,
            "{format:?}: texel row {r} ({:?} path)",
            pipeline.path()
        );
    }
}

#[test]
fn padded_rows_copy_into_textures() {
    let Some(ctx) = test_device() else { return };
    for pipeline in pipelines(&ctx) {
        // RGBA8, 37 x 9 texels: 148-byte rows padded to 256.
        decode_into_texture(
            &ctx,
            &pipeline,
            wgpu::TextureFormat::Rgba8Unorm,
            (37, 9),
            9,
            148,
            1,
        );
        if common::test_supports(&ctx, gpustream_tools::gpu::Capability::BcReadback) {
            // BC7, 40 x 40 texels: 10 x 10 blocks of 16 bytes, 160-byte rows.
            decode_into_texture(
                &ctx,
                &pipeline,
                wgpu::TextureFormat::Bc7RgbaUnorm,
                (40, 40),
                10,
                160,
                2,
            );
            // BC1, 128 x 64 texels: 32 blocks of 8 bytes per row (256, no padding) x 16 rows.
            decode_into_texture(
                &ctx,
                &pipeline,
                wgpu::TextureFormat::Bc1RgbaUnorm,
                (128, 64),
                16,
                256,
                3,
            );
        }
    }
}
