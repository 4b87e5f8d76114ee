//! Fuzzes the DDS import the packer runs on user files: `read_dds` either
//! refuses the bytes with an error or returns a texture whose levels have
//! exactly the sizes its format and extent need, which `write_dds` then
//! writes back and `read_dds` reads to the same texture.
#![no_main]

use gpustream_tools::dds::{read_dds, write_dds};
use gpustream::pack::mip_extent;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.dds");
    if let Ok(t) = read_dds(path, data) {
        for (m, mip) in t.mips.iter().enumerate() {
            let (w, h) = mip_extent(t.width, t.height, m as u8);
            assert_eq!(mip.len() as u64, t.format.data_size(w, h));
        }
        let again = write_dds(t.format, t.width, t.height, &t.mips).expect("a read texture writes");
        assert_eq!(read_dds(path, &again).expect("a written texture reads"), t);
    }
});
