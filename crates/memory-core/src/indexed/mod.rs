//! [`IndexedBackend`]: a complete engine on top of any [`ChunkStore`]. It discovers memory files, syncs them
//! incrementally (size + mtime, then hash), chunks and embeds what changed (through the embedding cache),
//! rebuilds beside the live index when the identity changes, and ranks with the shared pipeline.

use crate::locks::{LockExt, RwLockExt};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tracing::{debug, info, warn};

use crate::access;
use crate::analysis::{document_terms_joined, expansion_terms, heading_terms, query_terms};
use crate::backend::MemoryBackend;
use crate::chunking::headings::headings_above;
use crate::chunking::{chunk_id, chunk_text, importance};
use crate::config::Config;
use crate::discovery::{discover, media_mime, read_text, MemoryFile, MemoryRoots};
use crate::embedding::{run_batch, BatchItem, EmbeddingProvider, EmbeddingPurpose, MediaInput};
use crate::error::{MemoryError, Result};
use crate::identity::IndexIdentity;
use crate::ranking::{exact_path_tier, merge, RankingOptions};
use crate::sessions::{self, SessionState};
use crate::store::{Candidate, ChunkRecord, ChunkStore, EmbeddingCacheKey, FileRecord, FileState, IndexStorage, KeywordQuery, SyncBatch};
use crate::types::*;

/// Files per committed batch: a crash loses at most one batch of work, never the index.
const FILES_PER_BATCH: usize = 256;
/// Texts per embedding call (providers split further by their token budget).
const EMBED_BATCH: usize = 64;
/// The most chunks a sync beside searches embeds outside the index's locks ([`IndexedBackend::sync_beside_searches`]);
/// a larger backfill is embedded under them.
const OFF_LOCK_MAX_CHUNKS: usize = 2048;
const META_LAST_SYNC: &str = "lastSyncMs";
/// Why the last embedding call failed and when (`<ms> <why>`): why files wait for their vectors, for `status`.
const META_LAST_EMBED_FAILURE: &str = "lastEmbedFailure";
/// How long a sync, a reset or a search waits for another process's (or another task's) hold on the index
/// before it gives up with `Unavailable`: a command never hangs behind a long rebuild elsewhere.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(5);

/// What one file needs in the index.
enum Prepared {
    Skipped {
        record: FileRecord,
        warning: String,
    },
    /// Same content, new size/mtime.
    Touched(FileRecord),
    Changed {
        record: FileRecord,
        chunks: Vec<ChunkRecord>,
        existed: bool,
    },
    /// A transcript's new tail.
    Appended {
        record: FileRecord,
        chunks: Vec<ChunkRecord>,
    },
    /// A transcript that grew less than the re-index thresholds: left for a later sync.
    Deferred,
    /// Deleted between discovery and its read: removed from the index, as the next discovery would (not
    /// "skipped", which would say something is wrong with the file).
    Vanished(Source, String),
}

/// `items.iter().map(f)`, spread over the available cores (in order).
fn map_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map(std::num::NonZero::get).unwrap_or(1).min(8);
    if threads <= 1 || items.len() < 8 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items.chunks(per).map(|part| s.spawn(|| part.iter().map(&f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("indexing thread panicked")).collect()
    })
}

mod embed;
mod freshness;
pub mod patience;
mod plan;
mod prepare;
pub mod recall;
mod search;
mod unrelated;

/// Pieces of one long line with the same text (a repeated pattern, a pasted blob) have the same lines and hash,
/// so the same id: number the repeats (the first keeps its id, so ids of ordinary files do not change).
fn unique_chunk_ids(chunks: &mut [ChunkRecord], model: &str) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for c in chunks.iter_mut() {
        let n = seen.entry(c.id.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            c.id = chunk_id(c.source.as_str(), &c.path, c.start_line, c.end_line, &format!("{}#{n}", c.hash), model);
        }
    }
}

/// Clears a flag when dropped (also when a rebuild fails half-way).
struct ClearOnDrop<'a>(&'a AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
use plan::{indexed_state, plan_sync, stale_for_search, FileKey, Staleness};

