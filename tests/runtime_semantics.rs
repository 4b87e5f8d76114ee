//! The queue semantics of the runtime (fences, status arrays, cancellation,
//! the error record, capacity, validation), driven with memory sources so
//! they need no pack and no GPU.

use std::sync::Arc;
use std::time::Duration;

use gpustream::codec::Codec;
use gpustream::completion::{Fence, StatusArray, StatusEntry};
use gpustream::destinations::HostMemory;
use gpustream::runtime::{
    Destination, QueueConfig, Request, RequestError, Runtime, RuntimeConfig, Source, SourceKind,
};

fn runtime() -> Runtime {
    Runtime::without_gpu(RuntimeConfig::default().with_cpu_threads(2)).unwrap()
}

fn memory_queue(rt: &Runtime, capacity: usize) -> gpustream::runtime::Queue {
    rt.create_queue(
        QueueConfig::default()
            .with_capacity(capacity)
            .with_source(SourceKind::Memory),
    )
}

fn block(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u8 / 7)
                .wrapping_mul(seed)
                .wrapping_add((i % 13) as u8)
        })
        .collect()
}

fn lz4_source(data: &[u8]) -> Source {
    let stored = Codec::Lz4.compress(data, 0).unwrap();
    Source::Memory {
        data: stored.into(),
        codec: Codec::Lz4,
        size: data.len() as u32,
    }
}

/// A memory source that fails to decode: a valid stream declared one byte
/// longer than it decodes to.
fn bad_source(data: &[u8]) -> Source {
    let stored = Codec::Lz4.compress(data, 0).unwrap();
    Source::Memory {
        data: stored.into(),
        codec: Codec::Lz4,
        size: data.len() as u32 + 1,
    }
}

#[test]
fn requests_deliver_and_fence_reaches_value() {
    let rt = runtime();
    let q = memory_queue(&rt, 256);
    let mem = HostMemory::new(64 * 1000);
    let mut expect = vec![0u8; 64 * 1000];
    for i in 0..1000 {
        let d = block(i as u8, 64);
        expect[i * 64..(i + 1) * 64].copy_from_slice(&d);
        q.enqueue(Request::new(
            lz4_source(&d),
            Destination::Memory {
                memory: mem.clone(),
                offset: i * 64,
            },
        ))
        .unwrap();
    }
    let f = Fence::new();
    q.enqueue_signal(&f, 7);
    assert_eq!(f.completed_value(), 0, "nothing runs before submit");
    q.submit();
    assert!(f.wait_timeout(7, Duration::from_secs(60)));
    assert_eq!(mem.to_vec().unwrap(), expect);
    let st = q.stats();
    assert_eq!(st.requests, 1000);
    assert_eq!(st.completed, 1000);
    assert_eq!(st.bytes_delivered, 64_000);
    assert!(st.submits >= 2, "capacity 256 forces automatic submits");
    assert_eq!(q.error_record().failure_count, 0);
}

#[test]
fn fence_with_nothing_before_it_fires_at_submit() {
    let rt = runtime();
    let q = memory_queue(&rt, 128);
    let f = Fence::new();
    q.enqueue_signal(&f, 3);
    q.submit();
    assert_eq!(f.completed_value(), 3);
}

