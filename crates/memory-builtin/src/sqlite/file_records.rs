//! Reads of whole files: the file records (all, by key, by name) and a file's chunks in line order.

use memory_core::store::{Candidate, FileRecord};
use memory_core::{Result, Source};
use rusqlite::{params, OptionalExtension};

use super::rows::{candidate_row, file_row, CANDIDATE_COLUMNS};
use super::SqliteStore;

/// The file records whose path, name or stem is `?1`, `?2` and `?3` being the sources (see `files_named`).
const FILES_NAMED_SQL: &str = "SELECT source, path, hash, size, mtime_ms FROM files
     WHERE (source IN (?2, ?3) AND path = ?1) OR name = ?1 OR stem = ?1";

impl SqliteStore {
    pub(super) fn list_files(&self) -> Result<Vec<FileRecord>> {
        self.read("list files", |c| {
            let mut st = c.prepare_cached("SELECT source, path, hash, size, mtime_ms FROM files")?;
            let rows = st.query_map([], file_row)?;
            rows.collect()
        })
    }

    pub(super) fn read_file_records(&self, keys: &[(Source, String)]) -> Result<Vec<FileRecord>> {
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

    pub(super) fn find_files_named(&self, query: &str) -> Result<Vec<FileRecord>> {
        // Indexed equality on path, name and stem (the columns hold `store::name_and_stem`); ranking decides the
        // order. The path is looked up under each source: `path = ?` alone cannot use the (source, path) key, and
        // one unindexed arm makes SQLite scan every file record for the whole OR, for every one-word query.
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

    pub(super) fn read_file_chunks(&self, source: Source, path: &str, limit: usize) -> Result<Vec<Candidate>> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::schema;
    use rusqlite::Connection;

    /// Every one-word search asks for files by name: a plan that scans the file records makes each search cost
    /// time in proportion to the number of notes.
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
}
