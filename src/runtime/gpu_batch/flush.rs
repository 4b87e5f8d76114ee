//! Flushing the open batch: its parts sorted, its descriptor tables built,
//! then ONE submission: status words cleared, the crc32c check pass, one
//! LZ4 pass, one GDeflate pass and one stored-copy pass per output (the scratch, or a
//! destination buffer written directly), the copies to destinations, and
//! the status words copied to the readback buffer the completion stage maps.

use std::ops::Range;
use std::time::Instant;

use crate::decode::gpu::{BlockCheckDesc, BlockDesc, BlockPass, PassBindings};
use crate::decode::Lz4Status;
use crate::destinations::gpu_copies::{
    plan_outputs, record_copies, DirectRule, OutputPlan, PartDest,
};
use crate::pack::BlockTransform;
use crate::Codec;

use super::super::activity::Kind;
use super::super::batch_status::{table, BatchEntry, BatchInFlight, Slots};
use super::super::batch_tables::{BatchTables, Laid, LocalSlot, RUN_ALIGN};
use super::super::complete::ToCompletion;
use super::super::gpu_direct::{end_pinned, part_dests, record_part_direct};
use super::super::job_table::JobTable;
use super::super::plan::{BlockData, Class, Place};
use super::{Entry, Finished, GpuBatcher, Recorded, Res, MAX_DIRECT};
use crate::completion::RequestError;

/// The open batch's entries after one pass over them.
struct Sorted<'j> {
    /// Every region of the entries in `live` (one, or one per piece).
    present: Vec<PartDest<'j>>,
    /// Entries the passes deliver, with the span of `present` each owns
    /// (`None` when its destination is gone).
    live: Vec<(Entry, Option<Range<usize>>)>,
    /// Parts the CPU already laid out for their destination: one plain
    /// copy each.
    direct: Vec<Entry>,
}

/// A batch's descriptor tables, laid out, and what each entry owns of them.
struct Tables {
    laid: Laid,
    checks: Vec<BlockCheckDesc>,
    /// The last words of buffer outputs that end inside a word (target,
    /// offset): cleared before the passes, so the bytes past the data are
    /// zeros.
    pad_words: Vec<(Option<usize>, u64)>,
    /// The un-conditioning pass's descriptors: conditioned blocks the LZ4
    /// pass wrote past the scratch's regions, each to be put back into its
    /// region.
    unconds: Vec<BlockDesc>,
    /// The relayout pass's descriptors (the same shader, no transform,
    /// after it): pieces of packed-mip blocks the decoders wrote linearly
    /// past the regions, each laid into its region in rows.
    relayouts: Vec<BlockDesc>,
    entries: Vec<BatchEntry>,
}

