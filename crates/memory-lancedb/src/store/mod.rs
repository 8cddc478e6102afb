//! [`LanceStore`]: one generation of an agent's index (data, meta and embedding-cache tables).
//!
//! This file holds the store, its run-time state and its `ChunkStore` face; each concern lives in its own part:
//! reaching the tables (`tables`), writes (`writes`), keyword and vector search (`search`), the embedding cache,
//! the meta table, and the index maintenance (`maintenance`).

use memory_core::locks::{LockExt, RwLockExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::Instant;

use async_trait::async_trait;
use lancedb::query::{QueryBase, Select};
use lancedb::{Connection, Table};
use memory_core::identity::IndexIdentity;
use memory_core::store::{Candidate, ChunkStore, EmbeddingCacheKey, FileRecord, KeywordQuery, Scope, SyncBatch};
use memory_core::{MemoryError, Result, Source};

use crate::error::map_err;
use crate::filters::sql_str;
use crate::schema::*;
use crate::storage::Shared;

mod embedding_cache;
mod maintenance;
mod meta;
mod search;
mod tables;
mod writes;

pub(crate) use maintenance::optimize_table;
use maintenance::AnnBuild;
pub use maintenance::{ann_partitions, auto_nprobes, create_ann_index};
use meta::META_IDENTITY;
pub(crate) use writes::reader;

/// Hashes per `IN (...)` list when reading the embedding cache.
const CACHE_READ_CHUNK: usize = 256;

/// Handles of one generation's tables, opened lazily (another host may create them).
#[derive(Default)]
struct Tables {
    data: Option<Table>,
    meta: Option<Table>,
    cache: Option<Table>,
}

/// Per-generation facts learnt at run time.
#[derive(Default)]
struct Known {
    identity: Option<IndexIdentity>,
    fts_ready: bool,
    /// The vector index's build record as last read or written, and when it was read.
    ann: Option<AnnBuild>,
    ann_checked: Option<Instant>,
    /// Table rows from which the vectors could have grown enough to retrain the index.
    ann_recheck_rows: Option<usize>,
    /// (table version, files) of the last file listing.
    files: Option<(u64, Vec<FileRecord>)>,
}

#[derive(Default)]
struct WriteState {
    rows_since_optimize: usize,
    commits_since_optimize: usize,
}

/// One index generation. The live store follows the storage's generation pointer, so a rebuild promoted by
/// another process (another host on the same bucket) is picked up without reopening.
pub struct LanceStore {
    shared: Arc<Shared>,
    generation: AtomicU64,
    follow: AtomicBool,
    last_check: StdMutex<Instant>,
    tables: RwLock<Tables>,
    known: StdMutex<Known>,
    writer: tokio::sync::Mutex<WriteState>,
}

enum Which {
    Data,
    Meta,
    Cache,
}

impl LanceStore {
    pub(crate) fn new(shared: Arc<Shared>, generation: u64, follow: bool) -> LanceStore {
        LanceStore {
            shared,
            generation: AtomicU64::new(generation),
            follow: AtomicBool::new(follow),
            last_check: StdMutex::new(Instant::now()),
            tables: RwLock::new(Tables::default()),
            known: StdMutex::new(Known::default()),
            writer: tokio::sync::Mutex::new(WriteState::default()),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub(crate) fn set_follow(&self, follow: bool) {
        self.follow.store(follow, Ordering::SeqCst);
    }

    fn conn(&self) -> &Connection {
        &self.shared.conn
    }

    fn err(&self, action: &str, e: lancedb::Error) -> MemoryError {
        map_err(&self.shared.location, action, e)
    }
}

#[async_trait]
impl ChunkStore for LanceStore {
    fn location(&self) -> String {
        format!("{} (table {})", self.shared.location, self.shared.data_table(self.generation()))
    }

    async fn identity(&self) -> Result<Option<IndexIdentity>> {
        self.refresh_generation(false).await?;
        let cached = self.known.locked().identity.clone();
        if let Some(id) = cached {
            return Ok(Some(id));
        }
        let id = match self.meta_get(META_IDENTITY).await? {
            Some(json) => Some(
                IndexIdentity::from_json(&json)
                    .ok_or_else(|| MemoryError::CorruptIndex(format!("lancedb at {}: unreadable index identity", self.shared.location)))?,
            ),
            None => None,
        };
        if let Some(id) = &id {
            self.known.locked().identity = Some(id.clone());
        }
        Ok(id)
    }

    async fn set_identity(&self, identity: &IndexIdentity) -> Result<()> {
        self.meta_put(META_IDENTITY, &identity.to_json()).await?;
        self.known.locked().identity = Some(identity.clone());
        Ok(())
    }

    async fn files(&self) -> Result<Vec<FileRecord>> {
        let Some(t) = self.table(Which::Data).await? else { return Ok(Vec::new()) };
        let version = t.version().await.map_err(|e| self.err("read version", e))?;
        let cached = self.known.locked().files.as_ref().filter(|(v, _)| *v == version).map(|(_, f)| f.clone());
        if let Some(files) = cached {
            return Ok(files);
        }
        let q = t.query().only_if(format!("{COL_KIND} = '{KIND_FILE}'")).select(Select::columns(FILE_COLUMNS));
        let files = batches_to_files(&self.collect("list files", q).await?)?;
        self.known.locked().files = Some((version, files.clone()));
        Ok(files)
    }

    async fn apply(&self, batch: SyncBatch) -> Result<()> {
        self.apply_batch(batch).await
    }

    async fn file_chunks(&self, source: Source, path: &str, limit: usize) -> Result<Vec<Candidate>> {
        let Some(t) = self.table(Which::Data).await? else { return Ok(Vec::new()) };
        let filter = format!("{COL_KIND} = '{KIND_CHUNK}' AND {COL_SOURCE} = {} AND {COL_PATH} = {}", sql_str(source.as_str()), sql_str(path));
        let columns = candidate_columns(&*self.data_schema_of(&t).await?);
        let q = t.query().only_if(filter).select(Select::columns(columns));
        let mut out = batches_to_candidates(&self.collect("read file chunks", q).await?)?;
        out.sort_by_key(|c| (c.start_line, c.end_line));
        out.truncate(limit);
        Ok(out)
    }

    async fn keyword_search(&self, query: &KeywordQuery, limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        self.keyword_candidates(query, limit, scope).await
    }

    async fn vector_search(&self, vector: &[f32], limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        self.nearest_candidates(vector, limit, scope).await
    }

    async fn chunk_vectors(&self, chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        self.read_chunk_vectors(chunk_ids).await
    }

    async fn cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        self.read_cached_embeddings(key, hashes).await
    }

    async fn cache_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()> {
        self.write_cached_embeddings(key, entries, max_entries).await
    }

    async fn status_details(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        let mut out = serde_json::Map::new();
        if let Some(b) = self.read_ann_build().await? {
            out.insert(
                "vectorIndex".into(),
                serde_json::json!({
                    "kind": format!("{:?}", self.shared.options.ann_index),
                    "trainedOnVectors": b.rows,
                    "partitions": b.partitions,
                    "segments": self.vector_index_segments().await?,
                    "nprobes": self.nprobes().await?,
                }),
            );
        }
        Ok(out)
    }

    async fn counts(&self) -> Result<(usize, usize)> {
        let Some(t) = self.table(Which::Data).await? else { return Ok((0, 0)) };
        let files = self.files().await?.len();
        let total = t.count_rows(None).await.map_err(|e| self.err("count rows", e))?;
        Ok((files, total.saturating_sub(files)))
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        self.meta_get(&format!("user:{key}")).await
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.meta_put(&format!("user:{key}"), value).await
    }

    async fn close(&self) -> Result<()> {
        // Tables hold no open files between calls; drop the handles so a reopen sees the latest state.
        *self.tables.write_locked() = Tables::default();
        Ok(())
    }
}
