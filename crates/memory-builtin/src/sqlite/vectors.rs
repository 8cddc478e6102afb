//! Vector search: the in-memory int8 copy (quantized.rs) kept in step with the SQLite file, scanned, and its
//! best candidates re-scored exactly from the f32 vectors (`vec_f32`, the same values as sqlite-vec's `chunks_vec`).
//!
//! In step: before each search the reader connection asks `PRAGMA data_version`, which moves when any other
//! connection (this process's writer or another process) committed. Only then is the change log read: the
//! chunks written or deleted since the copy's last applied entry are re-read one by one. A copy further behind
//! than the log reaches (pruned entries), or none yet, is rebuilt from the whole table. Everything is read in
//! one read transaction, so the copy always equals one committed state of the file; the copy lives only in
//! memory, so a crash can leave nothing stale behind, and a rebuilt index (a new generation file) gets a new
//! store and a new copy. A store's first vector search is answered by sqlite-vec's exact scan instead
//! ([`exact_first`]): a process that searches once never pays for the copy.

use memory_core::Source;
use rusqlite::{params, Connection, OptionalExtension};
use tracing::debug;

use super::quantized::{exact_cosine, QuantizedVectors, SourceTag};
use super::rows::blob_to_vec;
use super::schema;

/// How many approximate candidates are re-scored exactly, per result asked for (and at least
/// [`MIN_RESCORE`]). int8 rounding moves a cosine by ~1e-3, so the true best results sit well inside this.
const RESCORE_PER_RESULT: usize = 4;
const MIN_RESCORE: usize = 64;

fn source_tag(s: &str) -> SourceTag {
    match Source::parse(s) {
        Some(Source::Sessions) => 1,
        _ => 0,
    }
}

fn tag_of(s: Source) -> SourceTag {
    source_tag(s.as_str())
}

/// The copy and the state of the file it reflects.
pub(crate) struct VectorCopy {
    vectors: QuantizedVectors,
    /// Last change-log entry applied.
    log_seq: i64,
    data_version: i64,
}

fn log_head(c: &Connection) -> rusqlite::Result<i64> {
    Ok(c.query_row("SELECT max(seq) FROM vec_log", [], |r| r.get::<_, Option<i64>>(0))?.unwrap_or(0))
}

fn data_version(c: &Connection) -> rusqlite::Result<i64> {
    c.query_row("PRAGMA data_version", [], |r| r.get(0))
}

