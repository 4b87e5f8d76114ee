//! A malformed LZ4 block sent through the runtime's GPU decode path fails
//! its own request with `GpuDecode`, and the requests around it in the same
//! submit still deliver their bytes.
//!
//! Run: `WGPU_BACKEND=vulkan cargo test --release --test runtime_gpu_errors`

mod common;

use std::sync::Arc;
use std::time::Duration;

use gpustream::codec::Codec;
use gpustream::completion::{Fence, StatusArray, StatusEntry};
use gpustream::runtime::{
    CompressionSupport, Destination, QueueConfig, Request, RequestError, Runtime, RuntimeConfig,
    Source, SourceKind,
};

/// Bytes that LZ4 compresses (runs and repeats), different per seed.
fn content(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i / 9) as u8).wrapping_mul(seed) ^ (i % 5) as u8)
        .collect()
}

/// Each request's slot in the destination buffer.
const SLOT: usize = 4096;

/// Reads `buffer` back to the host.
fn read_back(ctx: &gpustream_tools::gpu::GpuContext, buffer: &wgpu::Buffer) -> Vec<u8> {
    let rb = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: buffer.size(),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, 0, &rb, 0, buffer.size());
    ctx.queue.submit([enc.finish()]);
    rb.slice(..)
        .map_async(wgpu::MapMode::Read, |r| r.expect("mapping the readback"));
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("device lost");
    let bytes = rb.slice(..).get_mapped_range().expect("mapped").to_vec();
    bytes
}

#[test]
fn a_malformed_lz4_block_fails_only_its_own_request_on_the_gpu_path() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    if !common::test_supports(&ctx, gpustream_tools::gpu::Capability::ComputePasses) {
        return;
    }
    let rt = Runtime::new(&ctx.device, &ctx.queue, RuntimeConfig::default()).unwrap();
    assert_eq!(
        rt.compression_support(Codec::Lz4),
        CompressionSupport::Gpu,
        "LZ4 must decode on the GPU for this test to mean anything"
    );
    let n = 9;
    let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("destination"),
        size: (n * SLOT) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let q = rt.create_queue(QueueConfig::default().with_source(SourceKind::Memory));
    let status = StatusArray::new(n);
    // Request 3: a valid stream declared 4 bytes longer than it decodes to
    // (whole words, so it stays on the GPU path). Request 6: a stream cut
    // off inside a literal run.
    let bad = [3usize, 6];
    let mut wanted = Vec::new();
    for i in 0..n {
        let data = content(i as u8 + 1, SLOT - 4 * (i == 3) as usize);
        let mut stored = Codec::Lz4.compress(&data, 0).unwrap();
        let mut size = data.len() as u32;
        match i {
            3 => size += 4,
            6 => {
                // A literal-only stream (token 0xF0, length 255+255+...),
                // truncated: the literals run past the end of the input.
                stored = vec![0xF0, 255, 255, 255, 10, 1, 2, 3];
            }
            _ => {}
        }
        q.enqueue(
            Request::new(
                Source::Memory {
                    data: Arc::from(stored),
                    codec: Codec::Lz4,
                    size,
                },
                Destination::Buffer {
                    buffer: buffer.clone(),
                    offset: (i * SLOT) as u64,
                },
            )
            .with_name(format!("r{i}")),
        )
        .unwrap();
        q.enqueue_status(&status, i);
        wanted.push(data);
    }
    let fence = Fence::new();
    q.enqueue_signal(&fence, 1);
    q.submit();
    assert!(
        fence.wait_timeout(1, Duration::from_secs(120)),
        "fence never reached 1"
    );
    for i in 0..n {
        match status.get(i) {
            StatusEntry::Failed(f) if bad.contains(&i) => {
                assert_eq!(f.name.as_deref(), Some(format!("r{i}").as_str()));
                assert!(
                    matches!(*f.error, RequestError::GpuDecode { .. }),
                    "request {i}: {}",
                    f.error
                );
            }
            other if bad.contains(&i) => panic!("request {i}: expected GpuDecode, got {other:?}"),
            StatusEntry::Ok => {}
            other => panic!("request {i}, a valid block, ended {other:?}"),
        }
    }
    let st = q.stats();
    assert_eq!(st.failed, bad.len() as u64);
    assert_eq!(st.completed, (n - bad.len()) as u64);
    assert!(st.blocks_gpu_decoded >= (n - bad.len()) as u64, "{st:?}");
    assert_eq!(q.error_record().failure_count, bad.len() as u64);
    let out = read_back(&ctx, &buffer);
    for (i, want) in wanted.iter().enumerate() {
        if !bad.contains(&i) {
            assert!(
                out[i * SLOT..][..want.len()] == want[..],
                "request {i} delivered wrong bytes"
            );
        }
    }
}

