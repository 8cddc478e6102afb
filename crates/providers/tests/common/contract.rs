//! The provider contract: what every embedding provider promises, whatever it is (the local model, each remote
//! API, the fallback). Each provider's tests call [`check`] on a working provider; it panics naming the broken
//! promise.
//!
//! - an empty input list answers an empty list;
//! - one vector per input, in input order (each text embedded alone gives its vector in a batch);
//! - every vector finite and unit-length, of the width `dimensions()` reports;
//! - queries and documents both embed, and differ exactly when the provider tells them apart.
//!
//! The texts start `t<i>` so that the loopback servers of the wire tests can answer them.

use memory_core::embedding::{cosine, EmbeddingProvider, EmbeddingPurpose};

/// What the provider under test is expected to do beyond the common promise.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Queries and documents are embedded differently (input types, prompts).
    pub purposes_differ: bool,
}

pub const TEXTS: [&str; 3] =
    ["t0 The gateway runs on the Mac Studio.", "t1 Quarterly revenue grew by four percent.", "t2 A kitten is resting on a rug."];

/// Cosine at or above which two vectors are the same vector (float noise of batching aside).
const SAME: f64 = 0.9999;

pub async fn check(p: &dyn EmbeddingProvider, expect: Expect) {
    let name = format!("{} ({})", p.id(), p.model());
    let texts: Vec<String> = TEXTS.iter().map(std::string::ToString::to_string).collect();

    for purpose in [EmbeddingPurpose::Document, EmbeddingPurpose::Query] {
        let none = p.embed(&[], purpose).await.unwrap_or_else(|e| panic!("{name}: empty {purpose:?} input failed: {e}"));
        assert!(none.is_empty(), "{name}: {} vectors for no input", none.len());
    }

    let batch = p.embed(&texts, EmbeddingPurpose::Document).await.unwrap_or_else(|e| panic!("{name}: documents failed: {e}"));
    assert_eq!(batch.len(), texts.len(), "{name}: one vector per input");
    let dims = p.dimensions().unwrap_or_else(|| panic!("{name}: no width reported after an answer"));
    for (i, v) in batch.iter().enumerate() {
        assert_unit(&name, i, v, dims);
    }
    for (i, text) in texts.iter().enumerate() {
        let alone = p.embed(std::slice::from_ref(text), EmbeddingPurpose::Document).await.unwrap();
        assert_eq!(alone.len(), 1, "{name}: one vector for one input");
        let c = cosine(&alone[0], &batch[i]);
        assert!(c >= SAME, "{name}: text {i} alone and in a batch differ (cosine {c}): inputs out of order?");
    }
    // Order is only observable if the texts' vectors differ.
    let c = cosine(&batch[0], &batch[1]);
    assert!(c < SAME, "{name}: different texts got the same vector (cosine {c})");

    let query = p.embed(&texts[..1], EmbeddingPurpose::Query).await.unwrap_or_else(|e| panic!("{name}: a query failed: {e}"));
    assert_eq!(query.len(), 1, "{name}: one query vector");
    assert_unit(&name, 0, &query[0], dims);
    let one = p.embed_query(&texts[0]).await.unwrap_or_else(|e| panic!("{name}: embed_query failed: {e}"));
    assert!(cosine(&one, &query[0]) >= SAME, "{name}: embed_query differs from embed(.., Query)");
    let c = cosine(&query[0], &batch[0]);
    if expect.purposes_differ {
        assert!(c < SAME, "{name}: a query and a document of the same text got the same vector (cosine {c})");
    } else {
        assert!(c >= SAME, "{name}: a query and a document differ (cosine {c}) though the provider does not tell them apart");
    }
    assert_eq!(p.dimensions(), Some(dims), "{name}: the reported width changed");
}

fn assert_unit(name: &str, i: usize, v: &[f32], dims: usize) {
    assert_eq!(v.len(), dims, "{name}: vector {i} is {} wide, the provider reports {dims}", v.len());
    assert!(v.iter().all(|x| x.is_finite()), "{name}: vector {i} has a non-finite value");
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{name}: vector {i} has length {norm}, not 1");
}
