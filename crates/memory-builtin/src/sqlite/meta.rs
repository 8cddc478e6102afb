//! The index's key-value metadata (its identity among them): one small table, read and written by key.

use memory_core::Result;
use rusqlite::{params, OptionalExtension};

use super::SqliteStore;

impl SqliteStore {
    pub(super) fn read_meta(&self, key: &str) -> Result<Option<String>> {
        self.read("read meta", |c| c.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| r.get(0)).optional())
    }

    pub(super) fn write_meta(&self, key: &str, value: &str) -> Result<()> {
        self.write("write meta", |c| c.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", params![key, value]).map(|_| ()))
    }
}
