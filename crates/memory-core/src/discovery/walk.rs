//! The walk over the memory folders: sorted listings, links skipped (and said once), tool folders never entered,
//! files stat'ed in parallel on large folders, each file classified by the roots.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashSet;
use tracing::warn;

use super::identity::{push, FileId, FolderStats};
use super::read::mtime_ms;
use super::{is_clean, is_indexed_name, MemoryFile, MemoryRoots, StatId, IGNORED_DIRS};
use crate::types::Source;

/// Warn about a link discovery skips, once per path and process: discovery runs several times per command
/// (`status` walked the files three times, each repeating every warning) and on every sync of a server.
pub(super) fn warn_link_once(path: &Path, what: &str) {
    static WARNED: std::sync::Mutex<Option<FxHashSet<PathBuf>>> = std::sync::Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if warned.get_or_insert_with(FxHashSet::default).insert(path.to_path_buf()) {
        warn!(path = %path.display(), "{what}");
    }
}

/// A regular, non-link file, with its size and mtime (and its identity, for de-duplication).
pub(super) fn regular_file(roots: &MemoryRoots, p: &Path) -> Option<(MemoryFile, FileId)> {
    let m = std::fs::symlink_metadata(p).ok()?;
    if m.file_type().is_symlink() {
        warn_link_once(p, "symbolic link skipped");
        return None;
    }
    if !m.is_file() {
        return None;
    }
    let f = MemoryFile {
        source: Source::Memory,
        key: roots.key_for(p),
        abs_path: p.to_path_buf(),
        size: m.len(),
        mtime_ms: mtime_ms(&m),
        stat: StatId::of_path(p, &m),
    };
    let id = FileId::of(&f, &m);
    Some((f, id))
}

pub(super) fn walk(roots: &MemoryRoots, dir: &Path, media: bool, out: &mut Vec<MemoryFile>, seen: &mut FxHashSet<FileId>) {
    walk_selected(roots, dir, media, None, out, seen);
}

/// [`walk`], keeping only the files the pattern of extra path `extra` selects.
pub(super) fn walk_selected(
    roots: &MemoryRoots,
    dir: &Path,
    media: bool,
    extra: Option<usize>,
    out: &mut Vec<MemoryFile>,
    seen: &mut FxHashSet<FileId>,
) {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            warn!(path = %dir.display(), error = %e, "cannot list folder; skipped");
            return;
        }
    };
    if let Ok(m) = std::fs::symlink_metadata(dir) {
        if m.file_type().is_symlink() {
            warn_link_once(dir, "symbolic link skipped");
            return;
        }
    }
    let folder = FolderStats::of(dir);
    // The key of each file is the folder's key and its name, when both are plain (no path parsing per file).
    let dir_key = Some(roots.key_for(dir)).filter(|k| is_clean(k) && !Path::new(k).is_absolute());
    // Names are fetched once for the sort (`sort_by_key` would allocate one per comparison), with their first
    // bytes as one integer: dated notes share long prefixes, and the sort was a memcmp over them per comparison.
    let mut entries: Vec<(u128, std::ffi::OsString, std::fs::DirEntry)> = rd
        .flatten()
        .map(|e| {
            let name = e.file_name();
            (sort_prefix(&name), name, e)
        })
        .collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    // Files are stat-ed after the listing, on every core for a large folder: a search checks every memory file
    // before it answers, and the stats are most of that check's time.
    let mut files: Vec<(std::ffi::OsString, std::fs::DirEntry)> = Vec::new();
    for (_, name, entry) in entries {
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_symlink() {
            warn_link_once(&entry.path(), "symbolic link skipped");
            continue;
        }
        if name.to_str().is_none() && (ft.is_dir() || is_indexed_name(Path::new(&name), media)) {
            // Keys are text: a lossy one could name another file (`\xff.md` and a real `\u{fffd}.md`), and two
            // files under one key never settle. Skipped, and said.
            warn!(path = ?entry.path(), "name is not UTF-8; skipped (rename it to index it)");
            continue;
        }
        if ft.is_dir() {
            if IGNORED_DIRS.iter().any(|d| name == *d) {
                continue;
            }
            stat_all(roots, (dir, &folder), dir_key.as_deref(), std::mem::take(&mut files), out, seen);
            walk_selected(roots, &entry.path(), media, extra, out, seen);
        } else if ft.is_file() {
            let path = Path::new(&name);
            if is_indexed_name(path, media) && extra.is_none_or(|i| roots.extra_selects(i, &entry.path())) {
                files.push((name, entry));
            }
        }
    }
    stat_all(roots, (dir, &folder), dir_key.as_deref(), files, out, seen);
}

