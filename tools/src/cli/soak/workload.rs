//! The soak's queues: each fed from a thread of its own with requests of
//! every kind, in batches closed by a fence signal, with a status entry
//! after every request, random submits and cancels; and beside each a
//! checker that waits for the batch (bounded), times every request, and
//! holds every outcome to the rules in `mod.rs`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Sender};
use gpustream::completion::RequestError;
use gpustream::pack::AssetId;
use gpustream::prelude::*;

use super::content::Expected;
use super::rng::Rng;
use super::{Outcome, PackKind, Shared};
use gpustream_tools::gpu::GpuContext;

/// A pack one queue reads from.
#[derive(Clone)]
pub struct PackHandle {
    /// What kind of pack it is.
    pub kind: PackKind,
    /// The opened pack.
    pub file: Arc<PackFile>,
}

/// A compressed block held in memory, and what it decodes to.
pub struct MemorySource {
    /// The stored bytes.
    pub data: Arc<[u8]>,
    /// Their codec.
    pub codec: Codec,
    /// What they decode to.
    pub expected: Vec<u8>,
}

/// Where a request's bytes went, to be read back.
enum Dest {
    Memory(HostMemory),
    Buffer(wgpu::Buffer),
    /// A texture region: mip, texel x and y, width and height.
    Texture(wgpu::Texture, u32, u32, u32, u32, u32),
    /// The packed mips: from `first`, every mip to the end.
    Packed(wgpu::Texture, u32),
}

/// One request, as its checker sees it.
struct Item {
    /// The pack kind (or `Memory` for a memory source).
    kind: PackKind,
    /// The asset (for texture and blob sources).
    asset: Option<AssetId>,
    /// The bytes it must deliver, in order (for packed mips: every mip's,
    /// concatenated).
    expected: Vec<u8>,
    dest: Dest,
    enqueued: Instant,
    /// Enqueued before a cancel of its tag: it may end cancelled.
    maybe_cancelled: bool,
    /// Refused at enqueue, with this error.
    refused: Option<RequestError>,
}

/// A batch handed from a queue's thread to its checker.
pub struct Batch {
    status: StatusArray,
    items: Vec<Item>,
    fence: Fence,
    value: u64,
}

/// Everything a queue's thread needs.
pub struct QueueSetup {
    /// The queue's index (its name, its thread's seed).
    pub index: usize,
    /// The queue.
    pub queue: Queue,
    /// The packs it reads (empty for a memory queue).
    pub packs: Vec<PackHandle>,
    /// The GPU destinations' device, where its runtime has one.
    pub gpu: Option<Arc<GpuContext>>,
}

/// Feeds `setup.queue` until the epoch ends, sending each batch to
/// `checker`.
pub fn feed(setup: QueueSetup, seed: u64, shared: Arc<Shared>, checker: Sender<Batch>) {
    let mut rng = Rng::new(seed ^ (setup.index as u64).wrapping_mul(0x9e37_79b9));
    let fence = Fence::new();
    let mut value = 0u64;
    let memory = setup.queue.config().source == SourceKind::Memory;
    let mut accepted = 0u64;
    while !shared.stop_epoch.load(Relaxed) && !shared.stop_all.load(Relaxed) {
        let len = 4 + rng.below(40) as usize;
        let status = StatusArray::new(len);
        let tag = ((setup.index as u64) << 40) | value;
        let mut items = Vec::with_capacity(len);
        let mut cancel_at = None;
        if rng.chance(0.08) {
            cancel_at = Some(rng.below(len as u64) as usize);
        }
        for i in 0..len {
            let (req, mut item) = if memory {
                memory_request(&mut rng, &shared)
            } else {
                let pack = &setup.packs[rng.below(setup.packs.len() as u64) as usize];
                pack_request(&mut rng, &shared, pack, setup.gpu.as_deref())
            };
            match setup.queue.enqueue(req.with_tag(tag)) {
                Ok(()) => accepted += 1,
                Err(e) => item.refused = Some(e),
            }
            setup.queue.enqueue_status(&status, i);
            items.push(item);
            if rng.chance(0.05) {
                setup.queue.submit();
            }
            if cancel_at == Some(i) {
                setup.queue.cancel(u64::MAX, tag);
                shared.cancels.fetch_add(1, Relaxed);
                for it in items.iter_mut() {
                    it.maybe_cancelled = true;
                }
            }
        }
        value += 1;
        setup.queue.enqueue_signal(&fence, value);
        setup.queue.submit();
        let batch = Batch {
            status,
            items,
            fence: fence.clone(),
            value,
        };
        if checker.send(batch).is_err() {
            break;
        }
    }
    // Every request accepted was counted once, and ended once.
    if fence.wait_timeout(value, shared.hang_bound) {
        let s = setup.queue.stats();
        if s.requests != accepted || s.completed + s.failed + s.cancelled != s.requests {
            shared.violation(format!(
                "queue {}: {accepted} requests accepted, its counts say {} enqueued, {} completed, {} failed, {} cancelled",
                setup.index, s.requests, s.completed, s.failed, s.cancelled
            ));
        }
    }
}

