//! Maps `memory.backend` names to engine factories, so a host opens whatever the config names and a plugin
//! author can register another engine.
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::backend::MemoryBackend;
use crate::config::{Config, ConfigIssue};
use crate::embedding::EmbeddingProvider;
use crate::error::{MemoryError, Result};
use crate::space::AgentSpace;

/// Everything an engine needs to open.
#[derive(Clone)]
pub struct OpenContext {
    /// The whole configuration, checked ([`BackendRegistry::check_config`]); an engine reads its block with
    /// [`Config::engine_block`].
    pub config: Arc<Config>,
    /// Where the agent's memory lives: its workspace and roots, its transcripts, and the names of every state file
    /// an engine keeps. Resolved once ([`OpenContext::new`]); engines ask it instead of deriving paths.
    pub space: Arc<AgentSpace>,
    /// The resolved embedding provider, `None` for keyword-only.
    pub embedder: Option<Arc<dyn EmbeddingProvider>>,
    /// The second-stage reranker (`memory.search.query.rerank`), `None` when off.
    pub reranker: Option<Arc<dyn crate::rerank::Reranker>>,
}

impl OpenContext {
    /// The context of `agent_id` on `workspace`, with its state under `state_dir` (never inside the workspace by
    /// default); keyword-only and without a reranker until [`with_embedder`](Self::with_embedder) /
    /// [`with_reranker`](Self::with_reranker).
    pub fn new(config: Arc<Config>, workspace: impl Into<PathBuf>, state_dir: impl Into<PathBuf>, agent_id: &str) -> OpenContext {
        let space = Arc::new(AgentSpace::resolve(&config, workspace, state_dir, agent_id));
        OpenContext { config, space, embedder: None, reranker: None }
    }

    /// The same context with this embedding provider (`None`: keyword search only).
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn EmbeddingProvider>>) -> OpenContext {
        self.embedder = embedder;
        self
    }

    /// The same context with this second-stage reranker (`None`: off).
    pub fn with_reranker(mut self, reranker: Option<Arc<dyn crate::rerank::Reranker>>) -> OpenContext {
        self.reranker = reranker;
        self
    }

    /// The agent's workspace (holds MEMORY.md and memory/).
    pub fn workspace(&self) -> &std::path::Path {
        self.space.workspace()
    }
}

/// Opens one kind of engine: what a plugin author registers under a `memory.backend` name.
#[async_trait]
pub trait BackendFactory: Send + Sync {
    /// Open the engine for the agent and workspace of `ctx` (its index may be built later, by the first sync).
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>>;

    /// Check the engine's own settings (its `memory.<engine>` block, read with [`Config::engine_block`])
    /// without opening anything. [`BackendRegistry::open`] asks every engine before opening one, so a bad key
    /// is reported by name even while a fallback answers for the engine or another engine is configured.
    fn check_config(&self, _config: &Config) -> Result<()> {
        Ok(())
    }

    /// Keys of the engine's block that are accepted but not acted on (OpenClaw keys this engine has no use for),
    /// each with why: [`BackendRegistry::check_config`] adds them to the config's warnings, which `memory status`
    /// lists. Only called when [`check_config`](Self::check_config) passed.
    fn config_warnings(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
}

/// Engine factories by name.
#[derive(Default, Clone)]
pub struct BackendRegistry {
    factories: BTreeMap<String, Arc<dyn BackendFactory>>,
}

impl BackendRegistry {
    /// A registry with no engine (a host registers the ones it ships: `memory_host::Host`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Register (or replace) an engine under `name`.
    pub fn register(&mut self, name: impl Into<String>, factory: Arc<dyn BackendFactory>) -> &mut Self {
        self.factories.insert(name.into(), factory);
        self
    }

    /// The registered names, in order.
    pub fn names(&self) -> Vec<String> {
        self.factories.keys().cloned().collect()
    }

    /// The factory registered under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn BackendFactory>> {
        self.factories.get(name).cloned()
    }

