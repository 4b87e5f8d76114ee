//! The streamed-texture loader: what turns a texture of a pack asset source
//! into a Bevy image, and the system that hands such images to the
//! [`TextureStreamer`].
//!
//! A pack source reads a texture as a small text descriptor (format, size,
//! mips) and names this loader in the texture's asset meta, so Bevy never
//! gives "bricks.png" of a pack to its PNG loader. The loader builds the
//! image exactly as [`TextureStreamer::load`] does: no CPU data, the full
//! chain, a view of the smallest mip. The texels stream later, once
//! [`adopt_loaded_images`] has handed the image to the streamer.

use bevy::asset::io::Reader;
use bevy::asset::{AssetLoader, LoadContext};
use bevy::prelude::*;
use gpustream::pack::{full_mip_count, TextureFormat, TextureInfo, MAX_TEXTURE_DIM};

use crate::packs::{name_of, PackSources};
use crate::stream::image::streamed_image;
use crate::stream::TextureStreamer;

/// The first line of every descriptor.
const DESCRIPTOR_MAGIC: &str = "gpustream texture";
/// Longer than any descriptor this crate writes; a longer input is refused
/// before it is parsed.
const MAX_DESCRIPTOR_LEN: usize = 256;

/// The descriptor a pack source reads for a texture asset.
pub(crate) fn descriptor(info: &TextureInfo) -> String {
    format!(
        "{DESCRIPTOR_MAGIC}\nformat {}\nsize {}x{}\nmips {}\n",
        info.format.name(),
        info.width,
        info.height,
        info.mip_count
    )
}

/// Parses a descriptor, checking what a texture can be: a known format, a
/// size within the pack format's limits and whole blocks, and a chain no
/// longer than the size allows.
pub(crate) fn parse_descriptor(bytes: &[u8]) -> Result<TextureInfo, String> {
    if bytes.len() > MAX_DESCRIPTOR_LEN {
        return Err(format!(
            "{} bytes, longer than a descriptor ({MAX_DESCRIPTOR_LEN} at most)",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let mut lines = text.lines();
    if lines.next() != Some(DESCRIPTOR_MAGIC) {
        return Err(format!("the first line is not {DESCRIPTOR_MAGIC:?}"));
    }
    let (mut format, mut size, mut mips) = (None, None, None);
    for line in lines.filter(|l| !l.is_empty()) {
        let (key, value) = line
            .split_once(' ')
            .ok_or_else(|| format!("line {line:?} is not `key value`"))?;
        match key {
            "format" => {
                format = Some(
                    TextureFormat::ALL
                        .into_iter()
                        .find(|f| f.name() == value)
                        .ok_or_else(|| format!("unknown texture format {value:?}"))?,
                )
            }
            "size" => {
                let parsed = value
                    .split_once('x')
                    .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)));
                size = Some(parsed.ok_or_else(|| format!("size {value:?} is not WxH"))?);
            }
            "mips" => {
                mips = Some(
                    value
                        .parse::<u8>()
                        .map_err(|_| format!("mips {value:?} is not a number of mips"))?,
                )
            }
            other => return Err(format!("unknown key {other:?}")),
        }
    }
    let format = format.ok_or("no format line")?;
    let (width, height) = size.ok_or("no size line")?;
    let mip_count = mips.ok_or("no mips line")?;
    let block = format.block_dim();
    if !(1..=MAX_TEXTURE_DIM).contains(&width) || !(1..=MAX_TEXTURE_DIM).contains(&height) {
        return Err(format!(
            "size {width}x{height} is outside 1..={MAX_TEXTURE_DIM}"
        ));
    }
    if !width.is_multiple_of(block) || !height.is_multiple_of(block) {
        return Err(format!(
            "{} size {width}x{height} is not whole {block}x{block} blocks",
            format.name()
        ));
    }
    let full = full_mip_count(width, height);
    if mip_count == 0 || mip_count > full {
        return Err(format!(
            "{mip_count} mips; a {width}x{height} texture has 1..={full}"
        ));
    }
    Ok(TextureInfo {
        format,
        width,
        height,
        mip_count,
    })
}

