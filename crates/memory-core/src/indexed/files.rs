//! What the engine indexes: the memory files under its roots and, with the `sessions` source, the transcripts of
//! its folder; how a path on disk maps to its index key. Discovery, the freshness check, `explain`, `get` and
//! status ask this part instead of each reading the roots and the sources.

use std::path::{Path, PathBuf};

use tracing::warn;

use crate::config::SearchConfig;
use crate::discovery::{discover, MemoryFile, MemoryRoots};
use crate::sessions;
use crate::types::Source;

use super::plan::FileKey;

/// The engine's files: its roots, which sources are on, the transcripts folder.
pub(super) struct Files {
    roots: MemoryRoots,
    memory: bool,
    sessions: bool,
    sessions_dir: Option<PathBuf>,
}

impl Files {
    /// The files `search` configures under `roots` (transcripts once a folder is given: [`Files::set_sessions_dir`]).
    pub(super) fn new(roots: MemoryRoots, search: &SearchConfig) -> Files {
        Files { roots, memory: search.sources.contains(&Source::Memory), sessions: search.sources.contains(&Source::Sessions), sessions_dir: None }
    }

    /// Read transcripts from `dir` (when the `sessions` source is on).
    pub(super) fn set_sessions_dir(&mut self, dir: PathBuf) {
        self.sessions_dir = Some(dir);
    }

    pub(super) fn roots(&self) -> &MemoryRoots {
        &self.roots
    }

    /// The transcripts folder, when one was given.
    pub(super) fn sessions_dir(&self) -> Option<&Path> {
        self.sessions_dir.as_deref()
    }

    /// Every file of every configured source.
    pub(super) fn all(&self) -> Vec<MemoryFile> {
        self.discovery()()
    }

    /// Discovery of every source as a job that owns what it needs, so that it can run on another thread while
    /// the caller reads the index's records.
    pub(super) fn discovery(&self) -> impl FnOnce() -> Vec<MemoryFile> + Send + 'static {
        let memory = self.memory.then(|| self.roots.clone());
        let sessions = self.sessions.then(|| self.sessions_dir.clone());
        move || {
            let mut files = memory.as_ref().map(discover).unwrap_or_default();
            match sessions {
                Some(Some(dir)) => files.extend(sessions::discover(&dir)),
                Some(None) => warn!("the sessions source is on but this engine has no transcripts folder"),
                None => {}
            }
            files
        }
    }

    /// The index key of a changed path (a host's announcement, the change journal's event): transcripts by their
    /// key in the sessions source.
    pub(super) fn key_of_changed(&self, abs: &Path) -> String {
        if let (Some(dir), Some(name)) = (&self.sessions_dir, abs.file_name()) {
            if abs.parent() == Some(dir.as_path()) {
                return sessions::transcript_key(&name.to_string_lossy());
            }
        }
        self.roots.key_for(abs)
    }

    /// What discovery lists at `paths` (those of them on disk), and the keys of all of them; `None` when they
    /// cannot be decided alone (the caller then lists every file).
    pub(super) fn named(&self, paths: &[PathBuf]) -> Option<(Vec<MemoryFile>, Vec<FileKey>)> {
        let (mut files, mut keys) = (Vec::new(), Vec::new());
        if self.memory {
            for (key, file) in crate::discovery::discover_named(&self.roots, paths)? {
                keys.push((Source::Memory, key));
                files.extend(file);
            }
        }
        if let (true, Some(dir)) = (self.sessions, &self.sessions_dir) {
            for p in paths.iter().filter(|p| p.parent() == Some(dir.as_path()) && sessions::is_transcript_name(p)) {
                let Some(name) = p.file_name().and_then(|n| n.to_str()) else { continue };
                keys.push((Source::Sessions, sessions::transcript_key(name)));
                files.extend(sessions::transcript_file(p));
            }
        }
        Some((files, keys))
    }
}