/// Read every vector (the copy's first build, or after falling behind the log).
fn build(c: &Connection, dims: usize, data_version: i64) -> rusqlite::Result<VectorCopy> {
    let started = std::time::Instant::now();
    let log_seq = log_head(c)?;
    let mut vectors = QuantizedVectors::new(dims);
    let mut scratch = Vec::with_capacity(dims);
    let mut st = c.prepare("SELECT v.rowid, v.embedding, c.source FROM vec_f32 v JOIN chunks c ON c.rowid = v.rowid")?;
    let mut rows = st.query([])?;
    let mut floats = Vec::with_capacity(dims);
    while let Some(r) = rows.next()? {
        let blob = r.get_ref(1)?.as_blob()?;
        floats.clear();
        floats.extend(blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        vectors.upsert(r.get(0)?, source_tag(r.get_ref(2)?.as_str()?), &floats, &mut scratch);
    }
    debug!(vectors = vectors.len(), ms = started.elapsed().as_millis() as u64, "built the in-memory vector copy");
    Ok(VectorCopy { vectors, log_seq, data_version })
}

/// Apply the change log since the copy's last entry.
fn catch_up(c: &Connection, copy: &mut VectorCopy) -> rusqlite::Result<()> {
    let head = log_head(c)?;
    if head == copy.log_seq {
        return Ok(());
    }
    let mut changed = c.prepare_cached("SELECT DISTINCT chunk FROM vec_log WHERE seq > ?1 AND seq <= ?2")?;
    let rowids: Vec<i64> = changed.query_map(params![copy.log_seq, head], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    let mut read = c.prepare_cached("SELECT v.embedding, c.source FROM vec_f32 v JOIN chunks c ON c.rowid = v.rowid WHERE v.rowid = ?1")?;
    let mut scratch = Vec::new();
    for rowid in &rowids {
        let row = read.query_row([rowid], |r| Ok((blob_to_vec(r.get_ref(0)?.as_blob()?), source_tag(r.get_ref(1)?.as_str()?)))).optional()?;
        match row {
            Some((v, tag)) => copy.vectors.upsert(*rowid, tag, &v, &mut scratch),
            None => copy.vectors.remove(*rowid),
        }
    }
    debug!(changed = rowids.len(), "applied the vector change log");
    copy.log_seq = head;
    Ok(())
}

/// Bring `slot` in step with the committed state `c` reads (inside the caller's read transaction).
fn refresh(c: &Connection, slot: &mut Option<VectorCopy>, dims: usize) -> rusqlite::Result<()> {
    let dv = data_version(c)?;
    if let Some(copy) = slot.as_mut() {
        if copy.data_version == dv && copy.vectors.dims() == dims {
            return Ok(());
        }
        if copy.vectors.dims() == dims && schema::vector_log_floor(c)? <= copy.log_seq {
            catch_up(c, copy)?;
            copy.data_version = dv;
            return Ok(());
        }
    }
    *slot = Some(build(c, dims, dv)?);
    Ok(())
}

/// Rowids and cosine similarities of the `limit` nearest vectors (best first) from `sources` (all when empty).
pub(crate) fn nearest(
    c: &mut Connection,
    slot: &mut Option<VectorCopy>,
    dims: usize,
    query: &[f32],
    limit: usize,
    sources: &[Source],
) -> rusqlite::Result<Vec<(i64, f64)>> {
    // One read transaction: the copy's state and the exact vectors re-read below are the same commit.
    let tx = c.transaction()?;
    refresh(&tx, slot, dims)?;
    let copy = slot.as_ref().expect("refreshed above");
    let tags: Vec<SourceTag> = sources.iter().map(|s| tag_of(*s)).collect();
    let rescore = (limit * RESCORE_PER_RESULT).max(MIN_RESCORE);
    let approx = copy.vectors.nearest(query, rescore, |t| tags.is_empty() || tags.contains(&t));
    let mut exact = Vec::with_capacity(approx.len());
    {
        let mut read = tx.prepare_cached("SELECT embedding FROM vec_f32 WHERE rowid = ?1")?;
        for rowid in approx {
            let blob: Option<Vec<u8>> = read.query_row([rowid], |r| r.get(0)).optional()?;
            if let Some(score) = blob.and_then(|b| exact_cosine(query, &blob_to_vec(&b))) {
                exact.push((rowid, score));
            }
        }
    }
    tx.commit()?;
    exact.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    exact.truncate(limit);
    Ok(exact)
}

/// The first vector search of a store, before it holds a copy: sqlite-vec's exact scan of the file answers (it
/// reads the vectors in blocks of a thousand, several times cheaper than building the copy a row at a time, which a
/// one-shot `memory search` would pay for its one query); the copy is built by the next search. `None` when
/// `sources` leaves out chunks the index holds: sqlite-vec cannot filter inside its scan, so the copy answers.
pub(crate) fn exact_first(c: &mut Connection, query_blob: &[u8], limit: usize, sources: &[Source]) -> rusqlite::Result<Option<Vec<(i64, f64)>>> {
    let tx = c.transaction()?;
    {
        let mut held = tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM chunks WHERE source = ?1)")?;
        for other in Source::ALL.iter().filter(|s| !sources.is_empty() && !sources.contains(s)) {
            if held.query_row([other.as_str()], |r| r.get::<_, bool>(0))? {
                return Ok(None);
            }
        }
    }
    let hits = {
        let mut st = tx.prepare_cached("SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ?1 AND k = ?2")?;
        // sqlite-vec has no cosine distance for a zero vector (NULL): such a query matches nothing, as in the copy.
        let rows = st.query_map(params![query_blob, limit as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<f64>>(1)?)))?;
        let mut hits = Vec::with_capacity(limit);
        for row in rows {
            if let (rowid, Some(distance)) = row? {
                hits.push((rowid, 1.0 - distance));
            }
        }
        hits
    };
    tx.commit()?;
    Ok(Some(hits))
}

/// Rowids and cosine similarities of the `limit` nearest vectors (best first) among the chunks dated inside
/// `scope.days` (and of its sources): an exact scan of those rows, read through the index on the chunks' dates. A
/// time a question names is a few days' notes; the in-memory copy holds no dates to filter by.
pub(crate) fn nearest_dated(c: &mut Connection, query: &[f32], limit: usize, scope: &memory_core::store::Scope) -> rusqlite::Result<Vec<(i64, f64)>> {
    if scope.days.is_none() {
        return Ok(Vec::new());
    }
    let (filter, filter_args) = super::rows::scope_filter(scope);
    let sql = format!("SELECT c.rowid, v.embedding FROM chunks c JOIN vec_f32 v ON v.rowid = c.rowid WHERE 1 = 1{filter}");
    let tx = c.transaction()?;
    let mut scored = Vec::new();
    {
        let mut st = tx.prepare_cached(&sql)?;
        let mut rows = st.query(rusqlite::params_from_iter(filter_args))?;
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            if let Some(score) = exact_cosine(query, &blob_to_vec(r.get_ref(1)?.as_blob()?)) {
                scored.push((rowid, score));
            }
        }
    }
    tx.commit()?;
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(limit);
    Ok(scored)
}

/// (vectors held, bytes) of the copy, for `memory status`.
pub(crate) fn describe(slot: &Option<VectorCopy>) -> Option<(usize, usize)> {
    slot.as_ref().map(|c| (c.vectors.len(), c.vectors.bytes()))
}
