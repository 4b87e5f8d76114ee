//! Block codecs: one [`Codec`] type for the four ways a pack block can be
//! stored (`none`, `lz4`, `zstd`, `gdeflate`).
//!
//! Every block holds at most [`MAX_BLOCK_SIZE`] bytes of uncompressed data. The
//! compressed bytes come from an untrusted file, so decompression writes into a
//! caller's buffer of exactly the declared size and anything else (a stream
//! that ends early, one that would write past the end, one that stops short)
//! is an error. Nothing here allocates by a size read from the stream.

pub mod gdeflate;

/// The largest uncompressed block a pack may hold: 64 KiB.
pub const MAX_BLOCK_SIZE: usize = 64 * 1024;

/// How one block is stored in a pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[repr(u8)]
pub enum Codec {
    /// Stored as is.
    None = 0,
    /// The LZ4 block format (no frame), as `lz4_flex::block` writes it.
    Lz4 = 1,
    /// A zstd frame.
    Zstd = 2,
    /// One GDeflate 1.0 page: deflate dealt out to 32 sub-streams for GPU
    /// lanes ([`gdeflate`]), the bytes `VK_EXT_memory_decompression` takes.
    #[cfg_attr(feature = "serde", serde(rename = "gdeflate"))]
    GDeflate = 3,
}

/// What went wrong decoding (or encoding) one block.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    /// The codec id byte is not one this version knows.
    #[error("unknown codec id {0}")]
    UnknownCodec(u8),
    /// The stream decoded, but not to the declared size.
    #[error("{codec} stream decoded to {got} bytes, declared {expected}")]
    WrongLength {
        /// The codec of the stream.
        codec: Codec,
        /// The declared uncompressed size.
        expected: usize,
        /// What the stream produced.
        got: usize,
    },
    /// The stream is not valid for its codec (or would overflow the
    /// declared size).
    #[error("malformed {codec} stream: {reason}")]
    Malformed {
        /// The codec of the stream.
        codec: Codec,
        /// The decoder's own words.
        reason: String,
    },
    /// A size beyond [`MAX_BLOCK_SIZE`] or beyond the codec's bound.
    #[error("{what} of {size} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Which size.
        what: &'static str,
        /// The size given.
        size: usize,
        /// Its limit.
        limit: usize,
    },
}

/// LZ4's block decoder, kept out of line on purpose.
///
/// Inlined through `Codec::decompress_into` and the reader's block check,
/// `lz4_flex`'s decoder was compiled with its short literal and match copies
/// as out-of-line `memcpy` calls, and ran 13-40% slower in the runtime's
/// decode threads than the same call in a plain loop (measured with `perf`).
/// As a function of its own it gets the loop's code generation.
#[inline(never)]
fn lz4_decompress_into(
    src: &[u8],
    dst: &mut [u8],
) -> Result<usize, lz4_flex::block::DecompressError> {
    lz4_flex::block::decompress_into(src, dst)
}

/// The strongest LZ4 level: liblz4's optimal parse at its maximum.
pub const LZ4_MAX_LEVEL: i32 = 12;

/// LZ4 HC of `src` into `dst` (at least the LZ4 bound of `src`), through
/// liblz4. `level` is clamped to 1..=[`LZ4_MAX_LEVEL`].
#[cfg(feature = "lz4-hc")]
fn lz4_hc_compress_into(src: &[u8], level: i32, dst: &mut [u8]) -> Result<usize, CodecError> {
    use lz4::block::{compress_to_buffer, CompressionMode};
    let mode = CompressionMode::HIGHCOMPRESSION(level.clamp(1, LZ4_MAX_LEVEL));
    compress_to_buffer(src, Some(mode), false, dst).map_err(|e| CodecError::Malformed {
        codec: Codec::Lz4,
        reason: format!("LZ4 HC level {level}: {e}"),
    })
}

/// Without the `lz4-hc` feature there is no HC compressor: say so rather
/// than silently compressing at another level.
#[cfg(not(feature = "lz4-hc"))]
fn lz4_hc_compress_into(_src: &[u8], level: i32, _dst: &mut [u8]) -> Result<usize, CodecError> {
    Err(CodecError::Malformed {
        codec: Codec::Lz4,
        reason: format!("LZ4 level {level} is LZ4 HC, which needs the crate's `lz4-hc` feature"),
    })
}

