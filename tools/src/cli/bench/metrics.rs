//! What bench derives from the runtime's counters: process CPU time, the
//! submission thread's busy time, blocks per dispatch, GPU commands per MiB,
//! texture copies per mip, host copies per byte; and the host-side
//! targets they are read against (CPU seconds per GB, the submission
//! thread's own work, blocks per dispatch, copies per mip and per byte).

use std::time::Duration;

use serde::Serialize;

use gpustream::runtime::QueueStats;

/// User plus system CPU seconds of the whole process so far.
pub(crate) fn cpu_seconds() -> f64 {
    // SAFETY: `u` is a plain C struct that getrusage fills in; all-zero is
    // a valid value for it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is valid and writable for the call; RUSAGE_SELF cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// The runtime's submission thread as Linux names it (the first 15 bytes
/// of "gpustream-dispatch"). Keep in step with `Runtime::build`.
const SUBMIT_THREAD: &str = "gpustream-dispa";

/// CPU time the runtime's submission thread has run so far, from
/// `/proc/self/task/*/schedstat` (nanoseconds on a CPU). Unlike
/// `Runtime::submit_thread_busy`, which is wall time while busy, it leaves
/// out time the thread was runnable but preempted, which dominates on a
/// loaded 2-core machine. `None` where the thread or procfs is not found.
pub(super) fn submit_thread_cpu() -> Option<Duration> {
    let mut ns = None;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != SUBMIT_THREAD {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
        if let Some(run) = stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        {
            *ns.get_or_insert(0) += run;
        }
    }
    ns.map(Duration::from_nanos)
}

/// One thread's name (numbers dropped: its group) and its schedstat run
/// and run-queue wait times, nanoseconds.
type ThreadTimes = std::collections::HashMap<String, (String, u64, u64)>;

/// Every thread of the process, by task id: its group and its schedstat
/// times. Empty where procfs is not found.
pub(super) fn thread_times() -> ThreadTimes {
    let mut out = ThreadTimes::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        // "gpustream-pread-3" and "gpustream-decod" (Linux keeps 15 bytes)
        // group by name without the number.
        let group = comm
            .trim_end()
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
            .to_string();
        let stat = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
        let mut f = stat
            .split_whitespace()
            .map(|v| v.parse::<u64>().unwrap_or(0));
        let (run, wait) = (f.next().unwrap_or(0), f.next().unwrap_or(0));
        out.insert(
            task.file_name().to_string_lossy().into_owned(),
            (group, run, wait),
        );
    }
    out
}

/// The runtime's threads of one kind over the timed passes.
#[derive(Serialize, Debug, Clone)]
pub struct ThreadGroup {
    /// The threads' name without its number (Linux keeps 15 bytes).
    pub name: String,
    /// How many were alive at the end of the passes.
    pub threads: usize,
    /// CPU seconds they ran, per GB delivered.
    pub cpu_s_per_gb: f64,
    /// Seconds they waited runnable for a CPU (run-queue wait), per GB
    /// delivered: the cost of more threads than cores.
    pub wait_s_per_gb: f64,
}

/// The runtime's thread groups (names starting `gpustream-`) from
/// `before` to `after`, per GB of `bytes` delivered. A thread started in
/// between counts from zero; one that ended is left out.
pub(super) fn thread_groups(
    before: &ThreadTimes,
    after: &ThreadTimes,
    bytes: f64,
) -> Vec<ThreadGroup> {
    let gb = (bytes / 1e9).max(1e-12);
    let mut groups: std::collections::BTreeMap<String, (usize, u64, u64)> = Default::default();
    for (tid, (group, run, wait)) in after {
        if !group.starts_with("gpustream-") {
            continue;
        }
        let (r0, w0) = before.get(tid).map_or((0, 0), |b| (b.1, b.2));
        let g = groups.entry(group.clone()).or_default();
        g.0 += 1;
        g.1 += run.saturating_sub(r0);
        g.2 += wait.saturating_sub(w0);
    }
    groups
        .into_iter()
        .map(|(name, (threads, run, wait))| ThreadGroup {
            name,
            threads,
            cpu_s_per_gb: run as f64 / 1e9 / gb,
            wait_s_per_gb: wait as f64 / 1e9 / gb,
        })
        .collect()
}

