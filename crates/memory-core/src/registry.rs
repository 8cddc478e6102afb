//! Maps `memory.backend` names to engine factories, so a host opens whatever the config names and a plugin
//! author can register another engine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::backend::MemoryBackend;
use crate::config::Config;
use crate::embedding::EmbeddingProvider;
use crate::error::{MemoryError, Result};

/// Everything an engine needs to open.
#[derive(Clone)]
pub struct OpenContext {
    pub config: Arc<Config>,
    /// The agent's workspace (holds MEMORY.md and memory/).
    pub workspace: PathBuf,
    /// Per-agent state folder for indexes; never inside the workspace by default.
    pub state_dir: PathBuf,
    pub agent_id: String,
    /// The resolved embedding provider, `None` for keyword-only.
    pub embedder: Option<Arc<dyn EmbeddingProvider>>,
}

impl OpenContext {
    /// Names the state files of `engine` for this workspace (12 hex digits of a hash of both), so that files of
    /// one agent for different engines or workspaces never collide in the state folder.
    pub fn state_tag(&self, engine: &str) -> String {
        crate::sha256_hex(format!("{engine}\n{}", self.workspace.display()).as_bytes())[..12].to_string()
    }
}

#[async_trait]
pub trait BackendFactory: Send + Sync {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>>;

    /// Check the engine's own settings (its `memory.<engine>` block, read with [`Config::engine_block`])
    /// without opening anything. [`BackendRegistry::open`] asks every engine before opening one, so a bad key
    /// is reported by name even while a fallback answers for the engine or another engine is configured.
    fn check_config(&self, _config: &Config) -> Result<()> {
        Ok(())
    }
}

/// Engine factories by name.
#[derive(Default, Clone)]
pub struct BackendRegistry {
    factories: BTreeMap<String, Arc<dyn BackendFactory>>,
}

impl BackendRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Register (or replace) an engine under `name`.
    pub fn register(&mut self, name: impl Into<String>, factory: Arc<dyn BackendFactory>) -> &mut Self {
        self.factories.insert(name.into(), factory);
        self
    }

    pub fn names(&self) -> Vec<String> {
        self.factories.keys().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn BackendFactory>> {
        self.factories.get(name).cloned()
    }

    /// Open the engine the config names in `memory.backend`.
    pub async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        let name = ctx.config.memory.backend.clone();
        let factory = self.get(&name).ok_or_else(|| {
            MemoryError::config("memory.backend", format!("unknown engine `{name}` (known: {})", self.names().join(", ")))
        })?;
        for engine in self.factories.values() {
            engine.check_config(&ctx.config)?;
        }
        factory.open(ctx).await
    }
}
