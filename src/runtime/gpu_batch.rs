//! The GPU batch stage: from staged bytes to GPU destinations.
//!
//! ```text
//! sealed staging chunks, all slots written
//!   -> one submission copies them into the open batch's device-local input
//!      (the chunks are remapped for the next fill as soon as it is done)
//!   -> the batch fills up over many chunks, then is flushed as ONE submission:
//!      crc32c check pass (every block read from the pack),
//!      LZ4 decode pass, stored-copy pass (stored blocks and CPU-decoded
//!      bytes), into a mip-shaped output scratch,
//!      one copy per destination region (`destinations::gpu_copies`),
//!      status words copied to a readback buffer
//!   -> submission done: the status words are mapped and read, parts finish
//! ```
//!
//! On a software adapter (lavapipe, llvmpipe) every copy is CPU work, and
//! the CPU has already laid out stored and CPU-decoded bytes for their
//! destinations: a chunk holding only such parts is copied straight from
//! the chunk to the destinations, skipping the batch input, and stays
//! unmapped until those copies are done.
//!
//! A batch is flushed when the next chunk does not fit it, or when nothing
//! more is on its way (the submission thread calls [`GpuBatcher::flush`]
//! when it runs out of work). Two batches' buffers exist, so one fills while
//! the other is on the GPU. This file takes chunks in and keeps the
//! batches; `flush.rs` builds a batch's descriptor tables and records its
//! submission.

mod driver;
mod flush;
mod hold_back;

use super::id_map::IdMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam::channel::Sender;

use crate::completion::gpu_poll::GpuPoller;
use crate::decode::gpu::{
    BlockCheckDesc, BlockDesc, Crc32cPipeline, GDeflateDecodePipeline, Lz4DecodePipeline,
    StoredCopyPipeline, UnconditionPipeline,
};
use crate::destinations::gpu_copies::MipsTouched;
use crate::staging::StagingRing;

use super::activity::{Activity, Kind};
use super::batch_status::{lost_error, table};
use super::complete::{GpuStatus, ToCompletion};
use super::gpu_direct::{copy_from_chunk, end_pinned};
use super::job_table::JobTable;
use super::part::{BlockData, Class, Part};
use crate::completion::RequestError;

/// Callbacks from wgpu, routed back to the submission thread.
pub(crate) enum GpuEvent {
    /// The submission copying these chunks to device memory is done.
    ChunksCopied(Vec<usize>),
    /// A chunk is mapped again.
    ChunkMapped(usize),
    /// The device is lost (a mapping failed, or wgpu panicked while
    /// polling): no callback owed will deliver.
    Lost(String),
}

/// A part whose bytes sit in a staging chunk, ready for the GPU.
pub(crate) struct Staged {
    pub part: Part,
    /// Where its bytes start in the chunk.
    pub at: u64,
    /// How many bytes.
    pub len: u32,
}

struct Entry {
    part: Part,
    /// Where its bytes start in the batch input.
    src: u64,
    len: u32,
    /// The crc32c to check the bytes against (blocks read from a pack).
    check: Option<u32>,
    /// Held back from a full batch for this one (`hold_back.rs`).
    held: bool,
}

/// The device buffers of one batch.
struct Res {
    input: wgpu::Buffer,
    output: wgpu::Buffer,
    lz4_descs: wgpu::Buffer,
    gdeflate_descs: wgpu::Buffer,
    stored_descs: wgpu::Buffer,
    check_descs: wgpu::Buffer,
    /// The un-conditioning pass's descriptors and status words (the
    /// status words are not read: its descriptors come from the plan, and
    /// the block's LZ4 status says whether its bytes are good).
    uncond_descs: wgpu::Buffer,
    uncond_status: wgpu::Buffer,
    /// Status words, one buffer per `batch_status::table`, `caps.blocks`
    /// words each.
    status: [wgpu::Buffer; table::COUNT],
    readback: wgpu::Buffer,
    /// The driver decoder's buffers, made for the first batch with
    /// GDeflate pages (so that runtimes streaming only LZ4 do not hold
    /// them); `None` inside when they could not be made, and the WGSL
    /// decoder takes this slot's batches.
    driver: std::cell::OnceCell<Option<driver::DriverRes>>,
}

