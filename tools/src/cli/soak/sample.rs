//! The process's resources, read from /proc: resident memory, threads and
//! open file descriptors. The soak samples them once a second and at every
//! runtime rebuild, to show that nothing grows without bound.

/// One sample.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Resources {
    /// Resident set size, bytes.
    pub rss: u64,
    /// Threads of the process.
    pub threads: u64,
    /// Threads of the process but the soak's own harness (its S3 server's
    /// and its own `soak-*` threads): the runtimes', their remote readers'
    /// and the device's. These must not grow across rebuilds.
    pub runtime_threads: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// The process's resources now (zeros where /proc cannot say).
pub fn now() -> Resources {
    let page = 4096u64;
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |p| p * page);
    let count = |dir: &str| std::fs::read_dir(dir).map_or(0, |d| d.count() as u64);
    let names = thread_names();
    let harness: u64 = names
        .iter()
        .filter(|(n, _)| n.starts_with("s3-server") || n.starts_with("soak-"))
        .map(|(_, c)| c)
        .sum();
    let threads = names.values().sum::<u64>();
    Resources {
        rss,
        threads,
        runtime_threads: threads - harness,
        fds: count("/proc/self/fd"),
    }
}

/// The process's threads by name (`/proc/self/task/*/comm`), counted.
pub fn thread_names() -> std::collections::BTreeMap<String, u64> {
    let mut names = std::collections::BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            let name = std::fs::read_to_string(t.path().join("comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            *names.entry(name).or_default() += 1;
        }
    }
    names
}
