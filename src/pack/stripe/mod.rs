//! Striped packs: one logical pack whose blocks lie in several files, one
//! per disk, so that reading it uses every disk at once
//! (docs/pack-format.md, "Striped packs").
//!
//! The head file is an ordinary pack with the [`FLAG_STRIPED`] header flag:
//! its table of contents is the whole pack's, its data region holds member
//! 0's blocks, and the bytes between its header and its data region hold
//! the stripe section (the stripe unit, the pack id, and every other
//! member's path and length). Each other member file is a one-page member
//! header followed by its blocks.
//!
//! Block entries carry no offsets, so no table says where a block went:
//! [`Placement`] deals the blocks out in stripe units (runs of whole blocks
//! of at most `unit` stored bytes, round robin over the members), and the
//! writer and the reader compute the same placement from the block sizes.

mod write;

pub use write::{stripe_pack, StripeSummary};

use super::format::{get_u32, get_u64, put_u32, put_u64, DATA_ALIGN, HEADER_LEN};
use std::path::{Path, PathBuf};

/// Header flag (bit 0 of `flags`) of a striped pack's head file.
pub const FLAG_STRIPED: u32 = 1;

/// The first 8 bytes of the stripe section, at offset 64 of the head.
pub const SECTION_MAGIC: [u8; 8] = *b"GSPKSTRP";

/// The first 8 bytes of every member file other than the head.
pub const MEMBER_MAGIC: [u8; 8] = *b"GSPM\r\n\x1a\n";

/// Bytes of a member file's header; its data starts at [`DATA_ALIGN`].
pub const MEMBER_HEADER_LEN: usize = 64;

/// Members of a striped pack, the head included, at most. Two at least:
/// one member is an ordinary pack.
pub const MAX_MEMBERS: usize = 64;

/// The smallest and largest stripe unit, in bytes. A unit smaller than a
/// block still holds one block (units are whole blocks); the bounds keep
/// the figure one a packer would choose.
pub const MIN_UNIT: u64 = 64 << 10;
/// See [`MIN_UNIT`].
pub const MAX_UNIT: u64 = 1 << 30;

/// The stripe unit `pack --stripe` uses unless told: large enough that one
/// read of a member fills a deep queue with large requests, small enough
/// that an asset of a few MiB spreads over several disks.
pub const DEFAULT_UNIT: u64 = 1 << 20;

/// The longest member path stored in the stripe section, in bytes.
pub const MAX_MEMBER_PATH: usize = 4096;

/// The longest stripe section; it fits in the head's padding, which the
/// writer grows to whole pages as needed.
pub const MAX_SECTION_LEN: usize = 32 + (MAX_MEMBERS - 1) * (12 + MAX_MEMBER_PATH) + 4;

/// Where each block of a striped pack lies: blocks are taken in order
/// into the current stripe unit until the next one would take it past
/// `unit` stored bytes (a unit always takes at least one block); then the
/// next unit goes to the next member, round robin.
#[derive(Clone, Debug)]
pub struct Placement {
    unit: u64,
    member: usize,
    in_unit: u64,
    /// Bytes placed in each member so far.
    filled: Vec<u64>,
}

impl Placement {
    /// A placement over `members` files (at least one) in units of `unit`
    /// bytes.
    pub fn new(members: usize, unit: u64) -> Placement {
        Placement {
            unit,
            member: 0,
            in_unit: 0,
            filled: vec![0; members.max(1)],
        }
    }

    /// Places the next block of `stored` bytes: its member, and its offset
    /// from the start of that member's data.
    pub fn place(&mut self, stored: u32) -> (usize, u64) {
        let stored = stored as u64;
        if self.in_unit > 0 && self.in_unit + stored > self.unit {
            self.member = (self.member + 1) % self.filled.len();
            self.in_unit = 0;
        }
        let at = self.filled[self.member];
        self.filled[self.member] += stored;
        self.in_unit += stored;
        (self.member, at)
    }

    /// Bytes placed in each member.
    pub fn filled(&self) -> &[u64] {
        &self.filled
    }
}

/// One member other than the head, as the stripe section records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberEntry {
    /// The member file, relative to the head's directory (or absolute).
    pub path: String,
    /// Bytes of its data region.
    pub data_len: u64,
}

/// The stripe section of a head file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Section {
    /// The stripe unit in bytes.
    pub unit: u64,
    /// A number every member records, so that a member of another pack
    /// (or of an older write of this one) is refused.
    pub pack_id: u64,
    /// Members 1.. (the head is member 0).
    pub members: Vec<MemberEntry>,
}

