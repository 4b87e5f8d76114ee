//! The packs registered as asset sources (`PackSourceAppExt`), by source
//! name, and how a path within a source names a pack asset: what the
//! loader and the streamer look up, apart from the asset reader in
//! `source.rs` that registers them.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use bevy::prelude::*;
use gpustream::pack::Pack;

/// One registered pack source.
pub(crate) struct PackSource {
    pub(crate) path: PathBuf,
    pub(crate) toc: Arc<Pack>,
}

/// The packs registered as asset sources, by source name: the streamer
/// finds a loaded image's pack here.
#[derive(Resource, Default)]
pub(crate) struct PackSources(HashMap<String, PackSource>);

impl PackSources {
    pub(crate) fn get(&self, name: &str) -> Option<&PackSource> {
        self.0.get(name)
    }

    /// Registers (or replaces) the source `name`.
    pub(crate) fn insert(&mut self, name: String, source: PackSource) {
        self.0.insert(name, source);
    }
}

/// The pack asset name of a path within a source: its parts joined by `/`,
/// as the packer names files of nested folders. `None` for a path that
/// cannot name an asset (empty, absolute, or with `..`).
pub(crate) fn name_of(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}
