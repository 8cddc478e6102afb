//! Where the index file lives and how a rebuilt index replaces it.
//!
//! Indexes are generations: generation 0 is `<index>`, generation N is `<index>.g<N>`, and the small pointer
//! file `<index>.current` names the live one. A rebuild writes the next generation and, when complete, replaces
//! the pointer atomically (write + rename) and deletes the old generation. A database file is never renamed over
//! another: a process still reading the old generation keeps a consistent view, and its WAL files, named after
//! its own generation, can never be mistaken for the new index's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::file_lock::lock_file;
use memory_core::store::{ChunkStore, IndexStorage, WriterGuard};
use memory_core::{ErrorKind, MemoryError, Result};
use tracing::warn;

use super::SqliteStore;

pub struct SqliteStorage {
    path: PathBuf,
}

/// How long after a rebuild's switch the generation before it is kept for processes that read the pointer just
/// before the switch (they open it within milliseconds; a process that has it open keeps reading it after it is
/// removed, and follows the pointer at its next search).
const PREVIOUS_GENERATION_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

impl SqliteStorage {
    pub fn new(path: impl Into<PathBuf>) -> SqliteStorage {
        SqliteStorage { path: path.into() }
    }

    /// The base path (generation 0).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn pointer_path(&self) -> PathBuf {
        with_suffix(&self.path, ".current")
    }

    fn generation_path(&self, generation: u64) -> PathBuf {
        if generation == 0 {
            self.path.clone()
        } else {
            with_suffix(&self.path, &format!(".g{generation}"))
        }
    }

    /// The live generation (0 when there is no pointer yet). A damaged pointer is repaired ([`Self::repair_pointer`]).
    fn current_generation(&self) -> Result<u64> {
        match std::fs::read_to_string(self.pointer_path()) {
            Ok(s) => match s.trim().parse() {
                Ok(g) => Ok(g),
                Err(_) => self.repair_pointer(),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            // Not text at all: as damaged as garbage text.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => self.repair_pointer(),
            Err(e) => Err(MemoryError::io_path("cannot read", &self.pointer_path(), e)),
        }
    }

    /// The pointer names no generation (emptied or overwritten by a disk fault: the switch itself is atomic).
    /// Point at the newest complete generation on disk (one with an identity), else the newest at all (the next
    /// sync completes it), else generation 0; the damaged pointer is kept beside for inspection. Without this
    /// every command, `reset` and `index --force` included, would fail on it for ever.
    fn repair_pointer(&self) -> Result<u64> {
        let pointer = self.pointer_path();
        let mut on_disk = self.generations_on_disk();
        on_disk.sort_unstable_by(|a, b| b.cmp(a));
        let chosen = on_disk.iter().copied().find(|g| has_identity(&self.generation_path(*g))).or(on_disk.first().copied()).unwrap_or(0);
        let aside = with_suffix(&pointer, &format!(".corrupt-{}", memory_core::now_ms()));
        warn!(pointer = %pointer.display(), moved_to = %aside.display(), generation = chosen, "index pointer is damaged; pointing at the newest index on disk");
        if let Err(e) = std::fs::rename(&pointer, &aside) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(MemoryError::io_path("cannot move the damaged index pointer", &pointer, e));
            }
        }
        self.set_current_generation(chosen)?;
        Ok(chosen)
    }

    /// Generations whose database file exists.
    fn generations_on_disk(&self) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        if self.path.exists() {
            out.push(0);
        }
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else { return out };
        let prefix = format!("{}.g", name.to_string_lossy());
        let Ok(rd) = std::fs::read_dir(dir) else { return out };
        for e in rd.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if let Some(g) = file.strip_prefix(&prefix).and_then(|rest| rest.parse::<u64>().ok()) {
                out.push(g);
            }
        }
        out
    }

    /// Atomically point at `generation`.
    fn set_current_generation(&self, generation: u64) -> Result<()> {
        let tmp = with_suffix(&self.path, ".current.tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(generation.to_string().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.pointer_path())
        };
        write().map_err(|e| MemoryError::io_path("cannot switch the live index", &self.pointer_path(), e))
    }

    /// The live database file.
    pub fn live_path(&self) -> Result<PathBuf> {
        Ok(self.generation_path(self.current_generation()?))
    }

    /// Delete generation files other than `keep` and `also` (left behind by earlier rebuilds, a crash between
    /// the pointer switch and the clean-up, or an interrupted rebuild).
    fn remove_stale_generations(&self, keep: u64, also: Option<u64>) {
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else { return };
        let prefix = format!("{}.g", name.to_string_lossy());
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let Some(rest) = file.strip_prefix(&prefix) else { continue };
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let companion = &rest[digits.len()..];
            if let (Ok(g), true) = (digits.parse::<u64>(), matches!(companion, "" | "-wal" | "-shm" | "-journal")) {
                if g != keep && Some(g) != also {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        if keep != 0 && also != Some(0) {
            let _ = remove_db_files(&self.path);
        }
    }
}

impl SqliteStorage {
    /// Damaged files set aside ([`set_aside`], a repaired pointer): `reset` deletes them with the index.
    fn remove_set_aside(&self) {
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else { return };
        let name = name.to_string_lossy().into_owned();
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if file.starts_with(&name) && file.contains(".corrupt-") {
                if let Err(err) = std::fs::remove_file(e.path()) {
                    warn!(path = %e.path().display(), error = %err, "cannot remove a damaged index file set aside");
                }
            }
        }
    }
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A damaged index file: the index is derived data, so keep the broken file for inspection (`<file>.corrupt-<ms>`)
/// and let the caller start afresh. One rule for every way damage is found (at open, or by a later read).
fn set_aside(path: &Path, why: &MemoryError) -> Result<()> {
    let aside = with_suffix(path, &format!(".corrupt-{}", memory_core::now_ms()));
    warn!(path = %path.display(), moved_to = %aside.display(), error = %why, "index file is corrupt; rebuilding it");
    match std::fs::rename(path, &aside) {
        Ok(()) => {}
        // Another process set it aside first.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(MemoryError::io_path("cannot move corrupt index", path, e)),
    }
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(with_suffix(path, suffix));
    }
    Ok(())
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}/{}", m.dev(), m.ino())
}

