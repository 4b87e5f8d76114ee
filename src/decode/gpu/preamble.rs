//! The WGSL the shaders share, written from the Rust constants: status
//! codes, block limits, the block descriptor, and the GDeflate decoder's
//! precode order and length and distance tables. Each pipeline compiles
//! `with_preamble(..)` of its shader, and the shaders declare none of these
//! themselves (a test holds them to that), so a code changed in Rust
//! changes in every shader and twin at once.

use std::fmt::Write;

use crate::decode::cpu_twin::{crc32c, lz4_decode};
use crate::decode::{gdeflate_status, status_code};

/// Which status codes a shader writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codes {
    /// [`Lz4Status`](crate::decode::Lz4Status)'s: the LZ4 decoder, the
    /// stored-copy and un-conditioning passes.
    Lz4,
    /// [`GDeflateStatus`](crate::decode::GDeflateStatus)'s.
    GDeflate,
    /// [`BlockCheck`](crate::decode::gpu::BlockCheck)'s: the crc32c pass.
    Check,
}

/// What a shader takes from the preamble.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Preamble {
    /// Its status codes, as `STATUS_*`.
    pub codes: Codes,
    /// `struct BlockDesc`, the layout of
    /// [`BlockDesc`](crate::decode::BlockDesc) (not for passes with a
    /// descriptor of their own).
    pub block_desc: bool,
}

/// The WGSL of [`crate::decode::BlockDesc`]: eight `u32`, in its order.
const BLOCK_DESC: &str = "struct BlockDesc {
    src_offset: u32,
    src_size: u32,
    dst_offset: u32,
    dst_size: u32,
    row_bytes: u32,
    row_pitch: u32,
    reserved0: u32,
    reserved1: u32,
}
";

impl Preamble {
    /// The `STATUS_*` constants for `codes`, by name.
    fn codes(self) -> Vec<(&'static str, u32)> {
        match self.codes {
            Codes::Lz4 => vec![
                ("OK", status_code::OK),
                ("BAD_DESCRIPTOR", status_code::BAD_DESCRIPTOR),
                ("TRUNCATED", status_code::TRUNCATED),
                ("OUTPUT_OVERRUN", status_code::OUTPUT_OVERRUN),
                ("ZERO_OFFSET", status_code::ZERO_OFFSET),
                ("OFFSET_OUT_OF_RANGE", status_code::OFFSET_OUT_OF_RANGE),
                ("SHORT_OUTPUT", status_code::SHORT_OUTPUT),
            ],
            Codes::GDeflate => {
                use gdeflate_status::code;
                vec![
                    ("OK", code::OK),
                    ("BAD_DESCRIPTOR", code::BAD_DESCRIPTOR),
                    ("TRUNCATED", code::TRUNCATED),
                    ("OUTPUT_OVERRUN", code::OUTPUT_OVERRUN),
                    ("BAD_BLOCK_TYPE", code::BAD_BLOCK_TYPE),
                    ("OFFSET_OUT_OF_RANGE", code::OFFSET_OUT_OF_RANGE),
                    ("SHORT_OUTPUT", code::SHORT_OUTPUT),
                    ("BAD_HUFFMAN_CODE", code::BAD_HUFFMAN_CODE),
                    ("BAD_REPEAT", code::BAD_REPEAT),
                ]
            }
            Codes::Check => vec![
                ("OK", crc32c::check_code::OK),
                ("BAD_DESCRIPTOR", crc32c::check_code::BAD_DESCRIPTOR),
                ("CHECKSUM_MISMATCH", crc32c::check_code::CHECKSUM_MISMATCH),
            ],
        }
    }

