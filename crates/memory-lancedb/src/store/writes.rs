//! Writing a sync batch: one merge commit that replaces the changed files' rows, keeps appended files' chunks,
//! re-emits touched ones with their new mtime, and repairs the duplicates two hosts can insert at once.

use memory_core::locks::LockExt;
use std::time::{Duration, Instant};

use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow_schema::SchemaRef;
use lancedb::query::QueryBase;
use lancedb::Table;
use memory_core::store::{ChunkStore, FileRecord, SyncBatch};
use memory_core::{Result, Source};
use tracing::{debug, warn};

use super::{LanceStore, Which};
use crate::filters::{files_filter, sql_str};
use crate::schema::*;

impl LanceStore {
    pub(super) async fn apply_batch(&self, batch: SyncBatch) -> Result<()> {
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

    /// Vector width to create the table with: from the identity, else from the first embedding.
    pub(super) fn wanted_dims(&self, batch: &SyncBatch) -> Option<usize> {
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
    pub(super) async fn touched_rows(&self, t: &Table, touches: &[FileRecord]) -> Result<Vec<RecordBatch>> {
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
}

pub(crate) fn reader(batch: RecordBatch) -> Box<dyn RecordBatchReader + Send> {
    let schema = batch.schema();
    Box::new(RecordBatchIterator::new(vec![Ok(batch)], schema))
}

fn readers(schema: SchemaRef, batches: Vec<RecordBatch>) -> Box<dyn RecordBatchReader + Send> {
    Box::new(RecordBatchIterator::new(batches.into_iter().map(Ok), schema))
}
