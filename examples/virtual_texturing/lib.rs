//! The virtual-texturing demo's logic, shared by `main.rs` and
//! `tests/virtual_texturing.rs` (which `#[path]`-includes this file, since
//! tests cannot run example binaries through `CARGO_BIN_EXE_*`).
#![allow(dead_code)]

pub mod app;
pub mod camera;
pub mod content;
pub mod imagery;
pub mod overlay;
pub mod pipes;
pub mod reference;
pub mod residency;
pub mod stats;
pub mod stream;
// The CLI's table printer.
pub use gpustream_tools::table;
pub mod window;
