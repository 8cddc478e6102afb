//! [`IndexedBackend`]: a complete engine on top of any [`ChunkStore`]. It discovers memory files, syncs them
//! incrementally (size + mtime, then hash), chunks and embeds what changed (through the embedding cache),
//! rebuilds beside the live index when the identity changes, and ranks with the shared pipeline.

use crate::locks::RwLockExt;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use tracing::{debug, info, warn};

use crate::access;
use crate::analysis::{document_terms_joined, expansion_terms, heading_terms, query_terms};
use crate::backend::MemoryBackend;
use crate::chunking::headings::headings_above;
use crate::chunking::{chunk_id, chunk_text, importance};
use crate::config::Config;
use crate::discovery::{media_mime, read_text, MemoryFile, MemoryRoots};
use crate::embedding::{run_batch, BatchItem, EmbeddingProvider, EmbeddingPurpose, MediaInput};
use crate::error::{MemoryError, Result};
use crate::identity::IndexIdentity;
use crate::ranking::{exact_path_tier, merge, RankingOptions};
use crate::sessions::{self, SessionState};
use crate::store::{Candidate, ChunkRecord, ChunkStore, EmbeddingCacheKey, FileRecord, FileState, IndexStorage, KeywordQuery, Scope, SyncBatch};
use crate::types::*;

const META_LAST_SYNC: &str = "lastSyncMs";
/// Why the last embedding call failed and when (`<ms> <why>`): why files wait for their vectors, for `status`.
const META_LAST_EMBED_FAILURE: &str = "lastEmbedFailure";
/// How long a sync, a reset or a search waits for another process's (or another task's) hold on the index
/// before it gives up with `Unavailable`: a command never hangs behind a long rebuild elsewhere.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(5);

mod embed;
mod explain;
mod files;
mod freshness;
mod live;
mod open;
pub mod patience;
mod plan;
mod prepare;
pub mod recall;
mod search;
mod status;
mod sync;
mod unrelated;
mod writer;

use prepare::Prepared;
pub(crate) use status::skipped_files;
use sync::SyncScope;

use plan::{indexed_state, plan_sync, stale_for_search, FileKey, Staleness};

/// Which store a cached fact was read from: a swapped-in rebuild is another handle, so facts cached for the old
/// one (its provider fingerprint, its unrelated-text probes) are read again.
fn store_handle(store: &Arc<dyn ChunkStore>) -> usize {
    Arc::as_ptr(store) as *const () as usize
}

/// Store layout version, part of the identity: an index of another layout is rebuilt (its embeddings reused).
/// 2: the builtin store's keyword index reads the chunks' terms (its totals stay those of the chunks it holds).
pub const SCHEMA_VERSION: u32 = 2;

pub use crate::types::{ProgressFn, SyncProgress};

pub struct IndexedBackend {
    name: String,
    config: Arc<Config>,
    /// What it indexes: the memory roots, the sources, the transcripts folder.
    files: files::Files,
    storage: Arc<dyn IndexStorage>,
    /// The live index and what is known about it.
    live: live::LiveIndex,
    embedder: Option<Arc<dyn EmbeddingProvider>>,
    /// Who may write the index, and when.
    writer: writer::Writer,
    /// What changed since the last check: the change journal of a long-lived engine (a search skips the stat of
    /// every file when nothing changed) and the files a check must read by content.
    freshness: freshness::Freshness,
    progress: RwLock<Option<ProgressFn>>,
    /// Where submitted provider batch jobs are recorded (`remote.batch`), so an interrupted backfill resumes.
    batch_state_file: Option<PathBuf>,
    /// The second stage of a search (`memory.search.query.rerank`).
    reranker: Option<Arc<dyn crate::rerank::Reranker>>,
    /// How long calls someone waits for wait for the embedding provider ([`patience`]).
    patience: patience::Patience,
}

/// Vectors a batch run produced for this sync, and chunks whose jobs are still running (`remote.batch.wait` off).
#[derive(Default)]
struct BatchVectors {
    vectors: HashMap<String, Vec<f32>>,
    pending: HashSet<String>,
}

