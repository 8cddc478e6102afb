//! What the builtin engine's tests share.

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Run an async property over the cases `strategy` generates from a fixed seed (the same cases on every run),
/// `PROPTEST_CASES` of them (`default_cases` without it), each on a one-thread runtime; a failing case panics
/// with proptest's report of it. Returns how many cases ran.
pub fn run_seeded_cases<S: Strategy, F: std::future::Future<Output = Result<(), proptest::test_runner::TestCaseError>>>(
    default_cases: u32,
    seed: u8,
    strategy: &S,
    check: impl Fn(S::Value) -> F,
) -> u32 {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(default_cases);
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a test runtime");
    if let Err(e) = runner.run(strategy, |value| rt.block_on(check(value))) {
        panic!("{e}");
    }
    cases
}
