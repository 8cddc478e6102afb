//! Advisory file lock beside a local index (the OS releases it when the process dies).

use std::fs::File;
use std::path::PathBuf;

use memory_core::{MemoryError, Result};

/// Lock `path` (created if missing); the returned file holds the lock until dropped.
pub(super) async fn lock(path: PathBuf, wait: bool) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| MemoryError::io_path("cannot create index folder", dir, e))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| MemoryError::io_path("cannot open lock file", &path, e))?;
    if wait {
        // Blocking: wait on a blocking thread, not on a runtime worker.
        tokio::task::spawn_blocking(move || file.lock().map(|()| file))
            .await
            .map_err(|e| MemoryError::Internal(format!("lock task failed: {e}")))?
            .map_err(|e| MemoryError::io_path("cannot lock", &path, e))
    } else {
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(MemoryError::Unavailable("another process is writing this LanceDB index".into()))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(MemoryError::io_path("cannot lock", &path, e)),
        }
    }
}
