//! Several disks at once: one pack per device, streamed by one runtime, as
//! a game reads its base content from one NVMe and a texture pack from
//! another. `bench --devices` compares all devices at once with the sum of
//! each alone; `sweep --devices` tabulates 1..N devices by read size, as
//! Gray's sequential-I/O measurements of Windows NT tabulate striping.
//!
//! Beside them, `bench --devices` reads one pack striped over every device
//! (`pack --stripe`), as a workstation stripes its asset cache.
//!
//! The packs hold stored (uncompressed) blobs of incompressible bytes, so
//! a pass is reads and crc32c only: what the devices give, not what the
//! decoders do. Simulated disks with their own bandwidth limits come from
//! `scripts/loop-disks.sh`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use gpustream::pack::{AssetId, PackWriter, WriterOptions};
use gpustream::prelude::*;

use super::report::Table;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Bytes per blob: large enough that the runtime's reads reach its largest
/// read size, small enough that a pass holds many requests per device.
const BLOB: usize = 4 << 20;

/// The pack `bench --devices` and `sweep --devices` put on a device: `mib`
/// MiB of stored blobs, written on first use and reused after.
pub fn ensure_pack(dir: &Path, mib: u64) -> Result<PathBuf, BoxError> {
    if mib == 0 || !(mib << 20).is_multiple_of(BLOB as u64) {
        return Err(format!(
            "a device's pack is whole {} MiB blobs: {mib} MiB is not a positive multiple of {}",
            BLOB >> 20,
            BLOB >> 20
        )
        .into());
    }
    let path = dir.join(format!("gpustream-devices-{mib}MiB.gspk"));
    if gpustream::pack::Pack::open(&path)
        .is_ok_and(|p| p.assets().len() as u64 * BLOB as u64 == mib << 20)
    {
        return Ok(path);
    }
    let mut w = PackWriter::create(
        &path,
        WriterOptions::default().with_codec(gpustream::codec::Codec::None),
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    // A different xorshift stream per device and blob: nothing repeats, so
    // no layer below (a deduplicating file system, a compressing disk)
    // serves it faster than the bytes it stores.
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (dir.as_os_str().len() as u64) << 32;
    let mut blob = vec![0u8; BLOB];
    for i in 0..(mib << 20) / BLOB as u64 {
        for w8 in blob.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w8.copy_from_slice(&x.to_le_bytes());
        }
        w.add_blob(&format!("blob{i:05}"), &blob)?;
    }
    w.finish()?;
    Ok(path)
}

/// The striped pack `bench --devices` reads beside the separate packs:
/// as many bytes as all of them (`mib` MiB per directory), its head in the
/// first directory and one member in each other, in the default stripe
/// unit. Written on first use (whole in the temporary directory first,
/// so no device needs room for more than its share) and reused after.
pub fn ensure_striped(dirs: &[PathBuf], mib: u64) -> Result<PathBuf, BoxError> {
    use gpustream::pack::stripe;
    let n = dirs.len();
    let name = format!("gpustream-devices-striped-{n}x{mib}MiB.gspk");
    let head = dirs[0].join(&name);
    let members: Vec<PathBuf> = (1..n)
        .map(|k| dirs[k].join(format!("{name}.{k}")))
        .collect();
    let wanted = |p: &gpustream::pack::Pack| {
        p.assets().len() as u64 * BLOB as u64 == (mib << 20) * n as u64
            && p.members().len() == n
            && p.members()[1..]
                .iter()
                .zip(&members)
                .all(|(m, want)| same_file(&m.path, want))
    };
    if gpustream::pack::Pack::open(&head).is_ok_and(|p| wanted(&p)) {
        return Ok(head);
    }
    let tmp = std::env::temp_dir().join(format!("gpustream-stripe-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let striped = ensure_pack(&tmp, mib * n as u64).and_then(|whole| {
        stripe::stripe_pack(&whole, &head, &members, stripe::DEFAULT_UNIT)
            .map_err(|e| format!("{}: {e}", head.display()).into())
    });
    let _ = std::fs::remove_dir_all(&tmp);
    striped.map(|_| head)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Packs open in one runtime, each with its destinations.
pub struct Devices {
    runtime: Runtime,
    packs: Vec<(Arc<PackFile>, Vec<HostMemory>)>,
}

/// One pass: bytes read and seconds, from submit to the fence.
#[derive(Debug, Clone, Copy)]
pub struct Pass {
    pub bytes: u64,
    pub seconds: f64,
}

impl Pass {
    /// GB/s (10^9 bytes) of the pass.
    pub fn gbps(self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9) / 1e9
    }
}

