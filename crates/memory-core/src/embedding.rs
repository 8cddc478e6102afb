//! The embedding-provider trait the shared sync and search code call. Implementations live in the `providers` crate.

use async_trait::async_trait;

/// Why an embedding call failed. `is_transient` tells the retry and fallback logic what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbeddingError {
    /// Network error, timeout, 429 or 5xx: worth a retry or a fallback provider.
    #[error("{provider}: temporarily unavailable: {message}")]
    Transient { provider: String, message: String },
    /// Bad key, bad model, malformed answer: retrying will not help.
    #[error("{provider}: {message}")]
    Permanent { provider: String, message: String },
    /// The provider is not set up here (no key, no model on disk).
    #[error("{provider}: not configured: {message}")]
    NotConfigured { provider: String, message: String },
}

impl EmbeddingError {
    pub fn is_transient(&self) -> bool {
        matches!(self, EmbeddingError::Transient { .. })
    }
}

/// Whether text is a search query or a document to index; some models embed them differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingPurpose {
    Query,
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

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed(&[text.to_string()], EmbeddingPurpose::Query).await?;
        v.pop().ok_or_else(|| EmbeddingError::Permanent {
            provider: self.id().to_string(),
            message: "empty embedding response".into(),
        })
    }
}

/// Replace non-finite values by 0 and scale to unit length (SPEC §7). A zero vector stays zero.
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
