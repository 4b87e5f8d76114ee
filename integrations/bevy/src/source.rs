//! Packs as Bevy asset sources: `app.register_pack_source("level1",
//! "assets/level1.gspk")` makes `asset_server.load("level1://bricks.png")`
//! work like any other asset path.
//!
//! The source's reader serves the pack's table of contents as a read-only
//! folder of its asset names:
//!
//! - a **blob** reads as its bytes (checked and decoded on the CPU), so any
//!   Bevy loader works on blobs stored in a pack (a scene, a sound, a PNG
//!   kept as bytes);
//! - a **texture** reads as a small descriptor, and its asset meta names
//!   [`StreamedTextureLoader`], so the image it becomes is a streamed one
//!   (no CPU data, mips by on-screen need), not the work of Bevy's PNG
//!   loader on bytes that are not a PNG.
//!
//! Bevy builds its asset sources when `AssetPlugin` (part of
//! `DefaultPlugins`) is added, so a pack source must be registered before
//! it, and the texture meta is only read while `AssetPlugin::meta_check`
//! is `AssetMetaCheck::Always` (the default) or lists the path.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bevy::asset::io::{
    AssetReader, AssetReaderError, AssetSourceBuilder, PathStream, Reader, VecReader,
};
use bevy::asset::meta::{AssetAction, AssetMeta, AssetMetaDyn};
use bevy::asset::AssetApp;
use bevy::prelude::*;
use bevy::reflect::TypePath;
use gpustream::pack::{Asset as PackAsset, AssetId as PackAssetId, Pack, PackError};

use crate::loader::{descriptor, StreamedTextureLoader};
use crate::packs::{name_of, PackSource, PackSources};

/// Why a pack could not be registered as an asset source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackSourceError {
    /// The pack's table of contents did not read or validate.
    #[error("asset source {name:?}: pack {path}: {source}")]
    Pack {
        /// The source's name.
        name: String,
        /// The pack's path.
        path: PathBuf,
        /// What was wrong (boxed: it is large, and rare).
        source: Box<PackError>,
    },
    /// `AssetPlugin` (part of `DefaultPlugins`) is already in the app: Bevy
    /// builds asset sources when it is added, so this one would never be
    /// read.
    #[error("asset source {name:?} must be registered before AssetPlugin (DefaultPlugins)")]
    AfterAssetPlugin {
        /// The source's name.
        name: String,
    },
    /// Another pack is registered under this name.
    #[error("asset source {name:?} is already registered")]
    NameTaken {
        /// The source's name.
        name: String,
    },
    /// The name cannot stand before `://` in an asset path.
    #[error("{name:?} is not an asset source name: {reason}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Registers packs as Bevy asset sources, so their assets load through the
/// `AssetServer` as `name://asset`.
///
/// The source serves the pack's table of contents as a read-only folder of
/// its asset names (names with `/` are nested folders):
///
/// - a **texture** reads as a small descriptor whose asset meta names
///   [`StreamedTextureLoader`], so `load::<Image>("name://bricks.png")`
///   gives a streamed image (no CPU data, the full chain allocated, mips by
///   on-screen need within the budget), never the work of Bevy's PNG loader;
/// - a **blob** reads as its bytes (read whole and checked on the CPU), so
///   any Bevy loader works on blobs stored in a pack;
/// - a name the pack lacks is `AssetReaderError::NotFound`.
///
/// Bevy builds asset sources when `AssetPlugin` (part of `DefaultPlugins`)
/// is added, so register packs before it. The texture meta is read only
/// while `AssetPlugin::meta_check` is `AssetMetaCheck::Always` (Bevy's
/// default) or lists the path; under `AssetMetaCheck::Never` Bevy picks a
/// loader by extension and a pack texture fails to load.
pub trait PackSourceAppExt {
    /// Makes the pack at `path` the asset source `name`, so that
    /// `asset_server.load::<Image>("name://bricks.png")` gives a streamed
    /// image of the pack's texture `bricks.png`, and any other asset type
    /// loads from the pack's blobs. Reads the table of contents now (the
    /// texels stream later); call it before adding `DefaultPlugins`.
    fn register_pack_source(
        &mut self,
        name: &str,
        path: impl AsRef<Path>,
    ) -> Result<&mut Self, PackSourceError>;
}

impl PackSourceAppExt for App {
    fn register_pack_source(
        &mut self,
        name: &str,
        path: impl AsRef<Path>,
    ) -> Result<&mut Self, PackSourceError> {
        let bad = |reason| PackSourceError::BadName {
            name: name.to_string(),
            reason,
        };
        if name.is_empty() {
            return Err(bad("it is empty"));
        }
        if name.contains([':', '/', '\\', '#']) {
            return Err(bad("it holds ':', '/', '\\' or '#'"));
        }
        if self.world().contains_resource::<AssetServer>() {
            return Err(PackSourceError::AfterAssetPlugin {
                name: name.to_string(),
            });
        }
        if self
            .world()
            .get_resource::<PackSources>()
            .is_some_and(|s| s.get(name).is_some())
        {
            return Err(PackSourceError::NameTaken {
                name: name.to_string(),
            });
        }
        let path = path.as_ref().to_path_buf();
        let toc = Pack::open(&path).map_err(|source| PackSourceError::Pack {
            name: name.to_string(),
            path: path.clone(),
            source: Box::new(source),
        })?;
        let toc = Arc::new(toc);
        let reader_toc = toc.clone();
        self.world_mut()
            .get_resource_or_init::<PackSources>()
            .insert(name.to_string(), PackSource { path, toc });
        self.register_asset_source(
            name.to_string(),
            AssetSourceBuilder::new(move || {
                Box::new(PackAssetReader {
                    pack: reader_toc.clone(),
                })
            }),
        );
        Ok(self)
    }
}

