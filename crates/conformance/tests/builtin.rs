//! The conformance suite against the builtin SQLite engine: keyword-only, and hybrid with the deterministic
//! lexicon embedder.

use conformance::{run_all, RunOptions, Suite};
use memory_builtin::BuiltinFactory;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_keyword_only() {
    let report = run_all(&BuiltinFactory, &RunOptions::keyword("builtin keyword-only")).await;
    report.assert_ok();
    // Exactly the vector cases are skipped, and they are reported as skipped, never as passed.
    let mut skipped: Vec<String> = report.skipped().iter().map(std::string::ToString::to_string).collect();
    skipped.sort();
    let mut vector = Suite::builtin_cases_requiring("vector");
    vector.sort();
    assert!(!vector.is_empty());
    assert_eq!(skipped, vector);
    assert!(report.render(false).contains("SKIP vector/paraphrase-coffee: the engine does not declare vector"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_hybrid_lexicon_embedder() {
    let options = RunOptions::hybrid("builtin hybrid (lexicon embedder)");
    let report = run_all(&BuiltinFactory, &options).await;
    report.assert_ok();
    assert!(report.skipped().is_empty(), "a hybrid builtin engine runs every case: {:?}", report.skipped());
}

/// The real local model (all-MiniLM-L6-v2 from scripts/setup.sh), when `$MEMORY_TEST_MODEL` names its folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_hybrid_local_model() {
    let Some(dir) = std::env::var_os("MEMORY_TEST_MODEL").filter(|d| !d.is_empty()) else {
        conformance::testing::missing_prerequisite("builtin hybrid (local model)", "MEMORY_TEST_MODEL is not set (scripts/setup.sh prints it)");
        return;
    };
    let model = providers::LocalProvider::open(&dir).expect("open the local test model");
    let options = RunOptions::keyword("builtin hybrid (local model)").with_embedder(std::sync::Arc::new(model));
    // The suites where the embedder changes the answers (a debug-build model is slow: keep this run short).
    let suites: Vec<Suite> =
        Suite::builtin_suites().into_iter().filter(|s| ["vector", "decay", "importance", "mmr"].contains(&s.name.as_str())).collect();
    let report = conformance::run_suites(&suites, &BuiltinFactory, &options).await;
    report.assert_ok();
    assert!(report.skipped().is_empty(), "{:?}", report.skipped());
}
