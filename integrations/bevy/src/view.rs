//! Keeps each streamed image's texture view on its resident mips: the view
//! starts at the finest resident mip (`base_mip_level`), so a level that has
//! not arrived, or was evicted, is never sampled. Bevy keeps the texture
//! when only the view descriptor of an image without CPU data changes
//! (`GpuImage::prepare_asset` reuses it), so a move costs a new view, and
//! the materials that sample the image are marked changed so their bind
//! groups pick the new view up.
//!
//! The materials are marked one frame after their images: Bevy prepares
//! materials and images in the same system set with no order between them,
//! so a material prepared in the frame its image changed may bind the old
//! view (seen as textures stuck on their smallest mip).

use std::collections::HashSet;

use bevy::prelude::*;

use crate::stream::TextureStreamer;

/// Images whose view moved in the previous frame: their materials are
/// marked changed this frame.
#[derive(Resource, Default)]
pub(crate) struct MovedLastFrame(HashSet<AssetId<Image>>);

/// A view of mips `base..mip_count` (it lives with the streamed image it
/// describes).
pub use crate::stream::image::view_of;

/// Moves the views of images whose residency changed this frame.
pub(crate) fn update_views(
    mut streamer: ResMut<TextureStreamer>,
    mut images: ResMut<Assets<Image>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut moved: ResMut<MovedLastFrame>,
) {
    // The previous frame's images are prepared by now: rebind their users.
    let ids = std::mem::take(&mut moved.0);
    let changed = streamer.take_changed();
    for (handle, base, mip_count) in changed {
        let view = view_of(base, mip_count);
        let Some(mut image) = images.get_mut(&handle) else {
            continue;
        };
        if image
            .texture_view_descriptor
            .as_ref()
            .map(|v| v.base_mip_level)
            != Some(view.base_mip_level)
        {
            image.texture_view_descriptor = Some(view);
            moved.0.insert(handle.id());
        }
    }
    if ids.is_empty() {
        return;
    }
    let users: Vec<AssetId<StandardMaterial>> = materials
        .iter()
        .filter(|(_, m)| {
            [
                &m.base_color_texture,
                &m.normal_map_texture,
                &m.emissive_texture,
                &m.metallic_roughness_texture,
                &m.occlusion_texture,
            ]
            .into_iter()
            .flatten()
            .any(|h| ids.contains(&h.id()))
        })
        .map(|(id, _)| id)
        .collect();
    for id in users {
        // A mutable borrow marks the material changed (a `get_mut` alone
        // does not): Bevy rebuilds its bind group with the image's new view.
        if let Some(mut material) = materials.get_mut(id) {
            let _: &mut StandardMaterial = &mut material;
        }
    }
}
