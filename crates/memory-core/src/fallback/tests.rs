//! The manager's behaviour against small in-test engines whose failures are switched on and off.

use crate::locks::LockExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::fakes::*;
use super::*;
use crate::backend::MemoryBackend;
use crate::error::{ErrorKind, MemoryError};
use crate::types::{GetRequest, RecallRequest, SearchRequest, SyncOptions};

fn policy(ms: u64, max_ms: u64) -> FallbackPolicy {
    FallbackPolicy {
        initial_backoff: Duration::from_millis(ms),
        max_backoff: Duration::from_millis(max_ms),
        multiplier: 2.0,
        sync_fallback: true,
        call_timeout: None,
        state_file: None,
    }
}

struct Setup {
    mgr: FallbackManager,
    primary_mode: Arc<Mutex<Mode>>,
    primary_calls: Arc<Counters>,
    fallback_mode: Arc<Mutex<Mode>>,
    fallback_calls: Arc<Counters>,
}

fn setup(p: FallbackPolicy) -> Setup {
    let (primary, primary_mode, primary_calls) = FakeEngine::new("qmd");
    let (fallback, fallback_mode, fallback_calls) = FakeEngine::new("builtin");
    let mgr = FallbackManager::new(Box::new(primary), Box::new(fallback) as Box<dyn MemoryBackend>, p);
    Setup { mgr, primary_mode, primary_calls, fallback_mode, fallback_calls }
}

#[tokio::test]
async fn healthy_primary_answers_alone() {
    let s = setup(policy(50, 400));
    let r = s.mgr.search(&SearchRequest::new("tea")).await.unwrap();
    assert_eq!(r.results[0].path, "qmd.md");
    assert!(r.warnings.is_empty());
    assert_eq!(s.fallback_calls.search.load(Ordering::SeqCst), 0);
    let st = s.mgr.status().await.unwrap();
    assert_eq!(st.backend, "qmd");
    assert!(st.fallback.is_none());
    assert_eq!(s.mgr.name(), "qmd");
}

