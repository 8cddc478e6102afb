//! `memory.backend = "builtin"`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::indexed::IndexedBackend;
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::{MemoryBackend, Result};

use crate::SqliteStorage;

/// Opens the builtin SQLite engine.
#[derive(Debug, Default, Clone, Copy)]
pub struct BuiltinFactory;

impl BuiltinFactory {
    /// Open the engine with its concrete type (hosts that need `IndexedBackend` methods such as progress).
    pub async fn open_indexed(&self, ctx: OpenContext) -> Result<IndexedBackend> {
        let path = match &ctx.config.memory.search.store.path {
            Some(p) => memory_core::paths::state_path(p, &ctx.agent_id, &ctx.state_dir),
            None => default_index_path(&ctx.state_dir, &ctx.agent_id, &ctx.workspace),
        };
        let storage = Arc::new(SqliteStorage::new(path));
        IndexedBackend::open_for("builtin", &ctx, storage).await
    }
}

#[async_trait]
impl BackendFactory for BuiltinFactory {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Ok(Box::new(self.open_indexed(ctx).await?))
    }
}

/// `<state>/agents/<agent>/<workspace name>-<hash of its path>.sqlite`: one index per agent and workspace,
/// outside the workspace.
pub fn default_index_path(state_dir: &Path, agent_id: &str, workspace: &Path) -> PathBuf {
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let name: String = ws
        .file_name()
        .map(|n| n.to_string_lossy().chars().map(|c| if c.is_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect())
        .unwrap_or_else(|| "root".into());
    let hash = &memory_core::sha256_hex(ws.to_string_lossy().as_bytes())[..10];
    state_dir.join("agents").join(memory_core::sanitize_id(agent_id)).join(format!("{name}-{hash}.sqlite"))
}
