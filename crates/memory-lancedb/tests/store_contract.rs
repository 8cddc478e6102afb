//! The LanceDB storage keeps every promise of the storage traits (conformance's store contract), on a local
//! folder and on `s3://` (moto's S3 server on loopback).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use conformance::store_contract::{run_all, ContractReport, StoreHarness};
use memory_core::store::{ChunkStore, IndexStorage};
use memory_lancedb::LanceDbStorage;

use crate::common::{test_options, Moto};

/// Where each check's store lives.
enum Location {
    /// The check's temporary folder itself.
    Local,
    /// A prefix of one bucket named after the check's temporary folder: every check gets a fresh index, and the
    /// two handles of the writer-lock check (opened on the same folder) share one.
    S3 { moto: Moto, bucket: &'static str },
}

struct LanceHarness(Location);

impl LanceHarness {
    fn s3(bucket: &'static str) -> LanceHarness {
        LanceHarness(Location::S3 { moto: Moto::with_bucket(bucket), bucket })
    }

    async fn connect(&self, dir: &Path) -> memory_core::Result<LanceDbStorage> {
        let dir = dir.to_str().expect("temporary folders are UTF-8");
        match &self.0 {
            Location::Local => LanceDbStorage::connect(dir, &Default::default(), "contract", test_options()).await,
            Location::S3 { moto, bucket } => {
                let prefix = Path::new(dir).file_name().and_then(|n| n.to_str()).expect("a temporary folder has a UTF-8 name");
                LanceDbStorage::connect(&format!("s3://{bucket}/{prefix}"), &moto.storage_options(), "contract", test_options()).await
            }
        }
    }
}

#[async_trait::async_trait]
impl StoreHarness for LanceHarness {
    async fn open(&self, dir: &Path) -> memory_core::Result<Arc<dyn IndexStorage>> {
        Ok(Arc::new(self.connect(dir).await?))
    }

    /// The identity is the `identity` row of the generation's meta table (`set_meta` keys are namespaced apart
    /// from it): overwrite that row through a connection of our own.
    async fn write_unreadable_identity(&self, dir: &Path, _store: &dyn ChunkStore) -> Option<memory_core::Result<()>> {
        let written = match self.connect(dir).await {
            Ok(own) => overwrite_identity_row(&own).await.map_err(|e| memory_core::MemoryError::Internal(format!("writing the identity row: {e}"))),
            Err(e) => Err(e),
        };
        Some(written)
    }

    /// LanceDB's full-text statistics count replaced and deleted rows until the table is compacted and its
    /// indices optimised (the store does so every `optimize_after_rows`/`optimize_after_commits` writes):
    /// run that maintenance now through a connection of our own (reads are strongly consistent, so the
    /// check's handle sees the result).
    async fn settle(&self, dir: &Path) -> memory_core::Result<()> {
        self.connect(dir).await?.open_live_store().await?.optimize_now().await
    }
}

/// Every check applies to LanceDB, wherever its tables live.
fn assert_every_check_ran(report: &ContractReport) {
    report.assert_ok();
    assert!(report.skipped().is_empty(), "every check applies to LanceDB: {}", report.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lancedb_storage_keeps_the_store_contract() {
    assert_every_check_ran(&run_all(Arc::new(LanceHarness(Location::Local))).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lancedb_storage_on_s3_keeps_the_store_contract() {
    let harness = Arc::new(LanceHarness::s3("contract"));
    let report = tokio::time::timeout(Duration::from_secs(300), run_all(harness)).await.expect("the store contract on S3 took too long");
    assert_every_check_ran(&report);
}

async fn overwrite_identity_row(storage: &LanceDbStorage) -> Result<(), Box<dyn std::error::Error>> {
    use arrow_array::{RecordBatch, RecordBatchIterator, StringArray};
    // A new index is generation 1 (see storage.rs).
    let table = storage.connection().open_table("contract_g1_meta").execute().await?;
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
