//! Opening the engine: its store, its identity checked against the index found (a changed model or layout
//! rebuilds beside it), and the sessions and batch-state options a host adds.

use super::*;

impl IndexedBackend {
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
    pub(super) async fn open_with_roots(
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
            files: files::Files::new(roots, &config.memory.search),
            config,
            storage,
            live: live::LiveIndex::new(live, live_marker),
            embedder,
            writer: writer::Writer::default(),
            freshness: freshness::Freshness::default(),
            progress: RwLock::new(None),
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
        let engine = IndexedBackend::open_with_roots(
            name.clone(),
            ctx.config.clone(),
            crate::discovery::MemoryRoots::for_search(space.workspace(), &ctx.config.memory.search),
            storage,
            ctx.embedder.clone(),
        )
        .await?;
        let mut engine = engine.with_batch_state_file(space.batch_jobs_file(&name));
        engine.reranker = ctx.reranker.clone();
        Ok(if ctx.config.memory.search.sources.contains(&Source::Sessions) { engine.with_sessions_dir(space.sessions_dir()) } else { engine })
    }

    /// Index session transcripts from `dir` when `memory.search.sources` includes `sessions`.
    pub fn with_sessions_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.files.set_sessions_dir(dir.into());
        self
    }

    /// Record provider batch jobs in `path` (used when the embedder has a batch API, `remote.batch.enabled`).
    pub fn with_batch_state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.batch_state_file = Some(path.into());
        self
    }
}