impl IndexedBackend {
    /// The memory roots it indexes.
    pub fn roots(&self) -> &MemoryRoots {
        self.files.roots()
    }

    fn store(&self) -> Arc<dyn ChunkStore> {
        self.live.store()
    }

    /// Make `store` the live handle: what was cached about the old one is forgotten.
    fn set_live(&self, store: Arc<dyn ChunkStore>, marker: Option<String>) {
        self.live.swap(store, marker);
        // Another index: what the last check found in step was the old one.
        self.freshness.forget();
    }

    /// Reopen the live store when another process swapped in another one (a rebuild, a reset) since this
    /// engine opened it.
    async fn follow_live(&self) -> Result<()> {
        let marker = self.storage.live_marker().await?;
        if marker.is_none() || self.live.opened_at(&marker) {
            return Ok(());
        }
        let _patch = self.writer.patch().await;
        if self.live.opened_at(&marker) || self.writer.rebuilding() {
            // Another task of this engine reopened it meanwhile, or this engine's own rebuild is swapping it in.
            return Ok(());
        }
        debug!(marker = ?marker, "another process swapped in a new index; reopening it");
        let store = self.storage.open_live().await?;
        self.set_live(store, marker);
        Ok(())
    }

    fn model_name(&self) -> String {
        self.embedder.as_ref().map(|e| e.model().to_string()).unwrap_or_default()
    }

    /// The identity the index should have under the current configuration.
    pub fn desired_identity(&self) -> IndexIdentity {
        let s = &self.config.memory.search;
        let mut sources: Vec<String> = s.sources.iter().map(|x| x.as_str().to_string()).collect();
        sources.sort();
        IndexIdentity {
            schema: SCHEMA_VERSION,
            provider: self.embedder.as_ref().map(|e| e.id().to_string()),
            model: self.embedder.as_ref().map(|e| e.model().to_string()),
            provider_fingerprint: self.embedder.as_ref().map(|e| e.fingerprint()),
            dimensions: self.embedder.as_ref().and_then(|e| e.dimensions()),
            sources,
            extra_paths: s.extra_paths.iter().map(crate::config::ExtraPath::identity_key).collect(),
            chunk_tokens: s.chunking.tokens,
            chunk_overlap: s.chunking.overlap,
            chunker: crate::chunking::CHUNKER_VERSION.to_string(),
            tokenizer: crate::analysis::analyzer_name(),
        }
    }

    fn cache_key(&self) -> Option<EmbeddingCacheKey> {
        self.embedder.as_ref().map(|e| EmbeddingCacheKey { provider: e.id().to_string(), model: e.model().to_string(), fingerprint: e.fingerprint() })
    }
}

/// The files announced to the engine that one sync of every file took: announced again when the sync does not
/// finish (dropped before [`Announced::answered`]).
struct Announced<'a> {
    engine: &'a IndexedBackend,
    paths: Vec<PathBuf>,
}

impl<'a> Announced<'a> {
    fn take(engine: &'a IndexedBackend, every_file: bool) -> Announced<'a> {
        let paths = if every_file { engine.freshness.take_announced() } else { Vec::new() };
        Announced { engine, paths }
    }

    fn answered(mut self) {
        self.paths.clear();
    }
}

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        if !self.paths.is_empty() {
            self.engine.freshness.announce(std::mem::take(&mut self.paths));
        }
    }
}

