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