/// Which files a sync looks at.
pub(super) enum SyncScope {
    /// Every memory file, discovered by the sync.
    All,
    /// Every memory file that changed, discovered by the sync; notes only waiting for their vectors are left to a
    /// sync that completes them (`memory index`, the watcher's): what a sync someone waits for does.
    Changed,
    /// The files under `keys` alone (`files`: those of them on disk); the index's other files stay as they are.
    Named { files: Vec<MemoryFile>, keys: Vec<FileKey> },
}

/// Which store a cached fact was read from: a swapped-in rebuild is another handle, so facts cached for the old
/// one (its provider fingerprint, its probe centroid) are read again.
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
    roots: MemoryRoots,
    storage: Arc<dyn IndexStorage>,
    live: RwLock<Arc<dyn ChunkStore>>,
    /// The storage's [`live_marker`](IndexStorage::live_marker) when `live` was opened.
    live_marker: Mutex<Option<String>>,
    embedder: Option<Arc<dyn EmbeddingProvider>>,
    sync_lock: tokio::sync::Mutex<()>,
    /// A rebuild (identity change, `--force`) of this engine is running: searches update the live index with the
    /// files that changed meanwhile instead of waiting for it.
    rebuilding: AtomicBool,
    /// Serialises those updates of the live index with each other and with the rebuild's swap.
    live_patch: tokio::sync::Mutex<()>,
    /// Keys of files a search could not sync (its sync failed): the next search syncs them whatever their size
    /// and mtime say. (Files a host announces join the journal's named files: `Journal::announce`.)
    hinted: Mutex<HashSet<String>>,
    /// The change journal of a long-lived engine: lets a search skip the stat of every file when nothing changed.
    journal: Mutex<freshness::Journal>,
    /// Known to hold an index (saves reading the identity on every search).
    indexed: AtomicBool,
    /// Provider fingerprint of the live index, once read, with the live handle it was read from: a swapped-in
    /// rebuild is another handle, so its fingerprint is read again.
    built_fingerprint: RwLock<Option<(usize, Option<String>)>>,
    /// The probes' centroid ([`unrelated`]) of the live index, once read, with the live handle and provider
    /// fingerprint it belongs to.
    unrelated_centroid: RwLock<Option<unrelated::Remembered>>,
    progress: RwLock<Option<ProgressFn>>,
    /// Transcripts folder, when the `sessions` source is on.
    sessions_dir: Option<PathBuf>,
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
    /// The index's writer lock, waited for at most [`LOCK_WAIT`], saying on the log (stderr) what it waits
    /// for: another process syncing or rebuilding the same index holds it.
    async fn writer_lock_bounded(&self, action: &str) -> Result<Option<crate::store::WriterGuard>> {
        let deadline = Instant::now() + LOCK_WAIT;
        let mut pause = Duration::from_millis(2);
        let mut said = false;
        loop {
            match self.storage.writer_lock(false).await {
                Err(e) if e.kind() == crate::ErrorKind::Unavailable => {
                    if Instant::now() >= deadline {
                        return Err(MemoryError::Unavailable(format!(
                            "another process is updating the index {} (a sync or a rebuild); gave up the {action} after {} s, try again when it is done",
                            self.storage.location(),
                            LOCK_WAIT.as_secs()
                        )));
                    }
                    if !said {
                        warn!(index = %self.storage.location(), "waiting up to {} s for another process updating this index ({action})", LOCK_WAIT.as_secs());
                        said = true;
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(25));
                }
                other => return other,
            }
        }
    }

    /// Open the live index of `storage` for the workspace.
    pub async fn open(
        name: impl Into<String>,
        config: Arc<Config>,
        workspace: impl Into<std::path::PathBuf>,
        storage: Arc<dyn IndexStorage>,
        embedder: Option<Arc<dyn EmbeddingProvider>>,
    ) -> Result<IndexedBackend> {
        let roots = MemoryRoots::for_search(workspace, &config.memory.search);
        Self::open_with_roots(name, config, roots, storage, embedder).await
    }

    /// Open the live index of `storage` for the memory files under `roots`.
    async fn open_with_roots(
        name: impl Into<String>,
        config: Arc<Config>,
        roots: MemoryRoots,
        storage: Arc<dyn IndexStorage>,
        embedder: Option<Arc<dyn EmbeddingProvider>>,
    ) -> Result<IndexedBackend> {
        // The marker is read before the open: a swap in between makes the handle newer than the marker (one
        // needless reopen), never older.
        let live_marker = storage.live_marker().await?;
        let live = storage.open_live().await?;
        let embedder = if config.memory.search.store.vector.enabled { embedder } else { None };
        if let Some(stand_in) = embedder.as_ref().filter(|e| e.unavailable().is_some()) {
            // A provider that cannot embed stands in for the one the index was built with: it takes that one's
            // identity, so the index and its vectors are kept (not rebuilt without them) until the model is back.
            if let Some(id) = live.identity().await.ok().flatten() {
                if let (Some(provider), Some(model), Some(fingerprint)) = (&id.provider, &id.model, &id.provider_fingerprint) {
                    if stand_in.adopt_identity(provider, model, fingerprint, id.dimensions) {
                        // Why it cannot be used was said (once) by whoever built the stand-in.
                        info!(provider = %provider, model = %model, "the embedding model cannot be used; the index keeps its vectors, searches answer by words until it is back");
                    }
                }
            }
        }
        Ok(IndexedBackend {
            name: name.into(),
            config,
            roots,
            storage,
            live: RwLock::new(live),
            live_marker: Mutex::new(live_marker),
            embedder,
            sync_lock: tokio::sync::Mutex::new(()),
            rebuilding: AtomicBool::new(false),
            live_patch: tokio::sync::Mutex::new(()),
            hinted: Mutex::new(HashSet::new()),
            journal: Mutex::new(freshness::Journal::default()),
            indexed: AtomicBool::new(false),
            built_fingerprint: RwLock::new(None),
            unrelated_centroid: RwLock::new(None),
            progress: RwLock::new(None),
            sessions_dir: None,
            batch_state_file: None,
            reranker: None,
            patience: patience::Patience::default(),
        })
    }

    /// Open for a host's [`OpenContext`](crate::registry::OpenContext): the workspace, the embedder and, when
    /// `memory.search.sources` includes `sessions`, the transcripts folder it implies. Engines built on
    /// `IndexedBackend` call this from their factory.
    pub async fn open_for(name: impl Into<String>, ctx: &crate::registry::OpenContext, storage: Arc<dyn IndexStorage>) -> Result<IndexedBackend> {
        let name = name.into();
        let space = &ctx.space;
        let engine = IndexedBackend::open_with_roots(name.clone(), ctx.config.clone(), space.roots().clone(), storage, ctx.embedder.clone()).await?;
        let mut engine = engine.with_batch_state_file(space.batch_jobs_file(&name));
        engine.reranker = ctx.reranker.clone();
        Ok(if ctx.config.memory.search.sources.contains(&Source::Sessions) { engine.with_sessions_dir(space.sessions_dir()) } else { engine })
    }

    /// Index session transcripts from `dir` when `memory.search.sources` includes `sessions`.
    pub fn with_sessions_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sessions_dir = Some(dir.into());
        self
    }

    /// Record provider batch jobs in `path` (used when the embedder has a batch API, `remote.batch.enabled`).
    pub fn with_batch_state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.batch_state_file = Some(path.into());
        self
    }

    /// Every file of every configured source.
    fn discover_all(&self) -> Vec<MemoryFile> {
        self.discovery()()
    }

    /// Discovery of every source as a job that owns what it needs, so that it can run on another thread while
    /// this one reads the index's records.
    fn discovery(&self) -> impl FnOnce() -> Vec<MemoryFile> + Send + 'static {
        let memory = self.config.memory.search.sources.contains(&Source::Memory).then(|| self.roots.clone());
        let sessions = self.config.memory.search.sources.contains(&Source::Sessions).then(|| self.sessions_dir.clone());
        move || {
            let mut files = memory.as_ref().map(discover).unwrap_or_default();
            match sessions {
                Some(Some(dir)) => files.extend(sessions::discover(&dir)),
                Some(None) => warn!("the sessions source is on but this engine has no transcripts folder"),
                None => {}
            }
            files
        }
    }

    /// The index key of a changed path a host announced: transcripts by their key in the sessions source.
    fn hint_key(&self, abs: &Path) -> String {
        if let (Some(dir), Some(name)) = (&self.sessions_dir, abs.file_name()) {
            if abs.parent() == Some(dir.as_path()) {
                return sessions::transcript_key(&name.to_string_lossy());
            }
        }
        self.roots.key_for(abs)
    }

    pub fn roots(&self) -> &MemoryRoots {
        &self.roots
    }

    fn store(&self) -> Arc<dyn ChunkStore> {
        self.live.read_locked().clone()
    }

    /// Make `store` the live handle: what was cached about the old one is forgotten.
    fn set_live(&self, store: Arc<dyn ChunkStore>, marker: Option<String>) {
        *self.live.write_locked() = store;
        *self.live_marker.locked() = marker;
        *self.built_fingerprint.write_locked() = None;
        self.indexed.store(false, Ordering::Relaxed);
        // Another index: what the last check found in step was the old one.
        self.journal.locked().forget();
    }

    /// Reopen the live store when another process swapped in another one (a rebuild, a reset) since this
    /// engine opened it.
    async fn follow_live(&self) -> Result<()> {
        let marker = self.storage.live_marker().await?;
        if marker.is_none() || *self.live_marker.locked() == marker {
            return Ok(());
        }
        let _patch = self.live_patch.lock().await;
        if *self.live_marker.locked() == marker || self.rebuilding.load(Ordering::SeqCst) {
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

    /// A sync under this engine's locks, a damaged index repaired and synced again.
    async fn sync_locked(&self, options: SyncOptions) -> Result<SyncReport> {
        match self.sync_inner(options).await {
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => {
                let note = self.replace_corrupt_live(e).await?;
                let mut report = self.sync_inner(options).await?;
                report.warnings.push(note);
                Ok(report)
            }
            other => other,
        }
    }

    /// A sync while searches share the index (the watcher's in `memory serve`): the provider is never waited for
    /// under the index's locks. Under them, the changed files are indexed by their words (found at once) and the
    /// chunks left for the provider collected; without them, those are embedded ([`patience`]: each call bounded,
    /// none while paused), so searches and appends sync and answer meanwhile; under them again, the vectors are
    /// applied to the files still as they were (a file changed meanwhile keeps waiting: its change brings another
    /// sync). A first build goes the same way; a rebuild for new settings (or a forced one) runs as any sync.
    async fn sync_beside_searches(&self, options: SyncOptions) -> Result<SyncReport> {
        let bound = patience::Bound::of(options.embed_wait);
        let collected = Mutex::new(embed::Collected::default());
        let (mut report, settings) = {
            let _guard = self.sync_lock.lock().await;
            let _writer = self.writer_lock_bounded("sync").await?;
            self.follow_live().await?;
            let live = self.store();
            let desired = self.desired_identity();
            let current = live.identity().await?;
            if options.force || current.as_ref().is_some_and(|c| !c.same_settings(&desired)) {
                return self.sync_locked(options).await;
            }
            let planned = desired.provider_fingerprint.as_deref();
            let with = embed::SyncVectors { bound: patience::Bound::WordsOnly, collect: Some(&collected), computed: None };
            let words = self.sync_into(&live, &live, planned, SyncScope::All, with).await;
            *self.built_fingerprint.write_locked() = None;
            let report = match words {
                Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => return self.sync_locked(options).await,
                other => other?,
            };
            if current.is_none() {
                live.set_identity(&desired).await?;
                self.indexed.store(true, Ordering::Relaxed);
            }
            live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
            (report, desired)
        };
        let collected = collected.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        if collected.is_empty() {
            return Ok(report);
        }
        if collected.len() > OFF_LOCK_MAX_CHUNKS {
            // A backfill (a first build, a bulk import): its texts and vectors are not held in memory all at once;
            // it is embedded under the locks as any sync, the notes already found by their words meanwhile.
            drop(collected);
            let _guard = self.sync_lock.lock().await;
            let _writer = self.writer_lock_bounded("sync").await?;
            report.add_vectors_pass(self.sync_locked(options).await?);
            return Ok(report);
        }
        let vectors = self.embed_collected(collected, bound, &mut report).await;
        if vectors.is_empty() {
            return Ok(report);
        }
        let _guard = self.sync_lock.lock().await;
        let _writer = self.writer_lock_bounded("sync").await?;
        self.follow_live().await?;
        let live = self.store();
        // The identity this sync indexed for (a provider that learns its width from its first answer reports it
        // only now, so the one stored is compared, not the one the provider would describe now).
        if !live.identity().await?.is_some_and(|id| id.same_settings(&settings)) {
            // The settings changed meanwhile: these vectors belong to no index; the rebuild embeds anew.
            return Ok(report);
        }
        if let (true, Some(key)) = (self.config.memory.search.cache.enabled, self.cache_key()) {
            let entries: Vec<(String, Vec<f32>)> = vectors.iter().map(|(h, v)| (h.clone(), v.clone())).collect();
            if let Err(e) = live.cache_embeddings(&key, &entries, self.config.memory.search.cache.max_entries).await {
                warn!(error = %e, "embedding cache write failed");
            }
        }
        let computed = BatchVectors { vectors, pending: HashSet::new() };
        let with = embed::SyncVectors { bound: patience::Bound::WordsOnly, collect: None, computed: Some(computed) };
        let applied = self.sync_into(&live, &live, settings.provider_fingerprint.as_deref(), SyncScope::All, with).await;
        *self.built_fingerprint.write_locked() = None;
        let applied = applied?;
        report.files_pending = applied.files_pending;
        report.warnings.extend(applied.warnings);
        live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
        Ok(report)
    }

    async fn sync_inner(&self, options: SyncOptions) -> Result<SyncReport> {
        self.follow_live().await?;
        let result = self.sync_inner_uncached(options).await;
        *self.built_fingerprint.write_locked() = None;
        result
    }

    async fn sync_inner_uncached(&self, options: SyncOptions) -> Result<SyncReport> {
        let desired = self.desired_identity();
        let live = self.store();
        let current = live.identity().await?;
        let needs_rebuild = match &current {
            Some(cur) if !cur.same_settings(&desired) => {
                info!(changed = ?cur.differences(&desired), "index identity changed; rebuilding beside the live index");
                true
            }
            Some(_) => options.force,
            None => false,
        };
        // The identity is written only once a sync has completed: an index without one is unfinished, and the
        // next search completes it before answering.
        let bound = patience::Bound::of(options.embed_wait);
        if !needs_rebuild {
            let planned = desired.provider_fingerprint.as_deref();
            if current.is_none() && bound.bounded() && self.embedder.is_some() {
                // A first build someone waits for (a search's, an append's): every note by its words first, so
                // that the search answers from them (a backfill's embeddings take minutes, a provider that does
                // not answer longer), then the vectors within what is left of the wait, found pending as the files
                // were left. (The watcher's first build: `sync_beside_searches`.)
                let mut report = self.sync_into(&live, &live, planned, SyncScope::All, patience::Bound::WordsOnly.into()).await?;
                live.set_identity(&desired).await?;
                live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
                self.indexed.store(true, Ordering::Relaxed);
                let vectors = self.sync_into(&live, &live, planned, SyncScope::All, bound.into()).await?;
                report.add_vectors_pass(vectors);
                live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
                return Ok(report);
            }
            // Someone waits (an append): the files that changed, not the notes waiting for their vectors, which
            // would take the wait (minutes of a local model's work after a large first build).
            let scope = if matches!(bound, patience::Bound::Until(_)) { SyncScope::Changed } else { SyncScope::All };
            let report = self.sync_into(&live, &live, planned, scope, bound.into()).await?;
            if current.is_none() {
                live.set_identity(&desired).await?;
            }
            live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
            return Ok(report);
        }

        // Rebuild into a staging store; search keeps answering from `live` until the swap, and keeps `live` in step
        // with the files meanwhile (see `freshen`).
        self.rebuilding.store(true, Ordering::SeqCst);
        let _rebuilding = ClearOnDrop(&self.rebuilding);
        let staging = self.storage.open_staging().await?;
        let filled = async {
            let report = self.sync_into(&staging, &live, desired.provider_fingerprint.as_deref(), SyncScope::All, bound.into()).await?;
            staging.set_identity(&desired).await?;
            staging.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
            Ok::<_, MemoryError>(report)
        }
        .await;
        let mut report = match filled {
            Ok(report) => report,
            Err(e) => {
                // The live index is untouched; what the rebuild wrote goes (a full disk stays full otherwise).
                if let Err(discard) = self.storage.discard_staging(staging).await {
                    warn!(error = %discard, "the failed rebuild's files could not be removed");
                }
                return Err(e);
            }
        };
        // Files that changed while the rebuild ran are in the old live index only: the next search's freshness
        // check finds them different from the new index's records and syncs them.
        let _patch = self.live_patch.lock().await;
        let live = self.store();
        let new_live = self.storage.promote(live, staging).await?;
        let marker = self.storage.live_marker().await?;
        self.set_live(new_live, marker);
        self.indexed.store(true, Ordering::Relaxed);
        report.rebuilt = true;
        Ok(report)
    }

    /// Bring `target` in step with the files. Embeddings are looked up in `target`'s cache, then in
    /// `cache_from`'s (the old index during a rebuild), so a rebuild re-embeds nothing already embedded.
    /// `scope` says which files the sync looks at (every file, or a few a change journal named); `bound`, how long it
    /// waits for the embedding provider ([`patience`]).
    async fn sync_into(
        &self,
        target: &Arc<dyn ChunkStore>,
        cache_from: &Arc<dyn ChunkStore>,
        planned: Option<&str>,
        scope: SyncScope,
        with: embed::SyncVectors<'_>,
    ) -> Result<SyncReport> {
        let embed::SyncVectors { bound, collect, computed } = with;
        // A sync of every file answers for the files a host announced: read by content, not trusted by their stat.
        // If it fails (any early return) they stay announced.
        let announced = Announced::take(self, matches!(scope, SyncScope::All | SyncScope::Changed));
        let leave_waiting = matches!(scope, SyncScope::Changed);
        let mut report = SyncReport::default();
        let (files, stored) = match scope {
            SyncScope::All | SyncScope::Changed => (self.discover_all(), target.files().await?),
            SyncScope::Named { files, keys } => (files, target.file_records(&keys).await?),
        };
        report.files_scanned = files.len();
        let announced_keys: HashSet<String> = announced.paths.iter().map(|p| self.hint_key(p)).collect();
        let plan = plan_sync(&files, &stored, &announced_keys, leave_waiting);
        let work = plan.work;
        let removals = plan.removals;
        report.files_unchanged = plan.unchanged;
        report.files_removed = removals.len();

        let progress = self.progress.read_locked().clone();
        let total = work.len();
        let mut done = 0;
        let mut removals = Some(removals);
        // With provider batch jobs, every file is prepared first so that all new chunks go out as a few jobs.
        let batch_mode = self.batch_state_file.is_some()
            && self.embedder.as_ref().is_some_and(|e| e.batch().is_some() && planned == Some(e.fingerprint().as_str()));
        let mut prepared_parts: Vec<Option<Vec<Prepared>>> = if batch_mode {
            work.chunks(FILES_PER_BATCH).map(|part| Some(map_parallel(part, |(f, old)| self.prepare(f, *old)))).collect()
        } else {
            Vec::new()
        };
        let batch_vectors = match computed {
            Some(computed) => computed,
            None if batch_mode => self.run_batch_jobs(&prepared_parts, target, cache_from, &mut report).await,
            None => BatchVectors::default(),
        };
        for (i, part) in work.chunks(FILES_PER_BATCH).enumerate() {
            // Reading, hashing, chunking and analysing are CPU work: spread them over the cores.
            let prepared = match prepared_parts.get_mut(i).and_then(Option::take) {
                Some(p) => p,
                None => map_parallel(part, |(f, old)| self.prepare(f, *old)),
            };
            let mut batch = SyncBatch { removals: removals.take().unwrap_or_default(), ..Default::default() };
            for p in prepared {
                match p {
                    Prepared::Skipped { record, warning } => {
                        report.warnings.push(warning);
                        report.files_skipped += 1;
                        // Remember the skip (no chunks) so an unchanged file is not re-read and warned about on
                        // every sync; any old chunks of the file leave the index.
                        batch.upserts.push((record, Vec::new()));
                    }
                    Prepared::Touched(record) => {
                        report.files_unchanged += 1;
                        batch.touches.push(record);
                    }
                    Prepared::Changed { record, chunks, existed } => {
                        if existed {
                            report.files_changed += 1;
                        } else {
                            report.files_added += 1;
                        }
                        report.chunks_written += chunks.len();
                        batch.upserts.push((record, chunks));
                    }
                    Prepared::Appended { record, chunks } => {
                        report.files_changed += 1;
                        report.chunks_written += chunks.len();
                        batch.appends.push((record, chunks));
                    }
                    Prepared::Deferred => report.files_unchanged += 1,
                    Prepared::Vanished(source, key) => {
                        report.files_removed += 1;
                        batch.removals.push((source, key));
                    }
                }
            }
            let step = embed::EmbedStep { target, cache_from, planned, from_batch: &batch_vectors, bound, collect };
            self.embed_batch(&mut batch, &step, &mut report).await;
            report.files_pending += batch.upserts.iter().chain(batch.appends.iter()).filter(|(file, _)| file.state() == FileState::Pending).count();
            target.apply(batch).await?;
            done += part.len();
            if let Some(p) = &progress {
                p(SyncProgress { files_done: done, files_total: total, chunks_embedded: report.chunks_embedded });
            }
        }
        if let Some(removals) = removals.filter(|r| !r.is_empty()) {
            target.apply(SyncBatch { removals, ..Default::default() }).await?;
        }
        self.record_unrelated_centroid(target, cache_from, planned, bound).await;
        debug!(?report, "sync finished");
        announced.answered();
        Ok(report)
    }
}

/// `status`'s line on files waiting for their vectors: how many, why (the last embedding failure, recorded as
/// `<ms> <why>`, with how long ago), and what gets them their vectors.
fn waiting_for_vectors_status(pending: usize, last_failure: Option<&str>, now_ms: i64) -> String {
    let why = last_failure
        .and_then(|f| f.split_once(' '))
        .and_then(|(at, why)| at.parse::<i64>().ok().map(|at| format!("; the last embedding failure, {} s ago: {why}", (now_ms - at).max(0) / 1000)))
        .unwrap_or_default();
    format!(
        "{pending} files are waiting for embeddings (keyword search finds them){why}; the watcher or a background sync started by a search \
         embeds them once the provider answers, `memory index` at once"
    )
}

/// The files announced to the engine that one sync of every file took: announced again when the sync does not
/// finish (dropped before [`Announced::answered`]).
struct Announced<'a> {
    engine: &'a IndexedBackend,
    paths: Vec<PathBuf>,
}

