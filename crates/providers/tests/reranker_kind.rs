//! Which reranker a model folder holds, told by its files (`providers::open_reranker`), and what a folder that
//! cannot be used gives `memory.search.query.rerank` (`providers::reranker_from_config`): a reranker that fails
//! every call with why ([`memory_core::rerank::Unavailable`]). Tiny folders made here: the kind is read from the
//! weights' header and the small files, never from the weights themselves.

use std::path::Path;

use providers::{open_reranker, reranker_from_config, RerankerKind};

/// A safetensors file of zero-filled F32 tensors with these names and shapes.
fn write_safetensors(path: &Path, tensors: &[(&str, Vec<usize>)]) {
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<usize>() * 4;
        header.insert((*name).into(), serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes]}));
        offset += bytes;
    }
    let header = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.resize(out.len() + offset, 0);
    std::fs::write(path, out).unwrap();
}

/// A two-layer BERT of width 8 (the tensors `LocalModelInfo::inspect` reads the architecture from) and `extra`.
fn folder(root: &Path, name: &str, extra: &[(&str, Vec<usize>)]) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut tensors: Vec<(&str, Vec<usize>)> = vec![
        ("embeddings.word_embeddings.weight", vec![30, 8]),
        ("embeddings.position_embeddings.weight", vec![16, 8]),
        ("embeddings.token_type_embeddings.weight", vec![2, 8]),
        ("encoder.layer.0.attention.self.query.weight", vec![8, 8]),
        ("encoder.layer.0.intermediate.dense.weight", vec![16, 8]),
    ];
    tensors.extend(extra.iter().cloned());
    write_safetensors(&dir.join("model.safetensors"), &tensors);
    std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
    dir
}

fn config_with(dir: &Path) -> memory_core::Config {
    let mut c = memory_core::Config::default();
    c.memory.search.query.rerank.enabled = true;
    c.memory.search.query.rerank.model_path = Some(dir.display().to_string());
    c
}

/// The reason `reranker_from_config` gives for a folder it cannot use (panics if it could use it).
fn unavailable_reason(dir: &Path) -> String {
    let rr = reranker_from_config(&config_with(dir)).unwrap().expect("rerank is enabled");
    rr.unavailable().unwrap_or_else(|| panic!("{} was usable", dir.display())).to_string()
}

#[test]
fn the_kind_is_read_from_the_folders_files() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // A cross-encoder: BERT's pooler and a one-logit classifier.
    let cross = folder(root, "cross", &[("pooler.dense.weight", vec![8, 8]), ("classifier.weight", vec![1, 8])]);
    assert_eq!(open_reranker(&cross).unwrap().kind(), RerankerKind::CrossEncoder);
    // ColBERT's projection alone says late interaction (colbert-ai's HF_ColBERT saves it as `linear.weight`).
    let projected = folder(root, "projected", &[("linear.weight", vec![4, 8])]);
    std::fs::write(projected.join("artifact.metadata"), r#"{"attend_to_mask_tokens": true}"#).unwrap();
    assert_eq!(open_reranker(&projected).unwrap().kind(), RerankerKind::LateInteraction);
    // So does `HF_ColBERT` among config.json's architectures, even beside a pooler (the converted encoder keeps
    // BERT's), and so does ColBERT's artifact.metadata.
    let named = folder(root, "named", &[("pooler.dense.weight", vec![8, 8])]);
    std::fs::write(named.join("config.json"), r#"{"architectures": ["HF_ColBERT"], "model_type": "bert"}"#).unwrap();
    std::fs::write(named.join("artifact.metadata"), r#"{"query_augmentation": false, "dim": 8}"#).unwrap();
    assert_eq!(open_reranker(&named).unwrap().kind(), RerankerKind::LateInteraction);
    // The folder that works is a working reranker for the config.
    let rr = reranker_from_config(&config_with(&named)).unwrap().unwrap();
    assert!(rr.unavailable().is_none());
    assert_eq!(rr.id(), "named");
    // An embedding model is neither, and the error says what was looked for.
    let plain = folder(root, "embedding", &[]);
    let e = open_reranker(&plain).unwrap_err().to_string();
    assert!(e.contains("neither a cross-encoder") && e.contains("late-interaction"), "{e}");
    let why = unavailable_reason(&plain);
    assert!(why.contains("memory.search.query.rerank.modelPath") && why.contains("neither a cross-encoder"), "{why}");
}

#[test]
fn a_damaged_or_unsupported_late_interaction_folder_is_unavailable_with_why() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let colbert = |name: &str, metadata: &str| {
        let dir = folder(root, name, &[]);
        std::fs::write(dir.join("config.json"), r#"{"architectures": ["HF_ColBERT"], "model_type": "bert"}"#).unwrap();
        std::fs::write(dir.join("artifact.metadata"), metadata).unwrap();
        dir
    };
    let cases = [
        (colbert("not-json", "{ query_maxlen: 32"), "artifact.metadata: invalid JSON"),
        (colbert("bad-key", r#"{"query_maxlen": "32", "query_augmentation": false}"#), "`query_maxlen` must be a positive integer"),
        (colbert("too-wide", r#"{"query_augmentation": false, "dim": 96}"#), "wider than the hidden state"),
        // ColBERT's default: [MASK] padding hidden from attention, which this encoder cannot give vectors for.
        (colbert("hidden-masks", "{}"), "query augmentation with [MASK] tokens hidden from attention is not supported"),
    ];
    for (dir, want) in &cases {
        assert!(open_reranker(dir).is_err(), "{}", dir.display());
        let why = unavailable_reason(dir);
        assert!(why.contains("memory.search.query.rerank.modelPath") && why.contains(want), "{}: {why}", dir.display());
    }
    // A projection whose width disagrees with `dim`.
    let projected = folder(root, "projected", &[("linear.weight", vec![4, 8])]);
    std::fs::write(projected.join("artifact.metadata"), r#"{"query_augmentation": false, "dim": 6}"#).unwrap();
    assert!(unavailable_reason(&projected).contains("`linear.weight` is [4, 8]"));
    // A weights file cut inside its header (a file cut in its data is found out at the first reranking).
    let truncated = colbert("truncated", r#"{"query_augmentation": false}"#);
    let bytes = std::fs::read(truncated.join("model.safetensors")).unwrap();
    std::fs::write(truncated.join("model.safetensors"), &bytes[..40]).unwrap();
    assert!(unavailable_reason(&truncated).contains("model.safetensors"));
}