#[test]
fn status_entry_holds_first_failure_in_enqueue_order() {
    let rt = runtime();
    let q = memory_queue(&rt, 1024);
    let s = StatusArray::new(3);
    // 8 KiB apart: a bad source declares one byte more than it decodes to.
    let mem = HostMemory::new(8192 * 8);
    let d = block(3, 4096);
    // Window 0: ok, bad (named "first"), ok, bad ("second").
    let dest = |i: usize| Destination::Memory {
        memory: mem.clone(),
        offset: i * 8192,
    };
    q.enqueue(Request::new(lz4_source(&d), dest(0))).unwrap();
    q.enqueue(
        Request::new(bad_source(&d), dest(1))
            .with_name("first")
            .with_tag(11),
    )
    .unwrap();
    q.enqueue(Request::new(lz4_source(&d), dest(2))).unwrap();
    q.enqueue(Request::new(bad_source(&d), dest(3)).with_name("second"))
        .unwrap();
    q.enqueue_status(&s, 0);
    // Window 1: all good.
    q.enqueue(Request::new(lz4_source(&d), dest(4))).unwrap();
    q.enqueue_status(&s, 1);
    // Window 2: one failure.
    q.enqueue(Request::new(bad_source(&d), dest(5)).with_name("third"))
        .unwrap();
    q.enqueue_status(&s, 2);
    q.submit();
    match s.wait(0) {
        StatusEntry::Failed(f) => {
            assert_eq!(f.name.as_deref(), Some("first"));
            assert_eq!(f.tag, 11);
            assert!(matches!(*f.error, RequestError::Codec(_)), "{}", f.error);
        }
        other => panic!("entry 0: {other:?}"),
    }
    assert!(matches!(s.wait(1), StatusEntry::Ok));
    assert!(matches!(s.wait(2), StatusEntry::Failed(f) if f.name.as_deref() == Some("third")));
    let rec = q.error_record();
    assert_eq!(rec.failure_count, 3);
    assert_eq!(rec.first_failure.unwrap().name.as_deref(), Some("first"));
    assert_eq!(
        q.error_record().failure_count,
        0,
        "retrieving starts a new record"
    );
}

#[test]
fn cancelled_requests_are_not_failures_and_fences_still_reach() {
    let rt = runtime();
    let q = memory_queue(&rt, 1024);
    let mem = HostMemory::new(65536 * 64);
    let d = block(9, 65536);
    for i in 0..64 {
        let tag = if i % 2 == 0 { 0xA0 } else { 0xB0 };
        q.enqueue(
            Request::new(
                lz4_source(&d),
                Destination::Memory {
                    memory: mem.clone(),
                    offset: i * 65536,
                },
            )
            .with_tag(tag),
        )
        .unwrap();
    }
    let s = StatusArray::new(1);
    q.enqueue_status(&s, 0);
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    // Cancel before submit: none of the 0xB0 requests may write.
    q.cancel(0xF0, 0xB0);
    q.submit();
    assert!(f.wait_timeout(1, Duration::from_secs(60)));
    assert!(
        matches!(s.get(0), StatusEntry::Ok),
        "cancelled requests are not failures"
    );
    let st = q.stats();
    assert_eq!(st.cancelled, 32);
    assert_eq!(st.completed, 32);
    let bytes = mem.to_vec().unwrap();
    for i in 0..64 {
        let chunk = &bytes[i * 65536..(i + 1) * 65536];
        if i % 2 == 0 {
            assert_eq!(chunk, &d[..], "request {i} delivered");
        } else {
            assert!(
                chunk.iter().all(|&b| b == 0),
                "cancelled request {i} wrote its destination"
            );
        }
    }
    assert_eq!(q.error_record().failure_count, 0);
}