/// The device destroyed while requests stream into it: every request ends
/// exactly once (delivered before the loss, or failed with
/// `RequestError::DeviceLost`), every fence reaches its value, nothing
/// panics, and requests enqueued after the loss fail the same way.
#[test]
fn a_device_destroyed_mid_stream_fails_the_rest_with_device_lost() {
    let Some(ctx) = common::test_device() else {
        return;
    };
    if !common::test_supports(&ctx, gpustream_tools::gpu::Capability::ComputePasses) {
        return;
    }
    let rt = Runtime::new(
        &ctx.device,
        &ctx.queue,
        RuntimeConfig::default().with_staging_size(4 << 20),
    )
    .unwrap();
    let q = rt.create_queue(QueueConfig::default().with_source(SourceKind::Memory));
    let (batches, per) = (12usize, 64usize);
    let block = 64 << 10;
    let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("destination"),
        size: (per * block) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let data = content(7, block);
    let stored: Arc<[u8]> = Arc::from(Codec::Lz4.compress(&data, 0).unwrap());
    let status = StatusArray::new(batches * per + 1);
    // One LZ4 block into slot `i` of the buffer.
    let request = |i: usize| {
        Request::new(
            Source::Memory {
                data: stored.clone(),
                codec: Codec::Lz4,
                size: block as u32,
            },
            Destination::Buffer {
                buffer: buffer.clone(),
                offset: (i * block) as u64,
            },
        )
    };
    let fences: Vec<Fence> = (0..batches).map(|_| Fence::new()).collect();
    for (b, fence) in fences.iter().enumerate() {
        for i in 0..per {
            q.enqueue(request(i)).unwrap();
            q.enqueue_status(&status, b * per + i);
        }
        q.enqueue_signal(fence, 1);
        q.submit();
        if b == 1 {
            // Let the first batches reach the GPU, then take it away.
            assert!(fences[0].wait_timeout(1, Duration::from_secs(120)));
            ctx.device.destroy();
        }
    }
    for (b, fence) in fences.iter().enumerate() {
        assert!(
            fence.wait_timeout(1, Duration::from_secs(120)),
            "fence {b} never reached 1"
        );
    }
    // A request after the loss.
    q.enqueue(request(0)).unwrap();
    q.enqueue_status(&status, batches * per);
    let last = Fence::new();
    q.enqueue_signal(&last, 1);
    q.submit();
    assert!(
        last.wait_timeout(1, Duration::from_secs(120)),
        "the last fence never reached 1"
    );
    let (mut ok, mut lost) = (0, 0);
    for i in 0..=batches * per {
        match status.get(i) {
            StatusEntry::Ok => ok += 1,
            StatusEntry::Failed(f) if matches!(*f.error, RequestError::DeviceLost { .. }) => {
                lost += 1
            }
            other => panic!("request {i} ended {other:?}"),
        }
    }
    assert!(
        ok >= per,
        "the first batch was delivered before the loss: {ok}"
    );
    assert!(lost >= 1, "requests after the loss fail with DeviceLost");
    assert!(
        matches!(status.get(batches * per), StatusEntry::Failed(_)),
        "a request enqueued after the loss fails"
    );
    let st = q.stats();
    assert_eq!(st.completed + st.failed, st.requests, "{st:?}");
    assert_eq!(st.failed, lost as u64);
    drop(q);
    drop(rt);
}
