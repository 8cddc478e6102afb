//! Deterministic embedding providers for tests: [`LexiconEmbedder`] for vector and hybrid conformance runs,
//! [`BagOfWordsEmbedder`] for engine and store tests that need real vectors but no ranking quality.
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
use memory_contract::embedding::{sanitize_and_normalize, EmbeddingError, EmbeddingProvider, EmbeddingPurpose};

/// Dimensions used by words outside the lexicon.
const HASH_DIMS: usize = 512;
/// Weight of a concept word relative to a plain word.
const CONCEPT_WEIGHT: f32 = 2.0;

/// An embedding provider for tests of meaning without a model: the lexicon's concept words (`lexicon.json5`) map
/// to shared dimensions, so synonyms are neighbours; other words are hashed. Counts its calls and texts.
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
        let fingerprint = format!("lexicon-{}", &memory_contract::sha256_hex(keys.join(";").as_bytes())[..12]);
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

    /// The vector of one text (unit length).
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
                    let h = memory_contract::sha256_hex(w.as_bytes());
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

/// Content words of a text, stop words dropped. The suite's own analysis, not an engine's (an engine under test
/// must not shape the vectors it is checked with): lowercase runs of letters and digits, an English plural made
/// singular, a run of CJK characters as its characters and their pairs.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()) {
        let lower = raw.to_lowercase();
        if STOP_WORDS.contains(&lower.as_str()) {
            continue;
        }
        if lower.chars().any(is_cjk) {
            let chars: Vec<char> = lower.chars().collect();
            out.extend(chars.iter().map(char::to_string));
            out.extend(chars.windows(2).map(|w| w.iter().collect::<String>()));
        } else {
            out.push(singular(&lower));
        }
    }
    out
}

/// Words too common to say what a text is about.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i",
    "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "they", "this", "to", "was", "we",
    "were", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your",
];

/// Characters of the scripts written without spaces (Han, kana, Hangul).
fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{ac00}'..='\u{d7af}' | '\u{f900}'..='\u{faff}')
}

/// An English plural made singular ("receipts" -> "receipt", "journeys" -> "journey", "taxes" -> "tax",
/// "countries" -> "country"); other words as they are.
fn singular(w: &str) -> String {
    if w.len() > 4 {
        if let Some(stem) = w.strip_suffix("ies") {
            return format!("{stem}y");
        }
        if let Some(stem) = w.strip_suffix("es").filter(|s| s.ends_with(['x', 's', 'z']) || s.ends_with("ch") || s.ends_with("sh")) {
            return stem.to_string();
        }
    }
    match w.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with(['s', 'u', 'i']) => stem.to_string(),
        _ => w.to_string(),
    }
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

/// Analysed words hashed into `dims` buckets: texts that share words have similar vectors, the same text
/// always the same vector. Counts its calls and texts, for tests of what gets (re-)embedded.
pub struct BagOfWordsEmbedder {
    dims: usize,
    calls: AtomicUsize,
    texts: AtomicUsize,
}

impl BagOfWordsEmbedder {
    /// One with `dims` buckets.
    pub fn new(dims: usize) -> BagOfWordsEmbedder {
        BagOfWordsEmbedder { dims, calls: AtomicUsize::new(0), texts: AtomicUsize::new(0) }
    }

