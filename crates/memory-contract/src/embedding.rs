//! The embedding-provider trait the shared sync and search code call. Implementations live in the `providers` crate.
#![deny(missing_docs)]

use std::collections::{HashMap, HashSet};
use std::path::Path;

use async_trait::async_trait;

/// Why an embedding call failed. `is_transient` tells the retry and fallback logic what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbeddingError {
    /// Network error, timeout, 429 or 5xx: worth a retry or a fallback provider.
    #[error("{provider}: temporarily unavailable: {message}")]
    Transient {
        /// The provider's id.
        provider: String,
        /// What happened.
        message: String,
    },
    /// Bad key, bad model, malformed answer: retrying will not help.
    #[error("{provider}: {message}")]
    Permanent {
        /// The provider's id.
        provider: String,
        /// What happened, and what to fix.
        message: String,
    },
    /// The provider is not set up here (no key, no model on disk).
    #[error("{provider}: not configured: {message}")]
    NotConfigured {
        /// The provider's id.
        provider: String,
        /// What is missing.
        message: String,
    },
}

impl EmbeddingError {
    /// Worth a retry (or a fallback provider) later.
    pub fn is_transient(&self) -> bool {
        matches!(self, EmbeddingError::Transient { .. })
    }
}

/// Whether text is a search query or a document to index; some models embed them differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingPurpose {
    /// A search query (the model's query prompt, if it has one).
    Query,
    /// A note to index (its document prompt).
    Document,
}

/// Turns text into vectors. Vectors returned are finite and L2-normalised.
#[async_trait]
pub trait EmbeddingProvider: Send + Sync {
    /// Provider id (`openai`, `gemini`, `local`...).
    fn id(&self) -> &str;
    /// Model name.
    fn model(&self) -> &str;
    /// Vector width, when known before the first call.
    fn dimensions(&self) -> Option<usize>;
    /// A stable digest of every setting that changes the vectors (model, dims, base URL, task types...),
    /// part of the index identity and of the embedding-cache key.
    fn fingerprint(&self) -> String;

    /// Embed a batch of texts. The result has one vector per input, in order.
    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError>;

    /// Provider batch jobs (OpenAI's Batch API, Gemini's asynchronous batches, Voyage's batches) for large
    /// backfills, when configured (`memory.search.remote.batch.enabled`). `None`: synchronous calls only.
    fn batch(&self) -> Option<&dyn BatchEmbedder> {
        None
    }

    /// Whether [`embed_media`](Self::embed_media) works: a multimodal model (`memory.search.multimodal`).
    fn supports_media(&self) -> bool {
        false
    }

    /// Embed images or audio (document purpose) into the same space as text queries, one vector per input.
    async fn embed_media(&self, media: &[MediaInput]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let _ = media;
        Err(EmbeddingError::NotConfigured {
            provider: self.id().to_string(),
            message: format!("model `{}` does not embed images or audio", self.model()),
        })
    }

    /// The longest an [`embed`](Self::embed) call of these document texts may take by the provider's own limits
    /// (a remote provider's requests for them, their timeout and how many run at once); `None` when it sets
    /// none. A sync beside searches waits at least this long for a call, so a slow local server's requests
    /// are not given up while it would still answer them.
    fn call_timeout(&self, texts: &[String]) -> Option<std::time::Duration> {
        let _ = texts;
        None
    }

    /// Why this provider cannot embed at all (an [`Unavailable`] stand-in), for `status`; `None` for a real one.
    fn unavailable(&self) -> Option<&str> {
        None
    }

    /// For a stand-in ([`Unavailable`]): take the identity (`provider`, `model`, fingerprint, width) the index was
    /// built with, so that the index is kept as it is instead of rebuilt for "other settings". A real provider
    /// never does (the default).
    fn adopt_identity(&self, provider: &str, model: &str, fingerprint: &str, dimensions: Option<usize>) -> bool {
        let _ = (provider, model, fingerprint, dimensions);
        false
    }

    /// Embed one search query (the default calls [`embed`](Self::embed) with [`EmbeddingPurpose::Query`]).
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed(&[text.to_string()], EmbeddingPurpose::Query).await?;
        v.pop().ok_or_else(|| EmbeddingError::Permanent { provider: self.id().to_string(), message: "empty embedding response".into() })
    }
}

