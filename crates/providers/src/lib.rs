//! Embedding providers for agent memory.
//!
//! - [`from_config`]: `memory.search.provider` (`auto`, `openai`, `openai-compatible`, `gemini`, `voyage`,
//!   `mistral`, `ollama`, `local`, `none`) and `memory.search.fallback` to an [`EmbeddingProvider`], or `None`
//!   for keyword-only search.
//! - [`catalogue`]: every remote provider, one entry each (protocol, default model and widths, keys, input types,
//!   batch API); [`RemoteProvider`] is built from an entry and speaks its protocol (`wire`, one module each).
//! - [`RemoteProvider`]: the HTTP APIs (token-budget batching, a few requests in flight, retries with backoff on
//!   429 / 5xx / timeouts, strict checking of the answers).
//! - [`LocalProvider`]: a sentence-embedding model run in-process from a folder or a `.gguf` file, an adapter over
//!   the `model-runtime` crate (which reads, tokenizes and runs the model).
//! - [`model_file`]: where the local model's file comes from (`local.modelPath`: a path, a cached name, an `hf:`
//!   URI or an HTTPS URL; OpenClaw's cache first, then this project's, then a checked download).
//! - [`batch`]: provider batch jobs (OpenAI's Batch API, Gemini's asynchronous batches, Voyage's batches) for
//!   large backfills, resumable across restarts.
//! - [`FallbackProvider`]: a second provider used only once the first fails.
//! - [`LocalReranker`]: a cross-encoder reranker run in-process from a folder (`memory.search.query.rerank`);
//!   [`LateInteractionReranker`] a ColBERT-style one, the kind picked from the folder ([`open_reranker`]).
//!
//! Every provider returns finite, L2-normalised vectors, one per input, all of one width, or an error.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod batch;
pub mod batching;
pub mod catalogue;
mod client;
pub mod fallback;
pub mod http;
pub mod local;
pub mod model_file;
pub mod remote;
mod resolve;
mod wire;

pub use batch::BatchSettings;
pub use batching::{estimate_tokens, plan_batches, BatchLimits};
pub use catalogue::Provider;
pub use fallback::FallbackProvider;
pub use http::{ApiKey, HttpOptions};
pub use local::{
    model_folder_present, open_reranker, reranker_from_config, FolderReranker, LateInteractionReranker, LocalModelError, LocalModelInfo,
    LocalOptions, LocalProvider, LocalReranker, Pooling, Prompts, RerankerKind,
};
pub use memory_core::embedding::{EmbeddingError, EmbeddingProvider, EmbeddingPurpose};
pub use remote::{RemoteProvider, RemoteSettings};
pub use resolve::{
    auto_choice, from_config, from_config_with, provider_note, unavailable_reason, EnvLookup, ResolveOptions, LOCAL_MODEL_ENV, PROVIDER_NAMES,
};
pub use wire::gemini::is_multimodal_model;
