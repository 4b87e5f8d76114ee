//! The streamer: packs, streamed images and the bookkeeping that ties them
//! to the residency plan. Each frame's work lives in the stage files below
//! it, in the order a frame runs them:
//!
//! - `land`: the fence is read (never waited on) and landed batches
//!   become resident mips;
//! - `queue`: the loads the residency plan starts become tile requests,
//!   at most a frame's cap, with one fence value per frame;
//! - `gpu_textures`: the render world hands over the `wgpu::Texture`s
//!   Bevy made for streamed images;
//! - `image`: how a streamed texture's Bevy image is built.

mod gpu_textures;
pub(crate) mod image;
mod land;
mod queue;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bevy::prelude::*;
use gpustream::pack::{AssetId as PackAssetId, Pack, PackError, TextureInfo};
use gpustream::prelude::{Fence, PackFile};

use crate::residency::{Residency, TextureResidency};
use crate::GpuStreamPlugin;

pub(crate) use gpu_textures::{share_gpu_textures, SharedGpuTextures};
pub(crate) use land::land;
pub(crate) use queue::{request, start_runtime};

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

/// The plugin's state: packs, streamed images, the residency plan and the
/// gpustream queue. Add packs and load textures through it, or load them
/// through the `AssetServer` from a pack registered as an asset source
/// ([`crate::PackSourceAppExt`]); both end up here.
#[derive(Resource)]
pub struct TextureStreamer {
    settings: GpuStreamPlugin,
    packs: Vec<PackEntry>,
    textures: Vec<Streamed>,
    by_image: HashMap<AssetId<Image>, usize>,
    residency: Residency,
    gpu: Option<queue::Gpu>,
    fence: Fence,
    next_value: u64,
    batches: VecDeque<queue::Batch>,
    waiting: VecDeque<queue::Waiting>,
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
        Ok(self.push_pack(path, Arc::new(toc)))
    }

    fn push_pack(&mut self, path: PathBuf, toc: Arc<Pack>) -> PackId {
        self.packs.push(PackEntry {
            path,
            toc,
            file: None,
        });
        PackId(self.packs.len() - 1)
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
        let (asset, info) = self.texture_info(pack, name)?;
        let image = images.add(image::streamed_image(
            &info,
            self.settings.extra_texture_usages,
        ));
        self.track(pack, asset, name, info, image.clone());
        Ok(image)
    }

    /// Streams an image the asset server made from a pack asset source: the
    /// same bookkeeping as [`TextureStreamer::load`], for an image that
    /// already exists. `toc` is the source's table of contents, shared, so
    /// the pack is read once. Adopting an image twice does nothing.
    pub(crate) fn adopt(
        &mut self,
        image: Handle<Image>,
        path: &Path,
        toc: &Arc<Pack>,
        name: &str,
    ) -> Result<(), StreamError> {
        if self.by_image.contains_key(&image.id()) {
            return Ok(());
        }
        let pack = match self.packs.iter().position(|p| Arc::ptr_eq(&p.toc, toc)) {
            Some(i) => PackId(i),
            None => self.push_pack(path.to_path_buf(), toc.clone()),
        };
        let (asset, info) = self.texture_info(pack, name)?;
        self.track(pack, asset, name, info, image);
        Ok(())
    }

    /// A texture asset of a pack, with its geometry.
    fn texture_info(
        &self,
        pack: PackId,
        name: &str,
    ) -> Result<(PackAssetId, TextureInfo), StreamError> {
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
        Ok((asset, info))
    }

    /// Starts streaming an image: the render world is asked for its texture,
    /// which joins the residency plan once Bevy has made it.
    fn track(
        &mut self,
        pack: PackId,
        asset: PackAssetId,
        name: &str,
        info: TextureInfo,
        image: Handle<Image>,
    ) {
        self.by_image.insert(image.id(), self.textures.len());
        self.shared.want(image.id());
        self.stats.allocated_bytes += image::full_chain_bytes(&info);
        self.textures.push(Streamed {
            pack: pack.0,
            asset,
            name: name.to_string(),
            info,
            image,
            texture: None,
            residency: None,
            outstanding: 0,
            failed: false,
        });
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
            .map(|t| image::tail_bytes(&self.packs[t.pack].toc, t.asset, &t.info))
            .sum()
    }

    /// Which mips of a streamed image are resident.
    pub fn residency(&self, image: &Handle<Image>) -> Option<MipResidency> {
        let t = &self.textures[*self.by_image.get(&image.id())?];
        let floor = image::floor_mip(&self.packs[t.pack].toc, t.asset, &t.info);
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

    /// Opens, for streaming, the packs not opened yet (none can be before
    /// the runtime starts).
    fn open_pack_files(&mut self) {
        let Some(gpu) = &self.gpu else { return };
        for p in self.packs.iter_mut().filter(|p| p.file.is_none()) {
            match gpu.runtime.open_pack(&p.path) {
                Ok(f) => p.file = Some(f),
                Err(e) => error!("gpustream could not open pack {}: {e}", p.path.display()),
            }
        }
    }

    /// Textures Bevy has created since the last frame join the residency
    /// plan.
    fn join_created_textures(&mut self) {
        let found = self.shared.take_found();
        if found.is_empty() {
            return;
        }
        // Packs added after the runtime started open here, before their
        // textures can be planned.
        self.open_pack_files();
        for (id, texture) in found {
            let Some(&i) = self.by_image.get(&id) else {
                continue;
            };
            let t = &self.textures[i];
            let floor = image::floor_mip(&self.packs[t.pack].toc, t.asset, &t.info);
            let r = self
                .residency
                .add(TextureResidency::new(image::mip_bytes(&t.info), floor));
            let t = &mut self.textures[i];
            t.texture = Some(texture);
            t.residency = Some(r);
        }
    }

    /// The streamed texture a residency-plan entry belongs to.
    fn texture_of_residency(&self, residency: usize) -> Option<usize> {
        self.textures
            .iter()
            .position(|t| t.residency == Some(residency))
    }

    /// `requests` of a texture's in-flight mip finished; once all have, the
    /// mip is resident (or, if one failed, released).
    fn finish_requests(&mut self, texture: usize, requests: u32, ok: bool) {
        let t = &mut self.textures[texture];
        t.outstanding = t.outstanding.saturating_sub(requests);
        t.failed |= !ok;
        if t.outstanding > 0 {
            return;
        }
        let Some(r) = t.residency else { return };
        let failed = std::mem::take(&mut t.failed);
        let Some(mip) = self.residency.texture(r).in_flight() else {
            return;
        };
        let bytes = self.residency.texture(r).unit_bytes(mip);
        self.residency.landed(r, !failed);
        if !failed {
            self.stats.mips_loaded += 1;
            self.stats.bytes_landed += bytes;
            self.stats.bytes_landed_last_frame += bytes;
            self.changed.push(texture);
        }
    }
}
