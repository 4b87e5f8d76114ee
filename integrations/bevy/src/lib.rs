//! `gpustream-bevy`: a Bevy plugin that streams textures from gpustream
//! packs (`.gspk`) mip by mip, within a GPU memory budget the application
//! sets.
//!
//! Register a pack as an asset source (before `DefaultPlugins`, which
//! builds the sources) and load its textures through the `AssetServer`:
//!
//! ```no_run
//! use bevy::prelude::*;
//! use gpustream_bevy::{GpuStreamPlugin, PackSourceAppExt};
//!
//! fn main() {
//!     App::new()
//!         .register_pack_source("level1", "assets/level1.gspk")
//!         .expect("the pack opens")
//!         .add_plugins(DefaultPlugins)
//!         .add_plugins(GpuStreamPlugin {
//!             budget_bytes: 64 << 20,
//!             ..GpuStreamPlugin::default()
//!         })
//!         .add_systems(Startup, setup)
//!         .run();
//! }
//!
//! fn setup(server: Res<AssetServer>, mut materials: ResMut<Assets<StandardMaterial>>) {
//!     let image: Handle<Image> = server.load("level1://bricks.png");
//!     materials.add(StandardMaterial { base_color_texture: Some(image), ..default() });
//! }
//! ```
//!
//! A texture of the pack loads as a streamed image (no CPU data, its full
//! chain allocated, mips streamed by on-screen need); a blob of the pack
//! loads with whatever Bevy loader its name's extension picks. See
//! [`PackSourceAppExt`] for what the source serves.
//!
//! Or, without the asset server, through the streamer itself:
//!
//! ```no_run
//! use bevy::prelude::*;
//! use gpustream_bevy::TextureStreamer;
//!
//! fn setup(
//!     mut streamer: ResMut<TextureStreamer>,
//!     mut images: ResMut<Assets<Image>>,
//!     mut materials: ResMut<Assets<StandardMaterial>>,
//! ) {
//!     let pack = streamer.add_pack("assets/level1.gspk").expect("the pack opens");
//!     let image = streamer.load(&mut images, pack, "bricks.png").expect("the pack has it");
//!     materials.add(StandardMaterial { base_color_texture: Some(image), ..default() });
//! }
//! ```
//!
//! How it works, in the order a frame runs it (each step its own module):
//!
//! 0. `loader`: images the asset server loaded from a pack source are
//!    handed to the [`TextureStreamer`].
//! 1. `land` ([`stream`]): the gpustream fence is read, never waited on;
//!    mips whose requests all finished become resident.
//! 2. [`need`]: every visible mesh whose `StandardMaterial` samples a
//!    streamed image says which mip its on-screen size wants (distance and
//!    texel density).
//! 3. `residency`: loads go to the textures furthest from what the screen
//!    wants; room is made by evicting least recently used mips; the bytes of
//!    resident and in-flight mips never pass the budget.
//! 4. `queue` ([`stream`]): the loads become tile requests on one
//!    gpustream queue, at most [`GpuStreamPlugin::max_requests_per_frame`]
//!    a frame, with one fence value per frame.
//! 5. [`view`]: an image whose residency changed gets a texture view whose
//!    `base_mip_level` is its finest resident mip, so mips that are absent
//!    are never sampled.
//!
//! # GPU memory and the budget
//!
//! Each streamed image's `wgpu::Texture` is created once with its whole mip
//! chain (wgpu has no sparse textures), and residency only moves the view's
//! first level. The budget therefore counts the bytes of mip levels that are
//! *resident or on their way*, which is what a sparse or reallocating
//! texture would occupy, and bounds what is read from disk and sampled; the
//! full chains are allocated regardless and reported apart, as
//! [`StreamingStats::allocated_bytes`] and the
//! [`ALLOCATED_BYTES`](diagnostics::ALLOCATED_BYTES) diagnostic.

pub mod diagnostics;
mod loader;
pub mod need;
mod packs;
pub(crate) mod residency;
mod source;
pub mod stream;
pub mod view;

use bevy::asset::AssetApp;
use bevy::prelude::*;
use bevy::render::{Render, RenderApp, RenderSystems};

