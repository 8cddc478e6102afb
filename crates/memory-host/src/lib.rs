//! Open an agent's memory engine from its config in one call.
//!
//! [`Host`] knows every engine of this build by its `memory.backend` name: `builtin`, `qmd`, and `lancedb`
//! with the `lancedb` feature. Every engine other than builtin opens behind a
//! [`FallbackManager`]: when it fails (missing binary, crash, timeout,
//! unparsable output), builtin answers and status says why, and the engine is tried again after a back-off.
//! A host adds engines of its own with [`Host::register`] (a plugin engine gets the same fallback).
//!
//! ```ignore
//! let engine = memory_host::open(config, workspace, state_dir, "main").await?;
//! let hits = engine.search(&memory_core::SearchRequest::new("what did we decide?")).await?;
//! ```
//!
//! `examples/host.rs` opens from a config, searches, and registers a plugin engine.
#![deny(missing_docs)]
// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::config::ConfigIssue;
use memory_core::embedding::EmbeddingProvider;
use memory_core::fallback::{FallbackManager, FallbackPolicy};
use memory_core::registry::{BackendFactory, BackendRegistry, OpenContext};
use memory_core::{Config, MemoryBackend, Result};

pub mod append;

/// Where indexes live when a host is not told: `$XDG_STATE_HOME/memory-rs`, else on Windows
/// `%LOCALAPPDATA%\memory-rs`, else `~/.local/state/memory-rs` (the `memory` command's `--state-dir` default, so every
/// host of one user shares the same indexes); with no home folder known, `.memory-rs-state` in the working folder.
pub fn default_state_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(x) = var("XDG_STATE_HOME") {
        return x.join("memory-rs");
    }
    // Per user and per machine, as state is: Windows keeps such data under the profile's AppData\Local.
    if let Some(local) = var("LOCALAPPDATA").filter(|_| cfg!(windows)) {
        return local.join("memory-rs");
    }
    match memory_core::paths::home_dir() {
        Some(h) => h.join(".local/state/memory-rs"),
        None => PathBuf::from(".memory-rs-state"),
    }
}

/// The engine every other one falls back to.
pub const FALLBACK_ENGINE: &str = "builtin";

/// The engines a host can open, by `memory.backend` name.
#[derive(Clone)]
pub struct Host {
    registry: BackendRegistry,
}

impl Default for Host {
    fn default() -> Self {
        Host::new()
    }
}

impl Host {
    /// Every engine of this build.
    pub fn new() -> Host {
        let mut registry = BackendRegistry::new();
        registry.register(FALLBACK_ENGINE, Arc::new(memory_builtin::BuiltinFactory));
        let mut host = Host { registry };
        host.register("qmd", Arc::new(memory_qmd::QmdFactory::new()));
        #[cfg(feature = "lancedb")]
        host.register("lancedb", Arc::new(memory_lancedb::LanceDbFactory::default()));
        #[cfg(not(feature = "lancedb"))]
        host.registry.register("lancedb", Arc::new(NotBuiltIn { name: "lancedb", feature: "lancedb" }));
        host
    }

    /// Register (or replace) the engine `name`, behind the builtin fallback.
    pub fn register(&mut self, name: &str, factory: Arc<dyn BackendFactory>) -> &mut Self {
        self.registry.register(name, Arc::new(WithBuiltinFallback::new(name, factory)));
        self
    }

    /// Register (or replace) the engine `name` as it is, without a fallback.
    pub fn register_without_fallback(&mut self, name: &str, factory: Arc<dyn BackendFactory>) -> &mut Self {
        self.registry.register(name, factory);
        self
    }

    /// The engines by name, for hosts that open with an [`OpenContext`] of their own.
    pub fn registry(&self) -> &BackendRegistry {
        &self.registry
    }

    /// Load the config file for `agent` (`None`: the defaults' settings) and check every engine's block against
    /// the engines of this host: errors name the key as written, the engines' warnings join the config's.
    pub fn load_config(&self, path: &std::path::Path, agent: Option<&str>) -> Result<Config> {
        self.config_from_file_value(Config::read_file(path)?, path, agent)
    }