/// Without inodes, a reset is told by the file's creation time where the platform keeps one.
#[cfg(not(unix))]
fn file_id(m: &std::fs::Metadata) -> String {
    m.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos().to_string()).unwrap_or_default()
}

/// Whether the database at `path` holds an index identity (a completed sync), read without writing anything.
fn has_identity(path: &Path) -> bool {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    rusqlite::Connection::open_with_flags(path, flags)
        .and_then(|c| c.query_row("SELECT count(*) FROM meta WHERE key = 'identity'", [], |r| r.get::<_, i64>(0)))
        .is_ok_and(|n| n > 0)
}

/// The file is open elsewhere and the system will not delete it (Windows' sharing and lock violations); never
/// on Unix, where an open file can be deleted.
fn in_use(e: &MemoryError) -> bool {
    cfg!(windows) && matches!(e, MemoryError::Io { source, .. } if matches!(source.raw_os_error(), Some(32 | 33)))
}

/// Remove a database file and its WAL/SHM companions.
fn remove_db_files(p: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let f = with_suffix(p, suffix);
        match std::fs::remove_file(&f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(MemoryError::io_path("cannot remove", &f, e)),
        }
    }
    Ok(())
}

#[async_trait]
impl IndexStorage for SqliteStorage {
    async fn open_live(&self) -> Result<Arc<dyn ChunkStore>> {
        // A rebuild in another process may switch the pointer between our read and our open: re-read it until
        // the generation it names exists (generation 0 is created on first use).
        let mut path = self.live_path()?;
        for _ in 0..5 {
            if path == self.path || path.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            path = self.live_path()?;
        }
        match SqliteStore::open(&path) {
            Ok(s) => Ok(Arc::new(s)),
            Err(e) if e.kind() == ErrorKind::CorruptIndex => {
                set_aside(&path, &e)?;
                Ok(Arc::new(SqliteStore::open(&path)?))
            }
            Err(e) => Err(e),
        }
    }

    async fn set_aside_live(&self, why: &MemoryError) -> Result<bool> {
        set_aside(&self.live_path()?, why)?;
        Ok(true)
    }

