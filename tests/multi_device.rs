//! Two simulated disks (`scripts/loop-disks.sh`: loop devices with direct
//! I/O, ext4, each limited to 32 MiB/s of reads by the blkio cgroup), one
//! pack on each, streamed by one runtime in one submission: while both
//! devices have work queued, neither may sit idle. A runtime that drained
//! one device's reads before starting the other's (a scheduler that is not
//! per device) would leave the second idle for the whole first half. Then
//! the same for one pack striped over both disks, whose requests come in
//! table order: a runtime that planned reads per pack rather than per
//! member file would read one disk at a time.
//!
//! Needs root, loop devices and the blkio cgroup (v1). Without them the
//! test says why and passes, unless `GPUSTREAM_REQUIRE_LOOP=1` (CI sets
//! it), which makes it fail instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpustream::pack::{AssetId, PackWriter, WriterOptions};
use gpustream::prelude::*;

const BPS: u64 = 32 << 20;
const PACK_MIB: usize = 40;
const BLOB: usize = 2 << 20;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/loop-disks.sh")
}

/// Why loop disks cannot be made here, if they cannot.
fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/sys/fs/cgroup/blkio").is_dir() {
        return Some("no blkio cgroup (v1) at /sys/fs/cgroup/blkio".into());
    }
    for tool in ["losetup", "mkfs.ext4", "lsblk"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("{tool} not installed"));
        }
    }
    None
}

/// The disks of this test, brought down (and this process moved back out
/// of their cgroup) however the test ends.
struct Disks {
    state: PathBuf,
    cgroup: String,
    /// (block device name, mount point) per disk.
    disks: Vec<(String, PathBuf)>,
}

