//! Pure planning helpers: rounding a byte range out to the direct-I/O
//! alignment, and coalescing many small ranges into fewer large reads.

/// Rounds the byte range `[offset, offset + len)` out to multiples of
/// `align` and returns `(aligned_offset, aligned_len, skip)`: the read to
/// issue, and where the wanted bytes start inside it.
///
/// `align` of 0 is treated as 1. A range whose rounded end would pass
/// `u64::MAX` is clamped to the last whole aligned unit (no file is that
/// large; the read then returns the bytes that exist).
pub fn align_range(offset: u64, len: usize, align: usize) -> (u64, usize, usize) {
    let a = align.max(1) as u128;
    let start = offset as u128 / a * a;
    let end = (offset as u128 + len as u128).div_ceil(a) * a;
    let max_end = u64::MAX as u128 / a * a;
    let end = end.min(max_end.max(start));
    let aligned_len = (end - start).min(usize::MAX as u128) as usize;
    (start as u64, aligned_len, (offset as u128 - start) as usize)
}

/// One requested range's place inside a [`ReadRun`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPart {
    /// Index of the range in the slice given to [`plan_reads`].
    pub index: usize,
    /// Where the range starts inside the run's bytes.
    pub offset_in_run: usize,
    /// The range's length.
    pub len: usize,
}

/// A single read that serves one or more requested ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRun {
    /// File offset of the run's first byte.
    pub offset: u64,
    /// Length of the run in bytes (including any gaps read over).
    pub len: usize,
    /// The requested ranges this run serves, in file order.
    pub parts: Vec<RunPart>,
}

impl ReadRun {
    /// Bytes read that nobody asked for (gaps between the parts).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn overread(&self) -> usize {
        let mut covered = 0usize;
        let mut end = 0usize;
        for p in &self.parts {
            let (s, e) = (p.offset_in_run, p.offset_in_run + p.len);
            if e > end {
                covered += e - s.max(end);
                end = e;
            }
        }
        self.len - covered
    }
}

/// Coalesces `ranges` (`(offset, len)` pairs, any order, overlaps allowed)
/// into runs sorted by offset. Two neighbours share a run when the gap
/// between them is at most `max_overread` bytes and the run stays within
/// `max_read` bytes; a single range longer than `max_read` becomes a run of
/// its own and is never split (its bytes must land contiguously). Every
/// input index appears in exactly one run.
///
/// The planner is pure: it does no I/O and allocates only the output. The
/// runtime uses it to place each run contiguously in its staging buffer and
/// issue one read for it; rounding a run to the file's alignment (see
/// [`align_range`]) may grow it by up to two alignment units beyond
/// `max_read`.
pub fn plan_reads(ranges: &[(u64, usize)], max_read: usize, max_overread: usize) -> Vec<ReadRun> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    // Parts mostly arrive in pack order, which is file order: checking that
    // costs one pass, where the sort cost a fifth of the submission
    // thread's own work on the GPU path (`perf`).
    if !ranges.is_sorted() {
        order.sort_by_key(|&i| (ranges[i].0, ranges[i].1));
    }
    let end_of = |i: usize| ranges[i].0.saturating_add(ranges[i].1 as u64);

    let mut runs: Vec<ReadRun> = Vec::new();
    // (run start, run end) of the run being grown.
    let mut current: Option<(u64, u64)> = None;
    for i in order {
        let (off, _) = ranges[i];
        let end = end_of(i);
        if let Some((start, run_end)) = current {
            let gap = off.saturating_sub(run_end);
            let new_end = run_end.max(end);
            if gap <= max_overread as u64 && new_end - start <= max_read as u64 {
                let run = runs.last_mut().expect("a current run exists");
                run.parts.push(RunPart {
                    index: i,
                    offset_in_run: (off - start) as usize,
                    len: (end - off) as usize,
                });
                run.len = (new_end - start) as usize;
                current = Some((start, new_end));
                continue;
            }
        }
        runs.push(ReadRun {
            offset: off,
            len: (end - off) as usize,
            parts: vec![RunPart {
                index: i,
                offset_in_run: 0,
                len: (end - off) as usize,
            }],
        });
        current = Some((off, end));
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_range_rounds_out_and_reports_skip() {
        assert_eq!(align_range(0, 4096, 4096), (0, 4096, 0));
        assert_eq!(align_range(100, 10, 4096), (0, 4096, 100));
        assert_eq!(align_range(4000, 200, 4096), (0, 8192, 4000));
        assert_eq!(align_range(8192, 0, 4096), (8192, 0, 0));
        assert_eq!(align_range(5, 7, 1), (5, 7, 0));
        assert_eq!(align_range(5, 7, 0), (5, 7, 0));
        assert_eq!(align_range(513, 512, 512), (512, 1024, 1));
    }

    #[test]
    fn align_range_clamps_at_the_top_of_u64() {
        let (o, l, s) = align_range(u64::MAX - 10, 100, 4096);
        assert_eq!(o % 4096, 0);
        assert!(o as u128 + l as u128 <= u64::MAX as u128);
        assert_eq!(o + s as u64, u64::MAX - 10);
    }

    #[test]
    fn plan_merges_within_gap_and_size_bounds() {
        let ranges = [(0u64, 100usize), (150, 50), (10_000, 10), (200, 100)];
        let runs = plan_reads(&ranges, 1 << 20, 64);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].offset, 0);
        assert_eq!(runs[0].len, 300);
        let idx: Vec<usize> = runs[0].parts.iter().map(|p| p.index).collect();
        assert_eq!(idx, vec![0, 1, 3]);
        assert_eq!(runs[0].overread(), 50);
        assert_eq!(runs[1].offset, 10_000);
        assert_eq!(runs[1].parts[0].index, 2);
    }

    #[test]
    fn plan_respects_max_read_and_keeps_big_ranges_whole() {
        let ranges = [(0u64, 600usize), (600, 600), (1200, 5000)];
        let runs = plan_reads(&ranges, 1000, 0);
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[2].len, 5000);
    }

    #[test]
    fn plan_handles_overlaps_and_duplicates() {
        let ranges = [(100u64, 50usize), (100, 50), (120, 100), (0, 0)];
        let runs = plan_reads(&ranges, 1 << 20, 0);
        // (0,0) ends at 0, gap to 100 is 100 > 0: its own run.
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].offset, 100);
        assert_eq!(runs[1].len, 120);
        assert_eq!(runs[1].overread(), 0);
        for r in &runs {
            for p in &r.parts {
                let (o, l) = ranges[p.index];
                assert_eq!(r.offset + p.offset_in_run as u64, o);
                assert_eq!(p.len, l);
            }
        }
    }

    #[test]
    fn plan_covers_every_index_once_on_random_input() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..200 {
            let n = (next() % 50) as usize;
            let ranges: Vec<(u64, usize)> = (0..n)
                .map(|_| (next() % 100_000, (next() % 5000) as usize))
                .collect();
            let max_read = 1 + (next() % 20_000) as usize;
            let max_over = (next() % 3000) as usize;
            let runs = plan_reads(&ranges, max_read, max_over);
            let mut seen = vec![0u32; n];
            for r in &runs {
                assert!(r.len <= max_read || r.parts.len() == 1);
                for p in &r.parts {
                    seen[p.index] += 1;
                    assert_eq!(r.offset + p.offset_in_run as u64, ranges[p.index].0);
                    assert!(p.offset_in_run + p.len <= r.len);
                }
            }
            assert!(seen.iter().all(|&c| c == 1));
            for w in runs.windows(2) {
                assert!(w[0].offset <= w[1].offset);
            }
        }
    }
}
