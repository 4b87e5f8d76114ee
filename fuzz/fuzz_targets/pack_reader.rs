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
//!
//! A fixed-up striped head is also opened from disk (`on_disk`), with a
//! member file per stripe-section entry: the section's paths are rewritten
//! to those files (the member-path rules: a member is a regular file the
//! head names, see `pack/member_file.rs`), and each member's header comes
//! from the input's tail, sealed with its checksum, so the mutation reaches
//! the member checks (index, count, pack id, length) and the block reads.
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

/// Where `on_disk` writes its files: one directory per fuzzing process.
fn scratch() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("gpustream-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// Opens a fixed-up striped head from disk with member files made from
/// the input: see the module documentation. Nothing for other inputs.
fn on_disk(head: &[u8], input: &[u8]) {
    if head.len() < HEADER_LEN + 36
        || get_u32(head, header::FLAGS) & gpustream::pack::stripe::FLAG_STRIPED == 0
    {
        return;
    }
    let data_offset = get_u64(head, header::DATA_OFFSET) as usize;
    let section_len = get_u32(head, HEADER_LEN + 8) as usize;
    let count = get_u32(head, HEADER_LEN + 12) as usize;
    if !(36..=data_offset.saturating_sub(HEADER_LEN)).contains(&section_len)
        || !(2..=8).contains(&count)
        || head.len() < HEADER_LEN + section_len
    {
        return;
    }
    let pack_id = get_u64(head, HEADER_LEN + 24);
    // The entries, their paths replaced by member files beside the head.
    let mut section = head[HEADER_LEN..HEADER_LEN + 32].to_vec();
    let mut at = HEADER_LEN + 32;
    let dir = scratch();
    for k in 1..count {
        if at + 12 > HEADER_LEN + section_len - 4 {
            return;
        }
        // Short members keep each run fast; lengths past this only
        // mismatch the head, which the checks see at once anyway.
        let data_len = get_u64(head, at).min(256 << 10);
        let n = get_u32(head, at + 8) as usize;
        at += 12 + n;
        let name = format!("m{k}");
        section.extend_from_slice(&data_len.to_le_bytes());
        section.extend_from_slice(&(name.len() as u32).to_le_bytes());
        section.extend_from_slice(name.as_bytes());
        // Its header: the input's tail where it has one, else a good one;
        // the fields the head checks are taken from the head unless the
        // input's last byte says to keep the mutated ones.
        let mut h = [0u8; 64];
        let tail = &input[input.len().saturating_sub(64 * k)..];
        h[..tail.len().min(64)].copy_from_slice(&tail[..tail.len().min(64)]);
        h[..8].copy_from_slice(b"GSPM\r\n\x1a\n");
        if input.last().is_none_or(|b| b & 1 == 0) {
            put_u32(&mut h, 8, k as u32);
            put_u32(&mut h, 12, count as u32);
            put_u64(&mut h, 16, pack_id);
            put_u64(&mut h, 24, 4096);
            put_u64(&mut h, 32, data_len);
            h[40..60].fill(0);
        }
        let crc = crc32c::crc32c(&h[..60]);
        put_u32(&mut h, 60, crc);
        let mut member = vec![0u8; 4096 + data_len as usize];
        member[..64].copy_from_slice(&h);
        if std::fs::write(dir.join(&name), &member).is_err() {
            return;
        }
    }
    let len = section.len() + 4;
    if HEADER_LEN + len > data_offset || data_offset > head.len() {
        return;
    }
    put_u32(&mut section, 8, len as u32);
    let crc = crc32c::crc32c(&section);
    section.extend_from_slice(&crc.to_le_bytes());
    let mut b = head.to_vec();
    b[HEADER_LEN..data_offset].fill(0);
    b[HEADER_LEN..HEADER_LEN + len].copy_from_slice(&section);
    let path = dir.join("h.gspk");
    if std::fs::write(&path, &b).is_err() {
        return;
    }
    let Ok(pack) = Pack::open(&path) else {
        return;
    };
    let mut out = vec![0u8; gpustream::MAX_BLOCK_SIZE];
    let mut stored = Vec::new();
    let Ok(files) = pack.open_file() else {
        return;
    };
    for i in 0..pack.blocks().len().min(64) {
        let id = BlockId(i as u32);
        if pack.read_stored(&files, id, &mut stored).is_ok() {
            let size = pack.blocks()[i].size as usize;
            let _ = pack.check_block(id, &stored, &mut out[..size]);
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
            on_disk(&fixed, data);
        }
    }
});
