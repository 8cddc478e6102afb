//! The SQLite storage keeps every promise of the storage traits (conformance's store contract).

use std::path::Path;
use std::sync::Arc;

use conformance::store_contract::{run_all, StoreHarness};
use memory_builtin::SqliteStorage;
use memory_core::store::{ChunkStore, IndexStorage};

struct Sqlite;

#[async_trait::async_trait]
impl StoreHarness for Sqlite {
    async fn open(&self, dir: &Path) -> memory_core::Result<Arc<dyn IndexStorage>> {
        Ok(Arc::new(SqliteStorage::new(dir.join("index.sqlite"))))
    }

    /// The identity is the `identity` row of the `meta` table, which `set_meta` writes too.
    async fn write_unreadable_identity(&self, _dir: &Path, store: &dyn ChunkStore) -> Option<memory_core::Result<()>> {
        Some(store.set_meta("identity", "{\"schema\": \"from a newer version\"").await)
    }
}

#[tokio::test]
async fn sqlite_storage_keeps_the_store_contract() {
    let report = run_all(Arc::new(Sqlite)).await;
    report.assert_ok();
    assert!(report.skipped().is_empty(), "every check applies to SQLite: {}", report.render());
}
