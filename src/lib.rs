//! gpustream streams compressed assets from storage into GPU buffers and
//! textures, the way DirectStorage does on Windows, on every platform wgpu
//! runs on.
//!
//! The modules follow the data flow:
//! `pack` (the on-disk format) -> `io` (bytes off the disk) -> `staging`
//! (bytes into GPU-visible memory) -> `decode` (CPU or GPU) -> `destinations`
//! (memory, buffers, textures) -> `completion` (fences, status arrays).
//! [`codec`] holds the per-block codecs every stage shares, and [`gpu`] the
//! adapter plumbing.

#![warn(missing_docs)]

pub mod codec;
pub mod completion;
pub mod decode;
pub mod destinations;
pub mod gpu;
pub mod io;
pub mod pack;
pub mod report;
pub mod runtime;
pub mod staging;

pub use codec::{Codec, CodecError, MAX_BLOCK_SIZE};
