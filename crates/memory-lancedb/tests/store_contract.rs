//! The LanceDB storage keeps every promise of the storage traits (conformance's store contract), on a local
//! folder.

use std::path::Path;
use std::sync::Arc;

use conformance::store_contract::{run_all, StoreHarness};
use memory_core::store::{ChunkStore, IndexStorage};
use memory_lancedb::LanceDbStorage;

struct LocalLance;

#[async_trait::async_trait]
impl StoreHarness for LocalLance {
    async fn open(&self, dir: &Path) -> memory_core::Result<Arc<dyn IndexStorage>> {
        let dir = dir.to_str().expect("temporary folders are UTF-8");
        Ok(Arc::new(LanceDbStorage::connect(dir, &Default::default(), "contract", crate::common::test_options()).await?))
    }

    /// The identity is the `identity` row of the generation's meta table (`set_meta` keys are namespaced apart
    /// from it): overwrite that row through a connection of our own.
    async fn write_unreadable_identity(&self, dir: &Path, _store: &dyn ChunkStore) -> Option<memory_core::Result<()>> {
        Some(overwrite_identity_row(dir).await.map_err(|e| memory_core::MemoryError::Internal(format!("writing the identity row: {e}"))))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lancedb_storage_keeps_the_store_contract() {
    let report = run_all(Arc::new(LocalLance)).await;
    report.assert_ok();
    assert!(report.skipped().is_empty(), "every check applies to LanceDB: {}", report.render());
}

async fn overwrite_identity_row(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use arrow_array::{RecordBatch, RecordBatchIterator, StringArray};
    let conn = lancedb::connect(dir.to_str().ok_or("non-UTF-8 folder")?).execute().await?;
    // A new index is generation 1 (see storage.rs).
    let table = conn.open_table("contract_g1_meta").execute().await?;
    let schema = table.schema().await?;
    let row = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from(vec!["identity"])), Arc::new(StringArray::from(vec!["{\"schema\": \"from a newer version\""]))],
    )?;
    let mut merge = table.merge_insert(&["key"]);
    merge.when_matched_update_all(None).when_not_matched_insert_all();
    merge.execute(Box::new(RecordBatchIterator::new(vec![Ok(row)], schema))).await?;
    Ok(())
}
