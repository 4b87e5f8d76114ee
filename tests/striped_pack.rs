//! Striped packs: one logical pack in several files. Written by
//! `stripe_pack`, opened as one pack, read by the CPU readers and by the
//! runtime from every member; a missing, foreign or damaged member is a
//! typed error at open, and a member cut while open fails only the
//! requests whose blocks it lost.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpustream::completion::{Fence, StatusArray, StatusEntry};
use gpustream::pack::stripe::{self, Placement};
use gpustream::pack::{Pack, PackError, PackWriter, WriterOptions};
use gpustream::prelude::*;
use gpustream::Codec;

/// Bytes that LZ4 shrinks a little and that differ everywhere.
fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 3 == 0 {
                0
            } else {
                x as u8
            }
        })
        .collect()
}

struct Striped {
    _dir: tempfile::TempDir,
    root: PathBuf,
    head: PathBuf,
    members: Vec<PathBuf>,
    blobs: Vec<(String, Vec<u8>)>,
}

/// Eight blobs of 100 KiB to 700 KiB, LZ4, striped over `n` directories
/// of one temporary root in 64 KiB units.
fn striped(n: usize) -> Striped {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let dirs: Vec<PathBuf> = (0..n).map(|k| root.join(format!("disk{k}"))).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let whole = dir.path().join("whole.gspk");
    let mut w = PackWriter::create(
        &whole,
        WriterOptions::default()
            .with_codec(Codec::Lz4)
            .with_threads(1),
    )
    .unwrap();
    let mut blobs = Vec::new();
    for i in 0..8u64 {
        let data = content(i + 1, (100 + 100 * i as usize) << 10);
        let name = format!("blob{i}");
        w.add_blob(&name, &data).unwrap();
        blobs.push((name, data));
    }
    w.finish().unwrap();
    let head = dirs[0].join("w.gspk");
    let members: Vec<PathBuf> = (1..n)
        .map(|k| dirs[k].join(format!("w.gspk.{k}")))
        .collect();
    let s = stripe::stripe_pack(&whole, &head, &members, stripe::MIN_UNIT).unwrap();
    assert_eq!(s.members.len(), n);
    assert!(s.data_len.iter().all(|&l| l > 0), "{:?}", s.data_len);
    Striped {
        _dir: dir,
        root,
        head,
        members,
        blobs,
    }
}

#[test]
fn a_striped_pack_opens_as_one_and_reads_back_every_blob() {
    let s = striped(3);
    let pack = Pack::open(&s.head).unwrap();
    assert!(pack.is_striped());
    assert_eq!(pack.members().len(), 3);
    assert_eq!(pack.stripe_unit(), Some(stripe::MIN_UNIT));
    // Blocks lie where the placement deals them, every member gets some.
    let mut placement = Placement::new(3, stripe::MIN_UNIT);
    for b in pack.blocks() {
        let (m, rel) = placement.place(b.stored_size);
        assert_eq!(b.member as usize, m);
        assert_eq!(b.offset, pack.members()[m].data_offset + rel);
    }
    for (k, m) in pack.members().iter().enumerate() {
        assert!(m.data_len > 0, "member {k} holds nothing");
    }
    for (name, data) in &s.blobs {
        assert!(
            pack.read_blob(pack.find(name).unwrap()).unwrap() == *data,
            "{name}"
        );
    }
    assert!(pack.verify(|_| {}).unwrap().is_empty());
    // Member paths are stored relative to the head: the whole tree moves.
    let moved = s.root.with_file_name("moved");
    std::fs::rename(&s.root, &moved).unwrap();
    let pack = Pack::open(moved.join("disk0/w.gspk")).unwrap();
    assert!(pack.read_blob(pack.find("blob7").unwrap()).unwrap() == s.blobs[7].1);
}

#[test]
fn a_missing_or_foreign_member_is_a_typed_error_naming_it() {
    let s = striped(3);
    let member_error = |head: &Path| match Pack::open(head) {
        Err(PackError::Member {
            index,
            member,
            reason,
            ..
        }) => (index, member, reason),
        other => panic!("expected a member error, got {other:?}"),
    };
    // Another striping of the same blocks: same sizes, another pack id.
    let other = s.root.join("other");
    std::fs::create_dir(&other).unwrap();
    let whole = s.root.parent().unwrap().join("whole.gspk");
    let other_members = [other.join("o.1"), other.join("o.2")];
    stripe::stripe_pack(
        &whole,
        &other.join("o.gspk"),
        &other_members,
        stripe::MIN_UNIT,
    )
    .unwrap();
    let saved = std::fs::read(&s.members[1]).unwrap();
    std::fs::copy(&other_members[1], &s.members[1]).unwrap();
    let (index, _, reason) = member_error(&s.head);
    assert_eq!(index, 2);
    assert!(reason.contains("is not member 2 of 3"), "{reason}");
    // What the foreign member's header says (its pack id, index, count)
    // is not printed: a hostile head would learn from it.
    assert!(!reason.contains("0x"), "{reason}");
    // Missing.
    std::fs::remove_file(&s.members[1]).unwrap();
    let (index, member, reason) = member_error(&s.head);
    assert_eq!(
        (index, member.file_name().unwrap()),
        (2, s.members[1].file_name().unwrap())
    );
    assert_eq!(reason, "not found");
    // Cut short.
    std::fs::write(&s.members[1], &saved[..saved.len() - 1]).unwrap();
    let (index, _, reason) = member_error(&s.head);
    assert_eq!(index, 2);
    assert!(reason.contains("is not member 2"), "{reason}");
    // And a runtime refuses it the same way, before any request.
    let rt = Runtime::without_gpu(RuntimeConfig::default()).unwrap();
    assert!(matches!(
        rt.open_pack(&s.head),
        Err(gpustream::runtime::RuntimeError::Pack(PackError::Member {
            index: 2,
            ..
        }))
    ));
    std::fs::write(&s.members[1], &saved).unwrap();
    assert!(Pack::open(&s.head).is_ok());
}

