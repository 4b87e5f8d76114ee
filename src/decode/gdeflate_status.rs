//! Status words of the GPU GDeflate page decoder (`shaders/gdeflate_decode.wgsl`
//! and its twin `cpu_twin::gdeflate_decode`): code in bits 0..8, input byte
//! position (from the page start) where decoding stopped in bits 8..32, as
//! for [`Lz4Status`](crate::decode::Lz4Status). Codes 0..=4, 6 and 7 mean
//! what they mean for LZ4.

/// Status codes, as the shader writes them in the low 8 bits of a page's
/// status word (the shader's `STATUS_*` constants; a unit test holds the
/// two lists together).
pub mod code {
    /// Never written by the shader: the page was not decoded.
    pub const NOT_RUN: u32 = 0;
    /// Decoded to exactly its declared size.
    pub const OK: u32 = 1;
    /// The descriptor is invalid for the bound buffers.
    pub const BAD_DESCRIPTOR: u32 = 2;
    /// A refill would read past the end of the page.
    pub const TRUNCATED: u32 = 3;
    /// A literal, match or stored block would write past the declared size.
    pub const OUTPUT_OVERRUN: u32 = 4;
    /// A block header with block type 3.
    pub const BAD_BLOCK_TYPE: u32 = 5;
    /// A match distance reaching before the start of the page.
    pub const OFFSET_OUT_OF_RANGE: u32 = 6;
    /// The final block ended before the declared size was produced.
    pub const SHORT_OUTPUT: u32 = 7;
    /// Code lengths that form an oversubscribed code, or an incomplete one
    /// other than the two the reference accepts (no codeword, or a single
    /// codeword of length 1).
    pub const BAD_HUFFMAN_CODE: u32 = 8;
    /// Code-length symbol 16 (repeat the previous length) with no previous
    /// length.
    pub const BAD_REPEAT: u32 = 9;
}

/// The outcome of decoding one GDeflate page, shared by the shader and the
/// twin. Every error names the page's read position (bytes from its start,
/// the sequential reader's cursor) where the decoder stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum GDeflateStatus {
    /// Decoded to exactly the declared size.
    #[error("ok")]
    Ok,
    /// The page was not decoded (its status word was never written).
    #[error("page was not decoded")]
    NotRun,
    /// The descriptor does not fit the bound buffers or breaks the layout
    /// rules of `BlockDesc`.
    #[error("invalid page descriptor")]
    BadDescriptor,
    /// A refill would read past the end of the page.
    #[error("truncated GDeflate page at input byte {at}")]
    Truncated {
        /// Input position, from the page start.
        at: u32,
    },
    /// A literal, match or stored block would write past the declared size.
    #[error("GDeflate page overruns its declared size at input byte {at}")]
    OutputOverrun {
        /// Input position, from the page start.
        at: u32,
    },
    /// A block header with the reserved block type 3.
    #[error("GDeflate block type 3 at input byte {at}")]
    BadBlockType {
        /// Input position, from the page start.
        at: u32,
    },
    /// A match distance reaching before the start of the page.
    #[error("GDeflate match distance out of range at input byte {at}")]
    OffsetOutOfRange {
        /// Input position, from the page start.
        at: u32,
    },
    /// The final block ended before the declared size was produced.
    #[error("GDeflate page ended short of its declared size at input byte {at}")]
    ShortOutput {
        /// Input position, from the page start.
        at: u32,
    },
    /// Invalid Huffman code lengths (oversubscribed or incomplete).
    #[error("invalid GDeflate Huffman code at input byte {at}")]
    BadHuffmanCode {
        /// Input position, from the page start.
        at: u32,
    },
    /// A repeat-previous-length symbol with no previous length.
    #[error("GDeflate code-length repeat with no previous length at input byte {at}")]
    BadRepeat {
        /// Input position, from the page start.
        at: u32,
    },
    /// A status word with a code this version does not know.
    #[error("unknown GDeflate status word {0:#x}")]
    Unknown(u32),
}

impl GDeflateStatus {
    /// Decodes a status word as the shader writes it (code in bits 0..8,
    /// input position in bits 8..32).
    pub fn from_word(word: u32) -> Self {
        let at = word >> 8;
        match word & 0xff {
            code::NOT_RUN if word == 0 => GDeflateStatus::NotRun,
            code::OK if at == 0 => GDeflateStatus::Ok,
            code::BAD_DESCRIPTOR if at == 0 => GDeflateStatus::BadDescriptor,
            code::TRUNCATED => GDeflateStatus::Truncated { at },
            code::OUTPUT_OVERRUN => GDeflateStatus::OutputOverrun { at },
            code::BAD_BLOCK_TYPE => GDeflateStatus::BadBlockType { at },
            code::OFFSET_OUT_OF_RANGE => GDeflateStatus::OffsetOutOfRange { at },
            code::SHORT_OUTPUT => GDeflateStatus::ShortOutput { at },
            code::BAD_HUFFMAN_CODE => GDeflateStatus::BadHuffmanCode { at },
            code::BAD_REPEAT => GDeflateStatus::BadRepeat { at },
            _ => GDeflateStatus::Unknown(word),
        }
    }

    /// The status word the shader writes for this outcome.
    pub fn to_word(self) -> u32 {
        match self {
            GDeflateStatus::Ok => code::OK,
            GDeflateStatus::NotRun => code::NOT_RUN,
            GDeflateStatus::BadDescriptor => code::BAD_DESCRIPTOR,
            GDeflateStatus::Truncated { at } => code::TRUNCATED | (at << 8),
            GDeflateStatus::OutputOverrun { at } => code::OUTPUT_OVERRUN | (at << 8),
            GDeflateStatus::BadBlockType { at } => code::BAD_BLOCK_TYPE | (at << 8),
            GDeflateStatus::OffsetOutOfRange { at } => code::OFFSET_OUT_OF_RANGE | (at << 8),
            GDeflateStatus::ShortOutput { at } => code::SHORT_OUTPUT | (at << 8),
            GDeflateStatus::BadHuffmanCode { at } => code::BAD_HUFFMAN_CODE | (at << 8),
            GDeflateStatus::BadRepeat { at } => code::BAD_REPEAT | (at << 8),
            GDeflateStatus::Unknown(word) => word,
        }
    }

    /// Whether the page decoded to its declared size.
    pub fn is_ok(self) -> bool {
        self == GDeflateStatus::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_round_trip() {
        let all = [
            GDeflateStatus::Ok,
            GDeflateStatus::NotRun,
            GDeflateStatus::BadDescriptor,
            GDeflateStatus::Truncated { at: 70000 },
            GDeflateStatus::OutputOverrun { at: 3 },
            GDeflateStatus::BadBlockType { at: 4 },
            GDeflateStatus::OffsetOutOfRange { at: 9 },
            GDeflateStatus::ShortOutput { at: 1 },
            GDeflateStatus::BadHuffmanCode { at: 12 },
            GDeflateStatus::BadRepeat { at: 0 },
        ];
        for s in all {
            assert_eq!(GDeflateStatus::from_word(s.to_word()), s, "{s:?}");
        }
        assert_eq!(
            GDeflateStatus::from_word(0x1ff),
            GDeflateStatus::Unknown(0x1ff)
        );
    }
}