    async fn live_marker(&self) -> Result<Option<String>> {
        // One small file read and a stat per search: the pointer a rebuild in another process switches, and the
        // live file itself, which a `reset` in another process deletes and creates anew under the same name (the
        // inode tells them apart: an open file's inode is not reused).
        let generation = self.current_generation()?;
        let file = match std::fs::metadata(self.generation_path(generation)) {
            Ok(m) => file_id(&m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "none".to_string(),
            Err(e) => return Err(MemoryError::io_path("cannot read", &self.generation_path(generation), e)),
        };
        Ok(Some(format!("{generation}:{file}")))
    }

    async fn open_staging(&self) -> Result<Arc<dyn ChunkStore>> {
        let live = self.current_generation()?;
        self.remove_stale_generations(live, live.checked_sub(1));
        let p = self.generation_path(live + 1);
        remove_db_files(&p)?;
        match SqliteStore::open(&p) {
            Ok(s) => Ok(Arc::new(s)),
            Err(e) => {
                // Created but not usable (a full disk): nothing of it stays.
                let _ = remove_db_files(&p);
                Err(e)
            }
        }
    }

    async fn discard_staging(&self, staging: Arc<dyn ChunkStore>) -> Result<()> {
        staging.close().await?;
        remove_db_files(&self.generation_path(self.current_generation()? + 1))
    }

    async fn promote(&self, live: Arc<dyn ChunkStore>, staging: Arc<dyn ChunkStore>) -> Result<Arc<dyn ChunkStore>> {
        let old = self.current_generation()?;
        let new = old + 1;
        // Closing checkpoints the staging WAL into its database file before it goes live.
        staging.close().await?;
        if let Err(e) = self.set_current_generation(new) {
            // Still the old generation's index: the new one goes, or it keeps the (likely full) disk full.
            let _ = std::fs::remove_file(with_suffix(&self.path, ".current.tmp"));
            if let Err(rm) = remove_db_files(&self.generation_path(new)) {
                warn!(error = %rm, "the unpromoted rebuild could not be removed");
            }
            return Err(e);
        }
        live.close().await?;
        // The previous generation stays until the next rebuild: another process that read the pointer just before
        // the switch may still be opening it.
        self.remove_stale_generations(new, Some(old));
        Ok(Arc::new(SqliteStore::open(&self.generation_path(new))?))
    }

    async fn destroy(&self) -> Result<()> {
        let live = self.current_generation().unwrap_or(0);
        self.remove_set_aside();
        if let Err(e) = remove_db_files(&self.generation_path(live)).and_then(|()| remove_db_files(&self.generation_path(live + 1))) {
            if !in_use(&e) {
                return Err(e);
            }
            // Windows deletes no file that a handle has open (this engine's other handles, a `memory serve`
            // reading the index): the index moves to a new, empty generation instead, which every later open reads,
            // and the old files go when a later writer finds them unused.
            warn!(error = %e, "the index's files are open elsewhere; it starts over in a new, empty generation");
            return self.set_current_generation(live + 2);
        }
        self.remove_stale_generations(0, None);
        remove_db_files(&self.path)?;
        match std::fs::remove_file(self.pointer_path()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(MemoryError::io_path("cannot remove", &self.pointer_path(), e)),
        }
    }

    async fn writer_lock(&self, wait: bool) -> Result<Option<WriterGuard>> {
        // An advisory lock beside the index: two processes syncing the same index (or rebuilding it into the
        // same staging file) take turns instead of clobbering each other. Searches never take it.
        let lock = lock_file(&with_suffix(&self.path, ".lock"), wait, "another process is syncing this index").await?;
        // Whoever rebuilds holds this lock from its staging generation's creation to the switch: holding it, a
        // generation above the live one is what an interrupted rebuild (a killed `index --force`) left, which
        // would keep its space until the next rebuild. The one before the live one is kept for a while after the
        // switch (a process that read the pointer just before it may still be opening it); later it is only
        // space: a rebuild for a new model left the old index beside the new one until the next rebuild.
        if let Ok(live) = self.current_generation() {
            let switched_long_ago = std::fs::metadata(self.pointer_path())
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|ago| ago >= PREVIOUS_GENERATION_GRACE));
            let previous = if switched_long_ago { None } else { live.checked_sub(1) };
            self.remove_stale_generations(live, previous);
        }
        Ok(Some(lock.into()))
    }

    fn location(&self) -> String {
        self.live_path().unwrap_or_else(|_| self.path.clone()).display().to_string()
    }
}
