//! Where a texture came from: the kind of file the packer read and the time
//! it spent turning it into the pack's format. The pack records both in two
//! asset-entry fields that older packs leave zero (docs/pack-format.md), so
//! `gpustream info` can show them; nothing in the runtime depends on them.

/// The kind of file a texture was packed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum TextureSourceKind {
    /// A PNG image, block-compressed by the packer.
    Png,
    /// A JPEG image, block-compressed by the packer.
    Jpeg,
    /// A DDS file (legacy FourCC or DX10 header).
    Dds,
    /// A KTX2 file without supercompression.
    Ktx2,
    /// A KTX2 file with zstd supercompression (scheme 2).
    #[cfg_attr(feature = "serde", serde(rename = "ktx2+zstd"))]
    Ktx2Zstd,
    /// A Basis Universal UASTC KTX2 file, transcoded to BC7.
    BasisUastc,
    /// A UASTC KTX2 file with zstd supercompression, transcoded to BC7.
    #[cfg_attr(feature = "serde", serde(rename = "basis-uastc+zstd"))]
    BasisUastcZstd,
    /// A Basis Universal ETC1S (BasisLZ) KTX2 file, transcoded to BC7 or BC1.
    BasisEtc1s,
}

impl TextureSourceKind {
    /// Every kind, in id order (id = index + 1; 0 means "not recorded").
    pub const ALL: [TextureSourceKind; 8] = [
        TextureSourceKind::Png,
        TextureSourceKind::Jpeg,
        TextureSourceKind::Dds,
        TextureSourceKind::Ktx2,
        TextureSourceKind::Ktx2Zstd,
        TextureSourceKind::BasisUastc,
        TextureSourceKind::BasisUastcZstd,
        TextureSourceKind::BasisEtc1s,
    ];

    /// The id byte stored in the asset entry (never 0).
    pub fn id(self) -> u8 {
        Self::ALL
            .iter()
            .position(|k| *k == self)
            .map_or(0, |i| i as u8 + 1)
    }

    /// The kind for an asset-entry id byte; `None` for 0 (not recorded)
    /// and for ids this reader does not know.
    pub fn from_id(id: u8) -> Option<TextureSourceKind> {
        Self::ALL.get(usize::from(id).checked_sub(1)?).copied()
    }

    /// The name `info` shows (`png`, `ktx2+zstd`, `basis-uastc`).
    pub fn name(self) -> &'static str {
        match self {
            TextureSourceKind::Png => "png",
            TextureSourceKind::Jpeg => "jpeg",
            TextureSourceKind::Dds => "dds",
            TextureSourceKind::Ktx2 => "ktx2",
            TextureSourceKind::Ktx2Zstd => "ktx2+zstd",
            TextureSourceKind::BasisUastc => "basis-uastc",
            TextureSourceKind::BasisUastcZstd => "basis-uastc+zstd",
            TextureSourceKind::BasisEtc1s => "basis-etc1s",
        }
    }
}

impl std::fmt::Display for TextureSourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the pack records about a texture's origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TextureSource {
    /// The kind of file it was packed from.
    pub kind: TextureSourceKind,
    /// Microseconds the packer spent turning the file's contents into the
    /// texture's mips (decoding, block-compressing, decompressing,
    /// transcoding; saturating at `u32::MAX`). 0 when the file was taken as
    /// it is, or when the pack was written reproducibly (no times).
    pub transcode_us: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_zero_means_not_recorded() {
        for k in TextureSourceKind::ALL {
            assert_ne!(k.id(), 0);
            assert_eq!(TextureSourceKind::from_id(k.id()), Some(k));
        }
        assert_eq!(TextureSourceKind::from_id(0), None);
        assert_eq!(TextureSourceKind::from_id(200), None);
    }
}
