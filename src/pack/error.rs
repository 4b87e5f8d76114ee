//! The errors of reading and writing packs.

use crate::codec::CodecError;
use std::path::PathBuf;

/// What went wrong opening, reading, checking or writing a pack. Every
/// variant names the file and, where one exists, the asset, block and byte
/// offset involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackError {
    /// An I/O operation on the pack (or an input file) failed.
    #[error("{op} {} at offset {offset} (+{len} bytes): {source}", path.display())]
    Io {
        /// What was being done ("read", "write", "open", ...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Byte offset of the operation.
        offset: u64,
        /// Its length in bytes.
        len: u64,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a gpustream pack.
    #[error("{}: not a gpustream pack (bad magic at offset 0)", path.display())]
    BadMagic {
        /// The file.
        path: PathBuf,
    },
    /// The pack's format version is not one this reader knows.
    #[error("{}: unsupported pack version {version} (this reader knows 1 and 2)", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u32,
    },
    /// A checksum over the header or the table of contents does not match.
    #[error("{}: {what} checksum mismatch at offset {offset}: stored {stored:#010x}, computed {computed:#010x}", path.display())]
    MetaChecksum {
        /// The file.
        path: PathBuf,
        /// "header" or "table of contents".
        what: &'static str,
        /// Offset of the checksummed region.
        offset: u64,
        /// The checksum the file declares.
        stored: u32,
        /// The checksum of the bytes.
        computed: u32,
    },
    /// The header or table of contents is inconsistent: a field out of
    /// range, offsets that do not add up, counts that do not fit the file.
    #[error("{}: corrupt {what} at offset {offset}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The structure ("header", "table of contents", "asset 'x'", "block 7").
        what: String,
        /// Offset of the offending field in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A member file of a striped pack is missing, unreadable, or not the
    /// member the head names (another pack's, or an older write's).
    #[error("{}: member {index} ({}): {reason}", pack.display(), member.display())]
    Member {
        /// The head file.
        pack: PathBuf,
        /// The member's index (1.., the head is 0).
        index: usize,
        /// The member's file, as resolved from the head.
        member: PathBuf,
        /// What is wrong, with the OS error where there is one.
        reason: String,
    },
    /// A block's stored bytes do not match its checksum.
    #[error("{at} (block {block}, offset {offset}): checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BlockChecksum {
        /// The block described: asset, mip and tile or chunk.
        at: String,
        /// The block index.
        block: u32,
        /// Absolute file offset of the block.
        offset: u64,
        /// The checksum in the table of contents.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// A block's bytes failed to decode (or decoded to the wrong length).
    #[error("{at} (block {block}, offset {offset}): {source}")]
    BlockDecode {
        /// The block described.
        at: String,
        /// The block index.
        block: u32,
        /// Absolute file offset of the block.
        offset: u64,
        /// The codec's error.
        #[source]
        source: CodecError,
    },
    /// A caller handed `check_block` buffers of the wrong length.
    #[error("{at} (block {block}, offset {offset}): {what} buffer is {got} bytes, the block needs {expected}")]
    BufferLength {
        /// The block described.
        at: String,
        /// The block index.
        block: u32,
        /// Absolute file offset of the block.
        offset: u64,
        /// "stored" or "output".
        what: &'static str,
        /// The length needed.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A lookup that does not fit the asset: wrong kind, mip or tile out of
    /// range, an index past the end.
    #[error("asset '{asset}': {reason}")]
    Lookup {
        /// The asset's name (or its index when there is none).
        asset: String,
        /// What is out of range.
        reason: String,
    },
    /// The writer was given something it cannot store.
    #[error("asset '{asset}': {reason}")]
    InvalidInput {
        /// The asset's name.
        asset: String,
        /// Why it cannot be stored.
        reason: String,
    },
    /// An input file of the packer cannot be read or is not supported.
    #[error("{}: {reason}", path.display())]
    Import {
        /// The input file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An input file of the packer is malformed at a known place: a field
    /// out of range, an offset or length past the end of the file.
    #[error("{}: {format} {what} at offset {offset}: {reason}", path.display())]
    MalformedInput {
        /// The input file.
        path: PathBuf,
        /// The file's format ("KTX2").
        format: &'static str,
        /// The structure ("header", "level index entry 2", "DFD block 0").
        what: String,
        /// Byte offset of the offending field in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An input file ends before a structure its header declares.
    #[error("{}: truncated {format}: {what} at offset {offset} needs {needed} bytes, the file has {file_len}", path.display())]
    TruncatedInput {
        /// The input file.
        path: PathBuf,
        /// The file's format ("DDS", "KTX2").
        format: &'static str,
        /// The structure cut short ("header", "level 3").
        what: String,
        /// Byte offset where the structure starts.
        offset: u64,
        /// Bytes it needs from `offset`.
        needed: u64,
        /// The file's length.
        file_len: u64,
    },
    /// A mip level's stored size disagrees with what the header says it
    /// must be (its format and extent, or a length field).
    #[error("{}: {format} level {level} at offset {offset}: {found} bytes, the header implies {expected}", path.display())]
    LevelSize {
        /// The input file.
        path: PathBuf,
        /// The file's format.
        format: &'static str,
        /// The level (0 = the finest).
        level: u32,
        /// Byte offset of the level's data or its length field.
        offset: u64,
        /// The size the file declares or holds.
        found: u64,
        /// The size the header implies.
        expected: u64,
    },
    /// A DDS file's DX10 header names a DXGI format value that does not
    /// exist.
    #[error("{}: DDS DX10 header at offset {offset}: unknown DXGI format {value}", path.display())]
    UnknownDxgiFormat {
        /// The input file.
        path: PathBuf,
        /// Byte offset of the format field.
        offset: u64,
        /// The value found.
        value: u32,
    },
    /// A supercompressed level decompresses to more bytes than its
    /// declared uncompressed length (decompression stops there).
    #[error("{}: {format} level {level} at offset {offset} expands past its declared {declared} bytes", path.display())]
    LevelExpands {
        /// The input file.
        path: PathBuf,
        /// The file's format ("KTX2").
        format: &'static str,
        /// The level.
        level: u32,
        /// Byte offset of the level's compressed data.
        offset: u64,
        /// The uncompressed length the level index declares.
        declared: u64,
    },
    /// A well-formed input uses a feature the packer does not take yet
    /// (texture arrays, cube maps, volume textures, a format without a pack
    /// equivalent).
    #[error("{}: {format}: {what} is not supported yet", path.display())]
    UnsupportedInput {
        /// The input file.
        path: PathBuf,
        /// The file's format.
        format: &'static str,
        /// The feature, with the header field that declares it.
        what: String,
    },
    /// Compressing a block failed.
    #[error("asset '{asset}' block {block}: {source}")]
    Encode {
        /// The asset's name.
        asset: String,
        /// The block index.
        block: u32,
        /// The codec's error.
        #[source]
        source: CodecError,
    },
}

impl PackError {
    /// An I/O error naming the operation, the file, and the offset and
    /// length it concerned: for readers of the files a pack is built from
    /// (the tools' importers), as the pack reader reports its own.
    pub fn io(
        op: &'static str,
        path: &std::path::Path,
        offset: u64,
        len: u64,
        source: std::io::Error,
    ) -> PackError {
        PackError::Io {
            op,
            path: path.to_path_buf(),
            offset,
            len,
            source,
        }
    }
}
