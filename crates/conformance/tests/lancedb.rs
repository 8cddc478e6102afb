//! The conformance suite against the LanceDB engine on a local folder (the factory's default location under
//! the sandbox's state dir): keyword-only, and hybrid with the same deterministic lexicon embedder as the
//! builtin hybrid run. Cases the engine cannot serve are skipped only through the capabilities it declares.

use conformance::{run_all, RunOptions, Suite};
use memory_lancedb::LanceDbFactory;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lancedb_local_keyword_only() {
    let report = run_all(&LanceDbFactory::default(), &RunOptions::keyword("lancedb (local folder) keyword-only")).await;
    report.assert_ok();
    // Without an embedder exactly the vector cases are skipped (declared by capability), never passed.
    let mut skipped: Vec<String> = report.skipped().iter().map(std::string::ToString::to_string).collect();
    skipped.sort();
    if report.cases.len() == Suite::builtin_suites().iter().map(|s| s.manifest.cases.len()).sum::<usize>() {
        assert_eq!(skipped, Suite::builtin_cases_requiring("vector"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lancedb_local_hybrid_lexicon_embedder() {
    let report = run_all(&LanceDbFactory::default(), &RunOptions::hybrid("lancedb (local folder) hybrid (lexicon embedder)")).await;
    report.assert_ok();
    assert!(report.skipped().is_empty(), "a hybrid lancedb engine runs every case: {:?}", report.skipped());
}

mod host;