/// A request from a memory source into host memory.
fn memory_request(rng: &mut Rng, shared: &Shared) -> (Request, Item) {
    let m = &shared.memory_sources[rng.below(shared.memory_sources.len() as u64) as usize];
    let memory = HostMemory::new(m.expected.len());
    let req = Request::new(
        Source::Memory {
            data: m.data.clone(),
            codec: m.codec,
            size: m.expected.len() as u32,
        },
        Destination::memory(&memory),
    );
    (
        req,
        item(
            PackKind::Memory,
            None,
            m.expected.clone(),
            Dest::Memory(memory),
        ),
    )
}

fn item(kind: PackKind, asset: Option<AssetId>, expected: Vec<u8>, dest: Dest) -> Item {
    Item {
        kind,
        asset,
        expected,
        dest,
        enqueued: Instant::now(),
        maybe_cancelled: false,
        refused: None,
    }
}

/// A request from `pack`: a blob (whole or a range) into memory or a
/// buffer, or a tile or the packed mips into a texture.
fn pack_request(
    rng: &mut Rng,
    shared: &Shared,
    pack: &PackHandle,
    gpu: Option<&GpuContext>,
) -> (Request, Item) {
    let n = shared.content.assets.len() as u64;
    let id = AssetId(rng.below(n) as u32);
    let (_, expected) = &shared.content.assets[id.0 as usize];
    match (expected, gpu) {
        (Expected::Texture { mips, .. }, Some(ctx)) => texture_request(
            rng,
            ctx,
            pack,
            id,
            mips,
            &shared.content.assets[id.0 as usize].0,
        ),
        (Expected::Texture { mips, .. }, None) => {
            // No GPU: the texture's bytes as a blob range are not offered,
            // so read a blob instead.
            let _ = mips;
            let blob = blob_asset(rng, shared);
            blob_request(rng, shared, pack, blob, None)
        }
        (Expected::Blob(_), g) => blob_request(rng, shared, pack, id, g),
    }
}

/// A blob asset, drawn at random.
fn blob_asset(rng: &mut Rng, shared: &Shared) -> AssetId {
    loop {
        let i = rng.below(shared.content.assets.len() as u64) as usize;
        if matches!(shared.content.assets[i].1, Expected::Blob(_)) {
            return AssetId(i as u32);
        }
    }
}