struct Open {
    res: usize,
    input_used: u64,
    out_need: u64,
    /// Descriptors its parts need, at most `BatchCaps::blocks`.
    descs: u64,
    entries: Vec<Entry>,
    /// Where the entries of the chunk added last begin.
    last_chunk: usize,
}

/// Destination buffers written directly in one batch, at most.
const MAX_DIRECT: usize = 16;

/// Limits of one batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchCaps {
    /// Bytes of input (copied staging chunks).
    pub input: u64,
    /// Bytes of output scratch.
    pub output: u64,
    /// Blocks.
    pub blocks: u64,
    /// Parts one destination buffer needs in a batch to be written
    /// directly (`RuntimeConfig::direct_buffer_blocks`).
    pub direct_min: usize,
    /// The adapter is a CPU rasteriser (lavapipe, llvmpipe GL) and the
    /// runtime takes its path (see [`GpuBatcher::software_adapter`]).
    pub software: bool,
    /// Staging is ordinary, cached host memory the CPU may read: a CPU
    /// adapter not told to stand in for a discrete GPU.
    pub host_staging: bool,
}

impl BatchCaps {
    /// Caps for a device: the input holds `batch` bytes of staged blocks
    /// (`RuntimeConfig::gpu_batch_size`; at least one chunk, so thousands
    /// of blocks share a dispatch), the output twice that, both within one
    /// storage binding.
    ///
    /// A batch is flushed when it is full, so the next reads land while
    /// the GPU works on it: a batch as large as staging would start the
    /// GPU only after the last read (on lavapipe, `none` at 256 MiB staging
    /// ran at 0.54x of the `write_buffer` loop with whole-staging batches).
    ///
    /// `assume_discrete`: a CPU adapter takes a discrete GPU's path
    /// (`RuntimeConfig::assume_discrete_gpu`).
    pub fn new(device: &wgpu::Device, batch: u64, chunk: u64, assume_discrete: bool) -> BatchCaps {
        let binding = device
            .limits()
            .max_storage_buffer_binding_size
            .min(device.limits().max_buffer_size)
            .min(1 << 31)
            & !255;
        let info = device.adapter_info();
        let cpu = info.device_type == wgpu::DeviceType::Cpu && !assume_discrete;
        // wgpu's noop backend says `Cpu` but runs nothing: never software.
        let software = cpu && info.backend != wgpu::Backend::Noop;
        let input = batch.max(chunk).min(binding).next_multiple_of(256);
        let output = (2 * input).max(16 << 20).min(binding);
        BatchCaps {
            input,
            output,
            blocks: (chunk / 256).max(16384),
            direct_min: 1024,
            software,
            host_staging: cpu,
        }
    }

    /// The least output weight a region counts for: with it, a batch whose
    /// regions' weights fit its scratch has at most `blocks` regions, so
    /// every region gets its descriptor and status word (a packed-mips
    /// part writes several regions; small ones would otherwise outnumber
    /// the tables).
    pub fn region_weight(&self) -> u64 {
        self.output.div_ceil(self.blocks).next_multiple_of(256)
    }
}

