//! SQLite storage: one database file per index, WAL, a writer and a reader connection (searches never wait
//! for a sync's write transaction), FTS5 over the analysed terms, vec0 for vectors.
//!
//! This file holds the store and its `ChunkStore` face; each concern lives in its own part: opening and the
//! connections (`connection`), rows as the engine's types (`rows`), writes (`writes`), keyword and vector reads
//! (`keyword_search`, `vector_search`), file reads (`file_records`), the embedding cache, the metadata and the
//! damage checks (`integrity`).

mod connection;
mod embedding_cache;
mod file_records;
mod integrity;
mod keyword_plan;
mod keyword_search;
mod meta;
mod quantized;
mod rows;
mod schema;
mod storage;
mod vector_search;
mod vectors;
mod writes;

pub use keyword_search::fts_match_expression;
pub(crate) use schema::create as create_schema;
pub use storage::SqliteStorage;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use async_trait::async_trait;
use memory_core::identity::IndexIdentity;
use memory_core::locks::ResetOnPoison;
use memory_core::store::{Candidate, ChunkStore, EmbeddingCacheKey, FileRecord, KeywordQuery, Scope, SyncBatch};
use memory_core::{MemoryError, Result, Source};
use rusqlite::Connection;

/// One index database.
pub struct SqliteStore {
    path: PathBuf,
    /// Why the index was opened read-only (it cannot be written: a read-only or full file system); writes fail
    /// with this cause.
    read_only: Option<String>,
    writer: Mutex<Option<Connection>>,
    reader: Mutex<Option<Connection>>,
    /// The in-memory int8 copy of the vectors the reader connection sees (vectors.rs); locked after `reader`.
    vectors: Mutex<Option<vectors::VectorCopy>>,
    /// Set by the first vector search (answered without the copy: `vectors::exact_first`).
    searched_vectors: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl ChunkStore for SqliteStore {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    async fn identity(&self) -> Result<Option<IndexIdentity>> {
        match self.meta("identity").await? {
            None => Ok(None),
            Some(raw) => IndexIdentity::from_json(&raw)
                .map(Some)
                .ok_or_else(|| MemoryError::CorruptIndex(format!("{}: unreadable index identity", self.path.display()))),
        }
    }

    async fn set_identity(&self, identity: &IndexIdentity) -> Result<()> {
        self.set_meta("identity", &identity.to_json()).await
    }

    async fn files(&self) -> Result<Vec<FileRecord>> {
        self.list_files()
    }

    async fn file_records(&self, keys: &[(Source, String)]) -> Result<Vec<FileRecord>> {
        self.read_file_records(keys)
    }

    async fn files_named(&self, query: &str) -> Result<Vec<FileRecord>> {
        self.find_files_named(query)
    }

    async fn apply(&self, batch: SyncBatch) -> Result<()> {
        self.apply_batch(batch)
    }

    async fn file_chunks(&self, source: Source, path: &str, limit: usize) -> Result<Vec<Candidate>> {
        self.read_file_chunks(source, path, limit)
    }

    async fn keyword_search(&self, query: &KeywordQuery, limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        self.keyword_candidates(query, limit, scope, true)
    }

    async fn vector_search(&self, vector: &[f32], limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        self.nearest_candidates(vector, limit, scope)
    }

    async fn chunk_vectors(&self, chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        self.read_chunk_vectors(chunk_ids)
    }

    async fn cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        self.read_cached_embeddings(key, hashes)
    }

    async fn cache_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()> {
        self.write_cached_embeddings(key, entries, max_entries)
    }

    async fn counts(&self) -> Result<(usize, usize)> {
        self.read("count", |c| {
            let files: i64 = c.query_row("SELECT count(*) FROM files", [], |r| r.get(0))?;
            // Kept by triggers: `count(*)` would read the whole table.
            let chunks = schema::chunk_count(c)?;
            Ok((files as usize, chunks as usize))
        })
    }

    async fn files_waiting_for_vectors(&self) -> Result<usize> {
        // `files_waiting` holds these records alone: the count reads the backlog, not every record.
        self.read("count files waiting for vectors", |c| c.query_row("SELECT count(*) FROM files WHERE hash = ''", [], |r| r.get::<_, i64>(0)))
            .map(|n| n.max(0) as usize)
    }

    fn read_only(&self) -> Option<String> {
        self.read_only.clone()
    }

    async fn verify(&self) -> Result<Option<String>> {
        self.verify_index()
    }

    async fn status_details(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        let mut m = serde_json::Map::new();
        if let Some((n, bytes)) = vectors::describe(&self.vectors.locked_or_reset()) {
            m.insert("vectorCopy".into(), serde_json::json!({"vectors": n, "bytes": bytes}));
        }
        Ok(m)
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        self.read_meta(key)
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.write_meta(key, value)
    }

    async fn close(&self) -> Result<()> {
        self.close_now();
        Ok(())
    }
}