/// The median of `times` in seconds (at least a nanosecond, so rates stay
/// finite).
pub(super) fn median(times: &mut [Duration]) -> f64 {
    times.sort();
    times
        .get(times.len() / 2)
        .copied()
        .unwrap_or_default()
        .max(Duration::from_nanos(1))
        .as_secs_f64()
}

/// The counters that grew from `b` to `a` (the timed passes, without the
/// warm-up).
pub(super) fn diff(a: &QueueStats, b: &QueueStats) -> QueueStats {
    QueueStats {
        requests: a.requests - b.requests,
        completed: a.completed - b.completed,
        failed: a.failed - b.failed,
        submits: a.submits - b.submits,
        bytes_read: a.bytes_read - b.bytes_read,
        bytes_host_copied: a.bytes_host_copied - b.bytes_host_copied,
        blocks_cpu_decoded: a.blocks_cpu_decoded - b.blocks_cpu_decoded,
        blocks_cpu_decompressed: a.blocks_cpu_decompressed - b.blocks_cpu_decompressed,
        bytes_cpu_decompressed: a.bytes_cpu_decompressed - b.bytes_cpu_decompressed,
        blocks_gpu_decoded: a.blocks_gpu_decoded - b.blocks_gpu_decoded,
        blocks_copied: a.blocks_copied - b.blocks_copied,
        blocks_gpu_unconditioned: a.blocks_gpu_unconditioned - b.blocks_gpu_unconditioned,
        blocks_gpu_gdeflate: a.blocks_gpu_gdeflate - b.blocks_gpu_gdeflate,
        read_ns: a.read_ns - b.read_ns,
        cpu_decode_ns: a.cpu_decode_ns - b.cpu_decode_ns,
        gpu_ns: a.gpu_ns - b.gpu_ns,
        gpu_submits: a.gpu_submits - b.gpu_submits,
        gpu_dispatches: a.gpu_dispatches - b.gpu_dispatches,
        lz4_dispatches: a.lz4_dispatches - b.lz4_dispatches,
        gdeflate_dispatches: a.gdeflate_dispatches - b.gdeflate_dispatches,
        gdeflate_driver_pages: a.gdeflate_driver_pages - b.gdeflate_driver_pages,
        // A peak does not difference: the run's, warm-up included.
        lz4_dispatch_peak: a.lz4_dispatch_peak,
        copy_dispatches: a.copy_dispatches - b.copy_dispatches,
        gpu_commands: a.gpu_commands - b.gpu_commands,
        texture_copies: a.texture_copies - b.texture_copies,
        texture_mip_submissions: a.texture_mip_submissions - b.texture_mip_submissions,
        texture_parts_held_back: a.texture_parts_held_back - b.texture_parts_held_back,
        ..Default::default()
    }
}

/// The host-side figures of one case and staging size over the timed
/// passes. `None` where the case has nothing to count (no GPU work).
#[derive(Serialize, Clone, Debug, Default)]
pub struct HostSide {
    /// Whole-process CPU seconds (getrusage user + system) per GB delivered.
    pub cpu_s_per_gb: f64,
    /// Seconds the runtime's submission thread was busy per GB delivered
    /// (`Runtime::submit_thread_busy`: wall time while busy).
    pub submit_busy_s_per_gb: f64,
    /// CPU seconds the submission thread ran per GB delivered (schedstat).
    pub submit_cpu_s_per_gb: Option<f64>,
    /// CPU seconds of the submission thread spent inside wgpu's
    /// `Queue::submit`, per GB (`Runtime::wgpu_submit_time`). On the noop
    /// backend this is where the recorded copies run, as host memcpys that
    /// a GPU would do by DMA.
    pub wgpu_submit_s_per_gb: f64,
    /// The submission thread's CPU s/GB less its time inside wgpu's submit:
    /// the runtime's own work (what the 0.02 s/GB host-side target is about).
    pub submit_own_s_per_gb: Option<f64>,
    /// Blocks one decode dispatch puts in flight: LZ4 and GDeflate blocks
    /// per decode dispatch, or (none) stored blocks per stored-copy
    /// dispatch.
    pub blocks_per_dispatch: Option<f64>,
    /// GPU commands recorded per MiB delivered.
    pub gpu_commands_per_mib: Option<f64>,
    /// `copy_buffer_to_texture` commands per texture mip per GPU
    /// submission that writes the mip.
    pub texture_copies_per_mip: Option<f64>,
    /// The decode dispatches counted in `blocks_per_dispatch`, per pass:
    /// at 1 a pass's every block is in one dispatch.
    pub dispatches_per_pass: Option<f64>,
    /// The most LZ4 blocks one dispatch held in the run (warm-up
    /// included): what the batch holds when the work is there.
    pub lz4_blocks_peak_dispatch: Option<u64>,
    /// GPU queue submissions per pass.
    pub gpu_submits_per_pass: f64,
    /// Queue submits (explicit and automatic) per pass.
    pub submits_per_pass: f64,
    /// Host bytes copied per byte delivered.
    pub copies_per_byte: f64,
}

