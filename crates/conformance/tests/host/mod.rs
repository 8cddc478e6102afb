//! memory-host: one call opens the engine a config names, each behind the builtin fallback, and a host can
//! register engines of its own. Here because memory-host links LanceDB: this binary links it already.

use std::sync::Arc;

use async_trait::async_trait;
use conformance::testing::TestDirs;
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::{Config, MemoryBackend, MemoryError, Result, SearchRequest};
use memory_host::Host;

#[path = "../../../memory-host/examples/host.rs"]
mod example;

fn workspace() -> TestDirs {
    let dirs = TestDirs::new();
    dirs.write("MEMORY.md", "# Memory\n\nThe gateway runs on the Mac Studio.\n");
    dirs.write("memory/2026-11-29.md", "# 2026-11-29\n\n- Lunch with Alice\n");
    dirs
}

fn config(json5: &str) -> Arc<Config> {
    Arc::new(Config::from_json5(json5).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_host_opens_from_config_searches_and_runs_its_plugin() {
    let dirs = workspace();
    let outcome = example::demo(dirs.ws.path(), dirs.state.path(), "gateway").await.unwrap();
    assert_eq!(outcome.configured_engine, "builtin");
    assert_eq!(outcome.configured_hits.first().map(String::as_str), Some("MEMORY.md"), "{outcome:?}");
    assert_eq!(outcome.plugin_engine, "counting");
    assert_eq!(outcome.plugin_hits, outcome.configured_hits, "the plugin answers like the engine it wraps");
    assert_eq!(outcome.plugin_searches, 1, "the search went through the plugin");
    assert_eq!(outcome.plugin_warnings, ["search #1 counted by audit"], "the plugin read its own block, memory.counting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_engine_of_the_build_is_registered_and_lancedb_opens_in_one_call() {
    assert_eq!(Host::new().registry().names(), ["builtin", "lancedb", "qmd"]);
    let dirs = workspace();
    let engine =
        memory_host::open(config("{ memory: { backend: 'lancedb', search: { provider: 'none' } } }"), dirs.ws.path(), dirs.state.path(), "main")
            .await
            .unwrap();
    let r = engine.search(&SearchRequest::new("gateway")).await.unwrap();
    assert_eq!(r.results.first().map(|h| h.path.as_str()), Some("MEMORY.md"), "{r:?}");
    assert!(r.warnings.iter().all(|w| !w.contains("fallback")), "lancedb itself should answer: {:?}", r.warnings);
    engine.close().await.unwrap();
}

/// A plugin engine that cannot open.
struct Broken;

#[async_trait]
impl BackendFactory for Broken {
    async fn open(&self, _ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Err(MemoryError::Unavailable("the broken engine's server is down".into()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_plugin_that_fails_is_answered_by_builtin_and_says_so() {
    let dirs = workspace();
    let mut host = Host::new();
    host.register("broken", Arc::new(Broken));
    let engine = host
        .open(config("{ memory: { backend: 'broken', search: { provider: 'none' } } }"), dirs.ws.path(), dirs.state.path(), "main")
        .await
        .unwrap();
    let r = engine.search(&SearchRequest::new("gateway")).await.unwrap();
    assert_eq!(r.results.first().map(|h| h.path.as_str()), Some("MEMORY.md"), "{r:?}");
    assert!(r.warnings.iter().any(|w| w.contains("builtin")), "the answer says builtin stood in: {:?}", r.warnings);
    let status = engine.status().await.unwrap();
    assert!(status.fallback.is_some(), "status reports the fallback: {status:?}");
    engine.close().await.unwrap();

    let mut bare = Host::new();
    bare.register_without_fallback("broken", Arc::new(Broken));
    let e = bare.open(config("{ memory: { backend: 'broken' } }"), dirs.ws.path(), dirs.state.path(), "main").await.err().expect("no fallback");
    assert!(e.to_string().contains("server is down"), "{e}");
}

#[tokio::test]
async fn an_unknown_engine_names_the_known_ones() {
    let dirs = workspace();
    let e = memory_host::open(config("{ memory: { backend: 'nope' } }"), dirs.ws.path(), dirs.state.path(), "main").await.err().expect("unknown");
    let text = e.to_string();
    assert!(text.contains("memory.backend") && text.contains("unknown engine `nope`") && text.contains("builtin, lancedb, qmd"), "{text}");
}
