//! Fuzzes the CPU GDeflate page decoder: the first three bytes are the
//! declared size (up to 128 KiB, so sizes over the 64 KiB limit are tried
//! too), the rest the page. Decoding either fails with a typed error or
//! fills exactly the declared size; it never panics, loops without end or
//! writes out of bounds. A page that decodes must round-trip through the
//! reference compressor and back through the decoder.
#![no_main]

use gpustream::Codec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let declared = (u32::from_le_bytes([data[0], data[1], data[2], 0]) & 0x1_FFFF) as usize;
    let mut out = vec![0u8; declared];
    if Codec::GDeflate
        .decompress_into(&data[3..], &mut out)
        .is_ok()
    {
        let again = Codec::GDeflate
            .compress(&out, 6)
            .expect("compress what fits in a block");
        let mut back = vec![0u8; declared];
        Codec::GDeflate
            .decompress_into(&again, &mut back)
            .expect("own output decodes");
        assert_eq!(back, out);
    }
});
