//! Destinations: where decoded bytes end up.
//!
//! - [`HostMemory`]: memory the runtime writes for the application.
//! - `wgpu::Buffer` and `wgpu::Texture` destinations are written by GPU
//!   copies (and decode dispatches) recorded on the application's queue; the
//!   layout rules for those copies live in `texture` (public with
//!   `internals`), whose [`TextureRegionError`] names a region that breaks
//!   them.

pub(crate) mod gpu_copies;
mod memory;
#[cfg(feature = "internals")]
pub mod texture;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod texture;

pub(crate) use memory::HostClaim;
pub use memory::{HostMemory, HostMemoryError};
pub use texture::TextureRegionError;