/// The number of sequences (token, literals, and a match unless it is the
/// last) in an LZ4 block, or `None` where the stream is malformed. A GPU
/// decoder parses sequences one after another, so this is the serial work
/// a block costs it; `info` and the decoder bench report it.
pub fn lz4_sequence_count(src: &[u8]) -> Option<u32> {
    // A length continues while its bytes are 255.
    fn length(src: &[u8], at: &mut usize, base: usize) -> Option<usize> {
        let mut n = base;
        if base == 15 {
            loop {
                let b = *src.get(*at)?;
                *at += 1;
                n += b as usize;
                if b != 255 {
                    break;
                }
            }
        }
        Some(n)
    }
    let (mut at, mut count) = (0usize, 0u32);
    while at < src.len() {
        let token = src[at];
        at += 1;
        count += 1;
        at += length(src, &mut at, (token >> 4) as usize)?;
        if at == src.len() {
            return Some(count);
        }
        // Two offset bytes, then the match length's extension bytes.
        at = at.checked_add(2).filter(|&a| a <= src.len())?;
        length(src, &mut at, (token & 15) as usize)?;
    }
    (at == src.len()).then_some(count)
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "raw" => Ok(Codec::None),
            "lz4" => Ok(Codec::Lz4),
            "zstd" => Ok(Codec::Zstd),
            "gdeflate" => Ok(Codec::GDeflate),
            other => Err(format!(
                "unknown codec '{other}' (expected none, lz4, zstd or gdeflate)"
            )),
        }
    }
}

impl Codec {
    /// All codecs, in id order.
    pub const ALL: [Codec; 4] = [Codec::None, Codec::Lz4, Codec::Zstd, Codec::GDeflate];

