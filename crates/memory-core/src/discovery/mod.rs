//! Memory-file discovery: `MEMORY.md` (or `memory.md`), `memory/**/*.md` and `extraPaths`.
//! Symbolic links are skipped, tool folders are never walked, results are de-duplicated by real path.

use std::path::{Path, PathBuf};

// Fx hashing for the de-duplication set: one insert per file, on every search's freshness check.
use rustc_hash::FxHashSet;

use tracing::warn;

use crate::config::ExtraPath;
use crate::types::Source;

mod dates;
mod glob;
mod identity;
mod read;
mod walk;

pub use dates::{date_from_path, day_millis, is_evergreen, parse_day};
pub use glob::Glob;
use identity::push;
pub use identity::StatId;
pub use read::{media_mime, mtime_ms, read_text, unreadable_why, SkipReason};
#[cfg(test)]
use walk::sort_prefix;
use walk::{regular_file, walk, walk_selected, warn_link_once};

/// Names of the workspace's root memory file, preferred first: `MEMORY.md` wins over `memory.md`.
pub const ROOT_FILE_NAMES: [&str; 2] = ["MEMORY.md", "memory.md"];

/// OpenClaw's profile of the user at the workspace root: indexed, readable and evergreen like `MEMORY.md`.
pub const USER_FILE: &str = "USER.md";

/// Folders never walked.
pub const IGNORED_DIRS: &[&str] = &[".git", "node_modules", ".venv", "venv", "__pycache__", ".hg", ".svn"];

/// A memory file found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFile {
    pub source: Source,
    /// Index key: workspace-relative with `/`, or the absolute path for extra paths outside the workspace.
    pub key: String,
    pub abs_path: PathBuf,
    pub size: u64,
    pub mtime_ms: i64,
    /// Inode and status-change time, compared besides size and mtime.
    pub stat: StatId,
}

/// Where memory files are looked for.
#[derive(Debug, Clone)]
pub struct MemoryRoots {
    pub workspace: PathBuf,
    pub extra_paths: Vec<PathBuf>,
    /// The glob of each extra path (same order as `extra_paths`; `None`: every Markdown file under it).
    pub extra_patterns: Vec<Option<Glob>>,
    /// Also list images and audio under the extra paths (`memory.search.multimodal.enabled`). The default memory
    /// roots (`MEMORY.md`, `memory/`) stay Markdown only.
    pub media: bool,
}

impl MemoryRoots {
    /// `extra_paths`: plain paths (`String`) or config entries ([`ExtraPath`], `{path, pattern}`).
    pub fn new<P>(workspace: impl Into<PathBuf>, extra_paths: &[P]) -> MemoryRoots
    where
        for<'a> &'a P: Into<ExtraPath>,
    {
        let workspace = workspace.into();
        let mut paths = Vec::new();
        let mut patterns = Vec::new();
        for entry in extra_paths {
            let entry: ExtraPath = entry.into();
            let p = expand_home(entry.path().trim());
            paths.push(if p.is_absolute() { p } else { workspace.join(p) });
            patterns.push(entry.pattern().map(Glob::new));
        }
        MemoryRoots { workspace, extra_paths: paths, extra_patterns: patterns, media: false }
    }

    /// The roots a search config names: the workspace, `extraPaths` (with their patterns), media when
    /// `multimodal.enabled`. The one rule every engine and the CLI use, on the workspace of their
    /// [`AgentSpace`](crate::space::AgentSpace).
    pub fn for_search(workspace: impl Into<PathBuf>, search: &crate::config::SearchConfig) -> MemoryRoots {
        MemoryRoots::new(workspace, &search.extra_paths).with_media(search.multimodal.enabled)
    }

    /// The glob of the extra path at `index`, if it has one.
    fn pattern_of(&self, index: usize) -> Option<&Glob> {
        self.extra_patterns.get(index).and_then(Option::as_ref)
    }

