//! Trace capture: every request, signal and submit of a runtime's queues,
//! one JSON object per line, so `gpustream replay` can play the I/O back
//! without the application (like Expanse's trace player).
//!
//! Format (version 1): the first line is
//! `{"format":"gpustream-trace","version":1}`; every other line is a
//! [`TraceRecord`].
//!
//! A trace is untrusted input when it is read back (`TraceReader`, public
//! with the `tools` feature): lines are read with a bound ([`MAX_LINE_BYTES`]) that no input can move, and
//! every error names the file and the line (and the byte offset where one
//! helps).

use std::collections::HashMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use super::request::{Destination, Request, Source};

/// The trace format's version; replay refuses others.
pub const TRACE_VERSION: u32 = 1;

/// The first line of a trace.
#[derive(Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TraceHeader {
    /// Always "gpustream-trace".
    pub format: String,
    /// [`TRACE_VERSION`].
    pub version: u32,
}

/// Where a traced request's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "lowercase"))]
pub enum TraceSource {
    /// A blob or a range of it.
    Blob {
        /// Byte range of the blob.
        range: [u64; 2],
    },
    /// A texture tile.
    Tile {
        /// Mip level.
        mip: u8,
        /// Tile column.
        x: u32,
        /// Tile row.
        y: u32,
    },
    /// A texture's packed mips.
    Packed,
    /// A memory source (replayed from the pack-less bytes' sizes only).
    Memory {
        /// Stored bytes.
        stored: u64,
    },
}

/// The kind of destination a traced request delivered into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum TraceDest {
    /// Host memory.
    Memory,
    /// A `wgpu::Buffer`.
    Buffer,
    /// A `wgpu::Texture`.
    Texture,
}

impl TraceDest {
    /// The word the trace uses.
    pub fn name(self) -> &'static str {
        match self {
            TraceDest::Memory => "memory",
            TraceDest::Buffer => "buffer",
            TraceDest::Texture => "texture",
        }
    }
}

/// One line of a trace after the header.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "op", rename_all = "lowercase"))]
pub enum TraceRecord {
    /// A pack used by later requests.
    Pack {
        /// Its id within the trace.
        id: u32,
        /// Its path when traced.
        path: PathBuf,
    },
    /// A queue was created.
    Queue {
        /// Its id within the trace.
        id: u32,
        /// Its priority.
        priority: crate::io::Priority,
        /// Its capacity.
        capacity: usize,
    },
    /// A request was enqueued.
    Request {
        /// The queue.
        queue: u32,
        /// Microseconds since the trace started.
        t_us: u64,
        /// The pack (absent for memory sources).
        pack: Option<u32>,
        /// The asset's name (absent for memory sources).
        asset: Option<String>,
        /// What of the asset.
        source: TraceSource,
        /// First file offset read (0 for memory sources).
        offset: u64,
        /// Stored bytes.
        stored: u64,
        /// Uncompressed bytes delivered.
        size: u64,
        /// The codec of its first block.
        codec: Option<crate::codec::Codec>,
        /// The kind of destination.
        dest: TraceDest,
        /// The cancellation tag.
        tag: u64,
    },
    /// A fence signal was enqueued.
    Signal {
        /// The queue.
        queue: u32,
        /// Microseconds since the trace started.
        t_us: u64,
    },
    /// A submit (explicit or automatic).
    Submit {
        /// The queue.
        queue: u32,
        /// Microseconds since the trace started.
        t_us: u64,
        /// Requests it carried.
        requests: u64,
    },
}

/// Writes a trace; shared by all queues of a runtime.
pub(crate) struct TraceWriter {
    out: Mutex<(BufWriter<std::fs::File>, HashMap<PathBuf, u32>)>,
    start: Instant,
}

/// One JSON value onto `out`: a trace line. Without the `serde` feature a
/// trace cannot be written, and creating one says so.
#[cfg(feature = "serde")]
fn write_json<T: serde::Serialize>(out: &mut impl Write, value: &T) -> std::io::Result<()> {
    serde_json::to_writer(out, value).map_err(std::io::Error::from)
}