#[test]
fn validation_errors_come_back_from_enqueue() {
    let rt = runtime();
    let q = memory_queue(&rt, 128);
    let d = block(1, 100);
    let small = HostMemory::new(50);
    let e = q
        .enqueue(Request::new(
            lz4_source(&d),
            Destination::Memory {
                memory: small.clone(),
                offset: 0,
            },
        ))
        .unwrap_err();
    assert!(
        matches!(e, RequestError::DestinationTooSmall { needed: 100, .. }),
        "{e}"
    );
    let e = q
        .enqueue(Request::new(
            lz4_source(&d),
            Destination::Memory {
                memory: small,
                offset: usize::MAX,
            },
        ))
        .unwrap_err();
    assert!(matches!(e, RequestError::DestinationTooSmall { .. }), "{e}");
    // A file queue refuses memory sources.
    let fq = rt.create_queue(QueueConfig::default());
    let mem = HostMemory::new(100);
    let e = fq
        .enqueue(Request::new(
            lz4_source(&d),
            Destination::Memory {
                memory: mem.clone(),
                offset: 0,
            },
        ))
        .unwrap_err();
    assert!(matches!(e, RequestError::WrongSourceKind { .. }), "{e}");
    // Two requests in flight may not write overlapping host memory.
    q.enqueue(Request::new(
        lz4_source(&d),
        Destination::Memory {
            memory: mem.clone(),
            offset: 0,
        },
    ))
    .unwrap();
    let e = q
        .enqueue(Request::new(
            lz4_source(&d),
            Destination::Memory {
                memory: mem.clone(),
                offset: 0,
            },
        ))
        .unwrap_err();
    assert!(matches!(e, RequestError::DestinationBusy { .. }), "{e}");
    // Oversized declared size.
    let e = q
        .enqueue(Request::new(
            Source::Memory {
                data: Arc::from(vec![0u8; 8]),
                codec: Codec::Lz4,
                size: 1 << 20,
            },
            Destination::Memory {
                memory: HostMemory::new(1 << 20),
                offset: 0,
            },
        ))
        .unwrap_err();
    assert!(matches!(e, RequestError::Codec(_)), "{e}");
    q.submit();
}

/// A GPU destination on a runtime without a GPU is refused at enqueue with
/// `NoGpu`, not lost. The buffer comes from wgpu's noop backend, which any
/// machine has, so this runs without a GPU too.
#[test]
fn a_gpu_destination_on_a_runtime_without_a_gpu_is_refused() {
    let ctx = gpustream_tools::gpu::open_device_for(Some("noop")).expect("wgpu's noop backend");
    let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("no-gpu destination"),
        size: 256,
        usage: wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let rt = runtime();
    let q = memory_queue(&rt, 16);
    let e = q
        .enqueue(Request::new(
            lz4_source(&block(9, 256)),
            Destination::Buffer { buffer, offset: 0 },
        ))
        .unwrap_err();
    assert!(matches!(e, RequestError::NoGpu), "{e}");
    // Refused, so nothing is in flight and nothing was counted as failed.
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    q.submit();
    assert!(f.wait_timeout(1, Duration::from_secs(10)));
    assert_eq!(q.error_record().failure_count, 0);
    assert_eq!(q.stats().failed, 0);
}

#[test]
fn dropping_a_queue_cancels_unsubmitted_requests_and_fires_fences() {
    let rt = runtime();
    let f = Fence::new();
    let mem = HostMemory::new(1 << 20);
    {
        let q = memory_queue(&rt, 1024);
        for i in 0..16 {
            q.enqueue(Request::new(
                lz4_source(&block(2, 65536)),
                Destination::Memory {
                    memory: mem.clone(),
                    offset: i * 65536,
                },
            ))
            .unwrap();
        }
        q.enqueue_signal(&f, 5);
    }
    assert!(f.wait_timeout(5, Duration::from_secs(60)));
    assert!(mem.to_vec().unwrap().iter().all(|&b| b == 0));
}

#[test]
fn dropping_the_runtime_finishes_submitted_work() {
    let f = Fence::new();
    let mem = HostMemory::new(1 << 20);
    let q;
    {
        let rt = runtime();
        q = memory_queue(&rt, 1024);
        for i in 0..16 {
            q.enqueue(Request::new(
                lz4_source(&block(4, 65536)),
                Destination::Memory {
                    memory: mem.clone(),
                    offset: i * 65536,
                },
            ))
            .unwrap();
        }
        q.enqueue_signal(&f, 1);
        q.submit();
    }
    assert_eq!(f.completed_value(), 1, "drop waited for the submitted work");
    // After the runtime is gone, new work fails rather than hangs.
    let g = Fence::new();
    q.enqueue(Request::new(
        lz4_source(&block(4, 16)),
        Destination::Memory {
            memory: HostMemory::new(16),
            offset: 0,
        },
    ))
    .unwrap();
    q.enqueue_signal(&g, 1);
    q.submit();
    assert!(g.wait_timeout(1, Duration::from_secs(10)));
    assert_eq!(q.error_record().failure_count, 1);
}