    /// Is `abs` (under the extra path at `index`) one of the files its pattern selects? True without a pattern.
    pub fn extra_selects(&self, index: usize, abs: &Path) -> bool {
        match (self.pattern_of(index), self.extra_paths.get(index)) {
            (Some(glob), Some(root)) => abs.strip_prefix(root).is_ok_and(|rel| glob.matches(&path_to_key(rel))),
            _ => true,
        }
    }

    /// List images and audio under the extra paths as well.
    pub fn with_media(mut self, media: bool) -> Self {
        self.media = media;
        self
    }

    /// The absolute path of an index key (the inverse of [`key_for`](Self::key_for)).
    pub fn abs_path(&self, key: &str) -> PathBuf {
        let p = Path::new(key);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.workspace.join(key)
        }
    }

    /// The index key of an absolute path: workspace-relative when inside it.
    pub fn key_for(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.workspace) {
            Ok(rel) => path_to_key(rel),
            Err(_) => abs.to_string_lossy().replace('\\', "/"),
        }
    }

    /// Can a change at `path` (created, written, removed or renamed: a file or a folder) change what discovery
    /// lists? The watcher asks before it schedules a sync. `sessions_dir`: the transcripts folder, when the
    /// `sessions` source is on.
    pub fn is_relevant_change(&self, path: &Path, sessions_dir: Option<&Path>) -> bool {
        self.relevance(path, sessions_dir, false)
    }

    /// [`is_relevant_change`](Self::is_relevant_change) for a path known to be a file, not a folder (the change
    /// journal knows from its events): a file without an extension is then no memory file.
    pub fn is_relevant_file_change(&self, path: &Path, sessions_dir: Option<&Path>) -> bool {
        self.relevance(path, sessions_dir, true)
    }

    fn relevance(&self, path: &Path, sessions_dir: Option<&Path>, known_file: bool) -> bool {
        if let Some(dir) = sessions_dir {
            if path == dir || path.parent() == Some(dir) {
                return path == dir || crate::sessions::is_transcript_name(path);
            }
        }
        // An extra path itself (created, deleted, renamed), whatever its name.
        if self.extra_paths.iter().any(|x| x == path) {
            return true;
        }
        if matches!(self.classify(path, false), Match::File(_)) {
            return true;
        }
        // A folder created, renamed or removed brings or takes its notes; the kind of a path that is gone is
        // unknown, and a name without an extension may have been a folder.
        !known_file && path.extension().is_none() && self.classify(path, true) == Match::Folder
    }

    /// What `path` is to these roots, by its place and name alone (nothing is read; `is_dir`: the path is a
    /// folder). The one rule of what a memory file is: discovery lists, the change journal and the watcher react
    /// to, and `memory_get` reads what this answers [`Match::File`] for (discovery further needs a regular file
    /// there, and of the two root file names the one in use).
    pub fn classify(&self, path: &Path, is_dir: bool) -> Match {
        let ws = &self.workspace;
        if !is_dir && path.parent() == Some(ws.as_path()) {
            match path.file_name().and_then(|n| n.to_str()) {
                Some(n) if ROOT_FILE_NAMES.contains(&n) => return Match::File(Place::RootFile),
                Some(USER_FILE) => return Match::File(Place::Profile),
                _ => {}
            }
        }
        if let Some(m) = walked(&ws.join(MEMORY_DIR), path, is_dir, false, Place::MemoryDir) {
            return m;
        }
        for (index, extra) in self.extra_paths.iter().enumerate() {
            if path == extra {
                // An extra path that is a file is a memory file by its name; a pattern selects under a folder only.
                if is_dir {
                    return Match::Folder;
                }
                if self.pattern_of(index).is_none() && is_indexed_name(path, self.media) {
                    return Match::File(Place::Extra(index));
                }
                continue;
            }
            match walked(extra, path, is_dir, self.media, Place::Extra(index)) {
                Some(Match::File(place)) if self.extra_selects(index, path) => return Match::File(place),
                Some(Match::Folder) => return Match::Folder,
                _ => {}
            }
        }
        Match::Outside
    }
}

