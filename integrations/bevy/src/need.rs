//! What the screen needs: for every visible mesh whose `StandardMaterial`
//! samples a streamed image, the mip at which one texel covers about one
//! pixel, from the mesh's distance to the camera and its texel density.

use bevy::camera::primitives::Aabb;
use bevy::camera::visibility::ViewVisibility;
use bevy::prelude::*;

use crate::stream::TextureStreamer;

/// World units one repeat of the texture (UV 0..1) spans on this mesh.
/// Without it the mesh's largest bounding-box side is used, right for a
/// mesh whose UVs span it once (Bevy's cuboids, planes and spheres).
#[derive(Component, Clone, Copy, Debug)]
pub struct TexelDensity(pub f32);

/// The mip a surface wants: `log2(texels per pixel)`, with `bias` added,
/// from the texture's width in texels, the world size one texture repeat
/// spans, the distance, and the camera's pixels per world unit at distance
/// one (`viewport height / (2 tan(fov / 2))`).
pub fn wanted_mip(
    texture_width: u32,
    span: f32,
    distance: f32,
    pixels_per_unit_at_one: f32,
    bias: f32,
) -> u8 {
    let texels_per_unit = texture_width as f32 / span.max(1e-6);
    let pixels_per_unit = pixels_per_unit_at_one / distance.max(1e-3);
    let mip = (texels_per_unit / pixels_per_unit).log2() + bias;
    if mip.is_nan() || mip <= 0.0 {
        0
    } else {
        mip.min(31.0) as u8
    }
}

type Surfaces<'w, 's> = Query<
    'w,
    's,
    (
        &'static MeshMaterial3d<StandardMaterial>,
        &'static GlobalTransform,
        &'static ViewVisibility,
        Option<&'static Aabb>,
        Option<&'static TexelDensity>,
    ),
>;

/// Records each streamed texture's wanted mip for this frame.
pub(crate) fn compute_need(
    mut streamer: ResMut<TextureStreamer>,
    cameras: Query<(&Camera, &GlobalTransform, &Projection)>,
    surfaces: Surfaces,
    materials: Res<Assets<StandardMaterial>>,
) {
    let Some((camera, eye, projection)) = cameras
        .iter()
        .filter(|(c, _, _)| c.is_active)
        .max_by_key(|(c, _, _)| c.order)
    else {
        return;
    };
    let Some(viewport) = camera.physical_viewport_size() else {
        return;
    };
    let fov = match projection {
        Projection::Perspective(p) => p.fov,
        // Orthographic and custom projections: treat as a 45 degree view.
        _ => std::f32::consts::FRAC_PI_4,
    };
    let pixels_at_one = viewport.y as f32 / (2.0 * (fov * 0.5).tan());
    let eye = eye.translation();
    let bias = streamer.settings().mip_bias;
    for (material, transform, visibility, aabb, density) in &surfaces {
        if !visibility.get() {
            continue;
        }
        let Some(material) = materials.get(&material.0) else {
            continue;
        };
        let (scale, _, translation) = transform.to_scale_rotation_translation();
        let (center, half) = match aabb {
            Some(a) => (
                transform.transform_point(Vec3::from(a.center)),
                Vec3::from(a.half_extents) * scale.abs(),
            ),
            None => (translation, scale.abs() * 0.5),
        };
        let radius = half.length();
        let distance = (center.distance(eye) - radius).max(0.05);
        let span = density.map_or(2.0 * half.max_element(), |d| d.0);
        for image in [
            &material.base_color_texture,
            &material.normal_map_texture,
            &material.emissive_texture,
            &material.metallic_roughness_texture,
            &material.occlusion_texture,
        ]
        .into_iter()
        .flatten()
        {
            let Some(texture) = streamer.texture_index(image.id()) else {
                continue;
            };
            let width = streamer.texture_width(texture);
            let mip = wanted_mip(width, span, distance, pixels_at_one, bias);
            streamer.want(texture, mip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wanted_mip;

    #[test]
    fn one_texel_per_pixel_is_mip_zero_and_each_doubling_of_distance_one_mip() {
        // 1024 texels over 1 unit; 1024 pixels per unit at distance 1.
        assert_eq!(wanted_mip(1024, 1.0, 1.0, 1024.0, 0.0), 0);
        assert_eq!(wanted_mip(1024, 1.0, 2.0, 1024.0, 0.0), 1);
        assert_eq!(wanted_mip(1024, 1.0, 8.0, 1024.0, 0.0), 3);
        assert_eq!(wanted_mip(1024, 1.0, 0.5, 1024.0, 0.0), 0);
        assert_eq!(wanted_mip(1024, 1.0, 8.0, 1024.0, -1.0), 2);
    }
}
