//! An in-memory memory engine written against the public API of `memory-core` only, as an engine in another
//! repository would be. It implements the two storage traits (`ChunkStore`: storage plus candidate retrieval,
//! `IndexStorage`: where the live index is and how a rebuild is swapped in) and gets discovery, incremental
//! sync, chunking, embeddings and the shared ranking from `memory_core::indexed::IndexedBackend`.
//!
//! Keyword retrieval is a small BM25 over the analysed terms `memory-core` hands to every store (so it matches
//! exactly what the other engines match); vector retrieval is a brute-force cosine scan.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use memory_core::embedding::cosine;
use memory_core::identity::IndexIdentity;
use memory_core::indexed::IndexedBackend;
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::store::{Candidate, ChunkRecord, ChunkStore, EmbeddingCacheKey, FileRecord, IndexStorage, KeywordQuery, Scope, SyncBatch};
use memory_core::{
    Capabilities, GetRequest, GetResponse, MemoryBackend, MemoryError, Result, SearchRequest, SearchResponse, Source, Status, SyncOptions, SyncReport,
};

/// BM25 parameters, and the weight of heading terms relative to body terms.
const K1: f64 = 1.2;
const B: f64 = 0.75;
const HEADING_WEIGHT: f64 = 0.5;

/// (provider, model, fingerprint, chunk hash).
type CacheKey = (String, String, String, String);

#[derive(Default)]
struct State {
    identity: Option<IndexIdentity>,
    files: BTreeMap<(Source, String), FileRecord>,
    /// Chunk id -> chunk.
    chunks: BTreeMap<String, ChunkRecord>,
    /// Embedding cache: (provider, model, fingerprint, chunk hash) -> vector, with insertion order for pruning.
    cache: HashMap<CacheKey, (u64, Vec<f32>)>,
    cache_seq: u64,
    meta: HashMap<String, String>,
}

/// One in-memory index.
#[derive(Default)]
pub struct MemStore {
    state: Mutex<State>,
}

fn candidate(c: &ChunkRecord, files: &BTreeMap<(Source, String), FileRecord>) -> Candidate {
    Candidate {
        chunk_id: c.id.clone(),
        source: c.source,
        path: c.path.clone(),
        start_line: c.start_line,
        end_line: c.end_line,
        text: c.text.clone(),
        importance: c.importance,
        date: c.date,
        file_mtime_ms: files.get(&(c.source, c.path.clone())).map_or(0, |f| f.mtime_ms),
        keyword_score: None,
        vector_score: None,
    }
}

fn wanted(sources: &[Source], s: Source) -> bool {
    sources.is_empty() || sources.contains(&s)
}

#[async_trait]
impl ChunkStore for MemStore {
    fn location(&self) -> String {
        "memory://in-process".into()
    }

    async fn identity(&self) -> Result<Option<IndexIdentity>> {
        Ok(self.state.lock().unwrap().identity.clone())
    }

    async fn set_identity(&self, identity: &IndexIdentity) -> Result<()> {
        self.state.lock().unwrap().identity = Some(identity.clone());
        Ok(())
    }

    async fn files(&self) -> Result<Vec<FileRecord>> {
        Ok(self.state.lock().unwrap().files.values().cloned().collect())
    }

    /// All of a batch or nothing: the lock is held for the whole batch.
    async fn apply(&self, batch: SyncBatch) -> Result<()> {
        fn drop_file(st: &mut State, source: Source, path: &str) {
            st.files.remove(&(source, path.to_string()));
            st.chunks.retain(|_, c| !(c.source == source && c.path == path));
        }
        let mut guard = self.state.lock().unwrap();
        let st = &mut *guard;
        for (source, path) in &batch.removals {
            drop_file(st, *source, path);
        }
        for (file, chunks) in batch.upserts {
            drop_file(st, file.source, &file.path);
            for c in chunks {
                st.chunks.insert(c.id.clone(), c);
            }
            st.files.insert((file.source, file.path.clone()), file);
        }
        // A growing transcript: its new chunks join the old ones.
        for (file, chunks) in batch.appends {
            for c in chunks {
                st.chunks.insert(c.id.clone(), c);
            }
            st.files.insert((file.source, file.path.clone()), file);
        }
        for file in batch.touches {
            st.files.insert((file.source, file.path.clone()), file);
        }
        Ok(())
    }

