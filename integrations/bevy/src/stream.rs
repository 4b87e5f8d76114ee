//! Packs, streamed images and the gpustream queue: the loads the residency
//! plan starts become tile requests, one fence value per frame, and landed
//! batches become resident mips. Nothing here waits on I/O: the fence is
//! read with `completed_value`, and a mip that has not arrived is simply not
//! yet in the view.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bevy::asset::RenderAssetUsages;
use bevy::image::{ImageAddressMode, ImageFilterMode, ImageSampler, ImageSamplerDescriptor};
use bevy::prelude::*;
use bevy::render::render_asset::RenderAssets;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::texture::GpuImage;
use gpustream::pack::{AssetId as PackAssetId, Pack, PackError, TextureInfo};
use gpustream::prelude::{
    Destination, Fence, PackFile, Priority, Queue, QueueConfig, Request, Runtime, Source,
    StatusArray, StatusEntry,
};

use crate::residency::{Change, Residency, TextureResidency};
use crate::GpuStreamPlugin;

/// A pack added with [`TextureStreamer::add_pack`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackId(usize);

/// Why a pack or a texture could not be streamed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The pack's table of contents did not read or validate.
    #[error("pack {path}: {source}")]
    Pack {
        /// The pack's path.
        path: PathBuf,
        /// What was wrong.
        source: PackError,
    },
    /// The pack has no asset by that name.
    #[error("pack {path} has no asset {name:?}")]
    NoSuchAsset {
        /// The pack's path.
        path: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// The asset is a blob, not a texture.
    #[error("asset {name:?} of pack {path} is not a texture")]
    NotATexture {
        /// The pack's path.
        path: PathBuf,
        /// The asset's name.
        name: String,
    },
}

/// What the streamer holds of one mip chain, for tests and overlays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MipResidency {
    /// Mip levels of the texture.
    pub mip_count: u8,
    /// The finest resident mip (the view's `base_mip_level`); `None` until
    /// the packed tail has landed.
    pub base: Option<u8>,
    /// The mip being loaded, if any.
    pub in_flight: Option<u8>,
    /// The first mip of the packed tail: the coarsest unit, never evicted.
    pub floor: u8,
}

/// Streaming figures since the app started; also published as Bevy
/// diagnostics ([`crate::diagnostics`]).
#[derive(Clone, Debug, Default)]
pub struct StreamingStats {
    /// Bytes of resident mip levels.
    pub resident_bytes: u64,
    /// Bytes reserved for mips on their way.
    pub in_flight_bytes: u64,
    /// The budget over resident and in-flight bytes.
    pub budget_bytes: u64,
    /// Bytes of the streamed textures' full mip chains, allocated up front.
    pub allocated_bytes: u64,
    /// Requests sent to gpustream in the latest frame.
    pub requests_last_frame: u64,
    /// Requests sent in all.
    pub requests: u64,
    /// Requests that failed (refused at enqueue or failed at run time).
    pub failed_requests: u64,
    /// Requests waiting for a later frame (the per-frame cap).
    pub waiting_requests: u64,
    /// Mip loads (a mip, or a packed tail) that landed.
    pub mips_loaded: u64,
    /// Mips evicted.
    pub mips_evicted: u64,
    /// Bytes of mips that landed.
    pub bytes_landed: u64,
    /// Bytes that landed in the latest frame.
    pub bytes_landed_last_frame: u64,
    /// Submit-to-fence time of the batches that landed in the latest frame
    /// (the longest of them), if any landed.
    pub fence_latency_last_frame: Option<Duration>,
}

/// Streamed images' GPU textures, found in the render world once Bevy has
/// created them, and read by the main world to aim requests at them.
#[derive(Resource, Clone, Default)]
pub(crate) struct SharedGpuTextures(Arc<Mutex<SharedInner>>);

