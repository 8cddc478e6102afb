//! The index's single-writer lock across processes and hosts ([`memory_core::store::IndexStorage::writer_lock`]).
//!
//! Lance detects conflicting commits itself, but a sync is many commits (chunks, cache, meta) and a rebuild
//! writes a whole new generation: two writers interleaving them waste work and can race a rebuild's swap. So
//! writers take turns:
//! - local folder: an advisory file lock on `<folder>/<table>.writer.lock` (released by the OS if the
//!   process dies);
//! - `s3://`: a lease object `<prefix>/<table>.writer-lease` created with `If-None-Match: *`, renewed by a
//!   heartbeat with `If-Match`, taken over once expired (so a dead host blocks others for one lease period at
//!   most), deleted on release. See [`lease`].
//!
//! Other object stores (gs://, az://, ...) get no lock: Lance's commit conflict detection still keeps the
//! table consistent, and the writer repairs concurrent inserts of the same new files (see the store).

pub(crate) mod lease;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use memory_core::file_lock::lock_file;
use memory_core::store::WriterGuard;
use memory_core::Result;

pub(crate) use lease::LeaseLock;

/// How this index's writers are serialised.
#[allow(clippy::large_enum_variant, reason = "one per open index, never moved in a hot path")]
pub(crate) enum WriterLock {
    File(PathBuf),
    Lease(LeaseLock),
    None,
}

impl WriterLock {
    /// The lock for an index at `uri` named `table`.
    pub fn for_location(uri: &str, storage_options: &BTreeMap<String, String>, table: &str, lease_ttl: Duration) -> Result<WriterLock> {
        if !uri.contains("://") || uri.starts_with("file://") {
            let dir = uri.strip_prefix("file://").unwrap_or(uri);
            return Ok(WriterLock::File(PathBuf::from(dir).join(format!("{table}.writer.lock"))));
        }
        if let Some(rest) = uri.strip_prefix("s3://").or_else(|| uri.strip_prefix("s3a://")) {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let prefix = prefix.trim_matches('/');
            let key = if prefix.is_empty() { format!("{table}.writer-lease") } else { format!("{prefix}/{table}.writer-lease") };
            return Ok(WriterLock::Lease(LeaseLock::new(bucket, &key, storage_options, lease_ttl)?));
        }
        tracing::debug!(uri, "no writer lock for this object store; relying on Lance's commit conflict detection");
        Ok(WriterLock::None)
    }

    /// Take the lock; `wait = false` fails with `Unavailable` when another writer holds it.
    pub async fn acquire(&self, wait: bool) -> Result<Option<WriterGuard>> {
        match self {
            WriterLock::File(path) => Ok(Some(lock_file(path, wait, "another process is writing this LanceDB index").await?.into())),
            WriterLock::Lease(l) => Ok(Some(WriterGuard::new(l.acquire(wait).await?))),
            WriterLock::None => Ok(None),
        }
    }
}
