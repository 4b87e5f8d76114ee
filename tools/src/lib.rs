//! What the `gpustream` command-line tool is built from, beside the
//! library: the packer's importers (PNG and JPEG images, KTX2, DDS, Basis
//! Universal), BCn encoding, the demo pack, and finding an adapter and
//! device of the tool's own. The tests, benchmarks and examples of both
//! crates use these too; an engine that streams packs needs only the
//! `gpustream` library.
//!
//! The library's [`PackWriter`](gpustream::pack::PackWriter) writes packs;
//! this crate turns input files into what it writes.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod basis;
mod basis_etc1s;
pub mod dds;
pub mod demo;
pub mod gpu;
pub mod import;
pub mod ktx2;
#[cfg(target_os = "linux")]
pub mod s3;
pub mod table;
pub mod testing;
