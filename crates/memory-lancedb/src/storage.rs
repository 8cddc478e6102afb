//! [`LanceDbStorage`]: where an agent's LanceDB index lives and how a rebuilt one is swapped in.
//!
//! Tables of one index `<t>` (the configured table name):
//! - `<t>`: the generation pointer, one row `(key = 'generation', generation)`;
//! - `<t>_g<N>`: chunks and file records of generation N; `<t>_g<N>_meta`: identity and small metadata;
//!   `<t>_g<N>_cache`: the embedding cache.
//!
//! A rebuild writes generation N+1 beside N and promotes it by rewriting the pointer (one commit), so search
//! answers from N meanwhile and a crash mid-rebuild leaves N untouched; leftovers are dropped at the next rebuild.

use memory_core::locks::LockExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use async_trait::async_trait;
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase};
use lancedb::Connection;
use memory_core::store::{ChunkStore, IndexStorage, WriterGuard};
use memory_core::{MemoryError, Result};
use tracing::{info, warn};

use crate::error::{arrow_err, map_err};
use crate::store::{reader, LanceStore};
use crate::writer_lock::WriterLock;
use crate::LanceDbOptions;

/// What every store of one index shares.
pub(crate) struct Shared {
    pub conn: Connection,
    pub location: String,
    pub table: String,
    pub options: LanceDbOptions,
}

impl Shared {
    pub fn pointer_table(&self) -> String {
        self.table.clone()
    }
    pub fn data_table(&self, g: u64) -> String {
        format!("{}_g{g}", self.table)
    }
    pub fn meta_table(&self, g: u64) -> String {
        format!("{}_g{g}_meta", self.table)
    }
    pub fn cache_table(&self, g: u64) -> String {
        format!("{}_g{g}_cache", self.table)
    }

    fn err(&self, action: &str, e: lancedb::Error) -> MemoryError {
        map_err(&self.location, action, e)
    }

    /// Generation of a table name of this index (`<t>_g<N>...`), if it is one.
    fn generation_of(&self, name: &str) -> Option<u64> {
        let rest = name.strip_prefix(&self.table)?.strip_prefix("_g")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let tail = &rest[digits.len()..];
        if digits.is_empty() || !(tail.is_empty() || tail == "_meta" || tail == "_cache") {
            return None;
        }
        digits.parse().ok()
    }

    /// The live generation, creating the pointer (generation 1) for a new index.
    pub async fn read_generation(&self) -> Result<u64> {
        let name = self.pointer_table();
        let t = match self.conn.open_table(&name).execute().await {
            Ok(t) => t,
            Err(lancedb::Error::TableNotFound { .. }) => {
                let batch = pointer_batch(1)?;
                match self.conn.create_table(&name, batch).execute().await {
                    Ok(t) => {
                        info!(location = %self.location, table = %name, "created a new LanceDB index");
                        t
                    }
                    Err(lancedb::Error::TableAlreadyExists { .. }) => {
                        self.conn.open_table(&name).execute().await.map_err(|e| self.err("open index", e))?
                    }
                    Err(e) => return Err(self.err("create index", e)),
                }
            }
            Err(e) => return Err(self.err("open index", e)),
        };
        let batches: Vec<RecordBatch> = t
            .query()
            .only_if("key = 'generation'")
            .execute()
            .await
            .map_err(|e| self.err("read index pointer", e))?
            .try_collect()
            .await
            .map_err(|e| self.err("read index pointer", e))?;
        for b in &batches {
            if b.num_rows() > 0 {
                let g = b
                    .column_by_name("generation")
                    .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                    .ok_or_else(|| MemoryError::CorruptIndex(format!("lancedb at {}: bad index pointer", self.location)))?;
                return Ok(g.value(0).max(1) as u64);
            }
        }
        Err(MemoryError::CorruptIndex(format!("lancedb at {}: index pointer table {name} is empty", self.location)))
    }

