//! The CPU reference a screenshot is checked against: for each pixel, the
//! ground point the camera's ray hits, and the tile colours the procedural
//! content may legally show there (any mip: residency decides which).
//! Used by the headless and the windowed tests.

use super::camera::Camera;
use super::content::{tile_interval, SceneConfig};

/// Per pixel of an RGBA8 `w` x `h` image seen by `cam`: sky must be the
/// clear colour, ground must match some mip's tile colour. Returns the
/// finest matching mip of every ground pixel and the count of pixels that
/// match nothing.
pub fn classify(
    rgba: &[u8],
    cam: &Camera,
    scene: &SceneConfig,
    w: u32,
    h: u32,
) -> (Vec<u8>, usize) {
    let mips = scene.mip_count();
    let mut matched = Vec::new();
    let mut bad = 0;
    for py in 0..h {
        for px in 0..w {
            let i = ((py * w + px) * 4) as usize;
            let p = &rgba[i..i + 3];
            let Some((tex, u, v)) = cam.ground_hit(scene.textures, px, py, w, h) else {
                if !p
                    .iter()
                    .zip([26u8, 26, 38])
                    .all(|(a, b)| a.abs_diff(b) <= 2)
                {
                    bad += 1;
                }
                continue;
            };
            // Any mip may legally show (residency decides); tiles on either
            // side of a nearby border too (GPU and CPU uv differ slightly).
            let hit = (0..mips).find(|&m| {
                let s = (scene.size >> m).max(1);
                let (tw, th) = scene.format.tile_extent();
                let (nx, ny) = ((s / tw).max(1), (s / th).max(1));
                let tiled = scene.format.data_size(s, s) >= gpustream::pack::TILE_BYTES as u64;
                [
                    (0.0, 0.0),
                    (-1e-3, -1e-3),
                    (1e-3, -1e-3),
                    (-1e-3, 1e-3),
                    (1e-3, 1e-3),
                ]
                .iter()
                .any(|(du, dv)| {
                    let (tx, ty) = if tiled {
                        (
                            (((u + du).clamp(0.0, 0.99999)) * nx as f32) as u32,
                            (((v + dv).clamp(0.0, 0.99999)) * ny as f32) as u32,
                        )
                    } else {
                        (0, 0)
                    };
                    let (lo, hi) = tile_interval(scene.format, tex, m, tx, ty);
                    (0..3)
                        .all(|c| p[c].saturating_add(4) >= lo[c] && p[c] <= hi[c].saturating_add(4))
                })
            });
            match hit {
                Some(m) => matched.push(m),
                None => bad += 1,
            }
        }
    }
    (matched, bad)
}
