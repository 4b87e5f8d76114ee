//! Destinations: where decoded bytes end up.
//!
//! - [`HostMemory`]: memory the runtime writes for the application.
//! - `wgpu::Buffer` and `wgpu::Texture` destinations are written by GPU
//!   copies (and decode dispatches) recorded on the application's queue; the
//!   layout rules for those copies live in [`texture`].

pub(crate) mod gpu_copies;
mod memory;
pub mod texture;

pub(crate) use memory::HostClaim;
pub use memory::{HostMemory, HostMemoryError};
