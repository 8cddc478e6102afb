//! The `local` provider on GGUF files against the provider contract (`common::contract`): EmbeddingGemma-300M in
//! Q8_0 (`scripts/setup.d/embeddinggemma.sh`), nomic-embed-text-v1.5 in F16 (`scripts/setup.d/nomic.sh`) and
//! all-MiniLM-L6-v2 in Q8_0 (`scripts/setup.d/bert_gguf.sh`). What the runtime computes on these files (tokens and
//! vectors against llama.cpp, cuts, prompts, pooling) is checked by `model-runtime`'s `tests/gguf_model.rs` and
//! `tests/gguf_encoders.rs`.

mod common;

use std::path::PathBuf;

use providers::{LocalOptions, LocalProvider};

/// The model file `var` or the models cache names, or `None` (recorded as a missing prerequisite) when the setup
/// has not made it.
fn model(var: &str, name: &str, test: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("MEMORY_RS_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs"))
            .join("models")
            .join(name)
    });
    if path.is_file() {
        Some(path)
    } else {
        conformance::testing::missing_prerequisite(test, &format!("{name} not found at {} (scripts/setup.sh makes it)", path.display()));
        None
    }
}

/// The provider on the model file `var` or the models cache names, checked against the contract (`purposes_differ`:
/// the model puts a prompt of its own before queries or documents); `None` when the setup has not made the file.
async fn contract_checked(var: &str, name: &str, test: &str, purposes_differ: bool) -> Option<(PathBuf, LocalProvider)> {
    let path = model(var, name, &format!("gguf_contract::{test}"))?;
    let p = LocalProvider::open(&path).unwrap();
    common::contract::check(&p, common::contract::Expect { purposes_differ }).await;
    Some((path, p))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddinggemma_honours_the_provider_contract() {
    let test = "embeddinggemma_honours_the_provider_contract";
    contract_checked("MEMORY_TEST_EMBEDDINGGEMMA_GGUF", "embeddinggemma-300m-Q8_0.gguf", test, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nomic_honours_the_provider_contract() {
    contract_checked("MEMORY_TEST_NOMIC_GGUF", "nomic-embed-text-v1.5.f16.gguf", "nomic_honours_the_provider_contract", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bert_honours_the_provider_contract() {
    let test = "bert_honours_the_provider_contract";
    let Some((path, p)) = contract_checked("MEMORY_TEST_BERT_Q8_GGUF", "all-MiniLM-L6-v2.Q8_0.gguf", test, false).await else { return };
    assert_eq!(p.gguf_info().unwrap().architecture, "bert");
    // A cut the file does not offer is refused when the provider opens it.
    let err = LocalProvider::open_with(&path, &LocalOptions { dimensions: Some(128), ..Default::default() }).unwrap_err();
    assert!(err.to_string().contains("no Matryoshka cuts"), "{err}");
}
