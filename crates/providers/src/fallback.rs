//! `memory.search.fallback`: a second provider used only when the first fails.
//!
//! Vectors of two providers live in different spaces (and often have different widths), so they must never be
//! mixed in one index or under one cache key. The wrapper therefore reports the identity (`id`, `model`,
//! `dimensions`, `fingerprint`) of the provider that is *active*, and switching is explicit:
//!
//! - While the primary is active, every call goes to it. When a call fails (after the primary's own retries),
//!   the wrapper switches to the secondary for good (for this process) and that call returns an error
//!   ([`EmbeddingError::Transient`], naming both providers), so the caller never receives secondary vectors
//!   under the primary's identity that it read before the call.
//! - From then on calls go to the secondary, and the identity is the secondary's: a caller that compares the
//!   fingerprint with its index identity (`memory_core::identity`) sees the change and rebuilds the index with the secondary,
//!   beside the old one. Query vectors of the secondary must not be searched against the primary's index.
//! - It does not switch back on its own: returning to the primary would mean another full rebuild. A restart (a
//!   new wrapper) tries the primary again.
//!
//! With the primary healthy, the wrapper is indistinguishable from the primary (same fingerprint), so adding a
//! fallback to a configuration does not rebuild its index or invalidate its embedding cache.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::embedding::{BatchEmbedder, EmbeddingError, EmbeddingProvider, EmbeddingPurpose};
use tracing::warn;

pub struct FallbackProvider {
    primary: Arc<dyn EmbeddingProvider>,
    secondary: Arc<dyn EmbeddingProvider>,
    switched: AtomicBool,
}

impl fmt::Debug for FallbackProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackProvider")
            .field("primary", &self.primary.id())
            .field("secondary", &self.secondary.id())
            .field("switched", &self.is_switched())
            .finish()
    }
}

impl FallbackProvider {
    pub fn new(primary: Arc<dyn EmbeddingProvider>, secondary: Arc<dyn EmbeddingProvider>) -> Self {
        FallbackProvider { primary, secondary, switched: AtomicBool::new(false) }
    }

    /// Whether the secondary is in use.
    pub fn is_switched(&self) -> bool {
        self.switched.load(Ordering::SeqCst)
    }

    pub fn primary(&self) -> &Arc<dyn EmbeddingProvider> {
        &self.primary
    }

    pub fn secondary(&self) -> &Arc<dyn EmbeddingProvider> {
        &self.secondary
    }

    fn active(&self) -> &Arc<dyn EmbeddingProvider> {
        if self.is_switched() {
            &self.secondary
        } else {
            &self.primary
        }
    }
}

#[async_trait]
impl EmbeddingProvider for FallbackProvider {
    fn id(&self) -> &str {
        self.active().id()
    }

    fn model(&self) -> &str {
        self.active().model()
    }

    fn dimensions(&self) -> Option<usize> {
        self.active().dimensions()
    }

    fn fingerprint(&self) -> String {
        self.active().fingerprint()
    }

    fn batch(&self) -> Option<&dyn BatchEmbedder> {
        self.active().batch()
    }

    fn call_timeout(&self, texts: &[String]) -> Option<std::time::Duration> {
        self.active().call_timeout(texts)
    }

    fn supports_media(&self) -> bool {
        self.active().supports_media()
    }

    async fn embed_media(&self, media: &[memory_core::embedding::MediaInput]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.active().embed_media(media).await
    }

    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if self.is_switched() {
            return self.secondary.embed(texts, purpose).await;
        }
        match self.primary.embed(texts, purpose).await {
            Ok(v) => Ok(v),
            Err(e) => {
                let first = !self.switched.swap(true, Ordering::SeqCst);
                if first {
                    warn!(
                        primary = self.primary.id(),
                        secondary = self.secondary.id(),
                        error = %e,
                        "embedding provider failed; switching to the fallback provider (the index must be rebuilt)"
                    );
                }
                Err(EmbeddingError::Transient {
                    provider: self.primary.id().to_string(),
                    message: format!(
                        "failed ({e}); switched to the fallback provider `{}` (model `{}`): the provider fingerprint changed, re-embed with it",
                        self.secondary.id(),
                        self.secondary.model()
                    ),
                })
            }
        }
    }
}