/// Which root holds a memory file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `MEMORY.md` or `memory.md` at the workspace root.
    RootFile,
    /// `USER.md` at the workspace root (OpenClaw's user profile).
    Profile,
    /// Under `memory/`.
    MemoryDir,
    /// At or under the configured extra path of this index.
    Extra(usize),
}

/// What a path is to the memory roots ([`MemoryRoots::classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The place and name of a memory file.
    File(Place),
    /// A folder the walk enters (`memory/`, an extra path folder, any folder under them but tool folders).
    Folder,
    /// Nothing discovery lists or walks.
    Outside,
}

/// `path` under the folder `root` the walk enters (or `root` itself as a folder): a folder, or a file with an
/// indexed name (`media`: images and audio too). `None` outside it, in a tool folder ([`IGNORED_DIRS`]), or
/// with a component that is not UTF-8 (the walk skips those: keys are text).
fn walked(root: &Path, path: &Path, is_dir: bool, media: bool, place: Place) -> Option<Match> {
    let rest = path.strip_prefix(root).ok()?;
    if rest.components().any(|c| c.as_os_str().to_str().is_none_or(|s| IGNORED_DIRS.contains(&s))) {
        return None;
    }
    if is_dir {
        Some(Match::Folder)
    } else if !rest.as_os_str().is_empty() && is_indexed_name(path, media) {
        Some(Match::File(place))
    } else {
        None
    }
}

/// The folder of notes and daily logs under the workspace.
pub const MEMORY_DIR: &str = "memory";

use crate::paths::expand_home;

mod journal;
pub use journal::{ChangeFeed, ChangeJournal, ChangedFiles};