    async fn write_generation(&self, g: u64) -> Result<()> {
        let t = self.conn.open_table(self.pointer_table()).execute().await.map_err(|e| self.err("open index", e))?;
        let mut m = t.merge_insert(&["key"]);
        m.when_matched_update_all(None).when_not_matched_insert_all();
        m.execute(reader(pointer_batch(g as i64 as u64)?)).await.map_err(|e| self.err("promote rebuilt index", e))?;
        // The pointer changes once per rebuild; keep its history short.
        if let Err(e) = crate::store::optimize_table(&t, self.options.prune_older_than).await {
            warn!(error = %e, "could not prune the index pointer's versions");
        }
        Ok(())
    }

    async fn table_names(&self) -> Result<Vec<String>> {
        self.conn.table_names().execute().await.map_err(|e| self.err("list tables", e))
    }

    async fn drop_generation(&self, g: u64) -> Result<()> {
        for name in [self.data_table(g), self.meta_table(g), self.cache_table(g)] {
            self.drop_table(&name).await?;
        }
        Ok(())
    }

    async fn drop_table(&self, name: &str) -> Result<()> {
        match self.conn.drop_table(name, &[]).await {
            Ok(()) | Err(lancedb::Error::TableNotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(&format!("drop table {name}"), e)),
        }
    }
}

fn pointer_batch(g: u64) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("generation", DataType::Int64, false)]));
    RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec!["generation"])), Arc::new(Int64Array::from(vec![g as i64]))])
        .map_err(|e| arrow_err("building the index pointer", e))
}

/// An agent's LanceDB index on a local folder or an object store.
pub struct LanceDbStorage {
    shared: Arc<Shared>,
    staging: Mutex<Option<Arc<LanceStore>>>,
    writer: WriterLock,
}

/// Storage options applied unless the configuration sets them: fail fast on unreachable storage instead of
/// object_store's default of retrying for three minutes.
const DEFAULT_STORAGE_OPTIONS: &[(&str, &str)] =
    &[("connect_timeout", "5s"), ("timeout", "60s"), ("client_max_retries", "2"), ("client_retry_timeout", "20")];