fn blob_request(
    rng: &mut Rng,
    shared: &Shared,
    pack: &PackHandle,
    id: AssetId,
    gpu: Option<&GpuContext>,
) -> (Request, Item) {
    let Expected::Blob(bytes) = &shared.content.assets[id.0 as usize].1 else {
        unreachable!("blob_request takes blob assets");
    };
    let size = bytes.len() as u64;
    // A buffer destination on a GPU runtime, one time in three.
    if let (Some(ctx), true) = (gpu, rng.below(3) == 0) {
        let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("soak blob"),
            size: size.next_multiple_of(4).max(4),
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let req = Request::new(
            Source::blob(&pack.file, id),
            Destination::Buffer {
                buffer: buffer.clone(),
                offset: 0,
            },
        );
        return (
            req,
            item(pack.kind, Some(id), bytes.clone(), Dest::Buffer(buffer)),
        );
    }
    let range = if size > 16 && rng.below(2) == 0 {
        let a = rng.below(size - 1);
        let b = a + 1 + rng.below(size - a);
        a..b
    } else {
        0..size
    };
    let memory = HostMemory::new((range.end - range.start) as usize);
    let req = Request::new(
        Source::Blob {
            pack: pack.file.clone(),
            asset: id,
            range: Some(range.clone()),
        },
        Destination::memory(&memory),
    );
    let want = bytes[range.start as usize..range.end as usize].to_vec();
    (req, item(pack.kind, Some(id), want, Dest::Memory(memory)))
}

fn texture_request(
    rng: &mut Rng,
    ctx: &GpuContext,
    pack: &PackHandle,
    id: AssetId,
    mips: &[Vec<u8>],
    name: &str,
) -> (Request, Item) {
    let side = super::content::TEXTURE_SIDE;
    let texture = ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some(name),
        size: wgpu::Extent3d {
            width: side,
            height: side,
            depth_or_array_layers: 1,
        },
        mip_level_count: mips.len() as u32,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8Unorm,
        usage: wgpu::TextureUsages::COPY_DST | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let p = pack.file.pack();
    // The tiled mips, then the packed tail: one draw among the tiles and
    // the tail.
    let mut tiles = Vec::new();
    for mip in 0..mips.len() as u8 {
        if let Ok(Some((tx, ty))) = p.tile_grid(id, mip) {
            for y in 0..ty {
                for x in 0..tx {
                    tiles.push((mip, x, y));
                }
            }
        }
    }
    let packed = p
        .packed_mips(id)
        .ok()
        .and_then(|pm| pm.mips.first().map(|m| m.mip));
    let pick = rng.below(tiles.len() as u64 + packed.is_some() as u64) as usize;
    if pick < tiles.len() {
        let (mip, x, y) = tiles[pick];
        let r = p.tile_region(id, mip, x, y).expect("a tile of the grid");
        let mip_w = (side >> mip).max(1);
        let rows = &mips[mip as usize];
        let mut want = Vec::with_capacity((r.width * r.height * 4) as usize);
        for row in r.y..r.y + r.height {
            let at = ((row * mip_w + r.x) * 4) as usize;
            want.extend_from_slice(&rows[at..at + (r.width * 4) as usize]);
        }
        let req = Request::new(
            Source::Tile {
                pack: pack.file.clone(),
                asset: id,
                mip,
                x,
                y,
            },
            Destination::Texture {
                texture: texture.clone(),
                mip: mip as u32,
                origin: wgpu::Origin3d {
                    x: r.x,
                    y: r.y,
                    z: 0,
                },
                extent: None,
            },
        );
        let dest = Dest::Texture(texture, mip as u32, r.x, r.y, r.width, r.height);
        return (req, item(pack.kind, Some(id), want, dest));
    }
    let first = packed.expect("the tail was drawn");
    let want: Vec<u8> = mips[first as usize..].concat();
    let req = Request::new(
        Source::PackedMips {
            pack: pack.file.clone(),
            asset: id,
        },
        Destination::Texture {
            texture: texture.clone(),
            mip: first as u32,
            origin: wgpu::Origin3d::ZERO,
            extent: None,
        },
    );
    (
        req,
        item(
            pack.kind,
            Some(id),
            want,
            Dest::Packed(texture, first as u32),
        ),
    )
}