fn path_to_key(rel: &Path) -> String {
    // A clean UTF-8 path (what a folder listing yields) is its key as it is: no per-component allocations.
    if let Some(s) = rel.to_str().filter(|s| std::path::MAIN_SEPARATOR == '/' && is_clean(s)) {
        return s.to_string();
    }
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// No empty, `.` or trailing components: `components()` would drop them, so the key must not keep them either.
fn is_clean(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('/') && !s.ends_with('/') && s.split('/').all(|c| !c.is_empty() && c != ".")
}

/// Find every memory file. Never fails: unreadable folders are logged and skipped.
pub fn discover(roots: &MemoryRoots) -> Vec<MemoryFile> {
    let mut out = Vec::new();
    let mut seen = FxHashSet::default();
    let ws = &roots.workspace;

    // MEMORY.md wins over memory.md. On case-insensitive file systems both names are the same file.
    for name in ROOT_FILE_NAMES {
        let p = ws.join(name);
        if let Some((f, id)) = regular_file(roots, &p) {
            if exact_name_exists(ws, name) {
                push(&mut out, &mut seen, f, id);
                break;
            }
        }
    }
    // OpenClaw's user profile, a memory file like MEMORY.md.
    if exact_name_exists(ws, USER_FILE) {
        if let Some((f, id)) = regular_file(roots, &ws.join(USER_FILE)) {
            push(&mut out, &mut seen, f, id);
        }
    }
    walk(roots, &ws.join(MEMORY_DIR), false, &mut out, &mut seen);
    for (index, extra) in roots.extra_paths.iter().enumerate() {
        if roots.pattern_of(index).is_some() {
            // A pattern selects files under a folder; a pattern on a file or a missing path selects nothing.
            if std::fs::symlink_metadata(extra).is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink()) {
                walk_selected(roots, extra, roots.media, Some(index), &mut out, &mut seen);
            }
            continue;
        }
        match std::fs::symlink_metadata(extra) {
            Ok(m) if m.file_type().is_symlink() => warn_link_once(extra, "extra path is a symbolic link; skipped"),
            Ok(m) if m.is_dir() => walk(roots, extra, roots.media, &mut out, &mut seen),
            Ok(_) if is_indexed_name(extra, roots.media) => {
                if let Some((f, id)) = regular_file(roots, extra) {
                    push(&mut out, &mut seen, f, id);
                }
            }
            Ok(_) => warn!(path = %extra.display(), "extra path is not a .md file; skipped"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!(path = %extra.display(), error = %e, "cannot read extra path; skipped"),
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// What [`discover`] would list at each of `paths` (files a change journal named), without walking anything
/// else: the key of each path and its listed file (`None`: nothing there is a memory file now, so a record under
/// that key is gone). A root memory file named brings both root names, since one can hide the other. `None`
/// overall when a path cannot be decided alone (a file with several hard links: de-duplication picks one).
pub fn discover_named(roots: &MemoryRoots, paths: &[PathBuf]) -> Option<Vec<(String, Option<MemoryFile>)>> {
    let ws = &roots.workspace;
    let mut asked: Vec<PathBuf> = paths.to_vec();
    if paths.iter().any(|p| roots.classify(p, false) == Match::File(Place::RootFile)) {
        asked.extend(ROOT_FILE_NAMES.iter().map(|n| ws.join(n)));
    }
    asked.sort();
    asked.dedup();
    let root = root_file_name(ws);
    let mut out = Vec::with_capacity(asked.len());
    for p in asked {
        // Keys are text: discovery lists no file whose name is not (and so no record has such a key).
        if p.file_name().and_then(|n| n.to_str()).is_none() {
            continue;
        }
        let listed = if is_listed_path(roots, root, &p) { regular_file(roots, &p) } else { None };
        #[cfg(unix)]
        if listed.is_some() && std::fs::symlink_metadata(&p).is_ok_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 1) {
            return None;
        }
        out.push((roots.key_for(&p), listed.map(|(f, _)| f)));
    }
    Some(out)
}

/// Would [`discover`] list a regular file at `p` (by its place and name; `root`: the root file name in use)?
fn is_listed_path(roots: &MemoryRoots, root: Option<&str>, p: &Path) -> bool {
    match roots.classify(p, false) {
        Match::File(Place::RootFile) => root.is_some_and(|r| p.file_name().is_some_and(|n| n == r)),
        Match::File(Place::Profile) => exact_name_exists(&roots.workspace, USER_FILE),
        Match::File(_) => true,
        Match::Folder | Match::Outside => false,
    }
}

/// Does `dir` hold memory files of its own (a root memory file, the user profile or a `memory/` folder)? The CLI
/// asks before it takes the current folder as the workspace.
pub fn holds_memory(dir: &Path) -> bool {
    let root_file = std::fs::read_dir(dir).is_ok_and(|rd| rd.flatten().any(|e| e.file_name().to_str().is_some_and(is_root_memory_name)));
    root_file || dir.join(MEMORY_DIR).is_dir()
}

/// The memory files, as tool descriptions and refusals name them.
pub const MEMORY_FILES: &str = "MEMORY.md (or memory.md), USER.md, memory/**/*.md and the configured extra paths";

/// The workspace's root memory file as the engines that index by name (QMD's root collection) must see it:
/// the first of [`ROOT_FILE_NAMES`] present by its exact directory entry name, `None` when neither is.
pub fn root_file_name(workspace: &Path) -> Option<&'static str> {
    ROOT_FILE_NAMES.into_iter().find(|n| exact_name_exists(workspace, n))
}

/// Files at the workspace root that are memory files: the root file (either name) and the user profile.
pub fn is_root_memory_name(name: &str) -> bool {
    ROOT_FILE_NAMES.contains(&name) || name == USER_FILE
}

/// True when a directory entry with exactly this name exists (so `memory.md` is not mistaken for `MEMORY.md`
/// on a case-insensitive file system).
fn exact_name_exists(dir: &Path, name: &str) -> bool {
    std::fs::read_dir(dir).map(|rd| rd.flatten().any(|e| e.file_name() == name)).unwrap_or(false)
}

fn is_markdown(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// Is a file of this name indexed where discovery walks: Markdown, and images and audio where `media` is on
/// (extra paths with multimodal). The watcher and the change journal ask the same.
pub fn is_indexed_name(p: &Path, media: bool) -> bool {
    is_markdown(p) || (media && media_mime(p).is_some())
}

#[cfg(test)]
mod tests;
