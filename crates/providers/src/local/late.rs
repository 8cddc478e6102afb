//! `LateInteractionReranker`: a ColBERT-style reranker ([`model_runtime::LateEncoder`]: late interaction, MaxSim)
//! run in-process from a model folder behind [`Reranker`]; what makes a folder late-interaction and how its texts
//! are encoded ([`Conventions`]) is the runtime's to read.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use memory_core::rerank::{RerankError, Reranker};
use model_runtime::{Conventions, LateEncoder};

use super::load_once::LoadOnce;
use super::rerank::rerank_error;
use super::{LocalModelError, LocalModelInfo};

/// A late-interaction reranker from a model folder. Cheap to clone; the model loads once, on first use.
#[derive(Clone)]
pub struct LateInteractionReranker {
    info: Arc<LocalModelInfo>,
    conventions: Conventions,
    loaded: LoadOnce<LateEncoder>,
    /// One forward pass at a time: candle already uses every core for one.
    gate: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for LateInteractionReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LateInteractionReranker").field("dir", &self.info.dir).field("conventions", &self.conventions).finish()
    }
}

impl LateInteractionReranker {
    /// Inspect a model folder (cheap); the weights load on first use or [`load`](Self::load).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, LocalModelError> {
        let info = LocalModelInfo::inspect(dir.as_ref())?;
        let conventions = LateEncoder::check(&info)?;
        Ok(LateInteractionReranker { info: Arc::new(info), conventions, loaded: LoadOnce::new(), gate: Arc::new(tokio::sync::Semaphore::new(1)) })
    }

    pub fn info(&self) -> &LocalModelInfo {
        &self.info
    }

    pub fn conventions(&self) -> &Conventions {
        &self.conventions
    }

    /// Load the weights now (otherwise the first `score` does).
    pub async fn load(&self) -> Result<(), RerankError> {
        self.model().await.map(|_| ())
    }

    fn failed(&self, message: String) -> RerankError {
        RerankError::Failed { reranker: self.info.name.clone(), message }
    }

    async fn model(&self) -> Result<Arc<LateEncoder>, RerankError> {
        let (info, conventions) = (self.info.clone(), self.conventions.clone());
        let load =
            move || LateEncoder::load(&info, conventions).map_err(|e| RerankError::Failed { reranker: info.name.clone(), message: e.to_string() });
        self.loaded.get(load, |e| self.failed(e)).await
    }

    fn model_blocking(&self) -> Result<Arc<LateEncoder>, RerankError> {
        self.loaded.get_blocking(|| LateEncoder::load(&self.info, self.conventions.clone()).map_err(|e| self.failed(e.to_string())))
    }

    /// [`Reranker::score`] without a runtime (benchmarks, tools).
    pub fn score_blocking(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        self.model_blocking()?.score(query, passages, deadline).map_err(|e| rerank_error(&self.info.name, e))
    }

    /// The token ids a query (`query: true`) or a passage is encoded as, and its token vectors (L2-normalised,
    /// one row per kept token), for tools and the tests that compare them with a reference.
    pub fn token_vectors(&self, text: &str, query: bool) -> Result<(Vec<u32>, Vec<Vec<f32>>), RerankError> {
        self.model_blocking()?.token_vectors(text, query).map_err(|e| rerank_error(&self.info.name, e))
    }
}

#[async_trait]
impl Reranker for LateInteractionReranker {
    fn id(&self) -> &str {
        &self.info.name
    }

    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let model = self.model().await?;
        let (name, query, passages) = (self.info.name.clone(), query.to_string(), passages.to_vec());
        let n = passages.len();
        super::rerank::score_off_runtime(&self.info.name, &self.gate, "late interaction", n, move || {
            model.score(&query, &passages, deadline).map_err(|e| rerank_error(&name, e))
        })
        .await
    }
}
