//! The Bevy image of a streamed texture, and the byte sizes of its mips:
//! one rule shared by [`TextureStreamer::load`](super::TextureStreamer::load)
//! and the asset-source loader, so an image is the same whichever way it
//! was made.

use bevy::asset::RenderAssetUsages;
use bevy::image::{ImageAddressMode, ImageFilterMode, ImageSampler, ImageSamplerDescriptor};
use bevy::prelude::*;
use gpustream::pack::{AssetId as PackAssetId, Pack, TextureInfo};

/// The Bevy image of a streamed texture: no CPU data (Bevy creates the
/// texture with every level and keeps it across view changes), a view of
/// the smallest mip until the tail lands, and a trilinear, repeating sampler.
pub(crate) fn streamed_image(info: &TextureInfo, extra: wgpu::TextureUsages) -> Image {
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
    image.texture_view_descriptor = Some(view_of(info.mip_count.saturating_sub(1), info.mip_count));
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

/// Bytes of each mip level, finest first.
pub(super) fn mip_bytes(info: &TextureInfo) -> Vec<u64> {
    (0..info.mip_count)
        .map(|m| {
            let (w, h) = info.mip_extent(m);
            info.format.data_size(w, h)
        })
        .collect()
}

/// Bytes of the whole chain, as allocated up front.
pub(super) fn full_chain_bytes(info: &TextureInfo) -> u64 {
    mip_bytes(info).iter().sum()
}

/// The first mip of the packed tail, or the smallest mip when every mip is
/// tiled.
pub(super) fn floor_mip(pack: &Pack, asset: PackAssetId, info: &TextureInfo) -> u8 {
    pack.packed_mips(asset)
        .ok()
        .and_then(|p| p.mips.first().map(|m| m.mip))
        .unwrap_or(info.mip_count.saturating_sub(1))
}

/// Bytes of the packed tail: the least a texture needs to be sampled.
pub(super) fn tail_bytes(pack: &Pack, asset: PackAssetId, info: &TextureInfo) -> u64 {
    let floor = floor_mip(pack, asset, info);
    mip_bytes(info).iter().skip(usize::from(floor)).sum()
}

/// A view of mips `base..mip_count`.
pub fn view_of(base: u8, mip_count: u8) -> wgpu::TextureViewDescriptor<'static> {
    wgpu::TextureViewDescriptor {
        label: None,
        base_mip_level: u32::from(base),
        mip_level_count: Some(u32::from(mip_count.saturating_sub(base).max(1))),
        ..Default::default()
    }
}
