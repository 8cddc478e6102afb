//! The second stage of a search: a model that reads the query and each of the best candidates and says how well
//! the candidate answers it (a cross-encoder reads them together; a late-interaction model encodes them apart and
//! compares their token vectors). Implementations live in the `providers` crate (in-process local models); the
//! ranking pipeline folds their scores in ([`fold`]), every engine alike.
#![deny(missing_docs)]

use std::time::{Duration, Instant};

use async_trait::async_trait;
use tracing::{debug, warn};

use crate::config::RerankConfig;

/// Why a reranking call gave no scores. The search then answers in its first-stage order, with a warning.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RerankError {
    /// The time budget ran out before every candidate was scored.
    #[error("reranking took longer than its budget of {budget_ms} ms")]
    OverBudget {
        /// The budget (`memory.search.query.rerank.budgetMs`).
        budget_ms: u64,
    },
    /// The model failed (it cannot be loaded or run).
    #[error("reranker {reranker}: {message}")]
    Failed {
        /// The reranker's id.
        reranker: String,
        /// What happened.
        message: String,
    },
}

/// Scores (query, passage) pairs.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// A name for logs and warnings (the model folder's name).
    fn id(&self) -> &str;

    /// One relevance score per passage, in order (higher: more relevant; a cross-encoder's raw logit, a
    /// late-interaction model's MaxSim). Stops with [`RerankError::OverBudget`] once `deadline` has passed,
    /// rather than finish late.
    async fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, RerankError>;

    /// Why this reranker can score nothing at all ([`Unavailable`]), for `status`; `None` for a working one.
    fn unavailable(&self) -> Option<&str> {
        None
    }
}

/// A reranker whose model could not be opened (its folder missing, moved or damaged). Every call fails with why,
/// so a search answers in its first-stage order and says so in `warnings`, as it does when the weights turn out
/// unreadable at first use or the budget runs out: a second stage is an improvement, and losing it must not cost
/// the agent its memory (a server that refused to start would).
#[derive(Debug, Clone)]
pub struct Unavailable {
    id: String,
    why: String,
}

impl Unavailable {
    /// A stand-in for the reranker `id`, which cannot be used because of `why`.
    pub fn new(id: impl Into<String>, why: impl Into<String>) -> Unavailable {
        Unavailable { id: id.into(), why: why.into() }
    }
}

#[async_trait]
impl Reranker for Unavailable {
    fn id(&self) -> &str {
        &self.id
    }

    async fn score(&self, _query: &str, _passages: &[String], _deadline: Instant) -> Result<Vec<f32>, RerankError> {
        Err(RerankError::Failed { reranker: self.id.clone(), message: format!("cannot be used: {}", self.why) })
    }

    fn unavailable(&self) -> Option<&str> {
        Some(&self.why)
    }
}

/// How a reranker's logits join the first-stage scores of the candidates it read: each side scaled to 0..1 over
/// those candidates (lowest 0, highest 1; a side whose values are all equal is 0 throughout), then
/// `(1 - weight) x first stage + weight x reranker`. The caller orders the candidates by that share and gives each
/// a score in the first stage's own range, `lowest + share x (highest - lowest)`.
///
/// Why scaled over the candidates and not the logit as a probability beside the raw score: the first stage's
/// scores of ten candidates lie close together (0.80 to 0.86 is common) while a cross-encoder's probabilities
/// spread from 0 to 1, so the probability alone would decide the order and the first stage's best candidate would
/// be lost whenever the reranker misreads it; scaled, each side has the same say.
/// Why a weighted sum and not the reranker's order alone: the first-stage score carries what a cross-encoder does
/// not see (recency among daily logs, importance annotations, the keyword leg's exact matches); exact-path and
/// exact-identifier hits keep their place above all others (they are sorted by tier first). Scores stay within
/// the first stage's range, so `minScore` keeps its meaning and the candidates stay above those not reranked.
/// A NaN logit counts as the lowest.
pub fn fold(scores: &[f64], logits: &[f32], weight: f64) -> Vec<f64> {
    let w = weight.clamp(0.0, 1.0);
    let first = unit_range(scores.iter().copied());
    let second = unit_range(logits.iter().map(|&l| l as f64));
    first.iter().zip(&second).map(|(a, b)| (1.0 - w) * a + w * b).collect()
}

