//! The object store's HTTP side, under the reader's own rules: a server's
//! answers are untrusted input.
//!
//! - **Bodies are read to the length asked for, no further.** A GET's body
//!   arrives as a stream and is refused as soon as it passes the range's
//!   length, so a server answering a 64-byte range with an endless body
//!   costs at most one network chunk past it, not the process's memory.
//! - **Redirects stay on the host asked.** The client object_store would
//!   build follows up to ten redirects anywhere, and the request's
//!   `x-amz-*` headers (the signature, a session token) go with them. This
//!   one follows at most [`MAX_REDIRECTS`], and only to the same scheme,
//!   host and port; a redirect elsewhere fails the request with an error
//!   naming both hosts.

use bytes::Bytes;
use object_store::client::{HttpClient, HttpConnector};
use object_store::{ClientOptions, GetResult};

use super::RemoteConfig;

/// Redirects followed on the same host before a request fails.
pub const MAX_REDIRECTS: usize = 3;

/// Reads a GET's body, which must be exactly `want` bytes: more fails as
/// soon as the stream passes `want` (nothing past it is buffered), fewer
/// fails at its end.
pub async fn read_body(got: GetResult, want: u64) -> Result<Bytes, String> {
    let mut stream = got.into_stream();
    let mut body = Vec::with_capacity(want.min(64 << 20) as usize);
    while let Some(chunk) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        if body.len() as u64 + chunk.len() as u64 > want {
            return Err(format!(
                "the server sent more than the {want} bytes asked for (the body was cut off at {})",
                body.len() + chunk.len()
            ));
        }
        body.extend_from_slice(&chunk);
    }
    if body.len() as u64 != want {
        return Err(format!("the server sent {} of {want} bytes", body.len()));
    }
    Ok(Bytes::from(body))
}

/// object_store's connector for the reader: reqwest with the timeouts and
/// pool of a [`RemoteConfig`], no decompression (a body's length is the
/// object's), and redirects only on the host asked.
#[derive(Debug)]
pub struct PackHttp {
    request_timeout: std::time::Duration,
    connect_timeout: std::time::Duration,
    pool: usize,
}

impl PackHttp {
    /// The connector for `cfg`'s timeouts and concurrency.
    pub fn new(cfg: &RemoteConfig) -> PackHttp {
        PackHttp {
            request_timeout: cfg.request_timeout,
            connect_timeout: cfg.connect_timeout,
            pool: cfg.concurrency.max(1),
        }
    }
}

impl HttpConnector for PackHttp {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("gpustream/", env!("CARGO_PKG_VERSION")))
            .timeout(self.request_timeout)
            .connect_timeout(self.connect_timeout)
            .pool_max_idle_per_host(self.pool)
            .redirect(reqwest::redirect::Policy::custom(same_host_only))
            .build()
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        Ok(HttpClient::new(client))
    }
}

/// The redirect rule: the same scheme, host and port as the request, at
/// most [`MAX_REDIRECTS`] times.
fn same_host_only(attempt: reqwest::redirect::Attempt) -> reqwest::redirect::Action {
    let Some(first) = attempt.previous().first() else {
        return attempt.stop();
    };
    let to = attempt.url();
    let same = first.scheme() == to.scheme()
        && first.host_str() == to.host_str()
        && first.port_or_known_default() == to.port_or_known_default();
    if !same {
        let why = format!(
            "refused a redirect from {} to another host, {}",
            first.host_str().unwrap_or("?"),
            to.host_str().unwrap_or("?")
        );
        return attempt.error(why);
    }
    if attempt.previous().len() > MAX_REDIRECTS {
        let why = format!("more than {MAX_REDIRECTS} redirects");
        return attempt.error(why);
    }
    attempt.follow()
}
