//! Files opened through the engine: O_DIRECT where the filesystem allows,
//! buffered otherwise, with their physical placement for the scheduler.

#[cfg(target_os = "linux")]
use std::ffi::CString;
use std::fs::File;
// Descriptors, /proc, fcntl flags, statfs and statx below are Linux's.
#[cfg(target_os = "linux")]
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
#[cfg(target_os = "linux")]
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::backend::RawFile;
use super::device::{DeviceId, Devices};
use super::fiemap::{self, Extent};
use super::fill::RangeFill;
#[cfg(target_os = "linux")]
use super::mapping::Mapping;
use super::IoError;

/// EINTR/EAGAIN answers tolerated per request before it fails (here and in
/// the I/O workers).
pub(crate) const MAX_RETRIES: u32 = 64;

/// How `crate::io::IoEngine::open` opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenMode {
    /// O_DIRECT where the filesystem supports it, buffered otherwise (with a
    /// one-line notice through `log`, once per filesystem). macOS uses
    /// `F_NOCACHE`; Windows reads buffered.
    #[default]
    Auto,
    /// O_DIRECT; like `Auto`, falls back to buffered where the filesystem
    /// (or the OS) refuses it (and says so), because a read that works
    /// beats none.
    Direct,
    /// Through the page cache (like DirectStorage's ForceFileBuffering):
    /// for spinning disks that benefit from read-ahead, and for files read
    /// again soon.
    Buffered,
}

/// Upper bound on extents kept per file: enough to map a 4 GiB file on
/// ext4 (128 MiB extents) many times over, and a fixed cost for files that
/// are badly fragmented (offsets past the last kept extent fall back to
/// file order).
#[cfg(target_os = "linux")]
const MAX_EXTENTS: usize = 4096;

static NEXT_FILE_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct FileInner {
    pub(crate) id: u64,
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    pub(crate) direct: bool,
    /// Set when a direct read came back EINVAL: the filesystem accepted
    /// O_DIRECT at open but not for reads; later reads go buffered.
    pub(crate) direct_refused: AtomicBool,
    pub(crate) alignment: usize,
    len: u64,
    ino: u64,
    device: DeviceId,
    extents: Vec<Extent>,
    /// A second, buffered descriptor for ranges a direct read cannot do
    /// (unaligned offset, length or destination): opened on first need.
    /// Linux only: macOS's `F_NOCACHE` takes any range on one descriptor.
    #[cfg(target_os = "linux")]
    buffered: OnceLock<Result<File, i32>>,
    /// The whole file mapped read-only, for files read through the page
    /// cache whose opener asked for it ([`IoFile::map_for_reads`]). Linux
    /// only, as `mapping.rs` says why.
    #[cfg(target_os = "linux")]
    map: OnceLock<Option<Mapping>>,
    /// What makes ranges present before they are read, for a file that is
    /// a local cache of a remote object (`fill.rs`).
    fill: OnceLock<Arc<dyn RangeFill>>,
    /// The opening engine's device knowledge, for the notice a refused
    /// direct read gives.
    devices: Arc<Devices>,
}

/// What the OS-specific open found out about a file.
struct Opened {
    file: File,
    direct: bool,
    alignment: usize,
    len: u64,
    /// The file's inode, where the OS has one at hand (the scheduler's
    /// fallback order groups a file's reads by it).
    ino: Option<u64>,
    device: DeviceId,
    extents: Vec<Extent>,
}

/// A file opened by the engine. Cloning is cheap (an `Arc`); the file is
/// closed when the last clone and the last read using it are gone.
#[derive(Clone)]
pub struct IoFile {
    pub(crate) inner: Arc<FileInner>,
}

impl std::fmt::Debug for IoFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoFile")
            .field("path", &self.inner.path)
            .field("len", &self.inner.len)
            .field("direct", &self.inner.direct)
            .field("alignment", &self.inner.alignment)
            .field("device", &self.inner.device.name)
            .finish()
    }
}