impl GpuBatcher {
    /// Records and submits the open batch. Parts of cancelled requests end
    /// here as cancelled; the others are pinned until their writes land.
    pub fn flush(&mut self, jobs: &JobTable, done: &mut Vec<Finished>) {
        if self.open.is_none() || self.device_lost(jobs, done) {
            // A lost device failed the open batch's parts.
            return;
        }
        let Some(open) = self.open.take() else {
            return;
        };
        let sorted = sort_entries(open.entries, jobs, done);
        if sorted.live.is_empty() && sorted.direct.is_empty() {
            self.free.push(open.res);
            return;
        }
        let plan = plan_outputs(&sorted.present, self.direct_rule(sorted.present.len()));
        let res = &self.res[open.res];
        // Conditioned blocks decode past the regions the plan laid out.
        let cond_base = plan.size.next_multiple_of(256);
        let cond_len: u64 = sorted
            .live
            .iter()
            .map(|(e, _)| e.part.conditioned_out())
            .sum();
        let fits = cond_base + cond_len <= res.output.size();
        let mut tables = build_tables(&plan, sorted.live, fits, cond_base, jobs, done);
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpustream batch"),
            });
        let input = res.input.slice(..open.input_used.max(256));
        let words = status_words(&tables);
        let mut rec = self.record_passes(&mut enc, res, input, &plan, &tables, words);
        for e in sorted.direct {
            let dest = jobs.get(e.part.job).map(|j| &j.destination);
            match record_part_direct(&mut enc, &res.input, e.src, &e.part, dest, &mut rec.mips) {
                Some((c, t)) => {
                    rec.texture_copies += t;
                    rec.commands += c;
                    tables.entries.push(BatchEntry {
                        part: e.part,
                        check: None,
                        slots: Slots::default(),
                    });
                }
                None => {
                    let lost = RequestError::Internal("a GPU part lost its destination".into());
                    end_pinned(jobs, e.part, Err(lost), done);
                }
            }
        }
        if words > 0 {
            for (i, status) in res.status.iter().enumerate() {
                enc.copy_buffer_to_buffer(
                    status,
                    0,
                    &res.readback,
                    i as u64 * self.caps.blocks * 4,
                    words * 4,
                );
                rec.commands += 1;
            }
        }
        let mips = std::mem::take(&mut rec.mips).count();
        let unconditioned = tables.unconds.len() as u64;
        let lz4_peak = tables.laid.lz4_runs.iter().map(|r| r.len() as u64).max();
        let lz4_peak = lz4_peak.unwrap_or(0);
        if let Some(first) = tables.entries.first() {
            if let Some(j) = jobs.get(first.part.job) {
                let direct_bytes: u64 = plan.direct.iter().map(|d| d.size).sum();
                j.stats(|st| {
                    st.gpu_submits += 1;
                    st.gpu_commands += rec.commands;
                    st.gpu_dispatches += rec.dispatches;
                    st.lz4_dispatches += rec.lz4_passes;
                    st.gdeflate_dispatches += rec.gdeflate_passes;
                    st.gdeflate_driver_pages += rec.driver_pages;
                    st.lz4_dispatch_peak = st.lz4_dispatch_peak.max(lz4_peak);
                    st.copy_dispatches += rec.copy_passes;
                    st.texture_copies += rec.texture_copies;
                    st.texture_mip_submissions += mips;
                    st.blocks_gpu_decoded +=
                        run_total(&tables.laid.lz4_runs) + run_total(&tables.laid.gdeflate_runs);
                    st.blocks_gpu_gdeflate += run_total(&tables.laid.gdeflate_runs);
                    st.blocks_copied += run_total(&tables.laid.stored_runs);
                    st.blocks_gpu_unconditioned += unconditioned;
                    st.direct_buffer_bytes += direct_bytes;
                });
            }
        }
        let r = open.res;
        // The completion stage hears of the batch before it is submitted,
        // so its status cannot overtake it; the readback is mapped as soon
        // as the submission is done (wgpu defers a map of a buffer the
        // queue still uses), and the map's callback goes straight there.
        let _ = self.to_complete.send(ToCompletion::Batch(BatchInFlight {
            res: r,
            entries: tables.entries,
            submitted: Instant::now(),
        }));
        self.activity.start(Kind::Gpu, 1);
        let index = self.submit_after(std::mem::take(&mut rec.before), enc);
        self.poller.submitted(index);
        let owed = self.poller.owe();
        let tx = self.to_complete.clone();
        let lost = self.lost_reporter();
        self.res[r]
            .readback
            .map_async(wgpu::MapMode::Read, .., move |mapped| {
                match mapped {
                    Ok(()) => {
                        let _ = tx.send(ToCompletion::StatusMapped(r));
                    }
                    // The device is gone: this batch's status never comes.
                    Err(e) => lost(format!("mapping a batch's status words failed: {e}")),
                }
                owed.paid();
            });
        self.poller.mapping();
    }

    /// When destination buffers with enough parts in this batch are written
    /// directly: only while their runs' padding cannot push the tables past
    /// the caps.
    fn direct_rule(&self, regions: usize) -> Option<DirectRule> {
        let limits = self.device.limits();
        (regions + RUN_ALIGN * (MAX_DIRECT + 1) <= self.caps.blocks as usize).then_some(
            DirectRule {
                min_parts: self.caps.direct_min,
                align: limits.min_storage_buffer_offset_alignment as u64,
                max_binding: limits.max_storage_buffer_binding_size,
                unit: if self.lz4.as_ref().is_some_and(|p| p.path().is_wide()) {
                    16
                } else {
                    4
                },
                max_groups: MAX_DIRECT,
            },
        )
    }

    /// Records everything before the copies of parts laid out by the CPU:
    /// status words cleared (preset to OK on the noop backend, which runs
    /// no shaders), pad words cleared, descriptor tables uploaded, the
    /// check pass, the LZ4 and stored-copy passes per output, and the
    /// copies from the scratch to the destinations.
    fn record_passes(
        &self,
        enc: &mut wgpu::CommandEncoder,
        res: &Res,
        input: wgpu::BufferSlice<'_>,
        plan: &OutputPlan,
        tables: &Tables,
        words: u64,
    ) -> Recorded {
        let mut rec = Recorded::default();
        let laid = &tables.laid;
        let mut noop_ok: Option<Vec<u32>> = None;
        for (i, status) in res.status.iter().enumerate() {
            if words == 0 {
                break;
            }
            if self.noop && i != table::CRC {
                let ok =
                    noop_ok.get_or_insert_with(|| vec![Lz4Status::Ok.to_word(); words as usize]);
                self.queue.write_buffer(status, 0, bytemuck::cast_slice(ok));
            } else {
                // Cleared so a block a pass never reached reads as not run.
                enc.clear_buffer(status, 0, Some(words * 4));
                rec.commands += 1;
            }
        }
        // Each target's output: the scratch, or a destination buffer's range.
        let outputs: Vec<wgpu::BufferSlice<'_>> = std::iter::once(res.output.slice(..))
            .chain(
                plan.direct
                    .iter()
                    .map(|d| d.buffer.slice(d.offset..d.offset + d.size)),
            )
            .collect();
        for &(direct, w) in &tables.pad_words {
            match direct {
                None => enc.clear_buffer(&res.output, w, Some(4)),
                Some(g) => {
                    let d = &plan.direct[g];
                    enc.clear_buffer(&d.buffer, d.offset + w, Some(4));
                }
            }
            rec.commands += 1;
        }
        if let Some(crc) = &self.crc {
            if !tables.checks.is_empty() {
                self.queue
                    .write_buffer(&res.check_descs, 0, bytemuck::cast_slice(&tables.checks));
                let _ = crc.encode(
                    &self.device,
                    enc,
                    input,
                    &res.check_descs,
                    &res.status[table::CHECK],
                    &res.status[table::CRC],
                    tables.checks.len() as u32,
                );
                rec.dispatches += 1;
            }
        }
        if !laid.lz4.is_empty() {
            self.queue
                .write_buffer(&res.lz4_descs, 0, bytemuck::cast_slice(&laid.lz4));
        }
        if !laid.stored.is_empty() {
            self.queue
                .write_buffer(&res.stored_descs, 0, bytemuck::cast_slice(&laid.stored));
        }
        // The driver's decoder, where it runs and the pages fit its
        // buffers (`driver.rs`): pages realigned and decoded before the
        // passes below, which lay them out instead of the WGSL decoder.
        let driver = if laid.gdeflate.is_empty() {
            None
        } else {
            self.driver_buffers(res)
                .and_then(|b| super::driver::plan(&laid.gdeflate, b.src.size(), b.dst.size()))
        };
        use super::driver::DriverOutcome;
        let driver_outcome = match &driver {
            Some(p) => self.record_driver_decode(enc, res, input, &laid.gdeflate, p, &mut rec),
            None => {
                if !laid.gdeflate.is_empty() {
                    self.queue.write_buffer(
                        &res.gdeflate_descs,
                        0,
                        bytemuck::cast_slice(&laid.gdeflate),
                    );
                }
                DriverOutcome::NotUsed
            }
        };
        // One LZ4, one GDeflate and one stored-copy pass per target with
        // work. The
        // buffers are sized by the caps, so an encode cannot fail; if one
        // did, its blocks' status words stay "not run" and they fail.
        for (t, output) in outputs.iter().enumerate() {
            let bind = |descs, status, run| run_bindings(input, *output, descs, status, run);
            let run = &laid.lz4_runs[t];
            if let (Some(p), false) = (&self.lz4, run.is_empty()) {
                let b = bind(&res.lz4_descs, &res.status[table::LZ4], run);
                let _ = p.encode_in(&self.device, enc, b, run.len() as u32, None);
                rec.lz4_passes += 1;
            }
            let run = &laid.gdeflate_runs[t];
            if run.is_empty() || driver_outcome == DriverOutcome::Failed {
                // Nothing to decode, or pages the driver refused (they
                // fail as not run).
            } else if let (DriverOutcome::Decoded, Some(bufs)) =
                (driver_outcome, res.driver.get().and_then(Option::as_ref))
            {
                // The driver's output, laid out: descriptors after the
                // realign pass's in the table.
                let base = super::driver::relayout_base(laid.gdeflate.len());
                let shifted = run.start + base..run.end + base;
                let b = run_bindings(
                    bufs.dst.buffer.slice(..),
                    *output,
                    &res.gdeflate_descs,
                    &res.status[table::GDEFLATE],
                    &shifted,
                );
                let b = PassBindings {
                    status: res.status[table::GDEFLATE]
                        .slice(run.start as u64 * 4..run.end as u64 * 4),
                    ..b
                };
                let _ = self
                    .stored
                    .encode_in(&self.device, enc, b, run.len() as u32, None);
                rec.copy_passes += 1;
            } else if let Some(p) = &self.gdeflate {
                let b = bind(&res.gdeflate_descs, &res.status[table::GDEFLATE], run);
                let _ = p.encode_in(&self.device, enc, b, run.len() as u32, None);
                rec.gdeflate_passes += 1;
            }
            let run = &laid.stored_runs[t];
            if !run.is_empty() {
                let b = bind(&res.stored_descs, &res.status[table::STORED], run);
                let _ = self
                    .stored
                    .encode_in(&self.device, enc, b, run.len() as u32, None);
                rec.copy_passes += 1;
            }
        }
        // After the decode passes into the scratch: conditioned blocks back in
        // order, into their regions, before the copies read them.
        // Then the pieces of packed mips, from their blocks' linear bytes
        // (put back in order by the dispatch before, where conditioned)
        // into their regions: a second dispatch, after the first, in the
        // table's second half.
        let desc = std::mem::size_of::<BlockDesc>() as u64;
        let mut at = (0, 0);
        for table in [&tables.unconds, &tables.relayouts] {
            if table.is_empty() {
                continue;
            }
            let n = table.len() as u64;
            self.queue
                .write_buffer(&res.uncond_descs, at.0, bytemuck::cast_slice(table));
            let _ = self.uncondition.encode_in(
                &self.device,
                enc,
                res.uncond_descs.slice(at.0..at.0 + n * desc),
                res.output.slice(..),
                res.uncond_status.slice(at.1..at.1 + n * 4),
                n as u32,
            );
            rec.uncondition_passes += 1;
            // Bindings start on 256-byte boundaries.
            at = (
                (at.0 + n * desc).next_multiple_of(256),
                (at.1 + n * 4).next_multiple_of(256),
            );
        }
        rec.dispatches +=
            rec.lz4_passes + rec.gdeflate_passes + rec.copy_passes + rec.uncondition_passes;
        let (copies, texture_copies) = record_copies(enc, &res.output, &plan.copies, &mut rec.mips);
        rec.texture_copies += texture_copies;
        rec.commands += copies + rec.dispatches;
        rec
    }
}