#[test]
fn fence_callback_and_future() {
    let rt = runtime();
    let q = memory_queue(&rt, 128);
    let f = Fence::new();
    let (tx, rx) = std::sync::mpsc::channel();
    f.on_reached(2, move |v| tx.send(v).unwrap());
    let mem = HostMemory::new(64);
    q.enqueue(Request::new(
        lz4_source(&block(5, 64)),
        Destination::Memory {
            memory: mem,
            offset: 0,
        },
    ))
    .unwrap();
    q.enqueue_signal(&f, 2);
    q.submit();
    assert_eq!(pollster::block_on(f.reached(2)), 2);
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 2);
}

/// Threads blocked in `enqueue` on a full queue are woken as requests
/// finish (the queue wakes waiters only when there are some), and the
/// capacity is never exceeded.
#[test]
fn enqueue_on_a_full_queue_waits_and_is_woken_by_completions() {
    let rt = Arc::new(runtime());
    let q = Arc::new(memory_queue(&rt, 128));
    let mem = HostMemory::new(2000 * 4096);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut threads = Vec::new();
    for t in 0..4usize {
        let (q, mem, done_tx) = (q.clone(), mem.clone(), done_tx.clone());
        threads.push(std::thread::spawn(move || {
            let mut most = 0;
            for i in (t..2000).step_by(4) {
                let d = block(i as u8, 4096);
                q.enqueue(Request::new(
                    lz4_source(&d),
                    Destination::Memory {
                        memory: mem.clone(),
                        offset: i * 4096,
                    },
                ))
                .unwrap();
                most = most.max(q.in_flight());
            }
            done_tx.send(most).unwrap();
        }));
    }
    // A lost wake-up would leave an enqueueing thread blocked for ever.
    for _ in 0..4 {
        let most = done_rx
            .recv_timeout(Duration::from_secs(120))
            .expect("an enqueueing thread was never woken");
        assert!(most <= 128, "in flight {most} over the capacity");
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    q.submit();
    assert!(f.wait_timeout(1, Duration::from_secs(60)));
    let bytes = mem.to_vec().unwrap();
    for i in (0..2000).step_by(97) {
        assert_eq!(&bytes[i * 4096..(i + 1) * 4096], &block(i as u8, 4096)[..]);
    }
    assert_eq!(q.stats().completed, 2000);
}

/// Reading host memory does not hold a lock the queue needs: a closure
/// given to `with_bytes` may enqueue into the same memory. A request on
/// the bytes being read is refused at once (`DestinationBusy`), one on
/// other bytes is accepted and delivered.
#[test]
fn a_reader_of_host_memory_may_enqueue_into_it() {
    let rt = runtime();
    let q = memory_queue(&rt, 64);
    let mem = HostMemory::new(2048);
    let d = block(9, 1024);
    let (same, other) = mem
        .with_bytes(0..1024, |_| {
            let enqueue = |offset| {
                q.enqueue(Request::new(
                    lz4_source(&d),
                    Destination::Memory {
                        memory: mem.clone(),
                        offset,
                    },
                ))
            };
            (enqueue(512), enqueue(1024))
        })
        .unwrap();
    assert!(
        matches!(same, Err(RequestError::DestinationBusy { .. })),
        "{same:?}"
    );
    assert!(other.is_ok(), "{other:?}");
    let f = Fence::new();
    q.enqueue_signal(&f, 1);
    q.submit();
    assert!(f.wait_timeout(1, Duration::from_secs(60)));
    assert!(mem.with_bytes(1024..2048, |b| b == &d[..]).unwrap());
}
