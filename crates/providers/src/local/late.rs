//! `LateInteractionReranker`: a ColBERT-style reranker ([`model_runtime::LateEncoder`]: late interaction, MaxSim)
//! run in-process from a model folder behind [`Reranker`]; what makes a folder late-interaction and how its texts
//! are encoded ([`Conventions`]) is the runtime's to read.

use std::path::Path;
use std::time::Instant;

use async_trait::async_trait;
use memory_core::rerank::{RerankError, Reranker};
use model_runtime::{Conventions, LateEncoder};

use super::rerank::{rerank_error, LocalModel};
use super::{LocalModelError, LocalModelInfo};

/// A late-interaction reranker from a model folder. Cheap to clone; the model loads once, on first use.
#[derive(Clone)]
pub struct LateInteractionReranker {
    model: LocalModel<LateEncoder>,
    conventions: Conventions,
}

impl std::fmt::Debug for LateInteractionReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateInteractionReranker").field("dir", &self.model.info.dir).field("conventions", &self.conventions).finish()
    }
}

impl LateInteractionReranker {
    /// Inspect a model folder (cheap); the weights load on first use or [`load`](Self::load).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, LocalModelError> {
        let info = LocalModelInfo::inspect(dir.as_ref())?;
        let conventions = LateEncoder::check(&info)?;
        let loaded_with = conventions.clone();
        let model = LocalModel::new(info, move |info| LateEncoder::load(info, loaded_with.clone()));
        Ok(LateInteractionReranker { model, conventions })
    }

    pub fn info(&self) -> &LocalModelInfo {
        &self.model.info
    }

    pub fn conventions(&self) -> &Conventions {
        &self.conventions
    }

    /// Load the weights now (otherwise the first `score` does).
    pub async fn load(&self) -> Result<(), RerankError> {
        self.model.get().await.map(|_| ())
    }

    /// [`Reranker::score`] without a runtime (benchmarks, tools).
    pub fn score_blocking(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        self.model.score_blocking(query, passages, deadline, LateEncoder::score)
    }

    /// The token ids a query (`query: true`) or a passage is encoded as, and its token vectors (L2-normalised,
    /// one row per kept token), for tools and the tests that compare them with a reference.
    pub fn token_vectors(&self, text: &str, query: bool) -> Result<(Vec<u32>, Vec<Vec<f32>>), RerankError> {
        self.model.get_blocking()?.token_vectors(text, query).map_err(|e| rerank_error(&self.model.info.name, e))
    }
}

#[async_trait]
impl Reranker for LateInteractionReranker {
    fn id(&self) -> &str {
        &self.model.info.name
    }

    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        self.model.score("late interaction", query, passages, deadline, LateEncoder::score).await
    }
}
