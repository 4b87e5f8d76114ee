//! The default runtime owns no signal: streaming a pack read through the
//! page cache (where the opt-in mapping would apply) leaves SIGBUS as the
//! process had it. A test binary of its own, so no other test's mapping
//! has installed the handler first.

use gpustream::codec::Codec;
use gpustream::completion::Fence;
use gpustream::destinations::HostMemory;
use gpustream::io::OpenMode;
use gpustream::pack::{PackWriter, WriterOptions};
use gpustream::runtime::{Destination, QueueConfig, Request, Runtime, RuntimeConfig, Source};

/// The SIGBUS disposition now: the handler address (SIG_DFL is 0).
fn sigbus_handler() -> usize {
    // SAFETY: all-zero is a valid `sigaction` to be filled in; a null new
    // action makes `sigaction` only report the current one.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old), 0);
        old.sa_sigaction
    }
}

#[test]
fn the_default_runtime_installs_no_sigbus_handler() {
    let before = sigbus_handler();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.gspk");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i / 7 % 251) as u8).collect();
    let mut w = PackWriter::create(&path, WriterOptions::default().with_codec(Codec::Lz4)).unwrap();
    w.add_blob("b", &data).unwrap();
    w.finish().unwrap();
    let rt =
        Runtime::without_gpu(RuntimeConfig::default().with_open_mode(OpenMode::Buffered)).unwrap();
    let pf = rt.open_pack(&path).unwrap();
    let asset = pf.pack().find("b").unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let m = HostMemory::new(data.len());
    q.enqueue(Request::new(
        Source::Blob {
            pack: pf.clone(),
            asset,
            range: None,
        },
        Destination::Memory {
            memory: m.clone(),
            offset: 0,
        },
    ))
    .unwrap();
    let fence = Fence::new();
    q.enqueue_signal(&fence, 1);
    q.submit();
    fence.wait(1);
    assert!(m.to_vec().unwrap() == data);
    assert_eq!(
        sigbus_handler(),
        before,
        "the default runtime installed a SIGBUS handler"
    );
}