/// Checks every batch of one queue as it completes.
pub fn check(
    rx: Receiver<Batch>,
    priority: Priority,
    gpu: Option<Arc<GpuContext>>,
    shared: Arc<Shared>,
) {
    let readback = gpu.filter(|_| shared.gpu_bytes_checked);
    for batch in rx {
        let deadline = Instant::now() + shared.hang_bound;
        let mut done: Vec<Option<Instant>> = vec![None; batch.items.len()];
        let mut left = batch.items.len();
        while left > 0 {
            let now = Instant::now();
            for (i, d) in done.iter_mut().enumerate() {
                if d.is_none() && batch.status.is_complete(i) {
                    *d = Some(now);
                    left -= 1;
                }
            }
            if left > 0 {
                if now > deadline {
                    shared.violation(format!(
                        "hang: {left} requests of a batch did not complete within {:?}",
                        shared.hang_bound
                    ));
                    shared.hung.store(true, Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        if !batch.fence.wait_timeout(batch.value, wait) {
            shared.violation(format!(
                "hang: fence value {} was not reached within {:?} of its batch",
                batch.value, shared.hang_bound
            ));
            shared.hung.store(true, Relaxed);
            return;
        }
        for (i, it) in batch.items.into_iter().enumerate() {
            let latency = done[i].map_or(Duration::ZERO, |t| t - it.enqueued);
            let entry = batch.status.get(i);
            let outcome = judge(&it, &entry, readback.as_deref(), &shared);
            shared.record(
                priority,
                it.kind,
                latency,
                outcome,
                it.expected.len() as u64,
            );
        }
    }
}

/// The outcome of one request, or a violation recorded on `shared`.
fn judge(it: &Item, entry: &StatusEntry, gpu: Option<&GpuContext>, shared: &Shared) -> Outcome {
    if let Some(e) = &it.refused {
        return failure(it, e, &e.to_string(), shared);
    }
    match entry {
        StatusEntry::Pending => {
            shared.violation("a status entry was pending after its fence".into());
            Outcome::Violation
        }
        StatusEntry::Failed(f) => failure(it, &f.error, &f.to_string(), shared),
        StatusEntry::Ok => {
            let gpu = gpu.filter(|_| !shared.events.device_lost.load(Relaxed));
            if gpu.is_none() && !matches!(it.dest, Dest::Memory(_)) && shared.gpu_bytes_checked {
                // The device is gone: what landed in it cannot be seen.
                return Outcome::DeliveredUnchecked;
            }
            let got = match &it.dest {
                Dest::Memory(m) => m.to_vec().ok(),
                Dest::Buffer(b) => match gpu {
                    Some(ctx) => read_buffer(ctx, b, it.expected.len()),
                    None => return Outcome::DeliveredUnchecked,
                },
                Dest::Texture(t, mip, x, y, w, h) => match gpu {
                    Some(ctx) => read_texture(ctx, t, *mip, *x, *y, *w, *h),
                    None => return Outcome::DeliveredUnchecked,
                },
                Dest::Packed(t, first) => match gpu {
                    Some(ctx) => read_packed(ctx, t, *first),
                    None => return Outcome::DeliveredUnchecked,
                },
            };
            match got {
                Some(bytes) if bytes == it.expected => Outcome::Delivered,
                // The device went away before the readback: the bytes
                // cannot be seen, whatever landed.
                None if shared.events.device_lost.load(Relaxed) => Outcome::DeliveredUnchecked,
                _ if it.maybe_cancelled => Outcome::Cancelled,
                got => {
                    let at = got
                        .as_ref()
                        .and_then(|g| g.iter().zip(&it.expected).position(|(a, b)| a != b));
                    shared.violation(format!(
                        "wrong bytes: {} asset {:?} ({} bytes) {}",
                        it.kind.name(),
                        it.asset
                            .map(|a| shared.content.assets[a.0 as usize].0.clone()),
                        it.expected.len(),
                        match (&got, at) {
                            (None, _) => "could not be read back".to_string(),
                            (Some(g), None) => format!("came back as {} bytes", g.len()),
                            (Some(_), Some(at)) => format!("differ first at byte {at}"),
                        }
                    ));
                    Outcome::Violation
                }
            }
        }
    }
}

/// A failed request: allowed where a fault it may have met explains it.
fn failure(it: &Item, e: &RequestError, shown: &str, shared: &Shared) -> Outcome {
    let ev = &shared.events;
    let f = &shared.faults;
    let io_kind = matches!(e, RequestError::Io(_) | RequestError::ShortRead { .. });
    let data_kind = matches!(e, RequestError::Pack(_) | RequestError::GpuDecode { .. });
    let on_disk = !matches!(it.kind, PackKind::Memory | PackKind::Buffered);
    let corrupted = it
        .asset
        .is_some_and(|a| it.kind == PackKind::Corrupt && shared.corrupted.contains(&a.0));
    let allowed = match e {
        RequestError::DeviceLost { .. } => ev.device_lost.load(Relaxed),
        _ if io_kind => {
            (f.io && on_disk)
                || (it.kind == PackKind::Striped && ev.cut.load(Relaxed))
                || (it.kind == PackKind::Remote && (ev.s3.load(Relaxed) || ev.cache.load(Relaxed)))
        }
        _ if data_kind => {
            corrupted
                || (f.io && on_disk)
                || (it.kind == PackKind::Striped && ev.cut.load(Relaxed))
                || (it.kind == PackKind::Remote && (ev.s3.load(Relaxed) || ev.cache.load(Relaxed)))
        }
        _ => false,
    };
    if allowed {
        Outcome::Failed
    } else {
        shared.violation(format!(
            "a request that met no fault failed ({} pack): {shown}",
            it.kind.name()
        ));
        Outcome::Violation
    }
}

/// Copies `len` bytes of `buffer` into a mappable one and reads them, or
/// `None` where the device is gone.
fn read_buffer(ctx: &GpuContext, buffer: &wgpu::Buffer, len: usize) -> Option<Vec<u8>> {
    let size = buffer.size();
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("soak readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
    ctx.queue.submit([enc.finish()]);
    let mut bytes = gpustream_tools::gpu::read_buffer(&ctx.device, &staging)?;
    bytes.truncate(len);
    Some(bytes)
}

/// Reads a `w` x `h` texel region of an RGBA8 texture's `mip` back, rows
/// tight.
fn read_texture(
    ctx: &GpuContext,
    texture: &wgpu::Texture,
    mip: u32,
    x: u32,
    y: u32,
    w: u32,
    h: u32,
) -> Option<Vec<u8>> {
    let row = w * 4;
    let pitch = row.next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("soak texture readback"),
        size: (pitch * h) as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&Default::default());
    enc.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture,
            mip_level: mip,
            origin: wgpu::Origin3d { x, y, z: 0 },
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &staging,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(pitch),
                rows_per_image: Some(h),
            },
        },
        wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        },
    );
    ctx.queue.submit([enc.finish()]);
    let bytes = gpustream_tools::gpu::read_buffer(&ctx.device, &staging)?;
    Some(
        bytes
            .chunks(pitch as usize)
            .flat_map(|r| &r[..row as usize])
            .copied()
            .collect(),
    )
}

/// Reads every mip from `first` to the last back, concatenated.
fn read_packed(ctx: &GpuContext, texture: &wgpu::Texture, first: u32) -> Option<Vec<u8>> {
    let side = super::content::TEXTURE_SIDE;
    let mut out = Vec::new();
    for mip in first..texture.mip_level_count() {
        let s = (side >> mip).max(1);
        out.extend(read_texture(ctx, texture, mip, 0, 0, s, s)?);
    }
    Some(out)
}
