//! [`LexiconEmbedder`]: a deterministic embedding provider for vector and hybrid conformance runs.
//!
//! Real models are large, slow to load and not bit-for-bit stable across versions, so CI cannot pin rankings
//! on them. This embedder gives words of one concept group (`coffee`, `espresso`, `latte`...) the same
//! dimension, and every other word a hashed dimension, so a paraphrase that shares no keyword with a note is
//! still its nearest neighbour, exactly as with a real model, and always in the same way. The concept groups
//! are data (`fixtures/lexicon.json5`); the vector cases are written so that a real sentence-embedding model
//! passes them too.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use memory_core::analysis::is_stop_word;
use memory_core::embedding::{sanitize_and_normalize, EmbeddingError, EmbeddingProvider, EmbeddingPurpose};

/// Dimensions used by words outside the lexicon.
const HASH_DIMS: usize = 512;
/// Weight of a concept word relative to a plain word.
const CONCEPT_WEIGHT: f32 = 2.0;

pub struct LexiconEmbedder {
    /// Analysed word -> concept dimension.
    concepts: HashMap<String, usize>,
    dims: usize,
    fingerprint: String,
    calls: AtomicUsize,
    texts: AtomicUsize,
}

impl LexiconEmbedder {
    /// An embedder over concept groups (each a list of words that mean about the same).
    pub fn new(groups: &[Vec<String>]) -> LexiconEmbedder {
        let mut concepts = HashMap::new();
        for (i, g) in groups.iter().enumerate() {
            for w in g {
                for t in words(w) {
                    concepts.insert(t, i);
                }
            }
        }
        let mut keys: Vec<String> = groups.iter().map(|g| g.join(",")).collect();
        keys.sort();
        let fingerprint = format!("lexicon-{}", &memory_core::sha256_hex(keys.join(";").as_bytes())[..12]);
        LexiconEmbedder { concepts, dims: groups.len() + HASH_DIMS, fingerprint, calls: AtomicUsize::new(0), texts: AtomicUsize::new(0) }
    }

    /// Load concept groups from a JSON5 file: `{groups: [["coffee", "espresso"], ...]}`.
    pub fn from_file(path: &Path) -> Result<LexiconEmbedder, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            groups: Vec<Vec<String>>,
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let f: File = json5::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(LexiconEmbedder::new(&f.groups))
    }

    /// The lexicon the shipped vector cases are written for.
    pub fn standard() -> LexiconEmbedder {
        LexiconEmbedder::from_file(&crate::fixtures_dir().join("lexicon.json5")).expect("fixtures/lexicon.json5 is valid")
    }

    /// Embedding calls so far, and texts embedded.
    pub fn calls(&self) -> (usize, usize) {
        (self.calls.load(Ordering::SeqCst), self.texts.load(Ordering::SeqCst))
    }

    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        // Term counts per dimension, then 1 + ln(count): a word repeated fifty times does not drown the rest.
        let mut counts = vec![0f32; self.dims];
        let mut weights = vec![1f32; self.dims];
        for w in words(text) {
            match self.concepts.get(&w) {
                Some(&i) => {
                    counts[i] += 1.0;
                    weights[i] = CONCEPT_WEIGHT;
                }
                None => {
                    let h = memory_core::sha256_hex(w.as_bytes());
                    let i = usize::from_str_radix(&h[..8], 16).unwrap_or(0) % HASH_DIMS;
                    counts[self.dims - HASH_DIMS + i] += 1.0;
                }
            }
        }
        let mut v: Vec<f32> = counts.iter().zip(&weights).map(|(c, w)| if *c > 0.0 { w * (1.0 + c.ln()) } else { 0.0 }).collect();
        sanitize_and_normalize(&mut v);
        v
    }
}

/// Content words of a text, analysed like keyword search does (stemmed; CJK as bigrams), stop words dropped.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()) {
        let lower = raw.to_lowercase();
        if is_stop_word(&lower) {
            continue;
        }
        out.extend(memory_core::analysis::document_terms(&lower));
    }
    out
}

#[async_trait]
impl EmbeddingProvider for LexiconEmbedder {
    fn id(&self) -> &str {
        "conformance"
    }
    fn model(&self) -> &str {
        "lexicon"
    }
    fn dimensions(&self) -> Option<usize> {
        Some(self.dims)
    }
    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }
    async fn embed(&self, texts: &[String], _purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::embedding::cosine;

    #[test]
    fn concept_words_are_neighbours_without_sharing_a_word() {
        let e = LexiconEmbedder::new(&[vec!["coffee".into(), "espresso".into(), "latte".into(), "caffeinated".into()]]);
        let q = e.embed_one("caffeinated drinks");
        let hit = e.embed_one("Bought a new espresso machine; the latte art is improving.");
        let miss = e.embed_one("The gateway runs on the Mac Studio.");
        assert!(cosine(&q, &hit) > cosine(&q, &miss) + 0.2, "{} vs {}", cosine(&q, &hit), cosine(&q, &miss));
        assert!((cosine(&hit, &hit) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn standard_lexicon_loads() {
        let e = LexiconEmbedder::standard();
        assert!(e.dimensions().unwrap() > HASH_DIMS);
    }
}
