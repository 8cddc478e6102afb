//! [`LanceStore`]: one generation of an agent's index (data, meta and embedding-cache tables).

use memory_core::locks::{LockExt, RwLockExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch, RecordBatchIterator, RecordBatchReader, StringArray};
use arrow_schema::{Schema, SchemaRef};
use async_trait::async_trait;
use futures::TryStreamExt;
use lancedb::index::scalar::{FullTextSearchQuery, MultiMatchQuery, Operator};
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::table::NewColumnTransform;
use lancedb::{Connection, DistanceType, Table};
use memory_core::identity::IndexIdentity;
use memory_core::store::{Candidate, ChunkStore, EmbeddingCacheKey, FileRecord, KeywordQuery, SyncBatch};
use memory_core::{MemoryError, Result, Source};
use tracing::{debug, info, warn};

use crate::error::map_err;
use crate::schema::*;
use crate::storage::Shared;

mod maintenance;
pub(crate) use maintenance::optimize_table;
use maintenance::AnnBuild;
pub use maintenance::{ann_partitions, auto_nprobes, create_ann_index};

const META_IDENTITY: &str = "identity";
/// BM25 weight of the heading column relative to the body terms (the builtin engine's weights).
const HEADING_BOOST: f32 = memory_core::analysis::HEADING_WEIGHT as f32;
/// Hashes per `IN (...)` list when reading the embedding cache.
const CACHE_READ_CHUNK: usize = 256;
/// How often a live store checks whether another process promoted a rebuilt index.
const GENERATION_CHECK: Duration = Duration::from_secs(2);

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

    fn name(&self, which: &Which) -> String {
        let g = self.generation();
        match which {
            Which::Data => self.shared.data_table(g),
            Which::Meta => self.shared.meta_table(g),
            Which::Cache => self.shared.cache_table(g),
        }
    }

    fn slot<'a>(t: &'a mut Tables, which: &Which) -> &'a mut Option<Table> {
        match which {
            Which::Data => &mut t.data,
            Which::Meta => &mut t.meta,
            Which::Cache => &mut t.cache,
        }
    }

    /// The table if it exists (opening it on first use).
    async fn table(&self, which: Which) -> Result<Option<Table>> {
        let cached = Self::slot(&mut self.tables.write_locked(), &which).clone();
        if let Some(t) = cached {
            return Ok(Some(t));
        }
        let name = self.name(&which);
        match self.conn().open_table(&name).execute().await {
            Ok(t) => {
                *Self::slot(&mut self.tables.write_locked(), &which) = Some(t.clone());
                Ok(Some(t))
            }
            Err(lancedb::Error::TableNotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(&format!("open table {name}"), e)),
        }
    }

    /// Open or create a table with `initial` rows (used for meta and cache, whose schema is fixed).
    async fn table_or_create(&self, which: Which, schema: SchemaRef) -> Result<Table> {
        if let Some(t) = self.table(Which::clone_of(&which)).await? {
            return Ok(t);
        }
        let name = self.name(&which);
        let t = match self.conn().create_empty_table(&name, schema).execute().await {
            Ok(t) => t,
            Err(lancedb::Error::TableAlreadyExists { .. }) => {
                self.conn().open_table(&name).execute().await.map_err(|e| self.err(&format!("open table {name}"), e))?
            }
            Err(e) => return Err(self.err(&format!("create table {name}"), e)),
        };
        *Self::slot(&mut self.tables.write_locked(), &which) = Some(t.clone());
        Ok(t)
    }

    /// For a live store: switch to a generation another process promoted.
    async fn refresh_generation(&self, force: bool) -> Result<()> {
        if !self.follow.load(Ordering::SeqCst) {
            return Ok(());
        }
        {
            let mut last = self.last_check.locked();
            if !force && last.elapsed() < GENERATION_CHECK {
                return Ok(());
            }
            *last = Instant::now();
        }
        let g = self.shared.read_generation().await?;
        if g != self.generation() {
            info!(from = self.generation(), to = g, location = %self.shared.location, "index generation changed; following it");
            self.generation.store(g, Ordering::SeqCst);
            *self.tables.write_locked() = Tables::default();
            *self.known.locked() = Known::default();
        }
        Ok(())
    }

    async fn collect(&self, action: &str, q: impl ExecutableQuery) -> Result<Vec<RecordBatch>> {
        let stream = q.execute().await.map_err(|e| self.err(action, e))?;
        stream.try_collect::<Vec<_>>().await.map_err(|e| self.err(action, e))
    }

    async fn data_schema_of(&self, t: &Table) -> Result<SchemaRef> {
        t.schema().await.map_err(|e| self.err("read schema", e))
    }

    /// Ensure the data table exists with a vector column wide enough for `dims`.
    async fn data_table_for_write(&self, dims: Option<usize>) -> Result<(Table, SchemaRef)> {
        if let Some(t) = self.table(Which::Data).await? {
            let schema = self.data_schema_of(&t).await?;
            match (vector_dims(&schema), dims) {
                (None, Some(d)) => {
                    info!(dims = d, "adding a vector column to the index");
                    let only = Arc::new(Schema::new(vec![vector_field(d)]));
                    t.add_columns().transform(NewColumnTransform::AllNulls(only)).execute().await.map_err(|e| self.err("add vector column", e))?;
                    let schema = self.data_schema_of(&t).await?;
                    return Ok((t, schema));
                }
                (Some(have), Some(d)) if have != d => {
                    return Err(MemoryError::InvalidInput(format!(
                        "embeddings have {d} dimensions but the index at {} stores {have}; rebuild the index",
                        self.shared.location
                    )))
                }
                _ => return Ok((t, schema)),
            }
        }
        let schema = data_schema(dims);
        let name = self.name(&Which::Data);
        let t = match self.conn().create_empty_table(&name, schema.clone()).execute().await {
            Ok(t) => t,
            Err(lancedb::Error::TableAlreadyExists { .. }) => {
                self.conn().open_table(&name).execute().await.map_err(|e| self.err(&format!("open table {name}"), e))?
            }
            Err(e) => return Err(self.err(&format!("create table {name}"), e)),
        };
        debug!(table = %name, ?dims, "created data table");
        self.tables.write_locked().data = Some(t.clone());
        let schema = self.data_schema_of(&t).await?;
        Ok((t, schema))
    }

    /// Vector width to create the table with: from the identity, else from the first embedding.
    fn wanted_dims(&self, batch: &SyncBatch) -> Option<usize> {
        let from_batch =
            batch.upserts.iter().chain(batch.appends.iter()).flat_map(|(_, cs)| cs.iter()).find_map(|c| c.embedding.as_ref().map(std::vec::Vec::len));
        let known = self.known.locked();
        match (&known.identity, from_batch) {
            (_, Some(d)) => Some(d),
            (Some(id), None) if id.provider.is_some() => id.dimensions,
            _ => None,
        }
    }

    /// Existing chunk rows of touched files, re-emitted with their new mtime (one commit with the rest).
    async fn touched_rows(&self, t: &Table, touches: &[FileRecord]) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        for f in touches {
            let filter =
                format!("{COL_KIND} = '{KIND_CHUNK}' AND {COL_SOURCE} = {} AND {COL_PATH} = {}", sql_str(f.source.as_str()), sql_str(&f.path));
            for b in self.collect("read touched chunks", t.query().only_if(filter)).await? {
                if b.num_rows() > 0 {
                    out.push(with_mtime(&b, f.mtime_ms)?);
                }
            }
        }
        Ok(out)
    }

    async fn meta_get(&self, key: &str) -> Result<Option<String>> {
        let Some(t) = self.table(Which::Meta).await? else { return Ok(None) };
        let batches = self.collect("read meta", t.query().only_if(format!("key = {}", sql_str(key))).select(Select::columns(&["value"]))).await?;
        for b in &batches {
            if b.num_rows() > 0 {
                return Ok(Some(col::<StringArray>(b, "value")?.value(0).to_string()));
            }
        }
        Ok(None)
    }

    async fn meta_put(&self, key: &str, value: &str) -> Result<()> {
        let t = self.table_or_create(Which::Meta, meta_schema()).await?;
        let batch = meta_batch(key, value)?;
        let mut m = t.merge_insert(&["key"]);
        m.when_matched_update_all(None).when_not_matched_insert_all();
        m.execute(reader(batch)).await.map_err(|e| self.err("write meta", e))?;
        Ok(())
    }
}