/// The GPU batch stage (see the module docs). Owned by the submission
/// thread, like the staging ring inside it.
pub(crate) struct GpuBatcher {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pub ring: StagingRing,
    poller: GpuPoller,
    events: Sender<GpuEvent>,
    /// The completion stage, which ends each batch's parts.
    to_complete: Sender<ToCompletion>,
    lz4: Option<Lz4DecodePipeline>,
    /// The GDeflate decoder, where GDeflate pages are decoded here.
    gdeflate: Option<GDeflateDecodePipeline>,
    /// The driver's own GDeflate decoder, where the device has it and the
    /// WGSL one is not forced (`driver.rs`); the WGSL pipeline stays for
    /// batches that do not fit the driver's buffers.
    driver: Option<crate::decode::gpu::driver_gdeflate::DriverGDeflate>,
    stored: StoredCopyPipeline,
    /// The pass after the LZ4 decoder for BCn-conditioned blocks.
    uncondition: UnconditionPipeline,
    crc: Option<Crc32cPipeline>,
    /// Parts staged per chunk, waiting for the chunk to go.
    staged: Vec<Vec<Staged>>,
    res: Vec<Res>,
    free: Vec<usize>,
    open: Option<Open>,
    caps: BatchCaps,
    /// Why the GPU can no longer be used (wgpu panicked in the poll thread).
    lost: Option<String>,
    /// wgpu's noop backend runs no shaders: status words are preset to OK
    /// there, so the host side can be measured with the decode "done".
    noop: bool,
    /// A CPU rasteriser (see [`Self::software_adapter`]).
    software: bool,
    /// Parts copied straight out of a chunk (software adapters), by chunk:
    /// they end when that chunk's copy submission is done.
    direct: IdMap<usize, Vec<Part>>,
    /// Parts a cut batch held back for the next one (`hold_back.rs`),
    /// waiting for it to open.
    held_back: Option<hold_back::HeldBack>,
    /// CPU time spent inside `Queue::submit`, for the stats.
    submit_ns: Arc<AtomicU64>,
    /// Counts the GPU submissions in flight, for the runtime's overlap
    /// times.
    activity: Arc<Activity>,
}

/// What recording a batch counts for the stats.
#[derive(Default)]
pub(crate) struct Recorded {
    pub commands: u64,
    pub dispatches: u64,
    pub lz4_passes: u64,
    pub gdeflate_passes: u64,
    pub copy_passes: u64,
    /// Dispatches of the pass putting conditioned blocks back in order.
    pub uncondition_passes: u64,
    pub texture_copies: u64,
    /// The mips the texture copies write.
    pub mips: MipsTouched,
    /// Pages the driver's GDeflate decoder decoded.
    pub driver_pages: u64,
    /// Command buffers to submit before the batch's encoder (the driver's
    /// decode and what precedes it).
    pub before: Vec<wgpu::CommandBuffer>,
}

/// The GPU decoders a batcher runs: each `None` where its codec decodes on
/// CPU threads.
pub(crate) struct Decoders {
    pub lz4: Option<Lz4DecodePipeline>,
    pub gdeflate: Option<GDeflateDecodePipeline>,
    /// The driver's GDeflate decoder, used where `gdeflate` is also on.
    pub driver: Option<crate::decode::gpu::driver_gdeflate::DriverGDeflate>,
}

/// A part the stage is done with, and how it ended.
pub(crate) type Finished = (Part, Result<(), RequestError>);

/// Where the GPU batch stage reports: the submission thread's events
/// (chunks free, batches done, the device lost), the completion thread's
/// inbox, the counter of CPU time spent inside wgpu's submit, and the
/// runtime's count of work in flight.
pub(crate) struct BatchLinks {
    pub events: Sender<GpuEvent>,
    pub to_complete: Sender<ToCompletion>,
    pub submit_ns: Arc<AtomicU64>,
    pub activity: Arc<Activity>,
}

impl GpuBatcher {
    /// The stage for a device. `verify` checks every pack block's crc32c on
    /// the GPU.
    pub fn new(
        device: wgpu::Device,
        queue: wgpu::Queue,
        ring: StagingRing,
        caps: BatchCaps,
        decoders: Decoders,
        verify: bool,
        links: BatchLinks,
    ) -> std::io::Result<GpuBatcher> {
        let BatchLinks {
            events,
            to_complete,
            submit_ns,
            activity,
        } = links;
        let Decoders {
            lz4,
            gdeflate,
            mut driver,
        } = decoders;
        let poller = GpuPoller::spawn(
            device.clone(),
            report_lost(events.clone(), to_complete.clone()),
        )?;
        let stored = StoredCopyPipeline::new(&device);
        let uncondition = UnconditionPipeline::new(&device);
        let crc = verify.then(|| Crc32cPipeline::new(&device));
        let info = device.adapter_info();
        let noop = info.backend == wgpu::Backend::Noop;
        let software = caps.software;
        if gdeflate.is_none() {
            driver = None;
        }
        let res = (0..2)
            .map(|i| Res::new(&device, caps, i, driver.is_some()))
            .collect();
        let staged = (0..ring.chunk_count()).map(|_| Vec::new()).collect();
        Ok(GpuBatcher {
            device,
            queue,
            ring,
            poller,
            events,
            to_complete,
            lz4,
            gdeflate,
            driver,
            stored,
            uncondition,
            crc,
            staged,
            res,
            free: vec![1, 0],
            open: None,
            caps,
            lost: None,
            noop,
            software,
            direct: IdMap::default(),
            held_back: None,
            submit_ns,
            activity,
        })
    }