#[test]
fn every_changed_byte_of_the_stripe_section_is_refused() {
    let s = striped(2);
    let bytes = std::fs::read(&s.head).unwrap();
    let len = u32::from_le_bytes(bytes[72..76].try_into().unwrap()) as usize;
    for at in 64..64 + len {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        let got = Pack::from_bytes("head", &b);
        assert!(
            matches!(&got, Err(PackError::Corrupt { what, .. }) if what == "stripe section"),
            "byte {at}: {got:?}"
        );
    }
    // The flag cleared: an ordinary pack whose blocks overrun its data.
    let mut b = bytes.clone();
    b[12] = 0;
    let crc = crc32c::crc32c(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    assert!(Pack::from_bytes("head", &b).is_err());
}

#[test]
fn the_runtime_reads_every_member_and_a_member_cut_while_open_fails_only_its_requests() {
    let s = striped(3);
    let rt = Runtime::without_gpu(RuntimeConfig::default().with_cpu_threads(2)).unwrap();
    let pf = rt.open_pack(&s.head).unwrap();
    // Every blob, whole, into host memory.
    let run = |cut: bool| {
        let q = rt.create_queue(QueueConfig::default());
        let status = StatusArray::new(s.blobs.len());
        let mems: Vec<HostMemory> = s
            .blobs
            .iter()
            .map(|(_, d)| HostMemory::new(d.len()))
            .collect();
        for (i, (name, _)) in s.blobs.iter().enumerate() {
            let asset = pf.pack().find(name).unwrap();
            q.enqueue(Request::new(
                Source::blob(&pf, asset),
                Destination::memory(&mems[i]),
            ))
            .unwrap();
            q.enqueue_status(&status, i);
        }
        let fence = Fence::new();
        q.enqueue_signal(&fence, 1);
        q.submit();
        assert!(
            fence.wait_timeout(1, Duration::from_secs(60)),
            "cut {cut}: the fence is reached"
        );
        (status, mems)
    };
    let (status, mems) = run(false);
    for (i, (name, data)) in s.blobs.iter().enumerate() {
        assert!(
            matches!(status.get(i), StatusEntry::Ok),
            "{name}: {:?}",
            status.get(i)
        );
        assert!(mems[i].to_vec().unwrap() == *data, "{name}");
    }
    // Member 2 loses its data while open: the blobs with a block there
    // fail with an error naming that file; the others still arrive.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&s.members[1])
        .unwrap()
        .set_len(4096)
        .unwrap();
    let (status, mems) = run(true);
    let mut failed = 0;
    for (i, (name, data)) in s.blobs.iter().enumerate() {
        let asset = pf.pack().asset(pf.pack().find(name).unwrap());
        let in_member_2 = pf.pack().blocks()
            [asset.blocks.start as usize..asset.blocks.end as usize]
            .iter()
            .any(|b| b.member == 2);
        match status.get(i) {
            StatusEntry::Ok => {
                assert!(
                    !in_member_2,
                    "{name} has blocks in the cut member yet succeeded"
                );
                assert!(mems[i].to_vec().unwrap() == *data, "{name}");
            }
            StatusEntry::Failed(f) => {
                assert!(
                    in_member_2,
                    "{name} failed without a block in the cut member: {}",
                    f.error
                );
                let msg = f.error.to_string();
                assert!(
                    msg.contains("w.gspk.2"),
                    "{name}: the error names the member: {msg}"
                );
                failed += 1;
            }
            StatusEntry::Pending => panic!("{name}: never completed"),
        }
    }
    assert!(failed > 0 && failed < s.blobs.len(), "{failed} failed");
}

#[test]
fn stripe_pack_refuses_what_it_cannot_write() {
    let s = striped(2);
    let dir = s.root.join("disk1");
    let whole = s.root.parent().unwrap().join("whole.gspk");
    // One member only, a unit out of range, an already striped source.
    assert!(stripe::stripe_pack(&whole, &dir.join("a"), &[], stripe::MIN_UNIT).is_err());
    assert!(stripe::stripe_pack(&whole, &dir.join("a"), &[dir.join("b")], 4096).is_err());
    assert!(
        stripe::stripe_pack(&s.head, &dir.join("a"), &[dir.join("b")], stripe::MIN_UNIT).is_err()
    );
    // Nothing was left behind by the refusals.
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["w.gspk.1"]);
}

