//! Everything the common program needs, in one `use`:
//!
//! ```no_run
//! use gpustream::prelude::*;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::without_gpu(RuntimeConfig::default())?;
//! let pack = runtime.open_pack("assets.gspk")?;
//! let mesh = pack.find("level1/mesh.bin").expect("the pack has the mesh");
//! let memory = HostMemory::new(pack.asset(mesh).size as usize);
//!
//! let queue = runtime.create_queue(QueueConfig::default());
//! queue.enqueue(Request::new(Source::blob(&pack, mesh), Destination::memory(&memory)))?;
//! let fence = Fence::new();
//! queue.enqueue_signal(&fence, 1);
//! queue.submit();
//! fence.wait(1);
//! let bytes = memory.to_vec()?;
//! # let _ = bytes; Ok(()) }
//! ```

pub use crate::codec::Codec;
pub use crate::completion::{ErrorRecord, Fence, RequestError, StatusArray, StatusEntry};
pub use crate::destinations::HostMemory;
pub use crate::pack::{AssetId, AssetKind, TextureFormat};
pub use crate::runtime::{
    Destination, PackFile, Priority, Queue, QueueConfig, Request, Runtime, RuntimeConfig,
    RuntimeError, Source, SourceKind,
};
