//! Embedding a sync's new chunks: the embedding cache (this index's, then the old one's in a rebuild), provider
//! batch jobs, media, and synchronous calls for the rest.

use super::*;

/// Texts per embedding call (providers split further by their token budget).
const EMBED_BATCH: usize = 64;

/// What one sync's embedding step works with besides the batch: the store it fills and the one whose cache it
/// reads too (the old index during a rebuild), the provider fingerprint it was planned for, what provider batch
/// jobs already produced, and how long it waits for the provider.
#[derive(Clone, Copy)]
pub(super) struct EmbedStep<'a> {
    pub target: &'a Arc<dyn ChunkStore>,
    pub cache_from: &'a Arc<dyn ChunkStore>,
    pub planned: Option<&'a str>,
    pub from_batch: &'a BatchVectors,
    pub bound: patience::Bound,
    /// With [`patience::Bound::WordsOnly`]: where the chunks left for the provider are collected, to be embedded
    /// outside the index's locks ([`IndexedBackend::embed_collected`]).
    pub collect: Option<&'a Mutex<Collected>>,
}

/// How one sync gets its vectors: how long it waits for the provider and, for a sync beside searches
/// ([`IndexedBackend::sync_beside_searches`]), where a words-only pass collects the chunks left for the provider,
/// or the vectors computed for them outside the locks.
pub(super) struct SyncVectors<'a> {
    pub bound: patience::Bound,
    pub collect: Option<&'a Mutex<Collected>>,
    pub computed: Option<BatchVectors>,
}

impl From<patience::Bound> for SyncVectors<'_> {
    fn from(bound: patience::Bound) -> Self {
        SyncVectors { bound, collect: None, computed: None }
    }
}

/// Chunks a words-only pass left for the provider: (hash, text) and, for media, (hash, file key).
#[derive(Default)]
pub(super) struct Collected {
    texts: Vec<(String, String)>,
    media: Vec<(String, String)>,
    seen: HashSet<String>,
}

impl Collected {
    pub(super) fn is_empty(&self) -> bool {
        self.texts.is_empty() && self.media.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.texts.len() + self.media.len()
    }
}

impl IndexedBackend {
    /// Embed media chunks from their files; returns (hash, vector) pairs, or the error that stopped it.
    pub(super) async fn embed_media_chunks(
        &self,
        embedder: &Arc<dyn EmbeddingProvider>,
        todo: &[(String, String)],
        bound: patience::Bound,
    ) -> (Vec<(String, Vec<f32>)>, Option<String>) {
        let mut out = Vec::new();
        for (hash, key) in todo {
            let abs = self.roots().abs_path(key);
            let Some(mime) = media_mime(&abs) else { continue };
            let data = match std::fs::read(&abs) {
                Ok(d) => d,
                Err(e) => return (out, Some(format!("{key}: cannot read: {e}"))),
            };
            match self.patience.call(bound, embedder.embed_media(&[MediaInput { mime_type: mime.to_string(), data }])).await {
                Ok(mut v) if v.len() == 1 => out.push((hash.clone(), v.pop().unwrap_or_default())),
                Ok(v) => return (out, Some(format!("embedding provider returned {} vectors for 1 media file", v.len()))),
                Err(e) => return (out, Some(format!("{key}: {e}"))),
            }
        }
        (out, None)
    }

