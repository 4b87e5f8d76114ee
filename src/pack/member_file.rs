//! Opening the files a pack reads: its head, and each member a striped
//! head names.
//!
//! A head is untrusted input, and so is every path its stripe section
//! stores. What a member may be:
//! - a **regular file**, checked on the open descriptor before a byte is
//!   read: a FIFO, a device, a socket or a directory is refused. The open
//!   never blocks (`O_NONBLOCK`: opening a FIFO would wait for a writer
//!   forever) and does not follow a symlink in the last component
//!   (`O_NOFOLLOW`);
//! - **of the length the head declares** (checked on the descriptor too, so
//!   `/proc` files, which report no length, are refused unread);
//! - **this pack's member**: its header names this pack's id, the member's
//!   index and count, and the data length. Pack ids are 64 random bits, and
//!   no error prints a member header's fields, so a head cannot be made to
//!   pass off another pack's member without knowing that pack's id.
//!
//! Members may lie anywhere the head names, absolute or relative to the
//! head's directory: a stripe spreads over disks mounted where their owner
//! chose. What keeps a hostile head from reading other files is the three
//! checks above, and errors that say only whether the path was found: not
//! its type, its size or what it holds.
//!
//! The descriptor checked is the one kept ([`crate::pack::Pack`] holds
//! them) and the one read: the I/O engine reopens it through
//! `/proc/self/fd`, never by path again, so a file swapped in at the path
//! after the check is never read.

use std::fs::File;
use std::path::{Path, PathBuf};

/// Opens `path` for reading without blocking, and checks on the open
/// descriptor that it is a regular file. `follow`: whether a symlink as the
/// last component is followed (a head the user named: yes; a member the
/// head names: no). Returns the file and its length.
pub(crate) fn open_regular(path: &Path, follow: bool) -> std::io::Result<(File, u64)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | nofollow);
    }
    // Elsewhere (Windows) the open follows links; the regular-file, length
    // and header checks below still hold.
    #[cfg(not(unix))]
    let _ = follow;
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor `file` owns; no pointers.
        let cleared = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
        };
        if !cleared {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((file, meta.len()))
}

/// A path that reopens the very file `file` is open on (`/proc/self/fd/N`
/// on Linux), for a reader that opens files its own way (O_DIRECT); `None`
/// where there is none (no `/proc`, other systems).
pub(crate) fn reopen_path(file: &File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let p = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        p.exists().then_some(p)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

/// 64 bits from the operating system's random source, for a striped pack's
/// id; never 0. Falls back to the clock and process id where the source
/// fails (the id then only tells packs apart, as it always has).
pub(crate) fn random_pack_id() -> u64 {
    let mut b = [0u8; 8];
    if getrandom(&mut b) {
        return u64::from_le_bytes(b).max(1);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ (u64::from(std::process::id()) << 32)).max(1)
}

#[cfg(target_os = "linux")]
fn getrandom(b: &mut [u8; 8]) -> bool {
    // SAFETY: the buffer is 8 writable bytes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    n == b.len() as isize
}

#[cfg(not(target_os = "linux"))]
fn getrandom(b: &mut [u8; 8]) -> bool {
    use std::io::Read;
    std::fs::File::open("/dev/urandom").is_ok_and(|mut f| f.read_exact(b).is_ok())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&fifo, false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert!(open_regular(dir.path(), true).is_err(), "a directory");
    }

    #[test]
    fn a_symlinked_member_is_refused_and_a_file_reopens_as_itself() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"member bytes").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(open_regular(&link, false).is_err());
        let (f, len) = open_regular(&link, true).unwrap();
        assert_eq!(len, 12);
        #[cfg(target_os = "linux")]
        {
            let p = reopen_path(&f).unwrap();
            // Swapped after the check: the reopened descriptor still reads
            // the file checked.
            std::fs::remove_file(&real).unwrap();
            std::fs::write(&real, b"other").unwrap();
            assert_eq!(std::fs::read(p).unwrap(), b"member bytes");
        }
    }

    #[test]
    fn pack_ids_differ() {
        let a = random_pack_id();
        let b = random_pack_id();
        assert!(a != 0 && b != 0 && a != b);
    }
}