#[derive(Default)]
struct SharedInner {
    wanted: Vec<AssetId<Image>>,
    found: HashMap<AssetId<Image>, wgpu::Texture>,
}

/// A pack: its table of contents, read at once, and the runtime's handle on
/// it, opened with the runtime.
struct PackEntry {
    path: PathBuf,
    toc: Arc<Pack>,
    file: Option<Arc<PackFile>>,
}

/// One streamed image.
struct Streamed {
    pack: usize,
    asset: PackAssetId,
    name: String,
    info: TextureInfo,
    image: Handle<Image>,
    /// Found once Bevy has created the texture; until then the texture is
    /// not in the residency plan.
    texture: Option<wgpu::Texture>,
    residency: Option<usize>,
    /// Requests of the in-flight mip not yet finished, and whether one
    /// failed.
    outstanding: u32,
    failed: bool,
}

/// One request waiting for the per-frame cap.
struct Waiting {
    texture: usize,
    source: Source,
    mip: u8,
    origin: (u32, u32),
}

/// One frame's requests, drawable once the fence reaches `value`.
struct Batch {
    value: u64,
    submitted: Instant,
    reached: Arc<Mutex<Option<Instant>>>,
    status: StatusArray,
    /// (texture, requests) per status entry, in enqueue order.
    entries: Vec<(usize, u32)>,
}

struct Gpu {
    // Dropped after the queue (field order): the runtime waits for every
    // submitted request when it goes.
    queue: Queue,
    _runtime: Runtime,
}

/// The plugin's state: packs, streamed images, the residency plan and the
/// gpustream queue. Add packs and load textures through it.
#[derive(Resource)]
pub struct TextureStreamer {
    settings: GpuStreamPlugin,
    packs: Vec<PackEntry>,
    textures: Vec<Streamed>,
    by_image: HashMap<AssetId<Image>, usize>,
    residency: Residency,
    gpu: Option<Gpu>,
    fence: Fence,
    next_value: u64,
    batches: VecDeque<Batch>,
    waiting: VecDeque<Waiting>,
    shared: SharedGpuTextures,
    /// Images whose resident range changed since the views were updated.
    changed: Vec<usize>,
    frame: u64,
    stats: StreamingStats,
    runtime_error: Option<String>,
}

impl TextureStreamer {
    pub(crate) fn new(settings: GpuStreamPlugin, shared: SharedGpuTextures) -> TextureStreamer {
        let budget = if settings.preload_all {
            u64::MAX
        } else {
            settings.budget_bytes
        };
        TextureStreamer {
            settings,
            packs: Vec::new(),
            textures: Vec::new(),
            by_image: HashMap::new(),
            residency: Residency::new(budget),
            gpu: None,
            fence: Fence::new(),
            next_value: 1,
            batches: VecDeque::new(),
            waiting: VecDeque::new(),
            shared,
            changed: Vec::new(),
            frame: 0,
            stats: StreamingStats::default(),
            runtime_error: None,
        }
    }

    /// Reads a pack's table of contents (a small read; the texel data
    /// streams later).
    pub fn add_pack(&mut self, path: impl AsRef<Path>) -> Result<PackId, StreamError> {
        let path = path.as_ref().to_path_buf();
        let toc = Pack::open(&path).map_err(|source| StreamError::Pack {
            path: path.clone(),
            source,
        })?;
        self.packs.push(PackEntry {
            path,
            toc: Arc::new(toc),
            file: None,
        });
        Ok(PackId(self.packs.len() - 1))
    }

    /// The names of a pack's texture assets.
    pub fn texture_names(&self, pack: PackId) -> Vec<String> {
        self.packs[pack.0]
            .toc
            .assets()
            .iter()
            .filter(|a| a.texture.is_some())
            .map(|a| a.name.clone())
            .collect()
    }

