//! memory-qmd: the `qmd` engine. Search is handed to the QMD command-line tool (npm `@tobilu/qmd`, run on
//! Node 22 as a subprocess), with a self-contained QMD home per agent. See `docs/qmd.md`.
//!
//! - [`QmdFactory`] (registered as `qmd`) opens a [`QmdBackend`].
//! - Every `qmd` process runs in its own process group with a timeout; the group is killed on timeout.
//! - Failures are typed ([`memory_core::ErrorKind::Unavailable`] for a missing binary, crash, timeout or
//!   failing exit; `Internal` for unparsable output), so `memory_core::fallback::FallbackManager` can answer
//!   from the builtin engine.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod backend;
pub mod collections;
pub mod config;
pub mod locate;
pub mod parse;
pub mod process;
pub mod query;
pub mod sessions;

pub use backend::{QmdBackend, QmdFactory, QmdOptions};
pub use config::{QmdConfig, SearchMode};
