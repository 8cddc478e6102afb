//! [`IndexedBackend`]: a complete engine on top of any [`ChunkStore`]. It discovers memory files, syncs them
//! incrementally (size + mtime, then hash), chunks and embeds what changed (through the embedding cache),
//! rebuilds beside the live index when the identity changes, and ranks with the shared pipeline.

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
use crate::chunking::{chunk_id, chunk_text, importance};
use crate::config::Config;
use crate::discovery::{discover, media_mime, read_text, MemoryFile, MemoryRoots};
use crate::embedding::{run_batch, BatchItem, EmbeddingProvider, EmbeddingPurpose, MediaInput};
use crate::error::{MemoryError, Result};
use crate::identity::IndexIdentity;
use crate::ranking::{exact_path_tier, merge, rank, RankingOptions};
use crate::store::{Candidate, ChunkRecord, ChunkStore, EmbeddingCacheKey, FileRecord, IndexStorage, KeywordQuery, SyncBatch};
use crate::sessions::{self, SessionState};
use crate::types::*;

/// Files per committed batch: a crash loses at most one batch of work, never the index.
const FILES_PER_BATCH: usize = 256;
/// Texts per embedding call (providers split further by their token budget).
const EMBED_BATCH: usize = 64;
const META_LAST_SYNC: &str = "lastSyncMs";
/// File hash recorded for a file that was skipped (binary, not UTF-8, too large).
pub const SKIPPED_HASH: &str = "!skipped";

/// What one file needs in the index.
enum Prepared {
    Skipped { record: FileRecord, warning: String },
    /// Same content, new size/mtime.
    Touched(FileRecord),
    Changed { record: FileRecord, chunks: Vec<ChunkRecord>, existed: bool },
    /// A transcript's new tail.
    Appended { record: FileRecord, chunks: Vec<ChunkRecord> },
    /// A transcript that grew less than the re-index thresholds: left for a later sync.
    Deferred,
}

/// `items.iter().map(f)`, spread over the available cores (in order).
fn map_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8);
    if threads <= 1 || items.len() < 8 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items.chunks(per).map(|part| s.spawn(|| part.iter().map(&f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("indexing thread panicked")).collect()
    })
}

/// Pseudo-relevance feedback: applied to queries with at least this many content terms...
const PRF_MIN_QUERY_TERMS: usize = 4;
/// ...using this many top keyword hits...
const PRF_DOCS: usize = 10;
/// ...to pick this many expansion terms, whose BM25 counts this much beside the original query's.
const PRF_TERMS: usize = 10;
const PRF_WEIGHT: f64 = 0.3;
/// Weight of the feedback centroid added to a question's query vector (Rocchio's textbook beta, with alpha 1).
const VECTOR_PRF_WEIGHT: f32 = 0.75;

/// The best [`PRF_DOCS`] chunks of the merged keyword + vector ranking: the feedback set of both expansions.
fn feedback_ranking(keyword: &[Candidate], vector: &[Candidate], opts: &RankingOptions) -> Vec<crate::ranking::Scored> {
    let mut ranked = merge(keyword.to_vec(), vector.to_vec(), opts.vector_floor, opts.vector_weight, opts.text_weight);
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.candidate.chunk_id.cmp(&b.candidate.chunk_id)));
    ranked.truncate(PRF_DOCS);
    ranked
}

mod plan;
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
use plan::{content_hash, plan_sync, record_hash, stale_for_search, FileKey, Staleness};

/// How long a search waits for a sync that another task or process is running before it answers without the
/// files that changed (it never waits for a rebuild: it updates the live index itself meanwhile).
const FRESHEN_WAIT: Duration = Duration::from_secs(5);

/// Workspaces with at least this many files free the freshness check's lists on a blocking thread.
const PARALLEL_FREE_MIN: usize = 4096;

/// Store layout version, part of the identity.
pub const SCHEMA_VERSION: u32 = 1;

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
    /// Paths a host announced as changed (`MemoryBackend::notify_changed`): the next search syncs them whatever
    /// their size and mtime say.
    hinted: Mutex<HashSet<String>>,
    dirty: AtomicBool,
    /// Known to hold an index (saves reading the identity on every search).
    indexed: AtomicBool,
    /// Provider fingerprint of the live index, once read, with the live handle it was read from: a swapped-in
    /// rebuild is another handle, so its fingerprint is read again.
    built_fingerprint: RwLock<Option<(usize, Option<String>)>>,
    /// The probes' centroid ([`unrelated`]) of the live index, once read, with the live handle and provider
    /// fingerprint it belongs to.
    unrelated_centroid: RwLock<Option<(usize, String, Arc<Vec<f32>>)>>,
    keyword_capable: bool,
    progress: RwLock<Option<ProgressFn>>,
    /// Transcripts folder, when the `sessions` source is on.
    sessions_dir: Option<PathBuf>,
    /// Where submitted provider batch jobs are recorded (`remote.batch`), so an interrupted backfill resumes.
    batch_state_file: Option<PathBuf>,
}

/// Vectors a batch run produced for this sync, and chunks whose jobs are still running (`remote.batch.wait` off).
#[derive(Default)]
struct BatchVectors {
    vectors: HashMap<String, Vec<f32>>,
    pending: HashSet<String>,
}