/// The first 16 bytes of a name, big-endian and zero-padded: ordered as the names are wherever they differ in those
/// bytes (no file name holds a NUL, so a shorter name's padding sorts it first, as a prefix sorts first).
pub(crate) fn sort_prefix(name: &std::ffi::OsStr) -> u128 {
    let bytes = name.as_encoded_bytes();
    let mut head = [0u8; 16];
    let n = bytes.len().min(16);
    head[..n].copy_from_slice(&bytes[..n]);
    u128::from_be_bytes(head)
}

/// Folders with more files than this are stat-ed on two threads.
pub(super) const PARALLEL_STAT_MIN: usize = 512;

/// Listed entries with the names they were sorted by.
pub(super) type Listed = Vec<(std::ffi::OsString, std::fs::DirEntry)>;

/// Stats the listed `files` of the folder `dir` (with what its listing told of them, [`FolderStats`]).
pub(super) fn stat_all(
    roots: &MemoryRoots,
    (dir, folder): (&Path, &FolderStats),
    dir_key: Option<&str>,
    files: Listed,
    out: &mut Vec<MemoryFile>,
    seen: &mut FxHashSet<FileId>,
) {
    let stat = |part: Listed| -> Vec<(MemoryFile, FileId)> {
        let mut found = Vec::with_capacity(part.len());
        found.extend(part.into_iter().filter_map(|(name, e)| listed_file(roots, (dir, folder), dir_key, &name, e)));
        found
    };
    let found = if files.len() < PARALLEL_STAT_MIN {
        stat(files)
    } else {
        let mut first = files;
        let second = first.split_off(first.len() / 2);
        std::thread::scope(|s| {
            let other = s.spawn(|| stat(second));
            let mut a = stat(first);
            a.extend(other.join().unwrap_or_default());
            a
        })
    };
    for (f, id) in found {
        push(out, seen, f, id);
    }
}

/// A listed entry that is a regular file. Its metadata comes from the open folder (`statx` on the folder's
/// descriptor and the name, never following a link) rather than a walk of the whole path for each file.
pub(super) fn listed_file(
    roots: &MemoryRoots,
    (dir, folder): (&Path, &FolderStats),
    dir_key: Option<&str>,
    name: &std::ffi::OsStr,
    entry: std::fs::DirEntry,
) -> Option<(MemoryFile, FileId)> {
    let m = entry.metadata().ok()?;
    if m.file_type().is_symlink() {
        warn_link_once(&entry.path(), "symbolic link skipped");
        return None;
    }
    if !m.is_file() {
        return None;
    }
    // Built at their final size: a search checks every memory file, and `join` / `format!` grew each string
    // once more (a tenth of the check's instructions at 20,000 notes).
    let mut p = PathBuf::with_capacity(dir.as_os_str().len() + 1 + name.len());
    p.push(dir);
    p.push(name);
    // The folder's key is already `/`-joined; a listed file's name is one component.
    let key = match (dir_key, name.to_str()) {
        (Some(dir), Some(name)) => {
            let mut k = String::with_capacity(dir.len() + 1 + name.len());
            k.push_str(dir);
            k.push('/');
            k.push_str(name);
            k
        }
        _ => roots.key_for(&p),
    };
    let f = MemoryFile { source: Source::Memory, key, abs_path: p, size: m.len(), mtime_ms: mtime_ms(&m), stat: folder.stat(name, &m) };
    // Only the file's identity is kept of its metadata (a whole `Metadata` is ~170 bytes per file).
    let id = FileId::of(&f, &m);
    Some((f, id))
}
