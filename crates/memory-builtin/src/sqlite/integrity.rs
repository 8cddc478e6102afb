//! Checking an index for damage: SQLite's page check, every row decoded as searches decode it, and FTS5's
//! own check of the keyword index. Run by `verify`, apart from the reads it checks.

use memory_core::{MemoryError, Result};
use rusqlite::{Connection, OptionalExtension};

use super::rows::{candidate_row, file_row, CANDIDATE_COLUMNS};
use super::SqliteStore;

impl SqliteStore {
    pub(super) fn verify_index(&self) -> Result<Option<String>> {
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
}