    /// Whether the adapter is a CPU rasteriser (lavapipe, llvmpipe GL), on
    /// which compute passes are slow CPU work. wgpu's noop backend also says
    /// `Cpu` but runs nothing, so it counts as hardware here.
    pub fn software_adapter(&self) -> bool {
        self.software
    }

    /// Why the GPU is unusable, once wgpu has failed under the runtime.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// The LZ4 decoder's variant, where LZ4 blocks are decoded here.
    pub fn lz4_path(&self) -> Option<crate::decode::gpu::Lz4DecodePath> {
        self.lz4.as_ref().map(|p| p.path())
    }

    /// Whether GDeflate pages are decoded here.
    pub fn gdeflate_on(&self) -> bool {
        self.gdeflate.is_some()
    }

    /// What the completion stage reads of this stage's batches.
    pub fn status_view(&self) -> GpuStatus {
        GpuStatus {
            readback: self.res.iter().map(|r| r.readback.clone()).collect(),
            stride: self.caps.blocks as usize,
            noop: self.noop,
            device: self.device.clone(),
        }
    }

    /// The least weight of one output region (`BatchCaps::region_weight`).
    pub fn region_weight(&self) -> u64 {
        self.ring.region_weight()
    }

    /// The completion stage has read batch buffer set `r`'s status words.
    /// Bytes of the GPU buffers the stage made for itself: both batch
    /// sets' inputs, output scratch, descriptor tables and status words
    /// (staging apart; the driver decoder's buffers, made on its first
    /// batch, apart).
    pub fn own_gpu_bytes(&self) -> u64 {
        self.res.iter().map(Res::bytes).sum()
    }

    pub fn batch_free(&mut self, r: usize) {
        self.activity.end(Kind::Gpu);
        self.free.push(r);
    }

    /// A part's bytes are in chunk `chunk` (its slot is reported written
    /// separately, once per slot).
    pub fn stage(&mut self, chunk: usize, staged: Staged) {
        self.staged[chunk].push(staged);
    }

    /// Whether a batch is open with parts in it.
    pub fn has_open(&self) -> bool {
        self.open.as_ref().is_some_and(|o| !o.entries.is_empty())
    }

