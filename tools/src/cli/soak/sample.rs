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
    Resources {
        rss,
        threads: count("/proc/self/task"),
        fds: count("/proc/self/fd"),
    }
}
