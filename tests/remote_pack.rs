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
        WriterOptions::default()
            .with_codec(Codec::Lz4)
            .with_threads(1),
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
        )
        .expect("upload to the S3 server");
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
    Runtime::without_gpu(RuntimeConfig::default().with_cpu_threads(2)).unwrap()
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
    )
    .expect("upload to the S3 server");
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
        )
        .expect("upload to the S3 server");
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
    )
    .expect("upload to the S3 server");
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

/// What the hostile endpoint answers a request with.
enum Answer {
    /// These bytes, status line and headers included, then the connection
    /// stays open for the next request.
    Bytes(Vec<u8>),
    /// This status line and headers, then zeros for as long as the client
    /// reads.
    Endless(Vec<u8>),
}

/// A hostile S3 endpoint on loopback: each request's head (request line
/// and headers) goes to `answer`; counts the requests it saw.
struct Hostile {
    port: u16,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn hostile(answer: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Hostile {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::Ordering::Relaxed;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (seen, answer) = (requests.clone(), std::sync::Arc::new(answer));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (seen, answer) = (seen.clone(), answer.clone());
            std::thread::spawn(move || {
                let mut out = conn.try_clone().unwrap();
                let mut lines = BufReader::new(conn);
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        match lines.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => head.push_str(&line),
                        }
                    }
                    seen.fetch_add(1, Relaxed);
                    match answer(&head) {
                        Answer::Bytes(b) => {
                            if out.write_all(&b).is_err() {
                                return;
                            }
                        }
                        Answer::Endless(h) => {
                            let _ = out.write_all(&h);
                            let zeros = vec![0u8; 64 << 10];
                            while out.write_all(&zeros).is_ok() {}
                            return;
                        }
                    }
                }
            });
        }
    });
    Hostile { port, requests }
}

/// A HEAD answer for an object of `len` bytes.
fn head_ok(len: u64) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nETag: \"v1\"\r\nLast-Modified: Mon, 07 Dec 2026 12:00:00 GMT\r\n\r\n"
    )
    .into_bytes()
}

/// A 206 answer's status line and headers: bytes `a..=b` of a `size`-byte
/// object, declaring a body of `len` bytes.
fn partial_head(a: u64, b: u64, size: u64, len: u64) -> Vec<u8> {
    format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{size}\r\nContent-Length: {len}\r\nETag: \"v1\"\r\nLast-Modified: Mon, 07 Dec 2026 12:00:00 GMT\r\n\r\n"
    )
    .into_bytes()
}

/// The range a GET asks for.
fn range_of(head: &str) -> (u64, u64) {
    let r = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("range: bytes=")
                .map(str::to_string)
        })
        .expect("a ranged GET");
    let (a, b) = r.trim().split_once('-').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

fn hostile_config(dir: &std::path::Path, port: u16) -> RemoteConfig {
    let mut c = RemoteConfig::new(dir.join("cache"));
    c.endpoint = Some(format!("http://127.0.0.1:{port}"));
    c.credentials = Some((ACCESS_KEY.0.into(), ACCESS_KEY.1.into()));
    c.request_timeout = Duration::from_secs(5);
    c.connect_timeout = Duration::from_secs(2);
    c.retries = 0;
    c
}

#[test]
fn a_body_longer_than_its_range_is_cut_off_not_buffered() {
    let dir = tempfile::tempdir().unwrap();
    // Every GET is answered with a declared 2^62-byte body that never ends.
    let server = hostile(|head| {
        if head.starts_with("HEAD") {
            return Answer::Bytes(head_ok(1 << 20));
        }
        let (a, b) = range_of(head);
        Answer::Endless(partial_head(a, b, 1 << 20, 1 << 62))
    });
    match RemotePack::open(URL, &hostile_config(dir.path(), server.port)) {
        Err(e @ RemoteError::Fetch { .. }) => {
            assert!(
                e.to_string().contains("more than the 64 bytes asked for"),
                "{e}"
            )
        }
        other => panic!("expected a fetch error, got {other:?}"),
    }
}

#[test]
fn a_short_body_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = hostile(|head| {
        if head.starts_with("HEAD") {
            return Answer::Bytes(head_ok(1 << 20));
        }
        let (a, _) = range_of(head);
        // Ten bytes, whatever was asked.
        let mut b = partial_head(a, a + 9, 1 << 20, 10);
        b.extend_from_slice(&[0u8; 10]);
        Answer::Bytes(b)
    });
    match RemotePack::open(URL, &hostile_config(dir.path(), server.port)) {
        Err(RemoteError::Fetch { .. }) => {}
        other => panic!("expected a fetch error, got {other:?}"),
    }
}

#[test]
fn a_redirect_to_another_host_is_refused_and_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    // The other host: it must never see a request (it would get the
    // request's signature and credentials' headers).
    let other = hostile(|_| Answer::Bytes(head_ok(1 << 20)));
    let elsewhere = other.port;
    let server = hostile(move |head| {
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        Answer::Bytes(
            format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{elsewhere}{path}\r\nContent-Length: 0\r\n\r\n"
            )
            .into_bytes(),
        )
    });
    assert!(RemotePack::open(URL, &hostile_config(dir.path(), server.port)).is_err());
    assert!(server.requests.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert_eq!(
        other.requests.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "the redirect to another host was followed"
    );
}

#[test]
fn a_remote_head_declaring_a_huge_table_of_contents_is_refused_from_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("p.gspk");
    make_pack(&pack, 3);
    let mut bytes = std::fs::read(&pack).unwrap();
    let toc_len = 1u64 << 40;
    bytes[40..48].copy_from_slice(&toc_len.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    let toc_offset = u64::from_le_bytes(bytes[32..40].try_into().unwrap());
    let size = toc_offset + toc_len;
    let server = hostile(move |head| {
        if head.starts_with("HEAD") {
            return Answer::Bytes(head_ok(size));
        }
        let (a, b) = range_of(head);
        let body: Vec<u8> = (a..=b)
            .map(|i| bytes.get(i as usize).copied().unwrap_or(0))
            .collect();
        let mut r = partial_head(a, b, size, body.len() as u64);
        r.extend_from_slice(&body);
        Answer::Bytes(r)
    });
    match RemotePack::open(URL, &hostile_config(dir.path(), server.port)) {
        Err(e @ RemoteError::Pack { .. }) => assert!(e.to_string().contains("longer than"), "{e}"),
        other => panic!("expected a pack error, got {other:?}"),
    }
}