    /// Check every engine's block of `config`, whichever engine is configured: each engine checks its own
    /// (errors name the key as written), a `memory.<name>` block of no registered engine is an unknown key, and
    /// the engines' warnings join the config's. A host calls this once after loading the config;
    /// [`open`](Self::open) checks again (without the warnings) for hosts that did not.
    pub fn check_config(&self, config: &mut Config) -> Result<()> {
        self.check_blocks(config)?;
        let warnings: Vec<ConfigIssue> = self.factories.values().flat_map(|f| f.config_warnings(config)).collect();
        config.add_warnings(warnings);
        Ok(())
    }

    fn check_blocks(&self, config: &Config) -> Result<()> {
        if let Some(stray) = config.engine_block_names().find(|name| !self.factories.contains_key(*name)) {
            return Err(MemoryError::config(
                format!("memory.{stray}"),
                format!("unknown key (no engine named `{stray}`; engines: {})", self.names().join(", ")),
            ));
        }
        for engine in self.factories.values() {
            engine.check_config(config)?;
        }
        Ok(())
    }

    /// Open the engine the config names in `memory.backend`.
    pub async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        let name = ctx.config.memory.backend.clone();
        let factory = self
            .get(&name)
            .ok_or_else(|| MemoryError::config("memory.backend", format!("unknown engine `{name}` (known: {})", self.names().join(", "))))?;
        self.check_blocks(&ctx.config)?;
        factory.open(ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine whose block must say `ok: true`, and which warns of a key it ignores.
    struct Picky;

    #[async_trait]
    impl BackendFactory for Picky {
        async fn open(&self, _ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
            Err(MemoryError::Unavailable("not opened in this test".into()))
        }

        fn check_config(&self, config: &Config) -> Result<()> {
            match config.engine_block::<serde_json::Value>("picky")? {
                Some(b) if b.get("ok") != Some(&serde_json::Value::Bool(true)) => Err(MemoryError::config("memory.picky.ok", "must be true")),
                _ => Ok(()),
            }
        }

        fn config_warnings(&self, config: &Config) -> Vec<ConfigIssue> {
            let ignored = config.engine_block::<serde_json::Value>("picky").ok().flatten().is_some_and(|b| b.get("legacy").is_some());
            ignored.then(|| ConfigIssue { key: "memory.picky.legacy".into(), message: "accepted, not used: test".into() }).into_iter().collect()
        }
    }

    fn registry() -> BackendRegistry {
        let mut r = BackendRegistry::new();
        r.register("picky", Arc::new(Picky));
        r.register("other", Arc::new(Picky));
        r
    }

    fn key_of(e: MemoryError) -> String {
        match e {
            MemoryError::Config { key, .. } => key,
            other => panic!("not a config error: {other}"),
        }
    }

    #[test]
    fn every_engine_checks_its_block_whichever_engine_is_configured() {
        // `other` is configured; picky's block is checked all the same, and its warning joins the config's.
        let mut c = Config::from_json5("{ memory: { backend: 'other', picky: { ok: true, legacy: 1 } } }").unwrap();
        registry().check_config(&mut c).unwrap();
        assert_eq!(c.warnings.iter().map(|w| w.key.as_str()).collect::<Vec<_>>(), vec!["memory.picky.legacy"]);
        let mut bad = Config::from_json5("{ memory: { backend: 'other', picky: { ok: false } } }").unwrap();
        assert_eq!(key_of(registry().check_config(&mut bad).unwrap_err()), "memory.picky.ok");
    }

    #[test]
    fn a_block_no_engine_owns_is_an_unknown_key() {
        let mut c = Config::from_json5("{ memory: { backend: 'picky', pciky: { ok: true } } }").unwrap();
        let e = registry().check_config(&mut c).unwrap_err();
        assert!(e.to_string().contains("no engine named `pciky`") && e.to_string().contains("other, picky"), "{e}");
        assert_eq!(key_of(e), "memory.pciky");
    }
}