    /// Moves every ready chunk into the open batch (flushing it first when a
    /// chunk does not fit), with one submission copying them all.
    pub fn take_ready_chunks(&mut self, jobs: &JobTable, done: &mut Vec<Finished>) {
        let ready = self.ring.ready();
        if !ready.is_empty() {
            self.device_lost(jobs, done);
        }
        if let Some(why) = &self.lost {
            for c in ready {
                for s in self.staged[c].drain(..) {
                    done.push((s.part, Err(lost_error(why))));
                }
                self.ring.recycle(c);
            }
            return;
        }
        let mut enc: Option<wgpu::CommandEncoder> = None;
        let mut copied = Vec::new();
        // The mips direct copies write, per submission.
        let mut mips = MipsTouched::default();
        let (mut mip_submissions, mut submits) = (0, 0);
        // A job whose parts are copied straight from a chunk, to count the
        // submission that carries them.
        let mut direct_job = None;
        for c in ready {
            if self.staged[c].is_empty() {
                self.ring.recycle(c);
                continue;
            }
            if self.software && self.staged[c].iter().all(|s| s.part.pitched) {
                let (buffer, _) = self.ring.unmap_for_gpu(c);
                let e = enc.get_or_insert_with(|| self.copy_encoder());
                let staged = std::mem::take(&mut self.staged[c]);
                let staged = staged.into_iter().map(|s| (s.part, s.at));
                let parts = copy_from_chunk(e, &buffer, staged, jobs, done, &mut mips);
                direct_job = direct_job.or(parts.first().map(|p| p.job));
                self.direct.insert(c, parts);
                copied.push(c);
                continue;
            }
            let used = self.ring.used(c).next_multiple_of(4);
            let weight = self.ring.weight(c);
            // Descriptors the chunk's parts need (one per region: a
            // packed-mips part has several), which bound the tables.
            let n: u64 = self.staged[c].iter().map(|s| s.part.descs()).sum();
            let fits = |o: &Open| {
                o.input_used + used <= self.caps.input
                    && o.out_need + weight <= self.caps.output
                    && o.descs + n <= self.caps.blocks
            };
            if self.open.as_ref().is_some_and(|o| !fits(o)) {
                // Mips cut inside a row of tiles keep that row for the
                // next batch (`hold_back.rs`).
                self.held_back = self.hold_back_rows(jobs, (used, weight, n));
                // The copies recorded so far target the batch being flushed:
                // they must reach the queue first.
                if let Some(e) = enc.take() {
                    self.submit_copies(e, std::mem::take(&mut copied));
                    mip_submissions += std::mem::take(&mut mips).count();
                    submits += 1;
                }
                self.flush(jobs, done);
            }
            if !self.open_batch() {
                // Both batches are on the GPU: the chunk waits, sealed.
                break;
            }
            let mut e = enc.take().unwrap_or_else(|| self.copy_encoder());
            if let Some(h) = self.held_back.take() {
                // Only a batch opened since the cut is here: the held parts
                // go first (or, sharing the buffers they are in, as a batch
                // of their own).
                self.take_held_back(&mut e, h, jobs, done);
            }
            let e = enc.insert(e);
            if !self.open_batch() {
                break;
            }
            let open = self.open.as_mut().expect("opened above");
            let base = open.input_used;
            let (buffer, _) = self.ring.unmap_for_gpu(c);
            e.copy_buffer_to_buffer(&buffer, 0, &self.res[open.res].input, base, used);
            copied.push(c);
            open.input_used = (base + used).next_multiple_of(256);
            open.out_need += weight;
            open.descs += n;
            let verify = self.crc.is_some();
            open.last_chunk = open.entries.len();
            open.entries.reserve(self.staged[c].len());
            for s in self.staged[c].drain(..) {
                let check = match (&s.part.block.data, s.part.class) {
                    (BlockData::File(pf, id), Class::Raw | Class::GpuDecode) if verify => {
                        Some(pf.pack.blocks()[id.0 as usize].checksum)
                    }
                    _ => None,
                };
                open.entries.push(Entry {
                    src: base + s.at,
                    len: s.len,
                    part: s.part,
                    check,
                    held: false,
                });
            }
        }
        if let Some(e) = enc {
            self.submit_copies(e, copied);
            mip_submissions += mips.count();
            submits += 1;
        }
        // Counted once the last submission is made: one cut short by a
        // full batch counts too.
        if let (true, Some(j)) = (submits > 0, direct_job.and_then(|id| jobs.get(id))) {
            j.stats(|st| {
                st.gpu_submits += submits;
                st.texture_mip_submissions += mip_submissions;
            });
        }
    }

    /// Opens a batch if none is open; false when both batches' buffers are
    /// on the GPU.
    fn open_batch(&mut self) -> bool {
        if self.open.is_some() {
            return true;
        }
        // Held-back parts are copied out of their buffers into the new
        // batch's: other buffers, where both are free.
        let held_in = self.held_back.as_ref().map(|h| h.from);
        let pick = self.free.iter().rposition(|&r| Some(r) != held_in);
        let Some(i) = pick.or(self.free.len().checked_sub(1)) else {
            return false;
        };
        let res = self.free.remove(i);
        self.open = Some(Open {
            res,
            input_used: 0,
            out_need: 0,
            descs: 0,
            entries: Vec::new(),
            last_chunk: 0,
        });
        true
    }

