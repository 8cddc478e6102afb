//! Typed errors shared by every engine. Callers act on [`ErrorKind`], not on message text.

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

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("{0}")]
    Unavailable(String),
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("config error at `{key}`: {message}")]
    Config { key: String, message: String },
    #[error("refused: {0}")]
    Refused(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("corrupt index: {0}")]
    CorruptIndex(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("embedding provider error: {0}")]
    Embedding(#[from] crate::embedding::EmbeddingError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl MemoryError {
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

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        MemoryError::Io { context: context.into(), source }
    }

    pub fn io_path(action: &str, path: &std::path::Path, source: std::io::Error) -> Self {
        MemoryError::Io { context: format!("{action} {}", path.display()), source }
    }

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

/// A path refused by memory_get, with the reason spelled out for the agent.
pub(crate) fn refused(path: &str, why: &str) -> MemoryError {
    MemoryError::Refused(format!("{path}: {why}"))
}
