//! The scan engine against the conformance suite: every case its capabilities (keyword search) call for.

use conformance::{run_all, RunOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scan_engine_passes_the_keyword_suites() {
    let report = run_all(&scan_engine::ScanFactory, &RunOptions::keyword("scan")).await;
    report.assert_ok();
}