    fn copy_encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpustream staging copy"),
            })
    }

    fn submit_copies(&mut self, enc: wgpu::CommandEncoder, chunks: Vec<usize>) {
        if chunks.is_empty() {
            // Only copies between batch inputs: nothing to remap after.
            self.submit(enc);
            return;
        }
        let owed = self.poller.owe();
        let tx = self.events.clone();
        self.activity.start(Kind::Gpu, 1);
        let index = self.submit(enc);
        self.queue.on_submitted_work_done(move || {
            let _ = tx.send(GpuEvent::ChunksCopied(chunks));
            owed.paid();
        });
        self.poller.submitted(index);
    }

    fn submit(&self, enc: wgpu::CommandEncoder) -> wgpu::SubmissionIndex {
        self.submit_after(Vec::new(), enc)
    }

    /// Submits `before`, in order, then `enc`, as one submission.
    fn submit_after(
        &self,
        mut before: Vec<wgpu::CommandBuffer>,
        enc: wgpu::CommandEncoder,
    ) -> wgpu::SubmissionIndex {
        before.push(enc.finish());
        let t0 = super::stats::thread_cpu_ns();
        let index = self.queue.submit(before);
        self.submit_ns.fetch_add(
            super::stats::thread_cpu_ns().saturating_sub(t0),
            Ordering::Relaxed,
        );
        index
    }

    /// Nothing owed will complete: fails what this stage holds (the
    /// completion stage fails the batches in flight), and every part from
    /// now on.
    fn fail_lost(&mut self, why: String, jobs: &JobTable, done: &mut Vec<Finished>) {
        if self.lost.is_some() {
            return;
        }
        let held = self.held_back.take().map(|h| h.entries);
        let open = self.open.take().map(|o| o.entries);
        for e in open.into_iter().chain(held).flatten() {
            done.push((e.part, Err(lost_error(&why))));
        }
        for (_, parts) in self.direct.drain() {
            for part in parts {
                end_pinned(jobs, part, Err(lost_error(&why)), done);
            }
        }
        // Nothing in flight reports its end now.
        self.activity.clear(Kind::Gpu);
        self.lost = Some(why);
    }

    /// Whether the device is lost, asked before recording: wgpu's default
    /// error handler panics on the first command that uses a buffer made on
    /// a lost device, so the stage stops recording as soon as it knows.
    /// A device found lost is reported as a mapping failure is.
    pub(super) fn device_lost(&mut self, jobs: &JobTable, done: &mut Vec<Finished>) -> bool {
        if self.lost.is_some() {
            return true;
        }
        if !probe_lost(&self.device) {
            return false;
        }
        let why = "the device was lost (destroyed, or reset by the driver)".to_string();
        let _ = self.to_complete.send(ToCompletion::Lost(why.clone()));
        self.fail_lost(why, jobs, done);
        true
    }

    /// What a wgpu callback that finds the device lost calls
    /// ([`report_lost`]).
    pub(super) fn lost_reporter(&self) -> impl Fn(String) + Send + 'static {
        report_lost(self.events.clone(), self.to_complete.clone())
    }

    /// Handles a wgpu callback; parts that ended are pushed to `done`.
    pub fn on_event(&mut self, e: GpuEvent, jobs: &JobTable, done: &mut Vec<Finished>) {
        match e {
            GpuEvent::ChunksCopied(chunks) => {
                self.activity.end(Kind::Gpu);
                for c in chunks {
                    // Copies straight out of the chunk have landed.
                    for part in self.direct.remove(&c).unwrap_or_default() {
                        end_pinned(jobs, part, Ok(()), done);
                    }
                    if self.ring.persistent(c) {
                        // Imported host memory is never unmapped: the
                        // chunk is free as soon as its copy is done.
                        if let Err(why) = self.ring.mapped(c) {
                            (self.lost_reporter())(why);
                        }
                        continue;
                    }
                    let owed = self.poller.owe();
                    let tx = self.events.clone();
                    let lost = self.lost_reporter();
                    self.ring.remap(c, move |mapped| {
                        match mapped {
                            Ok(()) => {
                                let _ = tx.send(GpuEvent::ChunkMapped(c));
                            }
                            Err(why) => lost(why),
                        }
                        owed.paid();
                    });
                    self.poller.mapping();
                }
            }
            GpuEvent::ChunkMapped(c) => {
                if let Err(why) = self.ring.mapped(c) {
                    (self.lost_reporter())(why);
                }
            }
            GpuEvent::Lost(why) => self.fail_lost(why, jobs, done),
        }
    }
}