impl Disks {
    fn up(n: usize) -> Result<Disks, String> {
        let state =
            std::env::temp_dir().join(format!("gpustream-multi-device-{}", std::process::id()));
        let cgroup = format!("gpustream-test-{}", std::process::id());
        let mut d = Disks {
            state,
            cgroup,
            disks: Vec::new(),
        };
        let out = d
            .script()
            .args(["up", &n.to_string(), &BPS.to_string()])
            .output()
            .map_err(|e| format!("loop-disks.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "loop-disks.sh up failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let list = std::fs::read_to_string(d.state.join("devices")).map_err(|e| e.to_string())?;
        for line in list.lines() {
            let (dev, mnt) = line.split_once(' ').ok_or("bad devices line")?;
            let name = dev.trim_start_matches("/dev/").to_string();
            d.disks.push((name, PathBuf::from(mnt)));
        }
        Ok(d)
    }

    fn script(&self) -> Command {
        let mut c = Command::new("bash");
        c.arg(script())
            .env("GPUSTREAM_DISKS_DIR", &self.state)
            .env("GPUSTREAM_DISKS_CGROUP", &self.cgroup)
            .env("GPUSTREAM_DISK_SIZE", "128M");
        c
    }

    /// Puts this process (every thread, io_uring's workers included) under
    /// the disks' read limits.
    fn enter(&self) {
        let procs = format!("/sys/fs/cgroup/blkio/{}/cgroup.procs", self.cgroup);
        std::fs::write(&procs, std::process::id().to_string()).expect("join the throttled cgroup");
    }

    /// Sectors read so far from each disk (`/sys/block/NAME/stat`, field 3).
    fn sectors_read(&self) -> Vec<u64> {
        self.disks
            .iter()
            .map(|(name, _)| {
                let s =
                    std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap_or_default();
                s.split_whitespace()
                    .nth(2)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            })
            .collect()
    }
}

impl Drop for Disks {
    fn drop(&mut self) {
        let _ = std::fs::write(
            "/sys/fs/cgroup/blkio/cgroup.procs",
            std::process::id().to_string(),
        );
        let _ = self.script().arg("down").output();
    }
}

fn write_pack(dir: &Path, seed: u64, mib: usize) -> PathBuf {
    let path = dir.join("blobs.gspk");
    let mut w = PackWriter::create(
        &path,
        WriterOptions::default().with_codec(gpustream::codec::Codec::None),
    )
    .unwrap();
    let mut x = seed | 1;
    let mut blob = vec![0u8; BLOB];
    for i in 0..mib * (1 << 20) / BLOB {
        for w8 in blob.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w8.copy_from_slice(&x.to_le_bytes());
        }
        w.add_blob(&format!("b{i}"), &blob).unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn no_device_idles_while_another_has_work_queued() {
    if let Some(why) = unavailable() {
        if std::env::var("GPUSTREAM_REQUIRE_LOOP").is_ok_and(|v| v == "1") {
            panic!("GPUSTREAM_REQUIRE_LOOP=1 but loop disks cannot be made here: {why}");
        }
        eprintln!("note: skipping the two-disk test: {why}");
        return;
    }
    let disks = Disks::up(2).expect("two loop disks");
    let packs: Vec<PathBuf> = disks
        .disks
        .iter()
        .enumerate()
        .map(|(i, (_, mnt))| write_pack(mnt, 0x1234_5678 + i as u64, PACK_MIB))
        .collect();
    // One more pack, striped over both disks: as many bytes on each disk
    // as its own pack, so both runs are judged over as many windows.
    let whole_dir = tempfile::tempdir().unwrap();
    let whole = write_pack(whole_dir.path(), 0x9abc_def0, 2 * PACK_MIB);
    let striped = disks.disks[0].1.join("striped.gspk");
    let member = disks.disks[1].1.join("striped.gspk.1");
    gpustream::pack::stripe::stripe_pack(
        &whole,
        &striped,
        std::slice::from_ref(&member),
        gpustream::pack::stripe::DEFAULT_UNIT,
    )
    .unwrap();
    // The pages just written must not serve the reads: O_DIRECT bypasses
    // the page cache, and the loop devices read their files with direct
    // I/O too, so every byte comes through the throttled devices.
    disks.enter();

    let runtime = Runtime::without_gpu(RuntimeConfig::default()).unwrap();
    let opened: Vec<_> = packs
        .iter()
        .map(|p| runtime.open_pack(p).unwrap())
        .collect();
    for pf in &opened {
        assert!(pf.is_direct(), "the pack should be read with O_DIRECT");
    }
    // Every request of the first pack, then every request of the second:
    // the order that would starve the second disk if the runtime read in
    // enqueue order rather than per device.
    let requests: Vec<_> = opened.iter().flat_map(blobs).collect();
    let need = (PACK_MIB << 20) as u64;
    let windows = stream_and_check_both_busy(&disks, &runtime, &requests, need);
    eprintln!("separate packs: both disks read in each of {windows} windows of 250 ms");

    // The striped pack, in table order: its stripe units alternate
    // between the disks, and both must stay busy again.
    let pf = runtime.open_pack(&striped).unwrap();
    assert!(pf.is_direct() && pf.pack().is_striped());
    let requests = blobs(&pf);
    // Each disk holds half of it, give or take a stripe unit.
    let windows = stream_and_check_both_busy(&disks, &runtime, &requests, need * 9 / 10);
    eprintln!("striped pack: both disks read in each of {windows} windows of 250 ms");
    // Files on the disks close before the disks go.
    drop((requests, pf, opened, runtime));
}

/// Every blob of `pf`, each with its own destination.
fn blobs(pf: &Arc<PackFile>) -> Vec<(Arc<PackFile>, AssetId, HostMemory)> {
    pf.pack()
        .assets()
        .iter()
        .enumerate()
        .map(|(k, a)| {
            (
                pf.clone(),
                AssetId(k as u32),
                HostMemory::new(a.size as usize),
            )
        })
        .collect()
}

/// Streams `requests` in one submission while sampling each disk's
/// sectors read every 50 ms; checks that each disk served at least `need`
/// bytes and that, from the first sector either read until the first
/// finished its `need`, every 250 ms window saw both disks read. Returns
/// how many windows were judged.
fn stream_and_check_both_busy(
    disks: &Disks,
    runtime: &Runtime,
    requests: &[(Arc<PackFile>, AssetId, HostMemory)],
    need: u64,
) -> usize {
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        let names: Vec<String> = disks.disks.iter().map(|(n, _)| n.clone()).collect();
        std::thread::spawn(move || {
            let read = |n: &String| -> u64 {
                let s = std::fs::read_to_string(format!("/sys/block/{n}/stat")).unwrap_or_default();
                s.split_whitespace()
                    .nth(2)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            let t0 = Instant::now();
            let mut samples = Vec::new();
            while !done.load(Ordering::Relaxed) {
                samples.push((t0.elapsed(), names.iter().map(read).collect::<Vec<u64>>()));
                std::thread::sleep(Duration::from_millis(50));
            }
            samples.push((t0.elapsed(), names.iter().map(read).collect()));
            samples
        })
    };
    let before = disks.sectors_read();
    let queue = runtime.create_queue(QueueConfig::default());
    for (pf, asset, m) in requests {
        queue
            .enqueue(Request::new(
                Source::blob(pf, *asset),
                Destination::memory(m),
            ))
            .unwrap();
    }
    let fence = Fence::new();
    queue.enqueue_signal(&fence, 1);
    queue.submit();
    fence.wait(1);
    done.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap();
    assert!(
        queue.error_record().first_failure.is_none(),
        "{:?}",
        queue.error_record()
    );

    // Each disk served its share (sectors of 512 bytes).
    let after = disks.sectors_read();
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        let read = (a - b) * 512;
        assert!(read >= need, "disk {i} read {read} bytes of its {need}");
    }
    // At 32 MiB/s a busy disk reads about 8 MiB a window, and the throttle
    // releases reads every 100 ms or less.
    let progress = |s: &Vec<u64>, i: usize| s[i] - before[i];
    let need = need / 512;
    let start = samples
        .iter()
        .find(|(_, s)| (0..2).any(|i| progress(s, i) > 0))
        .map(|(t, _)| *t)
        .expect("the disks read nothing");
    let first_done = samples
        .iter()
        .find(|(_, s)| (0..2).any(|i| progress(s, i) >= need))
        .map(|(t, _)| *t)
        .expect("neither disk finished");
    let window = Duration::from_millis(250);
    let mut t = start;
    let mut windows = 0;
    while t + window <= first_done {
        let at = |when: Duration| {
            samples
                .iter()
                .rev()
                .find(|(ts, _)| *ts <= when)
                .map(|(_, s)| s.clone())
                .unwrap()
        };
        let (a, b) = (at(t), at(t + window));
        for i in 0..2 {
            assert!(
                b[i] > a[i],
                "disk {i} read nothing from {t:?} to {:?} while the other still had work \
                 queued (samples: {samples:?})",
                t + window
            );
        }
        windows += 1;
        t += window;
    }
    assert!(
        windows >= 2,
        "too few whole windows ({windows}) between {start:?} and {first_done:?} to judge"
    );
    windows
}
