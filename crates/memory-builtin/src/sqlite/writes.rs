//! Writing a sync batch in one transaction: removals, touches, and upserts and appends that keep the chunk
//! rows that did not change (`rows_to_replace`), with their keyword and vector entries.

use std::collections::HashMap;

use memory_core::store::{name_and_stem, ChunkRecord, FileRecord, SyncBatch};
use memory_core::Result;
use rusqlite::params;

use super::rows::vec_to_blob;
use super::{schema, SqliteStore};

impl SqliteStore {
    pub(super) fn apply_batch(&self, batch: SyncBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.write("write index batch", |c| {
            // IMMEDIATE: take the write lock before the first read. A deferred transaction that reads and then
            // writes fails at once with SQLITE_BUSY (no busy wait) when another process committed in between.
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let dims = schema::vector_dims(&tx)?;
            let mut vec_dims = dims;
            for (source, path) in &batch.removals {
                schema::delete_file_chunks(&tx, source.as_str(), path, vec_dims.is_some())?;
                tx.execute("DELETE FROM files WHERE source = ?1 AND path = ?2", params![source.as_str(), path])?;
            }
            for f in &batch.touches {
                tx.execute(
                    "UPDATE files SET hash = ?3, size = ?4, mtime_ms = ?5 WHERE source = ?1 AND path = ?2",
                    params![f.source.as_str(), f.path, f.hash, f.size as i64, f.mtime_ms],
                )?;
            }
            let upserts = batch.upserts.iter().map(|u| (u, true));
            let appends = batch.appends.iter().map(|a| (a, false));
            for ((f, chunks), replace) in upserts.chain(appends) {
                let mut written = vec![false; chunks.len()];
                if replace {
                    let stale = rows_to_replace(&tx, f, chunks, vec_dims.is_some(), &mut written)?;
                    schema::delete_chunk_rows(&tx, &stale, vec_dims.is_some())?;
                    tracing::debug!(path = %f.path, kept = written.iter().filter(|k| **k).count(), replaced = stale.len(), "file's chunks replaced");
                }
                let (name, stem) = name_and_stem(&f.path);
                tx.execute(
                    "INSERT INTO files(source, path, hash, size, mtime_ms, name, stem) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT(source, path) DO UPDATE SET hash = excluded.hash, size = excluded.size, mtime_ms = excluded.mtime_ms",
                    params![f.source.as_str(), f.path, f.hash, f.size as i64, f.mtime_ms, name, stem],
                )?;
                let mut ins = tx.prepare_cached(
                    "INSERT INTO chunks(id, source, path, start_line, end_line, text, hash, importance, terms, heading, date)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )?;
                let mut fts = tx.prepare_cached("INSERT INTO chunks_fts(rowid, terms, heading) VALUES (?1, ?2, ?3)")?;
                for ch in chunks.iter().zip(&written).filter(|(_, kept)| !**kept).map(|(ch, _)| ch) {
                    ins.execute(params![
                        ch.id,
                        ch.source.as_str(),
                        ch.path,
                        ch.start_line as i64,
                        ch.end_line as i64,
                        ch.text,
                        ch.hash,
                        ch.importance.map(|n| n as i64),
                        ch.terms,
                        ch.heading_terms,
                        ch.date
                    ])?;
                    let rowid = tx.last_insert_rowid();
                    fts.execute(params![rowid, ch.terms, ch.heading_terms])?;
                    if let Some(v) = &ch.embedding {
                        let d = match vec_dims {
                            Some(d) => d,
                            None => {
                                schema::create_vector_table(&tx, v.len())?;
                                vec_dims = Some(v.len());
                                v.len()
                            }
                        };
                        if v.len() != d {
                            return Err(rusqlite::Error::ToSqlConversionFailure(
                                format!("vector has {} dimensions, the index holds {d}", v.len()).into(),
                            ));
                        }
                        let blob = vec_to_blob(v);
                        tx.execute("INSERT INTO chunks_vec(rowid, embedding) VALUES (?1, ?2)", params![rowid, blob])?;
                        tx.prepare_cached("INSERT INTO vec_f32(rowid, embedding) VALUES (?1, ?2)")?.execute(params![rowid, blob])?;
                    }
                }
            }
            if vec_dims.is_some() {
                schema::prune_vector_log(&tx)?;
            }
            tx.commit()
        })
    }
}

/// A file's chunks are replaced by `chunks`: the rows already in the index exactly as they would be written again
/// (same id, lines, text, terms, heading, importance, date and vector) stay, marked in `unchanged`; the rowids of the
/// others are returned for deletion. An entry appended to a long daily log changes its last chunk or two, and
/// rewriting every other row of the file (and its keyword and vector entries) made each append cost time in
/// proportion to the whole log.
fn rows_to_replace(
    c: &rusqlite::Connection,
    f: &FileRecord,
    chunks: &[ChunkRecord],
    has_vectors: bool,
    unchanged: &mut [bool],
) -> rusqlite::Result<Vec<i64>> {
    let sql = if has_vectors {
        "SELECT c.rowid, c.id, c.start_line, c.end_line, c.text, c.hash, c.importance, c.terms, c.heading, v.embedding, c.date
         FROM chunks c LEFT JOIN vec_f32 v ON v.rowid = c.rowid WHERE c.source = ?1 AND c.path = ?2"
    } else {
        "SELECT c.rowid, c.id, c.start_line, c.end_line, c.text, c.hash, c.importance, c.terms, c.heading, NULL, c.date
         FROM chunks c WHERE c.source = ?1 AND c.path = ?2"
    };
    let by_id: HashMap<&str, usize> = chunks.iter().enumerate().map(|(i, ch)| (ch.id.as_str(), i)).collect();
    let mut stale = Vec::new();
    let mut st = c.prepare_cached(sql)?;
    let mut rows = st.query(params![f.source.as_str(), f.path])?;
    while let Some(r) = rows.next()? {
        let rowid: i64 = r.get(0)?;
        let candidate = by_id.get(r.get_ref(1)?.as_str()?).copied().filter(|&i| !unchanged[i]);
        let same = match candidate {
            Some(i) => {
                let ch = &chunks[i];
                let same = r.get::<_, i64>(2)? == ch.start_line as i64
                    && r.get::<_, i64>(3)? == ch.end_line as i64
                    && r.get_ref(4)?.as_str()? == ch.text
                    && r.get_ref(5)?.as_str()? == ch.hash
                    && r.get::<_, Option<i64>>(6)? == ch.importance.map(|n| n as i64)
                    && r.get_ref(7)?.as_str()? == ch.terms
                    && r.get_ref(8)?.as_str()? == ch.heading_terms
                    && r.get::<_, Option<Vec<u8>>>(9)? == ch.embedding.as_deref().map(vec_to_blob)
                    && r.get::<_, Option<i64>>(10)? == ch.date;
                same.then_some(i)
            }
            None => None,
        };
        match same {
            Some(i) => unchanged[i] = true,
            None => stale.push(rowid),
        }
    }
    Ok(stale)
}