    /// A texture of the pack as a Bevy image, usable by `StandardMaterial`.
    /// Its GPU texture has the whole mip chain; the packed tail streams in
    /// first and finer mips follow what the screen needs. Loading one name
    /// twice gives the same handle.
    pub fn load(
        &mut self,
        images: &mut Assets<Image>,
        pack: PackId,
        name: &str,
    ) -> Result<Handle<Image>, StreamError> {
        if let Some(t) = self
            .textures
            .iter()
            .find(|t| t.pack == pack.0 && t.name == name)
        {
            return Ok(t.image.clone());
        }
        let entry = &self.packs[pack.0];
        let asset = entry
            .toc
            .find(name)
            .ok_or_else(|| StreamError::NoSuchAsset {
                path: entry.path.clone(),
                name: name.to_string(),
            })?;
        let info = entry
            .toc
            .asset(asset)
            .texture
            // A chain of no mips has nothing to sample (a pack that passed
            // validation has none; the check keeps the plan's rule simple).
            .filter(|t| t.mip_count > 0)
            .ok_or_else(|| StreamError::NotATexture {
                path: entry.path.clone(),
                name: name.to_string(),
            })?;
        let image = images.add(streamed_image(&info, self.settings.extra_texture_usages));
        let index = self.textures.len();
        self.by_image.insert(image.id(), index);
        self.shared
            .0
            .lock()
            .expect("not poisoned")
            .wanted
            .push(image.id());
        self.stats.allocated_bytes += full_chain_bytes(&info);
        self.textures.push(Streamed {
            pack: pack.0,
            asset,
            name: name.to_string(),
            info,
            image: image.clone(),
            texture: None,
            residency: None,
            outstanding: 0,
            failed: false,
        });
        Ok(image)
    }

    /// Streaming figures.
    pub fn stats(&self) -> StreamingStats {
        let mut s = self.stats.clone();
        s.resident_bytes = self.residency.resident_bytes();
        s.in_flight_bytes = self.residency.in_flight_bytes();
        s.budget_bytes = self.residency.budget();
        s.waiting_requests = self.waiting.len() as u64;
        s
    }

    /// Sets the budget in bytes. A lower budget evicts as loads need room.
    pub fn set_budget(&mut self, bytes: u64) {
        self.residency.set_budget(bytes);
    }

    /// Bytes every texture's packed tail takes: the least budget with which
    /// every texture added so far has something to sample.
    pub fn floor_bytes(&self) -> u64 {
        self.textures
            .iter()
            .map(|t| tail_bytes(&self.packs[t.pack].toc, t.asset, &t.info))
            .sum()
    }

    /// Which mips of a streamed image are resident.
    pub fn residency(&self, image: &Handle<Image>) -> Option<MipResidency> {
        let t = &self.textures[*self.by_image.get(&image.id())?];
        let floor = floor_mip(&self.packs[t.pack].toc, t.asset, &t.info);
        let (base, in_flight) = match t.residency {
            Some(r) => {
                let r = self.residency.texture(r);
                (r.base(), r.in_flight())
            }
            None => (None, None),
        };
        Some(MipResidency {
            mip_count: t.info.mip_count,
            base,
            in_flight,
            floor,
        })
    }

    /// Every streamed image, with the pack asset it streams.
    pub fn images(&self) -> impl Iterator<Item = (&Handle<Image>, &str)> {
        self.textures.iter().map(|t| (&t.image, t.name.as_str()))
    }

    /// The pack file a streamed image comes from.
    pub fn pack_path(&self, image: &Handle<Image>) -> Option<&Path> {
        let t = &self.textures[*self.by_image.get(&image.id())?];
        Some(&self.packs[t.pack].path)
    }

    /// The GPU texture behind a streamed image, once Bevy has created it:
    /// for reading it back, or for render code of the app's own.
    pub fn gpu_texture(&self, image: &Handle<Image>) -> Option<wgpu::Texture> {
        self.textures[*self.by_image.get(&image.id())?]
            .texture
            .clone()
    }