impl Devices {
    /// A runtime without a GPU (the destinations are host memory) with
    /// `io`, and the packs at `paths` open in it.
    pub fn open(paths: &[PathBuf], io: gpustream::io::IoConfig) -> Result<Devices, BoxError> {
        let runtime = Runtime::without_gpu(RuntimeConfig::default().with_io(io))?;
        let mut packs = Vec::new();
        for p in paths {
            let pf = runtime
                .open_pack(p)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            let mem = pf
                .pack()
                .assets()
                .iter()
                .map(|a| HostMemory::new(a.size as usize))
                .collect();
            packs.push((pf, mem));
        }
        Ok(Devices { runtime, packs })
    }

    /// Streams every blob of the packs `which` names, all in one
    /// submission, and waits for the fence.
    pub fn pass(&self, which: &[usize]) -> Result<Pass, BoxError> {
        let queue = self.runtime.create_queue(QueueConfig::default());
        let mut bytes = 0u64;
        let t0 = Instant::now();
        // Round robin over the packs, so that the order of enqueueing
        // favours no device; the runtime's schedulers do the rest.
        let most = which
            .iter()
            .map(|&i| self.packs[i].1.len())
            .max()
            .unwrap_or(0);
        for k in 0..most {
            for &i in which {
                let (pf, mem) = &self.packs[i];
                if let Some(m) = mem.get(k) {
                    bytes += m.len() as u64;
                    queue.enqueue(Request::new(
                        Source::blob(pf, AssetId(k as u32)),
                        Destination::memory(m),
                    ))?;
                }
            }
        }
        let fence = Fence::new();
        queue.enqueue_signal(&fence, 1);
        queue.submit();
        fence.wait(1);
        let seconds = t0.elapsed().as_secs_f64();
        if let Some(f) = queue.error_record().first_failure {
            return Err(f.error.to_string().into());
        }
        Ok(Pass { bytes, seconds })
    }
}

/// The median of `v` (which it sorts).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One row per device alone, then the sum and all at once.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DevicesReport {
    pub date: String,
    pub packs: Vec<String>,
    pub pack_mib: u64,
    pub passes: u32,
    /// Median GB/s of each device alone, in `packs` order.
    pub alone_gbps: Vec<f64>,
    pub sum_alone_gbps: f64,
    /// Median GB/s with every device read at once.
    pub together_gbps: f64,
    /// `together_gbps / sum_alone_gbps`.
    pub together_over_sum: f64,
    /// The striped pack over every device (as many bytes as all the
    /// separate packs together).
    pub striped_pack: String,
    /// Median GB/s of the striped pack.
    pub striped_gbps: f64,
    /// `striped_gbps / sum_alone_gbps`.
    pub striped_over_sum: f64,
}

/// Measures `dirs` alone, their separate packs together, and one pack
/// striped over all of them, `passes` times each, alternated so that all
/// meet the same machine.
pub fn bench(dirs: &[PathBuf], mib: u64, passes: u32) -> Result<DevicesReport, BoxError> {
    let paths = dirs
        .iter()
        .map(|d| ensure_pack(d, mib))
        .collect::<Result<Vec<_>, _>>()?;
    let n = paths.len();
    if n < 2 {
        return Err("bench --devices needs two directories or more, one per device".into());
    }
    let striped = ensure_striped(dirs, mib)?;
    let mut open = paths.clone();
    open.push(striped.clone());
    let devices = Devices::open(&open, crate::cli::env::io_config()?)?;
    let all: Vec<usize> = (0..n).collect();
    let bar = indicatif::ProgressBar::new(u64::from(passes) * (n as u64 + 2));
    let mut alone = vec![Vec::new(); n];
    let mut together = Vec::new();
    let mut stripes = Vec::new();
    for _ in 0..passes {
        for (i, a) in alone.iter_mut().enumerate() {
            a.push(devices.pass(&[i])?.gbps());
            bar.inc(1);
        }
        together.push(devices.pass(&all)?.gbps());
        bar.inc(1);
        stripes.push(devices.pass(&[n])?.gbps());
        bar.inc(1);
    }
    bar.finish_and_clear();
    let alone_gbps: Vec<f64> = alone.iter_mut().map(|v| median(v)).collect();
    let sum_alone_gbps = alone_gbps.iter().sum();
    let together_gbps = median(&mut together);
    let striped_gbps = median(&mut stripes);
    Ok(DevicesReport {
        date: super::utc_now(),
        packs: paths.iter().map(|p| p.display().to_string()).collect(),
        pack_mib: mib,
        passes,
        alone_gbps,
        sum_alone_gbps,
        together_gbps,
        together_over_sum: together_gbps / f64::max(sum_alone_gbps, 1e-12),
        striped_pack: striped.display().to_string(),
        striped_gbps,
        striped_over_sum: striped_gbps / f64::max(sum_alone_gbps, 1e-12),
    })
}