/// What one pass is, for [`host_side`].
pub(super) struct PassShape {
    /// Uncompressed bytes delivered per pass.
    pub delivered: u64,
    /// Texture mips written per pass.
    pub texture_mips: u64,
    /// Timed passes.
    pub passes: u32,
}

/// Derives [`HostSide`] from the counters' growth `d` over the timed
/// passes, the process CPU seconds `cpu` and the submission thread's busy
/// time `busy` (and CPU time `busy_cpu`) over the same passes.
pub(super) fn host_side(
    d: &QueueStats,
    cpu: f64,
    busy: Duration,
    busy_cpu: Option<Duration>,
    wgpu_submit: Duration,
    shape: &PassShape,
) -> HostSide {
    let passes = shape.passes.max(1) as f64;
    let bytes = shape.delivered as f64 * passes;
    let gb = (bytes / 1e9).max(1e-12);
    let mib = (bytes / (1u64 << 20) as f64).max(1e-12);
    let gpu_work = d.gpu_dispatches > 0 || d.gpu_commands > 0;
    let decode_dispatches = d.lz4_dispatches + d.gdeflate_dispatches;
    HostSide {
        cpu_s_per_gb: cpu / gb,
        submit_busy_s_per_gb: busy.as_secs_f64() / gb,
        submit_cpu_s_per_gb: busy_cpu.map(|c| c.as_secs_f64() / gb),
        wgpu_submit_s_per_gb: wgpu_submit.as_secs_f64() / gb,
        submit_own_s_per_gb: busy_cpu
            .map(|c| (c.as_secs_f64() - wgpu_submit.as_secs_f64()).max(0.0) / gb),
        blocks_per_dispatch: if decode_dispatches > 0 {
            Some(d.blocks_gpu_decoded as f64 / decode_dispatches as f64)
        } else if d.copy_dispatches > 0 {
            Some(d.blocks_copied as f64 / d.copy_dispatches as f64)
        } else {
            None
        },
        lz4_blocks_peak_dispatch: (d.lz4_dispatches > 0).then_some(d.lz4_dispatch_peak),
        dispatches_per_pass: [decode_dispatches, d.copy_dispatches]
            .into_iter()
            .find(|&n| n > 0)
            .map(|n| n as f64 / passes),
        gpu_commands_per_mib: gpu_work.then(|| d.gpu_commands as f64 / mib),
        texture_copies_per_mip: (shape.texture_mips > 0 && d.texture_mip_submissions > 0)
            .then(|| d.texture_copies as f64 / d.texture_mip_submissions as f64),
        gpu_submits_per_pass: d.gpu_submits as f64 / passes,
        submits_per_pass: d.submits as f64 / passes,
        copies_per_byte: d.bytes_host_copied as f64 / bytes.max(1.0),
    }
}

/// One of the host-side targets, read against a row.
#[derive(Serialize, Clone, Debug)]
pub struct TargetCheck {
    /// The figure.
    pub metric: String,
    /// The target, in words ("<= 0.35").
    pub target: String,
    /// The measured value.
    pub value: f64,
    /// Whether the value meets the target.
    pub met: bool,
    /// What bounds the value, where the run says (a target the work of
    /// one pass cannot reach).
    pub note: Option<String>,
}

