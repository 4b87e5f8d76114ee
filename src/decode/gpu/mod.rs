//! GPU decoders: compute pipelines that decode blocks straight from staging
//! memory into GPU buffers.

pub(crate) mod kernel;
pub(crate) mod preamble;
pub use kernel::{BlockPass, PassBindings};
pub mod lz4_decode;

pub use crate::decode::block_desc::BlockDesc;
pub use crate::decode::Lz4Status;
pub use lz4_decode::{
    default_path, validate_descs, Lz4DecodePath, Lz4DecodePipeline, Lz4PipelineError, PassError,
};
pub mod stored_copy;
pub use stored_copy::{validate_stored_descs, StoredCopyPipeline};
pub mod crc32c;
pub use crc32c::{BlockCheck, BlockCheckDesc, Crc32cPipeline};
pub mod bcn_uncondition;
pub use bcn_uncondition::{validate_uncondition_descs, UnconditionPipeline};
pub mod gdeflate_decode;
pub use gdeflate_decode::{validate_gdeflate_descs, GDeflateDecodePipeline};
pub mod driver_gdeflate;
pub use driver_gdeflate::{GDeflateDecoderChoice, GDeflateDecoderKind, GDeflateDecoderPreference};