/// Where a request sits on its device, for sorting. Requests with a known
/// physical address compare by it; others (no FIEMAP, and every file
/// outside Linux) fall back to (file, offset), which keeps each file's
/// reads in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhysKey(pub u64, pub u64);

impl IoFile {
    /// Opens `path` for reading on its own, outside any engine (an
    /// engine's files share what it learned about their devices: `IoEngine::open`).
    pub fn open(path: &Path, mode: OpenMode) -> Result<IoFile, IoError> {
        Self::open_named(path, path, mode, &Arc::default())
    }

    /// Opens `open` for reading, naming `shown` in errors and reports: for
    /// a file reached through a descriptor the caller holds
    /// (`/proc/self/fd/N`), so that the file read is the very file the
    /// caller checked, whatever was renamed or swapped in at its path since.
    pub(crate) fn open_named(
        open: &Path,
        shown: &Path,
        mode: OpenMode,
        devices: &Arc<Devices>,
    ) -> Result<IoFile, IoError> {
        let rename = |e: IoError| match e {
            IoError::Open { source, .. } => IoError::Open {
                path: shown.to_path_buf(),
                source,
            },
            IoError::NotAFile { .. } => IoError::NotAFile {
                path: shown.to_path_buf(),
            },
            other => other,
        };
        let o = open_os(open, mode, devices).map_err(rename)?;
        let path = shown;
        let id = NEXT_FILE_ID.fetch_add(1, Ordering::Relaxed);
        Ok(IoFile {
            inner: Arc::new(FileInner {
                id,
                path: path.to_path_buf(),
                file: o.file,
                direct: o.direct,
                direct_refused: AtomicBool::new(false),
                alignment: o.alignment,
                len: o.len,
                // Without an inode, the file's own id keeps its reads
                // together in the fallback order.
                ino: o.ino.unwrap_or(id),
                device: o.device,
                extents: o.extents,
                #[cfg(target_os = "linux")]
                buffered: OnceLock::new(),
                #[cfg(target_os = "linux")]
                map: OnceLock::new(),
                fill: OnceLock::new(),
                devices: devices.clone(),
            }),
        })
    }

    /// Makes this file a local cache whose ranges `fill` makes present
    /// before the engine reads them. Set once; false if one was set before.
    /// (Only remote packs, a feature of Linux builds, make such files.)
    #[cfg_attr(not(all(feature = "remote", target_os = "linux")), allow(dead_code))]
    pub(crate) fn set_fill(&self, fill: Arc<dyn RangeFill>) -> bool {
        self.inner.fill.set(fill).is_ok()
    }

