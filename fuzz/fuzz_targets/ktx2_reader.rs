//! Fuzzes the KTX2 import the packer runs on user files: the reader of
//! BCn/RGBA8 files (plain or zstd-supercompressed) and, for vkFormat 0, the
//! Basis Universal path (container checks, the ETC1S re-wrap, and
//! Binomial's transcoder behind them).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.ktx2");
    if let Ok(t) = gpustream_tools::ktx2::read_ktx2(path, data) {
        assert!(!t.mips.is_empty() || t.width > 0);
    }
    // vkFormat 0 (Basis Universal): transcode to BC7 and, for ETC1S, BC1.
    if data.len() >= 16 && data[12..16] == [0, 0, 0, 0] {
        for bc1 in [false, true] {
            if let Ok(t) = gpustream_tools::basis::read_basis_ktx2(path, data, bc1) {
                for (m, mip) in t.mips.iter().enumerate() {
                    let (w, h) = gpustream::pack::mip_extent(t.width, t.height, m as u8);
                    assert_eq!(mip.len() as u64, t.format.data_size(w, h));
                }
            }
        }
    }
});
