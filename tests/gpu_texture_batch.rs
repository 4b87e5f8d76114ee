//! The mip-shaped batch planner on a real device: the stored-copy kernel
//! writes a batch's tiles into the planned scratch region (from unaligned
//! input offsets, rows at the planned pitch), the planned regions copy it
//! into a BC7 or RGBA8 texture whose other tiles hold a background, and the
//! texture read back holds the tiles where they belong and the background
//! everywhere else.
//!
//! Run: `WGPU_BACKEND=vulkan GPUSTREAM_REQUIRE_GPU=1 cargo test --release --test gpu_texture_batch`

use gpustream::decode::gpu::{read_buffer, StoredCopyPipeline};
use gpustream::decode::{Lz4BlockDesc, Lz4Status};
use gpustream::destinations::texture_batch::{plan_mip_batch, BatchTile, MipShape};
use gpustream::gpu::{test_device, GpuContext};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wgpu::util::DeviceExt;

/// Where the scratch region starts in its buffer (any multiple of 256).
const SCRATCH_BASE: u64 = 512;

/// Streams `batch` (tile coordinates) of mip `mip` of a `size` texture of
/// `format` through the planner and checks the texture afterwards;
/// `expect_regions` is the number of copies the plan must use.
fn run(
    ctx: &GpuContext,
    format: wgpu::TextureFormat,
    size: (u32, u32),
    mip: u32,
    tile: (u32, u32),
    batch: &[(u32, u32)],
    expect_regions: usize,
) {
    let device = &ctx.device;
    let mut rng = ChaCha8Rng::seed_from_u64(size.0 as u64 * 31 + mip as u64);
    let (bw, bh) = format.block_dimensions();
    let bpb = format.block_copy_size(None).unwrap();
    let mw = (size.0 >> mip).max(1);
    let mh = (size.1 >> mip).max(1);
    let shape = MipShape {
        format,
        width: mw,
        height: mh,
        tile_width: tile.0,
        tile_height: tile.1,
    };
    let tiles: Vec<BatchTile> = batch
        .iter()
        .map(|&(x, y)| shape.tile(x, y).unwrap())
        .collect();
    let plan = plan_mip_batch(&shape, &tiles).unwrap();
    assert_eq!(plan.regions.len(), expect_regions, "{:?}", plan.regions);

    // The mip's blocks: background everywhere, then the batch's tile data.
    let (blocks_w, blocks_h) = (mw.div_ceil(bw), mh.div_ceil(bh));
    let tight_row = (blocks_w * bpb) as usize;
    let background: Vec<u8> = (0..tight_row * blocks_h as usize)
        .map(|_| rng.gen())
        .collect();
    let mut expected = background.clone();

    // Tile bytes packed at unaligned offsets, as reads leave them in staging.
    let mut input = Vec::new();
    let mut descs = Vec::new();
    for (t, p) in tiles.iter().zip(&plan.tiles) {
        input.extend((0..rng.gen_range(1..8)).map(|_| rng.gen::<u8>()));
        let src = input.len();
        let data: Vec<u8> = (0..t.row_bytes * t.rows).map(|_| rng.gen()).collect();
        for r in 0..t.rows as usize {
            let row = &data[r * t.row_bytes as usize..][..t.row_bytes as usize];
            let at = (t.y / bh) as usize * tight_row + r * tight_row + (t.x / bw * bpb) as usize;
            expected[at..at + row.len()].copy_from_slice(row);
        }
        input.extend_from_slice(&data);
        let size = data.len() as u32;
        let dst = (SCRATCH_BASE + p.dst_offset) as u32;
        descs.push(
            Lz4BlockDesc::linear(src as u32, size, dst, size).with_rows(p.row_bytes, p.row_pitch),
        );
    }
    input.resize(input.len().next_multiple_of(4), 0);

    let texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("batch target"),
        size: wgpu::Extent3d {
            width: size.0,
            height: size.1,
            depth_or_array_layers: 1,
        },
        mip_level_count: mip + 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let full = wgpu::Extent3d {
        width: blocks_w * bw,
        height: blocks_h * bh,
        depth_or_array_layers: 1,
    };
    ctx.queue.write_texture(
        wgpu::TexelCopyTextureInfo {
            texture: &texture,
            mip_level: mip,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        &background,
        wgpu::TexelCopyBufferLayout {
            offset: 0,
            bytes_per_row: Some(tight_row as u32),
            rows_per_image: Some(blocks_h),
        },
        full,
    );

    let input_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("batch input"),
        contents: &input,
        usage: wgpu::BufferUsages::STORAGE,
    });
    let scratch_len = (SCRATCH_BASE + plan.scratch_size).next_multiple_of(4);
    let scratch = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("batch scratch"),
        size: scratch_len,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let status = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("batch status"),
        size: descs.len() as u64 * 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let read_pitch = tight_row.next_multiple_of(256) as u64;
    let texels_len = read_pitch * blocks_h as u64;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("batch readback"),
        size: texels_len + descs.len() as u64 * 4,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });

    let pipeline = StoredCopyPipeline::new(device);
    let mut encoder = device.create_command_encoder(&Default::default());
    pipeline
        .encode_blocks(
            device,
            &mut encoder,
            input_buf.slice(..),
            &descs,
            &scratch,
            &status,
        )
        .unwrap();
    for r in &plan.regions {
        r.record(&mut encoder, &scratch, SCRATCH_BASE, &texture, mip, 0);
    }
    encoder.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture: &texture,
            mip_level: mip,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &readback,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(read_pitch as u32),
                rows_per_image: Some(blocks_h),
            },
        },
        full,
    );
    encoder.copy_buffer_to_buffer(&status, 0, &readback, texels_len, descs.len() as u64 * 4);
    ctx.queue.submit([encoder.finish()]);
    let back = read_buffer(device, &readback).unwrap();

    for (i, w) in back[texels_len as usize..].chunks_exact(4).enumerate() {
        let word = u32::from_le_bytes(w.try_into().unwrap());
        assert_eq!(Lz4Status::from_word(word), Lz4Status::Ok, "tile {i}");
    }
    for by in 0..blocks_h as usize {
        let got = &back[by * read_pitch as usize..][..tight_row];
        let want = &expected[by * tight_row..][..tight_row];
        if got != want {
            let col = (0..tight_row).find(|&c| got[c] != want[c]).unwrap();
            panic!(
                "{format:?} mip {mip}: block row {by}, byte {col} (block column {}) differs",
                col / bpb as usize
            );
        }
    }
}

