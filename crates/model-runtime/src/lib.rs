//! The model runtime of agent memory: what turns texts into vectors, and (query, passage) pairs into scores, from
//! model files on disk, in process and without network. Texts in, vectors or scores out, typed errors
//! ([`ModelError`], [`ScoreError`]); the embedding providers and rerankers (crate `providers`) are thin adapters
//! over it.
//!
//! - Model folders (sentence-transformers layout: `model.safetensors`, `tokenizer.json`, `config.json`...):
//!   [`FolderModelInfo`] reads the small files and the weights' header (architecture, longest input, pooling,
//!   prompts, identity), [`FolderEncoder`] loads and runs the BERT-family encoder (BERT, XLM-RoBERTa, MPNet) with
//!   the tokenizer `tokenizer.json` describes. The word embeddings stay on disk; their rows are read as tokens
//!   need them.
//! - GGUF files (llama.cpp's format): [`GgufModelInfo`] and [`GgufEncoder`] for `gemma-embedding`
//!   (EmbeddingGemma), `nomic-bert` and `bert`, with the file's own tokenizer (SentencePiece or WordPiece).
//! - Rerankers from folders: [`CrossEncoder`] (one logit per pair) and [`LateEncoder`] (ColBERT-style MaxSim).
//! - Kernels: int8 dense layers (AVX-512 VNNI where the CPU has it), Q8_0 and F16 products, and a plain-buffer
//!   encoder for int8 models; candle's f32 products elsewhere.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead;
// tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod bert;
mod config;
mod cross;
mod encoder;
mod error;
mod f16;
mod gemma;
mod gguf;
mod gguf_model;
mod int8;
mod late;
mod nomic;
mod plain;
mod q8;
mod safetensors;
mod spm;
mod wordpiece;

pub use bert::{Architecture, BertConfig};
pub use config::{FolderModelInfo, ModelOptions, Pooling, Prompts};
pub use cross::{CrossEncoder, MAX_PAIR_TOKENS};
pub use encoder::FolderEncoder;
pub use error::{ModelError, ScoreError};
pub use gguf::is_gguf;
pub use gguf_model::{GgufEncoder, GgufModelInfo, ModelConfig};
pub use late::{is_late_interaction, maxsim, Conventions, LateEncoder};

/// Replaces non-finite components by 0 and scales to unit length (a zero vector stays zero): the vectors this
/// runtime gives, as memory-core's `sanitize_and_normalize` makes them (the index compares by cosine).
pub fn sanitize_and_normalize(v: &mut [f32]) {
    for x in v.iter_mut() {
        if !x.is_finite() {
            *x = 0.0;
        }
    }
    let norm = v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x = (*x as f64 / norm) as f32;
        }
    }
}

/// Lowercase hex SHA-256 of `bytes`: the digests in the models' identities, as memory-core computes them.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
