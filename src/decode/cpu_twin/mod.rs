//! Rust twins of the WGSL decoders: the same algorithms, names and loop
//! structure, run on the CPU. The tests hold the shaders to them, and they
//! document in Rust what the shaders do.

pub mod lz4_decode;
pub mod lz4_decode_v2;
pub mod lz4_decode_v2_pair;

pub use lz4_decode::{decode_block, lz4_decode};
pub use lz4_decode_v2::{lz4_decode_v2, lz4_decode_v2_counted, Lz4DecodeCounts};
pub use lz4_decode_v2_pair::lz4_decode_v2_group;
pub mod stored_copy;
pub use stored_copy::stored_copy;
pub mod bcn_uncondition;
pub mod crc32c;
pub use bcn_uncondition::bcn_uncondition;
pub mod gdeflate_decode;
pub use gdeflate_decode::gdeflate_decode;
