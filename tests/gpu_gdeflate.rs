//! The GPU GDeflate page decoder (`shaders/gdeflate_decode.wgsl`) against
//! its Rust twin and the reference (libdeflate's GDeflate, through the
//! `gdeflate` crate): pages of the reference encoder at levels 0 (stored
//! blocks), 1, 6 and 12 over varied data and sizes 1..=65536, linear and in
//! padded rows; 10,000 mutated pages (status word for status word equal to
//! the twin, bytes equal where they decode, guard words intact); malformed
//! descriptors.
//!
//! Run: `GPUSTREAM_REQUIRE_GPU=1 WGPU_BACKEND=vulkan cargo test --release --test gpu_gdeflate`

mod common;

use common::test_device;
use gdeflate::CompressionLevel;
use gpustream::decode::cpu_twin::gdeflate_decode;
use gpustream::decode::gpu::{
    validate_gdeflate_descs, BlockPass, GDeflateDecodePipeline, PassBindings,
};
use gpustream::decode::{BlockDesc, GDeflateStatus};
use gpustream_tools::gpu::read_buffer;
use gpustream_tools::gpu::GpuContext;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wgpu::util::DeviceExt;

/// Guard value of output word `i`: no two neighbours alike.
fn guard(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ 0x5A3C_A5C3
}

/// One page of the reference encoder (`data` is at most 64 KiB).
fn compress(data: &[u8], level: CompressionLevel) -> Vec<u8> {
    let mut c = gdeflate::Compressor::new(level).expect("compressor");
    let r = c.compress(data, 65536).expect("compress");
    assert_eq!(r.tiles.len(), 1);
    r.bytes[..r.tiles[0].compressed_size as usize].to_vec()
}

/// The reference decoder on a valid page (it does not bounds-check its
/// input: a 4 KiB zero tail keeps it inside the allocation).
fn reference(page: &[u8], size: usize) -> Option<Vec<u8>> {
    let mut padded = page.to_vec();
    padded.resize(page.len() + 4096, 0);
    let mut out = vec![0u8; size];
    let mut got = 0usize;
    // SAFETY: `padded` holds the page and a 4 KiB zero tail, `out` holds
    // `size` bytes; the decompressor is freed before returning.
    let ok = unsafe {
        let d = gdeflate::sys::libdeflate_alloc_gdeflate_decompressor();
        assert!(!d.is_null());
        let mut p = gdeflate::sys::libdeflate_gdeflate_in_page {
            data: padded.as_ptr().cast(),
            nbytes: page.len(),
        };
        let r = gdeflate::sys::libdeflate_gdeflate_decompress(
            d,
            &mut p,
            1,
            out.as_mut_ptr().cast(),
            size,
            &mut got,
        );
        gdeflate::sys::libdeflate_free_gdeflate_decompressor(d);
        r == 0
    };
    (ok && got == size).then_some(out)
}

/// Test data of `size` bytes, of kind `kind % 7`.
fn sample(rng: &mut ChaCha8Rng, kind: usize, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size + 300);
    match kind % 7 {
        0 => v.resize(size, 0),
        1 => v.extend((0..size).map(|_| rng.gen::<u8>())),
        2 => {
            let words: [&[u8]; 8] = [
                b"texture ",
                b"stream ",
                b"block ",
                b"the ",
                b"of ",
                b"mip\n",
                b"GPU ",
                b"page ",
            ];
            while v.len() < size {
                v.extend_from_slice(words[rng.gen_range(0..words.len())]);
            }
        }
        3 => {
            // BCn-like: 8- or 16-byte blocks from a small palette.
            let e = if rng.gen() { 8 } else { 16 };
            let pal: Vec<Vec<u8>> = (0..12)
                .map(|_| (0..e).map(|_| rng.gen()).collect())
                .collect();
            while v.len() < size {
                v.extend_from_slice(&pal[rng.gen_range(0..pal.len())]);
            }
        }
        4 => {
            while v.len() < size {
                let b: u8 = rng.gen();
                v.extend(std::iter::repeat_n(b, rng.gen_range(1..2000)));
            }
        }
        5 => {
            // Short offsets: small periods with rare changes.
            let period = rng.gen_range(1..7);
            let pat: Vec<u8> = (0..period).map(|_| rng.gen()).collect();
            v.extend((0..size).map(|i| pat[i % period] ^ u8::from(rng.gen_ratio(1, 40))));
        }
        _ => {
            // Mixed: random spans and repeats of earlier spans.
            while v.len() < size {
                if v.len() > 16 && rng.gen() {
                    let start = rng.gen_range(0..v.len() - 8);
                    let len = rng.gen_range(3..300).min(v.len() - start);
                    let span = v[start..start + len].to_vec();
                    v.extend_from_slice(&span);
                } else {
                    v.extend((0..rng.gen_range(1..40)).map(|_| rng.gen::<u8>()));
                }
            }
        }
    }
    v.truncate(size);
    v
}

