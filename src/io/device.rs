//! Which physical block device a file lives on.
//!
//! The interleaved-reads game I/O post-mortem: two partitions of one disk read by two threads interleaved
//! their large reads in small pieces and cut the disk to 2 MiB/s. The engine
//! therefore keys its schedulers by the *disk*, not by `st_dev`: a
//! partition's device number is resolved through sysfs to its parent disk.
//!
//! sysfs is Linux's. Other unix systems key by the filesystem's `st_dev`
//! (one worker per mounted volume, whatever disk is under it), Windows by
//! the volume a path lies on (its drive letter or share).

#[cfg(unix)]
use std::collections::HashMap;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;

/// The physical device a file's reads go to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceId {
    /// The disk's `major:minor` packed as `dev_t` (for files not on a block
    /// device, such as tmpfs, the filesystem's own `st_dev`; outside Linux
    /// always the filesystem's `st_dev`; on Windows a hash of the volume's
    /// name).
    pub dev: u64,
    /// The kernel's name for it (`nvme0n1`, `vda`), or `st_dev` in hex when
    /// sysfs has no block device for it (and outside Linux); on Windows
    /// the volume (`C:`, `\\server\share`).
    pub name: String,
    /// Whether sysfs says the disk rotates (`None` when unknown).
    pub rotational: Option<bool>,
}

/// What one engine has learned about the devices its files are on: the
/// disk behind each filesystem (a sysfs walk, done once per `st_dev`) and
/// the page-cache notices it has already given (one per device and
/// reason, not one per file). Each engine has its own, shared with the
/// files it opens; nothing is kept process-wide.
#[derive(Default)]
pub(crate) struct Devices {
    #[cfg(unix)]
    resolved: Mutex<HashMap<u64, DeviceId>>,
    noticed: Mutex<HashSet<(u64, String)>>,
}

impl Devices {
    /// Resolves a file's `st_dev` to the physical disk holding it, looked
    /// up once. Outside Linux, where no sysfs says which disk holds a
    /// filesystem, the filesystem itself.
    #[cfg(unix)]
    pub(crate) fn resolve(&self, st_dev: u64) -> DeviceId {
        let mut resolved = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        resolved
            .entry(st_dev)
            .or_insert_with(|| resolve_uncached(st_dev))
            .clone()
    }

    /// Logs that `path` is read through the page cache, and why: once per
    /// device and reason, so a directory of a thousand files on tmpfs
    /// gives one warning, not a thousand.
    pub(crate) fn notice(&self, dev: u64, path: &Path, reason: &str) {
        let mut noticed = self.noticed.lock().unwrap_or_else(|e| e.into_inner());
        if noticed.insert((dev, reason.to_string())) {
            log::warn!(
                "{} is read through the page cache: {reason}",
                path.display()
            );
        }
    }
}

#[cfg(target_os = "linux")]
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

/// The filesystem as the device: no sysfs here to find the disk under it.
#[cfg(all(unix, not(target_os = "linux")))]
fn resolve_uncached(st_dev: u64) -> DeviceId {
    DeviceId {
        dev: st_dev,
        name: format!("dev-{st_dev:x}"),
        rotational: None,
    }
}

/// The volume `path` lies on, as the device its reads go to: the path's
/// prefix (drive letter, or server and share) once made absolute. Windows
/// has no `st_dev` in stable std; files on one volume share a worker, files
/// on two volumes proceed in parallel. A path whose volume cannot be told
/// (it cannot be made absolute) goes to one shared worker.
#[cfg(windows)]
pub fn resolve_volume(path: &std::path::Path) -> DeviceId {
    use std::hash::{Hash, Hasher};
    use std::path::{Component, Prefix};
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let name = match abs.components().next() {
        Some(Component::Prefix(p)) => match p.kind() {
            Prefix::Disk(d) | Prefix::VerbatimDisk(d) => {
                format!("{}:", char::from(d).to_ascii_uppercase())
            }
            Prefix::UNC(server, share) | Prefix::VerbatimUNC(server, share) => format!(
                "\\\\{}\\{}",
                server.to_string_lossy(),
                share.to_string_lossy()
            )
            .to_lowercase(),
            _ => p.as_os_str().to_string_lossy().to_lowercase(),
        },
        _ => String::from("unknown volume"),
    };
    // A stable hash (not RandomState): the same volume gets the same key
    // in every engine of the process.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    DeviceId {
        dev: h.finish(),
        name,
        rotational: None,
    }
}