/// The candidates in their folded order, each with its folded score: indexes into `scores` by [`fold`]'s share,
/// highest first (ties keep the first stage's order), and the share as a score in the first stage's range,
/// `lowest + share x (highest - lowest)`, so that `minScore` keeps its meaning and candidates not reranked stay
/// below. An engine with rules the reranker must not overturn (exact-path tiers) sorts this order by them, stably.
pub fn folded_order(scores: &[f64], logits: &[f32], weight: f64) -> Vec<(usize, f64)> {
    let share = fold(scores, logits, weight);
    let finite = || scores.iter().copied().filter(|v| v.is_finite());
    let lo = finite().fold(f64::INFINITY, f64::min);
    let hi = finite().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 0.0 };
    let base = if lo.is_finite() { lo } else { 0.0 };
    let mut order: Vec<(usize, f64)> = share.into_iter().enumerate().collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    order.into_iter().map(|(i, s)| (i, base + s * span)).collect()
}

/// `items`, one per logit, put in their folded order ([`folded_order`]), each given its folded score by
/// `set_score`: what every engine does with a reranker's logits (an engine with rules the reranker must not
/// overturn then sorts by them, stably).
pub fn reorder<T: Clone>(items: &mut [T], logits: &[f32], weight: f64, score: impl Fn(&T) -> f64, set_score: impl Fn(&mut T, f64)) {
    let scores: Vec<f64> = items.iter().map(&score).collect();
    let reordered: Vec<T> = folded_order(&scores, logits, weight)
        .into_iter()
        .map(|(i, folded)| {
            let mut item = items[i].clone();
            set_score(&mut item, folded);
            item
        })
        .collect();
    for (slot, item) in items.iter_mut().zip(reordered) {
        *slot = item;
    }
}

/// The second stage of one search, the same for every engine: `reranker` reads the query with each passage (the
/// lines the best candidates' snippets would show) within `cfg.budget_ms`. The logits, one per passage, or `None`
/// when there are none to use: over the budget, failed, or a wrong count; the first-stage order then answers and
/// `warnings` says why.
pub async fn second_stage(
    reranker: &dyn Reranker,
    cfg: &RerankConfig,
    query: &str,
    passages: &[String],
    warnings: &mut Vec<String>,
) -> Option<Vec<f32>> {
    let n = passages.len();
    if n < 2 {
        return None;
    }
    let started = Instant::now();
    let deadline = started + Duration::from_millis(cfg.budget_ms);
    match reranker.score(query, passages, deadline).await {
        Ok(logits) if logits.len() == n => {
            debug!(candidates = n, ms = started.elapsed().as_millis() as u64, "reranked");
            Some(logits)
        }
        Ok(logits) => {
            warnings.push(format!("reranker {} returned {} scores for {n} candidates; results are not reranked", reranker.id(), logits.len()));
            None
        }
        Err(e) => {
            warn!(error = %e, "reranking skipped");
            warnings.push(format!("{e}; results are not reranked"));
            None
        }
    }
}

