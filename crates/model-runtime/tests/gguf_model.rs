//! The runtime on a GGUF file: EmbeddingGemma-300M in Q8_0, as `scripts/setup.d/embeddinggemma.sh` makes it in
//! llama.cpp's `gemma-embedding` layout (OpenClaw's default model file is this layout). Checked against llama.cpp
//! on the same file (tokens and vectors of 308 texts: English, Chinese, Japanese, mixed, code; generated once by
//! `scripts/lib/gguf_reference.py` and committed), its Matryoshka cuts and identity, and the F32 file against
//! sentence-transformers. The provider contract on the same file is `providers`' `tests/gguf_contract.rs`.
//! Run in release for speed: `cargo test --release -p memory-rs-model-runtime --test gguf_model`.

mod common;

use std::path::PathBuf;

use common::{agreement, cached, cosine, int8_vectors, skipped, texts, Gguf, Purpose};
use model_runtime::ModelOptions;
use serde_json::Value;

const QUERY_PROMPT: &str = "task: search result | query: ";
const DOCUMENT_PROMPT: &str = "title: none | text: ";
const TOKENS: &str = include_str!("data/embeddinggemma-q8_0.tokens.json");
const VECTORS: &[u8] = include_bytes!("data/embeddinggemma-q8_0.vectors.i8");

/// The Q8_0 file, or `None` (recorded as a missing prerequisite) when the setup has not made it.
fn model(test: &str) -> Option<PathBuf> {
    common::model("MEMORY_TEST_EMBEDDINGGEMMA_GGUF", "embeddinggemma-300m-Q8_0.gguf", test)
}

#[test]
fn tokens_match_llama_cpp_on_the_same_file() {
    let Some(path) = model("gguf_model::tokens_match_llama_cpp_on_the_same_file") else { return };
    let p = Gguf::open(&path).unwrap();
    let want: Vec<Vec<u32>> = serde_json::from_str(TOKENS).unwrap();
    let texts = texts();
    assert_eq!(want.len(), texts.len());
    let mut differ = Vec::new();
    for (i, (t, want)) in texts.iter().zip(&want).enumerate() {
        let prompted = format!("{}{t}", if i % 2 == 0 { QUERY_PROMPT } else { DOCUMENT_PROMPT });
        let got = p.tokens(&prompted);
        if &got != want {
            differ.push(format!("{t:?}: {got:?} vs llama.cpp {want:?}"));
        }
    }
    assert!(differ.is_empty(), "{} of {} texts tokenized differently:\n{}", differ.len(), texts.len(), differ.join("\n"));
}

#[test]
fn embeddings_match_llama_cpp_on_the_same_file() {
    let Some(path) = model("gguf_model::embeddings_match_llama_cpp_on_the_same_file") else { return };
    let p = Gguf::open(&path).unwrap();
    assert_eq!(p.info.dimensions, 768);
    let texts = texts();
    let a = agreement(|t, purpose| p.embed(t, purpose), &texts, &int8_vectors(VECTORS, 768));
    eprintln!("{} texts against llama.cpp: mean cosine {:.5}, lowest {:.5} ({:?})", texts.len(), a.mean, a.lowest, texts[a.worst]);
    assert!(a.lowest >= 0.99, "cosine {} < 0.99 against llama.cpp for {:?}", a.lowest, texts[a.worst]);
}

/// A Matryoshka cut is the full vector's first values, normalised again, and another identity; a width the
/// model does not offer is refused.
#[test]
fn matryoshka_cuts_and_identity() {
    let Some(path) = model("gguf_model::matryoshka_cuts_and_identity") else { return };
    let full = Gguf::open(&path).unwrap();
    let cut = Gguf::open_with(&path, &ModelOptions { dimensions: Some(256), ..Default::default() }).unwrap();
    assert_eq!(cut.info.dimensions, 256);
    assert_ne!(cut.info.fingerprint, full.info.fingerprint);
    assert_eq!(Gguf::open(&path).unwrap().info.fingerprint, full.info.fingerprint, "the same file is the same identity");
    let text = vec!["网关运行在办公室的 Mac Studio 上。".to_string()];
    let a = full.embed(&text, Purpose::Document).remove(0);
    let b = cut.embed(&text, Purpose::Document).remove(0);
    assert_eq!(b.len(), 256);
    let head: Vec<f32> = a[..256].to_vec();
    assert!(cosine(&head, &b) > 0.9999);
    let err = Gguf::open_with(&path, &ModelOptions { dimensions: Some(300), ..Default::default() }).err().unwrap();
    assert!(err.to_string().contains("not 300"), "{err}");

    // A question in English finds the Chinese note it is about.
    let notes = vec!["网关运行在办公室的 Mac Studio 上，就在路由器旁边。".to_string(), "周五下午三点和设计团队开周会。".to_string()];
    let n = full.embed(&notes, Purpose::Document);
    let ask = full.embed_query("Which machine does the gateway run on?");
    assert!(cosine(&ask, &n[0]) > cosine(&ask, &n[1]) + 0.05, "{} vs {}", cosine(&ask, &n[0]), cosine(&ask, &n[1]));
}