    /// The file's fill, for a local cache of a remote object.
    pub(crate) fn fill(&self) -> Option<&Arc<dyn RangeFill>> {
        self.inner.fill.get()
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The file's length when it was opened.
    pub fn len(&self) -> u64 {
        self.inner.len
    }

    /// Whether the file was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Whether reads bypass the page cache (O_DIRECT; `F_NOCACHE` on macOS;
    /// never on Windows).
    pub fn is_direct(&self) -> bool {
        self.inner.direct && !self.inner.direct_refused.load(Ordering::Relaxed)
    }

    /// What the offset, length and destination address of a direct read
    /// must be multiples of; 1 for buffered files. Reads that do not follow
    /// it still work (the engine sends them through a buffered descriptor)
    /// but lose the direct path.
    pub fn alignment(&self) -> usize {
        if self.is_direct() {
            self.inner.alignment
        } else {
            1
        }
    }

    /// The physical device the file's reads go to (partitions resolved to
    /// their disk on Linux; the filesystem elsewhere, the volume on Windows).
    pub fn device(&self) -> &DeviceId {
        &self.inner.device
    }

    /// How many extents FIEMAP reported (0 where unsupported, and outside
    /// Linux).
    pub fn extent_count(&self) -> usize {
        self.inner.extents.len()
    }

    /// The device byte address of file offset `offset`, when FIEMAP maps it.
    pub fn physical_offset(&self, offset: u64) -> Option<u64> {
        fiemap::physical_at(&self.inner.extents, offset)
    }

    /// The key the scheduler sorts this file's read at `offset` by: the
    /// physical address from FIEMAP, or (file, offset) where unknown: the
    /// inode on unix, the engine's own number for the file on Windows.
    pub fn physical_key(&self, offset: u64) -> PhysKey {
        match self.physical_offset(offset) {
            Some(p) => PhysKey(0, p),
            None => PhysKey(1 + self.inner.ino, offset),
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    pub(crate) fn direct_fd(&self) -> RawFile {
        raw(&self.inner.file)
    }

    /// The descriptor for reads that cannot go direct; the file itself
    /// when it is buffered already.
    #[cfg(target_os = "linux")]
    pub(crate) fn buffered_fd(&self) -> Result<RawFile, i32> {
        if !self.inner.direct {
            return Ok(self.inner.file.as_raw_fd());
        }
        match self
            .inner
            .buffered
            .get_or_init(|| reopen_buffered(self.inner.file.as_raw_fd()))
        {
            Ok(f) => Ok(f.as_raw_fd()),
            Err(e) => Err(*e),
        }
    }

    /// The descriptor for reads that cannot go direct: the file itself.
    /// Only macOS opens files uncached outside Linux, and its `F_NOCACHE`
    /// is a cache policy, not an alignment rule: any range reads correctly
    /// on the same descriptor.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn buffered_fd(&self) -> Result<RawFile, i32> {
        Ok(raw(&self.inner.file))
    }

    /// Maps a file read through the page cache, read-only and whole, so
    /// that [`IoFile::mapped`] can hand out its bytes without a copy; returns
    /// whether it is mapped. Direct files are not (their reads bypass the
    /// page cache on purpose), and a refused mapping leaves `pread`.
    ///
    /// A file cut shorter while mapped does not kill the reader: the first
    /// mapping installs a SIGBUS handler that turns a fault on a page past
    /// the end into a page of zeros and a mark ([`IoFile::mapping_was_cut`]),
    /// and chains every other SIGBUS to the handler installed before it.
    ///
    /// Linux only (`mapping.rs` says why): elsewhere this maps nothing and
    /// returns `false`, and reads stay positioned reads.
    #[cfg(target_os = "linux")]
    pub fn map_for_reads(&self) -> bool {
        if self.inner.direct {
            return false;
        }
        self.inner
            .map
            .get_or_init(|| Mapping::new(self.inner.file.as_raw_fd(), self.inner.len))
            .is_some()
    }

    /// Maps a file read through the page cache (Linux only, see
    /// `mapping.rs`): here nothing is mapped and reads stay positioned
    /// reads, so this returns `false`.
    #[cfg(not(target_os = "linux"))]
    pub fn map_for_reads(&self) -> bool {
        false
    }

    /// Bytes `offset..offset + len` of the file's mapping, where
    /// [`IoFile::map_for_reads`] mapped it and the range lies inside what
    /// was mapped; `None` otherwise (read them with [`IoFile::read_cached`]).
    #[cfg(target_os = "linux")]
    pub fn mapped(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.inner.map.get()?.as_ref()?.get(offset, len)
    }

    /// Bytes of the file's mapping: always `None` outside Linux, where
    /// nothing is mapped ([`IoFile::map_for_reads`]).
    #[cfg(not(target_os = "linux"))]
    pub fn mapped(&self, _offset: u64, _len: usize) -> Option<&[u8]> {
        None
    }

    /// Whether a read of the file's mapping has touched a page past the
    /// file's end (it was cut shorter while open): such pages read as
    /// zeros, so a block read from the mapping since then is checked
    /// against the file's length ([`IoFile::current_len`]).
    #[cfg(target_os = "linux")]
    pub fn mapping_was_cut(&self) -> bool {
        self.inner
            .map
            .get()
            .and_then(Option::as_ref)
            .is_some_and(Mapping::was_cut)
    }

    /// Whether a read of the file's mapping touched a page past its end:
    /// never outside Linux, where nothing is mapped.
    #[cfg(not(target_os = "linux"))]
    pub fn mapping_was_cut(&self) -> bool {
        false
    }

    /// The file's length now (it may have changed since it was opened);
    /// `None` where `fstat` fails.
    pub fn current_len(&self) -> Option<u64> {
        self.inner.file.metadata().ok().map(|m| m.len())
    }

    /// Reads up to `buf.len()` bytes at `offset` of a file opened through
    /// the page cache, on the calling thread; returns the bytes read (fewer
    /// only where the file ends), after retrying EINTR and continuing short
    /// reads as the engine's workers do. For a CPU thread that decodes what
    /// it reads at once: the kernel's copy is the same work a pool thread
    /// would do, and on the decoding thread the bytes are still in its cache.
    /// Errors name the file, offset and length; a file opened for direct
    /// I/O is refused (its reads go through the engine).
    pub fn read_cached(&self, offset: u64, buf: &mut [u8]) -> Result<usize, IoError> {
        let len = buf.len();
        let err = |done: usize, source| IoError::Read {
            path: self.inner.path.clone(),
            offset,
            len,
            done,
            source,
        };
        if self.inner.direct {
            return Err(err(
                0,
                std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "a file opened for direct I/O is read through the engine",
                ),
            ));
        }
        let mut done = 0;
        let mut interrupts = 0u32;
        while done < len {
            match read_file_at(&self.inner.file, &mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    interrupts += 1;
                    if interrupts > MAX_RETRIES {
                        return Err(IoError::RetriesExhausted {
                            path: self.inner.path.clone(),
                            offset,
                            len,
                            attempts: interrupts,
                        });
                    }
                }
                Err(e) => return Err(err(done, e)),
            }
        }
        Ok(done)
    }

