//! gpustream streams compressed assets from storage into GPU buffers and
//! textures, the way DirectStorage does on Windows, on every platform wgpu
//! runs on.
//!
//! The modules follow the data flow:
//! `pack` (the on-disk format) -> `io` (bytes off the disk) -> `staging`
//! (bytes into GPU-visible memory) -> `decode` (CPU or GPU) -> `destinations`
//! (memory, buffers, textures) -> `completion` (fences, status arrays).
//! [`codec`] holds the per-block codecs every stage shares. [`prelude`] has
//! what a program needs in one `use`.
//!
//! This crate is the streaming library alone. The `gpustream` command-line
//! tool, the packer's image, KTX2, DDS and Basis importers, BCn encoding and
//! the demo pack are the `gpustream-tools` crate beside it (tools/;
//! docs/dependencies.md). The `internals` feature makes public the pieces
//! below the runtime that those tools and the tests reach.

#![warn(missing_docs)]
// Every unsafe block and impl states why it is sound (`// SAFETY:`).
#![warn(clippy::undocumented_unsafe_blocks)]

// The README's library example and docs/runtime.md's walkthrough are
// compiled with the doctests, so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/runtime.md")]
struct RuntimeDocDoctests;

pub mod codec;
pub mod completion;
pub mod decode;
pub mod destinations;
pub mod io;
pub mod pack;
pub mod prelude;
#[cfg(all(feature = "remote", target_os = "linux"))]
pub mod remote;
pub mod runtime;
pub(crate) mod staging;

pub use codec::{Codec, CodecError, MAX_BLOCK_SIZE};
