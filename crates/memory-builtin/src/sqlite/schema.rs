//! Tables: meta (identity, last sync...), files, chunks (with each chunk's analysed terms and day), chunks_fts (FTS5
//! over the chunks' terms, external content), chunks_vec (vec0, created with the first vector, with vec_f32 and
//! the change log vec_log), embedding_cache, chunk_count.
//!
//! The keyword index reads its content from `chunks.terms` / `chunks.heading`: a deleted row's terms are read
//! back from there, so FTS5's document count and lengths (BM25's idf and length normalisation) stay those of
//! the chunks the index holds, however often a file is rewritten. (A contentless FTS5 table with
//! `contentless_delete` cannot know a deleted row's lengths: its totals only grew, so an index rewritten by
//! edits, or built by words first and vectors after, scored keywords differently from a fresh one.) It also
//! lets `verify` check the keyword index against the chunks and rebuild it from them.

use memory_core::store::name_and_stem;
use rusqlite::{params, Connection, OptionalExtension};

/// Create or migrate the schema, in one IMMEDIATE transaction so that processes opening a new index at the same
/// moment take turns instead of racing.
pub(crate) fn create(c: &mut Connection) -> rusqlite::Result<()> {
    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    create_in(&tx)?;
    tx.commit()
}

fn create_in(c: &Connection) -> rusqlite::Result<()> {
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS files (
             source TEXT NOT NULL, path TEXT NOT NULL, hash TEXT NOT NULL,
             size INTEGER NOT NULL, mtime_ms INTEGER NOT NULL,
             name TEXT NOT NULL DEFAULT '', stem TEXT NOT NULL DEFAULT '',
             PRIMARY KEY (source, path));
         CREATE TABLE IF NOT EXISTS chunks (
             rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
             source TEXT NOT NULL, path TEXT NOT NULL,
             start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
             text TEXT NOT NULL, hash TEXT NOT NULL, importance INTEGER,
             terms TEXT NOT NULL DEFAULT '', heading TEXT NOT NULL DEFAULT '', date INTEGER);
         CREATE INDEX IF NOT EXISTS chunks_by_file ON chunks (source, path, start_line);
         CREATE TABLE IF NOT EXISTS embedding_cache (
             provider TEXT NOT NULL, model TEXT NOT NULL, fingerprint TEXT NOT NULL, hash TEXT NOT NULL,
             embedding BLOB NOT NULL, dims INTEGER NOT NULL, updated_at INTEGER NOT NULL,
             PRIMARY KEY (provider, model, fingerprint, hash));
         CREATE INDEX IF NOT EXISTS embedding_cache_age ON embedding_cache (updated_at);",
    )?;
    // File name and stem, for exact-path lookups by equality (added after the first layout: migrate in place).
    if !has_column(c, "files", "name")? {
        c.execute_batch(
            "ALTER TABLE files ADD COLUMN name TEXT NOT NULL DEFAULT '';
             ALTER TABLE files ADD COLUMN stem TEXT NOT NULL DEFAULT '';",
        )?;
        let rows: Vec<(String, String)> = {
            let mut st = c.prepare("SELECT source, path FROM files")?;
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for (source, path) in rows {
            let (name, stem) = name_and_stem(&path);
            c.execute("UPDATE files SET name = ?3, stem = ?4 WHERE source = ?1 AND path = ?2", params![source, path, name, stem])?;
        }
    }
    // The chunks' terms, which the keyword index reads (added after the first layout). An index from before
    // keeps its contentless keyword table, which deletes by rowid alone as this one does; its identity's older
    // schema has it rebuilt into this layout.
    if !has_column(c, "chunks", "terms")? {
        c.execute_batch(
            "ALTER TABLE chunks ADD COLUMN terms TEXT NOT NULL DEFAULT '';
             ALTER TABLE chunks ADD COLUMN heading TEXT NOT NULL DEFAULT '';",
        )?;
    }
    // The day each chunk is of (added after; an index from before is rebuilt by its identity's older chunker, which
    // fills it).
    if !has_column(c, "chunks", "date")? {
        c.execute_batch("ALTER TABLE chunks ADD COLUMN date INTEGER;")?;
    }
    c.execute_batch("CREATE INDEX IF NOT EXISTS chunks_by_date ON chunks (date) WHERE date IS NOT NULL;")?;
    c.execute_batch(
        "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
             terms, heading, content = 'chunks', content_rowid = 'rowid',
             tokenize = 'unicode61 remove_diacritics 2');",
    )?;
    c.execute_batch(
        "CREATE INDEX IF NOT EXISTS files_waiting ON files (source, path) WHERE hash = '';
         CREATE INDEX IF NOT EXISTS files_by_name ON files (name);
         CREATE INDEX IF NOT EXISTS files_by_stem ON files (stem);",
    )?;
    // Indexes with vectors from before the change log: add it (readers then rebuild their copy once).
    if vector_dims(c)?.is_some() {
        create_vector_log(c)?;
    }
    create_chunk_count(c)
}