#[cfg(not(feature = "serde"))]
fn write_json<T>(_out: &mut impl Write, _value: &T) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "trace capture needs gpustream's `serde` feature",
    ))
}

/// One trace line parsed, or what is wrong with it.
#[cfg(feature = "serde")]
fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

#[cfg(not(feature = "serde"))]
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
fn parse_json<T>(_text: &str) -> Result<T, String> {
    Err("reading traces needs gpustream's `serde` feature".into())
}

impl TraceWriter {
    pub(crate) fn create(path: &Path) -> std::io::Result<TraceWriter> {
        let mut f = BufWriter::new(std::fs::File::create(path)?);
        let header = TraceHeader {
            format: "gpustream-trace".into(),
            version: TRACE_VERSION,
        };
        write_json(&mut f, &header)?;
        f.write_all(b"\n")?;
        Ok(TraceWriter {
            out: Mutex::new((f, HashMap::new())),
            start: Instant::now(),
        })
    }

    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    fn write(
        &self,
        guard: &mut (BufWriter<std::fs::File>, HashMap<PathBuf, u32>),
        rec: &TraceRecord,
    ) {
        // A trace that cannot be written must not fail the application's
        // loads: errors are dropped (the file ends short).
        let _ = write_json(&mut guard.0, rec);
        let _ = guard.0.write_all(b"\n");
    }

    pub(crate) fn queue(&self, id: u32, priority: crate::io::Priority, capacity: usize) {
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.write(
            &mut g,
            &TraceRecord::Queue {
                id,
                priority,
                capacity,
            },
        );
    }

    pub(crate) fn request(
        &self,
        queue: u32,
        req: &Request,
        offset: u64,
        stored: u64,
        size: u64,
        codec: Option<crate::codec::Codec>,
    ) {
        let t_us = self.now_us();
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let (pack, asset, source) = match &req.source {
            Source::Blob { pack, asset, range } => {
                let a = pack.pack().asset(*asset);
                let r = range.clone().unwrap_or(0..a.size);
                (
                    Some(pack.clone()),
                    Some(a.name.clone()),
                    TraceSource::Blob {
                        range: [r.start, r.end],
                    },
                )
            }
            Source::Tile {
                pack,
                asset,
                mip,
                x,
                y,
            } => (
                Some(pack.clone()),
                Some(pack.pack().asset(*asset).name.clone()),
                TraceSource::Tile {
                    mip: *mip,
                    x: *x,
                    y: *y,
                },
            ),
            Source::PackedMips { pack, asset } => (
                Some(pack.clone()),
                Some(pack.pack().asset(*asset).name.clone()),
                TraceSource::Packed,
            ),
            Source::Memory { data, .. } => (
                None,
                None,
                TraceSource::Memory {
                    stored: data.len() as u64,
                },
            ),
        };
        let pack_id = pack.map(|p| {
            let path = p.path().to_path_buf();
            let next = g.1.len() as u32;
            let id = *g.1.entry(path.clone()).or_insert(next);
            if id == next {
                let abs = std::fs::canonicalize(&path).unwrap_or(path);
                self.write(&mut g, &TraceRecord::Pack { id, path: abs });
            }
            id
        });
        let dest = match &req.destination {
            Destination::Memory { .. } => TraceDest::Memory,
            Destination::Buffer { .. } => TraceDest::Buffer,
            Destination::Texture { .. } => TraceDest::Texture,
        };
        let rec = TraceRecord::Request {
            queue,
            t_us,
            pack: pack_id,
            asset,
            source,
            offset,
            stored,
            size,
            codec,
            dest,
            tag: req.tag,
        };
        self.write(&mut g, &rec);
    }

    pub(crate) fn signal(&self, queue: u32) {
        let t_us = self.now_us();
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.write(&mut g, &TraceRecord::Signal { queue, t_us });
    }

    pub(crate) fn submit(&self, queue: u32, requests: u64) {
        let t_us = self.now_us();
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.write(
            &mut g,
            &TraceRecord::Submit {
                queue,
                t_us,
                requests,
            },
        );
    }