/// A batch: pages at odd input offsets, outputs with guard words between.
#[derive(Default)]
struct Batch {
    input: Vec<u8>,
    descs: Vec<BlockDesc>,
    out_words: usize,
}

impl Batch {
    fn push(&mut self, page: &[u8], dst_size: u32, rows: Option<(u32, u32)>, gap: usize) {
        self.input
            .extend(std::iter::repeat_n(0xC3u8, 1 + self.descs.len() % 7));
        let src_offset = self.input.len() as u32;
        self.input.extend_from_slice(page);
        let dst_offset = (self.out_words + gap) as u32 * 4;
        let mut d = BlockDesc::linear(src_offset, page.len() as u32, dst_offset, dst_size);
        if let Some((bytes, pitch)) = rows {
            d = d.with_rows(bytes, pitch);
        }
        self.out_words = (dst_offset as u64 + d.dst_extent().unwrap()).div_ceil(4) as usize;
        self.descs.push(d);
    }

    fn input_words(&self) -> Vec<u32> {
        let mut bytes = self.input.clone();
        bytes.resize(bytes.len().next_multiple_of(4) + 4, 0xC3);
        bytemuck::cast_slice(&bytes).to_vec()
    }

    fn initial_output(&self) -> Vec<u32> {
        (0..self.out_words + 4).map(guard).collect()
    }

    /// The twin over every page, one after the other, on the initial
    /// output: (output, status words).
    fn run_twin(&self) -> (Vec<u32>, Vec<u32>) {
        let input = self.input_words();
        let mut out = self.initial_output();
        let status = self
            .descs
            .iter()
            .map(|d| gdeflate_decode(d, &input, &mut out))
            .collect();
        (out, status)
    }

    /// One dispatch over every page: (output, status words).
    fn run_gpu(&self, ctx: &GpuContext) -> (Vec<u32>, Vec<u32>) {
        run_gpu(
            ctx,
            &self.input_words(),
            &self.descs,
            &self.initial_output(),
        )
    }

    /// The bytes page `i` decoded to, read from `out` in its layout.
    fn page_bytes(&self, out: &[u32], i: usize) -> Vec<u8> {
        let d = &self.descs[i];
        let bytes: &[u8] = bytemuck::cast_slice(out);
        let row = if d.row_bytes == 0 {
            d.dst_size.max(1)
        } else {
            d.row_bytes
        } as usize;
        (0..d.dst_size as usize)
            .map(|k| bytes[d.dst_offset as usize + (k / row) * d.row_pitch as usize + k % row])
            .collect()
    }

    /// Every output word outside the pages' ranges still holds its guard.
    fn assert_guards(&self, out: &[u32], what: &str) {
        let mut inside = vec![false; out.len()];
        for d in &self.descs {
            let row = if d.row_bytes == 0 {
                d.dst_size
            } else {
                d.row_bytes
            };
            let (mut left, mut start) = (d.dst_size, d.dst_offset);
            while left > 0 {
                let len = left.min(row);
                for w in start / 4..(start + len).div_ceil(4) {
                    inside[w as usize] = true;
                }
                left -= len;
                start += d.row_pitch;
            }
        }
        for (w, &v) in out.iter().enumerate() {
            if !inside[w] {
                assert_eq!(v, guard(w), "{what}: guard word {w} overwritten");
            }
        }
    }
}

