//! gpustream streams compressed assets from storage into GPU buffers and
//! textures, the way DirectStorage does on Windows, on every platform wgpu
//! runs on.
//!
//! The modules follow the data flow:
//! `pack` (the on-disk format) -> `io` (bytes off the disk) -> `staging`
//! (bytes into GPU-visible memory) -> `decode` (CPU or GPU) -> `destinations`
//! (memory, buffers, textures) -> `completion` (fences, status arrays).
//! [`codec`] holds the per-block codecs every stage shares, and `gpu` the
//! adapter plumbing. [`prelude`] has what a program needs in one `use`.
//!
//! With default features off (`default-features = false`), the crate is the
//! streaming library alone: no CLI, packer import, BCn encoder or plots
//! (docs/dependencies.md).

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

/// A module public with the `tools` feature (the CLI, the tests and the
/// benches use it) and crate-private without, so that an engine building
/// the library alone (`default-features = false`) sees only the streaming
/// API (`docs/public-api.txt` lists it).
macro_rules! tools_pub_mod {
    ($name:ident) => {
        #[cfg(feature = "tools")]
        pub mod $name;
        #[cfg(not(feature = "tools"))]
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $name;
    };
}
pub(crate) use tools_pub_mod;

/// An item public with the `tools` feature and crate-private without it:
/// for items the tools, tests and benchmarks reach that an engine has no
/// use for (the raw read engine's `submit`, fault injection, trace
/// reading), so the engine's API stays the streaming runtime's.
macro_rules! tools_pub {
    ($(#[$meta:meta])* $kind:ident $($rest:tt)*) => {
        #[cfg(feature = "tools")]
        $(#[$meta])*
        pub $kind $($rest)*
        #[cfg(not(feature = "tools"))]
        #[allow(dead_code, unused_imports)]
        $(#[$meta])*
        pub(crate) $kind $($rest)*
    };
}
pub(crate) use tools_pub;

pub mod codec;
pub mod completion;
pub mod decode;
pub mod destinations;
tools_pub_mod!(gpu);
pub mod io;
pub mod pack;
pub mod prelude;
#[cfg(all(feature = "remote", target_os = "linux"))]
pub mod remote;
pub mod runtime;
pub(crate) mod staging;

pub use codec::{Codec, CodecError, MAX_BLOCK_SIZE};
