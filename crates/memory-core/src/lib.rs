//! memory-core: the shared indexed engine, built on the contract (`memory-rs-contract`, whose modules are
//! re-exported here under the same names, so `memory_core::types` is `memory_contract::types`).
//!
//! - [`store::ChunkStore`]: for engines that store chunks; [`indexed::IndexedBackend`] then provides discovery,
//!   incremental sync, embedding and the ranking pipeline, so such engines rank alike.
//! - [`discovery`], [`chunking`], [`analysis`], [`ranking`], [`time`], [`sessions`], [`access`] (memory_get
//!   safety), [`append`], [`fallback`] (an engine that stands in for another).
//! - From the contract: [`backend::MemoryBackend`], [`registry`], [`config`], [`space`], [`types`], [`error`].

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod access;
pub mod analysis;
pub mod append;
pub mod chunking;
pub mod discovery;
pub mod fallback;
pub mod file_lock;
pub mod identity;
pub mod indexed;
pub mod locks;
pub mod ranking;
pub mod sessions;
pub mod store;
pub mod time;

pub use memory_contract::types::*;
pub use memory_contract::{
    backend, bounded, changes, citation, config, dates, embedding, error, explanation, now_ms, paths, registry, rerank, sanitize_id, sha256_hex,
    space, types,
};
pub use memory_contract::{Config, ErrorKind, MemoryBackend, MemoryError, Result};