fn run_gpu(
    ctx: &GpuContext,
    input: &[u32],
    descs: &[BlockDesc],
    initial: &[u32],
) -> (Vec<u32>, Vec<u32>) {
    let device = &ctx.device;
    let make = |label, contents: &[u32], usage| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: bytemuck::cast_slice(contents),
            usage,
        })
    };
    use wgpu::BufferUsages as U;
    let input = make("gdeflate input", input, U::STORAGE);
    let table = make(
        "gdeflate descriptors",
        bytemuck::cast_slice(descs),
        U::STORAGE,
    );
    let output = make("gdeflate output", initial, U::STORAGE | U::COPY_SRC);
    let status_len = (descs.len() as u64 * 4).max(4);
    let status = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gdeflate status"),
        size: status_len,
        usage: U::STORAGE | U::COPY_SRC,
        mapped_at_creation: false,
    });
    let out_len = initial.len() as u64 * 4;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gdeflate readback"),
        size: out_len + status_len,
        usage: U::MAP_READ | U::COPY_DST,
        mapped_at_creation: false,
    });
    let pipeline = GDeflateDecodePipeline::new(device);
    let mut encoder = device.create_command_encoder(&Default::default());
    pipeline
        .encode_in(
            device,
            &mut encoder,
            PassBindings::whole(input.slice(..), &table, &output, &status),
            descs.len() as u32,
            None,
        )
        .expect("encode");
    encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, out_len);
    encoder.copy_buffer_to_buffer(&status, 0, &readback, out_len, status_len);
    ctx.queue.submit([encoder.finish()]);
    let back = read_buffer(device, &readback).expect("readback");
    let (out, st) = back.split_at(out_len as usize);
    (
        bytemuck::cast_slice(out).to_vec(),
        bytemuck::cast_slice(&st[..descs.len() * 4]).to_vec(),
    )
}

const LEVELS: [CompressionLevel; 4] = [
    CompressionLevel::None,
    CompressionLevel::Level1,
    CompressionLevel::Level6,
    CompressionLevel::Level12,
];

#[test]
fn reference_pages_decode_on_gpu_like_twin_and_reference() {
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(40);
    let mut batch = Batch::default();
    let mut originals = Vec::new();
    for i in 0..84 {
        let size = match i % 6 {
            0 => rng.gen_range(1..40),
            1 => rng.gen_range(40..3000),
            2 => 65536,
            3 => rng.gen_range(3000..=65536),
            4 => [1, 2, 3, 5, 255, 4097, 65535][rng.gen_range(0..7)],
            _ => rng.gen_range(1..20000),
        };
        let data = sample(&mut rng, i / 4, size);
        let page = compress(&data, LEVELS[i % 4]);
        assert_eq!(
            reference(&page, size).as_deref(),
            Some(&data[..]),
            "page {i}"
        );
        // Every third page in rows of whole 16-byte texel blocks, padded to
        // 256-byte pitches; the others linear.
        let rows = (i % 3 == 1).then(|| {
            let row = 16 * rng.gen_range(1..40u32);
            (row, row.next_multiple_of(256) + 256 * rng.gen_range(0..2))
        });
        batch.push(&page, size as u32, rows, rng.gen_range(0..3));
        originals.push(data);
    }
    let (twin_out, twin_status) = batch.run_twin();
    let (gpu_out, gpu_status) = batch.run_gpu(&ctx);
    for (i, data) in originals.iter().enumerate() {
        assert_eq!(
            GDeflateStatus::from_word(twin_status[i]),
            GDeflateStatus::Ok,
            "twin page {i}"
        );
        assert_eq!(
            GDeflateStatus::from_word(gpu_status[i]),
            GDeflateStatus::Ok,
            "GPU page {i}"
        );
        assert!(batch.page_bytes(&twin_out, i) == *data, "twin page {i}");
        assert!(batch.page_bytes(&gpu_out, i) == *data, "GPU page {i}");
    }
    batch.assert_guards(&twin_out, "twin");
    batch.assert_guards(&gpu_out, "GPU");
    assert!(gpu_out == twin_out, "the shader and its twin differ");
}