/// One pass over the batch, one job lookup per part: cancelled parts end
/// here, parts the CPU already laid out for their destination get one
/// plain copy each (`direct`), and every other part's regions (one, or one
/// per piece) go to `present`, with the span of them it owns.
fn sort_entries<'j>(
    entries: Vec<Entry>,
    jobs: &'j JobTable,
    done: &mut Vec<Finished>,
) -> Sorted<'j> {
    let mut sorted = Sorted {
        present: Vec::with_capacity(entries.len()),
        live: Vec::with_capacity(entries.len()),
        direct: Vec::new(),
    };
    for e in entries {
        let Some(job) = jobs.get(e.part.job).filter(|j| j.ctl.begin_gpu()) else {
            done.push((e.part, Err(RequestError::Cancelled)));
            continue;
        };
        if e.part.pitched {
            sorted.direct.push(e);
            continue;
        }
        let from = sorted.present.len();
        let span = part_dests(&e.part, Some(&job.destination), &mut sorted.present)
            .then_some(from..sorted.present.len());
        sorted.live.push((e, span));
    }
    sorted
}

/// The descriptors of every live entry, in the places `plan` gave its
/// regions: one LZ4 descriptor per stream (the block, or each of its
/// sub-blocks), one GDeflate descriptor per page, one stored-copy
/// descriptor per region of stored or
/// CPU-decoded bytes, one check per block read from a pack. An entry
/// whose destination is gone, or whose scratch does not fit (`fits`
/// false), fails here.
fn build_tables(
    plan: &OutputPlan,
    live: Vec<(Entry, Option<Range<usize>>)>,
    fits: bool,
    cond_base: u64,
    jobs: &JobTable,
    done: &mut Vec<Finished>,
) -> Tables {
    let mut tables = BatchTables::new(plan.direct.len());
    let mut unconds = Vec::new();
    let mut relayouts = Vec::new();
    let mut cond_at = cond_base;
    let mut checks = Vec::new();
    let mut pad_words: Vec<(Option<usize>, u64)> = Vec::new();
    let mut pending = Vec::with_capacity(live.len());
    for (e, span) in live {
        let Some(span) = span.filter(|_| fits) else {
            let lost = RequestError::Internal("a GPU part lost its destination or scratch".into());
            end_pinned(jobs, e.part, Err(lost), done);
            continue;
        };
        let src = e.src as u32;
        // The GPU decoder's table for the block's codec, or the
        // stored-copy table.
        let decoded = e.part.class == Class::GpuDecode;
        let t = match e.part.block.codec {
            _ if !decoded => table::STORED,
            Codec::GDeflate => table::GDEFLATE,
            _ => table::LZ4,
        };
        // A part's regions share one target: pieces are texture regions,
        // and a buffer part has one region.
        let target = plan.places[span.start].direct.map_or(0, |g| g + 1);
        let first = tables.next(target, t);
        if decoded && matches!(e.part.place, Place::Pieces(..)) {
            // Packed mips: the block decodes linearly past the regions
            // (and is put back in order there when conditioned), then the
            // relayout pass lays each piece into its region, in rows.
            let size = e.part.block.size;
            let linear = cond_at as u32;
            cond_at += (size as u64).next_multiple_of(256);
            push_linear(&mut tables, (target, t), &e, linear);
            let mut from = linear;
            let transform = e.part.block.transform;
            if transform != BlockTransform::None {
                from = cond_at as u32;
                cond_at += (size as u64).next_multiple_of(256);
                let mut u = BlockDesc::linear(linear, size, from, size);
                u.reserved[0] = transform.id() as u32;
                unconds.push(u);
            }
            for ((take, place), k) in e.part.outputs().zip(span) {
                if let Place::Texture { layout, .. } = place {
                    let at = plan.places[k];
                    let len = layout.tight_size() as u32;
                    let d = BlockDesc::linear(from + take.start, len, at.dst_offset as u32, len);
                    relayouts.push(d.with_rows(layout.row_bytes, at.row_pitch));
                }
            }
        } else {
            for ((take, place), k) in e.part.outputs().zip(span) {
                let at = plan.places[k];
                let (row_bytes, row_pitch) = match place {
                    Place::Texture { layout, .. } => (layout.row_bytes, at.row_pitch),
                    _ => (0, 0),
                };
                let dst = at.dst_offset as u32;
                if matches!(place, Place::Buffer { .. }) && (take.end - take.start) % 4 != 0 {
                    pad_words.push((
                        at.direct,
                        at.dst_offset + ((take.end - take.start) & !3) as u64,
                    ));
                }
                if decoded {
                    // One descriptor per stream: the block, or each of an LZ4
                    // block's sub-blocks, which start on rows of a tile (the
                    // reader checks), so each lands on rows of its own.
                    let transform = e.part.block.transform;
                    // `plan::classify` sends conditioned blocks to the GPU
                    // only for textures, whose regions are in the scratch.
                    // Checked in release builds too: taking the plain path would
                    // deliver the block in its conditioned order and call it Ok.
                    assert!(
                        transform == BlockTransform::None || target == 0,
                        "a conditioned block planned for a buffer written directly"
                    );
                    if transform != BlockTransform::None && target == 0 {
                        // Decoded linearly past the regions, in its
                        // conditioned order; the un-conditioning pass then
                        // writes it into its region, rows and all.
                        let size = e.part.block.size;
                        let at = cond_at as u32;
                        cond_at += e.part.conditioned_out();
                        push_linear(&mut tables, (target, t), &e, at);
                        let mut u = BlockDesc::linear(at, size, dst, size);
                        u.reserved[0] = transform.id() as u32;
                        unconds.push(u.with_rows(row_bytes, row_pitch));
                        continue;
                    }
                    let subs = sub_blocks(&e);
                    if subs.is_empty() {
                        let d = BlockDesc::linear(src, e.len, dst, e.part.block.size);
                        tables.push(target, t, d.with_rows(row_bytes, row_pitch));
                    }
                    for sb in subs {
                        let out = match row_bytes {
                            0 => sb.offset,
                            rb => sb.offset / rb * row_pitch,
                        };
                        let d = BlockDesc::linear(
                            src + sb.stored_offset,
                            sb.stored_len,
                            dst + out,
                            sb.size,
                        );
                        tables.push(target, t, d.with_rows(row_bytes, row_pitch));
                    }
                    continue;
                }
                let desc = {
                    // Stored or CPU-decoded bytes: a piece is its own range
                    // of the block, copied by its own descriptor.
                    let size = match place {
                        Place::Texture { layout, .. } => layout.tight_size() as u32,
                        _ => e.len,
                    };
                    BlockDesc::linear(src + take.start, size, dst, size)
                };
                tables.push(target, t, desc.with_rows(row_bytes, row_pitch));
            }
        }
        let slot = LocalSlot {
            table: t,
            target,
            first,
            count: tables.next(target, t) - first,
        };
        let check = e.check.map(|expected| {
            checks.push(BlockCheckDesc::new(src, e.len, expected));
            checks.len() as u32 - 1
        });
        pending.push((e, slot, check));
    }
    let laid = tables.lay_out();
    let entries = pending
        .into_iter()
        .map(|(e, slot, check)| BatchEntry {
            part: e.part,
            check: e.check,
            slots: Slots {
                decode: Some(laid.slot(slot)),
                check,
            },
        })
        .collect();
    Tables {
        laid,
        checks,
        pad_words,
        unconds,
        relayouts,
        entries,
    }
}

