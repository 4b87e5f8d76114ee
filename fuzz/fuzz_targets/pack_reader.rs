//! Fuzzes the untrusted pack reader: any bytes either fail to open with a
//! typed error or open into a pack whose every lookup and block check is
//! safe to call.
#![no_main]

use gpustream::pack::{BlockId, Pack};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(pack) = Pack::from_bytes("fuzz", data) else {
        return;
    };
    let mut out = vec![0u8; gpustream::MAX_BLOCK_SIZE];
    for (i, b) in pack.blocks().iter().enumerate() {
        let id = BlockId(i as u32);
        let _ = pack.describe_block(id);
        // The reader validated every range against the file length.
        let stored = &data[b.offset as usize..(b.offset + b.stored_size as u64) as usize];
        let _ = pack.check_block(id, stored, &mut out[..b.size as usize]);
    }
    for (i, a) in pack.assets().iter().enumerate() {
        let id = gpustream::pack::AssetId(i as u32);
        assert_eq!(pack.find(&a.name), Some(id));
        if let Some(t) = a.texture {
            let _ = pack.packed_mips(id);
            for m in 0..=t.mip_count {
                if let Ok(Some((tx, ty))) = pack.tile_grid(id, m) {
                    for (x, y) in [(0, 0), (tx - 1, ty - 1), (tx, 0), (0, ty)] {
                        if let Ok(r) = pack.tile_region(id, m, x, y) {
                            assert_eq!(pack.blocks()[r.block.0 as usize].size, r.size());
                        }
                    }
                }
            }
        }
    }
});
