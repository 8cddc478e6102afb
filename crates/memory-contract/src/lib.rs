//! memory-contract: what a memory engine implements and what a host calls, with nothing of any engine in it.
//!
//! - [`MemoryBackend`]: the one trait engines implement, answering `memory_search` ([`SearchRequest`] ->
//!   [`SearchResponse`]) and `memory_get` ([`GetRequest`] -> [`GetResponse`]), with [`MemoryError`] for what
//!   goes wrong.
//! - [`registry`]: maps `memory.backend` to engine factories; an engine opens with an [`registry::OpenContext`]:
//!   the [`config`] model (OpenClaw's `memory.*` keys, checked once), the agent's [`space`] (workspace,
//!   transcripts, every state file's name), an [`embedding`] provider and a [`rerank`]er when configured.
//! - [`citation`]: how a result cites its lines; [`explanation`]: what `explain` answers; [`changes`]: changed
//!   files an engine shares with a watching host;
//!   [`dates`]: days and the clock as every part reads them; [`bounded`] and [`paths`]: bounded reads of
//!   user files and the folders state lives in.
//!
//! memory-rs-core builds the shared indexed engine (discovery, chunking, ranking, sync) on this contract and
//! re-exports its modules under the same names.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead;
// tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(missing_docs)]

pub mod backend;
pub mod bounded;
pub mod changes;
pub mod citation;
pub mod config;
pub mod dates;
pub mod embedding;
pub mod error;
pub mod explanation;
pub mod paths;
pub mod registry;
pub mod rerank;
pub mod space;
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
