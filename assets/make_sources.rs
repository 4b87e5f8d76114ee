//! Generates the demo pack's source images in `assets/` procedurally, so
//! their origin and licence are the project's own (see assets/README.md).
//!
//! Run: `cargo run --release --example make_demo_sources` (rewrites
//! assets/rock.png, bricks.png, foliage.png and terrain.jpg; the output is
//! deterministic).

use gpustream_tools::demo::procedural::{fbm, value_noise};
use std::path::Path;

fn rock(size: u32) -> image::RgbImage {
    image::RgbImage::from_fn(size, size, |x, y| {
        let (u, v) = (x as f32 / size as f32 * 8.0, y as f32 / size as f32 * 8.0);
        let n = fbm(u, v, 8, 6, 11);
        let cracks = (fbm(u * 0.5, v * 0.5, 4, 3, 12) - 0.5).abs();
        let k = if cracks < 0.02 { 0.5 } else { 1.0 };
        let g = (60.0 + n * 150.0) * k;
        image::Rgb([(g * 1.05) as u8, (g * 0.95) as u8, (g * 0.85) as u8])
    })
}

fn bricks(size: u32) -> image::RgbImage {
    let (bw, bh) = (size / 8, size / 16);
    image::RgbImage::from_fn(size, size, |x, y| {
        let row = y / bh;
        let xs = x + if row % 2 == 1 { bw / 2 } else { 0 };
        let (bx, by) = (xs % bw, y % bh);
        let brick = (xs / bw) * 31 + row * 17;
        let grain = fbm(x as f32 / 16.0, y as f32 / 16.0, size as i32 / 16, 4, 21);
        if bx < 3 || by < 3 {
            let m = (170.0 + grain * 40.0) as u8;
            image::Rgb([m, m, (m as f32 * 0.95) as u8])
        } else {
            let shade = value_noise(brick as f32, 0.5, 1 << 16, 22);
            let r = 120.0 + shade * 70.0 + grain * 30.0;
            image::Rgb([r as u8, (r * 0.45) as u8, (r * 0.35) as u8])
        }
    })
}

fn foliage(size: u32) -> image::RgbaImage {
    image::RgbaImage::from_fn(size, size, |x, y| {
        let (u, v) = (x as f32 / size as f32 * 6.0, y as f32 / size as f32 * 6.0);
        let leaf = fbm(u, v, 6, 4, 31);
        let vein = fbm(u * 3.0, v * 3.0, 18, 2, 32);
        let g = 80.0 + vein * 120.0;
        // Alpha-tested leaves: the cut-out is what BC7's alpha modes get.
        // Transparent texels get one colour, as exporters usually write.
        if leaf > 0.5 {
            image::Rgba([(g * 0.4) as u8, g as u8, (g * 0.3) as u8, 255])
        } else {
            image::Rgba([40, 70, 30, 0])
        }
    })
}

fn terrain(size: u32) -> image::RgbImage {
    image::RgbImage::from_fn(size, size, |x, y| {
        let (u, v) = (x as f32 / size as f32 * 4.0, y as f32 / size as f32 * 4.0);
        let h = fbm(u, v, 4, 7, 41);
        let detail = fbm(u * 16.0, v * 16.0, 64, 2, 42);
        let (grass, dirt) = ([70.0, 120.0, 40.0], [120.0, 95.0, 60.0]);
        let t = ((h - 0.45) * 6.0).clamp(0.0, 1.0);
        let c: Vec<u8> = (0..3)
            .map(|i| ((grass[i] * (1.0 - t) + dirt[i] * t) * (0.8 + detail * 0.4)) as u8)
            .collect();
        image::Rgb([c[0], c[1], c[2]])
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    rock(512).save(dir.join("rock.png"))?;
    bricks(512).save(dir.join("bricks.png"))?;
    foliage(256).save(dir.join("foliage.png"))?;
    let file = std::fs::File::create(dir.join("terrain.jpg"))?;
    let mut jpeg =
        image::codecs::jpeg::JpegEncoder::new_with_quality(std::io::BufWriter::new(file), 85);
    jpeg.encode_image(&terrain(512))?;
    println!("wrote the demo sources to {}", dir.display());
    Ok(())
}