    /// The vector of one text (unit length).
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dims];
        for t in words(text) {
            let h = memory_contract::sha256_hex(t.as_bytes());
            v[usize::from_str_radix(&h[..8], 16).unwrap_or(0) % self.dims] += 1.0;
        }
        // A text without words still gets a unit vector (a zero vector has no cosine).
        if v.iter().all(|x| *x == 0.0) {
            v[0] = 1.0;
        }
        sanitize_and_normalize(&mut v);
        v
    }

    /// Embedding calls so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Texts embedded so far.
    pub fn texts(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

/// 64 dimensions.
impl Default for BagOfWordsEmbedder {
    fn default() -> Self {
        BagOfWordsEmbedder::new(64)
    }
}

#[async_trait]
impl EmbeddingProvider for BagOfWordsEmbedder {
    fn id(&self) -> &str {
        "test"
    }
    fn model(&self) -> &str {
        "bag-of-words"
    }
    fn dimensions(&self) -> Option<usize> {
        Some(self.dims)
    }
    fn fingerprint(&self) -> String {
        format!("bag-of-words-{}", self.dims)
    }
    async fn embed(&self, texts: &[String], _purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

/// A test's own model without the trait's boilerplate: one function gives each text's vector (or a whole call's
/// answer, for a provider that fails), under provider `test`, a model name and width, and the fingerprint
/// `<model>-<dims>` unless [`FnEmbedder::with_identity`] says otherwise. Counts its calls.
pub struct FnEmbedder {
    id: String,
    model: String,
    dims: usize,
    fingerprint: String,
    embed: Box<BatchFn>,
    calls: AtomicUsize,
}

/// What one call of [`FnEmbedder`] answers for its texts.
type BatchFn = dyn Fn(&[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> + Send + Sync;

impl FnEmbedder {
    /// Each text's vector is `vector(text)`.
    pub fn new(model: &str, dims: usize, vector: impl Fn(&str) -> Vec<f32> + Send + Sync + 'static) -> FnEmbedder {
        FnEmbedder::batches(model, dims, move |texts| Ok(texts.iter().map(|t| vector(t)).collect()))
    }

    /// Each call answers `embed(texts)`: a provider that fails, or one that looks at a call's texts together.
    pub fn batches(
        model: &str,
        dims: usize,
        embed: impl Fn(&[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> + Send + Sync + 'static,
    ) -> FnEmbedder {
        FnEmbedder {
            id: "test".into(),
            model: model.into(),
            dims,
            fingerprint: format!("{model}-{dims}"),
            embed: Box::new(embed),
            calls: AtomicUsize::new(0),
        }
    }

    /// The same under another provider id and fingerprint (what an index records of its model).
    pub fn with_identity(self, id: &str, fingerprint: impl Into<String>) -> FnEmbedder {
        FnEmbedder { id: id.into(), fingerprint: fingerprint.into(), ..self }
    }

    /// Embedding calls so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl EmbeddingProvider for FnEmbedder {
    fn id(&self) -> &str {
        &self.id
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn dimensions(&self) -> Option<usize> {
        Some(self.dims)
    }
    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }
    async fn embed(&self, texts: &[String], _purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.embed)(texts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_contract::embedding::cosine;

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
    fn bag_of_words_vectors_are_stable_unit_vectors_closer_when_words_are_shared() {
        let e = BagOfWordsEmbedder::new(64);
        let (a, b, c) = (e.embed_one("gateway deploy canary"), e.embed_one("gateway deploy"), e.embed_one("groceries coffee"));
        assert_eq!(a, e.embed_one("gateway deploy canary"));
        assert!(cosine(&a, &b) > cosine(&a, &c) + 0.3, "{} vs {}", cosine(&a, &b), cosine(&a, &c));
        assert!((cosine(&e.embed_one(""), &e.embed_one("")) - 1.0).abs() < 1e-5, "an empty text still has a unit vector");
    }

    #[test]
    fn plurals_meet_their_singular_and_cjk_runs_become_characters_and_pairs() {
        assert_eq!(words("Receipts, journeys, taxes and countries"), ["receipt", "journey", "tax", "country"]);
        assert_eq!(words("the bus is focus"), ["bus", "focus"]);
        assert_eq!(words("猫过敏"), ["猫", "过", "敏", "猫过", "过敏"]);
    }

    #[test]
    fn standard_lexicon_loads() {
        let e = LexiconEmbedder::standard();
        assert!(e.dimensions().unwrap() > HASH_DIMS);
    }
}