/// Values scaled to 0..1 between their lowest and highest (non-finite values: 0); all equal: all 0.
fn unit_range(values: impl Iterator<Item = f64> + Clone) -> Vec<f64> {
    let finite = values.clone().filter(|v| v.is_finite());
    let lo = finite.clone().fold(f64::INFINITY, f64::min);
    let hi = finite.fold(f64::NEG_INFINITY, f64::max);
    values.map(|v| if v.is_finite() && hi > lo { (v - lo) / (hi - lo) } else { 0.0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn each_side_is_scaled_over_the_candidates_before_the_weighted_sum() {
        // First stage close together, reranker spread wide: scaled, each has the same say.
        let f = fold(&[0.86, 0.84, 0.80], &[-2.0, 6.0, 2.0], 0.5);
        assert_eq!(f.len(), 3);
        assert!((f[0] - 0.5).abs() < 1e-12, "first-stage best, reranker worst: {f:?}");
        assert!((f[1] - (0.5 * (0.04 / 0.06) + 0.5)).abs() < 1e-12, "{f:?}");
        assert!((f[2] - 0.25).abs() < 1e-12, "{f:?}");
        // Weight 0 is the first stage's order, weight 1 the reranker's.
        assert!(close(&fold(&[0.9, 0.5, 0.7], &[3.0, 9.0, 1.0], 0.0), &[1.0, 0.0, 0.5]));
        assert!(close(&fold(&[0.9, 0.5, 0.7], &[3.0, 9.0, 1.0], 1.0), &[0.25, 1.0, 0.0]));
    }

    #[test]
    fn a_side_that_cannot_tell_the_candidates_apart_leaves_the_order_to_the_other() {
        assert!(close(&fold(&[0.7, 0.7, 0.7], &[1.0, 3.0, 2.0], 0.5), &[0.0, 0.5, 0.25]));
        assert!(close(&fold(&[0.9, 0.5, 0.7], &[2.0, 2.0, 2.0], 0.5), &[0.5, 0.0, 0.25]));
        // A NaN logit counts as the lowest; the others still spread.
        let f = fold(&[0.5, 0.5, 0.5], &[f32::NAN, 1.0, 3.0], 1.0);
        assert!(close(&f, &[0.0, 0.0, 1.0]), "{f:?}");
    }

    /// Answers with a fixed result, whatever it is asked.
    struct Fixed(Result<Vec<f32>, RerankError>);

    #[async_trait]
    impl Reranker for Fixed {
        fn id(&self) -> &str {
            "fixed"
        }

        async fn score(&self, _query: &str, _passages: &[String], _deadline: Instant) -> Result<Vec<f32>, RerankError> {
            self.0.clone()
        }
    }

    #[tokio::test]
    async fn the_second_stage_answers_logits_or_says_why_there_are_none() {
        let cfg = RerankConfig { enabled: true, ..Default::default() };
        let passages: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mut warnings = Vec::new();
        let got = second_stage(&Fixed(Ok(vec![1.0, 2.0, 3.0])), &cfg, "q", &passages, &mut warnings).await;
        assert_eq!(got, Some(vec![1.0, 2.0, 3.0]));
        assert!(warnings.is_empty());
        // A wrong count is not used: the first stage's order answers, and the warning says why.
        assert_eq!(second_stage(&Fixed(Ok(vec![1.0])), &cfg, "q", &passages, &mut warnings).await, None);
        assert!(warnings[0].contains("returned 1 scores for 3 candidates"), "{warnings:?}");
        let late = Fixed(Err(RerankError::OverBudget { budget_ms: 5 }));
        assert_eq!(second_stage(&late, &cfg, "q", &passages, &mut warnings).await, None);
        assert!(warnings[1].contains("budget of 5 ms") && warnings[1].contains("not reranked"), "{warnings:?}");
        // One candidate has no order to change: the reranker is not asked, nothing is said.
        assert_eq!(second_stage(&late, &cfg, "q", &passages[..1], &mut warnings).await, None);
        assert_eq!(warnings.len(), 2);
        // A reranker whose model could not be opened: every search says why, and answers.
        let gone = Unavailable::new("ms-marco", "model folder /x not found");
        assert_eq!(gone.unavailable(), Some("model folder /x not found"));
        assert_eq!(second_stage(&gone, &cfg, "q", &passages, &mut warnings).await, None);
        assert!(warnings[2].contains("ms-marco") && warnings[2].contains("/x not found") && warnings[2].contains("not reranked"), "{warnings:?}");
    }

    #[test]
    fn the_folded_order_keeps_the_first_stages_range_and_its_ties() {
        // The reranker prefers the second candidate; the scores stay within 0.80..0.86.
        let order = folded_order(&[0.86, 0.84, 0.80], &[-2.0, 6.0, 2.0], 0.5);
        let ids: Vec<usize> = order.iter().map(|(i, _)| *i).collect();
        assert_eq!(ids, [1, 0, 2]);
        assert!(order.iter().all(|(_, s)| (0.80..=0.86).contains(s)), "{order:?}");
        assert!(order.windows(2).all(|w| w[0].1 >= w[1].1), "{order:?}");
        // Equal shares keep the first stage's order; equal first-stage scores keep that score.
        let order = folded_order(&[0.5, 0.5, 0.5], &[1.0, 1.0, 1.0], 0.5);
        assert_eq!(order, [(0, 0.5), (1, 0.5), (2, 0.5)]);
        assert!(folded_order(&[], &[], 0.5).is_empty());
    }
}
