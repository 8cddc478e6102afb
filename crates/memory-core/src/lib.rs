//! memory-core: what every memory engine shares.
//!
//! - [`backend::MemoryBackend`]: the one trait engines implement; [`registry`] maps `memory.backend` to engines.
//! - [`store::ChunkStore`]: for engines that store chunks; [`indexed::IndexedBackend`] then provides discovery,
//!   incremental sync, embedding and the ranking pipeline, so such engines rank alike.
//! - [`discovery`], [`chunking`], [`analysis`], [`ranking`], [`access`] (memory_get safety), [`config`].

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod access;
pub mod analysis;
pub mod append;
pub mod backend;
pub mod bounded;
pub mod chunking;
pub mod config;
pub mod discovery;
pub mod embedding;
pub mod error;
pub mod explanation;
pub mod fallback;
pub mod file_lock;
pub mod identity;
pub mod indexed;
pub mod locks;
pub mod paths;
pub mod ranking;
pub mod registry;
pub mod rerank;
pub mod sessions;
pub mod space;
pub mod store;
pub mod time;
pub mod types;

pub use backend::MemoryBackend;
pub use config::Config;
pub use error::{ErrorKind, MemoryError, Result};
pub use types::*;

/// Current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// sha256 of bytes, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// An agent id (or any user-given name) made safe as one path component: letters, digits, `-` and `_` are kept,
/// everything else (`/`, `.`, spaces...) becomes `_`, so `../x` can never leave the folder it is joined to. An id
/// that had to change also gets the first 8 hex digits of its sha256 (`a/b` -> `a_b-<hash>`), so two ids never
/// share a folder (`a/b` and `a_b` did); an id that is already safe is kept as it is, so existing state keeps its
/// names. An empty id is `default`.
pub fn sanitize_id(id: &str) -> String {
    if id.is_empty() {
        return "default".into();
    }
    let s = path_safe_chars(id);
    if s == id {
        s
    } else {
        format!("{s}-{}", &sha256_hex(id.as_bytes())[..8])
    }
}

/// `s` with every character but letters, digits, `-` and `_` replaced by `_` (no hash: see [`sanitize_id`]).
pub(crate) fn path_safe_chars(s: &str) -> String {
    s.chars().map(|c| if c.is_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod lib_tests {
    #[test]
    fn sanitized_ids_stay_one_path_component() {
        for id in ["main", "../../etc", "a/b", "..", "", "会议", "x y", "C:\\x"] {
            let s = super::sanitize_id(id);
            assert!(!s.is_empty() && !s.contains(['/', '\\', '.', ' ']), "{id:?} -> {s:?}");
        }
        assert_eq!(super::sanitize_id("research-bot_2"), "research-bot_2");
        assert_eq!(super::sanitize_id("会议"), "会议");
        assert_eq!(super::sanitize_id(""), "default");
    }

    #[test]
    fn ids_that_differ_never_share_a_folder() {
        // (An empty id is the default agent: "" and "default" are one on purpose.)
        let ids = ["a/b", "a_b", "a.b", "a b", "a\\b", "a__b", "../a_b", "default", "a/b/"];
        let mut seen = std::collections::HashMap::new();
        for id in ids {
            let s = super::sanitize_id(id);
            if let Some(other) = seen.insert(s.clone(), id) {
                panic!("{id:?} and {other:?} both become {s:?}");
            }
        }
        assert!(super::sanitize_id("a/b").starts_with("a_b-"));
    }
}
