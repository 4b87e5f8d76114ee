//! Trace capture: every request, signal and submit of a runtime's queues,
//! one JSON object per line, so `gpustream replay` can play the I/O back
//! without the application (like Expanse's trace player).
//!
//! Format (version 1): the first line is
//! `{"format":"gpustream-trace","version":1}`; every other line is a
//! [`TraceRecord`].

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::request::{Destination, Request, Source};

/// The trace format's version; replay refuses others.
pub const TRACE_VERSION: u32 = 1;

/// The first line of a trace.
#[derive(Serialize, Deserialize, Debug)]
pub struct TraceHeader {
    /// Always "gpustream-trace".
    pub format: String,
    /// [`TRACE_VERSION`].
    pub version: u32,
}

/// Where a traced request's bytes come from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
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

/// One line of a trace after the header.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "lowercase")]
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
        priority: super::Priority,
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
        /// "memory", "buffer" or "texture".
        dest: String,
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

impl TraceWriter {
    pub(crate) fn create(path: &Path) -> std::io::Result<TraceWriter> {
        let mut f = BufWriter::new(std::fs::File::create(path)?);
        let header = TraceHeader {
            format: "gpustream-trace".into(),
            version: TRACE_VERSION,
        };
        serde_json::to_writer(&mut f, &header)?;
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
        let _ = serde_json::to_writer(&mut guard.0, rec);
        let _ = guard.0.write_all(b"\n");
    }

    pub(crate) fn queue(&self, id: u32, priority: super::Priority, capacity: usize) {
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
            Destination::Memory { .. } => "memory",
            Destination::Buffer { .. } => "buffer",
            Destination::Texture { .. } => "texture",
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
            dest: dest.into(),
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
