//! Opening a remote pack: the object's size and version, its header and
//! table of contents by ranged GETs, then the replica and its fetcher.

use std::path::Path;
use std::sync::Arc;

use crate::io::RangeFill;
use crate::pack::format::HEADER_LEN;
use crate::pack::{Pack, PackError};

use super::cache::{Cache, RemoteStats, Span};
use super::fetch::Fetcher;
use super::store::Store;
use super::{RemoteConfig, RemoteError};

/// A pack in object storage, its table of contents read and its local
/// replica open. Open it in a runtime with
/// [`Runtime::open_remote_pack`](crate::runtime::Runtime::open_remote_pack);
/// clones share the replica and its fetcher.
#[derive(Clone)]
pub struct RemotePack {
    pack: Arc<Pack>,
    fetcher: Arc<Fetcher>,
}

impl std::fmt::Debug for RemotePack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotePack")
            .field("url", &self.fetcher.store.url)
            .field("replica", &self.fetcher.cache.path)
            .finish()
    }
}

impl RemotePack {
    /// Fetches the header and table of contents of the pack at `url`
    /// (`s3://bucket/key`), validates them as [`Pack::open`] does a local
    /// file's, and opens its replica in `cfg.cache_dir`.
    pub fn open(url: &str, cfg: &RemoteConfig) -> Result<RemotePack, RemoteError> {
        let store = Arc::new(Store::new(url, cfg)?);
        let fetch_err = |what: String, reason: String| RemoteError::Fetch {
            url: url.to_string(),
            what,
            reason,
        };
        let info = store
            .block_on(store.head())
            .map_err(|e| fetch_err("its size (HEAD)".into(), e))?;
        let replica = replica_path(&cfg.cache_dir, url);
        let head_len = (HEADER_LEN as u64).min(info.size);
        let head = store
            .block_on(store.get(0..head_len))
            .map_err(|e| fetch_err(format!("the header (bytes 0..{head_len})"), e))?;
        let mut meta = vec![(0u64, head.to_vec())];
        let pack = if head.len() < HEADER_LEN {
            Err(PackError::Corrupt {
                path: replica.clone(),
                what: "header".into(),
                offset: 0,
                reason: format!(
                    "file is {} bytes, shorter than the {HEADER_LEN}-byte header",
                    info.size
                ),
            })
        } else {
            let mut hb = [0u8; HEADER_LEN];
            hb.copy_from_slice(&head);
            let replica_path = replica.clone();
            Pack::from_reader(replica_path.clone(), info.size, &hb, |offset, len| {
                let end = offset + len as u64;
                let b = store
                    .block_on(store.get(offset..end))
                    .map_err(|e| PackError::Corrupt {
                        path: replica_path.clone(),
                        what: "table of contents".into(),
                        offset,
                        reason: format!("GET bytes {offset}..{end} of {url}: {e}"),
                    })?;
                meta.push((offset, b.to_vec()));
                Ok(b.to_vec())
            })
        };
        let pack = pack.map_err(|source| RemoteError::Pack {
            url: url.to_string(),
            source,
        })?;
        if pack.members().len() > 1 {
            return Err(RemoteError::Striped {
                url: url.to_string(),
                members: pack.members().len(),
            });
        }
        let mut spans: Vec<Span> = pack
            .blocks()
            .iter()
            .filter(|b| b.stored_size > 0)
            .map(|b| Span {
                offset: b.offset,
                len: b.stored_size,
                crc: b.checksum,
            })
            .collect();
        spans.sort_by_key(|s| s.offset);
        let cache = Cache::open(&cfg.cache_dir, url, info, spans, cfg.cache_bytes, &meta)?;
        debug_assert_eq!(cache.path, pack.path());
        // The client's own limits bound a GET; this is the backstop.
        let deadline = cfg.request_timeout * (cfg.retries as u32 + 2) + cfg.retry_timeout;
        let fetcher = Fetcher::new(
            store,
            Arc::new(cache),
            cfg.concurrency,
            cfg.max_get,
            deadline,
        );
        Ok(RemotePack {
            pack: Arc::new(pack),
            fetcher: Arc::new(fetcher),
        })
    }

    /// The table of contents. Its path is the replica's.
    pub fn pack(&self) -> &Arc<Pack> {
        &self.pack
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        &self.fetcher.store.url
    }

    /// The local replica the runtime reads.
    pub fn replica(&self) -> &Path {
        &self.fetcher.cache.path
    }

    /// Fetches, hits, evictions and checksum failures so far.
    pub fn stats(&self) -> RemoteStats {
        self.fetcher.cache.stats()
    }

    /// Writes the index of present blocks now (it is also written as
    /// blocks arrive and when the last clone is dropped).
    pub fn save_index(&self) {
        self.fetcher.cache.save();
    }

    /// What makes the replica's ranges present before the engine reads.
    pub(crate) fn fill(&self) -> Arc<dyn RangeFill> {
        self.fetcher.clone()
    }
}

fn replica_path(dir: &Path, url: &str) -> std::path::PathBuf {
    super::cache::replica_path(dir, url)
}
