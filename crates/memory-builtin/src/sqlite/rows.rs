//! How index rows become the engine's types and back: file records, candidates, vectors as blobs, and the
//! source filter clause. Shared by every read and write, so apart from any of them.

use memory_core::store::{Candidate, FileRecord, Scope};
use memory_core::Source;

pub(super) fn source_of(s: &str) -> Source {
    Source::parse(s).unwrap_or(Source::Memory)
}

pub(super) fn source_filter(sources: &[Source], column: &str) -> (String, Vec<String>) {
    if sources.is_empty() {
        return (String::new(), Vec::new());
    }
    let marks = vec!["?"; sources.len()].join(",");
    (format!(" AND {column} IN ({marks})"), sources.iter().map(|s| s.as_str().to_string()).collect())
}

/// The SQL condition of a scope over the chunks table aliased `c` (sources, days) and its arguments, to follow
/// `WHERE 1 = 1`.
pub(super) fn scope_filter(scope: &Scope) -> (String, Vec<rusqlite::types::Value>) {
    let (mut sql, sources) = source_filter(&scope.sources, "c.source");
    let mut args: Vec<rusqlite::types::Value> = sources.into_iter().map(Into::into).collect();
    if let Some(days) = scope.days {
        sql.push_str(" AND c.date BETWEEN ? AND ?");
        args.push(days.first.into());
        args.push(days.last.into());
    }
    (sql, args)
}

pub(super) fn vec_to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(super) fn blob_to_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

pub(super) fn file_row(r: &rusqlite::Row) -> rusqlite::Result<FileRecord> {
    Ok(FileRecord {
        source: source_of(r.get_ref(0)?.as_str()?),
        path: r.get(1)?,
        hash: r.get(2)?,
        size: r.get::<_, i64>(3)? as u64,
        mtime_ms: r.get(4)?,
    })
}

pub(super) const CANDIDATE_COLUMNS: &str = "c.id, c.source, c.path, c.start_line, c.end_line, c.text, c.importance, f.mtime_ms, c.date";

pub(super) fn candidate_row(row: &rusqlite::Row) -> rusqlite::Result<Candidate> {
    Ok(Candidate {
        chunk_id: row.get(0)?,
        source: source_of(row.get_ref(1)?.as_str()?),
        path: row.get(2)?,
        start_line: row.get::<_, i64>(3)? as usize,
        end_line: row.get::<_, i64>(4)? as usize,
        text: row.get(5)?,
        importance: row.get::<_, Option<i64>>(6)?.map(|n| n as u8),
        file_mtime_ms: row.get(7)?,
        date: row.get(8)?,
        keyword_score: None,
        vector_score: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_blobs() {
        let v = vec![0.25f32, -1.5, 3.0];
        assert_eq!(blob_to_vec(&vec_to_blob(&v)), v);
    }
}