    /// The preamble's WGSL.
    pub fn wgsl(self) -> String {
        let mut s =
            String::from("// Written by src/decode/gpu/preamble.rs from the Rust constants.\n");
        for (name, value) in self.codes() {
            let _ = writeln!(s, "const STATUS_{name}: u32 = {value}u;");
        }
        // The largest uncompressed block; the largest compressed one (input
        // positions fit the status word's 24 bits, and LZ4 length sums of
        // at most 255 per input byte cannot overflow a u32); the largest
        // range the crc32c pass checks.
        let _ = writeln!(s, "const MAX_BLOCK_SIZE: u32 = {}u;", crate::MAX_BLOCK_SIZE);
        let _ = writeln!(
            s,
            "const MAX_SRC_SIZE: u32 = {}u;",
            lz4_decode::MAX_SRC_SIZE
        );
        let _ = writeln!(
            s,
            "const MAX_CHECK_SIZE: u32 = {}u;",
            crc32c::MAX_CHECK_SIZE
        );
        if self.block_desc {
            s.push_str(BLOCK_DESC);
        }
        if self.codes == Codes::GDeflate {
            // The GDeflate decoder's tables: the codec's one copy.
            use crate::codec::gdeflate as gd;
            let order: Vec<u64> = gd::PRECODE_ORDER.iter().map(|&v| v as u64).collect();
            array(&mut s, "PRECODE_ORDER", &order);
            let base: Vec<u64> = gd::LENGTH_BASE.iter().map(|&v| v.into()).collect();
            array(&mut s, "LEN_BASE", &base);
            let extra: Vec<u64> = gd::LENGTH_EXTRA.iter().map(|&v| v.into()).collect();
            array(&mut s, "LEN_EXTRA", &extra);
            let base: Vec<u64> = gd::DIST_BASE.iter().map(|&v| v.into()).collect();
            array(&mut s, "DIST_BASE", &base);
            let extra: Vec<u64> = gd::DIST_EXTRA.iter().map(|&v| v.into()).collect();
            array(&mut s, "DIST_EXTRA", &extra);
        }
        s.push('\n');
        s
    }

    /// `body` after the preamble: what a pipeline compiles.
    pub fn with(self, body: &str) -> String {
        let mut s = self.wgsl();
        s.push_str(body);
        s
    }
}

/// `const NAME = array<u32, N>(...);` onto `s`.
fn array(s: &mut String, name: &str, values: &[u64]) {
    let list: Vec<String> = values.iter().map(|v| format!("{v}u")).collect();
    let _ = writeln!(
        s,
        "const {name} = array<u32, {}>({});",
        values.len(),
        list.join(", ")
    );
}

/// Panics where `body` declares what the preamble provides, so a shader
/// cannot drift from the Rust constants by keeping a copy of its own.
#[cfg(test)]
pub(crate) fn assert_takes_preamble(name: &str, body: &str) {
    for line in body.lines() {
        let l = line.trim_start();
        for own in [
            "const STATUS_",
            "const MAX_BLOCK_SIZE",
            "const MAX_SRC_SIZE",
            "const MAX_CHECK_SIZE",
            "struct BlockDesc",
            "const PRECODE_ORDER",
            "const LEN_BASE",
            "const LEN_EXTRA",
            "const DIST_BASE",
            "const DIST_EXTRA",
        ] {
            assert!(
                !l.starts_with(own),
                "{name} declares `{own}` itself; it comes from src/decode/gpu/preamble.rs"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_desc_matches_the_rust_struct() {
        // Eight u32 in the WGSL, eight in the Rust struct, same names in
        // the same order (reserved: [u32; 2] as reserved0, reserved1).
        let fields: Vec<&str> = BLOCK_DESC
            .lines()
            .filter_map(|l| l.trim().strip_suffix(": u32,"))
            .collect();
        assert_eq!(
            fields,
            [
                "src_offset",
                "src_size",
                "dst_offset",
                "dst_size",
                "row_bytes",
                "row_pitch",
                "reserved0",
                "reserved1"
            ]
        );
        assert_eq!(
            std::mem::size_of::<crate::decode::BlockDesc>(),
            fields.len() * 4
        );
        let d = crate::decode::BlockDesc {
            src_offset: 1,
            src_size: 2,
            dst_offset: 3,
            dst_size: 4,
            row_bytes: 5,
            row_pitch: 6,
            reserved: [7, 8],
        };
        let words: &[u32] = bytemuck::cast_slice(std::slice::from_ref(&d));
        assert_eq!(words, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn every_preamble_is_valid_wgsl_with_the_rust_codes() {
        for codes in [Codes::Lz4, Codes::GDeflate, Codes::Check] {
            let p = Preamble {
                codes,
                block_desc: codes != Codes::Check,
            };
            let src = p.with("@compute @workgroup_size(1) fn main() {}\n");
            crate::decode::gpu::kernel::assert_wgsl_valid(&src);
            assert!(src.contains(&format!("const STATUS_OK: u32 = {}u;", status_code::OK)));
        }
        let gd = Preamble {
            codes: Codes::GDeflate,
            block_desc: true,
        }
        .wgsl();
        assert!(gd.contains(&format!(
            "const STATUS_BAD_REPEAT: u32 = {}u;",
            gdeflate_status::code::BAD_REPEAT
        )));
    }
}
