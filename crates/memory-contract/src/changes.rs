//! Changed files as an engine hands them to its host: an engine that watches the memory files for its own
//! freshness can share those watches with a host that watches too (the CLI's `memory watch` and `memory serve`),
//! so one set of watches serves both ([`MemoryBackend::watch_changes`](crate::MemoryBackend::watch_changes)).
#![deny(missing_docs)]

use std::path::PathBuf;

use async_trait::async_trait;

/// The changes a stream answers at a time.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChangedFiles {
    /// How many changes these are (several writes to one file are several); 0 when the source does not count.
    pub events: usize,
    /// The files (or folders) that changed, absolute.
    pub paths: Vec<PathBuf>,
    /// Every change since the last answer is a change of one of `paths`: no folder was created, moved or removed,
    /// no event was lost or could not be placed, the list did not reach its cap. A check may then look at these
    /// files alone.
    pub complete: bool,
}

/// The changes one reader has not taken yet, from an engine's watches.
#[async_trait]
pub trait ChangeStream: Send {
    /// The changes since the last call, once there are any. `None` when the watches failed for good: the reader
    /// starts watches of its own if it still wants them.
    async fn next(&mut self) -> Option<ChangedFiles>;
}
