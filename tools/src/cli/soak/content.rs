//! The soak's packs, built from its seed: one source pack of blobs (every
//! codec, one block and many) and RGBA8 textures (tiles and packed tails),
//! and from it the copies each kind of pack needs. What every asset must
//! decode to is read back here, once, with the pack's own CPU decode, so
//! that every delivered byte can be compared.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use gpustream::pack::{AssetId, AssetKind, Pack, PackWriter, TextureFormat, WriterOptions};
use gpustream::Codec;

use super::rng::Rng;

/// What an asset decodes to.
pub enum Expected {
    /// A blob's bytes.
    Blob(Vec<u8>),
    /// A texture's mips (`TEXTURE_SIDE` square at mip 0), finest first,
    /// rows tightly packed.
    Texture {
        /// The mips' bytes.
        mips: Vec<Vec<u8>>,
    },
}

/// The source pack and what its assets decode to.
pub struct Content {
    /// The pack every other one is made from.
    pub source: PathBuf,
    /// Every asset's name and expected bytes, by asset id.
    pub assets: Vec<(String, Expected)>,
}

/// Side of the soak's square textures: two tiled mips (4 tiles, then 1) and
/// a packed tail below.
pub const TEXTURE_SIDE: u32 = 256;

/// Writes the source pack under `dir`: `blobs` blobs and `textures`
/// textures, their contents and codecs drawn from `seed`.
pub fn build(
    dir: &Path,
    seed: u64,
    blobs: usize,
    textures: usize,
) -> Result<Content, Box<dyn std::error::Error + Send + Sync>> {
    std::fs::create_dir_all(dir)?;
    let source = dir.join("soak.gspk");
    let mut rng = Rng::new(seed ^ 0x50a4_c0de);
    let mut writer = PackWriter::create(&source, WriterOptions::default().with_codec(Codec::Lz4))?;
    let codecs = [Codec::Lz4, Codec::GDeflate, Codec::Zstd, Codec::None];
    for i in 0..blobs {
        // Sizes from a few bytes to several blocks; contents compressible
        // to varying degrees, as meshes and scene text are.
        let size = match rng.below(4) {
            0 => 1 + rng.below(4096) as usize,
            1 => 4096 + rng.below(60_000) as usize,
            _ => 65_536 + rng.below(400_000) as usize,
        };
        let data = compressible(&mut rng, size);
        let codec = codecs[i % codecs.len()];
        writer.set_options(WriterOptions::default().with_codec(codec));
        writer.add_blob(&format!("blob-{i:04}"), &data)?;
    }
    writer.set_options(WriterOptions::default().with_codec(Codec::Lz4));
    for i in 0..textures {
        let mut mips = Vec::new();
        let (mut w, mut h) = (TEXTURE_SIDE, TEXTURE_SIDE);
        loop {
            mips.push(compressible(&mut rng, (w * h * 4) as usize));
            if w == 1 && h == 1 {
                break;
            }
            (w, h) = ((w / 2).max(1), (h / 2).max(1));
        }
        writer.add_texture(
            &format!("texture-{i:03}"),
            TextureFormat::Rgba8Unorm,
            TEXTURE_SIDE,
            TEXTURE_SIDE,
            &mips,
        )?;
    }
    writer.finish()?;

    let pack = Pack::open(&source)?;
    let mut assets = Vec::with_capacity(pack.assets().len());
    for (i, a) in pack.assets().iter().enumerate() {
        let id = AssetId(i as u32);
        let expected = match a.kind {
            AssetKind::Texture => Expected::Texture {
                mips: pack.read_texture_mips(id)?,
            },
            _ => Expected::Blob(pack.read_blob(id)?),
        };
        assets.push((a.name.clone(), expected));
    }
    Ok(Content { source, assets })
}

/// `len` bytes that LZ4 and GDeflate compress by about half: runs copied
/// from earlier in the buffer between random literals.
fn compressible(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        if out.len() > 64 && rng.below(2) == 0 {
            let back = 1 + rng.below(out.len().min(4096) as u64) as usize;
            let run = (4 + rng.below(60) as usize).min(len - out.len());
            let start = out.len() - back;
            for k in 0..run {
                out.push(out[start + k % back]);
            }
        } else {
            let run = (1 + rng.below(16) as usize).min(len - out.len());
            for _ in 0..run {
                out.push(rng.next() as u8);
            }
        }
    }
    out
}

/// Copies `source` to `dest` and flips one byte in `count` of its blocks'
/// stored bytes: those blocks fail their checksum. Returns the assets that
/// hold a flipped block.
pub fn corrupt_copy(
    source: &Path,
    dest: &Path,
    seed: u64,
    count: usize,
) -> Result<HashSet<u32>, Box<dyn std::error::Error + Send + Sync>> {
    std::fs::copy(source, dest)?;
    let pack = Pack::open(source)?;
    let mut bytes = std::fs::read(dest)?;
    let mut rng = Rng::new(seed ^ 0xbad_b10c);
    let mut hit = HashSet::new();
    let blocks = pack.blocks();
    for _ in 0..count.min(blocks.len()) {
        let b = rng.below(blocks.len() as u64) as usize;
        let block = &blocks[b];
        if block.stored_size == 0 {
            continue;
        }
        let at = block.offset as usize + rng.below(block.stored_size as u64) as usize;
        bytes[at] ^= 0x5a;
        if let Some(a) = pack
            .assets()
            .iter()
            .position(|a| a.blocks.contains(&(b as u32)))
        {
            hit.insert(a as u32);
        }
    }
    std::fs::write(dest, bytes)?;
    Ok(hit)
}