/// The printed form of [`bench`]'s report.
pub fn print_bench(r: &DevicesReport) {
    println!("gpustream bench --devices  {}", r.date);
    println!(
        "one {} MiB pack of stored blobs per device, and {} striped over them all, O_DIRECT, read into host memory; median of {} passes, alone, together and striped alternated",
        r.pack_mib, r.striped_pack, r.passes
    );
    let mut t = Table::new(["devices", "GB/s", "of the sum alone"]);
    for (p, g) in r.packs.iter().zip(&r.alone_gbps) {
        t.row([format!("{p} alone"), format!("{g:.3}"), String::new()]);
    }
    t.row([
        "sum of each alone".to_string(),
        format!("{:.3}", r.sum_alone_gbps),
        String::new(),
    ]);
    t.row([
        format!("all {} at once", r.packs.len()),
        format!("{:.3}", r.together_gbps),
        format!("{:.2}x", r.together_over_sum),
    ]);
    t.row([
        format!("one pack striped over all {}", r.packs.len()),
        format!("{:.3}", r.striped_gbps),
        format!("{:.2}x", r.striped_over_sum),
    ]);
    print!("{t}");
}

/// One cell of the striping table: `devices` read at once with reads of
/// up to `read_kib`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StripeCell {
    pub devices: usize,
    pub read_kib: usize,
    /// Median GB/s of all of them together.
    pub gbps: f64,
    /// `gbps` over `devices` times one device's at the same read size.
    pub scaling: f64,
}

/// The striping table: 1..=N devices by read size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StripeReport {
    pub date: String,
    pub packs: Vec<String>,
    pub pack_mib: u64,
    pub passes: u32,
    pub cells: Vec<StripeCell>,
}

/// Reads the first 1, 2, ..., N of `dirs`' packs at once, at each of
/// `read_sizes` (the runtime's largest read, `IoConfig::max_read`), the
/// median of `passes` passes each.
pub fn sweep(
    dirs: &[PathBuf],
    mib: u64,
    read_sizes: &[usize],
    passes: u32,
) -> Result<StripeReport, BoxError> {
    let paths = dirs
        .iter()
        .map(|d| ensure_pack(d, mib))
        .collect::<Result<Vec<_>, _>>()?;
    let bar =
        indicatif::ProgressBar::new((read_sizes.len() * paths.len()) as u64 * u64::from(passes));
    let mut cells = Vec::new();
    for &size in read_sizes {
        let devices = Devices::open(&paths, (crate::cli::env::io_config()?).with_max_read(size))?;
        let mut one = 0.0;
        for k in 1..=paths.len() {
            let which: Vec<usize> = (0..k).collect();
            let mut v = Vec::new();
            for _ in 0..passes {
                v.push(devices.pass(&which)?.gbps());
                bar.inc(1);
            }
            let gbps = median(&mut v);
            if k == 1 {
                one = gbps;
            }
            cells.push(StripeCell {
                devices: k,
                read_kib: size >> 10,
                gbps,
                scaling: gbps / (k as f64 * one).max(1e-12),
            });
        }
    }
    bar.finish_and_clear();
    Ok(StripeReport {
        date: super::utc_now(),
        packs: paths.iter().map(|p| p.display().to_string()).collect(),
        pack_mib: mib,
        passes,
        cells,
    })
}

/// The printed form of [`sweep`]'s report: a row per device count, a
/// column per read size, each cell GB/s and its scaling over one device.
pub fn print_sweep(r: &StripeReport) {
    println!("gpustream sweep --devices  {}", r.date);
    println!(
        "one {} MiB pack of stored blobs per device ({}), O_DIRECT; median of {} passes; in brackets: GB/s over N x one device's",
        r.pack_mib,
        r.packs.join(", "),
        r.passes
    );
    let mut sizes: Vec<usize> = r.cells.iter().map(|c| c.read_kib).collect();
    sizes.dedup();
    let mut t = Table::new(
        std::iter::once("devices".to_string())
            .chain(sizes.iter().map(|s| format!("{s} KiB reads"))),
    );
    for k in 1..=r.packs.len() {
        let row = sizes.iter().map(|&s| {
            r.cells
                .iter()
                .find(|c| c.devices == k && c.read_kib == s)
                .map_or(String::new(), |c| {
                    format!("{:.3} ({:.2}x)", c.gbps, c.scaling)
                })
        });
        t.row(std::iter::once(k.to_string()).chain(row));
    }
    print!("{t}");
}