#[tokio::test]
async fn failing_primary_is_answered_by_the_fallback_and_said_so() {
    for fail in [unavailable as fn(String) -> MemoryError, internal] {
        let s = setup(policy(60_000, 120_000));
        *s.primary_mode.locked() = Mode::Fail(fail);
        let before = crate::now_ms();
        let r = s.mgr.search(&SearchRequest::new("tea")).await.unwrap();
        assert_eq!(r.results[0].path, "builtin.md");
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].contains("`qmd` is unavailable") && r.warnings[0].contains("qmd is broken"), "{:?}", r.warnings);
        assert!(r.warnings[0].contains("`builtin`"));
        let st = s.mgr.status().await.unwrap();
        assert_eq!(st.backend, "builtin");
        let fb = st.fallback.expect("fallback status");
        assert_eq!(fb.from, "qmd");
        assert!(fb.reason.contains("qmd is broken"), "{}", fb.reason);
        assert!(fb.since.unwrap() >= before);
        assert!(st.extra.contains_key("nextProbeMs"));
        // get falls back too when the primary cannot read.
        let g = s.mgr.get(&GetRequest { path: "MEMORY.md".into(), ..Default::default() }).await.unwrap();
        assert_eq!(g.text, "builtin");
        assert_eq!(s.primary_calls.get.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn requests_that_are_wrong_do_not_fall_back() {
    let s = setup(policy(50, 400));
    *s.primary_mode.locked() = Mode::Fail(refused);
    let e = s.mgr.get(&GetRequest { path: "../etc/passwd".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Refused);
    *s.primary_mode.locked() = Mode::Fail(invalid);
    let e = s.mgr.search(&SearchRequest::new("")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert_eq!(s.fallback_calls.search.load(Ordering::SeqCst) + s.fallback_calls.get.load(Ordering::SeqCst), 0);
    assert!(s.mgr.fallback_status().is_none());
}

#[tokio::test]
async fn primary_is_left_alone_during_backoff_then_probed_and_used_again() {
    let s = setup(policy(150, 1_000));
    *s.primary_mode.locked() = Mode::Fail(unavailable);
    s.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert_eq!(s.primary_calls.search.load(Ordering::SeqCst), 1);
    // Within the back-off: the primary is not called at all.
    for _ in 0..3 {
        let r = s.mgr.search(&SearchRequest::new("b")).await.unwrap();
        assert_eq!(r.results[0].path, "builtin.md");
    }
    assert_eq!(s.primary_calls.search.load(Ordering::SeqCst), 1);
    // The primary recovers; after the back-off the next call probes it and it answers.
    *s.primary_mode.locked() = Mode::Ok;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = s.mgr.search(&SearchRequest::new("c")).await.unwrap();
    assert_eq!(r.results[0].path, "qmd.md");
    assert!(r.warnings.is_empty());
    assert_eq!(s.primary_calls.search.load(Ordering::SeqCst), 2);
    assert!(s.mgr.status().await.unwrap().fallback.is_none());
    assert!(s.mgr.backoff().is_none());
}

#[tokio::test]
async fn backoff_grows_exponentially_and_is_capped() {
    let s = setup(policy(20, 100));
    *s.primary_mode.locked() = Mode::Fail(unavailable);
    let mut seen = Vec::new();
    for _ in 0..5 {
        s.mgr.search(&SearchRequest::new("a")).await.unwrap();
        seen.push(s.mgr.backoff().unwrap().as_millis());
        let wait = s.mgr.next_probe_in().unwrap();
        tokio::time::sleep(wait + Duration::from_millis(5)).await;
    }
    assert_eq!(seen, [20, 40, 80, 100, 100]);
    // Every search after a back-off probed the primary once.
    assert_eq!(s.primary_calls.search.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_hanging_primary_costs_only_its_timeout() {
    let s = setup(policy(60_000, 60_000));
    *s.primary_mode.locked() = Mode::Hang(Duration::from_millis(100));
    let t = std::time::Instant::now();
    let r = s.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert_eq!(r.results[0].path, "builtin.md");
    assert!(t.elapsed() < Duration::from_secs(2));
    // The next call does not wait on the primary.
    let t = std::time::Instant::now();
    s.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
}

#[tokio::test]
async fn both_failing_is_an_error_naming_both() {
    let s = setup(policy(50, 400));
    *s.primary_mode.locked() = Mode::Fail(unavailable);
    *s.fallback_mode.locked() = Mode::Fail(internal);
    let e = s.mgr.search(&SearchRequest::new("a")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    let msg = e.to_string();
    assert!(msg.contains("qmd is broken") && msg.contains("builtin is broken"), "{msg}");
}

#[tokio::test]
async fn a_lazy_fallback_is_opened_once_and_synced_before_answering() {
    let opened = Arc::new(AtomicUsize::new(0));
    let calls = Arc::new(Mutex::new(None));
    let (primary, primary_mode, _) = FakeEngine::new("qmd");
    let opener: Box<dyn FallbackOpener> = Box::new(CountingOpener { opened: opened.clone(), calls: calls.clone() });
    let mgr = FallbackManager::new(Box::new(primary), opener, policy(60_000, 60_000));
    mgr.search(&SearchRequest::new("a")).await.unwrap();
    mgr.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(opened.load(Ordering::SeqCst), 0, "not opened while the primary works");
    *primary_mode.locked() = Mode::Fail(unavailable);
    for _ in 0..3 {
        let r = mgr.search(&SearchRequest::new("a")).await.unwrap();
        assert_eq!(r.results[0].path, "builtin.md");
    }
    assert_eq!(opened.load(Ordering::SeqCst), 1);
    let c = calls.locked().clone().unwrap();
    assert_eq!(c.sync.load(Ordering::SeqCst), 1, "synced once on open");
    // A sync while failing syncs the fallback and says so.
    let rep = mgr.sync(SyncOptions::default()).await.unwrap();
    assert!(rep.warnings[0].contains("synced the fallback"), "{:?}", rep.warnings);
    assert_eq!(c.sync.load(Ordering::SeqCst), 2);
    mgr.close().await.unwrap();
    assert_eq!(c.closed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn sync_keeps_an_open_fallback_fresh() {
    let s = setup(policy(50, 400));
    let rep = s.mgr.sync(SyncOptions::default()).await.unwrap();
    assert!(rep.warnings.is_empty());
    assert_eq!(s.primary_calls.sync.load(Ordering::SeqCst), 1);
    assert_eq!(s.fallback_calls.sync.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_primary_that_cannot_open_starts_in_fallback_and_opens_later() {
    let ok = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opens = Arc::new(AtomicUsize::new(0));
    let primary = Arc::new(FlakyFactory { ok: ok.clone(), opens: opens.clone() });
    let mgr = FallbackManager::open("qmd", primary, "builtin", Arc::new(FakeBuiltinFactory), test_ctx(), policy(100, 100)).await.unwrap();
    // Fallback from the start, and status says why.
    let st = mgr.status().await.unwrap();
    assert_eq!(st.backend, "builtin");
    let fb = st.fallback.unwrap();
    assert!(fb.reason.contains("cannot open memory engine `qmd`") && fb.reason.contains("qmd not found"), "{}", fb.reason);
    let r = mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert_eq!(r.results[0].path, "builtin.md");
    assert_eq!(opens.load(Ordering::SeqCst), 1, "no retry inside the back-off");
    // Installed later: the next probe opens it and it answers.
    ok.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let r = mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert_eq!(r.results[0].path, "qmd.md");
    assert!(r.warnings.is_empty());
    assert_eq!(opens.load(Ordering::SeqCst), 2);
    assert!(mgr.status().await.unwrap().fallback.is_none());
    assert_eq!(mgr.name(), "qmd");
}

#[tokio::test]
async fn a_primary_with_a_bad_config_is_an_error() {
    let e = FallbackManager::open("qmd", Arc::new(BadConfigFactory), "builtin", Arc::new(FakeBuiltinFactory), test_ctx(), policy(100, 100))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("memory.qmd.searchMode"));
}

#[tokio::test]
async fn get_asks_the_primary_even_during_backoff_without_clearing_the_failure() {
    let s = setup(policy(60_000, 60_000));
    *s.primary_mode.locked() = Mode::Fail(unavailable);
    s.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert!(s.mgr.fallback_status().is_some());
    // The primary reads files again (its search tool is still broken): get is its answer...
    *s.primary_mode.locked() = Mode::Ok;
    let g = s.mgr.get(&GetRequest { path: "qmd://memory-dir/a.md".into(), ..Default::default() }).await.unwrap();
    assert_eq!(g.text, "qmd");
    // ...but only a search answer ends the fallback, and a sync does not either.
    assert!(s.mgr.fallback_status().is_some());
    assert_eq!(s.primary_calls.search.load(Ordering::SeqCst), 1);
    let fb = s.mgr.search(&SearchRequest::new("b")).await.unwrap();
    assert_eq!(fb.results[0].path, "builtin.md");
}

fn io(m: String) -> MemoryError {
    MemoryError::Io { context: m, source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied") }
}

#[tokio::test]
async fn while_the_primary_is_probed_other_calls_are_answered_by_the_fallback_at_once() {
    let s = Arc::new(setup(policy(20, 20)));
    *s.primary_mode.locked() = Mode::Fail(unavailable);
    s.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert_eq!(s.primary_calls.search.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(40)).await;
    // Back-off passed; the primary now hangs: one call probes it, the rest must not queue behind the probe.
    *s.primary_mode.locked() = Mode::Hang(Duration::from_millis(400));
    let probe = {
        let s = s.clone();
        tokio::spawn(async move { s.mgr.search(&SearchRequest::new("probe")).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t = std::time::Instant::now();
    for _ in 0..5 {
        let r = s.mgr.search(&SearchRequest::new("b")).await.unwrap();
        assert_eq!(r.results[0].path, "builtin.md");
    }
    assert!(t.elapsed() < Duration::from_millis(200), "calls waited for the probe: {:?}", t.elapsed());
    assert_eq!(s.primary_calls.search.load(Ordering::SeqCst), 2, "exactly one call probes");
    assert_eq!(probe.await.unwrap().results[0].path, "builtin.md");
}

#[tokio::test]
async fn a_hanging_primary_call_is_bounded_by_the_policy_timeout() {
    let s = setup(FallbackPolicy { call_timeout: Some(Duration::from_millis(100)), ..policy(60_000, 60_000) });
    *s.primary_mode.locked() = Mode::Hang(Duration::from_secs(30));
    let t = std::time::Instant::now();
    let r = s.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert_eq!(r.results[0].path, "builtin.md");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(s.mgr.fallback_status().unwrap().reason.contains("did not answer within"), "{:?}", s.mgr.fallback_status());
}

#[tokio::test]
async fn capabilities_while_degraded_are_the_fallbacks() {
    let s = setup(policy(60_000, 60_000));
    assert!(s.mgr.capabilities().vector);
    *s.primary_mode.locked() = Mode::Fail(unavailable);
    s.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert!(!s.mgr.capabilities().vector, "a degraded manager must not promise the primary's vector search");
}

#[tokio::test]
async fn reset_reaches_the_primary_and_an_open_fallback() {
    let s = setup(policy(60_000, 60_000));
    s.mgr.reset().await.unwrap();
    assert_eq!(s.primary_calls.reset.load(Ordering::SeqCst), 1);
    assert_eq!(s.fallback_calls.reset.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_hanging_primary_reset_is_bounded_and_the_fallbacks_index_is_reset() {
    let s = setup(FallbackPolicy { call_timeout: Some(Duration::from_millis(100)), ..policy(60_000, 60_000) });
    *s.primary_mode.locked() = Mode::Hang(Duration::from_secs(30));
    let t = std::time::Instant::now();
    s.mgr.reset().await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(s.fallback_calls.reset.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_io_error_reading_one_file_is_its_answer_and_does_not_demote_the_engine() {
    let s = setup(policy(60_000, 60_000));
    *s.primary_mode.locked() = Mode::Fail(io);
    let e = s.mgr.get(&GetRequest { path: "memory/locked.md".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(s.mgr.fallback_status().is_none());
    assert_eq!(s.fallback_calls.get.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_failure_survives_the_process_in_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("qmd.fallback.json");
    let with_state = || FallbackPolicy { state_file: Some(state.clone()), ..policy(60_000, 60_000) };
    let first = setup(with_state());
    *first.primary_mode.locked() = Mode::Fail(unavailable);
    first.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert!(state.exists());
    drop(first);
    // The next run (a new manager) starts degraded and does not call the primary during the back-off.
    let second = setup(with_state());
    let r = second.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert_eq!(r.results[0].path, "builtin.md");
    assert_eq!(second.primary_calls.search.load(Ordering::SeqCst), 0);
    assert!(second.mgr.fallback_status().unwrap().reason.contains("qmd is broken"));
    // A different engine's state file is not this engine's failure.
    let other =
        FallbackManager::new(Box::new(FakeEngine::new("lancedb").0), Box::new(FakeEngine::new("builtin").0) as Box<dyn MemoryBackend>, with_state());
    assert!(other.fallback_status().is_none());
    // Recovery removes the file.
    let third = setup(FallbackPolicy { state_file: Some(state.clone()), ..policy(1, 1) });
    tokio::time::sleep(Duration::from_millis(5)).await;
    third.mgr.search(&SearchRequest::new("a")).await.unwrap();
    assert!(third.mgr.fallback_status().is_none());
    assert!(!state.exists());
}

#[tokio::test]
async fn an_engine_without_trigger_recall_refuses_it_and_the_fallback_is_not_asked() {
    // The fake engines, like QMD, do not implement `recall`: the trait's answer is a refusal naming the engine.
    let s = setup(policy(50, 400));
    let e = s.mgr.recall(&RecallRequest { message: "gateway setup".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Refused, "{e}");
    assert!(e.to_string().contains("qmd engine does not read trigger annotations"), "{e}");
    assert_eq!(s.fallback_calls.search.load(Ordering::SeqCst), 0);
    assert!(s.mgr.status().await.unwrap().fallback.is_none(), "a refusal is not a failure of the engine");
}
