//! Typed errors shared by every engine. Callers act on [`ErrorKind`], not on message text.
#![deny(missing_docs)]

/// A result whose error is a [`MemoryError`].
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;

/// What a caller can do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The engine or one of its parts cannot answer now (missing binary, timeout, provider down). Retry or fall back.
    Unavailable,
    /// The request or configuration is wrong. Fix the input.
    InvalidInput,
    /// The path is not a memory file, or escapes the workspace. Never retried.
    Refused,
    /// The thing asked for does not exist.
    NotFound,
    /// The index on disk is unreadable; rebuild it.
    CorruptIndex,
    /// An I/O error talking to the file system.
    Io,
    /// A bug or an unexpected answer from a dependency.
    Internal,
}

/// An error of any engine or part, with what happened in words; [`MemoryError::kind`] says what a caller can do.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The engine or a part of it cannot answer now (why, and what to do, in the text).
    #[error("{0}")]
    Unavailable(String),
    /// A request argument is wrong (the text names the field).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A configuration value is wrong.
    #[error("config error at `{key}`: {message}")]
    Config {
        /// The key's path, as a user writes it (`memory.search.query.maxResults`).
        key: String,
        /// What is wrong with its value.
        message: String,
    },
    /// A path that is not a memory file or leaves the workspace.
    #[error("refused: {0}")]
    Refused(String),
    /// What was asked for does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The index on disk cannot be read; the engine sets it aside and rebuilds it from the files.
    #[error("corrupt index: {0}")]
    CorruptIndex(String),
    /// The file system failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and on which path.
        context: String,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The embedding provider failed (transient or not: [`crate::embedding::EmbeddingError::is_transient`]).
    #[error("embedding provider error: {0}")]
    Embedding(#[from] crate::embedding::EmbeddingError),
    /// A bug, or an answer from a dependency that should not happen.
    #[error("internal error: {0}")]
    Internal(String),
}

impl MemoryError {
    /// What a caller can do about it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            MemoryError::Unavailable(_) => ErrorKind::Unavailable,
            MemoryError::InvalidInput(_) | MemoryError::Config { .. } => ErrorKind::InvalidInput,
            MemoryError::Refused(_) => ErrorKind::Refused,
            MemoryError::NotFound(_) => ErrorKind::NotFound,
            MemoryError::CorruptIndex(_) => ErrorKind::CorruptIndex,
            MemoryError::Io { .. } => ErrorKind::Io,
            MemoryError::Embedding(e) => {
                if e.is_transient() {
                    ErrorKind::Unavailable
                } else {
                    ErrorKind::InvalidInput
                }
            }
            MemoryError::Internal(_) => ErrorKind::Internal,
        }
    }

    /// A file system error while doing `context`.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        MemoryError::Io { context: context.into(), source }
    }

    /// A file system error while doing `action` on `path` ("cannot read /x/y").
    pub fn io_path(action: &str, path: &std::path::Path, source: std::io::Error) -> Self {
        MemoryError::Io { context: format!("{action} {}", path.display()), source }
    }

    /// A configuration error at `key`.
    pub fn config(key: impl Into<String>, message: impl Into<String>) -> Self {
        MemoryError::Config { key: key.into(), message: message.into() }
    }

    /// The config key a configuration error names; `None` for every other error.
    pub fn config_key(&self) -> Option<&str> {
        match self {
            MemoryError::Config { key, .. } => Some(key),
            _ => None,
        }
    }
}
