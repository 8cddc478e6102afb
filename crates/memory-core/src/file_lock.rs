//! An advisory lock on a file beside an index, across processes (the OS releases it when the process dies).
//! The stores' writer locks ([`crate::store::IndexStorage::writer_lock`]) on local files are this one lock.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{MemoryError, Result};

/// Holds the lock until dropped.
#[derive(Debug)]
pub struct FileLockGuard {
    /// The lock lives as long as this open file.
    _file: File,
    path: PathBuf,
}

impl FileLockGuard {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Lock `path` (created, with its folder, if missing). With `wait`, wait for another holder to release it, on a
/// blocking thread (never on a runtime worker, where it would stall every other task); without, fail at once
/// with `Unavailable(busy)`.
pub async fn lock_file(path: &Path, wait: bool, busy: &str) -> Result<FileLockGuard> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| MemoryError::io_path("cannot create index folder", dir, e))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| MemoryError::io_path("cannot open lock file", path, e))?;
    let path = path.to_path_buf();
    if wait {
        return tokio::task::spawn_blocking(move || match file.lock() {
            Ok(()) => Ok(FileLockGuard { _file: file, path }),
            Err(e) => Err(MemoryError::io_path("cannot lock", &path, e)),
        })
        .await
        .map_err(|e| MemoryError::Internal(format!("lock task failed: {e}")))?;
    }
    match file.try_lock() {
        Ok(()) => Ok(FileLockGuard { _file: file, path }),
        Err(std::fs::TryLockError::WouldBlock) => Err(MemoryError::Unavailable(busy.to_string())),
        Err(std::fs::TryLockError::Error(e)) => Err(MemoryError::io_path("cannot lock", &path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[tokio::test]
    async fn one_holder_at_a_time_and_a_waiter_gets_it_on_release() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/index.lock");
        let held = lock_file(&p, false, "busy").await.unwrap();
        assert_eq!(held.path(), p);
        let e = lock_file(&p, false, "busy").await.unwrap_err();
        assert_eq!((e.kind(), e.to_string().contains("busy")), (ErrorKind::Unavailable, true), "{e}");
        let waiter = tokio::spawn({
            let p = p.clone();
            async move { lock_file(&p, true, "busy").await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the waiter got a held lock");
        drop(held);
        let second = tokio::time::timeout(std::time::Duration::from_secs(10), waiter).await.unwrap().unwrap().unwrap();
        assert!(lock_file(&p, false, "busy").await.is_err());
        drop(second);
        lock_file(&p, false, "busy").await.unwrap();
    }
}
