//! Writing a striped pack from an ordinary one: the stored bytes of every
//! block are copied, never decoded, into the member its stripe unit falls
//! to; the table of contents is copied byte for byte (block entries carry
//! no offsets, so it does not change).

use super::{
    relative_to, MemberEntry, MemberHeader, Placement, Section, FLAG_STRIPED, MAX_MEMBERS,
    MAX_MEMBER_PATH, MAX_UNIT, MIN_UNIT,
};
use crate::pack::format::{Header, DATA_ALIGN, HEADER_LEN};
use crate::pack::{BlockId, Pack, PackError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// What [`stripe_pack`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripeSummary {
    /// Every member file, the head first.
    pub members: Vec<PathBuf>,
    /// Bytes of stored blocks in each member.
    pub data_len: Vec<u64>,
    /// The stripe unit.
    pub unit: u64,
}

/// A file being written under a temporary name beside its final path;
/// removed if dropped before [`Tmp::finish`].
struct Tmp {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    written: u64,
}

impl Tmp {
    fn create(path: &Path) -> Result<Tmp, PackError> {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(name);
        let file = File::create(&tmp).map_err(|e| PackError::io("create", &tmp, 0, 0, e))?;
        Ok(Tmp {
            path: path.to_path_buf(),
            tmp,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            written: 0,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), PackError> {
        let at = self.written;
        let out = self.out.as_mut().expect("open until finished");
        out.write_all(bytes)
            .map_err(|e| PackError::io("write", &self.tmp, at, bytes.len() as u64, e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Flushes the file to disk and gives it its final name.
    fn finish(mut self) -> Result<(), PackError> {
        let out = self.out.take().expect("open until finished");
        let file = out
            .into_inner()
            .map_err(|e| PackError::io("write", &self.tmp, self.written, 0, e.into_error()))?;
        file.sync_all()
            .map_err(|e| PackError::io("sync", &self.tmp, 0, 0, e))?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| PackError::io("rename the finished member to", &self.path, 0, 0, e))?;
        Ok(())
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        if self.out.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> PackError {
    PackError::InvalidInput {
        asset: path.display().to_string(),
        reason: reason.into(),
    }
}

/// How the head names a member: relative to the head's directory where
/// both resolve under one root (so the set of disks can be mounted
/// elsewhere together), else absolute.
fn member_name(head_dir: &Path, member: &Path) -> Result<String, PackError> {
    let dir = member.parent().unwrap_or(Path::new("."));
    let canon = |p: &Path| {
        std::fs::canonicalize(p).map_err(|e| PackError::io("resolve the directory", p, 0, 0, e))
    };
    let (dir, head_dir) = (canon(dir)?, canon(head_dir)?);
    let full = dir.join(member.file_name().unwrap_or_default());
    let name = relative_to(&full, &head_dir).unwrap_or(full);
    let name = name
        .to_str()
        .ok_or_else(|| invalid(member, "member paths must be UTF-8"))?
        .to_string();
    if name.is_empty() || name.len() > MAX_MEMBER_PATH {
        return Err(invalid(
            member,
            format!("member path is over {MAX_MEMBER_PATH} bytes"),
        ));
    }
    Ok(name)
}

/// Writes the ordinary pack `src` as a striped pack: the head at `head`
/// (member 0) and one member file at each of `members`, with blocks dealt
/// out in stripe units of `unit` bytes. Each file is written under a
/// temporary name and renamed when complete, the head last, so the head
/// never names a member that is not whole. The result is opened again
/// before returning.
pub fn stripe_pack(
    src: &Path,
    head: &Path,
    members: &[PathBuf],
    unit: u64,
) -> Result<StripeSummary, PackError> {
    let n = members.len() + 1;
    if !(2..=MAX_MEMBERS).contains(&n) {
        return Err(invalid(
            head,
            format!("{n} members (a striped pack has 2..={MAX_MEMBERS})"),
        ));
    }
    if !(MIN_UNIT..=MAX_UNIT).contains(&unit) {
        return Err(invalid(
            head,
            format!("stripe unit {unit} is outside {MIN_UNIT}..={MAX_UNIT}"),
        ));
    }
    let pack = Pack::open(src)?;
    if pack.is_striped() {
        return Err(invalid(
            src,
            "is striped already; stripe the ordinary pack it came from",
        ));
    }
    let files = pack.open_file()?;
    let toc_offset = pack.data_offset() + pack.data_len();
    let mut toc = vec![0u8; (pack.file_len() - toc_offset) as usize];
    files.read_at(0, &mut toc, toc_offset).map_err(|e| {
        PackError::io(
            "read table of contents of",
            src,
            toc_offset,
            toc.len() as u64,
            e,
        )
    })?;
    let mut src_header = [0u8; HEADER_LEN];
    files
        .read_at(0, &mut src_header, 0)
        .map_err(|e| PackError::io("read header of", src, 0, HEADER_LEN as u64, e))?;
    let src_header = Header::decode(&src_header);

    let mut placement = Placement::new(n, unit);
    let placed: Vec<usize> = pack
        .blocks()
        .iter()
        .map(|b| placement.place(b.stored_size).0)
        .collect();
    let filled = placement.filled().to_vec();
    // Random, so that a hostile head cannot name another pack's member
    // and have it pass as its own (`member_file.rs`).
    let pack_id = super::super::member_file::random_pack_id();
    let head_dir = head.parent().unwrap_or(Path::new("."));
    let head_dir = if head_dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        head_dir
    };
    let section = Section {
        unit,
        pack_id,
        members: members
            .iter()
            .zip(&filled[1..])
            .map(|(m, &data_len)| {
                Ok(MemberEntry {
                    path: member_name(head_dir, m)?,
                    data_len,
                })
            })
            .collect::<Result<_, PackError>>()?,
    }
    .encode();
    let data_offset = ((HEADER_LEN + section.len()) as u64).div_ceil(DATA_ALIGN) * DATA_ALIGN;

    let mut outs: Vec<Tmp> = Vec::with_capacity(n);
    outs.push(Tmp::create(head)?);
    for m in members {
        outs.push(Tmp::create(m)?);
    }
    let header = Header {
        flags: FLAG_STRIPED,
        data_offset,
        data_len: filled[0],
        toc_offset: data_offset + filled[0],
        ..src_header
    };
    outs[0].write(&header.encode())?;
    outs[0].write(&section)?;
    outs[0].write(&vec![
        0u8;
        data_offset as usize - HEADER_LEN - section.len()
    ])?;
    for (k, out) in outs.iter_mut().enumerate().skip(1) {
        let mh = MemberHeader {
            index: k as u32,
            count: n as u32,
            pack_id,
            data_len: filled[k],
        };
        out.write(&mh.encode())?;
        out.write(&[0u8; DATA_ALIGN as usize - super::MEMBER_HEADER_LEN])?;
    }
    let mut stored = Vec::new();
    for (i, &m) in placed.iter().enumerate() {
        pack.read_stored(&files, BlockId(i as u32), &mut stored)?;
        outs[m].write(&stored)?;
    }
    outs[0].write(&toc)?;
    // Members first, the head last: a head on disk names only whole members.
    let mut outs = outs.into_iter();
    let head_out = outs.next().expect("the head is member 0");
    for out in outs {
        out.finish()?;
    }
    head_out.finish()?;

    let written = Pack::open(head)?;
    Ok(StripeSummary {
        members: written.members().iter().map(|m| m.path.clone()).collect(),
        data_len: filled,
        unit,
    })
}