pub use loader::{StreamedTextureError, StreamedTextureLoader};
pub use need::TexelDensity;
pub use source::{PackSourceAppExt, PackSourceError};
pub use stream::{MipResidency, PackId, StreamError, StreamingStats, TextureStreamer};

/// The plugin. Add it after `DefaultPlugins` (it needs the render device,
/// and registers [`StreamedTextureLoader`] with the asset server); register
/// pack asset sources before `DefaultPlugins` ([`PackSourceAppExt`]).
#[derive(Clone)]
pub struct GpuStreamPlugin {
    /// Bytes of resident and in-flight mip levels, over every streamed
    /// texture, never to be passed. It should at least hold every texture's
    /// packed tail (the mips smaller than a tile, loaded first and never
    /// evicted); a texture whose tail does not fit stays unloaded.
    pub budget_bytes: u64,
    /// Requests (tiles, or one packed tail) sent to gpustream per frame at
    /// most. A mip of more tiles than this is sent over several frames.
    pub max_requests_per_frame: usize,
    /// Added to every wanted mip: positive streams coarser mips.
    pub mip_bias: f32,
    /// Loads every mip of every texture and never evicts: the baseline the
    /// streaming is measured against, and a mode for small scenes.
    pub preload_all: bool,
    /// Usages added to the streamed textures (for example `COPY_SRC` to read
    /// them back); `TEXTURE_BINDING | COPY_DST` are always set.
    pub extra_texture_usages: wgpu::TextureUsages,
    /// The gpustream runtime's settings (staging size, threads).
    pub runtime: gpustream::prelude::RuntimeConfig,
}

impl Default for GpuStreamPlugin {
    fn default() -> Self {
        GpuStreamPlugin {
            budget_bytes: 256 << 20,
            max_requests_per_frame: 32,
            mip_bias: 0.0,
            preload_all: false,
            extra_texture_usages: wgpu::TextureUsages::empty(),
            runtime: gpustream::prelude::RuntimeConfig::default()
                // Tiles are 64 KiB; a frame's requests fit many times over.
                .with_staging_size(16 << 20),
        }
    }
}

/// The system sets the plugin runs in `PostUpdate`, in this order, after
/// visibility is computed. Order app systems that read
/// [`TextureStreamer`]'s figures after [`StreamingSystems::View`].
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamingSystems {
    /// Reads the fence and promotes landed mips.
    Land,
    /// Computes each texture's wanted mip from the screen.
    Need,
    /// Plans loads and evictions and sends this frame's requests.
    Request,
    /// Moves the views of images whose residency changed.
    View,
}

impl Plugin for GpuStreamPlugin {
    fn build(&self, app: &mut App) {
        let shared = stream::SharedGpuTextures::default();
        app.insert_resource(TextureStreamer::new(self.clone(), shared.clone()))
            .init_resource::<view::MovedLastFrame>()
            .configure_sets(
                PostUpdate,
                (
                    StreamingSystems::Land,
                    StreamingSystems::Need,
                    StreamingSystems::Request,
                    StreamingSystems::View,
                )
                    .chain()
                    .after(bevy::camera::visibility::VisibilitySystems::CheckVisibility)
                    .after(bevy::transform::TransformSystems::Propagate),
            )
            .add_systems(
                PostUpdate,
                (
                    stream::start_runtime.before(StreamingSystems::Land),
                    stream::land.in_set(StreamingSystems::Land),
                    need::compute_need.in_set(StreamingSystems::Need),
                    stream::request.in_set(StreamingSystems::Request),
                    view::update_views.in_set(StreamingSystems::View),
                    diagnostics::measure.after(StreamingSystems::View),
                ),
            );
        diagnostics::register(app);
        // Pack asset sources: their textures' meta names this loader, and
        // the images it makes are handed to the streamer once loaded.
        if app.world().contains_resource::<AssetServer>() {
            app.register_asset_loader(loader::StreamedTextureLoader {
                extra_usages: self.extra_texture_usages,
            })
            .add_systems(
                PostUpdate,
                loader::adopt_loaded_images.before(StreamingSystems::Land),
            );
        }
        if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
            render_app.insert_resource(shared).add_systems(
                Render,
                stream::share_gpu_textures.in_set(RenderSystems::PrepareResources),
            );
        }
    }
}
