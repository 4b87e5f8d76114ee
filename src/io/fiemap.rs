//! Where a file's bytes lie on its device, from the FIEMAP ioctl.
//!
//! The article on reading files in physical disk order sorts files by their first extent to read them in disk order;
//! the scheduler goes one step further and maps every request's file offset
//! to a physical byte address, so requests to many files on one device can
//! be sorted together.
//!
//! FIEMAP is a Linux ioctl: elsewhere files have no extents and reads are
//! ordered by file offset ([`physical_at`] finds nothing).

#[cfg(target_os = "linux")]
use std::os::fd::RawFd;

/// One mapped extent of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// File offset of the extent's first byte.
    pub logical: u64,
    /// Device byte address of that byte.
    pub physical: u64,
    /// Length in bytes.
    pub len: u64,
}

// struct fiemap / struct fiemap_extent from <linux/fiemap.h>.
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapHeader {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

#[cfg(target_os = "linux")]
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
#[cfg(target_os = "linux")]
const FIEMAP_EXTENT_LAST: u32 = 0x1;
// Extents whose physical address is not meaningful (delayed allocation,
// inline data, encoded) are skipped: sorting by them would be noise.
#[cfg(target_os = "linux")]
const FIEMAP_EXTENT_UNKNOWN: u32 = 0x2;
#[cfg(target_os = "linux")]
const FIEMAP_EXTENT_DATA_INLINE: u32 = 0x200;
#[cfg(target_os = "linux")]
const FIEMAP_EXTENT_NOT_ALIGNED: u32 = 0x100;
#[cfg(target_os = "linux")]
const BATCH: usize = 64;

/// Reads up to `max_extents` extents of the open file `fd`, in file order.
/// Stops early at the last extent. Errors (EOPNOTSUPP on tmpfs, overlayfs,
/// ...) are returned so callers can fall back to file offsets.
#[cfg(target_os = "linux")]
pub fn extents(fd: RawFd, max_extents: usize) -> std::io::Result<Vec<Extent>> {
    #[repr(C)]
    struct Req {
        hdr: FiemapHeader,
        ext: [FiemapExtent; BATCH],
    }
    let mut out = Vec::new();
    let mut start = 0u64;
    // Bounded: each round either ends the loop or advances `start` past at
    // least one extent, and the output is capped at max_extents.
    while out.len() < max_extents {
        let mut req = Req {
            hdr: FiemapHeader {
                fm_start: start,
                fm_length: u64::MAX - start,
                fm_extent_count: BATCH as u32,
                ..Default::default()
            },
            ext: [FiemapExtent::default(); BATCH],
        };
        // SAFETY: req is a properly laid out fiemap request with room for
        // BATCH extents, as fm_extent_count says.
        let rc = unsafe { libc::ioctl(fd, FS_IOC_FIEMAP as _, &mut req as *mut Req) };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = (req.hdr.fm_mapped_extents as usize).min(BATCH);
        if n == 0 {
            break;
        }
        let mut last = false;
        let mut next = start;
        for e in &req.ext[..n] {
            next = next.max(e.fe_logical.saturating_add(e.fe_length));
            last |= e.fe_flags & FIEMAP_EXTENT_LAST != 0;
            let unusable =
                FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED;
            if e.fe_flags & unusable == 0 && e.fe_length > 0 && out.len() < max_extents {
                out.push(Extent {
                    logical: e.fe_logical,
                    physical: e.fe_physical,
                    len: e.fe_length,
                });
            }
        }
        if last || next <= start {
            break;
        }
        start = next;
    }
    Ok(out)
}

/// The device address of file offset `offset`, if an extent maps it.
/// `extents` must be sorted by `logical` (as [`extents`] returns them).
pub fn physical_at(extents: &[Extent], offset: u64) -> Option<u64> {
    let i = extents.partition_point(|e| e.logical <= offset);
    let e = extents.get(i.checked_sub(1)?)?;
    (offset - e.logical < e.len).then(|| e.physical + (offset - e.logical))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn physical_at_maps_inside_extents_only() {
        let ex = [
            Extent {
                logical: 0,
                physical: 1000,
                len: 100,
            },
            Extent {
                logical: 200,
                physical: 50,
                len: 10,
            },
        ];
        assert_eq!(physical_at(&ex, 0), Some(1000));
        assert_eq!(physical_at(&ex, 99), Some(1099));
        assert_eq!(physical_at(&ex, 100), None);
        assert_eq!(physical_at(&ex, 205), Some(55));
        assert_eq!(physical_at(&ex, 210), None);
        assert_eq!(physical_at(&[], 0), None);
    }
}
