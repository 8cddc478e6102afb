//! A Rust host of agent memory: it opens the engine its config names in one call, searches, and registers an
//! engine of its own (a plugin) that a config can then name in `memory.backend`.
//!
//! ```sh
//! cargo run -p memory-rs-host --example host -- <workspace> "what did we decide about the gateway?"
//! ```
//!
//! The plugin here is small on purpose: it opens the builtin engine and counts the searches it answers (an
//! audit hook a host might want), labelled by its own config block, `memory.counting.label`. A real plugin implements `MemoryBackend`, or `ChunkStore` + `IndexStorage`
//! to get the shared indexing and ranking (see `docs/write-your-own-backend.md`).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::{
    Capabilities, Config, GetRequest, GetResponse, MemoryBackend, Result, SearchRequest, SearchResponse, Status, SyncOptions, SyncReport,
};
use memory_host::Host;

/// What the demo found: the paths of each search's results, and how many searches the plugin counted.
#[derive(Debug)]
pub struct DemoOutcome {
    pub configured_engine: String,
    pub configured_hits: Vec<String>,
    pub plugin_engine: String,
    pub plugin_hits: Vec<String>,
    pub plugin_warnings: Vec<String>,
    pub plugin_searches: usize,
}

/// Open from a config and search; then register the plugin under `counting`, open it from a config naming
/// it, and search again.
pub async fn demo(workspace: &Path, state_dir: &Path, query: &str) -> Result<DemoOutcome> {
    // 1. The engine a config names, in one call (keyword-only here, so the demo needs no model or key).
    let config = Arc::new(Config::from_json5("{ memory: { backend: 'builtin', search: { provider: 'none' } } }")?);
    let engine = memory_host::open(config, workspace, state_dir, "main").await?;
    let configured_hits = paths(&engine.search(&SearchRequest::new(query)).await?);
    let configured_engine = engine.name().to_string();
    engine.close().await?;

    // 2. A plugin engine: registered once, then opened by name like the shipped ones (behind the builtin
    //    fallback, so a failing plugin degrades to builtin instead of failing the agent's tools).
    let searches = Arc::new(AtomicUsize::new(0));
    let mut host = Host::new();
    host.register("counting", Arc::new(CountingFactory { searches: searches.clone() }));
    let config = Arc::new(Config::from_json5("{ memory: { backend: 'counting', counting: { label: 'audit' }, search: { provider: 'none' } } }")?);
    let engine = host.open(config, workspace, state_dir, "main").await?;
    let answer = engine.search(&SearchRequest::new(query)).await?;
    let (plugin_hits, plugin_warnings) = (paths(&answer), answer.warnings);
    let plugin_engine = engine.name().to_string();
    engine.close().await?;
    Ok(DemoOutcome {
        configured_engine,
        configured_hits,
        plugin_engine,
        plugin_hits,
        plugin_warnings,
        plugin_searches: searches.load(Ordering::SeqCst),
    })
}

fn paths(r: &SearchResponse) -> Vec<String> {
    r.results.iter().map(|h| h.path.clone()).collect()
}

/// The plugin's factory: what a host registers under a `memory.backend` name.
pub struct CountingFactory {
    searches: Arc<AtomicUsize>,
}

/// The plugin's own config block, `memory.counting`: validated by the plugin, errors name its keys.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CountingConfig {
    label: String,
}

impl CountingConfig {
    fn label(config: &Config) -> Result<String> {
        Ok(config.engine_block::<CountingConfig>("counting")?.map_or_else(|| "counting".into(), |c| c.label))
    }
}

#[async_trait]
impl BackendFactory for CountingFactory {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        let label = CountingConfig::label(&ctx.config)?;
        let inner = memory_builtin::BuiltinFactory.open(ctx).await?;
        Ok(Box::new(CountingEngine { inner, label, searches: self.searches.clone() }))
    }

    // Checked before anything opens (also while the fallback answers for this engine).
    fn check_config(&self, config: &Config) -> Result<()> {
        CountingConfig::label(config).map(drop)
    }
}

/// The builtin engine, counting the searches it answers.
struct CountingEngine {
    inner: Box<dyn MemoryBackend>,
    label: String,
    searches: Arc<AtomicUsize>,
}

#[async_trait]
impl MemoryBackend for CountingEngine {
    fn name(&self) -> &str {
        "counting"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let n = self.searches.fetch_add(1, Ordering::SeqCst) + 1;
        let mut answer = self.inner.search(request).await?;
        answer.warnings.push(format!("search #{n} counted by {}", self.label));
        Ok(answer)
    }
    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        self.inner.get(request).await
    }
    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        self.inner.sync(options).await
    }
    async fn status(&self) -> Result<Status> {
        self.inner.status().await
    }
    async fn reset(&self) -> Result<()> {
        self.inner.reset().await
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

#[allow(dead_code, reason = "not called where this file is a module of a test (conformance/tests/lancedb.rs)")]
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let workspace = args.next().ok_or("usage: host <workspace> <query>")?;
    let query = args.next().unwrap_or_else(|| "memory".into());
    let state = tempfile::tempdir()?;
    let outcome = demo(Path::new(&workspace), state.path(), &query).await?;
    println!("{outcome:#?}");
    Ok(())
}