/// Reports the device lost, from the poll thread (wgpu failed under it)
/// or a wgpu callback (a mapping failed): this stage fails what it holds
/// and every part from then on, the completion stage the batches in
/// flight.
fn report_lost(
    events: Sender<GpuEvent>,
    to_complete: Sender<ToCompletion>,
) -> impl Fn(String) + Send + 'static {
    move |why: String| {
        let _ = to_complete.send(ToCompletion::Lost(why.clone()));
        let _ = events.send(GpuEvent::Lost(why));
    }
}

/// Whether `device` is lost: a buffer made on it cannot be mapped at
/// creation. (wgpu has no query for it, and its lost callback belongs to
/// the application.) A few microseconds; run once per batch and per chunk
/// copy. The probe is dropped without an unmap, which on a lost device
/// would be a validation error.
pub(crate) fn probe_lost(device: &wgpu::Device) -> bool {
    let probe = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpustream device probe"),
        size: 4,
        usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: true,
    });
    let lost = probe.get_mapped_range_mut(..).is_err();
    drop(probe);
    lost
}

impl Res {
    fn bytes(&self) -> u64 {
        [
            &self.input,
            &self.output,
            &self.lz4_descs,
            &self.gdeflate_descs,
            &self.stored_descs,
            &self.check_descs,
            &self.uncond_descs,
            &self.uncond_status,
            &self.readback,
        ]
        .into_iter()
        .chain(&self.status)
        .map(wgpu::Buffer::size)
        .sum()
    }

    /// `driver`: the GDeflate table holds the driver path's two copy
    /// passes' descriptors, the second set from a run boundary
    /// (`driver.rs`).
    fn new(device: &wgpu::Device, caps: BatchCaps, i: usize, driver: bool) -> Res {
        use wgpu::BufferUsages as U;
        let mk = |what: &str, size: u64, usage: U| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("gpustream batch {i} {what}")),
                size: size.max(256),
                usage,
                mapped_at_creation: false,
            })
        };
        let words = caps.blocks * 4;
        let desc = std::mem::size_of::<BlockDesc>() as u64;
        let check = std::mem::size_of::<BlockCheckDesc>() as u64;
        Res {
            input: mk("input", caps.input, U::STORAGE | U::COPY_DST | U::COPY_SRC),
            // COPY_DST: the last word of an odd-sized buffer output is cleared.
            output: mk(
                "output",
                caps.output,
                U::STORAGE | U::COPY_SRC | U::COPY_DST,
            ),
            lz4_descs: mk(
                "lz4 descriptors",
                caps.blocks * desc,
                U::STORAGE | U::COPY_DST,
            ),
            gdeflate_descs: mk(
                "gdeflate descriptors",
                desc * if driver {
                    2 * caps.blocks + super::batch_tables::RUN_ALIGN as u64
                } else {
                    caps.blocks
                },
                U::STORAGE | U::COPY_DST,
            ),
            stored_descs: mk(
                "stored descriptors",
                caps.blocks * desc,
                U::STORAGE | U::COPY_DST,
            ),
            check_descs: mk(
                "check descriptors",
                caps.blocks * check,
                U::STORAGE | U::COPY_DST,
            ),
            // Two tables: conditioned blocks, then the relayout of packed
            // mips' pieces (each at most one per block or region), the
            // second from a 256-byte boundary.
            uncond_descs: mk(
                "uncondition descriptors",
                2 * caps.blocks * desc + 256,
                U::STORAGE | U::COPY_DST,
            ),
            uncond_status: mk("uncondition status", 2 * words + 256, U::STORAGE),
            status: std::array::from_fn(|_| {
                mk("status", words, U::STORAGE | U::COPY_SRC | U::COPY_DST)
            }),
            readback: mk(
                "status readback",
                table::COUNT as u64 * words,
                U::MAP_READ | U::COPY_DST,
            ),
            driver: std::cell::OnceCell::new(),
        }
    }
}