    /// Why the gpustream runtime could not start, if it could not.
    pub fn runtime_error(&self) -> Option<&str> {
        self.runtime_error.as_deref()
    }

    /// True once every streamed image has all of its mips resident (with
    /// [`GpuStreamPlugin::preload_all`], the end of loading).
    pub fn all_resident(&self) -> bool {
        self.textures.iter().all(|t| {
            t.residency
                .is_some_and(|r| self.residency.texture(r).base() == Some(0))
        })
    }

    pub(crate) fn texture_index(&self, image: AssetId<Image>) -> Option<usize> {
        self.by_image.get(&image).copied()
    }

    /// Records the wanted mip of a streamed texture this frame.
    pub(crate) fn want(&mut self, texture: usize, mip: u8) {
        if let Some(r) = self.textures[texture].residency {
            self.residency.want(r, mip, self.frame);
        }
    }

    pub(crate) fn settings(&self) -> &GpuStreamPlugin {
        &self.settings
    }

    pub(crate) fn texture_width(&self, texture: usize) -> u32 {
        let info = &self.textures[texture].info;
        info.width.max(info.height)
    }

    /// Images whose view must move, with their finest resident mip.
    pub(crate) fn take_changed(&mut self) -> Vec<(Handle<Image>, u8, u8)> {
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        changed
            .into_iter()
            .filter_map(|i| {
                let t = &self.textures[i];
                let base = self.residency.texture(t.residency?).base()?;
                Some((t.image.clone(), base, t.info.mip_count))
            })
            .collect()
    }
}

/// The Bevy image of a streamed texture: no CPU data (Bevy creates the
/// texture with every level and keeps it across view changes), a view of
/// the smallest mip until the tail lands, and a trilinear, repeating sampler.
fn streamed_image(info: &TextureInfo, extra: wgpu::TextureUsages) -> Image {
    let mut image = Image::default_uninit();
    image.texture_descriptor = wgpu::TextureDescriptor {
        label: None,
        size: info.extent(),
        mip_level_count: u32::from(info.mip_count),
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: info.format.wgpu(),
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST | extra,
        view_formats: &[],
    };
    image.texture_view_descriptor = Some(crate::view::view_of(
        info.mip_count.saturating_sub(1),
        info.mip_count,
    ));
    image.asset_usage = RenderAssetUsages::default();
    image.sampler = ImageSampler::Descriptor(ImageSamplerDescriptor {
        label: None,
        address_mode_u: ImageAddressMode::Repeat,
        address_mode_v: ImageAddressMode::Repeat,
        mag_filter: ImageFilterMode::Linear,
        min_filter: ImageFilterMode::Linear,
        mipmap_filter: ImageFilterMode::Linear,
        anisotropy_clamp: 1,
        ..ImageSamplerDescriptor::default()
    });
    image
}

fn full_chain_bytes(info: &TextureInfo) -> u64 {
    (0..info.mip_count)
        .map(|m| {
            let (w, h) = info.mip_extent(m);
            info.format.data_size(w, h)
        })
        .sum()
}

/// The first mip of the packed tail, or the smallest mip when every mip is
/// tiled.
fn floor_mip(pack: &Pack, asset: PackAssetId, info: &TextureInfo) -> u8 {
    pack.packed_mips(asset)
        .ok()
        .and_then(|p| p.mips.first().map(|m| m.mip))
        .unwrap_or(info.mip_count.saturating_sub(1))
}

fn tail_bytes(pack: &Pack, asset: PackAssetId, info: &TextureInfo) -> u64 {
    let floor = floor_mip(pack, asset, info);
    (floor..info.mip_count)
        .map(|m| {
            let (w, h) = info.mip_extent(m);
            info.format.data_size(w, h)
        })
        .sum()
}

