//! Reaching a generation's tables: opened lazily (another host may create them), created when a write needs
//! them, and dropped for new ones when another process promotes a rebuilt generation.

use memory_core::locks::{LockExt, RwLockExt};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use futures::TryStreamExt;
use lancedb::query::ExecutableQuery;
use lancedb::table::NewColumnTransform;
use lancedb::Table;
use memory_core::{MemoryError, Result};
use tracing::{debug, info};

use super::{Known, LanceStore, Tables, Which};
use crate::schema::*;

/// How often a live store checks whether another process promoted a rebuilt index.
const GENERATION_CHECK: Duration = Duration::from_secs(2);

impl LanceStore {
    pub(super) fn name(&self, which: &Which) -> String {
        let g = self.generation();
        match which {
            Which::Data => self.shared.data_table(g),
            Which::Meta => self.shared.meta_table(g),
            Which::Cache => self.shared.cache_table(g),
        }
    }

    pub(super) fn slot<'a>(t: &'a mut Tables, which: &Which) -> &'a mut Option<Table> {
        match which {
            Which::Data => &mut t.data,
            Which::Meta => &mut t.meta,
            Which::Cache => &mut t.cache,
        }
    }

    /// The table if it exists (opening it on first use).
    pub(super) async fn table(&self, which: Which) -> Result<Option<Table>> {
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
    pub(super) async fn table_or_create(&self, which: Which, schema: SchemaRef) -> Result<Table> {
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
    pub(super) async fn refresh_generation(&self, force: bool) -> Result<()> {
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

    pub(super) async fn collect(&self, action: &str, q: impl ExecutableQuery) -> Result<Vec<RecordBatch>> {
        let stream = q.execute().await.map_err(|e| self.err(action, e))?;
        stream.try_collect::<Vec<_>>().await.map_err(|e| self.err(action, e))
    }

    pub(super) async fn data_schema_of(&self, t: &Table) -> Result<SchemaRef> {
        t.schema().await.map_err(|e| self.err("read schema", e))
    }

    /// Ensure the data table exists with a vector column wide enough for `dims`.
    pub(super) async fn data_table_for_write(&self, dims: Option<usize>) -> Result<(Table, SchemaRef)> {
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
}

impl Which {
    pub(super) fn clone_of(w: &Which) -> Which {
        match w {
            Which::Data => Which::Data,
            Which::Meta => Which::Meta,
            Which::Cache => Which::Cache,
        }
    }
}