/// A valid page with one mutation: bit flips, byte changes, truncation,
/// extension, a wrong declared size.
fn mutate(rng: &mut ChaCha8Rng, page: &mut Vec<u8>, size: &mut u32) {
    match rng.gen_range(0..8) {
        0..=2 => {
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..page.len());
                page[at] ^= 1 << rng.gen_range(0..8);
            }
        }
        3 => {
            let at = rng.gen_range(0..page.len());
            page[at] = rng.gen();
        }
        4 => {
            let at = rng.gen_range(0..page.len());
            page.truncate(at);
        }
        5 => {
            let extra = rng.gen_range(1..64);
            page.extend((0..extra).map(|_| rng.gen::<u8>()));
        }
        6 => {
            // Header region: the first words carry the block headers.
            let at = rng.gen_range(0..page.len().min(16));
            page[at] ^= 1 << rng.gen_range(0..8);
        }
        _ => {
            *size = match rng.gen_range(0..3) {
                0 => size.saturating_sub(rng.gen_range(1..5)),
                1 => *size + rng.gen_range(1..5),
                _ => rng.gen_range(0..3000),
            };
        }
    }
}

#[test]
fn mutated_pages_match_twin_and_stay_in_range() {
    // 10,000 mutated pages in 10 dispatches of 1,000.
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let (mut ok, mut failed) = (0, 0);
    for round in 0..10 {
        let mut batch = Batch::default();
        for i in 0..1000 {
            let mut size = rng.gen_range(1..2500u32);
            let data = sample(&mut rng, i, size as usize);
            let mut page = compress(&data, LEVELS[rng.gen_range(0..4)]);
            mutate(&mut rng, &mut page, &mut size);
            let rows = rng.gen_ratio(1, 4).then_some((64, 256));
            batch.push(&page, size, rows, rng.gen_range(0..2));
        }
        let (twin_out, twin_status) = batch.run_twin();
        let (gpu_out, gpu_status) = batch.run_gpu(&ctx);
        batch.assert_guards(&twin_out, "twin");
        batch.assert_guards(&gpu_out, "GPU");
        for i in 0..batch.descs.len() {
            assert_eq!(
                GDeflateStatus::from_word(gpu_status[i]),
                GDeflateStatus::from_word(twin_status[i]),
                "round {round} page {i}"
            );
            if twin_status[i] == GDeflateStatus::Ok.to_word() {
                assert!(
                    batch.page_bytes(&gpu_out, i) == batch.page_bytes(&twin_out, i),
                    "round {round} page {i}: bytes differ"
                );
                ok += 1;
            } else {
                failed += 1;
            }
        }
    }
    eprintln!("mutated pages: {ok} decoded, {failed} refused, GPU == twin for all");
    assert!(ok > 100 && failed > 1000);
}

#[test]
fn mutated_large_pages_match_twin() {
    // 120 mutated pages of 20-64 KiB in one dispatch: long decodes, where
    // an error stops a page late.
    let Some(ctx) = test_device() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    let mut batch = Batch::default();
    for i in 0..120 {
        let mut size = rng.gen_range(20_000..=65536u32);
        let data = sample(&mut rng, i, size as usize);
        let mut page = compress(&data, LEVELS[i % 4]);
        mutate(&mut rng, &mut page, &mut size);
        batch.push(&page, size.min(65536), None, 1);
    }
    let (twin_out, twin_status) = batch.run_twin();
    let (gpu_out, gpu_status) = batch.run_gpu(&ctx);
    batch.assert_guards(&twin_out, "twin");
    batch.assert_guards(&gpu_out, "GPU");
    for i in 0..batch.descs.len() {
        assert_eq!(
            GDeflateStatus::from_word(gpu_status[i]),
            GDeflateStatus::from_word(twin_status[i]),
            "page {i}"
        );
        if twin_status[i] == GDeflateStatus::Ok.to_word() {
            assert!(
                batch.page_bytes(&gpu_out, i) == batch.page_bytes(&twin_out, i),
                "page {i}: bytes differ"
            );
        }
    }
}