/// Whether `table` has `column` (a layout before the column was added lacks it).
fn has_column(c: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    c.prepare("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?.exists(params![table, column])
}

/// The number of chunks, kept by triggers so that reading it costs one row (`count(*)` reads the whole table,
/// and the keyword plan needs it for every bounded query). An index from before gets
/// the table, counted once, and the triggers in the same transaction.
fn create_chunk_count(c: &Connection) -> rusqlite::Result<()> {
    let exists = c.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunk_count'")?.exists([])?;
    if exists {
        return Ok(());
    }
    c.execute_batch(
        "CREATE TABLE chunk_count (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER NOT NULL);
         INSERT INTO chunk_count (id, n) SELECT 0, count(*) FROM chunks;
         CREATE TRIGGER IF NOT EXISTS chunk_count_insert AFTER INSERT ON chunks BEGIN
             UPDATE chunk_count SET n = n + 1 WHERE id = 0; END;
         CREATE TRIGGER IF NOT EXISTS chunk_count_delete AFTER DELETE ON chunks BEGIN
             UPDATE chunk_count SET n = n - 1 WHERE id = 0; END;",
    )
}

/// The number of chunks ([`create_chunk_count`]).
pub(crate) fn chunk_count(c: &Connection) -> rusqlite::Result<u64> {
    let n: Option<i64> = c.query_row("SELECT n FROM chunk_count WHERE id = 0", [], |r| r.get(0)).optional()?;
    match n {
        Some(n) => Ok(n.max(0) as u64),
        None => c.query_row("SELECT count(*) FROM chunks", [], |r| r.get::<_, i64>(0)).map(|n| n.max(0) as u64),
    }
}

/// Width of the vector table, `None` before the first vector.
pub(crate) fn vector_dims(c: &Connection) -> rusqlite::Result<Option<usize>> {
    let v: Option<String> = c.query_row("SELECT value FROM meta WHERE key = 'vectorDims'", [], |r| r.get(0)).optional()?;
    Ok(v.and_then(|s| s.parse().ok()))
}

pub(crate) fn create_vector_table(c: &Connection, dims: usize) -> rusqlite::Result<()> {
    c.execute_batch(&format!("CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0(embedding float[{dims}] distance_metric=cosine);"))?;
    c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('vectorDims', ?1)", params![dims.to_string()])?;
    create_vector_log(c)
}

/// `vec_f32`: each chunk's f32 vector once more, one row per vector. sqlite-vec keeps vectors in blobs of 1024
/// and reads one by opening its blob and walking the overflow pages up to it (each re-score pays that walk),
/// and its full scan reads every row that way; a row here is one B-tree lookup. It is what the
/// in-memory copy is built from and what its best candidates are re-scored with (vectors.rs).
fn create_exact_vectors(c: &Connection) -> rusqlite::Result<()> {
    let exists: bool = c.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vec_f32'")?.exists([])?;
    if exists {
        return Ok(());
    }
    c.execute_batch("CREATE TABLE vec_f32 (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL);")?;
    // An index from before this table: copy its vectors once (sqlite-vec's slow full scan, one time).
    let has_vec0: bool = c.prepare("SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'")?.exists([])?;
    if has_vec0 {
        c.execute_batch("INSERT INTO vec_f32(rowid, embedding) SELECT rowid, embedding FROM chunks_vec;")?;
    }
    Ok(())
}

/// The vector change log: every chunk inserted or deleted appends its rowid, in the writing transaction (a
/// trigger, so no write path can forget it). A reader's in-memory vector copy (quantized.rs) replays the
/// entries after the last one it applied, so it follows writes by any process without re-reading every vector.
/// Triggers on `chunks` rather than on `chunks_vec`: SQLite has no triggers on virtual tables, and a chunk's
/// vector is written and deleted with the chunk, under the same rowid.
pub(crate) fn create_vector_log(c: &Connection) -> rusqlite::Result<()> {
    create_exact_vectors(c)?;
    // The delete trigger also drops the chunk's row of vec_f32, so that no delete path can leave one behind.
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS vec_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk INTEGER NOT NULL);
         CREATE TRIGGER IF NOT EXISTS vec_log_insert AFTER INSERT ON chunks BEGIN
             INSERT INTO vec_log(chunk) VALUES (new.rowid); END;
         CREATE TRIGGER IF NOT EXISTS vec_log_delete AFTER DELETE ON chunks BEGIN
             DELETE FROM vec_f32 WHERE rowid = old.rowid;
             INSERT INTO vec_log(chunk) VALUES (old.rowid); END;",
    )
}