#[test]
fn a_member_may_hold_more_blocks_than_the_head_has_bytes() {
    // One stored 64 KiB blob fills member 0's first unit; then 70,000
    // one-byte blobs: 65,536 of them make member 1's unit, the rest go
    // back to member 0, which ends with fewer bytes than the pack has
    // blocks. The head's own data region cannot bound the block count.
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("tiny.gspk");
    let mut w = PackWriter::create(
        &whole,
        WriterOptions::default()
            .with_codec(Codec::None)
            .with_threads(1),
    )
    .unwrap();
    w.add_blob("first", &content(9, 64 << 10)).unwrap();
    for i in 0..70_000u32 {
        w.add_blob(&format!("t{i}"), &[i as u8]).unwrap();
    }
    w.finish().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let head = a.join("tiny.gspk");
    stripe::stripe_pack(&whole, &head, &[b.join("tiny.gspk.1")], stripe::MIN_UNIT).unwrap();
    let pack = Pack::open(&head).unwrap();
    assert!((pack.members()[0].data_len as usize) < pack.blocks().len());
    assert_eq!(pack.members()[1].data_len, 65_536);
    let last = pack.find("t69999").unwrap();
    assert_eq!(pack.read_blob(last).unwrap(), [69_999u32 as u8]);
}

/// Rewrites the path member `k` (1..) has in a striped head's stripe
/// section, as a hostile head would name any file: the section is decoded,
/// changed and encoded again with a good checksum (docs/pack-format.md,
/// "Striped packs").
fn rename_member(head: &Path, k: usize, to: &str) {
    let mut bytes = std::fs::read(head).unwrap();
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let len = u32_at(&bytes, 72) as usize;
    let count = u32_at(&bytes, 76) as usize;
    let mut members = Vec::new();
    let mut at = 64 + 32;
    // The count includes the head, which has no entry.
    for _ in 1..count {
        let data_len = bytes[at..at + 8].to_vec();
        let n = u32_at(&bytes, at + 8) as usize;
        let path = bytes[at + 12..at + 12 + n].to_vec();
        members.push((data_len, path));
        at += 12 + n;
    }
    members[k - 1].1 = to.as_bytes().to_vec();
    let mut section = bytes[64..64 + 32].to_vec();
    for (data_len, path) in &members {
        section.extend_from_slice(data_len);
        section.extend_from_slice(&(path.len() as u32).to_le_bytes());
        section.extend_from_slice(path);
    }
    let new_len = section.len() as u32 + 4;
    section[8..12].copy_from_slice(&new_len.to_le_bytes());
    let crc = crc32c::crc32c(&section);
    section.extend_from_slice(&crc.to_le_bytes());
    assert!(
        64 + section.len() <= 4096,
        "the section fits the head's padding"
    );
    bytes[64..64 + len.max(section.len())].fill(0);
    bytes[64..64 + section.len()].copy_from_slice(&section);
    std::fs::write(head, bytes).unwrap();
}

#[test]
fn a_hostile_head_naming_fifos_devices_proc_files_or_symlinks_is_refused_at_once() {
    let s = striped(2);
    let fifo = s.root.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let link = s.root.join("link");
    std::os::unix::fs::symlink(&s.members[0], &link).unwrap();
    let targets = [
        fifo.display().to_string(),
        "/dev/zero".to_string(),
        "/dev/null".to_string(),
        "/proc/self/environ".to_string(),
        "/proc/self/mem".to_string(),
        "/etc/hostname".to_string(),
        link.display().to_string(),
        "../../../../../../../etc/passwd".to_string(),
        s.root.display().to_string(),
    ];
    for to in &targets {
        rename_member(&s.head, 1, to);
        let (head, named) = (s.head.clone(), to.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(Pack::open(&head).map(|_| ()));
            let rt = Runtime::without_gpu(RuntimeConfig::default()).unwrap();
            let _ = tx.send(rt.open_pack(&head).map(|_| ()).map_err(|e| match e {
                gpustream::runtime::RuntimeError::Pack(p) => p,
                other => panic!("{named}: expected a pack error, got {other}"),
            }));
        });
        for what in ["Pack::open", "Runtime::open_pack"] {
            let got = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{what} of a head naming {to} hangs"));
            match got {
                Err(PackError::Member {
                    index: 1, reason, ..
                }) => {
                    // Found or not, and nothing else: not the file's type,
                    // length or bytes.
                    assert!(
                        reason == "not found"
                            || reason == "permission denied"
                            || reason.starts_with("is not member 1 of 2 of this pack"),
                        "{what}, {to}: {reason}"
                    );
                }
                other => panic!("{what}, {to}: expected a member error, got {other:?}"),
            }
        }
    }
    // The member's own path again: the pack opens.
    let own = s.members[0]
        .strip_prefix(s.head.parent().unwrap())
        .map_or_else(
            |_| s.members[0].display().to_string(),
            |p| p.display().to_string(),
        );
    rename_member(&s.head, 1, &own);
    Pack::open(&s.head).unwrap();
}
