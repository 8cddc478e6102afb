//! The builtin memory engine: SQLite (bundled, with FTS5) and sqlite-vec compiled into the binary, no run-time
//! extension loading. It stores chunks and retrieves candidates; discovery, sync, embedding and ranking come
//! from `memory_core::indexed::IndexedBackend`.

mod factory;
mod sqlite;

pub use factory::{default_index_path, BuiltinFactory};
pub use sqlite::{SqliteStorage, SqliteStore};