    async fn file_chunks(&self, source: Source, path: &str, limit: usize) -> Result<Vec<Candidate>> {
        let st = self.state.lock().unwrap();
        let mut out: Vec<Candidate> = st.chunks.values().filter(|c| c.source == source && c.path == path).map(|c| candidate(c, &st.files)).collect();
        out.sort_by_key(|c| c.start_line);
        out.truncate(limit);
        Ok(out)
    }

    /// BM25 over the chunks' analysed terms; any query term may match. The score is BM25 itself (higher is
    /// better), as `Candidate::keyword_score` asks.
    /// The statistics (document count, lengths, frequencies) are those of the scope's sources; its days only
    /// choose which of the scored chunks are returned, so a search within dates scores as the whole search does.
    async fn keyword_search(&self, query: &KeywordQuery, limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        let st = self.state.lock().unwrap();
        let docs: Vec<(&ChunkRecord, Vec<&str>, Vec<&str>)> = st
            .chunks
            .values()
            .filter(|c| wanted(&scope.sources, c.source))
            .map(|c| (c, c.terms.split_whitespace().collect(), c.heading_terms.split_whitespace().collect()))
            .collect();
        if docs.is_empty() || query.terms.is_empty() {
            return Ok(Vec::new());
        }
        let n = docs.len() as f64;
        let avg_body = docs.iter().map(|d| d.1.len()).sum::<usize>() as f64 / n;
        let avg_head = (docs.iter().map(|d| d.2.len()).sum::<usize>() as f64 / n).max(1.0);
        let bm25 = |tf: f64, len: f64, avg: f64, df: f64| {
            if tf == 0.0 {
                return 0.0;
            }
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg.max(1.0)))
        };
        // Document frequency of each query term.
        let dfs: Vec<f64> =
            query.terms.iter().map(|t| docs.iter().filter(|d| d.1.contains(&t.as_str()) || d.2.contains(&t.as_str())).count() as f64).collect();
        let mut scored: Vec<(f64, &ChunkRecord)> = Vec::new();
        for (c, body, head) in &docs {
            let mut score = 0.0;
            for (t, &df) in query.terms.iter().zip(&dfs) {
                let tf_body = body.iter().filter(|x| **x == t.as_str()).count() as f64;
                let tf_head = head.iter().filter(|x| **x == t.as_str()).count() as f64;
                score += bm25(tf_body, body.len() as f64, avg_body, df) + HEADING_WEIGHT * bm25(tf_head, head.len() as f64, avg_head, df);
            }
            if score > 0.0 && scope.admits(c.source, c.date) {
                scored.push((score, c));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));
        Ok(scored.into_iter().take(limit).map(|(s, c)| Candidate { keyword_score: Some(s), ..candidate(c, &st.files) }).collect())
    }

    async fn vector_search(&self, vector: &[f32], limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        let st = self.state.lock().unwrap();
        // The cosine of vectors of two widths means nothing: refuse, as the other stores do.
        if let Some(width) = st.chunks.values().find_map(|c| c.embedding.as_ref().map(Vec::len)) {
            if width != vector.len() {
                return Err(MemoryError::InvalidInput(format!("query vector has {} dimensions, the index holds {width}", vector.len())));
            }
        }
        let mut scored: Vec<(f64, &ChunkRecord)> = st
            .chunks
            .values()
            .filter(|c| wanted(&scope.sources, c.source))
            .filter_map(|c| c.embedding.as_ref().map(|e| (cosine(vector, e), c)))
            .collect();
        if scored.is_empty() {
            return Err(MemoryError::Unavailable("no vectors indexed yet".into()));
        }
        scored.retain(|(_, c)| scope.admits(c.source, c.date));
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok(scored.into_iter().take(limit).map(|(s, c)| Candidate { vector_score: Some(s), ..candidate(c, &st.files) }).collect())
    }

    async fn chunk_vectors(&self, chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        let st = self.state.lock().unwrap();
        Ok(chunk_ids.iter().filter_map(|id| st.chunks.get(id).and_then(|c| c.embedding.clone()).map(|v| (id.clone(), v))).collect())
    }

    async fn cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        let st = self.state.lock().unwrap();
        Ok(hashes
            .iter()
            .filter_map(|h| {
                st.cache.get(&(key.provider.clone(), key.model.clone(), key.fingerprint.clone(), h.clone())).map(|(_, v)| (h.clone(), v.clone()))
            })
            .collect())
    }

    async fn cache_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        for (h, v) in entries {
            st.cache_seq += 1;
            let seq = st.cache_seq;
            st.cache.insert((key.provider.clone(), key.model.clone(), key.fingerprint.clone(), h.clone()), (seq, v.clone()));
        }
        if st.cache.len() > max_entries {
            // Oldest first.
            let mut seqs: Vec<u64> = st.cache.values().map(|(s, _)| *s).collect();
            seqs.sort_unstable();
            let cut = seqs[st.cache.len() - max_entries - 1];
            st.cache.retain(|_, (s, _)| *s > cut);
        }
        Ok(())
    }

    async fn counts(&self) -> Result<(usize, usize)> {
        let st = self.state.lock().unwrap();
        Ok((st.files.len(), st.chunks.len()))
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self.state.lock().unwrap().meta.get(key).cloned())
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.state.lock().unwrap().meta.insert(key.into(), value.into());
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// Where the live in-memory index is. A rebuild fills a fresh store beside the live one; `promote` makes it
/// the live one only once it is complete, so searches answer from the old index meanwhile.
#[derive(Default)]
pub struct MemStorage {
    live: Mutex<Option<Arc<dyn ChunkStore>>>,
}

