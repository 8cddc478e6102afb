//! Why a model cannot be read, loaded or run.

use std::path::PathBuf;

/// Why a model (a folder or a GGUF file) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model folder {} not found", .0.display())]
    MissingFolder(PathBuf),
    #[error("{file} missing in the model folder {}", .dir.display())]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error("cannot read {}: {message}", .path.display())]
    Read { path: PathBuf, message: String },
    #[error("{}: {message}", .path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("cannot load the model: {0}")]
    Model(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A configured prompt name the model does not have; `key` is the config key that named it.
    #[error("the model in {} has no prompt named `{name}` (its prompts: {available})", .dir.display())]
    UnknownPrompt { key: &'static str, dir: PathBuf, name: String, available: String },
}

/// Why a reranking pass gave no scores.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// The model failed on these inputs (the message as the tokenizer or candle gives it).
    #[error("{0}")]
    Failed(String),
    /// `deadline` passed between forward passes; `budget_ms` is what was left when scoring began.
    #[error("over budget ({budget_ms} ms)")]
    OverBudget { budget_ms: u64 },
}
