//! SQLite storage: one database file per index, WAL, a writer and a reader connection (searches never wait
//! for a sync's write transaction), FTS5 over the analysed terms, vec0 for vectors.

mod keyword_plan;
mod quantized;
mod schema;
mod storage;
mod vectors;

pub(crate) use schema::create as create_schema;
pub use storage::SqliteStorage;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use async_trait::async_trait;
use memory_core::identity::IndexIdentity;
use memory_core::locks::{LockExt, ResetOnPoison};
use memory_core::store::{name_and_stem, Candidate, ChunkRecord, ChunkStore, EmbeddingCacheKey, FileRecord, KeywordQuery, SyncBatch};
use memory_core::{MemoryError, Result, Source};
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use tracing::warn;

/// BM25 weights of the FTS columns (terms, heading): headings count again, at the shared heading weight.
const BM25_WEIGHTS: (f64, f64) = (1.0, memory_core::analysis::HEADING_WEIGHT);
const BUSY_TIMEOUT_MS: u64 = 5_000;

static VEC_INIT: Once = Once::new();

/// Register sqlite-vec with every connection this process opens (it is compiled in, not loaded).
fn register_sqlite_vec() {
    VEC_INIT.call_once(|| unsafe {
        #[allow(
            clippy::missing_transmute_annotations,
            reason = "sqlite-vec's init has the C signature SQLite calls; its Rust binding declares it without one"
        )]
        rusqlite::ffi::sqlite3_auto_extension(Some(std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ())));
    });
}

pub(crate) fn db_err(context: &str, e: rusqlite::Error) -> MemoryError {
    use rusqlite::ffi::ErrorCode;
    match &e {
        rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            MemoryError::CorruptIndex(format!("{context}: {e}"))
        }
        // Bytes a column cannot hold when the file is intact (text that is not UTF-8, a number where text was
        // written): damaged data pages, which SQLite's page checks do not see.
        rusqlite::Error::Utf8Error(_)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => MemoryError::CorruptIndex(format!("{context}: damaged data: {e}")),
        // The file system said no (full, read-only, an I/O error): an I/O error of the index, not a bug.
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DiskFull | ErrorCode::ReadOnly | ErrorCode::SystemIoFailure | ErrorCode::CannotOpen) =>
        {
            MemoryError::Io { context: context.to_string(), source: std::io::Error::other(e.to_string()) }
        }
        rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            MemoryError::Unavailable(format!("{context}: index is busy: {e}"))
        }
        _ => MemoryError::Internal(format!("{context}: {e}")),
    }
}

fn is_readonly(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ffi::ErrorCode::ReadOnly)
}

/// Switching a new database to WAL needs a lock that SQLite does not wait for: when another process opens the
/// same new index at the same moment, retry for up to the busy timeout.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(BUSY_TIMEOUT_MS);
    let mut pause = 5;
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, m))
                if matches!(e.code, rusqlite::ffi::ErrorCode::DatabaseBusy | rusqlite::ffi::ErrorCode::DatabaseLocked)
                    && std::time::Instant::now() < deadline =>
            {
                tracing::debug!(error = ?m, "index busy while opening; retrying");
                std::thread::sleep(std::time::Duration::from_millis(pause));
                pause = (pause * 2).min(200);
            }
            other => return other,
        }
    }
}

fn open_connection(path: &Path) -> rusqlite::Result<Connection> {
    register_sqlite_vec();
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

/// Errors of opening a database that mean "cannot write here" (a read-only or full file system, no permission):
/// an existing index is then opened read-only.
fn is_write_trouble(e: &rusqlite::Error) -> bool {
    use rusqlite::ffi::ErrorCode;
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::SystemIoFailure | ErrorCode::DiskFull | ErrorCode::PermissionDenied))
}