/// Render world: streamed images' `wgpu::Texture`s, once Bevy has made them.
pub(crate) fn share_gpu_textures(
    shared: Res<SharedGpuTextures>,
    images: Res<RenderAssets<GpuImage>>,
) {
    let mut inner = shared.0.lock().expect("not poisoned");
    let SharedInner { wanted, found } = &mut *inner;
    wanted.retain(|id| match images.get(*id) {
        Some(gpu) => {
            found.insert(*id, (*gpu.texture).clone());
            false
        }
        None => true,
    });
}

/// Makes the gpustream runtime on Bevy's own device and queue once the
/// renderer exists, and opens the packs for streaming.
pub(crate) fn start_runtime(
    mut streamer: ResMut<TextureStreamer>,
    device: Option<Res<RenderDevice>>,
    queue: Option<Res<RenderQueue>>,
) {
    if streamer.gpu.is_some() || streamer.runtime_error.is_some() {
        return;
    }
    let (Some(device), Some(queue)) = (device, queue) else {
        return;
    };
    let wgpu_queue: &wgpu::Queue = &queue;
    let runtime = match Runtime::new(
        device.wgpu_device(),
        wgpu_queue,
        streamer.settings.runtime.clone(),
    ) {
        Ok(r) => r,
        Err(e) => {
            error!("gpustream runtime did not start: {e}");
            streamer.runtime_error = Some(e.to_string());
            return;
        }
    };
    let queue = runtime.create_queue(QueueConfig {
        capacity: (streamer.settings.max_requests_per_frame * 8).clamp(128, 8192),
        priority: Priority::High,
        name: Some("bevy textures".into()),
        ..QueueConfig::default()
    });
    streamer.gpu = Some(Gpu {
        queue,
        _runtime: runtime,
    });
    open_pack_files(&mut streamer);
}

fn open_pack_files(streamer: &mut TextureStreamer) {
    let Some(gpu) = &streamer.gpu else { return };
    let runtime = &gpu._runtime;
    let mut errors = Vec::new();
    for p in streamer.packs.iter_mut().filter(|p| p.file.is_none()) {
        match runtime.open_pack(&p.path) {
            Ok(f) => p.file = Some(f),
            Err(e) => errors.push(format!("{}: {e}", p.path.display())),
        }
    }
    for e in errors {
        error!("gpustream could not open pack {e}");
    }
}

/// Reads the fence (never waits) and makes the mips of every batch it
/// covers resident.
pub(crate) fn land(mut streamer: ResMut<TextureStreamer>) {
    let streamer = &mut *streamer;
    streamer.frame += 1;
    streamer.stats.bytes_landed_last_frame = 0;
    streamer.stats.fence_latency_last_frame = None;
    let reached = streamer.fence.completed_value();
    let now = Instant::now();
    while streamer.batches.front().is_some_and(|b| b.value <= reached) {
        let Some(batch) = streamer.batches.pop_front() else {
            break;
        };
        let at = batch.reached.lock().expect("not poisoned").unwrap_or(now);
        let latency = at.saturating_duration_since(batch.submitted);
        let worst = streamer
            .stats
            .fence_latency_last_frame
            .get_or_insert(latency);
        *worst = (*worst).max(latency);
        for (i, &(texture, requests)) in batch.entries.iter().enumerate() {
            let ok = matches!(batch.status.get(i), StatusEntry::Ok);
            if !ok {
                streamer.stats.failed_requests += u64::from(requests);
            }
            finish_requests(streamer, texture, requests, ok);
        }
    }
    if let Some(gpu) = &streamer.gpu {
        let record = gpu.queue.error_record();
        if let Some(first) = record.first_failure {
            warn!(
                "{} gpustream requests failed; first: {first}",
                record.failure_count
            );
        }
    }
}

