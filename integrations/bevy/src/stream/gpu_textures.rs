//! Streamed images' `wgpu::Texture`s, found in the render world once Bevy
//! has created them and handed to the main world, which aims requests at
//! them. The two worlds share one small mutex-guarded table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bevy::prelude::*;
use bevy::render::render_asset::RenderAssets;
use bevy::render::texture::GpuImage;

/// The table both worlds hold: images whose textures are wanted, and the
/// textures found since the main world last took them.
#[derive(Resource, Clone, Default)]
pub(crate) struct SharedGpuTextures(Arc<Mutex<SharedInner>>);

#[derive(Default)]
struct SharedInner {
    wanted: Vec<AssetId<Image>>,
    found: HashMap<AssetId<Image>, wgpu::Texture>,
}

impl SharedGpuTextures {
    /// Asks the render world for an image's texture.
    pub(super) fn want(&self, image: AssetId<Image>) {
        self.0.lock().expect("not poisoned").wanted.push(image);
    }

    /// The textures found since the last call.
    pub(super) fn take_found(&self) -> HashMap<AssetId<Image>, wgpu::Texture> {
        std::mem::take(&mut self.0.lock().expect("not poisoned").found)
    }
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