#[test]
fn bc7_raster_run_lands_in_three_copies() {
    let Some(ctx) = test_device() else { return };
    if !ctx
        .device
        .features()
        .contains(wgpu::Features::TEXTURE_COMPRESSION_BC)
    {
        if std::env::var("GPUSTREAM_REQUIRE_GPU").is_ok_and(|v| v == "1") {
            panic!("GPUSTREAM_REQUIRE_GPU=1 but the device has no BC textures");
        }
        eprintln!("!!! SKIPPING BC7 BATCH TEST: the device has no BC textures");
        return;
    }
    // Mip 1 of 2000x1204 is 1000x602: 4x3 tiles of 256, clipped edge tiles,
    // a partial block row at the bottom. The run goes from tile (2,0) to
    // tile (1,2) in raster order: a partial row, a full row, a partial row.
    let raster: Vec<(u32, u32)> = (2..10).map(|i| (i % 4, i / 4)).collect();
    run(
        &ctx,
        wgpu::TextureFormat::Bc7RgbaUnorm,
        (2000, 1204),
        1,
        (256, 256),
        &raster,
        3,
    );
    // The whole mip: one copy.
    let all: Vec<(u32, u32)> = (0..12).map(|i| (i % 4, i / 4)).collect();
    run(
        &ctx,
        wgpu::TextureFormat::Bc7RgbaUnorm,
        (2000, 1204),
        1,
        (256, 256),
        &all,
        1,
    );
}

#[test]
fn rgba8_scattered_tiles_leave_the_others_alone() {
    let Some(ctx) = test_device() else { return };
    // 300x200 in tiles of 128: 3x2. Tiles (0,0), (1,0) and (2,1): two
    // copies, and tiles (2,0), (0,1), (1,1) keep their background.
    run(
        &ctx,
        wgpu::TextureFormat::Rgba8Unorm,
        (300, 200),
        0,
        (128, 128),
        &[(2, 1), (0, 0), (1, 0)],
        2,
    );
}
