//! Splitting texts into requests by an estimated token budget.

use std::ops::Range;

/// Limits of one provider's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Estimated tokens per request (a token is estimated as 4 characters, as the chunker counts them).
    pub max_tokens: usize,
    /// Texts per request (the API's own cap).
    pub max_items: usize,
    /// Requests in flight at once.
    pub concurrency: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits { max_tokens: 8_000, max_items: 256, concurrency: 4 }
    }
}

/// Estimated tokens of a text: characters / 4, rounded up, at least 1.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4).max(1)
}

/// Consecutive ranges of `texts`, each within the limits; a single text over the token budget gets a request
/// of its own (the server truncates or rejects it, which is then reported). Order is kept.
pub fn plan_batches(texts: &[String], limits: &BatchLimits) -> Vec<Range<usize>> {
    let max_tokens = limits.max_tokens.max(1);
    let max_items = limits.max_items.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut tokens = 0;
    for (i, t) in texts.iter().enumerate() {
        let n = estimate_tokens(t);
        let count = i - start;
        if count > 0 && (tokens + n > max_tokens || count >= max_items) {
            out.push(start..i);
            start = i;
            tokens = 0;
        }
        tokens += n;
    }
    if start < texts.len() {
        out.push(start..texts.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lens: &[usize]) -> Vec<String> {
        lens.iter().map(|n| "x".repeat(*n)).collect()
    }

    #[test]
    fn estimates_chars_over_four() {
        assert_eq!(estimate_tokens(""), 1);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("日本語の"), 1);
    }

    #[test]
    fn splits_by_token_budget_and_item_cap() {
        let limits = BatchLimits { max_tokens: 1000, max_items: 3, concurrency: 1 };
        // 400 tokens each: two fit in 1000, the third starts a new batch.
        assert_eq!(plan_batches(&texts(&[1600, 1600, 1600]), &limits), vec![0..2, 2..3]);
        // Small texts: the item cap splits.
        assert_eq!(plan_batches(&texts(&[4; 7]), &limits), vec![0..3, 3..6, 6..7]);
        // An oversized text goes alone.
        assert_eq!(plan_batches(&texts(&[4, 8000, 4]), &limits), vec![0..1, 1..2, 2..3]);
        assert!(plan_batches(&[], &limits).is_empty());
    }

    #[test]
    fn default_budget_is_about_eight_thousand_tokens() {
        let limits = BatchLimits::default();
        // 1600-char chunks are 400 tokens: 20 per request.
        let plan = plan_batches(&texts(&[1600; 45]), &limits);
        assert_eq!(plan, vec![0..20, 20..40, 40..45]);
    }
}
