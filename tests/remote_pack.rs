//! Packs in object storage, against a real S3 server (`s3s-fs`) started on
//! loopback by each test: a stream completes and a second one is served
//! from the local replica; a server stopped mid-stream fails the requests
//! still needing it with typed errors, and a restarted one serves them; a
//! corrupt cached block is dropped and fetched again; the cache keeps its
//! byte budget; bad URLs, objects and caches are typed errors at open.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use common::s3::{put_object, S3Server, ACCESS_KEY};
use gpustream::completion::{Fence, StatusArray, StatusEntry};
use gpustream::pack::{PackWriter, WriterOptions};
use gpustream::prelude::*;
use gpustream::remote::{RemoteConfig, RemoteError, RemotePack};
use gpustream::Codec;

/// Bytes that LZ4 shrinks a little and that differ everywhere.
fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 3 == 0 {
                0
            } else {
                x as u8
            }
        })
        .collect()
}

/// Eight LZ4 blobs of 200 KiB to 900 KiB, their bytes from `seed` on.
fn make_pack(path: &std::path::Path, seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut w = PackWriter::create(
        path,
        WriterOptions {
            codec: Codec::Lz4,
            threads: 1,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let mut blobs = Vec::new();
    for i in 0..8u64 {
        let data = content(seed + i, (200 + 100 * i as usize) << 10);
        let name = format!("blob{i}");
        w.add_blob(&name, &data).unwrap();
        blobs.push((name, data));
    }
    w.finish().unwrap();
    blobs
}

struct World {
    dir: tempfile::TempDir,
    server: Option<S3Server>,
    port: u16,
    blobs: Vec<(String, Vec<u8>)>,
}

const URL: &str = "s3://packs/level.gspk";

impl World {
    /// Eight LZ4 blobs of 200 KiB to 900 KiB in one pack, uploaded to a
    /// fresh server as `s3://packs/level.gspk`.
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s3");
        std::fs::create_dir_all(root.join("packs")).unwrap();
        let pack = dir.path().join("level.gspk");
        let blobs = make_pack(&pack, 1);
        let server = S3Server::start(&root, 0, 2).unwrap();
        put_object(
            &server.endpoint(),
            "packs",
            "level.gspk",
            std::fs::read(&pack).unwrap(),
        );
        World {
            port: server.addr.port(),
            server: Some(server),
            dir,
            blobs,
        }
    }

    fn cache(&self) -> std::path::PathBuf {
        self.dir.path().join("cache")
    }

    /// Short timeouts and few retries, so a stopped server fails fast.
    fn config(&self) -> RemoteConfig {
        let mut c = RemoteConfig::new(self.cache());
        c.endpoint = Some(format!("http://127.0.0.1:{}", self.port));
        c.credentials = Some((ACCESS_KEY.0.into(), ACCESS_KEY.1.into()));
        c.request_timeout = Duration::from_secs(3);
        c.connect_timeout = Duration::from_secs(1);
        c.retries = 1;
        c.retry_timeout = Duration::from_secs(3);
        c.max_get = 256 << 10;
        c.concurrency = 4;
        c
    }

    fn stop(&mut self) {
        self.server = None;
    }

    fn restart(&mut self) {
        let root = self.dir.path().join("s3");
        // The port may linger a moment after the stop.
        let t = Instant::now();
        loop {
            match S3Server::start(&root, self.port, 2) {
                Ok(s) => {
                    self.server = Some(s);
                    return;
                }
                Err(e) if t.elapsed() < Duration::from_secs(10) => {
                    eprintln!("restart: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("cannot restart the server: {e}"),
            }
        }
    }
}

fn runtime() -> Runtime {
    Runtime::without_gpu(RuntimeConfig {
        cpu_threads: 2,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// Streams blobs `which` of the pack into host memory through one queue
/// and returns each one's status and bytes. The fence must be reached.
fn stream(
    rt: &Runtime,
    remote: &RemotePack,
    w: &World,
    which: std::ops::Range<usize>,
) -> Vec<(StatusEntry, Vec<u8>)> {
    let pf = rt.open_remote_pack(remote).unwrap();
    let q = rt.create_queue(QueueConfig::default());
    let status = StatusArray::new(which.len());
    let mems: Vec<HostMemory> = which
        .clone()
        .map(|i| HostMemory::new(w.blobs[i].1.len()))
        .collect();
    for (k, i) in which.clone().enumerate() {
        let asset = pf.pack().find(&w.blobs[i].0).unwrap();
        q.enqueue(Request::new(
            Source::blob(&pf, asset),
            Destination::memory(&mems[k]),
        ))
        .unwrap();
        q.enqueue_status(&status, k);
    }
    let fence = Fence::new();
    q.enqueue_signal(&fence, 1);
    q.submit();
    assert!(
        fence.wait_timeout(1, Duration::from_secs(120)),
        "the fence is reached"
    );
    (0..which.len())
        .map(|k| (status.get(k), mems[k].to_vec().unwrap()))
        .collect()
}

fn assert_all_ok(w: &World, got: &[(StatusEntry, Vec<u8>)], which: std::ops::Range<usize>) {
    for ((st, bytes), i) in got.iter().zip(which) {
        let (name, data) = &w.blobs[i];
        assert!(matches!(st, StatusEntry::Ok), "{name}: {st:?}");
        assert!(bytes == data, "{name}: the bytes differ");
    }
}

#[test]
fn a_stream_completes_and_a_second_one_is_served_from_the_replica() {
    let w = World::new();
    let remote = RemotePack::open(URL, &w.config()).unwrap();
    let rt = runtime();
    let all = 0..w.blobs.len();
    assert_all_ok(&w, &stream(&rt, &remote, &w, all.clone()), all.clone());
    let cold = remote.stats();
    let blocks = remote.pack().blocks().len() as u64;
    assert_eq!(cold.blocks_fetched, blocks, "{cold:?}");
    assert!(cold.gets > 0 && cold.failed_gets == 0, "{cold:?}");
    // Coalescing: fewer GETs than blocks.
    assert!(cold.gets < blocks, "{cold:?}");
    assert_all_ok(&w, &stream(&rt, &remote, &w, all.clone()), all.clone());
    let warm = remote.stats();
    assert_eq!(warm.gets, cold.gets, "the second stream fetched: {warm:?}");
    assert!(warm.blocks_hit >= blocks, "{warm:?}");
    // A new process (a new open of the same cache) finds the blocks there,
    // checks them and fetches nothing.
    drop(rt);
    drop(remote);
    let remote = RemotePack::open(URL, &w.config()).unwrap();
    let rt = runtime();
    assert_all_ok(&w, &stream(&rt, &remote, &w, all.clone()), all);
    let again = remote.stats();
    assert_eq!(again.gets, 0, "{again:?}");
    assert_eq!(again.blocks_corrupt, 0, "{again:?}");
}

#[test]
fn a_stopped_server_gives_typed_errors_and_a_restarted_one_resumes() {
    let mut w = World::new();
    let remote = RemotePack::open(URL, &w.config()).unwrap();
    let rt = runtime();
    // The first half of the stream arrives...
    assert_all_ok(&w, &stream(&rt, &remote, &w, 0..4), 0..4);
    // ...then the server stops: the rest fails, each request once, naming
    // the object and the range, and the fence is reached in bounded time.
    w.stop();
    let t = Instant::now();
    let got = stream(&rt, &remote, &w, 4..8);
    eprintln!("with the server stopped: {:?}", t.elapsed());
    for (i, (st, _)) in got.iter().enumerate() {
        match st {
            StatusEntry::Failed(f) => {
                let msg = f.error.to_string();
                assert!(
                    msg.contains(URL),
                    "blob{}: the error names the URL: {msg}",
                    i + 4
                );
                assert!(
                    msg.contains("GET bytes"),
                    "blob{}: and the range: {msg}",
                    i + 4
                );
            }
            other => panic!("blob{}: {other:?} with the server stopped", i + 4),
        }
    }
    // What arrived before the stop is served from the replica without it.
    let before = remote.stats().gets;
    assert_all_ok(&w, &stream(&rt, &remote, &w, 0..4), 0..4);
    assert_eq!(remote.stats().gets, before);
    assert!(remote.stats().failed_gets > 0);
    // The server comes back on the same port: the same runtime and pack
    // fetch what failed.
    w.restart();
    assert_all_ok(&w, &stream(&rt, &remote, &w, 0..8), 0..8);
}

#[test]
fn a_corrupt_cached_block_is_dropped_and_fetched_again() {
    let w = World::new();
    let all = 0..w.blobs.len();
    let (replica, block) = {
        let remote = RemotePack::open(URL, &w.config()).unwrap();
        let rt = runtime();
        assert_all_ok(&w, &stream(&rt, &remote, &w, all.clone()), all.clone());
        let b = remote.pack().blocks()[5];
        (remote.replica().to_path_buf(), b)
    };
    // Flip bytes of one block in the replica while no process has it open.
    let mut bytes = std::fs::read(&replica).unwrap();
    for k in 0..16 {
        bytes[block.offset as usize + k] ^= 0x5a;
    }
    std::fs::write(&replica, &bytes).unwrap();
    let remote = RemotePack::open(URL, &w.config()).unwrap();
    let rt = runtime();
    assert_all_ok(&w, &stream(&rt, &remote, &w, all.clone()), all);
    let s = remote.stats();
    assert_eq!(s.blocks_corrupt, 1, "{s:?}");
    assert_eq!(s.blocks_fetched, 1, "only the bad block is fetched: {s:?}");
}

#[test]
fn the_cache_keeps_its_byte_budget() {
    let w = World::new();
    let mut cfg = w.config();
    cfg.cache_bytes = 1 << 20;
    let remote = RemotePack::open(URL, &cfg).unwrap();
    let rt = runtime();
    let all = 0..w.blobs.len();
    // The pack holds about 3.6 MiB of blocks: every stream must evict.
    for _ in 0..2 {
        assert_all_ok(&w, &stream(&rt, &remote, &w, all.clone()), all.clone());
        // The last reads' pins go just after the fence (with their
        // completions), and the blocks they held past the budget with them.
        let t = Instant::now();
        let mut s = remote.stats();
        while s.cached_bytes > cfg.cache_bytes && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
            s = remote.stats();
        }
        assert!(s.cached_bytes <= cfg.cache_bytes, "{s:?}");
        assert!(s.blocks_evicted > 0, "{s:?}");
        // Evicted blocks are holes: the replica's allocation stays near
        // the budget (plus the header, the table of contents, and the
        // partly used 4 KiB units at the ends of blocks).
        let allocated = std::fs::metadata(remote.replica()).unwrap().blocks() * 512;
        assert!(
            allocated <= cfg.cache_bytes + (256 << 10),
            "{allocated} bytes allocated for a budget of {}",
            cfg.cache_bytes
        );
    }
}

#[test]
fn bad_urls_objects_and_caches_are_typed_errors_at_open() {
    let w = World::new();
    let cfg = w.config();
    assert!(matches!(
        RemotePack::open("https://example.com/x.gspk", &cfg),
        Err(RemoteError::Url { .. })
    ));
    assert!(matches!(
        RemotePack::open("s3://packs", &cfg),
        Err(RemoteError::Url { .. })
    ));
    match RemotePack::open("s3://packs/missing.gspk", &cfg) {
        Err(e @ RemoteError::Fetch { .. }) => {
            assert!(e.to_string().contains("missing.gspk"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // An object that is not a pack.
    put_object(
        &w.server.as_ref().unwrap().endpoint(),
        "packs",
        "notes.txt",
        b"not a pack, but long enough to hold a header's worth of bytes....".to_vec(),
    );
    assert!(matches!(
        RemotePack::open("s3://packs/notes.txt", &cfg),
        Err(RemoteError::Pack { .. })
    ));
    // One open at a time per cache.
    let first = RemotePack::open(URL, &cfg).unwrap();
    match RemotePack::open(URL, &cfg) {
        Err(e @ RemoteError::Cache { .. }) => assert!(e.to_string().contains("in use"), "{e}"),
        other => panic!("{other:?}"),
    }
    drop(first);
    RemotePack::open(URL, &cfg).unwrap();
}

#[test]
fn a_server_stopped_while_gets_are_in_flight_fails_each_request_once() {
    let mut w = World::new();
    let mut cfg = w.config();
    // One block per GET, one at a time: the stream is many GETs long.
    cfg.concurrency = 1;
    cfg.max_get = 64 << 10;
    let remote = RemotePack::open(URL, &cfg).unwrap();
    let rt = runtime();
    let watcher = {
        let remote = remote.clone();
        let server = w.server.take();
        std::thread::spawn(move || {
            let t = Instant::now();
            while remote.stats().gets < 3 && t.elapsed() < Duration::from_secs(60) {
                std::thread::yield_now();
            }
            drop(server);
        })
    };
    let got = stream(&rt, &remote, &w, 0..8);
    watcher.join().unwrap();
    let (mut ok, mut failed) = (0, 0);
    for (i, (st, bytes)) in got.iter().enumerate() {
        match st {
            StatusEntry::Ok => {
                assert!(*bytes == w.blobs[i].1, "blob{i}: the bytes differ");
                ok += 1;
            }
            StatusEntry::Failed(f) => {
                assert!(f.error.to_string().contains(URL), "blob{i}: {}", f.error);
                failed += 1;
            }
            StatusEntry::Pending => panic!("blob{i}: never completed"),
        }
    }
    eprintln!("{ok} arrived, {failed} failed; {:?}", remote.stats());
    assert!(
        failed > 0,
        "the server stopped after 3 GETs, yet all arrived"
    );
    w.restart();
    assert_all_ok(&w, &stream(&rt, &remote, &w, 0..8), 0..8);
}

#[test]
fn an_object_replaced_under_its_cache_is_never_read_as_the_old_one() {
    let w = World::new();
    {
        let remote = RemotePack::open(URL, &w.config()).unwrap();
        let rt = runtime();
        assert_all_ok(&w, &stream(&rt, &remote, &w, 0..4), 0..4);
        // Replaced while open: blocks fetched from now on are the new
        // object's, which match none of the open pack's checksums.
        put_object(
            &w.server.as_ref().unwrap().endpoint(),
            "packs",
            "level.gspk",
            vec![0x33; 4 << 20],
        );
        let got = stream(&rt, &remote, &w, 4..8);
        assert!(
            got.iter()
                .all(|(st, _)| matches!(st, StatusEntry::Failed(_))),
            "blocks of another object were accepted"
        );
        // Nothing of the new object was written over the blocks already
        // here (a GET's bytes around its blocks are not theirs to write).
        assert_all_ok(&w, &stream(&rt, &remote, &w, 0..4), 0..4);
    }
    // Replaced by another pack: opened again, the cache belongs to
    // another version of the object, so nothing of it is reused.
    let mut w = w;
    let other = w.dir.path().join("other.gspk");
    w.blobs = make_pack(&other, 100);
    put_object(
        &w.server.as_ref().unwrap().endpoint(),
        "packs",
        "level.gspk",
        std::fs::read(&other).unwrap(),
    );
    let remote = RemotePack::open(URL, &w.config()).unwrap();
    let rt = runtime();
    let all = 0..w.blobs.len();
    assert_all_ok(&w, &stream(&rt, &remote, &w, all.clone()), all);
    let s = remote.stats();
    assert_eq!(
        s.blocks_fetched,
        remote.pack().blocks().len() as u64,
        "{s:?}"
    );
    assert_eq!(s.blocks_corrupt, 0, "{s:?}");
}
