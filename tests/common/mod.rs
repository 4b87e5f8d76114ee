//! Helpers shared by the integration tests (not part of the library: a test
//! binary includes this with `mod common;`).

// Each test binary uses some of these helpers, none uses all.
#![allow(dead_code)]

pub mod lz4_batch;
#[cfg(target_os = "linux")]
#[allow(unused_imports)]
pub use gpustream_tools::s3;

#[allow(unused_imports)]
pub use gpustream_tools::testing::{
    io_uring_unavailable, o_direct_unavailable, test_device, test_supports,
};