    /// [`load_config`](Self::load_config) from a file's value already read with [`Config::read_file`] (a host
    /// that also reads keys outside `memory.*` reads the file once).
    pub fn config_from_file_value(&self, root: serde_json::Value, path: &std::path::Path, agent: Option<&str>) -> Result<Config> {
        let mut config = Config::from_file_value(root, path, agent)?;
        self.registry.check_config(&mut config)?;
        Ok(config)
    }

    /// Open the engine `config` names in `memory.backend` for `agent_id`, with the embedding provider the config
    /// asks for (see [`embedder`]).
    pub async fn open(
        &self,
        config: Arc<Config>,
        workspace: impl Into<PathBuf>,
        state_dir: impl Into<PathBuf>,
        agent_id: &str,
    ) -> Result<Box<dyn MemoryBackend>> {
        let embedder = embedder(&config)?;
        let reranker = reranker(&config)?;
        let ctx = OpenContext::new(config, workspace, state_dir, agent_id).with_embedder(embedder).with_reranker(reranker);
        self.registry.open(ctx).await
    }
}

/// [`Host::open`] with every engine of this build.
pub async fn open(
    config: Arc<Config>,
    workspace: impl Into<PathBuf>,
    state_dir: impl Into<PathBuf>,
    agent_id: &str,
) -> Result<Box<dyn MemoryBackend>> {
    Host::new().open(config, workspace, state_dir, agent_id).await
}

/// The embedding provider the config asks for (`memory.search.provider`, default `auto`: the local model when
/// its folder is configured or in `MEMORY_LOCAL_MODEL`, else a remote provider with an API key); `None` means
/// keyword-only.
pub fn embedder(config: &Config) -> Result<Option<Arc<dyn EmbeddingProvider>>> {
    providers::from_config(config)
}

/// The reranker `memory.search.query.rerank` asks for (a cross-encoder or a late-interaction model, told by its
/// folder); `None` when it is off.
pub fn reranker(config: &Config) -> Result<Option<Arc<dyn memory_core::rerank::Reranker>>> {
    providers::reranker_from_config(config)
}

/// An engine this build was made without: a clear error instead of "unknown engine".
#[cfg(not(feature = "lancedb"))]
struct NotBuiltIn {
    name: &'static str,
    feature: &'static str,
}

#[cfg(not(feature = "lancedb"))]
#[async_trait]
impl BackendFactory for NotBuiltIn {
    async fn open(&self, _ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Err(memory_core::MemoryError::config(
            "memory.backend",
            format!("this host was built without the {} engine; rebuild it with the `{}` cargo feature", self.name, self.feature),
        ))
    }

    /// Its block cannot be checked without the engine: said, not silently accepted.
    fn config_warnings(&self, config: &Config) -> Vec<ConfigIssue> {
        let has_block = config.engine_block_names().any(|n| n == self.name);
        (has_block && config.memory.backend != self.name)
            .then(|| ConfigIssue {
                key: format!("memory.{}", self.name),
                message: format!("not checked: this build has no {} engine (the `{}` cargo feature)", self.name, self.feature),
            })
            .into_iter()
            .collect()
    }
}

/// Opens an engine wrapped in a `FallbackManager` whose safety net is the builtin engine.
pub struct WithBuiltinFallback {
    name: String,
    primary: Arc<dyn BackendFactory>,
}

impl WithBuiltinFallback {
    /// `primary`, registered as `name`, with the builtin engine to answer while it cannot.
    pub fn new(name: impl Into<String>, primary: Arc<dyn BackendFactory>) -> Self {
        WithBuiltinFallback { name: name.into(), primary }
    }
}

#[async_trait]
impl BackendFactory for WithBuiltinFallback {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        // The failure state outlives the process, so that each one-shot `memory search` does not pay a dead
        // engine's timeout again: one file per agent, engine and workspace, beside the indexes.
        let state_file = ctx.space.fallback_state_file(&self.name);
        let policy = FallbackPolicy { state_file: Some(state_file), ..FallbackPolicy::default() };
        let manager =
            FallbackManager::open(&self.name, self.primary.clone(), FALLBACK_ENGINE, Arc::new(memory_builtin::BuiltinFactory), ctx, policy).await?;
        Ok(Box::new(manager))
    }

    fn check_config(&self, config: &Config) -> Result<()> {
        self.primary.check_config(config)
    }

    fn config_warnings(&self, config: &Config) -> Vec<ConfigIssue> {
        self.primary.config_warnings(config)
    }
}
