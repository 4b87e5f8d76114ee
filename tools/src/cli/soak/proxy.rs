//! A fault-injecting HTTP proxy on loopback, between the remote pack's S3
//! client and the S3 server: it forwards each request on a connection of
//! its own (`Connection: close`), or, in a fault window, refuses the
//! connection, answers 500, or forwards after a delay. Its hostile mode
//! answers as the security tests' servers do: bodies shorter or longer
//! than the range asked for, a Content-Length with no end, and redirects to
//! another host.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// What the proxy does with the next requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Forward.
    Pass = 0,
    /// Close every connection at once, as a stopped server's port does.
    Refuse = 1,
    /// Answer `500 Internal Server Error`.
    Error500 = 2,
    /// Forward after `SLOW` of delay.
    Slow = 3,
    /// Answer with hostile bodies and headers (see the module docs).
    Hostile = 4,
}

impl Mode {
    fn from_u8(v: u8) -> Mode {
        match v {
            1 => Mode::Refuse,
            2 => Mode::Error500,
            3 => Mode::Slow,
            4 => Mode::Hostile,
            _ => Mode::Pass,
        }
    }
}

/// The delay of `Mode::Slow`.
const SLOW: Duration = Duration::from_millis(400);
/// The most bytes of request head the proxy reads.
const MAX_HEAD: usize = 64 << 10;

/// A running proxy; dropping it stops accepting.
pub struct FaultProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
    /// Requests answered by kind: forwarded, refused, 500, slowed, hostile.
    pub counts: Arc<[AtomicU64; 5]>,
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream` on 127.0.0.1 (any free port).
    pub fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let mode = Arc::new(AtomicU8::new(Mode::Pass as u8));
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<[AtomicU64; 5]> = Arc::new(Default::default());
        let (m, s, c) = (mode.clone(), stop.clone(), counts.clone());
        std::thread::Builder::new()
            .name("soak-proxy".into())
            .spawn(move || {
                while !s.load(Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let (m, c) = (m.clone(), c.clone());
                            let _ = std::thread::Builder::new()
                                .name("soak-proxy-conn".into())
                                .spawn(move || {
                                    serve(client, upstream, Mode::from_u8(m.load(Relaxed)), &c)
                                });
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            })?;
        Ok(FaultProxy {
            addr,
            mode,
            stop,
            counts,
        })
    }

    /// The endpoint URL clients use.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Sets what the proxy does with requests from now on.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Relaxed);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

/// One client connection: one request, answered by `mode`.
fn serve(mut client: TcpStream, upstream: SocketAddr, mode: Mode, counts: &[AtomicU64; 5]) {
    counts[mode as usize].fetch_add(1, Relaxed);
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    if mode == Mode::Refuse {
        return;
    }
    let Some((head, body)) = read_request(&mut client) else {
        return;
    };
    match mode {
        Mode::Error500 => {
            let _ = client.write_all(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
        Mode::Hostile => hostile(&mut client, &head),
        _ => {
            if mode == Mode::Slow {
                std::thread::sleep(SLOW);
            }
            let Ok(mut up) = TcpStream::connect_timeout(&upstream, Duration::from_secs(5)) else {
                return;
            };
            let _ = up.set_read_timeout(Some(Duration::from_secs(30)));
            let head = close_after(&head);
            if up.write_all(head.as_bytes()).is_err() || up.write_all(&body).is_err() {
                return;
            }
            let _ = std::io::copy(&mut up, &mut client);
        }
    }
}

/// Reads one request: its head (as text) and its body (by Content-Length).
fn read_request(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = client.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let len = header(&head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(64 << 20);
    let mut body = buf[end..].to_vec();
    while body.len() < len {
        let n = client.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Some((head, body))
}

/// A header's value (name matched without case).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The request head with `Connection: close`, so the upstream ends the
/// response by closing and one connection carries one request.
fn close_after(head: &str) -> String {
    let mut out = String::with_capacity(head.len() + 20);
    for line in head.split("\r\n") {
        if line.is_empty() {
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("connection:") || lower.starts_with("keep-alive:") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// A hostile answer to a ranged GET (or anything else): by the request's
/// range, a body shorter than asked, longer than asked, a Content-Length
/// promising far more than is sent, or a redirect to another host. Every
/// one must come back to the reader as an error naming what was wrong.
fn hostile(client: &mut TcpStream, head: &str) {
    let range = header(head, "range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
    let Some((first, last)) = range else {
        let _ = client.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    };
    let want = last - first + 1;
    let pick = (first / 4096 + want) % 4;
    let (len, body): (u64, u64) = match pick {
        0 => (want / 2, want / 2),
        1 => (want + 4096, want + 4096),
        2 => (1 << 40, want),
        _ => {
            let _ = client.write_all(
                b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://198.51.100.7/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return;
        }
    };
    let head = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {first}-{}/{}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n",
        first + len.saturating_sub(1),
        last + 1 + (1 << 30)
    );
    if client.write_all(head.as_bytes()).is_err() {
        return;
    }
    let zeros = vec![0u8; 64 << 10];
    let mut left = body;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        if client.write_all(&zeros[..n]).is_err() {
            return;
        }
        left -= n as u64;
    }
}
