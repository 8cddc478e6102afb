//! The `local` provider on all-MiniLM-L6-v2 from disk (`$MEMORY_TEST_MODEL`, fetched by scripts/setup.sh).

mod common;

use std::sync::Arc;

use memory_core::embedding::cosine;
use providers::{EmbeddingProvider, EmbeddingPurpose, LocalModelInfo, LocalProvider, Pooling};
use tokio::sync::OnceCell;

static MODEL: OnceCell<Arc<LocalProvider>> = OnceCell::const_new();

/// One loaded model shared by the tests of this file.
async fn model() -> Arc<LocalProvider> {
    MODEL
        .get_or_init(|| async {
            let p = LocalProvider::open(common::test_model_dir()).expect("open the test model");
            p.load().await.expect("load the test model");
            Arc::new(p)
        })
        .await
        .clone()
}

fn s(t: &str) -> String {
    t.to_string()
}

/// The provider contract on a model without prompts: queries and documents embed alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honours_the_provider_contract() {
    common::contract::check(model().await.as_ref(), common::contract::Expect { purposes_differ: false }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paraphrase_cosine_matches_the_reference() {
    let m = model().await;
    let v = m.embed(&[s("The cat sits on the mat."), s("A kitten is resting on a rug.")], EmbeddingPurpose::Document).await.unwrap();
    let c = cosine(&v[0], &v[1]);
    assert!((c - 0.6411).abs() < 1e-3, "cosine {c}, expected 0.6411 (sentence-transformers reference)");
    let unrelated = m.embed_query("Quarterly revenue grew by four percent.").await.unwrap();
    assert!(cosine(&v[0], &unrelated) < 0.2, "unrelated sentences should be far apart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_are_unit_length_deterministic_and_independent_of_batch_padding() {
    let m = model().await;
    assert_eq!(m.id(), "local");
    assert_eq!(m.dimensions(), Some(384));
    let short = s("Mac Studio is the gateway host.");
    let long = s(&"The gateway runs on the Mac Studio in the office, next to the router. ".repeat(12));
    let alone = m.embed(std::slice::from_ref(&short), EmbeddingPurpose::Document).await.unwrap();
    // In a batch with a much longer text the short one is padded: the attention mask must hide the padding. (The
    // short text alone also runs on one thread, the batch on every core: the vectors must not care.)
    let batched = m.embed(&[long.clone(), short.clone(), s("")], EmbeddingPurpose::Document).await.unwrap();
    assert_eq!(batched.len(), 3);
    for v in &batched {
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        assert!(v.iter().all(|x| x.is_finite()));
    }
    let c = cosine(&alone[0], &batched[1]);
    assert!(c > 0.99999, "padding changed the vector: cosine {c}");
    let again = m.embed(std::slice::from_ref(&short), EmbeddingPurpose::Query).await.unwrap();
    assert_eq!(alone, again, "same text, same vector");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_texts_are_truncated_at_the_model_limit() {
    let m = model().await;
    assert_eq!(m.info().unwrap().max_seq_length, 256);
    // ~600 words: far beyond 256 tokens. What follows the limit cannot change the vector.
    let head = "memory index rebuild with embeddings and keyword search ".repeat(60);
    let v = m.embed(&[head.clone(), format!("{head} completely different tail about volcanoes")], EmbeddingPurpose::Document).await.unwrap();
    assert!(cosine(&v[0], &v[1]) > 0.99999);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paraphrase_ranks_above_keyword_overlap() {
    let m = model().await;
    let q = m.embed_query("the machine running the gateway").await.unwrap();
    let docs = m
        .embed(
            &[s("Mac Studio gateway host: the always-on box that runs the agent gateway."), s("Running shoes for the marathon.")],
            EmbeddingPurpose::Document,
        )
        .await
        .unwrap();
    assert!(cosine(&q, &docs[0]) > cosine(&q, &docs[1]) + 0.1);
}

#[test]
fn inspect_reads_architecture_without_loading() {
    let dir = common::test_model_dir();
    let info = LocalModelInfo::inspect(&dir).unwrap();
    assert_eq!(info.config.hidden_size, 384);
    assert_eq!(info.config.num_hidden_layers, 6);
    assert_eq!(info.config.num_attention_heads, 12);
    assert_eq!(info.config.intermediate_size, 1536);
    assert_eq!(info.config.vocab_size, 30522);
    assert_eq!(info.pooling, Pooling::Mean);
    assert_eq!(info.fingerprint.len(), 64);
    // Stable across opens.
    assert_eq!(LocalModelInfo::inspect(&dir).unwrap().fingerprint, info.fingerprint);

    // The same weights laid out two ways give the same architecture and fingerprint (identity follows what
    // produces the vectors, not how the folder is laid out):
    // (a) the pooling config flattened over config.json (no BERT config: architecture from the weights);
    let flat = tempfile::tempdir().unwrap();
    for f in ["model.safetensors", "tokenizer.json", "sentence_bert_config.json"] {
        std::os::unix::fs::symlink(dir.join(f), flat.path().join(f)).unwrap();
    }
    std::fs::write(
        flat.path().join("config.json"),
        r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}"#,
    )
    .unwrap();
    let flat_info = LocalModelInfo::inspect(flat.path()).unwrap();
    assert_eq!(flat_info.config, info.config);
    assert_eq!(flat_info.fingerprint, info.fingerprint);
    // (b) a BERT config.json and the pooling config in 1_Pooling/.
    let tmp = tempfile::tempdir().unwrap();
    for f in ["model.safetensors", "tokenizer.json", "sentence_bert_config.json"] {
        std::os::unix::fs::symlink(dir.join(f), tmp.path().join(f)).unwrap();
    }
    std::fs::write(
        tmp.path().join("config.json"),
        r#"{"architectures":["BertModel"],"hidden_act":"gelu","hidden_size":384,"intermediate_size":1536,
            "layer_norm_eps":1e-12,"max_position_embeddings":512,"model_type":"bert","num_attention_heads":12,
            "num_hidden_layers":6,"type_vocab_size":2,"vocab_size":30522}"#,
    )
    .unwrap();
    std::fs::create_dir(tmp.path().join("1_Pooling")).unwrap();
    std::fs::write(tmp.path().join("1_Pooling/config.json"), r#"{"pooling_mode_mean_tokens": true}"#).unwrap();
    let other = LocalModelInfo::inspect(tmp.path()).unwrap();
    assert_eq!(other.config, info.config);
    assert_eq!(other.fingerprint, info.fingerprint);

    // CLS pooling is another model identity.
    std::fs::write(tmp.path().join("1_Pooling/config.json"), r#"{"pooling_mode_cls_token": true}"#).unwrap();
    let cls = LocalModelInfo::inspect(tmp.path()).unwrap();
    assert_eq!(cls.pooling, Pooling::Cls);
    assert_ne!(cls.fingerprint, info.fingerprint);
}

#[test]
fn missing_files_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let err = LocalProvider::open(tmp.path().join("nope")).unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
    let err = LocalProvider::open(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("model.safetensors missing"), "{err}");
    std::fs::write(tmp.path().join("model.safetensors"), b"garbage").unwrap();
    std::fs::write(tmp.path().join("tokenizer.json"), b"{}").unwrap();
    let err = LocalProvider::open(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("not a safetensors file"), "{err}");
}

/// An MPNet folder (all-mpnet-base-v2's layout: `mpnet`-style weight names, `model_type: mpnet`, 514 positions)
/// with tiny random weights: recognised, loaded and embedding like any local model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mpnet_folder_is_recognised_and_embeds() {
    use candle_core::{Device, Tensor};
    let (vocab, h, inter, layers, positions) = (30527usize, 8usize, 16usize, 2usize, 514usize);
    let mut seed = 7u64;
    let mut rnd = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    };
    let mut weights = std::collections::HashMap::new();
    let mut put = |name: String, shape: &[usize]| {
        let t = Tensor::from_vec(rnd(shape.iter().product()), shape, &Device::Cpu).unwrap();
        weights.insert(name, t);
    };
    put("embeddings.word_embeddings.weight".into(), &[vocab, h]);
    put("embeddings.position_embeddings.weight".into(), &[positions, h]);
    put("embeddings.LayerNorm.weight".into(), &[h]);
    put("embeddings.LayerNorm.bias".into(), &[h]);
    put("encoder.relative_attention_bias.weight".into(), &[32, 2]);
    for l in 0..layers {
        let p = format!("encoder.layer.{l}.");
        for n in ["q", "k", "v", "o"] {
            put(format!("{p}attention.attn.{n}.weight"), &[h, h]);
            put(format!("{p}attention.attn.{n}.bias"), &[h]);
        }
        for (n, shape) in [
            ("attention.LayerNorm.weight", vec![h]),
            ("attention.LayerNorm.bias", vec![h]),
            ("intermediate.dense.weight", vec![inter, h]),
            ("intermediate.dense.bias", vec![inter]),
            ("output.dense.weight", vec![h, inter]),
            ("output.dense.bias", vec![h]),
            ("output.LayerNorm.weight", vec![h]),
            ("output.LayerNorm.bias", vec![h]),
        ] {
            put(format!("{p}{n}"), &shape);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    candle_core::safetensors::save(&weights, dir.path().join("model.safetensors")).unwrap();
    std::fs::copy(common::test_model_dir().join("tokenizer.json"), dir.path().join("tokenizer.json")).unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type":"mpnet","hidden_act":"gelu","hidden_size":8,"intermediate_size":16,"layer_norm_eps":1e-05,
            "max_position_embeddings":514,"num_attention_heads":2,"num_hidden_layers":2,"pad_token_id":1,
            "relative_attention_num_buckets":32,"vocab_size":30527}"#,
    )
    .unwrap();
    let info = LocalModelInfo::inspect(dir.path()).unwrap();
    assert_eq!(info.config.architecture, providers::local::Architecture::MpNet);
    assert_eq!((info.config.num_hidden_layers, info.config.num_attention_heads, info.config.layer_norm_eps), (2, 2, 1e-5));
    assert_eq!(info.max_seq_length, 512, "positions 0 and 1 are reserved");
    let p = LocalProvider::open(dir.path()).unwrap();
    let texts = [s("The gateway runs on the Mac Studio."), s("short"), s(&"a long text ".repeat(400))];
    let together = p.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
    for (t, v) in texts.iter().zip(&together) {
        assert_eq!(v.len(), 8);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
        // Padding in a batch changes nothing (right padding, masked; positions of real tokens unchanged).
        let alone = p.embed(std::slice::from_ref(t), EmbeddingPurpose::Document).await.unwrap();
        assert!(cosine(v, &alone[0]) > 0.99999, "{t:.20}");
    }
}

/// `tensors` as a safetensors file: `F32` tensors and `I8` ones (given as raw bytes with their shape).
fn write_safetensors(path: &std::path::Path, floats: &[(String, Vec<usize>, Vec<f32>)], int8: &[(String, Vec<usize>, Vec<i8>)]) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, shape, v) in floats {
        let start = data.len();
        data.extend(v.iter().flat_map(|x| x.to_le_bytes()));
        header.insert(name.clone(), serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}));
    }
    for (name, shape, v) in int8 {
        let start = data.len();
        data.extend(v.iter().map(|x| *x as u8));
        header.insert(name.clone(), serde_json::json!({"dtype": "I8", "shape": shape, "data_offsets": [start, data.len()]}));
    }
    let head = serde_json::to_vec(&header).unwrap();
    let mut out = (head.len() as u64).to_le_bytes().to_vec();
    out.extend(head);
    out.extend(data);
    std::fs::write(path, out).unwrap();
}

