//! A seeded, deterministic stand-in for an embedding model, for latency figures at corpus sizes a local model
//! cannot embed in a benchmark's time (this machine's CPU model embeds ~7 chunks/s). Each word is hashed to a
//! fixed pseudo-random direction (feature hashing); a text's vector is the normalised sum of its words'. The
//! vectors have the real model's width, so storage and vector search cost the same; their *quality* is not a
//! model's, which is why quality figures always use the real local model.

use conformance::FnEmbedder;
use memory_core::embedding::sanitize_and_normalize;
use sha2::{Digest, Sha256};

/// The stand-in of `dims` dimensions, its words' directions drawn from `seed` (both in its fingerprint).
pub fn seeded_embedder(dims: usize, seed: u64) -> FnEmbedder {
    FnEmbedder::new("feature-hashing", dims, move |text| vector(dims, seed, text))
        .with_identity("bench-seeded", format!("bench-seeded:{dims}:{seed}"))
}

fn vector(dims: usize, seed: u64, text: &str) -> Vec<f32> {
    let mut v = vec![0f32; dims];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let digest = Sha256::new().chain_update(seed.to_le_bytes()).chain_update(word.to_lowercase()).finalize();
        // A xorshift stream seeded by the word's digest spreads it over every dimension.
        let mut state = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes")) | 1;
        for x in &mut v {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *x += ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
        }
    }
    sanitize_and_normalize(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::embedding::{EmbeddingProvider, EmbeddingPurpose};

    #[tokio::test]
    async fn same_text_same_vector_and_shared_words_are_closer() {
        let e = seeded_embedder(64, 7);
        let texts = ["gateway deploy canary".to_string(), "gateway deploy".to_string(), "groceries coffee".to_string()];
        let v = e.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
        assert_eq!(v[0], e.embed(&texts[..1], EmbeddingPurpose::Query).await.unwrap()[0]);
        let near = memory_core::embedding::cosine(&v[0], &v[1]);
        let far = memory_core::embedding::cosine(&v[0], &v[2]);
        assert!(near > far + 0.3, "near {near} far {far}");
        assert!((v[0].iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
    }
}