/// The identity is the file's bytes: a copy under another name is the same model, one changed byte another.
#[test]
fn identity_is_the_file_digest() {
    let Some(path) = model("gguf_model::identity_is_the_file_digest") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("renamed.gguf");
    std::fs::copy(&path, &copy).unwrap();
    let a = Gguf::open(&path).unwrap().info.fingerprint;
    assert_eq!(Gguf::open(&copy).unwrap().info.fingerprint, a);
    // The last byte is tensor data: the header still reads, the model is another.
    let mut bytes = std::fs::read(&copy).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&copy, &bytes).unwrap();
    assert_ne!(Gguf::open(&copy).unwrap().info.fingerprint, a);
}

/// The F32 file made from the sentence-transformers folder (`scripts/lib/gguf_convert_gemma.py`), against
/// sentence-transformers itself running that folder (torch on the CPU, f32): the 308 texts, then long texts made
/// of them (past the local layers' window and past 2,048 tokens: `scripts/lib/st_reference.py`), queries and
/// documents with the folder's prompts. Both files come from the opt-in setup step
/// `scripts/setup.d/sentence_transformers.sh` (`MEMORY_SETUP_SENTENCE_TRANSFORMERS=1`: PyPI's torch brings its
/// CUDA libraries, gigabytes); without them the test is skipped, saying so.
#[test]
fn f32_file_matches_sentence_transformers_on_the_folder() {
    let test = "gguf_model::f32_file_matches_sentence_transformers_on_the_folder";
    let path = cached("MEMORY_TEST_EMBEDDINGGEMMA_F32_GGUF", "embeddinggemma-300m-F32.gguf");
    let reference = cached("MEMORY_TEST_EMBEDDINGGEMMA_REFERENCE", "embeddinggemma-300m.reference.json");
    for needed in [&path, &reference] {
        if !needed.is_file() {
            let why =
                format!("{} not found (made by the opt-in setup step: MEMORY_SETUP_SENTENCE_TRANSFORMERS=1 bash scripts/setup.sh)", needed.display());
            skipped(test, &why);
            return;
        }
    }
    let r: Value = serde_json::from_slice(&std::fs::read(&reference).unwrap()).unwrap();
    let p = Gguf::open(&path).unwrap();
    let prompts = &p.info.prompts;
    assert_eq!(r["prompts"]["query"], prompts.query.as_str(), "the reference's query prompt is the provider's");
    assert_eq!(r["prompts"]["document"], prompts.document.as_str(), "the reference's document prompt is the provider's");
    let texts: Vec<String> = r["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    let short = common::texts();
    assert_eq!(texts[..short.len()], short[..], "the reference embeds the test texts first");
    let long = &texts[short.len()..];
    assert!(long.len() >= 3 && long.iter().any(|t| p.tokens(t).len() == 2048), "long texts, one cut at 2,048 tokens");
    let want: Vec<Vec<f32>> =
        r["vectors"].as_array().unwrap().iter().map(|v| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()).collect();
    let purposes: Vec<&str> = r["purposes"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(purposes.iter().enumerate().all(|(i, p)| *p == if i % 2 == 0 { "query" } else { "document" }));
    let a = agreement(|t, purpose| p.embed(t, purpose), &texts, &want);
    let (mean, worst, at) = (a.mean, a.lowest, a.worst);
    let long_worst = a.cosines[short.len()..].iter().copied().fold(1.0, f64::min);
    eprintln!(
        "{} texts ({} long), F32 file against sentence-transformers ({}): mean cosine {mean:.7}, lowest {worst:.7} (1 - cosine {:.1e}: {:?}), lowest of the long ones {long_worst:.7}",
        texts.len(),
        long.len(),
        r["versions"],
        1.0 - worst,
        texts[at].chars().take(60).collect::<String>()
    );
    assert!(worst >= 0.999, "cosine {worst} < 0.999 against sentence-transformers for {:?}", texts[at]);
}