impl Section {
    /// Encodes the section: magic, length, member count, unit, pack id,
    /// the members, then the crc32c of everything before it.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&SECTION_MAGIC);
        b.extend_from_slice(&[0; 8]); // length and member count, below
        b.extend_from_slice(&self.unit.to_le_bytes());
        b.extend_from_slice(&self.pack_id.to_le_bytes());
        for m in &self.members {
            b.extend_from_slice(&m.data_len.to_le_bytes());
            b.extend_from_slice(&(m.path.len() as u32).to_le_bytes());
            b.extend_from_slice(m.path.as_bytes());
        }
        let len = b.len() + 4;
        put_u32(&mut b, 8, len as u32);
        put_u32(&mut b, 12, self.members.len() as u32 + 1);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a section from the head's padding (`bytes`
    /// starts at file offset [`HEADER_LEN`]). Errors say what is wrong and
    /// at which file offset.
    pub fn decode(bytes: &[u8]) -> Result<Section, (u64, String)> {
        let at = |rel: usize| (HEADER_LEN + rel) as u64;
        if bytes.len() < 36 || bytes[..8] != SECTION_MAGIC {
            return Err((
                at(0),
                "the stripe flag is set but no stripe section follows the header".into(),
            ));
        }
        let len = get_u32(bytes, 8) as usize;
        if len < 36 || len > bytes.len() || len > MAX_SECTION_LEN {
            return Err((
                at(8),
                format!(
                    "stripe section length {len} is outside 36..={} (the padding before the data region is {} bytes)",
                    MAX_SECTION_LEN.min(bytes.len()),
                    bytes.len()
                ),
            ));
        }
        let stored = get_u32(bytes, len - 4);
        let computed = crc32c::crc32c(&bytes[..len - 4]);
        if stored != computed {
            return Err((
                at(len - 4),
                format!("stripe section checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"),
            ));
        }
        let count = get_u32(bytes, 12) as usize;
        if !(2..=MAX_MEMBERS).contains(&count) {
            return Err((
                at(12),
                format!("{count} members (a striped pack has 2..={MAX_MEMBERS})"),
            ));
        }
        let unit = get_u64(bytes, 16);
        if !(MIN_UNIT..=MAX_UNIT).contains(&unit) {
            return Err((
                at(16),
                format!("stripe unit {unit} is outside {MIN_UNIT}..={MAX_UNIT}"),
            ));
        }
        let pack_id = get_u64(bytes, 24);
        let mut members = Vec::with_capacity(count - 1);
        let mut p = 32;
        let body_end = len - 4;
        for k in 1..count {
            if p + 12 > body_end {
                return Err((
                    at(p),
                    format!("member {k}'s entry runs past the stripe section"),
                ));
            }
            let data_len = get_u64(bytes, p);
            let n = get_u32(bytes, p + 8) as usize;
            if n == 0 || n > MAX_MEMBER_PATH || p + 12 + n > body_end {
                return Err((
                    at(p + 8),
                    format!("member {k}'s path length {n} is outside 1..={MAX_MEMBER_PATH} or runs past the section"),
                ));
            }
            let path = std::str::from_utf8(&bytes[p + 12..p + 12 + n])
                .map_err(|_| (at(p + 12), format!("member {k}'s path is not UTF-8")))?;
            members.push(MemberEntry {
                path: path.to_string(),
                data_len,
            });
            p += 12 + n;
        }
        if p != body_end {
            return Err((
                at(p),
                format!("{} bytes after the last member entry", body_end - p),
            ));
        }
        Ok(Section {
            unit,
            pack_id,
            members,
        })
    }
}

/// The header of a member file other than the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemberHeader {
    /// Its index among the members (1.., the head is 0).
    pub index: u32,
    /// How many members the pack has, the head included.
    pub count: u32,
    /// The pack id the head's stripe section records.
    pub pack_id: u64,
    /// Bytes of its data region, which starts at [`DATA_ALIGN`].
    pub data_len: u64,
}

