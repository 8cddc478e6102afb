//! What makes two paths the same file: the device and inode a walk saw (`StatId`), and the real-path identity the
//! discovery de-duplicates by (`FileId`).

use std::path::PathBuf;

use rustc_hash::FxHashSet;

use super::MemoryFile;

/// What git compares besides size and mtime: the inode and the status-change time (ctime). A rewrite moves the
/// ctime even when it keeps the size and puts the mtime back (`touch -d`, `rsync -t`, `cp -p`, `tar x`), and
/// nothing can set a ctime back; a file replaced by a rename has another inode. On Windows the file's change time
/// stands for the ctime (in 100 ns units, only ever compared for equality) and the inode is 0.
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

    /// Elsewhere the metadata holds neither: see [`StatId::of_path`] and [`FolderStats`].
    #[cfg(not(unix))]
    pub fn of(_m: &std::fs::Metadata) -> StatId {
        StatId::default()
    }

    /// The identity of the file at `path`, whose metadata `m` is: on Unix read from `m`; on Windows its change
    /// time, read from a handle opened for its attributes only (the standard library's `Metadata` has none there).
    pub fn of_path(path: &std::path::Path, m: &std::fs::Metadata) -> StatId {
        #[cfg(windows)]
        {
            let _ = m;
            StatId { ctime_ns: windows::change_time(path).unwrap_or(0), ino: 0 }
        }
        #[cfg(not(windows))]
        {
            let _ = path;
            StatId::of(m)
        }
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

/// What a folder's listing tells of its files' identity beyond their `Metadata`: on Windows each file's change time,
/// read for the whole folder at once (one directory query, as the listing itself is one), since the standard
/// library's `Metadata` has no change time there; elsewhere nothing (the metadata holds it).
#[derive(Default)]
pub(super) struct FolderStats {
    #[cfg(windows)]
    change_times: std::collections::HashMap<std::ffi::OsString, i64>,
}

impl FolderStats {
    /// The folder `dir`'s (on Windows a folder that cannot be queried gives none: size and mtime decide alone).
    pub(super) fn of(dir: &std::path::Path) -> FolderStats {
        #[cfg(windows)]
        {
            FolderStats { change_times: windows::folder_change_times(dir) }
        }
        #[cfg(not(windows))]
        {
            let _ = dir;
            FolderStats::default()
        }
    }

    /// The identity of the listed file `name`, whose metadata `m` is.
    pub(super) fn stat(&self, name: &std::ffi::OsStr, m: &std::fs::Metadata) -> StatId {
        #[cfg(windows)]
        {
            let _ = m;
            StatId { ctime_ns: self.change_times.get(name).copied().unwrap_or(0), ino: 0 }
        }
        #[cfg(not(windows))]
        {
            let _ = name;
            StatId::of(m)
        }
    }
}

/// Windows change times (in 100 ns units, as Windows counts them: only compared for equality). Every write and
/// every attribute change moves a file's change time, setting its mtime back included, as ctime does on Unix.
#[cfg(windows)]
mod windows {
    use std::collections::HashMap;
    use std::ffi::OsString;
    use std::os::windows::ffi::OsStringExt;
    use std::os::windows::fs::OpenOptionsExt;
    use std::os::windows::io::AsRawHandle;
    use std::path::Path;

    use windows_sys::Win32::Storage::FileSystem::{
        FileBasicInfo, FileIdBothDirectoryInfo, GetFileInformationByHandleEx, FILE_BASIC_INFO, FILE_FLAG_BACKUP_SEMANTICS, FILE_ID_BOTH_DIR_INFO,
        FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
    };

    /// Opened for its attributes or listing only, sharing everything: never in the way of a writer or a rename.
    fn open(path: &Path, access: u32) -> Option<std::fs::File> {
        std::fs::OpenOptions::new()
            .access_mode(access)
            .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
            .open(path)
            .ok()
    }

    /// The change time of one file.
    pub(super) fn change_time(path: &Path) -> Option<i64> {
        let file = open(path, FILE_READ_ATTRIBUTES)?;
        let mut info = FILE_BASIC_INFO::default();
        let size = u32::try_from(std::mem::size_of::<FILE_BASIC_INFO>()).ok()?;
        // SAFETY: the handle is open for the call; `info` is a FILE_BASIC_INFO of `size` bytes, what the class writes.
        let ok = unsafe { GetFileInformationByHandleEx(file.as_raw_handle(), FileBasicInfo, (&raw mut info).cast(), size) };
        (ok != 0).then_some(info.ChangeTime)
    }

    /// The change time of each entry of the folder `dir`, by name.
    pub(super) fn folder_change_times(dir: &Path) -> HashMap<OsString, i64> {
        let mut out = HashMap::new();
        let Some(folder) = open(dir, FILE_LIST_DIRECTORY) else { return out };
        // 64 KiB, aligned for the records (each starts on an 8-byte boundary).
        let mut buf = vec![0u64; 8192];
        let len = buf.len() * 8;
        let header = std::mem::offset_of!(FILE_ID_BOTH_DIR_INFO, FileName);
        loop {
            // SAFETY: the handle is open for the call and `buf` is writable for `len` bytes. Each call goes on
            // where the last stopped; 0 when no entry is left (or the query failed: what was read stands).
            let ok = unsafe { GetFileInformationByHandleEx(folder.as_raw_handle(), FileIdBothDirectoryInfo, buf.as_mut_ptr().cast(), len as u32) };
            if ok == 0 {
                break;
            }
            let base = buf.as_ptr().cast::<u8>();
            let mut at = 0usize;
            // Each record is read only where it lies inside the buffer, its name included.
            while at.is_multiple_of(8) && at + header <= len {
                // SAFETY: `at` is 8-aligned and the record's fixed part lies inside `buf` (checked above).
                let entry = unsafe { &*base.add(at).cast::<FILE_ID_BOTH_DIR_INFO>() };
                let name_len = entry.FileNameLength as usize;
                if at + header + name_len > len {
                    break;
                }
                // SAFETY: the name's bytes lie inside `buf` (checked above); u16 alignment holds (header is even).
                let name = unsafe { std::slice::from_raw_parts(base.add(at + header).cast::<u16>(), name_len / 2) };
                out.insert(OsString::from_wide(name), entry.ChangeTime);
                match entry.NextEntryOffset as usize {
                    0 => break,
                    next => at += next,
                }
            }
        }
        out
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
