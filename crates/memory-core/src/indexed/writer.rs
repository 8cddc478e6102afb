//! Who may write the index, and when: one sync of this engine at a time (its sync lock) and one process at a time
//! (the storage's writer lock, waited for at most [`LOCK_WAIT`] by the one lock-wait policy); while a rebuild runs
//! beside the live index, searches patch the live index one at a time, with each other and with the rebuild's swap.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Mutex, MutexGuard};
use tracing::warn;

use super::patience::LockPoll;
use super::LOCK_WAIT;
use crate::error::{MemoryError, Result};
use crate::store::{IndexStorage, WriterGuard};

#[derive(Default)]
pub(super) struct Writer {
    sync: Mutex<()>,
    /// A rebuild (identity change, `--force`) of this engine is running: searches update the live index with the
    /// files that changed meanwhile instead of waiting for it.
    rebuilding: AtomicBool,
    /// Serialises those updates of the live index with each other and with the rebuild's swap.
    live_patch: Mutex<()>,
}

/// What a sync holds: this engine's sync lock and the storage's writer lock.
pub(super) struct WriteHold<'a> {
    _sync: MutexGuard<'a, ()>,
    _writer: Option<WriterGuard>,
}

/// While held, a rebuild runs ([`Writer::rebuilding`]); cleared when dropped, also when the rebuild fails half-way.
pub(super) struct RebuildRunning<'a>(&'a AtomicBool);

impl Drop for RebuildRunning<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Writer {
    /// This engine's sync lock, then the storage's writer lock for `action` (bounded: [`Writer::writer_lock`]).
    pub(super) async fn hold(&self, storage: &dyn IndexStorage, action: &str) -> Result<WriteHold<'_>> {
        let sync = self.sync.lock().await;
        let writer = Self::writer_lock(storage, action).await?;
        Ok(WriteHold { _sync: sync, _writer: writer })
    }

    /// This engine's sync lock alone (the storage's is taken by what runs under it, or not needed).
    pub(super) async fn sync_lock(&self) -> MutexGuard<'_, ()> {
        self.sync.lock().await
    }

    /// This engine's sync lock if it is free now.
    pub(super) fn try_sync_lock(&self) -> Option<MutexGuard<'_, ()>> {
        self.sync.try_lock().ok()
    }

    /// The index's writer lock, waited for at most [`LOCK_WAIT`], saying on the log (stderr) what it waits for:
    /// another process syncing or rebuilding the same index holds it.
    pub(super) async fn writer_lock(storage: &dyn IndexStorage, action: &str) -> Result<Option<WriterGuard>> {
        let mut poll = LockPoll::within(LOCK_WAIT);
        let mut said = false;
        loop {
            match storage.writer_lock(false).await {
                Err(e) if e.kind() == crate::ErrorKind::Unavailable => {
                    if poll.expired() {
                        return Err(MemoryError::Unavailable(format!(
                            "another process is updating the index {} (a sync or a rebuild); gave up the {action} after {} s, try again when it is done",
                            storage.location(),
                            LOCK_WAIT.as_secs()
                        )));
                    }
                    if !said {
                        warn!(index = %storage.location(), "waiting up to {} s for another process updating this index ({action})", LOCK_WAIT.as_secs());
                        said = true;
                    }
                    poll.pause().await;
                }
                other => return other,
            }
        }
    }

    /// Whether a rebuild of this engine is running.
    pub(super) fn rebuilding(&self) -> bool {
        self.rebuilding.load(Ordering::SeqCst)
    }

    /// Say a rebuild runs until the returned guard drops.
    pub(super) fn rebuild_running(&self) -> RebuildRunning<'_> {
        self.rebuilding.store(true, Ordering::SeqCst);
        RebuildRunning(&self.rebuilding)
    }

    /// The turn to patch the live index (a search beside a rebuild, the rebuild's swap, a reopen).
    pub(super) async fn patch(&self) -> MutexGuard<'_, ()> {
        self.live_patch.lock().await
    }
}