/// Why a streamed texture's image could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamedTextureError {
    /// The descriptor could not be read from the source.
    #[error("reading the texture descriptor of {path}: {source}")]
    Read {
        /// The asset path.
        path: String,
        /// The reader's error.
        source: std::io::Error,
    },
    /// The bytes are not a texture descriptor a pack source writes.
    #[error("{path} is not a gpustream texture descriptor: {reason}")]
    Descriptor {
        /// The asset path.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// The loader a pack source's texture meta names: makes the streamed image
/// of a texture (its texels come later, by the streamer). Registered by
/// [`GpuStreamPlugin`](crate::GpuStreamPlugin); it claims no file
/// extension, so it is only used where an asset's meta names it.
#[derive(TypePath)]
pub struct StreamedTextureLoader {
    pub(crate) extra_usages: wgpu::TextureUsages,
}

impl AssetLoader for StreamedTextureLoader {
    type Asset = Image;
    type Settings = ();
    type Error = StreamedTextureError;

    async fn load(
        &self,
        reader: &mut dyn Reader,
        _settings: &(),
        load_context: &mut LoadContext<'_>,
    ) -> Result<Image, StreamedTextureError> {
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .await
            .map_err(|source| StreamedTextureError::Read {
                path: load_context.path().to_string(),
                source,
            })?;
        let info = parse_descriptor(&bytes).map_err(|reason| StreamedTextureError::Descriptor {
            path: load_context.path().to_string(),
            reason,
        })?;
        Ok(streamed_image(&info, self.extra_usages))
    }
}

/// Hands images the asset server loaded from a pack source's texture
/// assets to the [`TextureStreamer`], so need, residency, eviction and the
/// figures apply to them as to images made by [`TextureStreamer::load`].
/// Images of a pack's blobs (a PNG stored as bytes, say) are ordinary
/// images and are left alone.
pub(crate) fn adopt_loaded_images(
    mut events: MessageReader<AssetEvent<Image>>,
    server: Res<AssetServer>,
    sources: Option<Res<PackSources>>,
    mut streamer: ResMut<TextureStreamer>,
) {
    let Some(sources) = sources else {
        events.clear();
        return;
    };
    for event in events.read() {
        let AssetEvent::LoadedWithDependencies { id } = *event else {
            continue;
        };
        let Some(path) = server.get_path(id) else {
            continue;
        };
        let Some(source) = path.source().as_str().and_then(|s| sources.get(s)) else {
            continue;
        };
        let Some(name) = name_of(path.path()) else {
            continue;
        };
        let is_texture = source
            .toc
            .find(&name)
            .is_some_and(|a| source.toc.asset(a).texture.is_some());
        if path.label().is_some() || !is_texture {
            continue;
        }
        let Some(handle) = server.get_id_handle(id) else {
            continue;
        };
        if let Err(e) = streamer.adopt(handle, &source.path, &source.toc, &name) {
            error!("cannot stream {path}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bc7(width: u32, height: u32, mip_count: u8) -> TextureInfo {
        TextureInfo {
            format: TextureFormat::Bc7Srgb,
            width,
            height,
            mip_count,
        }
    }

    #[test]
    fn descriptor_round_trips() {
        let info = bc7(1024, 512, 11);
        assert_eq!(parse_descriptor(descriptor(&info).as_bytes()), Ok(info));
    }

    #[test]
    fn bad_descriptors_are_refused_with_a_reason() {
        let bad = [
            ("", "first line"),
            (
                "gpustream texture\nformat bc9\nsize 4x4\nmips 1\n",
                "unknown texture format",
            ),
            (
                "gpustream texture\nformat bc7\nsize 6x4\nmips 1\n",
                "whole 4x4 blocks",
            ),
            (
                "gpustream texture\nformat bc7\nsize 0x4\nmips 1\n",
                "outside",
            ),
            (
                "gpustream texture\nformat bc7\nsize 8x8\nmips 5\n",
                "has 1..=4",
            ),
            ("gpustream texture\nformat bc7\nsize 8x8\n", "no mips line"),
            (
                "gpustream texture\nformat bc7\nsize 8x8\nmips 1\nextra 1\n",
                "unknown key",
            ),
        ];
        for (text, why) in bad {
            let err = parse_descriptor(text.as_bytes()).expect_err(text);
            assert!(err.contains(why), "{text:?}: {err:?} does not say {why:?}");
        }
        let long = vec![b'a'; MAX_DESCRIPTOR_LEN + 1];
        assert!(parse_descriptor(&long).is_err());
    }
}
