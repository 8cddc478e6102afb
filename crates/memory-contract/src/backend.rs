//! The one trait every engine implements.
#![deny(missing_docs)]

use async_trait::async_trait;

use crate::error::Result;
use crate::types::{
    Capabilities, GetRequest, GetResponse, ProgressFn, RecallRequest, RecallResponse, SearchRequest, SearchResponse, Status, SyncOptions, SyncReport,
};

/// A memory engine: answers `memory_search` and `memory_get`, keeps its index in step with the files.
///
/// Object safe: hosts hold a `Box<dyn MemoryBackend>` picked by `memory.backend`.
#[async_trait]
pub trait MemoryBackend: Send + Sync {
    /// The name this engine is registered under (`builtin`, `qmd`, `lancedb`...).
    fn name(&self) -> &str;

    /// What it can do (conformance cases and hosts read it); the fallback's while a fallback answers.
    fn capabilities(&self) -> Capabilities;

    /// Ranked snippets for a query. Never the whole file.
    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse>;

    /// Trigger recall: the curated entries whose trigger phrases match `request.message` strongly (at most 3,
    /// score >= 0.72). Engines that do not keep the annotations refuse (the default).
    async fn recall(&self, request: &RecallRequest) -> Result<RecallResponse> {
        let _ = request;
        Err(crate::MemoryError::Refused(format!(
            "the {} engine does not read trigger annotations; trigger recall needs memory.backend \"builtin\" or \"lancedb\"",
            self.name()
        )))
    }

    /// A safe read of one memory file or a line range of it.
    async fn get(&self, request: &GetRequest) -> Result<GetResponse>;

    /// Bring the index in step with the files.
    async fn sync(&self, options: SyncOptions) -> Result<SyncReport>;

    /// What is indexed, where, whether it is fresh, and what is wrong (`memory status`).
    async fn status(&self) -> Result<Status>;

    /// Delete the engine's index (never the memory files). The next sync rebuilds it.
    async fn reset(&self) -> Result<()> {
        Err(crate::MemoryError::Unavailable(format!("the {} engine cannot reset its index", self.name())))
    }

    /// How many files wait for their vectors (a first build that ran out of time, an outage): work for a sync
    /// nobody waits for, which a host without a watcher (one command at a time) starts in the background. A
    /// provider too slow for a search's wait counts (the background sync gives each call the provider's own
    /// timeout); 0 when nothing waits, when the provider cannot embed at all (a model that is away), and for
    /// engines that keep no such backlog (the default).
    async fn vectors_to_catch_up(&self) -> Result<usize> {
        Ok(0)
    }

    /// Read the whole index to find damage that the searches so far have not met (`status --deep`). Damage is
    /// repaired as a search repairs it (the index set aside and rebuilt from the files): `Some(what was done)`.
    /// `None`: nothing found, or an engine that cannot check (the default).
    async fn verify(&self) -> Result<Option<String>> {
        Ok(None)
    }

    /// A host that has its own change events (the CLI's watcher, a transcript-update hook, an editor) announces
    /// changed files, absolute or workspace-relative: the next search (or sync of every file) reads them by
    /// content even when their size and mtime look unchanged. `IndexedBackend` checks them like the files its
    /// own change journal names (alone, when the journal vouches for the rest). Engines that check every file
    /// before a search anyway may ignore it (the default).
    fn notify_changed(&self, paths: &[std::path::PathBuf]) {
        let _ = paths;
    }

    /// The changes this engine's own change journal sees, for a host that watches the files too (the CLI's
    /// watcher): one set of watches then serves the engine's freshness check and the host. `None` (the default)
    /// when the engine keeps no journal (or it cannot run here): the host watches on its own
    /// (memory-rs-core's `discovery::ChangeFeed::watch`).
    fn watch_changes(&self) -> Option<Box<dyn crate::changes::ChangeStream>> {
        None
    }

    /// Report the progress of long syncs to `f` (the CLI draws a bar with it). Engines that cannot tell
    /// progress ignore it.
    fn set_progress(&self, f: Option<ProgressFn>) {
        let _ = f;
    }

    /// Flush and release resources. Further calls may fail.
    async fn close(&self) -> Result<()>;
}