impl Which {
    fn clone_of(w: &Which) -> Which {
        match w {
            Which::Data => Which::Data,
            Which::Meta => Which::Meta,
            Which::Cache => Which::Cache,
        }
    }
}

pub(crate) fn reader(batch: RecordBatch) -> Box<dyn RecordBatchReader + Send> {
    let schema = batch.schema();
    Box::new(RecordBatchIterator::new(vec![Ok(batch)], schema))
}

fn readers(schema: SchemaRef, batches: Vec<RecordBatch>) -> Box<dyn RecordBatchReader + Send> {
    Box::new(RecordBatchIterator::new(batches.into_iter().map(Ok), schema))
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
        if batch.is_empty() {
            return Ok(());
        }
        let mut state = self.writer.lock().await;
        let started = Instant::now();
        let replaced: Vec<(Source, &str)> =
            batch.upserts.iter().map(|(f, _)| (f.source, f.path.as_str())).chain(batch.removals.iter().map(|(s, p)| (*s, p.as_str()))).collect();
        let has_rows = !batch.upserts.is_empty() || !batch.appends.is_empty() || !batch.touches.is_empty();

        let existing = self.table(Which::Data).await?;
        if existing.is_none() && !has_rows {
            return Ok(()); // removals from an index that has no data table yet
        }
        // Files new to the index have no stale rows: skip the delete clause, whose anti-join scans the whole
        // table, so a first index of a million chunks stays linear. Concurrent writers are still safe: rows are
        // keyed by id and merge_insert detects conflicting inserts.
        let known: std::collections::HashSet<(Source, String)> = match &existing {
            Some(_) => self.files().await?.into_iter().map(|f| (f.source, f.path)).collect(),
            None => Default::default(),
        };
        let replaced: Vec<(Source, &str)> = replaced.into_iter().filter(|(s, p)| known.contains(&(*s, p.to_string()))).collect();
        let delete_filter = files_filter(&replaced);
        let (t, schema) = self.data_table_for_write(self.wanted_dims(&batch)).await?;

        let mut rows: Vec<Row<'_>> = Vec::new();
        for (file, chunks) in &batch.upserts {
            rows.push(Row::file(file));
            rows.extend(chunks.iter().map(|c| Row::chunk(c, file)));
        }
        // Appended files (growing transcripts) keep their chunks: add the new ones, and re-emit the old ones with
        // the file's new mtime like a touch. Their paths are not in the delete filter.
        let appended: Vec<FileRecord> = batch.appends.iter().map(|(f, _)| f.clone()).collect();
        for (file, chunks) in &batch.appends {
            rows.push(Row::file(file));
            rows.extend(chunks.iter().map(|c| Row::chunk(c, file)));
        }
        rows.extend(batch.touches.iter().map(Row::file));
        let mut batches = vec![rows_to_batch(&schema, &rows)?];
        batches.extend(self.touched_rows(&t, &batch.touches).await?);
        batches.extend(self.touched_rows(&t, &appended).await?);
        let written: usize = batches.iter().map(arrow_array::RecordBatch::num_rows).sum();

        if written == 0 {
            // Only removals: one delete commit.
            if let Some(f) = &delete_filter {
                t.delete(f.as_str()).await.map_err(|e| self.err("delete files", e))?;
            }
        } else {
            let mut m = t.merge_insert(&[COL_ID]);
            m.when_matched_update_all(None).when_not_matched_insert_all();
            if let Some(f) = delete_filter {
                // Stale chunks of replaced files and every row of removed files go in the same commit.
                m.when_not_matched_by_source_delete(Some(f));
            }
            let result = m.execute(readers(schema.clone(), batches)).await.map_err(|e| self.err("write chunks", e))?;
            debug!(inserted = result.num_inserted_rows, updated = result.num_updated_rows, deleted = result.num_deleted_rows, "merge committed");
        }
        // Two hosts indexing the same new files at the same instant can both insert them (there are no rows to
        // conflict on yet). Check the new files' records by id and repair duplicates: delete, then re-add ours.
        let new_files: Vec<&FileRecord> = batch.upserts.iter().map(|(f, _)| f).filter(|f| !known.contains(&(f.source, f.path.clone()))).collect();
        if !new_files.is_empty() && written > 0 {
            let ids: Vec<String> = new_files.iter().map(|f| sql_str(&file_row_id(f.source, &f.path))).collect();
            let id_filter = format!("{COL_ID} IN ({})", ids.join(", "));
            for attempt in 0..3 {
                let n = t.count_rows(Some(id_filter.clone())).await.map_err(|e| self.err("check new files", e))?;
                if n <= new_files.len() {
                    break;
                }
                warn!(attempt, files = new_files.len(), rows = n, "another writer inserted the same files concurrently; repairing");
                let keys: Vec<(Source, &str)> = new_files.iter().map(|f| (f.source, f.path.as_str())).collect();
                let filter = files_filter(&keys).unwrap_or_else(|| "false".into());
                t.delete(filter.as_str()).await.map_err(|e| self.err("repair duplicates", e))?;
                let mut rows: Vec<Row<'_>> = Vec::new();
                for (file, chunks) in batch.upserts.iter().filter(|(f, _)| !known.contains(&(f.source, f.path.clone()))) {
                    rows.push(Row::file(file));
                    rows.extend(chunks.iter().map(|c| Row::chunk(c, file)));
                }
                let again = rows_to_batch(&schema, &rows)?;
                t.add(reader(again)).execute().await.map_err(|e| self.err("repair duplicates", e))?;
                tokio::time::sleep(Duration::from_millis(50 * (attempt + 1))).await;
            }
        }
        state.rows_since_optimize += written + batch.removals.len();
        state.commits_since_optimize += 1;
        debug!(
            upserts = batch.upserts.len(),
            touches = batch.touches.len(),
            removals = batch.removals.len(),
            rows = written,
            ms = started.elapsed().as_millis() as u64,
            "batch applied"
        );
        let schema = self.data_schema_of(&t).await?;
        if let Err(e) = self.maintain(&t, &schema, &mut state).await {
            // The data is committed; maintenance is retried after the next write.
            warn!(error = %e, "index maintenance failed");
        }
        Ok(())
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

    async fn keyword_search(&self, query: &KeywordQuery, limit: usize, sources: &[Source]) -> Result<Vec<Candidate>> {
        if query.terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let Some(t) = self.table(Which::Data).await? else { return Ok(Vec::new()) };
        let ready = self.known.locked().fts_ready;
        if !ready {
            // Opened by another process, or the index creation failed after a write: create it now.
            let _w = self.writer.lock().await;
            self.ensure_fts(&t).await?;
            let ready = self.known.locked().fts_ready;
            if !ready {
                return Ok(Vec::new()); // no chunks at all
            }
        }
        // Terms are word characters only (the shared analysis), so the whitespace tokenizer sees each as one
        // literal token; nothing of the user's text is parsed as query syntax.
        let terms: Vec<&str> = query.terms.iter().map(std::string::String::as_str).filter(|s| !s.contains(char::is_whitespace)).collect();
        let mm = MultiMatchQuery::try_new(terms.join(" "), vec![COL_TERMS.to_string(), COL_HEADING.to_string()])
            .and_then(|m| m.try_with_boosts(vec![1.0, HEADING_BOOST]))
            .map_err(|e| MemoryError::Internal(format!("lancedb: building the keyword query: {e}")))?
            .with_operator(Operator::Or);
        let fts = FullTextSearchQuery::new_query(mm.into());
        // `_score` named in the projection: lancedb warns on every query that leaves it to be added implicitly.
        let mut columns = candidate_columns(&*self.data_schema_of(&t).await?).to_vec();
        columns.push("_score");
        let mut q = t.query().full_text_search(fts).limit(limit).select(Select::columns(&columns));
        if let Some(f) = sources_filter(sources) {
            q = q.only_if(f);
        }
        let mut out = batches_to_candidates(&self.collect("keyword search", q).await?)?;
        out.sort_by(|a, b| b.keyword_score.partial_cmp(&a.keyword_score).unwrap_or(std::cmp::Ordering::Equal));
        out.truncate(limit);
        Ok(out)
    }

    async fn vector_search(&self, vector: &[f32], limit: usize, sources: &[Source]) -> Result<Vec<Candidate>> {
        let Some(t) = self.table(Which::Data).await? else {
            return Err(MemoryError::Unavailable("the index has no vectors yet".into()));
        };
        let schema = self.data_schema_of(&t).await?;
        match vector_dims(&schema) {
            None => return Err(MemoryError::Unavailable("the index stores no vectors (keyword-only)".into())),
            Some(d) if d != vector.len() => {
                return Err(MemoryError::InvalidInput(format!("query vector has {} dimensions, the index {d}", vector.len())))
            }
            Some(_) => {}
        }
        if limit == 0 {
            return Ok(Vec::new());
        }
        let opts = &self.shared.options;
        let mut q = t
            .query()
            .nearest_to(vector)
            .map_err(|e| self.err("vector query", e))?
            .column(COL_VECTOR)
            .distance_type(DistanceType::Cosine)
            .limit(limit)
            .select(Select::columns(candidate_columns(&schema)));
        q = q.nprobes(self.nprobes().await?).map_err(|e| self.err("vector query", e))?;
        if opts.refine_factor > 0 {
            q = q.refine_factor(opts.refine_factor);
        }
        if opts.hnsw_ef > 0 {
            q = q.ef(opts.hnsw_ef);
        }
        // File rows have no vector, and rows without one are never returned (Lance drops null distances), so
        // no filter on `kind`: an unfiltered query keeps the ANN path cheap.
        if let Some(f) = sources_filter(sources) {
            q = q.only_if(f);
        }
        let mut out = batches_to_candidates(&self.collect("vector search", q).await?)?;
        out.sort_by(|a, b| b.vector_score.partial_cmp(&a.vector_score).unwrap_or(std::cmp::Ordering::Equal));
        out.truncate(limit);
        Ok(out)
    }

    async fn chunk_vectors(&self, chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        let mut out = HashMap::new();
        if chunk_ids.is_empty() {
            return Ok(out);
        }
        let Some(t) = self.table(Which::Data).await? else { return Ok(out) };
        let schema = self.data_schema_of(&t).await?;
        if vector_dims(&schema).is_none() {
            return Ok(out);
        }
        for part in chunk_ids.chunks(CACHE_READ_CHUNK) {
            let list: Vec<String> = part.iter().map(|id| sql_str(id)).collect();
            let filter = format!("{COL_ID} IN ({})", list.join(", "));
            let q = t.query().only_if(filter).select(Select::columns(&[COL_ID, COL_VECTOR]));
            out.extend(batches_to_vectors(&self.collect("read chunk vectors", q).await?, COL_ID)?);
        }
        Ok(out)
    }

    async fn cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        let mut out = HashMap::new();
        if hashes.is_empty() {
            return Ok(out);
        }
        let Some(t) = self.table(Which::Cache).await? else { return Ok(out) };
        let k = cache_key_digest(key);
        for part in hashes.chunks(CACHE_READ_CHUNK) {
            let list: Vec<String> = part.iter().map(|h| sql_str(h)).collect();
            let filter = format!("key = {} AND hash IN ({})", sql_str(&k), list.join(", "));
            let q = t.query().only_if(filter).select(Select::columns(&["hash", "vector"]));
            out.extend(batches_to_vectors(&self.collect("read embedding cache", q).await?, "hash")?);
        }
        Ok(out)
    }

    async fn cache_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let t = self.table_or_create(Which::Cache, cache_schema()).await?;
        let k = cache_key_digest(key);
        let mut m = t.merge_insert(&["id"]);
        m.when_not_matched_insert_all();
        m.execute(reader(cache_batch(&k, entries, memory_core::now_ms())?)).await.map_err(|e| self.err("write embedding cache", e))?;
        let total = t.count_rows(None).await.map_err(|e| self.err("count embedding cache", e))?;
        if total > max_entries {
            let excess = total - max_entries;
            let q = t.query().select(Select::columns(&["id", "created_ms"]));
            let mut rows: Vec<(i64, String)> = Vec::with_capacity(total);
            for b in self.collect("scan embedding cache", q).await? {
                let ids = col::<StringArray>(&b, "id")?;
                let created = col::<Int64Array>(&b, "created_ms")?;
                rows.extend((0..b.num_rows()).map(|i| (created.value(i), ids.value(i).to_string())));
            }
            rows.sort();
            let victims: Vec<String> = rows.into_iter().take(excess).map(|(_, id)| sql_str(&id)).collect();
            if !victims.is_empty() {
                t.delete(format!("id IN ({})", victims.join(", ")).as_str()).await.map_err(|e| self.err("prune embedding cache", e))?;
                debug!(pruned = victims.len(), "embedding cache pruned");
            }
        }
        Ok(())
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

/// Cache rows are keyed by a digest of (provider, model, settings fingerprint).
fn cache_key_digest(key: &EmbeddingCacheKey) -> String {
    memory_core::sha256_hex(format!("{}\u{1f}{}\u{1f}{}", key.provider, key.model, key.fingerprint).as_bytes())[..32].to_string()
}
