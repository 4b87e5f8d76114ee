//! Per-queue statistics.

/// What a queue has done so far. Serialises to JSON for `bench` and traces.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct QueueStats {
    /// Requests enqueued.
    pub requests: u64,
    /// Requests that finished delivering.
    pub completed: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Requests that were cancelled.
    pub cancelled: u64,
    /// Submits (explicit and automatic) that carried at least one item.
    pub submits: u64,
    /// Bytes read from files, sector rounding and coalescing over-read included.
    pub bytes_read: u64,
    /// Stored (compressed) bytes of the blocks read or taken from memory.
    pub bytes_stored: u64,
    /// Uncompressed bytes delivered to destinations.
    pub bytes_delivered: u64,
    /// Bytes the host copied (bounce buffers into staging, scratch into
    /// destinations): divide by `bytes_delivered` for copies per byte.
    pub bytes_host_copied: u64,
    /// Blocks decoded on CPU threads.
    pub blocks_cpu_decoded: u64,
    /// Of those, the compressed ones (LZ4, GDeflate, zstd): blocks a GPU
    /// decoder could have taken. 0 on the GPU path for codecs the GPU
    /// decodes.
    pub blocks_cpu_decompressed: u64,
    /// Decoded bytes of `blocks_cpu_decompressed`.
    pub bytes_cpu_decompressed: u64,
    /// Blocks decoded by the GPU decoders (LZ4 and GDeflate).
    pub blocks_gpu_decoded: u64,
    /// Of those, the GDeflate pages.
    pub blocks_gpu_gdeflate: u64,
    /// Of those, the pages the driver's own decoder decoded
    /// (`VK_EXT/NV_memory_decompression`) rather than the WGSL one.
    pub gdeflate_driver_pages: u64,
    /// Blocks copied as stored.
    pub blocks_copied: u64,
    /// BCn-conditioned blocks put back in order on the GPU, by the pass
    /// after the GPU decoder (the CPU decode threads count theirs in
    /// `blocks_cpu_decoded`).
    pub blocks_gpu_unconditioned: u64,
    /// Reads issued (after coalescing).
    pub reads: u64,
    /// Summed time reads were in flight, nanoseconds.
    pub read_ns: u64,
    /// Summed CPU decode time over all threads, nanoseconds.
    pub cpu_decode_ns: u64,
    /// Summed time GPU submissions were in flight, nanoseconds.
    pub gpu_ns: u64,
    /// GPU submissions made for this queue's data.
    pub gpu_submits: u64,
    /// Compute dispatches (LZ4 decode, stored-block copies, checksums)
    /// recorded for this queue's data.
    pub gpu_dispatches: u64,
    /// LZ4 decode dispatches among them: `blocks_gpu_decoded /
    /// (lz4_dispatches + gdeflate_dispatches)` is the blocks one decode
    /// dispatch puts in flight.
    pub lz4_dispatches: u64,
    /// GPU GDeflate decode dispatches.
    pub gdeflate_dispatches: u64,
    /// The most blocks one LZ4 decode dispatch held.
    pub lz4_dispatch_peak: u64,
    /// Stored-copy dispatches among them (stored blocks and CPU-decoded
    /// bytes bound for GPU destinations).
    pub copy_dispatches: u64,
    /// GPU commands recorded (buffer and texture copies, clears, dispatches)
    /// for this queue's data: divide by delivered MiB for commands per MiB.
    pub gpu_commands: u64,
    /// `copy_buffer_to_texture` commands recorded.
    pub texture_copies: u64,
    /// Texture mips those copies wrote, each counted once per GPU
    /// submission: `texture_copies / texture_mip_submissions` is the copies
    /// per mip per submission.
    pub texture_mip_submissions: u64,
    /// Texture parts a full batch held back for the next one, so that each
    /// copies its part of a mip as whole rows of tiles.
    pub texture_parts_held_back: u64,
    /// Bytes the GPU's decode and copy passes wrote straight into
    /// destination buffers (bound as their output: no scratch, no copy).
    pub direct_buffer_bytes: u64,
    /// The most staging bytes in use at once (all queues of the runtime).
    pub staging_peak_bytes: u64,
    /// Summed request latency (submit to completion), nanoseconds.
    pub latency_ns_total: u64,
    /// Request latencies (submit to completion).
    pub latency: LatencyHistogram,
}

/// A log-scale histogram of request latencies: 8 buckets per power of two
/// of microseconds, so percentiles come out within about 9%.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LatencyHistogram {
    #[cfg_attr(feature = "serde", serde(skip))]
    buckets: Vec<u64>,
    /// Samples recorded.
    pub count: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            buckets: vec![0; 8 * 40],
            count: 0,
        }
    }
}

impl LatencyHistogram {
    fn bucket(us: f64) -> usize {
        if us < 1.0 {
            return 0;
        }
        ((us.log2() * 8.0) as usize + 1).min(8 * 40 - 1)
    }

    fn bucket_value(b: usize) -> f64 {
        if b == 0 {
            0.5
        } else {
            2f64.powf((b as f64 - 0.5) / 8.0)
        }
    }

    /// Records one latency.
    pub fn record(&mut self, d: std::time::Duration) {
        let us = d.as_secs_f64() * 1e6;
        self.buckets[Self::bucket(us)] += 1;
        self.count += 1;
    }

    /// The `q` quantile (0..=1) in microseconds, or 0 with no samples.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let target = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (b, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target {
                return Self::bucket_value(b);
            }
        }
        Self::bucket_value(self.buckets.len() - 1)
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
    }
}

impl QueueStats {
    /// Requests per submit.
    pub fn requests_per_submit(&self) -> f64 {
        if self.submits == 0 {
            0.0
        } else {
            self.requests as f64 / self.submits as f64
        }
    }

    /// Host bytes copied per byte delivered.
    pub fn copies_per_byte(&self) -> f64 {
        if self.bytes_delivered == 0 {
            0.0
        } else {
            self.bytes_host_copied as f64 / self.bytes_delivered as f64
        }
    }
}

/// CPU time the calling thread has run, in nanoseconds (0 where the clock
/// is unavailable). Used to time the submission thread inside wgpu calls:
/// wall time there includes preemption, which on a loaded machine swamps
/// what the call itself costs.
#[cfg(unix)]
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration;
    // CLOCK_THREAD_CPUTIME_ID needs nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the calling thread has run: unavailable here (0). The
/// per-thread CPU clock is POSIX's `CLOCK_THREAD_CPUTIME_ID`; on Windows
/// the submission-thread figures in `RuntimeStats` read 0.
#[cfg(not(unix))]
pub(crate) fn thread_cpu_ns() -> u64 {
    0
}