/// Entries kept in the change log; a reader further behind than this re-reads every vector.
pub(crate) const VECTOR_LOG_KEEP: i64 = 50_000;

/// Drop log entries older than the newest [`VECTOR_LOG_KEEP`]; `vecLogFloor` in meta records the last seq
/// dropped, so a reader that had not applied it knows to rebuild.
pub(crate) fn prune_vector_log(c: &Connection) -> rusqlite::Result<()> {
    let newest: Option<i64> = c.query_row("SELECT max(seq) FROM vec_log", [], |r| r.get(0))?;
    let Some(newest) = newest else { return Ok(()) };
    let floor = vector_log_floor(c)?;
    // Prune in steps of a tenth of the log, not on every batch.
    if newest - floor > VECTOR_LOG_KEEP + VECTOR_LOG_KEEP / 10 {
        let new_floor = newest - VECTOR_LOG_KEEP;
        c.execute("DELETE FROM vec_log WHERE seq <= ?1", params![new_floor])?;
        c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('vecLogFloor', ?1)", params![new_floor.to_string()])?;
    }
    Ok(())
}

/// The last seq pruned from the change log (0: none).
pub(crate) fn vector_log_floor(c: &Connection) -> rusqlite::Result<i64> {
    let v: Option<String> = c.query_row("SELECT value FROM meta WHERE key = 'vecLogFloor'", [], |r| r.get(0)).optional()?;
    Ok(v.and_then(|s| s.parse().ok()).unwrap_or(0))
}

/// Remove a file's chunks from every table.
pub(crate) fn delete_file_chunks(c: &Connection, source: &str, path: &str, has_vectors: bool) -> rusqlite::Result<()> {
    let rowids: Vec<i64> = c
        .prepare_cached("SELECT rowid FROM chunks WHERE source = ?1 AND path = ?2")?
        .query_map(params![source, path], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    delete_chunk_rows(c, &rowids, has_vectors)
}

/// Remove these chunks from every table. The keyword index's rows go first: it reads their terms from the chunks
/// to take them out.
///
/// The virtual tables are deleted from one rowid at a time: vec0 answers `rowid IN (subquery)` by scanning the
/// whole table, which made every file written into an index of N vectors cost O(N), so building an index cost
/// time quadratic in its size.
pub(crate) fn delete_chunk_rows(c: &Connection, rowids: &[i64], has_vectors: bool) -> rusqlite::Result<()> {
    if rowids.is_empty() {
        return Ok(());
    }
    let mut fts = c.prepare_cached("DELETE FROM chunks_fts WHERE rowid = ?1")?;
    for id in rowids {
        fts.execute([id])?;
    }
    if has_vectors {
        let mut vec = c.prepare_cached("DELETE FROM chunks_vec WHERE rowid = ?1")?;
        for id in rowids {
            vec.execute([id])?;
        }
    }
    let mut chunk = c.prepare_cached("DELETE FROM chunks WHERE rowid = ?1")?;
    for id in rowids {
        chunk.execute([id])?;
    }
    Ok(())
}
