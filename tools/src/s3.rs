//! A real S3 server (`s3s-fs`, S3 over a local directory) on loopback, in
//! its own tokio runtime: for `gpustream soak`, the remote pack tests and
//! the `s3_server` example. Dropping it stops the server at once, connections and all, as
//! a crash would; starting one on the same port and directory restarts it.

use std::net::SocketAddr;
use std::path::Path;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

/// The access key id and secret the server accepts.
pub const ACCESS_KEY: (&str, &str) = ("gpustream", "gpustream-secret");

/// A running server.
pub struct S3Server {
    rt: Option<tokio::runtime::Runtime>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl S3Server {
    /// Serves `root` (one directory per bucket) on 127.0.0.1:`port` (0:
    /// any free port), with `threads` server threads.
    pub fn start(root: &Path, port: u16, threads: usize) -> std::io::Result<S3Server> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("s3-server")
            .enable_all()
            .build()?;
        let fs =
            s3s_fs::FileSystem::new(root).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let mut b = S3ServiceBuilder::new(fs);
        b.set_auth(SimpleAuth::from_single(ACCESS_KEY.0, ACCESS_KEY.1));
        let service = b.build();
        let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))?;
        let addr = listener.local_addr()?;
        rt.spawn(async move {
            let http = ConnBuilder::new(TokioExecutor::new());
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let conn = http
                    .serve_connection(TokioIo::new(socket), service.clone())
                    .into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
        Ok(S3Server { rt: Some(rt), addr })
    }

    /// The endpoint URL clients use.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Uploads `bytes` as `bucket/key` through the server (so it records the
/// object's entity tag, as a real store does, instead of hashing the whole
/// file on every request).
pub fn put_object(
    endpoint: &str,
    bucket: &str,
    key: &str,
    bytes: Vec<u8>,
) -> Result<(), object_store::Error> {
    use object_store::aws::AmazonS3Builder;
    use object_store::{ObjectStore, PutPayload};
    let store = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_access_key_id(ACCESS_KEY.0)
        .with_secret_access_key(ACCESS_KEY.1)
        .build()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| object_store::Error::Generic {
            store: "S3",
            source: Box::new(e),
        })?;
    rt.block_on(store.put_opts(
        &object_store::path::Path::from(key),
        PutPayload::from(bytes),
        Default::default(),
    ))?;
    Ok(())
}