/// `requests` of a texture's in-flight mip finished; once all have, the mip
/// is resident (or, if one failed, released).
fn finish_requests(streamer: &mut TextureStreamer, texture: usize, requests: u32, ok: bool) {
    let t = &mut streamer.textures[texture];
    t.outstanding = t.outstanding.saturating_sub(requests);
    t.failed |= !ok;
    if t.outstanding > 0 {
        return;
    }
    let Some(r) = t.residency else { return };
    let failed = std::mem::take(&mut t.failed);
    let Some(mip) = streamer.residency.texture(r).in_flight() else {
        return;
    };
    let bytes = streamer.residency.texture(r).unit_bytes(mip);
    streamer.residency.landed(r, !failed);
    if !failed {
        streamer.stats.mips_loaded += 1;
        streamer.stats.bytes_landed += bytes;
        streamer.stats.bytes_landed_last_frame += bytes;
        streamer.changed.push(texture);
    }
}

/// Takes in the GPU textures Bevy has made, plans loads and evictions, and
/// sends at most the per-frame cap of requests with one fence signal.
pub(crate) fn request(mut streamer: ResMut<TextureStreamer>) {
    let streamer = &mut *streamer;
    streamer.stats.requests_last_frame = 0;
    if streamer.gpu.is_none() {
        return;
    }
    adopt_gpu_textures(streamer);
    if streamer.settings.preload_all {
        for t in 0..streamer.textures.len() {
            if let Some(r) = streamer.textures[t].residency {
                streamer.residency.want(r, 0, streamer.frame);
            }
        }
    }
    let cap = streamer.settings.max_requests_per_frame.max(1);
    // Plan only while the backlog is under a frame's worth, so what waits
    // reflects the screen of a few frames ago at most.
    if streamer.waiting.len() < cap {
        let changes = streamer.residency.plan(streamer.frame, cap);
        for change in changes {
            match change {
                Change::Evict { texture, .. } => {
                    let index = streamer
                        .textures
                        .iter()
                        .position(|t| t.residency == Some(texture));
                    if let Some(i) = index {
                        streamer.changed.push(i);
                        streamer.stats.mips_evicted += 1;
                    }
                }
                Change::Load { texture, mip } => {
                    let index = streamer
                        .textures
                        .iter()
                        .position(|t| t.residency == Some(texture));
                    if let Some(i) = index {
                        queue_mip(streamer, i, mip);
                    }
                }
            }
        }
    }
    send(streamer, cap);
}

/// Textures Bevy has created since the last frame join the residency plan.
fn adopt_gpu_textures(streamer: &mut TextureStreamer) {
    let mut found = std::mem::take(&mut streamer.shared.0.lock().expect("not poisoned").found);
    if found.is_empty() {
        return;
    }
    open_pack_files(streamer);
    for (id, texture) in found.drain() {
        let Some(&i) = streamer.by_image.get(&id) else {
            continue;
        };
        let t = &streamer.textures[i];
        let pack = &streamer.packs[t.pack].toc;
        let bytes = (0..t.info.mip_count)
            .map(|m| {
                let (w, h) = t.info.mip_extent(m);
                t.info.format.data_size(w, h)
            })
            .collect();
        let floor = floor_mip(pack, t.asset, &t.info);
        let r = streamer.residency.add(TextureResidency::new(bytes, floor));
        let t = &mut streamer.textures[i];
        t.texture = Some(texture);
        t.residency = Some(r);
    }
}