impl<'a> Announced<'a> {
    fn take(engine: &'a IndexedBackend, every_file: bool) -> Announced<'a> {
        let paths = if every_file { engine.journal.locked().take_announced() } else { Vec::new() };
        Announced { engine, paths }
    }

    fn answered(mut self) {
        self.paths.clear();
    }
}

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        if !self.paths.is_empty() {
            self.engine.journal.locked().announce(std::mem::take(&mut self.paths));
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
        let abs = paths.iter().map(|p| if p.is_absolute() { p.clone() } else { self.roots.workspace.join(p) });
        self.journal.locked().announce(abs);
    }

    fn watch_changes(&self) -> Option<crate::discovery::ChangeFeed> {
        self.journal.locked().subscribe(&self.roots, self.sessions_dir.as_deref())
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
            sessions: self.sessions_dir.is_some(),
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        match self.search_inner(request).await {
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => {
                let note = {
                    let _guard = self.sync_lock.lock().await;
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
        access::read(&self.roots, request, self.config.memory.search.max_file_bytes)
    }

    async fn sync(&self, mut options: SyncOptions) -> Result<SyncReport> {
        let _guard = match options.embed_wait {
            // Someone waits for this sync: another sync of this engine (the watcher's, waiting on a provider that
            // does not answer) is waited for within the same wait, and what is left of it goes to the provider.
            crate::EmbedWait::AtMost(wait) => {
                let started = tokio::time::Instant::now();
                let guard = tokio::time::timeout(wait, self.sync_lock.lock()).await.map_err(|_| {
                    MemoryError::Unavailable(format!("another sync of this engine is still updating the index (waited {} s)", wait.as_secs()))
                })?;
                options.embed_wait = crate::EmbedWait::AtMost(wait.saturating_sub(started.elapsed()));
                guard
            }
            crate::EmbedWait::EachCallAtMost(_) if self.embedder.is_some() => return self.sync_beside_searches(options).await,
            _ => self.sync_lock.lock().await,
        };
        let _writer = self.writer_lock_bounded("sync").await?;
        self.sync_locked(options).await
    }

    async fn status(&self) -> Result<Status> {
        match self.status_inner().await {
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => {
                let note = {
                    let _guard = self.sync_lock.lock().await;
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
        let _guard = self.sync_lock.lock().await;
        let _writer = self.writer_lock_bounded("reset").await?;
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
        let _guard = self.sync_lock.lock().await;
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

impl IndexedBackend {
    /// A read or write found the live index damaged: set it aside ([`IndexStorage::set_aside_live`]) and open an
    /// empty one, which the next sync (or the search's own first sync) fills from the files. Returns what to tell
    /// the user; the error itself when the storage cannot set its index aside. The caller holds the sync locks.
    async fn replace_corrupt_live(&self, why: MemoryError) -> Result<String> {
        let _patch = self.live_patch.lock().await;
        if let Err(e) = self.store().close().await {
            debug!(error = %e, "closing the damaged index failed");
        }
        if !self.storage.set_aside_live(&why).await? {
            return Err(why);
        }
        let store = self.storage.open_live().await?;
        let marker = self.storage.live_marker().await?;
        self.set_live(store, marker);
        warn!(error = %why, "the index was damaged; it was set aside and is rebuilt from the memory files");
        Ok(format!("the index was damaged ({why}); it was set aside and rebuilt from the memory files"))
    }

    async fn status_inner(&self) -> Result<Status> {
        self.follow_live().await?;
        let store = self.store();
        let (files, chunks) = store.counts().await?;
        let stored = store.files().await?;
        let identity = store.identity().await?;
        let mut warnings = Vec::new();
        let mut rebuild_pending = false;
        if let Some(id) = &identity {
            let diff = id.differences(&self.desired_identity());
            if !diff.is_empty() {
                rebuild_pending = true;
                warnings.push(format!("index identity differs ({}); the next sync rebuilds it", diff.join(", ")));
            }
        }
        if let Some(cause) = store.read_only() {
            warnings.push(format!("the index is open read-only ({cause}); nothing is synced until it can be written"));
        }
        let skipped = skipped_files(&stored);
        let pending = stored.iter().filter(|f| f.state() == FileState::Pending).count();
        if pending > 0 {
            warnings.push(waiting_for_vectors_status(pending, store.meta(META_LAST_EMBED_FAILURE).await.ok().flatten().as_deref(), crate::now_ms()));
        }
        let batch_disabled = self.embedder.as_ref().and_then(|e| e.batch()).and_then(super::embedding::BatchEmbedder::disabled_reason);
        if let Some(reason) = &batch_disabled {
            warnings.push(reason.clone());
        }
        let stale = self.count_stale(&stored);
        let mut extra = match store.status_details().await {
            Ok(details) => details,
            Err(e) => {
                warnings.push(format!("store details unavailable: {e}"));
                serde_json::Map::new()
            }
        };
        if self.embedder.as_ref().is_some_and(|e| e.batch().is_some()) {
            extra.insert("batch".into(), serde_json::json!({ "enabled": batch_disabled.is_none(), "disabledReason": batch_disabled }));
        }
        extra.insert("staleFiles".into(), stale.into());
        extra.insert("indexed".into(), identity.is_some().into());
        if let Some(id) = identity {
            extra.insert("tokenizer".into(), id.tokenizer.into());
        }
        Ok(Status {
            backend: self.name.clone(),
            workspace: self.roots.workspace.display().to_string(),
            index_path: Some(store.location()),
            files,
            chunks,
            capabilities: self.capabilities(),
            provider: self.embedder.as_ref().map(|e| e.id().to_string()),
            model: self.embedder.as_ref().map(|e| e.model().to_string()),
            dimensions: self.embedder.as_ref().and_then(|e| e.dimensions()),
            last_sync_ms: store.meta(META_LAST_SYNC).await?.and_then(|v| v.parse().ok()),
            dirty: stale > 0,
            rebuild_pending,
            fallback: None,
            warnings,
            skipped,
            extra,
        })
    }
}

/// The files `stored` records as not indexed, with why.
pub(crate) fn skipped_files(stored: &[FileRecord]) -> Vec<SkippedFile> {
    stored
        .iter()
        .filter_map(|f| {
            let (reason, retried) = match f.state() {
                // Records written before the reason was kept say what it can be.
                FileState::Skipped { why: "" } => ("binary, not UTF-8 or too large".to_string(), false),
                FileState::Skipped { why } => (why.to_string(), false),
                FileState::Unreadable { why } => (format!("unreadable ({why})"), true),
                _ => return None,
            };
            Some(SkippedFile { path: f.path.clone(), reason, retried })
        })
        .collect()
}

#[cfg(test)]
mod tests;
