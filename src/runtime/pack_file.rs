//! An opened pack as the runtime reads it: the table of contents with the
//! file (or, striped, the files) its blocks are read from.

use std::path::Path;
use std::sync::Arc;

use crate::io::IoFile;
use crate::pack::Pack;

/// An opened pack: its table of contents and the file handle reads use.
/// It dereferences to its [`Pack`], so `pack.find(name)`,
/// `pack.asset(id)` and `pack.tile_region(..)` work on it directly.
///
/// A striped pack opens as one `PackFile` for its head, holding one more
/// for each other member: they share the table of contents, each with its
/// own file, so reads are grouped, ordered and queued per member, and so
/// per disk.
pub struct PackFile {
    pub(crate) pack: Arc<Pack>,
    pub(crate) file: IoFile,
    /// Which of the pack's members this file is.
    pub(crate) member: usize,
    /// A striped head's other members, 1.. in order; empty otherwise.
    pub(crate) members: Vec<Arc<PackFile>>,
}

impl PackFile {
    /// The table of contents.
    pub fn pack(&self) -> &Pack {
        &self.pack
    }

    /// The file's path (a member's own, for a member of a striped pack).
    pub fn path(&self) -> &Path {
        &self.pack.members()[self.member].path
    }

    /// The file holding member `member`'s blocks: this one for member 0,
    /// and for every block of an ordinary pack.
    pub(crate) fn member_file(self: &Arc<Self>, member: u16) -> &Arc<PackFile> {
        match member {
            0 => self,
            m => &self.members[m as usize - 1],
        }
    }

    /// Whether reads bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.file.is_direct()
    }
}

impl std::ops::Deref for PackFile {
    type Target = Pack;

    fn deref(&self) -> &Pack {
        &self.pack
    }
}
