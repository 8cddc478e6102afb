//! Fault tests: a real misbehaving script stands in for qmd (hangs, exits 1, prints garbage, crashes mid-output).
//! Each time the FallbackManager answers from the real builtin engine within the timeout, status says why, and
//! once the script behaves again the qmd engine answers again.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use memory_core::fallback::{FactoryOpener, FallbackManager, FallbackOpener, FallbackPolicy};
use memory_core::{MemoryBackend, SearchRequest};
use memory_qmd::{QmdBackend, QmdOptions};

const TIMEOUT_MS: u64 = 1_000;

async fn wait_for_probe(mgr: &FallbackManager) {
    if let Some(d) = mgr.next_probe_in() {
        tokio::time::sleep(d + Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_falls_back_to_builtin_and_recovers() {
    let (tmp, ws) = temp_sample_workspace();
    let state = tmp.path().join("state");
    let mode = tmp.path().join("mode");
    std::fs::write(&mode, "ok").unwrap();
    let script = fake_qmd(tmp.path(), &mode);
    let mut cfg = config(script.to_str().unwrap());
    edit_qmd(&mut cfg, |q| q.limits.timeout = Duration::from_millis(TIMEOUT_MS));
    let context = ctx(cfg, &ws, &state);

    let qmd = QmdBackend::open(context.clone(), QmdOptions::default()).await.unwrap();
    let opener: Box<dyn FallbackOpener> = Box::new(FactoryOpener::new("builtin", Arc::new(memory_builtin::BuiltinFactory), context.clone()));
    let policy = FallbackPolicy {
        initial_backoff: Duration::from_millis(200),
        max_backoff: Duration::from_millis(400),
        multiplier: 2.0,
        sync_fallback: true,
        ..FallbackPolicy::default()
    };
    let mgr = FallbackManager::new(Box::new(qmd), opener, policy);
    let query = SearchRequest::new("giraffe enclosure");

    let from_qmd = |r: &memory_core::SearchResponse| {
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(r.results.len(), 1);
        assert_eq!(r.results[0].path, "memory/2026-11-02.md");
        assert_eq!((r.results[0].start_line, r.results[0].end_line), (4, 6));
        assert_eq!(r.results[0].score, 0.9);
    };

    let r = mgr.search(&query).await.unwrap();
    from_qmd(&r);

    for (fault, expect) in [
        ("hang", "timed out"),
        ("exit1", "exit code 1: Error: database is locked"),
        ("garbage", "unparsable qmd output"),
        ("crash", "crashed (signal 11)"),
    ] {
        std::fs::write(&mode, fault).unwrap();
        wait_for_probe(&mgr).await;
        let t = Instant::now();
        let r = mgr.search(&query).await.unwrap();
        let took = t.elapsed();
        assert!(took < Duration::from_millis(TIMEOUT_MS + 4_000), "{fault}: took {took:?}");
        // Answered by the real builtin engine, from the real file, and said so.
        assert!(!r.results.is_empty(), "{fault}: builtin found nothing");
        assert_eq!(r.results[0].path, "memory/2026-11-02.md", "{fault}");
        assert!(r.results[0].snippet.contains("giraffe"), "{fault}");
        assert!(r.warnings[0].contains("`qmd` is unavailable") && r.warnings[0].contains(expect), "{fault}: {:?}", r.warnings);
        assert!(r.warnings[0].contains("`builtin`"));
        let st = mgr.status().await.unwrap();
        let fb = st.fallback.clone().unwrap_or_else(|| panic!("{fault}: no fallback in status"));
        assert_eq!(fb.from, "qmd");
        assert!(fb.reason.contains(expect), "{fault}: {}", fb.reason);
        assert!(fb.since.is_some());
        assert_eq!(st.backend, "builtin");
        // qmd:// paths from earlier answers stay readable while qmd is broken.
        let g = mgr
            .get(&memory_core::GetRequest { path: "qmd://memory-dir/2026-11-02.md".into(), from: Some(5), lines: Some(1), offset: None })
            .await
            .unwrap();
        assert_eq!(g.text, "- The giraffe enclosure migration is scheduled for March.", "{fault}");

        // The script behaves again: after the back-off, qmd answers again.
        std::fs::write(&mode, "ok").unwrap();
        wait_for_probe(&mgr).await;
        let r = mgr.search(&query).await.unwrap();
        from_qmd(&r);
        assert!(mgr.status().await.unwrap().fallback.is_none(), "{fault}");
    }

    // stderr noise, cursor codes and a warning line on stdout do not break parsing.
    std::fs::write(&mode, "noisy").unwrap();
    let r = mgr.search(&query).await.unwrap();
    from_qmd(&r);
    mgr.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_qmd_binary_is_unavailable_and_falls_back() {
    let (tmp, ws) = temp_sample_workspace();
    let mode = tmp.path().join("mode");
    let script = fake_qmd(tmp.path(), &mode);
    let mut cfg = config(script.to_str().unwrap());
    edit_qmd(&mut cfg, |q| q.limits.timeout = Duration::from_millis(TIMEOUT_MS));
    let context = ctx(cfg, &ws, &tmp.path().join("state"));
    let qmd = QmdBackend::open(context.clone(), QmdOptions::default()).await.unwrap();
    // The binary disappears after start (uninstalled, broken upgrade).
    std::fs::remove_file(&script).unwrap();
    let opener: Box<dyn FallbackOpener> = Box::new(FactoryOpener::new("builtin", Arc::new(memory_builtin::BuiltinFactory), context.clone()));
    let mgr = FallbackManager::new(Box::new(qmd), opener, FallbackPolicy::default());
    let r = mgr.search(&SearchRequest::new("penguins")).await.unwrap();
    assert_eq!(r.results[0].path, "memory/projects/zoo.md");
    assert!(r.warnings[0].contains("command not found"), "{:?}", r.warnings);
    // Opening with a command that does not exist fails with a typed error the host can act on.
    let mut cfg = config("/nonexistent/qmd");
    edit_qmd(&mut cfg, |q| q.limits.timeout = Duration::from_millis(TIMEOUT_MS));
    let e = QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state2")), QmdOptions::default()).await.unwrap_err();
    assert_eq!(e.kind(), memory_core::ErrorKind::Unavailable);
}
