//! Fuzzes the KTX2 import the packer runs on user files.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = gpustream::pack::ktx2::read_ktx2(std::path::Path::new("fuzz.ktx2"), data) {
        assert!(!t.mips.is_empty() || t.width > 0);
    }
});
