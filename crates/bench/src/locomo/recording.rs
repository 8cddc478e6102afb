//! A reranker wrapper that records each call's logits and cost, for `--dump` and the reranking time per
//! candidate; the quality benchmark reranks through it too.

use memory_core::locks::LockExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// A reranker that remembers the logits of its last call (searches run one at a time), for `--dump`, and what its
/// calls cost: milliseconds and candidates summed.
pub(crate) struct Recording {
    inner: Arc<dyn memory_core::rerank::Reranker>,
    pub(super) last: std::sync::Mutex<Option<Vec<f32>>>,
    cost: std::sync::Mutex<(f64, usize)>,
}

impl Recording {
    pub(crate) fn open(dir: &Path) -> anyhow::Result<Arc<Recording>> {
        Ok(Arc::new(Recording { inner: providers::open_reranker(dir)?.into_shared(), last: Default::default(), cost: Default::default() }))
    }

    pub(crate) fn cost(&self) -> (f64, usize) {
        *self.cost.locked()
    }
}

#[async_trait::async_trait]
impl memory_core::rerank::Reranker for Recording {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, memory_core::rerank::RerankError> {
        let t = Instant::now();
        let out = self.inner.score(query, passages, deadline).await;
        let mut cost = self.cost.locked();
        cost.0 += t.elapsed().as_secs_f64() * 1e3;
        cost.1 += passages.len();
        *self.last.locked() = out.as_ref().ok().cloned();
        out
    }
}
