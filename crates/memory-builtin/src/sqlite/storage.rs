//! Where the index file lives and how a rebuilt index replaces it: the rebuild is written to
//! `<index>.rebuild` and renamed over the live file only when complete.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::store::{ChunkStore, IndexStorage};
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

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn staging_path(&self) -> PathBuf {
        with_suffix(&self.path, ".rebuild")
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
        match SqliteStore::open(&self.path) {
            Ok(s) => Ok(Arc::new(s)),
            Err(e) if e.kind() == ErrorKind::CorruptIndex => {
                // The index is derived data: keep the broken file for inspection and start afresh.
                let aside = with_suffix(&self.path, &format!(".corrupt-{}", memory_core::now_ms()));
                warn!(path = %self.path.display(), moved_to = %aside.display(), error = %e, "index file is corrupt; rebuilding it");
                std::fs::rename(&self.path, &aside).map_err(|err| MemoryError::io_path("cannot move corrupt index", &self.path, err))?;
                for suffix in ["-wal", "-shm"] {
                    let _ = std::fs::remove_file(with_suffix(&self.path, suffix));
                }
                Ok(Arc::new(SqliteStore::open(&self.path)?))
            }
            Err(e) => Err(e),
        }
    }

    async fn open_staging(&self) -> Result<Arc<dyn ChunkStore>> {
        let p = self.staging_path();
        remove_db_files(&p)?;
        Ok(Arc::new(SqliteStore::open(&p)?))
    }

    async fn promote(&self, live: Arc<dyn ChunkStore>, staging: Arc<dyn ChunkStore>) -> Result<Arc<dyn ChunkStore>> {
        // Closing checkpoints each WAL into its main file, so a plain rename moves the whole database.
        staging.close().await?;
        live.close().await?;
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(with_suffix(&self.path, suffix));
        }
        let from = self.staging_path();
        std::fs::rename(&from, &self.path).map_err(|e| MemoryError::io_path("cannot swap in the rebuilt index", &from, e))?;
        Ok(Arc::new(SqliteStore::open(&self.path)?))
    }

    async fn destroy(&self) -> Result<()> {
        remove_db_files(&self.path)?;
        remove_db_files(&self.staging_path())
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}
