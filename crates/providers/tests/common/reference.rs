//! What the tests that check a local model against a reference share: the model files in the cache, the 308 texts
//! of `data/gguf_reference_texts.txt`, llama.cpp's vectors as committed (int8 with a scale per text), and one
//! comparison of the provider's vectors with a reference's (the even texts as queries, the odd ones as documents,
//! as `scripts/lib/gguf_reference.py` and `scripts/lib/st_reference.py` embed them).

use std::path::PathBuf;

use memory_core::embedding::cosine;
use providers::{EmbeddingProvider, EmbeddingPurpose, LocalProvider};

const TEXTS: &str = include_str!("../data/gguf_reference_texts.txt");

/// The models cache: `MEMORY_RS_CACHE`, else `~/.cache/memory-rs`, and `models` under it.
pub fn models_dir() -> PathBuf {
    std::env::var_os("MEMORY_RS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs"))
        .join("models")
}

/// `name` under the models cache, or what `var` says.
pub fn cached(var: &str, name: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| models_dir().join(name))
}

/// The model file `var` or the cache names, or `None` (recorded as a missing prerequisite) when the setup has not
/// made it.
pub fn model(var: &str, name: &str, test: &str) -> Option<PathBuf> {
    let path = cached(var, name);
    if path.is_file() {
        Some(path)
    } else {
        conformance::testing::missing_prerequisite(test, &format!("{name} not found at {} (scripts/setup.sh makes it)", path.display()));
        None
    }
}

pub fn texts() -> Vec<String> {
    TEXTS.split('\n').filter(|l| !l.trim().is_empty()).map(String::from).collect()
}

/// llama.cpp's vectors as committed: per text an f32 scale and one int8 per dimension.
pub fn int8_vectors(bytes: &[u8], dims: usize) -> Vec<Vec<f32>> {
    bytes
        .chunks(4 + dims)
        .map(|c| {
            let scale = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            c[4..].iter().map(|b| *b as i8 as f32 * scale).collect()
        })
        .collect()
}

/// How the provider's vectors of `texts` agree with `want`, one cosine per text.
pub struct Agreement {
    pub cosines: Vec<f64>,
    pub mean: f64,
    pub lowest: f64,
    /// The text of the lowest cosine.
    pub worst: usize,
}

/// The provider's vectors of `texts` (even ones as queries, odd ones as documents) against `want`.
pub async fn agreement(p: &LocalProvider, texts: &[String], want: &[Vec<f32>]) -> Agreement {
    assert_eq!(want.len(), texts.len(), "one reference vector per text");
    let queries: Vec<String> = texts.iter().step_by(2).cloned().collect();
    let documents: Vec<String> = texts.iter().skip(1).step_by(2).cloned().collect();
    let q = p.embed(&queries, EmbeddingPurpose::Query).await.unwrap();
    let d = p.embed(&documents, EmbeddingPurpose::Document).await.unwrap();
    let cosines: Vec<f64> = want.iter().enumerate().map(|(i, want)| cosine(if i % 2 == 0 { &q[i / 2] } else { &d[i / 2] }, want)).collect();
    let (lowest, worst) = cosines.iter().enumerate().map(|(i, c)| (*c, i)).fold((f64::INFINITY, 0), |a, b| if b.0 < a.0 { b } else { a });
    let mean = cosines.iter().sum::<f64>() / cosines.len().max(1) as f64;
    Agreement { cosines, mean, lowest, worst }
}