/// An embedding provider that could not be built (its local model folder missing, moved or damaged) standing in
/// for it. Every embedding fails with why, so a search answers by its words with the reason in `warnings`, and a
/// sync indexes changed notes by their words and leaves them pending for their vectors (as after any failed
/// embedding call). It takes the identity the index was built with ([`EmbeddingProvider::adopt_identity`], when
/// the index was built by the same provider): the vectors already in the index stay, for when the model is back.
///
/// Why: a memory whose model went missing (a cache cleaned, a disk not mounted yet) would otherwise stop answering
/// at all (a config error at every command), or, opened without a provider, rebuild its index without vectors.
pub struct Unavailable {
    provider: String,
    model: String,
    why: String,
    adopted: std::sync::OnceLock<(String, String, Option<usize>)>,
    reload: Option<Reload>,
    retry_every: std::time::Duration,
    /// The provider once it is back, and when to try again meanwhile.
    back: std::sync::Mutex<(Option<std::sync::Arc<dyn EmbeddingProvider>>, std::time::Instant)>,
}

/// Builds the real provider again (the model folder read anew), for [`Unavailable::with_reload`].
pub type Reload = Box<dyn Fn() -> Result<std::sync::Arc<dyn EmbeddingProvider>, String> + Send + Sync>;

impl Unavailable {
    /// A stand-in for `provider`'s `model`, which cannot be used because of `why`.
    pub fn new(provider: impl Into<String>, model: impl Into<String>, why: impl Into<String>) -> Unavailable {
        Unavailable {
            provider: provider.into(),
            model: model.into(),
            why: why.into(),
            adopted: std::sync::OnceLock::new(),
            reload: None,
            retry_every: std::time::Duration::ZERO,
            back: std::sync::Mutex::new((None, std::time::Instant::now())),
        }
    }

    /// Try `reload` at most every `every` on use: once it builds a provider with the adopted index's fingerprint
    /// (the same model is back), embeddings go to it, so a long-running process answers with vectors again without
    /// a restart. A provider of another model is not used (the index holds the old one's vectors): the next
    /// process rebuilds for it.
    pub fn with_reload(mut self, reload: Reload, every: std::time::Duration) -> Unavailable {
        self.reload = Some(reload);
        self.back = std::sync::Mutex::new((None, std::time::Instant::now() + every));
        self.retry_every = every;
        self
    }

    /// The provider, when it is back.
    fn back(&self) -> Option<std::sync::Arc<dyn EmbeddingProvider>> {
        let reload = self.reload.as_ref()?;
        let (_, fingerprint, _) = self.adopted.get()?;
        let mut back = self.back.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if back.0.is_none() && std::time::Instant::now() >= back.1 {
            back.1 = std::time::Instant::now() + self.retry_every;
            match reload() {
                Ok(p) if p.fingerprint() == *fingerprint => back.0 = Some(p),
                Ok(p) => {
                    tracing::warn!(model = %p.model(), "the model folder holds another model than the index was built with; searching by words until the next start rebuilds the index");
                }
                Err(e) => tracing::debug!(error = %e, "the embedding model is still unavailable"),
            }
        }
        back.0.clone()
    }
}
impl std::fmt::Debug for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unavailable").field("provider", &self.provider).field("why", &self.why).finish()
    }
}

#[async_trait]
impl EmbeddingProvider for Unavailable {
    fn id(&self) -> &str {
        &self.provider
    }

    fn model(&self) -> &str {
        self.adopted.get().map_or(self.model.as_str(), |(m, _, _)| m.as_str())
    }

    fn dimensions(&self) -> Option<usize> {
        self.adopted.get().and_then(|(_, _, d)| *d)
    }

    /// The adopted index's fingerprint; before any (no index yet, or one of another provider), one that matches
    /// no model's, so the index is built anew once the model is back.
    fn fingerprint(&self) -> String {
        match self.adopted.get() {
            Some((_, f, _)) => f.clone(),
            None => format!("unavailable:{}:{}", self.provider, self.model),
        }
    }

    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        match self.back() {
            Some(p) => p.embed(texts, purpose).await,
            None => Err(EmbeddingError::NotConfigured { provider: self.provider.clone(), message: self.why.clone() }),
        }
    }

    fn unavailable(&self) -> Option<&str> {
        let back = self.back.lock().map(|b| b.0.is_some()).unwrap_or(false);
        (!back).then_some(self.why.as_str())
    }

    fn adopt_identity(&self, provider: &str, model: &str, fingerprint: &str, dimensions: Option<usize>) -> bool {
        provider == self.provider && self.adopted.set((model.to_string(), fingerprint.to_string(), dimensions)).is_ok()
    }
}