/// Why nothing can be written in `dir`, found by writing a small probe file there (`None`: it can be written).
fn write_trouble(dir: &Path) -> Option<String> {
    use std::io::Write;
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    let result = std::fs::File::create(&probe).and_then(|mut f| {
        f.write_all(&[0u8; 4096])?;
        f.sync_all()
    });
    let _ = std::fs::remove_file(&probe);
    result.err().map(|e| format!("cannot write in {}: {e}", dir.display()))
}

/// `path` as an SQLite URI (`file:` with the characters URIs reserve escaped).
fn sqlite_uri(path: &Path, query: &str) -> String {
    let mut out = String::from("file:");
    for ch in path.to_string_lossy().chars() {
        match ch {
            '%' | '?' | '#' => out.push_str(&format!("%{:02X}", ch as u32)),
            c => out.push(c),
        }
    }
    out.push('?');
    out.push_str(query);
    out
}

/// A read-only connection to an existing index that cannot be written: `mode=ro` when SQLite can still share
/// it (its WAL index can be created), else `immutable=1` (nothing can write that file system meanwhile).
fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    use rusqlite::OpenFlags;
    register_sqlite_vec();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let check = |c: Connection| -> rusqlite::Result<Connection> {
        c.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))?;
        Ok(c)
    };
    Connection::open_with_flags(sqlite_uri(path, "mode=ro"), flags)
        .and_then(check)
        .or_else(|_| Connection::open_with_flags(sqlite_uri(path, "immutable=1"), flags).and_then(check))
        .inspect(|c| {
            let _ = c.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS));
        })
}

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