#[test]
fn bad_descriptors_are_flagged_and_write_nothing() {
    let Some(ctx) = test_device() else { return };
    let data = vec![9u8; 3000];
    let page = compress(&data, CompressionLevel::Level6);
    let mut batch = Batch::default();
    batch.push(&page, 3000, None, 0);
    let good = batch.descs[0];
    let in_len = batch.input_words().len() as u32 * 4;
    let out_len = (batch.out_words as u32 + 4) * 4;
    let bad = [
        BlockDesc {
            dst_size: 65537,
            ..good
        },
        BlockDesc {
            src_size: in_len,
            ..good
        },
        BlockDesc {
            src_offset: u32::MAX - 3,
            ..good
        },
        BlockDesc {
            dst_offset: 2,
            ..good
        },
        BlockDesc {
            dst_offset: out_len - 8,
            ..good
        },
        BlockDesc {
            src_size: 0x0100_0000,
            ..good
        },
        good.with_rows(6, 256),
        good.with_rows(64, 60),
        good.with_rows(64, u32::MAX - 3),
    ];
    for d in &bad {
        assert!(validate_gdeflate_descs(&[*d], in_len as u64, out_len as u64).is_err());
    }
    let initial = batch.initial_output();
    let (out, status) = run_gpu(&ctx, &batch.input_words(), &bad, &initial);
    let mut twin = initial.clone();
    for (i, d) in bad.iter().enumerate() {
        assert_eq!(
            GDeflateStatus::from_word(status[i]),
            GDeflateStatus::BadDescriptor,
            "descriptor {i}"
        );
        assert_eq!(
            gdeflate_decode(d, &batch.input_words(), &mut twin),
            GDeflateStatus::BadDescriptor.to_word()
        );
    }
    assert!(out == initial, "a bad descriptor wrote");
    assert!(twin == initial, "a bad descriptor wrote (twin)");
}