/// An image or audio file to embed with a multimodal model.
#[derive(Clone)]
pub struct MediaInput {
    /// Its MIME type (`image/png`, `audio/mpeg`...).
    pub mime_type: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for MediaInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaInput").field("mime_type", &self.mime_type).field("bytes", &self.data.len()).finish()
    }
}

/// One document for a batch job: its chunk hash (the embedding-cache key, also the job's custom id) and text.
#[derive(Debug, Clone)]
pub struct BatchItem {
    /// The chunk's hash.
    pub hash: String,
    /// The text to embed.
    pub text: String,
}

/// Vectors of one finished batch job, keyed by chunk hash, sent as soon as the job's output is read.
pub type BatchDelivery = Vec<(String, Vec<f32>)>;

/// What a batch run left undone. Every hash that got a vector was sent through the delivery channel.
#[derive(Debug, Clone, Default)]
pub struct BatchOutcome {
    /// Submitted jobs not finished yet (`wait: false`): their chunks wait for a later sync, which polls the jobs
    /// again instead of resubmitting them. Not to be embedded synchronously now.
    pub pending: HashSet<String>,
    /// Jobs submitted in this run.
    pub jobs_submitted: usize,
    /// Jobs resumed from an earlier run.
    pub jobs_resumed: usize,
    /// Jobs that failed.
    pub jobs_failed: usize,
    /// Notes for the sync report (failed jobs, items the batch API rejected, the batch API being disabled).
    pub warnings: Vec<String>,
}

/// Asynchronous provider batch jobs. Hashes neither delivered nor pending are left to the caller, which embeds
/// them with ordinary synchronous calls (items a job rejected, or everything once the batch API is disabled).
#[async_trait]
pub trait BatchEmbedder: Send + Sync {
    /// Embed `items` (document purpose) through batch jobs. Submitted jobs and the hashes they carry are recorded
    /// in `state_file` before they are waited for, so a run that is interrupted is resumed by the next one:
    /// its jobs are polled, not resubmitted. Each job's vectors go to `deliver` as soon as they are read.
    async fn embed_documents(
        &self,
        items: &[BatchItem],
        state_file: &Path,
        deliver: tokio::sync::mpsc::UnboundedSender<BatchDelivery>,
    ) -> BatchOutcome;

    /// Why the batch API is switched off for the rest of this run (it failed twice), if it is.
    fn disabled_reason(&self) -> Option<String>;
}

/// Collect a batch run's deliveries into a map while the run goes on, passing each delivery to `on_delivery`
/// (the sync writes them to the embedding cache there). Returns the vectors and the run's outcome.
pub async fn run_batch<F, Fut>(
    batch: &dyn BatchEmbedder,
    items: &[BatchItem],
    state_file: &Path,
    mut on_delivery: F,
) -> (HashMap<String, Vec<f32>>, BatchOutcome)
where
    F: FnMut(BatchDelivery) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<BatchDelivery>();
    let mut vectors = HashMap::new();
    let run = batch.embed_documents(items, state_file, tx);
    let collect = async {
        while let Some(d) = rx.recv().await {
            vectors.extend(d.iter().cloned());
            on_delivery(d).await;
        }
    };
    let (outcome, ()) = tokio::join!(run, collect);
    (vectors, outcome)
}

/// Replace non-finite values by 0 and scale to unit length. A zero vector stays zero.
pub fn sanitize_and_normalize(v: &mut [f32]) {
    for x in v.iter_mut() {
        if !x.is_finite() {
            *x = 0.0;
        }
    }
    let norm = v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x = (*x as f64 / norm) as f32;
        }
    }
}

/// Cosine similarity of two vectors (of any norm). 0 when either is zero or the lengths differ.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (*x as f64, *y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_becomes_zero_and_vector_is_unit_length() {
        let mut v = vec![3.0, f32::NAN, 4.0, f32::INFINITY];
        sanitize_and_normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.0, 0.8, 0.0]);
    }

    #[test]
    fn cosine_of_orthogonal_and_parallel() {
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 2.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
    }
}
