//! Fuzzes the untrusted pack reader: any bytes either fail to open with a
//! typed error or open into a pack whose every lookup and block check is
//! safe to call.
//!
//! Structure-aware: almost every mutation of a pack breaks the header CRC,
//! so a plain run stops there (a 15-minute run reached 360 coverage points).
//! Each input is therefore tried twice: as it is (the checksums themselves
//! are checked), and after `fix_up` has made the lengths consistent and
//! recomputed the block, TOC and header checksums, so that the mutation
//! reaches TOC validation, tile lookups and block decode.
//! `GPUSTREAM_FUZZ_RAW=1` turns the second try off, to measure the gain.
#![no_main]

use gpustream::pack::format::{header, BLOCK_ENTRY_LEN, HEADER_LEN};
use gpustream::pack::{BlockId, Pack};
use libfuzzer_sys::fuzz_target;

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Makes `data` a pack whose lengths add up and whose checksums match,
/// keeping every other field as the mutation left it. Returns `None` when
/// the input is too short to have a header.
fn fix_up(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < HEADER_LEN {
        return None;
    }
    let mut b = data.to_vec();
    let len = b.len() as u64;
    // The TOC ends at the end of the file and starts where the data ends.
    let data_offset = get_u64(&b, header::DATA_OFFSET).min(len);
    let toc_offset = get_u64(&b, header::TOC_OFFSET).clamp(data_offset, len);
    put_u64(&mut b, header::TOC_OFFSET, toc_offset);
    put_u64(&mut b, header::TOC_LEN, len - toc_offset);
    put_u64(&mut b, header::DATA_LEN, toc_offset - data_offset);
    let (toc_start, toc_len) = (toc_offset as usize, (len - toc_offset) as usize);
    // Block checksums: blocks lie back to back from data_offset.
    let blocks = (get_u32(&b, header::BLOCK_COUNT) as usize).min(toc_len / BLOCK_ENTRY_LEN);
    let mut at = data_offset;
    for i in 0..blocks {
        let entry = toc_start + i * BLOCK_ENTRY_LEN;
        let stored = get_u32(&b, entry) as u64;
        let end = at.saturating_add(stored);
        if end > toc_offset {
            break;
        }
        let crc = crc32c::crc32c(&b[at as usize..end as usize]);
        put_u32(&mut b, entry + 8, crc);
        at = end;
    }
    // A striped head's stripe section carries its own checksum.
    let flags = get_u32(&b, header::FLAGS);
    if flags & gpustream::pack::stripe::FLAG_STRIPED != 0 && b.len() >= HEADER_LEN + 36 {
        let section_len = get_u32(&b, HEADER_LEN + 8) as usize;
        if (36..=data_offset as usize - HEADER_LEN.min(data_offset as usize)).contains(&section_len)
        {
            let end = HEADER_LEN + section_len - 4;
            let crc = crc32c::crc32c(&b[HEADER_LEN..end]);
            put_u32(&mut b, end, crc);
        }
    }
    let toc_crc = crc32c::crc32c(&b[toc_start..]);
    put_u32(&mut b, header::TOC_CRC, toc_crc);
    let header_crc = crc32c::crc32c(&b[..header::HEADER_CRC]);
    put_u32(&mut b, header::HEADER_CRC, header_crc);
    Some(b)
}

/// Opens `data` and calls every lookup and block check on what opened.
fn exercise(data: &[u8]) {
    let Ok(pack) = Pack::from_bytes("fuzz", data) else {
        return;
    };
    let mut out = vec![0u8; gpustream::MAX_BLOCK_SIZE];
    for (i, b) in pack.blocks().iter().enumerate() {
        let id = BlockId(i as u32);
        let _ = pack.describe_block(id);
        // A striped head's other members are files of their own, which a
        // pack parsed from memory does not have.
        if b.member != 0 {
            continue;
        }
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
}

fn raw_only() -> bool {
    static RAW: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *RAW.get_or_init(|| std::env::var("GPUSTREAM_FUZZ_RAW").is_ok_and(|v| v == "1"))
}

fuzz_target!(|data: &[u8]| {
    exercise(data);
    if !raw_only() {
        if let Some(fixed) = fix_up(data) {
            exercise(&fixed);
        }
    }
});
