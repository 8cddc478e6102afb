//! The example out-of-tree engine (examples/in_memory) passes the suite, keyword-only and hybrid.

#[path = "../examples/in_memory/engine.rs"]
mod engine;

use conformance::{run_all, RunOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_engine_keyword_only() {
    let report = run_all(&engine::InMemoryFactory, &RunOptions::keyword("in-memory keyword-only")).await;
    report.assert_ok();
    assert!(!report.skipped().is_empty(), "vector cases are skipped without an embedder");
    assert!(report.capabilities.is_some_and(|c| !c.persistent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_engine_hybrid() {
    let report = run_all(&engine::InMemoryFactory, &RunOptions::hybrid("in-memory hybrid")).await;
    report.assert_ok();
    assert!(report.skipped().is_empty(), "{:?}", report.skipped());
}

/// The example's storage keeps the store contract; the writer lock (it has none: one process owns the index)
/// and the unreadable identity (it keeps the identity typed) do not apply to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_storage_keeps_the_store_contract() {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use conformance::store_contract::{run_all, StoreHarness};
    use memory_core::store::IndexStorage;

    /// One in-memory index per folder, so two opens of a folder share it as two handles on a file would.
    #[derive(Default)]
    struct InMemory(Mutex<HashMap<PathBuf, Arc<engine::MemStorage>>>);

    #[async_trait::async_trait]
    impl StoreHarness for InMemory {
        async fn open(&self, dir: &Path) -> memory_core::Result<Arc<dyn IndexStorage>> {
            Ok(self.0.lock().unwrap().entry(dir.to_path_buf()).or_default().clone())
        }
    }

    let report = run_all(Arc::new(InMemory::default())).await;
    report.assert_ok();
    assert_eq!(
        report.skipped(),
        ["unreadable_identity_is_a_corrupt_index", "writer_lock_is_exclusive_and_waits_off_the_runtime"],
        "{}",
        report.render()
    );
}
