//! The FallbackManager wrapping a primary engine that fails every call (a QMD whose binary is missing, say):
//! the builtin fallback must answer the whole suite, and status must say a fallback is answering.

use std::sync::Arc;

use async_trait::async_trait;
use conformance::testing::open_context;
use conformance::{run_all, RunOptions};
use memory_builtin::BuiltinFactory;
use memory_core::fallback::{FactoryOpener, FallbackManager, FallbackOpener, FallbackPolicy};
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::{
    Capabilities, GetRequest, GetResponse, MemoryBackend, MemoryError, Result, SearchRequest, SearchResponse, Status, SyncOptions, SyncReport,
};

/// Fails every call as an engine whose helper binary is missing.
struct DownEngine;

fn down<T>() -> Result<T> {
    Err(MemoryError::Unavailable("qmd: spawn failed: No such file or directory".into()))
}

#[async_trait]
impl MemoryBackend for DownEngine {
    fn name(&self) -> &str {
        "down"
    }
    fn capabilities(&self) -> Capabilities {
        // What the fallback (builtin, keyword-only) can serve: the manager declares the primary's capabilities.
        Capabilities { keyword: true, persistent: true, shared_ranking: true, cjk: true, ..Default::default() }
    }
    async fn search(&self, _: &SearchRequest) -> Result<SearchResponse> {
        down()
    }
    async fn get(&self, _: &GetRequest) -> Result<GetResponse> {
        down()
    }
    async fn sync(&self, _: SyncOptions) -> Result<SyncReport> {
        down()
    }
    async fn status(&self) -> Result<Status> {
        down()
    }
    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// A failing primary, with builtin opened lazily as the fallback.
struct FallbackFactory;

#[async_trait]
impl BackendFactory for FallbackFactory {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        let opener: Box<dyn FallbackOpener> = Box::new(FactoryOpener::new("builtin", Arc::new(BuiltinFactory), ctx));
        Ok(Box::new(FallbackManager::new(Box::new(DownEngine), opener, FallbackPolicy::default())))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_manager_with_a_failing_primary() {
    let options = RunOptions::keyword("fallback: down -> builtin");
    let report = run_all(&FallbackFactory, &options).await;
    report.assert_ok();
    assert!(report.passed().len() > 50, "{}", report.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_is_reported_in_status_and_search_warnings() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let suite = conformance::Suite::builtin_suites().into_iter().find(|s| s.name == "basics").unwrap();
    suite.materialize(ws.path()).unwrap();
    let ctx = open_context(memory_core::Config::default(), ws.path(), state.path(), None);
    let e = FallbackFactory.open(ctx).await.unwrap();
    e.sync(SyncOptions::default()).await.unwrap();
    let r = e.search(&SearchRequest::new("gateway")).await.unwrap();
    assert_eq!(r.results[0].path, "MEMORY.md");
    assert!(r.warnings.iter().any(|w| w.contains("fallback engine `builtin`")), "{:?}", r.warnings);
    let st = e.status().await.unwrap();
    let fb = st.fallback.expect("status names the fallback");
    assert_eq!(fb.from, "down");
    assert!(fb.reason.contains("No such file"), "{}", fb.reason);
}