impl MemberHeader {
    /// Encodes the header with its crc32c in the last 4 bytes.
    pub fn encode(&self) -> [u8; MEMBER_HEADER_LEN] {
        let mut b = [0u8; MEMBER_HEADER_LEN];
        b[..8].copy_from_slice(&MEMBER_MAGIC);
        put_u32(&mut b, 8, self.index);
        put_u32(&mut b, 12, self.count);
        put_u64(&mut b, 16, self.pack_id);
        put_u64(&mut b, 24, DATA_ALIGN);
        put_u64(&mut b, 32, self.data_len);
        let crc = crc32c::crc32c(&b[..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    /// Decodes and checks a member header: magic, checksum, and a data
    /// region starting at [`DATA_ALIGN`].
    pub fn decode(b: &[u8; MEMBER_HEADER_LEN]) -> Result<MemberHeader, String> {
        if b[..8] != MEMBER_MAGIC {
            return Err("not a member of a striped gpustream pack (bad magic)".into());
        }
        let (stored, computed) = (get_u32(b, 60), crc32c::crc32c(&b[..60]));
        if stored != computed {
            return Err(format!(
                "member header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ));
        }
        if get_u64(b, 24) != DATA_ALIGN || b[40..60].iter().any(|&x| x != 0) {
            return Err(format!(
                "member header declares data at {} (not {DATA_ALIGN}) or has reserved bytes set",
                get_u64(b, 24)
            ));
        }
        Ok(MemberHeader {
            index: get_u32(b, 8),
            count: get_u32(b, 12),
            pack_id: get_u64(b, 16),
            data_len: get_u64(b, 32),
        })
    }
}

/// Where a member's path, as the section stores it, points: relative paths
/// are taken from the head's directory.
pub(crate) fn resolve(head: &Path, stored: &str) -> PathBuf {
    let p = Path::new(stored);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    head.parent().unwrap_or(Path::new("")).join(p)
}

/// The path of `member` relative to the directory `from`, lexically (both
/// absolute and without `..`); `None` when they share no root.
pub(crate) fn relative_to(member: &Path, from: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let m: Vec<Component> = member.components().collect();
    let f: Vec<Component> = from.components().collect();
    if m.first() != f.first() {
        return None;
    }
    let common = m.iter().zip(&f).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &m[common..] {
        out.push(c.as_os_str());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_deals_whole_blocks_in_units_round_robin() {
        let mut p = Placement::new(3, 100 << 10);
        let got: Vec<(usize, u64)> = [60u32 << 10, 40 << 10, 10 << 10, 90 << 10, 150 << 10, 1]
            .iter()
            .map(|&s| p.place(s))
            .collect();
        // 60 + 40 fill unit 0 exactly; 10 starts member 1 and 90 fits it;
        // 150 alone passes a unit but still takes one; 1 byte follows.
        assert_eq!(
            got,
            [
                (0, 0),
                (0, 60 << 10),
                (1, 0),
                (1, 10 << 10),
                (2, 0),
                (0, 100 << 10)
            ]
        );
        assert_eq!(p.filled(), [(100 << 10) + 1, 100 << 10, 150 << 10]);
    }

    #[test]
    fn the_section_round_trips_and_refuses_a_changed_byte() {
        let s = Section {
            unit: 1 << 20,
            pack_id: 0x1234_5678_9abc,
            members: vec![
                MemberEntry {
                    path: "../b/p.gspk.1".into(),
                    data_len: 77,
                },
                MemberEntry {
                    path: "/c/p.gspk.2".into(),
                    data_len: 5,
                },
            ],
        };
        let mut b = s.encode();
        b.resize(4096 - HEADER_LEN, 0);
        assert_eq!(Section::decode(&b).unwrap(), s);
        for i in 0..s.encode().len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(Section::decode(&c).is_err(), "byte {i} changed");
        }
        assert!(Section::decode(&b[..20]).is_err());
    }

    #[test]
    fn the_member_header_round_trips() {
        let h = MemberHeader {
            index: 2,
            count: 4,
            pack_id: 9,
            data_len: 1 << 30,
        };
        let b = h.encode();
        assert_eq!(MemberHeader::decode(&b).unwrap(), h);
        let mut c = b;
        c[33] ^= 1;
        assert!(MemberHeader::decode(&c).is_err());
    }

    #[test]
    fn member_paths_are_relative_to_the_head() {
        let rel = relative_to(Path::new("/mnt/d1/packs/w.gspk.1"), Path::new("/mnt/d0/w"));
        assert_eq!(rel.unwrap(), Path::new("../../d1/packs/w.gspk.1"));
        assert_eq!(
            resolve(Path::new("/mnt/d0/w/w.gspk"), "../../d1/packs/w.gspk.1"),
            Path::new("/mnt/d0/w/../../d1/packs/w.gspk.1")
        );
        assert_eq!(
            resolve(Path::new("/x/w.gspk"), "/abs/m"),
            Path::new("/abs/m")
        );
    }
}
