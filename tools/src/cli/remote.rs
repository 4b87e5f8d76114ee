//! `bench --pack s3://...`: a pack in S3-compatible object storage, read by
//! the runtime through its local replica, against a plain ranged-GET loop
//! doing the same work.
//!
//! Four passes, alternated, each the median of `--iters`:
//! - **GET loop**: what a user would write instead: the same coalesced
//!   ranged GETs (neighbouring blocks up to `max_get`), the same number in
//!   flight, each block checked against its crc32c and decoded into the
//!   blob's host memory.
//! - **cold**: the runtime on an empty cache: every block fetched, checked,
//!   written into the replica, read back through the I/O engine, decoded.
//! - **warm**: the runtime again, every block in the replica.
//! - **local**: the runtime on a local copy of the pack (the same bytes as
//!   an ordinary file), which is what the warm pass should match.
//!
//! Every blob of the pack is read into host memory; textures are left out
//! (and counted).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use gpustream::pack::{AssetId, AssetKind, BlockId, Pack};
use gpustream::prelude::*;
use gpustream::remote::{RemoteConfig, RemotePack};
use object_store::aws::AmazonS3Builder;
use object_store::{ClientOptions, GetOptions, ObjectStore};

use super::bench::metrics::cpu_seconds;
use super::devices::median;
use super::report::Table;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The figures of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RemoteReport {
    pub date: String,
    pub url: String,
    pub blobs: usize,
    pub textures_left_out: usize,
    pub bytes: u64,
    pub stored_bytes: u64,
    pub concurrency: usize,
    pub max_get_kib: usize,
    pub passes: u32,
    pub get_loop_gbps: f64,
    pub cold_gbps: f64,
    pub warm_gbps: f64,
    pub local_gbps: f64,
    /// Cold runtime over the GET loop (target 0.8 or more).
    pub cold_over_get_loop: f64,
    /// Warm runtime over the local pack (target 0.9 or more).
    pub warm_over_local: f64,
    /// GETs per cold pass.
    pub cold_gets: u64,
    /// This process's CPU seconds per GB delivered (all its threads: the
    /// client's, the runtime's, the decoders'), median per pass kind. The
    /// server's are not in them.
    pub get_loop_cpu_s_per_gb: f64,
    pub cold_cpu_s_per_gb: f64,
    pub warm_cpu_s_per_gb: f64,
    pub local_cpu_s_per_gb: f64,
}

/// The blob assets of `pack`, and how many textures there are beside them.
fn blobs(pack: &Pack) -> (Vec<AssetId>, usize) {
    let mut ids = Vec::new();
    let mut textures = 0;
    for (i, a) in pack.assets().iter().enumerate() {
        match a.kind {
            AssetKind::Blob => ids.push(AssetId(i as u32)),
            _ => textures += 1,
        }
    }
    (ids, textures)
}

/// Streams `ids` of `pf` into `mems` through one queue; seconds to the fence.
fn runtime_pass(
    rt: &Runtime,
    pf: &Arc<PackFile>,
    ids: &[AssetId],
    mems: &[HostMemory],
) -> Result<f64, BoxError> {
    let queue = rt.create_queue(QueueConfig::default());
    let t0 = Instant::now();
    for (id, m) in ids.iter().zip(mems) {
        queue.enqueue(Request::new(Source::blob(pf, *id), Destination::memory(m)))?;
    }
    let fence = Fence::new();
    queue.enqueue_signal(&fence, 1);
    queue.submit();
    fence.wait(1);
    let s = t0.elapsed().as_secs_f64();
    if let Some(f) = queue.error_record().first_failure {
        return Err(f.error.to_string().into());
    }
    Ok(s)
}

/// One block's place: its id, stored range, and where its bytes go.
#[derive(Clone, Copy)]
struct Place {
    id: BlockId,
    offset: u64,
    stored: u64,
    blob: usize,
    at: usize,
    size: usize,
}

