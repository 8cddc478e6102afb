//! memory-core: what every memory engine shares.
//!
//! - [`backend::MemoryBackend`]: the one trait engines implement; [`registry`] maps `memory.backend` to engines.
//! - [`store::ChunkStore`]: for engines that store chunks; [`indexed::IndexedBackend`] then provides discovery,
//!   incremental sync, embedding and the ranking pipeline, so such engines rank alike.
//! - [`discovery`], [`chunking`], [`analysis`], [`ranking`], [`access`] (memory_get safety), [`config`].

pub mod access;
pub mod analysis;
pub mod append;
pub mod backend;
pub mod chunking;
pub mod config;
pub mod discovery;
pub mod embedding;
pub mod error;
pub mod fallback;
pub mod identity;
pub mod indexed;
pub mod ranking;
pub mod registry;
pub mod sessions;
pub mod store;
pub mod types;

pub use backend::MemoryBackend;
pub use config::Config;
pub use error::{ErrorKind, MemoryError, Result};
pub use types::*;

/// Current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// sha256 of bytes, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
