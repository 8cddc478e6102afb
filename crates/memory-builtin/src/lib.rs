//! The builtin memory engine: SQLite (bundled, with FTS5) and sqlite-vec compiled into the binary, no run-time
//! extension loading. It stores chunks and retrieves candidates; discovery, sync, embedding and ranking come
//! from `memory_core::indexed::IndexedBackend`.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod factory;
mod sqlite;

pub use factory::BuiltinFactory;
pub use sqlite::{SqliteStorage, SqliteStore};

/// Internals the fuzz targets (fuzz/) drive directly; not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::sqlite::fts_match_expression;

    /// Create the engine's schema on `c` (the FTS5 table the keyword search queries).
    pub fn create_schema(c: &mut rusqlite::Connection) -> rusqlite::Result<()> {
        crate::sqlite::create_schema(c)
    }
}