    pub(crate) fn flush(&self) {
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = g.0.flush();
    }
}

/// The longest line a trace may hold, in bytes (without its newline). The
/// writer's lines are a few hundred bytes; a longer line is refused as it is
/// read, so a file without newlines (or `/dev/zero`) costs at most this much
/// memory.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// What is wrong with a trace being read. Every variant names the file and
/// the line (1-based); the byte offset is where the line starts, or where the
/// bad byte is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// Reading the file failed.
    #[error("{}:{line}: read at byte offset {offset}: {source}", path.display())]
    Io {
        /// The trace.
        path: PathBuf,
        /// The line being read.
        line: u64,
        /// The byte offset of the read.
        offset: u64,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line is longer than [`MAX_LINE_BYTES`].
    #[error("{}:{line}: the line starting at byte offset {offset} is longer than {limit} bytes (not a gpustream trace?)", path.display())]
    LineTooLong {
        /// The trace.
        path: PathBuf,
        /// The line.
        line: u64,
        /// Byte offset of the line's start.
        offset: u64,
        /// The limit, [`MAX_LINE_BYTES`].
        limit: usize,
    },
    /// A line is not UTF-8.
    #[error("{}:{line}: not UTF-8 at byte offset {offset}", path.display())]
    NotUtf8 {
        /// The trace.
        path: PathBuf,
        /// The line.
        line: u64,
        /// Byte offset of the first invalid byte.
        offset: u64,
    },
    /// The file is empty: no header line.
    #[error("{}:1: empty file, not a gpustream trace (no header line)", path.display())]
    Empty {
        /// The trace.
        path: PathBuf,
    },
    /// The first line is not a trace header.
    #[error("{}:1: not a gpustream trace header: {reason}", path.display())]
    BadHeader {
        /// The trace.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The header names another format or version.
    #[error("{}:1: trace format '{format}' version {version} (this build reads 'gpustream-trace' version {TRACE_VERSION})", path.display())]
    Version {
        /// The trace.
        path: PathBuf,
        /// The format named.
        format: String,
        /// The version named.
        version: u32,
    },
    /// A line is not a valid record.
    #[error("{}:{line}: bad record: {reason}", path.display())]
    Record {
        /// The trace.
        path: PathBuf,
        /// The line.
        line: u64,
        /// What the JSON parser found (with the column).
        reason: String,
    },
    /// The trace holds more records than the reader was told to accept.
    #[error("{}:{line}: more than {limit} records", path.display())]
    TooManyRecords {
        /// The trace.
        path: PathBuf,
        /// The first line past the limit.
        line: u64,
        /// The limit given to `TraceReader::with_max_records`.
        limit: u64,
    },
}

/// Reads a trace record by record: an iterator of `(line, record)`. The
/// header is checked by [`TraceReader::new`]; blank lines are skipped; the
/// first error ends the iteration.
///
/// Memory use is bounded by [`MAX_LINE_BYTES`] whatever the input holds; a
/// caller that keeps the records sets a bound on their number with
/// [`TraceReader::with_max_records`].
pub struct TraceReader<R> {
    path: PathBuf,
    input: R,
    /// The number of the line last read (1 is the header).
    line: u64,
    /// Byte offset of the next line's start.
    offset: u64,
    /// Byte offset of the start of the line in `buf`.
    line_start: u64,
    buf: Vec<u8>,
    records: u64,
    max_records: u64,
    done: bool,
}

// Reading traces back is the tools' (`gpustream replay`); without `tools`
// the reader is crate-private and unused.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
impl TraceReader<std::io::BufReader<std::fs::File>> {
    /// Opens a trace file and checks its header.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let f = std::fs::File::open(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            line: 1,
            offset: 0,
            source,
        })?;
        TraceReader::new(path, std::io::BufReader::new(f))
    }
}

