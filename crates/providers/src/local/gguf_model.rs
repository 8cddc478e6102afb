//! A `.gguf` model file as the `local` provider: [`model_runtime::GgufEncoder`] loaded once on first use, one
//! embedding pass at a time off the async runtime, the purpose's prompt in front of each text.

use std::path::Path;
use std::sync::Arc;

use memory_core::embedding::{EmbeddingError, EmbeddingPurpose};
use model_runtime::{GgufEncoder, GgufModelInfo, ModelOptions};
use tracing::debug;

use super::load_once::LoadOnce;
use super::{embedding_error, LocalModelError};

/// The provider over one GGUF file; the weights load on first use.
pub(crate) struct GgufProvider {
    pub info: Arc<GgufModelInfo>,
    loaded: LoadOnce<GgufEncoder>,
    gate: tokio::sync::Semaphore,
}

impl GgufProvider {
    pub fn open(path: &Path, options: &ModelOptions) -> Result<Self, LocalModelError> {
        let (info, _) = GgufModelInfo::inspect(path, options)?;
        debug!(path = %info.path.display(), fingerprint = %info.fingerprint, "local GGUF model inspected");
        Ok(GgufProvider { info: Arc::new(info), loaded: LoadOnce::new(), gate: tokio::sync::Semaphore::new(1) })
    }

    pub async fn loaded(&self) -> Result<Arc<GgufEncoder>, EmbeddingError> {
        let info = self.info.clone();
        self.loaded.get(move || GgufEncoder::load(&info).map_err(embedding_error), super::load_task_lost).await
    }

    pub fn loaded_blocking(&self) -> Result<Arc<GgufEncoder>, EmbeddingError> {
        self.loaded.get_blocking(|| GgufEncoder::load(&self.info)).map_err(embedding_error)
    }

    pub fn prompted(&self, texts: &[String], purpose: EmbeddingPurpose) -> Vec<String> {
        super::prompted(&self.info.prompts, texts, purpose)
    }

    pub async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let loaded = self.loaded().await?;
        let info = self.info.clone();
        let texts = self.prompted(texts, purpose);
        super::embed_gated(&self.gate, texts, self.info.dimensions, move |texts| loaded.embed(&info, texts)).await
    }
}