    /// Called when a direct read was refused with EINVAL after open.
    pub(crate) fn refuse_direct(&self) {
        if !self.inner.direct_refused.swap(true, Ordering::Relaxed) {
            self.inner.devices.notice(
                self.inner.device.dev,
                &self.inner.path,
                "direct reads are refused (EINVAL)",
            );
        }
    }
}

/// Linux: O_DIRECT where the filesystem takes it (not on tmpfs), its
/// alignment from statx, the disk from sysfs and the extents from FIEMAP.
#[cfg(target_os = "linux")]
fn open_os(path: &Path, mode: OpenMode, devices: &Devices) -> Result<Opened, IoError> {
    let open_err = |source| IoError::Open {
        path: path.to_path_buf(),
        source,
    };
    let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        open_err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "path contains a NUL byte",
        ))
    })?;
    // Non-blocking: opening a FIFO for reading would otherwise wait for a
    // writer forever. The flag is cleared once the descriptor is known to
    // be a regular file (io_uring would answer EAGAIN to buffered reads on
    // a non-blocking descriptor instead of waiting for the page cache).
    let base = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK;
    let want_direct = mode != OpenMode::Buffered;
    let mut direct = false;
    let mut fd: RawFd = -1;
    if want_direct {
        // SAFETY: cpath is a valid NUL-terminated string.
        fd = unsafe { libc::open(cpath.as_ptr(), base | libc::O_DIRECT) };
        if fd >= 0 {
            direct = true;
        } else {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINVAL) {
                return Err(open_err(err));
            }
        }
    }
    if fd < 0 {
        // SAFETY: as above.
        fd = unsafe { libc::open(cpath.as_ptr(), base) };
        if fd < 0 {
            return Err(open_err(std::io::Error::last_os_error()));
        }
    }
    // SAFETY: fd is a freshly opened descriptor we own.
    let file = unsafe { File::from_raw_fd(fd) };
    let meta = file.metadata().map_err(open_err)?;
    if !meta.is_file() {
        return Err(IoError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL take no pointers.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if !cleared {
        return Err(open_err(std::io::Error::last_os_error()));
    }
    use std::os::unix::fs::MetadataExt;
    let device = devices.resolve(meta.dev());

    let mut reason = None;
    if want_direct && !direct {
        reason = Some("the filesystem refuses O_DIRECT");
    }
    if direct && is_memory_fs(fd) {
        // O_DIRECT on tmpfs is accepted by recent kernels but means
        // nothing: the page cache *is* the storage. Read it buffered,
        // without the alignment rules.
        direct = false;
        reason = Some("tmpfs keeps files in memory, O_DIRECT does not apply");
    }
    let file = if want_direct && !direct && reason.is_some() && fd_is_direct(fd) {
        // Reopen without O_DIRECT for the memory filesystem case.
        reopen_buffered(fd).map_err(|e| open_err(std::io::Error::from_raw_os_error(e)))?
    } else {
        file
    };
    if let Some(reason) = reason {
        devices.notice(meta.dev(), path, reason);
    }
    let alignment = if direct { direct_alignment(&cpath) } else { 1 };
    let extents = fiemap::extents(file.as_raw_fd(), MAX_EXTENTS).unwrap_or_default();
    Ok(Opened {
        file,
        direct,
        alignment,
        len: meta.len(),
        ino: Some(meta.ino()),
        device,
        extents,
    })
}

/// Other unix systems (macOS, the BSDs): a plain open. On macOS a file
/// opened `Auto` or `Direct` is read with `F_NOCACHE`, its nearest
/// equivalent of O_DIRECT: reads skip the cache (the kernel takes the
/// direct path for block-aligned ranges), and any other range still reads
/// correctly on the same descriptor. No FIEMAP, so reads are ordered by
/// file offset; the device is the filesystem's `st_dev` (no sysfs to find
/// its disk).
#[cfg(all(unix, not(target_os = "linux")))]
fn open_os(path: &Path, mode: OpenMode, devices: &Devices) -> Result<Opened, IoError> {
    use std::os::unix::fs::MetadataExt;
    let open_err = |source| IoError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(open_err)?;
    let meta = file.metadata().map_err(open_err)?;
    if !meta.is_file() {
        return Err(IoError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let device = devices.resolve(meta.dev());
    let want_direct = mode != OpenMode::Buffered;
    let direct = want_direct && no_cache(&file);
    if want_direct && !direct {
        devices.notice(device.dev, path, UNCACHED_UNAVAILABLE);
    }
    let alignment = if direct { NOCACHE_ALIGN } else { 1 };
    Ok(Opened {
        file,
        direct,
        alignment,
        len: meta.len(),
        ino: Some(meta.ino()),
        device,
        extents: Vec::new(),
    })
}

/// Turns the page cache off for `file` (macOS's `F_NOCACHE`); whether it
/// took.
#[cfg(target_os = "macos")]
fn no_cache(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl(F_NOCACHE, 1) on a descriptor `file` keeps open; it
    // changes only the descriptor's caching policy.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_NOCACHE, 1) == 0 }
}

/// No uncached reads are implemented on this system (the BSDs' O_DIRECT
/// is not wired up): every file is read through the page cache.
#[cfg(all(unix, not(any(target_os = "linux", target_os = "macos"))))]
fn no_cache(_file: &File) -> bool {
    false
}

/// Why a file asked to be read uncached is not, outside Linux.
#[cfg(target_os = "macos")]
const UNCACHED_UNAVAILABLE: &str = "the filesystem refuses F_NOCACHE";
/// Why a file asked to be read uncached is not, outside Linux.
#[cfg(all(unix, not(any(target_os = "linux", target_os = "macos"))))]
const UNCACHED_UNAVAILABLE: &str = "uncached reads are not implemented on this system";

/// What uncached reads on macOS are aligned to: APFS's 4 KiB block, which
/// is also what the runtime's staging and bounce buffers are aligned to.
/// A range off it still reads correctly on the same descriptor.
#[cfg(all(unix, not(target_os = "linux")))]
const NOCACHE_ALIGN: usize = 4096;

/// Windows: a plain buffered open (std's default sharing: others may read,
/// write and delete). FILE_FLAG_NO_BUFFERING is not used: it needs
/// sector-aligned reads into sector-aligned memory, and its sector size
/// from another query. No extents, so reads are ordered by file offset;
/// the device is the volume (drive or share) the path lies on.
#[cfg(windows)]
fn open_os(path: &Path, mode: OpenMode, devices: &Devices) -> Result<Opened, IoError> {
    let open_err = |source| IoError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(|e| {
        // Windows refuses to open a directory as a file (access denied):
        // report it as what it is, as unix's open-then-fstat does.
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            IoError::NotAFile {
                path: path.to_path_buf(),
            }
        } else {
            open_err(e)
        }
    })?;
    let meta = file.metadata().map_err(open_err)?;
    if !meta.is_file() {
        return Err(IoError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let device = super::device::resolve_volume(path);
    if mode != OpenMode::Buffered {
        devices.notice(
            device.dev,
            path,
            "unbuffered reads are not implemented on Windows",
        );
    }
    Ok(Opened {
        file,
        direct: false,
        alignment: 1,
        len: meta.len(),
        ino: None,
        device,
        extents: Vec::new(),
    })
}

/// The OS handle behind `file`, for the backends.
#[cfg(unix)]
fn raw(file: &File) -> RawFile {
    use std::os::fd::AsRawFd;
    file.as_raw_fd()
}

/// The OS handle behind `file`, for the backends.
#[cfg(windows)]
fn raw(file: &File) -> RawFile {
    use std::os::windows::io::AsRawHandle;
    file.as_raw_handle()
}

/// One positioned read of `file`.
#[cfg(unix)]
fn read_file_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

/// One positioned read of `file`: `seek_read` takes the offset with the
/// read (it also moves the handle's file position, which no reader here
/// uses).
#[cfg(windows)]
fn read_file_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

/// Reopens the file behind `fd` without O_DIRECT through /proc, which works
/// even after the file was renamed or unlinked. `/proc/self/fd` is Linux's.
#[cfg(target_os = "linux")]
fn reopen_buffered(fd: RawFd) -> Result<File, i32> {
    let p = CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
    // SAFETY: p is a valid C string.
    let nfd = unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if nfd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    // SAFETY: nfd is a freshly opened descriptor we own.
    Ok(unsafe { File::from_raw_fd(nfd) })
}

#[cfg(target_os = "linux")]
fn fd_is_direct(fd: RawFd) -> bool {
    // SAFETY: fcntl(F_GETFL) on a valid descriptor.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl >= 0 && fl & libc::O_DIRECT != 0
}

// f_type and the magic constants are c_long or narrower depending on the
// architecture; widening them all to i64 is a no-op cast on x86_64.
#[allow(clippy::unnecessary_cast)]
#[cfg(target_os = "linux")]
fn is_memory_fs(fd: RawFd) -> bool {
    // SAFETY: zeroed statfs is a valid out-parameter.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is valid, s is writable.
    if unsafe { libc::fstatfs(fd, &mut s) } != 0 {
        return false;
    }
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let t = s.f_type as i64;
    t == libc::TMPFS_MAGIC as i64 || t == RAMFS_MAGIC
}

/// The direct-I/O alignment from statx (STATX_DIOALIGN, Linux 6.1+): the
/// larger of the offset and memory alignments. 4096 when statx cannot say,
/// which is safe for every sector size Linux supports.
#[cfg(target_os = "linux")]
fn direct_alignment(cpath: &CString) -> usize {
    // SAFETY: zeroed statx is a valid out-parameter.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-parameter.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            cpath.as_ptr(),
            0,
            libc::STATX_DIOALIGN,
            &mut st,
        )
    };
    if rc == 0 && st.stx_mask & libc::STATX_DIOALIGN != 0 {
        let a = st.stx_dio_offset_align.max(st.stx_dio_mem_align) as usize;
        if a.is_power_of_two() && a <= 1 << 20 {
            return a;
        }
    }
    4096
}