#[cfg_attr(not(feature = "internals"), allow(dead_code))]
impl<R: BufRead> TraceReader<R> {
    /// Reads and checks the header from `input`; `path` names the trace in
    /// errors.
    pub fn new(path: impl Into<PathBuf>, input: R) -> Result<Self, TraceError> {
        let mut r = TraceReader {
            path: path.into(),
            input,
            line: 0,
            offset: 0,
            line_start: 0,
            buf: Vec::new(),
            records: 0,
            max_records: u64::MAX,
            done: false,
        };
        if !r.read_line()? {
            return Err(TraceError::Empty { path: r.path });
        }
        let text = r.text()?;
        let header: TraceHeader = parse_json(text).map_err(|reason| TraceError::BadHeader {
            path: r.path.clone(),
            reason,
        })?;
        if header.format != "gpustream-trace" || header.version != TRACE_VERSION {
            return Err(TraceError::Version {
                path: r.path,
                format: header.format,
                version: header.version,
            });
        }
        Ok(r)
    }

    /// Refuses traces with more than `limit` records (with
    /// [`TraceError::TooManyRecords`] at the first line past it).
    pub fn with_max_records(mut self, limit: u64) -> Self {
        self.max_records = limit;
        self
    }

    /// The trace's name in errors.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the next line into `buf`, without its line ending. Returns
    /// false at the end of the input. Never holds more than
    /// [`MAX_LINE_BYTES`] of one line: the length is checked before each
    /// piece is appended.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        self.buf.clear();
        let start = self.offset;
        let mut consumed = false;
        loop {
            let avail = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(TraceError::Io {
                        path: self.path.clone(),
                        line: self.line + 1,
                        offset: self.offset,
                        source,
                    })
                }
            };
            if avail.is_empty() {
                break;
            }
            consumed = true;
            let (take, content, found) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, i, true),
                None => (avail.len(), avail.len(), false),
            };
            if self.buf.len() + content > MAX_LINE_BYTES {
                return Err(TraceError::LineTooLong {
                    path: self.path.clone(),
                    line: self.line + 1,
                    offset: start,
                    limit: MAX_LINE_BYTES,
                });
            }
            self.buf.extend_from_slice(&avail[..content]);
            self.input.consume(take);
            self.offset += take as u64;
            if found {
                break;
            }
        }
        if !consumed {
            return Ok(false);
        }
        self.line += 1;
        self.line_start = start;
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(true)
    }

    /// The line in `buf` as text.
    fn text(&self) -> Result<&str, TraceError> {
        std::str::from_utf8(&self.buf).map_err(|e| TraceError::NotUtf8 {
            path: self.path.clone(),
            line: self.line,
            offset: self.line_start + e.valid_up_to() as u64,
        })
    }

    fn next_record(&mut self) -> Result<Option<(u64, TraceRecord)>, TraceError> {
        loop {
            if !self.read_line()? {
                return Ok(None);
            }
            let text = self.text()?;
            if text.trim().is_empty() {
                continue;
            }
            let rec: TraceRecord = parse_json(text).map_err(|reason| TraceError::Record {
                path: self.path.clone(),
                line: self.line,
                reason,
            })?;
            if self.records >= self.max_records {
                return Err(TraceError::TooManyRecords {
                    path: self.path.clone(),
                    line: self.line,
                    limit: self.max_records,
                });
            }
            self.records += 1;
            return Ok(Some((self.line, rec)));
        }
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<(u64, TraceRecord), TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Without the `serde` feature a trace can be neither written nor read,
/// and both say which feature they need.
#[cfg(all(test, not(feature = "serde")))]
mod without_serde {
    #[test]
    fn capture_and_replay_name_the_feature() {
        let dir = std::env::temp_dir().join(format!("gpustream-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let e = super::TraceWriter::create(&path)
            .err()
            .expect("no trace without serde");
        assert!(e.to_string().contains("`serde` feature"), "{e}");
        std::fs::write(&path, "{}\n").unwrap();
        let e = super::TraceReader::open(&path)
            .err()
            .expect("no replay without serde");
        assert!(e.to_string().contains("`serde` feature"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"format":"gpustream-trace","version":1}"#;
    const SUBMIT: &str = r#"{"op":"submit","queue":0,"t_us":5,"requests":2}"#;

    fn read_all(bytes: &[u8]) -> Result<Vec<(u64, TraceRecord)>, TraceError> {
        TraceReader::new("t.trace", bytes)?.collect()
    }

    #[test]
    fn records_come_with_their_line_numbers_and_blank_lines_are_skipped() {
        let text = format!("{HEADER}\r\n{SUBMIT}\n\n  \n{SUBMIT}");
        let recs = read_all(text.as_bytes()).unwrap();
        let lines: Vec<u64> = recs.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [2, 5]);
        assert!(matches!(recs[0].1, TraceRecord::Submit { requests: 2, .. }));
    }

    #[test]
    fn an_endless_line_is_refused_at_the_bound() {
        // An endless stream of zeros, like /dev/zero: the reader must stop
        // at the bound rather than grow one line forever.
        let zeros = std::io::BufReader::new(std::io::repeat(0));
        let e = TraceReader::new("zero", zeros).err().unwrap();
        assert!(
            matches!(e, TraceError::LineTooLong { line: 1, offset: 0, limit, .. } if limit == MAX_LINE_BYTES),
            "{e}"
        );
        // A long record after a good header names its line and offset.
        let text = format!("{HEADER}\n{}", "x".repeat(MAX_LINE_BYTES + 1));
        let e = read_all(text.as_bytes()).unwrap_err();
        let at = HEADER.len() as u64 + 1;
        assert!(
            matches!(e, TraceError::LineTooLong { line: 2, offset, .. } if offset == at),
            "{e}"
        );
        // Exactly the limit is still read (and then fails as JSON, by line).
        let text = format!("{HEADER}\n{}", " ".repeat(MAX_LINE_BYTES - 1) + "x");
        let e = read_all(text.as_bytes()).unwrap_err();
        assert!(matches!(e, TraceError::Record { line: 2, .. }), "{e}");
    }

    #[test]
    fn bad_utf8_names_the_file_line_and_byte() {
        let mut bytes = format!("{HEADER}\n{SUBMIT}\n").into_bytes();
        let line3 = bytes.len() as u64;
        bytes.extend_from_slice(b"{\"op\":\xff}\n");
        let e = read_all(&bytes).unwrap_err();
        assert!(
            matches!(e, TraceError::NotUtf8 { line: 3, offset, .. } if offset == line3 + 6),
            "{e}"
        );
        assert!(e.to_string().starts_with("t.trace:3: not UTF-8"), "{e}");
    }

    #[test]
    fn headers_are_checked() {
        assert!(matches!(read_all(b""), Err(TraceError::Empty { .. })));
        assert!(matches!(
            read_all(b"hello\n"),
            Err(TraceError::BadHeader { .. })
        ));
        let e = read_all(br#"{"format":"gpustream-trace","version":2}"#).unwrap_err();
        assert!(matches!(e, TraceError::Version { version: 2, .. }), "{e}");
        assert!(e.to_string().starts_with("t.trace:1: "), "{e}");
    }

    #[test]
    fn the_record_limit_is_enforced_at_the_first_line_past_it() {
        let text = format!("{HEADER}\n{SUBMIT}\n{SUBMIT}\n{SUBMIT}\n");
        let r = TraceReader::new("t.trace", text.as_bytes())
            .unwrap()
            .with_max_records(2);
        let got: Vec<_> = r.collect();
        assert_eq!(got.len(), 3);
        assert!(
            matches!(
                got[2],
                Err(TraceError::TooManyRecords {
                    line: 4,
                    limit: 2,
                    ..
                })
            ),
            "{:?}",
            got[2]
        );
    }

    #[test]
    fn an_unknown_destination_is_a_record_error() {
        let text = format!(
            "{HEADER}\n{}\n",
            r#"{"op":"request","queue":0,"t_us":1,"pack":null,"asset":null,"source":{"kind":"memory","stored":4},"offset":0,"stored":4,"size":4,"codec":null,"dest":"disk","tag":0}"#
        );
        let e = read_all(text.as_bytes()).unwrap_err();
        assert!(matches!(e, TraceError::Record { line: 2, .. }), "{e}");
    }
}
