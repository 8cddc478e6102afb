//! What the tests that check the runtime against a reference share: the model files in the cache, the 308 texts
//! of `data/gguf_reference_texts.txt`, llama.cpp's vectors as committed (int8 with a scale per text), one
//! comparison of a model's vectors with a reference's (the even texts as queries, the odd ones as documents, as
//! `scripts/lib/gguf_reference.py` and `scripts/lib/st_reference.py` embed them), and a model file or folder
//! opened as the `local` provider opens it (prompts by purpose, weights loaded on first use).

#![allow(dead_code, reason = "each test file uses its own part of this module")]

pub mod converted;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use memory_core::embedding::cosine;
use model_runtime::{FolderEncoder, FolderModelInfo, GgufEncoder, GgufModelInfo, ModelError, ModelOptions};

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

/// Whether every prerequisite must be there (`MEMORY_TEST_REQUIRE_ALL`, set by `scripts/test.sh`, or `CI`), as
/// `conformance::testing::requires_all` says for the crates that may depend on it.
fn requires_all() -> bool {
    let set = |v: &str| std::env::var(v).is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    set("MEMORY_TEST_REQUIRE_ALL") || set("CI")
}

/// `test` cannot run here: said on stderr and recorded in the skip report `scripts/test.sh` prints
/// (`MEMORY_TEST_SKIP_REPORT`), as `conformance::testing::skipped` does. The caller returns after it.
pub fn skipped(test: &str, why: &str) {
    eprintln!("SKIP {test}: {why}");
    if let Some(report) = std::env::var_os("MEMORY_TEST_SKIP_REPORT").filter(|v| !v.is_empty()) {
        use std::io::Write;
        let line = format!("{test}: {}\n", why.replace('\n', " "));
        if let Err(e) = std::fs::OpenOptions::new().create(true).append(true).open(&report).and_then(|mut f| f.write_all(line.as_bytes())) {
            eprintln!("could not record the skip in {}: {e}", Path::new(&report).display());
        }
    }
}

/// The model file `var` or the cache names, or `None` when the setup has not made it: a failure under
/// `scripts/test.sh` or CI, a recorded skip when run by hand.
pub fn model(var: &str, name: &str, test: &str) -> Option<PathBuf> {
    let path = cached(var, name);
    if path.is_file() {
        return Some(path);
    }
    let why = format!("{name} not found at {} (scripts/setup.sh makes it)", path.display());
    if requires_all() {
        panic!("{test} cannot run: {why} (scripts/test.sh installs it with scripts/setup.sh)");
    }
    skipped(test, &why);
    None
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

/// What a text is embedded as: the model's query or document prompt goes in front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Query,
    Document,
}

/// A GGUF file as the `local` provider runs it: its info read at open, the weights loaded on first use.
pub struct Gguf {
    pub info: GgufModelInfo,
    loaded: OnceLock<GgufEncoder>,
}

impl Gguf {
    pub fn open(path: &Path) -> Result<Self, ModelError> {
        Self::open_with(path, &ModelOptions::default())
    }

    pub fn open_with(path: &Path, options: &ModelOptions) -> Result<Self, ModelError> {
        let (info, _) = GgufModelInfo::inspect(path, options)?;
        Ok(Gguf { info, loaded: OnceLock::new() })
    }

    fn encoder(&self) -> &GgufEncoder {
        self.loaded.get_or_init(|| GgufEncoder::load(&self.info).unwrap())
    }

    /// Token ids of `text` as the model reads it (no prompt added).
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        self.encoder().tokens(text)
    }

    pub fn embed(&self, texts: &[String], purpose: Purpose) -> Vec<Vec<f32>> {
        let prompt = match purpose {
            Purpose::Query => &self.info.prompts.query,
            Purpose::Document => &self.info.prompts.document,
        };
        let prompted: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
        let vectors = self.encoder().embed(&self.info, &prompted).unwrap();
        assert!(vectors.len() == texts.len() && vectors.iter().all(|v| v.len() == self.info.dimensions), "a malformed batch");
        vectors
    }

    pub fn embed_query(&self, text: &str) -> Vec<f32> {
        self.embed(&[text.to_string()], Purpose::Query).remove(0)
    }
}

/// A model folder as the `local` provider runs it: its info read at open, the weights loaded on first use.
pub struct Folder {
    pub info: FolderModelInfo,
    loaded: OnceLock<FolderEncoder>,
}

impl Folder {
    pub fn open(dir: &Path) -> Result<Self, ModelError> {
        Ok(Folder { info: FolderModelInfo::inspect(dir)?, loaded: OnceLock::new() })
    }

    pub fn embed(&self, texts: &[String], purpose: Purpose) -> Vec<Vec<f32>> {
        let prompt = match purpose {
            Purpose::Query => &self.info.prompts.query,
            Purpose::Document => &self.info.prompts.document,
        };
        let prompted: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
        let encoder = self.loaded.get_or_init(|| FolderEncoder::load(&self.info).unwrap());
        encoder.embed(&self.info, &prompted).unwrap()
    }
}

/// How a model's vectors of `texts` agree with `want`, one cosine per text.
pub struct Agreement {
    pub cosines: Vec<f64>,
    pub mean: f64,
    pub lowest: f64,
    /// The text of the lowest cosine.
    pub worst: usize,
}

/// `embed`'s vectors of `texts` (even ones as queries, odd ones as documents) against `want`.
pub fn agreement(embed: impl Fn(&[String], Purpose) -> Vec<Vec<f32>>, texts: &[String], want: &[Vec<f32>]) -> Agreement {
    assert_eq!(want.len(), texts.len(), "one reference vector per text");
    let queries: Vec<String> = texts.iter().step_by(2).cloned().collect();
    let documents: Vec<String> = texts.iter().skip(1).step_by(2).cloned().collect();
    let q = embed(&queries, Purpose::Query);
    let d = embed(&documents, Purpose::Document);
    let cosines: Vec<f64> = want.iter().enumerate().map(|(i, want)| cosine(if i % 2 == 0 { &q[i / 2] } else { &d[i / 2] }, want)).collect();
    let (lowest, worst) = cosines.iter().enumerate().map(|(i, c)| (*c, i)).fold((f64::INFINITY, 0), |a, b| if b.0 < a.0 { b } else { a });
    let mean = cosines.iter().sum::<f64>() / cosines.len().max(1) as f64;
    Agreement { cosines, mean, lowest, worst }
}
