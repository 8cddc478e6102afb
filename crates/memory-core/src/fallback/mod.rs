//! [`FallbackManager`]: wraps a primary engine and answers from a fallback engine (normally builtin) while the
//! primary fails, then returns to the primary once it answers again.
//!
//! - Failures that fall back: the primary is unavailable (missing binary, crash, timeout, failing exit), returns
//!   unparsable output (`Internal`), an unreadable index or an I/O error. A refused path, invalid input or a missing
//!   file are the caller's business and are returned as they are.
//! - While failing, the primary is not called until a back-off has passed (exponential, capped); the next search
//!   (or sync) after that probes it. If a search answers, the manager returns to it; if not, the back-off grows.
//!   `get` reads memory files and always asks the primary first; its success does not change the health state.
//! - Nothing is hidden: search responses answered by the fallback carry a warning, and `status` reports
//!   `fallback: {from, reason, since}`.
//! - The fallback may be given open, or opened lazily on the first failure (then synced once so it can answer).
//! - Once the back-off has passed, exactly one call probes the primary; calls meanwhile are answered by the
//!   fallback at once, so a dead primary is never stampeded. Each primary call is bounded by
//!   [`FallbackPolicy::call_timeout`].
//! - With [`FallbackPolicy::state_file`] the failure survives the process: a one-shot CLI run after a failed one
//!   starts in fallback mode until the back-off has passed, instead of paying the primary's timeout again.
//!
//! The layers, each in its own module: `open_on_demand` (engines opened on first use), `timeout` (the bound on a
//! primary call), `health` (the failure state, back-off, single probe and state file) and `manager` (the
//! delegation of every trait method to the primary or the fallback).

mod health;
mod manager;
mod open_on_demand;
mod timeout;

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{ErrorKind, MemoryError};

pub use manager::FallbackManager;
pub use open_on_demand::{FactoryOpener, Fallback, FallbackOpener, OpenOnDemand};

/// When to probe a failing primary again.
#[derive(Debug, Clone)]
pub struct FallbackPolicy {
    /// Wait after the first failure before probing the primary again.
    pub initial_backoff: Duration,
    /// The wait never grows beyond this.
    pub max_backoff: Duration,
    /// Each failed probe multiplies the wait by this.
    pub multiplier: f64,
    /// Keep an open fallback's index fresh on `sync` even while the primary works.
    pub sync_fallback: bool,
    /// A primary search, get or status that takes longer than this counts as a failure and is answered by the
    /// fallback (syncs are not bounded: a first index may take long). `None`: no bound.
    pub call_timeout: Option<Duration>,
    /// Where the failure state is kept between processes (`None`: in memory only).
    pub state_file: Option<PathBuf>,
}

impl Default for FallbackPolicy {
    fn default() -> Self {
        FallbackPolicy {
            initial_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(10 * 60),
            multiplier: 2.0,
            sync_fallback: true,
            call_timeout: Some(Duration::from_secs(10)),
            state_file: None,
        }
    }
}

/// True for errors that mean "this engine cannot answer now", as opposed to "this request is wrong".
pub fn falls_back(e: &MemoryError) -> bool {
    matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Internal | ErrorKind::CorruptIndex | ErrorKind::Io)
}

#[cfg(test)]
mod fakes;
#[cfg(test)]
mod tests;