/// The blocks of `ids`, in file order, grouped into GETs as the fetcher
/// groups them.
fn get_runs(pack: &Pack, ids: &[AssetId], max_get: u64) -> Vec<Vec<Place>> {
    let mut places = Vec::new();
    for (k, id) in ids.iter().enumerate() {
        let a = pack.asset(*id);
        let mut at = 0;
        for i in a.blocks.clone() {
            let b = pack.blocks()[i as usize];
            places.push(Place {
                id: BlockId(i),
                offset: b.offset,
                stored: b.stored_size as u64,
                blob: k,
                at,
                size: b.size as usize,
            });
            at += b.size as usize;
        }
    }
    places.sort_by_key(|p| p.offset);
    let mut runs: Vec<Vec<Place>> = Vec::new();
    for p in places {
        if let Some(r) = runs.last_mut() {
            let (first, last) = (r[0], r[r.len() - 1]);
            let end = last.offset + last.stored;
            if p.offset >= end
                && p.offset - end <= 64 << 10
                && p.offset + p.stored - first.offset <= max_get
            {
                r.push(p);
                continue;
            }
        }
        runs.push(vec![p]);
    }
    runs
}

/// The plain loop: ranged GETs, `concurrency` in flight, each block
/// checked and decoded into its blob's memory. Seconds.
fn get_loop(
    url: &str,
    cfg: &RemoteConfig,
    pack: &Arc<Pack>,
    runs: &Arc<Vec<Vec<Place>>>,
    dests: &Arc<Vec<Mutex<Vec<u8>>>>,
) -> Result<f64, BoxError> {
    let rest = url.strip_prefix("s3://").ok_or("only s3:// URLs")?;
    let (bucket, key) = rest.split_once('/').ok_or("expected s3://BUCKET/KEY")?;
    // The runtime's own HTTP rules (bodies read to the length asked, no
    // redirect to another host), so both sides meet the same server alike.
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_client_options(
            ClientOptions::new()
                .with_timeout(cfg.request_timeout)
                .with_pool_max_idle_per_host(cfg.concurrency),
        )
        .with_http_connector(gpustream::remote::http::PackHttp::new(cfg));
    if let Some(e) = &cfg.endpoint {
        b = b.with_endpoint(e).with_allow_http(true);
    }
    let store: Arc<dyn ObjectStore> = Arc::new(b.build()?);
    let location = object_store::path::Path::parse(key)?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let t0 = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(cfg.concurrency));
    let result: Result<(), BoxError> = tokio.block_on(async {
        let mut tasks = Vec::new();
        for r in 0..runs.len() {
            let (store, location, sem) = (store.clone(), location.clone(), sem.clone());
            let (pack, runs, dests) = (pack.clone(), runs.clone(), dests.clone());
            tasks.push(tokio::spawn(async move {
                let run = &runs[r];
                let start = run[0].offset;
                let end = run[run.len() - 1].offset + run[run.len() - 1].stored;
                let bytes = {
                    let _permit = sem.acquire().await?;
                    let got = store
                        .get_opts(&location, GetOptions::new().with_range(Some(start..end)))
                        .await?;
                    // Exactly the range, or an error: the blocks below
                    // are sliced out of it.
                    gpustream::remote::http::read_body(got, end - start).await?
                };
                tokio::task::spawn_blocking(move || -> Result<(), BoxError> {
                    for p in &runs[r] {
                        let s = (p.offset - start) as usize;
                        let stored = &bytes[s..s + p.stored as usize];
                        let mut d = dests[p.blob].lock().unwrap_or_else(|e| e.into_inner());
                        pack.check_block(p.id, stored, &mut d[p.at..p.at + p.size])?;
                    }
                    Ok(())
                })
                .await?
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok(())
    });
    result?;
    Ok(t0.elapsed().as_secs_f64())
}

/// Runs the four passes `passes` times, alternated.
pub fn bench(url: &str, cfg: RemoteConfig, passes: u32) -> Result<RemoteReport, BoxError> {
    let work = cfg.cache_dir.clone();
    let cold_dir = |i: u32| work.join(format!("cold-{i}"));
    // Every pass holds the whole pack: the warm replica must be complete
    // (it also gives the local copy), and a cold pass must not evict.
    let cfg = cfg.with_cache_bytes(u64::MAX);
    // The warm replica, which also gives the local copy.
    let warm = RemotePack::open(url, &cfg.clone().with_cache_dir(work.join("warm")))?;
    let pack = warm.pack().clone();
    let (ids, textures) = blobs(&pack);
    if ids.is_empty() {
        return Err(format!("{url} holds no blobs to stream").into());
    }
    let bytes: u64 = ids.iter().map(|&i| pack.asset(i).size).sum();
    let stored: u64 = ids
        .iter()
        .flat_map(|&i| pack.asset(i).blocks.clone())
        .map(|b| pack.blocks()[b as usize].stored_size as u64)
        .sum();
    let rt = Runtime::without_gpu(crate::cli::env::runtime_config()?)?;
    let mems: Vec<HostMemory> = ids
        .iter()
        .map(|&i| HostMemory::new(pack.asset(i).size as usize))
        .collect();
    let warm_pf = rt.open_remote_pack(&warm)?;
    // Fill the warm replica, then copy it as the local pack.
    runtime_pass(&rt, &warm_pf, &ids, &mems)?;
    warm.save_index();
    let local: PathBuf = work.join("local.gspk");
    std::fs::copy(warm.replica(), &local)?;
    let local_pf = rt.open_pack(&local)?;
    let runs = Arc::new(get_runs(&pack, &ids, cfg.max_get as u64));
    let dests: Arc<Vec<Mutex<Vec<u8>>>> = Arc::new(
        ids.iter()
            .map(|&i| Mutex::new(vec![0u8; pack.asset(i).size as usize]))
            .collect(),
    );
    // An untimed round first checks that every path delivers what the
    // loop does, each into fresh memory.
    get_loop(url, &cfg, &pack, &runs, &dests)?;
    let check = |what: &str, pf: &Arc<PackFile>| -> Result<(), BoxError> {
        let fresh: Vec<HostMemory> = ids
            .iter()
            .map(|&i| HostMemory::new(pack.asset(i).size as usize))
            .collect();
        runtime_pass(&rt, pf, &ids, &fresh)?;
        for (k, &id) in ids.iter().enumerate() {
            if fresh[k].to_vec()? != *dests[k].lock().unwrap_or_else(|e| e.into_inner()) {
                let name = &pack.asset(id).name;
                return Err(format!("{what}: blob {name} differs from the GET loop's").into());
            }
        }
        Ok(())
    };
    {
        let dir = work.join("cold-check");
        let _ = std::fs::remove_dir_all(&dir);
        let cold = RemotePack::open(url, &cfg.clone().with_cache_dir(dir.clone()))?;
        check("the cold pass", &rt.open_remote_pack(&cold)?)?;
        drop(cold);
        let _ = std::fs::remove_dir_all(&dir);
    }
    check("the warm pass", &warm_pf)?;
    check("the local pass", &local_pf)?;
    let progress = indicatif::ProgressBar::new(passes as u64 * 4);
    // Seconds and CPU seconds of each pass, by kind: GET loop, cold, warm,
    // local.
    let mut secs: [Vec<f64>; 4] = Default::default();
    let mut cpu: [Vec<f64>; 4] = Default::default();
    let mut timed = |k: usize, pass: &mut dyn FnMut() -> Result<f64, BoxError>| {
        let t = cpu_seconds();
        secs[k].push(pass()?);
        cpu[k].push(cpu_seconds() - t);
        progress.inc(1);
        Ok::<(), BoxError>(())
    };
    let mut cold_gets = Vec::new();
    for i in 0..passes {
        timed(0, &mut || get_loop(url, &cfg, &pack, &runs, &dests))?;
        let dir = cold_dir(i);
        let _ = std::fs::remove_dir_all(&dir);
        let cold = RemotePack::open(url, &cfg.clone().with_cache_dir(dir.clone()))?;
        let pf = rt.open_remote_pack(&cold)?;
        timed(1, &mut || runtime_pass(&rt, &pf, &ids, &mems))?;
        cold_gets.push(cold.stats().gets as f64);
        drop(pf);
        drop(cold);
        let _ = std::fs::remove_dir_all(&dir);
        timed(2, &mut || runtime_pass(&rt, &warm_pf, &ids, &mems))?;
        timed(3, &mut || runtime_pass(&rt, &local_pf, &ids, &mems))?;
    }
    progress.finish_and_clear();
    let gb = bytes as f64 / 1e9;
    let [gg, cg, wg, lg] = secs.map(|mut v| gb / median(&mut v).max(1e-9));
    let [gcpu, ccpu, wcpu, lcpu] = cpu.map(|mut v| median(&mut v) / gb);
    Ok(RemoteReport {
        date: super::utc_now(),
        url: url.to_string(),
        blobs: ids.len(),
        textures_left_out: textures,
        bytes,
        stored_bytes: stored,
        concurrency: cfg.concurrency,
        max_get_kib: cfg.max_get >> 10,
        passes,
        get_loop_gbps: gg,
        cold_gbps: cg,
        warm_gbps: wg,
        local_gbps: lg,
        cold_over_get_loop: cg / gg.max(1e-12),
        warm_over_local: wg / lg.max(1e-12),
        cold_gets: median(&mut cold_gets) as u64,
        get_loop_cpu_s_per_gb: gcpu,
        cold_cpu_s_per_gb: ccpu,
        warm_cpu_s_per_gb: wcpu,
        local_cpu_s_per_gb: lcpu,
    })
}

/// Prints the table.
pub fn print(r: &RemoteReport) {
    println!("gpustream bench --pack {}  {}", r.url, r.date);
    println!(
        "{} blobs, {:.1} MiB ({:.1} MiB stored){}, into host memory; {} GETs in flight of up to {} KiB; median of {} passes, alternated",
        r.blobs,
        r.bytes as f64 / 1048576.0,
        r.stored_bytes as f64 / 1048576.0,
        if r.textures_left_out > 0 { format!(", {} textures left out", r.textures_left_out) } else { String::new() },
        r.concurrency,
        r.max_get_kib,
        r.passes
    );
    let mut t = Table::new(["pass", "GB/s", "ratio", "CPU s/GB (this process)"]);
    let rows = [
        (
            "ranged-GET loop (same GETs, crc32c, decode)".to_string(),
            r.get_loop_gbps,
            String::new(),
            r.get_loop_cpu_s_per_gb,
        ),
        (
            format!("runtime, cold cache ({} GETs)", r.cold_gets),
            r.cold_gbps,
            format!("{:.2}x the GET loop", r.cold_over_get_loop),
            r.cold_cpu_s_per_gb,
        ),
        (
            "local pack (same bytes, a plain file)".to_string(),
            r.local_gbps,
            String::new(),
            r.local_cpu_s_per_gb,
        ),
        (
            "runtime, warm cache".to_string(),
            r.warm_gbps,
            format!("{:.2}x the local pack", r.warm_over_local),
            r.warm_cpu_s_per_gb,
        ),
    ];
    for (what, gbps, ratio, cpu) in rows {
        t.row([what, format!("{gbps:.3}"), ratio, format!("{cpu:.2}")]);
    }
    print!("{t}");
}

/// The cache directory `bench` works in when none is given.
pub fn default_work_dir() -> PathBuf {
    Path::new("target").join("gpustream-remote-bench")
}
