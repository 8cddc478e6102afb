//! What makes two paths the same file: the device and inode a walk saw (`StatId`), and the real-path identity the
//! discovery de-duplicates by (`FileId`).

use std::path::PathBuf;

use rustc_hash::FxHashSet;

use super::MemoryFile;

/// What git compares besides size and mtime: the inode and the status-change time (ctime). A rewrite moves the
/// ctime even when it keeps the size and puts the mtime back (`touch -d`, `rsync -t`, `cp -p`, `tar x`), and
/// nothing can set a ctime back; a file replaced by a rename has another inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatId {
    pub ctime_ns: i64,
    pub ino: u64,
}

impl StatId {
    #[cfg(unix)]
    pub fn of(m: &std::fs::Metadata) -> StatId {
        use std::os::unix::fs::MetadataExt;
        StatId { ctime_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()), ino: m.ino() }
    }

    /// Elsewhere neither is known: size and mtime decide alone, as before.
    #[cfg(not(unix))]
    pub fn of(_m: &std::fs::Metadata) -> StatId {
        StatId::default()
    }

    /// As kept in a file record (`<ctime ns>/<inode>`).
    pub fn encode(&self) -> String {
        format!("{}/{}", self.ctime_ns, self.ino)
    }

    pub fn decode(s: &str) -> Option<StatId> {
        let (c, i) = s.split_once('/')?;
        Some(StatId { ctime_ns: c.parse().ok()?, ino: i.parse().ok()? })
    }
}

/// Identity of a file for de-duplication: (device, inode) where available — no extra system call, since no
/// link is ever followed — else the canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum FileId {
    #[cfg_attr(not(unix), allow(dead_code))]
    Inode(u64, u64),
    #[cfg_attr(unix, allow(dead_code))]
    Path(PathBuf),
}

impl FileId {
    pub(super) fn of(f: &MemoryFile, meta: &std::fs::Metadata) -> FileId {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let _ = f;
            FileId::Inode(meta.dev(), meta.ino())
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            FileId::Path(std::fs::canonicalize(&f.abs_path).unwrap_or_else(|_| f.abs_path.clone()))
        }
    }
}

pub(super) fn push(out: &mut Vec<MemoryFile>, seen: &mut FxHashSet<FileId>, f: MemoryFile, id: FileId) {
    if seen.insert(id) {
        out.push(f);
    }
}