/// Writes the `gdeflate_twin` fuzz target's seeds (8 parameter bytes, then
/// a page of the reference encoder, or data for its structure-aware mode):
/// `cargo test --release --test gpu_gdeflate -- --ignored write_fuzz_seeds`.
#[test]
#[ignore = "writes fuzz/seeds/gdeflate_twin; run by hand when the seeds should change"]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/gdeflate_twin");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    // (name, data kind, size, level, row length / 4, raw page?)
    let seeds = [
        ("text-l6-linear", 2, 3000, 2, 0u8, true),
        ("text-l12-rows", 2, 3000, 3, 37, true),
        ("runs-l1-linear", 4, 5000, 1, 0, true),
        ("period-l12-rows", 5, 2000, 3, 16, true),
        ("bcn-l6-linear", 3, 4096, 2, 0, true),
        ("stored-linear", 1, 700, 0, 0, true),
        ("mixed-structured", 6, 1500, 2, 0, false),
        ("text-structured-mutated", 2, 1200, 3, 0, false),
    ];
    for (name, kind, size, level, row4, raw) in seeds {
        let data = sample(&mut rng, kind, size);
        let size3 = (size as u32).to_le_bytes();
        let mut mode = 0u8;
        if !raw {
            mode = 1 | (level as u8) << 1 | if name.contains("mutated") { 8 } else { 0 };
        }
        let mut bytes = vec![size3[0], size3[1], size3[2], row4, 48, 3, 1, mode];
        if raw {
            bytes.extend_from_slice(&compress(&data, LEVELS[level]));
        } else {
            bytes.extend_from_slice(&data);
        }
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Which GDeflate decoder a runtime on this device runs, and why: the
/// driver's where the device has `VK_EXT/NV_memory_decompression` enabled
/// (the tools open devices with it where the driver offers it), WGSL where
/// it does not or where the configuration forces WGSL. Where the driver has
/// its decoder, it decodes reference pages to the original bytes.
#[test]
fn the_gdeflate_decoder_is_chosen_and_reported() {
    use gpustream::decode::gpu::driver_gdeflate::{self as driver, DriverGDeflate, DriverRegion};
    use gpustream::decode::gpu::{GDeflateDecoderKind, GDeflateDecoderPreference};
    use gpustream::runtime::{Runtime, RuntimeConfig};
    let Some(ctx) = test_device() else { return };
    let offered = driver::offered_extension(&ctx.adapter);
    let enabled = driver::enabled_extension(&ctx.device);
    // `open_device` enables what the driver offers, and asks the driver
    // the same question through the device.
    assert_eq!(enabled, offered, "{}", ctx.describe());
    assert_eq!(driver::offered_for_device(&ctx.device), offered);
    let runtime = |preference| {
        Runtime::new(
            &ctx.device,
            &ctx.queue,
            RuntimeConfig::default()
                .with_gdeflate_decoder(preference)
                .with_cpu_threads(1),
        )
        .expect("runtime")
    };
    // The configuration alone decides: the library reads no environment.
    let auto = runtime(GDeflateDecoderPreference::Driver);
    let choice = auto
        .gdeflate_decoder()
        .expect("GDeflate decodes on the GPU")
        .clone();
    drop(auto);
    {
        match enabled {
            Some(e) => assert_eq!(choice.kind, GDeflateDecoderKind::Driver(e), "{choice}"),
            None => {
                assert_eq!(choice.kind, GDeflateDecoderKind::Wgsl, "{choice}");
                let why = if ctx.adapter.get_info().backend == wgpu::Backend::Vulkan {
                    "the driver offers neither VK_EXT_memory_decompression nor VK_NV_memory_decompression"
                } else {
                    "backend has no driver decoder"
                };
                assert!(choice.reason.contains(why), "{choice}");
            }
        }
        let forced = runtime(GDeflateDecoderPreference::Wgsl);
        let choice = forced
            .gdeflate_decoder()
            .expect("GDeflate on the GPU")
            .clone();
        assert_eq!(choice.kind, GDeflateDecoderKind::Wgsl);
        assert!(
            choice.reason.starts_with("preferred (configured)"),
            "{choice}"
        );
    }
    let Some(d) = DriverGDeflate::new(&ctx.device) else {
        assert!(enabled.is_none());
        return;
    };
    // The driver's own decoder on reference pages, 4-byte aligned, outputs
    // 64 KiB apart.
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let mut input = Vec::new();
    let mut regions = Vec::new();
    let mut originals = Vec::new();
    for i in 0..48 {
        let size = [1, 777, 4096, 65536][i % 4];
        let data = sample(&mut rng, i % 5, size);
        let page = compress(&data, CompressionLevel::Level12);
        input.resize(input.len().next_multiple_of(4), 0);
        regions.push(DriverRegion {
            src_offset: input.len() as u64,
            src_size: page.len() as u64,
            dst_offset: i as u64 * 65536,
            dst_size: size as u64,
        });
        input.extend_from_slice(&page);
        originals.push(data);
    }
    input.resize(input.len().next_multiple_of(4), 0);
    let src = d.buffer(input.len() as u64, "test pages").expect("buffer");
    let dst = d.buffer(48 * 65536, "test output").expect("buffer");
    ctx.queue.write_buffer(&src.buffer, 0, &input);
    let decode = d.record(&src, &dst, &regions).expect("record");
    let rb = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: dst.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(&dst.buffer, 0, &rb, 0, dst.size());
    ctx.queue.submit([decode, enc.finish()]);
    let out = read_buffer(&ctx.device, &rb).expect("read back");
    for (i, (r, want)) in regions.iter().zip(&originals).enumerate() {
        let at = r.dst_offset as usize;
        assert!(
            out[at..at + want.len()] == want[..],
            "page {i} decoded wrong by the driver"
        );
    }
}