#[async_trait]
impl IndexStorage for MemStorage {
    async fn open_live(&self) -> Result<Arc<dyn ChunkStore>> {
        let mut live = self.live.lock().unwrap();
        Ok(live.get_or_insert_with(|| Arc::new(MemStore::default())).clone())
    }

    async fn open_staging(&self) -> Result<Arc<dyn ChunkStore>> {
        Ok(Arc::new(MemStore::default()))
    }

    async fn promote(&self, _live: Arc<dyn ChunkStore>, staging: Arc<dyn ChunkStore>) -> Result<Arc<dyn ChunkStore>> {
        *self.live.lock().unwrap() = Some(staging.clone());
        Ok(staging)
    }

    async fn destroy(&self) -> Result<()> {
        *self.live.lock().unwrap() = None;
        Ok(())
    }

    fn location(&self) -> String {
        "memory://in-process".into()
    }
}

/// The engine: `IndexedBackend` over the in-memory storage, declaring that its index does not survive a
/// restart (`persistent: false`).
pub struct InMemoryEngine {
    inner: IndexedBackend,
}

impl InMemoryEngine {
    pub fn capabilities_of(inner: &IndexedBackend) -> Capabilities {
        Capabilities { persistent: false, ..inner.capabilities() }
    }
}

#[async_trait]
impl MemoryBackend for InMemoryEngine {
    fn name(&self) -> &str {
        "in-memory"
    }
    fn capabilities(&self) -> Capabilities {
        Self::capabilities_of(&self.inner)
    }
    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        self.inner.search(request).await
    }
    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        self.inner.get(request).await
    }
    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        self.inner.sync(options).await
    }
    async fn status(&self) -> Result<Status> {
        let mut s = self.inner.status().await?;
        s.capabilities = self.capabilities();
        Ok(s)
    }
    async fn reset(&self) -> Result<()> {
        self.inner.reset().await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

/// Opens the in-memory engine: what a host registers under `memory.backend = "in-memory"`.
pub struct InMemoryFactory;

#[async_trait]
impl BackendFactory for InMemoryFactory {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        let storage = Arc::new(MemStorage::default());
        let inner = IndexedBackend::open_for("in-memory", &ctx, storage).await?;
        Ok(Box::new(InMemoryEngine { inner }))
    }
}