    /// Send every new chunk that no cache holds to the provider's batch API. Each finished job's vectors go into
    /// the embedding cache as they arrive, so an interrupted backfill keeps them; the jobs themselves are recorded
    /// in the batch state file, so the next run polls them instead of resubmitting.
    pub(super) async fn run_batch_jobs(
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
            let (Prepared::Changed { chunks, .. } | Prepared::Appended { chunks, .. }) = p else { continue };
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
    pub(super) async fn embed_batch(&self, batch: &mut SyncBatch, step: &EmbedStep<'_>, report: &mut SyncReport) {
        let EmbedStep { target, cache_from, planned, from_batch, bound, collect } = *step;
        let (Some(embedder), Some(key)) = (&self.embedder, self.cache_key()) else { return };
        if planned != Some(embedder.fingerprint().as_str()) {
            // The provider switched (e.g. to its fallback) since this index was planned: its vectors do not
            // belong here. Index for keyword search now; the next sync rebuilds for the new provider.
            report.warnings.push("embedding provider changed during the sync; vectors left for the next sync".into());
            for (file, _) in batch.upserts.iter_mut().chain(batch.appends.iter_mut()) {
                file.hash = FileState::Pending.to_stored();
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
        if bound.words_only() {
            // Media a model cannot embed are indexed by name, as below: they do not wait.
            failed = !todo.is_empty() || (embedder.supports_media() && !media_todo.is_empty());
            if let Some(collect) = collect {
                let mut collected = collect.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let Collected { texts, media, seen } = &mut *collected;
                texts.extend(todo.drain(..).filter(|(h, _)| seen.insert(h.clone())));
                if embedder.supports_media() {
                    media.extend(media_todo.iter().filter(|(h, _)| seen.insert(h.clone())).cloned());
                }
            }
            (todo, media_todo) = (Vec::new(), Vec::new());
        }
        // A bounded sync, and the provider failed slowly moments ago: its chunks wait for a later sync.
        else if let Some(why) = bound.bounded().then(|| self.patience.paused()).flatten().filter(|_| !todo.is_empty() || !media_todo.is_empty()) {
            debug!(reason = %why, "embedding skipped for this sync; indexed by words");
            report.warnings.push(patience::left_for_later(&why));
            (todo, media_todo, failed) = (Vec::new(), Vec::new(), true);
        }
        if !media_todo.is_empty() {
            if embedder.supports_media() {
                let (entries, error) = self.embed_media_chunks(embedder, &media_todo, bound).await;
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
        let cache = use_cache.then_some((target, &key, max_entries));
        let (entries, stopped) = self.embed_texts(embedder, &todo, bound, cache, report).await;
        report.chunks_embedded += entries.len();
        vectors.extend(entries);
        failed |= stopped;
        for (file, chunks) in batch.upserts.iter_mut().chain(batch.appends.iter_mut()) {
            let mut complete = true;
            let mut waiting = false;
            for c in chunks.iter_mut() {
                c.embedding = vectors.get(&c.hash).cloned();
                complete &= c.embedding.is_some();
                waiting |= c.embedding.is_none() && from_batch.pending.contains(&c.hash);
            }
            if !complete && (failed || waiting) {
                file.hash = FileState::Pending.to_stored();
            }
        }
    }

    /// Embed what a words-only pass collected, outside the index's locks (searches sync and answer meanwhile),
    /// each call within `bound` and none while the provider is paused; stops at the first failure, which
    /// `report` says. The vectors, by chunk hash, for a second pass to apply.
    pub(super) async fn embed_collected(&self, collected: Collected, bound: patience::Bound, report: &mut SyncReport) -> HashMap<String, Vec<f32>> {
        let mut vectors = HashMap::new();
        let Some(embedder) = &self.embedder else { return vectors };
        if let Some(why) = self.patience.paused() {
            report.warnings.push(patience::left_for_later(&why));
            return vectors;
        }
        if !collected.media.is_empty() && embedder.supports_media() {
            let (entries, error) = self.embed_media_chunks(embedder, &collected.media, bound).await;
            vectors.extend(entries);
            if let Some(e) = error {
                warn!(error = %e, "media embedding failed; media files indexed by name only for now");
                report.warnings.push(format!("media embedding failed: {e}"));
            }
        }
        // Outside the locks nothing is written: the vectors go to the cache with the pass that applies them.
        let (entries, _) = self.embed_texts(embedder, &collected.texts, bound, None, report).await;
        vectors.extend(entries);
        report.chunks_embedded += vectors.len();
        vectors
    }

    /// Embed `todo` ((hash, text) pairs) as documents, [`EMBED_BATCH`] texts a call, each call within `bound`, each
    /// call's vectors written to `cache` (store, key, max entries) as they come, so an interrupted sync keeps them.
    /// Stops at the first failure, which `report`'s warnings say. The vectors by hash, and whether it stopped.
    async fn embed_texts(
        &self,
        embedder: &Arc<dyn EmbeddingProvider>,
        todo: &[(String, String)],
        bound: patience::Bound,
        cache: Option<(&Arc<dyn ChunkStore>, &EmbeddingCacheKey, usize)>,
        report: &mut SyncReport,
    ) -> (Vec<(String, Vec<f32>)>, bool) {
        let mut out = Vec::new();
        for part in todo.chunks(EMBED_BATCH) {
            let texts: Vec<String> = part.iter().map(|(_, t)| t.clone()).collect();
            let call_bound = bound.for_call(embedder.call_timeout(&texts));
            match self.patience.call(call_bound, embedder.embed(&texts, EmbeddingPurpose::Document)).await {
                Ok(vs) if vs.len() == texts.len() => {
                    let entries: Vec<(String, Vec<f32>)> = part.iter().map(|(h, _)| h.clone()).zip(vs).collect();
                    if let Some((store, key, max_entries)) = cache {
                        if let Err(e) = store.cache_embeddings(key, &entries, max_entries).await {
                            warn!(error = %e, "embedding cache write failed");
                        }
                    }
                    out.extend(entries);
                }
                Ok(vs) => {
                    report.warnings.push(format!("embedding provider returned {} vectors for {} texts", vs.len(), texts.len()));
                    return (out, true);
                }
                Err(e) => {
                    // A stand-in's reason was said once when it was built; the sync's report keeps it.
                    if embedder.unavailable().is_some() {
                        debug!(error = %e, "embedding failed; chunks indexed for keyword search only");
                    } else {
                        warn!(error = %e, "embedding failed; chunks indexed for keyword search only");
                    }
                    report.warnings.push(format!("embedding failed: {e}"));
                    // Why the files wait, for `status` in any process (a read-only index keeps none).
                    if let Err(note) = self.store().set_meta(super::META_LAST_EMBED_FAILURE, &format!("{} {e}", crate::now_ms())).await {
                        debug!(error = %note, "cannot record the embedding failure");
                    }
                    return (out, true);
                }
            }
        }
        (out, false)
    }
}
