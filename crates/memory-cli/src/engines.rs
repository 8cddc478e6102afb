//! The engines this host knows, by `memory.backend` name, and the embedding provider from config.

use std::sync::Arc;

use memory_core::embedding::EmbeddingProvider;
use memory_core::registry::BackendRegistry;
use memory_core::{Config, Result};

pub fn registry() -> BackendRegistry {
    let mut r = BackendRegistry::new();
    r.register("builtin", Arc::new(memory_builtin::BuiltinFactory));
    r
}

/// The embedding provider the config asks for; `None` means keyword-only.
pub fn embedder(_config: &Config) -> Result<Option<Arc<dyn EmbeddingProvider>>> {
    Ok(None)
}
