//! The object store client and the small tokio runtime it runs on.

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, GetOptions, ObjectStore, RetryConfig};

use super::{RemoteConfig, RemoteError};

/// One object in one store, and the runtime its requests run on.
pub(crate) struct Store {
    pub(crate) url: String,
    client: Arc<dyn ObjectStore>,
    location: ObjectPath,
    /// The entity tag `head` found: every GET asks for that version
    /// (`If-Match`), so an object replaced while open fails with a clear
    /// error instead of bytes that match no checksum.
    etag: std::sync::OnceLock<String>,
    /// Taken on drop: shut down without blocking, because the last
    /// reference may go away on one of its own threads.
    rt: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
}

/// What the store says about the object.
pub(crate) struct ObjectInfo {
    pub(crate) size: u64,
    /// The entity tag, or the modification time where there is none: a
    /// cache made for another version of the object is not reused.
    pub(crate) version: String,
}

impl Store {
    /// A client for `url` (`s3://bucket/key`), its retries and timeouts
    /// from `cfg`.
    pub(crate) fn new(url: &str, cfg: &RemoteConfig) -> Result<Store, RemoteError> {
        let bad = |reason: String| RemoteError::Url {
            url: url.to_string(),
            reason,
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("only s3:// URLs are read (S3-compatible object storage)".into()))?;
        let (bucket, key) = rest
            .split_once('/')
            .filter(|(b, k)| !b.is_empty() && !k.is_empty())
            .ok_or_else(|| bad("expected s3://BUCKET/KEY".into()))?;
        let location = ObjectPath::parse(key).map_err(|e| bad(format!("bad key: {e}")))?;
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: cfg.retries,
            retry_timeout: cfg.retry_timeout,
        };
        let options = ClientOptions::new()
            .with_timeout(cfg.request_timeout)
            .with_connect_timeout(cfg.connect_timeout)
            .with_pool_max_idle_per_host(cfg.concurrency.max(1));
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_retry(retry)
            .with_client_options(options)
            .with_http_connector(super::http::PackHttp::new(cfg));
        if let Some(e) = &cfg.endpoint {
            b = b.with_endpoint(e).with_allow_http(true);
        }
        if let Some((id, secret)) = &cfg.credentials {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
        }
        let client = b.build().map_err(|e| bad(e.to_string()))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gpustream-remote")
            .enable_all()
            .build()
            .map_err(|e| bad(format!("cannot start the fetch threads: {e}")))?;
        Ok(Store {
            url: url.to_string(),
            client: Arc::new(client),
            location,
            etag: std::sync::OnceLock::new(),
            handle: rt.handle().clone(),
            rt: Some(rt),
        })
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Runs `f` to completion from a thread outside the runtime.
    pub(crate) fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.handle.block_on(f)
    }

    /// The object's size and version.
    pub(crate) async fn head(&self) -> Result<ObjectInfo, String> {
        let m = self
            .client
            .get_opts(&self.location, GetOptions::new().with_head(true))
            .await
            .map_err(|e| e.to_string())?
            .meta;
        if let Some(t) = &m.e_tag {
            let _ = self.etag.set(t.clone());
        }
        let version = m.e_tag.unwrap_or_else(|| m.last_modified.to_rfc3339());
        Ok(ObjectInfo {
            size: m.size,
            version,
        })
    }

    /// The bytes in `range`, all of them or an error.
    pub(crate) fn get(
        &self,
        range: Range<u64>,
    ) -> impl Future<Output = Result<bytes::Bytes, String>> + Send + 'static {
        let (client, location) = (self.client.clone(), self.location.clone());
        let etag = self.etag.get().cloned();
        async move {
            let want = range.end - range.start;
            let mut options = GetOptions::new().with_range(Some(range));
            options.if_match = etag;
            let got = client
                .get_opts(&location, options)
                .await
                .map_err(|e| e.to_string())?;
            super::http::read_body(got, want).await
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}