#[async_trait]
impl MemoryBackend for IndexedBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn set_progress(&self, f: Option<ProgressFn>) {
        *self.progress.write_locked() = f;
    }

    fn notify_changed(&self, paths: &[PathBuf]) {
        let abs = paths.iter().map(|p| if p.is_absolute() { p.clone() } else { self.roots().workspace.join(p) });
        self.freshness.announce(abs);
    }

    fn watch_changes(&self) -> Option<Box<dyn crate::changes::ChangeStream>> {
        let feed = self.freshness.subscribe(&self.files)?;
        Some(Box::new(feed))
    }

    fn capabilities(&self) -> Capabilities {
        let vector = self.embedder.is_some();
        Capabilities {
            keyword: true,
            vector,
            hybrid: vector,
            persistent: true,
            shared_ranking: true,
            cjk: true,
            sessions: self.files.sessions_dir().is_some(),
            explain: true,
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        match self.search_inner(request).await {
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => {
                let note = {
                    let _guard = self.writer.sync_lock().await;
                    let _writer = self.storage.writer_lock(true).await?;
                    self.replace_corrupt_live(e).await?
                };
                let mut response = self.search_inner(request).await?;
                response.warnings.push(note);
                Ok(response)
            }
            other => other,
        }
    }

    async fn recall(&self, request: &RecallRequest) -> Result<RecallResponse> {
        // A damaged index is repaired by the search inside (as any search repairs it).
        self.recall_inner(request).await
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        access::read(self.roots(), request, self.config.memory.search.max_file_bytes)
    }

    async fn sync(&self, mut options: SyncOptions) -> Result<SyncReport> {
        let _guard = match options.embed_wait {
            // Someone waits for this sync: another sync of this engine (the watcher's, waiting on a provider that
            // does not answer) is waited for within the same wait, and what is left of it goes to the provider.
            crate::EmbedWait::AtMost(wait) => {
                let started = tokio::time::Instant::now();
                let guard = tokio::time::timeout(wait, self.writer.sync_lock()).await.map_err(|_| {
                    MemoryError::Unavailable(format!("another sync of this engine is still updating the index (waited {} s)", wait.as_secs()))
                })?;
                options.embed_wait = crate::EmbedWait::AtMost(wait.saturating_sub(started.elapsed()));
                guard
            }
            crate::EmbedWait::EachCallAtMost(_) if self.embedder.is_some() => return self.sync_beside_searches(options).await,
            _ => self.writer.sync_lock().await,
        };
        let _writer = writer::Writer::writer_lock(self.storage.as_ref(), "sync").await?;
        self.sync_locked(options).await
    }

    async fn status(&self) -> Result<Status> {
        match self.status_inner().await {
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => {
                let note = {
                    let _guard = self.writer.sync_lock().await;
                    let _writer = self.storage.writer_lock(true).await?;
                    self.replace_corrupt_live(e).await?
                };
                let mut status = self.status_inner().await?;
                status.warnings.push(note);
                Ok(status)
            }
            other => other,
        }
    }

    async fn reset(&self) -> Result<()> {
        let _hold = self.writer.hold(self.storage.as_ref(), "reset").await?;
        // A handle that cannot close cleanly (a damaged file) must not keep the index from being deleted.
        if let Err(e) = self.store().close().await {
            warn!(error = %e, "closing the index before deleting it failed");
        }
        self.storage.destroy().await?;
        // Read after the open (which creates the file): nobody else can swap it in meanwhile, we hold the lock.
        let store = self.storage.open_live().await?;
        let marker = self.storage.live_marker().await?;
        self.set_live(store, marker);
        Ok(())
    }

    async fn vectors_to_catch_up(&self) -> Result<usize> {
        let Some(embedder) = &self.embedder else { return Ok(0) };
        if embedder.unavailable().is_some() {
            return Ok(0);
        }
        self.follow_live().await?;
        self.store().files_waiting_for_vectors().await
    }

    async fn verify(&self) -> Result<Option<String>> {
        let _guard = self.writer.sync_lock().await;
        let _writer = self.storage.writer_lock(true).await?;
        self.follow_live().await?;
        match self.store().verify().await {
            Ok(repaired) => Ok(repaired),
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => {
                let note = self.replace_corrupt_live(e).await?;
                self.sync_inner(SyncOptions::default()).await?;
                Ok(Some(note))
            }
            Err(e) => Err(e),
        }
    }

    async fn close(&self) -> Result<()> {
        self.store().close().await
    }
}

#[cfg(test)]
mod tests;