/// A model folder whose dense layers are stored as int8 (`X.weight` `I8` + `X.weight_scale`), as the converter
/// writes bge-small and the reranker: it loads (int8 kernel, or dequantised where the CPU has none) and embeds
/// like the float model it was quantised from; an int8 weight without its scale is refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn int8_weights_load_and_embed_like_the_float_model() {
    use candle_core::Device;
    let src = common::test_model_dir();
    let tensors = candle_core::safetensors::load(src.join("model.safetensors"), &Device::Cpu).unwrap();
    let (mut floats, mut int8) = (Vec::new(), Vec::new());
    for (name, t) in &tensors {
        let shape = t.dims().to_vec();
        let v: Vec<f32> = t.to_dtype(candle_core::DType::F32).unwrap().flatten_all().unwrap().to_vec1().unwrap();
        let dense = name.contains("encoder.layer.") && name.ends_with(".weight") && shape.len() == 2;
        if !dense {
            floats.push((name.clone(), shape, v));
            continue;
        }
        let inp = shape[1];
        let mut q = Vec::with_capacity(v.len());
        let mut scale = Vec::new();
        for row in v.chunks(inp) {
            let s = row.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-12) / 127.0;
            q.extend(row.iter().map(|x| (x / s).round() as i8));
            scale.push(s);
        }
        floats.push((format!("{name}_scale"), vec![shape[0]], scale));
        int8.push((name.clone(), shape, q));
    }
    assert_eq!(int8.len(), 6 * 6, "six dense layers in each of MiniLM's six layers");
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() && f.file_name() != "model.safetensors" {
            std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
        }
    }
    if src.join("1_Pooling").is_dir() {
        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        std::fs::copy(src.join("1_Pooling/config.json"), dir.path().join("1_Pooling/config.json")).unwrap();
    }
    write_safetensors(&dir.path().join("model.safetensors"), &floats, &int8);
    let quant = LocalProvider::open(dir.path()).unwrap();
    let texts = [s("The gateway runs on the Mac Studio."), s("Alice prefers oat milk in her coffee"), s(&"a long note about the deploy ".repeat(40))];
    let want = model().await.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
    let got = quant.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
    for ((t, g), w) in texts.iter().zip(&got).zip(&want) {
        let c = cosine(g, w);
        assert!(c > 0.99, "{t:.20}: cosine {c} with the float model");
    }

    // The same file without one layer's scale: refused, naming the tensor.
    let missing = floats.iter().position(|(n, _, _)| n.ends_with("layer.0.attention.self.query.weight_scale")).unwrap();
    floats.remove(missing);
    write_safetensors(&dir.path().join("model.safetensors"), &floats, &int8);
    let err = match LocalProvider::open(dir.path()) {
        Err(e) => e.to_string(),
        Ok(p) => p.embed(&texts[..1], EmbeddingPurpose::Document).await.unwrap_err().to_string(),
    };
    assert!(err.contains("query.weight_scale"), "{err}");
}