impl LanceDbStorage {
    /// Connect to `uri` (a folder, or `s3://bucket/prefix` and the like) for the index named `table`.
    pub async fn connect(uri: &str, storage_options: &BTreeMap<String, String>, table: &str, options: LanceDbOptions) -> Result<LanceDbStorage> {
        validate_table_name(table)?;
        let is_local = !uri.contains("://") || uri.starts_with("file://");
        if is_local {
            let dir = uri.strip_prefix("file://").unwrap_or(uri);
            std::fs::create_dir_all(dir).map_err(|e| MemoryError::io(format!("cannot create the LanceDB folder {dir}"), e))?;
        }
        let mut opts: HashMap<String, String> = storage_options.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if !is_local {
            for (k, v) in DEFAULT_STORAGE_OPTIONS {
                opts.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
        let conn = lancedb::connect(uri)
            .storage_options(opts)
            .read_consistency_interval(options.read_consistency)
            .execute()
            .await
            .map_err(|e| map_err(uri, "connect", e))?;
        info!(uri, table, "lancedb connected");
        let writer = WriterLock::for_location(uri, storage_options, table, options.writer_lease)?;
        Ok(LanceDbStorage {
            shared: Arc::new(Shared { conn, location: redact(uri), table: table.to_string(), options }),
            staging: Mutex::new(None),
            writer,
        })
    }

    /// The connection (the benchmark opens its own tables on it).
    pub fn connection(&self) -> &Connection {
        &self.shared.conn
    }

    /// The live store with its concrete type (tests and tools reach maintenance through it).
    pub async fn open_live_store(&self) -> Result<Arc<LanceStore>> {
        let started = Instant::now();
        let g = self.shared.read_generation().await?;
        tracing::debug!(generation = g, ms = started.elapsed().as_millis() as u64, "opened live index");
        Ok(Arc::new(LanceStore::new(self.shared.clone(), g, true)))
    }
}

#[async_trait]
impl IndexStorage for LanceDbStorage {
    async fn open_live(&self) -> Result<Arc<dyn ChunkStore>> {
        Ok(self.open_live_store().await?)
    }

    async fn open_staging(&self) -> Result<Arc<dyn ChunkStore>> {
        let live = self.shared.read_generation().await?;
        // Discard leftovers of an interrupted rebuild (any generation above the live one).
        for name in self.shared.table_names().await? {
            if self.shared.generation_of(&name).is_some_and(|g| g > live) {
                info!(table = %name, "dropping a leftover of an interrupted rebuild");
                self.shared.drop_table(&name).await?;
            }
        }
        let store = Arc::new(LanceStore::new(self.shared.clone(), live + 1, false));
        *self.staging.locked() = Some(store.clone());
        Ok(store)
    }

    async fn promote(&self, live: Arc<dyn ChunkStore>, staging: Arc<dyn ChunkStore>) -> Result<Arc<dyn ChunkStore>> {
        let ours = self.staging.locked().take();
        let Some(store) = ours.filter(|s| std::ptr::addr_eq(Arc::as_ptr(s), Arc::as_ptr(&staging))) else {
            return Err(MemoryError::Internal("promote: the staging store was not opened by this storage".into()));
        };
        let old = self.shared.read_generation().await?;
        let new = store.generation();
        self.shared.write_generation(new).await?;
        store.set_follow(true);
        live.close().await?;
        info!(from = old, to = new, location = %self.shared.location, "rebuilt index promoted");
        if old != new {
            if let Err(e) = self.shared.drop_generation(old).await {
                warn!(error = %e, generation = old, "could not drop the previous index generation");
            }
        }
        Ok(store)
    }

    async fn destroy(&self) -> Result<()> {
        for name in self.shared.table_names().await? {
            if name == self.shared.table || self.shared.generation_of(&name).is_some() {
                self.shared.drop_table(&name).await?;
            }
        }
        Ok(())
    }

    async fn writer_lock(&self, wait: bool) -> Result<Option<WriterGuard>> {
        // Searches never take it; syncs, rebuilds and resets do (see writer_lock/).
        self.writer.acquire(wait).await
    }

    fn location(&self) -> String {
        format!("{} (table {})", self.shared.location, self.shared.table)
    }
}

/// LanceDB table names: letters, digits, `_`, `-`, `.`.
fn validate_table_name(t: &str) -> Result<()> {
    if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Err(MemoryError::config("memory.lancedb.table", format!("`{t}` is not a valid table name (letters, digits, `_`, `-`, `.`)")));
    }
    Ok(())
}

/// A URI for logs and errors without credentials (`s3://key:secret@bucket` is not a thing, but query strings can be).
fn redact(uri: &str) -> String {
    uri.split('?').next().unwrap_or(uri).to_string()
}

/// Default table name for an agent: `memory_<agentId>`, the id made safe like every agent id
/// ([`memory_core::sanitize_id`]) and ASCII, as table names must be; an id whose letters had to change carries the
/// first 8 hex digits of its sha256, so two agents never share a table (`zoë` and `zoé`).
pub fn default_table_name(agent_id: &str) -> String {
    let safe = memory_core::sanitize_id(agent_id);
    let id: String = safe.chars().map(|c| if c.is_ascii() { c } else { '_' }).collect();
    if id == safe || safe != agent_id {
        // Unchanged, or already carrying the id's hash.
        format!("memory_{id}")
    } else {
        format!("memory_{id}-{}", &memory_core::sha256_hex(agent_id.as_bytes())[..8])
    }
}

#[allow(dead_code, reason = "a compile-time check: it only has to type-check")]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<LanceDbStorage>();
    let _ = Duration::ZERO;
}
