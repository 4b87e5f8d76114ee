//! Which physical block device a file lives on.
//!
//! The interleaved-reads game I/O post-mortem: two partitions of one disk read by two threads interleaved
//! their large reads in small pieces and cut the disk to 2 MiB/s. The engine
//! therefore keys its schedulers by the *disk*, not by `st_dev`: a
//! partition's device number is resolved through sysfs to its parent disk.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The physical device a file's reads go to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceId {
    /// The disk's `major:minor` packed as `dev_t` (for files not on a block
    /// device, such as tmpfs, the filesystem's own `st_dev`).
    pub dev: u64,
    /// The kernel's name for it (`nvme0n1`, `vda`), or `st_dev` in hex when
    /// sysfs has no block device for it.
    pub name: String,
    /// Whether sysfs says the disk rotates (`None` when unknown).
    pub rotational: Option<bool>,
}

fn cache() -> &'static Mutex<HashMap<u64, DeviceId>> {
    static CACHE: OnceLock<Mutex<HashMap<u64, DeviceId>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Resolves a file's `st_dev` to the physical disk holding it (cached).
pub fn resolve(st_dev: u64) -> DeviceId {
    if let Some(d) = cache().lock().expect("device cache").get(&st_dev) {
        return d.clone();
    }
    let id = resolve_uncached(st_dev);
    cache()
        .lock()
        .expect("device cache")
        .insert(st_dev, id.clone());
    id
}

fn resolve_uncached(st_dev: u64) -> DeviceId {
    let (maj, min) = (libc::major(st_dev), libc::minor(st_dev));
    let fallback = DeviceId {
        dev: st_dev,
        name: format!("dev-{st_dev:x}"),
        rotational: None,
    };
    let link = format!("/sys/dev/block/{maj}:{min}");
    let Ok(mut dir) = std::fs::canonicalize(&link) else {
        return fallback;
    };
    // A partition's sysfs directory sits inside its disk's directory and
    // has a `partition` attribute.
    if dir.join("partition").exists() {
        if let Some(parent) = dir.parent() {
            dir = parent.to_path_buf();
        }
    }
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| fallback.name.clone());
    let dev = std::fs::read_to_string(dir.join("dev"))
        .ok()
        .and_then(|s| {
            let (a, b) = s.trim().split_once(':')?;
            Some(libc::makedev(a.parse().ok()?, b.parse().ok()?))
        })
        .unwrap_or(st_dev);
    let rotational = std::fs::read_to_string(dir.join("queue/rotational"))
        .ok()
        .map(|s| s.trim() == "1");
    DeviceId {
        dev,
        name,
        rotational,
    }
}