/// The setting a row was measured in, for [`targets`].
pub(super) struct Setting {
    /// The adapter is wgpu's noop backend.
    pub noop: bool,
    /// Destinations are host memory.
    pub memory: bool,
    /// The pack is read through the page cache (`--buffered`): the setting
    /// every target is set for. With O_DIRECT the disk sets the pace, and
    /// the `write_buffer` loop, whose bytes are in memory already, reads
    /// none of it.
    pub buffered: bool,
}

/// The host-side targets that apply to `case` at `staging_mib` in `setting`.
pub(super) fn targets(
    case: &str,
    staging_mib: u64,
    h: &HostSide,
    ratio_to_baseline: f64,
    setting: &Setting,
) -> Vec<TargetCheck> {
    let at_most = |metric: &str, limit: f64, value: f64| TargetCheck {
        metric: metric.into(),
        target: format!("<= {limit}"),
        value,
        met: value <= limit,
        note: None,
    };
    let at_least = |metric: &str, limit: f64, value: f64| TargetCheck {
        metric: metric.into(),
        target: format!(">= {limit}"),
        value,
        met: value >= limit,
        note: None,
    };
    let mut t = Vec::new();
    if !setting.buffered {
        return t;
    }
    match case {
        "gpu-lz4" | "gpu-lz4-sub" if setting.noop => {
            t.push(at_most("CPU s/GB", 0.35, h.cpu_s_per_gb));
            t.push(at_most(
                "submit own CPU s/GB",
                0.02,
                h.submit_own_s_per_gb.unwrap_or(h.submit_busy_s_per_gb),
            ));
            if staging_mib >= 256 {
                let mut c = at_least(
                    "blocks/dispatch",
                    4096.0,
                    h.blocks_per_dispatch.unwrap_or(0.0),
                );
                // One dispatch a pass: the pass has no more blocks to give.
                // Several, or dispatches spanning passes (sustained): the
                // largest says what a batch holds when the work is there
                // (the others are the tails of submits).
                let one_per_pass = h
                    .dispatches_per_pass
                    .is_some_and(|n| (n - 1.0).abs() < 1e-9);
                if !c.met && one_per_pass {
                    c.note = Some(format!(
                        "(a pass holds {:.0} blocks, all in one dispatch)",
                        c.value
                    ));
                } else if let (false, Some(peak)) = (c.met, h.lz4_blocks_peak_dispatch) {
                    c.note = Some(format!("(largest dispatch: {peak} blocks)"));
                }
                t.push(c);
            }
            if let Some(v) = h.texture_copies_per_mip {
                t.push(at_most("tex copies/mip/submit", 1.0, v));
            }
        }
        "none" if setting.noop => t.push(at_most("host copies/byte", 0.0, h.copies_per_byte)),
        "none" if !setting.memory => t.push(at_least("ours/baseline", 0.9, ratio_to_baseline)),
        "cpu-lz4" if setting.memory => t.push(at_least("ours/baseline", 1.0, ratio_to_baseline)),
        _ => {}
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_apply_to_runs_with_the_page_cache_warm_only() {
        let h = HostSide {
            cpu_s_per_gb: 0.5,
            ..Default::default()
        };
        let set = |buffered| Setting {
            noop: false,
            memory: true,
            buffered,
        };
        let warm = targets("cpu-lz4", 256, &h, 0.8, &set(true));
        assert_eq!(warm.len(), 1);
        assert_eq!(warm[0].metric, "ours/baseline");
        assert!(!warm[0].met);
        assert!(targets("cpu-lz4", 256, &h, 1.1, &set(true))[0].met);
        assert!(targets("cpu-lz4", 256, &h, 0.8, &set(false)).is_empty());
        let noop = Setting {
            noop: true,
            memory: false,
            buffered: true,
        };
        let gpu = targets("gpu-lz4", 256, &h, 1.0, &noop);
        let names: Vec<&str> = gpu.iter().map(|t| t.metric.as_str()).collect();
        assert_eq!(
            names,
            ["CPU s/GB", "submit own CPU s/GB", "blocks/dispatch"]
        );
        // 64 MiB of staging: no blocks-per-dispatch target.
        assert_eq!(targets("gpu-lz4", 64, &h, 1.0, &noop).len(), 2);
    }
}