/// The asset meta of every texture in a pack: load with
/// [`StreamedTextureLoader`].
fn texture_meta() -> Vec<u8> {
    AssetMeta::<StreamedTextureLoader, ()>::new(AssetAction::Load {
        loader: StreamedTextureLoader::type_path().to_string(),
        settings: (),
    })
    .serialize()
}

/// Reads one pack as a read-only folder.
struct PackAssetReader {
    pack: Arc<Pack>,
}

impl PackAssetReader {
    fn asset(&self, path: &Path) -> Result<(PackAssetId, &PackAsset), AssetReaderError> {
        let id = name_of(path)
            .and_then(|name| self.pack.find(&name))
            .ok_or_else(|| AssetReaderError::NotFound(path.to_path_buf()))?;
        Ok((id, self.pack.asset(id)))
    }

    /// The entries directly inside folder `path` (its assets and its
    /// subfolders, as paths from the source's root), or `None` if no asset
    /// lies under it. The root is always a folder.
    fn children(&self, path: &Path) -> Option<Vec<PathBuf>> {
        let prefix = match name_of(path) {
            Some(name) => format!("{name}/"),
            None if path.components().all(|c| c == Component::CurDir) => String::new(),
            None => return None,
        };
        let entries: BTreeSet<&str> = self
            .pack
            .assets()
            .iter()
            .filter_map(|a| {
                let rest = a.name.strip_prefix(&prefix)?;
                Some(match rest.find('/') {
                    Some(end) => &a.name[..prefix.len() + end],
                    None => a.name.as_str(),
                })
            })
            .collect();
        if entries.is_empty() && !prefix.is_empty() {
            return None;
        }
        Some(entries.into_iter().map(PathBuf::from).collect())
    }
}

impl AssetReader for PackAssetReader {
    async fn read<'a>(&'a self, path: &'a Path) -> Result<impl Reader + 'a, AssetReaderError> {
        let (id, asset) = self.asset(path)?;
        let bytes = match &asset.texture {
            Some(info) => descriptor(info).into_bytes(),
            // A blob is read whole with `pread` on the asset task's thread:
            // blobs are what Bevy loaders parse whole anyway.
            None => self
                .pack
                .read_blob(id)
                .map_err(|e| AssetReaderError::Io(Arc::new(std::io::Error::other(e))))?,
        };
        Ok(VecReader::new(bytes))
    }

    async fn read_meta<'a>(&'a self, path: &'a Path) -> Result<impl Reader + 'a, AssetReaderError> {
        let (_, asset) = self.asset(path)?;
        if asset.texture.is_none() {
            // Blobs have no meta: Bevy picks a loader by extension.
            let mut meta = path.as_os_str().to_owned();
            meta.push(".meta");
            return Err(AssetReaderError::NotFound(meta.into()));
        }
        Ok(VecReader::new(texture_meta()))
    }