impl IndexedBackend {
    /// Open the live index of `storage` for the workspace.
    pub async fn open(
        name: impl Into<String>,
        config: Arc<Config>,
        workspace: impl Into<std::path::PathBuf>,
        storage: Arc<dyn IndexStorage>,
        embedder: Option<Arc<dyn EmbeddingProvider>>,
    ) -> Result<IndexedBackend> {
        let roots = MemoryRoots::new(workspace, &config.memory.search.extra_paths).with_media(config.memory.search.multimodal.enabled);
        // The marker is read before the open: a swap in between makes the handle newer than the marker (one
        // needless reopen), never older.
        let live_marker = storage.live_marker().await?;
        let live = storage.open_live().await?;
        let embedder = if config.memory.search.store.vector.enabled { embedder } else { None };
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
            dirty: AtomicBool::new(false),
            indexed: AtomicBool::new(false),
            built_fingerprint: RwLock::new(None),
            unrelated_centroid: RwLock::new(None),
            keyword_capable: true,
            progress: RwLock::new(None),
            sessions_dir: None,
            batch_state_file: None,
        })
    }

    /// Open for a host's [`OpenContext`](crate::registry::OpenContext): the workspace, the embedder and, when
    /// `memory.search.sources` includes `sessions`, the transcripts folder it implies. Engines built on
    /// `IndexedBackend` call this from their factory.
    pub async fn open_for(name: impl Into<String>, ctx: &crate::registry::OpenContext, storage: Arc<dyn IndexStorage>) -> Result<IndexedBackend> {
        let name = name.into();
        let engine = IndexedBackend::open(name.clone(), ctx.config.clone(), ctx.workspace.clone(), storage, ctx.embedder.clone()).await?;
        // One state file per agent, engine and workspace, in the state folder beside the indexes.
        let agent = crate::sanitize_id(&ctx.agent_id);
        let engine = engine.with_batch_state_file(ctx.state_dir.join("batch-jobs").join(format!("{agent}-{}.json", ctx.state_tag(&name))));
        Ok(if ctx.config.memory.search.sources.contains(&Source::Sessions) {
            engine.with_sessions_dir(sessions::sessions_dir(&ctx.config, &ctx.state_dir, &ctx.agent_id))
        } else {
            engine
        })
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

    /// Mark the index stale (a watcher saw a change); the next search with `sync.onSearch` syncs first.
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::SeqCst);
    }

    /// The index key of a changed path a host announced: transcripts by their key in the sessions source.
    fn hint_key(&self, abs: &Path) -> String {
        if let (Some(dir), Some(name)) = (&self.sessions_dir, abs.file_name()) {
            if abs.parent() == Some(dir.as_path()) {
                return format!("{}{}", sessions::KEY_PREFIX, name.to_string_lossy());
            }
        }
        self.roots.key_for(abs)
    }

    pub fn roots(&self) -> &MemoryRoots {
        &self.roots
    }

    fn store(&self) -> Arc<dyn ChunkStore> {
        self.live.read().unwrap().clone()
    }

    /// Make `store` the live handle: what was cached about the old one is forgotten.
    fn set_live(&self, store: Arc<dyn ChunkStore>, marker: Option<String>) {
        *self.live.write().unwrap() = store;
        *self.live_marker.lock().unwrap() = marker;
        *self.built_fingerprint.write().unwrap() = None;
        self.indexed.store(false, Ordering::Relaxed);
    }

    /// Reopen the live store when another process swapped in another one (a rebuild, a reset) since this
    /// engine opened it.
    async fn follow_live(&self) -> Result<()> {
        let marker = self.storage.live_marker().await?;
        if marker.is_none() || *self.live_marker.lock().unwrap() == marker {
            return Ok(());
        }
        let _patch = self.live_patch.lock().await;
        if *self.live_marker.lock().unwrap() == marker || self.rebuilding.load(Ordering::SeqCst) {
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
        self.embedder.as_ref().map(|e| EmbeddingCacheKey {
            provider: e.id().to_string(),
            model: e.model().to_string(),
            fingerprint: e.fingerprint(),
        })
    }

    async fn sync_inner(&self, options: SyncOptions) -> Result<SyncReport> {
        self.follow_live().await?;
        let result = self.sync_inner_uncached(options).await;
        *self.built_fingerprint.write().unwrap() = None;
        result
    }

    async fn sync_inner_uncached(&self, options: SyncOptions) -> Result<SyncReport> {
        let desired = self.desired_identity();
        let live = self.store();
        let current = live.identity().await?;
        let needs_rebuild = match &current {
            Some(cur) if *cur != desired => {
                info!(changed = ?cur.differences(&desired), "index identity changed; rebuilding beside the live index");
                true
            }
            Some(_) => options.force,
            None => false,
        };
        // The identity is written only once a sync has completed: an index without one is unfinished, and the
        // next search completes it before answering.
        if !needs_rebuild {
            let report = self.sync_into(&live, &live, desired.provider_fingerprint.as_deref(), None).await?;
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
        let mut report = self.sync_into(&staging, &live, desired.provider_fingerprint.as_deref(), None).await?;
        staging.set_identity(&desired).await?;
        staging.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
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
    /// `files` are the discovered files when the caller has just listed them (the freshness check), else they are
    /// discovered here.
    async fn sync_into(
        &self,
        target: &Arc<dyn ChunkStore>,
        cache_from: &Arc<dyn ChunkStore>,
        planned: Option<&str>,
        files: Option<Vec<MemoryFile>>,
    ) -> Result<SyncReport> {
        let mut report = SyncReport::default();
        let files = files.unwrap_or_else(|| self.discover_all());
        report.files_scanned = files.len();
        let stored = target.files().await?;
        let plan = plan_sync(&files, &stored);
        let work = plan.work;
        let removals = plan.removals;
        report.files_unchanged = plan.unchanged;
        report.files_removed = removals.len();

        let progress = self.progress.read().unwrap().clone();
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
        let batch_vectors = if batch_mode {
            self.run_batch_jobs(&prepared_parts, target, cache_from, &mut report).await
        } else {
            BatchVectors::default()
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
                }
            }
            self.embed_batch(&mut batch, target, cache_from, planned, &batch_vectors, &mut report).await;
            target.apply(batch).await?;
            done += part.len();
            if let Some(p) = &progress {
                p(SyncProgress { files_done: done, files_total: total, chunks_embedded: report.chunks_embedded });
            }
        }
        if let Some(removals) = removals.filter(|r| !r.is_empty()) {
            target.apply(SyncBatch { removals, ..Default::default() }).await?;
        }
        self.record_unrelated_centroid(target, cache_from, planned).await;
        debug!(?report, "sync finished");
        Ok(report)
    }

    /// Read one new or changed-looking file and decide what the index needs.
    fn prepare(&self, f: &MemoryFile, old: Option<&FileRecord>) -> Prepared {
        if f.source == Source::Sessions {
            return self.prepare_session(f, old);
        }
        if self.roots.media {
            if let Some(mime) = media_mime(&f.abs_path) {
                return self.prepare_media(f, old, mime);
            }
        }
        let text = match read_text(&f.abs_path, self.config.memory.search.max_file_bytes) {
            Ok(t) => t,
            Err(why) => {
                warn!(path = %f.abs_path.display(), reason = %why, "memory file skipped");
                let record = FileRecord { source: f.source, path: f.key.clone(), hash: SKIPPED_HASH.into(), size: f.size, mtime_ms: f.mtime_ms };
                return Prepared::Skipped { record, warning: format!("{}: skipped: {why}", f.key) };
            }
        };
        let hash = crate::sha256_hex(text.as_bytes());
        let record = FileRecord { source: f.source, path: f.key.clone(), hash: record_hash(hash.clone(), f.mtime_ms, crate::now_ms()), size: f.size, mtime_ms: f.mtime_ms };
        if old.is_some_and(|o| content_hash(&o.hash) == hash) {
            return Prepared::Touched(record);
        }
        Prepared::Changed { chunks: self.make_chunks(f, &text), record, existed: old.is_some() }
    }

    /// An image or audio file (multimodal memory): one chunk whose text is the file's path (the snippet; the
    /// keyword leg sees the words of its name) and whose vector is the file's own embedding.
    fn prepare_media(&self, f: &MemoryFile, old: Option<&FileRecord>, mime: &str) -> Prepared {
        let limit = self.config.memory.search.multimodal.max_file_bytes;
        let skipped = |why: String| {
            warn!(path = %f.abs_path.display(), reason = %why, "media file skipped");
            let record = FileRecord { source: f.source, path: f.key.clone(), hash: SKIPPED_HASH.into(), size: f.size, mtime_ms: f.mtime_ms };
            Prepared::Skipped { record, warning: format!("{}: skipped: {why}", f.key) }
        };
        if f.size > limit {
            return skipped(format!("file is {} bytes, over the {limit}-byte limit (multimodal.maxFileBytes)", f.size));
        }
        let bytes = match std::fs::read(&f.abs_path) {
            Ok(b) if b.len() as u64 > limit => return skipped(format!("file is {} bytes, over the {limit}-byte limit (multimodal.maxFileBytes)", b.len())),
            Ok(b) => b,
            Err(e) => return skipped(format!("cannot read file: {e}")),
        };
        let hash = crate::sha256_hex(&bytes);
        let record = FileRecord { source: f.source, path: f.key.clone(), hash: record_hash(hash.clone(), f.mtime_ms, crate::now_ms()), size: f.size, mtime_ms: f.mtime_ms };
        if old.is_some_and(|o| content_hash(&o.hash) == hash) {
            return Prepared::Touched(record);
        }
        // Distinct from any text chunk's hash: the cache holds the media embedding under it.
        let chunk_hash = crate::sha256_hex(format!("media\u{1f}{mime}\u{1f}{hash}").as_bytes());
        let name_words: String = f.key.chars().map(|c| if c.is_alphanumeric() { c } else { ' ' }).collect();
        let chunk = ChunkRecord {
            id: chunk_id(f.source.as_str(), &f.key, 1, 1, &chunk_hash, &self.model_name()),
            source: f.source,
            path: f.key.clone(),
            start_line: 1,
            end_line: 1,
            terms: document_terms_joined(&name_words),
            heading_terms: heading_terms(""),
            importance: None,
            hash: chunk_hash,
            text: f.key.clone(),
            embedding: None,
        };
        Prepared::Changed { chunks: vec![chunk], record, existed: old.is_some() }
    }

    /// Whether a chunk stands for an image or audio file (embedded from the file, not from its text).
    fn is_media_chunk(&self, c: &ChunkRecord) -> bool {
        self.roots.media && c.source == Source::Memory && media_mime(std::path::Path::new(&c.path)).is_some()
    }

    /// Embed media chunks from their files; returns (hash, vector) pairs, or the error that stopped it.
    async fn embed_media_chunks(&self, embedder: &Arc<dyn EmbeddingProvider>, todo: &[(String, String)]) -> (Vec<(String, Vec<f32>)>, Option<String>) {
        let mut out = Vec::new();
        for (hash, key) in todo {
            let abs = self.roots.abs_path(key);
            let Some(mime) = media_mime(&abs) else { continue };
            let data = match std::fs::read(&abs) {
                Ok(d) => d,
                Err(e) => return (out, Some(format!("{key}: cannot read: {e}"))),
            };
            match embedder.embed_media(&[MediaInput { mime_type: mime.to_string(), data }]).await {
                Ok(mut v) if v.len() == 1 => out.push((hash.clone(), v.pop().unwrap_or_default())),
                Ok(v) => return (out, Some(format!("embedding provider returned {} vectors for 1 media file", v.len()))),
                Err(e) => return (out, Some(format!("{key}: {e}"))),
            }
        }
        (out, None)
    }

    /// A transcript: read only the tail past what was indexed, once it has grown enough; re-read a truncated or
    /// rotated file whole.
    fn prepare_session(&self, f: &MemoryFile, old: Option<&FileRecord>) -> Prepared {
        use std::io::{Read, Seek, SeekFrom};
        let skipped = |why: String| {
            warn!(path = %f.abs_path.display(), reason = %why, "transcript skipped");
            let record = FileRecord { source: f.source, path: f.key.clone(), hash: SKIPPED_HASH.into(), size: f.size, mtime_ms: f.mtime_ms };
            Prepared::Skipped { record, warning: format!("{}: skipped: {why}", f.key) }
        };
        let mut file = match std::fs::File::open(&f.abs_path) {
            Ok(file) => file,
            Err(e) => return skipped(e.to_string()),
        };
        let prefix_hash = |file: &mut std::fs::File, len: u64| -> std::io::Result<String> {
            let mut buf = vec![0u8; len.min(sessions::PREFIX_BYTES as u64) as usize];
            file.seek(SeekFrom::Start(0))?;
            file.read_exact(&mut buf)?;
            Ok(crate::sha256_hex(&buf))
        };
        let delta = &self.config.memory.search.sync.sessions;
        if let Some(st) = old.and_then(|o| SessionState::decode(&o.hash)) {
            let grown = f.size >= st.bytes && prefix_hash(&mut file, st.bytes).is_ok_and(|h| h == st.prefix_hash);
            if grown {
                let mut tail = Vec::new();
                if let Err(e) = file.seek(SeekFrom::Start(st.bytes)).and_then(|_| file.read_to_end(&mut tail)) {
                    return skipped(e.to_string());
                }
                let complete = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                let tail_text = String::from_utf8_lossy(&tail[..complete]);
                let flat = sessions::flatten(&tail_text, st.records + 1);
                if (complete as u64) < delta.delta_bytes && (flat.lines.len() as u64) < delta.delta_messages {
                    return Prepared::Deferred;
                }
                let bytes = st.bytes + complete as u64;
                let state = SessionState {
                    bytes,
                    records: st.records + flat.records,
                    messages: st.messages + flat.lines.len(),
                    prefix_hash: match prefix_hash(&mut file, bytes) {
                        Ok(h) => h,
                        Err(e) => return skipped(e.to_string()),
                    },
                };
                let record = FileRecord { source: f.source, path: f.key.clone(), hash: state.encode(), size: f.size, mtime_ms: f.mtime_ms };
                return Prepared::Appended { chunks: self.session_chunks(f, &flat), record };
            }
            debug!(path = %f.key, "transcript truncated or rotated; re-reading it whole");
        }
        let mut all = Vec::new();
        if let Err(e) = file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_end(&mut all)) {
            return skipped(e.to_string());
        }
        let complete = all.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let flat = sessions::flatten(&String::from_utf8_lossy(&all[..complete]), 1);
        let state = SessionState {
            bytes: complete as u64,
            records: flat.records,
            messages: flat.lines.len(),
            prefix_hash: crate::sha256_hex(&all[..complete.min(sessions::PREFIX_BYTES)]),
        };
        let record = FileRecord { source: f.source, path: f.key.clone(), hash: state.encode(), size: f.size, mtime_ms: f.mtime_ms };
        Prepared::Changed { chunks: self.session_chunks(f, &flat), record, existed: old.is_some() }
    }

    /// Chunks of flattened transcript lines, with line numbers mapped back to the JSONL file.
    fn session_chunks(&self, f: &MemoryFile, flat: &sessions::Flattened) -> Vec<ChunkRecord> {
        let mut chunks = self.make_chunks(f, &flat.text());
        for c in &mut chunks {
            c.start_line = flat.jsonl_lines[c.start_line - 1];
            c.end_line = flat.jsonl_lines[c.end_line - 1];
            c.id = chunk_id(f.source.as_str(), &f.key, c.start_line, c.end_line, &c.hash, &self.model_name());
            c.importance = None;
        }
        unique_chunk_ids(&mut chunks, &self.model_name());
        chunks
    }

    fn make_chunks(&self, f: &MemoryFile, text: &str) -> Vec<ChunkRecord> {
        let c = &self.config.memory.search.chunking;
        let file_importance = importance(text);
        let model = self.model_name();
        let mut chunks: Vec<ChunkRecord> = chunk_text(text, c.tokens, c.overlap)
            .into_iter()
            .map(|ch| ChunkRecord {
                id: chunk_id(f.source.as_str(), &f.key, ch.start_line, ch.end_line, &ch.hash, &model),
                source: f.source,
                path: f.key.clone(),
                start_line: ch.start_line,
                end_line: ch.end_line,
                terms: document_terms_joined(&ch.text),
                heading_terms: heading_terms(&ch.text),
                importance: importance(&ch.text).or(file_importance),
                hash: ch.hash,
                text: ch.text,
                embedding: None,
            })
            .collect();
        unique_chunk_ids(&mut chunks, &model);
        chunks
    }

    /// Send every new chunk that no cache holds to the provider's batch API. Each finished job's vectors go into
    /// the embedding cache as they arrive, so an interrupted backfill keeps them; the jobs themselves are recorded
    /// in the batch state file, so the next run polls them instead of resubmitting.
    async fn run_batch_jobs(
        &self,
        parts: &[Option<Vec<Prepared>>],
        target: &Arc<dyn ChunkStore>,
        cache_from: &Arc<dyn ChunkStore>,
        report: &mut SyncReport,
    ) -> BatchVectors {
        let (Some(embedder), Some(key), Some(state_file)) = (&self.embedder, self.cache_key(), &self.batch_state_file) else {
            return BatchVectors::default();
        };
        let Some(batch) = embedder.batch() else { return BatchVectors::default() };
        let mut seen = HashSet::new();
        let mut items: Vec<BatchItem> = Vec::new();
        for p in parts.iter().flatten().flatten() {
            let chunks = match p {
                Prepared::Changed { chunks, .. } | Prepared::Appended { chunks, .. } => chunks,
                _ => continue,
            };
            for c in chunks {
                if !self.is_media_chunk(c) && seen.insert(c.hash.clone()) {
                    items.push(BatchItem { hash: c.hash.clone(), text: c.text.clone() });
                }
            }
        }
        let use_cache = self.config.memory.search.cache.enabled;
        if use_cache && !items.is_empty() {
            let hashes: Vec<String> = items.iter().map(|i| i.hash.clone()).collect();
            let mut known: HashSet<String> = HashSet::new();
            for store in [target, cache_from] {
                match store.cached_embeddings(&key, &hashes).await {
                    Ok(v) => known.extend(v.into_keys()),
                    Err(e) => warn!(error = %e, "embedding cache read failed"),
                }
                if Arc::ptr_eq(target, cache_from) {
                    break;
                }
            }
            items.retain(|i| !known.contains(&i.hash));
        }
        if items.is_empty() {
            return BatchVectors::default();
        }
        info!(chunks = items.len(), provider = embedder.id(), "embedding through provider batch jobs");
        let max_entries = self.config.memory.search.cache.max_entries;
        let (vectors, outcome) = run_batch(batch, &items, state_file, |delivery| {
            let key = key.clone();
            async move {
                if use_cache {
                    if let Err(e) = target.cache_embeddings(&key, &delivery, max_entries).await {
                        warn!(error = %e, "embedding cache write failed");
                    }
                }
            }
        })
        .await;
        report.chunks_embedded += vectors.len();
        report.warnings.extend(outcome.warnings);
        BatchVectors { vectors, pending: outcome.pending }
    }

    /// Fill embeddings of the batch's new chunks from the cache or the provider. On provider failure the chunks
    /// are stored without vectors (keyword search still finds them) and the file's hash is left empty so the next
    /// sync tries again.
    async fn embed_batch(
        &self,
        batch: &mut SyncBatch,
        target: &Arc<dyn ChunkStore>,
        cache_from: &Arc<dyn ChunkStore>,
        planned: Option<&str>,
        from_batch: &BatchVectors,
        report: &mut SyncReport,
    ) {
        let (Some(embedder), Some(key)) = (&self.embedder, self.cache_key()) else { return };
        if planned != Some(embedder.fingerprint().as_str()) {
            // The provider switched (e.g. to its fallback) since this index was planned: its vectors do not
            // belong here. Index for keyword search now; the next sync rebuilds for the new provider.
            report.warnings.push("embedding provider changed during the sync; vectors left for the next sync".into());
            for (file, _) in batch.upserts.iter_mut().chain(batch.appends.iter_mut()) {
                file.hash.clear();
            }
            return;
        }
        let files = || batch.upserts.iter().chain(batch.appends.iter());
        if files().all(|(_, chunks)| chunks.is_empty()) {
            return;
        }
        let max_entries = self.config.memory.search.cache.max_entries;
        let use_cache = self.config.memory.search.cache.enabled;
        let hashes: Vec<String> = {
            let mut set = HashSet::new();
            files().flat_map(|(_, c)| c.iter()).filter(|c| set.insert(c.hash.clone())).map(|c| c.hash.clone()).collect()
        };
        let mut vectors: HashMap<String, Vec<f32>> = HashMap::new();
        if use_cache {
            match target.cached_embeddings(&key, &hashes).await {
                Ok(v) => vectors.extend(v),
                Err(e) => warn!(error = %e, "embedding cache read failed"),
            }
            if !Arc::ptr_eq(target, cache_from) {
                let missing: Vec<String> = hashes.iter().filter(|h| !vectors.contains_key(*h)).cloned().collect();
                if !missing.is_empty() {
                    match cache_from.cached_embeddings(&key, &missing).await {
                        Ok(v) => {
                            // Carry reused vectors into the new index's cache.
                            let entries: Vec<(String, Vec<f32>)> = v.iter().map(|(h, e)| (h.clone(), e.clone())).collect();
                            if let Err(e) = target.cache_embeddings(&key, &entries, max_entries).await {
                                warn!(error = %e, "embedding cache write failed");
                            }
                            vectors.extend(v);
                        }
                        Err(e) => warn!(error = %e, "embedding cache of the old index unreadable"),
                    }
                }
            }
        }
        // Batch results were written to the cache as they arrived: they count as embedded, not as cached.
        report.embeddings_cached += hashes.iter().filter(|h| vectors.contains_key(*h) && !from_batch.vectors.contains_key(*h)).count();
        // Vectors the batch jobs produced (already counted as embedded).
        for h in &hashes {
            if !vectors.contains_key(h) {
                if let Some(v) = from_batch.vectors.get(h) {
                    vectors.insert(h.clone(), v.clone());
                }
            }
        }

        let mut todo: Vec<(String, String)> = Vec::new();
        let mut media_todo: Vec<(String, String)> = Vec::new();
        let mut queued = HashSet::new();
        for c in files().flat_map(|(_, c)| c.iter()) {
            // Chunks whose batch job still runs wait for it (a later sync collects them).
            if !vectors.contains_key(&c.hash) && !from_batch.pending.contains(&c.hash) && queued.insert(c.hash.clone()) {
                if self.is_media_chunk(c) {
                    media_todo.push((c.hash.clone(), c.path.clone()));
                } else {
                    todo.push((c.hash.clone(), c.text.clone()));
                }
            }
        }
        let mut failed = false;
        if !media_todo.is_empty() {
            if embedder.supports_media() {
                let (entries, error) = self.embed_media_chunks(embedder, &media_todo).await;
                report.chunks_embedded += entries.len();
                if use_cache && !entries.is_empty() {
                    if let Err(e) = target.cache_embeddings(&key, &entries, max_entries).await {
                        warn!(error = %e, "embedding cache write failed");
                    }
                }
                vectors.extend(entries);
                if let Some(e) = error {
                    failed = true;
                    warn!(error = %e, "media embedding failed; media files indexed by name only for now");
                    report.warnings.push(format!("media embedding failed: {e}"));
                }
            } else {
                report.warnings.push(format!(
                    "{} media files indexed by name only: model `{}` does not embed images or audio",
                    media_todo.len(),
                    embedder.model()
                ));
            }
        }
        for part in todo.chunks(EMBED_BATCH) {
            let texts: Vec<String> = part.iter().map(|(_, t)| t.clone()).collect();
            match embedder.embed(&texts, EmbeddingPurpose::Document).await {
                Ok(vs) if vs.len() == texts.len() => {
                    let entries: Vec<(String, Vec<f32>)> = part.iter().map(|(h, _)| h.clone()).zip(vs).collect();
                    report.chunks_embedded += entries.len();
                    if use_cache {
                        if let Err(e) = target.cache_embeddings(&key, &entries, max_entries).await {
                            warn!(error = %e, "embedding cache write failed");
                        }
                    }
                    vectors.extend(entries);
                }
                Ok(vs) => {
                    failed = true;
                    report.warnings.push(format!("embedding provider returned {} vectors for {} texts", vs.len(), texts.len()));
                    break;
                }
                Err(e) => {
                    failed = true;
                    warn!(error = %e, "embedding failed; chunks indexed for keyword search only");
                    report.warnings.push(format!("embedding failed: {e}"));
                    break;
                }
            }
        }
        for (file, chunks) in batch.upserts.iter_mut().chain(batch.appends.iter_mut()) {
            let mut complete = true;
            let mut waiting = false;
            for c in chunks.iter_mut() {
                c.embedding = vectors.get(&c.hash).cloned();
                complete &= c.embedding.is_some();
                waiting |= c.embedding.is_none() && from_batch.pending.contains(&c.hash);
            }
            if !complete && (failed || waiting) {
                file.hash.clear();
            }
        }
    }

    /// Before a search (`sync.onSearch`): compare the files on disk with the index (a stat per file, one read of
    /// the file records) and sync what changed, so the search sees what was just written, rewritten or deleted.
    /// A rebuild in progress is not waited for: the changed files go into the live index meanwhile. Returns the
    /// files the index could not be brought up to date for (the search vouches for their hits itself).
    async fn freshen(&self, warnings: &mut Vec<String>) -> Result<Staleness> {
        self.follow_live().await?;
        let store = self.store();
        if !self.indexed.load(Ordering::Relaxed) && store.identity().await?.is_none() {
            // Never indexed: index first (SPEC: a search on a new workspace answers).
            self.sync(SyncOptions::default()).await?;
            self.indexed.store(true, Ordering::Relaxed);
            return Ok(Staleness::default());
        }
        self.indexed.store(true, Ordering::Relaxed);
        if !self.config.memory.search.sync.on_search {
            return Ok(Staleness::default());
        }
        let hinted = std::mem::take(&mut *self.hinted.lock().unwrap());
        // The stats of the files and the read of the records overlap: together they are the check's cost.
        let listing = tokio::task::spawn_blocking(self.discovery());
        let stored = store.files().await;
        let files = listing.await.map_err(|e| MemoryError::Internal(format!("file discovery failed: {e}")))?;
        let stored = stored?;
        let mut verify = Vec::new();
        let mut stale = stale_for_search(&files, &stored, self.config.memory.search.sync.sessions.delta_bytes, &hinted, &mut verify);
        if !verify.is_empty() {
            // Read moments after they were written: same size and mtime do not prove same content.
            let by_key: HashMap<(Source, &str), &FileRecord> = stored.iter().map(|r| ((r.source, r.path.as_str()), r)).collect();
            for f in verify {
                match self.prepare(f, by_key.get(&(f.source, f.key.as_str())).copied()) {
                    // Same content, still within the settle window: checked again next time.
                    Prepared::Touched(r) if content_hash(&r.hash) != r.hash => {}
                    // Same content and settled now: sync it once, so that its record stops asking for checks.
                    // Anything else changed.
                    _ => {
                        stale.changed.insert((f.source, f.key.clone()));
                    }
                }
            }
        }
        if stale.is_empty() {
            // Freeing a record and a listed file per memory file is a few ms at 20,000 notes: done beside the
            // search rather than before it.
            if files.len() >= PARALLEL_FREE_MIN {
                drop(tokio::task::spawn_blocking(move || drop((files, stored))));
            }
            return Ok(stale);
        }
        debug!(changed = stale.changed.len(), removed = stale.removed.len(), "files changed since the last sync; syncing before the search");
        match self.sync_for_search(files).await {
            Ok(None) => Ok(Staleness::default()),
            Ok(Some(pending)) => {
                warnings.push(pending);
                Ok(Staleness::default())
            }
            Err(why) => {
                warn!(error = %why, "sync before search failed; answering from the current index");
                warnings.push(format!("{} changed files are not in the index yet ({why}); their old text is not returned", stale.len()));
                self.hinted.lock().unwrap().extend(hinted);
                Ok(stale)
            }
        }
    }

    /// Sync `files` into the live index for a search. Waits (at most [`FRESHEN_WAIT`]) for a sync another task
    /// or process is running, never for a rebuild. Returns a warning when a rebuild is pending or running.
    async fn sync_for_search(&self, files: Vec<MemoryFile>) -> Result<Option<String>> {
        let deadline = Instant::now() + FRESHEN_WAIT;
        let mut pause = Duration::from_millis(2);
        // Polls back off from 2 ms to 25 ms: a short sync ends within a few polls, a long wait costs little CPU.
        async fn back_off(pause: &mut Duration) {
            tokio::time::sleep(*pause).await;
            *pause = (*pause * 2).min(Duration::from_millis(25));
        }
        let busy = |what: &str| MemoryError::Unavailable(format!("{what} is still updating the index"));
        // This engine's own sync lock: free, or held by a short sync (wait) or by a rebuild (update live beside it).
        let _guard = loop {
            if self.rebuilding.load(Ordering::SeqCst) {
                let _patch = self.live_patch.lock().await;
                if self.rebuilding.load(Ordering::SeqCst) {
                    self.sync_live(files).await?;
                    return Ok(Some("the index is being rebuilt for new settings; searching the current index, updated with the files that changed".into()));
                }
                continue;
            }
            if let Ok(g) = self.sync_lock.try_lock() {
                break g;
            }
            if Instant::now() >= deadline {
                return Err(busy("another sync of this engine"));
            }
            back_off(&mut pause).await;
        };
        // Other processes: a writer's syncs are short; a rebuild there holds the lock for long, so give up then.
        let _writer = loop {
            match self.storage.writer_lock(false).await {
                Ok(w) => break w,
                Err(e) if e.kind() == crate::ErrorKind::Unavailable && Instant::now() < deadline => back_off(&mut pause).await,
                Err(e) if e.kind() == crate::ErrorKind::Unavailable => return Err(busy("another process")),
                Err(e) => return Err(e),
            }
        };
        self.dirty.store(false, Ordering::SeqCst);
        let pending = self.sync_live(files).await?;
        Ok(pending.then(|| "the index was built with other settings than the configuration now asks for; searching it as it is (updated with the files that changed) until `memory index` rebuilds it".into()))
    }

    /// Sync `files` into the live index with its own identity's settings: when a rebuild is pending, changed
    /// files get vectors only if the live index's embedding settings are still the provider's (else they are
    /// found by their words until the rebuild). The caller holds the locks. Returns whether a rebuild is pending.
    async fn sync_live(&self, files: Vec<MemoryFile>) -> Result<bool> {
        let live = self.store();
        let desired = self.desired_identity();
        let current = live.identity().await?;
        let pending = current.as_ref().is_some_and(|c| *c != desired);
        let planned = match &current {
            Some(c) if pending => c.provider_fingerprint.clone(),
            _ => desired.provider_fingerprint.clone(),
        };
        let result = self.sync_into(&live, &live, planned.as_deref(), Some(files)).await;
        *self.built_fingerprint.write().unwrap() = None;
        let report = result?;
        if !pending {
            live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
        }
        debug!(?report, pending, "synced before a search");
        Ok(pending)
    }

    /// Drop candidates the index cannot vouch for: of files deleted since the last sync, and of changed files
    /// whose current text no longer contains the candidate's (a rewrite; an append keeps the old text valid).
    fn vouch(&self, stale: &Staleness, candidates: Vec<Candidate>) -> Vec<Candidate> {
        if stale.is_empty() {
            return candidates;
        }
        let mut texts: HashMap<FileKey, Option<String>> = HashMap::new();
        candidates
            .into_iter()
            .filter(|c| {
                let key = (c.source, c.path.clone());
                if stale.removed.contains(&key) {
                    return false;
                }
                if !stale.changed.contains(&key) || c.source == Source::Sessions {
                    return true;
                }
                let text = texts.entry(key).or_insert_with(|| {
                    read_text(&self.roots.abs_path(&c.path), self.config.memory.search.max_file_bytes).ok()
                });
                text.as_deref().is_some_and(|t| t.contains(c.text.trim()))
            })
            .collect()
    }

    async fn search_inner(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let query = request.query.trim();
        if query.is_empty() {
            return Err(MemoryError::InvalidInput("query is empty".into()));
        }
        let mut warnings = Vec::new();
        let stale = self.freshen(&mut warnings).await?;
        let store = self.store();
        let q = &self.config.memory.search.query;
        let mut opts = RankingOptions::from_config(&self.config, request.max_results, request.min_score);
        let limit = RankingOptions::candidate_limit(opts.max_results, q.hybrid.candidate_multiplier);

        let terms = query_terms(query);
        // A query without words has no keyword candidates: an answer, not a failure.
        let mut keyword_ok = terms.is_empty();
        let keyword = if terms.is_empty() {
            Vec::new()
        } else {
            match store.keyword_search(&KeywordQuery { terms: terms.clone() }, limit, &request.sources).await {
                Ok(k) => {
                    keyword_ok = true;
                    k
                }
                Err(e) => {
                    warn!(error = %e, "keyword search failed");
                    warnings.push(format!("keyword search unavailable: {e}"));
                    Vec::new()
                }
            }
        };

        let mut vector_ok = false;
        let mut vector = Vec::new();
        let mut query_vector = None;
        let embedder = self.embedder.as_ref().filter(|_| q.hybrid.enabled);
        let embedder = match embedder {
            Some(e) if self.index_fingerprint(&store).await.as_deref() != Some(e.fingerprint().as_str()) => {
                warnings.push(format!("the index holds vectors of other embedding settings than `{}` now has; keyword results only until the next sync rebuilds it", e.id()));
                None
            }
            other => other,
        };
        if let Some(embedder) = embedder {
            match embedder.embed_query(query).await {
                Ok(v) => match store.vector_search(&v, limit, &request.sources).await {
                    Ok(c) => {
                        vector_ok = true;
                        vector = c;
                        query_vector = Some(v);
                    }
                    Err(e) => {
                        warn!(error = %e, "vector search failed");
                        warnings.push(format!("vector search unavailable: {e}"));
                    }
                },
                Err(e) => {
                    warn!(error = %e, "query embedding failed; keyword results only");
                    warnings.push(format!("embeddings unavailable: {e}"));
                }
            }
        }
        if !keyword_ok && !vector_ok && !warnings.is_empty() {
            return Err(MemoryError::Unavailable(warnings.join("; ")));
        }
        let centroid = match (&query_vector, embedder) {
            (Some(_), Some(e)) => self.unrelated_centroid(&store, e).await,
            _ => None,
        };
        opts.vector_floor = query_vector.as_deref().zip(centroid.as_deref()).and_then(|(q, c)| unrelated::floor(q, c));
        let keyword = if keyword_ok {
            self.expand_keyword(&store, &terms, keyword, &vector, &opts, limit, &request.sources).await
        } else {
            keyword
        };
        let vector = match &query_vector {
            Some(qv) if terms.len() >= PRF_MIN_QUERY_TERMS => {
                let (vector, scored_by) = self.expand_vector(&store, qv, &keyword, vector, &opts, limit, &request.sources).await;
                // The candidates' cosines are with the refined vector now: so is the floor.
                if let Some(c) = centroid.as_deref() {
                    opts.vector_floor = unrelated::floor(&scored_by, c);
                }
                vector
            }
            _ => vector,
        };

        let mut exact = Vec::new();
        if !query.contains(char::is_whitespace) {
            for f in store.files_named(query).await? {
                if !request.sources.is_empty() && !request.sources.contains(&f.source) {
                    continue;
                }
                let tier = exact_path_tier(query, &f.path);
                if tier > 0 {
                    if let Some(first) = store.file_chunks(f.source, &f.path, 1).await?.into_iter().next() {
                        exact.push((first, tier));
                    }
                }
            }
        }

        let keyword = self.vouch(&stale, keyword);
        let vector = self.vouch(&stale, vector);
        exact.retain(|(c, _)| !stale.removed.contains(&(c.source, c.path.clone())));
        let results = rank(keyword, vector, exact, query, &opts);
        let mode = match (keyword_ok, vector_ok) {
            (true, true) => "hybrid",
            (false, true) => "vector",
            _ => "keyword",
        };
        Ok(SearchResponse { results, mode: Some(mode.into()), warnings })
    }

    /// The provider fingerprint the live index was built with (cached: it changes only with a sync).
    async fn index_fingerprint(&self, store: &Arc<dyn ChunkStore>) -> Option<String> {
        let handle = Arc::as_ptr(store) as *const () as usize;
        if let Some((h, fp)) = self.built_fingerprint.read().unwrap().clone() {
            if h == handle {
                return fp;
            }
        }
        let fp = store.identity().await.ok().flatten().and_then(|id| id.provider_fingerprint);
        *self.built_fingerprint.write().unwrap() = Some((handle, fp.clone()));
        fp
    }

    /// Pseudo-relevance feedback for questions: terms common to the best hits are searched as a second, lighter
    /// query, and each chunk's BM25 becomes rank(original) + weight x rank(expansion). The best hits are those of
    /// the merged keyword + vector ranking when there are vector candidates (two signals pick better feedback
    /// than one), else the keyword ones. Short queries (names, ids, a word or two) are precise already and skip it.
    #[allow(clippy::too_many_arguments)]
    async fn expand_keyword(
        &self,
        store: &Arc<dyn ChunkStore>,
        terms: &[String],
        keyword: Vec<Candidate>,
        vector: &[Candidate],
        opts: &RankingOptions,
        limit: usize,
        sources: &[Source],
    ) -> Vec<Candidate> {
        if terms.len() < PRF_MIN_QUERY_TERMS || keyword.len() < PRF_DOCS {
            return keyword;
        }
        let ranked = feedback_ranking(&keyword, vector, opts);
        let best = ranked.first().map_or(0.0, |s| s.score);
        let docs: Vec<(&str, f64)> = ranked
            .iter()
            .map(|s| (s.candidate.text.as_str(), if best > 0.0 { s.score / best } else { 1.0 }))
            .collect();
        let extra = expansion_terms(terms, &docs, PRF_TERMS);
        if extra.is_empty() {
            return keyword;
        }
        let expanded = match store.keyword_search(&KeywordQuery { terms: extra }, limit, sources).await {
            Ok(e) => e,
            Err(e) => {
                warn!(error = %e, "expansion query failed; using the original ranking");
                return keyword;
            }
        };
        let mut by_id: HashMap<String, Candidate> = keyword.into_iter().map(|c| (c.chunk_id.clone(), c)).collect();
        for e in expanded {
            let er = e.bm25_rank.unwrap_or(0.0) * PRF_WEIGHT;
            by_id
                .entry(e.chunk_id.clone())
                .and_modify(|c| c.bm25_rank = Some(c.bm25_rank.unwrap_or(0.0) + er))
                .or_insert_with(|| Candidate { bm25_rank: Some(er), ..e });
        }
        let mut merged: Vec<Candidate> = by_id.into_values().collect();
        merged.sort_by(|a, b| a.bm25_rank.unwrap_or(0.0).total_cmp(&b.bm25_rank.unwrap_or(0.0)).then_with(|| a.chunk_id.cmp(&b.chunk_id)));
        merged.truncate(limit);
        merged
    }

    /// Rocchio feedback on the query vector, for questions: the centroid of the stored vectors of the best chunks
    /// of the merged ranking (keyword, after its own feedback, and vector) is added to the query vector with
    /// weight [`VECTOR_PRF_WEIGHT`], and the vector side is searched again with that vector. A question's words
    /// rarely match how the answer is written; the best hits' vectors describe the answer's neighbourhood
    /// (Rocchio 1971; the same holds for dense retrieval). Vector scores are then cosine similarities to the
    /// refined query vector. Any failure keeps the first vector candidates.
    #[allow(clippy::too_many_arguments)]
    async fn expand_vector(
        &self,
        store: &Arc<dyn ChunkStore>,
        query_vector: &[f32],
        keyword: &[Candidate],
        vector: Vec<Candidate>,
        opts: &RankingOptions,
        limit: usize,
        sources: &[Source],
    ) -> (Vec<Candidate>, Vec<f32>) {
        let first = |vector| (vector, query_vector.to_vec());
        if vector.len() < PRF_DOCS {
            return first(vector);
        }
        let ids: Vec<String> = feedback_ranking(keyword, &vector, opts).into_iter().map(|s| s.candidate.chunk_id).collect();
        let stored = match store.chunk_vectors(&ids).await {
            Ok(v) => v,
            Err(e) => {
                warn!(error = %e, "reading feedback vectors failed; using the first vector candidates");
                return first(vector);
            }
        };
        let feedback: Vec<&Vec<f32>> = ids.iter().filter_map(|id| stored.get(id)).filter(|v| v.len() == query_vector.len()).collect();
        // Too few stored vectors (a store that cannot read them back, media chunks) is no centroid.
        if feedback.len() * 2 < ids.len() {
            return first(vector);
        }
        let mut refined = query_vector.to_vec();
        let w = VECTOR_PRF_WEIGHT / feedback.len() as f32;
        for v in feedback {
            for (q, x) in refined.iter_mut().zip(v) {
                *q += w * x;
            }
        }
        crate::embedding::sanitize_and_normalize(&mut refined);
        match store.vector_search(&refined, limit, sources).await {
            Ok(second) if !second.is_empty() => (second, refined),
            Ok(_) => first(vector),
            Err(e) => {
                warn!(error = %e, "feedback vector search failed; using the first vector candidates");
                first(vector)
            }
        }
    }

    /// The probes' centroid for searches on `store` ([`unrelated`]): remembered, else read from the index's meta
    /// (a sync stores it), else embedded now and remembered for this process. `None` when the provider cannot
    /// embed the probes: vector scores then count as raw cosines.
    async fn unrelated_centroid(&self, store: &Arc<dyn ChunkStore>, embedder: &Arc<dyn EmbeddingProvider>) -> Option<Arc<Vec<f32>>> {
        let handle = Arc::as_ptr(store) as *const () as usize;
        let fingerprint = embedder.fingerprint();
        if let Some((h, fp, c)) = self.unrelated_centroid.read().unwrap().as_ref() {
            if *h == handle && *fp == fingerprint {
                return Some(c.clone());
            }
        }
        let stored = match store.meta(unrelated::META_KEY).await {
            Ok(m) => m.and_then(|m| unrelated::decode(&m, &fingerprint)),
            Err(e) => {
                debug!(error = %e, "reading the unrelated-text centroid failed");
                None
            }
        };
        let centroid = match stored {
            Some(c) => c,
            None => {
                // An index synced before probes existed: embed them now, and keep them in the index when its
                // writer lock is free at once (a search never waits for a writer), so later processes read them.
                let c = self.embed_unrelated_probes(embedder).await?;
                match self.storage.writer_lock(false).await {
                    Ok(_writer) => {
                        if let Err(e) = store.set_meta(unrelated::META_KEY, &unrelated::encode(&fingerprint, &c)).await {
                            debug!(error = %e, "storing the unrelated-text centroid failed; the next sync stores it");
                        }
                    }
                    Err(e) => debug!(error = %e, "index busy; the next sync stores the unrelated-text centroid"),
                }
                c
            }
        };
        let centroid = Arc::new(centroid);
        *self.unrelated_centroid.write().unwrap() = Some((handle, fingerprint, centroid.clone()));
        Some(centroid)
    }

    async fn embed_unrelated_probes(&self, embedder: &Arc<dyn EmbeddingProvider>) -> Option<Vec<f32>> {
        let texts: Vec<String> = unrelated::PROBES.iter().map(|t| t.to_string()).collect();
        match embedder.embed(&texts, EmbeddingPurpose::Document).await {
            Ok(vectors) => unrelated::centroid(&vectors),
            Err(e) => {
                warn!(error = %e, "embedding the unrelated-text probes failed; vector scores count from 0");
                None
            }
        }
    }

    /// Store the probes' centroid in `target` once per provider (a sync's last step), so that searches read it
    /// instead of embedding the probes: carried over from `cache_from` (the old index, in a rebuild) when it has
    /// it, like the embedding cache, else embedded. A failure is logged: searches then embed the probes themselves.
    async fn record_unrelated_centroid(&self, target: &Arc<dyn ChunkStore>, cache_from: &Arc<dyn ChunkStore>, planned: Option<&str>) {
        let Some(embedder) = &self.embedder else { return };
        let fingerprint = embedder.fingerprint();
        if planned != Some(fingerprint.as_str()) {
            return;
        }
        // The stored value, when it counts for this provider.
        async fn stored(store: &Arc<dyn ChunkStore>, fingerprint: &str) -> Result<Option<String>> {
            Ok(store.meta(unrelated::META_KEY).await?.filter(|m| unrelated::decode(m, fingerprint).is_some()))
        }
        match stored(target, &fingerprint).await {
            Ok(Some(_)) => return,
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "reading the unrelated-text centroid failed");
                return;
            }
        }
        let carried = if Arc::ptr_eq(target, cache_from) {
            None
        } else {
            stored(cache_from, &fingerprint).await.unwrap_or_else(|e| {
                debug!(error = %e, "the old index's unrelated-text centroid is unreadable; embedding the probes");
                None
            })
        };
        let value = match carried {
            Some(v) => v,
            None => match self.embed_unrelated_probes(embedder).await {
                Some(centroid) => unrelated::encode(&fingerprint, &centroid),
                None => return,
            },
        };
        if let Err(e) = target.set_meta(unrelated::META_KEY, &value).await {
            warn!(error = %e, "storing the unrelated-text centroid failed");
        }
    }

    /// Files the next search would sync first (the freshness check's rule, without reading any file).
    fn count_stale(&self, stored: &[FileRecord]) -> usize {
        let files = self.discover_all();
        let hinted = self.hinted.lock().unwrap().clone();
        let mut unverified = Vec::new();
        stale_for_search(&files, stored, self.config.memory.search.sync.sessions.delta_bytes, &hinted, &mut unverified).len()
    }
}

