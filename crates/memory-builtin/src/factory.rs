//! `memory.backend = "builtin"`.

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
        let path = ctx.space.index_file("builtin", "sqlite");
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