    async fn read_directory<'a>(
        &'a self,
        path: &'a Path,
    ) -> Result<Box<PathStream>, AssetReaderError> {
        let entries = self
            .children(path)
            .ok_or_else(|| AssetReaderError::NotFound(path.to_path_buf()))?;
        Ok(Box::new(bevy::tasks::futures_lite::stream::iter(entries)))
    }

    async fn is_directory<'a>(&'a self, path: &'a Path) -> Result<bool, AssetReaderError> {
        Ok(self.children(path).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::tasks::block_on;
    use bevy::tasks::futures_lite::StreamExt;
    use gpustream::pack::{PackWriter, TextureFormat, WriterOptions};

    /// A temporary folder, removed when dropped.
    struct TempDir(PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A pack of two blobs (one in a folder) and a 64x64 BC7 texture, in a
    /// fresh temporary folder; returns the folder, the pack's path and the
    /// large blob's bytes.
    fn small_pack(test: &str) -> (TempDir, PathBuf, Vec<u8>) {
        let dir = TempDir(
            std::env::temp_dir().join(format!("gpustream-bevy-{test}-{}", std::process::id())),
        );
        std::fs::create_dir_all(&dir.0).expect("temp dir");
        let path = dir.0.join("small.gspk");
        let blob: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 300) as u8).collect();
        let mut w = PackWriter::create(&path, WriterOptions::default()).expect("create");
        w.add_blob("scenes/hall.scn.ron", &blob).expect("blob");
        w.add_blob("notes.txt", b"plain bytes").expect("blob");
        let mips: Vec<Vec<u8>> = (0..7u8)
            .map(|m| {
                let side = (64u32 >> m).max(1).div_ceil(4) as usize;
                vec![m; side * side * 16]
            })
            .collect();
        w.add_texture("bricks.png", TextureFormat::Bc7Srgb, 64, 64, &mips)
            .expect("texture");
        w.finish().expect("finish");
        (dir, path, blob)
    }

    fn reader(path: &Path) -> PackAssetReader {
        PackAssetReader {
            pack: Arc::new(Pack::open(path).expect("pack opens")),
        }
    }

    fn read_all(r: &PackAssetReader, path: &str) -> Result<Vec<u8>, AssetReaderError> {
        block_on(async {
            let mut reader = r.read(Path::new(path)).await?;
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes).await?;
            Ok(bytes)
        })
    }

    #[test]
    fn a_blob_reads_as_the_packs_bytes_and_has_no_meta() {
        let (_dir, path, blob) = small_pack("blob");
        let r = reader(&path);
        assert_eq!(read_all(&r, "scenes/hall.scn.ron").expect("reads"), blob);
        assert_eq!(read_all(&r, "notes.txt").expect("reads"), b"plain bytes");
        let meta = block_on(r.read_meta_bytes(Path::new("notes.txt")));
        assert!(
            matches!(meta, Err(AssetReaderError::NotFound(_))),
            "{meta:?}"
        );
    }

    #[test]
    fn a_texture_reads_as_a_descriptor_whose_meta_names_the_streamed_loader() {
        let (_dir, path, _) = small_pack("texture");
        let r = reader(&path);
        let bytes = read_all(&r, "bricks.png").expect("reads");
        let info = crate::loader::parse_descriptor(&bytes).expect("a descriptor");
        assert_eq!(
            (info.format, info.width, info.height, info.mip_count),
            (TextureFormat::Bc7Srgb, 64, 64, 7)
        );
        let meta = block_on(r.read_meta_bytes(Path::new("bricks.png"))).expect("has meta");
        let parsed = AssetMeta::<StreamedTextureLoader, ()>::deserialize(&meta)
            .expect("the meta is RON of the streamed loader's settings");
        match parsed.asset {
            AssetAction::Load { loader, .. } => {
                assert_eq!(loader, StreamedTextureLoader::type_path())
            }
            _ => panic!("the meta does not load: {}", String::from_utf8_lossy(&meta)),
        }
    }

    #[test]
    fn an_unknown_name_is_not_found() {
        let (_dir, path, _) = small_pack("missing");
        let r = reader(&path);
        for name in ["nope.png", "scenes", "../small.gspk", ""] {
            let err = read_all(&r, name).expect_err(name);
            assert_eq!(
                err,
                AssetReaderError::NotFound(PathBuf::from(name)),
                "{name}"
            );
        }
        let meta = block_on(r.read_meta_bytes(Path::new("nope.png")));
        assert!(matches!(meta, Err(AssetReaderError::NotFound(_))));
    }

    #[test]
    fn folders_list_the_packs_names() {
        let (_dir, path, _) = small_pack("folders");
        let r = reader(&path);
        let list = |p: &str| -> Vec<PathBuf> {
            block_on(async {
                r.read_directory(Path::new(p))
                    .await
                    .expect("a folder")
                    .collect()
                    .await
            })
        };
        let root: Vec<PathBuf> = ["bricks.png", "notes.txt", "scenes"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(list(""), root);
        assert_eq!(list("scenes"), vec![PathBuf::from("scenes/hall.scn.ron")]);
        let is_dir = |p: &str| block_on(r.is_directory(Path::new(p))).expect("answers");
        assert!(is_dir("") && is_dir("scenes"));
        assert!(!is_dir("bricks.png") && !is_dir("nowhere"));
        let missing = block_on(r.read_directory(Path::new("nowhere")));
        assert!(matches!(missing, Err(AssetReaderError::NotFound(_))));
    }

    #[test]
    fn registration_names_the_bad_pack_and_refuses_late_sources() {
        let mut app = App::new();
        let err = app
            .register_pack_source("level", "/nonexistent/level.gspk")
            .expect_err("no such file");
        let text = err.to_string();
        assert!(text.contains("/nonexistent/level.gspk"), "{text}");
        assert!(matches!(
            app.register_pack_source("", "x"),
            Err(PackSourceError::BadName { .. })
        ));
        let (_dir, path, _) = small_pack("register");
        app.register_pack_source("level", &path).expect("registers");
        assert!(matches!(
            app.register_pack_source("level", &path),
            Err(PackSourceError::NameTaken { .. })
        ));
        app.add_plugins((
            bevy::app::TaskPoolPlugin::default(),
            bevy::asset::AssetPlugin::default(),
            bevy::diagnostic::DiagnosticsPlugin,
        ));
        assert!(matches!(
            app.register_pack_source("late", &path),
            Err(PackSourceError::AfterAssetPlugin { .. })
        ));
    }
}