#[async_trait]
impl MemoryBackend for IndexedBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn set_progress(&self, f: Option<ProgressFn>) {
        *self.progress.write().unwrap() = f;
    }

    fn notify_changed(&self, paths: &[PathBuf]) {
        let mut hinted = self.hinted.lock().unwrap();
        for p in paths {
            let abs = if p.is_absolute() { p.clone() } else { self.roots.workspace.join(p) };
            hinted.insert(self.hint_key(&abs));
        }
    }

    fn capabilities(&self) -> Capabilities {
        let vector = self.embedder.is_some();
        Capabilities {
            keyword: self.keyword_capable,
            vector,
            hybrid: vector && self.keyword_capable,
            persistent: true,
            shared_ranking: true,
            cjk: true,
            sessions: self.sessions_dir.is_some(),
        }
    }

    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        self.search_inner(request).await
    }

    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        access::read(&self.roots, request, self.config.memory.search.max_file_bytes)
    }

    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        let _guard = self.sync_lock.lock().await;
        let _writer = self.storage.writer_lock(true).await?;
        self.dirty.store(false, Ordering::SeqCst);
        self.sync_inner(options).await
    }

    async fn status(&self) -> Result<Status> {
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
        let skipped: Vec<&str> = stored.iter().filter(|f| f.hash == SKIPPED_HASH).map(|f| f.path.as_str()).collect();
        if !skipped.is_empty() {
            warnings.push(format!("{} files skipped (binary, not UTF-8 or too large): {}", skipped.len(), skipped.join(", ")));
        }
        let pending = stored.iter().filter(|f| f.hash.is_empty()).count();
        if pending > 0 {
            warnings.push(format!("{pending} files are waiting for embeddings (keyword search finds them)"));
        }
        let batch_disabled = self.embedder.as_ref().and_then(|e| e.batch()).and_then(|b| b.disabled_reason());
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
            extra.insert(
                "batch".into(),
                serde_json::json!({ "enabled": batch_disabled.is_none(), "disabledReason": batch_disabled }),
            );
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
            dirty: stale > 0 || self.dirty.load(Ordering::SeqCst),
            rebuild_pending,
            fallback: None,
            warnings,
            extra,
        })
    }

    async fn reset(&self) -> Result<()> {
        let _guard = self.sync_lock.lock().await;
        let _writer = self.storage.writer_lock(true).await?;
        self.store().close().await?;
        self.storage.destroy().await?;
        let marker = self.storage.live_marker().await?;
        let store = self.storage.open_live().await?;
        self.set_live(store, marker);
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        self.store().close().await
    }
}

#[cfg(test)]
mod tests;