    /// The codec's lower-case name, as the CLI and JSON spell it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
            Codec::GDeflate => "gdeflate",
        }
    }

    /// The id byte stored in a pack.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The codec for a pack's id byte.
    pub fn from_id(id: u8) -> Result<Codec, CodecError> {
        match id {
            0 => Ok(Codec::None),
            1 => Ok(Codec::Lz4),
            2 => Ok(Codec::Zstd),
            3 => Ok(Codec::GDeflate),
            other => Err(CodecError::UnknownCodec(other)),
        }
    }

    /// The largest stored size a block of `uncompressed` bytes can have with
    /// this codec. A reader rejects any block whose stored size exceeds it.
    pub fn max_stored_size(self, uncompressed: usize) -> usize {
        match self {
            Codec::None => uncompressed,
            Codec::Lz4 => lz4_flex::block::get_maximum_output_size(uncompressed),
            Codec::Zstd => zstd::zstd_safe::compress_bound(uncompressed),
            Codec::GDeflate => gdeflate::max_page_size(uncompressed),
        }
    }

    /// Compresses one block, appending the stored bytes to `out`. `level`
    /// applies to zstd (1..=22; 0 means its default) and to LZ4: 0 is
    /// `lz4_flex`'s fast compressor, 1..=12 liblz4's HC levels (10..=12
    /// its optimal parse), which need the `lz4-hc` feature (on with
    /// `tools`). Every LZ4 level writes the same block format, read by the
    /// same decoders. GDeflate takes the reference compressor's levels
    /// 0..=12 (0 writes stored deflate blocks) and needs the
    /// `gdeflate-encode` feature (on with `tools`). Ignored for `none`.
    pub fn compress_into(
        self,
        src: &[u8],
        level: i32,
        out: &mut Vec<u8>,
    ) -> Result<usize, CodecError> {
        if src.len() > MAX_BLOCK_SIZE {
            return Err(CodecError::TooLarge {
                what: "block",
                size: src.len(),
                limit: MAX_BLOCK_SIZE,
            });
        }
        let start = out.len();
        match self {
            Codec::None => out.extend_from_slice(src),
            Codec::Lz4 if level > 0 => {
                out.resize(start + self.max_stored_size(src.len()), 0);
                let n = lz4_hc_compress_into(src, level, &mut out[start..])?;
                out.truncate(start + n);
            }
            Codec::Lz4 => {
                out.resize(start + self.max_stored_size(src.len()), 0);
                let n = lz4_flex::block::compress_into(src, &mut out[start..]).map_err(|e| {
                    CodecError::Malformed {
                        codec: self,
                        reason: e.to_string(),
                    }
                })?;
                out.truncate(start + n);
            }
            Codec::Zstd => {
                out.resize(start + self.max_stored_size(src.len()), 0);
                let n =
                    zstd::bulk::compress_to_buffer(src, &mut out[start..], level).map_err(|e| {
                        CodecError::Malformed {
                            codec: self,
                            reason: e.to_string(),
                        }
                    })?;
                out.truncate(start + n);
            }
            Codec::GDeflate => gdeflate::compress_page(src, level, out)?,
        }
        Ok(out.len() - start)
    }

    /// Compresses one block into a new vector.
    pub fn compress(self, src: &[u8], level: i32) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        self.compress_into(src, level, &mut out)?;
        Ok(out)
    }

    /// Decompresses one block into `dst`, whose length is the declared
    /// uncompressed size. The stream must produce exactly `dst.len()` bytes.
    #[inline]
    pub fn decompress_into(self, src: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
        if dst.len() > MAX_BLOCK_SIZE {
            return Err(CodecError::TooLarge {
                what: "declared size",
                size: dst.len(),
                limit: MAX_BLOCK_SIZE,
            });
        }
        if src.len() > self.max_stored_size(dst.len()) {
            return Err(CodecError::TooLarge {
                what: "stored size",
                size: src.len(),
                limit: self.max_stored_size(dst.len()),
            });
        }
        let got = match self {
            Codec::None => {
                if src.len() != dst.len() {
                    return Err(CodecError::WrongLength {
                        codec: self,
                        expected: dst.len(),
                        got: src.len(),
                    });
                }
                dst.copy_from_slice(src);
                src.len()
            }
            Codec::Lz4 => lz4_decompress_into(src, dst).map_err(|e| CodecError::Malformed {
                codec: self,
                reason: e.to_string(),
            })?,
            Codec::Zstd => {
                zstd::bulk::decompress_to_buffer(src, dst).map_err(|e| CodecError::Malformed {
                    codec: self,
                    reason: e.to_string(),
                })?
            }
            Codec::GDeflate => {
                gdeflate::decompress_page(src, dst)?;
                dst.len()
            }
        };
        if got != dst.len() {
            return Err(CodecError::WrongLength {
                codec: self,
                expected: dst.len(),
                got,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_count_follows_the_stream() {
        // Literals only: one sequence.
        assert_eq!(lz4_sequence_count(&[0x30, 1, 2, 3]), Some(1));
        // A literal, a match of 4 at offset 1, then the last literals.
        assert_eq!(lz4_sequence_count(&[0x10, 7, 1, 0, 0x10, 9]), Some(2));
        // Cut inside an offset.
        assert_eq!(lz4_sequence_count(&[0x10, 7, 1]), None);
        let data: Vec<u8> = (0..60_000u32).map(|i| (i / 7 % 13) as u8).collect();
        let packed = lz4_flex::block::compress(&data);
        assert!(lz4_sequence_count(&packed).unwrap() > 1);
    }

    fn sample(len: usize) -> Vec<u8> {
        // Compressible but not trivial: a repeating phrase with a counter.
        (0..len)
            .map(|i| (b"gpustream "[i % 10]).wrapping_add((i / 997) as u8))
            .collect()
    }

    /// The codecs this build can compress, each with a level it takes:
    /// LZ4 above 0 is HC (the `lz4-hc` feature), GDeflate needs the
    /// reference compressor (`gdeflate-encode`); the library alone decodes
    /// both.
    fn encodable() -> Vec<(Codec, i32)> {
        Codec::ALL
            .into_iter()
            .filter(|&c| c != Codec::GDeflate || cfg!(feature = "gdeflate-encode"))
            .map(|c| match c {
                Codec::Lz4 if !cfg!(feature = "lz4-hc") => (c, 0),
                _ => (c, 3),
            })
            .collect()
    }

    #[test]
    fn encoders_left_out_of_the_build_are_named() {
        if !cfg!(feature = "gdeflate-encode") {
            let e = Codec::GDeflate.compress(&sample(100), 12).unwrap_err();
            assert!(e.to_string().contains("gdeflate-encode"), "{e}");
        }
        if !cfg!(feature = "lz4-hc") {
            let e = Codec::Lz4.compress(&sample(100), 9).unwrap_err();
            assert!(e.to_string().contains("lz4-hc"), "{e}");
        }
    }

    #[test]
    fn round_trip_every_codec_at_edge_sizes() {
        for (codec, level) in encodable() {
            for len in [0usize, 1, 65535, 65536] {
                let src = sample(len);
                let stored = codec.compress(&src, level).unwrap();
                assert!(stored.len() <= codec.max_stored_size(len), "{codec} {len}");
                let mut out = vec![0u8; len];
                codec.decompress_into(&stored, &mut out).unwrap();
                assert_eq!(out, src, "{codec} {len}");
            }
        }
    }

    #[test]
    fn oversized_block_is_rejected() {
        for codec in Codec::ALL {
            let err = codec.compress(&sample(65537), 3).unwrap_err();
            assert!(matches!(err, CodecError::TooLarge { .. }), "{codec}");
            let mut out = vec![0u8; 65537];
            assert!(matches!(
                codec.decompress_into(&[0u8; 4], &mut out),
                Err(CodecError::TooLarge { .. })
            ));
        }
    }

    #[test]
    fn wrong_declared_size_is_an_error() {
        for (codec, level) in encodable() {
            let src = sample(4096);
            let stored = codec.compress(&src, level).unwrap();
            let mut short = vec![0u8; 4095];
            assert!(
                codec.decompress_into(&stored, &mut short).is_err(),
                "{codec} short"
            );
            let mut long = vec![0u8; 4097];
            assert!(
                codec.decompress_into(&stored, &mut long).is_err(),
                "{codec} long"
            );
        }
    }

    #[test]
    fn truncated_streams_never_panic() {
        for (codec, level) in encodable() {
            if !matches!(codec, Codec::Lz4 | Codec::Zstd) {
                continue;
            }
            let src = sample(20000);
            let stored = codec.compress(&src, level).unwrap();
            for cut in 0..stored.len() {
                let mut out = vec![0u8; src.len()];
                assert!(
                    codec.decompress_into(&stored[..cut], &mut out).is_err(),
                    "{codec} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn unknown_codec_id() {
        assert_eq!(Codec::from_id(7), Err(CodecError::UnknownCodec(7)));
        for c in Codec::ALL {
            assert_eq!(Codec::from_id(c.id()).unwrap(), c);
        }
    }
}