/// The requests that load `mip` (every tile of it, or the packed tail at
/// the floor) join the waiting line.
fn queue_mip(streamer: &mut TextureStreamer, texture: usize, mip: u8) {
    let t = &streamer.textures[texture];
    let entry = &streamer.packs[t.pack];
    let Some(file) = entry.file.clone() else {
        // Cannot happen: textures join the plan after the packs open. Release
        // the reservation rather than hold it forever.
        let r = t.residency.expect("planned textures have residency");
        streamer.residency.landed(r, false);
        return;
    };
    let mut requests = Vec::new();
    let packed_first = file
        .packed_mips(t.asset)
        .ok()
        .and_then(|p| p.mips.first().map(|m| m.mip));
    if packed_first == Some(mip) {
        requests.push((
            Source::PackedMips {
                pack: file.clone(),
                asset: t.asset,
            },
            mip,
            (0, 0),
        ));
    } else if let Ok(Some((tx, ty))) = file.tile_grid(t.asset, mip) {
        for y in 0..ty {
            for x in 0..tx {
                let Ok(region) = file.tile_region(t.asset, mip, x, y) else {
                    continue;
                };
                requests.push((
                    Source::Tile {
                        pack: file.clone(),
                        asset: t.asset,
                        mip,
                        x,
                        y,
                    },
                    mip,
                    (region.x, region.y),
                ));
            }
        }
    }
    if requests.is_empty() {
        let r = t.residency.expect("planned textures have residency");
        streamer.residency.landed(r, false);
        return;
    }
    streamer.textures[texture].outstanding = requests.len() as u32;
    streamer.textures[texture].failed = false;
    for (source, mip, origin) in requests {
        streamer.waiting.push_back(Waiting {
            texture,
            source,
            mip,
            origin,
        });
    }
}

/// Sends up to `cap` waiting requests, a status entry per run of one
/// texture's requests, one fence signal and one submit.
fn send(streamer: &mut TextureStreamer, cap: usize) {
    let Some(gpu) = &streamer.gpu else { return };
    let n = cap.min(streamer.waiting.len());
    let mut runs: Vec<Vec<Waiting>> = Vec::new();
    for w in streamer.waiting.drain(..n) {
        match runs.last_mut() {
            Some(run) if run[0].texture == w.texture => run.push(w),
            _ => runs.push(vec![w]),
        }
    }
    let status = StatusArray::new(runs.len().max(1));
    let mut sent: Vec<(usize, u32)> = Vec::new();
    let mut refused: Vec<usize> = Vec::new();
    let submitted = Instant::now();
    for run in runs {
        let texture_index = run[0].texture;
        let mut count = 0;
        for w in run {
            let Some(texture) = streamer.textures[w.texture].texture.clone() else {
                refused.push(w.texture);
                continue;
            };
            let request = Request::new(
                w.source,
                Destination::Texture {
                    texture,
                    mip: u32::from(w.mip),
                    origin: wgpu::Origin3d {
                        x: w.origin.0,
                        y: w.origin.1,
                        z: 0,
                    },
                    extent: None,
                },
            )
            .with_tag(w.texture as u64);
            match gpu.queue.enqueue(request) {
                Ok(()) => count += 1,
                Err(e) => {
                    warn!(
                        "gpustream refused a request for {}: {e}",
                        streamer.textures[w.texture].name
                    );
                    refused.push(w.texture);
                }
            }
        }
        if count > 0 {
            // Entry i covers the requests since entry i - 1: this run.
            gpu.queue.enqueue_status(&status, sent.len());
            sent.push((texture_index, count));
        }
    }
    let count: u32 = sent.iter().map(|&(_, c)| c).sum();
    streamer.stats.requests_last_frame = u64::from(count);
    streamer.stats.requests += u64::from(count);
    if !sent.is_empty() {
        let value = streamer.next_value;
        streamer.next_value += 1;
        gpu.queue.enqueue_signal(&streamer.fence, value);
        gpu.queue.submit();
        let reached = Arc::new(Mutex::new(None));
        let slot = reached.clone();
        // Runs on the runtime's completion thread: a timestamp, nothing more.
        streamer.fence.on_reached(value, move |_| {
            if let Ok(mut s) = slot.lock() {
                *s = Some(Instant::now());
            }
        });
        streamer.batches.push_back(Batch {
            value,
            submitted,
            reached,
            status,
            entries: sent,
        });
    }
    for texture in refused {
        streamer.stats.failed_requests += 1;
        finish_requests(streamer, texture, 1, false);
    }
}
