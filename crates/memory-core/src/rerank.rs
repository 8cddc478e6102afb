//! The second stage of a search: a cross-encoder that reads the query and each of the best candidates together
//! and says how well the candidate answers it. Implementations live in the `providers` crate (the in-process
//! local model); the ranking pipeline folds their scores in ([`fold`]), every engine alike.

use std::time::Instant;

use async_trait::async_trait;

/// Why a reranking call gave no scores. The search then answers in its first-stage order, with a warning.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RerankError {
    /// The time budget ran out before every candidate was scored.
    #[error("reranking took longer than its budget of {budget_ms} ms")]
    OverBudget { budget_ms: u64 },
    #[error("reranker {reranker}: {message}")]
    Failed { reranker: String, message: String },
}

/// Scores (query, passage) pairs.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// A name for logs and warnings (the model folder's name).
    fn id(&self) -> &str;

    /// One relevance logit per passage, in order (higher: more relevant; a cross-encoder's raw output). Stops
    /// with [`RerankError::OverBudget`] once `deadline` has passed, rather than finish late.
    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError>;
}

/// How a reranker's logit joins a candidate's first-stage score: the logit as a probability,
/// p = 1 / (1 + e^-logit), then `(1 - weight) x score + weight x p`.
///
/// Why a weighted sum and not the reranker's order alone: the first-stage score carries what a cross-encoder
/// does not see (recency among daily logs, importance annotations, the keyword leg's exact matches), and
/// exact-path and exact-identifier hits keep their place above all others (they are sorted by tier first).
/// Both parts are on 0..1, so `minScore` keeps its meaning.
pub fn fold(score: f64, logit: f32, weight: f64) -> f64 {
    let p = 1.0 / (1.0 + (-(logit as f64)).exp());
    let w = weight.clamp(0.0, 1.0);
    let folded = (1.0 - w) * score + w * p;
    if folded.is_finite() {
        folded
    } else {
        score
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_is_a_weighted_sum_of_the_score_and_the_logits_probability() {
        assert!((fold(0.4, 0.0, 0.5) - 0.45).abs() < 1e-12);
        assert_eq!(fold(0.4, 10.0, 0.0), 0.4);
        assert!((fold(0.4, 50.0, 1.0) - 1.0).abs() < 1e-9);
        assert!(fold(0.4, f32::NAN, 0.5) == 0.4, "a NaN logit leaves the score as it was");
        assert!(fold(0.2, 3.0, 0.5) > fold(0.3, -3.0, 0.5), "a clearly better logit wins over a small score lead");
    }
}
