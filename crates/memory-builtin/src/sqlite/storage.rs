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

    /// The live generation (0 when there is no pointer yet).
    fn current_generation(&self) -> Result<u64> {
        match std::fs::read_to_string(self.pointer_path()) {
            Ok(s) => s.trim().parse().map_err(|_| MemoryError::CorruptIndex(format!("{} does not hold a generation number", self.pointer_path().display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(MemoryError::io_path("cannot read", &self.pointer_path(), e)),
        }
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

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
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
                // The index is derived data: keep the broken file for inspection and start afresh.
                let aside = with_suffix(&path, &format!(".corrupt-{}", memory_core::now_ms()));
                warn!(path = %path.display(), moved_to = %aside.display(), error = %e, "index file is corrupt; rebuilding it");
                std::fs::rename(&path, &aside).map_err(|err| MemoryError::io_path("cannot move corrupt index", &path, err))?;
                for suffix in ["-wal", "-shm"] {
                    let _ = std::fs::remove_file(with_suffix(&path, suffix));
                }
                Ok(Arc::new(SqliteStore::open(&path)?))
            }
            Err(e) => Err(e),
        }
    }

    async fn live_marker(&self) -> Result<Option<String>> {
        // One small file read per search: the pointer a rebuild in another process switches.
        Ok(Some(self.current_generation()?.to_string()))
    }

    async fn open_staging(&self) -> Result<Arc<dyn ChunkStore>> {
        let live = self.current_generation()?;
        self.remove_stale_generations(live, live.checked_sub(1));
        let p = self.generation_path(live + 1);
        remove_db_files(&p)?;
        Ok(Arc::new(SqliteStore::open(&p)?))
    }

    async fn promote(&self, live: Arc<dyn ChunkStore>, staging: Arc<dyn ChunkStore>) -> Result<Arc<dyn ChunkStore>> {
        let old = self.current_generation()?;
        let new = old + 1;
        // Closing checkpoints the staging WAL into its database file before it goes live.
        staging.close().await?;
        self.set_current_generation(new)?;
        live.close().await?;
        // The previous generation stays until the next rebuild: another process that read the pointer just before
        // the switch may still be opening it.
        self.remove_stale_generations(new, Some(old));
        Ok(Arc::new(SqliteStore::open(&self.generation_path(new))?))
    }

    async fn destroy(&self) -> Result<()> {
        let live = self.current_generation().unwrap_or(0);
        remove_db_files(&self.generation_path(live))?;
        remove_db_files(&self.generation_path(live + 1))?;
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
        Ok(Some(lock.into()))
    }

    fn location(&self) -> String {
        self.live_path().unwrap_or_else(|_| self.path.clone()).display().to_string()
    }
}