/// The sub-blocks of an entry's block (empty: one stream).
fn sub_blocks(e: &Entry) -> &[crate::pack::SubBlock] {
    match &e.part.block.data {
        BlockData::File(pf, id) => pf.pack.sub_blocks(*id),
        BlockData::Memory(..) => &[],
    }
}

/// Pushes the descriptors that decode an entry's block linearly (no rows)
/// into scratch at `at`: one for the block, or one per sub-block at its
/// offset. Packed mips and conditioned blocks decode this way, and a later
/// pass moves the bytes into their regions.
fn push_linear(tables: &mut BatchTables, (target, t): (usize, usize), e: &Entry, at: u32) {
    let (src, size) = (e.src as u32, e.part.block.size);
    let subs = sub_blocks(e);
    if subs.is_empty() {
        tables.push(target, t, BlockDesc::linear(src, e.len, at, size));
    }
    for sb in subs {
        let d = BlockDesc::linear(
            src + sb.stored_offset,
            sb.stored_len,
            at + sb.offset,
            sb.size,
        );
        tables.push(target, t, d);
    }
}

/// Status words each table of the batch needs: its longest.
fn status_words(tables: &Tables) -> u64 {
    [
        tables.laid.lz4.len(),
        tables.laid.gdeflate.len(),
        tables.laid.stored.len(),
        tables.checks.len(),
    ]
    .into_iter()
    .max()
    .unwrap_or(0) as u64
}

/// Entries in `runs`, padding left out.
fn run_total(runs: &[Range<usize>]) -> u64 {
    runs.iter().map(|r| r.len() as u64).sum()
}

/// The bindings of the pass over `run` of a descriptor table (and the
/// same run of its status table), writing `output`.
fn run_bindings<'a>(
    input: wgpu::BufferSlice<'a>,
    output: wgpu::BufferSlice<'a>,
    descs: &'a wgpu::Buffer,
    status: &'a wgpu::Buffer,
    run: &Range<usize>,
) -> PassBindings<'a> {
    let desc = std::mem::size_of::<BlockDesc>() as u64;
    PassBindings {
        input,
        descs: descs.slice(run.start as u64 * desc..run.end as u64 * desc),
        output,
        status: status.slice(run.start as u64 * 4..run.end as u64 * 4),
    }
}