impl SqliteStore {
    /// Open (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| MemoryError::io_path("cannot create index folder", dir, e))?;
        }
        let context = format!("cannot open index {}", path.display());
        let opened = retry_busy(|| {
            let mut c = open_connection(path)?;
            schema::create(&mut c)?;
            Ok(c)
        })
        .and_then(|writer| Ok((writer, retry_busy(|| open_connection(path))?)));
        let (writer, reader) = match opened {
            Ok(pair) => pair,
            Err(e) if is_write_trouble(&e) && path.is_file() => {
                // Degraded, not dead: an index that cannot be written still answers searches as it is.
                let dir = path.parent().unwrap_or(Path::new("."));
                let cause = write_trouble(dir).unwrap_or_else(|| format!("{context}: {e}"));
                let reader = open_read_only(path).map_err(|_| db_err(&format!("{context} ({cause})"), e))?;
                warn!(path = %path.display(), cause = %cause, "index opened read-only: searches answer from it as it is; nothing is synced until it can be written");
                return Ok(SqliteStore {
                    path: path.to_path_buf(),
                    read_only: Some(cause),
                    writer: Mutex::new(None),
                    reader: Mutex::new(Some(reader)),
                    vectors: Mutex::new(None),
                    searched_vectors: std::sync::atomic::AtomicBool::new(false),
                });
            }
            Err(e) => return Err(db_err(&context, e)),
        };
        Ok(SqliteStore {
            path: path.to_path_buf(),
            read_only: None,
            writer: Mutex::new(Some(writer)),
            reader: Mutex::new(Some(reader)),
            vectors: Mutex::new(None),
            searched_vectors: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run `f` on a connection; on a "readonly database" error (the file was replaced or its permissions
    /// flipped under us) reopen the connection once and retry.
    fn with<T>(&self, slot: &Mutex<Option<Connection>>, context: &str, f: impl Fn(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        // Errors name the index file: "disk full" alone does not say which disk.
        let context = &format!("{context} ({})", self.path.display());
        let mut guard = slot.locked();
        let conn = guard.as_mut().ok_or_else(|| MemoryError::Unavailable("index is closed".into()))?;
        match f(conn) {
            Ok(v) => Ok(v),
            Err(e) if is_readonly(&e) => {
                warn!(path = %self.path.display(), "readonly database error; reopening the connection once");
                let fresh = guard.insert(open_connection(&self.path).map_err(|e| db_err(context, e))?);
                // data_version values are per connection: the vector copy must not compare across two.
                if std::ptr::eq(slot, &self.reader) {
                    *self.vectors.locked_or_reset() = None;
                }
                f(fresh).map_err(|e| db_err(context, e))
            }
            Err(e) => Err(db_err(context, e)),
        }
    }

    fn read<T>(&self, context: &str, f: impl Fn(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.with(&self.reader, context, f)
    }

    fn write<T>(&self, context: &str, f: impl Fn(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        if let Some(cause) = &self.read_only {
            return Err(MemoryError::Unavailable(format!("{context}: the index {} is open read-only ({cause})", self.path.display())));
        }
        self.with(&self.writer, context, f)
    }

    /// FTS5's own check of the keyword index against the chunks' terms (every row, and the totals BM25 reads): a
    /// mismatch is damage, and the index is set aside and rebuilt from the files as any damage is. An index of the
    /// contentless layout before it cannot be checked (its identity's older schema has it rebuilt).
    fn verify_keyword_index(&self) -> Result<()> {
        let reads_chunks = self.read("check the keyword index's layout", |c| {
            let sql: Option<String> = c.query_row("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'", [], |r| r.get(0)).optional()?;
            Ok(sql.is_some_and(|s| s.contains("content = 'chunks'")))
        })?;
        if !reads_chunks {
            return Ok(());
        }
        let check = |c: &mut Connection| -> rusqlite::Result<bool> {
            match c.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)", []) {
                Ok(_) => Ok(true),
                // SQLITE_CORRUPT_VTAB: the index and its content disagree.
                Err(rusqlite::Error::SqliteFailure(f, _)) if f.extended_code == rusqlite::ffi::SQLITE_CORRUPT_VTAB => Ok(false),
                Err(e) => Err(e),
            }
        };
        let in_step =
            if self.read_only.is_some() { self.read("check the keyword index", check)? } else { self.write("check the keyword index", check)? };
        if in_step {
            return Ok(());
        }
        Err(MemoryError::CorruptIndex(format!(
            "{}: the keyword index does not match the chunks (its rows or the totals keyword scores use)",
            self.path.display()
        )))
    }

    /// sqlite-vec's exact k-NN scan over every f32 vector: how vector search answered before the in-memory
    /// copy, kept as the reference the fast path is tested and benchmarked against (exact for up to 4096
    /// vectors outside the filtered sources). Only with the `reference-paths` feature (tests and memory-bench).
    #[cfg(feature = "reference-paths")]
    pub fn exact_vector_search(&self, vector: &[f32], limit: usize, sources: &[Source]) -> Result<Vec<Candidate>> {
        self.check_query_vector(vector)?;
        let (filter, filter_args) = source_filter(sources, "c.source");
        // With a source filter the scan's k is before filtering: ask for sqlite-vec's most (the fast path filters
        // inside its scan and always fills `limit`; the old path over-fetched 4x and could come up short).
        let fetch = if sources.is_empty() { limit } else { 4096 };
        let sql = format!(
            "SELECT {CANDIDATE_COLUMNS}, v.distance FROM
               (SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ?1 AND k = ?2) v
             JOIN chunks c ON c.rowid = v.rowid
             JOIN files f ON f.source = c.source AND f.path = c.path
             WHERE 1 = 1{filter} ORDER BY v.distance"
        );
        let blob = vec_to_blob(vector);
        self.read("vector search", |c| {
            let mut st = c.prepare_cached(&sql)?;
            let mut args: Vec<rusqlite::types::Value> = vec![blob.clone().into(), (fetch as i64).into()];
            args.extend(filter_args.iter().cloned().map(Into::into));
            let rows = st.query_map(params_from_iter(args), |r| {
                let mut cand = candidate_row(r)?;
                // sqlite-vec has no cosine distance for a zero vector (NULL): such a query matches nothing.
                let distance: Option<f64> = r.get(8)?;
                cand.vector_score = distance.map(|d| 1.0 - d);
                Ok(cand)
            })?;
            let mut out: Vec<Candidate> = rows.filter(|c| !matches!(c, Ok(c) if c.vector_score.is_none())).collect::<rusqlite::Result<_>>()?;
            out.truncate(limit);
            Ok(out)
        })
    }

    /// Keyword candidates without the document-frequency bound (every term, every matching row): how keyword
    /// search answered before the bound, the reference the benchmark compares with. Only with the
    /// `reference-paths` feature.
    #[cfg(feature = "reference-paths")]
    pub fn unbounded_keyword_candidates(&self, query: &KeywordQuery, limit: usize, sources: &[Source]) -> Result<Vec<Candidate>> {
        self.keyword_candidates(query, limit, sources, false)
    }

    /// Keyword candidates; `bounded: false` runs the query over every term (the reference path above).
    fn keyword_candidates(&self, query: &KeywordQuery, limit: usize, sources: &[Source], bounded: bool) -> Result<Vec<Candidate>> {
        if query.terms.is_empty() {
            return Ok(Vec::new());
        }
        let (filter, filter_args) = source_filter(sources, "c.source");
        let sql = |window: bool| {
            format!(
                "SELECT {CANDIDATE_COLUMNS}, r.rank FROM
                   (SELECT rowid, bm25(chunks_fts, {}, {}) AS rank FROM chunks_fts WHERE chunks_fts MATCH ?1{} ORDER BY rank LIMIT ?2) r
                 JOIN chunks c ON c.rowid = r.rowid
                 JOIN files f ON f.source = c.source AND f.path = c.path
                 WHERE 1 = 1{filter} ORDER BY r.rank",
                BM25_WEIGHTS.0,
                BM25_WEIGHTS.1,
                if window { " AND rowid >= ?3" } else { "" }
            )
        };
        let (plain_sql, window_sql) = (sql(false), sql(true));
        // With a source filter, over-fetch so filtering leaves enough.
        let fetch = if sources.is_empty() { limit } else { limit * 4 };
        self.read("keyword search", |c| {
            // One read transaction: the plan's frequencies and the query see the same commit.
            let tx = c.transaction()?;
            let plan = if bounded {
                keyword_plan::plan(&tx, &query.terms)?
            } else {
                keyword_plan::KeywordPlan { terms: query.terms.clone(), min_rowid: None }
            };
            if plan.terms.len() != query.terms.len() || plan.min_rowid.is_some() {
                tracing::debug!(terms = ?query.terms, kept = ?plan.terms, min_rowid = ?plan.min_rowid, "keyword query bounded by document frequency");
            }
            let mut st = tx.prepare_cached(if plan.min_rowid.is_some() { &window_sql } else { &plain_sql })?;
            let mut args: Vec<rusqlite::types::Value> = vec![fts_match_expression(&plan.terms).into(), (fetch as i64).into()];
            if let Some(min) = plan.min_rowid {
                args.push(min.into());
            }
            args.extend(filter_args.iter().cloned().map(Into::into));
            let rows = st.query_map(params_from_iter(args), |r| {
                let mut cand = candidate_row(r)?;
                // FTS5's bm25() is negative, more negative = better: negated to `Candidate::keyword_score`'s
                // direction (higher = better).
                cand.keyword_score = Some(-r.get::<_, f64>(8)?);
                Ok(cand)
            })?;
            let mut out: Vec<Candidate> = rows.collect::<rusqlite::Result<_>>()?;
            drop(st);
            tx.commit()?;
            out.truncate(limit);
            Ok(out)
        })
    }

    /// The index's vector width, or why `vector` cannot be searched.
    fn check_query_vector(&self, vector: &[f32]) -> Result<usize> {
        let dims = self.read("read vector dims", |c| schema::vector_dims(c))?;
        let Some(dims) = dims else {
            return Err(MemoryError::Unavailable("no vectors indexed yet".into()));
        };
        if vector.len() != dims {
            return Err(MemoryError::InvalidInput(format!("query vector has {} dimensions, the index holds {dims}", vector.len())));
        }
        Ok(dims)
    }

    /// Close both connections (checkpointing the WAL into the main file).
    pub fn close_now(&self) {
        for slot in [&self.reader, &self.writer] {
            if let Some(conn) = slot.locked().take() {
                if let Err((_, e)) = conn.close() {
                    warn!(error = %e, "closing index connection failed");
                }
            }
        }
    }
}

/// The file records whose path, name or stem is `?1`, `?2` and `?3` being the sources (see `files_named`).
const FILES_NAMED_SQL: &str = "SELECT source, path, hash, size, mtime_ms FROM files
     WHERE (source IN (?2, ?3) AND path = ?1) OR name = ?1 OR stem = ?1";

fn source_of(s: &str) -> Source {
    Source::parse(s).unwrap_or(Source::Memory)
}

/// FTS5 MATCH expression: every term a quoted string (quotes doubled), any may match.
pub fn fts_match_expression(terms: &[String]) -> String {
    terms.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" OR ")
}

fn source_filter(sources: &[Source], column: &str) -> (String, Vec<String>) {
    if sources.is_empty() {
        return (String::new(), Vec::new());
    }
    let marks = vec!["?"; sources.len()].join(",");
    (format!(" AND {column} IN ({marks})"), sources.iter().map(|s| s.as_str().to_string()).collect())
}

/// A file's chunks are replaced by `chunks`: the rows already in the index exactly as they would be written again
/// (same id, lines, text, terms, heading, importance and vector) stay, marked in `unchanged`; the rowids of the
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
        "SELECT c.rowid, c.id, c.start_line, c.end_line, c.text, c.hash, c.importance, c.terms, c.heading, v.embedding
         FROM chunks c LEFT JOIN vec_f32 v ON v.rowid = c.rowid WHERE c.source = ?1 AND c.path = ?2"
    } else {
        "SELECT c.rowid, c.id, c.start_line, c.end_line, c.text, c.hash, c.importance, c.terms, c.heading, NULL
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
                    && r.get::<_, Option<Vec<u8>>>(9)? == ch.embedding.as_deref().map(vec_to_blob);
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

fn vec_to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn blob_to_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn file_row(r: &rusqlite::Row) -> rusqlite::Result<FileRecord> {
    Ok(FileRecord {
        source: source_of(r.get_ref(0)?.as_str()?),
        path: r.get(1)?,
        hash: r.get(2)?,
        size: r.get::<_, i64>(3)? as u64,
        mtime_ms: r.get(4)?,
    })
}

const CANDIDATE_COLUMNS: &str = "c.id, c.source, c.path, c.start_line, c.end_line, c.text, c.importance, f.mtime_ms";

fn candidate_row(row: &rusqlite::Row) -> rusqlite::Result<Candidate> {
    Ok(Candidate {
        chunk_id: row.get(0)?,
        source: source_of(row.get_ref(1)?.as_str()?),
        path: row.get(2)?,
        start_line: row.get::<_, i64>(3)? as usize,
        end_line: row.get::<_, i64>(4)? as usize,
        text: row.get(5)?,
        importance: row.get::<_, Option<i64>>(6)?.map(|n| n as u8),
        file_mtime_ms: row.get(7)?,
        keyword_score: None,
        vector_score: None,
    })
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
        self.read("list files", |c| {
            let mut st = c.prepare_cached("SELECT source, path, hash, size, mtime_ms FROM files")?;
            let rows = st.query_map([], file_row)?;
            rows.collect()
        })
    }

    async fn file_records(&self, keys: &[(Source, String)]) -> Result<Vec<FileRecord>> {
        self.read("read file records", |c| {
            let mut st = c.prepare_cached("SELECT source, path, hash, size, mtime_ms FROM files WHERE source = ?1 AND path = ?2")?;
            let mut out = Vec::with_capacity(keys.len());
            for (source, path) in keys {
                if let Some(r) = st.query_row(params![source.as_str(), path], file_row).optional()? {
                    out.push(r);
                }
            }
            Ok(out)
        })
    }

    async fn files_named(&self, query: &str) -> Result<Vec<FileRecord>> {
        // Indexed equality on path, name and stem (the columns hold `store::name_and_stem`); ranking decides the
        // order. The path is looked up under each source: `path = ?` alone cannot use the (source, path) key, and
        // one unindexed arm makes SQLite scan every file record for the whole OR (4 ms at 50,000 notes, for every
        // one-word query).
        if query.is_empty() {
            return Ok(Vec::new()); // names no file (`store::is_named`), though a dot file's stem column is empty
        }
        self.read("find files by name", |c| {
            let mut st = c.prepare_cached(FILES_NAMED_SQL)?;
            let [a, b] = Source::ALL.map(Source::as_str);
            let rows = st.query_map(params![query, a, b], file_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })
    }

    async fn apply(&self, batch: SyncBatch) -> Result<()> {
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
                    "INSERT INTO chunks(id, source, path, start_line, end_line, text, hash, importance, terms, heading)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
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
                        ch.heading_terms
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

    async fn file_chunks(&self, source: Source, path: &str, limit: usize) -> Result<Vec<Candidate>> {
        self.read("read file chunks", |c| {
            let sql = format!(
                "SELECT {CANDIDATE_COLUMNS} FROM chunks c JOIN files f ON f.source = c.source AND f.path = c.path
                 WHERE c.source = ?1 AND c.path = ?2 ORDER BY c.start_line LIMIT ?3"
            );
            let mut st = c.prepare_cached(&sql)?;
            let rows = st.query_map(params![source.as_str(), path, limit as i64], candidate_row)?;
            rows.collect()
        })
    }

    async fn keyword_search(&self, query: &KeywordQuery, limit: usize, sources: &[Source]) -> Result<Vec<Candidate>> {
        self.keyword_candidates(query, limit, sources, true)
    }

    async fn vector_search(&self, vector: &[f32], limit: usize, sources: &[Source]) -> Result<Vec<Candidate>> {
        let dims = self.check_query_vector(vector)?;
        let first = !self.searched_vectors.swap(true, std::sync::atomic::Ordering::Relaxed);
        let exact = if first {
            let blob = vec_to_blob(vector);
            self.read("vector search", |c| vectors::exact_first(c, &blob, limit, sources))?
        } else {
            None
        };
        let nearest = match exact {
            Some(hits) => hits,
            None => self.read("vector search", |c| {
                let mut copy = self.vectors.locked_or_reset();
                vectors::nearest(c, &mut copy, dims, vector, limit, sources)
            })?,
        };
        self.read("read vector candidates", |c| {
            let sql = format!("SELECT {CANDIDATE_COLUMNS} FROM chunks c JOIN files f ON f.source = c.source AND f.path = c.path WHERE c.rowid = ?1");
            let mut st = c.prepare_cached(&sql)?;
            let mut out = Vec::with_capacity(nearest.len());
            for (rowid, score) in &nearest {
                // A chunk deleted since the scan (a sync committed in between) is simply not a candidate.
                if let Some(mut cand) = st.query_row([rowid], candidate_row).optional()? {
                    cand.vector_score = Some(*score);
                    out.push(cand);
                }
            }
            Ok(out)
        })
    }

    async fn chunk_vectors(&self, chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        if chunk_ids.is_empty() || self.read("read vector dims", |c| schema::vector_dims(c))?.is_none() {
            return Ok(HashMap::new());
        }
        self.read("read chunk vectors", |c| {
            let mut st = c.prepare_cached("SELECT v.embedding FROM chunks c JOIN vec_f32 v ON v.rowid = c.rowid WHERE c.id = ?1")?;
            let mut out = HashMap::new();
            for id in chunk_ids {
                if let Some(blob) = st.query_row(params![id], |r| r.get::<_, Vec<u8>>(0)).optional()? {
                    out.insert(id.clone(), blob_to_vec(&blob));
                }
            }
            Ok(out)
        })
    }

    async fn cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        self.read("read embedding cache", |c| {
            let mut st =
                c.prepare_cached("SELECT embedding FROM embedding_cache WHERE provider = ?1 AND model = ?2 AND fingerprint = ?3 AND hash = ?4")?;
            let mut out = HashMap::new();
            for h in hashes {
                if let Some(blob) = st.query_row(params![key.provider, key.model, key.fingerprint, h], |r| r.get::<_, Vec<u8>>(0)).optional()? {
                    out.insert(h.clone(), blob_to_vec(&blob));
                }
            }
            Ok(out)
        })
    }

    async fn cache_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()> {
        let now = memory_core::now_ms();
        self.write("write embedding cache", |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT OR REPLACE INTO embedding_cache(provider, model, fingerprint, hash, embedding, dims, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?;
                for (h, v) in entries {
                    st.execute(params![key.provider, key.model, key.fingerprint, h, vec_to_blob(v), v.len() as i64, now])?;
                }
                let count: i64 = tx.query_row("SELECT count(*) FROM embedding_cache", [], |r| r.get(0))?;
                if count as usize > max_entries {
                    tx.execute(
                        "DELETE FROM embedding_cache WHERE rowid IN
                           (SELECT rowid FROM embedding_cache ORDER BY updated_at, rowid LIMIT ?1)",
                        params![count - max_entries as i64],
                    )?;
                }
            }
            tx.commit()
        })
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
        self.read("verify index", |c| {
            // The pages and b-trees (SQLite's own check)...
            let problems: Vec<String> = c.prepare("PRAGMA quick_check")?.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
            if problems.first().is_some_and(|p| p != "ok") {
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                    Some(problems.into_iter().take(3).collect::<Vec<_>>().join("; ")),
                ));
            }
            // ...and what they hold: every record and chunk decoded as searches decode them (damaged text
            // passes the page check).
            let mut files = c.prepare("SELECT source, path, hash, size, mtime_ms FROM files")?;
            for row in files.query_map([], file_row)? {
                row?;
            }
            let mut chunks =
                c.prepare(&format!("SELECT {CANDIDATE_COLUMNS} FROM chunks c JOIN files f ON f.source = c.source AND f.path = c.path"))?;
            for row in chunks.query_map([], candidate_row)? {
                row?;
            }
            Ok(())
        })?;
        self.verify_keyword_index()?;
        Ok(None)
    }

    async fn status_details(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        let mut m = serde_json::Map::new();
        if let Some((n, bytes)) = vectors::describe(&self.vectors.locked_or_reset()) {
            m.insert("vectorCopy".into(), serde_json::json!({"vectors": n, "bytes": bytes}));
        }
        Ok(m)
    }

    async fn meta(&self, key: &str) -> Result<Option<String>> {
        self.read("read meta", |c| c.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| r.get(0)).optional())
    }

    async fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.write("write meta", |c| c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", params![key, value]).map(|_| ()))
    }

    async fn close(&self) -> Result<()> {
        self.close_now();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_expression_quotes_every_term() {
        let e = fts_match_expression(&["a\"b".into(), "near".into()]);
        assert_eq!(e, "\"a\"\"b\" OR \"near\"");
    }

    /// Every one-word search asks for files by name: a plan that scans the file records costs milliseconds
    /// per search at 50,000 notes.
    #[test]
    fn the_lookup_by_file_name_uses_indexes() {
        let mut c = Connection::open_in_memory().unwrap();
        schema::create(&mut c).unwrap();
        let plan: Vec<String> = c
            .prepare(&format!("EXPLAIN QUERY PLAN {FILES_NAMED_SQL}"))
            .unwrap()
            .query_map(params!["a.md", "memory", "sessions"], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(plan.iter().all(|step| !step.starts_with("SCAN")), "{plan:?}");
        assert_eq!(plan.iter().filter(|step| step.starts_with("SEARCH files USING")).count(), 3, "{plan:?}");
    }

    #[test]
    fn vectors_round_trip_through_blobs() {
        let v = vec![0.25f32, -1.5, 3.0];
        assert_eq!(blob_to_vec(&vec_to_blob(&v)), v);
    }
}
