//! The engines this host knows, by `memory.backend` name, and the embedding provider from config.
//!
//! Every engine other than builtin runs behind a `FallbackManager`: when it fails (missing binary, crash,
//! timeout, unparsable output), builtin answers and status says why, and the engine is tried again after a
//! back-off.

use std::sync::Arc;

use async_trait::async_trait;
use memory_core::embedding::EmbeddingProvider;
use memory_core::fallback::{FallbackManager, FallbackPolicy};
use memory_core::registry::{BackendFactory, BackendRegistry, OpenContext};
use memory_core::{Config, MemoryBackend, Result};

pub fn registry() -> BackendRegistry {
    let mut r = BackendRegistry::new();
    r.register("builtin", Arc::new(memory_builtin::BuiltinFactory));
    r.register("qmd", Arc::new(WithBuiltinFallback::new("qmd", Arc::new(memory_qmd::QmdFactory::new()))));
    #[cfg(feature = "lancedb")]
    r.register("lancedb", Arc::new(WithBuiltinFallback::new("lancedb", Arc::new(memory_lancedb::LanceDbFactory::default()))));
    #[cfg(not(feature = "lancedb"))]
    r.register("lancedb", Arc::new(NotBuiltIn { name: "lancedb", feature: "lancedb" }));
    r
}

/// An engine this binary was built without: a clear error instead of "unknown engine".
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
            format!("this `memory` binary was built without the {} engine; rebuild with `--features {}`", self.name, self.feature),
        ))
    }
}

/// Opens an engine wrapped in a `FallbackManager` whose safety net is the builtin engine.
struct WithBuiltinFallback {
    name: &'static str,
    primary: Arc<dyn BackendFactory>,
}

impl WithBuiltinFallback {
    fn new(name: &'static str, primary: Arc<dyn BackendFactory>) -> Self {
        WithBuiltinFallback { name, primary }
    }
}

#[async_trait]
impl BackendFactory for WithBuiltinFallback {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        // The failure state outlives the process, so that each one-shot `memory search` does not pay a dead
        // engine's timeout again: one file per agent, engine and workspace, beside the indexes.
        let agent = memory_core::sanitize_id(&ctx.agent_id);
        let state_file = ctx.state_dir.join("agents").join(agent).join(format!("{}-{}.fallback.json", self.name, ctx.state_tag(self.name)));
        let policy = FallbackPolicy { state_file: Some(state_file), ..FallbackPolicy::default() };
        let manager = FallbackManager::open(
            self.name,
            self.primary.clone(),
            "builtin",
            Arc::new(memory_builtin::BuiltinFactory),
            ctx,
            policy,
        )
        .await?;
        Ok(Box::new(manager))
    }
}

/// The embedding provider the config asks for (`memory.search.provider`, default `auto`: the local model when
/// its folder is configured or in `MEMORY_LOCAL_MODEL`, else a remote provider with an API key); `None` means
/// keyword-only.
pub fn embedder(config: &Config) -> Result<Option<Arc<dyn EmbeddingProvider>>> {
    providers::from_config(config)
}
